//! The exported forms of result records: JSON Lines (the complete records, one per line)
//! and Parquet (a flat, long-format table for query engines: one row per run and metric,
//! like `perfsweep results export`'s CSV).

use std::sync::Arc;

use anyhow::Context;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int32Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use perfsweep_benchmarks::results::record::{RecordOutcome, ResultRecord};

/// Every record as one line of compact JSON.
pub fn json_lines(records: &[ResultRecord]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    for record in records {
        serde_json::to_writer(&mut out, record).context("cannot serialize a result record")?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The Parquet schema: strings are UTF-8 byte arrays; what a record may lack is
/// OPTIONAL. A run without metrics (e.g. a failed one) is one row with no metric.
const SCHEMA: &str = "
message perfsweep_result {
  REQUIRED BYTE_ARRAY run_id (UTF8);
  REQUIRED BYTE_ARRAY kind (UTF8);
  REQUIRED BYTE_ARRAY name (UTF8);
  OPTIONAL BYTE_ARRAY set (UTF8);
  OPTIONAL BYTE_ARRAY case_id (UTF8);
  OPTIONAL INT32 repetition;
  REQUIRED BYTE_ARRAY workload_spec_digest (UTF8);
  REQUIRED BYTE_ARRAY status (UTF8);
  REQUIRED BYTE_ARRAY summary (UTF8);
  REQUIRED BYTE_ARRAY started_at (UTF8);
  REQUIRED BYTE_ARRAY finished_at (UTF8);
  OPTIONAL BYTE_ARRAY evidence_sha256 (UTF8);
  OPTIONAL BYTE_ARRAY metric (UTF8);
  OPTIONAL DOUBLE value;
  OPTIONAL BYTE_ARRAY better (UTF8);
}
";

/// One Parquet row.
struct Row<'a> {
    record: &'a ResultRecord,
    metric: Option<perfsweep_benchmarks::judging::metrics::Metric>,
}

/// The records as a Parquet file (uncompressed: the crate is built without codecs to
/// keep the build lean; the files are small).
pub fn parquet(records: &[ResultRecord]) -> anyhow::Result<Vec<u8>> {
    let mut rows = Vec::new();
    for record in records {
        let metrics = record.metrics();
        if metrics.is_empty() {
            rows.push(Row {
                record,
                metric: None,
            });
        }
        rows.extend(metrics.into_iter().map(|metric| Row {
            record,
            metric: Some(metric),
        }));
    }
    let schema = Arc::new(parse_message_type(SCHEMA).context("the Parquet schema")?);
    let properties = Arc::new(WriterProperties::builder().build());
    let mut writer = SerializedFileWriter::new(Vec::new(), schema, properties)
        .context("cannot start a Parquet file")?;
    let mut group = writer.next_row_group().context("Parquet row group")?;
    let mut column = 0;
    while let Some(mut writer) = group.next_column().context("Parquet column")? {
        match column {
            0 => strings(&mut writer, &rows, |r| Some(r.record.run_id.clone()))?,
            1 => strings(&mut writer, &rows, |r| {
                Some(r.record.benchmark.kind.clone())
            })?,
            2 => strings(&mut writer, &rows, |r| {
                Some(r.record.benchmark.name.clone())
            })?,
            3 => strings(&mut writer, &rows, |r| r.record.benchmark.set.clone())?,
            4 => strings(&mut writer, &rows, |r| {
                r.record.benchmark.benchmark_case_id.clone()
            })?,
            5 => {
                let (values, levels) = optional(&rows, |r| {
                    r.record
                        .benchmark
                        .repetition
                        .and_then(|n| i32::try_from(n).ok())
                });
                writer
                    .typed::<Int32Type>()
                    .write_batch(&values, Some(&levels), None)
                    .context("Parquet column repetition")?;
            }
            6 => strings(&mut writer, &rows, |r| {
                Some(r.record.workload_spec_digest.clone())
            })?,
            7 => strings(&mut writer, &rows, |r| {
                Some(
                    if r.record.succeeded() {
                        "succeeded"
                    } else {
                        "failed"
                    }
                    .into(),
                )
            })?,
            8 => strings(&mut writer, &rows, |r| {
                Some(match &r.record.outcome {
                    RecordOutcome::Succeeded { summary, .. } => summary.clone(),
                    RecordOutcome::Failed { reason, message } => format!("{reason}: {message}"),
                })
            })?,
            9 => strings(&mut writer, &rows, |r| Some(r.record.started_at.clone()))?,
            10 => strings(&mut writer, &rows, |r| Some(r.record.finished_at.clone()))?,
            11 => strings(&mut writer, &rows, |r| {
                r.record.evidence.as_ref().map(|e| e.sha256.clone())
            })?,
            12 => strings(&mut writer, &rows, |r| {
                r.metric.as_ref().map(|m| m.name.clone())
            })?,
            13 => {
                let (values, levels) = optional(&rows, |r| r.metric.as_ref().map(|m| m.value));
                writer
                    .typed::<DoubleType>()
                    .write_batch(&values, Some(&levels), None)
                    .context("Parquet column value")?;
            }
            14 => strings(&mut writer, &rows, |r| {
                r.metric.as_ref().map(|m| m.better.as_str().to_owned())
            })?,
            other => anyhow::bail!("Parquet schema has an unexpected column {other}"),
        }
        writer.close().context("Parquet column")?;
        column += 1;
    }
    group.close().context("Parquet row group")?;
    writer
        .into_inner()
        .context("cannot finish the Parquet file")
}

/// Values and definition levels (1 = present, 0 = null) of an optional column. Levels
/// are passed for required columns too: the writer ignores them there.
fn optional<T>(rows: &[Row<'_>], value: impl Fn(&Row<'_>) -> Option<T>) -> (Vec<T>, Vec<i16>) {
    let mut values = Vec::with_capacity(rows.len());
    let mut levels = Vec::with_capacity(rows.len());
    for row in rows {
        match value(row) {
            Some(v) => {
                values.push(v);
                levels.push(1);
            }
            None => levels.push(0),
        }
    }
    (values, levels)
}

fn strings(
    writer: &mut parquet::file::writer::SerializedColumnWriter<'_>,
    rows: &[Row<'_>],
    value: impl Fn(&Row<'_>) -> Option<String>,
) -> anyhow::Result<()> {
    let (values, levels) = optional(rows, |r| value(r).map(|s| ByteArray::from(s.into_bytes())));
    writer
        .typed::<ByteArrayType>()
        .write_batch(&values, Some(&levels), None)
        .context("Parquet string column")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;

    use super::*;

    fn record(name: &str, outcome: RecordOutcome) -> ResultRecord {
        serde_json::from_value(serde_json::json!({
            "schemaVersion": "perfsweep.io/result/v1alpha1",
            "runId": "r1",
            "benchmark": {"kind": "IPerf", "name": name, "set": "s", "repetition": 2},
            "workloadSpecDigest": "d",
            "spec": {},
            "backend": "local",
            "environment": {"hosts": [], "perfsweepVersion": "0", "command": []},
            "startedAt": "a",
            "finishedAt": "b",
            "outcome": serde_json::to_value(outcome).expect("outcome"),
        }))
        .expect("record")
    }

    #[test]
    fn parquet_has_one_row_per_metric_and_one_for_a_run_without_metrics() {
        let succeeded = record(
            "ok",
            RecordOutcome::Succeeded {
                summary: "1 Gbit/s".into(),
                result: serde_json::json!({}),
                metrics: vec![
                    perfsweep_benchmarks::judging::metrics::Metric {
                        name: "received_bits_per_second".into(),
                        value: 1e9,
                        better: perfsweep_benchmarks::judging::metrics::Better::Higher,
                    },
                    perfsweep_benchmarks::judging::metrics::Metric {
                        name: "retransmits".into(),
                        value: 3.0,
                        better: perfsweep_benchmarks::judging::metrics::Better::Lower,
                    },
                ],
            },
        );
        let failed = record(
            "bad",
            RecordOutcome::Failed {
                reason: "Timeout".into(),
                message: "no answer".into(),
            },
        );
        let bytes = parquet(&[succeeded.clone(), failed]).expect("parquet");
        assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).expect("readable");
        assert_eq!(reader.metadata().file_metadata().num_rows(), 3);
        let rows: Vec<_> = reader
            .get_row_iter(None)
            .expect("rows")
            .map(|r| r.expect("row"))
            .collect();
        let field = |row: usize, name: &str| {
            rows[row]
                .get_column_iter()
                .find(|(n, _)| n.as_str() == name)
                .map(|(_, f)| f.clone())
                .expect("column")
        };
        assert_eq!(
            field(0, "metric"),
            Field::Str("received_bits_per_second".into())
        );
        assert_eq!(field(0, "value"), Field::Double(1e9));
        assert_eq!(field(0, "repetition"), Field::Int(2));
        assert_eq!(field(2, "status"), Field::Str("failed".into()));
        assert_eq!(field(2, "summary"), Field::Str("Timeout: no answer".into()));
        assert_eq!(field(2, "metric"), Field::Null);

        let lines = json_lines(std::slice::from_ref(&succeeded)).expect("jsonl");
        let text = String::from_utf8(lines).expect("utf-8");
        assert_eq!(text.lines().count(), 1);
        let back: ResultRecord = serde_json::from_str(text.trim_end()).expect("a record");
        assert_eq!(back, succeeded);
    }
}
