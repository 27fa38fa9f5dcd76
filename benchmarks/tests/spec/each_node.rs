//! Each-node sweeps: `permutations.eachNode` expanded over a given node list, each node's
//! reference chosen by its labels, and the per-node verdict the set's status carries.

use std::collections::BTreeMap;

use perfsweep_benchmarks::judging::acceptance::NODES_REJECTED;
use perfsweep_benchmarks::set::acceptance::{ChildAcceptance, SetAcceptance};
use perfsweep_benchmarks::set::{self, BenchmarkSetSpec, NodeLabels, SetError};
use serde_json::{Value, json};

const CLASS: &str = "perfsweep.io/node-class";

fn spec(each_node: Value, product: Value) -> BenchmarkSetSpec {
    serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 5}},
        "permutations": {"product": product, "eachNode": each_node},
    }))
    .expect("a well-formed set spec")
}

/// Nodes with their classes (`""`: no class label).
fn nodes(list: &[(&str, &str)]) -> NodeLabels {
    list.iter()
        .map(|(name, class)| {
            let mut labels = BTreeMap::new();
            if !class.is_empty() {
                labels.insert(CLASS.to_owned(), (*class).to_owned());
            }
            ((*name).to_owned(), labels)
        })
        .collect()
}

fn plain(names: &[&str]) -> NodeLabels {
    nodes(&names.iter().map(|n| (*n, "")).collect::<Vec<_>>())
}

/// Gold nodes bounded at 10 Gbit/s −5%/+10%, silver at 5 Gbit/s −5%; other nodes have
/// no reference.
fn references() -> Value {
    json!([
        {"name": "gold", "nodeSelector": {"matchLabels": {CLASS: "gold"}},
         "metric": "received_bits_per_second", "value": 10e9,
         "lowerTolerance": -0.05, "upperTolerance": 0.10},
        {"name": "silver", "nodeSelector": {"matchLabels": {CLASS: "silver"}},
         "metric": "received_bits_per_second", "value": 5e9, "lowerTolerance": -0.05},
    ])
}

#[test]
fn every_node_gets_one_child_with_every_role_pinned_to_it() {
    let set = spec(
        json!({"selector": {"matchLabels": {"rack": "r7"}}}),
        json!({}),
    );
    let expansion = set::expand_on("rack", &set, Some(&plain(&["c", "a", "b"]))).expect("valid");
    assert_eq!(expansion.permutation_count, 3);
    // One round: the nodes share nothing, so they all run at once.
    assert_eq!(expansion.rounds, 1);
    let names: Vec<&str> = expansion
        .children
        .iter()
        .map(|c| c.node.as_ref().expect("an each-node child").node.as_str())
        .collect();
    assert_eq!(
        names,
        ["a", "b", "c"],
        "sorted: independent of listing order"
    );
    for child in &expansion.children {
        let node = &child.node.as_ref().expect("a node").node;
        assert_eq!(child.round, Some(0));
        assert_eq!(child.pair, None, "not a pair");
        for role in ["server", "client"] {
            assert_eq!(
                child.spec["placement"][role]["nodes"],
                json!([node]),
                "{role}"
            );
            assert_eq!(
                child.permutation[&format!("placement.{role}.nodes")],
                json!([node])
            );
        }
        let object = child.to_object(expansion.kind, &set::expand::SetRef::default());
        assert_eq!(
            object["metadata"]["annotations"]["perfsweep.io/node"],
            json!(node)
        );
    }
    // Different nodes are different workloads: different names.
    assert_ne!(expansion.children[0].name, expansion.children[1].name);
}

