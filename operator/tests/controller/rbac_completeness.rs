//! The Helm chart's RBAC is exactly what the operator uses.
//!
//! The chart is rendered with Helm's own Go SDK (`charts/tests/render.py`, PyPI
//! `helm-python-sdk`); its ClusterRole and leader election Role are read; then the
//! operator runs, with leader election and as the chart's service account (the double
//! answers 403 to what the rules do not allow, as a real API server does), against the
//! API double through a BenchmarkSet whose children run to completion (the test plays
//! the kubelet), a node-pair set (which lists nodes), and the paths a real cluster takes
//! that a happy run does not: a restart mid-creation (409 on the benchmark's own
//! Service, adopted), a name conflict with someone else's pod, a result log that cannot
//! be read (the kubelet unreachable) and a benchmark deleted while it runs. Every
//! request it made is checked against those rules:
//!
//! - every request is allowed (a missing permission would fail in a real cluster);
//! - every permission is used by some request (an excess permission fails too), except
//!   for the few in [`NOT_EXERCISED`], each with the reason the run cannot produce it.
//!
//! The test creates and edits objects through the double's store directly (not recorded),
//! so every recorded request is the operator's.

use crate::support;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use perfsweep::controller::Settings;
use perfsweep::controller::leader::{LeaderElection, run_with_leader_election};
use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr, RecordedRequest};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT};
use support::{IPERFS, NS, SETS, WAIT, children, iperf_set, name_of, wait_for_status, wait_until};
use tokio::sync::oneshot;

/// The release namespace the chart is rendered for: where the test's Lease lives.
const RELEASE_NAMESPACE: &str = NS;
/// The chart's default Lease name.
const LEASE: &str = "perfsweep-operator";

/// Permissions the chart grants that this run cannot exercise: (API group, resource,
/// verb, why it is needed all the same). Each must be granted and really not exercised,
/// so the list cannot go stale.
const NOT_EXERCISED: &[(&str, &str, &str, &str)] = &[
    (
        "perfsweep.io",
        "benchmarksets/finalizers",
        "update",
        "children carry an owner reference to their set with blockOwnerDeletion, which the \
         OwnerReferencesPermissionEnforcement admission plugin allows only with update on \
         the owner's finalizers; the API double has no admission plugins",
    ),
    (
        "perfsweep.io",
        "<benchmark kind>/finalizers",
        "update",
        "PodGroups, evidence ConfigMaps and the objects of a benchmark without a gang carry \
         an owner reference to their benchmark with blockOwnerDeletion (see \
         benchmarksets/finalizers); a gang's members are owned by its PodGroup, without",
    ),
    (
        "",
        "persistentvolumeclaims",
        "create",
        "the engine creates the claims a kind's rendering lists; none are rendered yet",
    ),
    (
        "",
        "persistentvolumeclaims",
        "delete",
        "the engine deletes a benchmark's rendered claims by name when it ends; none are \
         rendered yet",
    ),
    (
        "scheduling.volcano.sh",
        "podgroups",
        "get",
        "a PodGroup's create that answers 409 is followed by reading the PodGroup (adopt or \
         NameConflict), as for pods and Services; the run's restart mid-creation meets the \
         Service's 409 (the PodGroup comes from the cache, so nothing else reads one)",
    ),
    (
        "",
        "persistentvolumeclaims",
        "get",
        "a claim's create that answers 409 is followed by reading the claim (adopt or \
         NameConflict), as for pods and Services; none are rendered yet",
    ),
];

/// Benchmark resources stand for all benchmark kinds in the comparison: one generic
/// engine serves every kind (`Registration::of::<K>` in the benchmark controller, the
/// set controller's dynamic API), so what an IPerf sweep does, every kind does; the
/// chart is required to grant every kind the same verbs.
const ANY_BENCHMARK: &str = "<benchmark kind>";

/// One RBAC rule, expanded from the chart; `namespace` is `None` for a ClusterRole.
#[derive(Debug)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    verbs: Vec<String>,
    names: Vec<String>,
    namespace: Option<String>,
    source: String,
}

