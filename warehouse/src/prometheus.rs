//! Telemetry slices from Prometheus: for each run's window (its record's start and end)
//! and each node it ran on, the mean of a few node-level series over the window, as
//! [`TelemetrySlice`]s that `build` loads into `telemetry_slice_fact`. Pure: the queries
//! to send, and what to make of Prometheus' answers; the caller does the HTTP.
//!
//! The series are node_exporter's (CPU, memory, network, disk) and, where a DCGM
//! exporter runs, the GPU's. Each is one instant query at the window's end that averages
//! the series over the window (`avg_over_time` of a subquery stepped at the scrape
//! interval), grouped by the label that names the node (`node` by default: what
//! kube-prometheus and a relabelled static target carry). Nothing per request or per pod
//! is asked for: the reduced slice is all the warehouse keeps.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use perfsweep_benchmarks::results::record::ResultRecord;
use serde::Deserialize;

use crate::source::{SliceBenchmark, TELEMETRY_SCHEMA_VERSION, TelemetrySlice};

/// How to ask.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The label whose value is the node's name, as the records name it.
    pub node_label: String,
    /// How often Prometheus scrapes the exporters: the subquery step, and a quarter of
    /// the rate window (so that a rate always spans several samples).
    pub scrape_interval: Duration,
    /// Network devices left out (a regular expression): loopback and the virtual
    /// devices pod traffic crosses twice.
    pub exclude_devices: String,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            node_label: "node".into(),
            scrape_interval: Duration::from_secs(15),
            exclude_devices: "lo|veth.*|cali.*|cilium.*|flannel.*|cni.*|docker.*".into(),
        }
    }
}

/// A run's window: where its telemetry is looked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    pub run_id: String,
    pub benchmark: SliceBenchmark,
    pub start: Timestamp,
    pub end: Timestamp,
    pub nodes: Vec<String>,
}

/// The window of `record`, or `None` when it names no node or its times do not make a
/// window (unparseable, or an end before its start).
pub fn window(record: &ResultRecord) -> Option<Window> {
    let start: Timestamp = record.started_at.parse().ok()?;
    let end: Timestamp = record.finished_at.parse().ok()?;
    if end <= start || record.environment.hosts.is_empty() {
        return None;
    }
    Some(Window {
        run_id: record.run_id.clone(),
        benchmark: SliceBenchmark {
            kind: record.benchmark.kind.clone(),
            name: record.benchmark.name.clone(),
            repetition: record.benchmark.repetition,
        },
        start,
        end,
        nodes: record.environment.hosts.clone(),
    })
}

/// One instant query: which `telemetry_slice_fact` column it fills, the PromQL, and the
/// time it is evaluated at (the window's end).
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub metric: &'static str,
    pub promql: String,
    pub at: Timestamp,
}

impl Query {
    /// The path and query string of Prometheus' instant-query API for this query.
    pub fn path(&self) -> String {
        format!(
            "/api/v1/query?query={}&time={}",
            percent_encode(&self.promql),
            self.at.as_second()
        )
    }
}

