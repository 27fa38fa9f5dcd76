//! Issue 24 against a real cluster: what one tenant of a shared cluster must not be able
//! to do, checked where only a real API server, kubelet and network can show it.
//! Opt-in, like `real_cluster.rs`: `PERFSWEEP_E2E=1` with `KUBECONFIG` pointing at a
//! disposable cluster; every test is `#[ignore]`d and fails (never skips) when a variable
//! it needs is missing.
//!
//! - The chart's ValidatingAdmissionPolicy refuses `hostNetwork: true` in a namespace
//!   without the administrator's label, naming the field, and admits it in a labelled
//!   one. Needs the chart installed (`helm install`; the policy is
//!   `<release>-privileged-fields`, `PERFSWEEP_E2E_POLICY`, default
//!   `perfsweep-privileged-fields`).
//! - A pod in another namespace sending STOP, STATUS and BARRIER to a running
//!   benchmark's agent is refused, and the benchmark's result is unaffected
//!   (`PERFSWEEP_E2E_IMAGE`: an iperf image built from images/iperf; its bash sends the
//!   requests).
//! - A benchmark pointing its export at an endpoint the administrator did not allow,
//!   with a Secret of the namespace, never sends the Secret there (`PERFSWEEP_E2E_IMAGE`).
//!   The endpoint listens on an address of this machine that pods reach
//!   (`PERFSWEEP_E2E_HOST_IP`), and a pod beside the acting operator first shows that it
//!   does, so "no connection" cannot hold because nothing could connect.
//!
//! The operator is the chart's, in the cluster (`PERFSWEEP_E2E_OPERATOR=in-cluster:<ns>`),
//! with the chart's export policy (the harness allows only its S3 server): nothing here
//! runs a second operator that could race it.
//! - Someone else's Secret survives a benchmark's NameConflict on it.
//!
//! `PERFSWEEP_E2E=1 PERFSWEEP_E2E_IMAGE=... KUBECONFIG=... cargo test -p perfsweep --test
//! real_cluster_security -- --ignored --test-threads=1`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, LogParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use perfsweep_benchmarks::kinds::registry;
use serde_json::{Value, json};

mod real_cluster_support;
use real_cluster_support::{
    NAMESPACE, cluster, create_set, e2e_image, finished, operator_gauge, operator_leader,
    operator_pods, require_in_cluster_operator, sets, wait_for_status,
};

fn benchmarks(client: &Client, kind: &str, namespace: &str) -> Api<DynamicObject> {
    let resource = perfsweep::controller::benchmarkset::api_resource(
        registry::lookup(kind).unwrap_or_else(|| panic!("kind {kind}")),
    );
    Api::namespaced_with(client.clone(), namespace, &resource)
}

async fn create_benchmark(api: &Api<DynamicObject>, kind: &str, name: &str, spec: Value) {
    let _ = api.delete(name, &DeleteParams::default()).await;
    wait_gone(api, name).await;
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": kind, "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a benchmark object");
    api.create(&PostParams::default(), &object)
        .await
        .unwrap_or_else(|e| panic!("creating {kind} {name}: {e}"));
}

async fn wait_gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..120 {
        if api.get_opt(name).await.ok().flatten().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("{name} was not deleted within a minute");
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == type_))
        .unwrap_or(&Value::Null)
}

async fn ensure_namespace(client: &Client, name: &str, labels: Value) {
    let api: Api<Namespace> = Api::all(client.clone());
    let namespace: Namespace = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": labels},
    }))
    .expect("a namespace");
    api.patch(
        name,
        &PatchParams::apply("perfsweep-e2e").force(),
        &Patch::Apply(&namespace),
    )
    .await
    .unwrap_or_else(|e| panic!("namespace {name}: {e}"));
}

