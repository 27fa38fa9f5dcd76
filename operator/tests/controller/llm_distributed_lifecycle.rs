//! A distributed LLMInference (`workers: 3`) through the controller against the API
//! double: three load generator pods in one gang, each reporting its own share with its
//! raw HDR histograms; the controller waits for all three, and the result in the status
//! is the exact merge — counts summed, percentiles from the union of every worker's
//! samples, computed here independently of perfsweep's merge.

use crate::support;

use hdrhistogram::Histogram;
use kube::Api;
use kube::api::PostParams;
use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::llm::LLMInference;
use perfsweep_benchmarks::kinds::llm::distribute::summarize;
use perfsweep_benchmarks::kinds::llm::histogram;
use perfsweep_benchmarks::kinds::llm::result::{
    ClientLoad, FORMAT, LLMInferenceResult, RawHistograms, RawIteration,
};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{AGENT, now, patch_pod_status, pod_status};
use support::{
    LLMS, NS, Operator, WAIT, double_with_crds, object_status, wait_for_object_status, wait_until,
};

const NAME: &str = "dist";
const WORKERS: u32 = 3;
const LEVELS: [u32; 2] = [4, 9];

fn pod(index: u32) -> String {
    format!("{NAME}-loadgen-{index}")
}

fn set_pod(double: &ApiDouble, index: u32, state: Value, phase: &str) {
    let mut status = pod_status(phase, state);
    status["containerStatuses"][0]["ready"] = (phase == "Running").into();
    patch_pod_status(double, &pod(index), status);
}

fn run_pod(double: &ApiDouble, index: u32) {
    set_pod(
        double,
        index,
        json!({"running": {"startedAt": now()}}),
        "Running",
    );
}

fn finish_pod(double: &ApiDouble, index: u32) {
    let state = json!({"terminated": {
        "exitCode": 0, "reason": "Completed", "message": "done",
        "startedAt": now(), "finishedAt": now(),
    }});
    set_pod(double, index, state, "Succeeded");
}

/// The samples (µs) worker `worker` measured in iteration `iteration`: deterministic,
/// different per worker, with a slow tail on worker 2.
fn samples(worker: u32, iteration: usize) -> Vec<u64> {
    let mut state = 0x9E37_79B9u64 ^ (u64::from(worker) << 16) ^ iteration as u64;
    let count = 30 + 7 * worker as usize + 5 * iteration;
    (0..count)
        .map(|i| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let base = 40_000 + (state >> 40) % 20_000;
            if worker == 2 && i % 10 == 0 {
                base * 8
            } else {
                base
            }
        })
        .collect()
}

fn encoded(values: &[u64]) -> String {
    let mut h = histogram::empty();
    for v in values {
        h.record(*v).expect("in range");
    }
    histogram::encode(&h).expect("encodes")
}

/// What worker `worker`'s load generator printed: its share of every level.
fn worker_output(worker: u32) -> String {
    let iterations = LEVELS
        .iter()
        .enumerate()
        .map(|(index, &level)| {
            let ttft = samples(worker, index);
            let e2e: Vec<u64> = ttft.iter().map(|t| t + 70_000).collect();
            let errors = u64::from(worker == 1);
            let raw = RawIteration {
                histograms: RawHistograms {
                    ttft: encoded(&ttft),
                    ttst: encoded(&[]),
                    itl: encoded(&[]),
                    tpot: encoded(&[]),
                    e2e: encoded(&e2e),
                    ttft_from_send: None,
                    schedule_lag: None,
                },
                input_tokens: 100 * ttft.len() as u64,
                output_tokens: 16 * ttft.len() as u64,
                user_rate_sum: 0.0,
                user_rate_count: 0,
                meeting_slo: ttft.len() as u64,
                estimated: 0,
                first_sent_seconds: Some(0.001 * f64::from(worker)),
                last_done_seconds: Some(2.0 + 0.1 * f64::from(worker)),
                client_delay: None,
                cached_input_tokens: None,
            };
            let errors_by_kind = if errors > 0 {
                [("http_503".to_owned(), errors)].into_iter().collect()
            } else {
                std::collections::BTreeMap::default()
            };
            let share = level / WORKERS + u32::from(worker < level % WORKERS);
            let mut iteration = summarize(
                &raw,
                ttft.len() as u64,
                &errors_by_kind,
                "D(100,16)".into(),
                share,
                false,
            )
            .expect("summarizes");
            iteration.raw = Some(raw);
            iteration.clients = vec![ClientLoad {
                worker,
                cpu_percent: if worker == 2 && index == 1 {
                    97.0
                } else {
                    20.0
                },
                cores: 2.0,
                saturated: worker == 2 && index == 1,
                ..ClientLoad::default()
            }];
            iteration
        })
        .collect();
    let result = LLMInferenceResult {
        format: FORMAT.into(),
        model: "llama".into(),
        url: "http://vllm:8000".into(),
        api: "chat".into(),
        streaming: true,
        iterations,
        max_error_rate_percent: Some(5.0),
        workers: WORKERS,
        worker: Some(worker),
        ..LLMInferenceResult::default()
    };
    serde_json::to_string(&result).expect("serializes") + "\n"
}

