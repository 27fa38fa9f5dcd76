//! The crate split keeps its promises, read from Cargo's own resolution of the workspace
//! (`cargo tree`, offline: it reads Cargo.lock and the manifests):
//! - perfsweep-llm (with its engine) builds without the operator's cluster and
//!   object-storage stack: no kube, k8s-openapi, object_store or parquet;
//! - perfsweep-benchmarks, which takes perfsweep-llm's pure part, builds no async
//!   runtime, HTTP or TLS stack: no tokio, hyper, rustls or tiktoken.

use std::collections::BTreeSet;
use std::process::Command;

/// The names of the crates `package` depends on (normal dependencies, transitively).
fn normal_dependencies(package: &str) -> BTreeSet<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", package, "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}"])
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let names: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains(package),
        "{package} missing from its own tree: {names:?}"
    );
    names
}

/// The crates among `names` whose name starts with one of `prefixes`.
fn matching<'a>(names: &'a BTreeSet<String>, prefixes: &[&str]) -> Vec<&'a String> {
    names
        .iter()
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p)))
        .collect()
}

#[test]
fn the_llm_engine_builds_without_kube_object_store_or_parquet() {
    let names = normal_dependencies("perfsweep-llm");
    // The engine is in the tree (the check would pass vacuously on an empty one).
    for engine in ["tokio", "hyper", "rustls", "tiktoken-rs"] {
        assert!(names.contains(engine), "{engine} missing: {names:?}");
    }
    let found = matching(&names, &["kube", "k8s-openapi", "object_store", "parquet"]);
    assert!(found.is_empty(), "perfsweep-llm depends on {found:?}");
}

#[test]
fn the_pure_benchmarks_crate_builds_no_async_http_or_tls_stack() {
    let names = normal_dependencies("perfsweep-benchmarks");
    assert!(names.contains("perfsweep-llm"), "{names:?}");
    let found = matching(&names, &["tokio", "hyper", "rustls", "tiktoken"]);
    assert!(
        found.is_empty(),
        "perfsweep-benchmarks depends on {found:?}"
    );
}
