//! The migration promise: every kube-perftest example validates and renders, with its
//! group unchanged or changed to perfsweep.io, into (product + explicit) × repetitions
//! children.

use std::path::{Path, PathBuf};

use perfsweep_benchmarks::formats::yaml;
use perfsweep_benchmarks::input::document::{self, Checked};
use serde_json::Value;

fn examples() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/kube-perftest");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).expect("testdata/kube-perftest exists") {
        let dir = dir.expect("readable directory entry").path();
        if dir.is_dir() {
            for file in std::fs::read_dir(&dir).expect("readable example directory") {
                let file = file.expect("readable file entry").path();
                if file.extension().is_some_and(|e| e == "yaml") {
                    files.push(file);
                }
            }
        }
    }
    files.sort();
    files
}

/// Children a set should expand to, computed from the raw YAML independently of the
/// expansion code.
fn expected_children(doc: &Value) -> usize {
    let spec = &doc["spec"];
    let product = spec
        .pointer("/permutations/product")
        .and_then(Value::as_object);
    let product_size = match product {
        Some(p) if !p.is_empty() => p
            .values()
            .map(|v| v.as_array().map_or(0, Vec::len))
            .product(),
        _ => 0,
    };
    let explicit = spec
        .pointer("/permutations/explicit")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let repetitions = spec["repetitions"].as_u64().unwrap_or(1) as usize;
    (product_size + explicit).max(1) * repetitions
}

fn check_all(convert: bool) {
    let files = examples();
    assert_eq!(files.len(), 25, "kube-perftest ships 25 example files");
    let (mut sets, mut singles) = (0, 0);
    for file in files {
        let text = std::fs::read_to_string(&file).expect("example is readable");
        let text = if convert {
            text.replace("perftest.stackhpc.com", "perfsweep.io")
        } else {
            text
        };
        let docs = yaml::documents(&text).expect("example is valid YAML");
        assert_eq!(docs.len(), 1, "{}", file.display());
        let raw = docs.into_iter().next().expect("one document");
        let expected = expected_children(&raw);
        let checked = document::check(raw.clone())
            .unwrap_or_else(|e| panic!("{} is rejected: {e}", file.display()));
        assert_eq!(checked.converted_group, !convert, "{}", file.display());
        match checked.checked {
            Checked::Set { cases, .. } => {
                let expansion = cases.into_expansion();
                sets += 1;
                assert_eq!(expansion.children.len(), expected, "{}", file.display());
                let mut names: Vec<&str> =
                    expansion.children.iter().map(|c| c.name.as_str()).collect();
                names.sort_unstable();
                names.dedup();
                assert_eq!(
                    names.len(),
                    expected,
                    "child names are unique in {}",
                    file.display()
                );
            }
            Checked::Benchmark { kind, .. } => {
                singles += 1;
                assert_eq!(kind.kind, raw["kind"].as_str().unwrap_or_default());
            }
        }
    }
    assert_eq!((sets, singles), (24, 1));
}

#[test]
fn every_example_validates_with_the_group_changed() {
    check_all(true);
}

#[test]
fn every_example_validates_with_the_group_unchanged() {
    check_all(false);
}

#[test]
fn kube_perftest_rw_readwrite_means_rw() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/kube-perftest/filesystem/fio-local-path-set.yaml");
    let text = std::fs::read_to_string(path).expect("example is readable");
    let raw = yaml::documents(&text).expect("valid YAML").remove(0);
    let Checked::Set { cases, .. } = document::check(raw).expect("valid set").checked else {
        panic!("expected a set");
    };
    let expansion = cases.into_expansion();
    let quirky = expansion
        .children
        .iter()
        .find(|c| c.permutation["rw"] == "rw,readwrite")
        .expect("a permutation with rw,readwrite");
    let spec: perfsweep_benchmarks::kinds::fio::FioSpec =
        serde_json::from_value(Value::Object((*quirky.spec).clone())).expect("typed spec");
    assert_eq!(spec.rw.as_fio(), "rw");
}
