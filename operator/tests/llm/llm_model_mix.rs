//! A weighted mix of model names (LoRA adapters) in one run: each request draws its
//! model by weight, and the iteration reports its figures per model — in process
//! against the simulator, and in a local run.

use crate::local_support;

use local_support::{records, run_local_sweep, scratch};
use perfsweep_llm::loadgen::{self, LoadgenArgs};
use perfsweep_llm::sim::{SimArgs, Simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_split_by_weight_and_each_model_has_its_figures() {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 3.0;
    args.itl_ms = 1.0;
    args.models = vec!["base".into(), "lora-a".into(), "lora-b".into()];
    let sim = Simulator::start(args).await.expect("simulator starts");
    let mut run = LoadgenArgs::new(&format!("http://{}", sim.address), "base");
    run.progress = false;
    run.model_mix = vec!["base=2".into(), "lora-a=1".into(), "lora-b=1".into()];
    run.scenarios = vec!["D(8,4)".into()];
    run.concurrency = vec![4];
    run.max_requests = Some(400);
    let report = loadgen::execute(&run).await.expect("run");
    let iteration = &report.iterations[0];
    assert_eq!(iteration.requests, 400);
    let counts: Vec<(String, u64)> = iteration
        .per_model
        .iter()
        .map(|(name, part)| (name.clone(), part.requests))
        .collect();
    assert_eq!(counts.iter().map(|c| c.1).sum::<u64>(), 400, "{counts:?}");
    let of = |name: &str| iteration.per_model[name].requests;
    assert!((160..240).contains(&of("base")), "{counts:?}");
    assert!((70..130).contains(&of("lora-a")), "{counts:?}");
    assert!((70..130).contains(&of("lora-b")), "{counts:?}");
    // The simulator saw the same split.
    let stats = sim.stats();
    let seen = stats.records.iter().filter(|r| r.model == "lora-a").count() as u64;
    assert!(
        seen >= of("lora-a"),
        "{seen} lora-a requests at the simulator"
    );
    assert!(iteration.per_model["lora-b"].ttft_millis.count > 0);
}

#[test]
fn a_local_run_with_a_model_mix_reports_each_model() {
    let dir = scratch("llm-model-mix");
    let sweep = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-mix
spec:
  endpoint:
    simulator:
      ttftMillis: 2
      itlMillis: 1
      port: 18447
  modelMix:
    - {name: perfsweep-sim, weight: 1}
    - {name: lora-sql, weight: 1}
  trafficScenarios: ["D(8,4)"]
  numConcurrency: [2]
  maxRequestsPerIteration: 40
"#;
    let (out, _) = run_local_sweep(&dir, "model-mix", sweep);
    let records = records(&out);
    let per_model = &records[0]["outcome"]["result"]["iterations"][0]["perModel"];
    let requests = |name: &str| per_model[name]["requests"].as_u64().unwrap_or(0);
    assert!(requests("lora-sql") > 5, "{per_model}");
    assert!(requests("perfsweep-sim") > 5, "{per_model}");
    assert_eq!(requests("lora-sql") + requests("perfsweep-sim"), 40);
    let _ = std::fs::remove_dir_all(&dir);
}
