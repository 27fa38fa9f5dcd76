//! Decide: what a benchmark that goes on looks like next, from what was observed, its
//! current status and `now`. Pure: no client, no clock; [`super::assess`] says what the
//! pods mean, this says what to create, what status to write, which events to publish
//! and when to look again.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;
use perfsweep_benchmarks::status::{BenchmarkStatus, Phase, set_condition};

use super::assess::{Progress, Verdict};
use super::{OPERATOR_ERROR_CONDITION, RESYNC};

/// Whether objects are to be created: only while the benchmark waits for pods that
/// never all ran (never after), and only when something is missing (or its PodGroup
/// cannot be, which creating reports).
pub(super) fn needs_objects<R>(
    verdict: &Verdict,
    old: &BenchmarkStatus<R>,
    progress: &Progress,
    gang: bool,
    volcano: bool,
    pod_group_missing: bool,
) -> bool {
    matches!(verdict, Verdict::Waiting { .. })
        && old.started_at.is_none()
        && (!progress.missing.is_empty() || pod_group_missing || (gang && !volcano))
}

/// `old` as of this reconcile: its generation observed, the operator's error of an
/// earlier reconcile over (this one got this far), the pods' progress conditions.
pub(super) fn with_progress<R: Clone>(
    old: &BenchmarkStatus<R>,
    generation: Option<i64>,
    conditions: Vec<Condition>,
) -> BenchmarkStatus<R> {
    let mut status = old.clone();
    status.observed_generation = generation;
    status
        .conditions
        .retain(|c| c.type_ != OPERATOR_ERROR_CONDITION);
    for condition in conditions {
        set_condition(&mut status.conditions, condition);
    }
    status
}

/// The status of a benchmark that goes on, and when to look at it again.
#[derive(Debug, PartialEq)]
pub(super) struct GoingOn<R> {
    pub status: BenchmarkStatus<R>,
    pub recheck_in: Duration,
    /// All its pods run now (not only: it ran before).
    pub running: bool,
}

/// For a benchmark whose pods wait or run: its status (Pending until it ran, Running
/// from the time all pods first ran; never back to Pending) and when to look again.
/// `None`: the benchmark ends (a result to read, or a failure).
pub(super) fn going_on<R: Clone>(
    status: &BenchmarkStatus<R>,
    verdict: &Verdict,
    now: Timestamp,
) -> Option<GoingOn<R>> {
    let (running, recheck_in) = match verdict {
        Verdict::Waiting { recheck_in } => (false, *recheck_in),
        Verdict::Running { recheck_in } => (true, *recheck_in),
        Verdict::ReadResult | Verdict::Failed { .. } => return None,
    };
    let mut status = status.clone();
    if running {
        status.phase = Some(Phase::Running);
        status.started_at.get_or_insert(Time(now));
    } else if status.phase != Some(Phase::Running) {
        status.phase = Some(Phase::Pending);
    }
    Some(GoingOn {
        status,
        recheck_in: recheck_in.min(RESYNC),
        running,
    })
}

