//! Rendering of the MPI kinds (launcher and worker pods, the launch-token Secret, the
//! hostfile) and the RDMA kinds (server and client with IPC_LOCK), checked against
//! Volcano's PodGroup CRD and Kubernetes' own API schemas (`kubernetes-validate`, as in
//! render.rs), and for the launch wiring the agents rely on.

use crate::support;

use support::{to_value, volcano_schema};

use perfsweep_benchmarks::execution::agent_env;
use perfsweep_benchmarks::execution::plan::{Plan, fill};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::render::{BenchmarkRef, Rendered, launch, render};
use serde_json::{Value, json};

const NAMESPACE: &str = "perf";

fn rendered(kind: &str, name: &str, spec: Value) -> (Rendered, Plan) {
    let info = registry::lookup(kind).expect("registered");
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    });
    let errors = info.validate(&object);
    assert!(errors.is_empty(), "{kind} {spec} is invalid: {errors:?}");
    let plan = info.plan(&spec).expect("a plan");
    let reference = BenchmarkRef {
        kind: kind.into(),
        name: name.into(),
        namespace: NAMESPACE.into(),
        uid: "0b5c6e1e-2f8a-4c1b-9d7e-6a5b4c3d2e1f".into(),
    };
    (render(&reference, &spec, &plan).expect("renders"), plan)
}

fn env<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .unwrap_or(&Value::Null)
}

fn all_objects(rendered: &Rendered) -> Vec<Value> {
    let mut objects = vec![to_value(&rendered.service)];
    objects.extend(rendered.pods.iter().map(to_value));
    objects.extend(rendered.secrets.iter().map(to_value));
    objects
}

#[test]
fn mpi_and_rdma_objects_pass_the_volcano_and_kubernetes_schemas() {
    let schema = volcano_schema();
    let mut objects = Vec::new();
    for (kind, spec) in [
        ("MPIPingPong", json!({})),
        (
            "MPIPingPong",
            json!({"transport": "RDMA", "hostNetwork": true,
            "resources": {"limits": {"rdma/hca_shared_devices_a": "1"}}}),
        ),
        (
            "MPIPingPong",
            json!({"networkName": "sriov-net",
            "resources": {"limits": {"intel.com/sriov_netdevice": "1"}}}),
        ),
        (
            "OpenFOAM",
            json!({"numProcs": 8, "numNodes": 4, "problemSize": "M"}),
        ),
        (
            "RDMABandwidth",
            json!({"mode": "write", "qps": 4, "networkName": "macvlan-rdma",
            "resources": {"limits": {"rdma/hca_shared_devices_a": "1"}}}),
        ),
        (
            "RDMALatency",
            json!({"mode": "send", "hostNetwork": true, "gidIndex": 3}),
        ),
    ] {
        let (rendered, plan) = rendered(kind, "bench", spec);
        assert_eq!(rendered.pods.len() as u32, plan.process_count());
        let group = rendered.pod_group.as_ref().expect("Volcano by default");
        assert_eq!(
            group.spec.min_member,
            Some(plan.process_count() as i32),
            "gang of all pods"
        );
        let errors = schema.check_object_root(&to_value(group));
        assert!(
            errors.is_empty(),
            "{kind}: PodGroup rejected by Volcano's CRD: {errors:?}"
        );
        objects.extend(all_objects(&rendered));
    }
    kubernetes_validate(&objects);
}

#[test]
fn an_mpi_benchmark_gets_a_token_secret_its_pods_read_by_name() {
    let (rendered, plan) = rendered("OpenFOAM", "cavity", json!({"numProcs": 4, "numNodes": 2}));
    assert!(plan.remote_launch());
    let names: Vec<String> = rendered
        .pods
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    assert_eq!(
        names,
        ["cavity-launcher-0", "cavity-worker-0", "cavity-worker-1"]
    );

    let [secret] = rendered.secrets.as_slice() else {
        panic!("one Secret: {:?}", rendered.secrets);
    };
    assert_eq!(secret.metadata.name.as_deref(), Some("cavity-launch"));
    let labels = secret.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["perfsweep.io/benchmark"], "cavity");
    let owner = &secret.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("OpenFOAM", Some(true))
    );
    // Rendering is pure: no token; the controller adds one when it creates the Secret.
    assert!(secret.data.is_none() && secret.string_data.is_none());
    assert!(launch::needs_token(secret));
    let filled = launch::with_token(secret, "00ff");
    assert!(!launch::needs_token(&filled));
    assert_eq!(filled.string_data.as_ref().expect("data")["token"], "00ff");

    for pod in &rendered.pods {
        let pod = to_value(pod);
        let reference = &env(&pod, agent_env::LAUNCH_TOKEN)["valueFrom"]["secretKeyRef"];
        assert_eq!(
            reference,
            &json!({"name": "cavity-launch", "key": "token", "optional": false})
        );
    }
    // The launcher pod carries the hostfile, which names every worker with its slots.
    let launcher = to_value(&rendered.pods[0]);
    let plan_env: Plan = serde_json::from_str(
        env(&launcher, agent_env::PLAN)["value"]
            .as_str()
            .expect("plan"),
    )
    .expect("the plan");
    let hostfile = &plan_env.role("launcher").expect("launcher").files[0];
    assert_eq!(hostfile.path, "hostfile");
    let peers = [(
        "worker".to_owned(),
        vec!["w0.cavity".to_owned(), "w1.cavity".to_owned()],
    )]
    .into();
    assert_eq!(
        fill(&hostfile.contents, &peers).expect("fills"),
        "w0.cavity slots=2\nw1.cavity slots=2\n"
    );
}

#[test]
fn the_launcher_takes_no_devices_and_no_capabilities() {
    let (rendered, _) = rendered(
        "MPIPingPong",
        "pp",
        json!({"transport": "RDMA", "resources": {"limits": {"rdma/hca_shared_devices_a": "1", "cpu": "2"}}}),
    );
    let launcher = to_value(&rendered.pods[0]);
    let worker = to_value(&rendered.pods[1]);
    let limits = |pod: &Value| pod["spec"]["containers"][0]["resources"]["limits"].clone();
    assert!(
        limits(&launcher).get("rdma/hca_shared_devices_a").is_none(),
        "{launcher}"
    );
    assert_eq!(limits(&worker)["rdma/hca_shared_devices_a"], "1");
    let capabilities = |pod: &Value| {
        pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"].clone()
    };
    assert!(capabilities(&launcher).is_null(), "{launcher}");
    assert_eq!(capabilities(&worker), json!(["IPC_LOCK"]));
    assert_eq!(launcher["spec"]["securityContext"]["runAsNonRoot"], true);
}

/// Issue 24: every benchmark's agents authenticate each other, not only those of a
/// plan that launches remotely.
#[test]
fn benchmarks_that_launch_nothing_remotely_get_a_token_too() {
    let (rendered, plan) = rendered("RDMABandwidth", "bw", json!({}));
    assert!(!plan.remote_launch());
    assert_eq!(rendered.secrets.len(), 1);
    for pod in &rendered.pods {
        let pod = to_value(pod);
        let reference = &env(&pod, agent_env::LAUNCH_TOKEN)["valueFrom"]["secretKeyRef"];
        assert_eq!(reference["name"], agent_env::launch_secret_name("bw"));
    }
}

/// The objects must pass `kubernetes-validate --strict` (skipped outside CI when the tool
/// is missing, with the reason printed).
fn kubernetes_validate(objects: &[Value]) {
    if let Some(Err(error)) = support::kubernetes_validate("mpi-rdma", objects) {
        panic!("rendered objects are rejected by {error}");
    }
}
