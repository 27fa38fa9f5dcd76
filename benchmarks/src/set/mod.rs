//! BenchmarkSet: a template expanded over permutations and repetitions into child
//! benchmarks.

pub mod acceptance;
pub mod child;
pub mod expand;
pub mod fleet;
pub mod merge;
pub mod nodes;
pub mod rounds;
pub mod status;
pub mod summary;

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps,
};
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use expand::{
    Cases, Child, Expansion, NodeChild, NodeLabels, SetError, expand, expand_on, expand_with_nodes,
    expand_within,
};
pub use merge::ListMergeMode;
pub use status::BenchmarkSetStatus;

pub use crate::api::names::MAX_SET_NAME_LEN;

/// The default cap on the children of one set.
pub const DEFAULT_MAX_CHILDREN: u32 = 10_000;

/// A parameter sweep: one benchmark template, expanded over the cartesian product of
/// `permutations.product` plus each of `permutations.explicit`, times `repetitions`.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "BenchmarkSet",
    plural = "benchmarksets",
    shortname = "bset",
    category = "perfsweep",
    namespaced,
    status = "BenchmarkSetStatus",
    doc = "A sweep of benchmarks: a template expanded over permutations and repetitions.",
    printcolumn = r#"{"name":"Kind","type":"string","jsonPath":".spec.template.kind"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Permutations","type":"integer","jsonPath":".status.permutationCount"}"#,
    printcolumn = r#"{"name":"Repetitions","type":"integer","jsonPath":".spec.repetitions"}"#,
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".status.total"}"#,
    printcolumn = r#"{"name":"Running","type":"integer","jsonPath":".status.running"}"#,
    printcolumn = r#"{"name":"Succeeded","type":"integer","jsonPath":".status.succeeded"}"#,
    printcolumn = r#"{"name":"Failed","type":"integer","jsonPath":".status.failed"}"#,
    printcolumn = r#"{"name":"Unstable","type":"integer","jsonPath":".status.summary.unstable"}"#,
    printcolumn = r#"{"name":"Accepted","type":"string","jsonPath":".status.conditions[?(@.type==\"Accepted\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkSetSpec {
    /// The benchmark every child is made from.
    pub template: BenchmarkTemplate,

    /// How many times each permutation runs. Repetitions give a distribution, not a
    /// single number.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 1000))]
    pub repetitions: u32,

    /// The values swept over. With neither `product` nor `explicit`, the set has one
    /// permutation: the template itself.
    #[serde(default)]
    pub permutations: Permutations,

    /// How a list in a permutation combines with the same list in the template:
    /// `Replace` (default) or `Append`.
    #[serde(default)]
    pub list_merge: ListMergeMode,

    /// How many children run at once. Defaults to 1 because concurrent benchmarks share
    /// nodes and links and disturb each other's numbers; raise it only for benchmarks
    /// that cannot interfere (for example on disjoint node pairs).
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_parallel: u32,

    /// What a failed child does to the rest of the set: `Continue` (default) runs the
    /// remaining children; `Stop` creates no further children.
    #[serde(default)]
    pub failure_policy: FailurePolicy,

    /// The most children (permutations × repetitions) this set may expand to. A larger
    /// sweep is rejected before anything is created.
    #[serde(default = "default_max_children")]
    #[schemars(range(min = 1, max = 1000000))]
    pub max_children: u32,

    /// Acceptance criteria for every child, on top of any in the template, e.g.
    /// `[{metric: received_bits_per_second, min: 9.0e9}]`. Each child reports its verdict
    /// in its `Accepted` condition; the set's `Accepted` condition is True when every
    /// child was accepted and False as soon as one was rejected or failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub acceptance: Vec<crate::judging::acceptance::Criterion>,

    /// Where every child's result record and raw evidence are exported (see the
    /// benchmark kinds' `outputLocation`); a template that names its own wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_location: Option<crate::execution::output::OutputLocation>,
}

/// The benchmark a set's children are made from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkTemplate {
    /// `perfsweep.io/v1alpha1` (kube-perftest's `perftest.stackhpc.com/v1alpha1` is
    /// accepted and converted).
    #[schemars(extend("enum" = ["perfsweep.io/v1alpha1", "perftest.stackhpc.com/v1alpha1"]))]
    pub api_version: String,

    /// The benchmark kind, e.g. `IPerf`.
    pub kind: String,

    /// The part of the child spec every permutation shares.
    #[serde(default)]
    #[schemars(schema_with = "free_form_object")]
    pub spec: Map<String, Value>,
}

