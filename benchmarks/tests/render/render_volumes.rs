//! Rendering the plan's volumes: Fio's workers mount one claim each (ReadWriteOnce), one
//! shared claim (ReadWriteMany), an existing claim or an emptyDir; the claims a benchmark
//! creates are owned and labelled like its pods; everything passes Kubernetes' own API
//! schemas (through the PyPI tool `kubernetes-validate`, which bundles them). PyTorch's
//! single worker renders too.

use crate::support;

use support::{kubernetes_validate, to_value};

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Volume};
use perfsweep_benchmarks::execution::plan::{Plan, RoleVolume, VolumeSource};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::render::{BenchmarkRef, Rendered, render};
use serde_json::{Value, json};

const NAMESPACE: &str = "perf";
const UID: &str = "0b6b3c1e-7c55-4b8e-9d53-2b8f3f1e9a10";

fn benchmark(kind: &str, name: &str) -> BenchmarkRef {
    BenchmarkRef {
        kind: kind.into(),
        name: name.into(),
        namespace: NAMESPACE.into(),
        uid: UID.into(),
    }
}

/// Validates `spec` as admission would, plans and renders it.
fn render_kind(kind: &str, name: &str, spec: Value) -> (Rendered, Plan) {
    let info = registry::lookup(kind).expect("registered kind");
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    });
    let errors = info.validate(&object);
    assert!(errors.is_empty(), "test spec {spec} is invalid: {errors:?}");
    let plan = info.plan(&spec).expect("a plan");
    let rendered = render(&benchmark(kind, name), &spec, &plan).expect("renders");
    assert_eq!(rendered.pods.len() as u32, plan.process_count());
    (rendered, plan)
}

fn pod<'a>(rendered: &'a Rendered, name: &str) -> &'a Pod {
    rendered
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no pod {name}"))
}

/// The plan volume `data` of a pod (`vol-data`) and where the agent container mounts it.
fn data_volume(pod: &Pod) -> Option<(Volume, String)> {
    let spec = pod.spec.as_ref()?;
    let volume = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name == "vol-data")?
        .clone();
    let mount = spec.containers[0]
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.name == "vol-data")?
        .mount_path
        .clone();
    Some((volume, mount))
}

fn claim_of(pod: &Pod) -> Option<String> {
    data_volume(pod)?
        .0
        .persistent_volume_claim
        .map(|c| c.claim_name)
}

fn check_owned_claim(claim: &PersistentVolumeClaim, benchmark: &str) {
    let metadata = &claim.metadata;
    assert_eq!(metadata.namespace.as_deref(), Some(NAMESPACE));
    let labels = metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels["perfsweep.io/benchmark"], benchmark);
    assert_eq!(labels["app.kubernetes.io/managed-by"], "perfsweep");
    let owners = metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{metadata:?}");
    assert_eq!(
        (
            owners[0].kind.as_str(),
            owners[0].name.as_str(),
            owners[0].uid.as_str()
        ),
        ("Fio", benchmark, UID)
    );
    assert_eq!(owners[0].controller, Some(true));
}

fn claim_template(mode: &str) -> Value {
    json!({
        "accessModes": [mode],
        "storageClassName": "fast",
        "resources": {"requests": {"storage": "20Gi"}},
    })
}

#[test]
fn read_write_once_gives_every_worker_its_own_claim() {
    let (rendered, plan) = render_kind(
        "Fio",
        "rwo",
        json!({"numWorkers": 3, "volumeClaimTemplate": claim_template("ReadWriteOnce")}),
    );
    let names: Vec<&str> = rendered
        .claims
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    assert_eq!(
        names,
        [
            "rwo-worker-0-data",
            "rwo-worker-1-data",
            "rwo-worker-2-data"
        ]
    );
    for claim in &rendered.claims {
        check_owned_claim(claim, "rwo");
        let spec = to_value(claim.spec.as_ref().expect("a spec"));
        assert_eq!(spec, claim_template("ReadWriteOnce"));
    }
    for i in 0..3 {
        let worker = pod(&rendered, &format!("rwo-worker-{i}"));
        let (_, mount) = data_volume(worker).expect("the worker mounts its volume");
        assert_eq!(mount, "/data");
        assert_eq!(claim_of(worker), Some(format!("rwo-worker-{i}-data")));
    }
    assert!(
        data_volume(pod(&rendered, "rwo-client-0")).is_none(),
        "the client does no I/O"
    );
    assert_eq!(plan.role("worker").map(|r| r.volumes.len()), Some(1));
}

