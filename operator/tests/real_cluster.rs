//! Opt-in suite against a real Kubernetes cluster: `PERFSWEEP_E2E=1` with `KUBECONFIG`
//! pointing at a disposable cluster. It installs perfsweep's CRDs there (server-side
//! apply), checks that the real API server's admission (schema and CEL rules) rejects
//! what perfsweep's offline validation rejects, and — with `PERFSWEEP_E2E_IMAGE` set to
//! a pullable iperf image built from `images/iperf` — runs an IPerf benchmark end to end
//! with the operator running in this process.
//!
//! Without those variables every test prints why it skipped and passes: CI has no
//! cluster (the in-memory API double covers the controllers there).

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};
use perfsweep_benchmarks::{crds, registry};
use serde_json::json;

const NAMESPACE: &str = "default";

async fn cluster() -> Option<Client> {
    if std::env::var("PERFSWEEP_E2E").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED: real-cluster suite is opt-in: set PERFSWEEP_E2E=1 and KUBECONFIG to a disposable cluster"
        );
        return None;
    }
    match Client::try_default().await {
        Ok(client) => Some(client),
        Err(error) => panic!("PERFSWEEP_E2E=1 but no cluster is reachable: {error}"),
    }
}

async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds::all() {
        let name = crd.name_any();
        api.patch(
            &name,
            &PatchParams::apply("perfsweep-e2e").force(),
            &Patch::Apply(&crd),
        )
        .await
        .unwrap_or_else(|e| panic!("the API server refused CRD {name}: {e}"));
        tokio::time::timeout(
            Duration::from_secs(60),
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} was not established within 60s"))
        .unwrap_or_else(|e| panic!("watching CRD {name}: {e}"));
    }
}

async fn dry_run_error(client: &Client, kind: &str, object: serde_json::Value) -> String {
    let info = registry::lookup(kind).map(perfsweep::controller::benchmarkset::api_resource);
    let resource = info.unwrap_or_else(|| {
        kube::api::ApiResource::erase::<perfsweep_benchmarks::set::BenchmarkSet>(&())
    });
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("test object");
    match api
        .create(
            &PostParams {
                dry_run: true,
                ..Default::default()
            },
            &object,
        )
        .await
    {
        Ok(_) => panic!("admission accepted an invalid {kind}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            status.message
        }
        Err(other) => panic!("unexpected error: {other}"),
    }
}

#[tokio::test]
async fn admission_rejects_what_offline_validation_rejects() {
    let Some(client) = cluster().await else {
        return;
    };
    install_crds(&client).await;
    let streams = dry_run_error(
        &client,
        "IPerf",
        json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "metadata": {"name": "e2e-streams"}, "spec": {"streams": 0}}),
    )
    .await;
    assert!(streams.contains("spec.streams"), "{streams}");
    let udp = dry_run_error(
        &client,
        "IPerf",
        json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "metadata": {"name": "e2e-udp"}, "spec": {"protocol": "UDP"}}),
    )
    .await;
    assert!(udp.contains("UDP needs a target bitrate"), "{udp}");
    let long_name = "a".repeat(40);
    let set = dry_run_error(
        &client,
        "BenchmarkSet",
        json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet", "metadata": {"name": long_name},
            "spec": {"template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf"}}}),
    )
    .await;
    assert!(set.contains("at most 35 characters"), "{set}");
}

#[tokio::test]
async fn an_iperf_benchmark_runs_on_the_cluster() {
    let Some(client) = cluster().await else {
        return;
    };
    let Ok(image) = std::env::var("PERFSWEEP_E2E_IMAGE") else {
        eprintln!(
            "SKIPPED: set PERFSWEEP_E2E_IMAGE to an iperf image built from images/iperf that the cluster can pull"
        );
        return;
    };
    install_crds(&client).await;
    let scheduler = std::env::var("PERFSWEEP_E2E_SCHEDULER").unwrap_or_else(|_| "volcano".into());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let settings = perfsweep::controller::Settings {
        namespace: Some(NAMESPACE.into()),
        health_addr: "127.0.0.1:0".parse().expect("address"),
        debounce: Duration::from_millis(200),
        instance: Some("e2e".into()),
        defaults: Default::default(),
        export: Default::default(),
    };
    let operator = tokio::spawn(perfsweep::controller::run(
        client.clone(),
        settings,
        async {
            let _ = stop_rx.await;
        },
    ));
    let resource = perfsweep::controller::benchmarkset::api_resource(
        registry::lookup("IPerf").expect("IPerf"),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &resource);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "metadata": {"name": "e2e-iperf"},
        "spec": {"image": image, "duration": 5, "scheduler": scheduler, "timeout": "5m"}
    }))
    .expect("IPerf object");
    let _ = api.delete("e2e-iperf", &DeleteParams::default()).await;
    api.create(&PostParams::default(), &object)
        .await
        .expect("IPerf created");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(300);
    let status = loop {
        let current = api.get("e2e-iperf").await.expect("IPerf readable");
        let phase = current.data["status"]["phase"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if phase == "Succeeded" || phase == "Failed" {
            break current.data["status"].clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no result within 5 minutes: {}",
            current.data["status"]
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let _ = stop_tx.send(());
    let _ = operator.await;
    let _ = api.delete("e2e-iperf", &DeleteParams::default()).await;
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert!(
        status["result"]["receivedBitsPerSecond"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "{status}"
    );
}
