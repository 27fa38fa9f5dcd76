//! The benchmark controllers against the API double: the test creates IPerf benchmarks
//! as a user would and plays the scheduler and kubelet by patching pod status and
//! setting the agent container's log (ending with a real report of real iperf3 output).

use crate::support;

use futures::StreamExt;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::iperf::IPerf;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use support::kubelet::{self, AGENT, Fixture, finish_pod, now, patch_pod_status, run_pod};
use support::{IPERFS, NS, Operator, WAIT, condition, double_with_crds, wait_until};

/// Creates an IPerf through `kube::Api<IPerf>`, as a user would.
async fn create_iperf(double: &ApiDouble, name: &str, spec: Value) -> IPerf {
    let object: IPerf = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "IPerf",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    }))
    .expect("the test's IPerf deserializes");
    Api::<IPerf>::namespaced(double.client(), NS)
        .create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating IPerf {name}: {e}"))
}

fn pod_name(benchmark: &str, role: &str) -> String {
    format!("{benchmark}-{role}-0")
}

fn status_of(double: &ApiDouble, name: &str) -> Value {
    kubelet::status_of(double, &IPERFS, name)
}

/// Waits until the benchmark's status satisfies `accept`; returns it.
async fn wait_for_status(
    double: &ApiDouble,
    name: &str,
    what: &str,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    wait_until(WAIT, format_args!("IPerf {name}: {what}"), || {
        let status = status_of(double, name);
        if accept(&status) {
            Ok(status)
        } else {
            Err(format!("status {status}"))
        }
    })
    .await
}

async fn wait_for_phase(double: &ApiDouble, name: &str, phase: &str) -> Value {
    wait_for_status(double, name, &format!("phase {phase}"), |s| {
        s["phase"] == phase
    })
    .await
}

/// Waits until the benchmark's pods (and Service and PodGroup) exist; returns the pods.
async fn wait_for_pods(double: &ApiDouble, name: &str, count: usize) -> Vec<Value> {
    wait_until(WAIT, format_args!("{count} pods of {name}"), || {
        let pods = owned(double, &Gvr::PODS, name);
        if pods.len() == count {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await
}

/// Objects of a type that belong to the IPerf `name` (directly or through its PodGroup).
fn owned(double: &ApiDouble, gvr: &Gvr, name: &str) -> Vec<Value> {
    kubelet::owned_by(double, gvr, "IPerf", name)
}

async fn wait_for_cleanup(double: &ApiDouble, name: &str) {
    kubelet::wait_for_cleanup(double, "IPerf", name).await;
}

fn scheduled() -> Value {
    json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}])
}

/// Real iperf3 output (`benchmarks/testdata/iperf/<file>`) and what perfsweep parses from it.
fn fixture(file: &str) -> Fixture {
    kubelet::fixture("IPerf", &format!("iperf/{file}"))
}

/// The log of the client's agent: tool chatter, then the report line.
fn agent_log(outcome: Outcome, raw: &str) -> String {
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome,
        command: vec!["iperf3".into(), "--client".into(), "10.0.0.7".into()],
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: "2026-11-21T10:00:10Z".into(),
        host: Some("node-b".into()),
        raw_output: Some(raw.to_owned()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
    };
    format!(
        "perfsweep agent: waiting for server-0\nperfsweep agent: running iperf3\n{}\n",
        report.to_line()
    )
}

