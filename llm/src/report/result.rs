//! The LLMInference result: what `perfsweep loadgen` prints (one JSON document) and the
//! kind's parser reads back.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The format tag of a load generator report.
pub const FORMAT: &str = "perfsweep-llm-loadgen/v1";

pub use super::distribution::Distribution;

/// Requests meeting the service level objectives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Goodput {
    /// Requests per second that met every objective.
    pub requests_per_second: f64,
    /// Percentage of measured requests (errors included) that met every objective.
    pub attainment_percent: f64,
}

/// One iteration: one traffic scenario at one load level.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Iteration {
    /// The traffic scenario, genai-bench syntax.
    pub scenario: String,
    /// Concurrent streams (closed loop); the concurrency cap in open loop, 0 without one.
    pub concurrency: u32,
    /// Open loop: the offered load, requests per second (absent in closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_rate: Option<f64>,
    /// Open loop: how arrivals were spread: `constant`, `poisson` or `gamma`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arrivals: Option<String>,
    /// Open loop with gamma arrivals: the shape (burstiness factor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burstiness: Option<f64>,
    /// Requests sent before measuring began (`warmupRequests`, `warmupSeconds`).
    #[serde(default)]
    pub warmup_requests: u64,
    /// Measured requests still in flight when the iteration's time ran out: cancelled
    /// and left out of every figure (cooldown).
    #[serde(default)]
    pub cooldown_requests: u64,
    /// Measured requests that succeeded (warmup excluded).
    pub requests: u64,
    /// Measured requests that failed.
    pub errors: u64,
    /// Failed requests by kind: `http_<status>`, `connect`, `timeout`, `stream_error`,
    /// `incomplete`, `protocol` (a response or streamed event that is not JSON),
    /// `protocol_sse_bare_line` (a stream line that is no SSE field, e.g. a chunk without
    /// `data:`), `protocol_sse_unknown_field` (a field other than data, event, id, retry).
    #[serde(default)]
    pub errors_by_kind: std::collections::BTreeMap<String, u64>,
    /// Seconds from the first measured request to the last completion.
    pub duration_seconds: f64,
    /// Successful requests per second.
    pub requests_per_second: f64,
    /// Prompt tokens per second.
    pub input_tokens_per_second: f64,
    /// Generated tokens per second, all streams together.
    pub output_tokens_per_second: f64,
    /// Prompt and generated tokens per second.
    pub total_tokens_per_second: f64,
    /// Mean generation speed one user sees: output tokens after the first per second
    /// of decoding.
    pub output_tokens_per_second_per_user: f64,
    /// Mean prompt tokens per request.
    pub input_tokens_mean: f64,
    /// Mean generated tokens per request.
    pub output_tokens_mean: f64,
    /// Where token counts came from: `server` (usage reported by the server),
    /// `estimated` (the run's tokenizer) or `mixed`.
    pub token_counts: String,
    /// Time to first token.
    pub ttft_millis: Distribution,
    /// Time to the second token.
    pub time_to_second_token_millis: Distribution,
    /// Gaps between streamed chunks carrying content.
    pub inter_token_latency_millis: Distribution,
    /// Time per output token after the first: (end-to-end - TTFT) / (output tokens - 1).
    pub tpot_millis: Distribution,
    /// From sending the request to its last byte. In open loop, this and the time to
    /// first (and second) token count from when the request was due, not from when the
    /// client got to send it, so a client that fell behind cannot hide a slow server.
    pub e2e_latency_millis: Distribution,
    /// Open loop: time to first token from the actual send (the server's share).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_send_millis: Option<Distribution>,
    /// Open loop: how late requests went out after they were due (a full concurrency
    /// cap, or a client that could not keep up). A p99 above a few milliseconds means the
    /// offered load was not what was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag_millis: Option<Distribution>,
    /// Requests that met the SLOs, when SLOs are set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput: Option<Goodput>,
    /// How busy each load generator worker was in this iteration.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientLoad>,
    /// One worker's exact measurements (histograms and counters), which a distributed
    /// run's workers report so that their results merge exactly. Absent from merged and
    /// single-worker results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<RawIteration>,
    /// Server-reported token counts against the tokenizer, when the server reported any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_check: Option<UsageCheck>,
    /// A run with a model mix: this iteration's figures per model (single-worker
    /// results; distributed merges leave them out).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub per_model: std::collections::BTreeMap<String, Iteration>,
    /// Multi-turn sessions: this iteration's figures per turn index, first turn first
    /// (single-worker results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_turn: Vec<super::sessions::TurnFigures>,
    /// A reasoning model's streams: time to the first `reasoning_content` token.
    /// (Single-worker results only: distributed merges leave the reasoning figures
    /// out.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_reasoning_token_millis: Option<Distribution>,
    /// A reasoning model's streams: time to the first answer (`content`) token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_answer_token_millis: Option<Distribution>,
    /// Mean reasoning tokens (streamed `reasoning_content` events) per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_mean: Option<f64>,
    /// Prompt tokens the server's prefix cache held (`usage.prompt_tokens_details.
    /// cached_tokens`), when it reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// `cachedInputTokens` in percent of the prompt tokens of the requests reporting
    /// it: the prefix cache's hit rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens_percent: Option<f64>,
    /// The load generator's own delays of the measured requests (the evidence of a
    /// `clientDelay` doubt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_delay: Option<super::doubt::ClientDelay>,
    /// Share of inter-token gaps under 1 ms, percent (the evidence of a `tokenBursts`
    /// doubt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_gaps_under_1ms_percent: Option<f64>,
    /// Why this iteration's figures are in doubt; empty when they are not. A flagged
    /// iteration is not the headline while an unflagged one qualifies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub doubts: Vec<super::doubt::Doubt>,
}

