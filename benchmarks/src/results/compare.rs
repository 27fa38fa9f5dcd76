//! `perfsweep results compare A B`: what changed between two result sets, per case and
//! metric, with Welch's t-test on the repetitions and the metric's direction.

use serde::Serialize;

use super::{Case, describe_permutation};
use crate::judging::metrics::Better;
use crate::judging::stats::{Summary, welch_p_value};

/// When a difference counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criteria {
    /// Two-sided significance level of Welch's t-test.
    pub alpha: f64,
    /// Smallest relative change of the mean that matters, even when significant
    /// (0.01 = 1%): repetitions without spread make any difference "significant".
    pub min_relative_change: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Self {
            alpha: 0.05,
            min_relative_change: 0.01,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    Improved,
    Regressed,
    NoSignificantChange,
    /// Too few repetitions to test, or too noisy to tell.
    Unstable,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Improved => "improved",
            Self::Regressed => "regressed",
            Self::NoSignificantChange => "no significant change",
            Self::Unstable => "unstable",
        }
    }
}

/// One metric of one case, before and after.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    pub case: String,
    pub kind: String,
    pub permutation: String,
    pub metric: String,
    pub better: Better,
    pub baseline: Summary,
    pub candidate: Summary,
    /// candidate mean / baseline mean − 1.
    pub relative_change: Option<f64>,
    /// Two-sided p-value of Welch's t-test; `None` with fewer than two repetitions on
    /// a side.
    pub p_value: Option<f64>,
    pub verdict: Direction,
    /// Why this verdict, in a few words.
    pub reason: String,
}

/// The answer to "what changed?".
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    pub changes: Vec<Change>,
    /// Cases only in the baseline / only in the candidate (by permutation).
    pub only_baseline: Vec<String>,
    pub only_candidate: Vec<String>,
}

impl Comparison {
    pub fn count(&self, verdict: Direction) -> usize {
        self.changes.iter().filter(|c| c.verdict == verdict).count()
    }
}

/// Compares every metric both sides have, case by case. Cases match by case id (the
/// digest of the child's spec), falling back to kind + permutation values.
pub fn compare(
    baseline: &[Case],
    candidate: &[Case],
    criteria: Criteria,
    headline_only: bool,
) -> Comparison {
    let mut comparison = Comparison::default();
    let mut matched = vec![false; candidate.len()];
    for base in baseline {
        let found = candidate
            .iter()
            .position(|c| c.key == base.key)
            .or_else(|| {
                let key = base.fallback_key();
                candidate.iter().position(|c| c.fallback_key() == key)
            });
        let Some(index) = found else {
            comparison.only_baseline.push(label(base));
            continue;
        };
        matched[index] = true;
        let other = &candidate[index];
        let metrics = if headline_only {
            &base.metrics[..base.metrics.len().min(1)]
        } else {
            &base.metrics[..]
        };
        for metric in metrics {
            let Some(after) = other.metric(&metric.name) else {
                continue;
            };
            comparison.changes.push(judge(
                base,
                &metric.name,
                metric.better,
                &metric.summary,
                &after.summary,
                criteria,
            ));
        }
    }
    for (case, matched) in candidate.iter().zip(matched) {
        if !matched {
            comparison.only_candidate.push(label(case));
        }
    }
    comparison
}

fn label(case: &Case) -> String {
    format!("{} {}", case.kind, describe_permutation(&case.permutation))
}

