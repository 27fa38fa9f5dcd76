//! The result record: one per benchmark run, on every backend. It identifies exactly what
//! ran (a digest of the canonical spec), where, and what came out, and points at the raw
//! evidence by its digest so every number can be walked back to the tool's own output.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

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
}

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
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum RecordOutcome {
    Succeeded { summary: String, result: Value },
    Failed { reason: String, message: String },
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
