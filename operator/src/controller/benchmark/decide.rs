//! Decide: what a benchmark that goes on looks like next, from what was observed, its
//! current status and `now`. Pure: no client, no clock; [`super::assess`] says what the
//! pods mean, this says what to create, what status to write, which events to publish
//! and when to look again.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::runtime::events::EventType;
use perfsweep_benchmarks::api::status::{BenchmarkStatus, Phase, condition_status, set_condition};
use perfsweep_benchmarks::judging::acceptance;

use super::assess::{self, Assessment, Failure, Observed, Progress};
use super::observe::Observation;
use super::prepare::Prepared;
use super::target::Target;
use super::{OPERATOR_ERROR_CONDITION, RESYNC};

/// What a reconcile of an unfinished benchmark decides from what it observed.
pub(super) struct Next<R> {
    /// What the pods mean.
    pub verdict: Assessment,
    /// The status as of this reconcile: generation observed, progress conditions.
    pub status: BenchmarkStatus<R>,
    /// Objects are missing and to be created, with the status the benchmark waits in
    /// (written first, to claim it: [`super::status::claim`]).
    pub create: Option<BenchmarkStatus<R>>,
}

/// From the observed pods and PodGroup, the benchmark's current status and `now`: the
/// verdict, the status, and whether to create objects.
pub(super) fn next<R: Clone>(
    target: &Target,
    old: &BenchmarkStatus<R>,
    prepared: &Prepared,
    observation: &Observation,
    volcano: bool,
    now: Timestamp,
) -> Next<R> {
    let gang = prepared.rendered.pod_group.is_some();
    let pod_group = observation.pod_group.as_ref();
    let (verdict, progress) = assess::assess(&Observed {
        expected: &prepared.pods,
        result_pod: &prepared.result_pod,
        result_siblings: &prepared.result_siblings,
        pods: &observation.pods,
        gang,
        pod_group,
        ran: old.started_at.is_some(),
        created: target.created,
        timeout: prepared.timeout,
        now,
    });
    let conditions =
        assess::progress_conditions(&progress, gang, pod_group, target.generation, now)
            .into_iter()
            .filter(|c| !stays_true(old, &c.type_))
            .collect();
    let status = with_progress(old, target.generation, conditions);
    let pod_group_missing = gang && volcano && pod_group.is_none();
    let create = needs_objects(&verdict, old, &progress, gang, volcano, pod_group_missing)
        .then(|| going_on(&status, &verdict, now))
        .flatten()
        .map(|waiting| waiting.status);
    Next {
        verdict,
        status,
        create,
    }
}

/// Conditions that, once true for a benchmark that ran, stay true: its pods were placed
/// (together), and a pod deleted since does not undo that (issue 23: after a pod
/// deletion `Scheduled` turned False `Waiting` and `GangScheduled` Unknown, as if the
/// benchmark had never been placed). `Ready` does follow the pods.
fn stays_true<R>(old: &BenchmarkStatus<R>, type_: &str) -> bool {
    const ONCE_TRUE: &[&str] = &["Scheduled", "GangScheduled"];
    old.started_at.is_some()
        && ONCE_TRUE.contains(&type_)
        && old
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == condition_status::TRUE)
}