/// The queries for `window`: one per metric column, each averaging over the window.
pub fn queries(window: &Window, settings: &Settings) -> Vec<Query> {
    let by = &settings.node_label;
    let step = settings.scrape_interval.as_secs().max(1);
    let rate = format!("{}s", step * 4);
    let devices = &settings.exclude_devices;
    // The window, rounded up to whole steps so that it holds at least one.
    let seconds = window
        .start
        .duration_until(window.end)
        .as_secs()
        .unsigned_abs()
        .max(1);
    let span = seconds.div_ceil(step) * step;
    let series: [(&'static str, String); 9] = [
        (
            "cpu_utilization_percent",
            format!(
                "100 * (1 - avg by ({by}) (rate(node_cpu_seconds_total{{mode=\"idle\"}}[{rate}])))"
            ),
        ),
        (
            "memory_used_bytes",
            format!("sum by ({by}) (node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes)"),
        ),
        (
            "network_receive_bytes_per_second",
            format!(
                "sum by ({by}) (rate(node_network_receive_bytes_total{{device!~\"{devices}\"}}[{rate}]))"
            ),
        ),
        (
            "network_transmit_bytes_per_second",
            format!(
                "sum by ({by}) (rate(node_network_transmit_bytes_total{{device!~\"{devices}\"}}[{rate}]))"
            ),
        ),
        (
            "disk_read_bytes_per_second",
            format!("sum by ({by}) (rate(node_disk_read_bytes_total[{rate}]))"),
        ),
        (
            "disk_write_bytes_per_second",
            format!("sum by ({by}) (rate(node_disk_written_bytes_total[{rate}]))"),
        ),
        (
            "gpu_utilization_percent",
            format!("avg by ({by}) (DCGM_FI_DEV_GPU_UTIL)"),
        ),
        (
            "nvlink_bytes_per_second",
            format!("sum by ({by}) (DCGM_FI_PROF_NVLINK_TX_BYTES + DCGM_FI_PROF_NVLINK_RX_BYTES)"),
        ),
        (
            "pcie_bytes_per_second",
            format!("sum by ({by}) (DCGM_FI_PROF_PCIE_TX_BYTES + DCGM_FI_PROF_PCIE_RX_BYTES)"),
        ),
    ];
    series
        .into_iter()
        .map(|(metric, expression)| Query {
            metric,
            promql: format!("avg_over_time(({expression})[{span}s:{step}s])"),
            at: window.end,
        })
        .collect()
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<Data>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Data {
    result_type: String,
    result: Vec<Sample>,
}

#[derive(Deserialize)]
struct Sample {
    metric: BTreeMap<String, String>,
    /// `[unix time, "value"]`.
    value: (f64, String),
}

/// Prometheus' answer to an instant query, as node → value: series without the node
/// label, and values that are not finite numbers (`NaN` where a rate had no samples),
/// are left out. An answer that is not a successful vector is an error that says why.
pub fn parse_vector(body: &[u8], node_label: &str) -> Result<BTreeMap<String, f64>, String> {
    let answer: Answer = serde_json::from_slice(body).map_err(|e| {
        let start = String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned();
        format!("not a Prometheus API answer ({e}): {start}")
    })?;
    if answer.status != "success" {
        return Err(format!(
            "Prometheus answered {}: {}",
            answer.status,
            answer.error.unwrap_or_default()
        ));
    }
    let data = answer
        .data
        .ok_or_else(|| "Prometheus answered success without data".to_owned())?;
    if data.result_type != "vector" {
        return Err(format!(
            "expected an instant vector, Prometheus answered a {}",
            data.result_type
        ));
    }
    let mut values = BTreeMap::new();
    for sample in data.result {
        let Some(node) = sample.metric.get(node_label) else {
            continue;
        };
        if let Ok(value) = sample.value.1.parse::<f64>()
            && value.is_finite()
        {
            values.insert(node.clone(), value);
        }
    }
    Ok(values)
}

/// The slices of `window`: one per node of the run that Prometheus had any series for,
/// with the metrics it had. `answers` pairs each query's metric with its parsed answer.
pub fn slices(window: &Window, answers: &[(&str, BTreeMap<String, f64>)]) -> Vec<TelemetrySlice> {
    window
        .nodes
        .iter()
        .filter_map(|node| {
            let metrics: BTreeMap<String, f64> = answers
                .iter()
                .filter_map(|(metric, values)| values.get(node).map(|v| ((*metric).to_owned(), *v)))
                .collect();
            (!metrics.is_empty()).then(|| TelemetrySlice {
                schema_version: TELEMETRY_SCHEMA_VERSION.to_owned(),
                run_id: window.run_id.clone(),
                benchmark: Some(window.benchmark.clone()),
                window_start: window.start.to_string(),
                window_end: window.end.to_string(),
                node: node.clone(),
                metrics,
            })
        })
        .collect()
}

/// `text` as a URL query value: RFC 3986's unreserved characters as they are, every
/// other byte percent-encoded (a PromQL expression has braces, quotes, brackets).
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(hosts: &[&str], started: &str, finished: &str) -> ResultRecord {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": perfsweep_benchmarks::results::record::SCHEMA_VERSION,
            "runId": "nightly-2",
            "benchmark": {"kind": "Fio", "name": "storage-0", "repetition": 1},
            "workloadSpecDigest": "d",
            "spec": {},
            "backend": "local",
            "environment": {"hosts": hosts, "perfsweepVersion": "0.1.0"},
            "startedAt": started,
            "finishedAt": finished,
            "outcome": {"status": "failed", "reason": "ToolFailed", "message": "m"},
        }))
        .expect("a record")
    }

    #[test]
    fn a_window_is_the_records_span_on_its_hosts() {
        let window = window(&record(
            &["node-a", "node-b"],
            "2026-11-27T02:00:00Z",
            "2026-11-27T02:00:40Z",
        ))
        .expect("a window");
        assert_eq!(window.nodes, ["node-a", "node-b"]);
        assert_eq!(window.benchmark.repetition, Some(1));
        assert_eq!(window.start.duration_until(window.end).as_secs(), 40);
        assert!(window_of_nothing().is_none());
    }

    fn window_of_nothing() -> Option<Window> {
        let no_hosts = window(&record(&[], "2026-11-27T02:00:00Z", "2026-11-27T02:00:40Z"));
        let backwards = window(&record(
            &["a"],
            "2026-11-27T02:00:40Z",
            "2026-11-27T02:00:00Z",
        ));
        let unparseable = window(&record(&["a"], "yesterday", "2026-11-27T02:00:00Z"));
        no_hosts.or(backwards).or(unparseable)
    }

    #[test]
    fn queries_average_each_series_over_the_window_by_node() {
        let window = window(&record(
            &["node-a"],
            "2026-11-27T02:00:00Z",
            "2026-11-27T02:00:40Z",
        ))
        .expect("a window");
        let queries = queries(&window, &Settings::default());
        let metrics: Vec<&str> = queries.iter().map(|q| q.metric).collect();
        assert_eq!(metrics, crate::derive::TELEMETRY_METRICS);
        let cpu = &queries[0];
        // 40 s rounded up to whole 15 s steps; rates over four scrape intervals.
        assert_eq!(
            cpu.promql,
            "avg_over_time((100 * (1 - avg by (node) (rate(node_cpu_seconds_total{mode=\"idle\"}[60s]))))[45s:15s])"
        );
        assert_eq!(cpu.at, window.end);
        let path = cpu.path();
        assert!(
            path.starts_with("/api/v1/query?query=avg_over_time%28%28100%20%2A%20"),
            "{path}"
        );
        assert!(path.ends_with(&format!("&time={}", window.end.as_second())));
        assert!(queries[2].promql.contains("device!~\"lo|veth.*"));
    }

    #[test]
    fn answers_become_one_slice_per_node_with_what_prometheus_had() {
        let cpu = parse_vector(
            br#"{"status":"success","data":{"resultType":"vector","result":[
                {"metric":{"node":"node-a"},"value":[1764208840,"96.5"]},
                {"metric":{"node":"node-c"},"value":[1764208840,"3"]},
                {"metric":{},"value":[1764208840,"1"]},
                {"metric":{"node":"node-b"},"value":[1764208840,"NaN"]}]}}"#,
            "node",
        )
        .expect("a vector");
        assert_eq!(
            cpu,
            BTreeMap::from([("node-a".into(), 96.5), ("node-c".into(), 3.0)])
        );
        let gpu = parse_vector(
            br#"{"status":"success","data":{"resultType":"vector","result":[]}}"#,
            "node",
        )
        .expect("an empty vector");
        let window = window(&record(
            &["node-a", "node-b"],
            "2026-11-27T02:00:00Z",
            "2026-11-27T02:00:40Z",
        ))
        .expect("a window");
        let slices = slices(
            &window,
            &[
                ("cpu_utilization_percent", cpu),
                ("gpu_utilization_percent", gpu),
            ],
        );
        assert_eq!(slices.len(), 1, "node-b had nothing: no slice");
        assert_eq!(slices[0].node, "node-a");
        assert_eq!(
            slices[0].metrics,
            BTreeMap::from([("cpu_utilization_percent".into(), 96.5)])
        );
        let row = crate::derive::telemetry_row(&slices[0]).expect("the slice loads");
        assert_eq!(row.kind, "Fio");
    }

    #[test]
    fn errors_say_what_prometheus_answered() {
        let refused = parse_vector(
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
            "node",
        );
        assert_eq!(
            refused,
            Err("Prometheus answered error: parse error at char 3".to_owned())
        );
        let matrix = parse_vector(
            br#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#,
            "node",
        );
        assert!(matrix.is_err_and(|e| e.contains("matrix")));
        let html = parse_vector(b"<html>502 Bad Gateway</html>", "node");
        assert!(html.is_err_and(|e| e.contains("502 Bad Gateway")));
    }
}
