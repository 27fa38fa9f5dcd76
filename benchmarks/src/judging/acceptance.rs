//! Acceptance gates: criteria a benchmark's (or every child of a set's) results must
//! meet, such as "at least 9 Gbit/s received" or "p99 latency at most 5 µs". Pure:
//! criteria and metrics in, a verdict out.
//!
//! A criterion names one of the kind's metrics ([`crate::judging::metrics`]) and bounds
//! it with `min`, `max` and/or `minFractionOf` (a fraction of a nominal value, e.g. 90%
//! of a 100 Gbit/s line rate). Bounds are inclusive. A benchmark whose result lacks a
//! metric a criterion names (e.g. `retransmits` of a UDP test) is not accepted.
//!
//! Acceptance criteria are not part of the workload: they are left out of the workload
//! spec digest and of set case ids ([`strip`]), so tightening a gate neither renames a
//! set's children nor makes results incomparable.

use kube::KubeSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api::validation::FieldError;
use crate::judging::metrics::{Metric, MetricDef};

/// The spec field that holds the criteria, on every kind and on BenchmarkSet.
pub const FIELD: &str = "acceptance";
/// The condition a benchmark (and a set) reports its verdict in.
pub const CONDITION: &str = "Accepted";
/// Condition reasons.
pub const CRITERIA_MET: &str = "CriteriaMet";
pub const CRITERIA_NOT_MET: &str = "CriteriaNotMet";
/// A set with children that failed (no result to judge).
pub const CHILDREN_FAILED: &str = "ChildrenFailed";
/// A set whose verdict is not in yet.
pub const IN_PROGRESS: &str = "InProgress";
/// A node-pair set whose children each met their criteria, but whose fleet verdict names
/// outlier pairs: suspect nodes or links.
pub const FLEET_OUTLIERS: &str = "FleetOutliers";
/// An each-node set whose children each met their criteria, but whose per-node verdict
/// rejects nodes: outliers against the fleet, or out of their class's reference.
pub const NODES_REJECTED: &str = "NodesRejected";

/// Whether an `Accepted` condition's reason is a fleet's verdict (node pairs or each
/// node) rather than a child's own.
pub fn is_fleet_reason(reason: &str) -> bool {
    reason == FLEET_OUTLIERS || reason == NODES_REJECTED
}

/// One bound on one metric.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.min) || has(self.max) || has(self.minFractionOf)").message("set at least one of min, max and minFractionOf"))]
#[x_kube(validation = Rule::new("!has(self.min) || !has(self.max) || self.min < self.max").message("min must be less than max").field_path(".min"))]
#[serde(rename_all = "camelCase")]
pub struct Criterion {
    /// A metric of the benchmark's kind, unit in the name, e.g.
    /// `received_bits_per_second` or `p99_latency_microseconds`
    /// (see `docs/results.md` for each kind's metrics).
    #[schemars(length(min = 1, max = 128))]
    pub metric: String,

    /// The lowest acceptable value (inclusive), in the metric's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,

    /// The highest acceptable value (inclusive), in the metric's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,

    /// The lowest acceptable value as a fraction of a nominal value, e.g.
    /// `{value: 100e9, fraction: 0.9}`: at least 90% of a 100 Gbit/s line rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_fraction_of: Option<FractionOf>,
}

/// `fraction` × `value`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct FractionOf {
    /// The nominal value (e.g. a link's line rate), in the metric's unit.
    #[schemars(range(min = 0.0))]
    pub value: f64,
    /// The fraction of it, between 0 and 1 (0.9 = 90%).
    #[schemars(range(min = 0.0, max = 1.0))]
    pub fraction: f64,
}

impl Criterion {
    /// The effective lower bound: the larger of `min` and `minFractionOf`.
    pub fn lower_bound(&self) -> Option<f64> {
        let fraction = self.min_fraction_of.as_ref().map(|f| f.value * f.fraction);
        match (self.min, fraction) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    /// The criterion in a few words, e.g. `received_bits_per_second ≥ 9G`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(min) = self.min {
            parts.push(format!("≥ {}", num(min)));
        }
        if let Some(f) = &self.min_fraction_of {
            parts.push(format!(
                "≥ {}% of {} ({})",
                num(f.fraction * 100.0),
                num(f.value),
                num(f.value * f.fraction)
            ));
        }
        if let Some(max) = self.max {
            parts.push(format!("≤ {}", num(max)));
        }
        format!("{} {}", self.metric, parts.join(" and "))
    }
}

