//! Issue 33: the life an operator's users live through, on the real cluster with the
//! chart as its defaults install it (two replicas, leader election). Opt-in like
//! `real_cluster.rs`; `tests/e2e/cluster.py` runs this suite last, because its tests go
//! in order and the last one uninstalls the chart:
//!
//! 1. the leader's node is lost mid-sweep (its kubelet stopped, the leader SIGKILLed,
//!    nothing released): the standby takes the Lease, and the sweep finishes with every
//!    child made once;
//! 2. `helm upgrade` with benchmarks running, moving the CRDs to templates as
//!    docs/upgrading.md says: the Deployment rolls, the benchmarks carry on to their
//!    results;
//! 3. `helm uninstall`: nothing of the release is left but the CRDs (`crds.keep`), and
//!    the benchmarks stored in them.
//!
//! Each prints `E2E lifecycle ...` lines with its figures.

mod real_cluster_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::{Client, ResourceExt};
use real_cluster_support::*;
use serde_json::json;

/// The chart's operator pods (not the warehouse job's).
const OPERATOR_PODS: &str = "app.kubernetes.io/name=perfsweep,app.kubernetes.io/component=operator";

/// The release as `<namespace>/<name>` (`PERFSWEEP_E2E_RELEASE`).
fn release() -> (String, String) {
    let value = std::env::var("PERFSWEEP_E2E_RELEASE").unwrap_or_else(|_| {
        panic!("set PERFSWEEP_E2E_RELEASE=<namespace>/<release> (tests/e2e/cluster.py does)")
    });
    let (namespace, name) = value
        .split_once('/')
        .unwrap_or_else(|| panic!("PERFSWEEP_E2E_RELEASE={value}: expected <namespace>/<release>"));
    (namespace.to_owned(), name.to_owned())
}

