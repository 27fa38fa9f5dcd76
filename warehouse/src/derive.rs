//! Rows from a result record: the run fact, the kind's outcome facts and the dimension
//! rows the facts reference. Pure: the caller reads the record and says what it found
//! about its evidence.

use std::collections::{BTreeMap, BTreeSet};

use perfsweep_benchmarks::formats::digest::{canonical_json, sha256_hex};
use perfsweep_benchmarks::results::record::{RecordOutcome, ResultRecord};
use serde_json::{Value, json};

use crate::layout;
use crate::row::Row;
use crate::schema::Table;

/// Whether runs are loaded as publication runs or exploration (`build --mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    Publication,
    #[default]
    Exploration,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Publication => "publication",
            Self::Exploration => "exploration",
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub mode: Mode,
    /// Price of the serving deployment per hour, for cost per request and per token.
    pub price_per_hour: Option<f64>,
}

/// One record as loaded: its digest (of the bytes stored under `raw/records/`) and what
/// checking its evidence found (`evidenceMissing`, `evidenceMismatch`).
pub struct Loaded<'a> {
    pub record: &'a ResultRecord,
    pub record_digest: &'a str,
    pub evidence_problems: &'a [String],
}

/// What one record becomes.
#[derive(Clone, Debug)]
pub struct Derived {
    pub run_key: String,
    /// The fact partitions: the benchmark kind and the start date (UTC).
    pub kind: String,
    pub date: String,
    pub facts: Vec<(Table, Row)>,
    pub dims: Vec<(Table, Row)>,
}

/// The run's key: the identity `results` commands dedupe by (run id, kind, name,
/// repetition), so a record loaded twice, from two copies, is one row.
pub fn run_key(record: &ResultRecord) -> String {
    sha256_hex(&json!([
        record.run_id,
        record.benchmark.kind,
        record.benchmark.name,
        record.benchmark.repetition,
    ]))
}

/// Microseconds since the epoch of an RFC 3339 time; `None` when it does not parse.
pub fn micros(time: &str) -> Option<i64> {
    time.parse::<jiff::Timestamp>()
        .ok()
        .map(jiff::Timestamp::as_microsecond)
}

/// The UTC date of an RFC 3339 time, `unknown` when it does not parse (a record with a
/// broken time still loads, into a partition of its own).
pub fn date_of(time: &str) -> String {
    time.parse::<jiff::Timestamp>().map_or_else(
        |_| "unknown".to_owned(),
        |t| t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string(),
    )
}

