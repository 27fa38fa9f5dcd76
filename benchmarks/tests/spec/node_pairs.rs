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
    // Listed in any order, with a duplicate: sorted, deduplicated. In round order (3
    // nodes: one pair a round, one node sitting out), the first role on the node earlier
    // in name order.
    let expansion =
        set::expand_with_nodes("pairs", &set, Some(&nodes(&["c", "a", "b", "a"]))).expect("valid");
    assert_eq!(
        placements(&expansion),
        [("b", "c"), ("a", "c"), ("a", "b")].map(|(s, c)| (s.to_owned(), c.to_owned()))
    );
    assert_eq!(expansion.rounds, 3);
    let first = &expansion.children[0];
    assert_eq!(first.round, Some(0));
    assert_eq!(first.permutation["placement.server.nodes"], json!(["b"]));
    assert_eq!(first.permutation["placement.client.nodes"], json!(["c"]));
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
    assert_eq!(first.spec["placement"]["client"]["nodes"], json!(["b"]));
    assert_eq!(first.spec["placement"]["server"]["nodes"], json!(["c"]));
    assert_eq!(first.spec["streams"], json!(1));
    assert_eq!(expansion.children[3].spec["streams"], json!(4));
    // Each permutation's pairs have rounds of their own: a round never has a pair twice.
    let rounds: Vec<u32> = expansion.children.iter().filter_map(|c| c.round).collect();
    assert_eq!(rounds, [0, 1, 2, 3, 4, 5]);
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

/// The schedule's promise, for every fleet size from 2 to 200 nodes: each unordered pair
/// exactly once, in n−1 rounds (n even) or n rounds (n odd), no node twice in a round.
#[test]
fn round_robin_covers_every_pair_once_in_disjoint_rounds_for_2_to_200_nodes() {
    use std::collections::BTreeSet;
    for n in 2..=200usize {
        let rounds = set::rounds::all_pairs(n);
        let expected_rounds = if n.is_multiple_of(2) { n - 1 } else { n };
        assert_eq!(rounds.len(), expected_rounds, "n={n}");
        let mut seen = BTreeSet::new();
        for (index, round) in rounds.iter().enumerate() {
            assert_eq!(round.len(), n / 2, "n={n} round {index}: {round:?}");
            let mut busy = BTreeSet::new();
            for &(a, b) in round {
                assert!(a < n && b < n && a != b, "n={n}: bad pair ({a}, {b})");
                assert!(
                    busy.insert(a) && busy.insert(b),
                    "n={n} round {index}: a node twice"
                );
                assert!(seen.insert((a.min(b), a.max(b))), "n={n}: ({a}, {b}) twice");
            }
        }
        assert_eq!(seen.len(), n * (n - 1) / 2, "n={n}: every pair");
    }
}

/// Through the expansion: children carry their round (label) and pair (placement), and
/// children of one round share no node, for every mode and both directions.
#[test]
fn children_of_a_round_share_no_node_in_every_mode() {
    use std::collections::{BTreeMap, BTreeSet};
    let modes = [
        (json!({"selector": {"matchLabels": {}}}), 7, 21, 7),
        (json!({"selector": {"matchLabels": {}}}), 8, 28, 7),
        (
            json!({"selector": {"matchLabels": {}}, "directional": true}),
            6,
            30,
            10,
        ),
        (
            json!({"selector": {"matchLabels": {}}, "mode": "Ring"}),
            6,
            6,
            2,
        ),
        (
            json!({"selector": {"matchLabels": {}}, "mode": "Ring"}),
            5,
            5,
            3,
        ),
        (
            json!({"selector": {"matchLabels": {}}, "mode": "AgainstReference", "reference": "n0"}),
            5,
            4,
            4,
        ),
    ];
    for (config, n, pairs, rounds) in modes {
        let names: Vec<String> = (0..n).map(|i| format!("n{i}")).collect();
        let set = spec(config.clone(), json!({}));
        let expansion = set::expand_with_nodes("fleet", &set, Some(&names)).expect("valid");
        assert_eq!(expansion.children.len(), pairs, "{config}");
        assert_eq!(expansion.rounds, rounds, "{config}");
        let mut by_round: BTreeMap<u32, BTreeSet<String>> = BTreeMap::new();
        let mut directed = BTreeSet::new();
        for child in &expansion.children {
            let round = child.round.expect("a round");
            let object = child.to_object(expansion.kind, &set::expand::SetRef::default());
            assert_eq!(
                object["metadata"]["labels"]["perfsweep.io/round"],
                json!(round.to_string())
            );
            let [a, b] = child.pair.clone().expect("a pair");
            assert_eq!(child.spec["placement"]["server"]["nodes"], json!([a]));
            assert_eq!(child.spec["placement"]["client"]["nodes"], json!([b]));
            let busy = by_round.entry(round).or_default();
            assert!(
                busy.insert(a.clone()) && busy.insert(b.clone()),
                "{config}: round {round}"
            );
            assert!(directed.insert((a, b)), "{config}: a pair twice");
        }
        let order: Vec<u32> = expansion.children.iter().filter_map(|c| c.round).collect();
        assert!(
            order.windows(2).all(|w| w[0] <= w[1]),
            "{config}: children in round order"
        );
    }
}

/// An MPI kind's pair is its two workers, one on each node (the ranks run there); the
/// launcher, which only starts them, goes where the scheduler puts it. Pinning the
/// launcher and both workers' role to one node each (the first two roles) once put both
/// ranks on one node, measuring shared memory instead of the link.
#[test]
fn an_mpi_pair_pins_one_worker_to_each_node() {
    let set: BenchmarkSetSpec = serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "MPIPingPong", "spec": {"maxlog": 4}},
        "permutations": {"nodePairs": all_pairs()},
    }))
    .expect("a well-formed set spec");
    let expansion =
        set::expand_with_nodes("mpi", &set, Some(&nodes(&["a", "b", "c"]))).expect("valid");
    let mut pinned: Vec<String> = expansion
        .children
        .iter()
        .map(|c| c.spec["placement"]["worker"]["nodes"].to_string())
        .collect();
    pinned.sort();
    assert_eq!(pinned, [r#"["a","b"]"#, r#"["a","c"]"#, r#"["b","c"]"#]);
    assert!(
        expansion
            .children
            .iter()
            .all(|c| c.spec["placement"].get("launcher").is_none()),
        "the launcher is not pinned"
    );
}
