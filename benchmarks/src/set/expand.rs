//! Expansion of a BenchmarkSet into its children, validating every child before any is
//! created.
//!
//! Children are named `<set>-<case id>-<repetition>`, where the case id is a digest of
//! the child's complete spec. Names therefore depend only on what a child runs: they are
//! the same after an operator restart, and an edit that leaves a permutation's spec
//! unchanged leaves its children (and their results) alone.
//!
//! Children are ordered repetition-major (every permutation once, then every permutation
//! again): with `maxParallel: 1`, a transient disturbance in the cluster then spreads
//! across permutations instead of biasing all repetitions of one.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::merge::{merge, set_path, split_path};
use super::{BenchmarkSetSpec, MAX_SET_NAME_LEN};
use crate::api::compat;
use crate::api::labels;
use crate::api::names::MAX_BENCHMARK_NAME_LEN;
use crate::api::validation::FieldError;
use crate::formats::digest::sha256_hex;
use crate::judging::nodes::AppliedReference;
use crate::kinds::registry::{self, KindInfo};

/// Hex digits of the spec digest used in child names.
const CASE_ID_LEN: usize = 10;
/// Child errors shown in a message before "and N more".
const ERRORS_SHOWN: usize = 10;

/// One child benchmark of a set.
#[derive(Clone, Debug, PartialEq)]
pub struct Child {
    pub name: String,
    /// Identifies the permutation within the set: a digest of the child's spec.
    pub case_id: String,
    /// SHA-256 of the child's canonical spec.
    pub spec_digest: String,
    pub permutation_index: usize,
    pub repetition: u32,
    /// A node-pair child's round: children of one round run on disjoint node pairs at
    /// the same time, and a round starts when the previous one has ended. Rounds count
    /// across repetitions and permutations, so a round never holds the same pair twice.
    pub round: Option<u32>,
    /// A node-pair child's nodes: the first role's, the second role's.
    pub pair: Option<[String; 2]>,
    /// An each-node child's node, and what it is judged against.
    pub node: Option<Arc<NodeChild>>,
    /// The permutation's own values (what varies), keyed as the user wrote them.
    pub permutation: Arc<Map<String, Value>>,
    /// The complete spec: template merged with the permutation.
    pub spec: Arc<Map<String, Value>>,
}

/// The node of an each-node child (`permutations.eachNode`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeChild {
    pub node: String,
    /// The permutation of `product` and `explicit` it runs (an index into
    /// [`Expansion::workloads`]): nodes are only compared within one workload.
    pub workload: usize,
    /// The references it is judged against, chosen by its labels.
    pub references: Vec<AppliedReference>,
}

/// Node name → the labels of it a set judges by (see
/// [`super::Permutations::node_label_keys`]): the nodes a set's selector matched.
pub type NodeLabels = BTreeMap<String, BTreeMap<String, String>>;

/// A set's children, in creation order.
#[derive(Debug)]
pub struct Expansion {
    pub kind: &'static KindInfo,
    /// The template's apiVersion when it was kube-perftest's and has been converted.
    pub converted_from: Option<String>,
    pub permutation_count: usize,
    pub children: Vec<Child>,
    /// Rounds of a node-pair or each-node set (0 otherwise); children are in round
    /// order.
    pub rounds: u32,
    /// Each permutation of `product` and `explicit` in a few words (`streams=4`), in
    /// order: what a person is shown for a case, beside its digest.
    pub workloads: Vec<String>,
}

/// Why a set cannot be expanded. Nothing is created for a set with any of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SetError {
    #[error("spec.template.apiVersion: unsupported apiVersion {0:?}; use perfsweep.io/v1alpha1")]
    UnknownApiVersion(String),
    #[error("spec.template.kind: unknown benchmark kind {kind:?}; known kinds are {known}")]
    UnknownKind { kind: String, known: String },
    #[error("spec.permutations.product[{key}]: must list at least one value")]
    EmptyProduct { key: String },
    #[error(
        "spec.maxChildren: the set expands to {count} children ({permutations} permutations × {repetitions} repetitions), above the cap of {cap}"
    )]
    TooManyChildren {
        count: u128,
        permutations: u128,
        repetitions: u32,
        cap: u32,
    },
    /// More children than the operator's administrator allows per set, whatever the
    /// set's own `maxChildren` says.
    #[error(
        "spec.maxChildren: the set expands to {count} children, above this operator's ceiling of {ceiling} children per set (set by its administrator: perfsweep operator --max-children-per-set, Helm value maxChildrenPerSet)"
    )]
    AboveOperatorCeiling { count: u128, ceiling: u32 },
    #[error("metadata.name: {0}")]
    InvalidName(String),
    /// The set sweeps node pairs or single nodes and the caller has no node list to
    /// expand them with.
    #[error(
        "{field}: expanding it needs the list of nodes matching the selector ({selector}); the operator lists them; `perfsweep validate` and `render` take them with --nodes"
    )]
    NodesNeeded {
        field: &'static str,
        selector: String,
    },
    #[error("{}", describe_child_errors(.0))]
    InvalidChildren(Vec<ChildError>),
    /// A set-level field that is wrong for the template's kind (e.g. an acceptance
    /// criterion on a metric the kind does not report).
    #[error("{0}")]
    InvalidField(FieldError),
}

