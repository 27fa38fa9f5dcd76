//! Whole-fleet acceptance against the API double: a 20-node all-pairs IPerf set driven
//! through all 19 rounds by the whole operator, with the test playing scheduler and
//! kubelet (pods run, then the client reports a real iperf3 result). Checks, from the
//! pods' start and finish timestamps, that no node ever ran two tests at once and that
//! each round's pairs ran together; and that the one node whose results are made 40%
//! slower is the one suspect node, with no other node or link named.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use jiff::Timestamp;
use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{AGENT, patch_pod_status, pod_status};
use support::{
    NS, Operator, children, create_node, create_set, double_with_crds, name_of, node_pair_set,
    set_status, wait_until,
};

const NODES: usize = 20;
const SLOW_NODE: &str = "node-07";
/// The slow node's pairs deliver this fraction of the others'.
const SLOW_FACTOR: f64 = 0.6;
const TIMEOUT: Duration = Duration::from_mins(10);

/// Multiplies every `bits_per_second` in iperf3's JSON by `factor`.
fn scale_rates(value: &mut Value, factor: f64) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                if key == "bits_per_second"
                    && let Some(rate) = field.as_f64()
                {
                    *field = json!(rate * factor);
                } else {
                    scale_rates(field, factor);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| scale_rates(item, factor)),
        _ => {}
    }
}

/// The agent report of a client whose pair runs at `factor` of the fixture's rate.
fn client_report(fixture: &Value, factor: f64) -> String {
    let mut output = fixture.clone();
    scale_rates(&mut output, factor);
    let raw = serde_json::to_string(&output).expect("JSON serializes");
    let parsed = registry::lookup("IPerf")
        .expect("IPerf is registered")
        .parse(&raw)
        .expect("the scaled fixture parses");
    let now = Timestamp::now().to_string();
    AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(parsed.result),
            summary: Some(parsed.summary),
        },
        command: vec!["iperf3".into()],
        started_at: now.clone(),
        finished_at: now,
        host: None,
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    }
    .to_line()
}

/// One child as the stand-in kubelet ran it.
#[derive(Debug)]
struct Ran {
    nodes: [String; 2],
    round: u32,
    started: Timestamp,
    finished: Option<Timestamp>,
}