/// The values a set sweeps over.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, KubeSchema)]
#[x_kube(validation = Rule::new("!has(self.nodePairs) || !has(self.eachNode)").message("set nodePairs or eachNode, not both: a set sweeps node pairs or single nodes").field_path(".eachNode"))]
#[serde(rename_all = "camelCase")]
pub struct Permutations {
    /// Field → list of values; the set covers every combination (cartesian product).
    /// A field is a spec field name, or a dotted path into nested fields
    /// (`resources.limits.nvidia\.com/gpu`, with `\.` for a literal dot).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "product_schema")]
    pub product: BTreeMap<String, Vec<Value>>,

    /// Partial specs, each one more permutation merged into the template.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "explicit_schema")]
    pub explicit: Vec<Map<String, Value>>,

    /// Node pairs: the nodes matching `selector`, paired up, with each pair pinning one
    /// role to each node (`placement.<role>.nodes`). A further product dimension: every
    /// permutation of `product` and `explicit` (or the template alone) runs on every
    /// pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_pairs: Option<NodePairs>,

    /// Every node on its own: the nodes matching `selector`, each running the benchmark
    /// with all its roles pinned to that node. Like `nodePairs`, a further product
    /// dimension; each node is judged against the fleet and its class's reference.
    /// Not with `nodePairs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub each_node: Option<EachNode>,
}

impl Permutations {
    /// The selector of `nodePairs` or `eachNode`: the nodes the set needs listed before
    /// it can expand; `None` for a set that pins no nodes.
    pub fn node_selector(&self) -> Option<&NodeSelector> {
        self.node_pairs
            .as_ref()
            .map(|pairs| &pairs.selector)
            .or_else(|| self.each_node.as_ref().map(|each| &each.selector))
    }

    /// The label keys the set judges nodes by (its references' selectors): the labels
    /// worth keeping of its nodes.
    pub fn node_label_keys(&self) -> std::collections::BTreeSet<String> {
        self.each_node
            .as_ref()
            .map(|each| crate::judging::nodes::label_keys(&each.references))
            .unwrap_or_default()
    }

    /// The nodes a listing gave (name, all its labels), with only the labels this set
    /// judges by: what its expansion and status keep.
    pub fn keep_node_labels(
        &self,
        nodes: impl IntoIterator<Item = (String, BTreeMap<String, String>)>,
    ) -> NodeLabels {
        let keys = self.node_label_keys();
        nodes
            .into_iter()
            .map(|(name, mut labels)| {
                labels.retain(|key, _| keys.contains(key));
                (name, labels)
            })
            .collect()
    }

    /// How many children of a round may run at once (`maxParallelPerRound` of node
    /// pairs, `maxParallel` of each node); unlimited without either.
    pub fn per_round_limit(&self) -> u32 {
        self.node_pairs
            .as_ref()
            .and_then(|pairs| pairs.max_parallel_per_round)
            .or_else(|| self.each_node.as_ref().and_then(|each| each.max_parallel))
            .unwrap_or(u32::MAX)
    }
}

/// A sweep over single nodes: "does every node of this rack meet spec?" in one set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EachNode {
    /// The nodes to test, by label. The operator lists the nodes that match when it
    /// expands the set; at least one must match.
    pub selector: NodeSelector,

    /// The roles pinned to the node; default every role of the kind (an MPI launcher
    /// and its worker, an iperf server and its client: all on the one node).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 8))]
    pub roles: Vec<String>,

    /// How many nodes run at once; default all of them. Each node runs on its own, so
    /// running them together does not make tests share a node; lower it when they share
    /// something else (a switch uplink, a file system). The set's `maxParallel` does not
    /// apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_parallel: Option<u32>,

    /// When a node is an outlier against the fleet (see `status.perNode`).
    #[serde(default)]
    pub outliers: crate::judging::fleet::OutlierRule,

    /// References per node class: each bounds a metric, on the nodes its `nodeSelector`
    /// matches, by a value with tolerances or a fraction of the fleet median. Per
    /// metric, a node is judged against the first reference that matches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub references: Vec<crate::judging::nodes::NodeReference>,
}

/// A sweep over pairs of nodes: "every node pair meets spec" in one set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePairs {
    /// The nodes to pair up, by label. The operator lists the nodes that match when it
    /// expands the set; at least two must match.
    pub selector: NodePairSelector,

    /// `AllPairs` (default): every unordered pair of distinct nodes once, n(n-1)/2
    /// pairs in rounds of disjoint pairs (n-1 rounds for even n, n for odd).
    /// `Ring`: each node with its successor in name order, n pairs in 2 rounds (3 for
    /// odd n). `AgainstReference`: each other node paired with `reference`, n-1 pairs,
    /// one a round.
    #[serde(default)]
    pub mode: PairMode,

    /// Test each pair both ways: after each round, the same pairs with the roles
    /// swapped (twice the rounds).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub directional: bool,

    /// How many pairs of a round run at once; default all of them. Rounds are
    /// node-disjoint, so running them together does not make tests share a node. The
    /// set's `maxParallel` does not apply to node-pair sets: a round starts when the
    /// previous one has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_parallel_per_round: Option<u32>,

    /// When a pair is an outlier in the fleet verdict (see `status.fleet`).
    #[serde(default)]
    pub outliers: crate::judging::fleet::OutlierRule,

    /// The reference node of `AgainstReference`; it must match `selector`. It plays the
    /// first role of every pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub reference: Option<String>,

    /// The two roles a pair pins, the first on the pair's first node (the one earlier in
    /// name order, or the reference). Defaults to the kind's first two roles (e.g.
    /// `server`, `client`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 2, max = 2))]
    pub roles: Vec<String>,
}

