//! A timeout for a future that is woken many times (a streamed response: once per
//! token). `tokio::time::timeout` polls its timer on every wakeup, which showed as the
//! load generator's largest user-space cost; this one registers the timer once and
//! afterwards only reads the clock, which is all a wakeup needs to tell whether the
//! deadline passed. The timer still wakes the task if nothing else does.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// `future` unless `duration` passes first (`Err(Elapsed)`).
pub fn within<F: Future>(duration: Duration, future: F) -> Within<F> {
    let deadline = Instant::now() + duration;
    Within {
        future: Box::pin(future),
        deadline,
        timer: Box::pin(tokio::time::sleep_until(deadline)),
        armed: false,
    }
}

/// The deadline passed before the future finished.
#[derive(Debug, PartialEq, Eq)]
pub struct Elapsed;

/// See [`within`].
pub struct Within<F> {
    future: Pin<Box<F>>,
    deadline: Instant,
    timer: Pin<Box<Sleep>>,
    armed: bool,
}

impl<F: Future> Future for Within<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if let Poll::Ready(output) = this.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        if !this.armed {
            // The first poll registers this task's waker with the timer; the task's
            // waker stays the same, so the registration stays valid.
            this.armed = true;
            if this.timer.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Err(Elapsed));
            }
            return Poll::Pending;
        }
        if Instant::now() >= this.deadline || this.timer.is_elapsed() {
            return Poll::Ready(Err(Elapsed));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_future_that_finishes_in_time_gives_its_output() {
        let output = within(Duration::from_secs(1), async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            7
        })
        .await;
        assert_eq!(output, Ok(7));
    }

    #[tokio::test]
    async fn a_future_that_never_wakes_times_out() {
        let output = within(Duration::from_millis(50), std::future::pending::<()>()).await;
        assert_eq!(output, Err(Elapsed));
    }

    /// Woken often (as by a stream's tokens) but never finishing: the deadline still ends
    /// it, from the clock read on a wakeup or from the timer.
    #[tokio::test]
    async fn a_future_woken_often_times_out_at_its_deadline() {
        let started = Instant::now();
        let output = within(Duration::from_millis(100), async {
            loop {
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        })
        .await;
        assert_eq!(output, Err::<(), _>(Elapsed));
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(100) && took < Duration::from_millis(500),
            "{took:?}"
        );
    }
}
