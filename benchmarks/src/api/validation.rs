//! Validation errors that name the field at fault.

use std::fmt;

/// One thing wrong with a spec, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// A path such as `spec.streams` or `spec.permutations.product.streams[2]`.
    pub path: String,
    pub message: String,
}

impl FieldError {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Joins a parent path and a field name the way Kubernetes prints field paths.
pub fn join(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_owned()
    } else {
        format!("{parent}.{field}")
    }
}
