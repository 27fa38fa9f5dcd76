//! A `pvc://` output location in the cluster: the benchmark's own result pod mounts the
//! claim and its agent writes the report and evidence there (the operator mounts no
//! claim). The controller runs against the API double; the test plays the scheduler and
//! the kubelet, and checks the pod the operator created mounts the claim and is told
//! where to write, and that the Exported condition says where the results are.

use crate::support;

use std::time::Duration;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::kubelet::{self, AGENT};
use support::{IPERFS, NS, Operator, condition, create_node, wait_until};

const WAIT: Duration = Duration::from_secs(40);

fn kubelet(double: &ApiDouble, pod: &str, node: &str, exit: Option<i32>) {
    kubelet::bind(double, pod, node);
    match exit {
        None => kubelet::run_pod(double, pod),
        Some(code) => kubelet::finish_pod(double, pod, code, ""),
    }
}

fn pod(double: &ApiDouble, name: &str) -> Option<Value> {
    double
        .list(&Gvr::PODS, Some(NS))
        .into_iter()
        .find(|p| p["metadata"]["name"] == name)
}

#[tokio::test]
async fn a_pvc_location_is_written_by_the_result_pod_into_its_claim() {
    let double = support::double_with_crds().await;
    create_node(&double, "node-a", json!({}));
    create_node(&double, "node-b", json!({}));
    let _operator = Operator::start(&double, "claim-export");
    double
        .create(
            &IPERFS,
            json!({
                "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                "metadata": {"name": "airgapped", "namespace": NS},
                "spec": {"duration": 5, "scheduler": "default",
                         "outputLocation": {"storageUri": "pvc://results/nightly"}},
            }),
        )
        .expect("creating the benchmark");
    let (server, client) = ("airgapped-server-0", "airgapped-client-0");
    wait_until(WAIT, "the benchmark's pods", || {
        match (pod(&double, server), pod(&double, client)) {
            (Some(_), Some(_)) => Ok(()),
            _ => Err("pods missing".to_owned()),
        }
    })
    .await;

    // The result role's pod mounts the claim and is told where to write.
    let client_pod = pod(&double, client).expect("the client pod");
    let volume = client_pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["persistentVolumeClaim"]["claimName"] == "results")
        .unwrap_or_else(|| panic!("no claim volume in {}", client_pod["spec"]["volumes"]))
        .clone();
    let container = &client_pod["spec"]["containers"][0];
    let mount = container["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .find(|m| m["name"] == volume["name"])
        .expect("the claim is mounted");
    assert_eq!(mount["mountPath"], "/perfsweep/export");
    let plan: Value = serde_json::from_str(
        container["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == "PERFSWEEP_PLAN")
            .and_then(|e| e["value"].as_str())
            .expect("the plan"),
    )
    .expect("JSON plan");
    let role = plan["roles"]
        .as_array()
        .expect("roles")
        .iter()
        .find(|r| r["name"] == "client")
        .expect("the client role");
    assert_eq!(
        role["env"]["PERFSWEEP_EXPORT_DIR"],
        "{volume:export}/nightly"
    );
    assert_eq!(role["env"]["PERFSWEEP_EXPORT_NAME"], "airgapped");
    let uid: String = double
        .get(&IPERFS, Some(NS), "airgapped")
        .and_then(|b| b["metadata"]["uid"].as_str().map(str::to_owned))
        .expect("a uid");
    let run = format!(
        "airgapped-{}",
        uid.chars()
            .filter(|c| *c != '-')
            .take(8)
            .collect::<String>()
    );
    assert_eq!(role["env"]["PERFSWEEP_EXPORT_RUN"], run.as_str());
    // The server role writes nothing and mounts no claim.
    let server_pod = pod(&double, server).expect("the server pod");
    assert!(
        !server_pod["spec"]["volumes"]
            .to_string()
            .contains("\"results\""),
        "{}",
        server_pod["spec"]["volumes"]
    );

    // The run ends; the condition says where the results are.
    kubelet(&double, server, "node-a", None);
    kubelet(&double, client, "node-b", None);
    let raw = std::fs::read_to_string(format!(
        "{}/../benchmarks/testdata/iperf/tcp-4streams.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the iperf3 fixture");
    let parsed = registry::lookup("IPerf")
        .expect("IPerf")
        .parse(&raw)
        .expect("parses");
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
        command: vec!["iperf3".into()],
        started_at: "2026-11-25T10:00:00Z".into(),
        finished_at: "2026-11-25T10:00:10Z".into(),
        host: Some("node-b".into()),
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
    };
    double.set_pod_log(NS, client, AGENT, &format!("{}\n", report.to_line()));
    kubelet(&double, client, "node-b", Some(0));
    kubelet(&double, server, "node-a", Some(0));
    let found = wait_until(WAIT, "Exported", || {
        let status = double
            .get(&IPERFS, Some(NS), "airgapped")
            .map(|b| b["status"].clone())
            .unwrap_or_default();
        let exported = condition(&status, "Exported").clone();
        if exported["status"] == "True" {
            Ok(exported)
        } else {
            Err(exported.to_string())
        }
    })
    .await;
    let message = found["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("claim results under nightly/") && message.contains(&run),
        "{message}"
    );
}
