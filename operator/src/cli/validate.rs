//! `perfsweep validate`: offline checks with the same schema and CEL rules as admission,
//! plus every child a set expands to.

use std::path::PathBuf;
use std::process::ExitCode;

use std::collections::BTreeMap;

use anyhow::Context as _;
use perfsweep_benchmarks::set::NodeLabels;

use perfsweep_benchmarks::input::document::{self, Checked};

use super::files;

pub fn run(paths: &[PathBuf], nodes: Option<&NodeLabels>) -> anyhow::Result<ExitCode> {
    let mut failed = 0usize;
    let mut passed = 0usize;
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            match document::check_on_nodes(input.document, nodes) {
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

/// A node of `--nodes`: its name and the labels given with it.
pub type NodeArg = (String, BTreeMap<String, String>);

/// The nodes of `--nodes`: `a,b,c`, or `@FILE` with entries separated by commas or
/// whitespace. A `node/` prefix (`kubectl get nodes -o name`) is dropped. An entry may
/// carry labels after its name, `:`-separated (`c:perfsweep.io/node-class=gold:zone=b`;
/// neither names nor labels contain `:`), for `eachNode.references` to select by. In the
/// order given, duplicates kept (for the caller to refuse).
pub fn node_list(arg: Option<&str>) -> anyhow::Result<Option<Vec<NodeArg>>> {
    let Some(arg) = arg else {
        return Ok(None);
    };
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the node list --nodes {arg}"))?,
        None => arg.to_owned(),
    };
    let mut nodes = Vec::new();
    for entry in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|entry| !entry.is_empty())
    {
        let mut parts = entry.split(':');
        let name = parts.next().unwrap_or_default();
        let name = name.strip_prefix("node/").unwrap_or(name);
        anyhow::ensure!(
            !name.is_empty(),
            "--nodes {entry:?}: no node name before ':'"
        );
        let mut labels = BTreeMap::new();
        for label in parts {
            let (key, value) = label
                .split_once('=')
                .with_context(|| format!("--nodes {entry:?}: label {label:?} is not key=value"))?;
            anyhow::ensure!(
                !key.is_empty(),
                "--nodes {entry:?}: label {label:?} has no key"
            );
            labels.insert(key.to_owned(), value.to_owned());
        }
        nodes.push((name.to_owned(), labels));
    }
    anyhow::ensure!(!nodes.is_empty(), "--nodes {arg}: no node names");
    Ok(Some(nodes))
}

/// `--nodes` as the nodes a set expands over (names sorted, the last of a duplicate
/// wins).
pub fn labelled(nodes: Option<&[NodeArg]>) -> Option<NodeLabels> {
    nodes.map(|nodes| nodes.iter().cloned().collect())
}

fn summary(checked: &Checked) -> String {
    match checked {
        Checked::Set { set, cases, .. } => format!(
            "{} permutations × {} repetitions = {} {} children",
            cases.permutation_count,
            set.spec.repetitions,
            cases.child_count(),
            cases.kind.kind
        ),
        Checked::Benchmark { kind, .. } => format!("valid {}", kind.kind),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_carry_labels_after_their_names() {
        let nodes = node_list(Some("node/a,b:perfsweep.io/node-class=gold:zone=z1 c"))
            .expect("parses")
            .expect("some nodes");
        let names: Vec<&str> = nodes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(nodes[0].1.is_empty());
        assert_eq!(nodes[1].1["perfsweep.io/node-class"], "gold");
        assert_eq!(nodes[1].1["zone"], "z1");
        let labelled = labelled(Some(&nodes)).expect("labelled");
        assert_eq!(labelled["b"].len(), 2);

        let bad = node_list(Some("a:gold")).expect_err("not key=value");
        assert!(
            bad.to_string().contains("label \"gold\" is not key=value"),
            "{bad}"
        );
        assert!(node_list(Some(":k=v")).is_err(), "a label without a node");
        assert!(node_list(None).expect("no flag").is_none());
    }
}