/// The operator's pods that are Ready, by name.
async fn ready_operator_pods(client: &Client, namespace: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    pods.list(&ListParams::default().labels(OPERATOR_PODS))
        .await
        .expect("operator pods listed")
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .filter(|pod| {
            pod.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .collect()
}

/// Waits until the Deployment's `replicas` operator pods are Ready.
async fn wait_for_ready_operators(client: &Client, namespace: &str, replicas: usize) -> Vec<Pod> {
    let deadline = Instant::now() + Duration::from_mins(3);
    loop {
        let ready = ready_operator_pods(client, namespace).await;
        if ready.len() == replicas {
            return ready;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {replicas} operator pods Ready after 3 minutes: {:?}",
            ready.len(),
            ready.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The chart's leader election Lease (the one Lease of the release namespace whose
/// holder is an operator pod).
async fn operator_lease(client: &Client, namespace: &str) -> Lease {
    let leases: Api<Lease> = Api::namespaced(client.clone(), namespace);
    let all = leases
        .list(&ListParams::default())
        .await
        .expect("leases listed")
        .items;
    let mut ours: Vec<Lease> = all
        .into_iter()
        .filter(|lease| lease.name_any().starts_with("perfsweep-operator"))
        .collect();
    assert_eq!(ours.len(), 1, "one operator Lease: {ours:?}");
    ours.remove(0)
}

fn holder(lease: &Lease) -> String {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .unwrap_or_default()
}

/// Creates the set and returns when one of its children has started.
async fn start_set(client: &Client, name: &str, spec: serde_json::Value) -> Instant {
    let started = create_set(client, name, spec).await;
    let api = sets(client);
    wait_for_status(&api, name, Duration::from_mins(2), |s| {
        s["running"].as_u64().unwrap_or(0) + s["succeeded"].as_u64().unwrap_or(0) > 0
    })
    .await;
    started
}

/// The set's children by name with their UIDs.
async fn child_uids(client: &Client, set: &str) -> BTreeMap<String, String> {
    children_of(client, "IPerf", set)
        .await
        .into_iter()
        .map(|c| (c.name_any(), c.uid().unwrap_or_default()))
        .collect()
}

/// The set finished: Succeeded with `count` children, each made once (the UIDs seen
/// `before` unchanged), each with a result and a record. Returns the final status.
async fn assert_sweep_whole(
    client: &Client,
    name: &str,
    count: usize,
    before: &BTreeMap<String, String>,
) -> serde_json::Value {
    let status = wait_for_status(&sets(client), name, Duration::from_mins(10), finished).await;
    assert_eq!(status["phase"], "Succeeded", "{name}: {status}");
    assert_eq!(status["succeeded"], count, "{name}: {status}");
    let children = children_of(client, "IPerf", name).await;
    assert_eq!(children.len(), count, "{name}: every child once");
    for child in &children {
        let child_name = child.name_any();
        if let Some(uid) = before.get(&child_name) {
            assert_eq!(
                child.uid().as_deref(),
                Some(uid.as_str()),
                "{child_name} was made again"
            );
        }
        assert!(
            child.data["status"]["result"]["receivedBitsPerSecond"]
                .as_f64()
                .is_some_and(|bps| bps > 1e7),
            "{child_name} has no result: {}",
            child.data["status"]
        );
        assert!(
            !evidence_hosts(client, &child_name).await.is_empty(),
            "{child_name} has no record"
        );
    }
    status
}

/// The harness's `kubelet-N` for a node named `psw-nodeN`.
fn kubelet_of(node: &str) -> String {
    let index = node
        .rsplit("node")
        .next()
        .filter(|i| i.parse::<u32>().is_ok())
        .unwrap_or_else(|| panic!("{node} is not one of the harness's psw-nodeN"));
    format!("kubelet-{index}")
}

fn iperf_sweep(repetitions: u32) -> serde_json::Value {
    json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "spec": {"duration": 4, "scheduler": scheduler(), "timeout": "4m"}},
        "permutations": {"product": {"streams": [1, 2]}},
        "repetitions": repetitions,
    })
}

/// The chart's default two replicas, and the leader's node lost mid-sweep: its kubelet
/// stopped (so nothing restarts the leader) and the leader's container SIGKILLed (so it
/// cannot release the Lease). The standby takes the Lease within two lease durations,
/// and the sweep of six children, placed away from the operator's nodes, finishes with
/// none made twice. (A leader whose container merely crashes is restarted by its
/// kubelet under the same identity and resumes the Lease itself.)
#[tokio::test]
#[ignore = "needs the chart installed on a disposable cluster: tests/e2e/cluster.py run"]
async fn lifecycle_1_the_leaders_node_lost_mid_sweep_hands_over_to_the_standby() {
    let client = cluster().await;
    require_in_cluster_operator();
    let (namespace, _) = release();
    let replicas = wait_for_ready_operators(&client, &namespace, 2).await;
    let lease = operator_lease(&client, &namespace).await;
    let leader = holder(&lease);
    let names: Vec<String> = replicas.iter().map(ResourceExt::name_any).collect();
    assert!(
        names.contains(&leader),
        "the Lease's holder {leader:?} is one of {names:?}"
    );
    let standby = names
        .iter()
        .find(|n| **n != leader)
        .expect("a standby")
        .clone();
    let owners: Vec<String> = lease
        .metadata
        .owner_references
        .iter()
        .flatten()
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect();
    assert_eq!(
        owners,
        ["ServiceAccount/perfsweep"],
        "the Lease goes with the release"
    );
    let transitions = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0);
    let nodes: Vec<String> = replicas
        .iter()
        .map(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .unwrap_or_default()
        })
        .collect();
    println!("E2E lifecycle replicas {names:?} on {nodes:?}: leader {leader}, standby {standby}");

    // The sweep on two nodes neither replica is on, so losing the leader's node costs
    // the sweep only its operator.
    let free: Vec<String> = e2e_nodes()
        .into_iter()
        .filter(|n| !nodes.contains(n))
        .collect();
    assert!(
        free.len() >= 2,
        "two nodes without an operator replica: {free:?} (replicas on {nodes:?})"
    );
    let mut sweep = iperf_sweep(3);
    sweep["template"]["spec"]["placement"] =
        json!({"server": {"nodes": [free[0]]}, "client": {"nodes": [free[1]]}});
    let leader_node = replicas
        .iter()
        .find(|p| p.name_any() == leader)
        .and_then(|p| p.spec.as_ref().and_then(|s| s.node_name.clone()))
        .expect("the leader's node");
    let name = "e2e-leader";
    let started = start_set(&client, name, sweep).await;
    let before = child_uids(&client, name).await;
    harness("stop", &kubelet_of(&leader_node));
    harness("kill", &format!("{namespace}/{leader}"));
    let killed = Instant::now();
    let leases: Api<Lease> = Api::namespaced(client.clone(), &namespace);
    let lease_name = lease.name_any();
    let taken = loop {
        let current = leases.get(&lease_name).await.expect("the Lease readable");
        if holder(&current) != leader {
            break current;
        }
        assert!(
            killed.elapsed() < Duration::from_mins(1),
            "the killed leader {leader} still holds the Lease after a minute"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let takeover = killed.elapsed();
    harness("start", &kubelet_of(&leader_node));
    assert_eq!(holder(&taken), standby, "the standby took over");
    assert_eq!(
        taken.spec.as_ref().and_then(|s| s.lease_transitions),
        Some(transitions + 1),
        "one transition"
    );
    // Two lease durations (15 s each) is what values.yaml promises.
    assert!(
        takeover < Duration::from_secs(30),
        "takeover took {takeover:?}"
    );

    let status = assert_sweep_whole(&client, name, 6, &before).await;
    println!(
        "E2E lifecycle leader's node {leader_node} lost: takeover={:.1}s (lease 15 s) by {standby}; set {name} {} children={} in {:.0}s, {} made before the kill, none twice",
        takeover.as_secs_f64(),
        status["phase"],
        status["children"],
        started.elapsed().as_secs_f64(),
        before.len()
    );
    delete_and_wait(&client, &sets(&client), name).await;
}

/// `helm upgrade` while a set and a long benchmark run: the CRDs become templates
/// (adopted as docs/upgrading.md says), the operator's pods are all replaced, and the
/// benchmarks carry on to their results, no child made twice.
#[tokio::test]
#[ignore = "needs the chart installed on a disposable cluster: tests/e2e/cluster.py run"]
async fn lifecycle_2_a_helm_upgrade_with_benchmarks_running_keeps_them() {
    let client = cluster().await;
    require_in_cluster_operator();
    let (namespace, _) = release();
    let old: Vec<String> = wait_for_ready_operators(&client, &namespace, 2)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    let solo = "e2e-upgrade-solo";
    let api = benchmarks(&client, "IPerf");
    delete_and_wait(&client, &api, solo).await;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "metadata": {"name": solo},
        "spec": {"duration": 40, "scheduler": scheduler(), "timeout": "5m"},
    }))
    .expect("IPerf");
    api.create(&PostParams::default(), &object)
        .await
        .expect("the long IPerf created");
    let name = "e2e-upgrade";
    start_set(&client, name, iperf_sweep(2)).await;
    wait_for_status(&api, solo, Duration::from_mins(2), |s| {
        s["phase"] == "Running"
    })
    .await;
    let before = child_uids(&client, name).await;

    // The upgrade runs beside this test, which records the phases it sees meanwhile.
    let upgrade = std::thread::spawn(|| {
        let started = Instant::now();
        harness_command(&["chart", "upgrade"]);
        started.elapsed()
    });
    let mut seen: Vec<String> = Vec::new();
    while !upgrade.is_finished() {
        let solo_phase = api
            .get(solo)
            .await
            .map(|o| o.data["status"]["phase"].clone());
        let set_status = sets(&client)
            .get(name)
            .await
            .map(|o| o.data["status"].clone());
        let line = format!(
            "{solo} {} / {name} {} ({} succeeded)",
            solo_phase.as_ref().map_or("?".into(), ToString::to_string),
            set_status
                .as_ref()
                .map_or("?".into(), |s| s["phase"].to_string()),
            set_status
                .as_ref()
                .map_or("?".into(), |s| s["succeeded"].to_string()),
        );
        if seen.last() != Some(&line) {
            seen.push(line);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let took = upgrade.join().expect("the upgrade thread");
    println!(
        "E2E lifecycle upgrade: helm upgrade took {:.0}s; phases meanwhile: {seen:?}",
        took.as_secs_f64()
    );

    let new: Vec<String> = wait_for_ready_operators(&client, &namespace, 2)
        .await
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(
        new.iter().all(|pod| !old.contains(pod)),
        "every operator pod replaced: before {old:?}, after {new:?}"
    );
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client.clone());
    let iperf_crd = crds
        .get("iperfs.perfsweep.io")
        .await
        .expect("the IPerf CRD");
    assert_eq!(
        iperf_crd
            .labels()
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm"),
        "the CRD is the release's now"
    );
    assert_eq!(
        iperf_crd
            .annotations()
            .get("helm.sh/resource-policy")
            .map(String::as_str),
        Some("keep"),
        "and kept on uninstall"
    );

    let solo_status = wait_for_status(&api, solo, Duration::from_mins(5), finished).await;
    assert_eq!(solo_status["phase"], "Succeeded", "{solo_status}");
    assert!(
        solo_status["result"]["receivedBitsPerSecond"]
            .as_f64()
            .is_some_and(|bps| bps > 1e7),
        "{solo_status}"
    );
    let status = assert_sweep_whole(&client, name, 4, &before).await;
    println!(
        "E2E lifecycle upgrade: operator pods {old:?} -> {new:?}; {solo} {} {}; set {name} {} children={}, none twice",
        solo_status["phase"], solo_status["summary"], status["phase"], status["children"]
    );
    // The long IPerf stays, to show that uninstalling keeps what the CRDs hold.
    delete_and_wait(&client, &sets(&client), name).await;
}

