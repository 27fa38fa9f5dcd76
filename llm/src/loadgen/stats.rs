//! Per-worker recorders (HDR histograms, mergeable) and the iteration summary.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::report::figures::{Measured, figures};
use crate::report::result::{CachedTokens, Iteration, RawHistograms, RawIteration};
use crate::report::{doubt, histogram};
use hdrhistogram::Histogram;
use tokio::time::Instant;

/// Service level objectives, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
}

impl Slo {
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some()
    }
}

/// One finished request.
#[derive(Clone, Debug)]
pub struct Sample<'a> {
    pub sent: Instant,
    /// Open loop: when the request was due. Latencies then count from here, so a
    /// client or a concurrency cap that delayed the send cannot hide it.
    pub scheduled: Option<Instant>,
    pub done: Instant,
    /// Content events' arrival times (streaming); empty without streaming.
    pub token_times: &'a [Instant],
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub estimated: bool,
    /// How much of the client's own delay the time to first token may include (see
    /// [`crate::report::doubt`]).
    pub ttft_client_delay: Duration,
    /// How much of the client's own delay the end-to-end latency may include.
    pub e2e_client_delay: Duration,
    /// A reasoning model's stream: streamed reasoning events (tokens), and when the
    /// first reasoning and the first answer content arrived.
    pub reasoning: Option<Reasoning>,
}

/// What a reasoning model streamed before its answer.
#[derive(Clone, Copy, Debug)]
pub struct Reasoning {
    pub tokens: u64,
    pub first: Instant,
    pub first_answer: Option<Instant>,
}

fn histogram() -> Histogram<u64> {
    // Microseconds, 1 µs to 1 hour, 3 significant digits.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap_or_else(|_| {
        Histogram::new(3).unwrap_or_else(|_| unreachable!("3 significant digits is valid"))
    })
}

fn micros(duration: Duration) -> u64 {
    (duration.as_nanos() / 1000)
        .max(1)
        .min(u128::from(u64::MAX)) as u64
}

/// What one worker measured in one iteration.
pub struct Recorder {
    ttft: Histogram<u64>,
    ttst: Histogram<u64>,
    itl: Histogram<u64>,
    tpot: Histogram<u64>,
    e2e: Histogram<u64>,
    /// Open loop: time to first token from the actual send.
    ttft_from_send: Histogram<u64>,
    /// Open loop: how late requests were sent after they were due.
    schedule_lag: Histogram<u64>,
    ok: u64,
    errors: BTreeMap<String, u64>,
    input_tokens: u64,
    output_tokens: u64,
    user_rate_sum: f64,
    user_rate_count: u64,
    meeting_slo: u64,
    estimated: u64,
    first_sent: Option<Instant>,
    last_done: Option<Instant>,
    /// Successful requests whose TTFT / end-to-end latency may include more than the
    /// tolerance of the client's own delay, and the longest such delay.
    delayed_ttft: u64,
    delayed_e2e: u64,
    max_client_delay: Duration,
    /// Prefix cache hits the server reported.
    cached: Option<CachedTokens>,
    /// Reasoning streams: time to the first reasoning and the first answer token, and
    /// reasoning tokens in all.
    ttf_reasoning: Histogram<u64>,
    ttf_answer: Histogram<u64>,
    reasoning_tokens: u64,
    /// `--model-mix`: the same, per model.
    by_model: BTreeMap<String, Recorder>,
    /// Multi-turn sessions: the same, per turn index (1 first).
    by_turn: BTreeMap<u32, Recorder>,
    /// Server usage against the tokenizer.
    pub usage: super::usage_check::UsageTallies,
}

/// Client delays beyond this make a request count as delayed.
fn client_delay_tolerance() -> Duration {
    Duration::from_secs_f64(doubt::CLIENT_DELAY_TOLERANCE_MILLIS / 1000.0)
}