/// Checks `criteria` (at `path`, e.g. `spec.acceptance`) against the metrics a kind
/// reports: each metric must exist, bounds must be consistent. CEL checks the same where
/// it can; this covers what it cannot (the kind's metric names).
pub fn check(criteria: &[Criterion], defs: &[MetricDef], path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, criterion) in criteria.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !defs.iter().any(|d| d.name == criterion.metric) {
            let known: Vec<&str> = defs.iter().map(|d| d.name).collect();
            errors.push(FieldError::new(
                format!("{at}.metric"),
                format!(
                    "unknown metric {:?}: this kind reports {}",
                    criterion.metric,
                    if known.is_empty() {
                        "no metrics".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            ));
        }
        let bounds = [criterion.min, criterion.max].into_iter().flatten().chain(
            criterion
                .min_fraction_of
                .iter()
                .flat_map(|f| [f.value, f.fraction]),
        );
        if bounds.clone().any(|b| !b.is_finite()) {
            errors.push(FieldError::new(at.clone(), "bounds must be finite numbers"));
        }
        if criterion.min.is_none() && criterion.max.is_none() && criterion.min_fraction_of.is_none()
        {
            errors.push(FieldError::new(
                at.clone(),
                "set at least one of min, max and minFractionOf",
            ));
        }
        if let (Some(low), Some(max)) = (criterion.lower_bound(), criterion.max)
            && low >= max
        {
            errors.push(FieldError::new(
                format!("{at}.min"),
                format!(
                    "the lower bound {} must be less than max {}",
                    num(low),
                    num(max)
                ),
            ));
        }
        if let Some(f) = &criterion.min_fraction_of
            && !(f.fraction > 0.0 && f.fraction <= 1.0)
        {
            errors.push(FieldError::new(
                format!("{at}.minFractionOf.fraction"),
                "must be above 0 and at most 1",
            ));
        }
    }
    errors
}

/// The criteria in a spec (`spec.acceptance`); none when absent or malformed (a
/// validated spec is never malformed).
pub fn criteria_of(spec: &Value) -> Vec<Criterion> {
    spec.get(FIELD)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default()
}

/// `spec` without its acceptance criteria: the workload, for digests.
pub fn strip(spec: &Value) -> Value {
    let mut spec = spec.clone();
    if let Some(map) = spec.as_object_mut() {
        map.remove(FIELD);
    }
    spec
}

/// How one criterion fared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    pub criterion: Criterion,
    /// The measured value; `None` when the result lacks the metric.
    pub value: Option<f64>,
    pub passed: bool,
    /// Why it failed, with by how much, e.g. `received_bits_per_second = 8.1G is below
    /// the minimum 9G by 900M (10%)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// The verdict on one result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Judgement {
    pub accepted: bool,
    pub checks: Vec<Check>,
}

impl Judgement {
    pub fn reason(&self) -> &'static str {
        if self.accepted {
            CRITERIA_MET
        } else {
            CRITERIA_NOT_MET
        }
    }

    /// For the `Accepted` condition: every failed criterion and by how much, or that
    /// every criterion was met.
    pub fn message(&self) -> String {
        if self.accepted {
            let met: Vec<String> = self
                .checks
                .iter()
                .map(|c| match c.value {
                    Some(v) => format!("{} (measured {})", c.criterion.describe(), num(v)),
                    None => c.criterion.describe(),
                })
                .collect();
            format!("all {} criteria met: {}", self.checks.len(), met.join("; "))
        } else {
            let failed: Vec<&str> = self
                .checks
                .iter()
                .filter_map(|c| c.failure.as_deref())
                .collect();
            format!(
                "{} of {} criteria not met: {}",
                failed.len(),
                self.checks.len(),
                failed.join("; ")
            )
        }
    }
}

/// Judges `metrics` (one result's) by `criteria`; `None` without criteria.
pub fn evaluate(criteria: &[Criterion], metrics: &[Metric]) -> Option<Judgement> {
    if criteria.is_empty() {
        return None;
    }
    let checks: Vec<Check> = criteria
        .iter()
        .map(|criterion| {
            let value = crate::judging::metrics::find(metrics, &criterion.metric).map(|m| m.value);
            let failure = match value {
                None => Some(format!(
                    "{} was not reported by this result",
                    criterion.metric
                )),
                Some(v) => shortfall(criterion, v),
            };
            Check {
                criterion: criterion.clone(),
                value,
                passed: failure.is_none(),
                failure,
            }
        })
        .collect();
    Some(Judgement {
        accepted: checks.iter().all(|c| c.passed),
        checks,
    })
}

