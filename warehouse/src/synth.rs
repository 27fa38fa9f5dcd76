//! Generated result records of realistic shape, for the tests and the bench: sweeps
//! (one run id each) of every kind — LLM serving with scenario × concurrency iterations,
//! a node-pair IPerf fleet, RDMA and MPI pairs, fio on single hosts, PyTorch and OpenFOAM
//! scale points — three repetitions per case (one per fleet pair), with their evidence
//! and telemetry slices. Deterministic for a seed; a node or a kind can be slowed down to
//! make something to find.

use perfsweep_benchmarks::results::record::{
    BenchmarkIdentity, Environment, Evidence, RecordOutcome, ResultRecord, SCHEMA_VERSION,
};
use serde_json::{Map, Value, json};

use crate::source::{SliceBenchmark, TELEMETRY_SCHEMA_VERSION, TelemetrySlice};

/// splitmix64: small, deterministic, good enough for noise.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `value` with ±`spread` relative noise.
    pub fn noisy(&mut self, value: f64, spread: f64) -> f64 {
        value * (1.0 + spread * (2.0 * self.unit() - 1.0))
    }
}

/// One sweep to generate.
#[derive(Clone, Debug)]
pub struct Sweep {
    pub run_id: String,
    /// RFC 3339 start of the first run.
    pub start: String,
    pub seed: u64,
    /// Nodes of the fleet (node-pair IPerf over all pairs).
    pub fleet_nodes: usize,
    /// At most this many runs (the case list is cut), `None` for all.
    pub limit: Option<usize>,
    /// This node's results (any run it took part in) are this factor worse.
    pub slow_node: Option<(String, f64)>,
    /// This kind's results are this factor worse.
    pub slow_kind: Option<(String, f64)>,
    /// Runs with telemetry slices (one per host of the run).
    pub telemetry: bool,
}

impl Sweep {
    pub fn new(run_id: &str, start: &str, seed: u64) -> Self {
        Self {
            run_id: run_id.into(),
            start: start.into(),
            seed,
            fleet_nodes: 6,
            limit: None,
            slow_node: None,
            slow_kind: None,
            telemetry: true,
        }
    }
}

/// A generated run: its record, its evidence text and its telemetry slices.
#[derive(Clone, Debug)]
pub struct Generated {
    pub record: ResultRecord,
    pub evidence: String,
    pub slices: Vec<TelemetrySlice>,
}

/// The node names of a fleet.
pub fn node(index: usize) -> String {
    format!("node-{index:03}")
}

/// One case of a sweep: kind, set, permutation, hosts, repetitions.
struct Case {
    kind: &'static str,
    set: &'static str,
    permutation: Map<String, Value>,
    hosts: Vec<String>,
    repetitions: u32,
}