/// The chart's policy refuses `hostNetwork: true` where the administrator has not
/// labelled the namespace, with a message naming the field; a labelled namespace may.
#[tokio::test]
#[ignore = "needs a disposable cluster with the chart installed: PERFSWEEP_E2E=1 KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn the_admission_policy_refuses_host_network_in_an_unlabelled_namespace() {
    let client = cluster().await;
    let policy = std::env::var("PERFSWEEP_E2E_POLICY")
        .unwrap_or_else(|_| "perfsweep-privileged-fields".into());
    let policies: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kube::api::ApiResource {
            group: "admissionregistration.k8s.io".into(),
            version: "v1".into(),
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: "ValidatingAdmissionPolicy".into(),
            plural: "validatingadmissionpolicies".into(),
        },
    );
    policies.get(&policy).await.unwrap_or_else(|e| {
        panic!("ValidatingAdmissionPolicy {policy} is not installed ({e}): helm install the chart (or set PERFSWEEP_E2E_POLICY)")
    });
    require_in_cluster_operator();
    let (plain, privileged) = ("perfsweep-e2e-plain", "perfsweep-e2e-privileged");
    ensure_namespace(&client, plain, json!({})).await;
    ensure_namespace(
        &client,
        privileged,
        json!({"perfsweep.io/privileged-benchmarks": "true"}),
    )
    .await;
    let spec = json!({"duration": 5, "hostNetwork": true, "scheduler": "default"});
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "metadata": {"name": "host"},
        "spec": spec,
    }))
    .expect("an IPerf");
    // A new binding takes a moment to be enforced.
    let mut refusal = None;
    for _ in 0..60 {
        match benchmarks(&client, "IPerf", plain)
            .create(&dry_run, &object)
            .await
        {
            Err(kube::Error::Api(status)) => {
                refusal = Some(status);
                break;
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
    let status =
        refusal.expect("hostNetwork: true was admitted in an unlabelled namespace for 30 s");
    assert!(
        status.message.contains("spec.hostNetwork"),
        "the refusal names the field: {status:?}"
    );
    benchmarks(&client, "IPerf", privileged)
        .create(&dry_run, &object)
        .await
        .expect("a labelled namespace may use hostNetwork");
    // A set varying hostNetwork in its permutations is refused too.
    let sets: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        plain,
        &kube::api::ApiResource::erase::<perfsweep_benchmarks::set::BenchmarkSet>(&()),
    );
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet", "metadata": {"name": "host"},
        "spec": {
            "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 5}},
            "permutations": {"product": {"hostNetwork": [false, true]}},
        },
    }))
    .expect("a set");
    match sets.create(&dry_run, &set).await {
        Err(kube::Error::Api(status)) => {
            assert!(status.message.contains("spec.permutations"), "{status:?}");
        }
        other => panic!("a set varying hostNetwork was not refused: {other:?}"),
    }
}

/// A bash script for the attacker's pod: each request to the agent at `target`, and
/// what came back, one line each.
fn attacker_script(target: &str) -> String {
    format!(
        r#"for request in 'STOP' 'STATUS' 'BARRIER done 1' 'BARRIER iteration-0 0'; do
  if exec 3<>/dev/tcp/{target}/7470; then
    printf '%s\n{{"mac":"00","nonce":"00"}}\n' "$request" >&3
    answer=$(timeout 5 cat <&3 | tr '\n' ' ')
    echo "REQUEST $request ANSWER $answer"
    exec 3>&-
  else
    echo "REQUEST $request UNREACHABLE"
  fi
done
echo ATTACK-DONE"#
    )
}

