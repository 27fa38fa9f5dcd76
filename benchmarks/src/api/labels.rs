//! Label and annotation keys perfsweep puts on what it creates.

/// `app.kubernetes.io/managed-by` value on everything perfsweep creates.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "perfsweep";

/// The BenchmarkSet a child belongs to.
pub const SET: &str = "perfsweep.io/set";
/// The child's case: set + permutation (a digest of the child's full spec).
pub const CASE: &str = "perfsweep.io/case";
/// The repetition index of a child, from 0.
pub const REPETITION: &str = "perfsweep.io/repetition";
/// A node-pair child's round: the children of one round run together on disjoint
/// node pairs.
pub const ROUND: &str = "perfsweep.io/round";
/// The benchmark a pod or helper object belongs to.
pub const BENCHMARK: &str = "perfsweep.io/benchmark";
/// The uid of the benchmark a pod or helper object belongs to: what its Service and
/// NetworkPolicy select on, so a pod that merely copies the benchmark's name is not
/// one of its pods.
pub const BENCHMARK_UID: &str = "perfsweep.io/benchmark-uid";
/// The uid of the BenchmarkSet whose one NetworkPolicy admits a child's pods (see
/// `render::network_policy::for_set`).
pub const SET_UID: &str = "perfsweep.io/set-uid";
/// The role a pod plays in its benchmark.
pub const ROLE: &str = "perfsweep.io/role";

/// Annotation: the permutation's own values, as JSON.
pub const PERMUTATION: &str = "perfsweep.io/permutation";
/// Annotation: the permutation's index in the set's expansion.
pub const PERMUTATION_INDEX: &str = "perfsweep.io/permutation-index";
/// Annotation: an each-node child's node (`permutations.eachNode`).
pub const NODE: &str = "perfsweep.io/node";
/// Annotation: the references an each-node child's node is judged against, as JSON
/// (a list of `AppliedReference`); its result record carries them on.
pub const REFERENCES: &str = "perfsweep.io/references";
/// Annotation: SHA-256 of the child's canonical spec (the workload spec digest).
pub const SPEC_DIGEST: &str = "perfsweep.io/spec-digest";

/// The key of the agent report (with the raw evidence) in a benchmark's evidence
/// ConfigMap.
pub const EVIDENCE_REPORT_KEY: &str = "report.json";

/// The key of what the operator observed about where a benchmark ran (nodes and their
/// labels, image digests, Kubernetes version: a record's `environment`) in its evidence
/// ConfigMap.
pub const EVIDENCE_ENVIRONMENT_KEY: &str = "environment.json";

/// The ConfigMap the operator keeps a finished benchmark's agent report in, so the raw
/// evidence outlives the pods.
pub fn evidence_config_map(benchmark: &str) -> String {
    format!("{benchmark}-evidence")
}
