//! `perfsweep render`: the child benchmark CRs a set expands to and, with `--objects`,
//! the Kubernetes objects each benchmark runs as (PodGroup, Service, pods, ...), exactly
//! as the operator would create them.

use std::path::PathBuf;
use std::process::ExitCode;

use perfsweep_benchmarks::input::document::{self, Checked};
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::render::{self, BenchmarkRef};
use perfsweep_benchmarks::set::expand::SetRef;
use serde_json::Value;

use super::files;

/// Stands in for the uid the API server would give the benchmark.
const OFFLINE_UID: &str = "00000000-0000-0000-0000-000000000000";

pub fn run(
    paths: &[PathBuf],
    namespace: Option<&str>,
    with_objects: bool,
    nodes: Option<&perfsweep_benchmarks::set::NodeLabels>,
) -> anyhow::Result<ExitCode> {
    let mut objects: Vec<Value> = Vec::new();
    let mut failed = false;
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let checked = match document::check_on_nodes(input.document, nodes) {
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
            files::tell_conversions(&location, &checked);
            // The Secret inline credentials moved into goes first: the benchmark needs it.
            objects.extend(checked.secrets.iter().cloned());
            let benchmarks: Vec<(&'static KindInfo, Value)> = match checked.checked {
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
                    expansion
                        .children
                        .iter()
                        .map(|child| (expansion.kind, child.to_object(expansion.kind, &owner)))
                        .collect()
                }
                Checked::Benchmark {
                    mut object, kind, ..
                } => {
                    if let Some(ns) = namespace {
                        object["metadata"]["namespace"] = Value::String(ns.to_owned());
                    }
                    vec![(kind, object)]
                }
            };
            for (kind, object) in benchmarks {
                if with_objects {
                    match kubernetes_objects(kind, &object, namespace) {
                        Ok(rendered) => {
                            objects.push(object);
                            objects.extend(rendered);
                        }
                        Err(message) => {
                            failed = true;
                            eprintln!(
                                "error {location}: {} {}: {message}",
                                kind.kind,
                                name_of(&object)
                            );
                        }
                    }
                } else {
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
        perfsweep_benchmarks::formats::yaml::to_multi_document(&objects)?
    );
    Ok(ExitCode::SUCCESS)
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The objects the operator would create for one benchmark.
fn kubernetes_objects(
    kind: &KindInfo,
    object: &Value,
    namespace: Option<&str>,
) -> Result<Vec<Value>, String> {
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let plan = kind.plan(&spec).map_err(|e| e.to_string())?;
    let reference = BenchmarkRef {
        kind: kind.kind.to_owned(),
        name: name_of(object).to_owned(),
        namespace: namespace
            .or_else(|| object["metadata"]["namespace"].as_str())
            .unwrap_or("default")
            .to_owned(),
        uid: OFFLINE_UID.to_owned(),
    };
    let rendered = render::render(&reference, &spec, &plan).map_err(|e| e.to_string())?;
    rendered.objects().map_err(|e| e.to_string())
}
