//! `perfsweep run --local`: run benchmarks and sweeps on this machine, from the same
//! plans the operator runs in pods.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use perfsweep_benchmarks::document::{self, Checked};
use perfsweep_benchmarks::record::{
    self, BenchmarkIdentity, Environment, Evidence, RecordOutcome, ResultRecord,
};
use perfsweep_benchmarks::registry::KindInfo;
use serde_json::{Map, Value, json};

use super::files;
use crate::local::{self, LocalOptions, LocalOutcome, LocalRun, table};
use perfsweep_benchmarks::kinds::llm::chart;
use perfsweep_benchmarks::kinds::llm::result::LLMInferenceResult;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Benchmark or BenchmarkSet files (`-` for stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Run on this machine as local processes over loopback (no cluster).
    #[arg(long)]
    pub local: bool,
    /// With --local: stand-in nodes for a node-pair set (`permutations.nodePairs`),
    /// each played by a loopback address of its own (`a,b,c`, or `@FILE`).
    #[arg(long, value_name = "NODES", requires = "local")]
    pub nodes: Option<String>,
    /// Write one JSON result record per run, and the raw evidence, into this directory
    /// (default for cluster runs, and for local runs with `--export`:
    /// `perfsweep-results/<run id>`).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
    /// Namespace to run in; created (and removed afterwards) when it does not exist.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Keep the benchmarks (and a created namespace) in the cluster afterwards.
    #[arg(long)]
    pub keep: bool,
    #[command(flatten)]
    pub export: super::export::ExportArgs,
}

/// One benchmark to run, from a set or on its own.
struct Job {
    kind: &'static KindInfo,
    name: String,
    spec: Value,
    set: Option<String>,
    case_id: Option<String>,
    repetition: Option<u32>,
    permutation: Map<String, Value>,
}

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Before anything runs: a bad export URI or missing credentials fail now.
    let sink = args.export.open()?;
    let run_id = run_id();
    let default_output = || PathBuf::from("perfsweep-results").join(&run_id);
    if args.local {
        let nodes = super::run_fleet::loopback_nodes(args.nodes.as_deref())?;
        let jobs = load_jobs(&args.files, &nodes)?;
        let options = LocalOptions::from_current_exe()?;
        // Exporting needs the local copy: it is written first and kept.
        let output = match (&args.output, &sink) {
            (Some(dir), _) => Some(dir.clone()),
            (None, Some(_)) => Some(default_output()),
            (None, None) => None,
        };
        let code = run_jobs(&jobs, &options, &nodes, output.as_deref(), &run_id).await?;
        return Ok(match (sink, output) {
            (Some(sink), Some(dir)) => {
                if super::export::export(&dir, &sink, &args.export).await {
                    code
                } else {
                    ExitCode::FAILURE
                }
            }
            _ => code,
        });
    }
    let artifacts = args.output.clone().unwrap_or_else(default_output);
    let target = crate::cluster::Target {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        keep: args.keep,
        poll: std::time::Duration::from_secs(2),
    };
    let documents = checked_documents(&args.files, Some(&target)).await?;
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let mut succeeded =
        crate::cluster::run(documents, &target, &artifacts, &run_id, interrupt).await?;
    if let Some(sink) = sink {
        succeeded &= super::export::export(&artifacts, &sink, &args.export).await;
    }
    Ok(if succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Checks every document. A node-pair set is expanded over the nodes its selector
/// matches in `cluster`, as the operator will expand it.
async fn checked_documents(
    paths: &[PathBuf],
    cluster: Option<&crate::cluster::Target>,
) -> anyhow::Result<Vec<Checked>> {
    let mut documents = Vec::new();
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let nodes = match (cluster, node_pair_selector(&input.document)) {
                (Some(target), Some(selector)) => {
                    Some(crate::cluster::node_names(target, &selector).await?)
                }
                _ => None,
            };
            let checked =
                document::check_with_nodes(input.document, nodes.as_deref()).map_err(|error| {
                    anyhow::anyhow!(
                        "{location}: {what}:\n  - {}",
                        error.messages().join("\n  - ")
                    )
                })?;
            if checked.converted_group {
                eprintln!(
                    "note: {location}: converted apiVersion group perftest.stackhpc.com to perfsweep.io"
                );
            }
            documents.push(checked.checked);
        }
    }
    Ok(documents)
}

