//! Whether the load generator itself was the bottleneck of an iteration. A client out
//! of CPU sends late and reads late, so its latencies measure the client, not the
//! server (Python load generators on two cores report TTFT several times too high this
//! way). Two signs, both cheap: the process's CPU time over the iteration's wall time
//! against the cores it may use, and a probe task that asks the runtime to wake it
//! every 10 ms and records how late it wakes — the scheduling delay every send and
//! every read of the process suffers too, whatever the load mode.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::report::result::ClientLoad;
use tokio::time::Instant;

/// How often the probe asks to be woken.
const PROBE_PERIOD: Duration = Duration::from_millis(10);
/// A wakeup later than this counts as late. Generous: the runtime's timer ticks in
/// milliseconds, and the closed-loop event loop deliberately waits up to
/// `--wakeup-coalescing-us` before sleeping, so an idle client wakes a millisecond or
/// two late by design.
const LATE: Duration = Duration::from_millis(5);
/// CPU use, percent of the usable cores, from which the client counts as saturated.
pub const SATURATED_CPU_PERCENT: f64 = 90.0;
/// Late probe wakeups, percent, from which the client counts as saturated.
pub const SATURATED_LATE_PERCENT: f64 = 5.0;

/// Watches the process during one iteration.
pub struct ClientMonitor {
    started: Instant,
    cpu_at_start: Option<Duration>,
    running: Arc<AtomicBool>,
    probe: tokio::task::JoinHandle<Probe>,
}

/// What the probe saw.
#[derive(Clone, Copy, Debug, Default)]
struct Probe {
    wakeups: u64,
    late: u64,
    max_delay: Duration,
}

impl ClientMonitor {
    pub fn start() -> Self {
        let running = Arc::new(AtomicBool::new(true));
        let probe = tokio::spawn(probe(running.clone()));
        Self {
            started: Instant::now(),
            cpu_at_start: process_cpu_time(),
            running,
            probe,
        }
    }

    /// Stops watching; how busy the process was, as worker `worker`. Must run on the
    /// load generator's runtime (its threads are the cores it can use).
    pub async fn finish(self, worker: u32) -> ClientLoad {
        let wall = self.started.elapsed();
        let cpu = process_cpu_time()
            .zip(self.cpu_at_start)
            .map(|(end, start)| end.saturating_sub(start));
        self.running.store(false, Ordering::Relaxed);
        let probe = self.probe.await.unwrap_or_default();
        judge(worker, cpu, wall, usable_cores(), probe)
    }
}

async fn probe(running: Arc<AtomicBool>) -> Probe {
    let mut seen = Probe::default();
    while running.load(Ordering::Relaxed) {
        let due = Instant::now() + PROBE_PERIOD;
        tokio::time::sleep_until(due).await;
        let delay = Instant::now().saturating_duration_since(due);
        seen.wakeups += 1;
        if delay > LATE {
            seen.late += 1;
        }
        seen.max_delay = seen.max_delay.max(delay);
    }
    seen
}

fn judge(
    worker: u32,
    cpu: Option<Duration>,
    wall: Duration,
    cores: f64,
    probe: Probe,
) -> ClientLoad {
    let cpu_percent = match cpu {
        Some(cpu) if wall > Duration::ZERO && cores > 0.0 => {
            100.0 * cpu.as_secs_f64() / wall.as_secs_f64() / cores
        }
        _ => 0.0,
    };
    let late_wakeup_percent = if probe.wakeups > 0 {
        100.0 * probe.late as f64 / probe.wakeups as f64
    } else {
        0.0
    };
    ClientLoad {
        worker,
        cpu_percent,
        cores,
        late_wakeup_percent,
        max_wakeup_delay_millis: probe.max_delay.as_secs_f64() * 1000.0,
        saturated: cpu_percent >= SATURATED_CPU_PERCENT
            || late_wakeup_percent > SATURATED_LATE_PERCENT,
    }
}

/// The cores the load generator can use: its runtime's worker threads (one for the
/// single-threaded event loop), at most the CPU quota where a cgroup sets one (the
/// standard library reads it) or the machine's cores.
fn usable_cores() -> f64 {
    let machine = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = tokio::runtime::Handle::try_current()
        .map_or(machine, |runtime| runtime.metrics().num_workers());
    threads.clamp(1, machine.max(1)) as f64
}

/// CPU time (user and system) the whole process has used.
fn process_cpu_time() -> Option<Duration> {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } == 0;
    if !ok {
        return None;
    }
    let of = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    Some(of(usage.ru_utime) + of(usage.ru_stime))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_or_late_client_is_saturated() {
        let second = Duration::from_secs(1);
        let idle = Probe {
            wakeups: 100,
            late: 0,
            max_delay: Duration::from_micros(200),
        };
        let calm = judge(0, Some(Duration::from_millis(500)), second, 2.0, idle);
        assert!((calm.cpu_percent - 25.0).abs() < 1e-9);
        assert!(!calm.saturated);
        let busy = judge(1, Some(Duration::from_millis(1900)), second, 2.0, idle);
        assert!(busy.saturated, "{busy:?}");
        assert_eq!(busy.worker, 1);
        let late = Probe {
            wakeups: 100,
            late: 20,
            max_delay: Duration::from_millis(30),
        };
        let starved = judge(0, Some(Duration::from_millis(100)), second, 2.0, late);
        assert!(starved.saturated, "{starved:?}");
        assert!((starved.late_wakeup_percent - 20.0).abs() < 1e-9);
        assert!((starved.max_wakeup_delay_millis - 30.0).abs() < 1e-9);
        // Without a CPU reading the probe still decides.
        assert!(!judge(0, None, second, 2.0, idle).saturated);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_monitor_sees_cpu_burned_during_the_iteration() {
        let started = std::time::Instant::now();
        let monitor = ClientMonitor::start();
        let spun_from = thread_cpu_time();
        let until = std::time::Instant::now() + Duration::from_millis(300);
        let mut x = 0u64;
        while std::time::Instant::now() < until {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let spun = thread_cpu_time().saturating_sub(spun_from);
        let load = monitor.finish(3).await;
        let wall = started.elapsed();
        assert_eq!(load.worker, 3);
        // The spinning thread got a core on an idle machine and less on a busy one: what
        // it got, as the kernel counted it, is what the monitor must have seen (at least
        // most of it, over a window no longer than this test's).
        assert!(spun > Duration::from_millis(10), "the thread spun {spun:?}");
        let got = 100.0 * spun.as_secs_f64() / wall.as_secs_f64() / load.cores;
        assert!(
            load.cpu_percent > got * 0.8,
            "{load:?} after spinning one thread for {spun:?} of CPU in {wall:?} ({got:.1}%)"
        );
    }

    /// CPU time of the calling thread.
    fn thread_cpu_time() -> Duration {
        // SAFETY: clock_gettime writes into the zeroed timespec we own.
        let mut now: libc::timespec = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut now) } == 0;
        assert!(ok, "CLOCK_THREAD_CPUTIME_ID is readable");
        Duration::new(
            u64::try_from(now.tv_sec).unwrap_or(0),
            u32::try_from(now.tv_nsec).unwrap_or(0),
        )
    }
}