fn judge(
    case: &Case,
    metric: &str,
    better: Better,
    baseline: &Summary,
    candidate: &Summary,
    criteria: Criteria,
) -> Change {
    let relative_change = (baseline.mean != 0.0).then(|| candidate.mean / baseline.mean - 1.0);
    let p_value = welch_p_value(baseline, candidate);
    let (verdict, reason) = match p_value {
        None => (
            Direction::Unstable,
            "fewer than 2 repetitions on a side: no test possible".to_owned(),
        ),
        Some(p) => {
            let large = relative_change.is_none_or(|r| r.abs() >= criteria.min_relative_change);
            if p < criteria.alpha && large {
                let up = candidate.mean > baseline.mean;
                let improved = up == (better == Better::Higher);
                (
                    if improved {
                        Direction::Improved
                    } else {
                        Direction::Regressed
                    },
                    format!("Welch's t-test p = {p:.3} < {}", criteria.alpha),
                )
            } else if let Some(why) = baseline.unstable.or(candidate.unstable) {
                (
                    Direction::Unstable,
                    format!("p = {p:.3}, and a side is unstable ({why:?})"),
                )
            } else if p < criteria.alpha {
                (
                    Direction::NoSignificantChange,
                    format!(
                        "p = {p:.3} but the change is under {}%",
                        criteria.min_relative_change * 100.0
                    ),
                )
            } else {
                (
                    Direction::NoSignificantChange,
                    format!("Welch's t-test p = {p:.3} ≥ {}", criteria.alpha),
                )
            }
        }
    };
    Change {
        case: case.key.clone(),
        kind: case.kind.clone(),
        permutation: describe_permutation(&case.permutation),
        metric: metric.to_owned(),
        better,
        baseline: baseline.clone(),
        candidate: candidate.clone(),
        relative_change,
        p_value,
        verdict,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::stats::Stability;
    use crate::results::group;
    use crate::results::testing::iperf;

    /// Five repetitions per case with ±0.5% noise around `level`.
    fn sweep(run: &str, levels: &[(&str, u32, f64)]) -> Vec<crate::results::record::ResultRecord> {
        let noise = [1.0, 1.004, 0.996, 1.002, 0.998];
        let mut records = Vec::new();
        for (rep, factor) in noise.iter().enumerate() {
            for (case, streams, level) in levels {
                records.push(iperf(run, case, *streams, rep as u32, level * factor));
            }
        }
        records
    }

    #[test]
    fn finds_a_planted_regression_and_nothing_else() {
        let before = sweep("r1", &[("a", 1, 9.4e9), ("b", 2, 9.0e9), ("c", 4, 8.0e9)]);
        // Case b loses 10%; a and c are the same distributions, reshuffled.
        let mut after = sweep("r2", &[("a", 1, 9.4e9), ("b", 2, 8.1e9), ("c", 4, 8.0e9)]);
        after.reverse();
        let stability = Stability::default();
        let comparison = compare(
            &group(&before, stability),
            &group(&after, stability),
            Criteria::default(),
            true,
        );
        assert_eq!(comparison.changes.len(), 3);
        let verdict = |case: &str| {
            comparison
                .changes
                .iter()
                .find(|c| c.case == case)
                .unwrap()
                .verdict
        };
        assert_eq!(verdict("a"), Direction::NoSignificantChange);
        assert_eq!(verdict("b"), Direction::Regressed);
        assert_eq!(verdict("c"), Direction::NoSignificantChange);
        let b = comparison.changes.iter().find(|c| c.case == "b").unwrap();
        assert!((b.relative_change.unwrap() + 0.1).abs() < 1e-9);
        assert!(b.p_value.unwrap() < 1e-6);
        assert_eq!(comparison.count(Direction::Regressed), 1);
    }

    #[test]
    fn direction_decides_improved_or_regressed() {
        // Throughput is higher-is-better: growing is an improvement.
        let before = sweep("r1", &[("a", 1, 9.0e9)]);
        let after = sweep("r2", &[("a", 1, 9.9e9)]);
        let stability = Stability::default();
        let comparison = compare(
            &group(&before, stability),
            &group(&after, stability),
            Criteria::default(),
            false,
        );
        let throughput = &comparison.changes[0];
        assert_eq!(throughput.metric, "received_bits_per_second");
        assert_eq!(throughput.verdict, Direction::Improved);
        // Retransmits (lower is better) stayed at 0.
        let retransmits = comparison
            .changes
            .iter()
            .find(|c| c.metric == "retransmits")
            .unwrap();
        assert_eq!(retransmits.better, Better::Lower);
        assert_eq!(retransmits.verdict, Direction::NoSignificantChange);

        // Latency (lower is better) growing is a regression.
        let mut up = Summary::of(&[2.0, 2.01, 1.99], Stability::default()).unwrap();
        let base = Summary::of(&[1.0, 1.01, 0.99], Stability::default()).unwrap();
        let case = &group(&before, stability)[0];
        let change = judge(case, "x", Better::Lower, &base, &up, Criteria::default());
        assert_eq!(change.verdict, Direction::Regressed);
        up.mean = 0.5;
        let change = judge(case, "x", Better::Lower, &base, &up, Criteria::default());
        assert_eq!(change.verdict, Direction::Improved);
    }

    #[test]
    fn matches_by_permutation_when_case_ids_differ_and_reports_the_rest() {
        let before = sweep("r1", &[("a", 1, 1e9), ("gone", 8, 1e9)]);
        let after = sweep("r2", &[("other-id", 1, 1e9), ("new", 16, 1e9)]);
        let stability = Stability::default();
        let comparison = compare(
            &group(&before, stability),
            &group(&after, stability),
            Criteria::default(),
            true,
        );
        assert_eq!(comparison.changes.len(), 1);
        assert_eq!(
            comparison.changes[0].verdict,
            Direction::NoSignificantChange
        );
        assert_eq!(comparison.only_baseline, vec!["IPerf streams=8"]);
        assert_eq!(comparison.only_candidate, vec!["IPerf streams=16"]);
    }

    #[test]
    fn noisy_or_single_runs_are_unstable() {
        let stability = Stability::default();
        let one = group(&[iperf("r", "a", 1, 0, 1e9)], stability);
        let comparison = compare(&one, &one, Criteria::default(), true);
        assert_eq!(comparison.changes[0].verdict, Direction::Unstable);

        let noisy: Vec<_> = [1.0, 1.3, 0.7, 1.2, 0.8]
            .iter()
            .enumerate()
            .map(|(i, f)| iperf("r", "a", 1, i as u32, 1e9 * f))
            .collect();
        let shifted: Vec<_> = [1.05, 1.35, 0.75, 1.25, 0.85]
            .iter()
            .enumerate()
            .map(|(i, f)| iperf("r", "a", 1, i as u32, 1e9 * f))
            .collect();
        let comparison = compare(
            &group(&noisy, stability),
            &group(&shifted, stability),
            Criteria::default(),
            true,
        );
        assert_eq!(comparison.changes[0].verdict, Direction::Unstable);
    }
}
