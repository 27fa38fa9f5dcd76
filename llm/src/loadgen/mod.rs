//! `perfsweep loadgen`: a load generator for OpenAI-compatible inference endpoints.
//!
//! For every traffic scenario: one closed-loop iteration per concurrency level (that
//! many workers each keep one request in flight on their own keep-alive connection),
//! then one open-loop iteration per request rate (requests due on a seeded arrival
//! schedule, latency counted from when they were due; see [`schedule`]), then an
//! optional saturation search ([`saturation`]) whose probes are ordinary iterations.
//! Budgets, warmup and cooldown are in [`loops`]. Every iteration records into HDR
//! histograms. The result is one JSON document ([`LLMInferenceResult`]) on standard
//! output; progress lines (`perfsweep-progress: …`) go to standard error.

pub mod client_load;
mod deadline;
mod distributed;
mod first_read;
mod headers;
pub mod hooks;
pub mod http;
mod loops;
pub mod model_mix;
pub mod outcome;
mod pacer;
mod progress;
pub mod saturation;
pub mod schedule;
mod sessions;
pub mod sse;
pub mod stats;
pub mod usage_check;
pub mod workload;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::report::distribute;
use crate::report::result::{self, Iteration, LLMInferenceResult, Saturation, SloReport};
use crate::scenario::TrafficScenario;
use crate::{MAX_CONCURRENCY_PER_LOADGEN, MAX_REQUEST_RATE_PER_LOADGEN};
use anyhow::{Context as _, bail};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::dataset::{self, DatasetOptions};
use crate::rng::Rng;
use crate::tokenizer::{PromptWords, Tokenizer};
pub use hooks::Hooks;
use http::{Connection, Endpoint, Target, TlsOptions};
use outcome::Outcome;
pub use progress::MEASURING;
use sse::StreamState;
use stats::{Recorder, Sample, Slo};
use workload::shared_prefix::{SharedPrefix, SharedPrefixShape};
use workload::{Draw, Workload};

/// Which OpenAI API the requests use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    #[default]
    Chat,
    Completions,
}

/// What the requests ask for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Task {
    /// Completions or chat completions.
    #[default]
    #[value(name = "text-to-text")]
    TextToText,
    /// `/v1/embeddings`.
    #[value(name = "text-to-embeddings")]
    TextToEmbeddings,
}

/// How open-loop arrivals are spread in time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum ArrivalKind {
    /// Exactly 1 / rate apart.
    Constant,
    /// Exponential intervals (a Poisson process).
    #[default]
    Poisson,
    /// Gamma intervals with shape `--burstiness` (vLLM's `--burstiness`).
    Gamma,
}

/// What a saturation search varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SaturationLoad {
    /// Closed-loop concurrency.
    Concurrency,
    /// Open-loop request rate (with `--arrivals` and `--max-concurrency`).
    Rate,
}