impl SetError {
    /// The field path the error is about, for a status condition.
    pub fn field_path(&self) -> String {
        match self {
            Self::UnknownApiVersion(_) => "spec.template.apiVersion".into(),
            Self::UnknownKind { .. } => "spec.template.kind".into(),
            Self::EmptyProduct { key } => format!("spec.permutations.product[{key}]"),
            Self::TooManyChildren { .. } | Self::AboveOperatorCeiling { .. } => {
                "spec.maxChildren".into()
            }
            Self::InvalidName(_) => "metadata.name".into(),
            Self::NodesNeeded { field, .. } => (*field).into(),
            Self::InvalidChildren(errors) => errors
                .first()
                .map(|e| e.error.path.clone())
                .unwrap_or_default(),
            Self::InvalidField(error) => error.path.clone(),
        }
    }
}

/// A child that fails validation, and which permutation it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildError {
    pub permutation_index: usize,
    /// The permutation in a few words, e.g. `streams=0` or `explicit[2]`.
    pub permutation: String,
    /// The error, with its path pointing into the set (template or permutation).
    pub error: FieldError,
}

impl fmt::Display for ChildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "permutation {} ({}): {}",
            self.permutation_index, self.permutation, self.error
        )
    }
}

fn describe_child_errors(errors: &[ChildError]) -> String {
    let mut text: Vec<String> = errors
        .iter()
        .take(ERRORS_SHOWN)
        .map(ToString::to_string)
        .collect();
    if errors.len() > ERRORS_SHOWN {
        text.push(format!("and {} more", errors.len() - ERRORS_SHOWN));
    }
    text.join("; ")
}

/// Where a permutation's values came from, to point errors at the right place.
#[derive(Clone, Debug)]
enum Source {
    /// Product keys with the index of the chosen value.
    Product(Vec<(String, usize)>),
    Explicit(usize),
    /// No permutations: the template alone.
    Template,
}

/// Expands `spec` of the set named `set_name` into its children, or explains why not.
/// A set with `permutations.nodePairs` or `eachNode` needs the node list: see
/// [`expand_on`].
pub fn expand(set_name: &str, spec: &BenchmarkSetSpec) -> Result<Expansion, SetError> {
    expand_on(set_name, spec, None)
}

/// [`expand`], with the names of the nodes the set's node selector matches, without
/// labels (every reference with a `nodeSelector` then matches none of them).
pub fn expand_with_nodes(
    set_name: &str,
    spec: &BenchmarkSetSpec,
    nodes: Option<&[String]>,
) -> Result<Expansion, SetError> {
    let labelled: Option<NodeLabels> =
        nodes.map(|names| names.iter().map(|n| (n.clone(), BTreeMap::new())).collect());
    expand_on(set_name, spec, labelled.as_ref())
}

/// [`expand_on`] under an administrator's `ceiling` on children per set: a set
/// whose own `maxChildren` is higher is held to the ceiling, and refused (before any
/// child is expanded) when it would expand to more.
pub fn expand_within(
    set_name: &str,
    spec: &BenchmarkSetSpec,
    nodes: Option<&NodeLabels>,
    ceiling: u32,
) -> Result<Expansion, SetError> {
    if spec.max_children <= ceiling {
        return expand_on(set_name, spec, nodes);
    }
    let held = BenchmarkSetSpec {
        max_children: ceiling,
        ..spec.clone()
    };
    expand_on(set_name, &held, nodes).map_err(|error| match error {
        SetError::TooManyChildren { count, .. } => {
            SetError::AboveOperatorCeiling { count, ceiling }
        }
        other => other,
    })
}

/// [`expand`], with the nodes that match the selector of `permutations.nodePairs` or
/// `eachNode` and their labels (in any order; the caller lists them, this stays pure).
/// `None` is only an error for a set that pins nodes.
pub fn expand_on(
    set_name: &str,
    spec: &BenchmarkSetSpec,
    nodes: Option<&NodeLabels>,
) -> Result<Expansion, SetError> {
    plan_on(set_name, spec, nodes).map(Cases::into_expansion)
}

/// A set's cases, checked, with what it takes to make each child again: what
/// [`expand_on`] collects, and what `perfsweep validate` and `render` walk one child at a
/// time, so that their memory stays flat in the number of children (a child's spec is
/// made when it is needed, not kept).
#[derive(Debug)]
pub struct Cases {
    set_name: String,
    spec: BenchmarkSetSpec,
    pub kind: &'static KindInfo,
    /// The template's apiVersion when it was kube-perftest's and has been converted.
    pub converted_from: Option<String>,
    pub permutation_count: usize,
    /// Each permutation of `product` and `explicit` in a few words, in order.
    pub workloads: Vec<String>,
    sources: Vec<Source>,
    assignments: Vec<Assignment>,
    rounds_per_sweep: u32,
    /// Per case: its source (an index into `sources`) and assignment (into
    /// `assignments`).
    planned: Vec<(usize, Option<usize>)>,
    digests: Vec<String>,
    case_ids: Vec<String>,
}

/// A permutation's values or a child's spec, shared by the repetitions of a case.
type SharedMap = Arc<Map<String, Value>>;

