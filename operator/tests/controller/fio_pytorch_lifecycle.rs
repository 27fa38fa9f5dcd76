//! Fio and PyTorch benchmarks through the operator against the API double, storage
//! included: the test creates benchmarks as a user would, checks the claims the operator
//! creates (one per worker for ReadWriteOnce, one shared for ReadWriteMany, none for an
//! existing claim or an emptyDir), plays the kubelet (pod status, then the result pod's
//! log ending with a report of real tool output) and checks the result and the cleanup.

use crate::support;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT, Fixture, finish_pod, run_pod};
use support::{NS, Operator, WAIT, double_with_crds, wait_until};

const FIOS: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "fios");
const PYTORCHES: Gvr = Gvr::from_static("perfsweep.io", "v1alpha1", "pytorches");

struct Kind {
    name: &'static str,
    gvr: Gvr,
    result_role: &'static str,
    fixture: &'static str,
}

const FIO: Kind = Kind {
    name: "Fio",
    gvr: FIOS,
    result_role: "client",
    fixture: "fio/client-server-2hosts-group-reporting.json",
};
const PYTORCH: Kind = Kind {
    name: "PyTorch",
    gvr: PYTORCHES,
    result_role: "worker",
    fixture: "pytorch/resnet50-train-cpu.txt",
};

fn create(double: &ApiDouble, kind: &Kind, name: &str, spec: Value) {
    double
        .create(
            &kind.gvr,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1",
                "kind": kind.name,
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            }),
        )
        .unwrap_or_else(|e| panic!("creating {} {name}: {e:?}", kind.name));
}

/// Objects of a type that belong to the benchmark `name` of `kind` (directly or through
/// its PodGroup).
fn owned(double: &ApiDouble, gvr: &Gvr, kind: &Kind, name: &str) -> Vec<Value> {
    kubelet::owned_by(double, gvr, kind.name, name)
}

