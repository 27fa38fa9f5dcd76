//! perfsweep's performance warehouse: curated Parquet tables derived from result records
//! (facts partitioned by kind and date, dimensions deduplicated by content digest), SQL
//! over them with an embedded DataFusion, published numbers that walk back to the raw
//! evidence, the "what changed?" pivot and retention. docs/warehouse.md describes the
//! tables and the layout.

pub mod batch;
pub mod build;
pub mod changed;
pub mod derive;
pub mod duckdb;
pub mod engine;
pub mod error;
pub mod layout;
pub mod output;
pub mod prometheus;
pub mod publish;
pub mod retention;
pub mod row;
pub mod schema;
pub mod source;
pub mod synth;
pub mod views;

pub use engine::Warehouse;
pub use error::{Error, Result};
