//! Headline metrics: each kind's structured result reduced to a few named numbers, with
//! the unit in the name (`received_bits_per_second`) and a direction (is more better?).
//! Statistics across repetitions, `perfsweep results compare` and acceptance gates all
//! work on these, never on kind-specific result fields.
//!
//! Each kind declares its metrics once, as a table of [`MetricDef`]s (its
//! `BenchmarkKind::METRICS`), and extracts them from its result in
//! `BenchmarkKind::metrics`. The first metric a result yields is its headline.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which way a metric improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Better {
    /// Throughput, bandwidth, IOPS: more is better.
    Higher,
    /// Latency, time, retransmissions, loss: less is better.
    Lower,
}

impl Better {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Higher => "higher",
            Self::Lower => "lower",
        }
    }
}

/// The declaration of a metric a kind can report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricDef {
    /// snake_case with the unit last, e.g. `read_clat_p99_microseconds`.
    pub name: &'static str,
    /// The unit on its own, for axis labels, e.g. `µs`.
    pub unit: &'static str,
    pub better: Better,
    pub description: &'static str,
}

impl MetricDef {
    pub const fn higher(name: &'static str, unit: &'static str, description: &'static str) -> Self {
        Self {
            name,
            unit,
            better: Better::Higher,
            description,
        }
    }

    pub const fn lower(name: &'static str, unit: &'static str, description: &'static str) -> Self {
        Self {
            name,
            unit,
            better: Better::Lower,
            description,
        }
    }

    /// This metric with a measured value.
    pub fn of(&self, value: f64) -> Metric {
        Metric {
            name: self.name.to_owned(),
            value,
            better: self.better,
        }
    }

    /// This metric when the result has a value for it.
    pub fn maybe(&self, value: Option<f64>) -> Option<Metric> {
        value.map(|v| self.of(v))
    }
}

/// One measured metric of one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub better: Better,
}

/// Keeps the finite metrics, each name once (the first wins).
pub fn clean(metrics: Vec<Metric>) -> Vec<Metric> {
    let mut seen = std::collections::HashSet::new();
    metrics
        .into_iter()
        .filter(|m| m.value.is_finite() && seen.insert(m.name.clone()))
        .collect()
}

/// The metric named `name`, when present.
pub fn find<'a>(metrics: &'a [Metric], name: &str) -> Option<&'a Metric> {
    metrics.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_drops_non_finite_and_duplicates() {
        const A: MetricDef = MetricDef::higher("a_per_second", "1/s", "a");
        let metrics = clean(vec![A.of(1.0), A.of(2.0), A.of(f64::NAN)]);
        assert_eq!(metrics, vec![A.of(1.0)]);
        assert_eq!(find(&metrics, "a_per_second").map(|m| m.value), Some(1.0));
        assert!(find(&metrics, "b").is_none());
    }
}
