//! YAML reading and writing, multi-document aware.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Debug, thiserror::Error)]
pub enum YamlError {
    #[error("invalid YAML: {0}")]
    Parse(String),
    #[error("cannot write YAML: {0}")]
    Write(String),
}

/// Every document in `text`, skipping empty ones (a leading or trailing `---`).
pub fn documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| YamlError::Parse(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// One document of type `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str(text).map_err(|e| YamlError::Parse(e.to_string()))
}

pub fn to_string<T: Serialize>(value: &T) -> Result<String, YamlError> {
    serde_saphyr::to_string(value).map_err(|e| YamlError::Write(e.to_string()))
}

/// Documents joined with `---` separators, as `kubectl apply -f` reads them.
pub fn to_multi_document<T: Serialize>(values: &[T]) -> Result<String, YamlError> {
    let mut out = String::new();
    for value in values {
        out.push_str("---\n");
        out.push_str(&to_string(value)?);
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