/// Whether objects are to be created: only while the benchmark waits for pods that
/// never all ran (never after), and only when something is missing (or its PodGroup
/// cannot be, which creating reports).
pub(super) fn needs_objects<R>(
    verdict: &Assessment,
    old: &BenchmarkStatus<R>,
    progress: &Progress,
    gang: bool,
    volcano: bool,
    pod_group_missing: bool,
) -> bool {
    matches!(verdict, Assessment::Waiting { .. })
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
    verdict: &Assessment,
    now: Timestamp,
) -> Option<GoingOn<R>> {
    let (running, recheck_in) = match verdict {
        Assessment::Waiting { recheck_in } => (false, *recheck_in),
        Assessment::Running { recheck_in } => (true, *recheck_in),
        Assessment::ReadResult | Assessment::Failed { .. } => return None,
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

/// The events of a benchmark that ended: its failure (Warning, with the failure's
/// reason), or `Succeeded` with its summary and, if acceptance criteria failed,
/// `NotAccepted`. As (type, reason, action, note).
pub(super) fn ended_events<R>(
    status: &BenchmarkStatus<R>,
    failure: Option<&Failure>,
) -> Vec<(EventType, &'static str, &'static str, String)> {
    if let Some(failure) = failure {
        let note = failure.message.clone();
        return vec![(EventType::Warning, failure.reason.as_str(), "Run", note)];
    }
    let note = match &status.summary {
        Some(summary) => format!("Succeeded: {summary}"),
        None => "Succeeded".to_owned(),
    };
    let mut events = vec![(EventType::Normal, "Succeeded", "Run", note)];
    let rejected = status
        .conditions
        .iter()
        .find(|c| c.type_ == acceptance::CONDITION && c.status == condition_status::FALSE);
    if let Some(rejected) = rejected {
        let note = rejected.message.clone();
        events.push((EventType::Warning, "NotAccepted", "Judge", note));
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::api::status::{condition, condition_status};
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
        let waiting = Assessment::Waiting {
            recheck_in: Duration::from_secs(5),
        };
        let running = Assessment::Running {
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
                &Assessment::ReadResult,
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
        let wait = Assessment::Waiting {
            recheck_in: Duration::from_mins(10),
        };
        let run = Assessment::Running {
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
            going_on(&status(None, false), &Assessment::ReadResult, now()),
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

    /// What [`next`] is given and must answer, for an IPerf `b` (server, client) made ten
    /// seconds ago with a timeout of 90 s.
    struct Row {
        what: &'static str,
        /// The PodGroup exists.
        group: bool,
        /// (pod, phase) as the caches show them.
        pods: &'static [(&'static str, &'static str)],
        /// All pods ran before (`startedAt`).
        ran: bool,
        volcano: bool,
        create: bool,
        verdict: fn(&Assessment) -> bool,
    }

    #[test]
    fn next_turns_what_was_observed_into_a_decision() {
        use k8s_openapi::api::core::v1::Pod;
        use perfsweep_benchmarks::api::volcano::PodGroup;
        use perfsweep_benchmarks::kinds::iperf::IPerf;
        use perfsweep_benchmarks::kinds::registry;
        use serde_json::json;

        let target = Target {
            info: registry::lookup("IPerf").expect("IPerf is registered"),
            name: "b".into(),
            namespace: "ns".into(),
            uid: "u-1".into(),
            generation: Some(1),
            resource_version: Some("7".into()),
            created: now() - jiff::SignedDuration::from_secs(10),
            defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults::default(),
            covering_set: None,
            token_source: None,
        };
        let benchmark: IPerf = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "b", "namespace": "ns", "uid": "u-1"},
            "spec": {"timeout": "90s"},
        }))
        .expect("an IPerf");
        let prepared = super::super::prepare::prepare(&benchmark, &target)
            .unwrap_or_else(|failure| panic!("{failure:?}"));
        let group: PodGroup = serde_json::from_value(json!({
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "b", "namespace": "ns", "uid": "g-1"},
            "spec": {"minMember": 2},
        }))
        .expect("a PodGroup");
        let pod = |name: &str, phase: &str| -> Pod {
            let scheduled = if phase == "Pending" { "False" } else { "True" };
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"containers": [{"name": "agent", "image": "i"}]},
                "status": {"phase": phase,
                    "conditions": [{"type": "PodScheduled", "status": scheduled}]},
            }))
            .expect("a pod")
        };
        let table = [
            Row {
                what: "nothing made yet: create, waiting",
                group: false,
                pods: &[],
                ran: false,
                volcano: true,
                create: true,
                verdict: |v| matches!(v, Assessment::Waiting { .. }),
            },
            Row {
                what: "made, not scheduled: wait",
                group: true,
                pods: &[("b-server-0", "Pending"), ("b-client-0", "Pending")],
                ran: false,
                volcano: true,
                create: false,
                verdict: |v| matches!(v, Assessment::Waiting { .. }),
            },
            Row {
                what: "one pod missing before the run: create it",
                group: true,
                pods: &[("b-client-0", "Pending")],
                ran: false,
                volcano: true,
                create: true,
                verdict: |v| matches!(v, Assessment::Waiting { .. }),
            },
            Row {
                what: "all running",
                group: true,
                pods: &[("b-server-0", "Running"), ("b-client-0", "Running")],
                ran: false,
                volcano: true,
                create: false,
                verdict: |v| matches!(v, Assessment::Running { .. }),
            },
            Row {
                what: "the result pod succeeded: read the result",
                group: true,
                pods: &[("b-server-0", "Running"), ("b-client-0", "Succeeded")],
                ran: true,
                volcano: true,
                create: false,
                verdict: |v| *v == Assessment::ReadResult,
            },
            Row {
                what: "a pod gone after the run started: failed, nothing made again",
                group: true,
                pods: &[("b-server-0", "Running")],
                ran: true,
                volcano: true,
                create: false,
                verdict: |v| matches!(v, Assessment::Failed { failure, .. } if failure.reason == "PodDeleted"),
            },
            Row {
                what: "a gang without Volcano: creating says why it cannot",
                group: false,
                pods: &[],
                ran: false,
                volcano: false,
                create: true,
                verdict: |v| matches!(v, Assessment::Waiting { .. }),
            },
        ];
        for row in table {
            let observation = Observation {
                pods: row
                    .pods
                    .iter()
                    .map(|(name, phase)| pod(name, phase))
                    .collect(),
                pod_group: row.group.then(|| group.clone()),
            };
            let old = status(
                Some(if row.ran {
                    Phase::Running
                } else {
                    Phase::Pending
                }),
                row.ran,
            );
            let next = next(&target, &old, &prepared, &observation, row.volcano, now());
            assert!(
                (row.verdict)(&next.verdict),
                "{}: {:?}",
                row.what,
                next.verdict
            );
            assert_eq!(next.create.is_some(), row.create, "{}", row.what);
            if let Some(waiting) = &next.create {
                assert_eq!(waiting.phase, Some(Phase::Pending), "{}", row.what);
            }
            assert_eq!(next.status.observed_generation, Some(1), "{}", row.what);
            let types: Vec<&str> = next
                .status
                .conditions
                .iter()
                .map(|c| c.type_.as_str())
                .collect();
            assert_eq!(
                types,
                ["Scheduled", "Ready", "GangScheduled"],
                "{}",
                row.what
            );
        }

        // Issue 23: after a pod of a running benchmark was deleted, Scheduled turned
        // False and GangScheduled Unknown, as if it had never been placed.
        let mut old = status(Some(Phase::Running), true);
        for (type_, reason) in [
            ("Scheduled", "AllPodsScheduled"),
            ("Ready", "AllPodsRunning"),
            ("GangScheduled", "PodGroupScheduled"),
        ] {
            set_condition(
                &mut old.conditions,
                perfsweep_benchmarks::api::status::condition(
                    type_,
                    condition_status::TRUE,
                    reason,
                    "placed",
                    Some(1),
                    now(),
                ),
            );
        }
        let observation = Observation {
            pods: vec![pod("b-server-0", "Running")],
            pod_group: Some(group.clone()),
        };
        let next = next(&target, &old, &prepared, &observation, true, now());
        assert!(
            matches!(&next.verdict, Assessment::Failed { failure, .. } if failure.reason == "PodDeleted"),
            "{:?}",
            next.verdict
        );
        let status_of = |type_: &str| {
            next.status
                .conditions
                .iter()
                .find(|c| c.type_ == type_)
                .map(|c| (c.status.clone(), c.reason.clone()))
        };
        assert_eq!(
            status_of("Scheduled"),
            Some(("True".into(), "AllPodsScheduled".into()))
        );
        assert_eq!(
            status_of("GangScheduled"),
            Some(("True".into(), "PodGroupScheduled".into()))
        );
        assert_eq!(
            status_of("Ready"),
            Some(("False".into(), "PodsNotRunning".into())),
            "Ready follows the pods"
        );
    }

    #[test]
    fn an_ended_benchmark_tells_its_outcome() {
        let reasons = |status: &BenchmarkStatus<Value>, failure: Option<&Failure>| {
            ended_events(status, failure)
                .into_iter()
                .map(|(type_, reason, _, note)| format!("{type_:?} {reason}: {note}"))
                .collect::<Vec<_>>()
        };
        let failure = Failure::new(perfsweep_benchmarks::outcome::Reason::PodFailed, "exit 1");
        let plain = status(Some(Phase::Failed), true);
        assert_eq!(
            reasons(&plain, Some(&failure)),
            ["Warning PodFailed: exit 1"]
        );
        let mut succeeded = status(Some(Phase::Succeeded), true);
        succeeded.summary = Some("9.4 Gbit/s".into());
        assert_eq!(
            reasons(&succeeded, None),
            ["Normal Succeeded: Succeeded: 9.4 Gbit/s"]
        );
        set_condition(
            &mut succeeded.conditions,
            condition(
                acceptance::CONDITION,
                condition_status::FALSE,
                "CriteriaNotMet",
                "throughput 9.4 < 10",
                Some(1),
                now(),
            ),
        );
        assert_eq!(
            reasons(&succeeded, None),
            [
                "Normal Succeeded: Succeeded: 9.4 Gbit/s",
                "Warning NotAccepted: throughput 9.4 < 10"
            ]
        );
    }
}