/// Checks every case of the set (pass one), keeping only its digest: see [`Cases`].
pub fn plan_on(
    set_name: &str,
    spec: &BenchmarkSetSpec,
    nodes: Option<&NodeLabels>,
) -> Result<Cases, SetError> {
    let converted_from = compat::template_api_version(&spec.template.api_version)
        .map_err(SetError::UnknownApiVersion)?;
    let kind = registry::lookup(&spec.template.kind).ok_or_else(|| SetError::UnknownKind {
        kind: spec.template.kind.clone(),
        known: registry::kind_names().join(", "),
    })?;
    if let Some((key, _)) = spec.permutations.product.iter().find(|(_, v)| v.is_empty()) {
        return Err(SetError::EmptyProduct { key: key.clone() });
    }
    let plan = node_plan(spec, kind, nodes)?;
    // Counted before the assignments exist: a large node list over the cap costs nothing.
    let permutation_count = count_permutations(spec, plan.as_ref().map_or(0, NodePlan::count))?;
    check_set_name(set_name, spec.repetitions)?;
    if let Some(error) =
        crate::judging::acceptance::check(&spec.acceptance, kind.metric_defs, "spec.acceptance")
            .into_iter()
            .next()
    {
        return Err(SetError::InvalidField(error));
    }

    let (assignments, rounds_per_sweep, node_field) = plan
        .as_ref()
        .map(|plan| (plan.assignments(), plan.round_count(), plan.field()))
        .unwrap_or_default();
    // Pinned nodes are the innermost product dimension: each permutation of `product`
    // and `explicit` on every pair (or node), in round order.
    let sources = permutation_sources(spec);
    let workloads: Vec<String> = sources
        .iter()
        .map(|source| describe(&permutation_values(spec, source), source))
        .collect();
    let cases: Vec<(usize, Option<usize>)> = (0..sources.len())
        .flat_map(|source_index| {
            let assigned: Vec<Option<usize>> = if assignments.is_empty() {
                vec![None]
            } else {
                (0..assignments.len()).map(Some).collect()
            };
            assigned
                .into_iter()
                .map(move |assignment| (source_index, assignment))
        })
        .collect();
    let mut digests = Vec::with_capacity(cases.len());
    let mut errors = Vec::new();
    for (index, &(source_index, assignment)) in cases.iter().enumerate() {
        let source = &sources[source_index];
        let assignment = assignment.map(|a| &assignments[a]);
        let (_, merged, digest) = case_spec(spec, kind, source, assignment);
        let base_description = &workloads[source_index];
        let description = match (assignment, source) {
            (Some(assignment), Source::Template) => assignment.to_string(),
            (Some(assignment), _) => format!("{base_description}, {assignment}"),
            (None, _) => base_description.clone(),
        };
        let object = json!({
            "apiVersion": crate::API_VERSION,
            "kind": kind.kind,
            "metadata": {"name": child_name(set_name, &digest[..CASE_ID_LEN], 0)},
            "spec": merged,
        });
        for error in kind.validate(&object) {
            errors.push(ChildError {
                permutation_index: index,
                permutation: description.clone(),
                error: match assignment {
                    Some(assignment) if assignment.owns(&error.path) => {
                        FieldError::new(node_field, error.message)
                    }
                    _ => locate(error, source, spec),
                },
            });
        }
        digests.push(digest);
    }
    // Two cases of one workload: borrowed digests, so the check costs no copies.
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(digests.len());
    for (index, digest) in digests.iter().enumerate() {
        if let Some(first) = seen.insert(digest.as_str(), index) {
            let (source_index, assignment) = cases[index];
            let source = &sources[source_index];
            let description = match (assignment.map(|a| &assignments[a]), source) {
                (Some(assignment), Source::Template) => assignment.to_string(),
                (Some(assignment), _) => format!("{}, {assignment}", workloads[source_index]),
                (None, _) => workloads[source_index].clone(),
            };
            errors.push(ChildError {
                permutation_index: index,
                permutation: description,
                error: FieldError::new(
                    source_path(source),
                    format!("gives the same benchmark as permutation {first}"),
                ),
            });
        }
    }
    drop(seen);
    if !errors.is_empty() {
        errors.sort_by_key(|e| e.permutation_index);
        return Err(SetError::InvalidChildren(dedupe(errors)));
    }
    let case_ids = case_ids(digests.iter().map(String::as_str));
    Ok(Cases {
        set_name: set_name.to_owned(),
        spec: spec.clone(),
        kind,
        converted_from,
        permutation_count,
        workloads,
        sources,
        assignments,
        rounds_per_sweep,
        planned: cases,
        digests,
        case_ids,
    })
}

/// One case's permutation values, its complete spec and its workload digest.
fn case_spec(
    spec: &BenchmarkSetSpec,
    kind: &KindInfo,
    source: &Source,
    assignment: Option<&Assignment>,
) -> (Map<String, Value>, Map<String, Value>, String) {
    let mut permutation = permutation_values(spec, source);
    let mut merged = spec.template.spec.clone();
    merge(
        &mut merged,
        &to_patch(&permutation, source),
        spec.list_merge,
    );
    if let Some(assignment) = assignment {
        // Set after the merge, whatever `listMerge` says: the assigned nodes replace
        // any the template or a permutation gave these roles.
        for (key, nodes) in assignment.placements() {
            let value = json!(nodes);
            set_path(&mut merged, &split_path(&key), value.clone());
            permutation.insert(key, value);
        }
    }
    // Acceptance criteria are not the workload: they leave the case id alone.
    let digest = workload_spec_digest(kind.kind, &Value::Object(merged.clone()));
    add_set_acceptance(&mut merged, spec);
    crate::execution::output::inherit(&mut merged, spec.output_location.as_ref());
    (permutation, merged, digest)
}

impl Cases {
    /// How many children the set has.
    pub fn child_count(&self) -> usize {
        self.planned.len() * self.spec.repetitions as usize
    }

    /// Case `index`'s permutation values and complete spec, made again.
    fn remake(&self, index: usize) -> (Map<String, Value>, Map<String, Value>) {
        let (source_index, assignment) = self.planned[index];
        let (permutation, merged, _) = case_spec(
            &self.spec,
            self.kind,
            &self.sources[source_index],
            assignment.map(|a| &self.assignments[a]),
        );
        (permutation, merged)
    }