/// The label selector of a set's `permutations.nodePairs`, if it has one.
fn node_pair_selector(document: &Value) -> Option<String> {
    let pairs = document.pointer("/spec/permutations/nodePairs")?;
    let labels = pairs
        .pointer("/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    Some(labels)
}

fn load_jobs(
    paths: &[PathBuf],
    nodes: &crate::local::nodes::LoopbackNodes,
) -> anyhow::Result<Vec<Job>> {
    let node_names = (!nodes.is_empty()).then(|| nodes.names());
    let mut jobs = Vec::new();
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let checked = document::check_with_nodes(input.document, node_names.as_deref())
                .map_err(|error| {
                    anyhow::anyhow!(
                        "{location}: {what}:\n  - {}",
                        error.messages().join("\n  - ")
                    )
                })?;
            match checked.checked {
                Checked::Set {
                    name, expansion, ..
                } => {
                    for child in &expansion.children {
                        jobs.push(Job {
                            kind: expansion.kind,
                            name: child.name.clone(),
                            spec: Value::Object((*child.spec).clone()),
                            set: Some(name.clone()),
                            case_id: Some(child.case_id.clone()),
                            repetition: Some(child.repetition),
                            permutation: (*child.permutation).clone(),
                        });
                    }
                }
                Checked::Benchmark { name, kind, object } => jobs.push(Job {
                    kind,
                    name,
                    spec: object.get("spec").cloned().unwrap_or_else(|| json!({})),
                    set: None,
                    case_id: None,
                    repetition: None,
                    permutation: Map::new(),
                }),
            }
        }
    }
    Ok(jobs)
}

