//! Waits for an open loop's due times with sub-millisecond precision.
//!
//! Tokio's timer has a 1 ms tick and its event loop sleeps in `epoll_wait`, whose
//! timeout is whole milliseconds: a send waits up to 2 ms past its due time, and the
//! issue's target is 1 ms at p99 (a trace's 500 requests a second are 2 ms apart). A
//! busy wait on the loop's own thread would hold a core (and this loop shares its
//! thread with every stream), so the last stretch is left to a thread of its own that
//! sleeps in the kernel's high-resolution `nanosleep` (with its timer slack lowered)
//! and wakes the loop when the time has come. The loop's coarse timer covers the wait
//! up to [`LEAD`] before the due time, so the pacing thread never sleeps long and one
//! wakeup per request is all it costs.

use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long before the due time the coarse timer hands over: more than its worst
/// lateness (a tick plus epoll's rounding up).
pub const LEAD: Duration = Duration::from_millis(3);

/// A due time, and who to wake at it.
type Wake = (std::time::Instant, oneshot::Sender<()>);

/// The pacing thread of one open loop (or lane); it ends when this is dropped.
pub struct Pacer {
    requests: Option<mpsc::Sender<Wake>>,
}

impl Pacer {
    /// Starts the pacing thread; without one (the thread cannot start), waits fall back
    /// to the event loop's timer.
    pub fn start() -> Self {
        let (sender, receiver) = mpsc::channel::<Wake>();
        let started = std::thread::Builder::new()
            .name("loadgen-pacer".into())
            .spawn(move || pace(&receiver));
        if let Err(error) = &started {
            tracing::warn!(%error, "no pacing thread: sends follow the 1 ms timer");
        }
        Self {
            requests: started.ok().map(|_| sender),
        }
    }

    /// Returns at `due`, or as soon after it as the kernel wakes a thread.
    pub async fn sleep_until(&self, due: Instant) {
        if let Some(coarse) = due.checked_sub(LEAD)
            && coarse > Instant::now()
        {
            tokio::time::sleep_until(coarse).await;
        }
        if due <= Instant::now() {
            return;
        }
        let (wake, woken) = oneshot::channel();
        match &self.requests {
            Some(requests) if requests.send((due.into_std(), wake)).is_ok() => {
                // The thread wakes us, or it is gone (then we are at most late).
                if woken.await.is_err() {
                    tokio::time::sleep_until(due).await;
                }
            }
            _ => tokio::time::sleep_until(due).await,
        }
    }
}

/// The pacing thread: one sleep per due time, in order of arrival (a loop waits for
/// one due time at a time).
fn pace(requests: &mpsc::Receiver<Wake>) {
    lower_timer_slack();
    while let Ok((due, wake)) = requests.recv() {
        let now = std::time::Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let _ = wake.send(());
    }
}

/// The kernel may wake a sleeping thread up to its timer slack late (50 µs by
/// default, to batch wakeups); this thread's sleeps are the point, so 1 µs.
fn lower_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a value and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1_000 as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wait never returns early, whichever path it takes (coarse timer, pacing
    /// thread, or already due). How late it returns is measured, not asserted (see
    /// the `schedule` section of `cargo bench --bench llm`).
    #[tokio::test(flavor = "current_thread")]
    async fn a_paced_wait_never_returns_before_its_due_time() {
        let pacer = Pacer::start();
        for ahead_us in [0u64, 200, 900, 2_500, 5_000] {
            let due = Instant::now() + Duration::from_micros(ahead_us);
            pacer.sleep_until(due).await;
            assert!(Instant::now() >= due, "returned early for {ahead_us} µs");
        }
        // A due time in the past returns at once.
        let past = Instant::now();
        pacer.sleep_until(past).await;
    }

    #[tokio::test(flavor = "current_thread")]
    async fn without_a_pacing_thread_the_timer_still_waits() {
        let pacer = Pacer { requests: None };
        let due = Instant::now() + Duration::from_millis(2);
        pacer.sleep_until(due).await;
        assert!(Instant::now() >= due);
    }
}
