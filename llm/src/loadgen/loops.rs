//! One iteration's load: a closed loop (a fixed number of streams, each sending its next
//! request when the last one finished) or an open loop (requests due on an arrival
//! schedule, handed to idle connections, with an optional cap on requests in flight).
//!
//! Both loops share the budget rules:
//! - warmup: the first `warmup` requests, and every request sent (closed loop) or due
//!   (open loop) within `warmup_time` of the iteration's start, are not measured;
//! - `requests`: measured requests sent at most;
//! - `time`: measured requests are sent for this long from the first measured one; when
//!   it is up, requests still in flight are cancelled and counted as cooldown, never as
//!   results, so a long request neither stretches the iteration nor skews its figures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::schedule::{Arrivals, Schedule};
use super::stats::Recorder;
use super::{Shared, Worker};
use crate::MAX_CONCURRENCY_PER_LOADGEN;
use crate::fd_tables;

/// How much one iteration sends.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub warmup: u64,
    pub warmup_time: Duration,
    pub requests: Option<u64>,
    pub time: Option<Duration>,
}

/// What one iteration did.
pub struct Outcome {
    pub recorder: Recorder,
    pub warmup_requests: u64,
    /// Measured requests cancelled in flight when the time was up.
    pub cooldown_requests: u64,
}

/// The iteration's recorder, shared by its workers (and read by the progress line).
pub type SharedRecorder = Arc<Mutex<Recorder>>;

/// The moment the iteration's measured part began, set once by whichever loop (or lane)
/// sends the first measured request, and announced: the progress line says that the
/// warmup is over, so whoever watches the run (a user, a test disturbing the client on
/// purpose) knows from then on that what happens is measured.
#[derive(Debug, Default)]
pub struct MeasuredStart {
    at: OnceLock<Instant>,
    announced: tokio::sync::Notify,
}

impl MeasuredStart {
    /// The measured part began `at`; only the first call counts.
    pub fn mark(&self, at: Instant) {
        if self.at.set(at).is_ok() {
            // A permit is kept when nobody waits yet, so a later wait returns at once.
            self.announced.notify_one();
        }
    }

    /// Returns once the measured part began (at once when it already has).
    pub async fn wait(&self) {
        if self.at.get().is_none() {
            self.announced.notified().await;
        }
    }
}

pub(super) fn take_recorder(recorder: &SharedRecorder) -> Recorder {
    match recorder.lock() {
        Ok(mut recorder) => std::mem::take(&mut *recorder),
        Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
    }
}

/// Hands out request tickets until the budget is used up (closed loop).
struct Tickets {
    budget: Budget,
    started: Instant,
    next: AtomicU64,
    measured: AtomicU64,
    measured_from: OnceLock<Instant>,
    measured_start: Arc<MeasuredStart>,
}

impl Tickets {
    /// The next ticket and whether it is measured; `None` when the budget is spent.
    fn take(&self) -> Option<(u64, bool)> {
        let now = Instant::now();
        if let (Some(time), Some(start)) = (self.budget.time, self.measured_from.get())
            && now.saturating_duration_since(*start) >= time
        {
            return None;
        }
        let ticket = self.next.fetch_add(1, Ordering::Relaxed);
        let measured = ticket >= self.budget.warmup
            && now.saturating_duration_since(self.started) >= self.budget.warmup_time;
        if measured {
            let count = self.measured.fetch_add(1, Ordering::Relaxed);
            if self.budget.requests.is_some_and(|limit| count >= limit) {
                return None;
            }
            self.measured_from.get_or_init(|| now);
            self.measured_start.mark(now);
        }
        Some((ticket, measured))
    }

    fn measured_sent(&self) -> u64 {
        let sent = self.measured.load(Ordering::Relaxed);
        self.budget.requests.map_or(sent, |limit| sent.min(limit))
    }
}

