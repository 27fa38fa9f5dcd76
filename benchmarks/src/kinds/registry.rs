//! The table of benchmark kinds. Everything that treats kinds generically (validation,
//! BenchmarkSet expansion, CRD generation, the CLI) looks kinds up here, so adding a kind
//! is its module plus one line in [`kinds`].

use std::fmt::Debug;
use std::sync::OnceLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::CompiledSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use crate::kinds::kind::BenchmarkKind;

use crate::api::schema::Node;
use crate::api::validation::{FieldError, join};
use crate::execution::parse_error::ParseError;
use crate::execution::plan::{Plan, PlanError};
use crate::judging::acceptance::Criterion;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;
use crate::kinds::{fio, hpcc, iperf, llm, mpi_pingpong, openfoam, pytorch, rdma};

/// A parsed result, kind-erased.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedOutput {
    pub result: Value,
    pub summary: String,
}

/// A registered kind with its CRD and compiled validators.
pub struct KindInfo {
    pub kind: &'static str,
    pub roles: &'static [&'static str],
    /// The roles a node pair pins (see `BenchmarkKind::PAIR_ROLES`); empty: the first two.
    pub pair_roles: &'static [&'static str],
    pub crd: CustomResourceDefinition,
    schema: Node,
    cel: CompiledSchema,
    check_typed: fn(&Value) -> Vec<FieldError>,
    plan: fn(&Value) -> Result<Plan, PlanError>,
    parse: fn(&str) -> Result<ParsedOutput, ParseError>,
    merge: fn(&[Value]) -> Result<ParsedOutput, ParseError>,
    check_result: fn(&Value) -> Result<(), String>,
    pub parse_name: &'static str,
    image: &'static str,
    /// The metrics this kind reports, headline first.
    pub metric_defs: &'static [MetricDef],
    /// Its tool prints progress lines for `status.progress`.
    pub reports_progress: bool,
    metrics: fn(&Value) -> Vec<Metric>,
}

/// Where perfsweep's benchmark images are published.
pub const IMAGE_REGISTRY: &str = "ghcr.io/perfsweep";

