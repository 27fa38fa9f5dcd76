//! Validate and build: a benchmark's spec checked as admission would, its plan, and the
//! objects it runs as. Pure: no request.

use std::time::Duration;

use kube::ResourceExt;
use perfsweep_benchmarks::execution::plan::process_name;
use perfsweep_benchmarks::kinds::common::CommonSpec;
use perfsweep_benchmarks::outcome::{Failure, Reason};
use perfsweep_benchmarks::render::{self, BenchmarkRef, RenderError, Rendered};
use serde_json::Value;

use super::kind::Benchmark;
use super::target::Target;

/// What a benchmark of this spec runs as.
pub(super) struct Prepared {
    pub(super) rendered: Rendered,
    /// Names of the pods, in plan order.
    pub(super) pods: Vec<String>,
    pub(super) result_role: String,
    pub(super) result_pod: String,
    /// The other replicas of the result role, whose results merge with the result
    /// pod's (distributed load generators); usually none.
    pub(super) result_siblings: Vec<String>,
    pub(super) timeout: Duration,
    /// The spec (installation defaults applied), for the acceptance criteria.
    pub(super) spec: Value,
}

/// Validate and build: the spec checked as admission would, its plan, its objects.
pub(super) fn prepare<K: Benchmark>(benchmark: &K, target: &Target) -> Result<Prepared, Failure> {
    let mut object = serde_json::to_value(benchmark).map_err(|e| {
        Failure::new(
            Reason::InvalidSpec,
            format!("the object cannot be read: {e}"),
        )
    })?;
    if let Some(spec) = object.get_mut("spec") {
        target
            .defaults
            .apply(spec, |registry| target.info.image_in(registry));
    }
    let errors = target.info.validate(&object);
    if !errors.is_empty() {
        let message = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Failure::new(Reason::InvalidSpec, message));
    }
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let timeout = serde_json::from_value::<CommonSpec>(spec.clone())
        .map_err(|e| Failure::new(Reason::InvalidSpec, format!("spec: {e}")))?
        .timeout()
        .map_err(|e| Failure::new(Reason::InvalidSpec, format!("spec.timeout: {e}")))?;
    let plan = target
        .info
        .plan(&spec)
        .map_err(|error| Failure::of_plan(&error))?;
    let reference = BenchmarkRef {
        kind: target.info.kind.to_owned(),
        name: target.name.clone(),
        namespace: target.namespace.clone(),
        uid: target.uid.clone(),
    };
    let rendered = render::render(&reference, &spec, &plan).map_err(|error| match error {
        RenderError::Unsupported(_) => Failure::new(Reason::Unsupported, error.to_string()),
        RenderError::Invalid { .. } => Failure::new(Reason::InvalidSpec, error.to_string()),
    })?;
    let rendered = match &target.covering_set {
        Some(set_uid) => rendered.covered_by_set(set_uid),
        None => rendered,
    };
    let rendered = match &target.token_source {
        Some(source) => rendered.with_token_source(source),
        None => rendered,
    };
    let pods: Vec<String> = rendered.pods.iter().map(ResourceExt::name_any).collect();
    let result_pod = format!("{}-{}", target.name, process_name(&plan.result_role, 0));
    if !pods.contains(&result_pod) {
        return Err(Failure::new(
            Reason::Unsupported,
            format!(
                "the rendered pods ({}) lack the result pod {result_pod}",
                pods.join(", ")
            ),
        ));
    }
    let result_replicas = plan.role(&plan.result_role).map_or(1, |r| r.replicas);
    let result_siblings = (1..result_replicas)
        .map(|index| format!("{}-{}", target.name, process_name(&plan.result_role, index)))
        .collect();
    Ok(Prepared {
        rendered,
        pods,
        result_role: plan.result_role,
        result_pod,
        result_siblings,
        timeout,
        spec,
    })
}
