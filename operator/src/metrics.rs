//! Prometheus metrics on `/metrics` (the health server), in the text exposition format,
//! written by hand: a few counters the controllers bump, and gauges computed at scrape
//! time from the controllers' own caches (reflector stores), so they are exact and cost
//! nothing between scrapes.
//!
//! Labels stay low-cardinality: kind, namespace, set, case id (shared by a case's
//! repetitions; a benchmark outside a set is its own case), never per-repetition names.
//! kube-runtime does not expose its work queue, so there is no queue-depth metric.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::core::DeserializeGuard;
use kube::runtime::reflector::Store;
use perfsweep_benchmarks::labels;
use perfsweep_benchmarks::registry::KindInfo;
use perfsweep_benchmarks::set::BenchmarkSet;

use crate::controller::benchmark::kind::Benchmark;

type Labels = Vec<(&'static str, String)>;
type Collector = Box<dyn Fn(&mut Families) + Send + Sync>;

/// One metric family: (help, type, samples).
type Family = (&'static str, &'static str, Vec<(Labels, f64)>);

/// Metric families being assembled for one scrape, by name.
#[derive(Default)]
pub struct Families(BTreeMap<&'static str, Family>);

impl Families {
    pub fn add(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
        labels: Labels,
        value: f64,
    ) {
        let family = self.0.entry(name).or_insert((help, kind, Vec::new()));
        match family.2.iter_mut().find(|(l, _)| *l == labels) {
            Some((_, v)) if kind == "gauge" || kind == "counter" => *v += value,
            _ => family.2.push((labels, value)),
        }
    }

    /// The text exposition format, version 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, (help, kind, samples)) in &self.0 {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for (labels, value) in samples {
                out.push_str(name);
                if !labels.is_empty() {
                    let pairs: Vec<String> = labels
                        .iter()
                        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
                        .collect();
                    let _ = write!(out, "{{{}}}", pairs.join(","));
                }
                let _ = writeln!(out, " {}", number(*value));
            }
        }
        out
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{value}")
    }
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