impl Rule {
    fn allows(&self, request: &RecordedRequest) -> bool {
        self.groups.contains(&request.group)
            && self.resources.contains(&request.rbac_resource())
            && self.verbs.contains(&request.verb)
            && (self.names.is_empty()
                || request
                    .name
                    .as_ref()
                    .is_some_and(|n| self.names.contains(n)))
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| request.namespace.as_ref() == Some(ns))
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the operator crate is in the workspace")
        .to_path_buf()
}

/// The chart rendered with default values for the release namespace (see
/// `support::render_chart`), or `None` when the Helm SDK is not installed outside CI.
fn render_chart() -> Option<Vec<Value>> {
    support::render_chart()
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.as_str().expect("RBAC lists hold strings").to_owned())
        .collect()
}

/// The rules of the chart's ClusterRole and of its Roles in the release namespace.
fn chart_rules(objects: &[Value]) -> Vec<Rule> {
    let mut rules = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let namespace = match kind {
            "ClusterRole" => None,
            "Role" => Some(object["metadata"]["namespace"].as_str().unwrap_or_default()),
            _ => continue,
        };
        assert!(
            namespace.is_none_or(|ns| ns == RELEASE_NAMESPACE),
            "in cluster-wide mode the only Roles are in the release namespace: {object}"
        );
        let source = format!("{kind} {}", object["metadata"]["name"]);
        for rule in object["rules"].as_array().expect("a role has rules") {
            let rule = Rule {
                groups: strings(&rule["apiGroups"]),
                resources: strings(&rule["resources"]),
                verbs: strings(&rule["verbs"]),
                names: strings(&rule["resourceNames"]),
                namespace: namespace.map(str::to_owned),
                source: source.clone(),
            };
            for list in [&rule.groups, &rule.resources, &rule.verbs] {
                assert!(
                    !list.iter().any(|s| s.contains('*')),
                    "no wildcards in least-privilege rules: {rule:?}"
                );
            }
            assert!(
                !rule.resources.iter().any(|r| r == "secrets")
                    || rule
                        .verbs
                        .iter()
                        .all(|v| !matches!(v.as_str(), "list" | "watch")),
                "the operator reads Secrets only by name (an outputLocation's): {rule:?}"
            );
            rules.push(rule);
        }
    }
    assert!(
        rules.iter().any(|r| r.namespace.is_none()),
        "the chart renders a ClusterRole by default"
    );
    rules
}

/// Benchmark resources as [`ANY_BENCHMARK`]; the chart must grant every kind alike.
fn normalize(rules: &mut [Rule]) {
    let plurals: BTreeSet<String> = registry::kinds()
        .iter()
        .map(|kind| kind.plural().to_owned())
        .collect();
    for rule in rules.iter_mut() {
        if rule.groups != ["perfsweep.io"] {
            continue;
        }
        for suffix in ["", "/status", "/finalizers"] {
            let named: BTreeSet<String> = rule
                .resources
                .iter()
                .filter_map(|r| {
                    if suffix.is_empty() {
                        (!r.contains('/')).then_some(r.as_str())
                    } else {
                        r.strip_suffix(suffix)
                    }
                })
                .filter(|r| *r != "benchmarksets")
                .map(str::to_owned)
                .collect();
            if named.is_empty() {
                continue;
            }
            assert_eq!(
                named, plurals,
                "a rule on benchmark resources{suffix} must name every kind (same verbs for all): {rule:?}"
            );
            rule.resources
                .retain(|r| !named.iter().any(|p| *r == format!("{p}{suffix}")));
            rule.resources.push(format!("{ANY_BENCHMARK}{suffix}"));
        }
    }
}

fn normalize_request(mut request: RecordedRequest) -> RecordedRequest {
    if request.group == "perfsweep.io"
        && registry::kinds()
            .iter()
            .any(|k| k.plural() == request.resource)
    {
        ANY_BENCHMARK.clone_into(&mut request.resource);
    }
    request
}

fn describe(request: &RecordedRequest) -> String {
    format!(
        "{} {}/{} ({} {})",
        request.verb,
        if request.group.is_empty() {
            "core"
        } else {
            &request.group
        },
        request.rbac_resource(),
        request.path,
        request.status_code
    )
}

