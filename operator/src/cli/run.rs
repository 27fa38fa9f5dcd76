//! `perfsweep run --local`: run benchmarks and sweeps on this machine, from the same
//! plans the operator runs in pods.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use perfsweep_benchmarks::input::document::{self, Checked};
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::results::record::{self, BenchmarkIdentity, RecordOutcome, ResultRecord};
use serde_json::{Map, Value, json};

use super::files;
use crate::local::sweep::SetRun;
use crate::local::{self, LocalOptions, LocalOutcome, LocalRun, table};
use crate::output_dir::{self, Existing};
use crate::verdict::{Acceptance, Ended, Signals, Stop, Tally};
use perfsweep_benchmarks::kinds::llm::chart;
use perfsweep_benchmarks::kinds::llm::result::LLMInferenceResult;

/// The exit codes, for `perfsweep run --help` (the same list as in `crate::verdict`).
const EXIT_CODES: &str = "Exit codes:
  0    every benchmark ran; the results were accepted, or had no acceptance criteria
  1    failed to run: a benchmark failed, or the run could not proceed
  2    the command line was wrong
  3    every benchmark ran, and the results are NOT ACCEPTED
  130  interrupted by Ctrl-C (SIGINT); 143 by SIGTERM; 129 by SIGHUP. The records of
       benchmarks that had finished are kept.";

#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct RunArgs {
    /// Benchmark or BenchmarkSet files (`-` for stdin).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Run on this machine as local processes over loopback (no cluster).
    #[arg(long)]
    pub local: bool,
    /// With --local: stand-in nodes for a node-pair or each-node set
    /// (`permutations.nodePairs`, `eachNode`), each played by a loopback address of its
    /// own (`a,b,c`, or `@FILE`). Labels for `eachNode.references` follow the name:
    /// `a,b,c:perfsweep.io/node-class=gold` (`:`-separated `key=value`s).
    #[arg(long, value_name = "NODES", requires = "local")]
    pub nodes: Option<String>,
    /// Write one JSON result record per run, and the raw evidence, into this directory
    /// (default for cluster runs, and for local runs with `--export`:
    /// `perfsweep-results/<run id>`).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// When the output directory already holds result records: keep them, and write
    /// this run into `<output>/<run id>/`.
    #[arg(long, conflicts_with = "overwrite")]
    pub append: bool,
    /// When the output directory already holds result records: remove them (records,
    /// evidence and appended runs) before this run writes its own.
    #[arg(long)]
    pub overwrite: bool,
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
    /// An each-node child's node and the references it is judged against.
    node: Option<String>,
    references: Vec<perfsweep_benchmarks::judging::nodes::AppliedReference>,
    /// Export credentials moved out of the spec's inline parameters (OME's form).
    credentials: std::collections::BTreeMap<String, String>,
    /// Its set (an index into the run's sets) and its index among the set's children.
    in_set: Option<(usize, usize)>,
}

impl RunArgs {
    fn existing(&self) -> Existing {
        match (self.append, self.overwrite) {
            (true, _) => Existing::Append,
            (_, true) => Existing::Overwrite,
            _ => Existing::Refuse,
        }
    }
}

/// How long processes get between SIGTERM and SIGKILL when a run ends them.
const STOP_GRACE: Duration = Duration::from_secs(3);

pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // Before anything runs: a bad export URI or missing credentials fail now.
    let sink = args.export.open()?;
    let run_id = run_id();
    let default_output = || PathBuf::from("perfsweep-results").join(&run_id);
    if args.local {
        let nodes = super::run_fleet::loopback_nodes(args.nodes.as_deref())?;
        let Jobs { jobs, sets } = load_jobs(&args.files, &nodes)?;
        // Every tool of every benchmark, once, before the first one starts.
        if let Some(missing) = missing_tools(&jobs) {
            anyhow::bail!("{missing}; nothing was run");
        }
        // Without --export, the benchmarks' own outputLocation (OME's form) is used.
        let sink = match sink {
            Some(sink) => Some(sink),
            None => super::export::from_specs(
                jobs.iter().map(|job| (&job.spec, &job.credentials)),
                &args.export,
            )?,
        };
        let options = LocalOptions::from_current_exe()?;
        // Exporting needs the local copy: it is written first and kept.
        let output = match (&args.output, &sink) {
            (Some(dir), _) => Some(dir.clone()),
            (None, Some(_)) => Some(default_output()),
            (None, None) => None,
        };
        let output = output
            .map(|dir| output_dir::prepare(&dir, args.existing(), &run_id))
            .transpose()?;
        let ended = run_jobs(&jobs, sets, &options, &nodes, output.as_deref(), &run_id).await?;
        let mut code = ended.exit_code();
        // An interrupted run exports nothing: the user asked it to stop.
        if let (Some(sink), Some(dir), None) = (sink, &output, ended.stopped)
            && !super::export::export(dir, &sink, &args.export).await
        {
            code = crate::verdict::EXIT_FAILED_TO_RUN;
        }
        return Ok(ExitCode::from(code));
    }
    let target = crate::cluster::Target {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
        keep: args.keep,
        poll: std::time::Duration::from_secs(2),
    };
    let documents = checked_documents(&args.files, Some(&target)).await?;
    // Before anything is applied: a directory with another run's records is refused.
    let artifacts = output_dir::prepare(
        &args.output.clone().unwrap_or_else(default_output),
        args.existing(),
        &run_id,
    )?;
    let mut signals = Signals::catch().context("catching signals")?;
    let ended =
        crate::cluster::run(documents, &target, &artifacts, &run_id, signals.next()).await?;
    let mut code = ended.exit_code();
    if let (Some(sink), None) = (sink, ended.stopped)
        && !super::export::export(&artifacts, &sink, &args.export).await
    {
        code = crate::verdict::EXIT_FAILED_TO_RUN;
    }
    Ok(ExitCode::from(code))
}