#[test]
fn read_write_many_shares_one_claim() {
    let (rendered, _) = render_kind(
        "Fio",
        "rwx",
        json!({"numWorkers": 2, "volumeClaimTemplate": claim_template("ReadWriteMany")}),
    );
    assert_eq!(rendered.claims.len(), 1);
    check_owned_claim(&rendered.claims[0], "rwx");
    assert_eq!(
        rendered.claims[0].metadata.name.as_deref(),
        Some("rwx-data")
    );
    for i in 0..2 {
        assert_eq!(
            claim_of(pod(&rendered, &format!("rwx-worker-{i}"))).as_deref(),
            Some("rwx-data")
        );
    }
}

#[test]
fn an_existing_claim_is_mounted_and_never_created() {
    let (rendered, _) = render_kind(
        "Fio",
        "existing",
        json!({"numWorkers": 2, "existingClaim": "nvme-pool"}),
    );
    assert!(rendered.claims.is_empty());
    for i in 0..2 {
        assert_eq!(
            claim_of(pod(&rendered, &format!("existing-worker-{i}"))).as_deref(),
            Some("nvme-pool")
        );
    }
}

#[test]
fn without_storage_the_workers_use_an_empty_dir() {
    for spec in [json!({}), json!({"emptyDir": true})] {
        let (rendered, _) = render_kind("Fio", "scratch", spec);
        assert!(rendered.claims.is_empty());
        let (volume, mount) =
            data_volume(pod(&rendered, "scratch-worker-0")).expect("a data volume");
        assert!(volume.empty_dir.is_some(), "{volume:?}");
        assert_eq!(mount, "/data");
    }
}

#[test]
fn conflicting_or_misplaced_volumes_are_refused() {
    let (_, mut plan) = render_kind("Fio", "bad", json!({}));
    let spec = json!({});
    let worker = plan
        .roles
        .iter_mut()
        .find(|r| r.name == "worker")
        .expect("worker");
    worker.volumes[0].mount_path = "/work".into();
    let error = render(&benchmark("Fio", "bad"), &spec, &plan).expect_err("refused");
    assert!(error.to_string().contains("already in use"), "{error}");

    let (_, mut plan) = render_kind("Fio", "bad", json!({}));
    plan.roles[1].volumes.push(RoleVolume {
        name: "data".into(),
        mount_path: "/elsewhere".into(),
        source: VolumeSource::ExistingClaim {
            claim_name: "other".into(),
        },
    });
    let error = render(&benchmark("Fio", "bad"), &spec, &plan).expect_err("refused");
    assert!(error.to_string().contains("defined twice"), "{error}");
}

#[test]
fn pytorch_renders_one_worker_with_its_gpus() {
    let (rendered, plan) = render_kind(
        "PyTorch",
        "pt",
        json!({"model": "resnet50", "device": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}),
    );
    assert_eq!(plan.process_count(), 1);
    let worker = pod(&rendered, "pt-worker-0");
    let container = &worker.spec.as_ref().expect("spec").containers[0];
    let limits = container
        .resources
        .as_ref()
        .and_then(|r| r.limits.clone())
        .unwrap_or_default();
    assert_eq!(limits["nvidia.com/gpu"].0, "2");
    assert!(
        container
            .image
            .as_deref()
            .is_some_and(|i| i.contains("/pytorch:"))
    );
    assert!(rendered.claims.is_empty());
}

