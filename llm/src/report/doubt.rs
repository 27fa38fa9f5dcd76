//! Figures that flag their own doubt.
//!
//! Two things make an iteration's figures untrustworthy without making them wrong
//! enough to notice:
//!
//! - **The client's own delays.** Every latency runs from a timestamp the load
//!   generator takes (the send, or the due time in open loop) to one the kernel or the
//!   load generator takes (the first token, the end). When the client was late at one
//!   of those moments — it was descheduled between stamping a request and writing it,
//!   it sent an open-loop request after it was due although the concurrency cap had
//!   room, or it read a token long after it arrived, when later tokens may have joined
//!   it in one read — the latency includes that delay. The load generator measures
//!   that delay for every request and counts the requests delayed by more than the
//!   tolerance. Such delays only ever make latencies longer, so with `k` delayed
//!   samples among `n` the true percentile at rank `r` lies between the measured
//!   samples at ranks `r - k` and `r`, and no lower than the measured one minus the
//!   longest delay. When that range is wider than the tolerance the
//!   percentile is in doubt — and only then: a delayed request that does not move a
//!   percentile (many streams, a tight distribution) raises no flag.
//! - **Token bursts.** A server that delivers many tokens at once (an overloaded
//!   engine flushing its queue, a proxy buffering the stream) shows inter-token
//!   latencies of almost nothing; the mean ITL then describes the transport, not the
//!   generation. The share of inter-token gaps under 1 ms is reported, and above
//!   [`BURST_SHARE_LIMIT_PERCENT`] the iteration is flagged.

use hdrhistogram::Histogram;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How far the client's own delays may move a reported percentile before it is in
/// doubt, milliseconds; the same bound decides which requests count as delayed.
pub const CLIENT_DELAY_TOLERANCE_MILLIS: f64 = 5.0;
/// Inter-token gaps shorter than this count as one burst, microseconds.
pub const BURST_GAP_MICROS: u64 = 1000;
/// Share of inter-token gaps under 1 ms above which an iteration is flagged, percent.
pub const BURST_SHARE_LIMIT_PERCENT: f64 = 25.0;
/// Fewer inter-token gaps than this say nothing about bursts.
const BURST_MIN_GAPS: u64 = 50;
/// The percentiles judged (p99.9 of a few hundred samples is the maximum; it is not).
const JUDGED: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)];

/// The client's own delays in one iteration: the evidence of a `clientDelay` flag.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientDelay {
    /// Requests count as delayed, and percentiles as in doubt, beyond this many
    /// milliseconds.
    pub tolerance_millis: f64,
    /// Successful requests whose time to first token may include more than the
    /// tolerance of the client's own delay.
    pub delayed_ttft_requests: u64,
    /// Successful requests whose end-to-end latency may include more than the
    /// tolerance of the client's own delay.
    pub delayed_e2e_requests: u64,
    /// The longest client delay of any request, milliseconds.
    pub max_millis: f64,
}

impl ClientDelay {
    /// The evidence of several workers of one iteration, as one.
    pub fn combine<'a>(parts: impl Iterator<Item = &'a ClientDelay>) -> Option<ClientDelay> {
        parts.fold(None, |sum: Option<ClientDelay>, part| {
            let mut sum = sum.unwrap_or_else(|| ClientDelay {
                tolerance_millis: part.tolerance_millis,
                ..Default::default()
            });
            sum.delayed_ttft_requests += part.delayed_ttft_requests;
            sum.delayed_e2e_requests += part.delayed_e2e_requests;
            sum.max_millis = sum.max_millis.max(part.max_millis);
            Some(sum)
        })
    }
}

/// Why an iteration's figures are in doubt.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Doubt {
    /// `clientDelay` or `tokenBursts`.
    pub kind: String,
    /// The figure in doubt, e.g. `ttftMillis.p99` or `interTokenLatencyMillis`.
    pub metric: String,
    /// The evidence, in words.
    pub evidence: String,
}

/// How far the percentile at quantile `q` of `histogram` (microseconds) may have been
/// pushed up by `delayed` samples that are too long: the measured value minus the value
/// `delayed` ranks below it, milliseconds (0 without delayed samples).
pub fn possible_shift_millis(histogram: &Histogram<u64>, q: f64, delayed: u64) -> f64 {
    let n = histogram.len();
    if delayed == 0 || n == 0 {
        return 0.0;
    }
    let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
    let measured = histogram.value_at_quantile(q);
    let lower = if delayed >= rank {
        histogram.min()
    } else {
        // The sample at rank `rank - delayed`: quantile just inside that rank.
        histogram.value_at_quantile((rank - delayed) as f64 / n as f64)
    };
    measured.saturating_sub(lower) as f64 / 1000.0
}

/// Flags of the client delays against the time to first token and end-to-end
/// histograms (microseconds).
pub fn client_delay_doubts(
    delay: &ClientDelay,
    ttft: &Histogram<u64>,
    e2e: &Histogram<u64>,
) -> Vec<Doubt> {
    let mut doubts = Vec::new();
    for (metric, name, histogram, delayed) in [
        ("ttftMillis", "TTFT", ttft, delay.delayed_ttft_requests),
        (
            "e2eLatencyMillis",
            "end-to-end latency",
            e2e,
            delay.delayed_e2e_requests,
        ),
    ] {
        // The percentile that could have moved the most, with how far.
        let worst = JUDGED
            .iter()
            // No sample can be too high by more than the longest delay either.
            .map(|&(label, q)| {
                let shift = possible_shift_millis(histogram, q, delayed).min(delay.max_millis);
                (label, q, shift)
            })
            .filter(|&(_, _, shift)| shift > delay.tolerance_millis)
            .max_by(|a, b| a.2.total_cmp(&b.2));
        if let Some((label, q, shift)) = worst {
            let measured = histogram.value_at_quantile(q) as f64 / 1000.0;
            doubts.push(Doubt {
                kind: "clientDelay".into(),
                metric: format!("{metric}.{label}"),
                evidence: format!(
                    "{delayed} of {} requests were delayed by the load generator itself by more than {} ms (at most {:.1} ms): {label} {name} {measured:.1} ms could be {shift:.1} ms too high",
                    histogram.len(),
                    delay.tolerance_millis,
                    delay.max_millis,
                ),
            });
        }
    }
    doubts
}

