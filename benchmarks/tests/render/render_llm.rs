//! Rendering an LLMInference whose endpoint needs an API key: the key reaches the load
//! generator's container as `valueFrom.secretKeyRef` (resolved by the kubelet), never as
//! a value, an argument or part of the plan; the pod passes Kubernetes' own schemas
//! (through the PyPI tool `kubernetes-validate`).

use crate::support;

use k8s_openapi::api::core::v1::{EnvVar, Pod};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::render::{BenchmarkRef, render};
use serde_json::json;
use support::{kubernetes_validate, to_value};

#[test]
fn the_api_key_is_a_secret_key_reference_of_the_loadgen_pod_only() {
    let spec = json!({
        "endpoint": {
            "url": "https://llm.example:8443",
            "modelName": "llama",
            "apiKeySecretRef": {"name": "llm-api-key", "key": "token"},
        },
        "requestRates": [4, 16],
        "arrivals": "gamma",
        "burstiness": 0.5,
        "maxConcurrency": 64,
        "requestHeaders": {"X-Team": "perf"},
    });
    let info = registry::lookup("LLMInference").expect("registered");
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
        "metadata": {"name": "keyed", "namespace": "perf"}, "spec": spec,
    });
    assert_eq!(info.validate(&object), Vec::new());
    let plan = info.plan(&spec).expect("a plan");
    let benchmark = BenchmarkRef {
        kind: "LLMInference".into(),
        name: "keyed".into(),
        namespace: "perf".into(),
        uid: "0b6b3c1e-7c55-4b8e-9d53-2b8f3f1e9a10".into(),
    };
    let rendered = render(&benchmark, &spec, &plan).expect("renders");
    let pod: &Pod = rendered
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("keyed-loadgen-0"))
        .expect("the loadgen pod");
    let container = &pod.spec.as_ref().expect("spec").containers[0];
    let env: Vec<&EnvVar> = container.env.iter().flatten().collect();
    let key = env
        .iter()
        .find(|e| e.name == "PERFSWEEP_API_KEY")
        .expect("the API key variable");
    assert_eq!(key.value, None);
    let selector = key
        .value_from
        .as_ref()
        .and_then(|v| v.secret_key_ref.as_ref())
        .expect("a secretKeyRef");
    assert_eq!(
        (selector.name.as_str(), selector.key.as_str()),
        ("llm-api-key", "token")
    );
    // The plan the agent reads names the Secret, never a value.
    let plan_json = serde_json::to_string(&plan).expect("JSON");
    assert!(plan_json.contains("llm-api-key"));
    let objects: Vec<_> = rendered.pods.iter().map(to_value).collect();
    match kubernetes_validate("llm-api-key", &objects) {
        Some(result) => result.unwrap_or_else(|e| panic!("{e}")),
        None => eprintln!("skipped the Kubernetes schema check (see above)"),
    }
}

/// Renders the LLMInference `spec` as benchmark `name` in namespace `perf`.
fn render_llm(name: &str, spec: serde_json::Value) -> perfsweep_benchmarks::render::Rendered {
    let info = registry::lookup("LLMInference").expect("registered");
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "LLMInference",
        "metadata": {"name": name, "namespace": "perf"}, "spec": spec,
    });
    assert_eq!(info.validate(&object), Vec::new());
    let plan = info.plan(&spec).expect("a plan");
    let benchmark = BenchmarkRef {
        kind: "LLMInference".into(),
        name: name.into(),
        namespace: "perf".into(),
        uid: "5d0c2f4e-1a7b-4c3d-8e9f-0a1b2c3d4e5f".into(),
    };
    render(&benchmark, &spec, &plan).expect("renders")
}

#[test]
fn a_ca_bundle_from_a_secret_or_config_map_is_a_read_only_volume_of_the_loadgen_pod() {
    let mut objects = Vec::new();
    for (name, reference, secret) in [
        ("tls-secret", "caSecretRef", true),
        ("tls-configmap", "caConfigMapRef", false),
    ] {
        let rendered = render_llm(
            name,
            json!({
                "endpoint": {
                    "url": "https://llm.example:8443",
                    "modelName": "llama",
                    "tls": {reference: {"name": "llm-ca", "key": "ca.crt"}},
                },
                "numConcurrency": [4],
            }),
        );
        let pod: &Pod = rendered
            .pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(&format!("{name}-loadgen-0")))
            .expect("the loadgen pod");
        let spec = pod.spec.as_ref().expect("spec");
        let volume = spec
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "vol-ca")
            .expect("the CA volume");
        if secret {
            let source = volume.secret.as_ref().expect("a secret volume");
            assert_eq!(source.secret_name.as_deref(), Some("llm-ca"));
        } else {
            let source = volume.config_map.as_ref().expect("a configMap volume");
            assert_eq!(source.name, "llm-ca");
        }
        let container = &spec.containers[0];
        let mount = container
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "vol-ca")
            .expect("the CA mount");
        assert_eq!(mount.mount_path, "/perfsweep/ca");
        assert_eq!(mount.read_only, Some(true));
        objects.extend(rendered.pods.iter().map(to_value));
    }
    match kubernetes_validate("llm-tls", &objects) {
        Some(result) => result.unwrap_or_else(|e| panic!("{e}")),
        None => eprintln!("skipped the Kubernetes schema check (see above)"),
    }
}