fn reason_of(status: &Value, type_: &str) -> String {
    condition(status, type_)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Runs both pods of an IPerf so that it reaches Running.
async fn start_benchmark(double: &ApiDouble, name: &str) {
    wait_for_pods(double, name, 2).await;
    run_pod(double, &pod_name(name, "server"));
    run_pod(double, &pod_name(name, "client"));
    wait_for_phase(double, name, "Running").await;
}

/// The events recorded about the IPerf `name`, as `reason: note`.
fn events(double: &ApiDouble, name: &str) -> Vec<String> {
    double
        .list(&Gvr::EVENTS_V1, Some(NS))
        .into_iter()
        .filter(|e| e["regarding"]["kind"] == "IPerf" && e["regarding"]["name"] == name)
        .map(|e| {
            format!(
                "{}: {}",
                e["reason"].as_str().unwrap_or_default(),
                e["note"]
            )
        })
        .collect()
}

#[tokio::test]
async fn runs_an_iperf_to_a_result_and_cleans_up() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let created = create_iperf(&double, "happy", json!({"duration": 10, "streams": 4})).await;
    let uid = created.metadata.uid.clone().expect("a uid");

    // Pending: a PodGroup owned by the benchmark, and the gang it owns: the Service and
    // one pod per role (deleting the PodGroup deletes them all).
    let pods = wait_for_pods(&double, "happy", 2).await;
    let mut names: Vec<&str> = pods
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap_or_default())
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["happy-client-0", "happy-server-0"]);
    let groups = owned(&double, &Gvr::PODGROUPS, "happy");
    assert_eq!(groups.len(), 1);
    assert_eq!(
        groups[0]["metadata"]["ownerReferences"][0]["uid"],
        uid.as_str()
    );
    let group_uid = &groups[0]["metadata"]["uid"];
    let services = owned(&double, &Gvr::SERVICES, "happy");
    assert_eq!(services.len(), 1);
    for object in pods.iter().chain(&services) {
        let owners = &object["metadata"]["ownerReferences"];
        assert_eq!(owners.as_array().map(Vec::len), Some(1), "{object}");
        assert_eq!(owners[0]["kind"], "PodGroup", "{object}");
        assert_eq!(owners[0]["uid"], *group_uid, "{object}");
    }
    let status = wait_for_status(&double, "happy", "phase Pending with conditions", |s| {
        s["phase"] == "Pending" && !condition(s, "Ready").is_null()
    })
    .await;
    assert_eq!(status["observedGeneration"], 1, "{status}");
    assert_eq!(condition(&status, "Ready")["status"], "False", "{status}");

    // Scheduled and running: phase Running, startedAt, Ready and GangScheduled.
    run_pod(&double, "happy-server-0");
    run_pod(&double, "happy-client-0");
    let status = wait_for_phase(&double, "happy", "Running").await;
    assert!(status["startedAt"].is_string(), "{status}");
    assert_eq!(reason_of(&status, "Ready"), "AllPodsRunning", "{status}");
    assert_eq!(
        condition(&status, "Scheduled")["status"],
        "True",
        "{status}"
    );
    assert_eq!(
        condition(&status, "GangScheduled")["status"],
        "True",
        "{status}"
    );

    // The client finishes with a real iperf3 result in its log.
    let fixture = fixture("tcp-4streams.json");
    let outcome = Outcome::Succeeded {
        result: Some(fixture.result.clone()),
        summary: Some(fixture.summary.clone()),
    };
    double.set_pod_log(
        NS,
        "happy-client-0",
        AGENT,
        &agent_log(outcome, &fixture.raw),
    );
    finish_pod(&double, "happy-client-0", 0, "");
    let status = wait_for_phase(&double, "happy", "Succeeded").await;
    let expected = fixture.result["receivedBitsPerSecond"]
        .as_f64()
        .expect("the fixture has a received rate");
    assert!(expected > 0.0);
    assert_eq!(
        status["result"]["receivedBitsPerSecond"].as_f64(),
        Some(expected),
        "{status}"
    );
    assert_eq!(status["result"]["numStreams"], 4, "{status}");
    assert_eq!(status["summary"], fixture.summary.as_str(), "{status}");
    assert_eq!(
        condition(&status, "Completed")["status"],
        "True",
        "{status}"
    );
    assert!(status["finishedAt"].is_string(), "{status}");
    assert!(condition(&status, "Failed").is_null(), "{status}");
    // The digest of the evidence is recorded next to the result.
    let digest = sha256_hex(fixture.raw.as_bytes());
    wait_until(WAIT, "the evidence digest annotation", || {
        let benchmark = double.get(&IPERFS, Some(NS), "happy");
        let annotation = benchmark
            .as_ref()
            .map(|b| &b["metadata"]["annotations"]["perfsweep.io/evidence-sha256"]);
        match annotation {
            Some(value) if *value == digest.as_str() => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // The report, raw output included, outlives the pods in an owned ConfigMap.
    let evidence = double
        .get(&Gvr::CONFIGMAPS, Some(NS), "happy-evidence")
        .expect("the evidence ConfigMap exists");
    assert_eq!(evidence["metadata"]["ownerReferences"][0]["name"], "happy");
    let kept: perfsweep_benchmarks::execution::agent_report::AgentReport = serde_json::from_str(
        evidence["data"]["report.json"]
            .as_str()
            .expect("the report is kept"),
    )
    .expect("the kept report parses");
    assert_eq!(kept.raw_output.as_deref(), Some(fixture.raw.as_str()));
    assert!(kept.evidence_is_intact());

    // Nothing lingers; the benchmark stays with its result.
    wait_for_cleanup(&double, "happy").await;
    assert_eq!(status_of(&double, "happy")["phase"], "Succeeded");
    let events = events(&double, "happy");
    for reason in ["Running", "Succeeded"] {
        assert!(
            events.iter().any(|e| e.starts_with(&format!("{reason}:"))),
            "no {reason} event in {events:?}"
        );
    }
    let pod_creates = double
        .requests()
        .into_iter()
        .filter(|r| r.verb == "create" && r.resource == "pods" && r.status_code == 201)
        .count();
    assert_eq!(pod_creates, 2, "a finished benchmark is never run again");
}

#[tokio::test]
async fn a_finished_benchmark_is_never_run_again() {
    let double = double_with_crds().await;
    let operator = Operator::start(&double, "first");
    create_iperf(&double, "once", json!({})).await;
    start_benchmark(&double, "once").await;
    let fixture = fixture("tcp-1stream.json");
    let outcome = Outcome::Succeeded {
        result: Some(fixture.result),
        summary: Some(fixture.summary),
    };
    double.set_pod_log(
        NS,
        "once-client-0",
        AGENT,
        &agent_log(outcome, &fixture.raw),
    );
    finish_pod(&double, "once-client-0", 0, "");
    wait_for_phase(&double, "once", "Succeeded").await;
    wait_for_cleanup(&double, "once").await;
    operator.stop().await;

    // A restarted operator sees a finished benchmark: it creates nothing, and deletes
    // what is left of it (here a pod whose delete was lost before the restart).
    let uid = double
        .get(&IPERFS, Some(NS), "once")
        .map(|b| b["metadata"]["uid"].clone())
        .expect("the benchmark exists");
    double
        .create(
            &Gvr::PODS,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "once-leftover", "namespace": NS,
                    "labels": {"app.kubernetes.io/managed-by": "perfsweep"},
                    "ownerReferences": [{
                        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "name": "once",
                        "uid": uid, "controller": true,
                    }],
                },
                "spec": {"containers": [{"name": AGENT, "image": "unused"}]},
            }),
        )
        .expect("creating the leftover pod");
    double.clear_requests();
    let _operator = Operator::start(&double, "second");
    wait_until(
        WAIT,
        "the restarted operator to delete the finished benchmark's leftover pod",
        || match double.get(&Gvr::PODS, Some(NS), "once-leftover") {
            None => Ok(()),
            Some(_) => Err("the leftover pod is still there".to_owned()),
        },
    )
    .await;
    assert!(
        !double
            .requests()
            .iter()
            .any(|r| r.verb == "create" && r.resource == "pods"),
        "no pod is created for a finished benchmark"
    );
    assert_eq!(status_of(&double, "once")["phase"], "Succeeded");
}