/// The share of inter-token gaps under 1 ms in `itl` (microseconds), percent; `None`
/// without gaps.
pub fn burst_share_percent(itl: &Histogram<u64>) -> Option<f64> {
    let gaps = itl.len();
    (gaps > 0).then(|| {
        let short = itl.count_between(0, BURST_GAP_MICROS - 1);
        100.0 * short as f64 / gaps as f64
    })
}

/// A `tokenBursts` flag when too many inter-token gaps were under 1 ms.
pub fn burst_doubt(itl: &Histogram<u64>) -> Option<Doubt> {
    let share = burst_share_percent(itl)?;
    (itl.len() >= BURST_MIN_GAPS && share > BURST_SHARE_LIMIT_PERCENT).then(|| Doubt {
        kind: "tokenBursts".into(),
        metric: "interTokenLatencyMillis".into(),
        evidence: format!(
            "{share:.1}% of {} inter-token gaps were under 1 ms (limit {BURST_SHARE_LIMIT_PERCENT}%): tokens arrived in bursts, so inter-token latency describes the delivery, not the generation",
            itl.len()
        ),
    })
}

/// The evidence and the flags of an iteration, from its histograms (microseconds): what
/// [`judge`] finds, for the iteration to record.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Judgement {
    pub doubts: Vec<Doubt>,
    pub client_delay: Option<ClientDelay>,
    pub token_gaps_under_1ms_percent: Option<f64>,
}

/// Judges an iteration from its histograms (microseconds) and the client's delays.
pub fn judge(
    delay: Option<ClientDelay>,
    ttft: &Histogram<u64>,
    e2e: &Histogram<u64>,
    itl: &Histogram<u64>,
) -> Judgement {
    let mut doubts = Vec::new();
    if let Some(delay) = &delay {
        doubts.extend(client_delay_doubts(delay, ttft, e2e));
    }
    doubts.extend(burst_doubt(itl));
    Judgement {
        doubts,
        client_delay: delay,
        token_gaps_under_1ms_percent: burst_share_percent(itl),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(millis: &[u64]) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
        for ms in millis {
            h.record(ms * 1000).expect("in range");
        }
        h
    }

    fn delay(ttft: u64, max_millis: f64) -> ClientDelay {
        ClientDelay {
            tolerance_millis: CLIENT_DELAY_TOLERANCE_MILLIS,
            delayed_ttft_requests: ttft,
            delayed_e2e_requests: 0,
            max_millis,
        }
    }

    #[test]
    fn delayed_requests_flag_a_percentile_only_when_they_could_move_it() {
        // 200 requests at 50 ms; 15 of them held up 300 ms by a stalled client.
        let mut values = vec![50; 185];
        values.extend([350; 15]);
        let ttft = histogram(&values);
        let e2e = histogram(&values);
        let doubts = client_delay_doubts(&delay(15, 300.0), &ttft, &e2e);
        assert_eq!(doubts.len(), 1, "{doubts:?}");
        assert_eq!(doubts[0].kind, "clientDelay");
        assert!(doubts[0].metric.starts_with("ttftMillis.p9"), "{doubts:?}");
        assert!(doubts[0].evidence.contains("15 of 200"), "{doubts:?}");
        // The same delays among a tight distribution move no percentile: no flag.
        let tight = histogram(&[50; 200]);
        assert!(client_delay_doubts(&delay(15, 6.0), &tight, &tight).is_empty());
        // One delayed request cannot move p99 of 1,000 tight samples, though the
        // sample itself is an outlier.
        let mut values = vec![50; 999];
        values.push(400);
        let one = histogram(&values);
        assert!(client_delay_doubts(&delay(1, 350.0), &one, &one).is_empty());
        // No delayed request, no doubt, whatever the spread.
        let spread = histogram(&(1..=200).collect::<Vec<_>>());
        assert!(client_delay_doubts(&delay(0, 4.0), &spread, &spread).is_empty());
        assert_eq!(possible_shift_millis(&spread, 0.99, 0), 0.0);
        // Two delayed samples under a p99 of a wide distribution: 198 - 196 ms.
        let shift = possible_shift_millis(&spread, 0.99, 2);
        assert!((shift - 2.0).abs() < 0.2, "{shift}");
    }

    #[test]
    fn bursts_of_sub_millisecond_gaps_are_flagged_above_the_limit() {
        let mut gaps = vec![0; 40];
        gaps.extend([20; 60]);
        let mut bursty = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("bounds");
        for micros in gaps.iter().map(|ms| (ms * 1000).max(30)) {
            bursty.record(micros).expect("in range");
        }
        let doubt = burst_doubt(&bursty).expect("40% under 1 ms");
        assert!(doubt.evidence.starts_with("40.0% of 100"), "{doubt:?}");
        let smooth = histogram(&[20; 100]);
        assert_eq!(burst_share_percent(&smooth), Some(0.0));
        assert!(burst_doubt(&smooth).is_none());
        // Too few gaps to judge.
        let few = histogram(&[0; 10]);
        assert!(burst_doubt(&few).is_none());
    }
}
