//! BenchmarkSet expansion: counts, names, merge, and rejection with field paths.

use perfsweep_benchmarks::formats::yaml;
use perfsweep_benchmarks::input::document::{self, Checked, DocumentError};
use perfsweep_benchmarks::set::{self, BenchmarkSetSpec, SetError};
use proptest::prelude::*;
use serde_json::{Value, json};

fn spec(value: Value) -> BenchmarkSetSpec {
    serde_json::from_value(value).expect("a well-formed set spec")
}

fn iperf_set(product: Value, repetitions: u32) -> BenchmarkSetSpec {
    spec(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 5}},
        "repetitions": repetitions,
        "permutations": {"product": product},
    }))
}

fn set_error(text: &str) -> DocumentError {
    let doc = yaml::documents(text).expect("valid YAML").remove(0);
    document::check(doc).expect_err("the set must be rejected")
}

#[test]
fn product_times_repetitions_with_merged_specs() {
    let set = iperf_set(json!({"streams": [1, 2, 4], "reverse": [false, true]}), 2);
    let expansion = set::expand("sweep", &set).expect("valid");
    assert_eq!(expansion.permutation_count, 6);
    assert_eq!(expansion.children.len(), 12);
    let first = &expansion.children[0];
    assert_eq!(first.spec["duration"], 5);
    assert_eq!(first.repetition, 0);
    // Repetition-major: every permutation once before any repeats.
    let reps: Vec<u32> = expansion.children.iter().map(|c| c.repetition).collect();
    assert_eq!(reps, vec![0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    // Same permutation, different repetition: same case, different name.
    assert_eq!(expansion.children[0].case_id, expansion.children[6].case_id);
    assert_ne!(expansion.children[0].name, expansion.children[6].name);
}

#[test]
fn explicit_permutations_add_to_the_product() {
    let set = spec(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
        "permutations": {
            "product": {"streams": [1, 2]},
            "explicit": [{"streams": 8, "protocol": "UDP", "bitrate": "1G"}]
        }
    }));
    let expansion = set::expand("mixed", &set).expect("valid");
    assert_eq!(expansion.children.len(), 3);
    assert_eq!(expansion.children[2].spec["protocol"], "UDP");
}

#[test]
fn dotted_product_keys_reach_nested_fields() {
    let set = iperf_set(json!({r"resources.limits.nvidia\.com/gpu": [1, 2]}), 1);
    let expansion = set::expand("gpus", &set).expect("valid");
    assert_eq!(
        expansion.children[1].spec["resources"]["limits"]["nvidia.com/gpu"],
        2
    );
}