/// `concurrency` streams, each with one request in flight, until the budget is spent.
/// More streams than one file table holds run on several threads, each with a table
/// of its own (see [`crate::fd_tables`]), all taking tickets from the same budget.
pub async fn closed(
    shared: &Arc<Shared>,
    workload: &super::workload::Workload,
    concurrency: u32,
    budget: Budget,
    seed: u64,
    recorder: &SharedRecorder,
    measured_start: &Arc<MeasuredStart>,
) -> anyhow::Result<Outcome> {
    let tickets = Arc::new(Tickets {
        budget,
        started: Instant::now(),
        next: AtomicU64::new(0),
        measured: AtomicU64::new(0),
        measured_from: OnceLock::new(),
        measured_start: measured_start.clone(),
    });
    let streams = Streams {
        shared: shared.clone(),
        workload: workload.clone(),
        tickets: tickets.clone(),
        seed,
        recorder: recorder.clone(),
    };
    let tables = fd_tables::tables_needed(u64::from(concurrency), fd_tables::open_file_limit());
    if tables == 1 {
        streams.run(concurrency).await;
    } else {
        let counts = fd_tables::split(u64::from(concurrency), tables);
        fd_tables::run_on_tables("loadgen", tables, shared.wakeup_window, |index| {
            let (streams, count) = (streams.clone(), counts[index] as u32);
            move || async move {
                streams.run(count).await;
                Ok(())
            }
        })
        .await?;
    }
    let recorder = take_recorder(recorder);
    let sent = tickets.measured_sent();
    let issued = tickets.next.load(Ordering::Relaxed);
    Ok(Outcome {
        cooldown_requests: sent.saturating_sub(recorder.count()),
        warmup_requests: issued.saturating_sub(tickets.measured.load(Ordering::Relaxed)),
        recorder,
    })
}

/// What the streams of a closed loop share, on whichever thread they run.
#[derive(Clone)]
struct Streams {
    shared: Arc<Shared>,
    workload: super::workload::Workload,
    tickets: Arc<Tickets>,
    seed: u64,
    recorder: SharedRecorder,
}

impl Streams {
    /// `count` streams on this thread's runtime, until the tickets run out (or the time
    /// is up, when those still in flight are cancelled).
    async fn run(&self, count: u32) {
        let mut workers = JoinSet::new();
        for _ in 0..count {
            let recorder = self.recorder.clone();
            let shared = self.shared.clone();
            let tickets = self.tickets.clone();
            let workload = self.workload.clone();
            let seed = self.seed;
            workers.spawn(async move {
                let mut worker = Worker::new(shared, recorder);
                while let Some((ticket, measured)) = tickets.take() {
                    worker
                        .request(&workload, seed, ticket, measured, None, None)
                        .await;
                }
            });
        }
        let tickets = &self.tickets;
        let deadline = || {
            tickets
                .budget
                .time
                .and_then(|time| tickets.measured_from.get().map(|start| *start + time))
        };
        drain(&mut workers, deadline).await;
    }
}

/// Waits for the workers; once `deadline` is known and passed, cancels those still
/// running.
pub(super) async fn drain(workers: &mut JoinSet<()>, deadline: impl Fn() -> Option<Instant>) {
    loop {
        // Until the first measured request fixes the deadline, look again now and then.
        let wake = deadline().unwrap_or_else(|| Instant::now() + Duration::from_millis(20));
        tokio::select! {
            joined = workers.join_next() => if joined.is_none() { return },
            () = tokio::time::sleep_until(wake) => {
                if deadline().is_some_and(|d| Instant::now() >= d) {
                    workers.abort_all();
                    while workers.join_next().await.is_some() {}
                    return;
                }
            }
        }
    }
}

/// A request handed to an idle worker of the open loop.
struct Job {
    ticket: u64,
    due: Instant,
    measured: bool,
    /// From when a later send is the client's own delay: `due`, or when a full cap
    /// freed a worker (waiting for that is the server's doing).
    client_from: Instant,
}

/// The open loop's arrival process and cap.
#[derive(Clone, Debug)]
pub struct OpenLoad {
    pub rate: f64,
    pub arrivals: Arrivals,
    pub max_concurrency: Option<u32>,
    /// A replayed trace's offsets, which replace the arrival process.
    pub replay: Option<std::sync::Arc<[Duration]>>,
}