/// The agent log of worker `worker`: chatter, then the report line the agent prints.
fn agent_log(worker: u32) -> String {
    let raw = worker_output(worker);
    let parsed = registry::lookup("LLMInference")
        .expect("registered")
        .parse(&raw)
        .expect("a worker's share parses");
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "LLMInference".into(),
        role: "loadgen".into(),
        index: worker,
        outcome: Outcome::Succeeded {
            result: Some(parsed.result),
            summary: Some(parsed.summary),
        },
        command: vec!["perfsweep".into(), "loadgen".into()],
        started_at: "2026-11-22T10:00:00Z".into(),
        finished_at: format!("2026-11-22T10:00:1{worker}Z"),
        host: Some(format!("node-{worker}")),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    };
    format!(
        "perfsweep agent: running perfsweep loadgen\n{}\n",
        report.to_line()
    )
}

/// The merge computed here: every sample of every worker in one histogram.
fn union(iteration: usize) -> Histogram<u64> {
    let mut all = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
    for worker in 0..WORKERS {
        for v in samples(worker, iteration) {
            all.record(v).expect("in range");
        }
    }
    all
}

#[tokio::test]
async fn three_workers_are_one_gang_and_their_results_merge_exactly() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let object: LLMInference = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "trafficScenarios": ["D(100,16)"],
            "numConcurrency": LEVELS,
            "workers": WORKERS,
            "serviceMetadata": {"engine": "vLLM", "gpuType": "H100", "gpuCount": 8},
            "podOverride": {
                "image": "example.com/loadgen:1",
                "resources": {"requests": {"cpu": "4"}},
                "nodeSelector": {"pool": "load"},
            },
        },
    }))
    .expect("a valid LLMInference");
    Api::<LLMInference>::namespaced(double.client(), NS)
        .create(&PostParams::default(), &object)
        .await
        .expect("created");

    // Three load generator pods, in one PodGroup that needs all three.
    let pods = wait_until(WAIT, format_args!("the 3 loadgen pods"), || {
        let pods: Vec<Value> = (0..WORKERS)
            .filter_map(|i| double.get(&Gvr::PODS, Some(NS), &pod(i)))
            .collect();
        if pods.len() == WORKERS as usize {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await;
    let group = wait_until(WAIT, format_args!("the PodGroup"), || {
        double
            .get(&Gvr::PODGROUPS, Some(NS), NAME)
            .ok_or_else(|| "no PodGroup yet".to_owned())
    })
    .await;
    assert_eq!(group["spec"]["minMember"], WORKERS, "{group}");
    for (index, pod) in pods.iter().enumerate() {
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["image"], "example.com/loadgen:1");
        assert_eq!(container["resources"]["requests"]["cpu"], "4");
        assert_eq!(pod["spec"]["nodeSelector"]["pool"], "load");
        let plan: Value = serde_json::from_str(
            container["env"]
                .as_array()
                .and_then(|env| env.iter().find(|e| e["name"] == "PERFSWEEP_PLAN"))
                .and_then(|e| e["value"].as_str())
                .expect("the plan"),
        )
        .expect("plan JSON");
        let args: Vec<&str> = plan["roles"][0]["command"]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(|a| a["literal"].as_str())
            .collect();
        let args = args.join(" ");
        assert!(
            args.contains("--workers 3 --worker {index} --sync {control:loadgen:0}"),
            "pod {index}: {args}"
        );
    }

    for index in 0..WORKERS {
        double.set_pod_log(NS, &pod(index), AGENT, &agent_log(index));
        run_pod(&double, index);
    }
    wait_for_object_status(&double, &LLMS, NAME, "phase Running", |s| {
        s["phase"] == "Running"
    })
    .await;

    // Replica 0 ends first; the others are still sending: no result yet.
    finish_pod(&double, 0);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let status = object_status(&double, &LLMS, NAME);
    assert_eq!(
        status["phase"], "Running",
        "read before all workers ended: {status}"
    );

    finish_pod(&double, 1);
    finish_pod(&double, 2);
    let status = wait_for_object_status(&double, &LLMS, NAME, "phase Succeeded", |s| {
        s["phase"] == "Succeeded"
    })
    .await;
    let result = &status["result"];
    assert_eq!(result["workers"], WORKERS);
    assert!(result.get("worker").is_none(), "{result}");
    assert!(
        status["summary"]
            .as_str()
            .is_some_and(|s| s.contains("3 workers")),
        "{status}"
    );
    let iterations = result["iterations"].as_array().expect("iterations");
    assert_eq!(iterations.len(), LEVELS.len());
    for (index, (iteration, level)) in iterations.iter().zip(LEVELS).enumerate() {
        let all = union(index);
        let counts: u64 = (0..WORKERS).map(|w| samples(w, index).len() as u64).sum();
        assert_eq!(iteration["concurrency"], level);
        assert_eq!(iteration["requests"], counts, "{iteration}");
        assert_eq!(iteration["errors"], 1);
        assert_eq!(iteration["errorsByKind"]["http_503"], 1);
        let ttft = &iteration["ttftMillis"];
        assert_eq!(ttft["count"], all.len());
        for (field, quantile) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)] {
            let expected = all.value_at_quantile(quantile) as f64 / 1000.0;
            assert_eq!(ttft[field].as_f64(), Some(expected), "{field}: {ttft}");
        }
        assert_eq!(ttft["max"].as_f64(), Some(all.max() as f64 / 1000.0));
        assert!((ttft["mean"].as_f64().expect("mean") - all.mean() / 1000.0).abs() < 1e-9);
        // Not the average of the workers' p99s: worker 2's slow tail dominates the union.
        let averaged: f64 = (0..WORKERS)
            .map(|w| {
                let mut h = Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("b");
                for v in samples(w, index) {
                    h.record(v).expect("in range");
                }
                h.value_at_quantile(0.99) as f64 / 1000.0
            })
            .sum::<f64>()
            / f64::from(WORKERS);
        assert_ne!(ttft["p99"].as_f64(), Some(averaged));
        // Throughput over the span from the first send to the last completion.
        let seconds = 2.2;
        let tokens = 16.0 * counts as f64;
        let measured = iteration["outputTokensPerSecond"].as_f64().expect("tok/s");
        assert!((measured - tokens / seconds).abs() < 1e-6, "{measured}");
        assert!(
            iteration.get("raw").is_none(),
            "merged results carry no raw data"
        );
        let workers: Vec<u64> = iteration["clients"]
            .as_array()
            .expect("clients")
            .iter()
            .filter_map(|c| c["worker"].as_u64())
            .collect();
        assert_eq!(workers, [0, 1, 2]);
    }
    assert_eq!(
        result["saturatedClients"],
        json!([{"iteration": 1, "worker": 2, "cpuPercent": 97.0, "lateWakeupPercent": 0.0}])
    );
    // 2 errors of the whole, under the 5% limit although worker 1 alone is at ~2.5%.
    assert!(result["errorRatePercent"].as_f64().is_some_and(|r| r < 5.0));
}