pub fn derive(loaded: &Loaded<'_>, options: &Options) -> Derived {
    let record = loaded.record;
    let run_key = run_key(record);
    let date = date_of(&record.started_at);
    let kind = record.benchmark.kind.clone();
    let case_key = record.case_key();
    let network = record
        .environment
        .network
        .clone()
        .unwrap_or_else(|| perfsweep_benchmarks::results::record::network_of(&record.spec));

    let software = software_row(record);
    let hardware = hardware_row(record);
    let region = region_row(record, &network);
    let workload = workload_row(record, &case_key);
    let lineage = lineage_row(record);

    let mut doubts: BTreeSet<String> = loaded.evidence_problems.iter().cloned().collect();
    let mut facts = Vec::new();
    let base = Row::new()
        .with("run_key", run_key.as_str())
        .with("run_id", record.run_id.as_str())
        .with("case_key", case_key.as_str());
    if let RecordOutcome::Succeeded { result, .. } = &record.outcome {
        match kind.as_str() {
            "LLMInference" => {
                for row in serving_rows(&base, result, options) {
                    if let Some(flags) = row.text("doubt_flags") {
                        doubts.extend(flags.split(',').map(str::to_owned));
                    }
                    facts.push((Table::ServingOutcomeFact, row));
                }
            }
            "PyTorch" | "OpenFOAM" => {
                facts.push((Table::TrainingOutcomeFact, training_row(&base, record)));
            }
            _ => facts.extend(
                system_rows(&base, record, &network)
                    .into_iter()
                    .map(|row| (Table::SystemOutcomeFact, row)),
            ),
        }
    }

    let (status, failure_reason, summary) = match &record.outcome {
        RecordOutcome::Succeeded { summary, .. } => ("succeeded", None, summary.clone()),
        RecordOutcome::Failed { reason, message } => (
            "failed",
            Some(reason.clone()),
            format!("{reason}: {message}"),
        ),
    };
    let started = micros(&record.started_at);
    let finished = micros(&record.finished_at);
    let headline = record.metrics().into_iter().next();
    let doubt_flags =
        (!doubts.is_empty()).then(|| doubts.into_iter().collect::<Vec<_>>().join(","));
    let run = base
        .clone()
        .with("name", record.benchmark.name.as_str())
        .with("set_name", record.benchmark.set.clone())
        .with("repetition", record.benchmark.repetition.map(i64::from))
        .with("intent", intent(record))
        .with("scheduler_path", scheduler_path(record))
        .with("mode", options.mode.as_str())
        .with("status", status)
        .with("failure_reason", failure_reason)
        .with("summary", summary)
        .with("started_at", timestamp(started))
        .with("finished_at", timestamp(finished))
        .with(
            "duration_seconds",
            started.zip(finished).map(|(s, f)| (f - s) as f64 / 1e6),
        )
        .with("backend", record.backend.as_str())
        .with("network", network.as_str())
        .with("hosts", sorted_hosts(record).join(","))
        .with("headline_metric", headline.as_ref().map(|m| m.name.clone()))
        .with("headline_value", headline.as_ref().map(|m| m.value))
        .with(
            "headline_better",
            headline.as_ref().map(|m| m.better.as_str()),
        )
        .with("doubtful", doubt_flags.is_some())
        .with("doubt_flags", doubt_flags)
        .with("workload_spec_digest", record.workload_spec_digest.as_str())
        .with(
            "artifact_manifest_digest",
            record.artifact_manifest_digest.clone(),
        )
        .with("record_digest", loaded.record_digest)
        .with(
            "record_path",
            layout::record_path(&date, loaded.record_digest),
        )
        .with("software_version_digest", key_of(&software))
        .with("hardware_topology_digest", key_of(&hardware))
        .with("cluster_region_digest", key_of(&region))
        .with("record_schema_version", record.schema_version.as_str());
    facts.insert(0, (Table::BenchmarkRunFact, run));

    let mut dims = vec![
        (Table::SoftwareVersionDim, software),
        (Table::HardwareTopologyDim, hardware),
        (Table::ClusterRegionDim, region),
        (Table::WorkloadDim, workload),
    ];
    dims.extend(lineage.map(|row| (Table::ArtifactLineageDim, row)));
    Derived {
        run_key,
        kind,
        date,
        facts,
        dims,
    }
}

fn timestamp(micros: Option<i64>) -> crate::row::Cell {
    micros.map_or(crate::row::Cell::Null, crate::row::Cell::Timestamp)
}

fn key_of(row: &Row) -> String {
    row.columns()
        .find(|c| c.ends_with("_digest"))
        .and_then(|c| row.text(c))
        .unwrap_or_default()
        .to_owned()
}

fn sorted_hosts(record: &ResultRecord) -> Vec<String> {
    let hosts: BTreeSet<&String> = record.environment.hosts.iter().collect();
    hosts.into_iter().cloned().collect()
}

/// Why the run was made, as far as the record tells: a spec with acceptance criteria is
/// an acceptance test, a node-pair sweep a fleet acceptance, anything else a measurement.
fn intent(record: &ResultRecord) -> &'static str {
    if perfsweep_benchmarks::results::fleet::pair_of(record).is_some() {
        "fleet"
    } else if record.spec["acceptance"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        "acceptance"
    } else {
        "measurement"
    }
}

fn scheduler_path(record: &ResultRecord) -> String {
    if record.backend == "kubernetes" {
        // Volcano is the default scheduler of the spec (`CommonSpec::scheduler`).
        let scheduler = record.spec["scheduler"].as_str().unwrap_or("volcano");
        format!("kubernetes/{}", scheduler.to_ascii_lowercase())
    } else {
        record.backend.clone()
    }
}

/// A dimension row's digest: of the canonical JSON of what it holds.
fn content_digest(value: &Value) -> String {
    sha256_hex(value)
}

