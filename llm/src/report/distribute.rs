//! Distributed load: how `workers` load generator processes share one benchmark's load,
//! and how their results merge back into one, exactly.
//!
//! Splitting: every integer quantity (concurrent streams, request budgets, warmup) is
//! divided as evenly as integers allow, the remainder going one each to the first
//! workers, so the shares always add up to the whole; rates are divided evenly. Each
//! worker draws its prompts from its own seed ([`worker_seed`]), so the workers' requests
//! differ while the whole run stays reproducible, and worker 0 of a one-worker run draws
//! exactly what an undistributed run does.
//!
//! Merging: counts add up; latency percentiles come from the sum of the workers' HDR
//! histograms (never from averaging their percentiles); throughput is the merged counts
//! over the span from the first send to the last completion, measured from the
//! iteration's synchronized start that all workers share.

use std::collections::BTreeMap;

use super::MergeError;
use super::figures::{Measured, figures};
use super::histogram;
use super::result::{Iteration, LLMInferenceResult, RawHistograms, RawIteration};

/// The share of `total` that worker `worker` of `workers` takes.
pub fn share(total: u64, workers: u32, worker: u32) -> u64 {
    let workers = u64::from(workers.max(1));
    let worker = u64::from(worker);
    total / workers + u64::from(worker < total % workers)
}

/// The share of a request budget (measured or warmup requests) that worker `worker`
/// takes at `concurrency` streams: split among the workers that have streams, so the
/// budget is used up even when there are fewer streams than workers.
pub fn budget_share(total: u64, workers: u32, concurrency: u32, worker: u32) -> u64 {
    let active = workers.min(concurrency).max(1);
    if worker >= active {
        0
    } else {
        share(total, active, worker)
    }
}

/// The share of a rate (requests per second) that each of `workers` takes.
pub fn rate_share(rate: f64, workers: u32) -> f64 {
    rate / f64::from(workers.max(1))
}

/// The seed worker `worker` draws its workload from: `seed` itself for worker 0, a
/// distinct well-mixed value for every other worker.
pub fn worker_seed(seed: u64, worker: u32) -> u64 {
    if worker == 0 {
        return seed;
    }
    // SplitMix64's finalizer over the seed and the worker index.
    let mut z = seed ^ u64::from(worker).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1330_11EB);
    z ^ (z >> 31)
}

/// The figures of an iteration from exact measurements: what a worker's own summary
/// computes, and what a merge computes from the workers' sums.
pub fn summarize(
    raw: &RawIteration,
    requests: u64,
    errors_by_kind: &BTreeMap<String, u64>,
    scenario: String,
    concurrency: u32,
    slo_set: bool,
) -> Result<Iteration, histogram::HistogramError> {
    let seconds = match (raw.first_sent_seconds, raw.last_done_seconds) {
        (Some(first), Some(last)) => (last - first).max(0.0),
        _ => 0.0,
    };
    let decode = |text: &str| histogram::merge([text]);
    let optional = |text: Option<&str>| text.map(decode).transpose();
    let h = &raw.histograms;
    let (ttft, ttst, itl, tpot, e2e) = (
        decode(&h.ttft)?,
        decode(&h.ttst)?,
        decode(&h.itl)?,
        decode(&h.tpot)?,
        decode(&h.e2e)?,
    );
    let ttft_from_send = optional(h.ttft_from_send.as_deref())?;
    let schedule_lag = optional(h.schedule_lag.as_deref())?;
    let measured = Measured {
        requests,
        errors_by_kind,
        seconds,
        input_tokens: raw.input_tokens,
        output_tokens: raw.output_tokens,
        user_rate_sum: raw.user_rate_sum,
        user_rate_count: raw.user_rate_count,
        meeting_slo: raw.meeting_slo,
        estimated: raw.estimated,
        client_delay: raw.client_delay.clone(),
        cached_input_tokens: raw.cached_input_tokens,
        ttft: &ttft,
        ttst: &ttst,
        itl: &itl,
        tpot: &tpot,
        e2e: &e2e,
        ttft_from_send: ttft_from_send.as_ref(),
        schedule_lag: schedule_lag.as_ref(),
    };
    Ok(figures(&measured, scenario, concurrency, slo_set))
}

fn unmergeable(message: impl Into<String>) -> MergeError {
    MergeError::Unmergeable(message.into())
}

