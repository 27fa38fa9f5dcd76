//! The live progress of a run on standard error: a `perfsweep-progress:` line when an
//! iteration starts, when its warmup is over ([`MEASURING`]) and every few seconds while
//! it runs (the controller shows the latest in `status.progress`, the local backend
//! echoes them), and a summary line when it ends.

use std::sync::Arc;
use std::time::Duration;

use crate::progress;
use crate::report::result::Iteration;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::loops::{MeasuredStart, SharedRecorder};

/// Ends the progress line printed when an iteration's measured part begins (its warmup
/// is over): from then on, what happens to the run is in its figures.
pub const MEASURING: &str = "warmup over, measuring";

/// A schedule lag p99 above this means the offered load was not the one asked for.
const LATE_MILLIS: f64 = 10.0;

/// Counts iterations and prints where the run is.
pub struct Progress {
    enabled: bool,
    interval: Duration,
    started: usize,
    /// Iterations listed (concurrency levels and rates, every scenario).
    listed: usize,
    /// Saturation probes that may still run.
    probes_left: usize,
    /// A saturation search is running: iterations started are its probes.
    searching: bool,
}

/// The periodic line of one iteration; it stops when this is dropped.
pub struct Ticker(Option<JoinHandle<()>>);

impl Drop for Ticker {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

impl Progress {
    pub fn new(enabled: bool, interval: Duration, listed: usize, probes: usize) -> Self {
        Self {
            enabled,
            interval,
            started: 0,
            listed,
            probes_left: probes,
            searching: false,
        }
    }

    /// `iteration 2/6` (`2/≤18` while a saturation search may add iterations).
    fn position(&self) -> String {
        if self.probes_left > 0 {
            format!(
                "iteration {}/≤{}",
                self.started,
                self.listed + self.probes_left
            )
        } else {
            format!("iteration {}/{}", self.started, self.listed)
        }
    }

    /// An iteration starts: says so, then when its measured part begins, and every
    /// interval how far it got.
    pub fn start(
        &mut self,
        label: String,
        recorder: &SharedRecorder,
        measured_start: &Arc<MeasuredStart>,
    ) -> Ticker {
        self.started += 1;
        if self.searching {
            // A saturation probe: it moves from the possible to the listed.
            self.listed += 1;
            self.probes_left = self.probes_left.saturating_sub(1);
        }
        if !self.enabled {
            return Ticker(None);
        }
        let head = format!("{}: {label}", self.position());
        eprintln!("{}", progress::line(&head));
        let recorder = recorder.clone();
        let measured_start = measured_start.clone();
        let interval = self.interval;
        Ticker(Some(tokio::spawn(async move {
            let began = Instant::now();
            let mut next = began + interval;
            let mut measuring = false;
            loop {
                tokio::select! {
                    () = measured_start.wait(), if !measuring => {
                        measuring = true;
                        eprintln!("{}", progress::line(&format!("{head}: {MEASURING}")));
                        continue;
                    }
                    () = tokio::time::sleep_until(next) => {}
                }
                next += interval;
                let done = recorder.lock().map_or(0, |r| r.count());
                let seconds = began.elapsed().as_secs_f64();
                eprintln!(
                    "{}",
                    progress::line(&format!(
                        "{head}: {done} requests done in {seconds:.0} s ({:.1}/s)",
                        done as f64 / seconds.max(1e-9)
                    ))
                );
            }
        })))
    }

    /// A saturation search starts: the iterations until [`Self::search_done`] are probes.
    pub fn search_started(&mut self) {
        self.searching = true;
    }

    /// A saturation search ended after `used` of its `budget` probes.
    pub fn search_done(&mut self, used: usize, budget: usize) {
        self.searching = false;
        self.probes_left = self.probes_left.saturating_sub(budget.saturating_sub(used));
    }

    /// An iteration ended: its figures in one line.
    pub fn finished(&self, iteration: &Iteration) {
        if !self.enabled {
            return;
        }
        let load = match iteration.request_rate {
            Some(rate) => format!("{rate} req/s"),
            None => format!("concurrency {}", iteration.concurrency),
        };
        let lag = iteration
            .schedule_lag_millis
            .as_ref()
            .map(|lag| format!(", schedule lag p99 {:.2} ms", lag.p99))
            .unwrap_or_default();
        eprintln!(
            "{} {load}: {} requests, {} errors, {:.1} req/s, {:.0} output tok/s, TTFT mean {:.2} ms p99 {:.2} ms, ITL mean {:.2} ms{lag}",
            iteration.scenario,
            iteration.requests,
            iteration.errors,
            iteration.requests_per_second,
            iteration.output_tokens_per_second,
            iteration.ttft_millis.mean,
            iteration.ttft_millis.p99,
            iteration.inter_token_latency_millis.mean,
        );
        for doubt in &iteration.doubts {
            eprintln!(
                "warning: {} {load}: {} in doubt ({}): {}",
                iteration.scenario, doubt.metric, doubt.kind, doubt.evidence
            );
        }
        if let Some(lag) = &iteration.schedule_lag_millis
            && lag.p99 > LATE_MILLIS
        {
            eprintln!(
                "warning: {} {load}: 1% of requests went out more than {:.1} ms after they were due (a full concurrency cap or a saturated client): latencies count from the due time",
                iteration.scenario, lag.p99
            );
        }
        if iteration.cooldown_requests > 0 {
            eprintln!(
                "{} {load}: {} requests still in flight when the time was up were cancelled and not counted",
                iteration.scenario, iteration.cooldown_requests
            );
        }
    }
}
