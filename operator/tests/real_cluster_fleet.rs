//! Issue 35: a node-pair fleet sweep over kubemark's hollow nodes, on the harness's real
//! control plane (API server, etcd, Volcano) with the chart's operator. The harness
//! starts the hollow nodes (real kubelets over a fake container runtime, labelled and
//! tainted `perfsweep.io/hollow`) and runs this suite: over 20 of them in every `run`
//! and `test` (CI), over N with `python3 tests/e2e/cluster.py fleet N` on an up cluster
//! (the measurement in docs/operations.md#fleet-scale).
//!
//! Hollow pods never run the agent: their containers "run" until deleted. So the sweep's
//! first round is planned, created, gang-scheduled and started for real, and nothing of
//! it finishes; what collecting a round costs is the regular suite's
//! (`overhead_per_child_against_bare_pods`). The set is deleted after the first round.
//! Prints `E2E fleet ...` lines with every figure.

mod real_cluster_support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Seek};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use real_cluster_support::*;
use serde_json::json;

/// The hollow nodes' label and how many the harness started (`PERFSWEEP_E2E_HOLLOW`).
fn hollow_nodes() -> (String, usize) {
    let value = std::env::var("PERFSWEEP_E2E_HOLLOW").unwrap_or_else(|_| {
        panic!(
            "set PERFSWEEP_E2E_HOLLOW=LABEL,COUNT: run this suite with tests/e2e/cluster.py fleet N"
        )
    });
    let (label, count) = value.split_once(',').expect("LABEL,COUNT");
    (label.to_owned(), count.parse().expect("a count"))
}

/// The node-pair mode the sweep runs in (`PERFSWEEP_E2E_HOLLOW_MODE`, `AllPairs` by
/// default; `Ring` for fleets whose all-pairs plan is over the operator's ceiling), and
/// for N nodes (even) its children, rounds and first round's children.
fn sweep_shape(count: usize) -> (String, usize, usize, usize) {
    let mode = std::env::var("PERFSWEEP_E2E_HOLLOW_MODE").unwrap_or_else(|_| "AllPairs".into());
    match mode.as_str() {
        "AllPairs" => (mode, count * (count - 1) / 2, count - 1, count / 2),
        "Ring" => (mode, count, 2, count / 2),
        other => panic!("PERFSWEEP_E2E_HOLLOW_MODE={other}: AllPairs or Ring"),
    }
}

/// The API server's audit log (`PERFSWEEP_E2E_AUDIT_LOG`), which records every request
/// of the operator's service accounts, read from where it stood when this was made.
struct AuditLog {
    path: std::path::PathBuf,
    from: u64,
}

impl AuditLog {
    fn from_now() -> Self {
        let path: std::path::PathBuf = std::env::var("PERFSWEEP_E2E_AUDIT_LOG")
            .expect("set PERFSWEEP_E2E_AUDIT_LOG (tests/e2e/cluster.py does)")
            .into();
        let from = std::fs::metadata(&path).map_or(0, |m| m.len());
        Self { path, from }
    }