fn software_row(record: &ResultRecord) -> Row {
    let env = &record.environment;
    let content = json!({
        "perfsweepVersion": env.perfsweep_version,
        "kubernetesVersion": env.kubernetes_version,
        "toolVersions": env.tool_versions,
        "imageDigests": env.image_digests,
    });
    Row::new()
        .with("software_version_digest", content_digest(&content))
        .with("perfsweep_version", env.perfsweep_version.as_str())
        .with("kubernetes_version", env.kubernetes_version.clone())
        .with("tool_versions", canonical_json(&json!(env.tool_versions)))
        .with("image_digests", canonical_json(&json!(env.image_digests)))
}

/// The values of `label` over the run's nodes, sorted, comma-separated; `None` when no
/// node has it.
fn label_values(
    labels: &BTreeMap<String, BTreeMap<String, String>>,
    label: &str,
) -> Option<String> {
    let values: BTreeSet<&str> = labels
        .values()
        .filter_map(|l| l.get(label).map(String::as_str))
        .collect();
    (!values.is_empty()).then(|| values.into_iter().collect::<Vec<_>>().join(","))
}

fn hardware_row(record: &ResultRecord) -> Row {
    let hosts = sorted_hosts(record);
    let labels = &record.environment.node_labels;
    let content = json!({"hosts": hosts, "nodeLabels": labels});
    let every = |label: &str| {
        !labels.is_empty()
            && labels
                .values()
                .all(|l| l.get(label).is_some_and(|v| v == "true"))
    };
    let gpu_count = labels
        .values()
        .filter_map(|l| l.get("nvidia.com/gpu.count")?.parse::<i64>().ok())
        .max();
    Row::new()
        .with("hardware_topology_digest", content_digest(&content))
        .with("host_count", hosts.len() as i64)
        .with(
            "instance_types",
            label_values(labels, "node.kubernetes.io/instance-type"),
        )
        .with(
            "gpu_product",
            label_values(labels, "nvidia.com/gpu.product"),
        )
        .with("gpu_count", gpu_count)
        .with("arch", label_values(labels, "kubernetes.io/arch"))
        .with("rdma", every("feature.node.kubernetes.io/rdma.available"))
        .with(
            "sriov",
            every("feature.node.kubernetes.io/network-sriov.capable"),
        )
        .with("node_labels", canonical_json(&json!(labels)))
}

fn region_row(record: &ResultRecord, network: &str) -> Row {
    let labels = &record.environment.node_labels;
    let regions = label_values(labels, "topology.kubernetes.io/region");
    let zones = label_values(labels, "topology.kubernetes.io/zone");
    let content = json!({
        "backend": record.backend, "regions": regions, "zones": zones, "network": network,
    });
    Row::new()
        .with("cluster_region_digest", content_digest(&content))
        .with("backend", record.backend.as_str())
        .with("regions", regions)
        .with("zones", zones)
        .with("network", network)
}

fn workload_row(record: &ResultRecord, case_key: &str) -> Row {
    // LLMInference names its model under endpoint, PyTorch under model.
    let model = record.spec["endpoint"]["modelName"]
        .as_str()
        .or_else(|| record.spec["model"].as_str())
        .map(str::to_owned);
    Row::new()
        .with("workload_spec_digest", record.workload_spec_digest.as_str())
        .with("kind", record.benchmark.kind.as_str())
        .with("case_key", case_key)
        .with("set_name", record.benchmark.set.clone())
        .with(
            "permutation",
            canonical_json(&Value::Object(record.benchmark.permutation.clone())),
        )
        .with("model", model)
        .with("spec", canonical_json(&record.spec))
}

/// The manifest as [`perfsweep_benchmarks::results::record::artifact_manifest_digest`]
/// digests it: entries sorted by path.
pub fn manifest(record: &ResultRecord) -> Value {
    let mut entries: Vec<_> = record.evidence.iter().collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Value::Array(
        entries
            .iter()
            .map(|e| json!({"path": e.path, "sha256": e.sha256, "bytes": e.bytes}))
            .collect(),
    )
}