/// Issue 24, finding 1: any pod could stop a benchmark's server or release its barrier.
/// A pod in another namespace sends STOP, STATUS and BARRIER to the running server's
/// agent: every request is refused (or never connects, where the cluster enforces the
/// benchmark's NetworkPolicy) and the benchmark succeeds with its full result.
#[tokio::test]
#[ignore = "needs a disposable cluster and an iperf image: PERFSWEEP_E2E=1 PERFSWEEP_E2E_IMAGE=... KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn a_pod_in_another_namespace_cannot_steer_a_running_benchmark() {
    let client = cluster().await;
    let image = e2e_image();
    require_in_cluster_operator();
    let attackers = "perfsweep-e2e-attacker";
    ensure_namespace(&client, attackers, json!({})).await;
    let api = benchmarks(&client, "IPerf", NAMESPACE);
    // Long enough for the attacker's requests to land mid-measurement.
    let duration = 20;
    create_benchmark(
        &api,
        "IPerf",
        "e2e-steer",
        json!({"image": image, "duration": duration, "scheduler": "default", "timeout": "5m"}),
    )
    .await;
    wait_for_status(&api, "e2e-steer", Duration::from_mins(3), |s| {
        s["phase"] == "Running" || finished(s)
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let server = pods
        .get("e2e-steer-server-0")
        .await
        .expect("the server pod");
    let target = server
        .status
        .and_then(|s| s.pod_ip)
        .expect("the server pod has an IP");

    let attacker_pods: Api<Pod> = Api::namespaced(client.clone(), attackers);
    let _ = attacker_pods
        .delete("attacker", &DeleteParams::default())
        .await;
    wait_gone(&attacker_pods, "attacker").await;
    let attacker: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "attacker"},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "attacker", "image": image,
                "command": ["bash", "-c", attacker_script(&target)],
                "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
                                    "capabilities": {"drop": ["ALL"]},
                                    "seccompProfile": {"type": "RuntimeDefault"}},
            }],
        },
    }))
    .expect("the attacker pod");
    attacker_pods
        .create(&PostParams::default(), &attacker)
        .await
        .expect("creating the attacker pod");
    let log = {
        let deadline = tokio::time::Instant::now() + Duration::from_mins(2);
        loop {
            let log = attacker_pods
                .logs("attacker", &LogParams::default())
                .await
                .unwrap_or_default();
            if log.contains("ATTACK-DONE") {
                break log;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the attacker did not finish: {log}"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    println!("{log}");
    for granted in ["stopping", "released", "address", "ready"] {
        assert!(
            !log.contains(granted),
            "a request was granted ({granted}): {log}"
        );
    }
    let status = wait_for_status(&api, "e2e-steer", Duration::from_mins(3), finished).await;
    let _ = attacker_pods
        .delete("attacker", &DeleteParams::default())
        .await;
    let _ = api.delete("e2e-steer", &DeleteParams::default()).await;
    assert_eq!(status["phase"], "Succeeded", "{status}");
    assert!(
        status["result"]["receivedBitsPerSecond"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0,
        "{status}"
    );
}

/// Issue 24, finding 2: an `endpoint` the administrator did not allow, with a labelled
/// Secret of the namespace: the benchmark runs, its export fails naming the setting, and
/// nothing ever connects to the endpoint.
#[tokio::test]
#[ignore = "needs a disposable cluster and an iperf image: PERFSWEEP_E2E=1 PERFSWEEP_E2E_IMAGE=... KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn a_foreign_export_endpoint_never_receives_the_secret() {
    let client = cluster().await;
    let image = e2e_image();
    let operator_namespace = require_in_cluster_operator();
    let (address, connections) = attackers_listener(&client, &operator_namespace, &image).await;
    let endpoint = format!("http://{address}");
    let secrets = export_credentials(
        &client,
        "e2e-export-creds",
        json!({"AWS_ACCESS_KEY_ID": "e2e-id", "AWS_SECRET_ACCESS_KEY": "e2e-secret-key"}),
    )
    .await;
    let api = benchmarks(&client, "IPerf", NAMESPACE);
    create_benchmark(
        &api,
        "IPerf",
        "e2e-deputy",
        json!({
            "image": image, "duration": 3, "scheduler": "default", "timeout": "5m",
            "outputLocation": {
                "storageUri": "s3://results/e2e",
                "parameters": {"endpoint": endpoint, "region": "us-east-1"},
                "secretName": "e2e-export-creds",
            },
        }),
    )
    .await;
    let status = wait_for_status(&api, "e2e-deputy", Duration::from_mins(5), |s| {
        finished(s) && condition(s, "Exported")["reason"] == "ExportFailed"
    })
    .await;
    let _ = api.delete("e2e-deputy", &DeleteParams::default()).await;
    let _ = secrets
        .delete("e2e-export-creds", &DeleteParams::default())
        .await;
    let message = condition(&status, "Exported")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.contains("export.allowedEndpoints") || message.contains("plain http"),
        "{status}"
    );
    assert!(!status.to_string().contains("e2e-secret-key"), "{status}");
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the foreign endpoint was contacted"
    );
}

