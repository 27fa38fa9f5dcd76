//! `perfsweep loadgen`: a load generator for OpenAI-compatible inference endpoints.
//!
//! Closed loop: for every traffic scenario and every concurrency level, that many
//! workers each keep one request in flight on their own keep-alive connection until the
//! iteration's request budget or time is used up. Each worker records into its own HDR
//! histograms, merged when the iteration ends. The first requests of an iteration (one
//! per stream by default: they open the connections) are warmup and not measured.
//! The result is one JSON document ([`LLMInferenceResult`]) on standard output.

pub mod http;
pub mod sse;
pub mod stats;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use perfsweep_benchmarks::kinds::llm::result::{self, LLMInferenceResult, SloReport};
use perfsweep_benchmarks::kinds::llm::scenario::TrafficScenario;
use serde_json::{Map, Value};
use std::sync::OnceLock;
use tokio::time::Instant;

use crate::llm::rng::Rng;
use http::{Connection, Target};
use sse::StreamState;
use stats::{Recorder, Sample, Slo};

/// Which OpenAI API the requests use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    #[default]
    Chat,
    Completions,
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
    /// Concurrency levels, one iteration each.
    #[arg(long = "concurrency", default_value = "1")]
    pub concurrency: Vec<u32>,
    /// Seconds each iteration may send requests (after warmup).
    #[arg(long)]
    pub max_time_s: Option<f64>,
    /// Measured requests per iteration; without it or --max-time-s, max(100, 4 × concurrency).
    #[arg(long)]
    pub max_requests: Option<u64>,
    /// Requests per iteration excluded from the figures; default one per stream.
    #[arg(long)]
    pub warmup_requests: Option<u64>,
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
    /// Print a line per iteration on standard error.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub progress: bool,
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
    let report = execute(&args).await?;
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
    target: Target,
    request_head: String,
    api: Api,
    stream: bool,
    model: String,
    params: Map<String, Value>,
    vllm_extensions: bool,
    seed: u64,
    slo: Slo,
    timeout: Duration,
}

