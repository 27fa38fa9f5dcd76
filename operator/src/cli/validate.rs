//! `perfsweep validate`: offline checks with the same schema and CEL rules as admission,
//! plus every child a set expands to.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

use perfsweep_benchmarks::input::document::{self, Checked};

use super::files;

pub fn run(paths: &[PathBuf], nodes: Option<&[String]>) -> anyhow::Result<ExitCode> {
    let mut failed = 0usize;
    let mut passed = 0usize;
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            match document::check_with_nodes(input.document, nodes) {
                Ok(checked) => {
                    passed += 1;
                    files::tell_conversions(&location, &checked);
                    println!("ok    {location}: {what}: {}", summary(&checked.checked));
                }
                Err(error) => {
                    failed += 1;
                    eprintln!("error {location}: {what}:");
                    for message in error.messages() {
                        eprintln!("  - {message}");
                    }
                }
            }
        }
    }
    eprintln!("{passed} valid, {failed} invalid");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The node names of `--nodes`: `a,b,c`, or `@FILE` with names separated by commas or
/// whitespace. A `node/` prefix (`kubectl get nodes -o name`) is dropped.
pub fn node_list(arg: Option<&str>) -> anyhow::Result<Option<Vec<String>>> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the node list --nodes {arg}"))?,
        None => arg.to_owned(),
    };
    let nodes: Vec<String> = text
        .split(|c: char| c == ',' || c.is_whitespace())
        .map(|name| name.strip_prefix("node/").unwrap_or(name))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(!nodes.is_empty(), "--nodes {arg}: no node names");
    Ok(Some(nodes))
}

fn summary(checked: &Checked) -> String {
    match checked {
        Checked::Set { set, expansion, .. } => format!(
            "{} permutations × {} repetitions = {} {} children",
            expansion.permutation_count,
            set.spec.repetitions,
            expansion.children.len(),
            expansion.kind.kind
        ),
        Checked::Benchmark { kind, .. } => format!("valid {}", kind.kind),
    }
}