/// A TCP listener on `PERFSWEEP_E2E_HOST_IP` (an address of this machine that pods reach, not the
/// operator's loopback) counting connections, and the control: a pod on the acting
/// operator's node, in its namespace and network, reaches it. Without the control, "0
/// connections" could mean "unreachable". The count is reset after the control.
async fn attackers_listener(
    client: &Client,
    operator_namespace: &str,
    image: &str,
) -> (std::net::SocketAddr, Arc<AtomicUsize>) {
    let host = std::env::var("PERFSWEEP_E2E_HOST_IP").unwrap_or_else(|_| {
        panic!("set PERFSWEEP_E2E_HOST_IP to an address of this machine that pods reach (tests/e2e/cluster.py does)")
    });
    let listener = std::net::TcpListener::bind((host.as_str(), 0)).expect("a port");
    let address = listener.local_addr().expect("an address");
    let connections = Arc::new(AtomicUsize::new(0));
    let seen = connections.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    let reached = probe_from_the_operators_node(client, operator_namespace, image, &address).await;
    assert!(
        reached && connections.load(Ordering::SeqCst) >= 1,
        "the control pod could not reach {address}: the test would prove nothing"
    );
    connections.store(0, Ordering::SeqCst);
    (address, connections)
}

/// A Secret `name` of the suite's namespace labelled as export credentials, with
/// `string_data`, made afresh; the Secrets API, for the caller to delete it.
async fn export_credentials(client: &Client, name: &str, string_data: Value) -> Api<Secret> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": {"perfsweep.io/export-credentials": "true"}},
        "stringData": string_data,
    }))
    .expect("a Secret");
    let _ = secrets.delete(name, &DeleteParams::default()).await;
    wait_gone(&secrets, name).await;
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .expect("creating the Secret");
    secrets
}