#[test]
fn nodes_are_the_innermost_dimension_and_each_workload_takes_its_own_round() {
    let mut set = spec(
        json!({"selector": {"matchLabels": {}}, "roles": ["server"]}),
        json!({"streams": [1, 4]}),
    );
    set.repetitions = 2;
    let expansion = set::expand_on("rack", &set, Some(&plain(&["a", "b", "c"]))).expect("valid");
    assert_eq!(expansion.children.len(), 2 * 3 * 2);
    assert_eq!(
        expansion.rounds, 4,
        "(streams=1, streams=4) × 2 repetitions"
    );
    assert_eq!(expansion.workloads, ["streams=1", "streams=4"]);
    let first = &expansion.children[0];
    assert_eq!(first.spec["placement"]["server"]["nodes"], json!(["a"]));
    assert!(
        first.spec["placement"].get("client").is_none(),
        "only the listed roles are pinned: {}",
        Value::Object((*first.spec).clone())
    );
    let rounds: Vec<(u32, usize, &str)> = expansion
        .children
        .iter()
        .map(|c| {
            let node = c.node.as_ref().expect("a node");
            (c.round.expect("a round"), node.workload, node.node.as_str())
        })
        .collect();
    assert_eq!(rounds[0], (0, 0, "a"));
    assert_eq!(rounds[3], (1, 1, "a"));
    assert_eq!(rounds[6], (2, 0, "a"));
}

#[test]
fn each_node_is_judged_against_the_first_reference_its_labels_match() {
    let set = spec(
        json!({"selector": {"matchLabels": {}}, "references": references()}),
        json!({}),
    );
    let expansion = set::expand_on(
        "rack",
        &set,
        Some(&nodes(&[("g1", "gold"), ("s1", "silver"), ("x1", "")])),
    )
    .expect("valid");
    let applied: Vec<(String, Vec<u32>)> = expansion
        .children
        .iter()
        .map(|c| {
            let node = c.node.as_ref().expect("a node");
            (
                node.node.clone(),
                node.references.iter().map(|r| r.index).collect(),
            )
        })
        .collect();
    assert_eq!(
        applied,
        [
            ("g1".to_owned(), vec![0]),
            ("s1".to_owned(), vec![1]),
            ("x1".to_owned(), vec![])
        ]
    );
    let object = expansion.children[0].to_object(expansion.kind, &set::expand::SetRef::default());
    let annotation = object["metadata"]["annotations"]["perfsweep.io/references"]
        .as_str()
        .expect("the references annotation");
    assert!(annotation.contains("\"name\":\"gold\""), "{annotation}");
    // References judge, they are not the workload: same child names without them.
    let bare = spec(json!({"selector": {"matchLabels": {}}}), json!({}));
    let bare = set::expand_on("rack", &bare, Some(&plain(&["g1", "s1", "x1"]))).expect("valid");
    assert_eq!(expansion.children[0].name, bare.children[0].name);
}

/// An IPerf result at `gbps`.
fn result(gbps: f64) -> Value {
    json!({"protocol": "TCP", "reverse": false, "bidirectional": false, "numStreams": 1,
        "durationSeconds": 5.0, "sentBitsPerSecond": gbps * 1e9,
        "receivedBitsPerSecond": gbps * 1e9, "sentBytes": 1, "receivedBytes": 1,
        "retransmits": 0})
}

/// The set's per-node summary and `Accepted` condition with every child finished at
/// the values `gbps` gives its node.
fn judged(
    set: &BenchmarkSetSpec,
    nodes: &NodeLabels,
    gbps: impl Fn(&str) -> f64,
) -> (
    perfsweep_benchmarks::judging::nodes::NodesSummary,
    (&'static str, &'static str, String),
) {
    let expansion = set::expand_on("rack", set, Some(nodes)).expect("valid");
    let results: Vec<(usize, Value)> = expansion
        .children
        .iter()
        .enumerate()
        .map(|(i, c)| (i, result(gbps(&c.node.as_ref().expect("a node").node))))
        .collect();
    let accepted = vec![ChildAcceptance::Accepted; expansion.children.len()];
    let summary = set::nodes::summary(
        set::fleet::outlier_rule(set),
        &expansion,
        &results,
        &[],
        &accepted,
    )
    .expect("a per-node verdict");
    let names: Vec<&str> = expansion.children.iter().map(|c| c.name.as_str()).collect();
    let condition =
        SetAcceptance::of(names.into_iter().zip(&accepted)).judged_condition(None, Some(&summary));
    (summary, condition)
}