/// Merges the results of a distributed run's workers into the run's result. The order
/// of `outputs` does not matter: workers are put in index order first.
pub fn merge(mut outputs: Vec<LLMInferenceResult>) -> Result<LLMInferenceResult, MergeError> {
    if outputs.len() == 1 {
        return outputs
            .pop()
            .ok_or_else(|| unmergeable("there are no results to merge"));
    }
    let workers = u32::try_from(outputs.len())
        .map_err(|_| unmergeable(format!("{} results are too many", outputs.len())))?;
    if outputs.is_empty() {
        return Err(unmergeable("there are no results to merge"));
    }
    outputs.sort_by_key(|o| o.worker);
    for (expected, output) in (0..workers).zip(&outputs) {
        if output.worker != Some(expected) || output.workers != workers {
            return Err(unmergeable(format!(
                "expected the results of workers 0 to {} of {workers}; found worker {:?} of {}",
                workers - 1,
                output.worker,
                output.workers
            )));
        }
    }
    let first = &outputs[0];
    for other in &outputs[1..] {
        let differs = |what: &str| {
            unmergeable(format!(
                "worker {} ran a different benchmark than worker 0: its {what} differs",
                other.worker.unwrap_or_default()
            ))
        };
        if other.format != first.format || other.model != first.model || other.url != first.url {
            return Err(differs("format, model or endpoint"));
        }
        if other.api != first.api || other.streaming != first.streaming {
            return Err(differs("API"));
        }
        if other.slo != first.slo || other.max_error_rate_percent != first.max_error_rate_percent {
            return Err(differs("objectives"));
        }
        if other.iterations.len() != first.iterations.len() {
            return Err(unmergeable(format!(
                "worker {} ran {} iterations, worker 0 ran {}",
                other.worker.unwrap_or_default(),
                other.iterations.len(),
                first.iterations.len()
            )));
        }
    }
    let slo_set = first.slo.is_some();
    let mut iterations = Vec::with_capacity(first.iterations.len());
    for index in 0..first.iterations.len() {
        let parts: Vec<&Iteration> = outputs.iter().map(|o| &o.iterations[index]).collect();
        iterations.push(merge_iteration(index, &parts, slo_set)?);
    }
    let mut merged = LLMInferenceResult {
        format: first.format.clone(),
        model: first.model.clone(),
        url: first.url.clone(),
        api: first.api.clone(),
        streaming: first.streaming,
        tokenizer: first.tokenizer.clone(),
        slo: first.slo.clone(),
        iterations,
        max_error_rate_percent: first.max_error_rate_percent,
        workers,
        worker: None,
        service_metadata: first.service_metadata.clone(),
        ..LLMInferenceResult::default()
    };
    merged.finalize();
    // As a single load generator's result with a failure does not parse.
    match merged.failure {
        Some(failure) => Err(MergeError::ToolReportedError(failure)),
        None => Ok(merged),
    }
}

