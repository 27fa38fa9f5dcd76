//! The operator exports a finished benchmark to its `outputLocation`: the controller runs
//! against the API double (the test plays the scheduler and the kubelet), the upload goes
//! to a real S3-compatible server (moto, started like `export_s3.rs` does), and the
//! result is read back with `perfsweep results list/show s3://...`. A failing upload (a
//! server answering 503) ends in `Exported=False` with the attempt count while the
//! status and the evidence ConfigMap stay. The Secret's keys never appear in status,
//! events, the operator's log or the requests it made.

mod support;

use std::io::Write;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use perfsweep::controller::benchmark::export::ExportPolicy;
use perfsweep::export::{self, Credentials, Destination, Retry, Store};
use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::results::record::ResultRecord;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT};
use support::{IPERFS, NS, Operator, condition, create_node, wait_until};

const ACCESS_KEY: &str = "AKIA-EXPORT-TEST-ID";
const SECRET_KEY: &str = "export-secret-key-never-shown-4711";
const GPU: &str = "NVIDIA-H100-80GB-HBM3";
const DIGEST: &str = "sha256:0f0e0d0c0b0a09080706050403020100f0e0d0c0b0a09080706050403020100f";
const WAIT: Duration = Duration::from_secs(40);

/// Everything the operator logs (all tests of this binary), to check that no secret is
/// among it.
fn log() -> Arc<Mutex<Vec<u8>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_writer(move || Sink(writer.clone()))
            .try_init();
        buffer
    })
    .clone()
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn secret(double: &ApiDouble) {
    double
        .create(
            &Gvr::SECRETS,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {
                    "name": "s3-creds",
                    "namespace": NS,
                    "labels": {"perfsweep.io/export-credentials": "true"},
                },
                "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
            }),
        )
        .expect("creating the Secret");
}

/// The export settings of an administrator who allows `endpoint` (a local test store,
/// plain http).
fn allowing(endpoint: &str) -> ExportPolicy {
    ExportPolicy {
        allowed: perfsweep::export::allowed::AllowedDestinations {
            endpoints: vec![endpoint.to_owned()],
            plain_http: true,
        },
        ..ExportPolicy::default()
    }
}

fn iperf(name: &str, endpoint: &str) -> Value {
    json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "IPerf",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "duration": 5,
            "scheduler": "default",
            "outputLocation": {
                "storageUri": "s3://perf/cluster",
                "parameters": {"endpoint": endpoint, "region": "us-east-1"},
                "secretName": "s3-creds",
            },
        },
    })
}

