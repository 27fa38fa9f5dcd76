//! The embedded SQL engine: DataFusion over the location's Parquet files, every table
//! and saved view registered under its name.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::execution::context::SQLOptions;
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};

use crate::error::{Error, Result};
use crate::schema::{PARTITION_COLUMNS, Table};

pub struct Warehouse {
    root: PathBuf,
    ctx: SessionContext,
}

impl Warehouse {
    /// The warehouse at `root` (a local directory): every table, an empty one where no
    /// file exists yet, and the saved views.
    pub async fn open(root: &Path) -> Result<Self> {
        let config = SessionConfig::new()
            .with_information_schema(true)
            // Strings as plain Utf8 in and out, the type the files are written with, so
            // that results, rollups and the empty tables agree on one string type.
            .set_bool(
                "datafusion.execution.parquet.schema_force_view_types",
                false,
            )
            .set_bool("datafusion.sql_parser.map_string_types_to_utf8view", false)
            // Joins hash-partitioned on both sides, never one side collected into a
            // single build: a fact joined through its dimensions carries all its rows
            // into each next join, and collecting 100,000 of them into one table made
            // the join through all dimensions 1.2-1.9x DuckDB's time in a release
            // build (0.8-1.3x partitioned; docs/warehouse.md#bench-100000-runs).
            .set_usize(
                "datafusion.optimizer.hash_join_single_partition_threshold",
                0,
            )
            .set_usize(
                "datafusion.optimizer.hash_join_single_partition_threshold_rows",
                0,
            )
            // No page index reads: a fact file holds one partition's rows of one build,
            // a row group of one page per column, so the index prunes nothing and costs
            // a read and an evaluation per file (62 files for the serving trend at
            // 100,000 runs: 0.8-1.0x DuckDB's time without it, 1.0-1.65x with it; the
            // point lookup keeps its bloom filter on run_key).
            .set_bool("datafusion.execution.parquet.enable_page_index", false);
        let ctx = SessionContext::new_with_config(config);
        for table in Table::ALL {
            register(&ctx, root, table).await?;
        }
        for (name, sql) in crate::views::VIEWS {
            ctx.sql(&format!("CREATE VIEW {name} AS {sql}"))
                .await
                .map_err(Error::query(format!("saved view {name}")))?;
        }
        Ok(Self {
            root: root.to_owned(),
            ctx,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn context(&self) -> &SessionContext {
        &self.ctx
    }

    /// The answer of one SQL statement. Read-only: DDL (`CREATE EXTERNAL TABLE`), DML
    /// (`COPY … TO`, `INSERT`) and statements (`SET`) are refused, so a query can neither
    /// write into the warehouse nor read other files.
    pub async fn query(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let read_only = SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false)
            .with_allow_statements(false);
        let frame = self
            .ctx
            .sql_with_options(sql, read_only)
            .await
            .map_err(Error::query("cannot plan the query"))?;
        frame
            .collect()
            .await
            .map_err(Error::query("the query failed"))
    }

    /// One text column of a query's answer, nulls left out.
    pub async fn strings(&self, sql: &str) -> Result<Vec<String>> {
        let batches = self.query(sql).await?;
        let mut out = Vec::new();
        for batch in &batches {
            if batch.num_columns() == 0 {
                continue;
            }
            let column = text_column(batch.column(0))?;
            out.extend(column.iter().flatten().map(str::to_owned));
        }
        Ok(out)
    }
}

/// Any string-like (or other castable) column as a `StringArray`.
pub fn text_column(array: &ArrayRef) -> Result<StringArray> {
    let cast = cast(array, &DataType::Utf8).map_err(|e| Error::Query {
        context: "reading a column as text".into(),
        message: e.to_string(),
    })?;
    cast.as_any()
        .downcast_ref::<StringArray>()
        .cloned()
        .ok_or_else(|| Error::Query {
            context: "reading a column as text".into(),
            message: format!("a {} column", array.data_type()),
        })
}

/// The schema a table has when queried: the file columns, then the partition columns.
pub fn table_schema(table: Table) -> Arc<Schema> {
    let mut fields: Vec<Field> = table
        .file_schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    if table.is_fact() {
        fields.extend(
            PARTITION_COLUMNS
                .iter()
                .map(|name| Field::new(*name, DataType::Utf8, false)),
        );
    }
    Arc::new(Schema::new(fields))
}

fn has_parquet(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let path = entry.path();
        if path.is_dir() {
            has_parquet(&path)
        } else {
            path.extension().is_some_and(|e| e == "parquet")
        }
    })
}

async fn register(ctx: &SessionContext, root: &Path, table: Table) -> Result<()> {
    let dir = root.join(table.name());
    if !has_parquet(&dir) {
        // No file yet (no run of that shape loaded): an empty table of the same schema,
        // so that every saved view and query plans the same on any warehouse.
        let empty = MemTable::try_new(table_schema(table), vec![vec![]])
            .map_err(Error::query(format!("empty table {}", table.name())))?;
        ctx.register_table(table.name(), Arc::new(empty))
            .map_err(Error::query(format!("registering {}", table.name())))?;
        return Ok(());
    }
    let schema = table.file_schema();
    let partitions: Vec<(String, DataType)> = if table.is_fact() {
        PARTITION_COLUMNS
            .iter()
            .map(|name| ((*name).to_owned(), DataType::Utf8))
            .collect()
    } else {
        Vec::new()
    };
    let options = ParquetReadOptions::default()
        .schema(&schema)
        .table_partition_cols(partitions);
    let url = format!("{}/", dir.display());
    ctx.register_parquet(table.name(), &url, options)
        .await
        .map_err(Error::query(format!("registering {}", table.name())))
}