impl Debug for KindInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindInfo")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl KindInfo {
    fn of<K: BenchmarkKind>() -> Self
    where
        K::Output: DeserializeOwned,
    {
        let crd = crate::api::crd_rules::finalize(K::crd(), K::ROLES);
        let schema_json = crate::api::crd_rules::open_api_schema(&crd);
        Self {
            kind: kind_name::<K>(),
            roles: K::ROLES,
            pair_roles: K::PAIR_ROLES,
            schema: Node::compile(&schema_json).unwrap_or_else(|e| {
                panic!("the derived schema of {} is invalid: {e}", K::kind(&()))
            }),
            cel: kube::core::cel::compile_schema(&schema_json),
            crd,
            check_typed: check_typed::<K>,
            plan: plan_of::<K>,
            parse: parse_with::<K>,
            merge: merge_with::<K>,
            check_result: check_result::<K>,
            parse_name: K::PARSE_NAME,
            image: K::IMAGE,
            metric_defs: K::METRICS,
            reports_progress: K::REPORTS_PROGRESS,
            metrics: metrics_of::<K>,
        }
    }

    /// The metrics of a structured result (`status.result` or a record's `result`) of
    /// this kind; empty when the result does not have this kind's shape.
    pub fn metrics(&self, result: &Value) -> Vec<Metric> {
        (self.metrics)(result)
    }

    /// The declaration of the metric named `name`, when this kind reports it.
    pub fn metric_def(&self, name: &str) -> Option<&'static MetricDef> {
        self.metric_defs.iter().find(|m| m.name == name)
    }

    /// The metric a fleet of this kind is judged on: the first acceptance criterion's
    /// (what the set is accepted on), else the kind's headline metric.
    pub fn judged_metric(&self, criteria: &[Criterion]) -> Option<&'static MetricDef> {
        criteria
            .iter()
            .find_map(|c| self.metric_def(&c.metric))
            .or_else(|| self.metric_defs.first())
    }

    /// The image the kind's pods run when the spec names none, tagged with this version.
    pub fn default_image(&self) -> String {
        self.image_in(IMAGE_REGISTRY)
    }

    /// The kind's image under another registry path (a mirror), tagged with this version.
    pub fn image_in(&self, registry: &str) -> String {
        format!(
            "{}/{}:{}",
            registry.trim_end_matches('/'),
            self.image,
            env!("CARGO_PKG_VERSION")
        )
    }

    /// The execution plan for a spec (which must have passed [`KindInfo::validate`]).
    pub fn plan(&self, spec: &Value) -> Result<Plan, PlanError> {
        let mut plan = (self.plan)(spec)?;
        crate::execution::output::export_into_claim(spec, &mut plan);
        Ok(plan)
    }

    /// Parses raw output of this kind's tool.
    pub fn parse(&self, raw: &str) -> Result<ParsedOutput, ParseError> {
        (self.parse)(raw)
    }

    /// Merges the structured results of the result role's replicas (in any order) into
    /// one; see [`BenchmarkKind::merge`].
    pub fn merge(&self, results: &[Value]) -> Result<ParsedOutput, ParseError> {
        (self.merge)(results)
    }

    /// Whether a reported result has this kind's shape (what `status.result` holds).
    pub fn check_result(&self, result: &Value) -> Result<(), String> {
        (self.check_result)(result)
    }

    /// The plural resource name, e.g. `iperfs`.
    pub fn plural(&self) -> &str {
        &self.crd.spec.names.plural
    }

    /// Validates a whole object (`apiVersion`, `kind`, `metadata`, `spec`) the way
    /// admission would, then with the checks only perfsweep can make. Paths start at the
    /// object's root (`spec.streams`).
    ///
    /// Every check runs, so that one round of fixes is enough: the schema's, the CEL
    /// rules (except on fields the schema already refused), and perfsweep's own — all
    /// of them when the spec reads, or else those of the acceptance criteria that read.
    pub fn validate(&self, object: &Value) -> Vec<FieldError> {
        let mut errors = self.schema.check_object_root(object);
        let schema_failed = !errors.is_empty();
        if let Err(failures) = kube::core::cel::validate_compiled(&self.cel, object, None) {
            let refused = |path: &str| {
                errors.iter().any(|e| {
                    path.starts_with(&e.path) || e.path.starts_with(path.trim_end_matches('.'))
                })
            };
            let cel: Vec<FieldError> = failures
                .iter()
                .filter(|f| !(schema_failed && refused(f.field_path.trim_start_matches('.'))))
                .map(|f| {
                    // A root rule's fieldPath comes back as written (`.metadata.name`).
                    FieldError::new(f.field_path.trim_start_matches('.'), f.message.clone())
                })
                .collect();
            errors.extend(cel);
        }
        let spec = object.get("spec").cloned().unwrap_or(Value::Null);
        let typed = if schema_failed {
            acceptance_metrics(&spec, self.metric_defs)
        } else {
            (self.check_typed)(&spec)
        };
        // One error per field: perfsweep's own checks repeat some CEL rules in words
        // of their own.
        for error in typed {
            if !errors.iter().any(|e| e.path == error.path) {
                errors.push(error);
            }
        }
        errors
    }
}

impl crate::judging::acceptance::ResultMetrics for KindInfo {
    fn result_metrics(&self, result: &Value) -> Vec<Metric> {
        self.metrics(result)
    }
}