/// Issue 34, finding 1: an Azure `account` or an S3 `region` (in the parameters or the
/// URI) was put into the host the credentials went to. Each attempt at the attacker's
/// listener is refused at admission naming the part, a BenchmarkSet whose permutations
/// carry one (values no set-level rule judges) fails naming it, and the listener is
/// never contacted.
#[tokio::test]
#[ignore = "needs a disposable cluster and an iperf image: PERFSWEEP_E2E=1 PERFSWEEP_E2E_IMAGE=... KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn an_export_host_built_from_account_or_region_never_reaches_the_attacker() {
    let client = cluster().await;
    let image = e2e_image();
    let operator_namespace = require_in_cluster_operator();
    let (address, connections) = attackers_listener(&client, &operator_namespace, &image).await;
    let secret_name = "e2e-inject-creds";
    let secrets = export_credentials(
        &client,
        secret_name,
        json!({"AWS_ACCESS_KEY_ID": "e2e-id", "AWS_SECRET_ACCESS_KEY": "e2e-secret-key",
               "AZURE_STORAGE_SAS_TOKEN": "sv=2024&sig=e2e-sas"}),
    )
    .await;
    let attempts = [
        (
            json!({"storageUri": format!("az://{address}?/c/p")}),
            "storageUri",
        ),
        (
            json!({"storageUri": "az://c/p", "parameters": {"account": format!("{address}?")}}),
            "account",
        ),
        (
            json!({"storageUri": "s3://results/p", "parameters": {"region": format!("x@{address}/")}}),
            "region",
        ),
        (
            json!({"storageUri": format!("s3://results@{address}/p")}),
            "storageUri",
        ),
    ];
    let api = benchmarks(&client, "IPerf", NAMESPACE);
    for (mut location, named) in attempts {
        location["secretName"] = json!(secret_name);
        let object: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "e2e-inject"},
            "spec": {"image": image, "duration": 3, "outputLocation": location},
        }))
        .expect("an IPerf");
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(status)) => {
                println!(
                    "E2E security injection {location}: refused: {}",
                    status.message
                );
                assert!(
                    status.message.contains(named) && status.message.contains("outputLocation"),
                    "the refusal names {named}: {status:?}"
                );
            }
            Ok(_) => {
                let _ = api.delete("e2e-inject", &DeleteParams::default()).await;
                panic!("admitted: {location}");
            }
            Err(other) => panic!("unexpected error: {other}"),
        }
    }
    let set_name = "e2e-inject-set";
    create_set(
        &client,
        set_name,
        json!({
            "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                         "spec": {"image": image, "duration": 3, "scheduler": "default"}},
            "permutations": {"product": {"outputLocation": [{
                "storageUri": "s3://results/p",
                "parameters": {"region": format!("x@{address}/")},
                "secretName": secret_name,
            }]}},
        }),
    )
    .await;
    let status = wait_for_status(&sets(&client), set_name, Duration::from_mins(2), finished).await;
    // Long enough for anything the operator might still send.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ = sets(&client)
        .delete(set_name, &DeleteParams::default())
        .await;
    let _ = secrets.delete(secret_name, &DeleteParams::default()).await;
    println!(
        "E2E security injection through a set's permutations: phase {}, {}",
        status["phase"], status["conditions"]
    );
    assert!(
        status["phase"] == "Invalid" || status["phase"] == "Failed",
        "{status}"
    );
    assert!(
        status["conditions"].to_string().contains("region"),
        "the set's status names the region: {status}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the attacker's listener was contacted"
    );
}