impl Iteration {
    /// Records what [`super::doubt::judge`] found: the iteration's doubts (replacing
    /// any), the client's delays, the share of token gaps under a millisecond.
    pub fn record(&mut self, judgement: super::doubt::Judgement) {
        self.doubts = judgement.doubts;
        self.client_delay = judgement.client_delay;
        self.token_gaps_under_1ms_percent = judgement.token_gaps_under_1ms_percent;
    }

    /// This iteration's figures as turn `turn`'s, when it summarizes that turn's
    /// requests alone.
    pub fn as_turn(&self, turn: u32) -> super::sessions::TurnFigures {
        super::sessions::TurnFigures {
            turn,
            requests: self.requests,
            errors: self.errors,
            input_tokens_mean: self.input_tokens_mean,
            output_tokens_mean: self.output_tokens_mean,
            ttft_millis: self.ttft_millis.clone(),
            e2e_latency_millis: self.e2e_latency_millis.clone(),
            cached_input_tokens_percent: self.cached_input_tokens_percent,
        }
    }
}

/// How server-reported token counts compare with the load generator's tokenizer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CountCheck {
    /// Requests whose counts were compared.
    pub compared: u64,
    /// Percentage of them where the server's count differs from the tokenizer's.
    pub mismatched_percent: f64,
    /// Mean of server count / tokenizer count (chat templates make input ratios above 1).
    pub mean_ratio: f64,
}

/// Server usage against the tokenizer, for prompts and for generated text.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageCheck {
    /// Prompt tokens (every request the server reported usage for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<CountCheck>,
    /// Generated tokens (one request in eight, to keep tokenizing off most requests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CountCheck>,
}

impl CountCheck {
    /// The check over all of `checks`' requests (weighted by how many each compared).
    fn combine<'a>(checks: impl Iterator<Item = &'a CountCheck>) -> Option<CountCheck> {
        let (mut compared, mut mismatched, mut ratio_sum) = (0u64, 0.0, 0.0);
        for check in checks {
            compared += check.compared;
            mismatched += check.mismatched_percent / 100.0 * check.compared as f64;
            ratio_sum += check.mean_ratio * check.compared as f64;
        }
        (compared > 0).then(|| CountCheck {
            compared,
            mismatched_percent: 100.0 * mismatched.round() / compared as f64,
            mean_ratio: ratio_sum / compared as f64,
        })
    }
}

impl UsageCheck {
    /// The workers' checks of one iteration as one.
    pub fn combine<'a>(checks: impl Iterator<Item = &'a UsageCheck> + Clone) -> Option<UsageCheck> {
        let input = CountCheck::combine(checks.clone().filter_map(|c| c.input.as_ref()));
        let output = CountCheck::combine(checks.filter_map(|c| c.output.as_ref()));
        (input.is_some() || output.is_some()).then_some(UsageCheck { input, output })
    }
}