/// `kubectl` with `args`; its stdout, or `None` when it fails.
fn kubectl_out(args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("kubectl")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("kubectl: {e}"));
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Every object of every listable type the API server serves, namespaced in
/// `namespace` or cluster-scoped with `selector`, as `type/name`.
fn objects(namespaced: bool, namespace: &str, selector: Option<&str>) -> Vec<String> {
    let scope = format!("--namespaced={namespaced}");
    let types = kubectl_out(&["api-resources", "--verbs=list", &scope, "-o", "name"])
        .expect("kubectl api-resources");
    let mut found = Vec::new();
    for kind in types.lines().filter(|t| !t.is_empty()) {
        let mut args = vec!["get", kind, "-o", "name", "--ignore-not-found"];
        if namespaced {
            args.extend(["-n", namespace]);
        }
        if let Some(selector) = selector {
            args.extend(["-l", selector]);
        }
        if let Some(out) = kubectl_out(&args) {
            found.extend(out.lines().filter(|l| !l.is_empty()).map(str::to_owned));
        }
    }
    found
}

/// What a namespace holds without anyone putting it there (the controller manager's CA
/// bundles — this Kubernetes tree, MicroShift's, also publishes OpenShift's service CA —
/// and the default ServiceAccount), and events, which expire.
fn left_by_kubernetes(object: &str) -> bool {
    object.starts_with("event/")
        || object.starts_with("event.events.k8s.io/")
        || [
            "configmap/kube-root-ca.crt",
            "configmap/openshift-service-ca.crt",
            "serviceaccount/default",
        ]
        .contains(&object)
}

