//! Rows to Arrow record batches and Parquet bytes, checked against the table's
//! declaration: a row with an unknown column, a wrong type, or a null in a required
//! column is an error naming the table and column.

use std::sync::Arc;

use datafusion::arrow::array::{
    ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder,
    TimestampMicrosecondBuilder,
};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::metadata::KeyValue;
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::parquet::schema::types::ColumnPath;

use crate::error::{Error, Result};
use crate::row::{Cell, Row};
use crate::schema::{ColumnType, SCHEMA_VERSION, SCHEMA_VERSION_KEY, TABLE_KEY, Table};

/// The rows as one batch of `table`'s file schema.
pub fn to_batch(table: Table, rows: &[Row]) -> Result<RecordBatch> {
    let declared = table.columns();
    for row in rows {
        if let Some(unknown) = row
            .columns()
            .find(|name| !declared.iter().any(|c| c.name == *name))
        {
            return Err(Error::Schema {
                table: table.name(),
                message: format!("a row sets column {unknown}, which the table does not have"),
            });
        }
    }
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(declared.len());
    for column in declared {
        let wrong = |cell: &Cell| Error::Schema {
            table: table.name(),
            message: format!(
                "column {} is {:?}{}, a row holds {cell:?}",
                column.name,
                column.ty,
                if column.nullable { "" } else { " NOT NULL" }
            ),
        };
        let check_null = |cell: &Cell| {
            if column.nullable {
                Ok(())
            } else {
                Err(wrong(cell))
            }
        };
        let array: ArrayRef = match column.ty {
            ColumnType::Text => {
                let mut builder = StringBuilder::with_capacity(rows.len(), rows.len() * 16);
                for row in rows {
                    match row.get(column.name) {
                        Cell::Text(text) => builder.append_value(text),
                        Cell::Null => {
                            check_null(&Cell::Null)?;
                            builder.append_null();
                        }
                        other => return Err(wrong(other)),
                    }
                }
                Arc::new(builder.finish())
            }
            ColumnType::Int => {
                let mut builder = Int64Builder::with_capacity(rows.len());
                for row in rows {
                    match row.get(column.name) {
                        Cell::Int(value) => builder.append_value(*value),
                        Cell::Null => {
                            check_null(&Cell::Null)?;
                            builder.append_null();
                        }
                        other => return Err(wrong(other)),
                    }
                }
                Arc::new(builder.finish())
            }
            ColumnType::Float => {
                let mut builder = Float64Builder::with_capacity(rows.len());
                for row in rows {
                    match row.get(column.name) {
                        Cell::Float(value) => builder.append_value(*value),
                        Cell::Null => {
                            check_null(&Cell::Null)?;
                            builder.append_null();
                        }
                        other => return Err(wrong(other)),
                    }
                }
                Arc::new(builder.finish())
            }
            ColumnType::Bool => {
                let mut builder = BooleanBuilder::with_capacity(rows.len());
                for row in rows {
                    match row.get(column.name) {
                        Cell::Bool(value) => builder.append_value(*value),
                        Cell::Null => {
                            check_null(&Cell::Null)?;
                            builder.append_null();
                        }
                        other => return Err(wrong(other)),
                    }
                }
                Arc::new(builder.finish())
            }
            ColumnType::Timestamp => {
                let mut builder =
                    TimestampMicrosecondBuilder::with_capacity(rows.len()).with_timezone("UTC");
                for row in rows {
                    match row.get(column.name) {
                        Cell::Timestamp(value) => builder.append_value(*value),
                        Cell::Null => {
                            check_null(&Cell::Null)?;
                            builder.append_null();
                        }
                        other => return Err(wrong(other)),
                    }
                }
                Arc::new(builder.finish())
            }
        };
        arrays.push(array);
    }
    RecordBatch::try_new(table.file_schema(), arrays).map_err(|e| Error::Schema {
        table: table.name(),
        message: e.to_string(),
    })
}

