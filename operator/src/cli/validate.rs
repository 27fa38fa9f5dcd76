//! `perfsweep validate`: offline checks with the same schema and CEL rules as admission,
//! plus every child a set expands to.

use std::path::PathBuf;
use std::process::ExitCode;

use perfsweep_benchmarks::document::{self, Checked};

use super::files;

pub fn run(paths: &[PathBuf]) -> anyhow::Result<ExitCode> {
    let mut failed = 0usize;
    let mut passed = 0usize;
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            match document::check(input.document) {
                Ok(checked) => {
                    passed += 1;
                    if checked.converted_group {
                        eprintln!(
                            "note: {location}: converted apiVersion group perftest.stackhpc.com to perfsweep.io"
                        );
                    }
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