/// This process's resident memory now, in bytes (Linux).
fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:"))
                .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

/// An LLMInference `name` of `workers` load generators whose result logs each carry a
/// report with `raw_bytes` of raw output (never held in memory by the double), created
/// on `double` with its pods made and their logs set; the pods still run.
async fn huge_reports(double: &ApiDouble, name: &str, workers: u32, raw_bytes: u64) {
    let object: LLMInference = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "trafficScenarios": ["D(100,16)"],
            "numConcurrency": [workers],
            "workers": workers,
        },
    }))
    .expect("a valid LLMInference");
    Api::<LLMInference>::namespaced(double.client(), NS)
        .create(&PostParams::default(), &object)
        .await
        .expect("created");
    let flood_pod = |index: u32| format!("{name}-loadgen-{index}");
    wait_until(WAIT, format_args!("the {workers} loadgen pods"), || {
        let made = (0..workers)
            .filter(|i| double.get(&Gvr::PODS, Some(NS), &flood_pod(*i)).is_some())
            .count();
        if made == workers as usize {
            Ok(())
        } else {
            Err(format!("{made} pods"))
        }
    })
    .await;
    let raw_sha = sha256_hex(&vec![b'x'; usize::try_from(raw_bytes).expect("fits")]);
    let parsed = registry::lookup("LLMInference")
        .expect("registered")
        .parse(&worker_output(0))
        .expect("a worker's share parses");
    for index in 0..workers {
        let report = AgentReport {
            tool_version: None,
            network: None,
            kind: "LLMInference".into(),
            role: "loadgen".into(),
            index,
            outcome: Outcome::Succeeded {
                result: Some(parsed.result.clone()),
                summary: Some(parsed.summary.clone()),
            },
            command: vec!["perfsweep".into(), "loadgen".into()],
            started_at: "2026-11-22T10:00:00Z".into(),
            finished_at: "2026-11-22T10:00:10Z".into(),
            host: Some(format!("node-{index}")),
            raw_output_sha256: Some(raw_sha.clone()),
            raw_output: Some("RAW-OUTPUT-HERE".into()),
        };
        let line = report.to_line();
        let (head, tail) = line
            .split_once("RAW-OUTPUT-HERE")
            .expect("the placeholder in the report line");
        double.set_long_line_pod_log(
            NS,
            &flood_pod(index),
            AGENT,
            &format!("perfsweep agent: running perfsweep loadgen\n{head}"),
            raw_bytes,
            &format!("{tail}\n"),
        );
    }
}