/// The programs missing from PATH for any of `jobs`, with their Debian packages.
fn missing_tools(jobs: &[Job]) -> Option<String> {
    let plans: Vec<_> = jobs
        .iter()
        .filter_map(|job| job.kind.plan(&job.spec).ok())
        .collect();
    local::missing_tools_in(&plans)
}

/// Checks every document. A node-pair or each-node set is expanded over the nodes its
/// selector matches in `cluster` (with their labels), as the operator will expand it.
async fn checked_documents(
    paths: &[PathBuf],
    cluster: Option<&crate::cluster::Target>,
) -> anyhow::Result<Vec<Checked>> {
    let mut documents = Vec::new();
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let nodes = match (cluster, node_selector(&input.document)) {
                (Some(target), Some(selector)) => Some(
                    crate::cluster::nodes(target, &selector)
                        .await?
                        .into_iter()
                        .collect::<perfsweep_benchmarks::set::NodeLabels>(),
                ),
                _ => None,
            };
            let checked =
                document::check_on_nodes(input.document, nodes.as_ref()).map_err(|error| {
                    anyhow::anyhow!(
                        "{location}: {what}:\n  - {}",
                        error.messages().join("\n  - ")
                    )
                })?;
            files::tell_conversions(&location, &checked);
            if !checked.secrets.is_empty() {
                anyhow::bail!(
                    "{location}: {what}: its inline credentials need a Secret in the cluster: \
                     create both with `perfsweep render {location} | kubectl apply -f -` \
                     (run --local uses them directly)"
                );
            }
            documents.push(checked.checked);
        }
    }
    Ok(documents)
}