    fn child(
        &self,
        repetition: u32,
        index: usize,
        permutation: &Arc<Map<String, Value>>,
        merged: &Arc<Map<String, Value>>,
    ) -> Child {
        let (source_index, assignment) = self.planned[index];
        let assignment = assignment.map(|a| &self.assignments[a]);
        let round = assignment.map(|assignment| {
            let sweep = repetition as usize * self.sources.len() + source_index;
            // Bounded by the child count, itself bounded by maxChildren (a u32).
            (sweep * self.rounds_per_sweep as usize + assignment.round as usize) as u32
        });
        let case_id = &self.case_ids[index];
        Child {
            name: child_name(&self.set_name, case_id, repetition),
            case_id: case_id.clone(),
            spec_digest: self.digests[index].clone(),
            permutation_index: index,
            repetition,
            round,
            pair: assignment.and_then(Assignment::pair),
            node: assignment.and_then(|assignment| assignment.node_child(source_index)),
            permutation: Arc::clone(permutation),
            spec: Arc::clone(merged),
        }
    }

    /// Every child in creation order, each made as it is asked for and not kept.
    pub fn children(&self) -> impl Iterator<Item = Child> + '_ {
        (0..self.spec.repetitions).flat_map(move |repetition| {
            (0..self.planned.len()).map(move |index| {
                let (permutation, merged) = self.remake(index);
                self.child(repetition, index, &Arc::new(permutation), &Arc::new(merged))
            })
        })
    }

    /// Every child at once, the repetitions of a case sharing its spec.
    pub fn into_expansion(self) -> Expansion {
        let made: Vec<(SharedMap, SharedMap)> = (0..self.planned.len())
            .map(|index| {
                let (permutation, merged) = self.remake(index);
                (Arc::new(permutation), Arc::new(merged))
            })
            .collect();
        let mut children = Vec::with_capacity(self.child_count());
        for repetition in 0..self.spec.repetitions {
            for (index, (permutation, merged)) in made.iter().enumerate() {
                children.push(self.child(repetition, index, permutation, merged));
            }
        }
        let rounds = children.last().and_then(|c| c.round).map_or(0, |r| r + 1);
        Expansion {
            kind: self.kind,
            converted_from: self.converted_from,
            permutation_count: self.permutation_count,
            children,
            rounds,
            workloads: self.workloads,
        }
    }
}

/// SHA-256 of the canonical `{apiVersion, kind, spec}` without the spec's output location
/// (where results go) and acceptance
/// criteria: equal digests ran the same workload. Records' `workloadSpecDigest` and set
/// case ids are this digest.
pub fn workload_spec_digest(kind: &str, spec: &Value) -> String {
    sha256_hex(&json!({
        "apiVersion": crate::API_VERSION,
        "kind": kind,
        "spec": crate::execution::output::strip(&crate::judging::acceptance::strip(spec)),
    }))
}

/// Appends the set's acceptance criteria to a child spec's own (the template's).
fn add_set_acceptance(child: &mut Map<String, Value>, spec: &BenchmarkSetSpec) {
    if spec.acceptance.is_empty() {
        return;
    }
    let extra = spec
        .acceptance
        .iter()
        .filter_map(|c| serde_json::to_value(c).ok());
    // Not a list: the child's validation reports it.
    if let Value::Array(list) = child
        .entry(crate::judging::acceptance::FIELD)
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        list.extend(extra);
    }
}

fn count_permutations(spec: &BenchmarkSetSpec, pairs: usize) -> Result<usize, SetError> {
    let product: u128 = if spec.permutations.product.is_empty() {
        0
    } else {
        spec.permutations
            .product
            .values()
            .map(|values| values.len() as u128)
            .try_fold(1u128, u128::checked_mul)
            .unwrap_or(u128::MAX)
    };
    let permutations = product
        .saturating_add(spec.permutations.explicit.len() as u128)
        .max(1)
        .saturating_mul((pairs as u128).max(1));
    let count = permutations.saturating_mul(u128::from(spec.repetitions));
    if count > u128::from(spec.max_children) {
        return Err(SetError::TooManyChildren {
            count,
            permutations,
            repetitions: spec.repetitions,
            cap: spec.max_children,
        });
    }
    // Bounded by max_children (a u32) above, so this cannot truncate.
    Ok(permutations as usize)
}

fn check_set_name(set_name: &str, repetitions: u32) -> Result<(), SetError> {
    let is_dns_label = set_name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase())
        && set_name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !set_name.ends_with('-');
    if !is_dns_label {
        return Err(SetError::InvalidName(format!(
            "{set_name:?} must be a DNS label: lower-case letters, digits and '-', starting with a letter"
        )));
    }
    let longest_child = child_name(
        set_name,
        &"0".repeat(CASE_ID_LEN),
        repetitions.saturating_sub(1),
    );
    if longest_child.len() > MAX_BENCHMARK_NAME_LEN || set_name.len() > MAX_SET_NAME_LEN {
        return Err(SetError::InvalidName(format!(
            "{set_name:?} is too long: children are named <set>-<case id>-<repetition> (e.g. {longest_child}, {} characters) and must be at most {MAX_BENCHMARK_NAME_LEN}; use at most {MAX_SET_NAME_LEN} characters",
            longest_child.len()
        )));
    }
    Ok(())
}

fn child_name(set_name: &str, case_id: &str, repetition: u32) -> String {
    format!("{set_name}-{case_id}-{repetition}")
}