fn lineage_row(record: &ResultRecord) -> Option<Row> {
    let digest = record.artifact_manifest_digest.clone()?;
    let evidence: Vec<_> = record.evidence.iter().collect();
    Some(
        Row::new()
            .with("artifact_manifest_digest", digest)
            .with("evidence_count", evidence.len() as i64)
            .with(
                "evidence_bytes",
                evidence.iter().map(|e| e.bytes as i64).sum::<i64>(),
            )
            .with("manifest", canonical_json(&manifest(record)))
            .with(
                "evidence_paths",
                evidence
                    .iter()
                    .map(|e| layout::evidence_path(&e.sha256))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
    )
}

fn num(value: &Value) -> Option<f64> {
    value.as_f64()
}

fn int(value: &Value) -> Option<i64> {
    value
        .as_i64()
        .or_else(|| value.as_u64().and_then(|v| i64::try_from(v).ok()))
}

/// One row per load generator iteration (scenario × concurrency), read leniently from
/// the result's JSON so records of older loadgen versions still load.
fn serving_rows(base: &Row, result: &Value, options: &Options) -> Vec<Row> {
    let model = result["model"].as_str().unwrap_or_default();
    let Some(iterations) = result["iterations"].as_array() else {
        return Vec::new();
    };
    iterations
        .iter()
        .enumerate()
        .map(|(index, it)| {
            let requests = int(&it["requests"]).unwrap_or(0);
            let errors = int(&it["errors"]).unwrap_or(0);
            let measured = requests + errors;
            let error_rate = if measured > 0 {
                errors as f64 * 100.0 / measured as f64
            } else {
                0.0
            };
            let rps = num(&it["requestsPerSecond"]);
            let out_tps = num(&it["outputTokensPerSecond"]);
            let per_second = options.price_per_hour.map(|p| p / 3600.0);
            let doubts: BTreeSet<&str> = it["doubts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["kind"].as_str())
                .collect();
            let d = |dist: &str, stat: &str| num(&it[dist][stat]);
            base.clone()
                .with("iteration", index as i64)
                .with("scenario", it["scenario"].as_str().unwrap_or_default())
                .with("concurrency", int(&it["concurrency"]).unwrap_or(0))
                .with("request_rate", num(&it["requestRate"]))
                .with("model", model)
                .with("requests", requests)
                .with("errors", errors)
                .with("error_rate_percent", error_rate)
                .with("ttft_mean_ms", d("ttftMillis", "mean"))
                .with("ttft_p50_ms", d("ttftMillis", "p50"))
                .with("ttft_p95_ms", d("ttftMillis", "p95"))
                .with("ttft_p99_ms", d("ttftMillis", "p99"))
                .with("tpot_p50_ms", d("tpotMillis", "p50"))
                .with("tpot_p95_ms", d("tpotMillis", "p95"))
                .with("tpot_p99_ms", d("tpotMillis", "p99"))
                .with("itl_p50_ms", d("interTokenLatencyMillis", "p50"))
                .with("itl_p95_ms", d("interTokenLatencyMillis", "p95"))
                .with("itl_p99_ms", d("interTokenLatencyMillis", "p99"))
                .with("itl_jitter_ms", d("interTokenLatencyMillis", "stddev"))
                .with("e2e_p50_ms", d("e2eLatencyMillis", "p50"))
                .with("e2e_p99_ms", d("e2eLatencyMillis", "p99"))
                .with("requests_per_second", rps)
                .with("output_tokens_per_second", out_tps)
                .with("input_tokens_per_second", num(&it["inputTokensPerSecond"]))
                .with("queueing_delay_p99_ms", d("scheduleLagMillis", "p99"))
                .with(
                    "goodput_requests_per_second",
                    num(&it["goodput"]["requestsPerSecond"]),
                )
                .with(
                    "goodput_attainment_percent",
                    num(&it["goodput"]["attainmentPercent"]),
                )
                .with(
                    "cost_per_request",
                    per_second.zip(rps.filter(|r| *r > 0.0)).map(|(p, r)| p / r),
                )
                .with(
                    "cost_per_million_output_tokens",
                    per_second
                        .zip(out_tps.filter(|t| *t > 0.0))
                        .map(|(p, t)| p / t * 1e6),
                )
                .with(
                    "doubt_flags",
                    (!doubts.is_empty()).then(|| doubts.into_iter().collect::<Vec<_>>().join(",")),
                )
        })
        .collect()
}

fn training_row(base: &Row, record: &ResultRecord) -> Row {
    let metrics: BTreeMap<String, f64> = record
        .metrics()
        .into_iter()
        .map(|m| (m.name, m.value))
        .collect();
    let metric = |name: &str| metrics.get(name).copied();
    let spec = &record.spec;
    let (phase, scale, nodes, step_mean) = if record.benchmark.kind == "OpenFOAM" {
        (
            "solve".to_owned(),
            int(&spec["numProcs"]).unwrap_or(1),
            int(&spec["numNodes"]),
            metric("step_execution_mean_seconds"),
        )
    } else {
        (
            spec["benchmarkType"].as_str().unwrap_or("train").to_owned(),
            int(&spec["inputBatchSize"]).unwrap_or(1),
            Some(1),
            metric("batch_time_mean_seconds"),
        )
    };
    base.clone()
        .with("framework", record.benchmark.kind.as_str())
        .with("phase", phase)
        .with("scale_point", scale)
        .with("nodes", nodes)
        .with("step_time_mean_seconds", step_mean)
        .with("step_time_p90_seconds", metric("batch_time_p90_seconds"))
        .with(
            "samples_per_second",
            metric("throughput_samples_per_second"),
        )
        .with("tokens_per_second", metric("tokens_per_second"))
        .with("execution_time_seconds", metric("execution_time_seconds"))
        .with("clock_time_seconds", metric("clock_time_seconds"))
}

/// One row per metric, scoped to the pair (a node-pair sweep's two placed roles), the
/// node (a run on one host), or the whole run (an aggregate over several hosts).
fn system_rows(base: &Row, record: &ResultRecord, network: &str) -> Vec<Row> {
    let hosts = sorted_hosts(record);
    let (scope, node_a, node_b) = match perfsweep_benchmarks::results::fleet::pair_of(record) {
        Some([a, b]) => ("pair", Some(a), Some(b)),
        // An each-node run names its node, whatever its processes' hosts were called.
        None if record.benchmark.node.is_some() => ("node", record.benchmark.node.clone(), None),
        None if hosts.len() == 1 => ("node", hosts.first().cloned(), None),
        None => ("run", None, None),
    };
    record
        .metrics()
        .into_iter()
        .filter(|metric| metric.value.is_finite())
        .map(|metric| {
            base.clone()
                .with("metric", metric.name)
                .with("value", metric.value)
                .with("better", metric.better.as_str())
                .with("scope", scope)
                .with("node_a", node_a.clone())
                .with("node_b", node_b.clone())
                .with("network", network)
        })
        .collect()
}

/// The metric columns a telemetry slice may fill.
pub const TELEMETRY_METRICS: &[&str] = &[
    "cpu_utilization_percent",
    "memory_used_bytes",
    "network_receive_bytes_per_second",
    "network_transmit_bytes_per_second",
    "disk_read_bytes_per_second",
    "disk_write_bytes_per_second",
    "gpu_utilization_percent",
    "nvlink_bytes_per_second",
    "pcie_bytes_per_second",
];

/// A telemetry slice's row and partition (the benchmark's kind, or `run` for a slice of
/// the whole run; the window's start date). A metric the table has no column for is an
/// error: a misspelt name would otherwise vanish.
pub fn telemetry_row(slice: &crate::source::TelemetrySlice) -> Result<Derived, String> {
    let start = micros(&slice.window_start).ok_or_else(|| {
        format!(
            "windowStart {:?} is not an RFC 3339 time",
            slice.window_start
        )
    })?;
    let end = micros(&slice.window_end)
        .ok_or_else(|| format!("windowEnd {:?} is not an RFC 3339 time", slice.window_end))?;
    let digest = sha256_hex(&serde_json::to_value(slice).map_err(|e| e.to_string())?);
    let run_key = slice
        .benchmark
        .as_ref()
        .map(|b| sha256_hex(&json!([slice.run_id, b.kind, b.name, b.repetition])));
    let mut row = Row::new()
        .with("slice_digest", digest.as_str())
        .with("run_id", slice.run_id.as_str())
        .with("run_key", run_key)
        .with("window_start", crate::row::Cell::Timestamp(start))
        .with("window_end", crate::row::Cell::Timestamp(end))
        .with("node", slice.node.as_str());
    for (name, value) in &slice.metrics {
        let Some(column) = TELEMETRY_METRICS.iter().find(|c| *c == name) else {
            return Err(format!(
                "metric {name} is not one of telemetry_slice_fact's ({})",
                TELEMETRY_METRICS.join(", ")
            ));
        };
        row.set(column, *value);
    }
    Ok(Derived {
        run_key: digest,
        kind: slice
            .benchmark
            .as_ref()
            .map_or_else(|| "run".to_owned(), |b| b.kind.clone()),
        date: date_of(&slice.window_start),
        facts: vec![(Table::TelemetrySliceFact, row)],
        dims: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::row::Cell;
    use crate::synth::{self, Sweep};

    fn runs() -> Vec<crate::synth::Generated> {
        synth::sweep(&Sweep::new("r1", "2026-11-20T23:59:30Z", 7))
    }

    fn derive_one(record: &ResultRecord, options: &Options) -> Derived {
        derive(
            &Loaded {
                record,
                record_digest: "d1",
                evidence_problems: &[],
            },
            options,
        )
    }

    fn of_kind<'a>(runs: &'a [crate::synth::Generated], kind: &str) -> &'a ResultRecord {
        &runs
            .iter()
            .find(|r| r.record.benchmark.kind == kind && r.record.succeeded())
            .expect("a run of the kind")
            .record
    }

    #[test]
    fn every_derived_row_fits_its_table() {
        let runs = runs();
        let options = Options {
            price_per_hour: Some(12.0),
            ..Options::default()
        };
        for run in &runs {
            let derived = derive_one(&run.record, &options);
            for (table, row) in derived.facts.iter().chain(&derived.dims) {
                crate::batch::to_batch(*table, std::slice::from_ref(row))
                    .unwrap_or_else(|e| panic!("{}: {e}", run.record.benchmark.name));
            }
            for slice in &run.slices {
                let derived = telemetry_row(slice).expect("a valid slice");
                let (table, row) = &derived.facts[0];
                crate::batch::to_batch(*table, std::slice::from_ref(row)).expect("fits");
            }
        }
    }

    #[test]
    fn the_run_key_is_the_runs_identity_not_its_content() {
        let runs = runs();
        let record = of_kind(&runs, "Fio");
        let mut copy = record.clone();
        copy.finished_at = "2026-11-21T00:00:00Z".into();
        assert_eq!(run_key(record), run_key(&copy));
        copy.benchmark.repetition = Some(9);
        assert_ne!(run_key(record), run_key(&copy));
        let mut other_run = record.clone();
        other_run.run_id = "r2".into();
        assert_ne!(run_key(record), run_key(&other_run));
        // Partitions: kind and the start's UTC date.
        let derived = derive_one(record, &Options::default());
        assert_eq!(derived.kind, "Fio");
        assert_eq!(derived.date, date_of(&record.started_at));
        assert_eq!(date_of("not a time"), "unknown");
        assert_eq!(date_of("2026-11-20T23:59:30-02:00"), "2026-11-21");
    }

    #[test]
    fn serving_runs_give_a_row_per_iteration_with_cost_and_doubts() {
        let runs = runs();
        let record = of_kind(&runs, "LLMInference");
        let RecordOutcome::Succeeded { result, .. } = &record.outcome else {
            panic!("succeeded");
        };
        let iterations = result["iterations"].as_array().expect("iterations");
        let derived = derive_one(
            record,
            &Options {
                price_per_hour: Some(36.0),
                ..Options::default()
            },
        );
        let serving: Vec<&Row> = derived
            .facts
            .iter()
            .filter(|(t, _)| *t == Table::ServingOutcomeFact)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(serving.len(), iterations.len());
        for (row, it) in serving.iter().zip(iterations) {
            assert_eq!(row.float("ttft_p99_ms"), it["ttftMillis"]["p99"].as_f64());
            assert_eq!(
                row.get("concurrency"),
                &Cell::Int(it["concurrency"].as_i64().expect("concurrency"))
            );
            let rps = it["requestsPerSecond"].as_f64().expect("rps");
            let cost = row.float("cost_per_request").expect("a cost with a price");
            assert!((cost - 0.01 / rps).abs() < 1e-12, "{cost}");
        }
        assert_eq!(derived.facts[0].0, Table::BenchmarkRunFact);
        let no_price = derive_one(record, &Options::default());
        assert!(
            no_price.facts[1..]
                .iter()
                .all(|(_, r)| r.get("cost_per_request") == &Cell::Null)
        );

        // A doubted iteration marks the run in doubt.
        let mut doubted = record.clone();
        if let RecordOutcome::Succeeded { result, .. } = &mut doubted.outcome {
            result["iterations"][1]["doubts"] =
                serde_json::json!([{"kind": "tokenBursts", "metric": "itl", "evidence": "e"}]);
        }
        let derived = derive_one(&doubted, &Options::default());
        let run = &derived.facts[0].1;
        assert_eq!(run.get("doubtful"), &Cell::Bool(true));
        assert!(
            run.text("doubt_flags")
                .is_some_and(|f| f.contains("tokenBursts"))
        );
    }

    #[test]
    fn pair_runs_are_scoped_to_their_nodes_and_failures_have_only_a_run_row() {
        let runs = runs();
        let record = of_kind(&runs, "IPerf");
        let [a, b] = perfsweep_benchmarks::results::fleet::pair_of(record).expect("a pair");
        let derived = derive_one(record, &Options::default());
        let system: Vec<&Row> = derived
            .facts
            .iter()
            .filter(|(t, _)| *t == Table::SystemOutcomeFact)
            .map(|(_, r)| r)
            .collect();
        assert_eq!(system.len(), record.metrics().len());
        for row in system {
            assert_eq!(row.text("scope"), Some("pair"));
            assert_eq!(row.text("node_a"), Some(a.as_str()));
            assert_eq!(row.text("node_b"), Some(b.as_str()));
        }
        assert_eq!(derived.facts[0].1.text("intent"), Some("fleet"));
        assert_eq!(
            derived.facts[0].1.text("scheduler_path"),
            Some("kubernetes/volcano")
        );

        let mut failed = record.clone();
        failed.outcome = RecordOutcome::Failed {
            reason: "Timeout".into(),
            message: "late".into(),
        };
        let derived = derive_one(&failed, &Options::default());
        assert_eq!(derived.facts.len(), 1);
        let run = &derived.facts[0].1;
        assert_eq!(run.text("status"), Some("failed"));
        assert_eq!(run.text("failure_reason"), Some("Timeout"));
        assert_eq!(run.get("headline_value"), &Cell::Null);
    }

    #[test]
    fn dimension_digests_follow_content() {
        let runs = runs();
        let fio = of_kind(&runs, "Fio");
        let pytorch = of_kind(&runs, "PyTorch");
        let digest = |record: &ResultRecord, table: Table| {
            derive_one(record, &Options::default())
                .dims
                .iter()
                .find(|(t, _)| *t == table)
                .and_then(|(_, r)| r.text(table.key()).map(str::to_owned))
        };
        // Same versions apart from the tool: different software rows; same region.
        assert_ne!(
            digest(fio, Table::SoftwareVersionDim),
            digest(pytorch, Table::SoftwareVersionDim)
        );
        assert_eq!(
            digest(fio, Table::ClusterRegionDim),
            digest(pytorch, Table::ClusterRegionDim)
        );
        let mut same = fio.clone();
        same.run_id = "another".into();
        for table in [
            Table::SoftwareVersionDim,
            Table::HardwareTopologyDim,
            Table::ClusterRegionDim,
            Table::WorkloadDim,
        ] {
            assert_eq!(digest(fio, table), digest(&same, table), "{}", table.name());
        }
        assert_eq!(
            digest(fio, Table::ArtifactLineageDim),
            fio.artifact_manifest_digest
        );
        // Evidence problems found at load time put the run in doubt.
        let derived = derive(
            &Loaded {
                record: fio,
                record_digest: "d",
                evidence_problems: &["evidenceMissing".to_owned()],
            },
            &Options::default(),
        );
        assert_eq!(
            derived.facts[0].1.text("doubt_flags"),
            Some("evidenceMissing")
        );
    }

    #[test]
    fn telemetry_slices_key_to_their_run_and_refuse_unknown_metrics() {
        let runs = runs();
        let run = runs.iter().find(|r| !r.slices.is_empty()).expect("slices");
        let derived = telemetry_row(&run.slices[0]).expect("a slice");
        assert_eq!(
            derived.facts[0].1.text("run_key"),
            Some(run_key(&run.record).as_str())
        );
        let mut bad = run.slices[0].clone();
        bad.metrics.insert("cpu_percent".into(), 1.0);
        assert!(telemetry_row(&bad).is_err_and(|e| e.contains("cpu_percent")));
        let mut late = run.slices[0].clone();
        late.window_start = "yesterday".into();
        assert!(telemetry_row(&late).is_err());
    }
}
