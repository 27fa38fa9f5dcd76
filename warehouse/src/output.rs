//! A query's answer as a table, CSV or JSON (an array of objects).

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    #[default]
    Table,
    Csv,
    Json,
}

fn arrow_error(format: &str) -> impl FnOnce(datafusion::arrow::error::ArrowError) -> Error + '_ {
    move |e| Error::Query {
        context: format!("writing {format}"),
        message: e.to_string(),
    }
}

pub fn render(batches: &[RecordBatch], format: Format) -> Result<Vec<u8>> {
    match format {
        Format::Table => {
            let table = datafusion::arrow::util::pretty::pretty_format_batches(batches)
                .map_err(arrow_error("a table"))?;
            Ok(format!("{table}\n").into_bytes())
        }
        Format::Csv => {
            let mut out = Vec::new();
            {
                let mut writer = datafusion::arrow::csv::WriterBuilder::new()
                    .with_header(true)
                    .build(&mut out);
                for batch in batches {
                    writer.write(batch).map_err(arrow_error("CSV"))?;
                }
            }
            Ok(out)
        }
        Format::Json => {
            let mut writer = datafusion::arrow::json::ArrayWriter::new(Vec::new());
            let refs: Vec<&RecordBatch> = batches.iter().collect();
            writer.write_batches(&refs).map_err(arrow_error("JSON"))?;
            writer.finish().map_err(arrow_error("JSON"))?;
            let mut out = writer.into_inner();
            // An empty answer is an empty array, not an empty document.
            if out.is_empty() {
                out.extend_from_slice(b"[]");
            }
            out.push(b'\n');
            Ok(out)
        }
    }
}

/// The answer as rows of JSON values in column order (nulls included), to compare with
/// another engine's.
pub fn json_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<serde_json::Value>>> {
    let mut rows = Vec::new();
    for batch in batches {
        let mut writer = datafusion::arrow::json::WriterBuilder::new()
            .with_explicit_nulls(true)
            .build::<_, datafusion::arrow::json::writer::JsonArray>(Vec::new());
        writer.write(batch).map_err(arrow_error("JSON"))?;
        writer.finish().map_err(arrow_error("JSON"))?;
        let bytes = writer.into_inner();
        if bytes.is_empty() {
            continue;
        }
        let objects: Vec<serde_json::Map<String, serde_json::Value>> =
            serde_json::from_slice(&bytes).map_err(|e| Error::Query {
                context: "reading the JSON answer back".into(),
                message: e.to_string(),
            })?;
        let schema = batch.schema();
        for object in objects {
            rows.push(
                schema
                    .fields()
                    .iter()
                    .map(|f| object.get(f.name()).cloned().unwrap_or_default())
                    .collect(),
            );
        }
    }
    Ok(rows)
}
