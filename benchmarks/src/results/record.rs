//! The result record: one per benchmark run, on every backend. It identifies exactly what
//! ran (a digest of the canonical spec), where, and what came out, and points at the raw
//! evidence by its digest so every number can be walked back to the tool's own output.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::judging::metrics::Metric;

/// Version of the record schema; bump on incompatible changes.
pub const SCHEMA_VERSION: &str = "perfsweep.io/result/v1alpha1";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultRecord {
    pub schema_version: String,
    /// One invocation of `perfsweep run` (or one set in the cluster).
    pub run_id: String,
    pub benchmark: BenchmarkIdentity,
    /// SHA-256 of the canonical JSON of `{apiVersion, kind, spec}`.
    pub workload_spec_digest: String,
    /// The complete spec that ran.
    pub spec: Value,
    /// `local` or `kubernetes`.
    pub backend: String,
    pub environment: Environment,
    pub started_at: String,
    pub finished_at: String,
    pub outcome: RecordOutcome,
    /// The raw evidence (the tool's standard output), by digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Evidence>,
    /// SHA-256 of the canonical JSON list of every raw evidence file (`path`, `sha256`,
    /// `bytes`, sorted by path): one digest that changes when any evidence does. See
    /// [`artifact_manifest_digest`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_manifest_digest: Option<String>,
}

impl ResultRecord {
    /// Fills what follows from the rest of the record: the network mode (from the spec)
    /// and the artifact manifest digest (from the evidence).
    #[must_use]
    pub fn complete(mut self) -> Self {
        if self.environment.network.is_none() {
            self.environment.network = Some(network_of(&self.spec));
        }
        if self.artifact_manifest_digest.is_none() {
            self.artifact_manifest_digest = artifact_manifest_digest(self.evidence.iter());
        }
        self
    }

    /// The run's metrics: those recorded, or (for records written before metrics were)
    /// derived from the result through the kind's registry entry.
    pub fn metrics(&self) -> Vec<Metric> {
        match &self.outcome {
            RecordOutcome::Succeeded {
                metrics, result, ..
            } => {
                if !metrics.is_empty() {
                    return metrics.clone();
                }
                crate::kinds::registry::lookup(&self.benchmark.kind)
                    .map(|kind| kind.metrics(result))
                    .unwrap_or_default()
            }
            RecordOutcome::Failed { .. } => Vec::new(),
        }
    }

    pub fn succeeded(&self) -> bool {
        matches!(self.outcome, RecordOutcome::Succeeded { .. })
    }

    /// The key repetitions of one permutation share: the case id, or (for records
    /// without one) the kind with the canonical permutation values.
    pub fn case_key(&self) -> String {
        match &self.benchmark.benchmark_case_id {
            Some(id) => id.clone(),
            None => fallback_case_key(&self.benchmark.kind, &self.benchmark.permutation),
        }
    }
}

/// The case key of a permutation without a case id: `Kind` + canonical values.
pub fn fallback_case_key(kind: &str, permutation: &Map<String, Value>) -> String {
    format!(
        "{kind}{}",
        crate::formats::digest::canonical_json(&Value::Object(permutation.clone()))
    )
}

/// The network a spec's traffic crosses (`pod`, `host` or `multus:<attachment>`), from
/// the common fields every kind embeds.
pub fn network_of(spec: &Value) -> String {
    serde_json::from_value::<crate::kinds::common::CommonSpec>(spec.clone())
        .map_or_else(|_| "pod".into(), |common| common.network_mode().to_string())
}

/// SHA-256 of the canonical JSON list of evidence entries, sorted by path; `None`
/// without evidence.
pub fn artifact_manifest_digest<'a>(
    evidence: impl IntoIterator<Item = &'a Evidence>,
) -> Option<String> {
    let mut entries: Vec<&Evidence> = evidence.into_iter().collect();
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    let manifest: Vec<Value> = entries
        .iter()
        .map(|e| json!({"path": e.path, "sha256": e.sha256, "bytes": e.bytes}))
        .collect();
    Some(crate::formats::digest::sha256_hex(&Value::Array(manifest)))
}