/// `helm uninstall`: nothing of the release is left but its CRDs (kept, with what they
/// hold); the namespace stays, as Helm never deletes one.
#[tokio::test]
#[ignore = "needs the chart installed on a disposable cluster: tests/e2e/cluster.py run"]
async fn lifecycle_3_helm_uninstall_leaves_only_the_kept_crds() {
    let client = cluster().await;
    require_in_cluster_operator();
    let (namespace, release_name) = release();
    let selector = format!("app.kubernetes.io/instance={release_name}");
    let crd_count = objects(false, "", Some(&selector))
        .iter()
        .filter(|o| o.ends_with(".perfsweep.io"))
        .count();
    assert!(crd_count >= 10, "the release's CRDs before: {crd_count}");
    // What the suite itself put in the release namespace, as an administrator would:
    // the warehouse job's credentials Secret and the Job it made from the CronJob.
    for object in ["secret/e2e-warehouse-s3", "job/e2e-warehouse-build"] {
        kubectl_out(&[
            "-n",
            &namespace,
            "delete",
            object,
            "--ignore-not-found",
            "--cascade=foreground",
            "--wait=true",
        ])
        .unwrap_or_else(|| panic!("deleting the suite's {object}"));
    }
    harness_command(&["chart", "uninstall"]);
    let uninstalled = Instant::now();
    // Pods end on their own grace period; the garbage collector follows the owners.
    let (namespaced, cluster_wide) = loop {
        let namespaced: Vec<String> = objects(true, &namespace, None)
            .into_iter()
            .filter(|o| !left_by_kubernetes(o))
            .collect();
        let cluster_wide: Vec<String> = objects(false, "", Some(&selector))
            .into_iter()
            .filter(|o| !o.starts_with("customresourcedefinition.apiextensions.k8s.io/"))
            .collect();
        if (namespaced.is_empty() && cluster_wide.is_empty())
            || uninstalled.elapsed() > Duration::from_secs(90)
        {
            break (namespaced, cluster_wide);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let kept: Vec<String> = objects(false, "", Some(&selector))
        .into_iter()
        .filter(|o| o.starts_with("customresourcedefinition.apiextensions.k8s.io/"))
        .collect();
    let solo = benchmarks(&client, "IPerf")
        .get_opt("e2e-upgrade-solo")
        .await
        .expect("IPerfs readable");
    println!(
        "E2E lifecycle uninstall: after {:.0}s: in {namespace}: {namespaced:?}; cluster-wide: {cluster_wide:?}; CRDs kept: {}; the finished IPerf kept: {}",
        uninstalled.elapsed().as_secs_f64(),
        kept.len(),
        solo.is_some()
    );
    assert_eq!(
        namespaced,
        Vec::<String>::new(),
        "nothing left in {namespace}"
    );
    assert_eq!(
        cluster_wide,
        Vec::<String>::new(),
        "nothing of the release left cluster-wide"
    );
    assert_eq!(kept.len(), crd_count, "every CRD kept (crds.keep)");
    let solo = solo.expect("a benchmark in a kept CRD survives the uninstall");
    assert_eq!(solo.data["status"]["phase"], "Succeeded", "with its result");
}
