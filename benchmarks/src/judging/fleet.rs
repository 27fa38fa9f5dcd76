//! The fleet verdict of a node-pair sweep: which nodes and which links are bad.
//!
//! Robust statistics across the fleet, so that the bad ones cannot hide the bad ones:
//! each node's score is the median of its pairs' values; the fleet's centre is the
//! median of the node scores and its spread 1.4826 × their median absolute deviation
//! (MAD; the factor makes it a standard deviation for normal data). Node medians rather
//! than raw pairs: one slow node drags a whole row of the pair matrix down (in a fleet of
//! four, half its pairs), but moves only one node score.
//!
//! A pair is an outlier when its value is worse than the centre by more than
//! `mads` spreads and by more than `minDeviation` of the centre (a very uniform fleet
//! has a tiny spread, and 2% below it is noise, not a fault), or when its child failed
//! or was rejected by the acceptance criteria. A node is suspect when more than half its
//! pairs are outliers; an outlier pair between two nodes that are not suspect is a
//! suspect link.
//!
//! Pure: the caller collects the pair results (from children or records).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::judging::metrics::Better;

/// Nodes and links listed in the bounded summary (the counts stay exact).
pub const WORST_LISTED: usize = 10;

/// When a pair counts as an outlier.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OutlierRule {
    /// How many robust standard deviations (1.4826 × MAD of the node medians) worse
    /// than the fleet median a pair must be. Default 3.
    #[serde(default = "default_mads")]
    #[schemars(range(min = 0.0))]
    pub mads: f64,
    /// And at least this fraction of the fleet median worse (0.1 = 10%). Default 0.1.
    #[serde(default = "default_min_deviation")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub min_deviation: f64,
}

impl Default for OutlierRule {
    fn default() -> Self {
        Self {
            mads: default_mads(),
            min_deviation: default_min_deviation(),
        }
    }
}

impl OutlierRule {
    /// Whether `value` is worse than the fleet's `centre` by more than `mads` robust
    /// spreads and by more than `minDeviation` of the centre, in the metric's direction.
    /// Both, because a very uniform fleet has a tiny spread and 2% off it is noise.
    pub fn is_outlier(
        &self,
        better: Better,
        centre: Option<f64>,
        spread: Option<f64>,
        value: f64,
    ) -> bool {
        let (Some(c), Some(s)) = (centre, spread) else {
            return false;
        };
        let worse_by = match better {
            Better::Higher => c - value,
            Better::Lower => value - c,
        };
        worse_by > self.mads * s && worse_by > self.min_deviation * c.abs()
    }
}

/// The fleet's centre and spread over `values`: the median, and 1.4826 × the median
/// absolute deviation (a standard deviation for normal data that a few bad values
/// cannot inflate). `(None, None)` without values.
pub fn robust_centre(values: &[f64]) -> (Option<f64>, Option<f64>) {
    let centre = median(values);
    let spread = centre.map(|c| {
        let deviations: Vec<f64> = values.iter().map(|v| (v - c).abs()).collect();
        1.4826 * median(&deviations).unwrap_or(0.0)
    });
    (centre, spread)
}

/// `value` relative to `centre`, signed so that negative is worse whichever way the
/// metric is better (−0.4: 40% worse); `None` without a non-zero centre.
pub fn relative(better: Better, centre: Option<f64>, value: f64) -> Option<f64> {
    centre.filter(|c| *c != 0.0).map(|c| match better {
        Better::Higher => (value - c) / c.abs(),
        Better::Lower => (c - value) / c.abs(),
    })
}

fn default_mads() -> f64 {
    3.0
}

fn default_min_deviation() -> f64 {
    0.1
}

/// What one pair's test gave.
#[derive(Clone, Debug, PartialEq)]
pub struct PairResult {
    /// The first role's node, the second role's node.
    pub nodes: [String; 2],
    /// The judged metric; `None` when the test failed.
    pub value: Option<f64>,
    /// The acceptance criteria's verdict, if the pair had criteria.
    pub accepted: Option<bool>,
    /// Where the evidence is (a record file, a child name).
    pub evidence: Option<String>,
}

