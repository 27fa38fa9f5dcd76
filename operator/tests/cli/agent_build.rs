//! The agent build (`cargo build -p perfsweep --no-default-features`), which every
//! benchmark image carries and the README's main job runs, leaves the warehouse's SQL
//! engine out: read from Cargo's own resolution of the workspace (`cargo tree`, offline).

use std::collections::BTreeSet;
use std::process::Command;

/// The crates perfsweep depends on (normal dependencies, transitively) with `features`.
fn perfsweep_dependencies(features: &[&str]) -> BTreeSet<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.toml");
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path", manifest])
        .args(["-p", "perfsweep", "-e", "normal", "--prefix", "none"])
        .args(["--format", "{p}"])
        .args(features)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo tree -p perfsweep {features:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

const SQL_ENGINE: [&str; 4] = ["perfsweep-warehouse", "datafusion", "arrow", "sqlparser"];

#[test]
fn the_agent_build_has_no_sql_engine_and_the_default_build_has_the_warehouse() {
    let full = perfsweep_dependencies(&[]);
    for name in ["perfsweep-warehouse", "datafusion", "sqlparser"] {
        assert!(full.contains(name), "the default build lacks {name}");
    }
    let agent = perfsweep_dependencies(&["--no-default-features"]);
    // What the agent needs is there (the check would pass vacuously on an empty tree).
    for name in ["kube", "tokio", "perfsweep-llm", "perfsweep-benchmarks"] {
        assert!(agent.contains(name), "the agent build lacks {name}");
    }
    let found: Vec<&String> = agent
        .iter()
        .filter(|name| SQL_ENGINE.iter().any(|engine| name.starts_with(engine)))
        .collect();
    assert!(found.is_empty(), "the agent build depends on {found:?}");
    println!(
        "agent build: {} crates, default build: {} ({} for the warehouse)",
        agent.len(),
        full.len(),
        full.difference(&agent).count()
    );
}
