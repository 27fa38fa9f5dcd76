//! Reading sweep and benchmark documents as a user writes them (YAML files with one or
//! more documents), checking them, and expanding sets — what `perfsweep validate` and
//! `perfsweep render` do offline and what the operator does in the cluster.

use serde_json::Value;

use crate::api::compat;
use crate::api::validation::FieldError;
use crate::kinds::registry::{self, KindInfo};
use crate::set::{self, Cases, SetError};

/// A document that passed every check.
#[derive(Debug)]
pub enum Checked {
    Set {
        name: String,
        namespace: Option<String>,
        set: Box<set::BenchmarkSet>,
        /// Checked, each child made when asked for (see [`Cases`]).
        cases: Box<Cases>,
    },
    Benchmark {
        name: String,
        kind: &'static KindInfo,
        object: Value,
    },
}

/// A checked document, and what was converted in it on the way.
#[derive(Debug)]
pub struct Document {
    pub checked: Checked,
    /// kube-perftest's group was converted.
    pub converted_group: bool,
    /// Conversions made (an OME BenchmarkJob), one line each.
    pub notes: Vec<String>,
    /// Changes the user must act on: inline credentials moved into a Secret.
    pub warnings: Vec<String>,
    /// Objects to apply with the benchmark: the Secret inline credentials moved into
    /// (never printed by validate, only by render).
    pub secrets: Vec<Value>,
}

impl Document {
    /// Every conversion message, prefixed `note:` or `warning:`, for the command line.
    pub fn conversion_messages(&self) -> Vec<String> {
        let group = self.converted_group.then(|| {
            format!(
                "note: converted apiVersion group {} to {}",
                compat::KUBE_PERFTEST_GROUP,
                crate::GROUP
            )
        });
        group
            .into_iter()
            .chain(self.notes.iter().map(|n| format!("note: {n}")))
            .chain(self.warnings.iter().map(|w| format!("warning: {w}")))
            .collect()
    }
}

/// Why a document was rejected.
#[derive(Debug, thiserror::Error)]
pub enum DocumentError {
    #[error("{}", join_errors(.0))]
    Invalid(Vec<FieldError>),
    #[error(transparent)]
    Set(#[from] SetError),
}

impl DocumentError {
    /// Every message, one per line-worthy error.
    pub fn messages(&self) -> Vec<String> {
        match self {
            Self::Invalid(errors) => errors.iter().map(ToString::to_string).collect(),
            Self::Set(SetError::InvalidChildren(errors)) => {
                errors.iter().map(ToString::to_string).collect()
            }
            Self::Set(other) => vec![other.to_string()],
        }
    }
}

fn join_errors(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A one-line description of a raw document, for messages: `BenchmarkSet iperf-cni`.
pub fn describe(document: &Value) -> String {
    let kind = document
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("<no kind>");
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("<no name>");
    format!("{kind} {name}")
}

/// Checks one document: a BenchmarkSet (expanded and every child validated) or a
/// single benchmark of any kind.
pub fn check(document: Value) -> Result<Document, DocumentError> {
    check_with_nodes(document, None)
}

/// [`check`], expanding a node-pair set over `nodes` (the nodes its selector would match;
/// offline, the caller's list stands in for the cluster's).
pub fn check_with_nodes(
    document: Value,
    nodes: Option<&[String]>,
) -> Result<Document, DocumentError> {
    let labelled: Option<set::NodeLabels> = nodes.map(|names| {
        names
            .iter()
            .map(|n| (n.clone(), std::collections::BTreeMap::new()))
            .collect()
    });
    check_on_nodes(document, labelled.as_ref())
}

/// [`check`], expanding a node-pair or each-node set over `nodes` with their labels
/// (those its selector would match; offline, the caller's list stands in for the
/// cluster's).
pub fn check_on_nodes(
    mut document: Value,
    nodes: Option<&set::NodeLabels>,
) -> Result<Document, DocumentError> {
    let converted_group = compat::convert_group(&mut document);
    let notes = crate::input::ome::convert(&mut document).unwrap_or_default();
    let moved =
        crate::execution::output::move_inline_credentials(&mut document).map_err(|message| {
            DocumentError::Invalid(vec![FieldError::new("spec.outputLocation", message)])
        })?;
    let notes: Vec<String> = notes.into_iter().chain(moved.notes).collect();
    let api_version = document
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if api_version != crate::API_VERSION {
        return Err(DocumentError::Invalid(vec![FieldError::new(
            "apiVersion",
            format!(
                "unsupported apiVersion {api_version:?}: use {}",
                crate::API_VERSION
            ),
        )]));
    }
    let kind = document
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let name = document
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| {
            DocumentError::Invalid(vec![FieldError::new("metadata.name", "required value")])
        })?;
    let namespace = document
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let checked = if kind == "BenchmarkSet" {
        let set = set::parse_object(&document).map_err(DocumentError::Invalid)?;
        let cases = set::expand::plan_on(&name, &set.spec, nodes)?;
        Checked::Set {
            name,
            namespace,
            set: Box::new(set),
            cases: Box::new(cases),
        }
    } else {
        let info = registry::lookup(&kind).ok_or_else(|| {
            DocumentError::Invalid(vec![FieldError::new(
                "kind",
                format!(
                    "unknown kind {kind:?}: expected BenchmarkSet or one of {}",
                    registry::kind_names().join(", ")
                ),
            )])
        })?;
        let errors = info.validate(&document);
        if !errors.is_empty() {
            return Err(DocumentError::Invalid(errors));
        }
        Checked::Benchmark {
            name,
            kind: info,
            object: document,
        }
    };
    Ok(Document {
        checked,
        converted_group,
        notes,
        warnings: moved.warnings,
        secrets: moved.secret.into_iter().collect(),
    })
}