#[tokio::test]
async fn an_image_that_cannot_be_pulled_fails_the_benchmark() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(
        &double,
        "pull",
        json!({"image": "registry.invalid/iperf:nope"}),
    )
    .await;
    wait_for_pods(&double, "pull", 2).await;
    patch_pod_status(
        &double,
        "pull-server-0",
        json!({
            "phase": "Pending",
            "conditions": scheduled(),
            "containerStatuses": [{
                "name": AGENT, "image": "registry.invalid/iperf:nope", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff",
                    "message": "Back-off pulling image \"registry.invalid/iperf:nope\""}},
            }],
        }),
    );
    let status = wait_for_phase(&double, "pull", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "ImagePullFailure", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("registry.invalid/iperf:nope"), "{message}");
    assert_eq!(
        condition(&status, "Completed")["status"],
        "False",
        "{status}"
    );
    wait_for_cleanup(&double, "pull").await;
    assert!(
        events(&double, "pull")
            .iter()
            .any(|e| e.starts_with("ImagePullFailure:")),
        "a warning event says why"
    );
}

#[tokio::test]
async fn a_failed_pod_fails_the_benchmark_with_its_message() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "refused", json!({})).await;
    start_benchmark(&double, "refused").await;
    finish_pod(&double, "refused-client-0", 1, "connection refused");
    let status = wait_for_phase(&double, "refused", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "PodFailed", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("connection refused"), "{message}");
    assert!(message.contains("refused-client-0"), "{message}");
    wait_for_cleanup(&double, "refused").await;
}

#[tokio::test]
async fn the_agents_reported_failure_is_preferred_to_the_exit_code() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "reported", json!({})).await;
    start_benchmark(&double, "reported").await;
    let failed = Outcome::Failed {
        reason: "ToolFailed".into(),
        message: "iperf3 exited with status 1: unable to connect to server".into(),
    };
    double.set_pod_log(
        NS,
        "reported-client-0",
        AGENT,
        &agent_log(failed, "iperf3: error\n"),
    );
    finish_pod(&double, "reported-client-0", 1, "iperf3 failed");
    let status = wait_for_phase(&double, "reported", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "ToolFailed", "{status}");
    assert!(
        condition(&status, "Failed")["message"]
            .as_str()
            .is_some_and(|m| m.contains("unable to connect")),
        "{status}"
    );
}

#[tokio::test]
async fn pods_unschedulable_past_the_timeout_fail_the_benchmark() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    // A long timeout first, shortened once the operator has reported the pods
    // unschedulable: with a fixed 2 s one, a loaded machine reached the deadline before
    // the operator had seen the pods' conditions, and the benchmark ended TimedOut.
    create_iperf(&double, "stuck", json!({"timeout": "10m"})).await;
    wait_for_pods(&double, "stuck", 2).await;
    let unschedulable = json!({
        "phase": "Pending",
        "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu.",
            "lastTransitionTime": now(),
        }],
    });
    patch_pod_status(&double, "stuck-server-0", unschedulable.clone());
    patch_pod_status(&double, "stuck-client-0", unschedulable);
    let status = wait_for_status(&double, "stuck", "Scheduled=False Unschedulable", |s| {
        reason_of(s, "Scheduled") == "Unschedulable" || s["phase"] == "Failed"
    })
    .await;
    assert_eq!(
        status["phase"], "Pending",
        "not before the timeout: {status}"
    );

    double
        .patch(
            &IPERFS,
            Some(NS),
            "stuck",
            json!({"spec": {"timeout": "1s"}}),
        )
        .expect("shortening the timeout of stuck");
    let status = wait_for_phase(&double, "stuck", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "Unschedulable", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("Insufficient cpu"), "{message}");
    wait_for_cleanup(&double, "stuck").await;
}

