//! The fleet verdict from result records: the records of a node-pair sweep (those whose
//! permutation pins two roles to nodes) judged with [`crate::judging::fleet::judge`].
//! This is the full per-node and per-link table; a set's status carries only its bounded
//! summary.
//!
//! Records are grouped by what they ran apart from the pair (set, kind and the other
//! permutation values): pairs are only comparable within one workload. Repetitions of a
//! pair count once, by their median.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::judging::fleet::{self, FleetVerdict, PairResult};
use crate::results::record::{RecordOutcome, ResultRecord};

/// One workload's fleet: its verdict and when it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetGroup {
    /// Set, kind and the non-pair permutation values, e.g. `fleet (IPerf) streams=4`.
    pub label: String,
    pub kind: String,
    pub verdict: FleetVerdict,
    /// The sorted nodes of the sweep.
    pub nodes: Vec<String>,
    /// The first start and last finish of the group's runs (RFC 3339).
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
}

impl FleetGroup {
    /// How long the acceptance took, from the first start to the last finish.
    pub fn duration_seconds(&self) -> Option<f64> {
        let parse = |t: &Option<String>| t.as_deref()?.parse::<jiff::Timestamp>().ok();
        let (start, end) = (parse(&self.started_at)?, parse(&self.finished_at)?);
        Some((end.as_millisecond() - start.as_millisecond()) as f64 / 1000.0)
    }
}

/// The pair a record ran on: the nodes of its two placed roles, in the kind's role
/// order; `None` for a record that is not from a node-pair sweep (an each-node record
/// places its roles too, all on its one node).
pub fn pair_of(record: &ResultRecord) -> Option<[String; 2]> {
    if record.benchmark.node.is_some() {
        return None;
    }
    let kind = crate::kinds::registry::lookup(&record.benchmark.kind)?;
    let mut nodes = kind.roles.iter().filter_map(|role| {
        record
            .benchmark
            .permutation
            .get(&format!("placement.{role}.nodes"))?
            .get(0)?
            .as_str()
            .map(str::to_owned)
    });
    let pair = [nodes.next()?, nodes.next()?];
    (pair[0] != pair[1]).then_some(pair)
}

/// A workload's records, by the pair they ran on.
type RunsByPair<'a> = BTreeMap<[String; 2], Vec<&'a ResultRecord>>;

/// Every node-pair workload in `records`, judged by `rule`; empty when none is a pair
/// sweep.
pub fn groups(records: &[ResultRecord], rule: fleet::OutlierRule) -> Vec<FleetGroup> {
    // Group label → (kind, pair → its records).
    let mut grouped: BTreeMap<String, (String, RunsByPair)> = BTreeMap::new();
    for record in records {
        let Some(pair) = pair_of(record) else {
            continue;
        };
        let label = group_label(record);
        grouped
            .entry(label)
            .or_insert_with(|| (record.benchmark.kind.clone(), BTreeMap::new()))
            .1
            .entry(pair)
            .or_default()
            .push(record);
    }
    grouped
        .into_iter()
        .filter_map(|(label, (kind_name, pairs))| {
            let kind = crate::kinds::registry::lookup(&kind_name)?;
            let first = pairs.values().flatten().next()?;
            let criteria = crate::judging::acceptance::criteria_of(&first.spec);
            let metric = kind.judged_metric(&criteria)?;
            let results: Vec<PairResult> = pairs
                .iter()
                .map(|(nodes, runs)| pair_result(nodes, runs, metric.name, &criteria))
                .collect();
            let verdict = fleet::judge(metric.name, metric.unit, metric.better, rule, &results);
            let all = pairs.values().flatten();
            let started_at = all.clone().map(|r| r.started_at.clone()).min();
            let finished_at = all.map(|r| r.finished_at.clone()).max();
            Some(FleetGroup {
                label,
                kind: kind_name,
                nodes: verdict.nodes.iter().map(|n| n.node.clone()).collect(),
                verdict,
                started_at,
                finished_at,
            })
        })
        .collect()
}