/// The operator's metrics.
#[derive(Default)]
pub struct Metrics {
    /// (controller, outcome) → reconciles.
    reconciles: Mutex<BTreeMap<(String, &'static str), u64>>,
    collectors: Mutex<Vec<Collector>>,
}

impl Metrics {
    /// Counts one item of the output of `controller` (a kind, or `BenchmarkSet`).
    pub fn reconciled(&self, controller: &str, what: Reconciled) {
        let outcome = match what {
            Reconciled::Success => "success",
            Reconciled::Error => "error",
            Reconciled::WatchFailed => "watch_error",
            Reconciled::Benign => return,
        };
        if let Ok(mut map) = self.reconciles.lock() {
            *map.entry((controller.to_owned(), outcome)).or_default() += 1;
        }
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
                f.add(
                    "perfsweep_benchmarks",
                    "gauge",
                    "Benchmarks by kind and phase.",
                    vec![("kind", info.kind.to_owned()), ("phase", phase)],
                    1.0,
                );
                let Some(status) = status else { continue };
                if let Some(accepted) = status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == perfsweep_benchmarks::acceptance::CONDITION)
                {
                    f.add(
                        "perfsweep_benchmarks_judged",
                        "gauge",
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
            f.add(
                "perfsweep_benchmarks_unreadable",
                "gauge",
                "Benchmarks that do not deserialize and are not run (see their InvalidObject Warning events), by kind.",
                vec![("kind", info.kind.to_owned())],
                f64::from(unreadable),
            );
            for (labels, (sum, count)) in cases {
                f.add(
                    "perfsweep_result_headline",
                    "gauge",
                    "Mean of the headline metric over a case's succeeded repetitions (unit in the metric label).",
                    labels.clone(),
                    sum / f64::from(count),
                );
                f.add(
                    "perfsweep_result_repetitions",
                    "gauge",
                    "Succeeded repetitions behind perfsweep_result_headline.",
                    labels,
                    f64::from(count),
                );
            }
        }));
    }

    /// BenchmarkSets by phase and acceptance verdict, from the set controller's cache.
    pub fn watch_sets(&self, store: Store<BenchmarkSet>) {
        self.register(Box::new(move |f| {
            for set in store.state() {
                let status = set.status.as_ref();
                let phase = status
                    .and_then(|s| s.phase)
                    .map_or_else(|| "Pending".into(), |p| format!("{p:?}"));
                f.add(
                    "perfsweep_benchmarksets",
                    "gauge",
                    "BenchmarkSets by phase.",
                    vec![("phase", phase)],
                    1.0,
                );
                let accepted = status.and_then(|s| {
                    s.conditions
                        .iter()
                        .find(|c| c.type_ == perfsweep_benchmarks::acceptance::CONDITION)
                });
                if let Some(accepted) = accepted {
                    f.add(
                        "perfsweep_benchmarksets_accepted",
                        "gauge",
                        "BenchmarkSets with acceptance criteria, by Accepted condition status.",
                        vec![("accepted", accepted.status.clone())],
                        1.0,
                    );
                }
            }
        }));
    }

    /// 1 for each benchmark kind whose CRD the API server does not serve, 0 for the
    /// others: its benchmarks and sets wait until it is installed. Likewise for a CRD
    /// installed but not this operator's (outdated).
    pub fn watch_served(&self, served: std::sync::Arc<crate::controller::served::ServedKinds>) {
        self.register(Box::new(move |f| {
            for kind in perfsweep_benchmarks::registry::kinds() {
                f.add(
                    "perfsweep_crd_missing",
                    "gauge",
                    "1 while the API server does not serve the kind (its CRD is not installed): its benchmarks wait.",
                    vec![("kind", kind.kind.to_owned())],
                    if served.is_missing(kind.kind) { 1.0 } else { 0.0 },
                );
                f.add(
                    "perfsweep_crd_outdated",
                    "gauge",
                    "1 while the kind's installed CRD is not this operator's (its schema digest differs): install the CRDs of this version.",
                    vec![("kind", kind.kind.to_owned())],
                    if served.is_outdated(kind.kind) { 1.0 } else { 0.0 },
                );
            }
        }));
    }

    fn register(&self, collector: Collector) {
        if let Ok(mut collectors) = self.collectors.lock() {
            collectors.push(collector);
        }
    }

    /// Everything, as the text exposition format.
    pub fn render(&self) -> String {
        let mut f = Families::default();
        f.add(
            "perfsweep_up",
            "gauge",
            "1 while this replica runs the controllers.",
            Vec::new(),
            1.0,
        );
        if let Ok(map) = self.reconciles.lock() {
            for ((controller, outcome), count) in map.iter() {
                let labels = vec![("controller", controller.clone())];
                if *outcome == "watch_error" {
                    f.add(
                        "perfsweep_watch_errors_total",
                        "counter",
                        "Watch failures other than expiry (410); no reconcile ran.",
                        labels,
                        *count as f64,
                    );
                    continue;
                }
                if *outcome == "error" {
                    f.add(
                        "perfsweep_reconcile_errors_total",
                        "counter",
                        "Reconciles that failed (retried with backoff).",
                        labels.clone(),
                        *count as f64,
                    );
                }
                f.add(
                    "perfsweep_reconciles_total",
                    "counter",
                    "Reconciles, successful or not.",
                    labels,
                    *count as f64,
                );
            }
        }
        if let Ok(collectors) = self.collectors.lock() {
            for collect in collectors.iter() {
                collect(&mut f);
            }
        }
        f.render()
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
        let text = metrics.render();
        assert!(text.contains("# TYPE perfsweep_reconciles_total counter\n"));
        assert!(text.contains("perfsweep_reconciles_total{controller=\"IPerf\"} 2\n"));
        assert!(text.contains("perfsweep_reconcile_errors_total{controller=\"IPerf\"} 1\n"));
        assert!(text.contains("perfsweep_up 1\n"));
        let mut f = Families::default();
        f.add(
            "x",
            "gauge",
            "h",
            vec![("l", "a\"b\\c\n".into())],
            f64::INFINITY,
        );
        assert_eq!(
            f.render(),
            "# HELP x h\n# TYPE x gauge\nx{l=\"a\\\"b\\\\c\\n\"} +Inf\n"
        );
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
        let info = perfsweep_benchmarks::registry::lookup("IPerf").expect("IPerf is registered");
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
        let (sets, mut set_writer) = reflector::store::<BenchmarkSet>();
        set_writer.apply_watcher_event(&watcher::Event::Apply(set));

        let metrics = Metrics::default();
        metrics.reconciled("IPerf", Reconciled::Error);
        metrics.watch_benchmarks::<IPerf>(info, benchmarks);
        metrics.watch_sets(sets);
        let served: Vec<String> = metrics
            .render()
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|rest| rest.split(' ').next())
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
        for name in &served {
            assert!(used.contains(name), "the dashboard does not show {name}");
        }
    }
}