/// Short case ids, lengthened to 16 hex digits for any that would collide.
fn case_ids<'a>(digests: impl Iterator<Item = &'a str>) -> Vec<String> {
    let digests: Vec<&str> = digests.collect();
    let mut prefix_count: HashMap<&str, usize> = HashMap::new();
    for digest in &digests {
        *prefix_count.entry(&digest[..CASE_ID_LEN]).or_default() += 1;
    }
    digests
        .iter()
        .map(|digest| {
            let short = &digest[..CASE_ID_LEN];
            if prefix_count.get(short).copied().unwrap_or(0) > 1 {
                digest[..16].to_owned()
            } else {
                short.to_owned()
            }
        })
        .collect()
}

fn permutation_sources(spec: &BenchmarkSetSpec) -> Vec<Source> {
    let product = &spec.permutations.product;
    let mut sources = Vec::new();
    if !product.is_empty() {
        let keys: Vec<&String> = product.keys().collect();
        let lengths: Vec<usize> = product.values().map(Vec::len).collect();
        let mut odometer = vec![0usize; keys.len()];
        'outer: loop {
            sources.push(Source::Product(
                keys.iter()
                    .map(|k| (*k).clone())
                    .zip(odometer.iter().copied())
                    .collect(),
            ));
            for position in (0..odometer.len()).rev() {
                odometer[position] += 1;
                if odometer[position] < lengths[position] {
                    continue 'outer;
                }
                odometer[position] = 0;
            }
            break;
        }
    }
    sources.extend((0..spec.permutations.explicit.len()).map(Source::Explicit));
    if sources.is_empty() {
        sources.push(Source::Template);
    }
    sources
}

fn permutation_values(spec: &BenchmarkSetSpec, source: &Source) -> Map<String, Value> {
    match source {
        Source::Product(choice) => choice
            .iter()
            .filter_map(|(key, index)| {
                let value = spec.permutations.product.get(key)?.get(*index)?;
                Some((key.clone(), value.clone()))
            })
            .collect(),
        Source::Explicit(index) => spec
            .permutations
            .explicit
            .get(*index)
            .cloned()
            .unwrap_or_default(),
        Source::Template => Map::new(),
    }
}

/// The permutation as a nested patch (product keys may be dotted paths).
fn to_patch(permutation: &Map<String, Value>, source: &Source) -> Map<String, Value> {
    match source {
        Source::Product(_) => {
            let mut patch = Map::new();
            for (key, value) in permutation {
                set_path(&mut patch, &split_path(key), value.clone());
            }
            patch
        }
        Source::Explicit(_) | Source::Template => permutation.clone(),
    }
}