#[test]
fn a_gold_node_below_its_reference_fails_while_a_silver_node_passes_its_own() {
    let set = spec(
        json!({"selector": {"matchLabels": {}}, "references": references(),
               // Gold and silver differ by 2×: the fleet rule alone would name silver.
               "outliers": {"mads": 3.0, "minDeviation": 0.9}}),
        json!({}),
    );
    let classes = nodes(&[("g1", "gold"), ("g2", "gold"), ("s1", "silver")]);
    // g1 at 90% of gold's 10 Gbit/s; g2 on it; s1 at silver's 5 Gbit/s.
    let (summary, (status, reason, message)) = judged(&set, &classes, |node| match node {
        "g1" => 9.0,
        "g2" => 10.0,
        _ => 5.0,
    });
    assert_eq!(
        (summary.rejected, summary.out_of_reference),
        (1, 1),
        "{summary:?}"
    );
    let failing: Vec<&str> = summary
        .worst_nodes
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(failing, ["g1"]);
    let reference = summary.worst_nodes[0]
        .reference
        .as_deref()
        .unwrap_or_default();
    assert!(
        reference.starts_with("gold (perfsweep.io/node-class=gold)"),
        "{reference}"
    );
    assert_eq!((status, reason), ("False", NODES_REJECTED));
    assert!(
        message.contains("g1 (received_bits_per_second = 9G is below 9.5G"),
        "{message}"
    );

    // Each node on its own reference: accepted.
    let (summary, (status, _, _)) = judged(&set, &classes, |node| match node {
        "s1" => 5.0,
        _ => 10.0,
    });
    assert!(summary.passed(), "{}", summary.headline());
    assert_eq!(status, "True");
}

#[test]
fn a_slowed_node_is_named_as_the_only_outlier_and_a_uniform_fleet_names_none() {
    let set = spec(json!({"selector": {"matchLabels": {}}}), json!({}));
    let five = plain(&["n1", "n2", "n3", "n4", "n5"]);
    let jitter = |node: &str| 10.0 + f64::from(node.as_bytes()[1] % 3) * 0.05;
    let (summary, (_, reason, message)) =
        judged(
            &set,
            &five,
            |node| if node == "n3" { 6.0 } else { jitter(node) },
        );
    let outliers: Vec<&str> = summary
        .worst_nodes
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert_eq!(outliers, ["n3"], "{}", summary.headline());
    assert_eq!(summary.outliers, 1);
    assert_eq!(reason, NODES_REJECTED);
    assert!(message.contains("n3 (outlier: 40.3% worse"), "{message}");

    let (uniform, (status, _, _)) = judged(&set, &five, jitter);
    assert_eq!(uniform.outliers, 0, "{}", uniform.headline());
    assert_eq!(status, "True");
    // Identical nodes have no spread at all: 2.5% below them is noise, not a fault
    // (`minDeviation`, 10% by default).
    let (flat, _) = judged(&set, &five, |node| if node == "n3" { 9.75 } else { 10.0 });
    assert_eq!(flat.outliers, 0, "{}", flat.headline());
}

#[test]
fn each_node_and_node_pairs_exclude_each_other() {
    let both: BenchmarkSetSpec = serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
        "permutations": {"nodePairs": {"selector": {"matchLabels": {}}},
                         "eachNode": {"selector": {"matchLabels": {}}}},
    }))
    .expect("well-formed");
    let error = set::expand_on("both", &both, Some(&plain(&["a", "b"]))).unwrap_err();
    assert_eq!(error.field_path(), "spec.permutations.eachNode", "{error}");
    assert!(error.to_string().contains("not both"), "{error}");
    // Admission says the same, at the same path.
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
        "metadata": {"name": "both"},
        "spec": serde_json::to_value(&both).expect("serializes"),
    });
    let errors = set::parse_object(&object).expect_err("refused at admission");
    assert!(
        errors
            .iter()
            .any(|e| e.path == "spec.permutations.eachNode" && e.message.contains("not both")),
        "{errors:?}"
    );
}