/// The verdict on one pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PairVerdict {
    pub nodes: [String; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Relative to the fleet median, signed so that negative is worse (−0.4: 40% worse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
    pub outlier: bool,
    /// Why it is an outlier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

/// The verdict on one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    pub node: String,
    /// The median of its pairs' values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// The median relative to the fleet's, negative is worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
    pub pairs: u32,
    pub outlier_pairs: u32,
    pub suspect: bool,
}

/// The whole table: every pair and every node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FleetVerdict {
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub rule: OutlierRule,
    /// The median of the node medians.
    pub median: Option<f64>,
    /// 1.4826 × the MAD of the node medians.
    pub spread: Option<f64>,
    pub pairs: Vec<PairVerdict>,
    pub nodes: Vec<NodeVerdict>,
}

/// A suspect link in the summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LinkSummary {
    pub nodes: [String; 2],
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The bounded summary a set's status carries: counts, and the worst few.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FleetSummary {
    /// The judged metric.
    pub metric: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    pub nodes: u32,
    pub pairs: u32,
    pub outlier_pairs: u32,
    pub suspect_nodes: u32,
    pub suspect_links: u32,
    /// The suspect nodes, worst first, at most [`WORST_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst_nodes: Vec<NodeVerdict>,
    /// The suspect links, worst first, at most [`WORST_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst_links: Vec<LinkSummary>,
}

impl FleetVerdict {
    pub fn suspect_nodes(&self) -> impl Iterator<Item = &NodeVerdict> {
        self.nodes.iter().filter(|n| n.suspect)
    }

    /// Outlier pairs between two nodes that are not suspect, worst first.
    pub fn suspect_links(&self) -> Vec<&PairVerdict> {
        let suspect: Vec<&str> = self.suspect_nodes().map(|n| n.node.as_str()).collect();
        let mut links: Vec<&PairVerdict> = self
            .pairs
            .iter()
            .filter(|p| p.outlier && !p.nodes.iter().any(|n| suspect.contains(&n.as_str())))
            .collect();
        links.sort_by(|a, b| worst_first(a.deviation, b.deviation));
        links
    }

    /// Whether nothing is suspect.
    pub fn passed(&self) -> bool {
        self.pairs.iter().all(|p| !p.outlier)
    }

    /// The bounded summary for a set's status.
    pub fn summary(&self) -> FleetSummary {
        let mut worst_nodes: Vec<NodeVerdict> = self.suspect_nodes().cloned().collect();
        worst_nodes.sort_by(|a, b| worst_first(a.deviation, b.deviation));
        let suspect_nodes = worst_nodes.len() as u32;
        worst_nodes.truncate(WORST_LISTED);
        let links = self.suspect_links();
        FleetSummary {
            metric: self.metric.clone(),
            median: self.median,
            nodes: self.nodes.len() as u32,
            pairs: self.pairs.len() as u32,
            outlier_pairs: self.pairs.iter().filter(|p| p.outlier).count() as u32,
            suspect_nodes,
            suspect_links: links.len() as u32,
            worst_nodes,
            worst_links: links
                .into_iter()
                .take(WORST_LISTED)
                .map(|p| LinkSummary {
                    nodes: p.nodes.clone(),
                    deviation: p.deviation,
                    reason: p.reason.clone(),
                })
                .collect(),
        }
    }

    /// One line: the verdict and the suspects.
    pub fn headline(&self) -> String {
        self.summary().headline()
    }
}

impl FleetSummary {
    /// Whether no pair is an outlier: the fleet's part of a set's acceptance.
    pub fn passed(&self) -> bool {
        self.outlier_pairs == 0
    }