/// The operator, with leader election (short timings), until the sender fires.
fn start_operator(
    double: &ApiDouble,
    export_endpoint: &str,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (stop, stopped) = oneshot::channel::<()>();
    let settings = Settings {
        export: perfsweep::controller::benchmark::export::ExportPolicy {
            allowed: perfsweep::export::allowed::AllowedDestinations {
                endpoints: vec![export_endpoint.to_owned()],
                plain_http: true,
            },
            ..perfsweep::controller::benchmark::export::ExportPolicy::default()
        },
        ..support::settings("rbac", 0)
    };
    // The chart's ServiceAccount, which owns the Lease (as `--leader-election-owner`).
    let _ = double.create(
        &Gvr::SERVICE_ACCOUNTS,
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": "perfsweep", "namespace": RELEASE_NAMESPACE}}),
    );
    let election = LeaderElection {
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(700),
        renew_interval: Duration::from_millis(200),
        retry_interval: Duration::from_millis(100),
        ..LeaderElection::new(LEASE, RELEASE_NAMESPACE, "rbac")
    };
    let client = double.service_account_client();
    let task = tokio::spawn(async move {
        // As the CLI does: the Lease's owner read first.
        let owner =
            perfsweep::controller::leader::owner_account(&client, RELEASE_NAMESPACE, "perfsweep")
                .await?;
        run_with_leader_election(client, settings, election.owned_by(owner), async move {
            let _ = stopped.await;
        })
        .await
    });
    (stop, task)
}

/// The node the scheduler binds every pod to: a finished benchmark's record reads the
/// nodes its pods ran on by name.
const NODE: &str = "node-a";

/// The kubelet: the pod runs (`None`) or ends with this exit code, on [`NODE`].
fn kubelet(double: &ApiDouble, pod: &str, exit: Option<i32>) {
    kubelet::bind(double, pod, NODE);
    match exit {
        None => kubelet::run_pod(double, pod),
        Some(code) => kubelet::finish_pod(double, pod, code, ""),
    }
}

/// A port nothing listens on.
fn unused_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The client agent's log: a report of real iperf3 output.
fn agent_log() -> String {
    let path = repo_root().join("benchmarks/testdata/iperf/tcp-4streams.json");
    let raw = std::fs::read_to_string(&path).expect("the iperf3 fixture");
    let parsed = registry::lookup("IPerf")
        .expect("IPerf is registered")
        .parse(&raw)
        .expect("the fixture parses");
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(parsed.result),
            summary: Some(parsed.summary),
        },
        command: vec!["iperf3".into(), "--client".into(), "10.0.0.7".into()],
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: "2026-11-21T10:00:10Z".into(),
        host: Some("node-b".into()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    };
    format!("perfsweep agent: running iperf3\n{}\n", report.to_line())
}

