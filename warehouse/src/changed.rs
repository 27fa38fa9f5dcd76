//! "What changed?" between two runs (run ids): which cases got worse, at which workload
//! points, which nodes look abnormal (per-node results and telemetry slices), and the
//! raw evidence of the worse runs — one report, all from the warehouse.

use datafusion::arrow::array::{Array, Float64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::record_batch::RecordBatch;
use serde::Serialize;

use crate::engine::{Warehouse, text_column};
use crate::error::{Error, Result};

/// A node whose results are below this fraction of its run's median is abnormal.
pub const ABNORMAL_SCORE: f64 = 0.8;
/// A telemetry mean that moved by more than this factor between the runs is reported.
pub const TELEMETRY_FACTOR: f64 = 1.5;
/// A utilization (a `_percent` column) that moved by this many points is reported too,
/// whatever the factor: 65 % to 98 % is a node that ran out of headroom.
pub const TELEMETRY_PERCENT_POINTS: f64 = 20.0;

/// Whether a node's telemetry mean of `metric` moved enough between the runs to name it.
pub fn telemetry_moved(metric: &str, baseline: f64, candidate: f64) -> bool {
    let by_factor = baseline > 0.0
        && (candidate / baseline > TELEMETRY_FACTOR
            || (candidate > 0.0 && baseline / candidate > TELEMETRY_FACTOR));
    let by_points =
        metric.ends_with("_percent") && (candidate - baseline).abs() >= TELEMETRY_PERCENT_POINTS;
    by_factor || by_points
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    pub baseline: String,
    pub candidate: String,
    pub threshold_percent: f64,
    /// Cases worse in the candidate than the threshold, worst first.
    pub slower_cases: Vec<CaseChange>,
    /// The workload points of those cases that moved, worst first.
    pub points: Vec<PointChange>,
    pub abnormal_nodes: Vec<NodeFinding>,
    pub evidence: Vec<EvidenceLink>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaseChange {
    pub case_key: String,
    /// The case named for a person: its permutation (`streams=4`), beside the digest.
    pub permutation: String,
    pub kind: String,
    pub metric: String,
    pub baseline: f64,
    pub candidate: f64,
    pub worse_percent: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointChange {
    pub case_key: String,
    /// The case's permutation, as in [`CaseChange::permutation`].
    pub permutation: String,
    /// `scenario D(100,100) concurrency 16`, `pair a-b`, `scale 4`.
    pub point: String,
    pub metric: String,
    pub baseline: f64,
    pub candidate: f64,
    pub worse_percent: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeFinding {
    pub node: String,
    pub finding: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EvidenceLink {
    pub run_key: String,
    pub name: String,
    pub record_path: String,
    pub evidence_paths: String,
}

fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// "Worse" in percent of the baseline, in the metric's own direction (SQL).
const WORSE: &str = "CASE WHEN better = 'higher' THEN (baseline - candidate) / baseline \
                     ELSE (candidate - baseline) / baseline END * 100";

pub async fn what_changed(
    warehouse: &Warehouse,
    baseline: &str,
    candidate: &str,
    threshold_percent: f64,
) -> Result<Report> {
    let (b, c) = (quote(baseline), quote(candidate));
    let present = warehouse
        .strings(&format!(
            "SELECT DISTINCT run_id FROM benchmark_run_fact WHERE run_id IN ({b}, {c})"
        ))
        .await?;
    for side in [baseline, candidate] {
        if !present.iter().any(|p| p == side) {
            return Err(Error::Invalid(format!(
                "run {side} is not in the warehouse (see `SELECT DISTINCT run_id FROM benchmark_run_fact`)"
            )));
        }
    }
    let mut report = Report {
        baseline: baseline.into(),
        candidate: candidate.into(),
        threshold_percent,
        ..Report::default()
    };

    let cases = warehouse
        .query(&format!(
            "WITH sides AS (
               SELECT case_key, kind, headline_metric AS metric, headline_better AS better,
                      avg(CASE WHEN run_id = {b} THEN headline_value END) AS baseline,
                      avg(CASE WHEN run_id = {c} THEN headline_value END) AS candidate
               FROM benchmark_run_fact
               WHERE run_id IN ({b}, {c}) AND status = 'succeeded' AND headline_value IS NOT NULL
               GROUP BY case_key, kind, headline_metric, headline_better)
             SELECT case_key, kind, metric, baseline, candidate, {WORSE} AS worse
             FROM sides WHERE baseline IS NOT NULL AND candidate IS NOT NULL AND baseline <> 0
             ORDER BY worse DESC, case_key"
        ))
        .await?;
    for row in rows(&cases)? {
        if row.float(5) > threshold_percent {
            report.slower_cases.push(CaseChange {
                case_key: row.text(0),
                permutation: String::new(),
                kind: row.text(1),
                metric: row.text(2),
                baseline: row.float(3),
                candidate: row.float(4),
                worse_percent: row.float(5),
            });
        }
    }
    if report.slower_cases.is_empty() {
        return Ok(report);
    }
    let slower = report
        .slower_cases
        .iter()
        .map(|s| quote(&s.case_key))
        .collect::<Vec<_>>()
        .join(", ");
    // A case key is a digest: name each case by its permutation too.
    let described = warehouse
        .query(&format!(
            "SELECT case_key, max(permutation) FROM workload_dim
             WHERE case_key IN ({slower}) GROUP BY case_key"
        ))
        .await?;
    let permutations: std::collections::BTreeMap<String, String> = rows(&described)?
        .iter()
        .map(|row| (row.text(0), describe_permutation(&row.text(1))))
        .collect();
    let permutation_of = |case_key: &str| permutations.get(case_key).cloned().unwrap_or_default();
    for case in &mut report.slower_cases {
        case.permutation = permutation_of(&case.case_key);
    }

    // Workload points: serving (scenario × concurrency, p99 TTFT and throughput),
    // system (metric × pair or node), training (scale point, step time).
    let points = warehouse
        .query(&format!(
            "WITH serving AS (
               SELECT case_key, 'scenario ' || scenario || ' concurrency ' || CAST(concurrency AS VARCHAR) AS point,
                      'ttft_p99_ms' AS metric, 'lower' AS better,
                      avg(CASE WHEN run_id = {b} THEN ttft_p99_ms END) AS baseline,
                      avg(CASE WHEN run_id = {c} THEN ttft_p99_ms END) AS candidate
               FROM serving_outcome_fact WHERE run_id IN ({b}, {c}) AND case_key IN ({slower})
               GROUP BY case_key, scenario, concurrency
             ), system AS (
               SELECT case_key, scope || ' ' || coalesce(node_a, '') || CASE WHEN node_b IS NULL THEN '' ELSE '-' || node_b END AS point,
                      metric, max(better) AS better,
                      avg(CASE WHEN run_id = {b} THEN value END) AS baseline,
                      avg(CASE WHEN run_id = {c} THEN value END) AS candidate
               FROM system_outcome_fact WHERE run_id IN ({b}, {c}) AND case_key IN ({slower})
               GROUP BY case_key, scope, node_a, node_b, metric
             ), training AS (
               SELECT case_key, phase || ' scale ' || CAST(scale_point AS VARCHAR) AS point,
                      'step_time_mean_seconds' AS metric, 'lower' AS better,
                      avg(CASE WHEN run_id = {b} THEN step_time_mean_seconds END) AS baseline,
                      avg(CASE WHEN run_id = {c} THEN step_time_mean_seconds END) AS candidate
               FROM training_outcome_fact WHERE run_id IN ({b}, {c}) AND case_key IN ({slower})
               GROUP BY case_key, phase, scale_point
             ), points AS (
               SELECT * FROM serving UNION ALL SELECT * FROM system UNION ALL SELECT * FROM training
             )
             SELECT case_key, point, metric, baseline, candidate, {WORSE} AS worse FROM points
             WHERE baseline IS NOT NULL AND candidate IS NOT NULL AND baseline <> 0
             ORDER BY worse DESC, case_key, point, metric"
        ))
        .await?;
    for row in rows(&points)? {
        if row.float(5) > threshold_percent {
            report.points.push(PointChange {
                permutation: permutation_of(&row.text(0)),
                case_key: row.text(0),
                point: row.text(1),
                metric: row.text(2),
                baseline: row.float(3),
                candidate: row.float(4),
                worse_percent: row.float(5),
            });
        }
    }

    // Nodes: in the candidate, per-node results well below the run's median...
    let nodes = warehouse
        .query(&format!(
            "SELECT node, metric, mean_score, results FROM worst_nodes
             WHERE run_id = {c} AND mean_score < {ABNORMAL_SCORE}
             ORDER BY mean_score, node, metric"
        ))
        .await?;
    for row in rows(&nodes)? {
        report.abnormal_nodes.push(NodeFinding {
            node: row.text(0),
            finding: format!(
                "{} at {:.2}x the run's median over {} result(s)",
                row.text(1),
                row.float(2),
                row.int(3)
            ),
        });
    }
    // ... and telemetry of the candidate's nodes that moved against the baseline.
    for metric in crate::derive::TELEMETRY_METRICS {
        let moved = warehouse
            .query(&format!(
                "WITH sides AS (
                   SELECT node, avg(CASE WHEN run_id = {b} THEN {metric} END) AS baseline,
                          avg(CASE WHEN run_id = {c} THEN {metric} END) AS candidate
                   FROM telemetry_slice_fact WHERE run_id IN ({b}, {c}) GROUP BY node)
                 SELECT node, baseline, candidate FROM sides
                 WHERE baseline IS NOT NULL AND candidate IS NOT NULL
                 ORDER BY node"
            ))
            .await?;
        for row in rows(&moved)?
            .into_iter()
            .filter(|row| telemetry_moved(metric, row.float(1), row.float(2)))
        {
            report.abnormal_nodes.push(NodeFinding {
                node: row.text(0),
                finding: format!(
                    "telemetry {metric}: {:.1} in the baseline, {:.1} in the candidate",
                    row.float(1),
                    row.float(2)
                ),
            });
        }
    }

    let evidence = warehouse
        .query(&format!(
            "SELECT r.run_key, r.name, r.record_path, coalesce(a.evidence_paths, '')
             FROM benchmark_run_fact r
             LEFT JOIN artifact_lineage_dim a ON r.artifact_manifest_digest = a.artifact_manifest_digest
             WHERE r.run_id = {c} AND r.case_key IN ({slower})
             ORDER BY r.name"
        ))
        .await?;
    for row in rows(&evidence)? {
        report.evidence.push(EvidenceLink {
            run_key: row.text(0),
            name: row.text(1),
            record_path: row.text(2),
            evidence_paths: row.text(3),
        });
    }
    Ok(report)
}

/// Rows of batches, read by column index; a null reads as empty text, NaN or 0.
struct Cells {
    texts: Vec<Option<String>>,
    floats: Vec<Option<f64>>,
}

impl Cells {
    fn text(&self, i: usize) -> String {
        self.texts.get(i).cloned().flatten().unwrap_or_default()
    }
    fn float(&self, i: usize) -> f64 {
        self.floats.get(i).copied().flatten().unwrap_or(f64::NAN)
    }
    fn int(&self, i: usize) -> i64 {
        self.float(i) as i64
    }
}

fn rows(batches: &[RecordBatch]) -> Result<Vec<Cells>> {
    let mut out = Vec::new();
    for batch in batches {
        let mut texts = Vec::new();
        let mut floats = Vec::new();
        for column in batch.columns() {
            texts.push(text_column(column)?);
            let as_float = cast(column, &DataType::Float64).ok();
            floats.push(as_float.and_then(|a| a.as_any().downcast_ref::<Float64Array>().cloned()));
        }
        for i in 0..batch.num_rows() {
            out.push(Cells {
                texts: texts
                    .iter()
                    .map(|t| (!t.is_null(i)).then(|| t.value(i).to_owned()))
                    .collect(),
                floats: floats
                    .iter()
                    .map(|f| f.as_ref().and_then(|f| (!f.is_null(i)).then(|| f.value(i))))
                    .collect(),
            });
        }
    }
    Ok(out)
}

/// A permutation's canonical JSON (workload_dim's `permutation`) in a few words,
/// `streams=4,protocol=UDP`; empty when it is not an object or has no values.
fn describe_permutation(canonical: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(canonical) {
        Ok(serde_json::Value::Object(map)) if !map.is_empty() => {
            perfsweep_benchmarks::results::describe_permutation(&map)
        }
        _ => String::new(),
    }
}

/// A case as a person reads it: its permutation with the digest to look it up by,
/// `streams=4 (case 1a2b3c4d5e)`; the digest alone without a permutation.
fn named_case(permutation: &str, case_key: &str) -> String {
    if permutation.is_empty() {
        case_key.to_owned()
    } else {
        format!("{permutation} (case {case_key})")
    }
}

/// The report as text, one section per step of the pivot.
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "what changed from run {} to run {} (worse by more than {}%)\n",
        report.baseline, report.candidate, report.threshold_percent
    );
    if report.slower_cases.is_empty() {
        out.push_str("\nno case got worse\n");
        return out;
    }
    out.push_str("\n1. cases that got worse\n");
    for s in &report.slower_cases {
        out.push_str(&format!(
            "   {} {} {}: {:.4} -> {:.4} ({:.1}% worse)\n",
            s.kind,
            named_case(&s.permutation, &s.case_key),
            s.metric,
            s.baseline,
            s.candidate,
            s.worse_percent
        ));
    }
    out.push_str("\n2. affected workload points\n");
    if report.points.is_empty() {
        out.push_str("   (no per-point facts for these cases)\n");
    }
    for p in &report.points {
        out.push_str(&format!(
            "   {} {} {}: {:.4} -> {:.4} ({:.1}% worse)\n",
            named_case(&p.permutation, &p.case_key),
            p.point,
            p.metric,
            p.baseline,
            p.candidate,
            p.worse_percent
        ));
    }
    out.push_str("\n3. abnormal nodes\n");
    if report.abnormal_nodes.is_empty() {
        out.push_str("   (none stands out in per-node results or telemetry)\n");
    }
    for n in &report.abnormal_nodes {
        out.push_str(&format!("   {}: {}\n", n.node, n.finding));
    }
    out.push_str("\n4. raw evidence of the worse runs\n");
    for e in &report.evidence {
        out.push_str(&format!(
            "   {} record {} evidence {}\n",
            e.name,
            e.record_path,
            if e.evidence_paths.is_empty() {
                "(none)"
            } else {
                &e.evidence_paths
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_named_by_their_permutation_and_digest() {
        let permutation = describe_permutation(r#"{"placement.server.nodes":["a"],"streams":4}"#);
        assert_eq!(permutation, "placement.server.nodes=[\"a\"],streams=4");
        assert_eq!(named_case("streams=4", "1a2b"), "streams=4 (case 1a2b)");
        assert_eq!(named_case(&describe_permutation("{}"), "1a2b"), "1a2b");
        let report = Report {
            baseline: "r1".into(),
            candidate: "r2".into(),
            threshold_percent: 5.0,
            slower_cases: vec![CaseChange {
                case_key: "1a2b".into(),
                permutation: "streams=4".into(),
                kind: "IPerf".into(),
                metric: "received_bits_per_second".into(),
                baseline: 10.0,
                candidate: 8.0,
                worse_percent: 20.0,
            }],
            ..Report::default()
        };
        assert!(
            render(&report).contains("IPerf streams=4 (case 1a2b) received_bits_per_second"),
            "{}",
            render(&report)
        );
    }

    #[test]
    fn telemetry_moves_by_a_factor_or_by_percent_points() {
        // A node that ran out of CPU headroom (measured: 69 % to 99 % beside stress-ng).
        assert!(telemetry_moved("cpu_utilization_percent", 69.0, 99.0));
        assert!(!telemetry_moved("cpu_utilization_percent", 69.0, 80.0));
        // Half the network traffic: a factor of two either way.
        assert!(telemetry_moved(
            "network_receive_bytes_per_second",
            2.2e9,
            1.0e9
        ));
        assert!(telemetry_moved(
            "network_receive_bytes_per_second",
            1.0e9,
            2.2e9
        ));
        // Bytes are not points: 30 bytes/s more is nothing.
        assert!(!telemetry_moved(
            "disk_read_bytes_per_second",
            1000.0,
            1030.0
        ));
        // Nothing before, something now: only a percentage can say it moved.
        assert!(!telemetry_moved("disk_read_bytes_per_second", 0.0, 5e5));
        assert!(telemetry_moved("gpu_utilization_percent", 0.0, 90.0));
    }
}