impl Default for Recorder {
    fn default() -> Self {
        Self {
            ttft: histogram(),
            ttst: histogram(),
            itl: histogram(),
            tpot: histogram(),
            e2e: histogram(),
            ttft_from_send: histogram(),
            schedule_lag: histogram(),
            ok: 0,
            errors: BTreeMap::new(),
            input_tokens: 0,
            output_tokens: 0,
            user_rate_sum: 0.0,
            user_rate_count: 0,
            meeting_slo: 0,
            estimated: 0,
            first_sent: None,
            last_done: None,
            delayed_ttft: 0,
            delayed_e2e: 0,
            max_client_delay: Duration::ZERO,
            cached: None,
            ttf_reasoning: histogram(),
            ttf_answer: histogram(),
            reasoning_tokens: 0,
            by_model: BTreeMap::new(),
            by_turn: BTreeMap::new(),
            usage: super::usage_check::UsageTallies::default(),
        }
    }
}

impl Recorder {
    fn span(&mut self, sent: Instant, done: Instant) {
        self.first_sent = Some(self.first_sent.map_or(sent, |f| f.min(sent)));
        self.last_done = Some(self.last_done.map_or(done, |l| l.max(done)));
    }

    pub fn error(&mut self, kind: &str, sent: Instant, done: Instant) {
        self.span(sent, done);
        *self.errors.entry(kind.to_owned()).or_default() += 1;
    }

    /// Finished requests, successful or not.
    pub fn count(&self) -> u64 {
        self.ok + self.errors.values().sum::<u64>()
    }

    /// Open loop: a request due at `scheduled` went out at `sent`.
    pub fn schedule_lag(&mut self, scheduled: Option<Instant>, sent: Instant) {
        if let Some(scheduled) = scheduled {
            let _ = self
                .schedule_lag
                .record(micros(sent.saturating_duration_since(scheduled)));
        }
    }

    pub fn success(&mut self, sample: &Sample<'_>, slo: &Slo) {
        let origin = sample.scheduled.unwrap_or(sample.sent);
        self.span(origin, sample.done);
        self.ok += 1;
        self.input_tokens += sample.input_tokens;
        self.output_tokens += sample.output_tokens;
        if sample.estimated {
            self.estimated += 1;
        }
        self.client_delay(sample.ttft_client_delay, sample.e2e_client_delay);
        if let Some(reasoning) = &sample.reasoning {
            self.reasoning_tokens += reasoning.tokens;
            let _ = self
                .ttf_reasoning
                .record(micros(reasoning.first.saturating_duration_since(origin)));
            if let Some(answer) = reasoning.first_answer {
                let _ = self
                    .ttf_answer
                    .record(micros(answer.saturating_duration_since(origin)));
            }
        }
        let e2e = sample.done - origin;
        let _ = self.e2e.record(micros(e2e));
        // Without streaming the first token arrives with the last.
        let first = sample.token_times.first().copied().unwrap_or(sample.done);
        let ttft = first - origin;
        let _ = self.ttft.record(micros(ttft));
        if sample.scheduled.is_some() {
            let _ = self
                .ttft_from_send
                .record(micros(first.saturating_duration_since(sample.sent)));
        }
        if let Some(second) = sample.token_times.get(1) {
            let _ = self.ttst.record(micros(*second - origin));
        }
        for pair in sample.token_times.windows(2) {
            let _ = self.itl.record(micros(pair[1] - pair[0]));
        }
        let decode = e2e.saturating_sub(ttft);
        let mut tpot_ms = None;
        if sample.output_tokens > 1 && !sample.token_times.is_empty() {
            let tpot = decode / (sample.output_tokens - 1).min(u64::from(u32::MAX)) as u32;
            let _ = self.tpot.record(micros(tpot));
            tpot_ms = Some(tpot.as_secs_f64() * 1000.0);
            if decode > Duration::ZERO {
                self.user_rate_sum += (sample.output_tokens - 1) as f64 / decode.as_secs_f64();
                self.user_rate_count += 1;
            }
        }
        let ttft_ok = slo
            .ttft_ms
            .is_none_or(|limit| ttft.as_secs_f64() * 1000.0 <= limit);
        let tpot_ok = slo
            .tpot_ms
            .is_none_or(|limit| tpot_ms.is_none_or(|t| t <= limit));
        if ttft_ok && tpot_ok {
            self.meeting_slo += 1;
        }
    }

