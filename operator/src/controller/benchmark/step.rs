//! What a step of a benchmark's reconcile comes to, in one type: done, the benchmark
//! fails ([`Halt::Fails`]), or the operator is stuck at a [`Stage`] ([`Stuck`]); and the
//! [`Update`] every reconcile ends with, which [`super::status::update`] writes.

use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use perfsweep_benchmarks::api::status::BenchmarkStatus;

use crate::controller::Error;
use perfsweep_benchmarks::outcome::{Failure, Reason};

/// What the controller was doing for a benchmark when a request failed: every stage is
/// bounded by the benchmark's timeout, and a benchmark that ends at its deadline says in
/// which stage and on which error it was stuck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stage {
    Preparing,
    Creating,
    WaitingForPods,
    Running,
    ReadingResult,
    CleaningUp,
}

impl Stage {
    pub(super) fn describe(self) -> &'static str {
        match self {
            Self::Preparing => "preparing",
            Self::Creating => "creating its objects",
            Self::WaitingForPods => "waiting for its pods",
            Self::Running => "running",
            Self::ReadingResult => "reading the result",
            Self::CleaningUp => "cleaning up",
        }
    }

    /// The failure of a benchmark whose deadline passed while this stage kept failing.
    pub(super) fn failure(self, error: &Error, timeout: Duration) -> Failure {
        let timeout = perfsweep_benchmarks::formats::duration::format(timeout);
        match self {
            Self::ReadingResult => Failure::new(
                Reason::ResultUnreadable,
                format!("the result could not be read within the timeout of {timeout}: {error}"),
            ),
            stage => Failure::new(
                Reason::TimedOut,
                format!(
                    "the benchmark did not finish within its timeout of {timeout} ({}; last error: {error})",
                    stage.describe()
                ),
            ),
        }
    }
}

/// A request of the operator that failed, and the stage it failed in: shown in status
/// as `OperatorError` and retried until the benchmark's deadline.
#[derive(Debug)]
pub(super) struct Stuck {
    pub stage: Stage,
    pub error: Error,
}

/// Why a step stopped short.
#[derive(Debug)]
pub(super) enum Halt {
    /// The benchmark fails: its spec, its pods or its result say so.
    Fails(Failure),
    /// The operator could not do its part.
    Stuck(Stuck),
}

/// The outcome of a step that talks to the cluster.
pub(super) type Step<T> = Result<T, Halt>;

impl From<Failure> for Halt {
    fn from(failure: Failure) -> Self {
        Self::Fails(failure)
    }
}

impl From<Stuck> for Halt {
    fn from(stuck: Stuck) -> Self {
        Self::Stuck(stuck)
    }
}

/// Places an operator error at the stage it happened in.
pub(super) trait At<T> {
    fn at(self, stage: Stage) -> Result<T, Stuck>;
}

impl<T> At<T> for Result<T, Error> {
    fn at(self, stage: Stage) -> Result<T, Stuck> {
        self.map_err(|error| Stuck { stage, error })
    }
}

/// An event to publish once the status that prompted it is written.
pub(super) struct Note {
    pub type_: EventType,
    pub reason: &'static str,
    pub action: &'static str,
    pub text: String,
}

impl From<(EventType, &'static str, &'static str, String)> for Note {
    fn from(
        (type_, reason, action, text): (EventType, &'static str, &'static str, String),
    ) -> Self {
        Self {
            type_,
            reason,
            action,
            text,
        }
    }
}

/// How a reconcile ends: the status to write (compared with `stored`, the status the
/// API server has, and written on the `resourceVersion` it was decided on), the events
/// it announces, what follows a benchmark's end, and when to look again.
pub(super) struct Update<R> {
    pub stored: BenchmarkStatus<R>,
    pub status: BenchmarkStatus<R>,
    pub events: Vec<Note>,
    /// Set when the benchmark ended with this update: its evidence digest (annotated on
    /// the benchmark) and the deletion of what it created.
    pub ended: Option<Ended>,
    pub then: Action,
    /// What a failed write counts as.
    pub stage: Stage,
}

/// What follows the status write of a benchmark that ended.
pub(super) struct Ended {
    pub evidence: Option<String>,
}

impl<R: Clone> Update<R> {
    /// Nothing to write: look again per `then`.
    pub(super) fn nothing(stored: &BenchmarkStatus<R>, then: Action, stage: Stage) -> Self {
        Self {
            stored: stored.clone(),
            status: stored.clone(),
            events: Vec::new(),
            ended: None,
            then,
            stage,
        }
    }
}