/// The unknown-metric errors of the acceptance criteria that read on their own (the rest
/// of the spec having failed its schema).
fn acceptance_metrics(spec: &Value, metrics: &[MetricDef]) -> Vec<FieldError> {
    let Some(items) = spec.get("acceptance").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Ok(criterion) = crate::judging::acceptance::Criterion::deserialize(item) else {
            continue;
        };
        let at = format!("spec.acceptance[{index}]");
        for mut error in crate::judging::acceptance::check(&[criterion], metrics, "spec.acceptance")
        {
            error.path = error.path.replacen("spec.acceptance[0]", &at, 1);
            errors.push(error);
        }
    }
    errors
}

fn kind_name<K: BenchmarkKind>() -> &'static str {
    // Kind names are compile-time constants of the derived types; leaking one small
    // string per kind once keeps `KindInfo` free of lifetimes.
    Box::leak(K::kind(&()).into_owned().into_boxed_str())
}

fn check_typed<K: BenchmarkKind>(spec: &Value) -> Vec<FieldError> {
    let spec: K::Spec = match serde_path_to_error::deserialize(spec) {
        Ok(spec) => spec,
        Err(error) => {
            let path = error.path().to_string();
            let path = if path == "." {
                "spec".to_owned()
            } else {
                join("spec", &path)
            };
            return vec![FieldError::new(path, error.into_inner().to_string())];
        }
    };
    let mut errors = check_common(K::common(&spec), K::ROLES, K::METRICS);
    errors.extend(K::check(&spec));
    errors
}

fn plan_of<K: BenchmarkKind>(spec: &Value) -> Result<Plan, PlanError> {
    let spec: K::Spec = serde_json::from_value(spec.clone()).map_err(|e| PlanError::Invalid {
        path: "spec".into(),
        message: e.to_string(),
    })?;
    let mut plan = K::plan(&spec)?;
    if let Ok(timeout) = K::common(&spec).timeout() {
        plan.timeout_seconds = timeout.as_secs();
    }
    Ok(plan)
}

fn metrics_of<K: BenchmarkKind>(result: &Value) -> Vec<Metric>
where
    K::Output: DeserializeOwned,
{
    match K::Output::deserialize(result) {
        Ok(output) => crate::judging::metrics::clean(K::metrics(&output)),
        Err(_) => Vec::new(),
    }
}

/// Refuses a result that cannot be a real measurement: a metric outside the range its
/// kind declares, or a negative number anywhere in the result (every quantity the kinds
/// report — times, rates, counts, sizes, percentages — is non-negative, except the
/// fields a kind lists in [`BenchmarkKind::SIGNED_FIELDS`]). `raw` is searched for the
/// line that printed the offending value.
fn check_plausible<K: BenchmarkKind>(
    output: &K::Output,
    result: &Value,
    raw: Option<&str>,
) -> Result<(), ParseError> {
    let line =
        |value: f64| raw.and_then(|raw| crate::execution::parse_error::line_of_value(raw, value));
    if let Some((name, value, why)) =
        crate::judging::metrics::out_of_range(&K::metrics(output), K::METRICS)
    {
        return Err(ParseError::Implausible {
            line: line(value),
            reason: format!("{} metric {name}: {why}", K::kind(&())),
        });
    }
    if let Some((path, value)) = first_negative(result, "", K::SIGNED_FIELDS) {
        return Err(ParseError::Implausible {
            line: line(value),
            reason: format!(
                "{} result value {path} is {value}, but it measures a quantity that cannot be negative",
                K::kind(&())
            ),
        });
    }
    Ok(())
}

/// The JSON pointer and value of the first negative number in `value`, skipping members
/// named in `signed`.
fn first_negative(value: &Value, path: &str, signed: &[&str]) -> Option<(String, f64)> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .filter(|v| *v < 0.0)
            .map(|v| (path.to_owned(), v)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| first_negative(item, &format!("{path}/{i}"), signed)),
        Value::Object(members) => members
            .iter()
            .filter(|(key, _)| !signed.contains(&key.as_str()))
            .find_map(|(key, item)| first_negative(item, &format!("{path}/{key}"), signed)),
        _ => None,
    }
}

