//! The MPI and RDMA kinds through their lifecycle against the API double: the test
//! creates each benchmark as a user would and plays scheduler and kubelet, with report
//! lines built from the real (or transcribed) tool outputs in benchmarks/testdata.

use crate::support;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT, Fixture, now, patch_pod_status, pod_status, run_pod};
use support::{NS, Operator, WAIT, condition, double_with_crds, wait_until};

// `kind` is what Kubernetes calls a kind's name.
#[allow(clippy::struct_field_names)]
struct Kind {
    kind: &'static str,
    gvr: Gvr,
    result_role: &'static str,
    /// Pods in plan order.
    pods: &'static [&'static str],
    fixture: &'static str,
}

const PINGPONG: Kind = Kind {
    kind: "MPIPingPong",
    gvr: Gvr::from_static("perfsweep.io", "v1alpha1", "mpipingpongs"),
    result_role: "launcher",
    pods: &["launcher-0", "worker-0", "worker-1"],
    fixture: "mpi_pingpong/imb-mpi1-pingpong-msglog22.txt",
};
const OPENFOAM: Kind = Kind {
    kind: "OpenFOAM",
    gvr: Gvr::from_static("perfsweep.io", "v1alpha1", "openfoams"),
    result_role: "launcher",
    pods: &["launcher-0", "worker-0", "worker-1"],
    fixture: "openfoam/icofoam-cavity-time-v.log",
};
const RDMA_BW: Kind = Kind {
    kind: "RDMABandwidth",
    gvr: Gvr::from_static("perfsweep.io", "v1alpha1", "rdmabandwidths"),
    result_role: "client",
    pods: &["server-0", "client-0"],
    fixture: "rdma/ib_write_bw-all-sizes-gbits.txt",
};
const RDMA_LAT: Kind = Kind {
    kind: "RDMALatency",
    gvr: Gvr::from_static("perfsweep.io", "v1alpha1", "rdmalatencies"),
    result_role: "client",
    pods: &["server-0", "client-0"],
    fixture: "rdma/ib_write_lat-all-sizes.txt",
};

fn create(double: &ApiDouble, kind: &Kind, name: &str, spec: Value) -> Value {
    double
        .create(
            &kind.gvr,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1",
                "kind": kind.kind,
                "metadata": {"name": name, "namespace": NS},
                "spec": spec,
            }),
        )
        .unwrap_or_else(|e| panic!("creating {} {name}: {e:?}", kind.kind))
}

fn owned_by(double: &ApiDouble, gvr: &Gvr, kind: &str, name: &str) -> Vec<Value> {
    kubelet::owned_by(double, gvr, kind, name)
}

async fn wait_for_phase(double: &ApiDouble, kind: &Kind, name: &str, phase: &str) -> Value {
    kubelet::wait_for_phase(double, &kind.gvr, name, phase).await
}

async fn wait_for_pods(double: &ApiDouble, kind: &Kind, name: &str) -> Vec<Value> {
    wait_until(WAIT, format_args!("the pods of {name}"), || {
        let pods = owned_by(double, &Gvr::PODS, kind.kind, name);
        if pods.len() == kind.pods.len() {
            Ok(pods)
        } else {
            Err(format!("{} pods", pods.len()))
        }
    })
    .await
}

fn run_pods(double: &ApiDouble, kind: &Kind, name: &str) {
    for pod in kind.pods {
        run_pod(double, &format!("{name}-{pod}"));
    }
}

fn finish(double: &ApiDouble, kind: &Kind, name: &str, outcome: Outcome, raw: Option<&str>) {
    let pod = format!("{name}-{}-0", kind.result_role);
    let failed = matches!(outcome, Outcome::Failed { .. });
    let report = AgentReport {
        tool_version: None,
        network: None,
        kind: kind.kind.into(),
        role: kind.result_role.into(),
        index: 0,
        outcome,
        command: vec!["mpirun".into()],
        started_at: "2026-11-22T10:00:00Z".into(),
        finished_at: "2026-11-22T10:00:10Z".into(),
        host: Some("node-a".into()),
        raw_output: raw.map(str::to_owned),
        raw_output_sha256: raw.map(|r| sha256_hex(r.as_bytes())),
    };
    double.set_pod_log(
        NS,
        &pod,
        AGENT,
        &format!("{}\n{}\n", raw.unwrap_or(""), report.to_line()),
    );
    let (phase, code) = if failed {
        ("Failed", 1)
    } else {
        ("Succeeded", 0)
    };
    patch_pod_status(
        double,
        &pod,
        pod_status(
            phase,
            json!({"terminated": {"exitCode": code, "reason": "Completed", "startedAt": now(), "finishedAt": now()}}),
        ),
    );
}

