//! Shared by the operator's integration tests and the `sweep` benchmark: an API double
//! serving perfsweep's CRDs, the operator running against it, and helpers that act as
//! the benchmark controller would and poll for what the operator does.

// Each target that includes this module uses a different subset of it.
#![allow(dead_code)]

pub mod kubelet;
pub mod s3;

use std::fmt::Display;
use std::io::Write as _;
use std::time::{Duration, Instant};

use kube::Api;
use kube::api::PostParams;
use perfsweep::controller::Settings;
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::set::BenchmarkSet;
use perfsweep_testkit::{ApiDouble, Gvr, RecordedRequest};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long a test waits for the operator to do something before failing. A wait ends
/// as soon as what it waits for is there (milliseconds on an idle machine), so this is
/// only the ceiling: generous, because a CI machine under load was seen to run these
/// binaries four times slower than an idle one (issue 27), and a ceiling too low fails a
/// correct operator.
pub const WAIT: Duration = Duration::from_mins(1);
const POLL: Duration = Duration::from_millis(10);

/// Where the tests put their sets (and so where the children go).
pub const NS: &str = "default";
pub const SETS: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "benchmarksets");
pub const IPERFS: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "iperfs");
pub const LLMS: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "llminferences");

/// An API double serving every perfsweep CRD, authorizing the operator's requests
/// ([`Operator`] runs as the chart's service account) by the RBAC rules the chart
/// renders, so a request the chart does not allow fails as it would in a cluster.
pub async fn double_with_crds() -> ApiDouble {
    let double = ApiDouble::start().await;
    if let Some(rbac) = chart_rbac() {
        double.enforce_rbac(rbac);
    }
    for crd in perfsweep_benchmarks::crds::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let value = serde_json::to_value(&crd).expect("a CRD serializes to JSON");
        double
            .register_crd(&value)
            .unwrap_or_else(|e| panic!("registering CRD {name}: {e}"));
    }
    double
}

/// As [`double_with_crds`], but without the CRD of `kind` (e.g. `LLMInference`): the
/// double then answers 404 for its resources and leaves it out of discovery, as an API
/// server does where a CRD is not installed. Returns the missing CRD, to install later
/// with [`ApiDouble::register_crd`].
pub async fn double_without_crd(kind: &str) -> (ApiDouble, Value) {
    let double = ApiDouble::start().await;
    if let Some(rbac) = chart_rbac() {
        double.enforce_rbac(rbac);
    }
    let mut left_out = None;
    for crd in perfsweep_benchmarks::crds::all() {
        let value = serde_json::to_value(&crd).expect("a CRD serializes to JSON");
        if crd.spec.names.kind == kind {
            left_out = Some(value);
            continue;
        }
        double
            .register_crd(&value)
            .unwrap_or_else(|e| panic!("registering CRD {:?}: {e}", crd.metadata.name));
    }
    (
        double,
        left_out.unwrap_or_else(|| panic!("no CRD of kind {kind}")),
    )
}

/// The repository's root directory.
pub fn repo_root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the operator crate is in the workspace")
        .to_path_buf()
}

/// The chart rendered for release namespace [`NS`] (by Helm's Go SDK,
/// `charts/tests/render.py`) in its cluster-wide mode (`watch.allNamespaces`), as the
/// tests run the operator on every namespace; or `None` (after saying why) when
/// helm-python-sdk is not installed outside CI; under `CI` that is a failure. Rendered
/// once per test binary.
pub fn render_chart() -> Option<Vec<Value>> {
    static RENDERED: std::sync::OnceLock<Option<Vec<Value>>> = std::sync::OnceLock::new();
    RENDERED.get_or_init(render_chart_now).clone()
}

fn render_chart_now() -> Option<Vec<Value>> {
    let script = repo_root().join("charts/tests/render.py");
    let output = std::process::Command::new("python3")
        .arg(&script)
        .args(["--namespace", NS])
        .args(["--set-json", r#"watch={"allNamespaces":true}"#])
        .output();
    let skip = |reason: String| {
        assert!(
            std::env::var_os("CI").is_none(),
            "{reason}, and CI must render the chart"
        );
        // Straight to stderr: the harness captures `eprintln!` of passing tests.
        let _ = writeln!(
            std::io::stderr().lock(),
            "NOT ENFORCING the chart's RBAC in the API double: {reason}"
        );
        None
    };
    let output = match output {
        Ok(output) => output,
        Err(error) => return skip(format!("python3 cannot run: {error}")),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {}
        Some(3) => return skip(stderr.trim().to_owned()),
        _ => panic!("rendering the chart failed ({}): {stderr}", output.status),
    }
    let text = String::from_utf8(output.stdout).expect("the rendered chart is UTF-8");
    Some(perfsweep_benchmarks::formats::yaml::documents(&text).expect("the rendered chart is YAML"))
}

/// The rules of the chart's Roles and ClusterRoles, for its service account.
pub fn chart_rbac() -> Option<perfsweep_testkit::Rbac> {
    let objects = render_chart()?;
    let account = objects
        .iter()
        .find(|o| o["kind"] == "ServiceAccount")
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("perfsweep")
        .to_owned();
    Some(
        perfsweep_testkit::Rbac::from_roles(NS, &account, &objects)
            .unwrap_or_else(|e| panic!("the chart's roles: {e}")),
    )
}

/// The operator's settings in these tests: every namespace, a 50 ms debounce, health
/// and `/metrics` on 127.0.0.1:`port` (0: any free port), the defaults otherwise.
pub fn settings(instance: &str, port: u16) -> Settings {
    Settings {
        namespace: None,
        health_addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)),
        debounce: Duration::from_millis(50),
        instance: Some(instance.to_owned()),
        defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults::default(),
        export: perfsweep::controller::benchmark::export::ExportPolicy::default(),
        max_children_per_set: perfsweep::controller::DEFAULT_MAX_CHILDREN_PER_SET,
        crd_recheck: perfsweep::controller::served::DEFAULT_RECHECK,
    }
}