fn raw_output() -> (String, Value, String) {
    let path = format!(
        "{}/../benchmarks/testdata/iperf/tcp-4streams.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).expect("the iperf3 fixture");
    let parsed = registry::lookup("IPerf")
        .expect("IPerf")
        .parse(&raw)
        .expect("parses");
    (raw, parsed.result, parsed.summary)
}

/// The scheduler binds the pod to `node`, the kubelet runs it (`exit` `None`) or ends it;
/// the image is pinned to [`DIGEST`], which the record must carry.
fn kubelet(double: &ApiDouble, pod: &str, node: &str, exit: Option<i32>) {
    kubelet::bind(double, pod, node);
    let (phase, state) = match exit {
        None => ("Running", kubelet::running()),
        Some(code) => (
            "Succeeded",
            json!({"terminated": {"exitCode": code, "reason": "Completed",
                                  "startedAt": kubelet::now(), "finishedAt": kubelet::now()}}),
        ),
    };
    let mut status = kubelet::pod_status(phase, state);
    let container = &mut status["containerStatuses"][0];
    container["image"] = "ghcr.io/perfsweep/iperf:test".into();
    container["imageID"] = format!("ghcr.io/perfsweep/iperf@{DIGEST}").into();
    container["ready"] = exit.is_none().into();
    kubelet::patch_pod_status(double, pod, status);
}

/// Runs the IPerf `name` to success: pods on node-a and node-b, a report of real
/// iperf3 output. Returns the raw output.
async fn run_to_success(double: &ApiDouble, name: &str) -> String {
    let (server, client) = (format!("{name}-server-0"), format!("{name}-client-0"));
    wait_until(WAIT, "the benchmark's pods", || {
        let pods: Vec<String> = double
            .list(&Gvr::PODS, Some(NS))
            .iter()
            .map(|p| {
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        if pods.contains(&server) && pods.contains(&client) {
            Ok(())
        } else {
            Err(format!("pods {pods:?}"))
        }
    })
    .await;
    kubelet(double, &server, "node-a", None);
    kubelet(double, &client, "node-b", None);
    wait_until(WAIT, "Running", || phase(double, name, "Running")).await;
    let (raw, result, summary) = raw_output();
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: "IPerf".into(),
        role: "client".into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(result),
            summary: Some(summary),
        },
        command: vec!["iperf3".into(), "--client".into(), "10.0.0.7".into()],
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: "2026-11-21T10:00:10Z".into(),
        host: Some("node-b".into()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw.clone()),
    };
    double.set_pod_log(NS, &client, AGENT, &format!("{}\n", report.to_line()));
    kubelet(double, &client, "node-b", Some(0));
    kubelet(double, &server, "node-a", Some(0));
    wait_until(WAIT, "Succeeded", || phase(double, name, "Succeeded")).await;
    raw
}

fn phase(double: &ApiDouble, name: &str, want: &str) -> Result<(), String> {
    let phase = double
        .get(&IPERFS, Some(NS), name)
        .map(|b| b["status"]["phase"].clone());
    match phase {
        Some(Value::String(p)) if p == want => Ok(()),
        other => Err(format!("phase {other:?}")),
    }
}

/// The Exported condition once it has this reason.
async fn exported(double: &ApiDouble, name: &str, reason: &str) -> Value {
    wait_until(WAIT, format_args!("Exported with reason {reason}"), || {
        let status = double
            .get(&IPERFS, Some(NS), name)
            .map(|b| b["status"].clone())
            .unwrap_or_default();
        let found = condition(&status, "Exported").clone();
        if found["reason"] == reason {
            Ok(found)
        } else {
            Err(found.to_string())
        }
    })
    .await
}

/// Neither key appears in the benchmark (status included), its events, the operator's
/// log or the paths it requested; the Secret was only read by name.
fn assert_no_secret_leaked(double: &ApiDouble, name: &str) {
    let benchmark = double
        .get(&IPERFS, Some(NS), name)
        .expect("the benchmark")
        .to_string();
    let events: Vec<Value> = double.list(&Gvr::EVENTS_V1, Some(NS));
    let events = serde_json::to_string(&events).expect("events");
    let log = String::from_utf8_lossy(
        &log()
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_owned();
    let requests = format!("{:?}", double.requests());
    for (what, text) in [
        ("status", &benchmark),
        ("events", &events),
        ("log", &log),
        ("requests", &requests),
    ] {
        for key in [ACCESS_KEY, SECRET_KEY] {
            assert!(!text.contains(key), "a credential appears in the {what}");
        }
    }
    let secret_reads: Vec<String> = double
        .requests()
        .iter()
        .filter(|r| r.resource == "secrets")
        // The benchmark's own token Secret, which the operator makes (a create names
        // no object in its path) and deletes.
        .filter(|r| r.verb != "create" && r.name.as_deref() != Some(&format!("{name}-launch")))
        .map(|r| format!("{} {:?}", r.verb, r.name))
        .collect();
    assert!(!secret_reads.is_empty(), "the Secret was read");
    assert!(
        secret_reads.iter().all(|r| r == "get Some(\"s3-creds\")"),
        "{secret_reads:?}"
    );
}

fn bucket_store(endpoint: &str) -> Store {
    let parameters = [("endpoint".to_owned(), endpoint.to_owned())].into();
    let Destination::Bucket(location) =
        export::parse("s3://perf/cluster", &parameters).expect("a location")
    else {
        panic!("not a bucket")
    };
    let credentials = Credentials::Aws {
        access_key_id: ACCESS_KEY.into(),
        secret_access_key: SECRET_KEY.into(),
        session_token: None,
    };
    Store::bucket(&location, &credentials, &Retry::default()).expect("a store")
}

#[tokio::test]
async fn a_finished_benchmark_exports_its_record_and_evidence_readable_with_results_commands() {
    let _ = log();
    let Some(moto) = support::s3::moto() else {
        return;
    };
    moto.create_bucket("perf");
    let double = support::double_with_crds().await;
    create_node(
        &double,
        "node-a",
        json!({"nvidia.com/gpu.product": GPU, "topology.kubernetes.io/zone": "zone-1",
               "node.kubernetes.io/instance-type": "p5.48xlarge", "kubernetes.io/hostname": "node-a"}),
    );
    create_node(
        &double,
        "node-b",
        json!({"topology.kubernetes.io/zone": "zone-2"}),
    );
    secret(&double);
    let operator = Operator::start_with_export(&double, "export", allowing(&moto.endpoint()));
    double
        .create(&IPERFS, iperf("exported", &moto.endpoint()))
        .expect("creating the benchmark");
    let raw = run_to_success(&double, "exported").await;
    let condition = exported(&double, "exported", "Uploaded").await;
    assert_eq!(condition["status"], "True");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("exported 3 object(s)") && message.contains("s3://perf/cluster"),
        "{message}"
    );

    // The evidence ConfigMap keeps the environment beside the report.
    let kept = double
        .get(&Gvr::CONFIGMAPS, Some(NS), "exported-evidence")
        .expect("the evidence ConfigMap");
    assert!(kept["data"]["report.json"].is_string());

    // In the bucket: the record (JSON Lines, Parquet) and the raw evidence, intact.
    let store = bucket_store(&moto.endpoint());
    let names = store.list().await.expect("the listing");
    let sha = sha256_hex(raw.as_bytes());
    let record_key = names
        .iter()
        .find(|n| n.ends_with("/exported.jsonl"))
        .unwrap_or_else(|| panic!("no record in {names:?}"))
        .clone();
    let run = record_key.trim_end_matches("/exported.jsonl");
    assert!(
        names.contains(&format!("{run}/exported.parquet")),
        "{names:?}"
    );
    let evidence = store
        .get(&format!("{run}/evidence/{sha}.txt"))
        .await
        .expect("the evidence");
    assert_eq!(evidence.as_ref(), raw.as_bytes());
    let line = store.get(&record_key).await.expect("the record");
    let record: ResultRecord =
        serde_json::from_slice(line.trim_ascii_end()).expect("one record per line");
    assert!(record.succeeded());
    assert_eq!(record.backend, "kubernetes");
    assert_eq!(record.run_id, run);
    assert_eq!(
        record.evidence.as_ref().map(|e| e.sha256.as_str()),
        Some(sha.as_str())
    );

    // The record's environment: nodes, their hardware labels, images, versions.
    let environment = &record.environment;
    assert_eq!(environment.hosts, ["node-a", "node-b"]);
    assert_eq!(
        environment.node_labels["node-a"]["nvidia.com/gpu.product"],
        GPU
    );
    assert_eq!(
        environment.node_labels["node-a"]["node.kubernetes.io/instance-type"],
        "p5.48xlarge"
    );
    assert_eq!(
        environment.node_labels["node-b"]["topology.kubernetes.io/zone"],
        "zone-2"
    );
    assert!(!environment.node_labels["node-a"].contains_key("kubernetes.io/hostname"));
    assert_eq!(
        environment.image_digests["ghcr.io/perfsweep/iperf:test"],
        DIGEST
    );
    assert_eq!(
        environment.kubernetes_version.as_deref(),
        Some("v1.34.0-apidouble")
    );
    assert_eq!(environment.perfsweep_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(environment.network.as_deref(), Some("pod"));
    assert!(!record.spec.to_string().contains(SECRET_KEY));

    // `perfsweep results list/show` read the location back.
    let endpoint = format!("endpoint={}", moto.endpoint());
    for command in ["list", "show"] {
        let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
            .args([
                "results",
                command,
                "s3://perf/cluster",
                "--location-param",
                &endpoint,
            ])
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .output()
            .expect("perfsweep runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "results {command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let expected = if command == "list" {
            "exported"
        } else {
            "bits_per_second"
        };
        assert!(stdout.contains(expected), "results {command}:\n{stdout}");
    }

    assert_no_secret_leaked(&double, "exported");
    operator.stop().await;
}

#[tokio::test]
async fn a_failing_upload_ends_exported_false_and_loses_nothing() {
    let _ = log();
    let (port, answered) = support::s3::always_unavailable();
    let double = support::double_with_crds().await;
    create_node(&double, "node-a", json!({}));
    create_node(&double, "node-b", json!({}));
    secret(&double);
    let policy = ExportPolicy {
        attempts: 2,
        first_delay: Duration::from_millis(300),
        max_delay: Duration::from_secs(1),
        requests: Retry {
            attempts: 2,
            initial_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(20),
        },
        allowed: allowing(&format!("http://127.0.0.1:{port}")).allowed,
    };
    let operator = Operator::start_with_export(&double, "export-fails", policy);
    double
        .create(
            &IPERFS,
            iperf("unexported", &format!("http://127.0.0.1:{port}")),
        )
        .expect("creating the benchmark");
    run_to_success(&double, "unexported").await;

    let condition = exported(&double, "unexported", "ExportFailed").await;
    assert_eq!(condition["status"], "False");
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(message.contains("gave up after 2 attempt(s)"), "{message}");
    assert!(message.contains("503"), "{message}");
    assert!(message.contains("unexported-evidence"), "{message}");
    // Two attempts of two requests each reached the server.
    assert_eq!(answered.load(Ordering::SeqCst), 4);
    let benchmark = double
        .get(&IPERFS, Some(NS), "unexported")
        .expect("the benchmark");
    assert_eq!(benchmark["status"]["export"]["attempts"], 2);

    // Nothing was lost: the result in status, the evidence in its ConfigMap.
    assert_eq!(benchmark["status"]["phase"], "Succeeded");
    assert!(benchmark["status"]["result"].is_object());
    let kept = double
        .get(&Gvr::CONFIGMAPS, Some(NS), "unexported-evidence")
        .expect("the evidence ConfigMap is still there");
    assert!(kept["data"]["report.json"].is_string());
    assert!(kept["data"]["environment.json"].is_string());

    // The failures were announced (the event follows the status write), without
    // credentials.
    wait_until(WAIT, "ExportRetrying and ExportFailed events", || {
        let reasons: Vec<String> = double
            .list(&Gvr::EVENTS_V1, Some(NS))
            .iter()
            .filter(|e| e["regarding"]["name"] == "unexported")
            .map(|e| e["reason"].as_str().unwrap_or_default().to_owned())
            .collect();
        if ["ExportRetrying", "ExportFailed"]
            .iter()
            .all(|want| reasons.iter().any(|r| r == want))
        {
            Ok(())
        } else {
            Err(format!("{reasons:?}"))
        }
    })
    .await;
    assert_no_secret_leaked(&double, "unexported");

    // Settled: no further attempts after the last.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(answered.load(Ordering::SeqCst), 4);
    operator.stop().await;
}

/// A listener that counts the connections it is sent (an attacker's endpoint).
fn counting_listener() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let endpoint = format!("http://{}", listener.local_addr().expect("an address"));
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            seen.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (endpoint, count)
}

/// Whether the operator read Secret `name` (GET by name).
fn secret_read(double: &ApiDouble, name: &str) -> bool {
    double
        .requests()
        .iter()
        .any(|r| r.verb == "get" && r.path.ends_with(&format!("/secrets/{name}")))
}

/// Issue 24, finding 2: `endpoint: http://attacker` with `secretName: <any Secret>` made
/// the operator read the Secret with its own rights and send it there. An endpoint the
/// administrator did not allow is refused before the Secret is read.
#[tokio::test]
async fn a_foreign_export_endpoint_never_receives_the_secret() {
    let _ = log();
    let (attacker, connections) = counting_listener();
    let double = support::double_with_crds().await;
    create_node(&double, "node-a", json!({}));
    create_node(&double, "node-b", json!({}));
    secret(&double);
    // The administrator allows a store of its own, not the attacker's endpoint.
    let operator =
        Operator::start_with_export(&double, "deputy", allowing("https://store.example"));
    double
        .create(&IPERFS, iperf("deputy", &attacker))
        .expect("creating the benchmark");
    run_to_success(&double, "deputy").await;
    let condition = exported(&double, "deputy", "ExportFailed").await;
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("not one this operator exports to") || message.contains("plain http"),
        "{message}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "the attacker's endpoint was contacted"
    );
    assert!(!secret_read(&double, "s3-creds"), "the Secret was read");
    assert_no_secret_leaked_anywhere(&double, "deputy");
    operator.stop().await;
}

/// Issue 24, finding 2: a Secret nobody marked as export credentials is not used, even
/// for an allowed endpoint.
#[tokio::test]
async fn an_unmarked_secret_is_not_sent() {
    let _ = log();
    let (store, connections) = counting_listener();
    let double = support::double_with_crds().await;
    create_node(&double, "node-a", json!({}));
    create_node(&double, "node-b", json!({}));
    double
        .create(
            &Gvr::SECRETS,
            json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "s3-creds", "namespace": NS},
                "stringData": {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY},
            }),
        )
        .expect("creating the Secret");
    let policy = ExportPolicy {
        attempts: 1,
        ..allowing(&store)
    };
    let operator = Operator::start_with_export(&double, "unmarked", policy);
    double
        .create(&IPERFS, iperf("unmarked", &store))
        .expect("creating the benchmark");
    run_to_success(&double, "unmarked").await;
    let condition = exported(&double, "unmarked", "ExportFailed").await;
    let message = condition["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("perfsweep.io/export-credentials=true"),
        "{message}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "credentials were sent"
    );
    assert_no_secret_leaked_anywhere(&double, "unmarked");
    operator.stop().await;
}

/// Neither key in the benchmark, its events or the operator's log.
fn assert_no_secret_leaked_anywhere(double: &ApiDouble, name: &str) {
    let benchmark = double
        .get(&IPERFS, Some(NS), name)
        .expect("the benchmark")
        .to_string();
    let events = serde_json::to_string(&double.list(&Gvr::EVENTS_V1, Some(NS))).expect("events");
    for text in [benchmark, events] {
        assert!(
            !text.contains(ACCESS_KEY) && !text.contains(SECRET_KEY),
            "{text}"
        );
    }
}