/// Requests due on an arrival schedule at `load.rate` per second, each handed to an idle
/// connection (a new one while under the cap), until the budget is spent. A cap above
/// what one file table holds splits the loop into lanes on threads with a table each
/// (see [`crate::fd_tables`]): each lane offers an equal share of the rate, phase
/// shifted so that constant arrivals interleave, with its own share of the cap and the
/// budget and its own tickets.
pub async fn open(
    shared: &Arc<Shared>,
    workload: &super::workload::Workload,
    load: OpenLoad,
    budget: Budget,
    seed: u64,
    recorder: &SharedRecorder,
    measured_start: &Arc<MeasuredStart>,
) -> anyhow::Result<Outcome> {
    // Without a cap, at most one file table of streams: past it connections fail
    // (EMFILE) anyway, and a loop that falls behind its schedule would otherwise start
    // one worker per overdue arrival, without end.
    let load = OpenLoad {
        max_concurrency: Some(load.max_concurrency.unwrap_or_else(uncapped_ceiling)),
        ..load
    };
    let tables = load.max_concurrency.map_or(1, |cap| {
        fd_tables::tables_needed(u64::from(cap), fd_tables::open_file_limit())
    });
    // A trace's lanes take every `tables`th request at its own time: no phase.
    let phased = load.replay.is_none();
    let lane = |index: usize| Lane {
        index: index as u64,
        count: tables as u64,
        phase: if phased {
            Duration::from_secs_f64(index as f64 / load.rate.max(f64::MIN_POSITIVE))
        } else {
            Duration::ZERO
        },
    };
    let (warmup, measured) = if tables == 1 {
        let whole = Lane {
            phase: Duration::ZERO,
            ..lane(0)
        };
        open_lane(
            shared,
            workload,
            load.clone(),
            budget,
            seed,
            recorder,
            whole,
            measured_start,
        )
        .await
    } else {
        let caps = fd_tables::split(u64::from(load.max_concurrency.unwrap_or(0)), tables);
        let warmups = fd_tables::split(budget.warmup, tables);
        let requests = budget.requests.map(|r| fd_tables::split(r, tables));
        let lanes = fd_tables::run_on_tables("loadgen", tables, Duration::ZERO, |index| {
            let lane_load = OpenLoad {
                rate: load.rate / tables as f64,
                max_concurrency: Some((caps[index] as u32).max(1)),
                ..load.clone()
            };
            let lane_budget = Budget {
                warmup: warmups[index],
                requests: requests.as_ref().map(|r| r[index]),
                ..budget
            };
            let (shared, workload, recorder) = (shared.clone(), workload.clone(), recorder.clone());
            let measured_start = measured_start.clone();
            let lane = lane(index);
            move || async move {
                let sent = open_lane(
                    &shared,
                    &workload,
                    lane_load,
                    lane_budget,
                    seed,
                    &recorder,
                    lane,
                    &measured_start,
                )
                .await;
                Ok(sent)
            }
        })
        .await?;
        lanes
            .into_iter()
            .fold((0, 0), |(warmup, measured), (w, m)| {
                (warmup + w, measured + m)
            })
    };
    let recorder = take_recorder(recorder);
    Ok(Outcome {
        cooldown_requests: measured.saturating_sub(recorder.count()),
        warmup_requests: warmup,
        recorder,
    })
}

/// The open loop's cap when none is given: the streams one file table holds, and never
/// more than one load generator holds.
pub fn uncapped_ceiling() -> u32 {
    let per_table = fd_tables::open_file_limit()
        .saturating_sub(fd_tables::RESERVED)
        .max(1);
    per_table.min(u64::from(MAX_CONCURRENCY_PER_LOADGEN)) as u32
}

/// One lane of an open loop: its tickets are `index`, `index + count`, ... and its
/// schedule starts `phase` after it does.
#[derive(Clone, Copy, Debug)]
struct Lane {
    index: u64,
    count: u64,
    phase: Duration,
}

