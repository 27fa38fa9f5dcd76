//! The per-node verdict of an each-node sweep (`permutations.eachNode`): every node ran
//! the same benchmark on its own, and each is judged two ways.
//!
//! - Against the fleet: the same robust rule as node pairs ([`super::fleet`]). The
//!   centre is the median of the node values, the spread 1.4826 × their MAD, and a node
//!   is an outlier when it is worse than the centre by more than `mads` spreads and by
//!   more than `minDeviation` of the centre, or when its benchmark failed.
//! - Against its class's reference ([`NodeReference`]): a value with lower and upper
//!   tolerances, like ReFrame's `(value, -0.05, 0.10, unit)`, or a fraction of the fleet
//!   median. A reference applies to the nodes its `nodeSelector` matches; per metric, a
//!   node is judged against the first reference that matches it, so a list can go from
//!   the specific (`node-class=gold`) to the general (no selector).
//!
//! Which references apply to a node is decided when the set is expanded (the node's
//! labels are known then) and travels with its benchmark ([`AppliedReference`]): the
//! set's status, the result record and the report all name the same reference.
//!
//! Pure: the caller collects the per-node values (from children or records).

use std::collections::BTreeMap;

use kube::KubeSchema;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::fleet::{OutlierRule, WORST_LISTED, median, percent, relative, robust_centre};
use super::metrics::{Better, MetricDef};
use crate::formats::number::si;

/// Nodes by label.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelector {
    /// Labels a node must all carry. Empty selects every node.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

impl NodeSelector {
    /// As a Kubernetes label selector string (`k=v,k2=v2`; empty for all nodes).
    pub fn to_label_selector(&self) -> String {
        self.match_labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Whether a node with `labels` carries every label of the selector.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels
            .iter()
            .all(|(key, value)| labels.get(key) == Some(value))
    }
}

/// A reference one class of nodes is judged against, on one metric: `value` with
/// tolerances, or within a fraction of the fleet median.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("has(self.value) != has(self.withinFractionOfMedian)").message("set either value (with its tolerances) or withinFractionOfMedian"))]
#[x_kube(validation = Rule::new("has(self.value) || (!has(self.lowerTolerance) && !has(self.upperTolerance))").message("tolerances are fractions of value: set value").field_path(".lowerTolerance"))]
#[x_kube(validation = Rule::new("!has(self.value) || has(self.lowerTolerance) || has(self.upperTolerance)").message("a value needs a lowerTolerance, an upperTolerance or both").field_path(".value"))]
#[serde(rename_all = "camelCase")]
pub struct NodeReference {
    /// A short name the verdicts use, e.g. `gold`; default `references[<index>]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub name: Option<String>,

    /// The nodes this reference applies to; absent or empty: every node. Per metric a
    /// node is judged against the first reference that matches it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<NodeSelector>,

    /// A metric of the benchmark's kind, unit in the name, e.g.
    /// `received_bits_per_second`.
    #[schemars(length(min = 1, max = 128))]
    pub metric: String,

    /// The reference value, in the metric's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,

    /// The lowest acceptable value as a fraction off `value`, zero or negative:
    /// `-0.05` accepts down to 95% of it. Absent: no lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -1.0, max = 0.0))]
    pub lower_tolerance: Option<f64>,

    /// The highest acceptable value as a fraction over `value`, zero or positive:
    /// `0.10` accepts up to 110% of it. Absent: no upper bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0))]
    pub upper_tolerance: Option<f64>,

    /// Instead of a value: at most this fraction worse than the median of the nodes
    /// (0.1 = 10%), in the metric's direction (below it for bandwidth, above it for
    /// latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub within_fraction_of_median: Option<f64>,
}

/// A reference as it applies to one node: which one it is and what it says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedReference {
    /// Its index in the set's `permutations.eachNode.references`.
    pub index: u32,
    #[serde(flatten)]
    pub reference: NodeReference,
}

