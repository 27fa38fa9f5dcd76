//! `perfsweep run FILE` against a cluster, end to end: the real binary talks HTTP to the
//! API double through a kubeconfig, the operator runs in this process, and this test
//! plays scheduler and kubelet (pods run; the client's log carries a real iperf3 result).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_testkit::{ApiDouble, Gvr};
use serde_json::{Value, json};
use support::{Operator, WAIT, double_with_crds, wait_until};

const NS: &str = "journey";

const SWEEP: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: trip
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 10
  maxParallel: 2
  permutations:
    product:
      streams: [1, 4]
";

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("perfsweep-journey-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The scheduler and kubelet: every pod runs; a client's agent reports the iperf3
/// result of a real run and exits, then its server exits.
async fn kubelet(double: std::sync::Arc<ApiDouble>) {
    kubelet_finishing(double, usize::MAX).await;
}

/// [`kubelet`], but only the first `clients` client pods ever finish; the others keep
/// running (a benchmark still in progress).
async fn kubelet_finishing(double: std::sync::Arc<ApiDouble>, clients: usize) {
    let mut finished = std::collections::BTreeSet::new();
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/testdata/iperf/tcp-4streams.json"
    ))
    .expect("iperf3 fixture");
    let parsed = registry::lookup("IPerf")
        .expect("IPerf")
        .parse(&raw)
        .expect("fixture parses");
    let now = || jiff::Timestamp::now().to_string();
    loop {
        for pod in double.list(&Gvr::PODS, Some(NS)) {
            let name = pod["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let phase = pod["status"]["phase"].as_str().unwrap_or_default();
            let scheduled =
                json!([{"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}]);
            let container = |state: Value| json!([{"name": "agent", "image": "i", "imageID": "", "ready": true, "restartCount": 0, "state": state}]);
            let status = match phase {
                "Pending" => json!({"phase": "Running", "conditions": scheduled,
                    "containerStatuses": container(json!({"running": {"startedAt": now()}}))}),
                "Running"
                    if name.ends_with("-client-0")
                        && (finished.contains(&name) || finished.len() < clients) =>
                {
                    finished.insert(name.clone());
                    let report = AgentReport {
                        tool_version: None,
                        network: None,
                        kind: "IPerf".into(),
                        role: "client".into(),
                        index: 0,
                        outcome: Outcome::Succeeded {
                            result: Some(parsed.result.clone()),
                            summary: Some(parsed.summary.clone()),
                        },
                        command: vec!["iperf3".into(), "--client".into()],
                        started_at: now(),
                        finished_at: now(),
                        host: Some("node-b".into()),
                        raw_output: Some(raw.clone()),
                        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
                    };
                    double.set_pod_log(NS, &name, "agent", &format!("{}\n", report.to_line()));
                    json!({"phase": "Succeeded", "conditions": scheduled,
                        "containerStatuses": container(json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now(), "finishedAt": now()}}))})
                }
                _ => continue,
            };
            let _ = double.patch_status(&Gvr::PODS, Some(NS), &name, json!({"status": status}));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn perfsweep(args: &[&str], dir: &Path) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(args)
        .current_dir(dir)
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("perfsweep starts")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_applies_follows_downloads_and_cleans_up() {
    let double = std::sync::Arc::new(double_with_crds().await);
    let operator = Operator::start(&double, "journey");
    let kubelet = tokio::spawn(kubelet(double.clone()));
    let dir = scratch("happy");
    let kubeconfig = dir.join("kubeconfig");
    double
        .write_kubeconfig(&kubeconfig)
        .expect("kubeconfig written");
    std::fs::write(dir.join("sweep.yaml"), SWEEP).expect("sweep written");

    let child = perfsweep(
        &[
            "run",
            "--kubeconfig",
            "kubeconfig",
            "--namespace",
            NS,
            "--output",
            "results",
            "sweep.yaml",
        ],
        &dir,
    );
    let output = tokio::time::timeout(Duration::from_mins(1), child.wait_with_output())
        .await
        .expect("the run finishes")
        .expect("output collected");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stderr.contains("created namespace journey"), "{stderr}");
    assert!(stderr.contains("deleted namespace journey"), "{stderr}");

    // Results: one record per child, each with the number the tool reported and the
    // evidence it came from.
    let raw = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../benchmarks/testdata/iperf/tcp-4streams.json"
    ))
    .expect("fixture");
    let expected: Value = serde_json::from_str(&raw).expect("fixture JSON");
    let expected_bps = expected
        .pointer("/end/sum_received/bits_per_second")
        .and_then(Value::as_f64)
        .expect("iperf3 received rate");
    let results = dir.join("results");
    let records: Vec<Value> = std::fs::read_dir(&results)
        .expect("results directory")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("record")).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 2, "one record per child");
    for record in &records {
        assert_eq!(record["backend"], "kubernetes");
        assert_eq!(record["benchmark"]["set"], "trip");
        assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
        assert_eq!(
            record["outcome"]["result"]["receivedBitsPerSecond"].as_f64(),
            Some(expected_bps)
        );
        let evidence = std::fs::read_to_string(
            results.join(record["evidence"]["path"].as_str().expect("path")),
        )
        .expect("evidence downloaded");
        assert_eq!(
            sha256_hex(evidence.as_bytes()),
            record["evidence"]["sha256"].as_str().unwrap_or_default()
        );
        assert_eq!(evidence, raw);
    }
    assert!(
        stdout.contains("BENCHMARK") && stdout.contains("Gbit/s"),
        "{stdout}"
    );

    // Nothing is left: the set (and with it its children) and the namespace are gone.
    assert!(double.list(&support::SETS, Some(NS)).is_empty());
    wait_until(WAIT, "the namespace is deleted", || {
        match double.get(&Gvr::NAMESPACES, None, NS) {
            None => Ok(()),
            Some(ns) => Err(format!("{}", ns["status"])),
        }
    })
    .await;
    kubelet.abort();
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_cleans_up_too() {
    let double = double_with_crds().await;
    // No operator: the set never progresses, so only an interrupt ends the run.
    let dir = scratch("interrupt");
    double
        .write_kubeconfig(dir.join("kubeconfig"))
        .expect("kubeconfig written");
    std::fs::write(dir.join("sweep.yaml"), SWEEP).expect("sweep written");
    let child = perfsweep(
        &["run", "--kubeconfig", "kubeconfig", "-n", NS, "sweep.yaml"],
        &dir,
    );
    wait_until(WAIT, "the set is created", || {
        if double.list(&support::SETS, Some(NS)).is_empty() {
            Err("no set yet".to_owned())
        } else {
            Ok(())
        }
    })
    .await;
    let pid = child.id().expect("running");
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("perfsweep stops after Ctrl-C")
        .expect("output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "an interrupted run is not a success"
    );
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert!(
        double.list(&support::SETS, Some(NS)).is_empty(),
        "the set was deleted"
    );
    wait_until(WAIT, "the namespace is deleted", || {
        match double.get(&Gvr::NAMESPACES, None, NS) {
            None => Ok(()),
            Some(_) => Err("still there".to_owned()),
        }
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_keeps_the_records_of_benchmarks_that_finished() {
    let double = std::sync::Arc::new(double_with_crds().await);
    let operator = Operator::start(&double, "journey-interrupted");
    // One of the two children finishes; the other is still running at Ctrl-C.
    let kubelet = tokio::spawn(kubelet_finishing(double.clone(), 1));
    let dir = scratch("interrupt-keeps");
    double
        .write_kubeconfig(dir.join("kubeconfig"))
        .expect("kubeconfig written");
    std::fs::write(dir.join("sweep.yaml"), SWEEP).expect("sweep written");
    let child = perfsweep(
        &[
            "run",
            "--kubeconfig",
            "kubeconfig",
            "-n",
            NS,
            "--output",
            "results",
            "sweep.yaml",
        ],
        &dir,
    );
    let phases = || -> Vec<String> {
        double
            .list(&support::IPERFS, Some(NS))
            .iter()
            .map(|b| b["status"]["phase"].as_str().unwrap_or("").to_owned())
            .collect()
    };
    wait_until(WAIT, "one benchmark succeeded, one still running", || {
        let now = phases();
        let succeeded = now.iter().filter(|p| *p == "Succeeded").count();
        if succeeded == 1 && now.len() == 2 && now.iter().any(|p| p == "Running") {
            Ok(())
        } else {
            Err(format!("{now:?}"))
        }
    })
    .await;
    let pid = child.id().expect("running");
    let status = std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("perfsweep stops after Ctrl-C")
        .expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("kept the records of 1 finished benchmark(s)"),
        "{stderr}"
    );
    assert!(
        stdout.contains("BENCHMARK"),
        "the table of what finished: {stdout}"
    );

    let results = dir.join("results");
    let records: Vec<Value> = std::fs::read_dir(&results)
        .expect("results directory created")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("record")).expect("JSON"))
        .collect();
    assert_eq!(records.len(), 1, "the finished benchmark only");
    assert_eq!(records[0]["outcome"]["status"], "succeeded");
    let evidence = std::fs::read(
        results.join(
            records[0]["evidence"]["path"]
                .as_str()
                .expect("evidence path"),
        ),
    )
    .expect("evidence downloaded");
    assert_eq!(
        sha256_hex(&evidence),
        records[0]["evidence"]["sha256"]
            .as_str()
            .unwrap_or_default()
    );
    // And the run still cleaned up.
    assert!(double.list(&support::SETS, Some(NS)).is_empty());
    kubelet.abort();
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pair_sweep_runs_over_the_clusters_labelled_nodes() {
    let double = std::sync::Arc::new(double_with_crds().await);
    for (node, labelled) in [("n1", true), ("n2", true), ("n3", true), ("n4", false)] {
        let labels = if labelled {
            json!({"rack": "r7"})
        } else {
            json!({})
        };
        double
            .create(
                &Gvr::NODES,
                json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": labels}}),
            )
            .expect("node created");
    }
    let operator = Operator::start(&double, "journey-pairs");
    let kubelet = tokio::spawn(kubelet(double.clone()));
    let dir = scratch("pairs");
    double
        .write_kubeconfig(dir.join("kubeconfig"))
        .expect("kubeconfig written");
    let sweep = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: pairs
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec: {duration: 10}
  maxParallel: 3
  permutations:
    nodePairs:
      selector: {matchLabels: {rack: r7}}
";
    std::fs::write(dir.join("pairs.yaml"), sweep).expect("sweep written");
    let child = perfsweep(
        &[
            "run",
            "--kubeconfig",
            "kubeconfig",
            "-n",
            NS,
            "-o",
            "results",
            "pairs.yaml",
        ],
        &dir,
    );
    let output = tokio::time::timeout(Duration::from_mins(1), child.wait_with_output())
        .await
        .expect("the run finishes")
        .expect("output collected");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("created BenchmarkSet pairs: 3 IPerf benchmarks"),
        "{stderr}"
    );
    let records = std::fs::read_dir(dir.join("results"))
        .expect("results")
        .filter_map(std::result::Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(
        records, 3,
        "one record per pair of the three labelled nodes"
    );
    kubelet.abort();
    operator.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