/// The label selector of a set's `permutations.nodePairs` or `eachNode`, if it has one.
fn node_selector(document: &Value) -> Option<String> {
    let pairs = document
        .pointer("/spec/permutations/nodePairs")
        .or_else(|| document.pointer("/spec/permutations/eachNode"))?;
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

/// The benchmarks of a run, and the sets they come from.
struct Jobs {
    jobs: Vec<Job>,
    sets: Vec<SetRun>,
}

fn load_jobs(
    paths: &[PathBuf],
    nodes: &crate::local::nodes::LoopbackNodes,
) -> anyhow::Result<Jobs> {
    let labelled = (!nodes.is_empty()).then(|| nodes.labelled());
    let mut jobs = Vec::new();
    let mut sets = Vec::new();
    for (count, inputs) in files::read_all(paths)? {
        for input in inputs {
            let location = input.location(count);
            let what = document::describe(&input.document);
            let checked =
                document::check_on_nodes(input.document, labelled.as_ref()).map_err(|error| {
                    anyhow::anyhow!(
                        "{location}: {what}:\n  - {}",
                        error.messages().join("\n  - ")
                    )
                })?;
            files::tell_conversions(&location, &checked);
            let credentials = super::export::secret_data(&checked.secrets);
            match checked.checked {
                Checked::Set {
                    name, cases, set, ..
                } => {
                    let expansion = cases.into_expansion();
                    let set_index = sets.len();
                    for (index, child) in expansion.children.iter().enumerate() {
                        jobs.push(Job {
                            kind: expansion.kind,
                            name: child.name.clone(),
                            spec: Value::Object((*child.spec).clone()),
                            set: Some(name.clone()),
                            case_id: Some(child.case_id.clone()),
                            repetition: Some(child.repetition),
                            permutation: (*child.permutation).clone(),
                            node: child.node.as_ref().map(|n| n.node.clone()),
                            references: child
                                .node
                                .as_ref()
                                .map(|n| n.references.clone())
                                .unwrap_or_default(),
                            credentials: credentials.clone(),
                            in_set: Some((set_index, index)),
                        });
                    }
                    sets.push(SetRun::new(
                        &name,
                        set.spec.failure_policy,
                        perfsweep_benchmarks::set::fleet::outlier_rule(&set.spec),
                        expansion,
                    ));
                }
                Checked::Benchmark { name, kind, object } => jobs.push(Job {
                    kind,
                    name,
                    spec: object.get("spec").cloned().unwrap_or_else(|| json!({})),
                    set: None,
                    case_id: None,
                    repetition: None,
                    permutation: Map::new(),
                    node: None,
                    references: Vec::new(),
                    credentials,
                    in_set: None,
                }),
            }
        }
    }
    Ok(Jobs { jobs, sets })
}

/// What a local run has done so far: what the summary prints.
#[derive(Default)]
struct Progress {
    rows: Vec<table::Row>,
    chart_points: Vec<chart::Point>,
    tally: Tally,
    recorded: usize,
    /// The sets the jobs come from, as their children finish.
    sets: Vec<SetRun>,
}

async fn run_jobs(
    jobs: &[Job],
    sets: Vec<SetRun>,
    options: &LocalOptions,
    nodes: &crate::local::nodes::LoopbackNodes,
    output: Option<&Path>,
    run_id: &str,
) -> anyhow::Result<Ended> {
    // Tools an agent leaves behind are re-parented to this process, not to init, so
    // the run finds and ends them (see `local::tree`).
    if let Err(error) = local::tree::become_subreaper() {
        eprintln!("warning: cannot become the subreaper of the run's processes: {error}");
    }
    let mut signals = Signals::catch().context("catching SIGINT, SIGTERM and SIGHUP")?;
    eprintln!(
        "run {run_id}: {} benchmark(s), one at a time on this machine (the local backend never runs benchmarks concurrently)",
        jobs.len()
    );
    let mut progress = Progress {
        sets,
        ..Progress::default()
    };
    let stopped = run_each(
        jobs,
        options,
        nodes,
        output,
        run_id,
        &mut signals,
        &mut progress,
    )
    .await;
    // Every way out (done, a failure, a signal) ends every process the run started.
    local::tree::end(&BTreeSet::new(), STOP_GRACE).await;
    let stopped = stopped?;

    print!("{}", table::render(&progress.rows));
    if !progress.chart_points.is_empty() {
        print!("\n{}", chart::render(&progress.chart_points, 60, 14));
    }
    let mut tally = progress.tally;
    // Each set's phase, fleet verdict and Accepted condition, as the BenchmarkSet
    // controller would report them; a set its fleet verdict does not accept makes the
    // run NOT ACCEPTED too, so the summary line and the exit code say what the set says.
    for set in &progress.sets {
        if let Some(fleet) = set.fleet() {
            println!("\n{}", fleet.headline());
        }
        if let Some(nodes) = set.nodes() {
            println!("\n{}", nodes.headline());
        }
        for line in set.lines() {
            eprintln!("{line}");
        }
        if set.acceptance().is_some_and(|(_, reason, _)| {
            perfsweep_benchmarks::judging::acceptance::is_fleet_reason(reason)
        }) {
            tally.fleets_not_accepted += 1;
        }
    }
    if let Some(dir) = output {
        eprintln!(
            "records and evidence of {} benchmark(s) written to {}",
            progress.recorded,
            dir.display()
        );
    }
    eprintln!("{} succeeded, {} failed", tally.succeeded, tally.failed);
    if let Some(line) = tally.verdict_line() {
        eprintln!("{line}");
    }
    if let Some((stop, during)) = &stopped {
        let kept = match output {
            Some(dir) => format!(
                "kept the records of the {} finished benchmark(s) in {}",
                progress.recorded,
                dir.display()
            ),
            None => "no --output was given, so no records were written".to_owned(),
        };
        eprintln!(
            "interrupted by {} during {during}: stopped it and every process of the run; {kept}; {} of {} benchmark(s) not finished",
            stop.name(),
            jobs.len() - progress.rows.len(),
            jobs.len()
        );
    }
    Ok(Ended {
        tally,
        stopped: stopped.map(|(stop, _)| stop),
    })
}

/// Runs the jobs in order until done or a signal arrives: the signal and the benchmark
/// it stopped. The benchmark in progress is dropped, which kills its agents' groups.
async fn run_each(
    jobs: &[Job],
    options: &LocalOptions,
    nodes: &crate::local::nodes::LoopbackNodes,
    output: Option<&Path>,
    run_id: &str,
    signals: &mut Signals,
    progress: &mut Progress,
) -> anyhow::Result<Option<(Stop, String)>> {
    for (position, job) in jobs.iter().enumerate() {
        // The set's failurePolicy, decided as the BenchmarkSet controller decides it.
        if let Some((set, index)) = job.in_set
            && let Some(set) = progress.sets.get(set)
            && !set.may_start(index)
        {
            eprintln!(
                "[{}/{}] {} {} not started: set {} stopped on a failure (failurePolicy: Stop)",
                position + 1,
                jobs.len(),
                job.kind.kind,
                describe(job),
                set.name
            );
            continue;
        }
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
        let run = tokio::select! {
            run = local::run(job.kind, &job.name, &job.spec, &job_options) => run,
            stop = signals.next() => {
                eprintln!("{}", stop.name());
                return Ok(Some((stop, job.name.clone())));
            }
        };
        if let Some((set, index)) = job.in_set
            && let Some(set) = progress.sets.get_mut(set)
        {
            set.finished(index, &run.outcome);
        }
        let verdict = match &run.outcome {
            LocalOutcome::Succeeded { acceptance, .. } => {
                Acceptance::judged(&job.spec, Some(acceptance.as_ref()))
            }
            LocalOutcome::Failed(_) => Acceptance::judged(&job.spec, None),
        };
        progress.tally.add(run.outcome.result().is_some(), &verdict);
        let shown = match &run.outcome {
            LocalOutcome::Succeeded { summary, .. } => summary.clone(),
            LocalOutcome::Failed(failure) => format!("FAILED {failure}"),
        };
        let judged = match &verdict {
            Acceptance::Accepted => " accepted".to_owned(),
            Acceptance::Rejected(why) => format!(" REJECTED: {why}"),
            Acceptance::NoCriteria | Acceptance::NotJudged => String::new(),
        };
        eprintln!("{shown} ({:.1}s){judged}", run.elapsed.as_secs_f64());
        if let Some(dir) = output {
            write_record(dir, run_id, job, &run)?;
            progress.recorded += 1;
        }
        if let LocalOutcome::Succeeded { result, .. } = &run.outcome
            && job.kind.kind == "LLMInference"
            && let Ok(result) = serde_json::from_value::<LLMInferenceResult>(result.clone())
        {
            progress.chart_points.extend(chart::points(&result));
        }
        progress.rows.push(table::Row {
            name: job.name.clone(),
            permutation: describe_permutation(&job.permutation),
            repetition: job.repetition.map_or_else(|| "-".into(), |r| r.to_string()),
            result: match &run.outcome {
                LocalOutcome::Succeeded { summary, .. } => summary.clone(),
                LocalOutcome::Failed(failure) => format!("FAILED ({})", failure.reason),
            },
            verdict: verdict.cell().to_owned(),
            seconds: run.elapsed.as_secs_f64(),
        });
    }
    Ok(None)
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
    let evidence = match report {
        Some(report) => crate::records::write_evidence(dir, report).with_context(|| {
            format!(
                "cannot write the evidence of {} in {}",
                job.name,
                dir.display()
            )
        })?,
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
            node: job.node.clone(),
            references: job.references.clone(),
        },
        workload_spec_digest: perfsweep_benchmarks::set::expand::workload_spec_digest(
            job.kind.kind,
            &job.spec,
        ),
        spec: job.spec.clone(),
        backend: "local".into(),
        environment: crate::records::report_environment(report),
        started_at: run.started_at.to_string(),
        finished_at: run.finished_at.to_string(),
        outcome: match &run.outcome {
            LocalOutcome::Succeeded {
                summary, result, ..
            } => RecordOutcome::Succeeded {
                summary: summary.clone(),
                result: result.clone(),
                metrics: job.kind.metrics(result),
            },
            LocalOutcome::Failed(failure) => RecordOutcome::failed(failure),
        },
        evidence,
        artifact_manifest_digest: None,
    }
    .complete();
    let path = dir.join(format!("{}.json", job.name));
    let text = serde_json::to_string_pretty(&record)?;
    output_dir::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// A run id that sorts by time: `20261121T234501Z-1a2b3c`.
pub(super) fn run_id() -> String {
    let now = jiff::Timestamp::now();
    let stamp = now.strftime("%Y%m%dT%H%M%SZ").to_string();
    let entropy = (now.subsec_nanosecond() as u64) ^ u64::from(std::process::id());
    format!("{stamp}-{:06x}", entropy & 0xff_ffff)
}