fn pair_of(child: &Value) -> [String; 2] {
    let node = |role: &str| {
        child["spec"]["placement"][role]["nodes"][0]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    [node("server"), node("client")]
}

/// The start or finish time the kubelet wrote into a pod, read back from the pod.
fn pod_time(double: &ApiDouble, pod: &str, field: &str) -> Option<Timestamp> {
    let pod = double.get(&Gvr::PODS, Some(NS), pod)?;
    let state = &pod["status"]["containerStatuses"][0]["state"];
    let text = state["running"][field]
        .as_str()
        .or_else(|| state["terminated"][field].as_str())?;
    text.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_nodes_run_in_disjoint_rounds_and_the_slow_node_is_named() {
    let double = double_with_crds().await;
    for i in 0..NODES {
        create_node(&double, &format!("node-{i:02}"), json!({"bench": "yes"}));
    }
    let _operator = Operator::start(&double, "test");
    create_set(&double, node_pair_set("fleet", 1)).await;
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/../benchmarks/testdata/iperf/tcp-1stream.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("the iperf3 fixture"),
    )
    .expect("the fixture is JSON");

    // The stand-in scheduler and kubelet: pods start as soon as they exist, a child's
    // client finishes once the child is Running.
    let mut ran: BTreeMap<String, Ran> = BTreeMap::new();
    let status = wait_until(TIMEOUT, "the 20-node set to finish", || {
        let all = children(&double, "fleet");
        let round_of = |child: &Value| -> Option<u32> {
            child["metadata"]["labels"]["perfsweep.io/round"]
                .as_str()
                .and_then(|r| r.parse().ok())
        };
        for child in &all {
            let name = name_of(child).to_owned();
            let pods = [format!("{name}-server-0"), format!("{name}-client-0")];
            let pods_exist = pods
                .iter()
                .all(|p| double.get(&Gvr::PODS, Some(NS), p).is_some());
            if !ran.contains_key(&name) && pods_exist {
                let started = Timestamp::now();
                for pod in &pods {
                    patch_pod_status(
                        &double,
                        pod,
                        pod_status(
                            "Running",
                            json!({"running": {"startedAt": started.to_string()}}),
                        ),
                    );
                }
                let round = round_of(child).expect("a child of a node-pair set carries its round");
                ran.insert(
                    name.clone(),
                    Ran {
                        nodes: pair_of(child),
                        round,
                        started: pod_time(&double, &pods[1], "startedAt").unwrap_or(started),
                        finished: None,
                    },
                );
                continue;
            }
            let Some(entry) = ran.get_mut(&name) else {
                continue;
            };
            if entry.finished.is_none() && child["status"]["phase"] == "Running" {
                let factor = if entry.nodes.iter().any(|n| n == SLOW_NODE) {
                    SLOW_FACTOR
                } else {
                    // A little spread, as real pairs have.
                    1.0 + f64::from(name.bytes().map(u32::from).sum::<u32>() % 7) * 0.004
                };
                double.set_pod_log(
                    NS,
                    &pods[1],
                    AGENT,
                    &format!("{}\n", client_report(&fixture, factor)),
                );
                let finished = Timestamp::now().to_string();
                for pod in &pods {
                    patch_pod_status(
                        &double,
                        pod,
                        pod_status(
                            "Succeeded",
                            json!({"terminated": {"exitCode": 0, "reason": "Completed",
                                "startedAt": entry.started.to_string(), "finishedAt": finished}}),
                        ),
                    );
                }
                entry.finished = pod_time(&double, &pods[1], "finishedAt");
            }
        }
        let status = set_status(&double, "fleet");
        match status["phase"].as_str() {
            Some("Succeeded") => Ok(status),
            Some("Failed") => panic!("the set failed: {status}"),
            _ => Err(format!(
                "{} children run; rounds {}",
                ran.len(),
                status["rounds"]
            )),
        }
    })
    .await;

    // Every pair once, in 19 rounds of 10.
    assert_eq!(ran.len(), NODES * (NODES - 1) / 2);
    let pairs: BTreeSet<[String; 2]> = ran.values().map(|r| r.nodes.clone()).collect();
    assert_eq!(pairs.len(), ran.len(), "each pair once");
    assert_eq!(
        status["rounds"],
        json!({"total": 19, "current": 19}),
        "{status}"
    );

    // From the pods' timestamps: no node in two tests at once.
    let runs: Vec<&Ran> = ran.values().collect();
    for (i, a) in runs.iter().enumerate() {
        let a_end = a.finished.expect("every child finished");
        for b in &runs[i + 1..] {
            let b_end = b.finished.expect("every child finished");
            let share = a.nodes.iter().any(|n| b.nodes.contains(n));
            let overlap = a.started < b_end && b.started < a_end;
            assert!(
                !(share && overlap),
                "{:?} ({}..{}) and {:?} ({}..{}) share a node and overlap",
                a.nodes,
                a.started,
                a_end,
                b.nodes,
                b.started,
                b_end
            );
        }
    }
    // Rounds in order, and a round's pairs together: each round starts after the
    // previous one's last finish (below), and the set creates all of a round's children
    // in one reconcile: between two of the set's status writes, the children it created
    // (answered 201) are one whole round. (Counting the children that exist when the
    // first of a round runs would race the set's create loop.)
    let mut released = Vec::new();
    let mut created = 0;
    for request in double.requests() {
        if request.verb == "create" && request.resource == "iperfs" && request.status_code == 201 {
            created += 1;
        } else if request.verb == "patch" && request.rbac_resource() == "benchmarksets/status" {
            if created > 0 {
                released.push(created);
            }
            created = 0;
        }
    }
    assert_eq!(created, 0, "every create is followed by a status write");
    assert_eq!(
        released,
        vec![NODES / 2; 19],
        "every round released whole, in one reconcile"
    );
    let mut by_round: BTreeMap<u32, Vec<&Ran>> = BTreeMap::new();
    for run in &runs {
        by_round.entry(run.round).or_default().push(run);
    }
    assert_eq!(by_round.len(), 19);
    let mut previous_end: Option<Timestamp> = None;
    for (round, members) in &by_round {
        assert_eq!(members.len(), NODES / 2, "round {round}");
        let first_start = members.iter().map(|r| r.started).min().expect("members");
        let last_end = members
            .iter()
            .filter_map(|r| r.finished)
            .max()
            .expect("members");
        if let Some(end) = previous_end {
            assert!(
                first_start >= end,
                "round {round} started before the previous ended"
            );
        }
        previous_end = Some(last_end);
    }

    // The verdict: the slow node, and nothing else.
    let fleet = &status["fleet"];
    assert_eq!(fleet["nodes"], NODES, "{fleet}");
    assert_eq!(fleet["pairs"], NODES * (NODES - 1) / 2, "{fleet}");
    assert_eq!(fleet["suspectNodes"], 1, "{fleet}");
    assert_eq!(fleet["worstNodes"][0]["node"], SLOW_NODE, "{fleet}");
    assert_eq!(fleet["suspectLinks"], 0, "{fleet}");
    assert_eq!(
        fleet["outlierPairs"],
        NODES - 1,
        "only the slow node's pairs: {fleet}"
    );
    let deviation = fleet["worstNodes"][0]["deviation"]
        .as_f64()
        .expect("a deviation");
    assert!(
        (deviation + 0.4).abs() < 0.03,
        "about 40% slower: {deviation}"
    );
    // One acceptance outcome: the set is not accepted because of its fleet verdict, and
    // its condition names the slow node (the children have no criteria of their own).
    let accepted = status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "Accepted"))
        .unwrap_or_else(|| panic!("a node-pair set reports Accepted: {status}"));
    assert_eq!(accepted["status"], "False", "{accepted}");
    assert_eq!(accepted["reason"], "FleetOutliers", "{accepted}");
    assert!(
        accepted["message"]
            .as_str()
            .is_some_and(|m| m.contains(SLOW_NODE)),
        "{accepted}"
    );
    println!(
        "20 nodes, 190 pairs in 19 rounds; {} API requests ({:.1} per child); fleet: {fleet}",
        double.requests().len(),
        double.requests().len() as f64 / 190.0
    );
}