    /// A successful request's prompt of `input` tokens of which the server's prefix
    /// cache held `cached`.
    pub fn cached_tokens(&mut self, cached: u64, input: u64) {
        let sum = self.cached.get_or_insert_with(CachedTokens::default);
        sum.cached += cached;
        sum.of_input += input;
    }

    /// The recorder of one model of a `--model-mix`.
    pub fn of_model(&mut self, model: &str) -> &mut Recorder {
        self.by_model.entry(model.to_owned()).or_default()
    }

    /// The recorder of one turn index of multi-turn sessions.
    pub fn of_turn(&mut self, turn: u32) -> &mut Recorder {
        self.by_turn.entry(turn).or_default()
    }

    fn client_delay(&mut self, ttft: Duration, e2e: Duration) {
        let tolerance = client_delay_tolerance();
        self.delayed_ttft += u64::from(ttft > tolerance);
        self.delayed_e2e += u64::from(e2e > tolerance);
        self.max_client_delay = self.max_client_delay.max(ttft).max(e2e);
    }

    /// The client delay evidence; `None` before any request succeeded.
    fn client_delay_report(&self) -> Option<doubt::ClientDelay> {
        (self.ok > 0).then_some(doubt::ClientDelay {
            tolerance_millis: doubt::CLIENT_DELAY_TOLERANCE_MILLIS,
            delayed_ttft_requests: self.delayed_ttft,
            delayed_e2e_requests: self.delayed_e2e,
            max_millis: self.max_client_delay.as_secs_f64() * 1000.0,
        })
    }

    /// An embeddings request: no tokens stream back, so no time to first token; its
    /// end-to-end latency (from `origin`: when it was due in open loop, sent otherwise)
    /// is held against the TTFT objective.
    pub fn success_embedding(
        &mut self,
        origin: Instant,
        done: Instant,
        input_tokens: u64,
        estimated: bool,
        client_delay: Duration,
        slo: &Slo,
    ) {
        self.span(origin, done);
        self.ok += 1;
        self.client_delay(client_delay, client_delay);
        self.input_tokens += input_tokens;
        if estimated {
            self.estimated += 1;
        }
        let e2e = done - origin;
        let _ = self.e2e.record(micros(e2e));
        if slo
            .ttft_ms
            .is_none_or(|limit| e2e.as_secs_f64() * 1000.0 <= limit)
        {
            self.meeting_slo += 1;
        }
    }

    pub fn merge(&mut self, other: Recorder) {
        self.usage.merge(&other.usage);
        let _ = self.ttft.add(&other.ttft);
        let _ = self.ttst.add(&other.ttst);
        let _ = self.itl.add(&other.itl);
        let _ = self.tpot.add(&other.tpot);
        let _ = self.e2e.add(&other.e2e);
        let _ = self.ttft_from_send.add(&other.ttft_from_send);
        let _ = self.schedule_lag.add(&other.schedule_lag);
        self.ok += other.ok;
        for (kind, count) in other.errors {
            *self.errors.entry(kind).or_default() += count;
        }
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.user_rate_sum += other.user_rate_sum;
        self.user_rate_count += other.user_rate_count;
        self.meeting_slo += other.meeting_slo;
        self.estimated += other.estimated;
        self.delayed_ttft += other.delayed_ttft;
        self.delayed_e2e += other.delayed_e2e;
        self.max_client_delay = self.max_client_delay.max(other.max_client_delay);
        let _ = self.ttf_reasoning.add(&other.ttf_reasoning);
        let _ = self.ttf_answer.add(&other.ttf_answer);
        self.reasoning_tokens += other.reasoning_tokens;
        for (model, theirs) in other.by_model {
            self.of_model(&model).merge(theirs);
        }
        for (turn, theirs) in other.by_turn {
            self.of_turn(turn).merge(theirs);
        }
        if let Some(theirs) = other.cached {
            self.cached_tokens(theirs.cached, theirs.of_input);
        }
        if let (Some(sent), Some(done)) = (other.first_sent, other.last_done) {
            self.span(sent, done);
        }
    }

