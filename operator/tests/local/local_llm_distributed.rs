//! A distributed LLM sweep run locally: `workers: 3` runs three load generator agents
//! against the simulator, which share every concurrency level, start each iteration at
//! the same barrier, report their own histograms, and are merged by the local backend
//! through the same code path the controller uses.

use crate::local_support;

use local_support::{records, run_local_sweep, scratch};
use perfsweep_benchmarks::kinds::llm::histogram;
use serde_json::Value;

const SWEEP: &str = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-llm-workers
spec:
  endpoint:
    simulator:
      ttftMillis: 30
      itlMillis: 4
      port: 18432
  trafficScenarios: ["D(32,6)"]
  numConcurrency: [2, 3, 7]
  maxRequestsPerIteration: 20
  workers: 3
  serviceMetadata:
    engine: vLLM
    version: "0.6.3"
    gpuType: H100
    gpuCount: 1
"#;

/// The raw output of each worker, from the evidence the record points to.
fn worker_outputs(evidence: &str) -> Vec<Value> {
    evidence
        .split("==> ")
        .skip(1)
        .map(|section| {
            section
                .lines()
                .rev()
                .find(|line| line.starts_with('{'))
                .map(|line| serde_json::from_str(line).expect("a worker's JSON result"))
                .expect("each worker printed its result")
        })
        .collect()
}

#[test]
fn three_local_workers_share_the_load_and_merge_exactly() {
    let dir = scratch("llm-workers");
    let (out, table) = run_local_sweep(&dir, "llm-workers", SWEEP);
    let records = records(&out);
    let record = records.first().expect("one record");
    assert_eq!(
        record["outcome"]["status"], "succeeded",
        "{record}\n{table}"
    );
    let result = &record["outcome"]["result"];
    assert_eq!(result["workers"], 3);
    assert_eq!(result["serviceMetadata"]["engine"], "vLLM");
    assert_eq!(result["serviceMetadata"]["gpuCount"], 1);

    let evidence_path = out.join(record["evidence"]["path"].as_str().expect("evidence"));
    let evidence = std::fs::read_to_string(&evidence_path).expect("evidence file");
    let workers = worker_outputs(&evidence);
    assert_eq!(workers.len(), 3, "{evidence}");

    let iterations = result["iterations"].as_array().expect("iterations");
    assert_eq!(iterations.len(), 3);
    for (index, (iteration, total)) in iterations.iter().zip([2u64, 3, 7]).enumerate() {
        // Every level is split among the workers and adds up again.
        let shares: Vec<u64> = workers
            .iter()
            .map(|w| {
                w["iterations"][index]["concurrency"]
                    .as_u64()
                    .expect("share")
            })
            .collect();
        assert_eq!(shares.iter().sum::<u64>(), total, "{shares:?}");
        assert_eq!(iteration["concurrency"], total);
        // The 20 measured requests were split too, all served.
        assert_eq!(iteration["requests"], 20, "{iteration}");
        assert_eq!(iteration["errors"], 0);
        // Percentiles of the merged histogram, computed here from the workers' own.
        let merged = histogram::merge(workers.iter().map(|w| {
            w["iterations"][index]["raw"]["histograms"]["ttft"]
                .as_str()
                .expect("each worker reports its TTFT histogram")
        }))
        .expect("histograms merge");
        let expected = histogram::distribution(&merged);
        let ttft = &iteration["ttftMillis"];
        assert_eq!(ttft["count"], 20);
        assert_eq!(ttft["p99"].as_f64(), Some(expected.p99), "{ttft}");
        assert_eq!(ttft["p50"].as_f64(), Some(expected.p50), "{ttft}");
        let mean = ttft["mean"].as_f64().expect("mean");
        // The simulator's 30 ms, plus what the machine adds: up to how late it woke the
        // workers in this iteration (their own probes), twice over on a busy machine.
        let late = crate::local_support::late_wakeups_ms(iteration);
        assert!(
            (30.0..36.0 + 2.0 * late).contains(&mean),
            "TTFT mean {mean} ms (wakeups up to {late} ms late)"
        );
        // Every worker watched its own CPU.
        let clients: Vec<u64> = iteration["clients"]
            .as_array()
            .expect("clients")
            .iter()
            .filter_map(|c| c["worker"].as_u64())
            .collect();
        assert_eq!(clients, [0, 1, 2]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