fn fixture(kind: &Kind) -> (String, Value, String) {
    let Fixture {
        raw,
        result,
        summary,
    } = kubelet::fixture(kind.kind, kind.fixture);
    (raw, result, summary)
}

fn env_of<'a>(pod: &'a Value, name: &str) -> &'a Value {
    pod["spec"]["containers"][0]["env"]
        .as_array()
        .and_then(|env| env.iter().find(|e| e["name"] == name))
        .unwrap_or(&Value::Null)
}

fn pod<'a>(pods: &'a [Value], name: &str) -> &'a Value {
    pods.iter()
        .find(|p| p["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no pod {name}"))
}

fn token_of(double: &ApiDouble, name: &str) -> String {
    let secret = double
        .get(&Gvr::SECRETS, Some(NS), &format!("{name}-launch"))
        .unwrap_or_else(|| panic!("the launch Secret of {name}"));
    secret["stringData"]["token"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_default()
}

/// Runs an MPI benchmark to a result; checks the launch Secret and the pods' wiring.
async fn mpi_lifecycle(kind: &Kind, name: &str, spec: Value) -> Value {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let created = create(&double, kind, name, spec);
    let uid = created["metadata"]["uid"].as_str().expect("uid").to_owned();

    let pods = wait_for_pods(&double, kind, name).await;
    // The token Secret: created before the pods, owned and labelled, 256 random bits.
    let secret = double
        .get(&Gvr::SECRETS, Some(NS), &format!("{name}-launch"))
        .expect("the launch Secret");
    // Owned by the benchmark's gang, which the benchmark owns.
    let group = double
        .get(&Gvr::PODGROUPS, Some(NS), name)
        .expect("the PodGroup");
    assert_eq!(group["metadata"]["ownerReferences"][0]["uid"], uid.as_str());
    assert_eq!(
        secret["metadata"]["ownerReferences"][0]["uid"],
        group["metadata"]["uid"]
    );
    assert_eq!(secret["metadata"]["labels"]["perfsweep.io/benchmark"], name);
    let token = token_of(&double, name);
    assert_eq!(token.len(), 64, "{secret}");
    assert!(token.bytes().all(|b| b.is_ascii_hexdigit()), "{token}");
    for pod in &pods {
        let from = &env_of(pod, "PERFSWEEP_LAUNCH_TOKEN")["valueFrom"]["secretKeyRef"];
        assert_eq!(from["name"], format!("{name}-launch"), "{pod}");
        assert_eq!(from["key"], "token");
        let text = pod.to_string();
        assert!(!text.contains(&token), "the token itself is never in a pod");
    }
    // The launcher takes no device resources; the workers do.
    let launcher = pod(&pods, &format!("{name}-launcher-0"));
    let worker = pod(&pods, &format!("{name}-worker-0"));
    let resources = |pod: &Value| pod["spec"]["containers"][0]["resources"]["limits"].clone();
    assert!(
        resources(launcher)
            .get("rdma/hca_shared_devices_a")
            .is_none(),
        "{launcher}"
    );
    assert_eq!(
        resources(worker)["rdma/hca_shared_devices_a"],
        "1",
        "{worker}"
    );
    // The hostfile lists the workers by data address.
    let plan: Value = serde_json::from_str(
        env_of(launcher, "PERFSWEEP_PLAN")["value"]
            .as_str()
            .expect("plan"),
    )
    .expect("plan JSON");
    let hostfile = plan["roles"][0]["files"][0]["contents"]
        .as_str()
        .unwrap_or_default();
    assert!(hostfile.starts_with("{peer:worker:0} slots="), "{hostfile}");

    run_pods(&double, kind, name);
    wait_for_phase(&double, kind, name, "Running").await;
    assert_eq!(token_of(&double, name), token, "the token is made once");

    let (raw, result, summary) = fixture(kind);
    finish(
        &double,
        kind,
        name,
        Outcome::Succeeded {
            result: Some(result.clone()),
            summary: Some(summary.clone()),
        },
        Some(&raw),
    );
    let status = wait_for_phase(&double, kind, name, "Succeeded").await;
    assert_eq!(status["result"], result, "{status}");
    assert_eq!(status["summary"], summary.as_str());
    wait_until(WAIT, format_args!("{name} cleaned up"), || {
        let left = owned_by(&double, &Gvr::PODS, kind.kind, name).len()
            + double
                .get(&Gvr::SECRETS, Some(NS), &format!("{name}-launch"))
                .map_or(0, |_| 1);
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} objects left"))
        }
    })
    .await;
    status
}