impl AppliedReference {
    /// The reference in a few words, e.g. `gold (perfsweep.io/node-class=gold):
    /// hpl_gflops 3 −5%/+10%` or `references[1] (every node): stream_triad within 10% of
    /// the fleet median`.
    pub fn describe(&self) -> String {
        let reference = &self.reference;
        let name = reference
            .name
            .clone()
            .unwrap_or_else(|| format!("references[{}]", self.index));
        let nodes = match reference
            .node_selector
            .as_ref()
            .map(NodeSelector::to_label_selector)
        {
            Some(selector) if !selector.is_empty() => selector,
            _ => "every node".to_owned(),
        };
        let bound = match (reference.value, reference.within_fraction_of_median) {
            (Some(value), _) => {
                let tolerance = |t: Option<f64>| {
                    t.map_or_else(|| "unbounded".to_owned(), |t| format!("{:+}%", t * 100.0))
                };
                format!(
                    "{} {}/{}",
                    si(value),
                    tolerance(reference.lower_tolerance),
                    tolerance(reference.upper_tolerance)
                )
            }
            (None, Some(fraction)) => {
                format!("within {}% of the fleet median", si(fraction * 100.0))
            }
            (None, None) => "unbounded".to_owned(),
        };
        format!("{name} ({nodes}): {} {bound}", reference.metric)
    }

    /// The acceptable range for this reference, given the fleet median of its metric:
    /// `(lowest, highest)`, each `None` when unbounded.
    pub fn bounds(&self, better: Better, fleet_median: Option<f64>) -> (Option<f64>, Option<f64>) {
        let reference = &self.reference;
        match (reference.value, reference.within_fraction_of_median) {
            (Some(value), _) => (
                reference.lower_tolerance.map(|t| value * (1.0 + t)),
                reference.upper_tolerance.map(|t| value * (1.0 + t)),
            ),
            (None, Some(fraction)) => match (fleet_median, better) {
                (Some(m), Better::Higher) => (Some(m - fraction * m.abs()), None),
                (Some(m), Better::Lower) => (None, Some(m + fraction * m.abs())),
                (None, _) => (None, None),
            },
            (None, None) => (None, None),
        }
    }
}

/// The references that apply to a node with `labels`: per metric, the first of
/// `references` whose selector matches, in the order of the list.
pub fn applicable(
    references: &[NodeReference],
    labels: &BTreeMap<String, String>,
) -> Vec<AppliedReference> {
    let mut applied: Vec<AppliedReference> = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let selected = reference
            .node_selector
            .as_ref()
            .is_none_or(|selector| selector.matches(labels));
        if selected
            && !applied
                .iter()
                .any(|a| a.reference.metric == reference.metric)
        {
            applied.push(AppliedReference {
                index: index as u32,
                reference: reference.clone(),
            });
        }
    }
    applied
}

/// The label keys `references` select nodes by: the only labels a set needs to keep
/// of its nodes.
pub fn label_keys(references: &[NodeReference]) -> std::collections::BTreeSet<String> {
    references
        .iter()
        .filter_map(|r| r.node_selector.as_ref())
        .flat_map(|s| s.match_labels.keys().cloned())
        .collect()
}

/// What one node's benchmark gave, over its repetitions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeResult {
    pub node: String,
    /// Each metric's median over the node's succeeded runs.
    pub values: BTreeMap<String, f64>,
    /// No run of the node succeeded.
    pub failed: bool,
    /// Its own acceptance criteria's verdict (most runs), if it had criteria.
    pub accepted: Option<bool>,
    /// The references it is judged against (see [`applicable`]).
    pub references: Vec<AppliedReference>,
    /// Where the evidence is (a record file, a child name).
    pub evidence: Option<String>,
}

/// One node's runs of one workload as they come in (children or records), folded into
/// its [`NodeResult`]: repetitions count once, by their median.
#[derive(Clone, Debug, Default)]
pub struct NodeRuns {
    values: BTreeMap<String, Vec<f64>>,
    succeeded: u32,
    judged: u32,
    rejected: u32,
    references: Vec<AppliedReference>,
    evidence: Option<String>,
}

