//! The latency distribution every figure of the result is given as: a leaf, so what
//! reports distributions (the result, the sessions' per-turn figures) depends on it and
//! not on each other.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Latency distribution of one metric in milliseconds, from an HDR histogram (3
/// significant digits).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Distribution {
    /// Number of samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Standard deviation.
    pub stddev: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
}
