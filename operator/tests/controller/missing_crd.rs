//! A benchmark kind whose CRD the API server does not serve (issue 23: Helm never
//! upgrades `crds/`, and with the LLMInference CRD missing the set controller's watch
//! failed its first list forever, so no child of any kind was created). The double
//! leaves that CRD out (404 on its resources, absent from discovery); every other kind
//! must work, the sets that need the missing one must say so, and they must go on once
//! the CRD is installed, without a restart.

use crate::metrics::{free_port, wait_for_metrics};
use crate::support;

use std::time::Duration;

use perfsweep::controller::Settings;
use perfsweep_benchmarks::api::labels;
use serde_json::{Value, json};
use support::*;

fn llm_set(name: &str) -> Value {
    json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "BenchmarkSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "template": {
                "apiVersion": "perfsweep.io/v1alpha1",
                "kind": "LLMInference",
                "spec": {"endpoint": {"url": "http://vllm:8000", "modelName": "llama"}},
            },
            "permutations": {"product": {"numConcurrency": [[1], [8]]}},
            "maxParallel": 2,
        },
    })
}

fn llm_children(double: &perfsweep_testkit::ApiDouble, set: &str) -> usize {
    double
        .list(&LLMS, Some(NS))
        .iter()
        .filter(|child| child["metadata"]["labels"][labels::SET] == set)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_crd_stops_only_its_own_kind_until_it_is_installed() {
    let (double, llm_crd) = double_without_crd("LLMInference").await;
    let port = free_port();
    let settings = Settings {
        crd_recheck: Duration::from_millis(200),
        ..support::settings("missing-crd", port)
    };
    let operator = Operator::start_with_settings(&double, settings);

    // Every other kind works: the IPerf sweep's children are all created.
    let set = create_set(
        &double,
        iperf_set("sweep", json!({"streams": [1, 2, 3]}), 1, 3, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    wait_until(WAIT, "the IPerf set's three children", || {
        let names = child_names(&double, "sweep");
        if names == sorted(&expected) {
            Ok(())
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await;

    // The set that needs the missing kind says which CRD is missing, in a condition and
    // a Warning event, and creates nothing.
    create_set(&double, llm_set("chat")).await;
    let status = wait_for_status(&double, "chat", "CRDInstalled=False", |status| {
        condition(status, "CRDInstalled")["status"] == "False"
    })
    .await;
    let missing = condition(&status, "CRDInstalled");
    assert_eq!(missing["reason"], "CRDMissing", "{status}");
    let message = missing["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("llminferences.perfsweep.io") && message.contains("docs/upgrading.md"),
        "{message}"
    );
    assert_eq!(status["phase"], "Pending", "{status}");
    assert_eq!(llm_children(&double, "chat"), 0);
    let events = events_about(&double, "chat");
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "CRDMissing" && e["type"] == "Warning"),
        "{events:?}"
    );
    // And /metrics names the kind.
    wait_for_metrics(
        port,
        "perfsweep_crd_missing on /metrics",
        &[
            "perfsweep_crd_missing{kind=\"LLMInference\"} 1\n",
            "perfsweep_crd_missing{kind=\"IPerf\"} 0\n",
        ],
    )
    .await;

    // The CRD is installed: the set goes on, without a restart.
    double
        .register_crd(&llm_crd)
        .expect("installing the LLMInference CRD");
    wait_until(WAIT, "the LLM set's two children", || {
        match llm_children(&double, "chat") {
            2 => Ok(()),
            n => Err(format!(
                "{n} children; status {}; requests for llminferences: {:?}",
                set_status(&double, "chat"),
                double
                    .requests()
                    .iter()
                    .filter(|r| r.path.contains("llminferences")
                        || r.path.ends_with("perfsweep.io/v1alpha1"))
                    .map(|r| format!("{} {} {}", r.verb, r.path, r.status_code))
                    .collect::<Vec<_>>()
            )),
        }
    })
    .await;
    let status = wait_for_status(&double, "chat", "CRDInstalled=True", |status| {
        condition(status, "CRDInstalled")["status"] == "True"
    })
    .await;
    assert_eq!(condition(&status, "CRDInstalled")["reason"], "Served");
    wait_for_metrics(
        port,
        "perfsweep_crd_missing 0 for LLMInference",
        &["perfsweep_crd_missing{kind=\"LLMInference\"} 0\n"],
    )
    .await;

    operator.stop().await;
}

/// An installed CRD older than the operator (Helm never upgrades `crds/`): its kind still
/// runs, and the sets of that kind, the metrics and the log say the CRD is not this
/// operator's until it is replaced by the current one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outdated_crd_is_reported_and_its_kind_still_runs() {
    let double = double_with_crds().await;
    let crds = perfsweep_testkit::Gvr::CUSTOM_RESOURCE_DEFINITIONS;
    let current = perfsweep_benchmarks::crds::schema_digest(
        &perfsweep_benchmarks::kinds::registry::lookup("IPerf")
            .expect("IPerf is a kind")
            .crd,
    );
    let annotate = |digest: &str| {
        double
            .patch(
                &crds,
                None,
                "iperfs.perfsweep.io",
                json!({"metadata": {"annotations": {"perfsweep.io/schema-digest": digest}}}),
            )
            .expect("annotating the IPerf CRD");
    };
    annotate("0000000000000000000000000000000000000000000000000000000000000000");
    // Reads of the CRDs the API server refuses (403) or fails (503) are tried again on
    // the next look: nothing waits for them, and the outdated CRD is still reported.
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("get", "customresourcedefinitions"),
        403,
        "Forbidden",
    );
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("get", "customresourcedefinitions").times(2),
        503,
        "ServiceUnavailable",
    );
    let port = free_port();
    let settings = Settings {
        crd_recheck: Duration::from_millis(200),
        ..support::settings("outdated-crd", port)
    };
    let operator = Operator::start_with_settings(&double, settings);

    let set = create_set(
        &double,
        iperf_set("sweep", json!({"streams": [1, 2]}), 1, 2, "Continue"),
    )
    .await;
    let expected = expected_names(&set);
    wait_until(
        WAIT,
        "the IPerf set's children, despite the old CRD",
        || {
            let names = child_names(&double, "sweep");
            if names == sorted(&expected) {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        },
    )
    .await;
    let status = wait_for_status(&double, "sweep", "CRDInstalled reason CRDOutdated", |s| {
        condition(s, "CRDInstalled")["reason"] == "CRDOutdated"
    })
    .await;
    let outdated = condition(&status, "CRDInstalled");
    let message = outdated["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("iperfs.perfsweep.io") && message.contains("docs/upgrading.md"),
        "{message}"
    );
    wait_until(WAIT, "a CRDOutdated Warning event", || {
        let events = events_about(&double, "sweep");
        let warnings = events
            .iter()
            .filter(|e| e["reason"] == "CRDOutdated" && e["type"] == "Warning")
            .count();
        if warnings == 1 {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    wait_for_metrics(
        port,
        "perfsweep_crd_outdated on /metrics",
        &[
            "perfsweep_crd_outdated{kind=\"IPerf\"} 1\n",
            "perfsweep_crd_outdated{kind=\"Fio\"} 0\n",
        ],
    )
    .await;

    // The current CRD is installed: the condition says so, the gauge drops.
    annotate(&current);
    wait_for_status(&double, "sweep", "CRDInstalled reason Served", |s| {
        condition(s, "CRDInstalled")["reason"] == "Served"
    })
    .await;
    wait_for_metrics(
        port,
        "perfsweep_crd_outdated 0 for IPerf",
        &["perfsweep_crd_outdated{kind=\"IPerf\"} 0\n"],
    )
    .await;
    for refused in [403, 503] {
        assert!(
            double.requests().iter().any(|r| r.verb == "get"
                && r.path.contains("customresourcedefinitions/")
                && r.status_code == refused),
            "a CRD read answered {refused} was made (and survived)"
        );
    }
    // The read is by name, with the chart's rules (the double enforces them).
    assert!(
        double.requests().iter().any(|r| r.verb == "get"
            && r.path
                .ends_with("customresourcedefinitions/iperfs.perfsweep.io")
            && r.status_code == 200),
        "the operator reads the IPerf CRD by name"
    );

    operator.stop().await;
}