#[tokio::test]
async fn a_log_without_a_usable_report_is_unparseable() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let cases = [
        (
            "garbage",
            "iperf3: interrupt - the client has terminated\n".to_owned(),
            "no PERFSWEEP-REPORT line",
        ),
        (
            "tampered",
            {
                let fixture = fixture("tcp-1stream.json");
                let log = agent_log(
                    Outcome::Succeeded {
                        result: Some(fixture.result),
                        summary: Some(fixture.summary),
                    },
                    &fixture.raw,
                );
                // The evidence no longer matches its digest.
                assert!(log.contains("sum_received"), "the fixture is iperf3 JSON");
                log.replacen("sum_received", "sum_receivedX", 1)
            },
            "does not match its SHA-256 digest",
        ),
    ];
    for (name, log, _) in &cases {
        create_iperf(&double, name, json!({})).await;
        start_benchmark(&double, name).await;
        double.set_pod_log(NS, &pod_name(name, "client"), AGENT, log);
        finish_pod(&double, &pod_name(name, "client"), 0, "");
    }
    for (name, _, why) in &cases {
        let status = wait_for_phase(&double, name, "Failed").await;
        let message = condition(&status, "Failed")["message"]
            .as_str()
            .unwrap_or_default();
        assert!(message.contains(why), "{name}: {message}");
        assert_eq!(
            reason_of(&status, "Failed"),
            "ResultUnparseable",
            "{name}: {status}"
        );
        assert!(status.get("result").is_none(), "{name}: {status}");
        wait_for_cleanup(&double, name).await;
    }
}

#[tokio::test]
async fn the_default_scheduler_runs_without_a_pod_group() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "plain", json!({"scheduler": "default"})).await;
    let pods = wait_for_pods(&double, "plain", 2).await;
    let status = wait_for_status(&double, "plain", "a GangScheduled condition", |s| {
        !condition(s, "GangScheduled").is_null()
    })
    .await;
    let gang = condition(&status, "GangScheduled");
    assert_eq!(gang["status"], "False", "{status}");
    assert_eq!(gang["reason"], "DefaultScheduler", "{status}");
    assert!(
        gang["message"]
            .as_str()
            .is_some_and(|m| m.contains("different times")),
        "{status}"
    );
    assert!(owned(&double, &Gvr::PODGROUPS, "plain").is_empty());
    for pod in &pods {
        assert_ne!(pod["spec"]["schedulerName"], "volcano", "{pod}");
    }
    assert_eq!(owned(&double, &Gvr::SERVICES, "plain").len(), 1);
}

#[tokio::test]
async fn an_invalid_spec_fails_without_creating_anything() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    // The double does not run admission, so the CRD's minimum does not stop this.
    let resource = kube::api::ApiResource {
        group: "perfsweep.io".into(),
        version: "v1alpha1".into(),
        api_version: "perfsweep.io/v1alpha1".into(),
        kind: "IPerf".into(),
        plural: "iperfs".into(),
    };
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "IPerf",
        "metadata": {"name": "zero", "namespace": NS},
        "spec": {"streams": 0},
    }))
    .expect("a dynamic object");
    Api::<DynamicObject>::namespaced_with(double.client(), NS, &resource)
        .create(&PostParams::default(), &object)
        .await
        .expect("creating the invalid IPerf");
    let status = wait_for_phase(&double, "zero", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "InvalidSpec", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("spec.streams"), "{message}");
    wait_until(WAIT, "the InvalidSpec event", || {
        let events = events(&double, "zero");
        if events.iter().any(|e| e.starts_with("InvalidSpec:")) {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    let creates: Vec<String> = double
        .requests()
        .into_iter()
        .filter(|r| {
            r.verb == "create" && ["pods", "services", "podgroups"].contains(&r.resource.as_str())
        })
        .map(|r| r.path)
        .collect();
    assert!(creates.is_empty(), "created {creates:?}");
}

#[tokio::test]
async fn a_pod_of_the_same_name_is_not_adopted() {
    let double = double_with_crds().await;
    double
        .create(
            &Gvr::PODS,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "taken-client-0", "namespace": NS},
                "spec": {"containers": [{"name": "other", "image": "busybox"}]},
            }),
        )
        .expect("creating someone else's pod");
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "taken", json!({})).await;
    let status = wait_for_phase(&double, "taken", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "NameConflict", "{status}");
    wait_for_cleanup(&double, "taken").await;
    assert!(
        double.get(&Gvr::PODS, Some(NS), "taken-client-0").is_some(),
        "the other pod is left alone"
    );
}

// Issue 13: what a real API server exposed. The double enforces the chart's RBAC on the
// operator (support::double_with_crds), answers 409 on creates of existing names, and
// fails logs per pod as an unreachable kubelet does.

/// The `OperatorError` condition of the benchmark, once it is there.
async fn wait_for_operator_error(double: &ApiDouble, name: &str) -> Value {
    wait_for_status(double, name, "an OperatorError condition", |s| {
        condition(s, "OperatorError")["status"] == "True"
    })
    .await
}

/// Every status the benchmark has had, as a watch delivers them. A condition the
/// operator sets and clears on its next look (its status write is itself a watch event
/// that triggers one) can live shorter than a poll on a loaded machine; a watch sees
/// every version.
fn record_statuses(double: &ApiDouble, name: &str) -> Arc<Mutex<Vec<Value>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = Api::<DynamicObject>::namespaced_with(double.client(), NS, &iperf_resource());
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let sink = Arc::clone(&seen);
    let name = name.to_owned();
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config).applied_objects());
        while let Some(event) = events.next().await {
            let Ok(object) = event else { continue };
            if object.metadata.name.as_deref() != Some(name.as_str()) {
                continue;
            }
            let status = object.data.get("status").cloned().unwrap_or(Value::Null);
            sink.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(status);
        }
    });
    seen
}

