//! The verdict of `perfsweep run` (local and cluster), judged as benchmarks finish: a
//! verdict per benchmark for the table, a final `ACCEPTED`/`NOT ACCEPTED` line, and an
//! exit code that tells "ran fine, not accepted" from "failed to run". Pure.
//!
//! Exit codes (also in `perfsweep run --help` and docs/local.md):
//! - 0: every benchmark ran; accepted, or without acceptance criteria;
//! - 1: failed to run: a benchmark failed, or the run itself could not proceed;
//! - 2: the command line was wrong;
//! - 3: every benchmark ran, and the results are NOT ACCEPTED;
//! - 128 + signal (130 SIGINT, 143 SIGTERM, 129 SIGHUP): interrupted; the records of
//!   finished benchmarks were kept.

use perfsweep_benchmarks::judging::acceptance;
use perfsweep_benchmarks::kinds::registry::KindInfo;
use serde_json::Value;

pub const EXIT_FAILED_TO_RUN: u8 = 1;
pub const EXIT_NOT_ACCEPTED: u8 = 3;

/// The verdict on one benchmark.
#[derive(Clone, Debug, PartialEq)]
pub enum Acceptance {
    /// Its spec had no acceptance criteria.
    NoCriteria,
    Accepted,
    /// Why, with by how much.
    Rejected(String),
    /// It had criteria but failed: no result to judge.
    NotJudged,
}

impl Acceptance {
    /// Judges a finished benchmark of `kind` with `spec`: `result` is `None` when it
    /// failed.
    pub fn of(kind: &KindInfo, spec: &Value, result: Option<&Value>) -> Self {
        Self::judged(
            spec,
            result
                .map(|result| acceptance::judge(kind, spec, result))
                .as_ref()
                .map(Option::as_ref),
        )
    }

    /// The verdict on a benchmark with `spec` given the acceptance verdict the outcome
    /// logic gave: `None` when it failed; `Some(None)` when it succeeded unjudged.
    pub fn judged(spec: &Value, judged: Option<Option<&acceptance::Judgement>>) -> Self {
        let has_criteria = !acceptance::criteria_of(spec).is_empty();
        match (has_criteria, judged) {
            (false, _) => Self::NoCriteria,
            (true, None) => Self::NotJudged,
            (true, Some(verdict)) => match verdict {
                Some(verdict) if verdict.accepted => Self::Accepted,
                Some(verdict) => Self::Rejected(verdict.message()),
                None => Self::NoCriteria,
            },
        }
    }

    /// The table's VERDICT cell.
    pub fn cell(&self) -> &'static str {
        match self {
            Self::NoCriteria => "-",
            Self::Accepted => "accepted",
            Self::Rejected(_) => "REJECTED",
            Self::NotJudged => "no result",
        }
    }
}

/// Counts over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub succeeded: usize,
    pub failed: usize,
    pub accepted: usize,
    pub rejected: usize,
    /// Failed benchmarks that had criteria.
    pub not_judged: usize,
    /// Node-pair sets whose children each met their criteria but whose fleet verdict
    /// names outliers (their `Accepted` condition is `FleetOutliers`).
    pub fleets_not_accepted: usize,
}

impl Tally {
    pub fn add(&mut self, succeeded: bool, verdict: &Acceptance) {
        if succeeded {
            self.succeeded += 1;
        } else {
            self.failed += 1;
        }
        match verdict {
            Acceptance::NoCriteria => {}
            Acceptance::Accepted => self.accepted += 1,
            Acceptance::Rejected(_) => self.rejected += 1,
            Acceptance::NotJudged => self.not_judged += 1,
        }
    }

    fn judged(&self) -> bool {
        self.accepted + self.rejected + self.not_judged + self.fleets_not_accepted > 0
    }

    /// The final verdict line: `ACCEPTED: …` or `NOT ACCEPTED: …`; `None` when no
    /// benchmark had criteria.
    pub fn verdict_line(&self) -> Option<String> {
        if !self.judged() {
            return None;
        }
        let counts = format!(
            "{} accepted, {} rejected, {} failed without a result",
            self.accepted, self.rejected, self.not_judged
        );
        let fleets = match self.fleets_not_accepted {
            0 => String::new(),
            1 => "; 1 node-pair set's fleet verdict names suspect nodes or links".to_owned(),
            n => format!("; {n} node-pair sets' fleet verdicts name suspect nodes or links"),
        };
        Some(
            if self.rejected == 0 && self.not_judged == 0 && self.fleets_not_accepted == 0 {
                format!("ACCEPTED: {counts}")
            } else {
                format!("NOT ACCEPTED: {counts}{fleets}")
            },
        )
    }