    /// One line: the verdict and the suspects. The same line whether it is read from a
    /// set's status (the cluster) or from a verdict judged here (a local run).
    pub fn headline(&self) -> String {
        if self.passed() {
            return format!(
                "fleet verdict: PASS — {} nodes, {} pairs, no outlier on {}",
                self.nodes, self.pairs, self.metric
            );
        }
        let nodes: Vec<String> = self
            .worst_nodes
            .iter()
            .map(|n| format!("{} ({})", n.node, percent(n.deviation)))
            .collect();
        let links: Vec<String> = self
            .worst_links
            .iter()
            .map(|l| format!("{}↔{} ({})", l.nodes[0], l.nodes[1], percent(l.deviation)))
            .collect();
        let listed = |names: Vec<String>| {
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        };
        format!(
            "fleet verdict: FAIL — {} of {} pairs outliers on {}; suspect nodes: {}; suspect links: {}",
            self.outlier_pairs,
            self.pairs,
            self.metric,
            listed(nodes),
            listed(links),
        )
    }
}

/// A signed relative deviation as a percentage, `n/a` without one.
pub fn percent(deviation: Option<f64>) -> String {
    deviation.map_or_else(|| "failed".to_owned(), |d| format!("{:+.1}%", d * 100.0))
}

/// Most negative (worst) first; no deviation (a failure) is the worst of all.
fn worst_first(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    let key = |d: Option<f64>| d.unwrap_or(f64::NEG_INFINITY);
    key(a).total_cmp(&key(b))
}

/// Judges every pair and node of a sweep on `metric`.
pub fn judge(
    metric: &str,
    unit: &str,
    better: Better,
    rule: OutlierRule,
    results: &[PairResult],
) -> FleetVerdict {
    // Each node's values, over all its pairs (either role).
    let mut by_node: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for result in results {
        for node in &result.nodes {
            let values = by_node.entry(node.as_str()).or_default();
            values.extend(result.value.filter(|v| v.is_finite()));
        }
    }
    let scores: BTreeMap<&str, Option<f64>> = by_node
        .iter()
        .map(|(node, values)| (*node, median(values)))
        .collect();
    let score_values: Vec<f64> = scores.values().filter_map(|s| *s).collect();
    let (centre, spread) = robust_centre(&score_values);
    let deviation = |value: f64| relative(better, centre, value);
    let too_far = |value: f64| rule.is_outlier(better, centre, spread, value);
    let pairs: Vec<PairVerdict> = results
        .iter()
        .map(|result| {
            let value = result.value.filter(|v| v.is_finite());
            let reason = match (value, result.accepted) {
                (None, _) => Some("the test failed or reported no value".to_owned()),
                (Some(_), Some(false)) => Some("rejected by the acceptance criteria".to_owned()),
                (Some(v), _) if too_far(v) => Some(format!(
                    "{} below the fleet median",
                    percent(deviation(v)).trim_start_matches('-')
                )),
                _ => None,
            };
            PairVerdict {
                nodes: result.nodes.clone(),
                value,
                deviation: value.and_then(deviation),
                outlier: reason.is_some(),
                reason,
                evidence: result.evidence.clone(),
            }
        })
        .collect();
    // (pairs, outlier pairs) per node, in one pass: a 1,000-node fleet has 499,500 pairs.
    let mut counts: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for pair in &pairs {
        for node in &pair.nodes {
            let entry = counts.entry(node.as_str()).or_default();
            entry.0 += 1;
            entry.1 += u32::from(pair.outlier);
        }
    }
    let nodes = by_node
        .keys()
        .map(|node| {
            let (count, outlier_pairs) = counts.get(node).copied().unwrap_or_default();
            let score = scores.get(node).copied().flatten();
            NodeVerdict {
                node: (*node).to_owned(),
                median: score,
                deviation: score.and_then(deviation),
                pairs: count,
                outlier_pairs,
                suspect: outlier_pairs * 2 > count,
            }
        })
        .collect();
    FleetVerdict {
        metric: metric.to_owned(),
        unit: unit.to_owned(),
        better,
        rule,
        median: centre,
        spread,
        pairs,
        nodes,
    }
}

