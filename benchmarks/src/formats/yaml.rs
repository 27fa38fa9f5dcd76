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

/// The parser's error in the user's terms. A duplicate key is said plainly, with its
/// place (the parser's own text suggests a library option the user cannot set).
fn describe(error: &serde_saphyr::Error) -> String {
    match error.without_snippet() {
        serde_saphyr::Error::DuplicateMappingKey { key, location } => format!(
            "duplicate key {} at line {}, column {}: a key may appear only once in a mapping",
            key.as_deref()
                .map_or_else(|| "in a mapping".to_owned(), |k| format!("`{k}`")),
            location.line(),
            location.column()
        ),
        _ => error.to_string(),
    }
}

/// Every document in `text`, skipping empty ones (a leading or trailing `---`).
pub fn documents(text: &str) -> Result<Vec<Value>, YamlError> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| YamlError::Parse(describe(&e)))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// One document of type `T`.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, YamlError> {
    serde_saphyr::from_str(text).map_err(|e| YamlError::Parse(describe(&e)))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 10 of issue 18: a duplicate key said "set DuplicateKeyPolicy in Options
    /// if acceptable".
    #[test]
    fn duplicate_keys_are_named_with_their_line() {
        let text = "kind: IPerf\nspec:\n  duration: 5\n  duration: 6\n";
        let error = documents(text).unwrap_err().to_string();
        assert_eq!(
            error,
            "invalid YAML: duplicate key `duration` at line 4, column 3: a key may appear only once in a mapping"
        );
        let error = from_str::<Value>(text).unwrap_err().to_string();
        assert!(
            error.contains("duplicate key `duration` at line 4"),
            "{error}"
        );
        assert!(!error.contains("DuplicateKeyPolicy"), "{error}");
    }
}