fn describe(permutation: &Map<String, Value>, source: &Source) -> String {
    match source {
        Source::Product(_) => permutation
            .iter()
            .map(|(key, value)| format!("{key}={}", compact(value)))
            .collect::<Vec<_>>()
            .join(", "),
        Source::Explicit(index) => {
            let mut text = format!(
                "explicit[{index}] {}",
                compact(&Value::Object(permutation.clone()))
            );
            if text.len() > 100 {
                let cut = (0..=97)
                    .rev()
                    .find(|&i| text.is_char_boundary(i))
                    .unwrap_or(0);
                text.truncate(cut);
                text.push_str("...");
            }
            text
        }
        Source::Template => "the template".to_owned(),
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn source_path(source: &Source) -> String {
    match source {
        Source::Product(_) => "spec.permutations.product".to_owned(),
        Source::Explicit(index) => format!("spec.permutations.explicit[{index}]"),
        Source::Template => "spec.template".to_owned(),
    }
}

/// Points an error on a child's field at the part of the set that supplied the value.
fn locate(error: FieldError, source: &Source, spec: &BenchmarkSetSpec) -> FieldError {
    let Some(field) = error
        .path
        .strip_prefix("spec.")
        .or_else(|| (error.path == "spec").then_some(""))
    else {
        // Root and metadata errors concern the child's name, made from the set's name.
        return FieldError::new("metadata.name", error.message);
    };
    let owner = |path_in_spec: &str| {
        field == path_in_spec
            || field.starts_with(&format!("{path_in_spec}."))
            || field.starts_with(&format!("{path_in_spec}["))
    };
    match source {
        Source::Product(choice) => {
            for (key, index) in choice {
                let dotted = split_path(key).join(".");
                if owner(&dotted) {
                    let rest = &field[dotted.len()..];
                    return FieldError::new(
                        format!("spec.permutations.product[{key}][{index}]{rest}"),
                        error.message,
                    );
                }
            }
        }
        Source::Explicit(index) => {
            let entry = spec.permutations.explicit.get(*index);
            let top = field.split(['.', '[']).next().unwrap_or_default();
            if entry.is_some_and(|e| e.contains_key(top)) {
                return FieldError::new(
                    format!("spec.permutations.explicit[{index}].{field}"),
                    error.message,
                );
            }
        }
        Source::Template => {}
    }
    let path = if field.is_empty() {
        "spec.template.spec".to_owned()
    } else {
        format!("spec.template.spec.{field}")
    };
    FieldError::new(path, error.message)
}

/// One error per (path, message): a template mistake shows once, not once per child.
fn dedupe(errors: Vec<ChildError>) -> Vec<ChildError> {
    let mut seen = std::collections::BTreeSet::new();
    errors
        .into_iter()
        .filter(|e| seen.insert((e.error.path.clone(), e.error.message.clone())))
        .collect()
}

impl Child {
    /// The child as a Kubernetes object owned by its set.
    pub fn to_object(&self, kind: &KindInfo, set: &SetRef) -> Value {
        let permutation = serde_json::to_string(&*self.permutation).unwrap_or_default();
        let mut metadata = json!({
            "name": self.name,
            "labels": {
                labels::MANAGED_BY: labels::MANAGER,
                labels::SET: set.name,
                labels::CASE: self.case_id,
                labels::REPETITION: self.repetition.to_string(),
            },
            "annotations": {
                labels::PERMUTATION: permutation,
                labels::PERMUTATION_INDEX: self.permutation_index.to_string(),
                labels::SPEC_DIGEST: self.spec_digest,
            },
        });
        if let Some(round) = self.round {
            metadata["labels"][labels::ROUND] = json!(round.to_string());
        }
        // Annotations, not labels: node names may be longer than a label value.
        if let Some(node) = &self.node {
            metadata["annotations"][labels::NODE] = json!(node.node);
            if !node.references.is_empty() {
                metadata["annotations"][labels::REFERENCES] =
                    json!(serde_json::to_string(&node.references).unwrap_or_default());
            }
        }
        if let Some(namespace) = &set.namespace {
            metadata["namespace"] = json!(namespace);
        }
        if let Some(uid) = &set.uid {
            metadata["ownerReferences"] = json!([{
                "apiVersion": crate::API_VERSION,
                "kind": "BenchmarkSet",
                "name": set.name,
                "uid": uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }]);
        }
        json!({
            "apiVersion": crate::API_VERSION,
            "kind": kind.kind,
            "metadata": metadata,
            "spec": *self.spec,
        })
    }
}

/// What a child needs to know of its set to point back at it.
#[derive(Clone, Debug, Default)]
pub struct SetRef {
    pub name: String,
    pub namespace: Option<String>,
    pub uid: Option<String>,
}

/// Where one case's roles run: a node pair (the first role on the first node, the
/// second on the second), or every role on one node.
#[derive(Clone, Debug, PartialEq)]
struct Assignment {
    /// `(role, node)` for each pinned role.
    placements: Vec<(String, String)>,
    /// The round of the schedule it runs in.
    round: u32,
    /// An each-node assignment's node and the references it is judged against.
    single: Option<(String, Vec<AppliedReference>)>,
}

impl Assignment {
    /// The permutation values it sets: `placement.<role>.nodes` of each role, with the
    /// nodes of a role pinned twice (an MPI job's two workers) in replica order.
    fn placements(&self) -> Vec<(String, Vec<&str>)> {
        let mut by_role: Vec<(String, Vec<&str>)> = Vec::new();
        for (role, node) in &self.placements {
            let key = format!("placement.{role}.nodes");
            match by_role.iter_mut().find(|(k, _)| *k == key) {
                Some((_, nodes)) => nodes.push(node),
                None => by_role.push((key, vec![node])),
            }
        }
        by_role
    }

    /// Whether a child error at `path` is about a field the assignment sets.
    fn owns(&self, path: &str) -> bool {
        self.placements.iter().any(|(role, _)| {
            let field = format!("spec.placement.{role}.nodes");
            path == field || path.starts_with(&format!("{field}["))
        })
    }

    /// A node pair's nodes, in role order.
    fn pair(&self) -> Option<[String; 2]> {
        match (&self.single, self.placements.as_slice()) {
            (None, [(_, a), (_, b)]) => Some([a.clone(), b.clone()]),
            _ => None,
        }
    }

    /// An each-node assignment as a child's [`NodeChild`].
    fn node_child(&self, workload: usize) -> Option<Arc<NodeChild>> {
        let (node, references) = self.single.as_ref()?;
        Some(Arc::new(NodeChild {
            node: node.clone(),
            workload,
            references: references.clone(),
        }))
    }
}

impl fmt::Display for Assignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some((node, _)) = &self.single {
            return write!(f, "node={node}");
        }
        let text: Vec<String> = self
            .placements
            .iter()
            .map(|(role, node)| format!("{role}={node}"))
            .collect();
        f.write_str(&text.join(", "))
    }
}

/// A checked `nodePairs` or `eachNode`.
enum NodePlan {
    Pairs(PairPlan),
    EachNode(EachNodePlan),
}

impl NodePlan {
    /// How many assignments, computed without building them.
    fn count(&self) -> usize {
        match self {
            Self::Pairs(plan) => plan.count(),
            Self::EachNode(plan) => plan.nodes.len(),
        }
    }

    fn round_count(&self) -> u32 {
        match self {
            Self::Pairs(plan) => plan.round_count(),
            // Each node runs on its own: all of them in one round.
            Self::EachNode(_) => 1,
        }
    }

    /// The assignments, round by round.
    fn assignments(&self) -> Vec<Assignment> {
        match self {
            Self::Pairs(plan) => plan.pairs(),
            Self::EachNode(plan) => plan
                .nodes
                .iter()
                .map(|(node, references)| Assignment {
                    placements: plan
                        .roles
                        .iter()
                        .map(|role| (role.clone(), node.clone()))
                        .collect(),
                    round: 0,
                    single: Some((node.clone(), references.clone())),
                })
                .collect(),
        }
    }

    /// The set field the plan comes from, for errors about the fields it sets.
    fn field(&self) -> &'static str {
        match self {
            Self::Pairs(_) => NODE_PAIRS,
            Self::EachNode(_) => EACH_NODE,
        }
    }
}

const NODE_PAIRS: &str = "spec.permutations.nodePairs";
const EACH_NODE: &str = "spec.permutations.eachNode";

/// A checked `eachNode`: the roles it pins and the sorted nodes with their references.
struct EachNodePlan {
    roles: Vec<String>,
    nodes: Vec<(String, Vec<AppliedReference>)>,
}