async fn run_jobs(
    jobs: &[Job],
    options: &LocalOptions,
    nodes: &crate::local::nodes::LoopbackNodes,
    output: Option<&Path>,
    run_id: &str,
) -> anyhow::Result<ExitCode> {
    if let Some(dir) = output {
        std::fs::create_dir_all(dir.join("evidence"))
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    eprintln!(
        "run {run_id}: {} benchmark(s), one at a time on this machine (the local backend never runs benchmarks concurrently)",
        jobs.len()
    );
    let mut rows = Vec::with_capacity(jobs.len());
    let mut chart_points = Vec::new();
    let mut failures = 0;
    let mut runs = Vec::with_capacity(jobs.len());
    for (position, job) in jobs.iter().enumerate() {
        let mut ignored = local::ignored_settings(&job.spec);
        if !nodes.is_empty() {
            // Honoured: each placed role binds to its stand-in node's address.
            ignored.retain(|setting| *setting != "placement");
        }
        if !ignored.is_empty() {
            eprintln!(
                "  note: {} ignored locally (loopback, one machine): {}",
                job.name,
                ignored.join(", ")
            );
        }
        eprint!(
            "[{}/{}] {} {} ... ",
            position + 1,
            jobs.len(),
            job.kind.kind,
            describe(job)
        );
        let job_options = super::run_fleet::options_for(options, nodes, &job.spec);
        let run = local::run(job.kind, &job.name, &job.spec, &job_options).await;
        let shown = match &run.outcome {
            LocalOutcome::Succeeded { summary, .. } => summary.clone(),
            LocalOutcome::Failed { reason, message } => {
                failures += 1;
                format!("FAILED {reason}: {message}")
            }
        };
        eprintln!("{shown} ({:.1}s)", run.elapsed.as_secs_f64());
        if let Some(dir) = output {
            write_record(dir, run_id, job, &run)?;
        }
        if let LocalOutcome::Succeeded { result, .. } = &run.outcome
            && job.kind.kind == "LLMInference"
            && let Ok(result) = serde_json::from_value::<LLMInferenceResult>(result.clone())
        {
            chart_points.extend(chart::points(&result));
        }
        rows.push(table::Row {
            name: job.name.clone(),
            permutation: describe_permutation(&job.permutation),
            repetition: job.repetition.map_or_else(|| "-".into(), |r| r.to_string()),
            result: match &run.outcome {
                LocalOutcome::Succeeded { summary, .. } => summary.clone(),
                LocalOutcome::Failed { reason, .. } => format!("FAILED ({reason})"),
            },
            seconds: run.elapsed.as_secs_f64(),
        });
        runs.push(run);
    }
    print!("{}", table::render(&rows));
    if !chart_points.is_empty() {
        print!("\n{}", chart::render(&chart_points, 60, 14));
    }
    if !nodes.is_empty() {
        let pairs: Vec<super::run_fleet::PairRun> = jobs
            .iter()
            .zip(&runs)
            .map(|(job, run)| super::run_fleet::PairRun {
                kind: job.kind,
                name: &job.name,
                spec: &job.spec,
                run,
            })
            .collect();
        if let Some(verdict) = super::run_fleet::verdict(&pairs) {
            println!("\n{}", verdict.headline());
        }
    }
    if let Some(dir) = output {
        eprintln!("records and evidence written to {}", dir.display());
    }
    eprintln!("{} succeeded, {failures} failed", jobs.len() - failures);
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn describe(job: &Job) -> String {
    match (&job.set, job.repetition) {
        (Some(_), Some(rep)) => format!(
            "{} ({}, repetition {rep})",
            job.name,
            describe_permutation(&job.permutation)
        ),
        _ => job.name.clone(),
    }
}

fn describe_permutation(permutation: &Map<String, Value>) -> String {
    if permutation.is_empty() {
        return "-".into();
    }
    permutation
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn write_record(dir: &Path, run_id: &str, job: &Job, run: &LocalRun) -> anyhow::Result<()> {
    let report = run.report.as_ref();
    let evidence =
        report.and_then(|r| Some((r.raw_output.as_ref()?, r.raw_output_sha256.as_ref()?)));
    let evidence = match evidence {
        Some((raw, sha256)) => {
            let path = record::evidence_path(sha256);
            std::fs::write(dir.join(&path), raw)
                .with_context(|| format!("cannot write evidence {}", dir.join(&path).display()))?;
            Some(Evidence {
                sha256: sha256.clone(),
                bytes: raw.len() as u64,
                path,
            })
        }
        None => None,
    };
    let record = ResultRecord {
        schema_version: record::SCHEMA_VERSION.into(),
        run_id: run_id.into(),
        benchmark: BenchmarkIdentity {
            kind: job.kind.kind.into(),
            name: job.name.clone(),
            set: job.set.clone(),
            benchmark_case_id: job.case_id.clone(),
            repetition: job.repetition,
            permutation: job.permutation.clone(),
        },
        workload_spec_digest: perfsweep_benchmarks::set::expand::workload_spec_digest(
            job.kind.kind,
            &job.spec,
        ),
        spec: job.spec.clone(),
        backend: "local".into(),
        environment: Environment {
            hosts: report.and_then(|r| r.host.clone()).into_iter().collect(),
            perfsweep_version: env!("CARGO_PKG_VERSION").into(),
            command: report.map(|r| r.command.clone()).unwrap_or_default(),
            tool_versions: report
                .and_then(|r| r.tool_version.as_ref())
                .map(|found| [(found.tool.clone(), found.version.clone())].into())
                .unwrap_or_default(),
            ..Default::default()
        },
        started_at: run.started_at.to_string(),
        finished_at: run.finished_at.to_string(),
        outcome: match &run.outcome {
            LocalOutcome::Succeeded { summary, result } => RecordOutcome::Succeeded {
                summary: summary.clone(),
                result: result.clone(),
                metrics: job.kind.metrics(result),
            },
            LocalOutcome::Failed { reason, message } => RecordOutcome::Failed {
                reason: reason.clone(),
                message: message.clone(),
            },
        },
        evidence,
        artifact_manifest_digest: None,
    }
    .complete();
    let path = dir.join(format!("{}.json", job.name));
    let text = serde_json::to_string_pretty(&record)?;
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// A run id that sorts by time: `20261121T234501Z-1a2b3c`.
fn run_id() -> String {
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let entropy = (now.subsec_nanosecond() as u64) ^ u64::from(std::process::id());
    format!("{stamp}-{:06x}", entropy & 0xff_ffff)
}
