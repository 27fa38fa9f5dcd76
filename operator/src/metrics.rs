//! Prometheus metrics on `/metrics` (the health server), encoded by prometheus-client as
//! OpenMetrics text: counters and a reconcile-duration histogram the controllers feed,
//! and gauges computed at scrape time from the controllers' own caches (reflector
//! stores), so they are exact and cost nothing between scrapes.
//!
//! prometheus-client replaced a hand-written exposition: it brings the histogram, escapes
//! label values and writes the `_total`/`_bucket` suffixes as OpenMetrics requires, and
//! it is what controller-rs and Linkerd use. The cache gauges stay computed here (one
//! [`Collector`] over [`Families`]): their label sets change with every scrape.
//!
//! Labels stay low-cardinality: kind, namespace, set, case id (shared by a case's
//! repetitions; a benchmark outside a set is its own case), never per-repetition names.
//! kube-runtime does not expose its work queue, so there is no queue-depth metric.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::set::BenchmarkSet;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::controller::benchmark::kind::Benchmark;

type Labels = Vec<(&'static str, String)>;
type CacheCollector = Box<dyn Fn(&mut Families) + Send + Sync>;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

const UNREADABLE_HELP: &str = "Benchmarks and BenchmarkSets that do not deserialize and are not run (see their InvalidObject Warning events), by kind.";

/// Below this every integer is exact in an f64 (2^53).
const INTEGRAL_UP_TO: f64 = 9_007_199_254_740_992.0;

/// Gauges by name: (help, samples).
type GaugeFamily = (&'static str, Vec<(Labels, f64)>);

/// Metric families being assembled for one scrape, by name.
#[derive(Default)]
pub struct Families(BTreeMap<&'static str, GaugeFamily>);

impl Families {
    /// Adds `value` to the gauge `name` with these labels (samples of the same labels
    /// add up: a count of benchmarks by phase is the sum of their 1s).
    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        // prometheus-client writes label values as given; these come from objects.
        let labels: Labels = labels.into_iter().map(|(k, v)| (k, escape(&v))).collect();
        let family = self.0.entry(name).or_insert((help, Vec::new()));
        match family.1.iter_mut().find(|(l, _)| *l == labels) {
            Some((_, v)) => *v += value,
            None => family.1.push((labels, value)),
        }
    }

    /// Encodes every family as gauges (the only type the caches give).
    fn encode(&self, encoder: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, (help, samples)) in &self.0 {
            // prometheus-client ends the help with its own full stop.
            let mut family = encoder.encode_descriptor(
                name,
                help.trim_end_matches('.'),
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            match samples.as_slice() {
                // A family without labels: no `{}` after its name.
                [(labels, value)] if labels.is_empty() => encode_gauge(*value, family)?,
                _ => {
                    for (labels, value) in samples {
                        encode_gauge(*value, family.encode_family(labels)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn encode_gauge(value: f64, sample: MetricEncoder) -> Result<(), std::fmt::Error> {
    // Counts print as integers (`1`, not `1.0`), as they always have here.
    if value.fract() == 0.0 && value.abs() < INTEGRAL_UP_TO {
        #[allow(clippy::cast_possible_truncation)]
        ConstGauge::new(value as i64).encode(sample)
    } else {
        ConstGauge::new(value).encode(sample)
    }
}

/// A label value as the exposition format quotes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What one item of a controller's output stream was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconciled {
    Success,
    /// The reconciler failed (retried with backoff).
    Error,
    /// Not a failed reconcile, though kube-runtime reports it as an error: a watch that
    /// expired (410, re-listed), a request for an object already gone from the cache.
    Benign,
    /// The watch failed for another reason (e.g. 403 on list): no reconcile ran.
    WatchFailed,
}

/// Sorts a controller's output: only a failed reconciler is a reconcile error.
pub fn classify<T, E>(
    result: &Result<T, kube::runtime::controller::Error<E, kube::runtime::watcher::Error>>,
) -> Reconciled {
    use kube::runtime::controller::Error as ControllerError;
    use kube::runtime::watcher::Error as WatchError;
    match result {
        Ok(_) => Reconciled::Success,
        Err(ControllerError::ReconcilerFailed(..)) => Reconciled::Error,
        Err(ControllerError::ObjectNotFound(_)) => Reconciled::Benign,
        Err(ControllerError::QueueError(WatchError::WatchError(status))) if status.code == 410 => {
            Reconciled::Benign
        }
        Err(ControllerError::QueueError(
            WatchError::WatchFailed(kube::Error::Api(status))
            | WatchError::WatchStartFailed(kube::Error::Api(status))
            | WatchError::InitialListFailed(kube::Error::Api(status)),
        )) if status.code == 410 => Reconciled::Benign,
        Err(_) => Reconciled::WatchFailed,
    }
}

/// The label of the controller-fed metrics: a benchmark kind, or `BenchmarkSet`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

/// How long reconciles take: 1 ms to about 65 s. A reconcile that writes status and
/// creates pods takes tens of milliseconds against a real API server; one that waits
/// on a slow API server (or a log read) takes seconds.
fn reconcile_duration_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(0.001, 2.0, 17)
}

type DurationFamily = Family<ControllerLabel, Histogram, fn() -> Histogram>;

/// The operator's metrics.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    reconcile_errors: Family<ControllerLabel, Counter>,
    watch_errors: Family<ControllerLabel, Counter>,
    reconcile_duration: DurationFamily,
    collectors: Arc<Mutex<Vec<CacheCollector>>>,
}

/// The gauges computed from the caches at scrape time.
#[derive(Clone)]
struct CacheGauges(Arc<Mutex<Vec<CacheCollector>>>);

impl std::fmt::Debug for CacheGauges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CacheGauges")
    }
}

impl prometheus_client::collector::Collector for CacheGauges {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut families = Families::default();
        if let Ok(collectors) = self.0.lock() {
            for collect in collectors.iter() {
                collect(&mut families);
            }
        }
        families.encode(&mut encoder)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let up: Gauge = Gauge::default();
        up.set(1);
        registry.register(
            "perfsweep_up",
            "1 while this replica runs the controllers",
            up,
        );
        let reconciles = Family::<ControllerLabel, Counter>::default();
        registry.register(
            "perfsweep_reconciles",
            "Reconciles, successful or not",
            reconciles.clone(),
        );
        let reconcile_errors = Family::<ControllerLabel, Counter>::default();
        registry.register(
            "perfsweep_reconcile_errors",
            "Reconciles that failed (retried with backoff)",
            reconcile_errors.clone(),
        );
        let watch_errors = Family::<ControllerLabel, Counter>::default();
        registry.register(
            "perfsweep_watch_errors",
            "Watch failures other than expiry (410); no reconcile ran",
            watch_errors.clone(),
        );
        let reconcile_duration: DurationFamily =
            Family::new_with_constructor(|| Histogram::new(reconcile_duration_buckets()));
        registry.register(
            "perfsweep_reconcile_duration_seconds",
            "How long one reconcile took, by controller (a benchmark kind or BenchmarkSet), whatever its outcome",
            reconcile_duration.clone(),
        );
        let collectors = Arc::new(Mutex::new(Vec::new()));
        registry.register_collector(Box::new(CacheGauges(collectors.clone())));
        let metrics = Self {
            registry,
            reconciles,
            reconcile_errors,
            watch_errors,
            reconcile_duration,
            collectors,
        };
        metrics.register(Box::new(process_usage));
        metrics
    }
}

/// The operator's own memory, against the limit its chart sets: resident now, and the
/// most it has held (Linux's VmRSS and VmHWM; absent elsewhere); and the CPU time it has
/// used.
fn process_usage(f: &mut Families) {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return;
    };
    let kib = |field: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
    };
    if let Some(now) = kib("VmRSS:") {
        f.gauge(
            "perfsweep_process_resident_memory_bytes",
            "Resident memory size in bytes.",
            Vec::new(),
            now * 1024.0,
        );
    }
    if let Some(peak) = kib("VmHWM:") {
        f.gauge(
            "perfsweep_process_peak_resident_memory_bytes",
            "The most resident memory this process has held, in bytes (VmHWM).",
            Vec::new(),
            peak * 1024.0,
        );
    }
    if let Some(seconds) = crate::agent::sys::own_cpu_seconds() {
        f.gauge(
            "perfsweep_process_cpu_seconds",
            "CPU time this process has used, user and system, in seconds.",
            Vec::new(),
            seconds,
        );
    }
}

impl Metrics {
    /// Counts one item of the output of `controller` (a kind, or `BenchmarkSet`).
    pub fn reconciled(&self, controller: &str, what: Reconciled) {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        match what {
            Reconciled::Success => {
                self.reconciles.get_or_create(&label).inc();
            }
            Reconciled::Error => {
                self.reconciles.get_or_create(&label).inc();
                self.reconcile_errors.get_or_create(&label).inc();
            }
            Reconciled::WatchFailed => {
                self.watch_errors.get_or_create(&label).inc();
            }
            Reconciled::Benign => {}
        }
    }

    /// Records how long one reconcile of `controller` took.
    pub fn reconcile_took(&self, controller: &str, took: Duration) {
        let label = ControllerLabel {
            controller: controller.to_owned(),
        };
        self.reconcile_duration
            .get_or_create(&label)
            .observe(took.as_secs_f64());
    }

    /// Benchmarks of one kind, by phase and acceptance, and the headline results of
    /// succeeded ones per case, from the kind controller's cache.
    pub fn watch_benchmarks<K: Benchmark>(
        &self,
        info: &'static KindInfo,
        store: Store<DeserializeGuard<K>>,
    ) {
        self.register(Box::new(move |f| {
            let mut cases: BTreeMap<Labels, (f64, u32)> = BTreeMap::new();
            let mut unreadable = 0_u32;
            let guards = store.state();
            for guard in &guards {
                let Ok(benchmark) = &guard.0 else {
                    unreadable += 1;
                    continue;
                };
                let status = benchmark.benchmark_status();
                let phase = status
                    .and_then(|s| s.phase)
                    .unwrap_or_default()
                    .as_str()
                    .to_owned();
                f.gauge(
                    "perfsweep_benchmarks",
                    "Benchmarks by kind and phase.",
                    vec![("kind", info.kind.to_owned()), ("phase", phase)],
                    1.0,
                );
                let Some(status) = status else { continue };
                if let Some(accepted) = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == perfsweep_benchmarks::judging::acceptance::CONDITION)
                {
                    f.gauge(
                        "perfsweep_benchmarks_judged",
                        "Succeeded benchmarks with acceptance criteria, by verdict (Accepted condition status).",
                        vec![
                            ("kind", info.kind.to_owned()),
                            ("accepted", accepted.status.clone()),
                        ],
                        1.0,
                    );
                }
                let headline = status
                    .result
                    .as_ref()
                    .and_then(|r| serde_json::to_value(r).ok())
                    .and_then(|r| info.metrics(&r).into_iter().next());
                let Some(headline) = headline else { continue };
                let labels_of = benchmark.labels();
                let set = labels_of.get(labels::SET).cloned().unwrap_or_default();
                let case = labels_of
                    .get(labels::CASE)
                    .cloned()
                    .unwrap_or_else(|| benchmark.name_any());
                let key = vec![
                    ("kind", info.kind.to_owned()),
                    ("namespace", benchmark.namespace().unwrap_or_default()),
                    ("set", set),
                    ("case_id", case),
                    ("metric", headline.name),
                ];
                let entry = cases.entry(key).or_default();
                entry.0 += headline.value;
                entry.1 += 1;
            }
            f.gauge(
                "perfsweep_benchmarks_unreadable",
                UNREADABLE_HELP,
                vec![("kind", info.kind.to_owned())],
                f64::from(unreadable),
            );
            for (labels, (sum, count)) in cases {
                f.gauge(
                    "perfsweep_result_headline",
                    "Mean of the headline metric over a case's succeeded repetitions (unit in the metric label).",
                    labels.clone(),
                    sum / f64::from(count),
                );
                f.gauge(
                    "perfsweep_result_repetitions",
                    "Succeeded repetitions behind perfsweep_result_headline.",
                    labels,
                    f64::from(count),
                );
            }
        }));
    }

    /// BenchmarkSets by phase and acceptance verdict, from the set controller's cache.
    pub fn watch_sets(&self, store: Store<DeserializeGuard<BenchmarkSet>>) {
        self.register(Box::new(move |f| {
            let mut unreadable = 0_u32;
            for guard in store.state() {
                let Ok(set) = &guard.0 else {
                    unreadable += 1;
                    continue;
                };
                let status = set.status.as_ref();
                let phase = status
                    .and_then(|s| s.phase)
                    .map_or_else(|| "Pending".into(), |p| format!("{p:?}"));
                f.gauge(
                    "perfsweep_benchmarksets",
                    "BenchmarkSets by phase.",
                    vec![("phase", phase)],
                    1.0,
                );
                let accepted = status.and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| c.type_ == perfsweep_benchmarks::judging::acceptance::CONDITION)
                });
                if let Some(accepted) = accepted {
                    f.gauge(
                        "perfsweep_benchmarksets_accepted",
                        "BenchmarkSets with acceptance criteria, by Accepted condition status.",
                        vec![("accepted", accepted.status.clone())],
                        1.0,
                    );
                }
            }
            f.gauge(
                "perfsweep_benchmarks_unreadable",
                UNREADABLE_HELP,
                vec![("kind", "BenchmarkSet".to_owned())],
                f64::from(unreadable),
            );
        }));
    }

    /// 1 for each benchmark kind whose CRD the API server does not serve, 0 for the
    /// others: its benchmarks and sets wait until it is installed. Likewise for a CRD
    /// installed but not this operator's (outdated).
    pub fn watch_served(&self, served: std::sync::Arc<crate::controller::served::ServedKinds>) {
        self.register(Box::new(move |f| {
            for kind in perfsweep_benchmarks::kinds::registry::kinds() {
                f.gauge(
                    "perfsweep_crd_missing",
                    "1 while the API server does not serve the kind (its CRD is not installed): its benchmarks wait.",
                    vec![("kind", kind.kind.to_owned())],
                    if served.is_missing(kind.kind) { 1.0 } else { 0.0 },
                );
                f.gauge(
                    "perfsweep_crd_outdated",
                    "1 while the kind's installed CRD is not this operator's (its schema digest differs): install the CRDs of this version.",
                    vec![("kind", kind.kind.to_owned())],
                    if served.is_outdated(kind.kind) { 1.0 } else { 0.0 },
                );
            }
        }));
    }

    fn register(&self, collector: CacheCollector) {
        if let Ok(mut collectors) = self.collectors.lock() {
            collectors.push(collector);
        }
    }

    /// Everything, as OpenMetrics text ([`CONTENT_TYPE`]).
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            // Writing to a String does not fail; were it to, the scrape shows the cut.
            tracing::warn!(%error, "encoding /metrics");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Outcome =
        Result<(), kube::runtime::controller::Error<std::io::Error, kube::runtime::watcher::Error>>;

    fn status(code: u16, reason: &str) -> Box<kube::core::Status> {
        Box::new(kube::core::Status::failure("m", reason).with_code(code))
    }

    #[test]
    fn expired_watches_and_vanished_objects_are_no_reconcile_errors() {
        use kube::runtime::controller::Error as ControllerError;
        use kube::runtime::watcher::Error as WatchError;
        let gone = kube::runtime::reflector::ObjectRef::<kube::api::DynamicObject>::new_with(
            "x",
            kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::Pod>(&()),
        );
        let cases: [(Outcome, Reconciled); 5] = [
            (Ok(()), Reconciled::Success),
            (
                Err(ControllerError::ReconcilerFailed(
                    std::io::Error::other("boom"),
                    Box::new(gone.clone()),
                )),
                Reconciled::Error,
            ),
            (
                Err(ControllerError::ObjectNotFound(Box::new(gone))),
                Reconciled::Benign,
            ),
            (
                Err(ControllerError::QueueError(WatchError::WatchError(status(
                    410, "Expired",
                )))),
                Reconciled::Benign,
            ),
            (
                Err(ControllerError::QueueError(WatchError::WatchError(status(
                    403,
                    "Forbidden",
                )))),
                Reconciled::WatchFailed,
            ),
        ];
        let metrics = Metrics::default();
        for (result, expected) in &cases {
            assert_eq!(classify(result), *expected, "{result:?}");
            metrics.reconciled("LLMInference", classify(result));
        }
        let text = metrics.render();
        assert!(
            text.contains("perfsweep_reconcile_errors_total{controller=\"LLMInference\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("perfsweep_reconciles_total{controller=\"LLMInference\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("perfsweep_watch_errors_total{controller=\"LLMInference\"} 1\n"),
            "{text}"
        );
    }

    #[test]
    fn exposition_format() {
        let metrics = Metrics::default();
        metrics.reconciled("IPerf", Reconciled::Success);
        metrics.reconciled("IPerf", Reconciled::Error);
        metrics.reconcile_took("IPerf", Duration::from_millis(3));
        metrics.reconcile_took("IPerf", Duration::from_millis(300));
        metrics.register(Box::new(|f| {
            f.gauge("x", "h", vec![("l", "a\"b\\c\n".into())], 1.0);
            f.gauge("x", "h", vec![("l", "a\"b\\c\n".into())], 1.0);
            f.gauge("y", "h", Vec::new(), 0.25);
        }));
        let text = metrics.render();
        assert!(
            text.contains("# TYPE perfsweep_reconciles counter\n"),
            "{text}"
        );
        assert!(text.contains("perfsweep_reconciles_total{controller=\"IPerf\"} 2\n"));
        assert!(text.contains("perfsweep_reconcile_errors_total{controller=\"IPerf\"} 1\n"));
        assert!(text.contains("perfsweep_up 1\n"));
        assert!(text.contains("# TYPE perfsweep_reconcile_duration_seconds histogram\n"));
        assert!(
            text.contains("perfsweep_reconcile_duration_seconds_count{controller=\"IPerf\"} 2\n"),
            "{text}"
        );
        // 3 ms lands in the 4 ms bucket, 300 ms in the 512 ms one.
        assert!(
            text.contains(
                "perfsweep_reconcile_duration_seconds_bucket{le=\"0.004\",controller=\"IPerf\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "perfsweep_reconcile_duration_seconds_bucket{le=\"0.512\",controller=\"IPerf\"} 2\n"
            ),
            "{text}"
        );
        // Samples with the same labels add up; label values are escaped.
        assert!(text.contains("# TYPE x gauge\n"), "{text}");
        assert!(text.contains("x{l=\"a\\\"b\\\\c\\n\"} 2\n"), "{text}");
        assert!(text.contains("y 0.25\n"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// The `perfsweep_*` names in a PromQL expression.
    fn metric_names(expr: &str) -> Vec<String> {
        expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .filter(|token| token.starts_with("perfsweep_"))
            .map(str::to_owned)
            .collect()
    }

    /// Every `expr` and variable query in a Grafana dashboard, with where it is.
    fn queries(value: &serde_json::Value, at: &str, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, value) in map {
                    let here = format!("{at}.{key}");
                    match (key.as_str(), value) {
                        ("expr" | "query" | "definition", serde_json::Value::String(q)) => {
                            out.push((here, q.clone()));
                        }
                        _ => queries(value, &here, out),
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (index, item) in items.iter().enumerate() {
                    queries(item, &format!("{at}[{index}]"), out);
                }
            }
            _ => {}
        }
    }

    /// The chart's Grafana dashboard queries only metrics `/metrics` serves: every
    /// family is made to appear (a succeeded, judged benchmark with a result in a set, a
    /// judged set, a failed reconcile), then each name the dashboard uses must be one.
    #[test]
    fn the_grafana_dashboard_queries_only_served_metrics() {
        use kube::runtime::{reflector, watcher};
        use perfsweep_benchmarks::kinds::iperf::IPerf;
        use serde_json::json;

        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let raw = std::fs::read_to_string(root.join("benchmarks/testdata/iperf/tcp-4streams.json"))
            .expect("the iperf3 fixture");
        let info =
            perfsweep_benchmarks::kinds::registry::lookup("IPerf").expect("IPerf is registered");
        let parsed = info.parse(&raw).expect("the fixture parses");
        let accepted = json!({"type": "Accepted", "status": "True", "reason": "Met",
            "message": "", "lastTransitionTime": "2026-11-21T10:00:00Z"});
        let benchmark: IPerf = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "s-0123456789-0", "namespace": "default",
                         "labels": {labels::SET: "s", labels::CASE: "0123456789"}},
            "spec": {},
            "status": {"phase": "Succeeded", "result": parsed.result, "conditions": [accepted]},
        }))
        .expect("a succeeded IPerf");
        let set: BenchmarkSet = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
            "metadata": {"name": "s", "namespace": "default"},
            "spec": {"template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf"}},
            "status": {"phase": "Succeeded", "conditions": [accepted]},
        }))
        .expect("a judged set");
        let (benchmarks, mut writer) = reflector::store::<DeserializeGuard<IPerf>>();
        writer.apply_watcher_event(&watcher::Event::Apply(DeserializeGuard(Ok(benchmark))));
        let (sets, mut set_writer) = reflector::store::<DeserializeGuard<BenchmarkSet>>();
        set_writer.apply_watcher_event(&watcher::Event::Apply(DeserializeGuard(Ok(set))));

        let metrics = Metrics::default();
        metrics.reconciled("IPerf", Reconciled::Error);
        metrics.watch_benchmarks::<IPerf>(info, benchmarks);
        metrics.watch_sets(sets);
        metrics.reconcile_took("IPerf", std::time::Duration::from_millis(5));
        let text = metrics.render();
        let families: Vec<String> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split(' ').next())
            .map(str::to_owned)
            .collect();
        // What a query names: the samples (`_total`, `_bucket`, …), not the families.
        let served: Vec<String> = text
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split(['{', ' ']).next())
            .map(str::to_owned)
            .collect();

        let path = root.join("charts/perfsweep/dashboards/perfsweep.json");
        let text = std::fs::read_to_string(&path).expect("the chart's dashboard");
        let dashboard: serde_json::Value =
            serde_json::from_str(&text).expect("the dashboard is JSON");
        let mut found = Vec::new();
        queries(&dashboard, "", &mut found);
        let mut used = std::collections::BTreeSet::new();
        for (at, query) in &found {
            let names = metric_names(query);
            assert!(
                !names.is_empty() || !query.contains("perfsweep"),
                "{at}: {query}"
            );
            for name in names {
                assert!(
                    served.contains(&name),
                    "{at} queries {name}, which /metrics does not serve ({served:?})"
                );
                used.insert(name);
            }
        }
        // And the dashboard shows every family the operator serves.
        for family in &families {
            assert!(
                used.iter().any(|name| name.starts_with(family.as_str())),
                "the dashboard does not show {family}"
            );
        }
    }
}
