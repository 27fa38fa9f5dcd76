//! Result records of benchmarks that ran in a cluster, built from the benchmark object
//! (spec, status, labels), the evidence the operator kept, and what it observed about
//! where the benchmark ran. Shared by `perfsweep run` on a cluster (which downloads
//! them) and the operator (which exports them to an `outputLocation`), so both write the
//! same record.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::api::status::Phase;
use perfsweep_benchmarks::execution::agent_report::AgentReport;
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::results::record::{
    self, BenchmarkIdentity, Environment, Evidence, RECORDED_NODE_LABELS, RecordOutcome,
    ResultRecord,
};
use serde_json::{Value, json};

/// What the operator keeps of a finished benchmark in its evidence ConfigMap.
#[derive(Clone, Debug, Default)]
pub struct Kept {
    /// The result pod's agent report, with the raw output (unless it was too large).
    pub report: Option<AgentReport>,
    /// Where the benchmark ran, as the operator saw it before deleting the pods.
    pub environment: Option<Environment>,
}

impl Kept {
    /// What `map` holds; an entry that does not parse is left out (it was written by
    /// the operator, so that means an older or damaged map, not bad input).
    pub fn from_config_map(map: &ConfigMap) -> Self {
        let entry = |key: &str| map.data.as_ref().and_then(|data| data.get(key));
        Self {
            report: entry(labels::EVIDENCE_REPORT_KEY).and_then(|t| serde_json::from_str(t).ok()),
            environment: entry(labels::EVIDENCE_ENVIRONMENT_KEY)
                .and_then(|t| serde_json::from_str(t).ok()),
        }
    }
}