#[tokio::test]
async fn an_mpi_pingpong_runs_to_a_result_with_a_launch_token() {
    let status = mpi_lifecycle(
        &PINGPONG,
        "pingpong",
        json!({"transport": "RDMA", "maxlog": 22,
               "resources": {"limits": {"rdma/hca_shared_devices_a": "1"}}}),
    )
    .await;
    assert!(
        status["result"]["minLatencyMicros"].as_f64().is_some(),
        "{status}"
    );
}

#[tokio::test]
async fn an_openfoam_runs_to_a_result_with_a_launch_token() {
    let status = mpi_lifecycle(
        &OPENFOAM,
        "cavity",
        json!({"numProcs": 4, "numNodes": 2,
               "resources": {"limits": {"rdma/hca_shared_devices_a": "1"}}}),
    )
    .await;
    assert!(
        status["result"]["processTiming"]["userSeconds"]
            .as_f64()
            .is_some(),
        "{status}"
    );
}

async fn rdma_lifecycle(kind: &Kind) {
    let double = double_with_crds().await;
    let _operator = Operator::start(&double, "test");
    let name = "rdma";
    create(
        &double,
        kind,
        name,
        json!({"mode": "write", "allSizes": true, "device": "mlx5_0"}),
    );
    let pods = wait_for_pods(&double, kind, name).await;
    // Issue 24: every benchmark's agents authenticate each other with its token.
    assert!(
        double.get(&Gvr::SECRETS, Some(NS), "rdma-launch").is_some(),
        "the benchmark's token Secret"
    );
    for pod in &pods {
        let added = &pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"];
        assert_eq!(added, &json!(["IPC_LOCK"]), "{pod}");
    }
    run_pods(&double, kind, name);
    wait_for_phase(&double, kind, name, "Running").await;
    let (raw, result, summary) = fixture(kind);
    finish(
        &double,
        kind,
        name,
        Outcome::Succeeded {
            result: Some(result.clone()),
            summary: Some(summary),
        },
        Some(&raw),
    );
    let status = wait_for_phase(&double, kind, name, "Succeeded").await;
    assert_eq!(status["result"], result, "{status}");

    // Without a device, the agent fails before perftest starts, and says why.
    let name = "nodevice";
    create(&double, kind, name, json!({"mode": "read"}));
    wait_for_pods(&double, kind, name).await;
    run_pods(&double, kind, name);
    wait_for_phase(&double, kind, name, "Running").await;
    finish(
        &double,
        kind,
        name,
        Outcome::Failed {
            reason: "NoRdmaDevice".into(),
            message: "no RDMA device: /sys/class/infiniband is empty or missing".into(),
        },
        None,
    );
    let status = wait_for_phase(&double, kind, name, "Failed").await;
    assert_eq!(
        condition(&status, "Failed")["reason"],
        "NoRdmaDevice",
        "{status}"
    );
}

#[tokio::test]
async fn an_rdma_bandwidth_runs_to_a_result_or_names_the_missing_device() {
    rdma_lifecycle(&RDMA_BW).await;
}

#[tokio::test]
async fn an_rdma_latency_runs_to_a_result_or_names_the_missing_device() {
    rdma_lifecycle(&RDMA_LAT).await;
}