/// A worker's measurements of one iteration, exactly: what merging needs that the
/// summary figures lose.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawIteration {
    /// HDR histograms of microseconds, base64 of the V2 + DEFLATE encoding.
    pub histograms: RawHistograms,
    /// Prompt tokens of the successful requests.
    pub input_tokens: u64,
    /// Generated tokens of the successful requests.
    pub output_tokens: u64,
    /// Sum of the per-request decode rates (tokens/s) behind the per-user rate.
    pub user_rate_sum: f64,
    /// Requests with a per-request decode rate.
    pub user_rate_count: u64,
    /// Successful requests that met the SLOs.
    pub meeting_slo: u64,
    /// Successful requests whose token counts were estimated.
    pub estimated: u64,
    /// When the first measured request was sent, seconds after the iteration's
    /// synchronized start (the same instant for every worker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_sent_seconds: Option<f64>,
    /// When the last measured request ended, seconds after the synchronized start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_done_seconds: Option<f64>,
    /// The worker's own delays of its measured requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_delay: Option<super::doubt::ClientDelay>,
    /// Prefix cache hits the server reported: cached prompt tokens, and the prompt
    /// tokens of the requests that reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<CachedTokens>,
}

/// Prompt tokens a server's prefix cache held, over the requests that said.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CachedTokens {
    /// Cached prompt tokens.
    pub cached: u64,
    /// Prompt tokens of the requests that reported their cached tokens.
    pub of_input: u64,
}

impl CachedTokens {
    /// The iteration's figures: cached tokens and their percentage.
    pub fn apply(this: Option<CachedTokens>, iteration: &mut Iteration) {
        iteration.cached_input_tokens = this.map(|c| c.cached);
        iteration.cached_input_tokens_percent = this
            .filter(|c| c.of_input > 0)
            .map(|c| 100.0 * c.cached as f64 / c.of_input as f64);
    }
}

/// The histograms of [`RawIteration`], one per latency metric.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RawHistograms {
    /// Time to first token.
    pub ttft: String,
    /// Time to second token.
    pub ttst: String,
    /// Inter-token latency.
    pub itl: String,
    /// Time per output token.
    pub tpot: String,
    /// End-to-end latency.
    pub e2e: String,
    /// Open loop: time to first token from the actual send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_from_send: Option<String>,
    /// Open loop: how late requests were sent after they were due.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag: Option<String>,
}

/// How busy one load generator process was during an iteration. A saturated client
/// measures itself, not the server: its latencies are then not to be trusted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientLoad {
    /// The worker (0 when the load is not distributed).
    pub worker: u32,
    /// Process CPU time over wall time, in percent of the cores the process may use.
    pub cpu_percent: f64,
    /// Cores the process may use: its event loop's threads, within its CPU quota.
    pub cores: f64,
    /// Percentage of the runtime's timer probes (every 10 ms) that woke more than 5 ms
    /// late: the scheduling delay every send and receive of the process suffered.
    pub late_wakeup_percent: f64,
    /// The longest timer probe delay, milliseconds.
    pub max_wakeup_delay_millis: f64,
    /// Whether the client itself was the bottleneck (CPU at 90% or more of its cores,
    /// or more than 5% of the probes late).
    pub saturated: bool,
}

/// An iteration in which a load generator worker was saturated.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaturatedClient {
    /// Index into `iterations`.
    pub iteration: usize,
    /// The worker that was saturated.
    pub worker: u32,
    /// Its CPU use, percent of its cores.
    pub cpu_percent: f64,
    /// Its late timer probes, percent.
    pub late_wakeup_percent: f64,
}

/// What the endpoint runs, as the user declared it (OME's `serviceMetadata`), kept with
/// the result so results can be filtered by engine and hardware.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMetadata {
    /// The serving engine, e.g. `vLLM`, `SGLang` or `TGI`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The engine's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The GPU model, e.g. `H100`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// GPUs serving the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_count: Option<u32>,
}

/// One saturation search: the highest load that met the objectives.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Saturation {
    /// The traffic scenario searched.
    pub scenario: String,
    /// What was varied: `concurrency` or `requestRate`.
    pub load: String,
    /// The highest load whose iteration met the objectives; absent when even the
    /// starting load missed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_meeting_slo: Option<f64>,
    /// Indices into `iterations` of the probes, in the order run.
    pub iterations: Vec<usize>,
}