fn iperf_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("perfsweep.io", "v1alpha1", "IPerf"),
        "iperfs",
    )
}

/// The first recorded status with an `OperatorError` condition.
async fn wait_for_recorded_operator_error(seen: &Mutex<Vec<Value>>, name: &str) -> Value {
    wait_until(
        WAIT,
        format_args!("IPerf {name}: an OperatorError condition, in any version"),
        || {
            let seen = seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            seen.iter()
                .find(|s| condition(s, "OperatorError")["status"] == "True")
                .cloned()
                .ok_or_else(|| format!("{} versions, the last {:?}", seen.len(), seen.last()))
        },
    )
    .await
}

/// Finding 1: the operator restarts between creating a benchmark's Service and its
/// pods (here: the pod create fails with a 500; kube's client retries a 503 itself). The error is in the status and a
/// Warning event at once; the next operator's Service create answers 409, and the
/// Service, the benchmark's own, is read (get, which the chart must grant) and adopted.
#[tokio::test]
async fn a_restart_mid_creation_adopts_the_benchmarks_own_service() {
    let double = double_with_crds().await;
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("create", "pods").times(1),
        500,
        "InternalError",
    );
    let seen = record_statuses(&double, "midway");
    let first = Operator::start(&double, "first");
    create_iperf(
        &double,
        "midway",
        json!({"scheduler": "default", "timeout": "10m"}),
    )
    .await;
    let status = wait_for_recorded_operator_error(&seen, "midway").await;
    let error = condition(&status, "OperatorError");
    assert_eq!(error["reason"], "APIUnavailable", "{status}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("creating its objects: creating Pod default/midway-"),
        "the stage, the verb and the resource: {message}"
    );
    assert_ne!(status["phase"], "Failed", "{status}");
    wait_until(WAIT, "a Warning event with the error", || {
        let events = events(&double, "midway");
        match events.iter().find(|e| e.starts_with("APIUnavailable:")) {
            Some(event) => Ok(event.clone()),
            None => Err(format!("{events:?}")),
        }
    })
    .await;
    let service = double
        .get(&Gvr::SERVICES, Some(NS), "midway")
        .expect("the first operator created the Service");
    first.stop().await;

    let _second = Operator::start(&double, "second");
    wait_for_pods(&double, "midway", 2).await;
    let status = wait_for_status(&double, "midway", "the OperatorError condition gone", |s| {
        condition(s, "OperatorError").is_null() && s["phase"] == "Pending"
    })
    .await;
    assert!(condition(&status, "Failed").is_null(), "{status}");
    let adopted = double
        .get(&Gvr::SERVICES, Some(NS), "midway")
        .expect("the Service is still there");
    assert_eq!(
        adopted["metadata"]["uid"], service["metadata"]["uid"],
        "adopted, not replaced"
    );
    let reads: Vec<u16> = double
        .requests()
        .into_iter()
        .filter(|r| {
            r.verb == "get" && r.resource == "services" && r.name.as_deref() == Some("midway")
        })
        .map(|r| r.status_code)
        .collect();
    assert_eq!(reads, [200], "the 409 was followed by reading the Service");
}

/// Finding 1 on today's chart: without `get` on services (the chart before issue 13),
/// the 409 path is Forbidden. The benchmark says so in its status (the verb and the
/// resource, from the API server's answer) and in a Warning event, instead of looking
/// like it waits for the scheduler.
#[tokio::test]
async fn a_forbidden_request_is_shown_with_its_verb_and_resource() {
    let double = double_with_crds().await;
    let Some(mut rbac) = support::chart_rbac() else {
        return;
    };
    for rule in &mut rbac.rules {
        if rule.resources.iter().any(|r| r == "services") {
            rule.verbs.retain(|v| v != "get");
        }
    }
    double.enforce_rbac(rbac);
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("create", "pods").times(1),
        500,
        "InternalError",
    );
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "denied", json!({"scheduler": "default"})).await;
    let status = wait_for_status(&double, "denied", "a Forbidden OperatorError", |s| {
        condition(s, "OperatorError")["reason"] == "Forbidden"
    })
    .await;
    let message = condition(&status, "OperatorError")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("cannot get resource \"services\""),
        "{message}"
    );
    assert!(
        message.contains("reading Service default/denied"),
        "{message}"
    );
    wait_until(WAIT, "a Forbidden Warning event", || {
        let events = events(&double, "denied");
        if events
            .iter()
            .any(|e| e.starts_with("Forbidden:") && e.contains("cannot get resource"))
        {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
}

/// Finding 2: a Service perfsweep does not own has the benchmark's name: the benchmark
/// fails at once as NameConflict naming it (long before its 10-minute timeout), and
/// the Service is left alone.
#[tokio::test]
async fn someone_elses_service_of_the_same_name_is_a_name_conflict() {
    let double = double_with_crds().await;
    double
        .create(
            &Gvr::SERVICES,
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "ipf-conflict", "namespace": NS},
                "spec": {"type": "ClusterIP", "ports": [{"port": 80, "targetPort": 80}]},
            }),
        )
        .expect("kubectl create service clusterip ipf-conflict --tcp=80:80");
    let _operator = Operator::start(&double, "test");
    let started = std::time::Instant::now();
    create_iperf(&double, "ipf-conflict", json!({"timeout": "10m"})).await;
    let status = wait_for_phase(&double, "ipf-conflict", "Failed").await;
    assert_eq!(reason_of(&status, "Failed"), "NameConflict", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.starts_with("Service default/ipf-conflict already exists"),
        "{message}"
    );
    assert!(started.elapsed() < WAIT, "at once, not at the timeout");
    wait_for_cleanup(&double, "ipf-conflict").await;
    assert!(
        double
            .get(&Gvr::SERVICES, Some(NS), "ipf-conflict")
            .is_some(),
        "someone else's Service is left alone"
    );
}

