//! The LLM load generator's result document and what is computed from it: doubts about
//! the measurement, serialized latency histograms, and the merge of distributed
//! workers' results. Pure (no I/O): the operator, the benchmarks crate and the engine
//! all read and write these.

pub mod distribute;
pub mod distribution;
pub mod doubt;
pub mod figures;
pub mod histogram;
pub mod result;
pub mod sessions;

/// Why the results of a distributed run's workers cannot be made into one result
/// (`perfsweep-benchmarks` turns it into its `ParseError` of the same names).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// The merged run failed as a whole (its error rate is over the limit).
    #[error("the benchmark tool reported an error: {0}")]
    ToolReportedError(String),
    /// The workers' results do not fit together.
    #[error("the results of the result role's replicas cannot be merged: {0}")]
    Unmergeable(String),
}