/// Service level objectives a request must meet to count for goodput.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SloReport {
    /// Largest acceptable time to first token, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_millis: Option<f64>,
    /// Largest acceptable time per output token, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_millis: Option<f64>,
    /// Attainment an iteration needs to qualify for the headline, percent.
    pub attainment_percent: f64,
}

/// Latency and throughput of an LLM inference endpoint under load, per iteration, with
/// the headline figures of the best iteration.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LLMInferenceResult {
    /// `perfsweep-llm-loadgen/v1`.
    #[serde(default)]
    pub format: String,
    /// The model requested.
    #[serde(default)]
    pub model: String,
    /// The endpoint's base URL.
    #[serde(default)]
    pub url: String,
    /// `chat`, `completions` or `embeddings`.
    #[serde(default)]
    pub api: String,
    /// Whether responses were streamed.
    #[serde(default)]
    pub streaming: bool,
    /// The tokenizer prompts were built and tokens counted with (`cl100k_base`, or the
    /// tokenizer.json path).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tokenizer: String,
    /// The objectives goodput is measured against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloReport>,
    /// Every iteration, in the order run.
    #[serde(default)]
    pub iterations: Vec<Iteration>,
    /// Saturation searches, one per traffic scenario, when the spec asked for them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub saturation: Vec<Saturation>,
    /// Index into `iterations` of the headline: the highest output token throughput
    /// among iterations meeting the SLO attainment (every iteration without SLOs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_iteration: Option<usize>,
    /// Output tokens per second across all streams, best iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_second: Option<f64>,
    /// Mean time to first token in milliseconds, best iteration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_mean_millis: Option<f64>,
    /// Concurrency of the best iteration (closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_concurrency: Option<u32>,
    /// Request rate of the best iteration (open loop), per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_request_rate: Option<f64>,
    /// Failed requests / all measured requests, percent, over the whole run.
    #[serde(default)]
    pub error_rate_percent: f64,
    /// Why the run failed (error rate above the limit), when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The error rate above which the run fails, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_error_rate_percent: Option<f64>,
    /// Load generator processes that shared the load (1 unless distributed).
    #[serde(default = "one")]
    pub workers: u32,
    /// Which worker's share this result is, in a distributed run's partial results;
    /// absent once merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u32>,
    /// Iterations in which a worker was saturated: their latencies measure the client.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub saturated_clients: Vec<SaturatedClient>,
    /// What the endpoint runs, as declared in the spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_metadata: Option<ServiceMetadata>,
    /// Indices into `iterations` of the iterations whose figures are in doubt (see
    /// each one's `doubts`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub doubtful_iterations: Vec<usize>,
    /// Why the headline comes from an iteration in doubt, when every qualifying one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline_note: Option<String>,
}

fn one() -> u32 {
    1
}

impl LLMInferenceResult {
    /// The headline figures in a few words.
    pub fn summary(&self) -> String {
        let mut text = match (self.output_tokens_per_second, self.ttft_mean_millis) {
            (Some(tps), Some(ttft)) => format!("{tps:.0} tok/s, TTFT {ttft:.1} ms"),
            (Some(tps), None) => format!("{tps:.0} tok/s"),
            (None, Some(ttft)) => format!("TTFT {ttft:.1} ms"),
            (None, None) => String::new(),
        };
        if let Some(rate) = self.best_request_rate {
            text.push_str(&format!(" at {rate} req/s"));
        } else if let Some(concurrency) = self.best_concurrency {
            text.push_str(&format!(" at concurrency {concurrency}"));
        }
        if self.workers > 1 {
            text.push_str(&format!(" ({} workers)", self.workers));
        }
        if !self.doubtful_iterations.is_empty() {
            let kinds: std::collections::BTreeSet<&str> = self
                .doubtful_iterations
                .iter()
                .filter_map(|&i| self.iterations.get(i))
                .flat_map(|it| it.doubts.iter().map(|d| d.kind.as_str()))
                .collect();
            text.push_str(&format!(
                "; in doubt: {} iteration(s) ({})",
                self.doubtful_iterations.len(),
                kinds.into_iter().collect::<Vec<_>>().join(", ")
            ));
            if let Some(note) = &self.headline_note {
                text.push_str(&format!(", {note}"));
            }
        }
        // Sessions: how the headline iteration's first tokens move with the history.
        if let Some(turns) = self
            .iterations
            .iter()
            .find(|it| Some(it.concurrency) == self.best_concurrency && !it.per_turn.is_empty())
            .or_else(|| self.iterations.iter().find(|it| !it.per_turn.is_empty()))
            .and_then(|it| super::sessions::summary(&it.per_turn))
        {
            text.push_str(&format!("; {turns}"));
        }
        if !self.saturated_clients.is_empty() {
            text.push_str(&format!(
                "; client saturated in {} iteration(s)",
                self.saturated_clients.len()
            ));
        }
        for search in &self.saturation {
            let found = match (search.max_meeting_slo, search.load.as_str()) {
                (Some(load), "requestRate") => format!("up to {load:.3} req/s"),
                (Some(load), _) => format!("up to concurrency {load}"),
                (None, _) => "at no load probed".to_owned(),
            };
            if !text.is_empty() {
                text.push_str("; ");
            }
            text.push_str(&format!("SLO met {found}"));
            if self.saturation.len() > 1 {
                text.push_str(&format!(" ({})", search.scenario));
            }
        }
        text
    }