/// What reads a structured result as metrics: a benchmark kind (the registry's
/// `KindInfo`). A trait, so that criteria stay below the registry that lists the kinds.
pub trait ResultMetrics {
    /// The metrics of a structured result (`status.result`); empty when it has none.
    fn result_metrics(&self, result: &Value) -> Vec<Metric>;
}

/// The verdict on a result (`status.result`) of `kind` under the criteria in `spec`;
/// `None` when the spec has none.
pub fn judge(kind: &impl ResultMetrics, spec: &Value, result: &Value) -> Option<Judgement> {
    let criteria = criteria_of(spec);
    if criteria.is_empty() {
        return None;
    }
    evaluate(&criteria, &kind.result_metrics(result))
}

/// Why `value` fails `criterion`, with by how much; `None` when it passes.
fn shortfall(criterion: &Criterion, value: f64) -> Option<String> {
    let by = |bound: f64| {
        let delta = (value - bound).abs();
        if bound == 0.0 {
            num(delta)
        } else {
            format!("{} ({}%)", num(delta), num(delta / bound.abs() * 100.0))
        }
    };
    let name = &criterion.metric;
    let mut reasons = Vec::new();
    if let Some(min) = criterion.min
        && value < min
    {
        reasons.push(format!(
            "{name} = {} is below the minimum {} by {}",
            num(value),
            num(min),
            by(min)
        ));
    }
    if let Some(f) = &criterion.min_fraction_of {
        let bound = f.value * f.fraction;
        if value < bound {
            reasons.push(format!(
                "{name} = {} is below {}% of {} ({}) by {}",
                num(value),
                num(f.fraction * 100.0),
                num(f.value),
                num(bound),
                by(bound)
            ));
        }
    }
    if let Some(max) = criterion.max
        && value > max
    {
        reasons.push(format!(
            "{name} = {} is above the maximum {} by {}",
            num(value),
            num(max),
            by(max)
        ));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Four significant digits with an SI prefix (`9.4G`), as tables show numbers.
fn num(value: f64) -> String {
    crate::formats::number::si(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::metrics::MetricDef;
    use serde_json::json;

    const BITS: MetricDef = MetricDef::higher("received_bits_per_second", "bit/s", "rx");
    const LAT: MetricDef = MetricDef::lower("latency_p99_microseconds", "µs", "p99");

    fn criteria(value: Value) -> Vec<Criterion> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn passes_within_inclusive_bounds() {
        let c = criteria(json!([
            {"metric": "received_bits_per_second", "min": 9.0e9},
            {"metric": "latency_p99_microseconds", "max": 5}
        ]));
        let verdict = evaluate(&c, &[BITS.of(9.0e9), LAT.of(5.0)]).unwrap();
        assert!(verdict.accepted, "{verdict:?}");
        assert_eq!(verdict.reason(), CRITERIA_MET);
        assert!(verdict.message().starts_with("all 2 criteria met"));
    }

    #[test]
    fn says_which_criterion_failed_and_by_how_much() {
        let c = criteria(json!([
            {"metric": "received_bits_per_second", "min": 9.0e9},
            {"metric": "latency_p99_microseconds", "max": 5}
        ]));
        let verdict = evaluate(&c, &[BITS.of(8.1e9), LAT.of(4.0)]).unwrap();
        assert!(!verdict.accepted);
        assert_eq!(verdict.reason(), CRITERIA_NOT_MET);
        assert_eq!(
            verdict.message(),
            "1 of 2 criteria not met: received_bits_per_second = 8.1G is below the minimum 9G by 900M (10%)"
        );
        let verdict = evaluate(&c, &[BITS.of(9.5e9), LAT.of(6.0)]).unwrap();
        assert!(
            verdict
                .message()
                .contains("latency_p99_microseconds = 6 is above the maximum 5 by 1 (20%)"),
            "{}",
            verdict.message()
        );
    }

    #[test]
    fn fraction_of_a_nominal_value() {
        let c = criteria(json!([{"metric": "received_bits_per_second",
                                  "minFractionOf": {"value": 100e9, "fraction": 0.9}}]));
        assert_eq!(c[0].lower_bound(), Some(90e9));
        assert!(evaluate(&c, &[BITS.of(91e9)]).unwrap().accepted);
        let verdict = evaluate(&c, &[BITS.of(45e9)]).unwrap();
        assert!(!verdict.accepted);
        assert!(
            verdict
                .message()
                .contains("is below 90% of 100G (90G) by 45G (50%)"),
            "{}",
            verdict.message()
        );
    }

    #[test]
    fn a_missing_metric_is_not_accepted() {
        let c = criteria(json!([{"metric": "latency_p99_microseconds", "max": 5}]));
        let verdict = evaluate(&c, &[BITS.of(1.0)]).unwrap();
        assert!(!verdict.accepted);
        assert!(verdict.checks[0].value.is_none());
        assert!(verdict.message().contains("was not reported"));
    }

    #[test]
    fn no_criteria_no_verdict() {
        assert!(evaluate(&[], &[BITS.of(1.0)]).is_none());
    }

    #[test]
    fn validation_names_the_field() {
        let c = criteria(json!([
            {"metric": "bogus_per_second", "min": 1},
            {"metric": "received_bits_per_second", "min": 10, "max": 5},
            {"metric": "received_bits_per_second"},
            {"metric": "received_bits_per_second", "max": 5,
             "minFractionOf": {"value": 100, "fraction": 0.9}},
            {"metric": "received_bits_per_second",
             "minFractionOf": {"value": 100, "fraction": 0}}
        ]));
        let errors = check(&c, &[BITS, LAT], "spec.acceptance");
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.acceptance[0].metric",
                "spec.acceptance[1].min",
                "spec.acceptance[2]",
                "spec.acceptance[3].min",
                "spec.acceptance[4].minFractionOf.fraction",
            ]
        );
        assert!(
            errors[0]
                .message
                .contains("received_bits_per_second, latency_p99")
        );
        assert!(check(&c[1..2], &[BITS], "x").len() == 1);
    }

    #[test]
    fn criteria_are_not_part_of_the_workload() {
        let spec = json!({"duration": 10, "acceptance": [{"metric": "x", "min": 1}]});
        assert_eq!(strip(&spec), json!({"duration": 10}));
        assert_eq!(criteria_of(&spec).len(), 1);
        assert!(criteria_of(&json!({"duration": 10})).is_empty());
    }

    fn iperf(acceptance: Value) -> Value {
        json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
               "metadata": {"name": "a", "namespace": "default"},
               "spec": {"duration": 5, "acceptance": acceptance}})
    }

    #[test]
    fn admission_checks_criteria_against_the_kind() {
        let kind = crate::kinds::registry::lookup("IPerf").unwrap();
        let ok = iperf(
            json!([{"metric": "received_bits_per_second", "min": 9, "max": 1.5e10},
                              {"metric": "retransmits", "max": 0}]),
        );
        assert_eq!(kind.validate(&ok), vec![]);
        for (criteria, path) in [
            (
                json!([{"metric": "latency_p99_microseconds", "max": 5}]),
                "spec.acceptance[0].metric",
            ),
            (
                json!([{"metric": "received_bits_per_second"}]),
                "spec.acceptance[0]",
            ),
            (
                json!([{"metric": "received_bits_per_second", "min": 10, "max": 5.5}]),
                "spec.acceptance[0].min",
            ),
            (
                json!([{"metric": "received_bits_per_second",
                     "minFractionOf": {"value": 1e9, "fraction": 1.5}}]),
                "spec.acceptance[0].minFractionOf.fraction",
            ),
        ] {
            let errors = kind.validate(&iperf(criteria.clone()));
            assert!(
                errors.iter().any(|e| e.path == path),
                "{criteria}: expected an error at {path}, got {errors:?}"
            );
        }
    }

    /// Finding 10 of issue 18: a schema error, a CEL error and an unknown metric came
    /// back in three rounds of `validate`; all three come at once.
    #[test]
    fn every_mistake_is_reported_in_one_round() {
        let kind = crate::kinds::registry::lookup("IPerf").unwrap();
        let criteria = json!([
            {"metric": "received_bits_per_second", "min": "fast"},
            {"metric": "received_bits_per_second", "min": 10, "max": 5.5},
            {"metric": "latency_p99_microseconds", "max": 5},
        ]);
        let errors = kind.validate(&iperf(criteria));
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        for path in [
            "spec.acceptance[0].min",
            "spec.acceptance[1].min",
            "spec.acceptance[2].metric",
        ] {
            assert!(paths.contains(&path), "no error at {path}: {errors:?}");
        }
        assert_eq!(errors.len(), 3, "{errors:?}");
        // A CEL error and an unknown metric, without schema errors, also together.
        let errors = kind.validate(&iperf(json!([
            {"metric": "received_bits_per_second", "min": 10, "max": 5.5},
            {"metric": "latency_p99_microseconds", "max": 5},
        ])));
        assert_eq!(errors.len(), 2, "{errors:?}");
    }
}