fn names(objects: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn claims(double: &ApiDouble) -> Vec<String> {
    names(&double.list(&Gvr::PERSISTENT_VOLUME_CLAIMS, Some(NS)))
}

async fn wait_for_pods(double: &ApiDouble, kind: &Kind, name: &str, count: usize) -> Vec<Value> {
    wait_until(WAIT, format_args!("{count} pods of {name}"), || {
        let pods = owned(double, &Gvr::PODS, kind, name);
        if pods.len() == count {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await
}

async fn wait_for_phase(double: &ApiDouble, kind: &Kind, name: &str, phase: &str) -> Value {
    kubelet::wait_for_phase(double, &kind.gvr, name, phase).await
}

/// Real tool output and what the registry parses from it: (raw, result, summary).
fn fixture(kind: &Kind) -> (String, Value, String) {
    let Fixture {
        raw,
        result,
        summary,
    } = kubelet::fixture(kind.name, kind.fixture);
    (raw, result, summary)
}

/// Runs every pod, ends the result pod with a report of the fixture, waits for the
/// result; returns the status.
async fn run_to_result(double: &ApiDouble, kind: &Kind, name: &str, pods: usize) -> Value {
    let pods = wait_for_pods(double, kind, name, pods).await;
    for pod in names(&pods) {
        run_pod(double, &pod);
    }
    wait_for_phase(double, kind, name, "Running").await;
    let (raw, result, summary) = fixture(kind);
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: kind.name.into(),
        role: kind.result_role.into(),
        index: 0,
        outcome: Outcome::Succeeded {
            result: Some(result),
            summary: Some(summary),
        },
        command: vec!["tool".into()],
        started_at: "2026-11-21T10:00:00Z".into(),
        finished_at: "2026-11-21T10:00:10Z".into(),
        host: Some("node-a".into()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    };
    let result_pod = format!("{name}-{}-0", kind.result_role);
    double.set_pod_log(
        NS,
        &result_pod,
        AGENT,
        &format!("perfsweep agent: running\n{}\n", report.to_line()),
    );
    finish_pod(double, &result_pod, 0, "");
    wait_for_phase(double, kind, name, "Succeeded").await
}

async fn wait_for_cleanup(double: &ApiDouble, kind: &Kind, name: &str) {
    kubelet::wait_for_cleanup(double, kind.name, name).await;
}

fn template(mode: &str) -> Value {
    json!({
        "accessModes": [mode],
        "storageClassName": "fast-nvme",
        "resources": {"requests": {"storage": "10Gi"}},
    })
}

#[tokio::test]
async fn fio_with_read_write_once_storage_gets_a_claim_per_worker() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create(
        &double,
        &FIO,
        "rwo",
        json!({"numWorkers": 2, "volumeClaimTemplate": template("ReadWriteOnce")}),
    );
    // The claims exist, owned by the benchmark, by the time its pods do.
    let pods = wait_for_pods(&double, &FIO, "rwo", 3).await;
    let created = owned(&double, &Gvr::PERSISTENT_VOLUME_CLAIMS, &FIO, "rwo");
    assert_eq!(names(&created), ["rwo-worker-0-data", "rwo-worker-1-data"]);
    for claim in &created {
        assert_eq!(claim["metadata"]["labels"]["perfsweep.io/benchmark"], "rwo");
        assert_eq!(claim["spec"]["storageClassName"], "fast-nvme");
        assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    }
    for pod in &pods {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let claim = pod["spec"]["volumes"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str());
        match name.strip_prefix("rwo-worker-") {
            Some(index) => assert_eq!(claim, Some(format!("rwo-worker-{index}-data").as_str())),
            None => assert_eq!(claim, None, "the client mounts no claim"),
        }
    }

    let status = run_to_result(&double, &FIO, "rwo", 3).await;
    let (raw, _, _) = fixture(&FIO);
    let fio: Value = serde_json::from_str(&raw).expect("fio JSON");
    let all = fio["client_stats"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["jobname"] == "All clients"))
        .expect("All clients");
    assert_eq!(
        status["result"]["read"]["bandwidthBytesPerSecond"].as_f64(),
        all["read"]["bw_bytes"].as_f64(),
        "{status}"
    );
    assert_eq!(
        status["result"]["workers"].as_array().map(Vec::len),
        Some(2)
    );

    // Pods and claims go at the end.
    wait_for_cleanup(&double, &FIO, "rwo").await;
    assert!(claims(&double).is_empty(), "{:?}", claims(&double));
}

#[tokio::test]
async fn fio_with_read_write_many_storage_shares_one_claim() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create(
        &double,
        &FIO,
        "rwx",
        json!({"numWorkers": 3, "volumeClaimTemplate": template("ReadWriteMany")}),
    );
    wait_for_pods(&double, &FIO, "rwx", 4).await;
    assert_eq!(
        names(&owned(&double, &Gvr::PERSISTENT_VOLUME_CLAIMS, &FIO, "rwx")),
        ["rwx-data"]
    );
    run_to_result(&double, &FIO, "rwx", 4).await;
    wait_for_cleanup(&double, &FIO, "rwx").await;
    assert!(claims(&double).is_empty());
}

#[tokio::test]
async fn fio_on_an_existing_claim_creates_and_deletes_none() {
    let double = double_with_crds().await;
    double
        .create(
            &Gvr::PERSISTENT_VOLUME_CLAIMS,
            json!({
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": "shared-nvme", "namespace": NS},
                "spec": template("ReadWriteMany"),
            }),
        )
        .expect("the user's claim");
    let _operator = Operator::start(&double, "test");
    create(
        &double,
        &FIO,
        "existing",
        json!({"numWorkers": 2, "existingClaim": "shared-nvme"}),
    );
    let pods = wait_for_pods(&double, &FIO, "existing", 3).await;
    let mounting = pods
        .iter()
        .filter(|p| p["spec"]["volumes"].to_string().contains("shared-nvme"))
        .count();
    assert_eq!(mounting, 2, "both workers mount the existing claim");
    assert_eq!(claims(&double), ["shared-nvme"]);
    run_to_result(&double, &FIO, "existing", 3).await;
    wait_for_cleanup(&double, &FIO, "existing").await;
    assert_eq!(claims(&double), ["shared-nvme"], "the user's claim stays");
    let touched: Vec<String> = double
        .requests()
        .into_iter()
        .filter(|r| r.resource == "persistentvolumeclaims" && r.verb != "get")
        .map(|r| format!("{} {:?}", r.verb, r.name))
        .collect();
    assert!(
        touched.iter().all(|r| !r.starts_with("delete")),
        "{touched:?}"
    );
}

#[tokio::test]
async fn fio_on_an_empty_dir_creates_no_claim() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create(&double, &FIO, "scratch", json!({"emptyDir": true}));
    let pods = wait_for_pods(&double, &FIO, "scratch", 2).await;
    let worker = pods
        .iter()
        .find(|p| p["metadata"]["name"] == "scratch-worker-0")
        .expect("the worker");
    let data = worker["spec"]["volumes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == "vol-data")
        .expect("the data volume");
    assert!(data["emptyDir"].is_object(), "{data}");
    run_to_result(&double, &FIO, "scratch", 2).await;
    wait_for_cleanup(&double, &FIO, "scratch").await;
    let created = double
        .requests()
        .into_iter()
        .filter(|r| r.resource == "persistentvolumeclaims" && r.verb == "create")
        .count();
    assert_eq!(created, 0);
}

#[tokio::test]
async fn a_pytorch_benchmark_runs_to_its_result() {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    create(
        &double,
        &PYTORCH,
        "resnet",
        json!({"model": "resnet50", "benchmarkType": "train", "inputBatchSize": 16}),
    );
    let pods = wait_for_pods(&double, &PYTORCH, "resnet", 1).await;
    let plan_env = pods[0]["spec"]["containers"][0]["env"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["name"] == "PERFSWEEP_PLAN")
        .and_then(|e| e["value"].as_str())
        .expect("the plan reaches the agent")
        .to_owned();
    let plan: perfsweep_benchmarks::execution::plan::Plan =
        serde_json::from_str(&plan_env).expect("the plan parses");
    let args = format!("{:?}", plan.roles[0].command.args);
    assert!(
        args.contains("resnet50") && args.contains("train") && args.contains("16"),
        "{args}"
    );

    let status = run_to_result(&double, &PYTORCH, "resnet", 1).await;
    let (_, result, summary) = fixture(&PYTORCH);
    assert_eq!(status["result"], result, "{status}");
    assert_eq!(status["summary"], summary.as_str());
    assert!(
        status["result"]["throughputSamplesPerSecond"]
            .as_f64()
            .is_some_and(|t| t > 0.0)
    );
    wait_for_cleanup(&double, &PYTORCH, "resnet").await;
}