    /// Whether an iteration met the objectives: its attainment reaches the required
    /// percentage (every iteration with requests does without objectives).
    pub fn meets_slo(&self, iteration: &Iteration) -> bool {
        if iteration.requests == 0 {
            return false;
        }
        match (
            self.slo.as_ref().map(|s| s.attainment_percent),
            &iteration.goodput,
        ) {
            (Some(required), Some(goodput)) => goodput.attainment_percent >= required,
            (Some(_), None) => false,
            (None, _) => true,
        }
    }

    /// Judges the whole run: the error rate against `max_error_rate_percent` (setting
    /// `failure`), the saturated clients, and the headline iteration.
    pub fn finalize(&mut self) {
        let ok: u64 = self.iterations.iter().map(|i| i.requests).sum();
        let errors: u64 = self.iterations.iter().map(|i| i.errors).sum();
        self.error_rate_percent = if ok + errors > 0 {
            100.0 * errors as f64 / (ok + errors) as f64
        } else {
            0.0
        };
        self.failure = None;
        if ok + errors == 0 {
            self.failure = Some("no request was measured".into());
        } else if let Some(limit) = self.max_error_rate_percent
            && self.error_rate_percent > limit
        {
            let mut kinds: std::collections::BTreeMap<&str, u64> = BTreeMap::default();
            for iteration in &self.iterations {
                for (kind, count) in &iteration.errors_by_kind {
                    *kinds.entry(kind).or_default() += count;
                }
            }
            let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{k}: {n}")).collect();
            self.failure = Some(format!(
                "{errors} of {} requests failed ({:.1}%, above the {limit}% limit): {}",
                ok + errors,
                self.error_rate_percent,
                kinds.join(", ")
            ));
        }
        self.saturated_clients = self
            .iterations
            .iter()
            .enumerate()
            .flat_map(|(index, iteration)| {
                iteration
                    .clients
                    .iter()
                    .filter(|c| c.saturated)
                    .map(move |c| SaturatedClient {
                        iteration: index,
                        worker: c.worker,
                        cpu_percent: c.cpu_percent,
                        late_wakeup_percent: c.late_wakeup_percent,
                    })
            })
            .collect();
        self.choose_best();
    }

