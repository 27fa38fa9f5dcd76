//! Node-pair sweeps: `permutations.nodePairs` expanded over a given node list.

use perfsweep_benchmarks::set::{self, BenchmarkSetSpec, SetError};
use serde_json::{Value, json};

fn spec(node_pairs: Value, product: Value) -> BenchmarkSetSpec {
    serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 5}},
        "permutations": {"product": product, "nodePairs": node_pairs},
    }))
    .expect("a well-formed set spec")
}

fn nodes(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn all_pairs() -> Value {
    json!({"selector": {"matchLabels": {"bench": "yes"}}})
}

/// (server node, client node) of each permutation, in order.
fn placements(expansion: &set::Expansion) -> Vec<(String, String)> {
    expansion
        .children
        .iter()
        .filter(|c| c.repetition == 0)
        .map(|c| {
            let node = |role: &str| {
                c.spec["placement"][role]["nodes"][0]
                    .as_str()
                    .unwrap()
                    .to_owned()
            };
            (node("server"), node("client"))
        })
        .collect()
}

#[test]
fn all_pairs_are_unordered_distinct_pairs_in_name_order() {
    let set = spec(all_pairs(), json!({}));
    for n in 2..=6usize {
        let names: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
        let expansion = set::expand_with_nodes("pairs", &set, Some(&names)).expect("valid");
        assert_eq!(expansion.permutation_count, n * (n - 1) / 2);
    }
    // Listed in any order, with a duplicate: sorted, deduplicated.
    let expansion =
        set::expand_with_nodes("pairs", &set, Some(&nodes(&["c", "a", "b", "a"]))).expect("valid");
    assert_eq!(
        placements(&expansion),
        [("a", "b"), ("a", "c"), ("b", "c")].map(|(s, c)| (s.to_owned(), c.to_owned()))
    );
    let first = &expansion.children[0];
    assert_eq!(first.permutation["placement.server.nodes"], json!(["a"]));
    assert_eq!(first.permutation["placement.client.nodes"], json!(["b"]));
    assert_eq!(first.spec["duration"], json!(5));
}

#[test]
fn against_reference_pairs_every_other_node_with_it() {
    let set = spec(
        json!({"selector": {"matchLabels": {}}, "mode": "AgainstReference", "reference": "ref"}),
        json!({}),
    );
    let expansion =
        set::expand_with_nodes("ref", &set, Some(&nodes(&["z", "ref", "a", "m"]))).expect("valid");
    assert_eq!(expansion.permutation_count, 3);
    assert_eq!(
        placements(&expansion),
        [("ref", "a"), ("ref", "m"), ("ref", "z")].map(|(s, c)| (s.to_owned(), c.to_owned()))
    );

    let unused = spec(
        json!({"selector": {"matchLabels": {}}, "reference": "ref"}),
        json!({}),
    );
    let error = set::expand_with_nodes("ref", &unused, Some(&nodes(&["a", "ref"]))).unwrap_err();
    assert_eq!(error.field_path(), "spec.permutations.nodePairs.reference");

    let missing = set::expand_with_nodes("ref", &set, Some(&nodes(&["a", "b"]))).unwrap_err();
    assert_eq!(
        missing.field_path(),
        "spec.permutations.nodePairs.reference"
    );
    assert!(
        missing.to_string().contains("\"ref\" is not among"),
        "{missing}"
    );
}

#[test]
fn pairs_are_a_product_dimension_with_explicit_roles() {
    let set = spec(
        json!({"selector": {"matchLabels": {"bench": "yes"}}, "roles": ["client", "server"]}),
        json!({"streams": [1, 4]}),
    );
    let expansion =
        set::expand_with_nodes("mixed", &set, Some(&nodes(&["a", "b", "c"]))).expect("valid");
    assert_eq!(expansion.permutation_count, 2 * 3);
    let first = &expansion.children[0];
    // Roles swapped: the client is on the first node of the pair.
    assert_eq!(first.spec["placement"]["client"]["nodes"], json!(["a"]));
    assert_eq!(first.spec["placement"]["server"]["nodes"], json!(["b"]));
    assert_eq!(first.spec["streams"], json!(1));
    assert_eq!(expansion.children[3].spec["streams"], json!(4));
}

#[test]
fn names_are_stable_when_nodes_are_added() {
    let set = spec(all_pairs(), json!({}));
    let names = |list: &[&str]| -> Vec<String> {
        set::expand_with_nodes("pairs", &set, Some(&nodes(list)))
            .expect("valid")
            .children
            .into_iter()
            .map(|c| c.name)
            .collect()
    };
    let three = names(&["a", "b", "c"]);
    assert_eq!(three, names(&["c", "b", "a"]));
    let four = names(&["a", "b", "c", "d"]);
    assert!(
        three.iter().all(|n| four.contains(n)),
        "{three:?} ⊄ {four:?}"
    );
}

#[test]
fn too_few_nodes_and_bad_roles_are_invalid() {
    let set = spec(all_pairs(), json!({}));
    let one = set::expand_with_nodes("pairs", &set, Some(&nodes(&["a"]))).unwrap_err();
    assert_eq!(one.field_path(), "spec.permutations.nodePairs.selector");
    assert!(
        one.to_string()
            .contains("selector bench=yes matches 1 node (a)"),
        "{one}"
    );
    let none = set::expand_with_nodes("pairs", &set, Some(&[])).unwrap_err();
    assert!(
        none.to_string().contains("matches 0 nodes (none)"),
        "{none}"
    );

    let needed = set::expand("pairs", &set).unwrap_err();
    assert!(matches!(needed, SetError::NodesNeeded { .. }), "{needed:?}");
    assert!(needed.to_string().contains("--nodes"), "{needed}");

    let bad_role = spec(
        json!({"selector": {"matchLabels": {}}, "roles": ["server", "worker"]}),
        json!({}),
    );
    let error = set::expand_with_nodes("pairs", &bad_role, Some(&nodes(&["a", "b"]))).unwrap_err();
    assert_eq!(error.field_path(), "spec.permutations.nodePairs.roles[1]");

    let pytorch: BenchmarkSetSpec = serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "PyTorch", "spec": {}},
        "permutations": {"nodePairs": {"selector": {"matchLabels": {}}}},
    }))
    .expect("well-formed");
    let error = set::expand_with_nodes("pt", &pytorch, Some(&nodes(&["a", "b"]))).unwrap_err();
    assert!(error.to_string().contains("needs two"), "{error}");
}

#[test]
fn the_cap_counts_pairs() {
    let mut set = spec(all_pairs(), json!({"streams": [1, 2]}));
    set.max_children = 5;
    let names: Vec<String> = (0..4).map(|i| format!("n{i}")).collect();
    let error = set::expand_with_nodes("pairs", &set, Some(&names)).unwrap_err();
    assert!(
        matches!(error, SetError::TooManyChildren { count: 12, .. }),
        "{error:?}"
    );
}