/// The operator running in a task against a double, until [`Operator::stop`] (or drop,
/// which aborts it).
pub struct Operator {
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<anyhow::Result<()>>>,
}

impl Operator {
    /// Starts `perfsweep::controller::run` with a 50 ms debounce, watching all namespaces.
    pub fn start(double: &ApiDouble, instance: &str) -> Self {
        Self::start_with_export(
            double,
            instance,
            perfsweep::controller::benchmark::export::ExportPolicy::default(),
        )
    }

    /// As [`Operator::start`], exporting finished benchmarks as `export` says.
    pub fn start_with_export(
        double: &ApiDouble,
        instance: &str,
        export: perfsweep::controller::benchmark::export::ExportPolicy,
    ) -> Self {
        Self::start_with(
            double,
            instance,
            export,
            perfsweep::controller::served::DEFAULT_RECHECK,
        )
    }

    /// As [`Operator::start`], asking the API server which kinds it serves every
    /// `crd_recheck` (so a test sees a CRD installed later picked up quickly).
    pub fn start_with_crd_recheck(
        double: &ApiDouble,
        instance: &str,
        crd_recheck: Duration,
    ) -> Self {
        Self::start_with(
            double,
            instance,
            perfsweep::controller::benchmark::export::ExportPolicy::default(),
            crd_recheck,
        )
    }

    fn start_with(
        double: &ApiDouble,
        instance: &str,
        export: perfsweep::controller::benchmark::export::ExportPolicy,
        crd_recheck: Duration,
    ) -> Self {
        Self::start_with_settings(
            double,
            Settings {
                export,
                crd_recheck,
                ..settings(instance, 0)
            },
        )
    }

    /// `perfsweep::controller::run` with `settings` (e.g. [`settings`] on a known port, for
    /// a test that scrapes `/metrics`), as the chart's service account.
    pub fn start_with_settings(double: &ApiDouble, settings: Settings) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stopped.await;
        };
        let task = tokio::spawn(perfsweep::controller::run(
            double.service_account_client(),
            settings,
            shutdown,
        ));
        Self {
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Triggers the graceful shutdown and waits until `run` has returned `Ok`.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self
            .task
            .take()
            .expect("the operator task is there until stop");
        let result = tokio::time::timeout(WAIT, task)
            .await
            .unwrap_or_else(|_| panic!("the operator did not stop within {WAIT:?}"))
            .expect("the operator task panicked");
        if let Err(error) = result {
            panic!("the operator returned an error: {error:#}");
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Polls `check` until it returns `Ok`, failing after `timeout` with `what` and the last
/// `Err` (which should describe what was seen instead).
pub async fn wait_until<T>(
    timeout: Duration,
    what: impl Display,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return value,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(POLL).await,
        }
    }
}

/// A BenchmarkSet object of an IPerf template.
pub fn iperf_set(
    name: &str,
    product: Value,
    repetitions: u32,
    max_parallel: u32,
    failure_policy: &str,
) -> Value {
    json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "BenchmarkSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "template": {
                "apiVersion": "perfsweep.io/v1alpha1",
                "kind": "IPerf",
                "spec": {"duration": 5},
            },
            "repetitions": repetitions,
            "permutations": {"product": product},
            "maxParallel": max_parallel,
            "failurePolicy": failure_policy,
        },
    })
}

/// Creates a set through `kube::Api<BenchmarkSet>`, as a user would.
pub async fn create_set(double: &ApiDouble, object: Value) -> BenchmarkSet {
    let set: BenchmarkSet =
        serde_json::from_value(object).expect("the test's BenchmarkSet deserializes");
    let sets: Api<BenchmarkSet> = Api::namespaced(double.client(), NS);
    sets.create(&PostParams::default(), &set)
        .await
        .expect("creating the BenchmarkSet")
}

/// The children the domain crate expands `set` into, in creation order.
pub fn expected_names(set: &BenchmarkSet) -> Vec<String> {
    let name = set.metadata.name.as_deref().expect("the set has a name");
    perfsweep_benchmarks::set::expand(name, &set.spec)
        .expect("the set is valid")
        .children
        .into_iter()
        .map(|child| child.name)
        .collect()
}