/// Iteration `index` of every worker (in worker order), as one.
fn merge_iteration(
    index: usize,
    parts: &[&Iteration],
    slo_set: bool,
) -> Result<Iteration, MergeError> {
    let first = parts[0];
    let mut requests = 0;
    let mut concurrency: u32 = 0;
    let mut errors_by_kind: BTreeMap<String, u64> = BTreeMap::new();
    let mut raws = Vec::with_capacity(parts.len());
    let mut clients = Vec::new();
    for (worker, part) in parts.iter().enumerate() {
        if part.scenario != first.scenario {
            return Err(unmergeable(format!(
                "iteration {index}: worker {worker} ran {}, worker 0 ran {}",
                part.scenario, first.scenario
            )));
        }
        let raw = part.raw.as_ref().ok_or_else(|| {
            unmergeable(format!(
                "iteration {index}: worker {worker} reported no raw measurements (histograms)"
            ))
        })?;
        raws.push(raw);
        requests += part.requests;
        concurrency = concurrency.saturating_add(part.concurrency);
        for (kind, count) in &part.errors_by_kind {
            *errors_by_kind.entry(kind.clone()).or_default() += count;
        }
        clients.extend(part.clients.iter().cloned());
    }
    let histograms = |pick: fn(&RawHistograms) -> &str| {
        histogram::merge(raws.iter().map(|r| pick(&r.histograms)))
            .and_then(|h| histogram::encode(&h))
            .map_err(|e| unmergeable(format!("iteration {index}: {e}")))
    };
    // Histograms only some iterations have (open loop): merged from the workers that
    // report them.
    let optional_histograms = |pick: fn(&RawHistograms) -> Option<&str>| {
        let present: Vec<&str> = raws.iter().filter_map(|r| pick(&r.histograms)).collect();
        if present.is_empty() {
            return Ok(None);
        }
        histogram::merge(present)
            .and_then(|h| histogram::encode(&h))
            .map(Some)
            .map_err(|e| unmergeable(format!("iteration {index}: {e}")))
    };
    let earliest = |values: Vec<Option<f64>>| values.into_iter().flatten().reduce(f64::min);
    let latest = |values: Vec<Option<f64>>| values.into_iter().flatten().reduce(f64::max);
    let raw = RawIteration {
        histograms: RawHistograms {
            ttft: histograms(|h| &h.ttft)?,
            ttst: histograms(|h| &h.ttst)?,
            itl: histograms(|h| &h.itl)?,
            tpot: histograms(|h| &h.tpot)?,
            e2e: histograms(|h| &h.e2e)?,
            ttft_from_send: optional_histograms(|h| h.ttft_from_send.as_deref())?,
            schedule_lag: optional_histograms(|h| h.schedule_lag.as_deref())?,
        },
        input_tokens: raws.iter().map(|r| r.input_tokens).sum(),
        output_tokens: raws.iter().map(|r| r.output_tokens).sum(),
        // Summed in worker order, so the float sum does not depend on input order.
        user_rate_sum: raws.iter().map(|r| r.user_rate_sum).sum(),
        user_rate_count: raws.iter().map(|r| r.user_rate_count).sum(),
        meeting_slo: raws.iter().map(|r| r.meeting_slo).sum(),
        estimated: raws.iter().map(|r| r.estimated).sum(),
        first_sent_seconds: earliest(raws.iter().map(|r| r.first_sent_seconds).collect()),
        last_done_seconds: latest(raws.iter().map(|r| r.last_done_seconds).collect()),
        client_delay: super::doubt::ClientDelay::combine(
            raws.iter().filter_map(|r| r.client_delay.as_ref()),
        ),
        cached_input_tokens: raws
            .iter()
            .filter_map(|r| r.cached_input_tokens)
            .reduce(|a, b| super::result::CachedTokens {
                cached: a.cached + b.cached,
                of_input: a.of_input + b.of_input,
            }),
    };
    let mut iteration = summarize(
        &raw,
        requests,
        &errors_by_kind,
        first.scenario.clone(),
        concurrency,
        slo_set,
    )
    .map_err(|e| unmergeable(format!("iteration {index}: {e}")))?;
    clients.sort_by_key(|c| c.worker);
    iteration.clients = clients;
    iteration.usage_check =
        super::result::UsageCheck::combine(parts.iter().filter_map(|p| p.usage_check.as_ref()));
    iteration.warmup_requests = parts.iter().map(|p| p.warmup_requests).sum();
    iteration.cooldown_requests = parts.iter().map(|p| p.cooldown_requests).sum();
    // Open loop: the workers' rates add up to the iteration's (rounded, so that a rate
    // split three ways adds up to exactly what was asked for).
    iteration.request_rate = parts
        .iter()
        .map(|p| p.request_rate)
        .sum::<Option<f64>>()
        .map(|rate| (rate * 1e9).round() / 1e9);
    iteration.arrivals.clone_from(&first.arrivals);
    iteration.burstiness = first.burstiness;
    Ok(iteration)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::result::ClientLoad;
    use proptest::prelude::*;

    #[test]
    fn shares_add_up_and_differ_by_at_most_one() {
        for total in [0u64, 1, 2, 7, 64, 1000, 1001] {
            for workers in 1..=9u32 {
                let shares: Vec<u64> = (0..workers).map(|w| share(total, workers, w)).collect();
                assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {workers}");
                let (min, max) = (shares.iter().min(), shares.iter().max());
                assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "{shares:?}");
            }
        }
        assert_eq!(
            (0..3).map(|w| share(10, 3, w)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert!((rate_share(10.0, 4) - 2.5).abs() < 1e-12);
    }

    #[test]
    fn budgets_go_to_the_workers_that_have_streams() {
        for (total, workers, concurrency) in [(20u64, 3u32, 2u32), (20, 3, 7), (5, 8, 1), (0, 2, 2)]
        {
            let budgets: Vec<u64> = (0..workers)
                .map(|w| budget_share(total, workers, concurrency, w))
                .collect();
            assert_eq!(budgets.iter().sum::<u64>(), total, "{budgets:?}");
            for (worker, budget) in budgets.iter().enumerate() {
                let streams = share(u64::from(concurrency), workers, worker as u32);
                assert!(
                    streams > 0 || *budget == 0,
                    "worker {worker} has no streams"
                );
            }
        }
    }

    #[test]
    fn worker_seeds_are_distinct_and_worker_zero_keeps_the_seed() {
        assert_eq!(worker_seed(42, 0), 42);
        let seeds: std::collections::BTreeSet<u64> = (0..64).map(|w| worker_seed(42, w)).collect();
        assert_eq!(seeds.len(), 64);
        assert_eq!(worker_seed(42, 5), worker_seed(42, 5));
    }

    /// A worker's result with one iteration holding `ttft` samples (µs) and errors.
    fn worker(
        index: u32,
        workers: u32,
        ttft: &[u64],
        errors: u64,
        offset: f64,
    ) -> LLMInferenceResult {
        let mut h = histogram::empty();
        for v in ttft {
            h.record(*v).expect("in range");
        }
        let text = histogram::encode(&h).expect("encodes");
        let empty = histogram::encode(&histogram::empty()).expect("encodes");
        let raw = RawIteration {
            histograms: RawHistograms {
                ttft: text.clone(),
                ttst: empty.clone(),
                itl: empty.clone(),
                tpot: empty.clone(),
                e2e: text.clone(),
                ttft_from_send: (index == 0).then(|| text.clone()),
                schedule_lag: None,
            },
            input_tokens: 10 * ttft.len() as u64,
            output_tokens: 20 * ttft.len() as u64,
            user_rate_sum: 0.1 * f64::from(index + 1),
            user_rate_count: 1,
            meeting_slo: ttft.len() as u64,
            estimated: 0,
            first_sent_seconds: (!ttft.is_empty()).then_some(offset),
            last_done_seconds: (!ttft.is_empty()).then_some(offset + 2.0),
            client_delay: Some(crate::report::doubt::ClientDelay {
                tolerance_millis: 5.0,
                delayed_ttft_requests: u64::from(index),
                delayed_e2e_requests: 0,
                max_millis: 3.0 * f64::from(index + 1),
            }),
            cached_input_tokens: None,
        };
        let errors_by_kind = if errors > 0 {
            BTreeMap::from([("http_500".to_owned(), errors)])
        } else {
            BTreeMap::new()
        };
        let mut iteration = summarize(
            &raw,
            ttft.len() as u64,
            &errors_by_kind,
            "D(10,20)".into(),
            2,
            true,
        )
        .expect("summarizes");
        iteration.request_rate = Some(10.0 / 3.0);
        iteration.warmup_requests = 1;
        iteration.raw = Some(raw);
        iteration.clients = vec![ClientLoad {
            worker: index,
            saturated: index == 1,
            cpu_percent: 50.0,
            ..ClientLoad::default()
        }];
        LLMInferenceResult {
            format: super::super::result::FORMAT.into(),
            model: "m".into(),
            iterations: vec![iteration],
            slo: Some(super::super::result::SloReport {
                ttft_millis: Some(100.0),
                tpot_millis: None,
                attainment_percent: 90.0,
            }),
            max_error_rate_percent: Some(50.0),
            workers,
            worker: Some(index),
            ..LLMInferenceResult::default()
        }
    }

    #[test]
    fn merging_adds_counts_and_histograms() {
        let merged = merge(vec![
            worker(0, 3, &[1000, 2000, 3000], 0, 0.5),
            worker(1, 3, &[50_000], 1, 0.25),
            worker(2, 3, &[], 0, 0.0),
        ])
        .expect("merges");
        let it = &merged.iterations[0];
        assert_eq!((it.requests, it.errors, it.concurrency), (4, 1, 6));
        assert_eq!(it.errors_by_kind["http_500"], 1);
        assert_eq!(it.ttft_millis.count, 4);
        // Percentiles of the union, not an average of the workers' percentiles.
        let mut union = histogram::empty();
        for v in [1000, 2000, 3000, 50_000] {
            union.record(v).expect("in range");
        }
        assert_eq!(it.ttft_millis, histogram::distribution(&union));
        // From the first send (0.25 s) to the last completion (2.5 s).
        assert!((it.duration_seconds - 2.25).abs() < 1e-12);
        assert!((it.output_tokens_per_second - 80.0 / 2.25).abs() < 1e-9);
        assert_eq!(
            it.clients.iter().map(|c| c.worker).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert_eq!(merged.workers, 3);
        assert_eq!(it.request_rate, Some(10.0));
        // Only worker 0 reported this one: its histogram alone.
        assert_eq!(it.ttft_from_send_millis.as_ref().map(|d| d.count), Some(3));
        assert_eq!(it.schedule_lag_millis, None);
        assert_eq!(it.warmup_requests, 3);
        assert_eq!(merged.worker, None);
        assert!(it.raw.is_none());
        assert_eq!(merged.saturated_clients.len(), 1);
        // The workers' client delays add up; the longest is kept.
        let delay = merged.iterations[0]
            .client_delay
            .as_ref()
            .expect("combined");
        assert_eq!(delay.delayed_ttft_requests, 1 + 2);
        assert_eq!(delay.max_millis, 9.0);
        assert_eq!(merged.saturated_clients[0].worker, 1);
    }

    #[test]
    fn the_error_limit_judges_the_whole_run_not_each_worker() {
        // 1 error in 11 requests: 9.1% overall, above the limit of 5%.
        let mut outputs = vec![
            worker(0, 2, &[1000; 6], 0, 0.0),
            worker(1, 2, &[1000; 4], 1, 0.0),
        ];
        for output in &mut outputs {
            output.max_error_rate_percent = Some(5.0);
        }
        let failure = merge(outputs.clone()).expect_err("fails");
        assert!(
            matches!(&failure, MergeError::ToolReportedError(m) if m.contains("1 of 11")),
            "{failure}"
        );
        for output in &mut outputs {
            output.max_error_rate_percent = Some(10.0);
        }
        assert!(merge(outputs).is_ok());
    }

    #[test]
    fn results_that_do_not_fit_together_are_refused() {
        let a = worker(0, 2, &[1000], 0, 0.0);
        let mut b = worker(1, 2, &[1000], 0, 0.0);
        b.iterations[0].scenario = "D(1,1)".into();
        assert!(
            matches!(merge(vec![a.clone(), b]), Err(MergeError::Unmergeable(m)) if m.contains("D(1,1)"))
        );
        let mut c = worker(1, 2, &[1000], 0, 0.0);
        c.iterations[0].raw = None;
        assert!(merge(vec![a.clone(), c]).is_err());
        // Two workers claiming index 0.
        assert!(merge(vec![a.clone(), a.clone()]).is_err());
        let mut d = worker(1, 2, &[1000], 0, 0.0);
        d.iterations[0].raw.as_mut().expect("raw").histograms.ttft = "garbage".into();
        assert!(merge(vec![a, d]).is_err());
    }

    proptest! {
        #[test]
        fn merging_in_any_order_gives_the_same_result(
            samples in proptest::collection::vec(proptest::collection::vec(1u64..5_000_000, 0..20), 2..6),
            errors in proptest::collection::vec(0u64..3, 6),
            rotation in 0usize..6,
            reverse in any::<bool>(),
        ) {
            let workers = samples.len() as u32;
            let outputs: Vec<LLMInferenceResult> = samples
                .iter()
                .enumerate()
                .map(|(i, s)| worker(i as u32, workers, s, errors[i], i as f64 * 0.01))
                .collect();
            // The same result, or the same failure (too many errors), in any order.
            let reference = merge(outputs.clone());
            let mut shuffled = outputs;
            shuffled.rotate_left(rotation % samples.len());
            if reverse {
                shuffled.reverse();
            }
            prop_assert_eq!(&merge(shuffled), &reference);
            if let Ok(merged) = &reference {
                let total: usize = samples.iter().map(Vec::len).sum();
                prop_assert_eq!(merged.iterations[0].ttft_millis.count, total as u64);
            }
        }
    }
}