/// One pair's result over its runs: the median value of the succeeded ones; failed
/// when none succeeded; rejected when most were rejected by the criteria.
fn pair_result(
    nodes: &[String; 2],
    runs: &[&ResultRecord],
    metric: &str,
    criteria: &[crate::judging::acceptance::Criterion],
) -> PairResult {
    let mut values = Vec::new();
    let mut rejected = 0;
    let mut judged = 0;
    for run in runs {
        if let RecordOutcome::Succeeded { .. } = run.outcome {
            let metrics = run.metrics();
            if let Some(m) = crate::judging::metrics::find(&metrics, metric) {
                values.push(m.value);
            }
            if let Some(verdict) = crate::judging::acceptance::evaluate(criteria, &metrics) {
                judged += 1;
                if !verdict.accepted {
                    rejected += 1;
                }
            }
        }
    }
    values.sort_by(f64::total_cmp);
    let value = (!values.is_empty()).then(|| {
        let mid = values.len() / 2;
        if values.len().is_multiple_of(2) {
            f64::midpoint(values[mid - 1], values[mid])
        } else {
            values[mid]
        }
    });
    PairResult {
        nodes: nodes.clone(),
        value,
        accepted: (judged > 0).then_some(rejected * 2 <= judged),
        evidence: runs.first().map(|r| format!("{}.json", r.benchmark.name)),
    }
}

/// What a record ran apart from its nodes, named for a person: set, kind and the other
/// permutation values, e.g. `fleet (IPerf) streams=4`.
pub fn group_label(record: &ResultRecord) -> String {
    let others: Map<String, Value> = record
        .benchmark
        .permutation
        .iter()
        .filter(|(key, _)| {
            !(key.starts_with("placement.")
                && std::path::Path::new(key)
                    .extension()
                    .is_some_and(|ext| ext.eq_ignore_ascii_case("nodes")))
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut label = format!(
        "{} ({})",
        record.benchmark.set.as_deref().unwrap_or("-"),
        record.benchmark.kind
    );
    if !others.is_empty() {
        label.push(' ');
        label.push_str(&super::describe_permutation(&others));
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(name: &str, server: &str, client: &str, gbps: Option<f64>) -> ResultRecord {
        let outcome = match gbps {
            Some(g) => json!({"status": "succeeded", "summary": "", "result": {},
                "metrics": [{"name": "received_bits_per_second", "better": "higher", "value": g * 1e9}]}),
            None => json!({"status": "failed", "reason": "ToolFailed", "message": "x"}),
        };
        serde_json::from_value(json!({
            "schemaVersion": crate::results::record::SCHEMA_VERSION,
            "runId": "r1",
            "benchmark": {"kind": "IPerf", "name": name, "set": "fleet",
                "permutation": {"placement.server.nodes": [server], "placement.client.nodes": [client]}},
            "workloadSpecDigest": "d",
            "spec": {"duration": 5},
            "backend": "local",
            "environment": {"perfsweepVersion": "0"},
            "startedAt": format!("2026-11-25T10:00:0{}Z", name.len() % 10),
            "finishedAt": "2026-11-25T10:01:00Z",
            "outcome": outcome,
        }))
        .expect("a record")
    }

    #[test]
    fn records_of_a_pair_sweep_are_judged_per_node() {
        let nodes = ["a", "b", "c", "d", "e"];
        let mut records = Vec::new();
        for (i, a) in nodes.iter().enumerate() {
            for b in &nodes[i + 1..] {
                let slow = *a == "c" || *b == "c";
                let value = if slow { 6.0 } else { 10.0 };
                records.push(record(&format!("p-{a}{b}"), a, b, Some(value)));
            }
        }
        records.push(record("failed", "a", "b", None));
        let groups = groups(&records, fleet::OutlierRule::default());
        assert_eq!(groups.len(), 1);
        let group = &groups[0];
        assert_eq!(group.nodes, ["a", "b", "c", "d", "e"]);
        assert_eq!(group.verdict.metric, "received_bits_per_second");
        let suspects: Vec<&str> = group
            .verdict
            .suspect_nodes()
            .map(|n| n.node.as_str())
            .collect();
        assert_eq!(suspects, ["c"]);
        // The failed repetition of a–b does not outweigh its succeeded one.
        assert!(group.verdict.suspect_links().is_empty());
        assert_eq!(group.duration_seconds(), Some(60.0 - 4.0));
    }

    #[test]
    fn records_without_pairs_make_no_fleet() {
        let mut plain = record("x", "a", "b", Some(1.0));
        plain.benchmark.permutation.clear();
        assert!(groups(&[plain], fleet::OutlierRule::default()).is_empty());
    }
}