impl NodeRuns {
    /// A succeeded run's metrics, with its own criteria's verdict if it had criteria.
    pub fn succeeded(&mut self, metrics: &[super::metrics::Metric], accepted: Option<bool>) {
        self.succeeded += 1;
        for metric in metrics.iter().filter(|m| m.value.is_finite()) {
            self.values
                .entry(metric.name.clone())
                .or_default()
                .push(metric.value);
        }
        if let Some(accepted) = accepted {
            self.judged += 1;
            self.rejected += u32::from(!accepted);
        }
    }

    /// Where the node's evidence is and what it is judged against (the first run's).
    pub fn describe(&mut self, evidence: Option<String>, references: &[AppliedReference]) {
        if self.evidence.is_none() {
            self.evidence = evidence;
        }
        if self.references.is_empty() {
            self.references = references.to_vec();
        }
    }

    /// The node's result: medians over the succeeded runs; failed without one; rejected
    /// when most judged runs were.
    pub fn result(self, node: &str) -> NodeResult {
        NodeResult {
            node: node.to_owned(),
            values: self
                .values
                .iter()
                .filter_map(|(name, values)| Some((name.clone(), median(values)?)))
                .collect(),
            failed: self.succeeded == 0,
            accepted: (self.judged > 0).then_some(self.rejected * 2 <= self.judged),
            references: self.references,
            evidence: self.evidence,
        }
    }
}

/// How a node fared against one reference.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReferenceCheck {
    /// The reference, as [`AppliedReference::describe`] gives it.
    pub reference: String,
    pub metric: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The lowest and highest value the reference accepts (absent: unbounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub high: Option<f64>,
    pub passed: bool,
    /// Why not, with the bound it missed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// The verdict on one node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeJudgement {
    pub node: String,
    /// The judged metric's value (median over repetitions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// The value relative to the fleet median, negative is worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
    /// Named by the fleet rule (or its benchmark failed).
    pub outlier: bool,
    /// Every reference it was judged against.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<ReferenceCheck>,
    /// Not an outlier, every reference met, not rejected by its own criteria.
    pub passed: bool,
    /// Why it did not pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
}

impl NodeJudgement {
    /// The references it was judged against, `; `-separated (`-` without any).
    pub fn references_text(&self) -> String {
        if self.references.is_empty() {
            "fleet median only".to_owned()
        } else {
            self.references
                .iter()
                .map(|r| r.reference.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        }
    }

    /// `PASS`, or `FAIL: ` and the reasons.
    pub fn verdict_text(&self) -> String {
        if self.passed {
            "PASS".to_owned()
        } else {
            format!("FAIL: {}", self.reasons.join("; "))
        }
    }
}

/// Every node of one workload, judged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodesVerdict {
    /// The metric the fleet rule judges (the first criterion's, or the kind's headline).
    pub metric: String,
    pub unit: String,
    pub better: Better,
    pub rule: OutlierRule,
    /// The median of the node values.
    pub median: Option<f64>,
    /// 1.4826 × their MAD.
    pub spread: Option<f64>,
    pub nodes: Vec<NodeJudgement>,
}

/// A node that did not pass, in the bounded summary.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    pub node: String,
    /// The permutation it ran, when the set has more than one (e.g. `streams=4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation: Option<f64>,
    pub outlier: bool,
    /// The references it was judged against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Why it did not pass.
    pub reason: String,
}

/// The bounded per-node summary a set's status carries: counts, and the worst few.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodesSummary {
    /// The metric the fleet rule judges.
    pub metric: String,
    /// The fleet median of that metric (of the one workload; absent with several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// Node results judged (nodes × workloads).
    pub nodes: u32,
    /// Those that did not pass.
    pub rejected: u32,
    /// Those named by the fleet rule (or failed).
    pub outliers: u32,
    /// Those that missed a reference.
    pub out_of_reference: u32,
    /// The nodes that did not pass, worst first, at most [`WORST_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub worst_nodes: Vec<NodeSummary>,
}

impl NodesVerdict {
    /// Whether every node passed.
    pub fn passed(&self) -> bool {
        self.nodes.iter().all(|n| n.passed)
    }

    /// The outlier nodes.
    pub fn outliers(&self) -> impl Iterator<Item = &NodeJudgement> {
        self.nodes.iter().filter(|n| n.outlier)
    }

