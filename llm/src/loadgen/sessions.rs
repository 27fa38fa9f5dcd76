//! The closed loop of multi-turn chat sessions: each stream holds one conversation at
//! a time, sends its turns one after the other (each with the history so far), waits
//! the think time between them, and starts a new conversation when one ends.
//!
//! The budget counts requests, as the other loops do, but is spent in whole
//! conversations so that every turn index keeps the same number of samples: warmup and
//! the measured requests are rounded up to whole conversations; a conversation is
//! warmup when it starts within the warmup (count or time). A conversation ends early
//! only at a failed turn (a chat client does not go on without the reply) or when the
//! iteration's time is up.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::task::JoinSet;
use tokio::time::Instant;

use super::loops::{Budget, MeasuredStart, Outcome, SharedRecorder, drain, take_recorder};
use super::workload::Workload;
use super::workload::sessions::{Conversation, Sessions};
use super::{Shared, Worker};

/// Hands out conversations until the budget is spent.
struct Conversations {
    started: Instant,
    warmup: u64,
    budget: Budget,
    /// Measured conversations at most.
    limit: Option<u64>,
    next: AtomicU64,
    measured: AtomicU64,
    measured_from: OnceLock<Instant>,
    measured_start: Arc<MeasuredStart>,
    /// Requests sent, warmup and measured.
    warmup_sent: AtomicU64,
    measured_sent: AtomicU64,
}

impl Conversations {
    fn new(budget: Budget, turns: u32, measured_start: Arc<MeasuredStart>) -> Self {
        let turns = u64::from(turns.max(1));
        Self {
            started: Instant::now(),
            warmup: budget.warmup.div_ceil(turns),
            limit: budget.requests.map(|r| r.div_ceil(turns)),
            budget,
            next: AtomicU64::new(0),
            measured: AtomicU64::new(0),
            measured_from: OnceLock::new(),
            measured_start,
            warmup_sent: AtomicU64::new(0),
            measured_sent: AtomicU64::new(0),
        }
    }

    /// The next conversation's number and whether it is measured; `None` when the
    /// budget is spent.
    fn take(&self) -> Option<(u64, bool)> {
        let now = Instant::now();
        if let (Some(time), Some(start)) = (self.budget.time, self.measured_from.get())
            && now.saturating_duration_since(*start) >= time
        {
            return None;
        }
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let measured = number >= self.warmup
            && now.saturating_duration_since(self.started) >= self.budget.warmup_time;
        if measured {
            let count = self.measured.fetch_add(1, Ordering::Relaxed);
            if self.limit.is_some_and(|limit| count >= limit) {
                return None;
            }
            self.measured_from.get_or_init(|| now);
            self.measured_start.mark(now);
        }
        Some((number, measured))
    }

    fn deadline(&self) -> Option<Instant> {
        self.budget
            .time
            .and_then(|time| self.measured_from.get().map(|start| *start + time))
    }
}

/// `concurrency` streams holding conversations of `sessions`, until the budget is spent.
#[allow(clippy::too_many_arguments)] // the iteration's parts every loop takes, and the sessions
pub async fn closed(
    shared: &Arc<Shared>,
    workload: &Workload,
    sessions: &Sessions,
    concurrency: u32,
    budget: Budget,
    seed: u64,
    recorder: &SharedRecorder,
    measured_start: &Arc<MeasuredStart>,
) -> Outcome {
    let shape = sessions.shape;
    let conversations = Arc::new(Conversations::new(
        budget,
        shape.turns,
        measured_start.clone(),
    ));
    let mut workers = JoinSet::new();
    for _ in 0..concurrency {
        let (shared, recorder) = (shared.clone(), recorder.clone());
        let (conversations, workload) = (conversations.clone(), workload.clone());
        workers.spawn(async move {
            let mut worker = Worker::new(shared, recorder);
            while let Some((number, measured)) = conversations.take() {
                worker.conversation = Some(Conversation::default());
                for turn in 0..shape.turns {
                    if turn > 0 && !shape.think_time.is_zero() {
                        tokio::time::sleep(shape.think_time).await;
                    }
                    let sent = if measured {
                        &conversations.measured_sent
                    } else {
                        &conversations.warmup_sent
                    };
                    sent.fetch_add(1, Ordering::Relaxed);
                    // Every turn of every conversation draws its own message.
                    let ticket = number * u64::from(shape.turns) + u64::from(turn);
                    worker
                        .request(&workload, seed, ticket, measured, None, None)
                        .await;
                    if !worker.succeeded {
                        break;
                    }
                    // The turn joins the history: the message sent, the reply streamed.
                    if let Some(conversation) = worker.conversation.as_mut() {
                        conversation.push(
                            &worker.prompt,
                            shape.user_tokens,
                            &worker.stream.text,
                            shape.output_tokens,
                        );
                    }
                }
                worker.conversation = None;
            }
        });
    }
    drain(&mut workers, || conversations.deadline()).await;
    let recorder = take_recorder(recorder);
    Outcome {
        cooldown_requests: conversations
            .measured_sent
            .load(Ordering::Relaxed)
            .saturating_sub(recorder.count()),
        warmup_requests: conversations.warmup_sent.load(Ordering::Relaxed),
        recorder,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn budget(warmup: u64, requests: Option<u64>) -> Budget {
        Budget {
            warmup,
            warmup_time: Duration::ZERO,
            requests,
            time: None,
        }
    }

    #[test]
    fn the_budget_is_spent_in_whole_conversations() {
        // 5 warmup requests of 3-turn conversations: 2 warmup conversations; 10
        // measured requests: 4 measured conversations.
        let conversations = Conversations::new(budget(5, Some(10)), 3, Arc::default());
        let taken: Vec<(u64, bool)> = std::iter::from_fn(|| conversations.take()).collect();
        assert_eq!(
            taken,
            [
                (0, false),
                (1, false),
                (2, true),
                (3, true),
                (4, true),
                (5, true)
            ]
        );
    }
}