/// A checked `nodePairs`: its roles, sorted nodes and schedule.
struct PairPlan {
    roles: [String; 2],
    nodes: Vec<String>,
    mode: super::PairMode,
    /// The index of `AgainstReference`'s reference node in `nodes`.
    reference: Option<usize>,
    directional: bool,
}

impl PairPlan {
    /// How many pairs, computed without building them (a big node list over the cap
    /// costs nothing).
    fn count(&self) -> usize {
        let n = self.nodes.len();
        let one_way = match self.mode {
            super::PairMode::AllPairs => n * (n - 1) / 2,
            super::PairMode::Ring if n == 2 => 1,
            super::PairMode::Ring => n,
            super::PairMode::AgainstReference => n - 1,
        };
        if self.directional {
            one_way * 2
        } else {
            one_way
        }
    }

    fn schedule(&self) -> Vec<super::rounds::Round> {
        use super::rounds;
        let n = self.nodes.len();
        let one_way = match (self.mode, self.reference) {
            (super::PairMode::Ring, _) => rounds::ring(n),
            (super::PairMode::AgainstReference, Some(reference)) => {
                rounds::against_reference(n, reference)
            }
            _ => rounds::all_pairs(n),
        };
        if self.directional {
            rounds::both_directions(one_way)
        } else {
            one_way
        }
    }

    fn round_count(&self) -> u32 {
        self.schedule().len() as u32
    }

    /// The pairs, round by round.
    fn pairs(&self) -> Vec<Assignment> {
        self.schedule()
            .into_iter()
            .enumerate()
            .flat_map(|(round, pairs)| {
                pairs.into_iter().map(move |(a, b)| Assignment {
                    placements: vec![
                        (self.roles[0].clone(), self.nodes[a].clone()),
                        (self.roles[1].clone(), self.nodes[b].clone()),
                    ],
                    round: round as u32,
                    single: None,
                })
            })
            .collect()
    }
}

/// Checks a set's `nodePairs` or `eachNode` against its kind and the node list; `None`
/// without either.
fn node_plan(
    spec: &BenchmarkSetSpec,
    kind: &KindInfo,
    nodes: Option<&NodeLabels>,
) -> Result<Option<NodePlan>, SetError> {
    match (&spec.permutations.node_pairs, &spec.permutations.each_node) {
        (Some(_), Some(_)) => Err(SetError::InvalidField(FieldError::new(
            EACH_NODE,
            "set nodePairs or eachNode, not both: a set sweeps node pairs or single nodes",
        ))),
        (Some(pairs), None) => pair_plan(pairs, kind, nodes).map(|p| Some(NodePlan::Pairs(p))),
        (None, Some(each)) => {
            each_node_plan(each, kind, nodes).map(|p| Some(NodePlan::EachNode(p)))
        }
        (None, None) => Ok(None),
    }
}

/// `every node`, or `selector k=v`, for messages.
fn describe_selector(selector: &super::NodeSelector) -> String {
    let selector = selector.to_label_selector();
    if selector.is_empty() {
        "every node".to_owned()
    } else {
        format!("selector {selector}")
    }
}

/// The node list, sorted and deduplicated: the assignments, and so the permutation
/// order, do not depend on the order the API server lists nodes in.
fn sorted_nodes(
    field: &'static str,
    selector: &super::NodeSelector,
    nodes: Option<&NodeLabels>,
) -> Result<Vec<String>, SetError> {
    let Some(nodes) = nodes else {
        let selector = selector.to_label_selector();
        return Err(SetError::NodesNeeded {
            field,
            selector: if selector.is_empty() {
                "every node".to_owned()
            } else {
                selector
            },
        });
    };
    // A map's keys: sorted and distinct already.
    Ok(nodes.keys().cloned().collect())
}

/// Checks `eachNode`: its roles, references and the node list.
fn each_node_plan(
    config: &super::EachNode,
    kind: &KindInfo,
    nodes: Option<&NodeLabels>,
) -> Result<EachNodePlan, SetError> {
    let invalid = |path: &str, message: String| {
        SetError::InvalidField(FieldError::new(format!("{EACH_NODE}{path}"), message))
    };
    let roles: Vec<String> = if config.roles.is_empty() {
        kind.roles.iter().map(|r| (*r).to_owned()).collect()
    } else {
        config.roles.clone()
    };
    for (index, role) in roles.iter().enumerate() {
        if !kind.roles.contains(&role.as_str()) {
            return Err(invalid(
                &format!(".roles[{index}]"),
                format!(
                    "unknown role {role:?}: {}'s roles are {}",
                    kind.kind,
                    kind.roles.join(", ")
                ),
            ));
        }
        if roles[..index].contains(role) {
            return Err(invalid(
                &format!(".roles[{index}]"),
                format!("role {role:?} is listed twice"),
            ));
        }
    }
    if let Some(error) = check_references(&config.references, kind)
        .into_iter()
        .next()
    {
        return Err(SetError::InvalidField(error));
    }
    let names = sorted_nodes(EACH_NODE, &config.selector, nodes)?;
    if names.is_empty() {
        return Err(invalid(
            ".selector",
            format!(
                "{} matches no node: eachNode needs at least one",
                describe_selector(&config.selector)
            ),
        ));
    }
    let no_labels = BTreeMap::new();
    let nodes = names
        .into_iter()
        .map(|name| {
            let labels = nodes.and_then(|n| n.get(&name)).unwrap_or(&no_labels);
            let references = crate::judging::nodes::applicable(&config.references, labels);
            (name, references)
        })
        .collect();
    Ok(EachNodePlan { roles, nodes })
}

