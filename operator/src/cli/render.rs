//! `perfsweep render`: the child benchmark CRs a set expands to.

use std::path::PathBuf;
use std::process::ExitCode;

use perfsweep_benchmarks::document::{self, Checked};
use perfsweep_benchmarks::set::expand::SetRef;
use serde_json::Value;

use super::files;

pub fn run(paths: &[PathBuf], namespace: Option<&str>) -> anyhow::Result<ExitCode> {
    let mut objects: Vec<Value> = Vec::new();
    let mut failed = false;
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let checked = match document::check(input.document) {
                Ok(checked) => checked,
                Err(error) => {
                    failed = true;
                    eprintln!("error {location}: {what}:");
                    for message in error.messages() {
                        eprintln!("  - {message}");
                    }
                    continue;
                }
            };
            if checked.converted_group {
                eprintln!(
                    "note: {location}: converted apiVersion group perftest.stackhpc.com to perfsweep.io"
                );
            }
            match checked.checked {
                Checked::Set {
                    name,
                    namespace: own_namespace,
                    expansion,
                    ..
                } => {
                    let owner = SetRef {
                        name,
                        namespace: namespace.map(str::to_owned).or(own_namespace),
                        uid: None,
                    };
                    objects.extend(
                        expansion
                            .children
                            .iter()
                            .map(|child| child.to_object(expansion.kind, &owner)),
                    );
                }
                Checked::Benchmark { mut object, .. } => {
                    if let Some(ns) = namespace {
                        object["metadata"]["namespace"] = Value::String(ns.to_owned());
                    }
                    objects.push(object);
                }
            }
        }
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    print!(
        "{}",
        perfsweep_benchmarks::yaml::to_multi_document(&objects)?
    );
    Ok(ExitCode::SUCCESS)
}