fn permutation(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn pair(role_a: &str, role_b: &str, a: &str, b: &str) -> Map<String, Value> {
    permutation(json!({
        format!("placement.{role_a}.nodes"): [a],
        format!("placement.{role_b}.nodes"): [b],
    }))
}

fn cases(fleet_nodes: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    for model in ["llama-3-8b", "mistral-7b"] {
        for dataset in ["chat", "summarize"] {
            cases.push(Case {
                kind: "LLMInference",
                set: "serving",
                permutation: permutation(json!({"endpoint.modelName": model, "dataset": dataset})),
                hosts: vec![node(0)],
                repetitions: 3,
            });
        }
    }
    for a in 0..fleet_nodes {
        for b in a + 1..fleet_nodes {
            cases.push(Case {
                kind: "IPerf",
                set: "fleet",
                permutation: pair("server", "client", &node(a), &node(b)),
                hosts: vec![node(a), node(b)],
                repetitions: 1,
            });
        }
    }
    for (i, rw) in ["randread", "read"].into_iter().enumerate() {
        for bs in ["4k", "1m"] {
            cases.push(Case {
                kind: "Fio",
                set: "storage",
                permutation: permutation(json!({"rw": rw, "bs": bs})),
                hosts: vec![node(i % fleet_nodes.max(1))],
                repetitions: 3,
            });
        }
    }
    for i in 0..fleet_nodes.min(4) {
        let (a, b) = (node(i), node((i + 1) % fleet_nodes.max(2)));
        cases.push(Case {
            kind: "RDMABandwidth",
            set: "rdma",
            permutation: pair("server", "client", &a, &b),
            hosts: vec![a.clone(), b.clone()],
            repetitions: 3,
        });
        cases.push(Case {
            kind: "MPIPingPong",
            set: "mpi",
            permutation: pair("launcher", "worker", &a, &b),
            hosts: vec![a, b],
            repetitions: 3,
        });
    }
    for model in ["resnet50", "bert-base"] {
        for batch in [32, 64, 128] {
            cases.push(Case {
                kind: "PyTorch",
                set: "training",
                permutation: permutation(json!({"model": model, "inputBatchSize": batch})),
                hosts: vec![node(1)],
                repetitions: 3,
            });
        }
    }
    for procs in [1, 2, 4, 8] {
        cases.push(Case {
            kind: "OpenFOAM",
            set: "hpc",
            permutation: permutation(json!({"numProcs": procs})),
            hosts: vec![node(2)],
            repetitions: 3,
        });
    }
    cases
}

/// A metric record entry.
fn metric(name: &str, value: f64, higher: bool) -> Value {
    json!({"name": name, "value": value, "better": if higher { "higher" } else { "lower" }})
}

/// The spec a case ran: the permutation's values set into a small base spec.
fn spec_of(case: &Case) -> Value {
    let mut spec = Map::new();
    for (key, value) in &case.permutation {
        if let Some(rest) = key.strip_prefix("placement.") {
            let mut parts = rest.splitn(2, '.');
            let role = parts.next().unwrap_or_default();
            if let Some(placement) = spec
                .entry("placement")
                .or_insert_with(|| json!({}))
                .as_object_mut()
            {
                placement.insert(role.to_owned(), json!({"nodes": value}));
            }
        } else if key == "endpoint.modelName" {
            spec.insert("endpoint".into(), json!({"modelName": value}));
        } else {
            spec.insert(key.clone(), value.clone());
        }
    }
    if case.kind == "PyTorch" {
        spec.insert("benchmarkType".into(), json!("train"));
    }
    Value::Object(spec)
}

/// What a case measures, before noise: (result, metrics, evidence text).
fn measure(case: &Case, rng: &mut Rng, factor: f64) -> (Value, Vec<Value>) {
    // `factor` > 1 makes things worse: latencies longer, throughputs lower.
    let slow = |v: f64| v * factor;
    let fast = |v: f64| v / factor;
    match case.kind {
        "LLMInference" => {
            let model_cost = if case.permutation["endpoint.modelName"] == "mistral-7b" {
                0.8
            } else {
                1.0
            };
            let mut iterations = Vec::new();
            for scenario in ["D(100,100)", "D(1000,200)"] {
                let prompt = if scenario.starts_with("D(1000") {
                    4.0
                } else {
                    1.0
                };
                for concurrency in [1_u32, 4, 16] {
                    let c = f64::from(concurrency);
                    let ttft = slow(rng.noisy(20.0 * prompt * model_cost * (1.0 + c / 8.0), 0.05));
                    let tpot = slow(rng.noisy(8.0 * model_cost * (1.0 + c / 16.0), 0.05));
                    let tps = fast(c * 1000.0 / tpot);
                    let dist = |mean: f64| {
                        json!({"count": 200, "mean": mean, "stddev": mean * 0.2, "min": mean * 0.5,
                               "max": mean * 3.0, "p50": mean * 0.95, "p90": mean * 1.4,
                               "p95": mean * 1.6, "p99": mean * 2.1, "p999": mean * 2.8})
                    };
                    let doubts = if rng.unit() < 0.02 {
                        json!([{"kind": "clientDelay", "metric": "ttftMillis.p99", "evidence": "generated"}])
                    } else {
                        json!([])
                    };
                    iterations.push(json!({
                        "scenario": scenario, "concurrency": concurrency, "requests": 200,
                        "errors": u64::from(rng.unit() < 0.1), "durationSeconds": 30.0,
                        "requestsPerSecond": tps / 100.0, "inputTokensPerSecond": tps * prompt,
                        "outputTokensPerSecond": tps, "totalTokensPerSecond": tps * (1.0 + prompt),
                        "outputTokensPerSecondPerUser": tps / c, "inputTokensMean": 100.0 * prompt,
                        "outputTokensMean": 100.0, "tokenCounts": "server",
                        "ttftMillis": dist(ttft), "timeToSecondTokenMillis": dist(ttft + tpot),
                        "interTokenLatencyMillis": dist(tpot), "tpotMillis": dist(tpot),
                        "e2eLatencyMillis": dist(ttft + 100.0 * tpot), "doubts": doubts,
                    }));
                }
            }
            let best = iterations
                .iter()
                .max_by(|a, b| {
                    a["outputTokensPerSecond"]
                        .as_f64()
                        .partial_cmp(&b["outputTokensPerSecond"].as_f64())
                        .unwrap_or(std::cmp::Ordering::Equal)
                })
                .cloned()
                .unwrap_or_default();
            let tps = best["outputTokensPerSecond"].as_f64().unwrap_or(0.0);
            let ttft = best["ttftMillis"]["mean"].as_f64().unwrap_or(0.0);
            (
                json!({"format": "perfsweep-llm-loadgen/v1",
                       "model": case.permutation["endpoint.modelName"], "iterations": iterations,
                       "outputTokensPerSecond": tps, "ttftMeanMillis": ttft, "workers": 1}),
                vec![
                    metric("output_tokens_per_second", tps, true),
                    metric("ttft_mean_milliseconds", ttft, false),
                ],
            )
        }
        "IPerf" => {
            let bps = fast(rng.noisy(9.4e9, 0.02));
            (
                json!({"receivedBitsPerSecond": bps}),
                vec![
                    metric("received_bits_per_second", bps, true),
                    metric("retransmits", (rng.unit() * 20.0).floor(), false),
                ],
            )
        }
        "Fio" => {
            let big = case.permutation["bs"] == "1m";
            let iops = fast(rng.noisy(if big { 2_000.0 } else { 90_000.0 }, 0.04));
            let bw = iops * if big { 1_048_576.0 } else { 4096.0 };
            let p99 = slow(rng.noisy(if big { 900.0 } else { 180.0 }, 0.05));
            (
                json!({"readIops": iops}),
                vec![
                    metric("read_bandwidth_bytes_per_second", bw, true),
                    metric("read_iops", iops, true),
                    metric("read_clat_p99_microseconds", p99, false),
                ],
            )
        }
        "RDMABandwidth" => {
            let gbps = fast(rng.noisy(196.0, 0.01));
            (
                json!({"maxAverageGbitsPerSecond": gbps}),
                vec![metric("average_bandwidth_gigabits_per_second", gbps, true)],
            )
        }
        "MPIPingPong" => {
            let latency = slow(rng.noisy(1.8, 0.03));
            (
                json!({"minLatencyMicros": latency}),
                vec![
                    metric("min_latency_microseconds", latency, false),
                    metric(
                        "peak_bandwidth_megabytes_per_second",
                        fast(rng.noisy(24_000.0, 0.02)),
                        true,
                    ),
                ],
            )
        }
        "PyTorch" => {
            let batch = case.permutation["inputBatchSize"].as_f64().unwrap_or(32.0);
            let step = slow(rng.noisy(0.05 + batch * 0.004, 0.03));
            (
                json!({"batchTimeMeanSeconds": step}),
                vec![
                    metric("throughput_samples_per_second", batch / step, true),
                    metric("batch_time_mean_seconds", step, false),
                    metric("batch_time_p90_seconds", step * 1.1, false),
                ],
            )
        }
        _ => {
            let procs = case.permutation["numProcs"].as_f64().unwrap_or(1.0);
            // Amdahl: 90% parallel.
            let clock = slow(rng.noisy(100.0 * (0.1 + 0.9 / procs), 0.03));
            (
                json!({"clockTimeSeconds": clock}),
                vec![
                    metric("execution_time_seconds", clock * procs, false),
                    metric("clock_time_seconds", clock, false),
                    metric("step_execution_mean_seconds", clock / 1000.0, false),
                ],
            )
        }
    }
}

/// The sweep's runs, in order.
pub fn sweep(sweep: &Sweep) -> Vec<Generated> {
    let mut rng = Rng::new(sweep.seed);
    let start = sweep
        .start
        .parse::<jiff::Timestamp>()
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let mut out = Vec::new();
    let mut at = start;
    'cases: for case in cases(sweep.fleet_nodes) {
        let spec = spec_of(&case);
        let digest = perfsweep_benchmarks::set::expand::workload_spec_digest(case.kind, &spec);
        let case_id = digest.get(..10).unwrap_or(&digest).to_owned();
        for repetition in 0..case.repetitions {
            if sweep.limit.is_some_and(|limit| out.len() >= limit) {
                break 'cases;
            }
            let mut factor = 1.0;
            if let Some((node, f)) = &sweep.slow_node
                && case.hosts.contains(node)
            {
                factor *= f;
            }
            if let Some((kind, f)) = &sweep.slow_kind
                && kind == case.kind
            {
                factor *= f;
            }
            let (result, metrics) = measure(&case, &mut rng, factor);
            let duration = 30 + (rng.unit() * 90.0) as i64;
            let started = at;
            let finished = started + jiff::SignedDuration::from_secs(duration);
            at = finished + jiff::SignedDuration::from_secs(2);
            let name = format!("{}-{case_id}-{repetition}", case.set);
            let evidence = format!(
                "{} output of {name} in run {}\nresult {result}\n",
                case.kind, sweep.run_id
            );
            let sha =
                perfsweep_benchmarks::execution::agent_report::sha256_hex(evidence.as_bytes());
            let failed = rng.unit() < 0.01;
            let outcome = if failed {
                RecordOutcome::Failed {
                    reason: "Timeout".into(),
                    message: "no result within the timeout".into(),
                }
            } else {
                RecordOutcome::Succeeded {
                    summary: format!("{} {}", case.kind, metrics[0]["value"]),
                    result,
                    metrics: metrics
                        .into_iter()
                        .filter_map(|m| serde_json::from_value(m).ok())
                        .collect(),
                }
            };
            let mut node_labels = std::collections::BTreeMap::new();
            for host in &case.hosts {
                node_labels.insert(
                    host.clone(),
                    [
                        ("topology.kubernetes.io/region", "eu-west"),
                        ("topology.kubernetes.io/zone", "eu-west-a"),
                        ("node.kubernetes.io/instance-type", "gpu.8x"),
                        ("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"),
                        ("nvidia.com/gpu.count", "8"),
                        ("feature.node.kubernetes.io/rdma.available", "true"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                );
            }
            let record = ResultRecord {
                schema_version: SCHEMA_VERSION.into(),
                run_id: sweep.run_id.clone(),
                benchmark: BenchmarkIdentity {
                    kind: case.kind.into(),
                    name,
                    set: Some(case.set.into()),
                    benchmark_case_id: Some(format!("{}-{case_id}", case.set)),
                    repetition: Some(repetition),
                    permutation: case.permutation.clone(),
                    node: None,
                    references: Vec::new(),
                },
                workload_spec_digest: digest.clone(),
                spec: spec.clone(),
                backend: "kubernetes".into(),
                environment: Environment {
                    hosts: case.hosts.clone(),
                    perfsweep_version: "0.1.0".into(),
                    tool_versions: [(case.kind.to_ascii_lowercase(), "1.0".to_owned())]
                        .into_iter()
                        .collect(),
                    node_labels,
                    kubernetes_version: Some("v1.34.1".into()),
                    ..Environment::default()
                },
                started_at: started.to_string(),
                finished_at: finished.to_string(),
                outcome,
                evidence: Some(Evidence {
                    sha256: sha.clone(),
                    bytes: evidence.len() as u64,
                    path: perfsweep_benchmarks::results::record::evidence_path(&sha),
                }),
                artifact_manifest_digest: None,
            }
            .complete();
            let slices = if sweep.telemetry {
                case.hosts
                    .iter()
                    .map(|host| {
                        let hot = sweep.slow_node.as_ref().is_some_and(|(n, _)| n == host);
                        TelemetrySlice {
                            schema_version: TELEMETRY_SCHEMA_VERSION.into(),
                            run_id: sweep.run_id.clone(),
                            benchmark: Some(SliceBenchmark {
                                kind: record.benchmark.kind.clone(),
                                name: record.benchmark.name.clone(),
                                repetition: record.benchmark.repetition,
                            }),
                            window_start: record.started_at.clone(),
                            window_end: record.finished_at.clone(),
                            node: host.clone(),
                            metrics: [
                                (
                                    "cpu_utilization_percent",
                                    rng.noisy(if hot { 96.0 } else { 35.0 }, 0.05),
                                ),
                                ("memory_used_bytes", rng.noisy(64e9, 0.1)),
                                ("network_receive_bytes_per_second", rng.noisy(1e9, 0.2)),
                                ("network_transmit_bytes_per_second", rng.noisy(1e9, 0.2)),
                                ("gpu_utilization_percent", rng.noisy(70.0, 0.1)),
                            ]
                            .into_iter()
                            .map(|(k, v)| (k.to_owned(), v))
                            .collect(),
                        }
                    })
                    .collect()
            } else {
                Vec::new()
            };
            out.push(Generated {
                record,
                evidence,
                slices,
            });
        }
    }
    out
}

/// Writes runs as a results directory: one record file per run (as `run --output`
/// writes them), or, with `jsonl`, one `records-<n>.jsonl` per 1000 runs (as export
/// writes them); evidence under `evidence/`, slices in `telemetry.jsonl`.
pub fn write_source(dir: &std::path::Path, runs: &[Generated], jsonl: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join("evidence"))?;
    for run in runs {
        if let Some(evidence) = &run.record.evidence {
            std::fs::write(dir.join(&evidence.path), &run.evidence)?;
        }
    }
    if jsonl {
        for (n, chunk) in runs.chunks(1000).enumerate() {
            let mut text = String::new();
            for run in chunk {
                text.push_str(&to_json(&run.record));
                text.push('\n');
            }
            std::fs::write(dir.join(format!("records-{n:05}.jsonl")), text)?;
        }
    } else {
        for run in runs {
            let file = format!("{}-{}.json", run.record.run_id, run.record.benchmark.name);
            std::fs::write(dir.join(file), to_json(&run.record))?;
        }
    }
    let mut slices = String::new();
    for slice in runs.iter().flat_map(|r| &r.slices) {
        slices.push_str(&to_json(slice));
        slices.push('\n');
    }
    if !slices.is_empty() {
        std::fs::write(dir.join("telemetry.jsonl"), slices)?;
    }
    Ok(())
}

/// One line of JSON (a value that cannot be serialized is generated data gone wrong:
/// an empty object keeps the file valid, and the tests then fail on what is missing).
fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".into())
}