/// Checks `eachNode.references` against the kind's metrics and each other; CEL checks
/// the same shape at admission, this covers the kind's metric names and callers that
/// skip admission (`expand` on a spec read without it).
fn check_references(
    references: &[crate::judging::nodes::NodeReference],
    kind: &KindInfo,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let at = format!("{EACH_NODE}.references[{index}]");
        if !kind.metric_defs.iter().any(|d| d.name == reference.metric) {
            let known: Vec<&str> = kind.metric_defs.iter().map(|d| d.name).collect();
            errors.push(FieldError::new(
                format!("{at}.metric"),
                format!(
                    "unknown metric {:?}: {} reports {}",
                    reference.metric,
                    kind.kind,
                    known.join(", ")
                ),
            ));
        }
        let numbers = [
            reference.value,
            reference.lower_tolerance,
            reference.upper_tolerance,
            reference.within_fraction_of_median,
        ];
        if numbers.iter().flatten().any(|n| !n.is_finite()) {
            errors.push(FieldError::new(at.clone(), "numbers must be finite"));
        }
        match (reference.value, reference.within_fraction_of_median) {
            (Some(_), Some(_)) | (None, None) => errors.push(FieldError::new(
                at.clone(),
                "set either value (with its tolerances) or withinFractionOfMedian",
            )),
            (Some(_), None)
                if reference.lower_tolerance.is_none() && reference.upper_tolerance.is_none() =>
            {
                errors.push(FieldError::new(
                    format!("{at}.value"),
                    "a value needs a lowerTolerance, an upperTolerance or both",
                ));
            }
            (None, Some(_))
                if reference.lower_tolerance.is_some() || reference.upper_tolerance.is_some() =>
            {
                errors.push(FieldError::new(
                    format!("{at}.lowerTolerance"),
                    "tolerances are fractions of value: set value",
                ));
            }
            _ => {}
        }
        if let Some(lower) = reference.lower_tolerance
            && !(-1.0..=0.0).contains(&lower)
        {
            errors.push(FieldError::new(
                format!("{at}.lowerTolerance"),
                format!("{lower} is not between -1 and 0 (-0.05: at least 95% of value)"),
            ));
        }
        if let Some(upper) = reference.upper_tolerance
            && upper < 0.0
        {
            errors.push(FieldError::new(
                format!("{at}.upperTolerance"),
                format!("{upper} is negative (0.10: at most 110% of value)"),
            ));
        }
        if let Some(fraction) = reference.within_fraction_of_median
            && !(0.0..=1.0).contains(&fraction)
        {
            errors.push(FieldError::new(
                format!("{at}.withinFractionOfMedian"),
                format!("{fraction} is not between 0 and 1 (0.1: within 10%)"),
            ));
        }
    }
    errors
}

/// Checks a set's `nodePairs` against its kind and the node list.
fn pair_plan(
    config: &super::NodePairs,
    kind: &KindInfo,
    nodes: Option<&NodeLabels>,
) -> Result<PairPlan, SetError> {
    let invalid = |path: &str, message: String| {
        SetError::InvalidField(FieldError::new(
            format!("spec.permutations.nodePairs{path}"),
            message,
        ))
    };
    let roles: [String; 2] = match config.roles.as_slice() {
        [] => match (kind.pair_roles, kind.roles) {
            ([first, second], _) | ([], [first, second, ..]) => {
                [(*first).to_owned(), (*second).to_owned()]
            }
            _ => {
                return Err(invalid(
                    "",
                    format!(
                        "{} has one role ({}): a node pair needs two",
                        kind.kind,
                        kind.roles.join(", ")
                    ),
                ));
            }
        },
        [first, second] => [first.clone(), second.clone()],
        other => {
            return Err(invalid(
                ".roles",
                format!("must name two roles, not {}", other.len()),
            ));
        }
    };
    for (index, role) in roles.iter().enumerate() {
        if !kind.roles.contains(&role.as_str()) {
            return Err(invalid(
                &format!(".roles[{index}]"),
                format!(
                    "unknown role {role:?}: {}'s roles are {}",
                    kind.kind,
                    kind.roles.join(", ")
                ),
            ));
        }
    }
    let nodes = sorted_nodes(NODE_PAIRS, &config.selector, nodes)?;
    let selected = describe_selector(&config.selector);
    if nodes.len() < 2 {
        return Err(invalid(
            ".selector",
            format!(
                "{selected} matches {} node{} ({}): node pairs need at least two",
                nodes.len(),
                if nodes.len() == 1 { "" } else { "s" },
                if nodes.is_empty() {
                    "none".to_owned()
                } else {
                    nodes.join(", ")
                },
            ),
        ));
    }
    let reference = match config.mode {
        mode @ (super::PairMode::AllPairs | super::PairMode::Ring)
            if config.reference.is_some() =>
        {
            return Err(invalid(
                ".reference",
                format!("is only used by mode AgainstReference (mode is {mode:?})"),
            ));
        }
        super::PairMode::AllPairs | super::PairMode::Ring => None,
        super::PairMode::AgainstReference => {
            let Some(reference) = &config.reference else {
                return Err(invalid(
                    ".reference",
                    "mode AgainstReference needs a reference node".to_owned(),
                ));
            };
            if !nodes.contains(reference) {
                return Err(invalid(
                    ".reference",
                    format!(
                        "node {reference:?} is not among the nodes {selected} matches ({})",
                        nodes.join(", ")
                    ),
                ));
            }
            nodes.iter().position(|n| n == reference)
        }
    };
    Ok(PairPlan {
        roles,
        nodes,
        mode: config.mode,
        reference,
        directional: config.directional,
    })
}