/// The environment of a benchmark from its pods (nodes they ran on, resolved image
/// digests), those nodes (the labels in [`RECORDED_NODE_LABELS`]) and the API server's
/// version. Pure: the caller fetches.
pub fn observe_environment(
    pods: &[Pod],
    nodes: &[Node],
    kubernetes_version: Option<&str>,
) -> Environment {
    let hosts: BTreeSet<String> = pods
        .iter()
        .filter_map(|pod| pod.spec.as_ref()?.node_name.clone())
        .filter(|name| !name.is_empty())
        .collect();
    let mut node_labels = BTreeMap::new();
    for node in nodes {
        let Some(name) = node.metadata.name.as_ref().filter(|n| hosts.contains(*n)) else {
            continue;
        };
        let recorded: BTreeMap<String, String> = node
            .metadata
            .labels
            .iter()
            .flatten()
            .filter(|(key, _)| RECORDED_NODE_LABELS.contains(&key.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !recorded.is_empty() {
            node_labels.insert(name.clone(), recorded);
        }
    }
    let mut image_digests = BTreeMap::new();
    for status in pods.iter().filter_map(|pod| pod.status.as_ref()) {
        let containers = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten());
        for container in containers {
            if let Some(digest) = image_digest(&container.image_id) {
                image_digests.insert(container.image.clone(), digest);
            }
        }
    }
    Environment {
        hosts: hosts.into_iter().collect(),
        perfsweep_version: env!("CARGO_PKG_VERSION").into(),
        node_labels,
        image_digests,
        kubernetes_version: kubernetes_version.map(str::to_owned),
        ..Environment::default()
    }
}

/// The digest in a container status's `imageID`, which runtimes spell differently:
/// `docker-pullable://repo@sha256:...`, `repo@sha256:...` or a bare `sha256:...`.
fn image_digest(image_id: &str) -> Option<String> {
    let id = image_id
        .rsplit_once('@')
        .map_or(image_id, |(_, digest)| digest);
    let id = id.rsplit_once("://").map_or(id, |(_, rest)| rest);
    id.starts_with("sha256:").then(|| id.to_owned())
}

/// The record of the benchmark `object` (as the API returns it: metadata, spec,
/// status) of `kind`.
pub fn cluster_record(
    kind: &KindInfo,
    object: &Value,
    set: Option<String>,
    kept: &Kept,
    run_id: &str,
) -> ResultRecord {
    let spec = object.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = object.get("status").cloned().unwrap_or_else(|| json!({}));
    let metadata = &object["metadata"];
    let phase: Option<Phase> = serde_json::from_value(status["phase"].clone()).ok();
    let outcome = if let Some(Phase::Succeeded) = phase {
        let result = status.get("result").cloned().unwrap_or(Value::Null);
        RecordOutcome::Succeeded {
            summary: status["summary"].as_str().unwrap_or_default().to_owned(),
            metrics: kind.metrics(&result),
            result,
        }
    } else {
        let failed = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Failed"))
            .cloned()
            .unwrap_or_default();
        RecordOutcome::Failed {
            reason: failed["reason"].as_str().unwrap_or("Unknown").to_owned(),
            message: failed["message"].as_str().unwrap_or_default().to_owned(),
        }
    };
    let report = kept.report.as_ref();
    let evidence = report.and_then(|r| {
        let sha = r.raw_output_sha256.clone()?;
        Some(Evidence {
            path: record::evidence_path(&sha),
            bytes: r.raw_output.as_ref().map_or(0, |raw| raw.len() as u64),
            sha256: sha,
        })
    });
    let mut environment = kept.environment.clone().unwrap_or_else(|| Environment {
        perfsweep_version: env!("CARGO_PKG_VERSION").into(),
        ..Environment::default()
    });
    if let Some(report) = report {
        add_report_facts(&mut environment, report);
    }
    ResultRecord {
        schema_version: record::SCHEMA_VERSION.into(),
        run_id: run_id.into(),
        benchmark: identity_of(kind, metadata, set),
        workload_spec_digest: perfsweep_benchmarks::set::expand::workload_spec_digest(
            kind.kind, &spec,
        ),
        spec,
        backend: "kubernetes".into(),
        environment,
        started_at: status["startedAt"].as_str().unwrap_or_default().to_owned(),
        finished_at: status["finishedAt"].as_str().unwrap_or_default().to_owned(),
        outcome,
        evidence,
        artifact_manifest_digest: None,
    }
    .complete()
}

/// The identity of the benchmark `metadata` belongs to, as its name, labels and
/// annotations give it; `set` is the set it belongs to, if any.
pub fn identity_of(kind: &KindInfo, metadata: &Value, set: Option<String>) -> BenchmarkIdentity {
    let text = |value: &Value| value.as_str().map(str::to_owned);
    BenchmarkIdentity {
        kind: kind.kind.into(),
        name: text(&metadata["name"]).unwrap_or_default(),
        set,
        benchmark_case_id: text(&metadata["labels"][labels::CASE]),
        repetition: metadata["labels"][labels::REPETITION]
            .as_str()
            .and_then(|r| r.parse().ok()),
        permutation: metadata["annotations"][labels::PERMUTATION]
            .as_str()
            .and_then(|p| serde_json::from_str(p).ok())
            .unwrap_or_default(),
        node: text(&metadata["annotations"][labels::NODE]),
        references: metadata["annotations"][labels::REFERENCES]
            .as_str()
            .and_then(|r| serde_json::from_str(r).ok())
            .unwrap_or_default(),
    }
}

/// Adds what an agent's report says of where and how the tool ran: its host, the
/// command as run and the tool's own version. Every backend's records take these facts
/// from the report, so they agree.
pub fn add_report_facts(environment: &mut Environment, report: &AgentReport) {
    if let Some(host) = &report.host
        && !environment.hosts.contains(host)
    {
        environment.hosts.push(host.clone());
        environment.hosts.sort();
    }
    environment.command.clone_from(&report.command);
    if let Some(found) = &report.tool_version {
        environment
            .tool_versions
            .insert(found.tool.clone(), found.version.clone());
    }
    if report.network.is_some() {
        environment.network_use.clone_from(&report.network);
    }
}

/// The environment a report alone gives (no cluster observed it).
pub fn report_environment(report: Option<&AgentReport>) -> Environment {
    let mut environment = Environment {
        perfsweep_version: env!("CARGO_PKG_VERSION").into(),
        ..Environment::default()
    };
    if let Some(report) = report {
        add_report_facts(&mut environment, report);
    }
    environment
}

/// Writes a report's raw output under `dir` as the record's evidence (`evidence/<sha>.txt`),
/// when it has some and it matches its digest.
pub fn write_evidence(
    dir: &std::path::Path,
    report: &AgentReport,
) -> std::io::Result<Option<Evidence>> {
    let (Some(raw), Some(sha256)) = (&report.raw_output, &report.raw_output_sha256) else {
        return Ok(None);
    };
    if !report.evidence_is_intact() {
        return Ok(None);
    }
    let path = record::evidence_path(sha256);
    let file = dir.join(&path);
    if let Some(parent) = file.parent() {
        std::fs::create_dir_all(parent)?;
    }
    crate::output_dir::write_atomic(&file, raw.as_bytes())?;
    Ok(Some(Evidence {
        sha256: sha256.clone(),
        bytes: raw.len() as u64,
        path,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_facts_join_the_environment_once() {
        let report: AgentReport = serde_json::from_value(json!({
            "kind": "IPerf", "role": "client", "index": 0,
            "outcome": {"status": "succeeded"},
            "command": ["iperf3", "--client", "10.0.0.2"],
            "startedAt": "2026-11-25T16:00:00Z", "finishedAt": "2026-11-25T16:00:10Z",
            "host": "node-b",
            "toolVersion": {"tool": "iperf3", "version": "iperf 3.12"},
            "network": {"address": "10.78.0.3", "interface": "net1",
                        "interfaces": [{"name": "net1", "mtu": 3000, "txBytes": 9, "rxBytes": 1}]},
        }))
        .expect("a valid report");
        let mut observed = Environment {
            hosts: vec!["node-a".into(), "node-b".into()],
            ..Environment::default()
        };
        add_report_facts(&mut observed, &report);
        assert_eq!(observed.hosts, ["node-a", "node-b"]);
        assert_eq!(observed.command, report.command);
        assert_eq!(observed.tool_versions["iperf3"], "iperf 3.12");
        assert_eq!(
            observed
                .network_use
                .as_ref()
                .and_then(|n| n.interface.as_deref()),
            Some("net1"),
            "the record says which network the bytes crossed"
        );
        let alone = report_environment(Some(&report));
        assert_eq!(alone.hosts, ["node-b"]);
        assert_eq!(alone.perfsweep_version, env!("CARGO_PKG_VERSION"));
        assert!(report_environment(None).hosts.is_empty());
    }

    fn pod(node: &str, statuses: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{node}")},
            "spec": {"nodeName": node, "containers": [{"name": "agent"}]},
            "status": {"containerStatuses": statuses},
        }))
        .expect("a valid pod")
    }

    #[test]
    fn the_environment_names_nodes_their_hardware_labels_and_image_digests() {
        let digest = format!("sha256:{}", "a".repeat(64));
        let pods = [
            pod(
                "gpu-1",
                json!([{"name": "agent", "image": "ghcr.io/perfsweep/iperf:1",
                        "imageID": format!("ghcr.io/perfsweep/iperf@{digest}"),
                        "ready": true, "restartCount": 0}]),
            ),
            pod(
                "gpu-2",
                json!([{"name": "agent", "image": "other:2", "imageID": "",
                        "ready": false, "restartCount": 0}]),
            ),
        ];
        let node = |name: &str, labels: Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("a valid node")
        };
        let nodes = [
            node(
                "gpu-1",
                json!({"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
                       "topology.kubernetes.io/zone": "z1", "kubernetes.io/hostname": "gpu-1"}),
            ),
            node("unrelated", json!({"topology.kubernetes.io/zone": "z9"})),
        ];
        let environment = observe_environment(&pods, &nodes, Some("v1.31.2"));
        assert_eq!(environment.hosts, ["gpu-1", "gpu-2"]);
        assert_eq!(
            environment.node_labels["gpu-1"],
            BTreeMap::from([
                (
                    "nvidia.com/gpu.product".to_owned(),
                    "NVIDIA-H100-80GB-HBM3".to_owned()
                ),
                ("topology.kubernetes.io/zone".to_owned(), "z1".to_owned()),
            ])
        );
        assert!(!environment.node_labels.contains_key("unrelated"));
        assert_eq!(
            environment.image_digests,
            BTreeMap::from([("ghcr.io/perfsweep/iperf:1".to_owned(), digest.clone())])
        );
        assert_eq!(environment.kubernetes_version.as_deref(), Some("v1.31.2"));
        assert_eq!(
            image_digest(&format!("docker-pullable://r@{digest}")),
            Some(digest.clone())
        );
        assert_eq!(image_digest(&digest), Some(digest));
        assert_eq!(image_digest("docker://abc"), None);
    }
}