/// Issue 34, finding 2: the chart's policy judged `spec.image` only. On a copy of the
/// chart's own policy with an administrator's lists (one registry, Volcano only, no
/// devices, no foreign networks), bound to one namespace: `podOverride.image` from
/// elsewhere, an extended resource, another namespace's network attachment,
/// `scheduler: default` and a set varying the scheduler are refused naming the field;
/// what the lists allow is admitted.
#[tokio::test]
#[ignore = "needs a disposable cluster with the chart installed: PERFSWEEP_E2E=1 KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn the_admission_policy_guards_override_images_devices_networks_and_schedulers() {
    let client = cluster().await;
    let policy = std::env::var("PERFSWEEP_E2E_POLICY")
        .unwrap_or_else(|_| "perfsweep-privileged-fields".into());
    let resource = |kind: &str, plural: &str| kube::api::ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: kind.into(),
        plural: plural.into(),
    };
    let policies: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource("ValidatingAdmissionPolicy", "validatingadmissionpolicies"),
    );
    let bindings: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &resource(
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
        ),
    );
    let chart = policies.get(&policy).await.unwrap_or_else(|e| {
        panic!("ValidatingAdmissionPolicy {policy} is not installed ({e}): helm install the chart")
    });
    let strict_name = "e2e-strict-fields";
    let mut spec = chart.data["spec"].clone();
    for variable in spec["variables"].as_array_mut().expect("variables") {
        let expression = match variable["name"].as_str() {
            Some("imagePrefixes") => r#"["e2e.example/"]"#,
            Some("schedulers") => r#"["volcano"]"#,
            Some("extendedResources" | "networks") => "[]",
            _ => continue,
        };
        variable["expression"] = json!(expression);
    }
    let strict: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": strict_name}, "spec": spec,
    }))
    .expect("the copy");
    let binding: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": strict_name},
        "spec": {"policyName": strict_name, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": {"matchLabels": {"perfsweep.io/e2e-strict-policy": "true"}}}},
    }))
    .expect("the binding");
    let apply = PatchParams::apply("perfsweep-e2e").force();
    policies
        .patch(strict_name, &apply, &Patch::Apply(&strict))
        .await
        .expect("the copy of the policy applied");
    bindings
        .patch(strict_name, &apply, &Patch::Apply(&binding))
        .await
        .expect("its binding applied");
    let namespace = "perfsweep-e2e-strict";
    ensure_namespace(
        &client,
        namespace,
        json!({"perfsweep.io/e2e-strict-policy": "true"}),
    )
    .await;
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let object = |kind: &str, spec: Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": kind, "metadata": {"name": "strict"},
            "spec": spec,
        }))
        .expect("an object")
    };
    let llm = |override_: Value| {
        json!({"endpoint": {"simulator": {"ttftMillis": 5}}, "trafficScenarios": ["D(16,16)"],
               "numConcurrency": [1], "podOverride": override_})
    };
    let refused = [
        (
            "LLMInference",
            llm(json!({"image": "docker.io/evil/llm:1"})),
            "spec.podOverride.image",
        ),
        (
            "LLMInference",
            llm(json!({"resources": {"limits": {"nvidia.com/gpu": "1"}}})),
            "spec.resources",
        ),
        (
            "IPerf",
            json!({"resources": {"requests": {"intel.com/sriov_netdevice": "1"}}}),
            "spec.resources",
        ),
        (
            "IPerf",
            json!({"networkName": "kube-system/host-net"}),
            "spec.networkName",
        ),
        ("IPerf", json!({"scheduler": "default"}), "spec.scheduler"),
    ];
    let admitted = [
        ("LLMInference", llm(json!({"image": "e2e.example/llm:1"}))),
        (
            "IPerf",
            json!({"networkName": format!("{namespace}/own-net"), "scheduler": "volcano",
                         "resources": {"limits": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "64Mi"}}}),
        ),
    ];
    let mut outcome = Vec::new();
    for (index, (kind, spec, field)) in refused.iter().enumerate() {
        // A new binding takes a moment to be enforced: the first case waits for it.
        let tries = if index == 0 { 60 } else { 1 };
        let mut result = None;
        for _ in 0..tries {
            match benchmarks(&client, kind, namespace)
                .create(&dry_run, &object(kind, spec.clone()))
                .await
            {
                Err(kube::Error::Api(status)) => {
                    result = Some(status.message);
                    break;
                }
                Err(other) => panic!("unexpected error: {other}"),
                Ok(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
        outcome.push((*field, result));
    }
    let sets_api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &kube::api::ApiResource::erase::<perfsweep_benchmarks::set::BenchmarkSet>(&()),
    );
    let set: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet", "metadata": {"name": "strict"},
        "spec": {
            "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 5}},
            "permutations": {"product": {"scheduler": ["volcano", "default"]}},
        },
    }))
    .expect("a set");
    let set_refusal = match sets_api.create(&dry_run, &set).await {
        Err(kube::Error::Api(status)) => Some(status.message),
        _ => None,
    };
    let mut admitted_errors = Vec::new();
    for (kind, spec) in admitted {
        if let Err(error) = benchmarks(&client, kind, namespace)
            .create(&dry_run, &object(kind, spec.clone()))
            .await
        {
            admitted_errors.push(format!("{kind} {spec}: {error}"));
        }
    }
    let _ = bindings.delete(strict_name, &DeleteParams::default()).await;
    let _ = policies.delete(strict_name, &DeleteParams::default()).await;
    for (field, refusal) in &outcome {
        println!("E2E security strict policy, {field}: {refusal:?}");
        let message = refusal
            .as_deref()
            .unwrap_or_else(|| panic!("{field} was admitted"));
        assert!(
            message.contains(&format!("{field}:")),
            "names {field}: {message}"
        );
    }
    let set_refusal = set_refusal.expect("a set varying the scheduler was admitted");
    assert!(set_refusal.contains("spec.permutations"), "{set_refusal}");
    assert_eq!(
        admitted_errors,
        Vec::<String>::new(),
        "what the lists allow is admitted"
    );
}