    /// The operator's finished requests since then, by "verb resource[/subresource]".
    fn requests(&self) -> BTreeMap<String, u64> {
        let mut file = std::fs::File::open(&self.path).expect("the audit log");
        file.seek(std::io::SeekFrom::Start(self.from))
            .expect("seek");
        let mut counts = BTreeMap::new();
        for line in std::io::BufReader::new(file).lines() {
            let Ok(line) = line else { break };
            let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if event["stage"] != "ResponseComplete" {
                continue;
            }
            let object = &event["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or("-").to_owned();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = event["verb"].as_str().unwrap_or("-");
            *counts.entry(format!("{verb} {resource}")).or_insert(0) += 1;
        }
        counts
    }
}

/// The pods of set `set`'s children (perfsweep names them `<child>-<role>-<n>`, and
/// children `<set>-…`).
async fn set_pods(client: &Client, set: &str) -> Vec<Pod> {
    Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/managed-by=perfsweep"))
        .await
        .expect("pods listed")
        .items
        .into_iter()
        .filter(|pod| pod.name_any().starts_with(&format!("{set}-")))
        .collect()
}

/// The leader's gauge `name`.
async fn leader_gauge(client: &Client, namespace: &str, name: &str) -> f64 {
    let leader = operator_leader(client, namespace).await;
    let pods = operator_pods(client, namespace).await;
    let (_, ip, _) = pods
        .iter()
        .find(|(pod, _, _)| *pod == leader)
        .unwrap_or_else(|| panic!("the leader {leader} among {pods:?}"));
    operator_gauge(ip, name)
        .await
        .unwrap_or_else(|| panic!("the leader's /metrics lacks {name}"))
}

fn seconds(since: Instant) -> f64 {
    since.elapsed().as_secs_f64()
}

/// All pairs of N hollow nodes (or a ring, see [`sweep_shape`]): the set plans N(N-1)/2
/// children in N-1 rounds (N even; a ring: N in 2), creates only the first round (N/2
/// children, N pods, N/2 PodGroups), whose pairs are
/// node-disjoint, and Volcano places every pod of it on the pair's own two nodes; the
/// set's status stays far under etcd's 1.5 MiB and the operator under the chart's
/// 256 MiB.
#[tokio::test]
#[ignore = "needs hollow nodes: tests/e2e/cluster.py run (over 20) or fleet N"]
async fn a_node_pair_sweep_over_hollow_nodes_plans_creates_and_places_its_first_round() {
    let client = cluster().await;
    let operator_namespace = require_in_cluster_operator();
    let (label, count) = hollow_nodes();
    assert!(
        count >= 4 && count % 2 == 0,
        "an even number of hollow nodes, at least 4: {count}"
    );
    let (mode, pairs, rounds, first_round) = sweep_shape(count);
    privileged_namespace(&client, true).await;
    let audit = AuditLog::from_now();
    let cpu_before = leader_gauge(
        &client,
        &operator_namespace,
        "perfsweep_process_cpu_seconds",
    )
    .await;
    let set = "e2e-fleet";
    let started = create_set(
        &client,
        set,
        json!({
            "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                         "spec": {"duration": 10, "timeout": "30m", "scheduler": scheduler(),
                                  "tolerations": [{"key": label, "operator": "Exists", "effect": "NoSchedule"}]}},
            "permutations": {"nodePairs": {"selector": {"matchLabels": {label.clone(): "true"}},
                                           "mode": mode}},
            "maxChildren": pairs,
        }),
    )
    .await;
    let api = sets(&client);
    let status = wait_for_status(&api, set, Duration::from_mins(10), |s| {
        (s["total"].as_u64().unwrap_or(0) > 0 && s["rounds"]["total"].as_u64().is_some())
            || finished(s)
    })
    .await;
    let planned = seconds(started);
    assert!(
        !finished(&status),
        "the set ended before its first round: {status}"
    );
    assert_eq!(
        status["total"].as_u64(),
        Some(pairs as u64),
        "{}",
        status["rounds"]
    );
    assert_eq!(
        status["rounds"]["total"].as_u64(),
        Some(rounds as u64),
        "{}",
        status["rounds"]
    );

    // The first round: every child created, every pod placed and (hollow-)running.
    let children = benchmarks(&client, "IPerf");
    let (mut created, mut placed, mut running) = (None, None, None);
    let deadline = Instant::now() + Duration::from_mins(20);
    let mut pods = Vec::new();
    let mut peak_status = 0usize;
    while running.is_none() {
        assert!(
            Instant::now() < deadline,
            "the first round within 20 minutes: {} children, {} pods ({} placed, {} running)",
            children
                .list(&ListParams::default())
                .await
                .map_or(0, |l| l.items.len()),
            pods.len(),
            pods.iter()
                .filter(|p: &&Pod| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
                .count(),
            pods.iter()
                .filter(
                    |p: &&Pod| p.status.as_ref().and_then(|s| s.phase.as_deref())
                        == Some("Running")
                )
                .count(),
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        if created.is_none() {
            let made = children_of(&client, "IPerf", set).await.len();
            assert!(
                made <= first_round,
                "{made} children before the first round ended"
            );
            if made == first_round {
                created = Some(seconds(started));
            }
            continue;
        }
        pods = set_pods(&client, set).await;
        let bound = pods
            .iter()
            .filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()))
            .count();
        if placed.is_none() && bound == 2 * first_round {
            placed = Some(seconds(started));
        }
        let up = pods
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count();
        if placed.is_some() && up == 2 * first_round {
            running = Some(seconds(started));
        }
        let object = api.get(set).await.expect("the set");
        peak_status =
            peak_status.max(serde_json::to_vec(&object.data["status"]).map_or(0, |v| v.len()));
    }
    let groups = pod_groups(&client)
        .list(&ListParams::default())
        .await
        .expect("PodGroups listed")
        .items
        .into_iter()
        .filter(|g| g.name_any().starts_with(&format!("{set}-")))
        .count();
    assert_eq!(groups, first_round, "one PodGroup per child of the round");

    // Each child on its pair's two nodes, and the round's pairs node-disjoint.
    let mut by_child: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for pod in &pods {
        let child = pod
            .labels()
            .get("perfsweep.io/benchmark")
            .cloned()
            .unwrap_or_default();
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        by_child.entry(child).or_default().insert(node);
    }
    let mut used = BTreeSet::new();
    for (child, nodes) in &by_child {
        assert_eq!(nodes.len(), 2, "{child} on {nodes:?}");
        for node in nodes {
            assert!(node.starts_with("psw-hollow-"), "{child} on {node}");
            assert!(used.insert(node.clone()), "{node} twice in the first round");
        }
    }
    assert_eq!(used.len(), count, "the first round uses every node once");

    let object = api.get(set).await.expect("the set");
    let status_bytes = serde_json::to_vec(&object.data["status"]).map_or(0, |v| v.len());
    let object_bytes = serde_json::to_vec(&object).map_or(0, |v| v.len());
    let peak = leader_gauge(
        &client,
        &operator_namespace,
        "perfsweep_process_peak_resident_memory_bytes",
    )
    .await;
    let cpu = leader_gauge(
        &client,
        &operator_namespace,
        "perfsweep_process_cpu_seconds",
    )
    .await
        - cpu_before;
    let requests = audit.requests();
    let total: u64 = requests.values().sum();
    let mut top: Vec<(&String, &u64)> = requests.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1));
    let cleanup = Instant::now();
    delete_and_wait_long(&client, &api, set).await;
    privileged_namespace(&client, false).await;
    println!(
        "E2E fleet {count} hollow nodes, {mode}: {pairs} children in {rounds} rounds planned in {planned:.1} s; first round ({first_round} children, {} pods, {groups} PodGroups) created at {:.1} s, placed by Volcano at {:.1} s, running at {:.1} s; deleted in {:.1} s",
        2 * first_round,
        created.unwrap_or_default(),
        placed.unwrap_or_default(),
        running.unwrap_or_default(),
        seconds(cleanup),
    );
    println!(
        "E2E fleet operator: peak resident {:.1} MiB (the chart's limit 256 MiB), {cpu:.1} s of CPU from creating the set to the first round running; set status {:.1} KiB (peak {:.1} KiB), the whole object {:.1} KiB",
        peak / 1048576.0,
        status_bytes as f64 / 1024.0,
        peak_status as f64 / 1024.0,
        object_bytes as f64 / 1024.0,
    );
    println!(
        "E2E fleet API requests of the operator: {total} for {first_round} children, {:.2} per child; most: {}",
        total as f64 / first_round as f64,
        top.iter()
            .take(10)
            .map(|(what, n)| format!("{what} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        status_bytes < 512 * 1024,
        "the set's status is {status_bytes} bytes: etcd refuses objects over 1.5 MiB"
    );
    assert!(
        peak < 256.0 * 1048576.0,
        "the operator's peak resident memory {peak} bytes is over the chart's limit"
    );
}

/// `delete_and_wait` for a set of many children, whose pods take longer than its two
/// minutes to go.
async fn delete_and_wait_long(client: &Client, api: &Api<DynamicObject>, name: &str) {
    let _ = api.delete(name, &kube::api::DeleteParams::default()).await;
    let deadline = Instant::now() + Duration::from_mins(15);
    loop {
        let left = set_pods(client, name).await.len();
        let object_left = api.get_opt(name).await.expect("readable").is_some();
        if left == 0 && !object_left {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not cleaned up within 15 minutes: {left} pods left"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}
