//! Acceptance gates end to end against the API double: a BenchmarkSet with a criterion
//! on received bandwidth, two children played to a real iperf3 result each (one above
//! the bound, one below) by acting as scheduler and kubelet. The benchmark controller
//! judges each child (`Accepted` condition), the set controller the set.

use crate::support;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT, Fixture, now, run_pod};
use support::{
    IPERFS, NS, Operator, WAIT, condition, create_set, double_with_crds, expected_names,
    wait_for_status, wait_until,
};

/// Between the two fixtures' received rates (9.57 and 13.1 Gbit/s).
const MIN_BITS: f64 = 10.0e9;

/// Plays scheduler and kubelet for the IPerf `name`: both pods run, then the client
/// exits after reporting the real iperf3 output in `fixture`.
async fn run_child(double: &ApiDouble, name: &str, fixture: &str) {
    let pods = [format!("{name}-server-0"), format!("{name}-client-0")];
    wait_until(WAIT, format_args!("the pods of {name}"), || {
        let missing: Vec<&String> = pods
            .iter()
            .filter(|p| double.get(&Gvr::PODS, Some(NS), p).is_none())
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("missing {missing:?}"))
        }
    })
    .await;
    for pod in &pods {
        run_pod(double, pod);
    }
    wait_for_child(double, name, "Running").await;

    let Fixture {
        raw,
        result,
        summary,
    } = kubelet::fixture("IPerf", &format!("iperf/{fixture}"));
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(result),
            summary: Some(summary),
        },
        command: vec!["iperf3".into()],
        started_at: now(),
        finished_at: now(),
        host: Some("node-b".into()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    };
    let client = &pods[1];
    double.set_pod_log(NS, client, AGENT, &format!("{}\n", report.to_line()));
    kubelet::finish_pod(double, client, 0, "");
}

async fn wait_for_child(double: &ApiDouble, name: &str, phase: &str) -> Value {
    kubelet::wait_for_phase(double, &IPERFS, name, phase).await
}

#[tokio::test]
async fn children_and_the_set_are_judged_by_the_criteria() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let set = create_set(
        &double,
        json!({
            "apiVersion": "perfsweep.io/v1alpha1",
            "kind": "BenchmarkSet",
            "metadata": {"name": "gate", "namespace": NS},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                             "spec": {"duration": 5}},
                "permutations": {"product": {"streams": [1, 4]}},
                "maxParallel": 2,
                "acceptance": [{"metric": "received_bits_per_second", "min": MIN_BITS}],
            },
        }),
    )
    .await;
    let names = expected_names(&set);
    assert_eq!(names.len(), 2);

    // The set's criteria reach every child's spec.
    let child = wait_until(WAIT, "the first child", || {
        double
            .get(&IPERFS, Some(NS), &names[0])
            .ok_or_else(|| "not created".to_owned())
    })
    .await;
    assert_eq!(
        child["spec"]["acceptance"][0]["metric"], "received_bits_per_second",
        "{child}"
    );
    let running = wait_for_status(&double, "gate", "Accepted Unknown", |s| {
        condition(s, "Accepted")["status"] == "Unknown"
    })
    .await;
    assert_eq!(running["acceptance"]["pending"], 2, "{running}");

    // streams=1 → 9.57 Gbit/s (rejected), streams=4 → 13.1 Gbit/s (accepted).
    let streams_of = |name: &str| {
        double.get(&IPERFS, Some(NS), name).expect("the child")["spec"]["streams"]
            .as_u64()
            .expect("streams")
    };
    for name in &names {
        let fixture = if streams_of(name) == 1 {
            "tcp-1stream.json"
        } else {
            "tcp-4streams.json"
        };
        run_child(&double, name, fixture).await;
    }
    for name in &names {
        let status = wait_for_child(&double, name, "Succeeded").await;
        let accepted = condition(&status, "Accepted");
        if streams_of(name) == 1 {
            assert_eq!(accepted["status"], "False", "{status}");
            assert_eq!(accepted["reason"], "CriteriaNotMet", "{status}");
            let message = accepted["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("received_bits_per_second = 9.5695G is below the minimum 10G by 430.5167M (4.3052%)"),
                "{message}"
            );
        } else {
            assert_eq!(accepted["status"], "True", "{status}");
            assert_eq!(accepted["reason"], "CriteriaMet", "{status}");
        }
    }

    // False as soon as one child is rejected; the counts are final once both finished.
    let status = wait_for_status(&double, "gate", "Succeeded, Accepted False", |s| {
        s["phase"] == "Succeeded" && condition(s, "Accepted")["status"] == "False"
    })
    .await;
    assert_eq!(condition(&status, "Accepted")["reason"], "CriteriaNotMet");
    let counts = &status["acceptance"];
    assert_eq!(
        (
            &counts["accepted"],
            &counts["rejected"],
            &counts["failed"],
            &counts["pending"]
        ),
        (&json!(1), &json!(1), &json!(0), &json!(0)),
        "{status}"
    );
    let rejected = counts["rejections"][0]["name"].as_str().unwrap_or_default();
    assert_eq!(streams_of(rejected), 1, "{status}");

    // The rejection is announced on the child.
    let events: Vec<Value> = double
        .list(&Gvr::EVENTS_V1, Some(NS))
        .into_iter()
        .filter(|e| e["reason"] == "NotAccepted" && e["regarding"]["name"] == rejected)
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
}