/// Settings of the load generator.
#[derive(Clone, Debug, clap::Args)]
pub struct LoadgenArgs {
    /// Base URL of the endpoint, e.g. `http://vllm:8000` (a trailing `/v1` is accepted).
    #[arg(long)]
    pub url: String,
    /// Model name sent in requests; checked against `/v1/models` first.
    #[arg(long)]
    pub model: String,
    /// A weighted mix of model names instead (`NAME=WEIGHT`, repeated), e.g. a base
    /// model and its LoRA adapters: each request draws one, and every iteration
    /// reports its figures per model (`perModel`) too.
    #[arg(long = "model-mix")]
    pub model_mix: Vec<String>,
    #[arg(long, value_enum, default_value_t = Api::Chat)]
    pub api: Api,
    /// Ask for whole responses instead of streams (TTFT then equals end-to-end latency).
    #[arg(long)]
    pub no_stream: bool,
    /// Traffic scenarios in genai-bench syntax, one iteration group each.
    #[arg(long = "scenario", default_value = "D(100,100)")]
    pub scenarios: Vec<String>,
    /// text-to-text or text-to-embeddings; by default what the scenarios are
    /// (`E(n)`: embeddings).
    #[arg(long, value_enum)]
    pub task: Option<Task>,
    /// The tokenizer prompts are built and tokens counted with: `builtin:cl100k_base`,
    /// `builtin:o200k_base`, or the path of a Hugging Face tokenizer.json (byte-level BPE).
    #[arg(long, default_value = "builtin:cl100k_base")]
    pub tokenizer: String,
    /// Prompts from a dataset instead of the scenarios: a path, an http(s):// URL, or
    /// s3://, gs://, az://bucket/key.
    #[arg(long)]
    pub dataset: Option<String>,
    /// The dataset's format.
    #[arg(long, value_enum, default_value_t = dataset::Format::Sharegpt)]
    pub dataset_format: dataset::Format,
    /// Dataset entries used at most (a seeded sample).
    #[arg(long)]
    pub dataset_max_prompts: Option<usize>,
    /// Seed of the dataset's shuffle.
    #[arg(long, default_value_t = 0)]
    pub dataset_seed: u64,
    /// Output tokens of each request of a `prompts` dataset (the server decides without).
    #[arg(long)]
    pub dataset_output_tokens: Option<u32>,
    /// Object storage parameters of an s3://, gs:// or az:// dataset, `key=value`
    /// (`endpoint`, `region`, `account`); credentials come from the environment.
    #[arg(long = "dataset-param")]
    pub dataset_params: Vec<String>,
    /// `--dataset-format mooncake-trace`: prompt tokens each of the trace's hash ids
    /// stands for.
    #[arg(long, default_value_t = 512)]
    pub trace_block_tokens: u32,
    /// Shared-prefix prompts instead of the scenarios (prefix-cache tests): this many
    /// system prompts, each request one of them and a question of its own.
    #[arg(long)]
    pub shared_prefix_groups: Option<u32>,
    /// Tokens of each shared system prompt.
    #[arg(long, default_value_t = 1000)]
    pub shared_prefix_system_tokens: u32,
    /// Tokens of each request's own question after the system prompt.
    #[arg(long, default_value_t = 100)]
    pub shared_prefix_question_tokens: u32,
    /// Output tokens of each shared-prefix request.
    #[arg(long, default_value_t = 100)]
    pub shared_prefix_output_tokens: u32,
    /// Multi-turn chat sessions instead of the scenarios: each concurrent stream holds a
    /// conversation of this many turns, every turn sending the history so far and a new
    /// user message; figures per turn (`perTurn`) too.
    #[arg(long)]
    pub sessions_turns: Option<u32>,
    /// Tokens of each turn's new user message.
    #[arg(long, default_value_t = 100)]
    pub sessions_user_tokens: u32,
    /// Output tokens of each turn (the reply the next turns carry).
    #[arg(long, default_value_t = 100)]
    pub sessions_output_tokens: u32,
    /// Milliseconds between a reply and the conversation's next turn.
    #[arg(long, default_value_t = 0)]
    pub sessions_think_time_ms: u64,
    /// Closed-loop concurrency levels, one iteration each; `1` when no rate and no
    /// saturation search is given either.
    #[arg(long = "concurrency")]
    pub concurrency: Vec<u32>,
    /// Open-loop request rates per second, one iteration each (after the concurrency
    /// levels).
    #[arg(long = "request-rate")]
    pub request_rates: Vec<f64>,
    /// How open-loop arrivals are spread.
    #[arg(long, value_enum, default_value_t = ArrivalKind::Poisson)]
    pub arrivals: ArrivalKind,
    /// Shape of gamma arrivals: 1 is Poisson, below 1 burstier, above 1 more regular.
    #[arg(long, default_value_t = 1.0)]
    pub burstiness: f64,
    /// Open loop: requests in flight at most. A request due while the cap is full waits,
    /// and its latency still counts from when it was due.
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Seconds each iteration may send measured requests; requests still in flight when
    /// they are up are cancelled and counted as cooldown.
    #[arg(long)]
    pub max_time_s: Option<f64>,
    /// Measured requests per iteration; without it or --max-time-s, max(100, 4 ×
    /// concurrency) in closed loop and max(100, 10 s of arrivals) in open loop.
    #[arg(long)]
    pub max_requests: Option<u64>,
    /// Requests per iteration excluded from the figures; default one per stream (closed
    /// loop) or one second of arrivals (open loop), none when --warmup-s is given.
    #[arg(long)]
    pub warmup_requests: Option<u64>,
    /// Seconds from an iteration's start whose requests are excluded from the figures.
    #[arg(long)]
    pub warmup_s: Option<f64>,
    /// Search for the highest load meeting the SLOs (needs --slo-ttft-ms or
    /// --slo-tpot-ms); its probes follow the listed iterations.
    #[arg(long, value_enum)]
    pub saturate: Option<SaturationLoad>,
    /// First load the search probes (default 1).
    #[arg(long, default_value_t = 1.0)]
    pub saturation_start: f64,
    /// Highest load the search probes.
    #[arg(long, default_value_t = 1024.0)]
    pub saturation_max: f64,
    /// Iterations the search runs at most.
    #[arg(long, default_value_t = 12)]
    pub saturation_probes: u32,
    /// A rate search stops when the highest passing and lowest failing rates are within
    /// this fraction of each other.
    #[arg(long, default_value_t = 0.05)]
    pub saturation_precision: f64,
    /// Extra request body fields, `key=value`; values are JSON-decoded when they parse.
    #[arg(long = "param")]
    pub params: Vec<String>,
    /// Extra request headers, `Name: value`.
    #[arg(long = "header")]
    pub headers: Vec<String>,
    /// Extra request headers whose values are in environment variables,
    /// `Name=VARIABLE`: a credential stays off the command line and out of every record.
    #[arg(long = "header-env")]
    pub header_envs: Vec<String>,
    /// Environment variable holding the API key (sent as a bearer token) if set.
    #[arg(long, default_value = "OPENAI_API_KEY")]
    pub api_key_env: String,
    /// Goodput objective: largest acceptable time to first token, ms.
    #[arg(long)]
    pub slo_ttft_ms: Option<f64>,
    /// Goodput objective: largest acceptable time per output token, ms.
    #[arg(long)]
    pub slo_tpot_ms: Option<f64>,
    /// Attainment an iteration needs to qualify for the headline, percent.
    #[arg(long, default_value_t = 90.0)]
    pub slo_attainment_percent: f64,
    /// The run fails when more than this percentage of requests failed.
    #[arg(long, default_value_t = 5.0)]
    pub max_error_rate_percent: f64,
    /// Seed of the synthetic workload.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout_s: f64,
    /// Leave out vLLM/SGLang extensions (`ignore_eos`, `min_tokens`) that strict
    /// OpenAI-compatible servers reject.
    #[arg(long)]
    pub plain_openai: bool,
    /// Do not check the model against `/v1/models`.
    #[arg(long)]
    pub skip_model_check: bool,
    /// Write the JSON result here instead of standard output.
    #[arg(long)]
    pub output: Option<std::path::PathBuf>,
    /// Print progress lines and a line per iteration on standard error.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub progress: bool,
    /// Seconds between progress lines within an iteration.
    #[arg(long, default_value_t = 5.0)]
    pub progress_interval_s: f64,
    /// Load generator processes sharing the load (see `--worker` and `--sync`).
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// This process's index among the workers: its share of streams, rates and
    /// requests, and its seed.
    #[arg(long, default_value_t = 0)]
    pub worker: u32,
    /// Control endpoint (`host:port`) of the agent holding the barrier every worker
    /// passes before each iteration, so all start it at the same instant.
    #[arg(long)]
    pub sync: Option<String>,
    /// What the endpoint runs, `key=value` (`engine`, `version`, `gpuType`, `gpuCount`),
    /// recorded in the result.
    #[arg(long = "service-metadata")]
    pub service_metadata: Vec<String>,
    /// PEM file of CA certificates trusted for `https://` besides the system's.
    #[arg(long)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Accept any certificate from an `https://` endpoint (self-signed test servers).
    #[arg(long)]
    pub insecure_skip_verify: bool,
    /// Microseconds the event loop waits before sleeping for I/O, so that responses
    /// arriving close together are read in one wakeup (less CPU per request). Latencies
    /// are unaffected (arrival times are the kernel's); 0 reacts at once. Closed loop
    /// only: with request rates (open loop) the loop never waits, so that requests go
    /// out when they are due. A window shorter than the server's token bursts costs two
    /// sleeps per burst instead of one (`cargo bench --bench llm` shows 500 µs costing
    /// more CPU than none), hence 2 ms.
    #[arg(long, default_value_t = 2000)]
    pub wakeup_coalescing_us: u64,
    /// What the host program provides: the agent's barrier for `--sync`, an object
    /// reader for datasets in object storage (not command-line arguments).
    #[arg(skip)]
    pub hooks: Hooks,
}

impl LoadgenArgs {
    /// Settings with the command line's defaults for `url` and `model`.
    pub fn new(url: &str, model: &str) -> Self {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: LoadgenArgs,
        }
        Wrapper::parse_from(["loadgen", "--url", url, "--model", model]).args
    }
}

/// `perfsweep loadgen`.
pub async fn run(args: LoadgenArgs) -> anyhow::Result<std::process::ExitCode> {
    http::raise_open_file_limit();
    // The streams run on one thread of their own: a single-threaded event loop costs
    // the least CPU per request (no cross-thread wakeups), and it coalesces wakeups.
    let outcome = {
        let (model, url) = (args.model.clone(), args.url.clone());
        let args = args.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("loadgen".into())
            .spawn(move || {
                let window = wakeup_window(&args);
                let mut builder = tokio::runtime::Builder::new_current_thread();
                http::coalesce_wakeups(builder.enable_all(), window);
                let result = builder
                    .build()
                    .context("starting the load generator's event loop")
                    .and_then(|runtime| runtime.block_on(execute(&args)));
                let _ = sender.send(result);
            })
            .context("starting the load generator's thread")?;
        let result = receiver
            .await
            .context("the load generator's thread ended abruptly")?;
        // A run that cannot start (no tokenizer, no dataset, unknown model) is reported
        // as a failed result document, so the benchmark's status carries the reason.
        match result {
            Ok(report) => Outcome::Ran(Box::new(report)),
            Err(error) => Outcome::NotStarted {
                model: model.clone(),
                url: url.clone(),
                message: format!("{error:#}"),
            },
        }
    };
    let json = serde_json::to_string(&outcome.document()?).context("serializing the result")?;
    if let Some(path) = &args.output {
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    } else {
        use std::io::Write as _;
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{json}")
            .and_then(|()| stdout.flush())
            .context("writing the result to standard output")?;
    }
    if let Some(failure) = outcome.failure() {
        eprintln!("perfsweep loadgen: {failure}");
    }
    // Scripts read the exit code: a failed run must not look like a successful one.
    Ok(outcome.exit_code())
}