pub use crate::judging::nodes::NodeSelector;

/// Which nodes a [`NodePairs`] sweep pairs up: a [`NodeSelector`], by its older name.
pub type NodePairSelector = NodeSelector;

/// How a [`NodePairs`] sweep pairs its nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PairMode {
    /// Every unordered pair of distinct nodes, once, in rounds of disjoint pairs.
    #[default]
    AllPairs,
    /// Each node with its successor (the last with the first): a quick screen.
    Ring,
    /// Every other node against `reference`.
    AgainstReference,
}

/// What a failed child does to the rest of its set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailurePolicy {
    /// Keep running the remaining children.
    #[default]
    Continue,
    /// Create no further children; those already running finish.
    Stop,
}

fn one() -> u32 {
    1
}

fn default_max_children() -> u32 {
    DEFAULT_MAX_CHILDREN
}

fn free_form_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

fn product_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "type": "array",
            "minItems": 1,
            "items": {"x-kubernetes-preserve-unknown-fields": true}
        }
    })
}

fn explicit_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    })
}

/// The BenchmarkSet CRD, with the kind list and name rules only known at run time.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = BenchmarkSet::crd();
    crate::api::crd_rules::kubernetes_formats(&mut crd);
    let Some(root) = crate::api::crd_rules::served_schema(&mut crd) else {
        return crd;
    };
    crate::api::crd_rules::name_rules(
        root,
        MAX_SET_NAME_LEN,
        "children are named <set>-<case id>-<repetition>",
        "it prefixes Service names",
    );
    if let Some(kind) = property(root, &["spec", "template", "kind"]) {
        kind.enum_ = Some(
            crate::kinds::registry::kind_names()
                .into_iter()
                .map(|k| {
                    k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(
                        Value::String(k.to_owned()),
                    )
                })
                .collect(),
        );
    }
    crd
}

fn property<'a>(
    mut node: &'a mut JSONSchemaProps,
    path: &[&str],
) -> Option<&'a mut JSONSchemaProps> {
    for name in path {
        node = node.properties.as_mut()?.get_mut(*name)?;
    }
    Some(node)
}

/// The BenchmarkSet schema and CEL rules, compiled once.
struct SetSchema {
    schema: crate::api::schema::Node,
    cel: kube::core::cel::CompiledSchema,
}

fn set_schema() -> &'static SetSchema {
    static SCHEMA: std::sync::OnceLock<SetSchema> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let json = crate::api::crd_rules::open_api_schema(&crd());
        SetSchema {
            schema: crate::api::schema::Node::compile(&json)
                .unwrap_or_else(|e| panic!("the derived BenchmarkSet schema is invalid: {e}")),
            cel: kube::core::cel::compile_schema(&json),
        }
    })
}

/// Checks a BenchmarkSet object as admission would (schema and CEL rules) and reads it.
/// Child specs are checked later, by [`expand`].
pub fn parse_object(
    object: &Value,
) -> Result<BenchmarkSet, Vec<crate::api::validation::FieldError>> {
    use crate::api::validation::FieldError;
    let compiled = set_schema();
    // The schema's errors and the CEL rules' together (except rules on fields the
    // schema already refused), so that one round of fixes is enough.
    let mut errors = compiled.schema.check_object_root(object);
    if let Err(failures) = kube::core::cel::validate_compiled(&compiled.cel, object, None) {
        let refused = |path: &str| errors.iter().any(|e| path.starts_with(&e.path));
        let cel: Vec<FieldError> = failures
            .iter()
            // A root rule's fieldPath comes back as written (`.metadata.name`).
            .map(|f| (f.field_path.trim_start_matches('.'), &f.message))
            .filter(|(path, _)| !refused(path))
            .map(|(path, message)| FieldError::new(path, message.clone()))
            .collect();
        errors.extend(cel);
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    serde_path_to_error::deserialize(object).map_err(|error| {
        vec![FieldError::new(
            error.path().to_string(),
            error.into_inner().to_string(),
        )]
    })
}
