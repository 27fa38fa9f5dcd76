//! `perfsweep results export`: one CSV row per run and metric (long format), with the
//! identifiers needed to walk a number back to its run and evidence.

use crate::results::record::{RecordOutcome, ResultRecord};

pub const HEADER: &[&str] = &[
    "run_id",
    "set",
    "benchmark_case_id",
    "kind",
    "name",
    "repetition",
    "permutation",
    "status",
    "metric",
    "value",
    "better",
    "workload_spec_digest",
    "artifact_manifest_digest",
    "network",
    "hosts",
    "started_at",
    "evidence",
];

/// The records as CSV (RFC 4180). A failed run is one row without metric.
pub fn export(records: &[ResultRecord]) -> String {
    let mut out = String::new();
    row(&mut out, HEADER.iter().map(|s| (*s).to_owned()));
    for record in records {
        let b = &record.benchmark;
        let base = |metric: &str, value: String, better: &str| {
            vec![
                record.run_id.clone(),
                b.set.clone().unwrap_or_default(),
                record.case_key(),
                b.kind.clone(),
                b.name.clone(),
                b.repetition.map(|r| r.to_string()).unwrap_or_default(),
                if b.permutation.is_empty() {
                    String::new()
                } else {
                    crate::formats::digest::canonical_json(&serde_json::Value::Object(
                        b.permutation.clone(),
                    ))
                },
                match &record.outcome {
                    RecordOutcome::Succeeded { .. } => "succeeded".to_owned(),
                    RecordOutcome::Failed { reason, .. } => format!("failed:{reason}"),
                },
                metric.to_owned(),
                value,
                better.to_owned(),
                record.workload_spec_digest.clone(),
                record.artifact_manifest_digest.clone().unwrap_or_default(),
                record.environment.network.clone().unwrap_or_default(),
                record.environment.hosts.join(" "),
                record.started_at.clone(),
                record
                    .evidence
                    .as_ref()
                    .map(|e| e.path.clone())
                    .unwrap_or_default(),
            ]
        };
        let metrics = record.metrics();
        if metrics.is_empty() {
            row(&mut out, base("", String::new(), ""));
        }
        for metric in metrics {
            row(
                &mut out,
                base(
                    &metric.name,
                    metric.value.to_string(),
                    metric.better.as_str(),
                ),
            );
        }
    }
    out
}

fn row(out: &mut String, fields: impl IntoIterator<Item = String>) {
    for (i, field) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if field.contains([',', '"', '\n', '\r']) {
            out.push('"');
            out.push_str(&field.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&field);
        }
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testing::{failed, iperf};

    #[test]
    fn one_row_per_metric_quoted() {
        let csv = export(&[iperf("r1", "a", 2, 0, 9.5e9), failed("r1", "a", 2, 1)]);
        let lines: Vec<&str> = csv.split("\r\n").filter(|l| !l.is_empty()).collect();
        assert_eq!(lines[0].split(',').count(), HEADER.len());
        // received, sent, retransmits; then the failed run's single row.
        assert_eq!(lines.len(), 1 + 3 + 1);
        assert!(lines[1].starts_with("r1,sweep,a,IPerf,sweep-a-0,0,\"{\"\"streams\"\":2}\",succeeded,received_bits_per_second,9500000000,higher,"));
        assert!(lines[4].contains(",failed:Timeout,,,,"));
    }
}
