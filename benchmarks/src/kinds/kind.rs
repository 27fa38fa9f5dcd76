//! The trait a benchmark kind implements: what it tells the generic machinery (the
//! registry, validation, planning and parsing) about itself. Kinds depend on this module
//! only; the registry ([`crate::kinds::registry`]) lists them and erases their types, so
//! the kinds never depend on the registry that names them.

use std::fmt::Debug;

use kube::{CustomResourceExt, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::validation::FieldError;
use crate::execution::parse_error::ParseError;
use crate::execution::plan::{Plan, PlanError};
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

/// What a benchmark kind tells the generic machinery about itself.
pub trait BenchmarkKind:
    Resource<DynamicType = ()> + CustomResourceExt + Serialize + DeserializeOwned + Clone + Debug
{
    type Spec: Serialize + DeserializeOwned + Clone + Debug + PartialEq;
    /// The structured result, parsed from the tool's output.
    type Output: Serialize;

    /// The roles this kind's pods play (for example `server` and `client`); `placement`
    /// keys must be one of these.
    const ROLES: &'static [&'static str];

    /// The roles a node pair pins, the first to the pair's first node: empty for the
    /// first two of [`Self::ROLES`] (a server and its client). The same role twice pins
    /// that role's first two replicas, one to each node (an MPI job's two workers,
    /// whose launcher only starts them).
    const PAIR_ROLES: &'static [&'static str] = &[];

    /// The name `perfsweep parse` knows the kind by, e.g. `rdma-bandwidth`.
    const PARSE_NAME: &'static str;

    /// The image (under [`crate::kinds::registry::IMAGE_REGISTRY`]) the kind's pods run
    /// unless `spec.image` is set.
    const IMAGE: &'static str;

    fn common(spec: &Self::Spec) -> &CommonSpec;

    /// Cross-field checks that neither the schema nor a CEL rule can express.
    fn check(_spec: &Self::Spec) -> Vec<FieldError> {
        Vec::new()
    }

    /// How a benchmark with this spec runs.
    fn plan(_spec: &Self::Spec) -> Result<Plan, PlanError> {
        Err(PlanError::NotImplemented {
            kind: Self::kind(&()).into_owned(),
        })
    }

    /// Parses the result role's raw output.
    fn parse(raw: &str) -> Result<Self::Output, ParseError>;

    /// Merges the results of the result role's replicas (every replica of the result
    /// role produces a result when there are several, as distributed load generators
    /// do) into the benchmark's result. Kinds whose result role has one replica never
    /// merge.
    fn merge(outputs: Vec<Self::Output>) -> Result<Self::Output, ParseError> {
        let _ = outputs;
        Err(ParseError::Unmergeable(format!(
            "{} cannot merge the results of several processes",
            Self::kind(&())
        )))
    }

    /// The result in a few words, for status and tables.
    fn headline(output: &Self::Output) -> String;

    /// Every metric this kind can report (units in the names); the first one a result
    /// has is its headline metric. See [`crate::judging::metrics`].
    const METRICS: &'static [MetricDef] = &[];

    /// Result members (camelCase names, at any depth) that may hold negative numbers;
    /// every other number in a result must be non-negative (see `check_plausible`).
    const SIGNED_FIELDS: &'static [&'static str] = &[];

    /// Whether the kind's tool prints progress lines ([`crate::execution::progress`])
    /// worth reading into `status.progress` while it runs.
    const REPORTS_PROGRESS: bool = false;

    /// The result as named numbers, drawn from [`BenchmarkKind::METRICS`], headline first.
    fn metrics(_output: &Self::Output) -> Vec<Metric> {
        Vec::new()
    }
}