/// Refuses a load one process cannot offer (this worker's share of it, when several
/// share it): past [`MAX_REQUEST_RATE_PER_LOADGEN`] the arrival schedule outruns the
/// process and the backlog grows without end.
fn check_offered_load(args: &LoadgenArgs, workers: u32) -> anyhow::Result<()> {
    let share = |total: f64| total / f64::from(workers);
    let rate_flag = match args.saturate {
        Some(SaturationLoad::Rate) => Some(("--saturation-max", args.saturation_max)),
        _ => None,
    };
    let rates = args
        .request_rates
        .iter()
        .map(|r| ("--request-rate", *r))
        .chain(rate_flag);
    for (flag, rate) in rates {
        if share(rate) > MAX_REQUEST_RATE_PER_LOADGEN {
            bail!(
                "{flag} {rate}: one load generator offers at most {MAX_REQUEST_RATE_PER_LOADGEN} \
                 requests/s (this one would take {} of them); lower the rate or share it with \
                 --workers {}",
                share(rate),
                (rate / MAX_REQUEST_RATE_PER_LOADGEN).ceil()
            );
        }
    }
    let streams = args
        .concurrency
        .iter()
        .map(|c| ("--concurrency", *c))
        .chain(args.max_concurrency.map(|c| ("--max-concurrency", c)));
    for (flag, count) in streams {
        if share(f64::from(count)) > f64::from(MAX_CONCURRENCY_PER_LOADGEN) {
            bail!(
                "{flag} {count}: one load generator holds at most {MAX_CONCURRENCY_PER_LOADGEN} \
                 streams; lower it or share it with --workers {}",
                count.div_ceil(MAX_CONCURRENCY_PER_LOADGEN)
            );
        }
    }
    Ok(())
}

/// Closed loops coalesce wakeups; an open loop sends on a schedule, so it never waits
/// longer than it must.
fn wakeup_window(args: &LoadgenArgs) -> Duration {
    let open_loop = !args.request_rates.is_empty()
        || args.saturate == Some(SaturationLoad::Rate)
        || replays_trace(args);
    if open_loop {
        Duration::ZERO
    } else {
        Duration::from_micros(args.wakeup_coalescing_us)
    }
}

/// Everything fixed for a run: the request prefix, the workload parameters.
struct Shared {
    endpoint: Endpoint,
    request_head: String,
    api: Api,
    stream: bool,
    /// The request body's fixed fields, serialized once: `{"model":...,` (open object).
    body_prefix: String,
    /// `--model-mix`: the models requests draw from (empty: `body_prefix` only).
    mix: Vec<model_mix::MixedModel>,
    /// Which per-request fields `--param` overrides (then the param's value is sent).
    override_prompt: bool,
    override_max_tokens: bool,
    override_min_tokens: bool,
    override_ignore_eos: bool,
    /// Requests go to `/v1/embeddings`.
    embeddings: bool,
    tokenizer: Arc<Tokenizer>,
    vllm_extensions: bool,
    seed: u64,
    slo: Slo,
    timeout: Duration,
    /// How long an idle event loop waits before sleeping (see `http::coalesce_wakeups`);
    /// threads started for more sockets than one file table holds use it too.
    wakeup_window: Duration,
}

/// Runs every iteration and returns the result (with `failure` set when the error rate
/// is above the limit).
pub async fn execute(args: &LoadgenArgs) -> anyhow::Result<LLMInferenceResult> {
    let target = Target::parse(&args.url)?;
    let endpoint = Endpoint::new(
        target.clone(),
        &TlsOptions {
            ca_file: args.ca_file.clone(),
            insecure_skip_verify: args.insecure_skip_verify,
        },
    )?;
    let scenarios: Vec<TrafficScenario> = args
        .scenarios
        .iter()
        .map(|s| TrafficScenario::parse(s).map_err(anyhow::Error::from))
        .collect::<anyhow::Result<_>>()?;
    // The tokenizer and the dataset first: a missing one fails before any request.
    let tokenizer = Tokenizer::shared(&args.tokenizer)?;
    let embeddings = match args.task {
        Some(task) => task == Task::TextToEmbeddings,
        None => args.dataset.is_none() && scenarios.iter().any(TrafficScenario::is_embedding),
    };
    let workloads = workloads(args, &scenarios, &tokenizer, embeddings).await?;
    let workers = check_workers(args)?;
    let service_metadata = distributed::service_metadata(&args.service_metadata)?;
    check_load_settings(args, workers)?;
    let shared = Arc::new(shared_settings(args, &target, endpoint, &tokenizer, embeddings).await?);
    let mut report = empty_report(args, &shared, workers, service_metadata);

    let concurrency_levels = concurrency_levels(args);
    let listed = concurrency_levels.len() + args.request_rates.len();
    let mut progress = progress::Progress::new(
        args.progress,
        Duration::from_secs_f64(args.progress_interval_s.max(0.1)),
        workloads.len() * listed,
        args.saturate
            .map_or(0, |_| workloads.len() * args.saturation_probes as usize),
    );
    let loads = loads(args, &concurrency_levels, &workloads);
    run_scenarios(
        &shared,
        args,
        &workloads,
        &loads,
        &mut report,
        &mut progress,
    )
    .await?;

    if let Some(sync) = &args.sync {
        // Replica 0's end stops the simulator (when there is one): no worker may still
        // be sending then.
        args.hooks
            .barrier()?
            .wait(sync, hooks::DONE_BARRIER, args.worker)
            .await
            .with_context(|| format!("worker {} waiting for the others to finish", args.worker))?;
    }
    report.finalize();
    if workers > 1 {
        // A worker's share is not the run: the merge judges the error rate (and an
        // idle worker, which had no streams, is no failure).
        report.failure = None;
    }
    Ok(report)
}

/// The closed-loop levels to run: the listed ones, or one stream when no load is named
/// at all.
fn concurrency_levels(args: &LoadgenArgs) -> Vec<u32> {
    if args.concurrency.is_empty() && args.request_rates.is_empty() && args.saturate.is_none() {
        vec![1]
    } else {
        args.concurrency.clone()
    }
}

/// Each scenario's iterations: the closed loops, then the open ones.
fn loads(args: &LoadgenArgs, concurrency_levels: &[u32], workloads: &[Workload]) -> Vec<Load> {
    if let Some(Workload::Trace(trace)) = workloads.first() {
        // A trace sets its own load: one open-loop iteration on its schedule.
        return vec![Load::Open(trace.mean_rate())];
    }
    concurrency_levels
        .iter()
        .map(|&c| Load::Closed(c))
        .chain(args.request_rates.iter().map(|&r| Load::Open(r)))
        .collect()
}

/// Checks the concurrency levels and this worker's place among the workers; returns
/// how many workers there are.
fn check_workers(args: &LoadgenArgs) -> anyhow::Result<u32> {
    if args.concurrency.contains(&0) {
        bail!("concurrency levels must be at least 1");
    }
    let workers = args.workers.max(1);
    if args.worker >= workers {
        bail!(
            "--worker {} is not one of the {workers} workers",
            args.worker
        );
    }
    if workers > 1 && args.sync.is_none() {
        bail!("--workers {workers} needs --sync: the workers must start every iteration together");
    }
    if args.sync.is_some() {
        // Before any request, not at the first barrier.
        args.hooks.barrier()?;
    }
    if workers > 1 && args.saturate.is_some() {
        bail!(
            "--saturate with --workers {workers}: each worker would steer the search by its own share; run the search with one worker"
        );
    }
    Ok(workers)
}