/// Runs a sweep through everything the operator does: leader election, set expansion,
/// pruning after a spec edit, a benchmark's pods, PodGroup and Service, its result from
/// the log, cleanup, graceful shutdown. Returns the operator's requests.
async fn exercise_the_operator() -> Vec<RecordedRequest> {
    let double = support::double_with_crds().await;
    let endpoint = format!("http://127.0.0.1:{}", unused_port());
    let (stop, task) = start_operator(&double, &endpoint);

    // Two children at once; then a spec edit drops one of them (it is deleted). The set
    // exports its children's results (credentials from a Secret) to an endpoint nothing
    // listens on: the export is attempted and fails, which takes the same requests.
    double
        .create(
            &Gvr::SECRETS,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {
                    "name": "export-creds",
                    "namespace": NS,
                    "labels": {"perfsweep.io/export-credentials": "true"},
                },
                "stringData": {"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "key"},
            }),
        )
        .expect("creating the Secret");
    let mut set = iperf_set("rbac", json!({"streams": [1, 2]}), 1, 2, "Continue");
    set["spec"]["outputLocation"] = json!({
        "storageUri": "s3://results/rbac",
        "parameters": {"endpoint": endpoint},
        "secretName": "export-creds",
    });
    double.create(&SETS, set).expect("creating the set");
    // A set that does not deserialize: read once more by name for its InvalidObject
    // event.
    let mut malformed = iperf_set("malformed", json!({}), 1, 1, "Continue");
    malformed["spec"]["repetitions"] = json!("three");
    double
        .create(&SETS, malformed)
        .expect("creating the malformed set");
    wait_until(WAIT, "two children", || {
        match children(&double, "rbac").len() {
            2 => Ok(()),
            n => Err(format!("{n} children")),
        }
    })
    .await;
    wait_until(WAIT, "the malformed set's InvalidObject event", || {
        let reported = support::events_about(&double, "malformed")
            .iter()
            .any(|e| e["reason"] == "InvalidObject");
        if reported {
            Ok(())
        } else {
            Err("no InvalidObject event yet".to_owned())
        }
    })
    .await;
    double
        .patch(
            &SETS,
            Some(NS),
            "rbac",
            json!({"spec": {"permutations": {"product": {"streams": [1]}}}}),
        )
        .expect("editing the set");
    let child = wait_until(WAIT, "the obsolete child to be deleted", || match children(
        &double, "rbac",
    )
    .as_slice()
    {
        [only] => Ok(name_of(only).to_owned()),
        other => Err(format!("{} children", other.len())),
    })
    .await;

    // The remaining child runs to a result.
    let server = format!("{child}-server-0");
    let client = format!("{child}-client-0");
    wait_until(WAIT, "the benchmark's pods", || {
        let pods = double.list(&Gvr::PODS, Some(NS));
        let names: Vec<&str> = pods.iter().map(name_of).collect();
        if names.contains(&server.as_str()) && names.contains(&client.as_str()) {
            Ok(())
        } else {
            Err(format!("pods {names:?}"))
        }
    })
    .await;
    kubelet(&double, &server, None);
    kubelet(&double, &client, None);
    wait_until(WAIT, "the benchmark to run", || {
        let phase = double
            .get(&IPERFS, Some(NS), &child)
            .map(|c| c["status"]["phase"].clone());
        match phase {
            Some(Value::String(p)) if p == "Running" => Ok(()),
            other => Err(format!("phase {other:?}")),
        }
    })
    .await;
    double.set_pod_log(NS, &client, AGENT, &agent_log());
    kubelet(&double, &client, Some(0));
    wait_for_status(&double, "rbac", "phase Succeeded", |s| {
        s["phase"] == "Succeeded"
    })
    .await;
    wait_until(WAIT, "the benchmark's pods to be deleted", || {
        let left: Vec<String> = double
            .list(&Gvr::PODS, Some(NS))
            .iter()
            .map(|pod| name_of(pod).to_owned())
            .filter(|pod| *pod == server || *pod == client)
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("pods {left:?}"))
        }
    })
    .await;

    wait_until(WAIT, "an export attempt", || {
        let exported = double.get(&IPERFS, Some(NS), &child).and_then(|c| {
            c["status"]["conditions"]
                .as_array()?
                .iter()
                .find(|c| c["type"] == "Exported")
                .cloned()
        });
        match exported {
            Some(condition) => Ok(condition),
            None => Err("no Exported condition".to_owned()),
        }
    })
    .await;

    // A node-pair set lists the nodes its selector matches (none here: it is Invalid).
    double
        .create(&SETS, support::node_pair_set("pairs", 1))
        .expect("creating the node-pair set");
    wait_for_status(&double, "pairs", "phase Invalid", |s| {
        s["phase"] == "Invalid"
    })
    .await;

    // The paths a real cluster takes (issue 13).
    let (stop, task) = faults(&double, stop, task).await;

    // Graceful shutdown releases the lease.
    let _ = stop.send(());
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the operator stops")
        .expect("the operator did not panic")
        .expect("the operator stopped without error");
    let lease = double
        .get(&Gvr::LEASES, Some(NS), LEASE)
        .expect("the lease");
    assert!(
        lease["spec"]["holderIdentity"].is_null(),
        "released: {lease}"
    );
    double.requests()
}

fn iperf(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
        "metadata": {"name": name, "namespace": NS},
        "spec": spec,
    })
}

fn phase_of(double: &ApiDouble, name: &str) -> Value {
    double
        .get(&IPERFS, Some(NS), name)
        .map_or(Value::Null, |b| b["status"]["phase"].clone())
}

