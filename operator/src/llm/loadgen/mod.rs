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
mod distributed;
pub mod http;
mod loops;
mod progress;
pub mod saturation;
pub mod schedule;
pub mod sse;
pub mod stats;
pub mod workload;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use perfsweep_benchmarks::kinds::llm::distribute;
use perfsweep_benchmarks::kinds::llm::result::{
    self, Iteration, LLMInferenceResult, Saturation, SloReport,
};
use perfsweep_benchmarks::kinds::llm::scenario::TrafficScenario;
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::llm::rng::Rng;
use http::{Connection, Endpoint, Target, TlsOptions};
use sse::StreamState;
use stats::{Recorder, Sample, Slo};

/// Which OpenAI API the requests use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    #[default]
    Chat,
    Completions,
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
    #[arg(long, value_enum, default_value_t = Api::Chat)]
    pub api: Api,
    /// Ask for whole responses instead of streams (TTFT then equals end-to-end latency).
    #[arg(long)]
    pub no_stream: bool,
    /// Traffic scenarios in genai-bench syntax, one iteration group each.
    #[arg(long = "scenario", default_value = "D(100,100)")]
    pub scenarios: Vec<String>,
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
    /// out when they are due.
    #[arg(long, default_value_t = 500)]
    pub wakeup_coalescing_us: u64,
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
    let report = {
        let args = args.clone();
        let (sender, receiver) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("loadgen".into())
            .spawn(move || {
                let open_loop =
                    !args.request_rates.is_empty() || args.saturate == Some(SaturationLoad::Rate);
                let window = if open_loop {
                    Duration::ZERO
                } else {
                    Duration::from_micros(args.wakeup_coalescing_us)
                };
                let mut builder = tokio::runtime::Builder::new_current_thread();
                http::coalesce_wakeups(builder.enable_all(), window);
                let result = builder
                    .build()
                    .context("starting the load generator's event loop")
                    .and_then(|runtime| runtime.block_on(execute(&args)));
                let _ = sender.send(result);
            })
            .context("starting the load generator's thread")?;
        receiver
            .await
            .context("the load generator's thread ended abruptly")??
    };
    let json = serde_json::to_string(&report).context("serializing the result")?;
    match &args.output {
        Some(path) => std::fs::write(path, json + "\n")
            .with_context(|| format!("writing {}", path.display()))?,
        None => {
            use std::io::Write as _;
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{json}")
                .and_then(|()| stdout.flush())
                .context("writing the result to standard output")?;
        }
    }
    if let Some(failure) = &report.failure {
        eprintln!("perfsweep loadgen: {failure}");
    }
    Ok(std::process::ExitCode::SUCCESS)
}