/// Issue 34, finding 3: every result replica's log was read into memory at once. A
/// tenant's LLMInference with `podOverride.image` in the agent's place, whose load
/// generators each print one huge line (the harness's flood image): the benchmark fails
/// naming the operator's budget, no operator replica restarts, and the leader's peak
/// resident memory stays under the chart's 256 MiB limit.
#[tokio::test]
#[ignore = "needs the e2e harness's cluster (its flood image): tests/e2e/cluster.py run"]
async fn many_large_result_logs_leave_the_operator_running_within_its_memory() {
    const WORKERS: u64 = 8;
    let client = cluster().await;
    let operator_namespace = require_in_cluster_operator();
    let flood = std::env::var("PERFSWEEP_E2E_FLOOD").unwrap_or_else(|_| {
        panic!("set PERFSWEEP_E2E_FLOOD=IMAGE,MIB (tests/e2e/cluster.py does)")
    });
    let (image, mib) = flood.split_once(',').expect("IMAGE,MIB");
    let mib: u64 = mib.parse().expect("MiB");
    let before = operator_pods(&client, &operator_namespace).await;
    let api = benchmarks(&client, "LLMInference", NAMESPACE);
    let name = "e2e-flood";
    create_benchmark(
        &api,
        "LLMInference",
        name,
        json!({
            "endpoint": {"url": "http://e2e-nowhere:8000", "modelName": "m"},
            "trafficScenarios": ["D(16,16)"], "numConcurrency": [WORKERS],
            "workers": WORKERS, "timeout": "5m",
            "podOverride": {"image": image},
        }),
    )
    .await;
    let status = wait_for_status(&api, name, Duration::from_mins(5), finished).await;
    let after = operator_pods(&client, &operator_namespace).await;
    // The leader read the logs; a standby serves only `perfsweep_up 0`.
    let leader = operator_leader(&client, &operator_namespace).await;
    let mut peaks = Vec::new();
    for (pod, ip, _) in after.iter().filter(|(pod, _, _)| *pod == leader) {
        let peak = operator_gauge(ip, "perfsweep_process_peak_resident_memory_bytes").await;
        peaks.push((pod.clone(), peak));
    }
    assert!(
        !peaks.is_empty(),
        "the leader {leader} is not among {after:?}"
    );
    let _ = api.delete(name, &DeleteParams::default()).await;
    println!(
        "E2E security flood: {WORKERS} load generators of {mib} MiB each ({} MiB in all): phase {}, {}",
        WORKERS * mib,
        status["phase"],
        condition(&status, "Failed")
    );
    println!(
        "E2E security flood: operator replicas before {before:?}, after {after:?}; peak resident memory {:?}",
        peaks
            .iter()
            .map(|(pod, peak)| format!("{pod}: {:.1} MiB", peak.unwrap_or(f64::NAN) / 1048576.0))
            .collect::<Vec<_>>()
    );
    let failed = condition(&status, "Failed");
    assert_eq!(failed["reason"], "ResultUnreadable", "{status}");
    assert!(
        failed["message"]
            .as_str()
            .is_some_and(|m| m.contains("logged more than the 32 MiB")),
        "{status}"
    );
    for (pod, _, restarts) in &before {
        let now = after.iter().find(|(p, _, _)| p == pod);
        assert_eq!(
            now.map(|(_, _, r)| *r),
            Some(*restarts),
            "operator pod {pod} restarted or went away: {after:?}"
        );
    }
    for (pod, peak) in peaks {
        let peak = peak.unwrap_or_else(|| panic!("{pod}: no peak memory on /metrics"));
        assert!(
            peak < 256.0 * 1024.0 * 1024.0,
            "{pod}: peak {:.1} MiB, at the chart's limit",
            peak / 1048576.0
        );
    }
}