/// A `networkName` naming no NetworkAttachmentDefinition fails at once, naming it,
/// before any pod is made (Multus would otherwise hold every pod in ContainerCreating
/// until the timeout).
#[tokio::test]
async fn a_network_that_does_not_exist_fails_at_once_naming_it() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let started = std::time::Instant::now();
    create_iperf(
        &double,
        "ipf-nonet",
        json!({"networkName": "nowhere", "timeout": "10m"}),
    )
    .await;
    let status = wait_for_phase(&double, "ipf-nonet", "Failed").await;
    assert_eq!(
        reason_of(&status, "Failed"),
        "NetworkUnavailable",
        "{status}"
    );
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("NetworkAttachmentDefinition default/nowhere does not exist"),
        "{message}"
    );
    assert!(started.elapsed() < WAIT, "at once, not at the timeout");
    let pods = double.list(&Gvr::PODS, Some(NS));
    assert!(
        pods.iter().all(|p| !p["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .starts_with("ipf-nonet")),
        "no pod was made"
    );
}

/// Finding 3: the result pod's node is gone, so its log cannot be read (connection
/// refused, as the API server answers for an unreachable kubelet). The benchmark shows
/// the error while it retries, then fails at its deadline as ResultUnreadable with the
/// API error, and its pods are deleted (the set's slot is freed).
#[tokio::test]
async fn an_unreadable_result_log_fails_the_benchmark_at_its_deadline() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let created = std::time::Instant::now();
    create_iperf(&double, "nolog", json!({"timeout": "4s"})).await;
    start_benchmark(&double, "nolog").await;
    let client = pod_name("nolog", "client");
    double.fail_pod_log(
        NS,
        &client,
        Some(perfsweep_testkit::LogFailure::KubeletUnreachable),
    );
    finish_pod(&double, &client, 0, "");
    let status = wait_for_operator_error(&double, "nolog").await;
    let message = condition(&status, "OperatorError")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("reading the result: reading the log of pod default/nolog-client-0"),
        "{message}"
    );
    let status = wait_for_phase(&double, "nolog", "Failed").await;
    // creationTimestamp has whole seconds: the deadline is up to 1 s before 4 s from here.
    assert!(
        created.elapsed() >= std::time::Duration::from_secs(3),
        "not before the deadline"
    );
    assert_eq!(reason_of(&status, "Failed"), "ResultUnreadable", "{status}");
    let message = condition(&status, "Failed")["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("within the timeout of 4s")
            && message.contains("connect: connection refused"),
        "{message}"
    );
    assert!(
        condition(&status, "OperatorError").is_null(),
        "settled: {status}"
    );
    // The event follows the status write.
    wait_until(WAIT, "a ResultUnreadable Warning event", || {
        let events = events(&double, "nolog");
        if events.iter().any(|e| e.starts_with("ResultUnreadable:")) {
            Ok(())
        } else {
            Err(format!("{events:?}"))
        }
    })
    .await;
    wait_for_cleanup(&double, "nolog").await;
}

/// Finding 6: a finished benchmark's conditions describe the present: its pods are
/// gone, so it is not Ready (AllPodsRunning) any more.
#[tokio::test]
async fn a_finished_benchmark_is_not_ready() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "done", json!({})).await;
    start_benchmark(&double, "done").await;
    let running = status_of(&double, "done");
    assert_eq!(reason_of(&running, "Ready"), "AllPodsRunning", "{running}");
    let fixture = fixture("tcp-1stream.json");
    let log = agent_log(
        Outcome::Succeeded {
            result: Some(fixture.result),
            summary: Some(fixture.summary),
        },
        &fixture.raw,
    );
    double.set_pod_log(NS, &pod_name("done", "client"), AGENT, &log);
    finish_pod(&double, &pod_name("done", "client"), 0, "");
    let status = wait_for_phase(&double, "done", "Succeeded").await;
    let ready = condition(&status, "Ready");
    assert_eq!(ready["status"], "False", "{status}");
    assert_eq!(ready["reason"], "Finished", "{status}");
    wait_for_cleanup(&double, "done").await;
}

/// The resources the operator caches through watches (besides the benchmarks and sets).
const CACHED: [&str; 5] = [
    "pods",
    "services",
    "podgroups",
    "persistentvolumeclaims",
    "configmaps",
];