    /// The bounded summary for a set's status.
    pub fn summary(&self) -> NodesSummary {
        NodesSummary::of(&[(None, self)])
    }

    /// One line: the verdict and the nodes that failed.
    pub fn headline(&self) -> String {
        self.summary().headline()
    }
}

impl NodesSummary {
    /// The summary over one verdict per workload, each with its permutation's
    /// description when the set has several.
    pub fn of(verdicts: &[(Option<String>, &NodesVerdict)]) -> Self {
        let mut out = Self {
            metric: verdicts
                .first()
                .map(|(_, v)| v.metric.clone())
                .unwrap_or_default(),
            median: match verdicts {
                [(_, only)] => only.median,
                _ => None,
            },
            ..Self::default()
        };
        let mut failing: Vec<NodeSummary> = Vec::new();
        for (case, verdict) in verdicts {
            for node in &verdict.nodes {
                out.nodes += 1;
                out.outliers += u32::from(node.outlier);
                out.out_of_reference += u32::from(node.references.iter().any(|r| !r.passed));
                if !node.passed {
                    out.rejected += 1;
                    failing.push(NodeSummary {
                        node: node.node.clone(),
                        case: case.clone(),
                        value: node.value,
                        deviation: node.deviation,
                        outlier: node.outlier,
                        reference: (!node.references.is_empty()).then(|| node.references_text()),
                        reason: node.reasons.join("; "),
                    });
                }
            }
        }
        // Failures first, then the furthest below the fleet.
        failing.sort_by(|a, b| {
            let key = |d: Option<f64>| d.unwrap_or(f64::NEG_INFINITY);
            key(a.deviation).total_cmp(&key(b.deviation))
        });
        failing.truncate(WORST_LISTED);
        out.worst_nodes = failing;
        out
    }

    /// Whether every node passed: the per-node part of a set's acceptance.
    pub fn passed(&self) -> bool {
        self.rejected == 0
    }