/// Everything fixed for a run: the request prefix, the workload parameters.
struct Shared {
    endpoint: Endpoint,
    request_head: String,
    api: Api,
    stream: bool,
    /// The request body's fixed fields, serialized once: `{"model":...,` (open object).
    body_prefix: String,
    /// Which per-request fields `--param` overrides (then the param's value is sent).
    override_prompt: bool,
    override_max_tokens: bool,
    override_min_tokens: bool,
    vllm_extensions: bool,
    seed: u64,
    slo: Slo,
    timeout: Duration,
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
    if let Some(embedding) = scenarios.iter().find(|s| s.is_embedding()) {
        bail!("{embedding}: embeddings are not supported by this version of the load generator");
    }
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
    if workers > 1 && args.saturate.is_some() {
        bail!(
            "--saturate with --workers {workers}: each worker would steer the search by its own share; run the search with one worker"
        );
    }
    let service_metadata = distributed::service_metadata(&args.service_metadata)?;
    if let Some(rate) = args
        .request_rates
        .iter()
        .find(|r| !(r.is_finite() && **r > 0.0))
    {
        bail!("--request-rate {rate}: rates must be positive");
    }
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
    let mut params = Map::new();
    for param in &args.params {
        let (key, value) = param
            .split_once('=')
            .with_context(|| format!("--param {param:?}: expected key=value"))?;
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.into()));
        params.insert(key.to_owned(), value);
    }
    let mut head_extra = String::new();
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .with_context(|| format!("--header {header:?}: expected `Name: value`"))?;
        if name.trim().is_empty() || header.contains(['\r', '\n']) {
            bail!("--header {header:?}: invalid header");
        }
        head_extra.push_str(&format!("{}: {}\r\n", name.trim(), value.trim()));
    }
    if let Ok(key) = std::env::var(&args.api_key_env)
        && !key.is_empty()
    {
        if key.contains(['\r', '\n']) {
            bail!("{}: the API key contains a line break", args.api_key_env);
        }
        head_extra.push_str(&format!("Authorization: Bearer {key}\r\n"));
    }
    let path = match args.api {
        Api::Chat => "/v1/chat/completions",
        Api::Completions => "/v1/completions",
    };
    let stream = !args.no_stream;
    let request_head = format!(
        "POST {}{path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: {}\r\n{head_extra}",
        target.base_path,
        target.host_header(),
        if stream {
            "text/event-stream"
        } else {
            "application/json"
        },
    );
    if !args.skip_model_check {
        check_model(&endpoint, &head_extra, &args.model).await?;
    }
    let slo = Slo {
        ttft_ms: args.slo_ttft_ms,
        tpot_ms: args.slo_tpot_ms,
    };
    let prompt_key = match args.api {
        Api::Chat => "messages",
        Api::Completions => "prompt",
    };
    let shared = Arc::new(Shared {
        endpoint,
        request_head,
        api: args.api,
        stream,
        override_prompt: params.contains_key(prompt_key),
        override_max_tokens: params.contains_key("max_tokens"),
        override_min_tokens: params.contains_key("min_tokens"),
        body_prefix: body_prefix(&args.model, stream, !args.plain_openai, params),
        vllm_extensions: !args.plain_openai,
        // Each worker draws its own prompts; worker 0 draws what a single process does.
        seed: distribute::worker_seed(args.seed, args.worker),
        slo,
        timeout: Duration::from_secs_f64(args.request_timeout_s.max(0.001)),
    });

    let mut report = LLMInferenceResult {
        format: result::FORMAT.into(),
        model: args.model.clone(),
        url: args.url.clone(),
        api: match args.api {
            Api::Chat => "chat",
            Api::Completions => "completions",
        }
        .into(),
        streaming: stream,
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
    };
    let concurrency_levels = if args.concurrency.is_empty()
        && args.request_rates.is_empty()
        && args.saturate.is_none()
    {
        vec![1]
    } else {
        args.concurrency.clone()
    };
    let listed = concurrency_levels.len() + args.request_rates.len();
    let mut progress = progress::Progress::new(
        args.progress,
        Duration::from_secs_f64(args.progress_interval_s.max(0.1)),
        scenarios.len() * listed,
        args.saturate
            .map_or(0, |_| scenarios.len() * args.saturation_probes as usize),
    );
    let loads = concurrency_levels
        .iter()
        .map(|&c| Load::Closed(c))
        .chain(args.request_rates.iter().map(|&r| Load::Open(r)));
    let loads: Vec<Load> = loads.collect();
    for (scenario_index, scenario) in scenarios.iter().enumerate() {
        for &load in &loads {
            let number = report.iterations.len();
            let iteration = run_iteration(
                &shared,
                args,
                scenario,
                scenario_index,
                load,
                number,
                &mut progress,
            )
            .await?;
            report.iterations.push(iteration);
        }
        if let Some(kind) = args.saturate {
            let search = saturate(
                &shared,
                args,
                scenario,
                scenario_index,
                kind,
                &mut report,
                &mut progress,
            )
            .await?;
            report.saturation.push(search);
        }
    }
    if let Some(sync) = &args.sync {
        // Replica 0's end stops the simulator (when there is one): no worker may still
        // be sending then.
        crate::agent::control::barrier(sync, "done", args.worker)
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
    scenario: &TrafficScenario,
    scenario_index: usize,
    load: Load,
    number: usize,
    progress: &mut progress::Progress,
) -> anyhow::Result<Iteration> {
    let (total_streams, default_requests, default_warmup) = match load {
        Load::Closed(c) => (c as u64, (c as u64 * 4).max(100), c as u64),
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
        Load::Closed(c) => c as u64,
        Load::Open(rate) => rate.to_bits(),
    };
    let seed = shared.seed ^ ((scenario_index as u64) << 32) ^ load_seed;
    let recorder = Arc::new(Mutex::new(stats::Recorder::default()));
    if let Some(sync) = &args.sync {
        let name = format!("iteration-{number}");
        crate::agent::control::barrier(sync, &name, args.worker)
            .await
            .with_context(|| format!("worker {} waiting to start {name}", args.worker))?;
    }
    // The synchronized start: the same instant for every worker.
    let start = Instant::now();
    let monitor = client_load::ClientMonitor::start();
    let ticker = progress.start(format!("{scenario} {}", load.describe(args)), &recorder);
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
        Load::Closed(concurrency) => {
            loops::closed(shared, scenario, concurrency, budget, seed, &recorder).await
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
            };
            loops::open(shared, scenario, open, budget, seed, &recorder).await
        }
    };
    drop(ticker);
    let client = monitor.finish(args.worker).await;
    let mut iteration = outcome
        .recorder
        .summary(scenario.to_string(), streams as u32, &shared.slo);
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
        iteration.arrivals = Some(arrivals_name(args).into());
        iteration.burstiness = (args.arrivals == ArrivalKind::Gamma).then_some(args.burstiness);
    }
    progress.finished(&iteration);
    Ok(iteration)
}