#[test]
fn an_object_storage_datasets_credentials_are_secret_key_references() {
    let rendered = render_llm(
        "s3-dataset",
        json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "dataset": {"format": "sharegpt",
                        "source": {"url": "s3://datasets/sharegpt.json", "secretName": "s3-creds",
                                   "parameters": {"endpoint": "http://minio.storage:9000"}}},
        }),
    );
    let pod = rendered
        .pods
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some("s3-dataset-loadgen-0"))
        .expect("the loadgen pod");
    let env: Vec<&EnvVar> = pod.spec.as_ref().expect("spec").containers[0]
        .env
        .iter()
        .flatten()
        .collect();
    let reference = |name: &str| {
        env.iter()
            .find(|e| e.name == name)
            .and_then(|e| e.value_from.as_ref())
            .and_then(|v| v.secret_key_ref.as_ref())
            .map(|s| (s.name.clone(), s.key.clone(), s.optional))
    };
    let s3 = |key: &str, optional| Some(("s3-creds".to_owned(), key.to_owned(), optional));
    assert_eq!(
        reference("AWS_ACCESS_KEY_ID"),
        s3("AWS_ACCESS_KEY_ID", None)
    );
    assert_eq!(
        reference("AWS_SECRET_ACCESS_KEY"),
        s3("AWS_SECRET_ACCESS_KEY", None)
    );
    // A Secret without a session token still starts the pod.
    assert_eq!(
        reference("AWS_SESSION_TOKEN"),
        s3("AWS_SESSION_TOKEN", Some(true))
    );
    let objects: Vec<_> = rendered.pods.iter().map(to_value).collect();
    match kubernetes_validate("s3-dataset", &objects) {
        Some(result) => result.unwrap_or_else(|e| panic!("{e}")),
        None => eprintln!("skipped the Kubernetes schema check (see above)"),
    }
}

#[test]
fn pod_override_env_and_affinity_reach_the_loadgen_pods_only() {
    let affinity = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["load"]}]}]}}});
    let rendered = render_llm(
        "overridden",
        json!({
            "endpoint": {"simulator": {"ttftMillis": 50, "itlMillis": 10}},
            "podOverride": {
                "env": [
                    {"name": "HTTPS_PROXY", "value": "http://proxy:3128"},
                    {"name": "TEAM_TOKEN", "valueFrom": {"secretKeyRef": {"name": "team", "key": "token"}}},
                ],
                "affinity": affinity,
            },
        }),
    );
    let pod = |name: &str| -> serde_json::Value {
        to_value(
            rendered
                .pods
                .iter()
                .find(|p| p.metadata.name.as_deref() == Some(name))
                .unwrap_or_else(|| panic!("pod {name}")),
        )
    };
    let loadgen = pod("overridden-loadgen-0");
    let env = loadgen["spec"]["containers"][0]["env"]
        .as_array()
        .expect("env")
        .clone();
    let find = |name: &str| env.iter().find(|e| e["name"] == name).cloned();
    assert_eq!(
        find("HTTPS_PROXY").map(|e| e["value"].clone()),
        Some(json!("http://proxy:3128"))
    );
    assert_eq!(
        find("TEAM_TOKEN").map(|e| e["valueFrom"]["secretKeyRef"]["name"].clone()),
        Some(json!("team"))
    );
    assert!(
        find("PERFSWEEP_PLAN").is_some(),
        "the agent's own env stays"
    );
    assert_eq!(loadgen["spec"]["affinity"], affinity);
    // The simulator keeps the benchmark-wide settings.
    let simulator = pod("overridden-simulator-0");
    assert_ne!(simulator["spec"]["affinity"], affinity);
    assert!(
        !simulator["spec"]["containers"][0]["env"]
            .as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "HTTPS_PROXY")
    );
    let objects: Vec<_> = rendered.pods.iter().map(to_value).collect();
    match kubernetes_validate("pod-override", &objects) {
        Some(result) => result.unwrap_or_else(|e| panic!("{e}")),
        None => eprintln!("skipped the Kubernetes schema check (see above)"),
    }
}
