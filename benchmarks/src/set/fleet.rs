//! A node-pair set's fleet verdict over its children finished so far, judged the same
//! way by the BenchmarkSet controller (into the set's status) and by a local run (into
//! its summary), so both name the same suspects and reach the same acceptance.

use serde_json::Value;

use super::BenchmarkSetSpec;
use super::acceptance::ChildAcceptance;
use super::expand::Expansion;
use crate::judging::acceptance;
use crate::judging::fleet::{self, FleetSummary, OutlierRule, PairResult};

/// The outlier rule the set asks for (`permutations.nodePairs.outliers` or
/// `permutations.eachNode.outliers`), or the default.
pub fn outlier_rule(spec: &BenchmarkSetSpec) -> OutlierRule {
    spec.permutations
        .node_pairs
        .as_ref()
        .map(|pairs| pairs.outliers)
        .or_else(|| {
            spec.permutations
                .each_node
                .as_ref()
                .map(|each| each.outliers)
        })
        .unwrap_or_default()
}

/// The fleet verdict over `results` (child index, result) and `failed` children: pairs
/// judged against each other on the judged metric. `None` before any child finished, or
/// when the set has no node pairs or the kind no judged metric.
pub fn summary(
    rule: OutlierRule,
    expansion: &Expansion,
    results: &[(usize, Value)],
    failed: &[usize],
    judged: &[ChildAcceptance],
) -> Option<FleetSummary> {
    if results.is_empty() && failed.is_empty() {
        return None;
    }
    let criteria =
        acceptance::criteria_of(&Value::Object((*expansion.children.first()?.spec).clone()));
    let metric = expansion.kind.judged_metric(&criteria)?;
    let pair_of = |index: usize| expansion.children.get(index)?.pair.clone();
    let evidence = |index: usize| expansion.children.get(index).map(|c| c.name.clone());
    let mut pairs: Vec<PairResult> = results
        .iter()
        .filter_map(|(index, result)| {
            let value = crate::judging::metrics::find(&expansion.kind.metrics(result), metric.name)
                .map(|m| m.value);
            Some(PairResult {
                nodes: pair_of(*index)?,
                value,
                accepted: match judged.get(*index) {
                    Some(ChildAcceptance::Accepted) => Some(true),
                    Some(ChildAcceptance::Rejected { .. }) => Some(false),
                    _ => None,
                },
                evidence: evidence(*index),
            })
        })
        .collect();
    pairs.extend(failed.iter().filter_map(|&index| {
        Some(PairResult {
            nodes: pair_of(index)?,
            value: None,
            accepted: None,
            evidence: evidence(index),
        })
    }));
    if pairs.is_empty() {
        return None;
    }
    Some(fleet::judge(metric.name, metric.unit, metric.better, rule, &pairs).summary())
}
