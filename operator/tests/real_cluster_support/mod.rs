//! What the real-cluster suites share: the cluster's client, the harness's variables and
//! script, and waiting on benchmarks. Each suite uses a part of it.
#![allow(dead_code)] // each test target compiles this module and uses only some of it

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use perfsweep_benchmarks::kinds::registry;

/// The namespace the suites run their benchmarks in (the chart's operator watches it).
pub const NAMESPACE: &str = "default";

/// The cluster's client. `PERFSWEEP_E2E=1` confirms that `KUBECONFIG` points at a
/// disposable cluster (the suite installs CRDs and creates objects there).
pub async fn cluster() -> Client {
    assert_eq!(
        std::env::var("PERFSWEEP_E2E").as_deref(),
        Ok("1"),
        "the real-cluster suite changes the cluster KUBECONFIG points at: set PERFSWEEP_E2E=1 to confirm it is a disposable one"
    );
    let client = Client::try_default()
        .await
        .unwrap_or_else(|error| panic!("PERFSWEEP_E2E=1 but no cluster is reachable: {error}"));
    report_unhealthy_nodes(&client).await;
    client
}

/// Prints (does not fail on) each node that is not Ready, reports a pressure or carries a
/// taint when a test starts: a test that fails after an earlier one broke a node then says
/// so in its own output, which is all CI keeps.
async fn report_unhealthy_nodes(client: &Client) {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    let Ok(list) = nodes.list(&ListParams::default()).await else {
        return;
    };
    for node in list {
        let conditions = node
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let mut odd: Vec<String> = conditions
            .iter()
            .filter(|c| (c.type_ == "Ready") != (c.status == "True"))
            .map(|c| {
                format!(
                    "{}={} ({}: {})",
                    c.type_,
                    c.status,
                    c.reason.as_deref().unwrap_or_default(),
                    c.message.as_deref().unwrap_or_default()
                )
            })
            .collect();
        let spec = node.spec.clone().unwrap_or_default();
        odd.extend(
            spec.taints
                .iter()
                .flatten()
                // The fleet suite's hollow nodes are tainted on purpose.
                .filter(|t| t.key != "perfsweep.io/hollow")
                .map(|t| format!("taint {}:{}", t.key, t.effect)),
        );
        if spec.unschedulable == Some(true) {
            odd.push("cordoned".to_owned());
        }
        if !odd.is_empty() {
            println!(
                "E2E node {} at the start of this test: {}",
                node.name_any(),
                odd.join("; ")
            );
        }
    }
}

/// The iperf image the cluster can pull (`PERFSWEEP_E2E_IMAGE`, built from images/iperf).
pub fn e2e_image() -> String {
    std::env::var("PERFSWEEP_E2E_IMAGE").unwrap_or_else(|_| {
        panic!("set PERFSWEEP_E2E_IMAGE to an iperf image built from images/iperf that the cluster can pull")
    })
}

/// The namespace of the chart's operator Deployment when the operator runs in the
/// cluster (`PERFSWEEP_E2E_OPERATOR=in-cluster:<namespace>`), else `None`.
pub fn in_cluster_operator() -> Option<String> {
    let value = std::env::var("PERFSWEEP_E2E_OPERATOR").ok()?;
    let namespace = value.strip_prefix("in-cluster:").unwrap_or_else(|| {
        panic!("PERFSWEEP_E2E_OPERATOR={value}: expected in-cluster:<namespace>")
    });
    Some(namespace.to_owned())
}

/// Fails (never skips) the tests that need the in-cluster operator and the harness.
pub fn require_in_cluster_operator() -> String {
    in_cluster_operator().unwrap_or_else(|| {
        panic!(
            "this test runs against the chart's operator: set PERFSWEEP_E2E_OPERATOR=in-cluster:<namespace> (tests/e2e/cluster.py does)"
        )
    })
}