/// Writer settings of every warehouse file: ZSTD (DataFusion's Parquet brings the codec
/// anyway; files are ~4x smaller than uncompressed), the schema version and table name
/// in the key-value metadata, and a bloom filter on `run_key` where the table has one:
/// keys are digests, so row groups' min/max statistics cannot prune a lookup by key and
/// the filter can (DataFusion and DuckDB both read it).
pub fn writer_properties(table: &str) -> WriterProperties {
    let has_run_key =
        Table::by_name(table).is_some_and(|t| t.columns().iter().any(|c| c.name == "run_key"));
    WriterProperties::builder()
        .set_column_bloom_filter_enabled(ColumnPath::from("run_key"), has_run_key)
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_key_value_metadata(Some(vec![
            KeyValue::new(SCHEMA_VERSION_KEY.to_owned(), SCHEMA_VERSION.to_owned()),
            KeyValue::new(TABLE_KEY.to_owned(), table.to_owned()),
        ]))
        .build()
}

/// Batches as one Parquet file's bytes.
pub fn parquet_bytes(table: &str, batches: &[RecordBatch]) -> Result<Vec<u8>> {
    let Some(first) = batches.first() else {
        return Err(Error::Schema {
            table: "parquet",
            message: format!("no batch to write for {table}"),
        });
    };
    let parquet = |e: datafusion::parquet::errors::ParquetError| Error::Parquet {
        path: table.to_owned(),
        message: e.to_string(),
    };
    let mut writer =
        ArrowWriter::try_new(Vec::new(), first.schema(), Some(writer_properties(table)))
            .map_err(parquet)?;
    for batch in batches {
        writer.write(batch).map_err(parquet)?;
    }
    writer.into_inner().map_err(parquet)
}

#[cfg(test)]
mod tests {
    use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    #[test]
    fn rows_are_checked_against_the_declaration() {
        let table = Table::SoftwareVersionDim;
        let good = Row::new()
            .with("software_version_digest", "d")
            .with("perfsweep_version", "0.1.0")
            .with("tool_versions", "{}")
            .with("image_digests", "{}");
        let batch = to_batch(table, std::slice::from_ref(&good)).expect("a valid row");
        assert_eq!(batch.num_rows(), 1);
        assert_eq!(batch.num_columns(), table.columns().len());

        let unknown = good.clone().with("colour", "blue");
        let error = to_batch(table, &[unknown]).expect_err("unknown column");
        assert!(error.to_string().contains("colour"), "{error}");

        let missing = good.clone().with("perfsweep_version", None::<String>);
        let error = to_batch(table, &[missing]).expect_err("null in a required column");
        assert!(error.to_string().contains("perfsweep_version"), "{error}");

        let retyped = good.with("perfsweep_version", 1_i64);
        assert!(to_batch(table, &[retyped]).is_err());
    }

    #[test]
    fn files_carry_the_schema_version_and_table() {
        let table = Table::SoftwareVersionDim;
        let row = Row::new()
            .with("software_version_digest", "d")
            .with("perfsweep_version", "0.1.0")
            .with("tool_versions", "{}")
            .with("image_digests", "{}");
        let batch = to_batch(table, &[row]).expect("batch");
        let bytes = parquet_bytes(table.name(), &[batch]).expect("parquet");
        let reader = SerializedFileReader::new(bytes::Bytes::from(bytes)).expect("a readable file");
        let metadata = reader.metadata().file_metadata();
        let value = |key: &str| {
            metadata
                .key_value_metadata()
                .into_iter()
                .flatten()
                .find(|kv| kv.key == key)
                .and_then(|kv| kv.value.clone())
        };
        assert_eq!(value(SCHEMA_VERSION_KEY).as_deref(), Some(SCHEMA_VERSION));
        assert_eq!(value(TABLE_KEY).as_deref(), Some(table.name()));
        assert_eq!(metadata.num_rows(), 1);
    }
}