    pub fn summary(&self, scenario: String, concurrency: u32, slo: &Slo) -> Iteration {
        let seconds = match (self.first_sent, self.last_done) {
            (Some(first), Some(last)) => (last - first).as_secs_f64(),
            _ => 0.0,
        };
        let measured = Measured {
            requests: self.ok,
            errors_by_kind: &self.errors,
            seconds,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            user_rate_sum: self.user_rate_sum,
            user_rate_count: self.user_rate_count,
            meeting_slo: self.meeting_slo,
            estimated: self.estimated,
            client_delay: self.client_delay_report(),
            cached_input_tokens: self.cached,
            ttft: &self.ttft,
            ttst: &self.ttst,
            itl: &self.itl,
            tpot: &self.tpot,
            e2e: &self.e2e,
            ttft_from_send: Some(&self.ttft_from_send),
            schedule_lag: Some(&self.schedule_lag),
        };
        let mut iteration = figures(&measured, scenario, concurrency, slo.is_set());
        iteration.usage_check = self.usage.report();
        iteration.per_model = self
            .by_model
            .iter()
            .map(|(model, recorder)| {
                let mut part = recorder.summary(model.clone(), concurrency, slo);
                // The part's own doubts are its whole's; its evidence stays.
                part.doubts.clear();
                (model.clone(), part)
            })
            .collect();
        iteration.per_turn = self
            .by_turn
            .iter()
            .map(|(&turn, recorder)| {
                let part = recorder.summary(format!("turn {turn}"), concurrency, slo);
                part.as_turn(turn)
            })
            .collect();
        if !self.ttf_reasoning.is_empty() {
            iteration.time_to_first_reasoning_token_millis =
                Some(histogram::distribution(&self.ttf_reasoning));
            iteration.time_to_first_answer_token_millis =
                (!self.ttf_answer.is_empty()).then(|| histogram::distribution(&self.ttf_answer));
            iteration.reasoning_tokens_mean = Some(self.reasoning_tokens as f64 / self.ok as f64);
        }
        iteration
    }
}

/// Serialization for distributed runs: a worker's exact measurements, which merge.
impl Recorder {
    /// What this recorder measured, exactly, with times in seconds after `start` (the
    /// iteration's synchronized start, the same instant for every worker).
    pub fn raw(&self, start: Instant) -> Result<RawIteration, histogram::HistogramError> {
        let since = |at: Instant| at.saturating_duration_since(start).as_secs_f64();
        let optional =
            |h: &Histogram<u64>| (!h.is_empty()).then(|| histogram::encode(h)).transpose();
        Ok(RawIteration {
            histograms: RawHistograms {
                ttft: histogram::encode(&self.ttft)?,
                ttst: histogram::encode(&self.ttst)?,
                itl: histogram::encode(&self.itl)?,
                tpot: histogram::encode(&self.tpot)?,
                e2e: histogram::encode(&self.e2e)?,
                ttft_from_send: optional(&self.ttft_from_send)?,
                schedule_lag: optional(&self.schedule_lag)?,
            },
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            user_rate_sum: self.user_rate_sum,
            user_rate_count: self.user_rate_count,
            meeting_slo: self.meeting_slo,
            estimated: self.estimated,
            first_sent_seconds: self.first_sent.map(since),
            last_done_seconds: self.last_done.map(since),
            client_delay: self.client_delay_report(),
            cached_input_tokens: self.cached,
        })
    }
}

