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

/// The values a metric can physically take: a parse whose metric falls outside is
/// refused, so an impossible number (a negative latency, 1e23 samples/s) never becomes a
/// result. Both bounds are inclusive and finite.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricRange {
    pub min: f64,
    pub max: f64,
}

impl MetricRange {
    /// Every finite non-negative value: what a metric allows until its kind states an
    /// upper bound with [`MetricDef::up_to`].
    pub const NON_NEGATIVE: MetricRange = MetricRange {
        min: 0.0,
        max: f64::MAX,
    };

    /// Why `value` is outside this range, or `None` when it is inside.
    pub fn violation(&self, value: f64) -> Option<String> {
        if !value.is_finite() {
            Some(format!("{value} is not a finite number"))
        } else if value < self.min {
            Some(format!(
                "{value} is below the smallest possible value {}",
                self.min
            ))
        } else if value > self.max {
            Some(format!(
                "{value} is above the largest plausible value {:e}",
                self.max
            ))
        } else {
            None
        }
    }
}

/// The declaration of a metric a kind can report.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MetricDef {
    /// snake_case with the unit last, e.g. `read_clat_p99_microseconds`.
    pub name: &'static str,
    /// The unit on its own, for axis labels, e.g. `µs`.
    pub unit: &'static str,
    pub better: Better,
    pub description: &'static str,
    /// The values the metric can take; see [`MetricRange`].
    pub valid: MetricRange,
}

impl MetricDef {
    pub const fn higher(name: &'static str, unit: &'static str, description: &'static str) -> Self {
        Self {
            name,
            unit,
            better: Better::Higher,
            description,
            valid: MetricRange::NON_NEGATIVE,
        }
    }

    pub const fn lower(name: &'static str, unit: &'static str, description: &'static str) -> Self {
        Self {
            name,
            unit,
            better: Better::Lower,
            description,
            valid: MetricRange::NON_NEGATIVE,
        }
    }

    /// This metric with the largest value it can plausibly take (every kind states one
    /// per metric; a value above it is a corrupt or misread output).
    #[must_use]
    pub const fn up_to(mut self, max: f64) -> Self {
        self.valid.max = max;
        self
    }

    /// This metric with both bounds stated (e.g. a percentage, 0 to 100).
    #[must_use]
    pub const fn within(mut self, min: f64, max: f64) -> Self {
        self.valid = MetricRange { min, max };
        self
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

/// The first metric of `metrics` outside the range its declaration in `defs` states, with
/// the reason. Metrics without a declaration must still be finite.
pub fn out_of_range(metrics: &[Metric], defs: &[MetricDef]) -> Option<(String, f64, String)> {
    metrics.iter().find_map(|m| {
        let range = defs
            .iter()
            .find(|d| d.name == m.name)
            .map_or(MetricRange::NON_NEGATIVE, |d| d.valid);
        range
            .violation(m.value)
            .map(|why| (m.name.clone(), m.value, why))
    })
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

    #[test]
    fn ranges_refuse_impossible_values() {
        const LAT: MetricDef = MetricDef::lower("latency_microseconds", "µs", "l").up_to(1e9);
        const PCT: MetricDef = MetricDef::lower("lost_percent", "%", "p").within(0.0, 100.0);
        let defs = [LAT, PCT];
        assert_eq!(out_of_range(&[LAT.of(0.36), PCT.of(100.0)], &defs), None);
        for bad in [-1.0, 1e21, f64::NAN, f64::INFINITY] {
            let (name, _, why) = out_of_range(&[PCT.of(1.0), LAT.of(bad)], &defs)
                .unwrap_or_else(|| panic!("{bad} accepted"));
            assert_eq!(name, "latency_microseconds");
            assert!(!why.is_empty());
        }
        assert!(out_of_range(&[PCT.of(100.5)], &defs).is_some());
    }
}