/// An open loop's lane on this thread's runtime; the warmup and measured requests it
/// sent.
#[allow(clippy::too_many_arguments)] // the iteration's parts every loop takes, and its lane
async fn open_lane(
    shared: &Arc<Shared>,
    workload: &super::workload::Workload,
    load: OpenLoad,
    budget: Budget,
    seed: u64,
    recorder: &SharedRecorder,
    lane: Lane,
    measured_start: &MeasuredStart,
) -> (u64, u64) {
    // Lanes draw different arrival times; lane 0 (and an undivided loop) keeps the seed.
    let schedule_seed = seed ^ lane.index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut schedule = match &load.replay {
        Some(offsets) => {
            Schedule::replay(offsets.clone(), lane.index as usize, lane.count as usize)
        }
        None => Schedule::new(load.arrivals, load.rate, schedule_seed),
    };
    // Workers announce themselves idle here; at most one message per worker is queued.
    let (idle_tx, mut idle_rx) = mpsc::unbounded_channel::<usize>();
    let mut jobs: Vec<mpsc::Sender<Job>> = Vec::new();
    let mut workers = JoinSet::new();
    let (mut warmup, mut measured) = (0u64, 0u64);
    let mut measured_from: Option<Instant> = None;
    let start = Instant::now() + lane.phase;
    // Sends go out within a fraction of a millisecond of their due times.
    let pacer = super::pacer::Pacer::start();
    for sent in 0u64.. {
        let ticket = lane.index + sent * lane.count;
        let offset = schedule.next_offset();
        let due = start + offset;
        let is_measured = sent >= budget.warmup && offset >= budget.warmup_time;
        if is_measured {
            if budget.requests.is_some_and(|limit| measured >= limit) {
                break;
            }
            let from = *measured_from.get_or_insert(due);
            if budget.time.is_some_and(|time| due >= from + time) {
                break;
            }
            measured += 1;
        } else {
            warmup += 1;
        }
        if due > Instant::now() {
            pacer.sleep_until(due).await;
        } else if sent % 64 == 63 {
            // Behind schedule: catching up must not starve the workers on this thread.
            tokio::task::yield_now().await;
        }
        if is_measured {
            measured_start.mark(due);
        }
        let mut client_from = due;
        let index = match idle_rx.try_recv() {
            Ok(index) => index,
            Err(_)
                if load
                    .max_concurrency
                    .is_none_or(|cap| jobs.len() < cap as usize) =>
            {
                let (tx, mut rx) = mpsc::channel::<Job>(1);
                let index = jobs.len();
                jobs.push(tx);
                let mut worker = Worker::new(shared.clone(), recorder.clone());
                let idle = idle_tx.clone();
                let workload = workload.clone();
                workers.spawn(async move {
                    while let Some(job) = rx.recv().await {
                        worker
                            .request(
                                &workload,
                                seed,
                                job.ticket,
                                job.measured,
                                Some(job.due),
                                Some(job.client_from),
                            )
                            .await;
                        if idle.send(index).is_err() {
                            break;
                        }
                    }
                });
                index
            }
            // The cap is full: the request waits, and its latency counts from `due`.
            Err(_) => match idle_rx.recv().await {
                Some(index) => {
                    client_from = client_from.max(Instant::now());
                    index
                }
                None => break,
            },
        };
        let job = Job {
            ticket,
            due,
            measured: is_measured,
            client_from,
        };
        // An idle worker's channel has room; a worker that is gone (it panicked) is
        // skipped, and the request counts as cooldown.
        if let Some(sender) = jobs.get(index) {
            let _ = sender.try_send(job);
        }
    }
    drop(jobs);
    drop(idle_tx);
    let end = budget
        .time
        .and_then(|time| measured_from.map(|from| from + time));
    drain(&mut workers, || end).await;
    (warmup, measured)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An open loop without `--max-concurrency` still has a ceiling: the streams one
    /// file table holds, never more than one load generator holds.
    #[test]
    fn an_uncapped_open_loop_has_a_ceiling() {
        let ceiling = uncapped_ceiling();
        assert!((1..=MAX_CONCURRENCY_PER_LOADGEN).contains(&ceiling));
        let limit = fd_tables::open_file_limit();
        assert!(u64::from(ceiling) <= limit.saturating_sub(fd_tables::RESERVED).max(1));
        // It fits one table: the loop is not split into lanes for it.
        assert_eq!(fd_tables::tables_needed(u64::from(ceiling), limit), 1);
    }
}