fn parse_with<K: BenchmarkKind>(raw: &str) -> Result<ParsedOutput, ParseError> {
    // Coloured output (a tool run with a terminal-like environment) parses as plain text.
    let plain;
    let raw = if raw.contains('\u{1b}') {
        plain = crate::execution::parse_error::strip_terminal_codes(raw);
        plain.as_str()
    } else {
        raw
    };
    let output = K::parse(raw)?;
    let summary = K::headline(&output);
    let result = serde_json::to_value(&output).map_err(|e| ParseError::Json {
        path: String::new(),
        message: format!("the parsed result cannot be represented as JSON: {e}"),
    })?;
    check_plausible::<K>(&output, &result, Some(raw))?;
    Ok(ParsedOutput { result, summary })
}

fn merge_with<K: BenchmarkKind>(results: &[Value]) -> Result<ParsedOutput, ParseError>
where
    K::Output: DeserializeOwned,
{
    let outputs = results
        .iter()
        .enumerate()
        .map(|(index, result)| {
            K::Output::deserialize(result).map_err(|e| ParseError::Json {
                path: format!("/{index}"),
                message: format!("not a {} result: {e}", K::kind(&())),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let merged = K::merge(outputs)?;
    let summary = K::headline(&merged);
    let result = serde_json::to_value(&merged).map_err(|e| ParseError::Json {
        path: String::new(),
        message: format!("the merged result cannot be represented as JSON: {e}"),
    })?;
    check_plausible::<K>(&merged, &result, None)?;
    Ok(ParsedOutput { result, summary })
}

fn check_result<K: BenchmarkKind>(result: &Value) -> Result<(), String>
where
    K::Output: DeserializeOwned,
{
    K::Output::deserialize(result)
        .map(drop)
        .map_err(|e| e.to_string())
}

fn check_common(common: &CommonSpec, roles: &[&str], metrics: &[MetricDef]) -> Vec<FieldError> {
    let mut errors =
        crate::judging::acceptance::check(&common.acceptance, metrics, "spec.acceptance");
    if let Err(error) = common.timeout() {
        errors.push(FieldError::new("spec.timeout", error.to_string()));
    }
    for role in common.placement.iter().flat_map(|p| p.keys()) {
        if !roles.contains(&role.as_str()) {
            errors.push(FieldError::new(
                format!("spec.placement[{role}]"),
                format!(
                    "unknown role {role:?}: this kind's roles are {}",
                    roles.join(", ")
                ),
            ));
        }
    }
    errors
}

/// Every benchmark kind, in the order `perfsweep crds` prints them.
pub fn kinds() -> &'static [KindInfo] {
    static KINDS: OnceLock<Vec<KindInfo>> = OnceLock::new();
    KINDS.get_or_init(|| {
        vec![
            KindInfo::of::<iperf::IPerf>(),
            KindInfo::of::<rdma::bandwidth::RDMABandwidth>(),
            KindInfo::of::<rdma::latency::RDMALatency>(),
            KindInfo::of::<mpi_pingpong::MPIPingPong>(),
            KindInfo::of::<fio::Fio>(),
            KindInfo::of::<pytorch::PyTorch>(),
            KindInfo::of::<openfoam::OpenFOAM>(),
            KindInfo::of::<hpcc::HPCC>(),
            KindInfo::of::<llm::LLMInference>(),
        ]
    })
}

/// The kind named `kind` (exact, as in `kind: IPerf`).
pub fn lookup(kind: &str) -> Option<&'static KindInfo> {
    kinds().iter().find(|info| info.kind == kind)
}

/// The kind `perfsweep parse` calls `name` (e.g. `mpi-pingpong`).
pub fn lookup_parse_name(name: &str) -> Option<&'static KindInfo> {
    kinds().iter().find(|info| info.parse_name == name)
}

/// Names of every benchmark kind, for error messages.
pub fn kind_names() -> Vec<&'static str> {
    kinds().iter().map(|info| info.kind).collect()
}