/// Probes loads until the search settles; returns the search's record.
async fn saturate(
    shared: &Arc<Shared>,
    args: &LoadgenArgs,
    scenario: &TrafficScenario,
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
            scenario,
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
        scenario: scenario.to_string(),
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
        }
    }

    fn build(&mut self, scenario: &TrafficScenario, seed: u64, ticket: u64) -> u64 {
        use std::fmt::Write as _;
        let mut rng = Rng::derive(seed, ticket);
        let draw = workload::draw(scenario, &mut rng);
        self.prompt.clear();
        workload::prompt(&mut rng, draw.input_tokens, &mut self.prompt);
        let shared = &self.shared;
        // The fixed fields were serialized once; only the prompt and the token counts
        // are written per request (no JSON tree is built).
        let body = &mut self.body_text;
        body.clear();
        body.push_str(&shared.body_prefix);
        if !shared.override_prompt {
            let prompt = serde_json::to_string(&self.prompt).unwrap_or_default();
            match shared.api {
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
        if !shared.override_max_tokens {
            let _ = write!(body, r#""max_tokens":{},"#, draw.output_tokens);
        }
        if shared.vllm_extensions && !shared.override_min_tokens {
            let _ = write!(body, r#""min_tokens":{},"#, draw.output_tokens);
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
        draw.input_tokens as u64
    }

    async fn request(
        &mut self,
        scenario: &TrafficScenario,
        seed: u64,
        ticket: u64,
        measured: bool,
        scheduled: Option<Instant>,
    ) {
        let input_tokens = self.build(scenario, seed, ticket);
        let sent = Instant::now();
        let timeout = self.shared.timeout;
        let outcome = match tokio::time::timeout(timeout, self.exchange()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                self.connection = None;
                Err(Failed(
                    "timeout",
                    format!("no complete response within {timeout:?}"),
                ))
            }
        };
        let done = Instant::now();
        if !measured {
            return;
        }
        match outcome {
            Ok(usage) => {
                let (output_tokens, estimated_output) =
                    match usage.and_then(|u| u.completion_tokens) {
                        Some(n) => (n, false),
                        None if self.shared.stream => (self.stream.token_times.len() as u64, true),
                        None => ((self.stream.chars as u64).div_ceil(4), true),
                    };
                let (input, estimated_input) = match usage.and_then(|u| u.prompt_tokens) {
                    Some(n) => (n, false),
                    None => (input_tokens, true),
                };
                let sample = Sample {
                    sent,
                    scheduled,
                    done,
                    token_times: &self.stream.token_times,
                    input_tokens: input,
                    output_tokens,
                    estimated: estimated_output || estimated_input,
                };
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.schedule_lag(scheduled, sent);
                    recorder.success(&sample, &self.shared.slo);
                }
            }
            Err(Failed(kind, message)) => {
                tracing::debug!(kind, %message, "request failed");
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.schedule_lag(scheduled, sent);
                    recorder.error(kind, scheduled.unwrap_or(sent), done);
                }
            }
        }
    }

    /// Sends the prepared request and reads the response; the usage the server reported.
    async fn exchange(&mut self) -> Result<Option<sse::Usage>, Failed> {
        self.stream.reset();
        self.body.clear();
        let mut connection = match self.connection.take() {
            Some(connection) => connection,
            None => Connection::open(&self.shared.endpoint)
                .await
                .map_err(|e| Failed("connect", format!("{e:#}")))?,
        };
        connection
            .send(&self.request)
            .await
            .map_err(|e| Failed("connect", e.to_string()))?;
        let head = connection
            .read_head()
            .await
            .map_err(|e| Failed("protocol", format!("{e:#}")))?;
        let streaming = self.shared.stream && head.status == 200;
        let (stream, body) = (&mut self.stream, &mut self.body);
        let read = connection
            .read_body(&head, |data, at| {
                if streaming {
                    stream.feed(data, at);
                } else {
                    body.extend_from_slice(data);
                }
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
        self.stream.chars = value
            .get("choices")
            .and_then(Value::as_array)
            .map(|choices| {
                choices
                    .iter()
                    .map(|c| {
                        c.get("text")
                            .or_else(|| c.get("message").and_then(|m| m.get("content")))
                            .and_then(Value::as_str)
                            .map_or(0, str::len)
                    })
                    .sum()
            })
            .unwrap_or(0);
        let usage = value
            .get("usage")
            .and_then(|u| serde_json::from_value::<sse::Usage>(u.clone()).ok());
        Ok(usage)
    }
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
/// model, streaming options, vLLM extensions, then `--param`s (which win).
fn body_prefix(
    model: &str,
    stream: bool,
    vllm_extensions: bool,
    params: Map<String, Value>,
) -> String {
    let mut fixed = Map::new();
    fixed.insert("model".into(), Value::String(model.to_owned()));
    if vllm_extensions {
        fixed.insert("ignore_eos".into(), true.into());
    }
    fixed.insert("stream".into(), stream.into());
    if stream {
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