/// The field paths of the errors admission (schema and CEL) gives an each-node set.
fn admission_errors(each_node: Value) -> Vec<String> {
    let object = json!({
        "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
        "metadata": {"name": "rack"},
        "spec": {"template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
                 "permutations": {"eachNode": each_node}},
    });
    match set::parse_object(&object) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.into_iter().map(|e| e.path).collect(),
    }
}

#[test]
fn bad_references_and_roles_are_refused_with_their_field_paths() {
    let reference = |fields: Value| {
        let mut base = json!({"metric": "received_bits_per_second"});
        if let (Some(base), Some(fields)) = (base.as_object_mut(), fields.as_object()) {
            base.extend(fields.clone());
        }
        json!({"selector": {"matchLabels": {}}, "references": [base]})
    };
    let at = "spec.permutations.eachNode.references[0]";
    // Admission (schema and CEL).
    for (fields, path) in [
        (json!({"value": 1e9}), format!("{at}.value")),
        (
            json!({"value": 1e9, "lowerTolerance": 0.05}),
            format!("{at}.lowerTolerance"),
        ),
        (
            json!({"value": 1e9, "lowerTolerance": -0.1, "withinFractionOfMedian": 0.1}),
            at.to_owned(),
        ),
        (
            json!({"withinFractionOfMedian": 0.1, "upperTolerance": 0.1}),
            format!("{at}.lowerTolerance"),
        ),
        (
            json!({"withinFractionOfMedian": 1.5}),
            format!("{at}.withinFractionOfMedian"),
        ),
    ] {
        let errors = admission_errors(reference(fields.clone()));
        assert!(errors.contains(&path), "{fields}: {errors:?}");
    }
    assert!(admission_errors(reference(json!({"value": 1e9, "lowerTolerance": -0.05}))).is_empty());

    // Expansion: what needs the kind, and specs that skipped admission.
    let nodes = plain(&["a"]);
    let expand = |each_node: Value| {
        set::expand_on("rack", &spec(each_node, json!({})), Some(&nodes)).unwrap_err()
    };
    let mut unknown = reference(json!({"value": 1.0, "lowerTolerance": -0.1}));
    unknown["references"][0]["metric"] = json!("hpl_gflops");
    let error = expand(unknown);
    assert_eq!(error.field_path(), format!("{at}.metric"), "{error}");
    assert!(
        error.to_string().contains("received_bits_per_second"),
        "{error}"
    );
    assert_eq!(
        expand(reference(json!({"value": 1.0}))).field_path(),
        format!("{at}.value")
    );
    assert_eq!(
        expand(reference(
            json!({"withinFractionOfMedian": 0.1, "value": 1.0, "lowerTolerance": -0.1})
        ))
        .field_path(),
        at
    );
    let role = expand(json!({"selector": {"matchLabels": {}}, "roles": ["client", "worker"]}));
    assert_eq!(
        role.field_path(),
        "spec.permutations.eachNode.roles[1]",
        "{role}"
    );

    let none = set::expand_on(
        "rack",
        &spec(
            json!({"selector": {"matchLabels": {"rack": "r9"}}}),
            json!({}),
        ),
        Some(&NodeLabels::new()),
    )
    .unwrap_err();
    assert_eq!(none.field_path(), "spec.permutations.eachNode.selector");
    assert!(
        none.to_string()
            .contains("selector rack=r9 matches no node"),
        "{none}"
    );

    let needed = set::expand(
        "rack",
        &spec(json!({"selector": {"matchLabels": {}}}), json!({})),
    )
    .unwrap_err();
    assert!(matches!(needed, SetError::NodesNeeded { .. }), "{needed:?}");
    assert_eq!(needed.field_path(), "spec.permutations.eachNode");
}
