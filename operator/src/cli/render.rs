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
/// Stands in for the uid the API server would give a set: its children's pods carry it
/// for the set's one NetworkPolicy.
const OFFLINE_SET_UID: &str = "00000000-0000-0000-0000-000000000001";

pub fn run(
    paths: &[PathBuf],
    namespace: Option<&str>,
    with_objects: bool,
    nodes: Option<&perfsweep_benchmarks::set::NodeLabels>,
) -> anyhow::Result<ExitCode> {
    // Each document is written as it is made, to a scratch file that reaches standard
    // output only when every input rendered: memory stays flat in the number of
    // children (a 100,000-child set with --objects is about a GB of YAML), and a failed
    // render prints nothing a pipe to `kubectl apply` could half apply.
    let mut out = Spool::new()?;
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
            for secret in &checked.secrets {
                out.write(secret)?;
            }
            // A set's one NetworkPolicy, made before its first child, as the operator does.
            if with_objects
                && let Checked::Set {
                    name,
                    namespace: own_namespace,
                    cases,
                    ..
                } = &checked.checked
                && cases.child_count() > 0
            {
                let policy = render::network_policy::for_set(
                    name,
                    namespace.or(own_namespace.as_deref()).unwrap_or("default"),
                    OFFLINE_SET_UID,
                );
                out.write(&serde_json::to_value(policy)?)?;
            }
            let mut render_one = |kind: &'static KindInfo,
                                  object: Value,
                                  covering_set: Option<&str>|
             -> anyhow::Result<()> {
                if with_objects {
                    match kubernetes_objects(kind, &object, namespace, covering_set) {
                        Ok(rendered) => {
                            out.write(&object)?;
                            for rendered in &rendered {
                                out.write(rendered)?;
                            }
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
                    out.write(&object)?;
                }
                Ok(())
            };
            match checked.checked {
                Checked::Set {
                    name,
                    namespace: own_namespace,
                    cases,
                    ..
                } => {
                    let owner = SetRef {
                        name,
                        namespace: namespace.map(str::to_owned).or(own_namespace),
                        uid: None,
                    };
                    // Its children have no NetworkPolicy of their own: the set's admits them.
                    let covering_set = with_objects.then_some(OFFLINE_SET_UID);
                    // One child at a time, made as it is written.
                    for child in cases.children() {
                        render_one(
                            cases.kind,
                            child.to_object(cases.kind, &owner),
                            covering_set,
                        )?;
                    }
                }
                Checked::Benchmark {
                    mut object, kind, ..
                } => {
                    if let Some(ns) = namespace {
                        object["metadata"]["namespace"] = Value::String(ns.to_owned());
                    }
                    render_one(kind, object, None)?;
                }
            }
        }
    }
    if failed {
        return Ok(ExitCode::FAILURE);
    }
    out.copy_to_stdout()?;
    Ok(ExitCode::SUCCESS)
}

/// YAML documents written to a scratch file as they come, then to standard output at
/// once; the file is removed on every way out.
struct Spool {
    path: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl Spool {
    fn new() -> anyhow::Result<Self> {
        use anyhow::Context as _;
        let path = std::env::temp_dir().join(format!(
            "perfsweep-render-{}-{}.yaml",
            std::process::id(),
            crate::token::random().map_err(|e| anyhow::anyhow!("{e}"))?
        ));
        let file = std::fs::OpenOptions::new()
            .write(true)
            .read(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating the scratch file {}", path.display()))?;
        Ok(Self {
            path,
            file: std::io::BufWriter::new(file),
        })
    }

    fn write(&mut self, value: &Value) -> anyhow::Result<()> {
        use std::io::Write as _;
        let text = perfsweep_benchmarks::formats::yaml::to_string(value)?;
        self.file.write_all(b"---\n")?;
        self.file.write_all(text.as_bytes())?;
        if !text.ends_with('\n') {
            self.file.write_all(b"\n")?;
        }
        Ok(())
    }

    fn copy_to_stdout(mut self) -> anyhow::Result<()> {
        use std::io::{Seek as _, Write as _};
        self.file.flush()?;
        let file = self.file.get_mut();
        file.seek(std::io::SeekFrom::Start(0))?;
        let stdout = std::io::stdout();
        let mut stdout = stdout.lock();
        std::io::copy(file, &mut stdout)?;
        stdout.flush()?;
        Ok(())
    }
}

impl Drop for Spool {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// The objects the operator would create for one benchmark (a child of a set whose one
/// NetworkPolicy admits its pods when `covering_set` names the set's uid).
fn kubernetes_objects(
    kind: &KindInfo,
    object: &Value,
    namespace: Option<&str>,
    covering_set: Option<&str>,
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
    let rendered = match covering_set {
        Some(set_uid) => rendered.covered_by_set(set_uid),
        None => rendered,
    };
    rendered.objects().map_err(|e| e.to_string())
}