/// Waits until the operator has made a `verb` request on every resource it caches
/// (`what` says which, for the timeout message).
async fn wait_for_every_cache(double: &ApiDouble, verb: &str, what: &str) {
    wait_until(WAIT, format_args!("every cache {what}"), || {
        let requests = double.requests();
        let missing: Vec<&str> = CACHED
            .iter()
            .copied()
            .filter(|resource| {
                !requests
                    .iter()
                    .any(|r| r.verb == verb && r.resource == *resource)
            })
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("no {verb} yet: {}", missing.join(", ")))
        }
    })
    .await;
}

#[tokio::test]
async fn reconciles_read_caches_that_survive_an_expired_watch() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    wait_for_every_cache(&double, "watch", "watched").await;
    double.clear_requests();

    create_iperf(&double, "cached", json!({})).await;
    start_benchmark(&double, "cached").await;
    // Every watch ends with 410 Gone: kube's watchers list again and the caches are
    // replaced by what the new lists say.
    double.expire_watches();
    wait_for_every_cache(&double, "list", "listed again after the 410").await;
    let fixture = fixture("tcp-1stream.json");
    let outcome = Outcome::Succeeded {
        result: Some(fixture.result),
        summary: Some(fixture.summary),
    };
    double.set_pod_log(
        NS,
        &pod_name("cached", "client"),
        AGENT,
        &agent_log(outcome, &fixture.raw),
    );
    finish_pod(&double, &pod_name("cached", "client"), 0, "");
    wait_for_phase(&double, "cached", "Succeeded").await;
    // The pods, Service and PodGroup are found in the re-listed caches and deleted.
    wait_for_cleanup(&double, "cached").await;

    let requests = double.requests();
    let pod_creates = requests
        .iter()
        .filter(|r| r.verb == "create" && r.resource == "pods")
        .count();
    assert_eq!(pod_creates, 2, "each pod created once");
    // The operator watches all namespaces: its watchers list across them. A list in
    // the benchmark's namespace could only come from a reconcile.
    let namespaced_lists: Vec<String> = requests
        .iter()
        .filter(|r| r.verb == "list" && r.namespace.is_some())
        .map(|r| r.path.clone())
        .collect();
    assert!(
        namespaced_lists.is_empty(),
        "reconciles list nothing: {namespaced_lists:?}"
    );
    // Status is written by server-side apply, field manager perfsweep.
    let benchmark = double
        .get(&IPERFS, Some(NS), "cached")
        .expect("the benchmark");
    let applied = benchmark["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["manager"] == "perfsweep" && m["subresource"] == "status")
        .unwrap_or_else(|| panic!("no status applied by perfsweep: {benchmark}"));
    assert_eq!(applied["operation"], "Apply");
    assert!(
        applied["fieldsV1"]["f:status"]["f:result"].is_object(),
        "{applied}"
    );
}

/// The status write that claims a benchmark comes before its objects: when it answers
/// 409 (the cached benchmark was stale), nothing is created until a claim on the current
/// benchmark succeeds, and then each object once.
#[tokio::test]
async fn objects_are_created_only_after_the_claiming_status_write() {
    let double = double_with_crds().await;
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("patch", "iperfs/status"),
        409,
        "Conflict",
    );
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "claimed", json!({})).await;
    wait_for_pods(&double, "claimed", 2).await;
    let log = double.requests();
    let position = |what: &str, found: &dyn Fn(&perfsweep_testkit::RecordedRequest) -> bool| {
        log.iter()
            .position(found)
            .unwrap_or_else(|| panic!("no {what} in {log:#?}"))
    };
    let is_status = |r: &perfsweep_testkit::RecordedRequest| {
        r.verb == "patch" && r.rbac_resource() == "iperfs/status"
    };
    let refused = position("refused claim", &|r| is_status(r) && r.status_code == 409);
    let claimed = position("claim", &|r| is_status(r) && r.status_code < 300);
    let first_create = position("create", &|r| {
        r.verb == "create" && ["podgroups", "services", "pods"].contains(&r.resource.as_str())
    });
    assert!(
        refused < claimed && claimed < first_create,
        "refused claim #{refused}, claim #{claimed}, first create #{first_create}"
    );
    for (resource, count) in [("podgroups", 1), ("services", 1), ("pods", 2)] {
        let made = log
            .iter()
            .filter(|r| r.verb == "create" && r.resource == resource && r.status_code == 201)
            .count();
        assert_eq!(made, count, "{resource} created");
    }
}

/// Where Volcano's pod admission webhook is on, a gang's pods are refused while its
/// PodGroup is `Pending`: the benchmark waits (it does not fail as `CreateRejected`), and
/// once Volcano's scheduler moves the PodGroup to `Inqueue` its pods are created.
#[tokio::test]
async fn pods_refused_until_volcano_admits_the_gang_are_created_after() {
    let double = double_with_crds().await;
    double.enable_volcano_pod_admission();
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "gated", json!({})).await;
    wait_until(WAIT, "a pod refused by the webhook", || {
        let refused = double
            .requests()
            .iter()
            .any(|r| r.verb == "create" && r.resource == "pods" && r.status_code == 400);
        if refused {
            Ok(())
        } else {
            Err("no refused pod create yet".to_owned())
        }
    })
    .await;
    assert!(
        owned(&double, &Gvr::PODS, "gated").is_empty(),
        "no pod got past the webhook"
    );
    let status = status_of(&double, "gated");
    assert_eq!(status["phase"], "Pending", "{status}");

    // Volcano's scheduler enqueues the PodGroup.
    double
        .patch_status(
            &Gvr::PODGROUPS,
            Some(NS),
            "gated",
            json!({"status": {"phase": "Inqueue"}}),
        )
        .expect("enqueueing the PodGroup");
    let pods = wait_for_pods(&double, "gated", 2).await;
    assert_eq!(pods.len(), 2);
    assert_eq!(status_of(&double, "gated")["phase"], "Pending");
}