    /// Picks the headline iteration and copies its figures to the top level: the
    /// fastest qualifying iteration whose figures are not in doubt, or, when every
    /// qualifying one is, the fastest of those with a note saying so.
    pub fn choose_best(&mut self) {
        self.doubtful_iterations = self
            .iterations
            .iter()
            .enumerate()
            .filter(|(_, it)| !it.doubts.is_empty())
            .map(|(index, _)| index)
            .collect();
        let fastest = |trusted_only: bool| {
            self.iterations
                .iter()
                .enumerate()
                .filter(|(_, it)| self.meets_slo(it) && (!trusted_only || it.doubts.is_empty()))
                .max_by(|a, b| {
                    a.1.output_tokens_per_second
                        .total_cmp(&b.1.output_tokens_per_second)
                })
                .map(|(index, _)| index)
        };
        let trusted = fastest(true);
        let best = trusted.or_else(|| fastest(false));
        self.headline_note = match (trusted, best) {
            (None, Some(_)) => Some(
                "headline from an iteration in doubt: no qualifying iteration is free of doubt"
                    .into(),
            ),
            _ => None,
        };
        self.best_iteration = best;
        let best = best.and_then(|i| self.iterations.get(i));
        self.output_tokens_per_second = best.map(|it| it.output_tokens_per_second);
        self.ttft_mean_millis = best.map(|it| it.ttft_millis.mean);
        self.best_request_rate = best.and_then(|it| it.request_rate);
        self.best_concurrency = best
            .filter(|it| it.request_rate.is_none())
            .map(|it| it.concurrency);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iteration(concurrency: u32, rate: Option<f64>, tps: f64, attainment: f64) -> Iteration {
        Iteration {
            concurrency,
            request_rate: rate,
            requests: 10,
            output_tokens_per_second: tps,
            goodput: Some(Goodput {
                requests_per_second: 1.0,
                attainment_percent: attainment,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_headline_is_the_fastest_iteration_meeting_the_slo_and_names_the_search() {
        let mut result = LLMInferenceResult {
            slo: Some(SloReport {
                ttft_millis: Some(100.0),
                tpot_millis: None,
                attainment_percent: 90.0,
            }),
            iterations: vec![
                iteration(4, None, 400.0, 100.0),
                iteration(8, None, 700.0, 95.0),
                iteration(16, None, 900.0, 60.0),
                iteration(0, Some(12.5), 650.0, 99.0),
            ],
            saturation: vec![Saturation {
                scenario: "D(1,1)".into(),
                load: "concurrency".into(),
                max_meeting_slo: Some(8.0),
                iterations: vec![0, 1, 2],
            }],
            ..Default::default()
        };
        result.choose_best();
        assert_eq!(result.best_iteration, Some(1));
        assert_eq!(result.best_concurrency, Some(8));
        assert_eq!(result.best_request_rate, None);
        assert_eq!(
            result.summary(),
            "700 tok/s, TTFT 0.0 ms at concurrency 8; SLO met up to concurrency 8"
        );
        result.iterations[1].goodput = None;
        result.choose_best();
        assert_eq!(result.best_request_rate, Some(12.5));
        assert_eq!(result.best_concurrency, None);
        assert!(
            result
                .summary()
                .starts_with("650 tok/s, TTFT 0.0 ms at 12.5 req/s")
        );
    }

    #[test]
    fn the_headline_skips_iterations_in_doubt_or_says_why_not() {
        let doubt = || super::super::doubt::Doubt {
            kind: "clientDelay".into(),
            metric: "ttftMillis.p99".into(),
            evidence: "stalled".into(),
        };
        let mut fast = iteration(8, None, 900.0, 100.0);
        fast.doubts.push(doubt());
        let mut result = LLMInferenceResult {
            iterations: vec![iteration(4, None, 400.0, 100.0), fast],
            ..Default::default()
        };
        result.choose_best();
        assert_eq!(result.best_iteration, Some(0));
        assert_eq!(result.doubtful_iterations, vec![1]);
        assert_eq!(result.headline_note, None);
        assert!(
            result
                .summary()
                .contains("in doubt: 1 iteration(s) (clientDelay)"),
            "{}",
            result.summary()
        );
        // Every iteration in doubt: the fastest still heads, with the reason.
        result.iterations[0].doubts.push(doubt());
        result.choose_best();
        assert_eq!(result.best_iteration, Some(1));
        assert!(result.headline_note.is_some());
        assert!(
            result
                .summary()
                .contains("headline from an iteration in doubt")
        );
    }

    #[test]
    fn usage_checks_of_workers_combine_weighted_by_requests() {
        let check = |compared, mismatched_percent, mean_ratio| UsageCheck {
            input: Some(CountCheck {
                compared,
                mismatched_percent,
                mean_ratio,
            }),
            output: None,
        };
        let checks = [check(30, 10.0, 1.1), check(10, 50.0, 1.5)];
        let combined = UsageCheck::combine(checks.iter()).expect("compared");
        let input = combined.input.expect("input");
        assert_eq!(input.compared, 40);
        // 3 + 5 of 40 mismatched; ratios 33 + 15 over 40.
        assert!((input.mismatched_percent - 20.0).abs() < 1e-9, "{input:?}");
        assert!((input.mean_ratio - 1.2).abs() < 1e-9, "{input:?}");
        assert!(combined.output.is_none());
        assert_eq!(UsageCheck::combine([].iter()), None);
    }
}