async fn wait_for_phase(double: &ApiDouble, name: &str, phase: &str) -> Value {
    kubelet::wait_for_phase(double, &IPERFS, name, phase).await
}

async fn wait_for_pod(double: &ApiDouble, pod: &str) {
    wait_until(WAIT, format_args!("pod {pod}"), || {
        double
            .get(&Gvr::PODS, Some(NS), pod)
            .map(drop)
            .ok_or_else(|| "no such pod".to_owned())
    })
    .await;
}

type Running = (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
);

/// A restart mid-creation, a name conflict, an unreadable result log and a deletion;
/// returns the operator that runs after the restart.
async fn faults(
    double: &ApiDouble,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
) -> Running {
    // Restart mid-creation: the Service is made, the first pod's create fails, the
    // operator restarts; the next one's Service create answers 409 and reads it (get).
    double.fail_next(
        perfsweep_testkit::RequestMatcher::new("create", "pods"),
        500,
        "InternalError",
    );
    double
        .create(&IPERFS, iperf("midway", json!({"timeout": "10m"})))
        .expect("creating IPerf midway");
    wait_until(WAIT, "the Service of midway", || {
        double
            .get(&Gvr::SERVICES, Some(NS), "midway")
            .map(drop)
            .ok_or_else(|| "no Service".to_owned())
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the operator stops")
        .expect("the operator did not panic")
        .expect("the operator stopped without error");
    let (stop, task) = start_operator(double, "https://store.example");
    wait_for_pod(double, "midway-client-0").await;
    // A waiting pod deleted by someone else is made again, after reading the benchmark
    // (get): its status, claimed before, says nothing new to write.
    let server = double
        .get(&Gvr::PODS, Some(NS), "midway-server-0")
        .and_then(|pod| pod["metadata"]["uid"].as_str().map(str::to_owned))
        .expect("the server pod of midway");
    double
        .delete(&Gvr::PODS, Some(NS), "midway-server-0")
        .expect("deleting a pod of midway");
    wait_until(WAIT, "the pod made again", || {
        match double.get(&Gvr::PODS, Some(NS), "midway-server-0") {
            Some(pod) if pod["metadata"]["uid"] != server.as_str() => Ok(()),
            pod => Err(format!(
                "pod {}, midway {}",
                pod.is_some(),
                double
                    .get(&IPERFS, Some(NS), "midway")
                    .map_or(Value::Null, |b| b["status"].clone())
            )),
        }
    })
    .await;
    // Deleted while it waits for its pods: what it made goes with it (owner references).
    double
        .delete(&IPERFS, Some(NS), "midway")
        .expect("deleting IPerf midway");

    // Someone else's pod has the name of a benchmark's pod: 409, read (get), NameConflict.
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
    // Without a gang (scheduler: default), what it made is deleted object by object.
    double
        .create(&IPERFS, iperf("taken", json!({"scheduler": "default"})))
        .expect("creating IPerf taken");
    let status = wait_for_phase(double, "taken", "Failed").await;
    assert!(status.to_string().contains("NameConflict"), "{status}");

    // A Multus network that does not exist: read (get) before anything is created.
    double
        .create(&IPERFS, iperf("nonet", json!({"networkName": "nowhere"})))
        .expect("creating IPerf nonet");
    let status = wait_for_phase(double, "nonet", "Failed").await;
    assert!(
        status.to_string().contains("NetworkUnavailable"),
        "{status}"
    );

    // The result pod's kubelet is unreachable: the log cannot be read until the deadline.
    // The deadline is moved into the past only once the operator has tried to read the
    // log twice (each failed try is a Warning event, and the second, a repeat, is counted
    // with a patch: the chart grants that): a fixed short timeout (3 s, before) could
    // pass on a loaded machine while the benchmark still waited for its pods, and it
    // ended TimedOut instead.
    double
        .create(&IPERFS, iperf("nolog", json!({"timeout": "10m"})))
        .expect("creating IPerf nolog");
    wait_for_pod(double, "nolog-client-0").await;
    kubelet(double, "nolog-server-0", None);
    kubelet(double, "nolog-client-0", None);
    double.fail_pod_log(
        NS,
        "nolog-client-0",
        Some(perfsweep_testkit::LogFailure::KubeletUnreachable),
    );
    kubelet(double, "nolog-client-0", Some(0));
    wait_until(
        WAIT,
        "the operator reading the log of nolog-client-0 twice",
        || {
            let requests = double.requests();
            let tries = requests
                .iter()
                .filter(|r| {
                    r.resource == "pods"
                        && r.subresource.as_deref() == Some("log")
                        && r.name.as_deref() == Some("nolog-client-0")
                })
                .count();
            let repeat_counted = requests
                .iter()
                .any(|r| r.group == "events.k8s.io" && r.resource == "events" && r.verb == "patch");
            if tries >= 2 && repeat_counted {
                Ok(())
            } else {
                Err(format!(
                    "{tries} log requests, a repeated event counted: {repeat_counted}"
                ))
            }
        },
    )
    .await;
    double
        .patch(
            &IPERFS,
            Some(NS),
            "nolog",
            json!({"spec": {"timeout": "1s"}}),
        )
        .expect("shortening the timeout of nolog");
    let status = wait_for_phase(double, "nolog", "Failed").await;
    assert!(status.to_string().contains("ResultUnreadable"), "{status}");
    assert_ne!(phase_of(double, "taken"), Value::Null);
    (stop, task)
}

#[tokio::test]
async fn the_charts_rbac_is_exactly_what_the_operator_uses() {
    let Some(objects) = render_chart() else {
        return;
    };
    let mut rules = chart_rules(&objects);
    normalize(&mut rules);
    let requests = exercise_the_operator().await;

    // Discovery and /version are non-resource URLs every authenticated user may read
    // (system:discovery); anything else non-resource would need a rule.
    for request in requests.iter().filter(|r| !r.is_resource_request()) {
        assert!(
            request.verb == "get"
                && (request.path.starts_with("/api") || request.path == "/version"),
            "a non-resource request that discovery does not cover: {request:?}"
        );
    }
    let requests: Vec<RecordedRequest> = requests
        .into_iter()
        .filter(RecordedRequest::is_resource_request)
        .map(normalize_request)
        .collect();

    // (a) Every request is allowed.
    let denied: BTreeSet<String> = requests
        .iter()
        .filter(|request| !rules.iter().any(|rule| rule.allows(request)))
        .map(describe)
        .collect();
    assert!(
        denied.is_empty(),
        "the chart's RBAC does not allow these requests of the operator (add rules to \
         charts/perfsweep/templates/_rbac.tpl, with why):\n{}",
        denied.into_iter().collect::<Vec<_>>().join("\n")
    );

    // (b) Every granted (group, resource, verb) is used, or listed as not exercisable.
    let mut unused = Vec::new();
    let mut stale = Vec::new();
    for rule in &rules {
        for group in &rule.groups {
            for resource in &rule.resources {
                for verb in &rule.verbs {
                    let used = requests.iter().any(|r| {
                        &r.group == group
                            && &r.rbac_resource() == resource
                            && &r.verb == verb
                            && rule.allows(r)
                    });
                    let excused = NOT_EXERCISED
                        .iter()
                        .any(|(g, r, v, _)| g == group && r == resource && v == verb);
                    let what = format!("{verb} {group}/{resource} ({})", rule.source);
                    match (used, excused) {
                        (false, false) => unused.push(what),
                        (true, true) => stale.push(what),
                        _ => {}
                    }
                }
            }
        }
    }
    assert!(
        unused.is_empty(),
        "the chart grants permissions the operator never used (remove them, or list them \
         in NOT_EXERCISED with the reason):\n{}",
        unused.join("\n")
    );
    assert!(
        stale.is_empty(),
        "NOT_EXERCISED lists permissions the run did exercise; remove them from it:\n{}",
        stale.join("\n")
    );
    for (group, resource, verb, why) in NOT_EXERCISED {
        let granted = rules.iter().any(|rule| {
            rule.groups.iter().any(|g| g == group)
                && rule.resources.iter().any(|r| r == resource)
                && rule.verbs.iter().any(|v| v == verb)
        });
        assert!(
            granted,
            "NOT_EXERCISED names {verb} {group}/{resource}, which the chart does not grant ({why})"
        );
    }
}