    /// One line: the verdict and the nodes that failed, each with why. The same line
    /// from a set's status (the cluster) and from a local run.
    pub fn headline(&self) -> String {
        if self.passed() {
            return format!(
                "per-node verdict: PASS — {} nodes, no outlier on {}, every reference met",
                self.nodes, self.metric
            );
        }
        let named: Vec<String> = self
            .worst_nodes
            .iter()
            .map(|n| match &n.case {
                Some(case) => format!("{} [{case}] ({})", n.node, n.reason),
                None => format!("{} ({})", n.node, n.reason),
            })
            .collect();
        let more = self.rejected as usize - named.len().min(self.rejected as usize);
        format!(
            "per-node verdict: FAIL — {} of {} nodes rejected ({} outliers on {}, {} out of reference): {}{}",
            self.rejected,
            self.nodes,
            self.outliers,
            self.metric,
            self.out_of_reference,
            named.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    }
}

/// Judges every node of one workload: on `metric` against the fleet by `rule`, and on
/// each node's references (whose metrics' directions are in `defs`).
pub fn judge(
    metric: &MetricDef,
    defs: &[MetricDef],
    rule: OutlierRule,
    results: &[NodeResult],
) -> NodesVerdict {
    let value_of = |result: &NodeResult, name: &str| {
        result
            .values
            .get(name)
            .copied()
            .filter(|v| v.is_finite() && !result.failed)
    };
    let values: Vec<f64> = results
        .iter()
        .filter_map(|r| value_of(r, metric.name))
        .collect();
    let (centre, spread) = robust_centre(&values);
    // The fleet median of each metric a reference names, for `withinFractionOfMedian`.
    let mut medians: BTreeMap<&str, Option<f64>> = BTreeMap::new();
    for result in results {
        for applied in &result.references {
            let name = applied.reference.metric.as_str();
            medians.entry(name).or_insert_with(|| {
                let values: Vec<f64> = results.iter().filter_map(|r| value_of(r, name)).collect();
                median(&values)
            });
        }
    }
    let nodes = results
        .iter()
        .map(|result| {
            let value = value_of(result, metric.name);
            let deviation = value.and_then(|v| relative(metric.better, centre, v));
            let mut reasons = Vec::new();
            let outlier = match value {
                None => {
                    reasons.push("the benchmark failed or reported no value".to_owned());
                    true
                }
                Some(v) if rule.is_outlier(metric.better, centre, spread, v) => {
                    reasons.push(format!(
                        "outlier: {} worse than the fleet median {}",
                        percent(deviation).trim_start_matches(['-', '+']),
                        si(centre.unwrap_or_default())
                    ));
                    true
                }
                Some(_) => false,
            };
            if result.accepted == Some(false) {
                reasons.push("rejected by its acceptance criteria".to_owned());
            }
            let references: Vec<ReferenceCheck> = result
                .references
                .iter()
                .map(|applied| {
                    let name = applied.reference.metric.as_str();
                    let better = defs
                        .iter()
                        .find(|d| d.name == name)
                        .map_or(Better::Higher, |d| d.better);
                    let median = medians.get(name).copied().flatten();
                    check(applied, better, median, value_of(result, name))
                })
                .collect();
            reasons.extend(references.iter().filter_map(|r| r.failure.clone()));
            NodeJudgement {
                node: result.node.clone(),
                value,
                deviation,
                outlier,
                passed: reasons.is_empty(),
                references,
                reasons,
                evidence: result.evidence.clone(),
            }
        })
        .collect();
    NodesVerdict {
        metric: metric.name.to_owned(),
        unit: metric.unit.to_owned(),
        better: metric.better,
        rule,
        median: centre,
        spread,
        nodes,
    }
}

/// How `value` fares against `applied` (with the fleet median of its metric).
fn check(
    applied: &AppliedReference,
    better: Better,
    fleet_median: Option<f64>,
    value: Option<f64>,
) -> ReferenceCheck {
    let reference = applied.describe();
    let name = applied
        .reference
        .name
        .clone()
        .unwrap_or_else(|| format!("references[{}]", applied.index));
    let metric = applied.reference.metric.clone();
    let (low, high) = applied.bounds(better, fleet_median);
    let failure = match value {
        None => Some(format!("{metric} was not reported (reference {name})")),
        Some(v) => match (low, high) {
            (Some(low), _) if v < low => Some(format!(
                "{metric} = {} is below {}, the lowest reference {name} accepts",
                si(v),
                si(low)
            )),
            (_, Some(high)) if v > high => Some(format!(
                "{metric} = {} is above {}, the highest reference {name} accepts",
                si(v),
                si(high)
            )),
            _ => None,
        },
    };
    ReferenceCheck {
        reference,
        metric,
        value,
        low,
        high,
        passed: failure.is_none(),
        failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GFLOPS: MetricDef = MetricDef::higher("hpl_gflops", "GFLOP/s", "HPL");
    const LATENCY: MetricDef = MetricDef::lower("latency_microseconds", "µs", "latency");

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn class(name: &str) -> NodeSelector {
        NodeSelector {
            match_labels: labels(&[("perfsweep.io/node-class", name)]),
        }
    }

    fn reference(name: &str, value: f64, lower: f64, upper: f64) -> NodeReference {
        NodeReference {
            name: Some(name.to_owned()),
            node_selector: Some(class(name)),
            metric: GFLOPS.name.to_owned(),
            value: Some(value),
            lower_tolerance: Some(lower),
            upper_tolerance: Some(upper),
            within_fraction_of_median: None,
        }
    }

    fn node(name: &str, value: f64, references: Vec<AppliedReference>) -> NodeResult {
        NodeResult {
            node: name.to_owned(),
            values: [(GFLOPS.name.to_owned(), value)].into(),
            references,
            ..NodeResult::default()
        }
    }

    /// Five nodes at 10 with a little deterministic jitter; `slow` scales one.
    fn fleet(slow: Option<(usize, f64)>, better: &MetricDef) -> Vec<NodeResult> {
        (0..5)
            .map(|i| {
                let mut value = 10.0 * (1.0 + (i * 7 % 5) as f64 * 0.004);
                if let Some((index, factor)) = slow
                    && index == i
                {
                    value *= factor;
                }
                NodeResult {
                    node: format!("n{i}"),
                    values: [(better.name.to_owned(), value)].into(),
                    ..NodeResult::default()
                }
            })
            .collect()
    }

    #[test]
    fn each_class_is_judged_against_its_own_reference() {
        let references = [
            reference("gold", 3.0, -0.05, 0.10),
            reference("silver", 2.0, -0.05, 0.10),
        ];
        let gold = applicable(&references, &labels(&[("perfsweep.io/node-class", "gold")]));
        let silver = applicable(
            &references,
            &labels(&[("perfsweep.io/node-class", "silver")]),
        );
        assert_eq!(gold[0].index, 0);
        assert_eq!(silver[0].index, 1);
        // The gold node at 90% of its reference (2.7 < 2.85); the silver one at 2.0 is
        // on its own reference, though far below gold's.
        let verdict = judge(
            &GFLOPS,
            &[GFLOPS],
            OutlierRule {
                mads: 3.0,
                min_deviation: 0.9,
            },
            &[node("g1", 2.7, gold), node("s1", 2.0, silver)],
        );
        let [g1, s1] = &verdict.nodes[..] else {
            panic!("two nodes: {verdict:?}")
        };
        assert!(!g1.passed, "{g1:?}");
        assert!(g1.references[0].reference.starts_with("gold"), "{g1:?}");
        assert!(
            g1.reasons[0].contains("below 2.85, the lowest reference gold accepts"),
            "{:?}",
            g1.reasons
        );
        assert!(s1.passed, "{s1:?}");
        assert!(s1.references[0].reference.starts_with("silver"), "{s1:?}");
        let summary = verdict.summary();
        assert_eq!((summary.rejected, summary.out_of_reference), (1, 1));
        assert!(
            summary
                .headline()
                .contains("g1 (hpl_gflops = 2.7 is below 2.85"),
            "{}",
            summary.headline()
        );
    }

    #[test]
    fn the_upper_tolerance_bounds_from_above() {
        let gold = applicable(
            &[reference("gold", 3.0, -0.05, 0.10)],
            &labels(&[("perfsweep.io/node-class", "gold")]),
        );
        let verdict = judge(
            &GFLOPS,
            &[GFLOPS],
            OutlierRule::default(),
            &[node("fast", 3.4, gold.clone()), node("ok", 3.3, gold)],
        );
        assert!(!verdict.nodes[0].passed, "{:?}", verdict.nodes[0]);
        assert!(
            verdict.nodes[1].passed,
            "3.3 is exactly 110%: {:?}",
            verdict.nodes[1]
        );
    }

    #[test]
    fn the_first_matching_reference_wins_and_unselected_references_apply_to_all() {
        let references = [
            reference("gold", 3.0, -0.05, 0.10),
            NodeReference {
                name: None,
                node_selector: None,
                ..reference("any", 1.0, -0.5, 1.0)
            },
        ];
        let gold = applicable(&references, &labels(&[("perfsweep.io/node-class", "gold")]));
        assert_eq!(gold.len(), 1, "one reference per metric: {gold:?}");
        assert_eq!(gold[0].index, 0);
        let other = applicable(&references, &BTreeMap::new());
        assert_eq!(other[0].index, 1);
        assert!(
            other[0]
                .describe()
                .starts_with("references[1] (every node)"),
            "{}",
            other[0].describe()
        );
    }

    #[test]
    fn a_slowed_node_is_the_only_outlier_and_a_uniform_fleet_has_none() {
        let verdict = judge(
            &GFLOPS,
            &[GFLOPS],
            OutlierRule::default(),
            &fleet(Some((3, 0.7)), &GFLOPS),
        );
        let outliers: Vec<&str> = verdict.outliers().map(|n| n.node.as_str()).collect();
        assert_eq!(outliers, ["n3"], "{}", verdict.headline());
        assert!(!verdict.passed());
        assert!(
            verdict.headline().contains("n3 (outlier"),
            "{}",
            verdict.headline()
        );

        let uniform = judge(
            &GFLOPS,
            &[GFLOPS],
            OutlierRule::default(),
            &fleet(None, &GFLOPS),
        );
        assert_eq!(uniform.outliers().count(), 0, "{}", uniform.headline());
        assert!(uniform.passed());
        // No spread at all: 2.5% below is noise, not a fault (`minDeviation`).
        let mut flat: Vec<NodeResult> = (0..5)
            .map(|i| node(&format!("n{i}"), 10.0, Vec::new()))
            .collect();
        flat[2].values.insert(GFLOPS.name.to_owned(), 9.75);
        let flat = judge(&GFLOPS, &[GFLOPS], OutlierRule::default(), &flat);
        assert!(flat.passed(), "{}", flat.headline());
    }

    #[test]
    fn lower_is_better_names_the_slow_node_not_the_fast_one() {
        let mut results = fleet(Some((1, 1.5)), &LATENCY);
        // A node much faster than the rest is no outlier for a latency.
        results[4].values.insert(LATENCY.name.to_owned(), 5.0);
        let verdict = judge(&LATENCY, &[LATENCY], OutlierRule::default(), &results);
        let outliers: Vec<&str> = verdict.outliers().map(|n| n.node.as_str()).collect();
        assert_eq!(outliers, ["n1"], "{}", verdict.headline());
    }

    #[test]
    fn within_a_fraction_of_the_median_follows_the_metric_direction() {
        let median_reference = |metric: &MetricDef| AppliedReference {
            index: 0,
            reference: NodeReference {
                name: None,
                node_selector: None,
                metric: metric.name.to_owned(),
                value: None,
                lower_tolerance: None,
                upper_tolerance: None,
                within_fraction_of_median: Some(0.05),
            },
        };
        // 8% off the median: outside 5%, but not an outlier by the default 10% rule.
        for (metric, factor, failing) in [(GFLOPS, 0.92, true), (GFLOPS, 1.08, false)]
            .into_iter()
            .chain([(LATENCY, 1.08, true), (LATENCY, 0.92, false)])
        {
            let mut results = fleet(Some((2, factor)), &metric);
            for result in &mut results {
                result.references = vec![median_reference(&metric)];
            }
            let verdict = judge(&metric, &[metric], OutlierRule::default(), &results);
            let rejected: Vec<&str> = verdict
                .nodes
                .iter()
                .filter(|n| !n.passed)
                .map(|n| n.node.as_str())
                .collect();
            let expected: &[&str] = if failing { &["n2"] } else { &[] };
            assert_eq!(rejected, expected, "{} × {factor}", metric.name);
            assert_eq!(verdict.outliers().count(), 0);
        }
    }

    #[test]
    fn a_failed_node_is_an_outlier_and_misses_its_reference() {
        let gold = applicable(
            &[reference("gold", 3.0, -0.05, 0.10)],
            &labels(&[("perfsweep.io/node-class", "gold")]),
        );
        let mut results = fleet(None, &GFLOPS);
        results[0].failed = true;
        results[0].values.clear();
        results[0].references = gold;
        let verdict = judge(&GFLOPS, &[GFLOPS], OutlierRule::default(), &results);
        let n0 = &verdict.nodes[0];
        assert!(n0.outlier && !n0.passed, "{n0:?}");
        assert!(!n0.references[0].passed);
        let summary = verdict.summary();
        assert_eq!(
            (summary.rejected, summary.outliers, summary.out_of_reference),
            (1, 1, 1)
        );
    }

    #[test]
    fn the_summary_is_bounded_and_counts_stay_exact() {
        let results: Vec<NodeResult> = (0..40)
            .map(|i| NodeResult {
                node: format!("n{i:02}"),
                failed: true,
                ..NodeResult::default()
            })
            .collect();
        let summary = judge(&GFLOPS, &[GFLOPS], OutlierRule::default(), &results).summary();
        assert_eq!(summary.rejected, 40);
        assert_eq!(summary.worst_nodes.len(), WORST_LISTED);
        assert!(
            summary.headline().ends_with("and 30 more"),
            "{}",
            summary.headline()
        );
    }
}