/// Runs every iteration and returns the result (with `failure` set when the error rate
/// is above the limit).
pub async fn execute(args: &LoadgenArgs) -> anyhow::Result<LLMInferenceResult> {
    let target = Target::parse(&args.url)?;
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
        check_model(&target, &head_extra, &args.model).await?;
    }
    let slo = Slo {
        ttft_ms: args.slo_ttft_ms,
        tpot_ms: args.slo_tpot_ms,
    };
    let shared = Arc::new(Shared {
        target,
        request_head,
        api: args.api,
        stream,
        model: args.model.clone(),
        params,
        vllm_extensions: !args.plain_openai,
        seed: args.seed,
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
        slo: slo.is_set().then_some(SloReport {
            ttft_millis: slo.ttft_ms,
            tpot_millis: slo.tpot_ms,
            attainment_percent: args.slo_attainment_percent,
        }),
        ..Default::default()
    };
    for (scenario_index, scenario) in scenarios.iter().enumerate() {
        for &concurrency in &args.concurrency {
            let budget = Budget {
                warmup: args.warmup_requests.unwrap_or(concurrency as u64),
                requests: match (args.max_requests, args.max_time_s) {
                    (Some(n), _) => Some(n),
                    (None, Some(_)) => None,
                    (None, None) => Some((concurrency as u64 * 4).max(100)),
                },
                time: args.max_time_s.map(Duration::from_secs_f64),
            };
            let iteration_seed = shared.seed ^ ((scenario_index as u64) << 32) ^ concurrency as u64;
            let recorder =
                closed_loop(&shared, scenario, concurrency, &budget, iteration_seed).await;
            let iteration = recorder.summary(scenario.to_string(), concurrency, &shared.slo);
            if args.progress {
                eprintln!(
                    "{scenario} concurrency {concurrency}: {} requests, {} errors, {:.1} req/s, {:.0} output tok/s, TTFT mean {:.2} ms p99 {:.2} ms, ITL mean {:.2} ms",
                    iteration.requests,
                    iteration.errors,
                    iteration.requests_per_second,
                    iteration.output_tokens_per_second,
                    iteration.ttft_millis.mean,
                    iteration.ttft_millis.p99,
                    iteration.inter_token_latency_millis.mean,
                );
            }
            report.iterations.push(iteration);
        }
    }
    let ok: u64 = report.iterations.iter().map(|i| i.requests).sum();
    let errors: u64 = report.iterations.iter().map(|i| i.errors).sum();
    report.error_rate_percent = if ok + errors > 0 {
        100.0 * errors as f64 / (ok + errors) as f64
    } else {
        0.0
    };
    if ok + errors == 0 {
        report.failure = Some("no request was measured".into());
    } else if report.error_rate_percent > args.max_error_rate_percent {
        let mut kinds: BTreeMap<&str, u64> = BTreeMap::new();
        for iteration in &report.iterations {
            for (kind, count) in &iteration.errors_by_kind {
                *kinds.entry(kind).or_default() += count;
            }
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
        report.failure = Some(format!(
            "{errors} of {} requests failed ({:.1}%, above the {}% limit): {}",
            ok + errors,
            report.error_rate_percent,
            args.max_error_rate_percent,
            kinds.join(", ")
        ));
    }
    report.choose_best();
    Ok(report)
}

/// How much one iteration sends.
struct Budget {
    warmup: u64,
    requests: Option<u64>,
    time: Option<Duration>,
}

/// Hands out request tickets until the budget is used up.
struct Tickets {
    next: AtomicU64,
    measured_from: OnceLock<Instant>,
}

impl Tickets {
    fn take(&self, budget: &Budget) -> Option<u64> {
        if let (Some(time), Some(start)) = (budget.time, self.measured_from.get())
            && start.elapsed() >= time
        {
            return None;
        }
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        if let Some(requests) = budget.requests
            && ticket >= budget.warmup + requests
        {
            return None;
        }
        if ticket >= budget.warmup {
            self.measured_from.get_or_init(Instant::now);
        }
        Some(ticket)
    }
}

async fn closed_loop(
    shared: &Arc<Shared>,
    scenario: &TrafficScenario,
    concurrency: u32,
    budget: &Budget,
    seed: u64,
) -> Recorder {
    let tickets = Arc::new(Tickets {
        next: AtomicU64::new(0),
        measured_from: OnceLock::new(),
    });
    let budget = Arc::new(Budget {
        warmup: budget.warmup,
        requests: budget.requests,
        time: budget.time,
    });
    // One recorder per iteration, shared: a worker locks it once per finished request.
    // (Per-worker HDR histograms would cost ~1 MiB per stream at high concurrency.)
    let recorder = Arc::new(Mutex::new(Recorder::default()));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let recorder = recorder.clone();
        let shared = shared.clone();
        let tickets = tickets.clone();
        let budget = budget.clone();
        let scenario = *scenario;
        workers.spawn(async move {
            let mut worker = Worker::new(shared, recorder);
            while let Some(ticket) = tickets.take(&budget) {
                worker
                    .request(&scenario, seed, ticket, ticket >= budget.warmup)
                    .await;
            }
        });
    }
    while workers.join_next().await.is_some() {}
    match recorder.lock() {
        Ok(mut recorder) => std::mem::take(&mut *recorder),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

/// One stream: a connection, reusable buffers, and its own recorder.
struct Worker {
    shared: Arc<Shared>,
    connection: Option<Connection>,
    request: Vec<u8>,
    prompt: String,
    stream: StreamState,
    body: Vec<u8>,
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
            recorder,
        }
    }

    fn build(&mut self, scenario: &TrafficScenario, seed: u64, ticket: u64) -> u64 {
        let mut rng = Rng::derive(seed, ticket);
        let draw = workload::draw(scenario, &mut rng);
        self.prompt.clear();
        workload::prompt(&mut rng, draw.input_tokens, &mut self.prompt);
        let shared = &self.shared;
        let mut body = Map::new();
        body.insert("model".into(), Value::String(shared.model.clone()));
        match shared.api {
            Api::Chat => {
                body.insert(
                    "messages".into(),
                    serde_json::json!([{"role": "user", "content": self.prompt}]),
                );
            }
            Api::Completions => {
                body.insert("prompt".into(), Value::String(self.prompt.clone()));
            }
        }
        body.insert("max_tokens".into(), draw.output_tokens.into());
        if shared.vllm_extensions {
            body.insert("min_tokens".into(), draw.output_tokens.into());
            body.insert("ignore_eos".into(), true.into());
        }
        body.insert("stream".into(), shared.stream.into());
        if shared.stream {
            body.insert(
                "stream_options".into(),
                serde_json::json!({"include_usage": true}),
            );
        }
        for (key, value) in &shared.params {
            body.insert(key.clone(), value.clone());
        }
        let json = Value::Object(body).to_string();
        self.request.clear();
        self.request
            .extend_from_slice(shared.request_head.as_bytes());
        self.request
            .extend_from_slice(format!("Content-Length: {}\r\n\r\n", json.len()).as_bytes());
        self.request.extend_from_slice(json.as_bytes());
        draw.input_tokens as u64
    }

    async fn request(
        &mut self,
        scenario: &TrafficScenario,
        seed: u64,
        ticket: u64,
        measured: bool,
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
                    done,
                    token_times: &self.stream.token_times,
                    input_tokens: input,
                    output_tokens,
                    estimated: estimated_output || estimated_input,
                };
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.success(&sample, &self.shared.slo);
                }
            }
            Err(Failed(kind, message)) => {
                tracing::debug!(kind, %message, "request failed");
                if let Ok(mut recorder) = self.recorder.lock() {
                    recorder.error(kind, sent, done);
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
            None => Connection::open(&self.shared.target)
                .await
                .map_err(|e| Failed("connect", e.to_string()))?,
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

/// Fails unless `/v1/models` lists `model`.
async fn check_model(target: &Target, head_extra: &str, model: &str) -> anyhow::Result<()> {
    let url = format!(
        "http://{}{}/v1/models",
        target.host_header(),
        target.base_path
    );
    let mut connection = Connection::open(target)
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