/// Marks the `workers` load generator pods of `name` Succeeded; its final status.
async fn finish_pods(double: &ApiDouble, name: &str, workers: u32) -> Value {
    for index in 0..workers {
        let done = json!({"terminated": {
            "exitCode": 0, "reason": "Completed", "message": "done",
            "startedAt": now(), "finishedAt": now(),
        }});
        let mut status = pod_status("Succeeded", done);
        status["containerStatuses"][0]["ready"] = false.into();
        patch_pod_status(double, &format!("{name}-loadgen-{index}"), status);
    }
    wait_for_object_status(double, &LLMS, name, "phase Failed", |s| {
        s["phase"] == "Failed"
    })
    .await
}

/// Issue 35, seen on the real cluster: a kubelet rotates a container's log past its
/// containerLogMaxSize (10 MiB by default) and serves only the current file, so a report
/// line of 24 MiB is read without its start. The benchmark fails saying so, not only
/// that the agent did not finish.
#[tokio::test]
async fn a_report_longer_than_the_kubelets_log_file_fails_naming_the_limit() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    huge_reports(&double, "rotated", 2, 24 * 1024 * 1024).await;
    let status = finish_pods(&double, "rotated", 2).await;
    let failed = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Failed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], "ResultUnparseable", "{status}");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("containerLogMaxSize")),
        "{failed}"
    );
}

/// Issue 34, finding 3: every result replica's log was read into memory at once, so
/// `workers: 256` with large reports could ask for gigabytes against the chart's 256
/// MiB limit. 48 load generators each reporting 8 MiB of raw output (384 MiB in all; each
/// report within what a kubelet keeps of a log): the benchmark fails naming the
/// operator's budget, and this process (operator and double; the double never holds the
/// logs) grows by far less than the logs' size.
#[tokio::test]
async fn many_workers_with_huge_reports_fail_clearly_within_the_operators_memory() {
    const FLOOD: &str = "flood";
    const FLOOD_WORKERS: u32 = 48;
    const RAW_BYTES: u64 = 8 * 1024 * 1024;
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    huge_reports(&double, FLOOD, FLOOD_WORKERS, RAW_BYTES).await;
    let baseline = resident_bytes();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(baseline));
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(resident_bytes(), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    let status = finish_pods(&double, FLOOD, FLOOD_WORKERS).await;
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    sampler.join().expect("the sampler");
    let grown = peak
        .load(std::sync::atomic::Ordering::Relaxed)
        .saturating_sub(baseline);
    let logs = u64::from(FLOOD_WORKERS) * RAW_BYTES;
    println!(
        "{FLOOD_WORKERS} result logs of {} MiB ({} MiB in all): resident memory grew by {} MiB while the operator read them",
        RAW_BYTES >> 20,
        logs >> 20,
        grown >> 20
    );
    let failed = status["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Failed"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], "ResultUnreadable", "{status}");
    let message = failed["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("48 pods logged more than the 32 MiB"),
        "the failure names the budget: {message}"
    );
    assert!(
        grown < logs / 4,
        "grew by {} MiB reading {} MiB of logs",
        grown >> 20,
        logs >> 20
    );
}