/// The set's status as stored (`null` when it has none or the set is gone).
pub fn set_status(double: &ApiDouble, name: &str) -> Value {
    object_status(double, &SETS, name)
}

/// Waits until the set's status satisfies `accept`.
pub async fn wait_for_status(
    double: &ApiDouble,
    set: &str,
    what: impl Display,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    wait_for_object_status(double, &SETS, set, what, accept).await
}

/// The status of object `name` of `resource` in [`NS`] (null when there is none).
pub fn object_status(double: &ApiDouble, resource: &Gvr, name: &str) -> Value {
    double
        .get(resource, Some(NS), name)
        .and_then(|object| object.get("status").cloned())
        .unwrap_or(Value::Null)
}

/// Waits until the status of object `name` of `resource` satisfies `accept`; returns it.
pub async fn wait_for_object_status(
    double: &ApiDouble,
    resource: &Gvr,
    name: &str,
    what: impl Display,
    accept: impl Fn(&Value) -> bool,
) -> Value {
    wait_until(
        WAIT,
        format_args!("{} {name}: {what}", resource.resource),
        || {
            let status = object_status(double, resource, name);
            if accept(&status) {
                Ok(status)
            } else {
                Err(format!("status {status}"))
            }
        },
    )
    .await
}

/// Waits until the set's `status.children` string is `expected` (one character per child).
pub async fn wait_for_children_string(double: &ApiDouble, set: &str, expected: &str) -> Value {
    wait_for_status(
        double,
        set,
        format_args!("status.children == {expected:?}"),
        |status| status["children"] == expected,
    )
    .await
}

/// The IPerf children of a set (by its label), sorted by name.
pub fn children(double: &ApiDouble, set: &str) -> Vec<Value> {
    let mut children: Vec<Value> = double
        .list(&IPERFS, Some(NS))
        .into_iter()
        .filter(|child| child["metadata"]["labels"][labels::SET] == set)
        .collect();
    children.sort_by(|a, b| name_of(a).cmp(name_of(b)));
    children
}

/// The names of a set's IPerf children, sorted.
pub fn child_names(double: &ApiDouble, set: &str) -> Vec<String> {
    children(double, set)
        .iter()
        .map(|c| name_of(c).to_owned())
        .collect()
}

pub fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// `names`, sorted, for comparing with [`child_names`].
pub fn sorted(names: &[String]) -> Vec<String> {
    let mut names = names.to_vec();
    names.sort();
    names
}

/// Sets a child's `status.phase` as the benchmark controller would.
pub fn set_phase(double: &ApiDouble, child: &str, phase: &str) {
    double
        .patch_status(
            &IPERFS,
            Some(NS),
            child,
            json!({"status": {"phase": phase}}),
        )
        .unwrap_or_else(|e| panic!("setting {child} to {phase}: {e}"));
}

/// Fails a child with a `Failed` condition, as the benchmark controller would.
pub fn fail(double: &ApiDouble, child: &str, message: &str) {
    let status = json!({"status": {
        "phase": "Failed",
        "conditions": [{
            "type": "Failed",
            "status": "True",
            "reason": "ClientFailed",
            "message": message,
            "lastTransitionTime": "2025-01-01T00:00:00Z",
        }],
    }});
    double
        .patch_status(&IPERFS, Some(NS), child, status)
        .unwrap_or_else(|e| panic!("failing {child}: {e}"));
}

/// Requests with this verb on this resource (`plural` or `plural/subresource`).
pub fn requests(double: &ApiDouble, verb: &str, resource: &str) -> Vec<RecordedRequest> {
    double
        .requests()
        .into_iter()
        .filter(|r| r.verb == verb && r.rbac_resource() == resource)
        .collect()
}

/// How many `create`s of IPerf children were answered with `status_code`.
pub fn iperf_creates(double: &ApiDouble, status_code: u16) -> usize {
    requests(double, "create", "iperfs")
        .iter()
        .filter(|r| r.status_code == status_code)
        .count()
}

/// `events.k8s.io/v1` events about the set named `set`.
pub fn events_about(double: &ApiDouble, set: &str) -> Vec<Value> {
    double
        .list(&Gvr::EVENTS_V1, Some(NS))
        .into_iter()
        .filter(|e| e["regarding"]["kind"] == "BenchmarkSet" && e["regarding"]["name"] == set)
        .collect()
}

/// The condition of this type in a status, or `null`.
pub fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|conditions| conditions.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

/// Creates a node with these labels in the double (nodes are cluster-scoped).
pub fn create_node(double: &ApiDouble, name: &str, labels: Value) {
    double
        .create(
            &Gvr::NODES,
            json!({
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
            }),
        )
        .unwrap_or_else(|e| panic!("creating node {name}: {e}"));
}

/// An IPerf set over every pair of the nodes labelled `bench=yes`.
pub fn node_pair_set(name: &str, max_parallel: u32) -> Value {
    let mut set = iperf_set(name, json!({}), 1, max_parallel, "Continue");
    set["spec"]["permutations"] = json!({
        "nodePairs": {"selector": {"matchLabels": {"bench": "yes"}}},
    });
    set
}
