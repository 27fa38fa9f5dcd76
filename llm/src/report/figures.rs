//! The figures of an iteration from its exact measurements — counts, the span of the
//! measured requests, latency histograms — computed one way for a load generator's own
//! summary ([`crate::loadgen`]'s recorder) and for a merge of workers' measurements
//! ([`super::distribute::summarize`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use super::doubt::{self, ClientDelay};
use super::histogram;
use super::result::{CachedTokens, Goodput, Iteration};

/// What an iteration measured (histograms of microseconds).
pub struct Measured<'a> {
    /// Successful requests.
    pub requests: u64,
    pub errors_by_kind: &'a BTreeMap<String, u64>,
    /// From the first measured send to the last completion.
    pub seconds: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub user_rate_sum: f64,
    pub user_rate_count: u64,
    pub meeting_slo: u64,
    /// Successful requests whose token counts were estimated.
    pub estimated: u64,
    pub client_delay: Option<ClientDelay>,
    pub cached_input_tokens: Option<CachedTokens>,
    pub ttft: &'a Histogram<u64>,
    pub ttst: &'a Histogram<u64>,
    pub itl: &'a Histogram<u64>,
    pub tpot: &'a Histogram<u64>,
    pub e2e: &'a Histogram<u64>,
    /// `None` or empty where nothing was measured.
    pub ttft_from_send: Option<&'a Histogram<u64>>,
    pub schedule_lag: Option<&'a Histogram<u64>>,
}

/// The iteration's figures (rates over `seconds`, means over the successful requests,
/// distributions, goodput when SLOs are set), judged ([`doubt::judge`]).
pub fn figures(
    measured: &Measured<'_>,
    scenario: String,
    concurrency: u32,
    slo_set: bool,
) -> Iteration {
    let m = measured;
    let per_second = |n: f64| {
        if m.seconds > 0.0 { n / m.seconds } else { 0.0 }
    };
    let errors: u64 = m.errors_by_kind.values().sum();
    let ok = m.requests as f64;
    let mean_of = |n: u64| if m.requests > 0 { n as f64 / ok } else { 0.0 };
    let token_counts = match m.estimated {
        0 => "server",
        n if n == m.requests => "estimated",
        _ => "mixed",
    };
    let optional =
        |h: Option<&Histogram<u64>>| h.filter(|h| !h.is_empty()).map(histogram::distribution);
    let mut iteration = Iteration {
        scenario,
        concurrency,
        requests: m.requests,
        errors,
        errors_by_kind: m.errors_by_kind.clone(),
        duration_seconds: m.seconds,
        requests_per_second: per_second(ok),
        input_tokens_per_second: per_second(m.input_tokens as f64),
        output_tokens_per_second: per_second(m.output_tokens as f64),
        total_tokens_per_second: per_second((m.input_tokens + m.output_tokens) as f64),
        output_tokens_per_second_per_user: if m.user_rate_count > 0 {
            m.user_rate_sum / m.user_rate_count as f64
        } else {
            0.0
        },
        input_tokens_mean: mean_of(m.input_tokens),
        output_tokens_mean: mean_of(m.output_tokens),
        token_counts: token_counts.into(),
        ttft_millis: histogram::distribution(m.ttft),
        time_to_second_token_millis: histogram::distribution(m.ttst),
        inter_token_latency_millis: histogram::distribution(m.itl),
        tpot_millis: histogram::distribution(m.tpot),
        e2e_latency_millis: histogram::distribution(m.e2e),
        ttft_from_send_millis: optional(m.ttft_from_send),
        schedule_lag_millis: optional(m.schedule_lag),
        goodput: slo_set.then(|| Goodput {
            requests_per_second: per_second(m.meeting_slo as f64),
            attainment_percent: if m.requests + errors > 0 {
                100.0 * m.meeting_slo as f64 / (m.requests + errors) as f64
            } else {
                0.0
            },
        }),
        ..Iteration::default()
    };
    iteration.record(doubt::judge(m.client_delay.clone(), m.ttft, m.e2e, m.itl));
    CachedTokens::apply(m.cached_input_tokens, &mut iteration);
    iteration
}