/// A gang Volcano never admits (its queue closed, say) still ends at its deadline, saying
/// what it waited for.
#[tokio::test]
async fn a_gang_volcano_never_admits_ends_at_its_deadline() {
    let double = double_with_crds().await;
    double.enable_volcano_pod_admission();
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "never", json!({"timeout": "3s"})).await;
    let status = kubelet::wait_for_phase(&double, &IPERFS, "never", "Failed").await;
    let failed = condition(&status, "Failed");
    assert_eq!(failed["reason"], "TimedOut", "{status}");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("0 of 2 running")),
        "{status}"
    );
    wait_for_cleanup(&double, "never").await;
}

#[tokio::test]
async fn a_malformed_iperf_is_reported_and_does_not_stop_the_others() {
    let double = double_with_crds().await;
    // Written as an older or newer perfsweep (or a hand edit past validation) might have
    // left it: `duration` a string. The double stores it as given, as etcd would.
    double
        .create(
            &IPERFS,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                "metadata": {"name": "malformed", "namespace": NS},
                "spec": {"duration": "ten seconds"},
            }),
        )
        .expect("the double stores the malformed IPerf");
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "healthy", json!({"duration": 10})).await;

    // The healthy IPerf runs: its pods are made and it reaches Running.
    start_benchmark(&double, "healthy").await;
    // The malformed one is reported once, naming the field, and never run.
    let reported = wait_until(WAIT, "an InvalidObject event about malformed", || {
        let found: Vec<String> = events(&double, "malformed")
            .into_iter()
            .filter(|e| e.starts_with("InvalidObject: "))
            .collect();
        if found.is_empty() {
            Err(format!("events: {:?}", events(&double, "malformed")))
        } else {
            Ok(found)
        }
    })
    .await;
    assert!(
        reported[0].contains("spec.duration: invalid type: string"),
        "the event names the field and why: {reported:?}"
    );
    assert!(
        owned(&double, &Gvr::PODS, "malformed").is_empty(),
        "nothing is run for an object that cannot be read"
    );
    assert!(
        status_of(&double, "malformed").is_null(),
        "its status is left alone: {}",
        status_of(&double, "malformed")
    );
}

/// Issue 23: a client pod deleted mid-run (its agent ignored SIGTERM) finished within
/// its grace period, and the benchmark was recorded Succeeded. A pod being deleted ends
/// the benchmark as PodDeleted at once, whatever it reports afterwards.
#[tokio::test]
async fn a_pod_deleted_mid_run_fails_the_benchmark_even_if_it_then_succeeds() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create_iperf(&double, "cut", json!({"duration": 10})).await;
    wait_for_pods(&double, "cut", 2).await;
    run_pod(&double, "cut-server-0");
    run_pod(&double, "cut-client-0");
    wait_for_phase(&double, "cut", "Running").await;

    // The kubelet keeps a deleted pod (here: a finalizer) until its containers stop.
    double
        .patch(
            &Gvr::PODS,
            Some(NS),
            "cut-client-0",
            json!({"metadata": {"finalizers": ["test.perfsweep.io/grace-period"]}}),
        )
        .expect("a finalizer on the client pod");
    let deleted = double
        .delete(&Gvr::PODS, Some(NS), "cut-client-0")
        .expect("deleting the client pod");
    assert!(
        deleted["metadata"]["deletionTimestamp"].is_string(),
        "{deleted}"
    );
    // Within its grace period, the client finishes with a valid result.
    let fixture = fixture("tcp-4streams.json");
    let outcome = Outcome::Succeeded {
        result: Some(fixture.result.clone()),
        summary: Some(fixture.summary.clone()),
    };
    double.set_pod_log(NS, "cut-client-0", AGENT, &agent_log(outcome, &fixture.raw));
    finish_pod(&double, "cut-client-0", 0, "");

    let status = wait_until(WAIT, "the benchmark to end", || {
        let status = status_of(&double, "cut");
        match status["phase"].as_str() {
            Some("Succeeded" | "Failed") => Ok(status),
            _ => Err(format!("{status}")),
        }
    })
    .await;
    assert_eq!(status["phase"], "Failed", "{status}");
    assert_eq!(reason_of(&status, "Failed"), "PodDeleted", "{status}");
    assert_eq!(
        condition(&status, "Failed")["message"],
        "pod cut-client-0 was deleted while the benchmark ran",
        "{status}"
    );
    assert!(
        status["result"].is_null(),
        "no result is recorded: {status}"
    );
    // It was placed, and stays so.
    assert_eq!(
        condition(&status, "Scheduled")["status"],
        "True",
        "{status}"
    );
    assert_eq!(
        condition(&status, "GangScheduled")["status"],
        "True",
        "{status}"
    );
}
