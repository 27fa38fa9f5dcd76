//! What can go wrong, each naming what it was working on.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Source { path: String, message: String },
    #[error("table {table}: {message}")]
    Schema {
        table: &'static str,
        message: String,
    },
    #[error("Parquet {path}: {message}")]
    Parquet { path: String, message: String },
    #[error("{context}: {message}")]
    Query { context: String, message: String },
    #[error("lineage broken at {step}: {message}")]
    Lineage { step: String, message: String },
    #[error("publication {name}: {message}")]
    Publication { name: String, message: String },
    #[error("{0}")]
    Invalid(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    pub fn query(
        context: impl Into<String>,
    ) -> impl FnOnce(datafusion::error::DataFusionError) -> Error {
        let context = context.into();
        move |e| Error::Query {
            context,
            message: e.to_string(),
        }
    }
}