/// Runs a pod on the node of the operator replica holding the Lease, in the operator's
/// namespace, that opens a TCP connection to `address`; `true` when it connected.
async fn probe_from_the_operators_node(
    client: &Client,
    namespace: &str,
    image: &str,
    address: &std::net::SocketAddr,
) -> bool {
    let leader = operator_leader(client, namespace).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let node = pods
        .get(&leader)
        .await
        .expect("the leading operator's pod")
        .spec
        .and_then(|s| s.node_name)
        .expect("the leader's node");
    let name = "e2e-reach-probe";
    let _ = pods
        .delete(name, &DeleteParams::default().grace_period(0))
        .await;
    wait_gone(&pods, name).await;
    let (ip, port) = (address.ip(), address.port());
    let probe: Pod = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never", "nodeName": node,
            "containers": [{
                "name": "probe", "image": image,
                "command": ["bash", "-c", format!("exec 3<>/dev/tcp/{ip}/{port} && echo PROBE-CONNECTED || echo PROBE-FAILED")],
                "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
                                    "capabilities": {"drop": ["ALL"]},
                                    "seccompProfile": {"type": "RuntimeDefault"}},
            }],
        },
    }))
    .expect("the probe pod");
    pods.create(&PostParams::default(), &probe)
        .await
        .expect("creating the probe pod");
    let deadline = tokio::time::Instant::now() + Duration::from_mins(2);
    let log = loop {
        let log = pods
            .logs(name, &LogParams::default())
            .await
            .unwrap_or_default();
        if log.contains("PROBE-") {
            break log;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the probe on {node} did not finish"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let _ = pods.delete(name, &DeleteParams::default()).await;
    println!(
        "E2E security control: a pod on {node} (operator {leader}) reaching {address}: {}",
        log.trim()
    );
    log.contains("PROBE-CONNECTED")
}

/// Issue 24, finding 3: someone else's `<benchmark>-launch` Secret made the benchmark
/// fail with NameConflict, and was then deleted by name. It survives.
#[tokio::test]
#[ignore = "needs a disposable cluster: PERFSWEEP_E2E=1 KUBECONFIG=... cargo test -p perfsweep --test real_cluster_security -- --ignored"]
async fn someone_elses_secret_survives_a_name_conflict() {
    let client = cluster().await;
    require_in_cluster_operator();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let theirs: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "e2e-taken-launch"},
        "stringData": {"token": "someone else's"},
    }))
    .expect("a Secret");
    let _ = secrets
        .delete("e2e-taken-launch", &DeleteParams::default())
        .await;
    wait_gone(&secrets, "e2e-taken-launch").await;
    let created = secrets
        .create(&PostParams::default(), &theirs)
        .await
        .expect("creating someone else's Secret");
    let api = benchmarks(&client, "IPerf", NAMESPACE);
    create_benchmark(
        &api,
        "IPerf",
        "e2e-taken",
        json!({"duration": 3, "scheduler": "default", "timeout": "2m"}),
    )
    .await;
    let status = wait_for_status(&api, "e2e-taken", Duration::from_mins(1), finished).await;
    // The release that deleted it before runs right after the failure.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let _ = api.delete("e2e-taken", &DeleteParams::default()).await;
    let survivor = secrets.get_opt("e2e-taken-launch").await.expect("readable");
    let _ = secrets
        .delete("e2e-taken-launch", &DeleteParams::default())
        .await;
    assert_eq!(
        condition(&status, "Failed")["reason"],
        "NameConflict",
        "{status}"
    );
    let survivor = survivor.expect("someone else's Secret survives the NameConflict");
    assert_eq!(survivor.uid(), created.uid(), "the very same Secret");
}

#[test]
fn the_attacker_script_sends_every_command() {
    let script = attacker_script("10.0.0.1");
    for command in ["STOP", "STATUS", "BARRIER done 1", "/dev/tcp/10.0.0.1/7470"] {
        assert!(script.contains(command), "{script}");
    }
}