/// The median of `values`; `None` when empty.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        f64::midpoint(sorted[mid - 1], sorted[mid])
    } else {
        sorted[mid]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// All pairs of `n` nodes at `base`, with a little deterministic jitter; `slow`
    /// scales every pair of one node, `bad_link` one pair.
    fn fleet(
        n: usize,
        slow: Option<(usize, f64)>,
        bad_link: Option<(usize, usize)>,
    ) -> Vec<PairResult> {
        let mut results = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let jitter = 1.0 + ((a * 7 + b * 13) % 5) as f64 * 0.005;
                let mut value = 10.0 * jitter;
                if let Some((node, factor)) = slow
                    && (a == node || b == node)
                {
                    value *= factor;
                }
                if bad_link == Some((a, b)) {
                    value *= 0.5;
                }
                results.push(PairResult {
                    nodes: [format!("n{a:02}"), format!("n{b:02}")],
                    value: Some(value),
                    accepted: None,
                    evidence: None,
                });
            }
        }
        results
    }

    fn judge_higher(results: &[PairResult]) -> FleetVerdict {
        judge(
            "bps",
            "Gbit/s",
            Better::Higher,
            OutlierRule::default(),
            results,
        )
    }

    #[test]
    fn a_healthy_fleet_passes() {
        let verdict = judge_higher(&fleet(12, None, None));
        assert!(verdict.passed(), "{}", verdict.headline());
        assert_eq!(verdict.summary().suspect_nodes, 0);
    }

    #[test]
    fn a_slow_node_is_suspect_and_its_pairs_are_not_links() {
        for n in [4, 5, 20] {
            let verdict = judge_higher(&fleet(n, Some((2, 0.6)), None));
            let suspects: Vec<&str> = verdict.suspect_nodes().map(|n| n.node.as_str()).collect();
            assert_eq!(suspects, ["n02"], "n={n}: {}", verdict.headline());
            assert!(verdict.suspect_links().is_empty(), "{}", verdict.headline());
            let summary = verdict.summary();
            let deviation = summary.worst_nodes[0].deviation.expect("a deviation");
            assert!((deviation + 0.4).abs() < 0.05, "{deviation}");
        }
    }

    #[test]
    fn a_single_bad_link_is_a_link_not_a_node() {
        let verdict = judge_higher(&fleet(8, None, Some((1, 5))));
        assert_eq!(verdict.suspect_nodes().count(), 0, "{}", verdict.headline());
        let links = verdict.suspect_links();
        assert_eq!(links.len(), 1);
        assert_eq!(links[0].nodes, ["n01".to_owned(), "n05".to_owned()]);
    }

    #[test]
    fn lower_is_better_flips_the_direction() {
        // Latency: the node with 1.6× the latency is the bad one, not the fast ones.
        let verdict = judge(
            "latency",
            "µs",
            Better::Lower,
            OutlierRule::default(),
            &fleet(6, Some((0, 1.6)), None),
        );
        let suspects: Vec<&str> = verdict.suspect_nodes().map(|n| n.node.as_str()).collect();
        assert_eq!(suspects, ["n00"]);
    }

    #[test]
    fn failures_and_rejections_are_outliers_and_the_summary_is_bounded() {
        let mut results = fleet(30, None, None);
        for (i, result) in results.iter_mut().enumerate().take(40) {
            if i.is_multiple_of(2) {
                result.value = None;
            } else {
                result.accepted = Some(false);
            }
        }
        let verdict = judge_higher(&results);
        assert!(!verdict.passed());
        let summary = verdict.summary();
        assert_eq!(summary.outlier_pairs, 40);
        assert!(summary.worst_links.len() <= WORST_LISTED);
        assert!(summary.worst_nodes.len() <= WORST_LISTED);
        assert!(
            summary.suspect_links + summary.suspect_nodes > 0,
            "{}",
            verdict.headline()
        );
    }

    #[test]
    fn a_stricter_rule_flags_a_smaller_dip() {
        let results = fleet(10, Some((3, 0.93)), None);
        assert!(judge_higher(&results).passed());
        let strict = OutlierRule {
            mads: 3.0,
            min_deviation: 0.05,
        };
        let verdict = judge("bps", "Gbit/s", Better::Higher, strict, &results);
        assert_eq!(verdict.suspect_nodes().count(), 1, "{}", verdict.headline());
    }
}