/// Checks the request rates, the arrival settings and the saturation search.
fn check_load_settings(args: &LoadgenArgs, workers: u32) -> anyhow::Result<()> {
    if let Some(rate) = args
        .request_rates
        .iter()
        .find(|r| !(r.is_finite() && **r > 0.0))
    {
        bail!("--request-rate {rate}: rates must be positive");
    }
    check_offered_load(args, workers)?;
    if !(args.burstiness.is_finite() && args.burstiness > 0.0) {
        bail!("--burstiness {}: must be positive", args.burstiness);
    }
    if args.max_concurrency == Some(0) {
        bail!("--max-concurrency must be at least 1");
    }
    if args.saturate.is_some() {
        if args.slo_ttft_ms.is_none() && args.slo_tpot_ms.is_none() {
            bail!("--saturate needs an objective: --slo-ttft-ms or --slo-tpot-ms");
        }
        if !(args.saturation_start > 0.0 && args.saturation_start <= args.saturation_max) {
            bail!(
                "--saturation-start {} must be positive and at most --saturation-max {}",
                args.saturation_start,
                args.saturation_max
            );
        }
    }
    Ok(())
}

/// What every request of the run shares; checks first that the endpoint serves the
/// models.
async fn shared_settings(
    args: &LoadgenArgs,
    target: &Target,
    endpoint: Endpoint,
    tokenizer: &Arc<Tokenizer>,
    embeddings: bool,
) -> anyhow::Result<Shared> {
    let params = parse_params(&args.params)?;
    let head_extra = extra_headers(args)?;
    let stream = !args.no_stream && !embeddings;
    let request_head = request_head(args, target, embeddings, stream, &head_extra);
    let mix_models = model_mix::parse(&args.model_mix)?;
    if !args.skip_model_check {
        check_model(&endpoint, &head_extra, &args.model).await?;
        for (name, _) in &mix_models {
            check_model(&endpoint, &head_extra, name).await?;
        }
    }
    let prompt_key = match args.api {
        _ if embeddings => "input",
        Api::Chat => "messages",
        Api::Completions => "prompt",
    };
    Ok(Shared {
        endpoint,
        request_head,
        api: args.api,
        stream,
        override_prompt: params.contains_key(prompt_key),
        override_max_tokens: params.contains_key("max_tokens"),
        override_min_tokens: params.contains_key("min_tokens"),
        override_ignore_eos: params.contains_key("ignore_eos"),
        embeddings,
        tokenizer: tokenizer.clone(),
        mix: model_mix::build(&mix_models, |name| {
            body_prefix(name, (!embeddings).then_some(stream), params.clone())
        }),
        body_prefix: body_prefix(&args.model, (!embeddings).then_some(stream), params),
        vllm_extensions: !args.plain_openai,
        // Each worker draws its own prompts; worker 0 draws what a single process does.
        seed: distribute::worker_seed(args.seed, args.worker),
        slo: Slo {
            ttft_ms: args.slo_ttft_ms,
            tpot_ms: args.slo_tpot_ms,
        },
        timeout: Duration::from_secs_f64(args.request_timeout_s.max(0.001)),
        wakeup_window: wakeup_window(args),
    })
}

