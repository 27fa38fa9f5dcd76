//! `/metrics` of an operator running against the API double: the exposition has the
//! controllers' counters, the reconcile-duration histogram and the benchmarks and sets
//! from their caches, and a real Prometheus scrapes it (skipped with a reason when
//! Prometheus is missing outside CI; CI installs Debian's package).

use crate::prometheus::Prometheus;
use crate::support;

use serde_json::json;
use support::{NS, Operator, WAIT, create_set, double_with_crds, wait_until};

pub(crate) use crate::prometheus::free_port;

/// Waits until `/metrics` on `port` holds every line of `lines`; returns the exposition.
pub(crate) async fn wait_for_metrics(port: u16, what: &str, lines: &[&str]) -> String {
    wait_until(WAIT, what, || {
        let text = scrape(port)?;
        if lines.iter().all(|line| text.contains(line)) {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await
}

pub(crate) fn scrape(port: u16) -> Result<String, String> {
    let (head, body) = crate::prometheus::http_get(port, "/metrics")?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(head);
    }
    if !head
        .to_ascii_lowercase()
        .contains("application/openmetrics-text; version=1.0.0")
    {
        return Err(format!("content type: {head}"));
    }
    Ok(body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_and_scraped_by_prometheus() {
    let double = double_with_crds().await;
    let port = free_port();
    let settings = support::settings("metrics-test", port);
    let operator = Operator::start_with_settings(&double, settings);
    create_set(
        &double,
        json!({
            "apiVersion": "perfsweep.io/v1alpha1",
            "kind": "BenchmarkSet",
            "metadata": {"name": "scraped", "namespace": NS},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                             "spec": {"duration": 5}},
                "acceptance": [{"metric": "received_bits_per_second", "min": 1e9}],
            },
        }),
    )
    .await;

    let text = wait_for_metrics(
        port,
        "/metrics with the pending IPerf",
        &[
            "perfsweep_benchmarks{kind=\"IPerf\",phase=\"Pending\"} 1\n",
            "perfsweep_benchmarksets_accepted{accepted=\"Unknown\"} 1\n",
            "perfsweep_reconciles_total{controller=\"IPerf\"}",
        ],
    )
    .await;
    eprintln!("{text}");
    assert!(text.contains("perfsweep_up 1\n"), "{text}");
    assert!(
        text.contains("# TYPE perfsweep_reconciles counter\n"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE perfsweep_reconcile_duration_seconds histogram\n"),
        "{text}"
    );
    assert!(text.contains("perfsweep_reconciles_total{controller=\"BenchmarkSet\"}"));
    assert!(text.contains("perfsweep_reconciles_total{controller=\"IPerf\"}"));
    assert!(
        text.contains("perfsweep_benchmarksets{phase=\"Running\"} 1\n"),
        "{text}"
    );

    // Prometheus itself scrapes the endpoint: its OpenMetrics parser is strict (the
    // `# EOF`, the suffixes, the escaping), and its query API shows the histogram per
    // controller.
    if let Some(prometheus) = Prometheus::scraping(&format!("127.0.0.1:{port}"), &[]) {
        let series = wait_until(
            WAIT,
            "Prometheus to have scraped a reconcile-duration histogram per controller",
            || {
                let answer = prometheus.query("perfsweep_reconcile_duration_seconds_count")?;
                let controllers: Vec<&str> = answer["data"]["result"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|series| series["metric"]["controller"].as_str())
                    .collect();
                if controllers.contains(&"IPerf") && controllers.contains(&"BenchmarkSet") {
                    Ok(answer)
                } else {
                    Err(format!("{answer} (targets: {:?})", prometheus.targets()))
                }
            },
        )
        .await;
        eprintln!("Prometheus has: {series}");
        if let Err(targets) = prometheus.target_up() {
            panic!("the scrape is up and without error: {targets}");
        }
        let buckets = prometheus
            .query("perfsweep_reconcile_duration_seconds_bucket")
            .expect("the buckets");
        assert!(
            buckets["data"]["result"]
                .as_array()
                .is_some_and(|series| series.len() >= 2 * 18),
            "17 buckets and +Inf for each of IPerf and BenchmarkSet: {buckets}"
        );
    }
    operator.stop().await;
}

/// Finding 7 of issue 13: a watch that expires (410, re-listed) and a reconcile request
/// for an object no longer in the cache are what a real cluster does all day; neither is
/// a failed reconcile. A pod owned by an IPerf that does not exist makes kube-runtime
/// ask for a reconcile of that IPerf (`ObjectNotFound`), with no LLMInference or IPerf
/// in the cluster; then every watch expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn benign_watch_events_are_no_reconcile_errors() {
    let double = double_with_crds().await;
    let port = free_port();
    let settings = support::settings("benign", port);
    let operator = Operator::start_with_settings(&double, settings);
    wait_until(WAIT, "the operator's watches", || {
        let watches = double
            .requests()
            .iter()
            .filter(|r| r.verb == "watch")
            .count();
        if watches >= 10 {
            Ok(())
        } else {
            Err(format!("{watches} watches"))
        }
    })
    .await;
    double
        .create(
            &perfsweep_testkit::Gvr::PODS,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "orphan-client-0", "namespace": NS,
                    "labels": {"app.kubernetes.io/managed-by": "perfsweep", "perfsweep.io/benchmark": "orphan"},
                    "ownerReferences": [{"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                        "name": "orphan", "uid": "0000-gone", "controller": true}],
                },
                "spec": {"containers": [{"name": "agent", "image": "x"}]},
            }),
        )
        .expect("creating the orphan pod");
    let lists_before = double
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .count();
    double.expire_watches();
    // Every controller re-lists after its watch answered 410 Expired.
    wait_until(WAIT, "the watchers to re-list after 410", || {
        let lists = double
            .requests()
            .iter()
            .filter(|r| r.verb == "list")
            .count();
        if lists >= lists_before + 9 {
            Ok(())
        } else {
            Err(format!("{} new lists", lists - lists_before))
        }
    })
    .await;
    let text = scrape(port).unwrap_or_else(|e| panic!("scraping /metrics: {e}"));
    let errors: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("perfsweep_reconcile_errors_total")
                || l.starts_with("perfsweep_watch_errors_total")
        })
        .collect();
    assert!(
        errors.is_empty(),
        "benign events counted as errors: {errors:?}\n{text}"
    );
    operator.stop().await;
}