    /// The exit code of a run that was not interrupted (see the module's list).
    pub fn exit_code(&self) -> u8 {
        if self.failed > 0 {
            EXIT_FAILED_TO_RUN
        } else if self.rejected > 0 || self.fleets_not_accepted > 0 {
            EXIT_NOT_ACCEPTED
        } else {
            0
        }
    }
}

/// How a run ended: its counts, and the signal that stopped it, if one did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ended {
    pub tally: Tally,
    pub stopped: Option<Stop>,
}

impl Ended {
    pub fn exit_code(&self) -> u8 {
        match self.stopped {
            Some(stop) => stop.exit_code(),
            None => self.tally.exit_code(),
        }
    }
}

/// A signal that stops a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Interrupt,
    Terminate,
    Hangup,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Self::Interrupt => "SIGINT (Ctrl-C)",
            Self::Terminate => "SIGTERM",
            Self::Hangup => "SIGHUP",
        }
    }

    /// 128 + the signal's number, as shells report a process the signal ended.
    pub fn exit_code(self) -> u8 {
        let number = match self {
            Self::Interrupt => libc::SIGINT,
            Self::Terminate => libc::SIGTERM,
            Self::Hangup => libc::SIGHUP,
        };
        128 + u8::try_from(number).unwrap_or(0)
    }
}

/// SIGINT, SIGTERM and SIGHUP, caught for the life of a run so it can stop cleanly.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn catch() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next of them to arrive.
    pub async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.interrupt.recv() => Stop::Interrupt,
            _ = self.terminate.recv() => Stop::Terminate,
            _ = self.hangup.recv() => Stop::Hangup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn iperf() -> &'static KindInfo {
        perfsweep_benchmarks::kinds::registry::lookup("IPerf").expect("IPerf")
    }

    #[test]
    fn benchmarks_are_judged_by_their_own_criteria() {
        let raw = include_str!("../../benchmarks/testdata/iperf/tcp-4streams.json");
        let result = iperf().parse(raw).expect("the fixture parses").result;
        let criteria =
            |min: f64| json!({"acceptance": [{"metric": "received_bits_per_second", "min": min}]});
        assert_eq!(
            Acceptance::of(iperf(), &criteria(1.0), Some(&result)),
            Acceptance::Accepted
        );
        let spec = criteria(1e15);
        let slow = result.clone();
        let Acceptance::Rejected(why) = Acceptance::of(iperf(), &spec, Some(&slow)) else {
            panic!("a result below the minimum is rejected");
        };
        assert!(why.contains("below the minimum"), "{why}");
        assert_eq!(Acceptance::of(iperf(), &spec, None), Acceptance::NotJudged);
        assert_eq!(
            Acceptance::of(iperf(), &json!({}), Some(&slow)),
            Acceptance::NoCriteria
        );
    }

    #[test]
    fn the_exit_code_tells_not_accepted_from_failed() {
        let mut tally = Tally::default();
        tally.add(true, &Acceptance::Accepted);
        assert_eq!(tally.exit_code(), 0);
        assert_eq!(
            tally.verdict_line().as_deref(),
            Some("ACCEPTED: 1 accepted, 0 rejected, 0 failed without a result")
        );
        tally.add(true, &Acceptance::Rejected("slow".into()));
        assert_eq!(tally.exit_code(), EXIT_NOT_ACCEPTED);
        assert!(
            tally
                .verdict_line()
                .is_some_and(|l| l.starts_with("NOT ACCEPTED"))
        );
        tally.add(false, &Acceptance::NotJudged);
        assert_eq!(tally.exit_code(), EXIT_FAILED_TO_RUN);
        let unjudged = Tally {
            succeeded: 2,
            ..Tally::default()
        };
        assert_eq!(unjudged.verdict_line(), None);
        assert_eq!(unjudged.exit_code(), 0);
        assert_eq!(Stop::Terminate.exit_code(), 143);
        assert_eq!(Stop::Interrupt.exit_code(), 130);
        assert_eq!(Stop::Hangup.exit_code(), 129);
    }

    #[test]
    fn a_fleet_its_set_does_not_accept_makes_the_run_not_accepted() {
        let mut tally = Tally::default();
        tally.add(true, &Acceptance::Accepted);
        tally.add(true, &Acceptance::Accepted);
        tally.fleets_not_accepted = 1;
        assert_eq!(tally.exit_code(), EXIT_NOT_ACCEPTED);
        let line = tally
            .verdict_line()
            .expect("a judged run has a verdict line");
        assert!(line.starts_with("NOT ACCEPTED: 2 accepted"), "{line}");
        assert!(line.contains("suspect nodes or links"), "{line}");
        // A fleet verdict is a verdict even where no child had criteria.
        let unjudged = Tally {
            succeeded: 2,
            fleets_not_accepted: 1,
            ..Tally::default()
        };
        assert!(unjudged.verdict_line().is_some());
        assert_eq!(unjudged.exit_code(), EXIT_NOT_ACCEPTED);
    }
}