/// The events of a benchmark that goes on: that all its pods run (once). As (type,
/// reason, action, note). What was created is not announced: a sweep creates thousands
/// of benchmarks, the status shows each one's pods as they are scheduled, and an event
/// per creation would be one more API request per child than the sweep's budget.
pub(super) fn going_on_events<R>(
    old: &BenchmarkStatus<R>,
    new: &BenchmarkStatus<R>,
    pods: usize,
) -> Vec<(EventType, &'static str, &'static str, String)> {
    let mut events = Vec::new();
    if old.phase != Some(Phase::Running) && new.phase == Some(Phase::Running) {
        let note = format!("All {pods} pods are running");
        events.push((EventType::Normal, "Running", "Run", note));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::status::{condition, condition_status};
    use serde_json::Value;

    fn now() -> Timestamp {
        "2026-11-25T12:00:00Z".parse().expect("a time")
    }

    fn status(phase: Option<Phase>, started: bool) -> BenchmarkStatus<Value> {
        BenchmarkStatus {
            phase,
            started_at: started.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..Default::default()
        }
    }

    fn progress(missing: &[&str]) -> Progress {
        Progress {
            total: 2,
            scheduled: 0,
            started: 0,
            missing: missing.iter().map(|m| (*m).to_owned()).collect(),
            unschedulable: None,
        }
    }

    #[test]
    fn objects_are_created_only_while_waiting_for_pods_that_never_ran() {
        let waiting = Verdict::Waiting {
            recheck_in: Duration::from_secs(5),
        };
        let running = Verdict::Running {
            recheck_in: Duration::from_secs(5),
        };
        // (verdict, ran before, missing pods, gang, volcano, PodGroup missing, create?)
        let table = [
            (
                &waiting,
                false,
                &["b-server-0"][..],
                false,
                false,
                false,
                true,
            ),
            (&waiting, false, &[][..], false, false, false, false),
            (&waiting, false, &[][..], true, true, true, true),
            (&waiting, false, &[][..], true, false, false, true),
            (
                &waiting,
                true,
                &["b-server-0"][..],
                false,
                false,
                false,
                false,
            ),
            (
                &running,
                false,
                &["b-server-0"][..],
                false,
                false,
                false,
                false,
            ),
            (
                &Verdict::ReadResult,
                false,
                &["b-server-0"][..],
                false,
                false,
                false,
                false,
            ),
        ];
        for (verdict, ran, missing, gang, volcano, group_missing, create) in table {
            let old = status(None, ran);
            assert_eq!(
                needs_objects(
                    verdict,
                    &old,
                    &progress(missing),
                    gang,
                    volcano,
                    group_missing
                ),
                create,
                "{verdict:?} ran {ran} missing {missing:?} gang {gang} volcano {volcano}"
            );
        }
    }

    #[test]
    fn a_benchmark_going_on_is_pending_until_it_runs_and_never_pending_again() {
        let wait = Verdict::Waiting {
            recheck_in: Duration::from_mins(10),
        };
        let run = Verdict::Running {
            recheck_in: Duration::from_secs(5),
        };
        // (old phase, ran before, verdict, phase, started at, recheck in)
        let table = [
            (None, false, &wait, Some(Phase::Pending), None, RESYNC),
            (
                Some(Phase::Pending),
                false,
                &run,
                Some(Phase::Running),
                Some(now()),
                Duration::from_secs(5),
            ),
            (
                Some(Phase::Running),
                true,
                &run,
                Some(Phase::Running),
                Some(Timestamp::UNIX_EPOCH),
                Duration::from_secs(5),
            ),
            (
                Some(Phase::Running),
                true,
                &wait,
                Some(Phase::Running),
                Some(Timestamp::UNIX_EPOCH),
                RESYNC,
            ),
        ];
        for (phase, ran, verdict, next, started_at, recheck_in) in table {
            let going = going_on(&status(phase, ran), verdict, now()).expect("goes on");
            assert_eq!(going.status.phase, next, "{phase:?} {verdict:?}");
            assert_eq!(
                going.status.started_at.map(|t| t.0),
                started_at,
                "{phase:?} {verdict:?}"
            );
            assert_eq!(going.recheck_in, recheck_in, "{phase:?} {verdict:?}");
        }
        assert_eq!(
            going_on(&status(None, false), &Verdict::ReadResult, now()),
            None
        );
    }

    #[test]
    fn progress_replaces_the_operators_error() {
        let mut old = status(Some(Phase::Pending), false);
        set_condition(
            &mut old.conditions,
            condition(
                OPERATOR_ERROR_CONDITION,
                condition_status::TRUE,
                "APIUnavailable",
                "x",
                None,
                now(),
            ),
        );
        let ready = condition(
            "Ready",
            condition_status::FALSE,
            "PodsNotRunning",
            "0 of 2",
            Some(3),
            now(),
        );
        let status = with_progress(&old, Some(3), vec![ready]);
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Ready"]);
        assert_eq!(status.observed_generation, Some(3));
    }

    #[test]
    fn the_one_event_of_a_benchmark_that_goes_on_is_that_all_pods_run() {
        let fresh = status(None, false);
        let pending = status(Some(Phase::Pending), false);
        let running = status(Some(Phase::Running), true);
        let reasons = |old: &BenchmarkStatus<Value>, new: &BenchmarkStatus<Value>| {
            going_on_events(old, new, 2)
                .into_iter()
                .map(|(_, reason, _, note)| format!("{reason}: {note}"))
                .collect::<Vec<_>>()
        };
        assert!(
            reasons(&fresh, &pending).is_empty(),
            "no event per creation"
        );
        assert_eq!(
            reasons(&pending, &running),
            ["Running: All 2 pods are running"]
        );
        assert!(reasons(&running, &running).is_empty());
    }
}