#[cfg(test)]
mod raw_tests {
    use super::*;
    use crate::report::distribute;

    /// The merge recomputes an iteration from raw measurements; for one worker that
    /// must give what the worker's own summary says (the two must not drift apart).
    #[test]
    fn a_summary_from_raw_measurements_equals_the_recorders_own() {
        let slo = Slo {
            ttft_ms: Some(60.0),
            tpot_ms: Some(11.0),
        };
        let start = Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        let mut recorder = Recorder::default();
        for (sent, first, gap, tokens) in [(0, 50, 10, 3), (5, 80, 12, 4), (9, 40, 9, 2)] {
            let times: Vec<Instant> = (0..tokens)
                .map(|i| start + ms(sent + first + i * gap))
                .collect();
            recorder.success(
                &Sample {
                    sent: start + ms(sent),
                    scheduled: (sent == 9).then(|| start + ms(sent - 2)),
                    done: *times.last().expect("tokens"),
                    token_times: &times,
                    input_tokens: 7,
                    output_tokens: tokens,
                    estimated: sent == 5,
                    ttft_client_delay: ms(sent),
                    e2e_client_delay: Duration::ZERO,
                    reasoning: None,
                },
                &slo,
            );
        }
        recorder.schedule_lag(Some(start + ms(7)), start + ms(9));
        recorder.error("timeout", start + ms(1), start + ms(200));
        let own = recorder.summary("D(7,3)".into(), 3, &slo);
        assert!(own.ttft_from_send_millis.is_some() && own.schedule_lag_millis.is_some());
        let raw = recorder.raw(start).expect("serializes");
        let rebuilt = distribute::summarize(
            &raw,
            own.requests,
            &own.errors_by_kind,
            own.scenario.clone(),
            3,
            true,
        )
        .expect("summarizes");
        assert_eq!(rebuilt.ttft_millis, own.ttft_millis);
        assert_eq!(
            rebuilt.inter_token_latency_millis,
            own.inter_token_latency_millis
        );
        assert_eq!(rebuilt.tpot_millis, own.tpot_millis);
        assert_eq!(rebuilt.e2e_latency_millis, own.e2e_latency_millis);
        assert_eq!(rebuilt.ttft_from_send_millis, own.ttft_from_send_millis);
        assert_eq!(rebuilt.schedule_lag_millis, own.schedule_lag_millis);
        assert_eq!(
            rebuilt.time_to_second_token_millis,
            own.time_to_second_token_millis
        );
        assert_eq!(
            (rebuilt.requests, rebuilt.errors),
            (own.requests, own.errors)
        );
        assert_eq!(rebuilt.token_counts, own.token_counts);
        // One request (sent at 9 ms) counted as delayed past the 5 ms tolerance.
        assert_eq!(
            own.client_delay.as_ref().map(|d| d.delayed_ttft_requests),
            Some(1)
        );
        assert_eq!(rebuilt.client_delay, own.client_delay);
        assert_eq!(rebuilt.doubts, own.doubts);
        assert_eq!(
            rebuilt.token_gaps_under_1ms_percent,
            own.token_gaps_under_1ms_percent
        );
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        assert!(close(rebuilt.duration_seconds, own.duration_seconds));
        assert!(close(
            rebuilt.output_tokens_per_second,
            own.output_tokens_per_second
        ));
        assert!(close(rebuilt.requests_per_second, own.requests_per_second));
        assert!(close(
            rebuilt.output_tokens_per_second_per_user,
            own.output_tokens_per_second_per_user
        ));
        let (a, b) = (rebuilt.goodput.expect("slo"), own.goodput.expect("slo"));
        assert!(close(a.attainment_percent, b.attainment_percent));
        assert!(close(a.requests_per_second, b.requests_per_second));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_merge_and_summarize() {
        let slo = Slo {
            ttft_ms: Some(60.0),
            tpot_ms: None,
        };
        let start = Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        let mut a = Recorder::default();
        let times = [start + ms(50), start + ms(60), start + ms(70)];
        a.success(
            &Sample {
                sent: start,
                scheduled: None,
                done: start + ms(70),
                token_times: &times,
                input_tokens: 10,
                output_tokens: 3,
                estimated: false,
                ttft_client_delay: Duration::ZERO,
                e2e_client_delay: Duration::ZERO,
                reasoning: None,
            },
            &slo,
        );
        let mut b = Recorder::default();
        let times = [start + ms(100), start + ms(110), start + ms(120)];
        b.success(
            &Sample {
                sent: start + ms(30),
                scheduled: None,
                done: start + ms(120),
                token_times: &times,
                input_tokens: 10,
                output_tokens: 3,
                estimated: true,
                ttft_client_delay: Duration::ZERO,
                e2e_client_delay: Duration::ZERO,
                reasoning: None,
            },
            &slo,
        );
        b.error("http_500", start + ms(40), start + ms(100));
        a.merge(b);
        let it = a.summary("D(10,3)".into(), 2, &slo);
        assert_eq!((it.requests, it.errors), (2, 1));
        assert_eq!(it.token_counts, "mixed");
        assert!((it.duration_seconds - 0.12).abs() < 1e-9);
        assert!((it.output_tokens_per_second - 50.0).abs() < 1e-6);
        assert!(
            (it.ttft_millis.mean - 60.0).abs() < 0.1,
            "{:?}",
            it.ttft_millis
        );
        assert!((it.inter_token_latency_millis.mean - 10.0).abs() < 0.01);
        assert_eq!(it.inter_token_latency_millis.count, 4);
        assert!((it.tpot_millis.p50 - 10.0).abs() < 0.01);
        let goodput = it.goodput.expect("SLO set");
        // 50 ms and 70 ms TTFT against 60 ms; the error counts against attainment.
        assert!((goodput.attainment_percent - 100.0 / 3.0).abs() < 1e-9);
        assert!((it.output_tokens_per_second_per_user - 100.0).abs() < 1e-6);
    }

    #[test]
    fn open_loop_latency_counts_from_the_scheduled_time() {
        let slo = Slo {
            ttft_ms: Some(60.0),
            tpot_ms: None,
        };
        let due = Instant::now();
        let ms = |n: u64| Duration::from_millis(n);
        // Due at 0, sent 40 ms late (a full cap), first token 30 ms after the send.
        let times = [due + ms(70), due + ms(80)];
        let sent = due + ms(40);
        let mut recorder = Recorder::default();
        recorder.schedule_lag(Some(due), sent);
        recorder.success(
            &Sample {
                sent,
                scheduled: Some(due),
                done: due + ms(80),
                token_times: &times,
                input_tokens: 1,
                output_tokens: 2,
                estimated: false,
                ttft_client_delay: Duration::ZERO,
                e2e_client_delay: Duration::ZERO,
                reasoning: None,
            },
            &slo,
        );
        let it = recorder.summary("D(1,2)".into(), 0, &slo);
        assert!(
            (it.ttft_millis.mean - 70.0).abs() < 0.1,
            "{:?}",
            it.ttft_millis
        );
        assert!((it.e2e_latency_millis.mean - 80.0).abs() < 0.1);
        let from_send = it.ttft_from_send_millis.expect("open loop");
        assert!((from_send.mean - 30.0).abs() < 0.1, "{from_send:?}");
        let lag = it.schedule_lag_millis.expect("open loop");
        assert!((lag.p99 - 40.0).abs() < 0.1, "{lag:?}");
        // 70 ms from the due time misses a 60 ms objective the send time would meet.
        assert_eq!(it.goodput.expect("SLO").attainment_percent, 0.0);
        assert!((it.duration_seconds - 0.08).abs() < 1e-9);
    }
}