/// `--param key=value` pairs as request body fields: a value that is JSON is sent as
/// that JSON, any other as a string.
fn parse_params(params: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut parsed = Map::new();
    for param in params {
        let (key, value) = param
            .split_once('=')
            .with_context(|| format!("--param {param:?}: expected key=value"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        parsed.insert(key.to_owned(), value);
    }
    Ok(parsed)
}

/// The header lines every request carries besides the fixed ones: `--header`,
/// `--header-env` and the API key, each line ending in CRLF.
fn extra_headers(args: &LoadgenArgs) -> anyhow::Result<String> {
    let mut head_extra = headers::literal(&args.headers)?;
    head_extra.push_str(&headers::from_environment(&args.header_envs, |variable| {
        std::env::var(variable).ok()
    })?);
    if let Ok(key) = std::env::var(&args.api_key_env)
        && !key.is_empty()
    {
        if key.contains(['\r', '\n']) {
            bail!("{}: the API key contains a line break", args.api_key_env);
        }
        head_extra.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    Ok(head_extra)
}

/// The request line and headers of every request, up to the body's length.
fn request_head(
    args: &LoadgenArgs,
    target: &Target,
    embeddings: bool,
    stream: bool,
    head_extra: &str,
) -> String {
    let path = match args.api {
        _ if embeddings => "/v1/embeddings",
        Api::Chat => "/v1/chat/completions",
        Api::Completions => "/v1/completions",
    };
    format!(
        "POST {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: {}\r\n{head_extra}",
        target.base_path,
        target.host_header(),
        if stream {
            "text/event-stream"
        } else {
            "application/json"
        },
    )
}

/// The result before any iteration: what was run, against what.
fn empty_report(
    args: &LoadgenArgs,
    shared: &Shared,
    workers: u32,
    service_metadata: Option<result::ServiceMetadata>,
) -> LLMInferenceResult {
    let slo = shared.slo;
    LLMInferenceResult {
        format: result::FORMAT.into(),
        model: args.model.clone(),
        url: args.url.clone(),
        api: match args.api {
            _ if shared.embeddings => "embeddings",
            Api::Chat => "chat",
            Api::Completions => "completions",
        }
        .into(),
        streaming: shared.stream,
        tokenizer: shared.tokenizer.name().into(),
        max_error_rate_percent: Some(args.max_error_rate_percent),
        workers,
        worker: (workers > 1).then_some(args.worker),
        service_metadata,
        slo: slo.is_set().then_some(SloReport {
            ttft_millis: slo.ttft_ms,
            tpot_millis: slo.tpot_ms,
            attainment_percent: args.slo_attainment_percent,
        }),
        ..Default::default()
    }
}

/// Every scenario's iterations, one per load, then its saturation search if asked for.
async fn run_scenarios(
    shared: &Arc<Shared>,
    args: &LoadgenArgs,
    workloads: &[Workload],
    loads: &[Load],
    report: &mut LLMInferenceResult,
    progress: &mut progress::Progress,
) -> anyhow::Result<()> {
    for (scenario_index, workload) in workloads.iter().enumerate() {
        for &load in loads {
            let number = report.iterations.len();
            let iteration = run_iteration(
                shared,
                args,
                workload,
                scenario_index,
                load,
                number,
                progress,
            )
            .await?;
            report.iterations.push(iteration);
        }
        if let Some(kind) = args.saturate {
            let search = saturate(
                shared,
                args,
                workload,
                scenario_index,
                kind,
                report,
                progress,
            )
            .await?;
            report.saturation.push(search);
        }
    }
    Ok(())
}

/// The load of one iteration.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Load {
    /// Closed loop at this concurrency.
    Closed(u32),
    /// Open loop at this many requests per second.
    Open(f64),
}

impl Load {
    fn describe(self, args: &LoadgenArgs) -> String {
        match self {
            Load::Closed(concurrency) => format!("concurrency {concurrency}"),
            Load::Open(rate) => {
                let cap = args
                    .max_concurrency
                    .map(|c| format!(", at most {c} in flight"))
                    .unwrap_or_default();
                format!("{rate} req/s {}{cap}", arrivals_name(args))
            }
        }
    }
}

fn arrivals_name(args: &LoadgenArgs) -> &'static str {
    match args.arrivals {
        ArrivalKind::Constant => "constant",
        ArrivalKind::Poisson => "poisson",
        ArrivalKind::Gamma => "gamma",
    }
}

/// Runs one iteration and summarizes it.
async fn run_iteration(
    shared: &Arc<Shared>,
    args: &LoadgenArgs,
    workload: &Workload,
    scenario_index: usize,
    load: Load,
    number: usize,
    progress: &mut progress::Progress,
) -> anyhow::Result<Iteration> {
    let replay = match workload {
        Workload::Trace(trace) => Some(trace),
        _ => None,
    };
    let (total_streams, default_requests, default_warmup) = match load {
        // Sessions: two whole conversations per stream, none of them warmup (a
        // conversation's later turns are the point).
        Load::Closed(c) if let Workload::Sessions(chat) = workload => (
            u64::from(c),
            u64::from(c) * 2 * u64::from(chat.shape.turns),
            0,
        ),
        Load::Closed(c) => (u64::from(c), (u64::from(c) * 4).max(100), u64::from(c)),
        // A trace is replayed whole, every request measured.
        Load::Open(_) if let Some(trace) = replay => (
            args.max_concurrency.map_or(0, u64::from),
            trace.requests() as u64,
            0,
        ),
        Load::Open(rate) => (
            args.max_concurrency.map_or(0, u64::from),
            ((rate * 10.0).ceil() as u64).max(100),
            (rate.ceil() as u64).max(1),
        ),
    };
    // This worker's share of the load (all of it unless distributed).
    let workers = args.workers.max(1);
    let streams = distribute::share(total_streams, workers, args.worker);
    let active = match load {
        Load::Closed(concurrency) => concurrency,
        Load::Open(_) => workers,
    };
    let share = |total: u64| distribute::budget_share(total, workers, active, args.worker);
    let budget = loops::Budget {
        warmup: share(args.warmup_requests.unwrap_or(if args.warmup_s.is_some() {
            0
        } else {
            default_warmup
        })),
        warmup_time: Duration::from_secs_f64(args.warmup_s.unwrap_or(0.0).max(0.0)),
        requests: match (args.max_requests, args.max_time_s) {
            (Some(n), _) => Some(share(n)),
            (None, Some(_)) => None,
            (None, None) => Some(share(default_requests)),
        },
        time: args.max_time_s.map(|s| Duration::from_secs_f64(s.max(0.0))),
    };
    let load_seed = match load {
        Load::Closed(c) => u64::from(c),
        Load::Open(rate) => rate.to_bits(),
    };
    let seed = shared.seed ^ ((scenario_index as u64) << 32) ^ load_seed;
    let recorder = Arc::new(Mutex::new(stats::Recorder::default()));
    if let Some(sync) = &args.sync {
        let name = hooks::iteration_barrier(number);
        args.hooks
            .barrier()?
            .wait(sync, &name, args.worker)
            .await
            .with_context(|| format!("worker {} waiting to start {name}", args.worker))?;
    }
    // The synchronized start: the same instant for every worker.
    let start = Instant::now();
    let monitor = client_load::ClientMonitor::start();
    let label = workload.label();
    let measured_start = Arc::new(loops::MeasuredStart::default());
    let ticker = progress.start(
        format!("{label} {}", load.describe(args)),
        &recorder,
        &measured_start,
    );
    let load = match load {
        Load::Closed(_) => Load::Closed(streams as u32),
        Load::Open(rate) => Load::Open(distribute::rate_share(rate, workers)),
    };
    let outcome = match load {
        // More workers than streams: this one sits the iteration out.
        Load::Closed(0) => loops::Outcome {
            recorder: Recorder::default(),
            warmup_requests: 0,
            cooldown_requests: 0,
        },
        Load::Closed(concurrency) if let Workload::Sessions(chat) = workload => {
            sessions::closed(
                shared,
                workload,
                chat,
                concurrency,
                budget,
                seed,
                &recorder,
                &measured_start,
            )
            .await
        }
        Load::Closed(concurrency) => {
            loops::closed(
                shared,
                workload,
                concurrency,
                budget,
                seed,
                &recorder,
                &measured_start,
            )
            .await?
        }
        Load::Open(rate) => {
            let arrivals = match args.arrivals {
                ArrivalKind::Constant => schedule::Arrivals::Constant,
                ArrivalKind::Poisson => schedule::Arrivals::Poisson,
                ArrivalKind::Gamma => schedule::Arrivals::Gamma(args.burstiness),
            };
            let open = loops::OpenLoad {
                rate,
                arrivals,
                // Each worker keeps its share of the cap, at least one.
                max_concurrency: args.max_concurrency.map(|cap| {
                    (distribute::share(u64::from(cap), workers, args.worker) as u32).max(1)
                }),
                replay: replay.map(workload::trace::Trace::offsets),
            };
            loops::open(
                shared,
                workload,
                open,
                budget,
                seed,
                &recorder,
                &measured_start,
            )
            .await?
        }
    };
    drop(ticker);
    let client = monitor.finish(args.worker).await;
    let mut iteration = outcome.recorder.summary(label, streams as u32, &shared.slo);
    if workers > 1 {
        iteration.raw = Some(
            outcome
                .recorder
                .raw(start)
                .context("serializing the iteration's histograms")?,
        );
    }
    iteration.clients = vec![client];
    iteration.warmup_requests = outcome.warmup_requests;
    iteration.cooldown_requests = outcome.cooldown_requests;
    if let Load::Open(rate) = load {
        iteration.request_rate = Some(rate);
        iteration.arrivals = Some(
            if replay.is_some() {
                "trace"
            } else {
                arrivals_name(args)
            }
            .into(),
        );
        iteration.burstiness = (args.arrivals == ArrivalKind::Gamma).then_some(args.burstiness);
    }
    progress.finished(&iteration);
    Ok(iteration)
}

/// Probes loads until the search settles; returns the search's record.
async fn saturate(
    shared: &Arc<Shared>,
    args: &LoadgenArgs,
    workload: &Workload,
    scenario_index: usize,
    kind: SaturationLoad,
    report: &mut LLMInferenceResult,
    progress: &mut progress::Progress,
) -> anyhow::Result<Saturation> {
    let integer = kind == SaturationLoad::Concurrency;
    let mut search = saturation::Search::new(
        args.saturation_start,
        args.saturation_max,
        integer,
        args.saturation_precision,
        args.saturation_probes.max(1),
    );
    let mut indices = Vec::new();
    progress.search_started();
    while let Some(value) = search.next() {
        let load = match kind {
            SaturationLoad::Concurrency => Load::Closed(value as u32),
            SaturationLoad::Rate => Load::Open(value),
        };
        let number = report.iterations.len();
        let iteration = run_iteration(
            shared,
            args,
            workload,
            scenario_index,
            load,
            number,
            progress,
        )
        .await?;
        let meets = report.meets_slo(&iteration);
        search.record(value, meets);
        indices.push(report.iterations.len());
        report.iterations.push(iteration);
    }
    progress.search_done(indices.len(), args.saturation_probes as usize);
    Ok(Saturation {
        scenario: workload.label(),
        load: match kind {
            SaturationLoad::Concurrency => "concurrency",
            SaturationLoad::Rate => "requestRate",
        }
        .into(),
        max_meeting_slo: search.highest_passing(),
        iterations: indices,
    })
}

/// One stream: a connection, reusable buffers, and its own recorder.
struct Worker {
    shared: Arc<Shared>,
    connection: Option<Connection>,
    request: Vec<u8>,
    prompt: String,
    stream: StreamState,
    body: Vec<u8>,
    body_text: String,
    recorder: Arc<Mutex<Recorder>>,
    /// The client's own delays of the latest exchange (see [`ClientDelays`]).
    delays: ClientDelays,
    /// The latest request's model in the `--model-mix`.
    model: Option<usize>,
    /// Multi-turn sessions: the conversation the next request continues.
    conversation: Option<workload::sessions::Conversation>,
    /// Whether the latest request succeeded (a session ends at a failed turn).
    succeeded: bool,
}

/// Where the latest exchange's timestamps may have been late because the load
/// generator was: the evidence behind [`crate::report::doubt`].
#[derive(Clone, Copy, Debug, Default)]
struct ClientDelays {
    /// From stamping the request sent (or the connection opened) to the request
    /// written: a client descheduled in between sends later than it says.
    send: Duration,
    /// From the kernel's arrival time of the first content to reading it: a read this
    /// late may have merged later tokens into it, under the last one's arrival time
    /// (counted only when it did, see [`first_read`]).
    first_read: Duration,
    /// The kernel's arrival time of the last bytes read.
    last_arrival: Option<Instant>,
}

/// Why a request failed, by kind.
struct Failed(&'static str, String);

impl Worker {
    fn new(shared: Arc<Shared>, recorder: Arc<Mutex<Recorder>>) -> Self {
        Self {
            shared,
            connection: None,
            request: Vec::with_capacity(4096),
            prompt: String::new(),
            stream: StreamState::default(),
            body: Vec::new(),
            body_text: String::with_capacity(4096),
            recorder,
            delays: ClientDelays::default(),
            model: None,
            conversation: None,
            succeeded: false,
        }
    }

    fn build(&mut self, workload: &Workload, seed: u64, ticket: u64) -> Draw {
        use std::fmt::Write as _;
        let mut rng = Rng::derive(seed, ticket);
        self.prompt.clear();
        let draw = workload.next(&mut rng, ticket, &mut self.prompt);
        let shared = &self.shared;
        // The fixed fields were serialized once; only the prompt and the token counts
        // are written per request (no JSON tree is built).
        let body = &mut self.body_text;
        body.clear();
        self.model = model_mix::choose(&shared.mix, seed, ticket);
        body.push_str(
            self.model
                .and_then(|index| shared.mix.get(index))
                .map_or(&shared.body_prefix, |m| &m.body_prefix),
        );
        if !shared.override_prompt {
            let prompt = serde_json::to_string(&self.prompt).unwrap_or_default();
            match shared.api {
                _ if shared.embeddings => {
                    let _ = write!(body, r#""input":{prompt},"#);
                }
                Api::Chat if let Some(conversation) = &self.conversation => {
                    // The history so far, then the turn's new message.
                    let _ = write!(
                        body,
                        r#""messages":[{}{{"role":"user","content":{prompt}}}],"#,
                        conversation.messages()
                    );
                }
                Api::Chat if draw.system_bytes > 0 => {
                    // A system prompt, then the question (shared-prefix prompts).
                    let (system, question) = self
                        .prompt
                        .split_at_checked(draw.system_bytes)
                        .unwrap_or(("", &self.prompt));
                    let system = serde_json::to_string(system).unwrap_or_default();
                    let question = serde_json::to_string(question.trim_start()).unwrap_or_default();
                    let _ = write!(
                        body,
                        r#""messages":[{{"role":"system","content":{system}}},{{"role":"user","content":{question}}}],"#
                    );
                }
                Api::Chat => {
                    let _ = write!(
                        body,
                        r#""messages":[{{"role":"user","content":{prompt}}}],"#
                    );
                }
                Api::Completions => {
                    let _ = write!(body, r#""prompt":{prompt},"#);
                }
            }
        }
        // A length to generate exactly (embeddings and prompt files without one have
        // none: the server decides, as genai-bench's dataset mode lets it).
        if let Some(output_tokens) = draw.output_tokens {
            if !shared.override_max_tokens {
                let _ = write!(body, r#""max_tokens":{output_tokens},"#);
            }
            if shared.vllm_extensions && !shared.override_min_tokens {
                let _ = write!(body, r#""min_tokens":{output_tokens},"#);
            }
            if shared.vllm_extensions && !shared.override_ignore_eos {
                body.push_str(r#""ignore_eos":true,"#);
            }
        }
        if body.ends_with(',') {
            body.pop();
        }
        body.push('}');
        self.request.clear();
        self.request
            .extend_from_slice(shared.request_head.as_bytes());
        let _ = write!(
            LengthLine(&mut self.request),
            "Content-Length: {}\r\n\r\n",
            body.len()
        );
        self.request.extend_from_slice(body.as_bytes());
        draw
    }

    async fn request(
        &mut self,
        workload: &Workload,
        seed: u64,
        ticket: u64,
        measured: bool,
        scheduled: Option<Instant>,
        client_from: Option<Instant>,
    ) {
        let draw = self.build(workload, seed, ticket);
        let history = self.conversation.as_ref().map_or(0, |c| c.tokens);
        let input_tokens = u64::from(draw.input_tokens) + u64::from(history);
        let sent = Instant::now();
        let timeout = self.shared.timeout;
        let outcome = if let Ok(outcome) = deadline::within(timeout, self.exchange(sent)).await {
            outcome
        } else {
            self.connection = None;
            Err(Failed(
                "timeout",
                format!("no complete response within {timeout:?}"),
            ))
        };
        let done = Instant::now();
        self.succeeded = outcome.is_ok();
        if !measured {
            return;
        }
        let turn = self.conversation.as_ref().map(|c| c.turn());
        // Open loop: how late the client itself sent after the request could go (when
        // it was due, or when the concurrency cap let it); both latencies include it.
        let late_send =
            client_from.map_or(Duration::ZERO, |from| sent.saturating_duration_since(from));
        let common = late_send + self.delays.send;
        // The response ends when its last bytes reached the kernel (their arrival
        // timestamp), so reading them late does not lengthen the end-to-end latency;
        // without such a timestamp it ends when the read returned.
        let done = self
            .delays
            .last_arrival
            .filter(|arrival| (sent..=done).contains(arrival))
            .unwrap_or(done);
        let e2e_client_delay = common;
        let ttft_client_delay = first_read::ttft_client_delay(
            common,
            self.delays.first_read,
            &self.stream.token_times,
            e2e_client_delay,
        );
        match outcome {
            Ok(usage) => {
                let server_input = usage.and_then(|u| u.prompt_tokens);
                let (input, estimated_input) = match server_input {
                    Some(n) => (n, false),
                    None => (input_tokens, true),
                };
                if self.shared.embeddings {
                    if let Ok(mut recorder) = self.recorder.lock() {
                        recorder.schedule_lag(scheduled, sent);
                        if let Some(server) = server_input {
                            recorder.usage.input.add(server, input_tokens);
                        }
                        recorder.success_embedding(
                            scheduled.unwrap_or(sent),
                            done,
                            input,
                            estimated_input,
                            e2e_client_delay,
                            &self.shared.slo,
                        );
                    }
                    return;
                }
                let server_output = usage.and_then(|u| u.completion_tokens);
                // Tokenizing the output is the only per-request tokenizer work: when the
                // server reported no usage, and for one request in eight to check it.
                let counted_output = (server_output.is_none()
                    || ticket.is_multiple_of(OUTPUT_CHECK_EVERY))
                .then(|| self.shared.tokenizer.count(&self.stream.text) as u64);
                let (output_tokens, estimated_output) = match (server_output, counted_output) {
                    (Some(n), _) => (n, false),
                    (None, Some(n)) => (n, true),
                    (None, None) => (0, true),
                };
                let sample = Sample {
                    sent,
                    scheduled,
                    done,
                    token_times: &self.stream.token_times,
                    input_tokens: input,
                    output_tokens,
                    estimated: estimated_output || estimated_input,
                    ttft_client_delay,
                    e2e_client_delay,
                    reasoning: self.stream.first_reasoning.map(|first| stats::Reasoning {
                        tokens: u64::from(self.stream.reasoning_events),
                        first,
                        first_answer: self.stream.first_answer,
                    }),
                };
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.schedule_lag(scheduled, sent);
                    if let Some(server) = server_input {
                        recorder.usage.input.add(server, input_tokens);
                    }
                    if let Some(cached) = usage.and_then(|u| u.cached_tokens()) {
                        recorder.cached_tokens(cached, input);
                    }
                    if let (Some(server), Some(counted)) = (server_output, counted_output) {
                        recorder.usage.output.add(server, counted);
                    }
                    recorder.success(&sample, &self.shared.slo);
                    if let Some(turn) = turn {
                        let part = recorder.of_turn(turn);
                        part.success(&sample, &self.shared.slo);
                        if let Some(cached) = usage.and_then(|u| u.cached_tokens()) {
                            part.cached_tokens(cached, input);
                        }
                    }
                    if let Some(model) = self.model.and_then(|i| self.shared.mix.get(i)) {
                        recorder
                            .of_model(&model.name)
                            .success(&sample, &self.shared.slo);
                    }
                }
            }
            Err(Failed(kind, message)) => {
                tracing::debug!(kind, %message, "request failed");
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.schedule_lag(scheduled, sent);
                    recorder.error(kind, scheduled.unwrap_or(sent), done);
                    if let Some(turn) = turn {
                        recorder
                            .of_turn(turn)
                            .error(kind, scheduled.unwrap_or(sent), done);
                    }
                    if let Some(model) = self.model.and_then(|i| self.shared.mix.get(i)) {
                        recorder
                            .of_model(&model.name)
                            .error(kind, scheduled.unwrap_or(sent), done);
                    }
                }
            }
        }
    }

    /// Sends the prepared request (stamped `sent`) and reads the response; the usage
    /// the server reported.
    async fn exchange(&mut self, sent: Instant) -> Result<Option<sse::Usage>, Failed> {
        self.stream.reset();
        self.body.clear();
        self.delays = ClientDelays::default();
        let (mut connection, writing_from) = if let Some(connection) = self.connection.take() {
            (connection, sent)
        } else {
            let connection = Connection::open(&self.shared.endpoint)
                .await
                .map_err(|e| Failed("connect", format!("{e:#}")))?;
            (connection, Instant::now())
        };
        connection
            .send(&self.request)
            .await
            .map_err(|e| Failed("connect", e.to_string()))?;
        self.delays.send = writing_from.elapsed();
        let head = connection
            .read_head()
            .await
            .map_err(|e| Failed("protocol", format!("{e:#}")))?;
        let streaming = self.shared.stream && head.status == 200;
        let (stream, body, delays) = (&mut self.stream, &mut self.body, &mut self.delays);
        let read = connection
            .read_body(&head, |data, at| {
                if streaming {
                    let first = stream.token_times.is_empty();
                    stream.feed(data, at);
                    if first && !stream.token_times.is_empty() {
                        delays.first_read = at.elapsed();
                    }
                } else {
                    body.extend_from_slice(data);
                }
                delays.last_arrival = Some(at);
            })
            .await;
        if let Err(error) = read {
            return Err(Failed("incomplete", format!("{error:#}")));
        }
        if connection.reusable {
            self.connection = Some(connection);
        }
        if head.status != 200 {
            let text = String::from_utf8_lossy(&self.body);
            return Err(Failed(
                http_kind(head.status),
                text.chars().take(200).collect(),
            ));
        }
        if streaming {
            self.stream.finish(Instant::now());
            if let Some((kind, message)) = self.stream.error.take() {
                return Err(Failed(kind, message));
            }
            if !self.stream.done {
                return Err(Failed(
                    "incomplete",
                    "the stream ended without [DONE]".into(),
                ));
            }
            return Ok(self.stream.usage);
        }
        let value: Value = serde_json::from_slice(&self.body)
            .map_err(|e| Failed("protocol", format!("the response is not JSON: {e}")))?;
        if let Some(error) = value.get("error") {
            return Err(Failed("stream_error", error.to_string()));
        }
        let text = &mut self.stream.text;
        if let Some(choices) = value.get("choices").and_then(Value::as_array) {
            for choice in choices {
                if let Some(content) = choice
                    .get("text")
                    .or_else(|| choice.get("message").and_then(|m| m.get("content")))
                    .and_then(Value::as_str)
                {
                    text.push_str(content);
                }
            }
        }
        self.stream.chars = text.len();
        let usage = value
            .get("usage")
            .and_then(|u| serde_json::from_value::<sse::Usage>(u.clone()).ok());
        Ok(usage)
    }
}

/// One request in this many has its output tokenized to check the server's usage.
const OUTPUT_CHECK_EVERY: u64 = 8;

/// The iterations' request sources: the dataset, or one per scenario.
async fn workloads(
    args: &LoadgenArgs,
    scenarios: &[TrafficScenario],
    tokenizer: &Tokenizer,
    embeddings: bool,
) -> anyhow::Result<Vec<Workload>> {
    if args.dataset.is_some() && args.shared_prefix_groups.is_some() {
        bail!("--dataset and --shared-prefix-groups both choose the prompts: give one");
    }
    if let Some(location) = args.dataset.as_ref().filter(|_| replays_trace(args)) {
        if embeddings {
            bail!("--trace replays text-to-text requests, not embeddings");
        }
        if args.workers > 1 || args.saturate.is_some() {
            bail!("a trace sets the load itself: it runs with one worker and no saturation search");
        }
        let mut parameters = std::collections::BTreeMap::new();
        for param in &args.dataset_params {
            if let Some((key, value)) = param.split_once('=') {
                parameters.insert(key.to_owned(), value.to_owned());
            }
        }
        let text = dataset::fetch(location, &parameters, &args.hooks).await?;
        let requests =
            workload::trace::parse(&text).with_context(|| format!("trace {location}"))?;
        let words = Arc::new(PromptWords::for_tokenizer(tokenizer)?);
        return Ok(vec![Workload::Trace(workload::trace::Trace::new(
            requests,
            args.trace_block_tokens,
            words,
            args.seed,
            location.clone(),
        ))]);
    }
    if let Some(location) = &args.dataset {
        let mut parameters = std::collections::BTreeMap::new();
        for param in &args.dataset_params {
            let (key, value) = param
                .split_once('=')
                .with_context(|| format!("--dataset-param {param:?}: expected key=value"))?;
            parameters.insert(key.to_owned(), value.to_owned());
        }
        let text = dataset::fetch(location, &parameters, &args.hooks).await?;
        let options = DatasetOptions {
            format: args.dataset_format,
            location: location.clone(),
            max_prompts: args.dataset_max_prompts,
            seed: args.dataset_seed,
            output_tokens: args.dataset_output_tokens,
        };
        let dataset = dataset::build(&text, &options, tokenizer)?;
        let workers = u64::from(args.workers.max(1));
        let offset = dataset.entries.len() as u64 * u64::from(args.worker) / workers;
        return Ok(vec![Workload::Dataset {
            dataset: Arc::new(dataset),
            embeddings,
            offset,
        }]);
    }
    let words = Arc::new(PromptWords::for_tokenizer(tokenizer)?);
    if let Some(turns) = args.sessions_turns {
        sessions_fit(args, embeddings)?;
        let shape = workload::sessions::SessionShape {
            turns,
            user_tokens: args.sessions_user_tokens,
            output_tokens: args.sessions_output_tokens,
            think_time: Duration::from_millis(args.sessions_think_time_ms),
        };
        return Ok(vec![Workload::Sessions(workload::sessions::Sessions::new(
            shape, words,
        ))]);
    }
    if let Some(groups) = args.shared_prefix_groups {
        if groups == 0 {
            bail!("--shared-prefix-groups must be at least 1");
        }
        if embeddings {
            bail!("shared-prefix prompts are for text-to-text, not embeddings");
        }
        let shape = SharedPrefixShape {
            groups,
            system_tokens: args.shared_prefix_system_tokens,
            question_tokens: args.shared_prefix_question_tokens,
            output_tokens: args.shared_prefix_output_tokens,
        };
        // Every worker builds the same system prompts: the run's seed, not its own.
        return Ok(vec![Workload::SharedPrefix(SharedPrefix::new(
            shape, words, args.seed,
        ))]);
    }
    scenarios
        .iter()
        .map(|&scenario| {
            if scenario.is_embedding() != embeddings {
                bail!(
                    "{scenario}: {}",
                    if embeddings {
                        "task text-to-embeddings takes E(n) scenarios"
                    } else {
                        "E(n) scenarios need task text-to-embeddings"
                    }
                );
            }
            Ok(Workload::Scenario {
                scenario,
                words: words.clone(),
            })
        })
        .collect()
}

/// Refuses what multi-turn sessions cannot be combined with.
fn sessions_fit(args: &LoadgenArgs, embeddings: bool) -> anyhow::Result<()> {
    let refuse = |why: &str| Err(anyhow::anyhow!("--sessions-turns: {why}"));
    if args.sessions_turns == Some(0) {
        return refuse("a conversation has at least one turn");
    }
    if args.sessions_user_tokens == 0 || args.sessions_output_tokens == 0 {
        return refuse("--sessions-user-tokens and --sessions-output-tokens must be at least 1");
    }
    if embeddings || args.api != Api::Chat {
        return refuse("sessions carry a chat history: they need --api chat, not embeddings");
    }
    if args.no_stream {
        return refuse("the assistant's replies are read from the stream: drop --no-stream");
    }
    if args.dataset.is_some() || args.shared_prefix_groups.is_some() {
        return refuse("--dataset and --shared-prefix-groups choose the prompts too: give one");
    }
    if !args.request_rates.is_empty() || args.saturate.is_some() {
        return refuse(
            "sessions run as a closed loop (--concurrency conversations at once), without \
             --request-rate or --saturate",
        );
    }
    if !args.model_mix.is_empty() {
        return refuse("a --model-mix draws per request and would switch models mid-conversation");
    }
    if args.workers > 1 {
        return refuse("sessions run on one load generator (per-turn figures do not merge)");
    }
    if let Some(&streams) = args
        .concurrency
        .iter()
        .find(|&&c| c > loops::uncapped_ceiling())
    {
        return refuse(&format!(
            "--concurrency {streams}: sessions hold at most {} conversations (one file table)",
            loops::uncapped_ceiling()
        ));
    }
    Ok(())
}

/// The dataset is a trace replayed on its own schedule.
fn replays_trace(args: &LoadgenArgs) -> bool {
    args.dataset.is_some() && args.dataset_format == dataset::Format::MooncakeTrace
}

fn http_kind(status: u16) -> &'static str {
    match status {
        400 => "http_400",
        401 => "http_401",
        403 => "http_403",
        404 => "http_404",
        408 => "http_408",
        413 => "http_413",
        422 => "http_422",
        429 => "http_429",
        500 => "http_500",
        502 => "http_502",
        503 => "http_503",
        504 => "http_504",
        other if (400..500).contains(&other) => "http_4xx",
        _ => "http_5xx",
    }
}

/// The request body's fixed fields as an unclosed JSON object (`{"model":"m",...,`):
/// model, streaming options (none for embeddings), then `--param`s (which win). The
/// per-request fields (prompt, lengths, `ignore_eos` with a length) follow it.
fn body_prefix(model: &str, stream: Option<bool>, params: Map<String, Value>) -> String {
    let mut fixed = Map::new();
    fixed.insert("model".into(), Value::String(model.to_owned()));
    if let Some(stream) = stream {
        fixed.insert("stream".into(), stream.into());
    }
    if stream == Some(true) {
        fixed.insert(
            "stream_options".into(),
            serde_json::json!({"include_usage": true}),
        );
    }
    fixed.extend(params);
    let mut prefix = Value::Object(fixed).to_string();
    prefix.pop(); // the closing brace
    prefix.push(',');
    prefix
}

/// `write!` into a byte buffer.
struct LengthLine<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for LengthLine<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// Fails unless `/v1/models` lists `model`.
async fn check_model(endpoint: &Endpoint, head_extra: &str, model: &str) -> anyhow::Result<()> {
    let target = &endpoint.target;
    let url = target.url("/v1/models");
    let mut connection = Connection::open(endpoint)
        .await
        .with_context(|| format!("cannot connect to {url}"))?;
    let request = format!(
        "GET {}/v1/models HTTP/1.1\r\nHost: {}\r\nAccept: application/json\r\n{head_extra}\r\n",
        target.base_path,
        target.host_header()
    );
    connection
        .send(request.as_bytes())
        .await
        .with_context(|| format!("GET {url}"))?;
    let head = connection
        .read_head()
        .await
        .with_context(|| format!("GET {url}"))?;
    let mut body = Vec::new();
    connection
        .read_body(&head, |data, _| body.extend_from_slice(data))
        .await
        .with_context(|| format!("GET {url}"))?;
    if head.status != 200 {
        bail!(
            "GET {url} answered {}: {}",
            head.status,
            String::from_utf8_lossy(&body)
                .chars()
                .take(200)
                .collect::<String>()
        );
    }
    let value: Value =
        serde_json::from_slice(&body).with_context(|| format!("GET {url}: not JSON"))?;
    let ids: Vec<&str> = value
        .get("data")
        .and_then(Value::as_array)
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.get("id").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if !ids.contains(&model) {
        bail!(
            "the endpoint does not serve model {model:?}; {url} lists: {}",
            if ids.is_empty() {
                "nothing".to_owned()
            } else {
                ids.join(", ")
            }
        );
    }
    Ok(())
}