/// Node labels worth recording with a result (when present on a node the benchmark ran
/// on): hardware and location that explain a difference between runs.
pub const RECORDED_NODE_LABELS: &[&str] = &[
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "feature.node.kubernetes.io/pci-15b3.present",
    "feature.node.kubernetes.io/network-sriov.capable",
    "feature.node.kubernetes.io/rdma.available",
];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkIdentity {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
    /// Set + permutation: the case id shared by the repetitions of one permutation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark_case_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<u32>,
    /// The permutation's own values.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub permutation: Map<String, Value>,
    /// An each-node sweep's node (`permutations.eachNode`): every role ran on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The references the node is judged against, chosen by its labels when the set
    /// was expanded (at most one per metric).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<crate::judging::nodes::AppliedReference>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Environment {
    /// Hosts (nodes) the processes ran on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    pub perfsweep_version: String,
    /// The measured command as run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The network the traffic crossed: `pod`, `host` or `multus:<attachment>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Per host, the node labels in [`RECORDED_NODE_LABELS`] it carried (GPU model,
    /// NIC, zone, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_labels: BTreeMap<String, BTreeMap<String, String>>,
    /// Image reference → resolved digest (`sha256:...`) of the images that ran.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub image_digests: BTreeMap<String, String>,
    /// Tool name → version as the tool reported it (e.g. `iperf3` → `3.16`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tool_versions: BTreeMap<String, String>,
    /// The API server's version (`v1.31.2`); absent for local runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The result role's network during the measurement: its data address and
    /// interface, and what crossed each interface (the agent's kernel counters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_use: Option<crate::execution::agent_report::NetworkUse>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum RecordOutcome {
    Succeeded {
        summary: String,
        result: Value,
        /// The kind's headline metrics (units in their names), headline first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        metrics: Vec<Metric>,
    },
    Failed {
        reason: String,
        message: String,
    },
}

impl RecordOutcome {
    /// The record of a failed benchmark. The reason is kept as text in records, so
    /// that records of other versions still read.
    pub fn failed(failure: &crate::outcome::Failure) -> Self {
        Self::Failed {
            reason: failure.reason.to_string(),
            message: failure.message.clone(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Evidence {
    pub sha256: String,
    pub bytes: u64,
    /// Relative to the record's directory.
    pub path: String,
}

/// The path evidence with `sha256` is stored at, relative to a results directory.
pub fn evidence_path(sha256: &str) -> String {
    format!("evidence/{sha256}.txt")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(path: &str, sha: &str) -> Evidence {
        Evidence {
            sha256: sha.into(),
            bytes: 3,
            path: path.into(),
        }
    }

    #[test]
    fn manifest_digest_ignores_order_and_tracks_content() {
        let a = evidence("evidence/a.txt", "aa");
        let b = evidence("evidence/b.txt", "bb");
        let one = artifact_manifest_digest([&a, &b]).unwrap();
        assert_eq!(artifact_manifest_digest([&b, &a]).unwrap(), one);
        let changed = evidence("evidence/b.txt", "bc");
        assert_ne!(artifact_manifest_digest([&a, &changed]).unwrap(), one);
        assert_eq!(artifact_manifest_digest(std::iter::empty()), None);
    }

    #[test]
    fn network_comes_from_the_common_fields() {
        assert_eq!(network_of(&json!({"streams": 2})), "pod");
        assert_eq!(network_of(&json!({"hostNetwork": true})), "host");
        assert_eq!(
            network_of(&json!({"networkName": "infra/sriov-a"})),
            "multus:infra/sriov-a"
        );
    }

    #[test]
    fn metrics_are_derived_from_the_result_when_not_recorded() {
        let record: ResultRecord = serde_json::from_value(json!({
            "schemaVersion": SCHEMA_VERSION, "runId": "r",
            "benchmark": {"kind": "MPIPingPong", "name": "x"},
            "workloadSpecDigest": "d", "spec": {}, "backend": "local",
            "environment": {"perfsweepVersion": "0"},
            "startedAt": "", "finishedAt": "",
            "outcome": {"status": "succeeded", "summary": "s", "result": {
                "minLatencyMicros": 1.5, "minLatencyMessageBytes": 0,
                "peakBandwidthMegabytesPerSecond": 900.0, "peakBandwidthMessageBytes": 4,
                "complete": true, "rows": []}}
        }))
        .unwrap();
        let metrics = record.metrics();
        assert_eq!(metrics[0].name, "min_latency_microseconds");
        assert_eq!(metrics[0].value, 1.5);
        assert_eq!(metrics[1].name, "peak_bandwidth_megabytes_per_second");
    }
}
