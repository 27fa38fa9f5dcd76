//! An each-node set's per-node verdict over its children finished so far, judged the
//! same way by the BenchmarkSet controller (into `status.perNode`) and by a local run
//! (into its summary), so both name the same nodes and reach the same acceptance.

use std::collections::BTreeMap;

use serde_json::Value;

use super::acceptance::ChildAcceptance;
use super::expand::Expansion;
use crate::judging::acceptance;
use crate::judging::fleet::OutlierRule;
use crate::judging::nodes::{self, NodeRuns, NodesSummary};

/// The per-node verdict (by `rule`, see [`super::fleet::outlier_rule`]) over `results` (child index, result) and `failed` children,
/// each workload (permutation of `product` and `explicit`) judged on its own. `None`
/// before any child finished, or when the set is not an each-node set or the kind has no
/// judged metric.
pub fn summary(
    rule: OutlierRule,
    expansion: &Expansion,
    results: &[(usize, Value)],
    failed: &[usize],
    judged: &[ChildAcceptance],
) -> Option<NodesSummary> {
    let criteria =
        acceptance::criteria_of(&Value::Object((*expansion.children.first()?.spec).clone()));
    let metric = expansion.kind.judged_metric(&criteria)?;
    // Workload → node → its runs so far.
    let mut runs: BTreeMap<usize, BTreeMap<&str, NodeRuns>> = BTreeMap::new();
    let finished = results
        .iter()
        .map(|(index, result)| (*index, Some(result)))
        .chain(failed.iter().map(|&index| (index, None)));
    for (index, result) in finished {
        let Some(child) = expansion.children.get(index) else {
            continue;
        };
        let Some(node) = child.node.as_ref() else {
            continue;
        };
        let node_runs = runs
            .entry(node.workload)
            .or_default()
            .entry(node.node.as_str())
            .or_default();
        node_runs.describe(Some(child.name.clone()), &node.references);
        // A failed child leaves its node known with no succeeded run: judged as failed.
        if let Some(result) = result {
            let accepted = match judged.get(index) {
                Some(ChildAcceptance::Accepted) => Some(true),
                Some(ChildAcceptance::Rejected { .. }) => Some(false),
                _ => None,
            };
            node_runs.succeeded(&expansion.kind.metrics(result), accepted);
        }
    }
    if runs.is_empty() {
        return None;
    }
    let several = expansion.workloads.len() > 1;
    let verdicts: Vec<(Option<String>, nodes::NodesVerdict)> = runs
        .into_iter()
        .map(|(workload, by_node)| {
            let results: Vec<nodes::NodeResult> = by_node
                .into_iter()
                .map(|(node, runs)| runs.result(node))
                .collect();
            let case = several
                .then(|| expansion.workloads.get(workload).cloned())
                .flatten();
            (
                case,
                nodes::judge(metric, expansion.kind.metric_defs, rule, &results),
            )
        })
        .collect();
    let borrowed: Vec<(Option<String>, &nodes::NodesVerdict)> =
        verdicts.iter().map(|(c, v)| (c.clone(), v)).collect();
    Some(NodesSummary::of(&borrowed))
}