pub fn benchmarks(client: &Client, kind: &str) -> Api<DynamicObject> {
    let resource = perfsweep::controller::benchmarkset::api_resource(
        registry::lookup(kind).unwrap_or_else(|| panic!("a kind named {kind}")),
    );
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

pub fn sets(client: &Client) -> Api<DynamicObject> {
    let resource = kube::api::ApiResource::erase::<perfsweep_benchmarks::set::BenchmarkSet>(&());
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// Polls the object's status until `done` accepts it, for at most `within`. A read that
/// fails (an API server too loaded to answer, as under hundreds of hollow nodes) is
/// tried again until then; the last error is in the panic.
pub async fn wait_for_status(
    api: &Api<DynamicObject>,
    name: &str,
    within: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let status = match api.get(name).await {
            Ok(current) => current.data["status"].clone(),
            Err(error) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{name} readable within {within:?}: {error}"
                );
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if done(&status) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} within {within:?}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

pub fn finished(status: &serde_json::Value) -> bool {
    status["phase"] == "Succeeded" || status["phase"] == "Failed" || status["phase"] == "Invalid"
}

/// Deletes the object and waits until it and every pod of its (perfsweep's pods named
/// `<name>-…`) are gone.
pub async fn delete_and_wait(client: &Client, api: &Api<DynamicObject>, name: &str) {
    let _ = api.delete(name, &DeleteParams::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_mins(2);
    loop {
        let object_left = api.get_opt(name).await.expect("readable").is_some();
        let pods_left: Vec<String> = pods
            // perfsweep's pods only: the suite's own (a simulator Deployment) may share
            // a name's prefix.
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=perfsweep"))
            .await
            .expect("pods listed")
            .into_iter()
            .map(|pod| pod.name_any())
            .filter(|pod| pod.starts_with(&format!("{name}-")))
            .collect();
        if !object_left && pods_left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not cleaned up within 2 minutes: object left {object_left}, pods {pods_left:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The children of set `set` (of kind `kind`), by name.
pub async fn children_of(client: &Client, kind: &str, set: &str) -> Vec<DynamicObject> {
    benchmarks(client, kind)
        .list(&ListParams::default())
        .await
        .expect("children listed")
        .items
        .into_iter()
        .filter(|child| {
            child
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.kind == "BenchmarkSet" && owner.name == set)
        })
        .collect()
}

/// A finished benchmark's agent report as its evidence keeps it (`report.json`): what
/// the record adds to the environment (host, command, tool version, network use).
pub async fn evidence_report(client: &Client, benchmark: &str) -> serde_json::Value {
    evidence_file(client, benchmark, "report.json").await
}

async fn evidence_file(client: &Client, benchmark: &str, file: &str) -> serde_json::Value {
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client.clone(), NAMESPACE);
    let map = maps
        .get(&format!("{benchmark}-evidence"))
        .await
        .unwrap_or_else(|e| panic!("{benchmark}'s evidence: {e}"));
    map.data
        .as_ref()
        .and_then(|d| d.get(file))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_else(|| panic!("{benchmark}'s evidence has no {file}"))
}

/// A finished benchmark's environment as its record has it (`environment.json` of its
/// evidence ConfigMap).
pub async fn evidence_environment(client: &Client, benchmark: &str) -> serde_json::Value {
    evidence_file(client, benchmark, "environment.json").await
}

/// The nodes a finished benchmark's pods ran on, from its evidence ConfigMap (what its
/// record says), sorted.
pub async fn evidence_hosts(client: &Client, benchmark: &str) -> Vec<String> {
    let environment = evidence_environment(client, benchmark).await;
    let mut hosts: Vec<String> = environment["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h.as_str().map(str::to_owned))
        .collect();
    hosts.sort();
    hosts
}

/// The harness (`PERFSWEEP_E2E_HARNESS`) stops, starts, slows or kills a component of
/// the cluster: `fault ACTION TARGET`.
pub fn harness(action: &str, target: &str) {
    harness_command(&["fault", action, target]);
}

/// Runs the harness script with `args` (e.g. `chart upgrade`); fails the test if it fails.
pub fn harness_command(args: &[&str]) {
    let script = std::env::var("PERFSWEEP_E2E_HARNESS").unwrap_or_else(|_| {
        panic!("set PERFSWEEP_E2E_HARNESS to tests/e2e/cluster.py (it runs this suite so)")
    });
    let status = std::process::Command::new("python3")
        .arg(&script)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    assert!(status.success(), "{script} {args:?}: {status}");
}

/// The nodes the harness started (`PERFSWEEP_E2E_NODES`, comma-separated).
pub fn e2e_nodes() -> Vec<String> {
    std::env::var("PERFSWEEP_E2E_NODES")
        .unwrap_or_else(|_| panic!("set PERFSWEEP_E2E_NODES to the cluster's node names"))
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// The scheduler two-role benchmarks use: Volcano unless `PERFSWEEP_E2E_SCHEDULER` says.
pub fn scheduler() -> String {
    std::env::var("PERFSWEEP_E2E_SCHEDULER").unwrap_or_else(|_| "volcano".into())
}

/// The operator replica holding the chart's leader election Lease in `namespace`.
pub async fn operator_leader(client: &Client, namespace: &str) -> String {
    Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await
        .expect("Leases listed")
        .items
        .into_iter()
        .find(|l| l.name_any().starts_with("perfsweep-operator"))
        .and_then(|l| l.spec.and_then(|s| s.holder_identity))
        .expect("an operator replica holds the Lease")
}

/// The operator pods' names, IPs and restart counts.
pub async fn operator_pods(client: &Client, namespace: &str) -> Vec<(String, String, i32)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let list = pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=perfsweep"))
        .await
        .expect("the operator's pods");
    list.items
        .into_iter()
        .filter(|pod| pod.metadata.deletion_timestamp.is_none())
        .map(|pod| {
            let status = pod.status.unwrap_or_default();
            let restarts = status
                .container_statuses
                .iter()
                .flatten()
                .map(|c| c.restart_count)
                .sum();
            (
                pod.metadata.name.unwrap_or_default(),
                status.pod_ip.unwrap_or_default(),
                restarts,
            )
        })
        .collect()
}

/// A gauge from the operator's `/metrics` at `ip`:8080.
pub async fn operator_gauge(ip: &str, name: &str) -> Option<f64> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect((ip, 8080)).await.ok()?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {ip}\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    response.lines().find_map(|line| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(' '))
            .and_then(|value| value.trim().parse().ok())
    })
}

/// Labels (or unlabels) the suite's namespace as the administrator does for benchmarks
/// that may set privileged fields: the MTU (which adds NET_ADMIN), tolerations.
pub async fn privileged_namespace(client: &Client, on: bool) {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let value = if on {
        serde_json::json!("true")
    } else {
        serde_json::Value::Null
    };
    namespaces
        .patch(
            NAMESPACE,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                serde_json::json!({"metadata": {"labels": {"perfsweep.io/privileged-benchmarks": value}}}),
            ),
        )
        .await
        .expect("the namespace labelled");
}

/// Volcano's PodGroups in the suite's namespace.
pub fn pod_groups(client: &Client) -> Api<DynamicObject> {
    let resource = kube::api::ApiResource {
        group: "scheduling.volcano.sh".into(),
        version: "v1beta1".into(),
        api_version: "scheduling.volcano.sh/v1beta1".into(),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    };
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// Creates a BenchmarkSet `name` from `spec` (deleting an earlier one and its pods
/// first); returns when it was created.
pub async fn create_set(client: &Client, name: &str, spec: serde_json::Value) -> Instant {
    let api = sets(client);
    delete_and_wait(client, &api, name).await;
    let object: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet", "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a set object");
    let started = Instant::now();
    api.create(&kube::api::PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("set {name} created: {e}"));
    started
}

/// A failed benchmark's status, checked: phase Failed, the `Failed` condition's reason,
/// and its message naming `named`.
pub fn assert_failed_naming(status: &serde_json::Value, reason: &str, named: &str) {
    assert_eq!(status["phase"], "Failed", "{status}");
    let failed = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Failed")
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], reason, "{status}");
    assert!(
        failed["message"]
            .as_str()
            .unwrap_or_default()
            .contains(named),
        "the failure names {named}: {status}"
    );
}
