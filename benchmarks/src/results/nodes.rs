//! The per-node verdict from result records: the records of an each-node sweep (those
//! that name the node they ran on) judged with [`crate::judging::nodes::judge`], each
//! node against the fleet and against the reference its record names. This is the full
//! per-node table; a set's status carries only its bounded summary.
//!
//! Records are grouped as node pairs are ([`super::fleet`]): by set, kind and the
//! permutation values apart from the node, since nodes are only comparable within one
//! workload. Repetitions of a node count once, by their median.

use std::collections::BTreeMap;

use crate::judging::fleet::OutlierRule;
use crate::judging::nodes::{self, NodeRuns, NodesVerdict};
use crate::results::record::{RecordOutcome, ResultRecord};

/// One workload's nodes: their verdict and when they ran.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    /// Set, kind and the permutation values apart from the node, e.g. `rack (IPerf)
    /// streams=4`.
    pub label: String,
    pub kind: String,
    pub verdict: NodesVerdict,
    /// The first start and last finish of the group's runs (RFC 3339).
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

/// Every each-node workload in `records`, judged by `rule`; empty when no record names
/// its node.
pub fn groups(records: &[ResultRecord], rule: OutlierRule) -> Vec<NodeGroup> {
    // Group label → (kind, node → its records).
    type RunsByNode<'a> = BTreeMap<&'a str, Vec<&'a ResultRecord>>;
    let mut grouped: BTreeMap<String, (String, RunsByNode)> = BTreeMap::new();
    for record in records {
        let Some(node) = record.benchmark.node.as_deref() else {
            continue;
        };
        grouped
            .entry(super::fleet::group_label(record))
            .or_insert_with(|| (record.benchmark.kind.clone(), BTreeMap::new()))
            .1
            .entry(node)
            .or_default()
            .push(record);
    }
    grouped
        .into_iter()
        .filter_map(|(label, (kind_name, by_node))| {
            let kind = crate::kinds::registry::lookup(&kind_name)?;
            let first = by_node.values().flatten().next()?;
            let criteria = crate::judging::acceptance::criteria_of(&first.spec);
            let metric = kind.judged_metric(&criteria)?;
            let results: Vec<nodes::NodeResult> = by_node
                .iter()
                .map(|(node, runs)| node_result(node, runs, &criteria))
                .collect();
            let verdict = nodes::judge(metric, kind.metric_defs, rule, &results);
            let all = by_node.values().flatten();
            let started_at = all.clone().map(|r| r.started_at.clone()).min();
            let finished_at = all.map(|r| r.finished_at.clone()).max();
            Some(NodeGroup {
                label,
                kind: kind_name,
                verdict,
                started_at,
                finished_at,
            })
        })
        .collect()
}

/// One node's result over its runs (see [`NodeRuns`]), judged against the references
/// its first record names.
fn node_result(
    node: &str,
    runs: &[&ResultRecord],
    criteria: &[crate::judging::acceptance::Criterion],
) -> nodes::NodeResult {
    let mut folded = NodeRuns::default();
    for run in runs {
        folded.describe(
            Some(format!("{}.json", run.benchmark.name)),
            &run.benchmark.references,
        );
        if let RecordOutcome::Succeeded { .. } = run.outcome {
            let metrics = run.metrics();
            let accepted =
                crate::judging::acceptance::evaluate(criteria, &metrics).map(|v| v.accepted);
            folded.succeeded(&metrics, accepted);
        }
    }
    folded.result(node)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// An each-node IPerf record of `node` at `gbps` (failed without), judged against
    /// `references`.
    pub fn record(node: &str, gbps: Option<f64>, references: serde_json::Value) -> ResultRecord {
        let outcome = match gbps {
            Some(g) => json!({"status": "succeeded", "summary": "", "result": {},
                "metrics": [{"name": "received_bits_per_second", "better": "higher", "value": g * 1e9}]}),
            None => json!({"status": "failed", "reason": "ToolFailed", "message": "x"}),
        };
        serde_json::from_value(json!({
            "schemaVersion": crate::results::record::SCHEMA_VERSION,
            "runId": "r1",
            "benchmark": {"kind": "IPerf", "name": format!("rack-{node}"), "set": "rack",
                "permutation": {"streams": 4, "placement.server.nodes": [node], "placement.client.nodes": [node]},
                "node": node, "references": references},
            "workloadSpecDigest": "d",
            "spec": {"duration": 5},
            "backend": "local",
            "environment": {"perfsweepVersion": "0"},
            "startedAt": "2026-11-25T10:00:00Z",
            "finishedAt": "2026-11-25T10:01:00Z",
            "outcome": outcome,
        }))
        .expect("a record")
    }

    pub fn gold(value_gbps: f64) -> serde_json::Value {
        json!([{"index": 0, "name": "gold",
            "nodeSelector": {"matchLabels": {"perfsweep.io/node-class": "gold"}},
            "metric": "received_bits_per_second", "value": value_gbps * 1e9,
            "lowerTolerance": -0.05, "upperTolerance": 0.10}])
    }

    #[test]
    fn records_of_an_each_node_sweep_are_judged_per_node_and_against_their_reference() {
        let mut records: Vec<ResultRecord> = ["a", "b", "d", "e"]
            .iter()
            .map(|n| record(n, Some(10.0), json!([])))
            .collect();
        // c is slow: the only outlier.
        records.push(record("c", Some(6.0), json!([])));
        // g is a gold node at 90% of its 11 Gbit/s reference, though on the fleet median.
        records.push(record("g", Some(9.9), gold(11.0)));
        let groups = groups(&records, OutlierRule::default());
        assert_eq!(groups.len(), 1);
        let group = &groups[0];
        assert_eq!(group.label, "rack (IPerf) streams=4");
        let outliers: Vec<&str> = group.verdict.outliers().map(|n| n.node.as_str()).collect();
        assert_eq!(outliers, ["c"]);
        let g = group
            .verdict
            .nodes
            .iter()
            .find(|n| n.node == "g")
            .expect("g");
        assert!(!g.passed && !g.outlier, "{g:?}");
        assert!(g.references_text().starts_with("gold ("), "{g:?}");
        let a = &group.verdict.nodes[0];
        assert!(a.passed, "{a:?}");
        assert_eq!(a.evidence.as_deref(), Some("rack-a.json"));
    }

    #[test]
    fn pair_records_are_not_node_records_and_node_records_are_not_pairs() {
        let node = record("a", Some(1.0), json!([]));
        assert_eq!(super::super::fleet::pair_of(&node), None);
        let mut pair = node.clone();
        pair.benchmark.node = None;
        pair.benchmark.permutation = serde_json::from_value(
            json!({"placement.server.nodes": ["a"], "placement.client.nodes": ["b"]}),
        )
        .expect("a map");
        assert!(groups(&[pair], OutlierRule::default()).is_empty());
    }
}