/// An LLMInference reading its tokenizer from a ConfigMap and its dataset from a PVC.
fn llm_inputs_spec() -> Value {
    json!({
        "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
        "tokenizer": {"configMap": {"name": "llama3-tokenizer", "key": "tokenizer.json"}},
        "dataset": {"format": "sharegpt", "source": {"pvc": {"claimName": "datasets", "path": "sharegpt.json"}}},
    })
}

#[test]
fn llm_inputs_mount_a_configmap_read_only_and_an_existing_claim() {
    let (rendered, _) = render_kind("LLMInference", "llm", llm_inputs_spec());
    assert!(
        rendered.claims.is_empty(),
        "existing claims are not created"
    );
    let loadgen = pod(&rendered, "llm-loadgen-0");
    let spec = loadgen.spec.as_ref().expect("spec");
    let volume = |name: &str| {
        spec.volumes
            .iter()
            .flatten()
            .find(|v| v.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let tokenizer = volume("vol-tokenizer");
    assert_eq!(
        tokenizer.config_map.as_ref().map(|c| c.name.as_str()),
        Some("llama3-tokenizer")
    );
    let dataset = volume("vol-dataset");
    assert_eq!(
        dataset
            .persistent_volume_claim
            .as_ref()
            .map(|c| c.claim_name.as_str()),
        Some("datasets")
    );
    let mounts = spec.containers[0].volume_mounts.clone().unwrap_or_default();
    let mount = |name: &str| {
        mounts
            .iter()
            .find(|m| m.name == name)
            .cloned()
            .unwrap_or_else(|| panic!("no mount {name}"))
    };
    assert_eq!(mount("vol-tokenizer").mount_path, "/perfsweep/tokenizer");
    assert_eq!(mount("vol-tokenizer").read_only, Some(true));
    assert_eq!(mount("vol-dataset").mount_path, "/perfsweep/dataset");
}

#[test]
fn rendered_claims_and_pods_pass_the_kubernetes_schemas() {
    let mut objects = Vec::new();
    for (name, spec) in [
        (
            "rwo",
            json!({"numWorkers": 2, "volumeClaimTemplate": claim_template("ReadWriteOnce")}),
        ),
        (
            "rwx",
            json!({"numWorkers": 2, "volumeClaimTemplate": claim_template("ReadWriteMany")}),
        ),
        ("existing", json!({"existingClaim": "nvme-pool"})),
        ("scratch", json!({"emptyDir": true, "prefill": true})),
    ] {
        let (rendered, _) = render_kind("Fio", name, spec);
        objects.extend(rendered.claims.iter().map(to_value));
        objects.extend(rendered.pods.iter().map(to_value));
    }
    let (rendered, _) = render_kind("PyTorch", "pt", json!({"model": "alexnet"}));
    objects.extend(rendered.pods.iter().map(to_value));
    let (rendered, _) = render_kind("LLMInference", "llm", llm_inputs_spec());
    objects.extend(rendered.pods.iter().map(to_value));
    assert!(objects.iter().any(|o| o["kind"] == "PersistentVolumeClaim"));
    let Some(result) = kubernetes_validate("volumes", &objects) else {
        return;
    };
    if let Err(message) = result {
        panic!("rendered objects fail the Kubernetes schemas: {message}");
    }
    // The check can fail: a claim with a misspelled field is rejected.
    let mut broken = objects
        .iter()
        .find(|o| o["kind"] == "PersistentVolumeClaim")
        .cloned()
        .expect("a claim");
    broken["spec"]["accesModes"] = json!(["ReadWriteOnce"]);
    let result = kubernetes_validate("broken-claim", std::slice::from_ref(&broken))
        .expect("the tool was there a moment ago");
    assert!(
        result.is_err(),
        "kubernetes-validate accepted a broken claim"
    );
}
