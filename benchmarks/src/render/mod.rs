//! The Kubernetes objects a benchmark runs as: a Volcano PodGroup, a headless Service for
//! peer discovery, and one pod per process of the plan. Pure: no cluster access.
//!
//! (Interface fixed by the lead; implementation in progress.)

use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::Value;

use crate::plan::Plan;

/// The benchmark object the rendered objects belong to (and are owned by).
#[derive(Clone, Debug)]
pub struct BenchmarkRef {
    pub kind: String,
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

/// Everything one benchmark creates in the cluster.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// `None` with `scheduler: default`.
    pub pod_group: Option<crate::volcano::PodGroup>,
    pub service: Service,
    pub pods: Vec<Pod>,
}

/// Renders the objects of a benchmark of kind `benchmark.kind` with `spec` (its full
/// spec JSON, already validated) and `plan`.
pub fn render(
    _benchmark: &BenchmarkRef,
    _spec: &Value,
    _plan: &Plan,
) -> Result<Rendered, RenderError> {
    Err(RenderError::Unsupported(
        "rendering is being implemented".into(),
    ))
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RenderError {
    #[error("{0}")]
    Unsupported(String),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}