#[test]
fn names_are_stable_and_depend_only_on_the_child_spec() {
    let a = set::expand("s", &iperf_set(json!({"streams": [1, 2]}), 1)).expect("valid");
    let b = set::expand("s", &iperf_set(json!({"streams": [2, 1]}), 1)).expect("valid");
    let names = |e: &set::Expansion| {
        let mut n: Vec<String> = e.children.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(
        names(&a),
        names(&b),
        "reordering values keeps every child's name"
    );
    let c = set::expand("s", &iperf_set(json!({"streams": [1, 2, 3]}), 1)).expect("valid");
    assert!(
        names(&a).iter().all(|n| names(&c).contains(n)),
        "adding a value keeps the others"
    );
}

#[test]
fn an_out_of_range_permutation_names_its_path_and_permutation() {
    let error = set_error(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata: {name: bad}
spec:
  template: {apiVersion: perfsweep.io/v1alpha1, kind: IPerf, spec: {duration: 10}}
  permutations:
    product:
      streams: [1, 0]
",
    );
    let text = error.to_string();
    assert!(text.contains("permutation 1 (streams=0)"), "{text}");
    assert!(
        text.contains("spec.permutations.product[streams][1]"),
        "{text}"
    );
    assert!(text.contains("out of range"), "{text}");
}

#[test]
fn a_template_error_points_at_the_template_once() {
    let error = set_error(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata: {name: bad}
spec:
  template: {apiVersion: perfsweep.io/v1alpha1, kind: IPerf, spec: {durration: 10}}
  permutations: {product: {streams: [1, 2, 3]}}
",
    );
    let messages = error.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    assert!(
        messages[0].contains("spec.template.spec.durration: unknown field"),
        "{messages:?}"
    );
}

#[test]
fn rejects_what_admission_cannot_fully_check() {
    let cases = [
        (json!({"streams": []}), "spec.permutations.product[streams]"),
        (
            json!({"streams": ["many"]}),
            "spec.permutations.product[streams][0]",
        ),
    ];
    for (product, path) in cases {
        let err = set::expand("s", &iperf_set(product, 1)).expect_err("invalid");
        assert!(err.to_string().contains(path), "{err}");
    }
    let unknown_kind =
        spec(json!({"template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "Nope"}}));
    assert!(matches!(
        set::expand("s", &unknown_kind),
        Err(SetError::UnknownKind { .. })
    ));
}

#[test]
fn the_permutation_cap_is_checked_before_expanding() {
    let huge: Vec<u32> = (1..=100).collect();
    let set = iperf_set(json!({"streams": huge, "duration": huge, "omit": huge}), 1);
    let err = set::expand("s", &set).expect_err("a million children");
    assert!(
        matches!(
            err,
            SetError::TooManyChildren {
                count: 1_000_000,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.field_path(), "spec.maxChildren");
}

#[test]
fn names_too_long_for_pods_are_rejected() {
    let set = iperf_set(json!({"streams": [1]}), 1);
    let long = "a".repeat(40);
    let err = set::expand(&long, &set).expect_err("too long");
    assert_eq!(err.field_path(), "metadata.name");
    assert!(err.to_string().contains("at most 35"), "{err}");
}

#[test]
fn duplicate_permutations_are_rejected() {
    let set = spec(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
        "permutations": {"explicit": [{"streams": 2}, {"streams": 2}]}
    }));
    let err = set::expand("dup", &set).expect_err("duplicate");
    assert!(
        err.to_string().contains("same benchmark as permutation 0"),
        "{err}"
    );
}

#[test]
fn set_level_schema_and_cel_errors_name_the_field() {
    let error = set_error(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata: {name: bad}
spec:
  template: {apiVersion: perfsweep.io/v1alpha1, kind: IPerf}
  repetitions: 0
  maxParalel: 2
",
    );
    let text = error.to_string();
    assert!(
        text.contains("spec.repetitions: 0 is out of range"),
        "{text}"
    );
    assert!(text.contains("spec.maxParalel: unknown field"), "{text}");
}

#[test]
fn a_single_benchmark_is_checked_with_cel() {
    let doc = json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "OpenFOAM",
        "metadata": {"name": "of"}, "spec": {"numProcs": 10, "numNodes": 4}});
    let err = document::check(doc).expect_err("10 ranks over 4 nodes");
    assert!(
        err.to_string()
            .contains("spec.numProcs: numProcs must be a multiple of numNodes"),
        "{err}"
    );
    let ok = json!({"apiVersion": "perfsweep.io/v1alpha1", "kind": "OpenFOAM",
        "metadata": {"name": "of"}, "spec": {"numProcs": 12, "numNodes": 4}});
    assert!(matches!(
        document::check(ok).map(|d| d.checked),
        Ok(Checked::Benchmark { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn count_uniqueness_and_stability(
        streams in proptest::collection::btree_set(1u32..=128, 1..6),
        durations in proptest::collection::btree_set(1u32..=600, 1..5),
        repetitions in 1u32..4,
    ) {
        let streams: Vec<u32> = streams.into_iter().collect();
        let durations: Vec<u32> = durations.into_iter().collect();
        let set = iperf_set(json!({"streams": streams, "duration": durations}), repetitions);
        let first = set::expand("prop", &set).expect("valid");
        let expected = streams.len() * durations.len() * repetitions as usize;
        prop_assert_eq!(first.children.len(), expected);
        let mut names: Vec<&str> = first.children.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        prop_assert_eq!(names.len(), expected);
        for name in &names {
            prop_assert!(name.len() <= 50);
        }
        let again = set::expand("prop", &set).expect("valid");
        let a: Vec<&str> = first.children.iter().map(|c| c.name.as_str()).collect();
        let b: Vec<&str> = again.children.iter().map(|c| c.name.as_str()).collect();
        prop_assert_eq!(a, b);
    }
}
