//! Decide, for the set controller: given the set, its expansion, its children as the
//! cache has them and `now`, which children to delete and to create and what the set's
//! status becomes, and the events that tell it. Pure: no client, no clock — the
//! reconcile passes both in and applies the [`SetDecision`].

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::DynamicObject;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use perfsweep_benchmarks::api::status::{Phase, condition, condition_status, set_condition};
use perfsweep_benchmarks::judging::acceptance;
use perfsweep_benchmarks::set::acceptance::{ChildAcceptance, SetAcceptance};
use perfsweep_benchmarks::set::status::{self as set_status, ChildState, SetPhase};
use perfsweep_benchmarks::set::{self, BenchmarkSet, BenchmarkSetStatus, Expansion};
use serde_json::Value;

use super::observed::{child_acceptance, child_state};
use crate::controller::served;

/// What a reconcile of a valid set does.
#[derive(Debug, PartialEq)]
pub struct SetDecision {
    /// Children of an earlier version of the spec, by name (sorted): to delete.
    pub obsolete: Vec<String>,
    /// Indices into the expansion of the children to create now, in creation order.
    pub to_create: Vec<usize>,
    /// The set's status once they are created.
    pub status: BenchmarkSetStatus,
}

/// The decision for a valid set whose children the cache shows as `existing`, with the
/// nodes a node-pair or each-node set selected.
pub fn decide(
    set: &BenchmarkSet,
    expansion: &Expansion,
    existing: &[&DynamicObject],
    nodes: Option<&set::NodeLabels>,
    now: Timestamp,
) -> SetDecision {
    let mut by_name: HashMap<String, &DynamicObject> = existing
        .iter()
        .map(|child| (child.name_any(), *child))
        .collect();
    // Succeeded children's results by child index, for the results summary.
    let mut results: Vec<(usize, Value)> = Vec::new();
    // Failed children by index, for the fleet verdict.
    let mut failed: Vec<usize> = Vec::new();
    // Each child's acceptance verdict, in creation order.
    let mut judged: Vec<ChildAcceptance> = Vec::with_capacity(expansion.children.len());
    let mut states: Vec<ChildState> = Vec::with_capacity(expansion.children.len());
    for (index, child) in expansion.children.iter().enumerate() {
        let Some(object) = by_name.remove(&child.name) else {
            judged.push(ChildAcceptance::Pending);
            states.push(ChildState::NotCreated);
            continue;
        };
        let state = child_state(object);
        judged.push(child_acceptance(object, &state));
        if let ChildState::Created { phase, .. } = &state {
            match phase {
                Phase::Succeeded => {
                    if let Some(result) = object.data.get("status").and_then(|s| s.get("result")) {
                        results.push((index, result.clone()));
                    }
                }
                Phase::Failed => failed.push(index),
                _ => {}
            }
        }
        states.push(state);
    }
    // What is left in `by_name` belongs to an earlier version of the spec.
    let mut obsolete: Vec<String> = by_name.into_keys().collect();
    obsolete.sort_unstable();

    // A node-pair or each-node set runs round by round: all pairs (or nodes) of a round
    // together (they share no node), the next round once this one has ended.
    let rounds: Vec<u32> = expansion
        .children
        .iter()
        .filter_map(|child| child.round)
        .collect();
    let to_create = if expansion.rounds > 0 && rounds.len() == states.len() {
        let per_round = set.spec.permutations.per_round_limit();
        set_status::next_to_create_in_rounds(&states, &rounds, per_round, set.spec.failure_policy)
    } else {
        set_status::next_to_create(&states, set.spec.max_parallel, set.spec.failure_policy)
    };
    for &index in &to_create {
        states[index] = ChildState::Created {
            phase: Phase::Pending,
            message: None,
        };
    }

    let old = set.status.clone().unwrap_or_default();
    let mut status = progress_status(set, expansion, &states, &old, now);
    status.summary = results_summary(expansion, &results);
    status.nodes = nodes
        .map(|n| n.keys().cloned().collect())
        .unwrap_or_default();
    // Only the nodes with labels a reference selects by: bounded by what the set uses.
    status.node_labels = nodes
        .into_iter()
        .flatten()
        .filter(|(_, labels)| !labels.is_empty())
        .map(|(node, labels)| (node.clone(), labels.clone()))
        .collect();
    if expansion.rounds > 0 {
        status.rounds = Some(set_status::RoundProgress {
            total: expansion.rounds,
            current: set_status::current_round(&states, &rounds).unwrap_or(expansion.rounds),
        });
        let rule = set::fleet::outlier_rule(&set.spec);
        if set.spec.permutations.each_node.is_some() {
            status.per_node = set::nodes::summary(rule, expansion, &results, &failed, &judged);
        } else {
            status.fleet = set::fleet::summary(rule, expansion, &results, &failed, &judged);
        }
    }
    // After the fleet verdict: a fleet with outliers, or rejected nodes, is not accepted.
    // Children of a node-pair or each-node set without criteria are judged by the fleet
    // alone.
    let fleet_judged = status.fleet.is_some() || status.per_node.is_some();
    let judged = if fleet_judged && !set::acceptance::has_criteria(expansion) {
        set::acceptance::judged_by_fleet(&states)
    } else {
        judged
    };
    apply_acceptance(&mut status, set, expansion, &judged, now);
    SetDecision {
        obsolete,
        to_create,
        status,
    }
}

/// The status of a valid set whose kind the API server does not serve (see
/// [`served`]): what it was, Pending if it had no phase yet, with a false
/// [`served::CRD_CONDITION`] saying which CRD is missing.
pub fn crd_missing_status(
    set: &BenchmarkSet,
    kind: &perfsweep_benchmarks::kinds::registry::KindInfo,
    now: Timestamp,
) -> BenchmarkSetStatus {
    let mut status = set.status.clone().unwrap_or_default();
    status.phase = status.phase.or(Some(SetPhase::Pending));
    status.observed_generation = set.meta().generation;
    set_condition(
        &mut status.conditions,
        condition(
            served::CRD_CONDITION,
            condition_status::FALSE,
            served::CRD_MISSING,
            served::missing_message(kind),
            set.meta().generation,
            now,
        ),
    );
    status
}

/// Marks a set whose kind's installed CRD is not this operator's (see [`served`]): its
/// children still run, and [`served::CRD_CONDITION`] says why some of their fields may
/// be dropped. Returns whether the condition is new since `previous` (for the Warning
/// event). Once the CRD is current, [`decide`] turns the condition back to `Served`.
pub fn mark_crd_outdated(
    status: &mut BenchmarkSetStatus,
    previous: Option<&BenchmarkSetStatus>,
    kind: &perfsweep_benchmarks::kinds::registry::KindInfo,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let was = previous.is_some_and(|previous| {
        previous
            .conditions
            .iter()
            .any(|c| c.type_ == served::CRD_CONDITION && c.reason == served::CRD_OUTDATED)
    });
    set_condition(
        &mut status.conditions,
        condition(
            served::CRD_CONDITION,
            condition_status::TRUE,
            served::CRD_OUTDATED,
            served::outdated_message(kind),
            generation,
            now,
        ),
    );
    !was
}

/// The note of the `Pruned` event, when children were deleted after a spec change.
pub fn pruned_note(deleted: usize) -> Option<String> {
    (deleted > 0).then(|| {
        format!("Deleted {deleted} children that no longer belong to the sweep after a spec change")
    })
}

/// The note of the `Created` event, when children were created.
pub fn created_note(expansion: &Expansion, created: &[usize]) -> Option<String> {
    let first = &expansion.children[*created.first()?].name;
    Some(if created.len() == 1 {
        format!("Created {first}")
    } else {
        format!("Created {} children, from {first}", created.len())
    })
}

/// The event that announces the set's phase `status` has (when it changed to it).
pub fn phase_event(status: &BenchmarkSetStatus) -> Option<(EventType, &'static str, String)> {
    match status.phase? {
        SetPhase::Succeeded => Some((
            EventType::Normal,
            "Succeeded",
            format!("All {} children succeeded", status.total),
        )),
        SetPhase::Failed => Some((
            EventType::Warning,
            "Failed",
            format!(
                "{} of {} children failed, {} succeeded",
                status.failed, status.total, status.succeeded
            ),
        )),
        SetPhase::Running => Some((
            EventType::Normal,
            "Started",
            format!("Running {} children", status.total),
        )),
        _ => None,
    }
}

/// With acceptance criteria on any child, or a fleet verdict (a node-pair or each-node
/// set): the counts
/// and the set's `Accepted` condition; without: neither.
pub fn apply_acceptance(
    status: &mut BenchmarkSetStatus,
    set: &BenchmarkSet,
    expansion: &Expansion,
    judged: &[ChildAcceptance],
    now: Timestamp,
) {
    let gated = set::acceptance::has_criteria(expansion);
    if !gated && status.fleet.is_none() && status.per_node.is_none() {
        status.acceptance = None;
        status
            .conditions
            .retain(|c| c.type_ != acceptance::CONDITION);
        return;
    }
    let counts = SetAcceptance::of(
        expansion
            .children
            .iter()
            .map(|c| c.name.as_str())
            .zip(judged),
    );
    let (value, reason, message) =
        counts.judged_condition(status.fleet.as_ref(), status.per_node.as_ref());
    set_condition(
        &mut status.conditions,
        condition(
            acceptance::CONDITION,
            value,
            reason,
            message,
            set.meta().generation,
            now,
        ),
    );
    status.acceptance = Some(counts);
}

pub fn progress_status(
    set: &BenchmarkSet,
    expansion: &Expansion,
    states: &[ChildState],
    old: &BenchmarkSetStatus,
    now: Timestamp,
) -> BenchmarkSetStatus {
    let generation = set.meta().generation;
    let summary = set_status::summarize(
        expansion
            .children
            .iter()
            .map(|c| c.name.as_str())
            .zip(states),
    );
    let phase = set_status::phase(states, set.spec.failure_policy);
    let finished = matches!(phase, SetPhase::Succeeded | SetPhase::Failed);
    let mut conditions = old.conditions.clone();
    let valid_message = match &expansion.converted_from {
        Some(original) => format!(
            "{} children; template apiVersion {original} was converted to {}",
            expansion.children.len(),
            perfsweep_benchmarks::API_VERSION
        ),
        None => format!("{} children", expansion.children.len()),
    };
    set_condition(
        &mut conditions,
        condition(
            "Valid",
            condition_status::TRUE,
            "Expanded",
            valid_message,
            generation,
            now,
        ),
    );
    if conditions.iter().any(|c| c.type_ == served::CRD_CONDITION) {
        // The set waited for its kind's CRD, which is served now.
        set_condition(
            &mut conditions,
            condition(
                served::CRD_CONDITION,
                condition_status::TRUE,
                "Served",
                format!("the API server serves {}", served::crd_name(expansion.kind)),
                generation,
                now,
            ),
        );
    }
    let done = summary.succeeded + summary.failed;
    set_condition(
        &mut conditions,
        condition(
            "Progressing",
            if finished {
                condition_status::FALSE
            } else {
                condition_status::TRUE
            },
            if finished { "Finished" } else { "Running" },
            format!("{done} of {} children finished", states.len()),
            generation,
            now,
        ),
    );
    set_condition(
        &mut conditions,
        condition(
            "Complete",
            if finished {
                condition_status::TRUE
            } else {
                condition_status::FALSE
            },
            match phase {
                SetPhase::Succeeded => "AllSucceeded",
                SetPhase::Failed => "ChildrenFailed",
                _ => "InProgress",
            },
            format!("{} succeeded, {} failed", summary.succeeded, summary.failed),
            generation,
            now,
        ),
    );
    let started = states.iter().any(|s| *s != ChildState::NotCreated);
    BenchmarkSetStatus {
        phase: Some(phase),
        observed_generation: generation,
        permutation_count: u32::try_from(expansion.permutation_count).ok(),
        total: states.len() as u32,
        pending: summary.pending,
        running: summary.running,
        succeeded: summary.succeeded,
        failed: summary.failed,
        conditions,
        children: Some(summary.children),
        failures: summary.failures,
        started_at: old
            .started_at
            .clone()
            .or_else(|| started.then_some(Time(now))),
        finished_at: if finished {
            old.finished_at.clone().or(Some(Time(now)))
        } else {
            None
        },
        summary: old.summary.clone(),
        acceptance: old.acceptance.clone(),
        nodes: Vec::new(),
        rounds: None,
        fleet: None,
        node_labels: set::NodeLabels::new(),
        per_node: None,
    }
}

/// Per-case statistics of the headline metric over the succeeded children's results;
/// `None` before the first result.
pub fn results_summary(
    expansion: &Expansion,
    results: &[(usize, Value)],
) -> Option<set::summary::ResultsSummary> {
    if results.is_empty() {
        return None;
    }
    Some(set::summary::summarize(
        expansion.kind,
        results
            .iter()
            .map(|(index, result)| (expansion.children[*index].case_id.as_str(), result)),
        perfsweep_benchmarks::judging::stats::Stability::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(name: &str, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": name, "namespace": "ns"},
            "status": status,
        }))
        .expect("a child object")
    }

    fn sweep(streams: &[u32]) -> (BenchmarkSet, Expansion) {
        let set: BenchmarkSet = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
            "metadata": {"name": "s", "namespace": "ns", "generation": 2},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
                "permutations": {"product": {"streams": streams}},
                "maxParallel": 1,
            },
        }))
        .expect("a set");
        let expansion = set::expand("s", &set.spec).expect("the set expands");
        (set, expansion)
    }

    fn created(phase: Phase) -> ChildState {
        ChildState::Created {
            phase,
            message: None,
        }
    }

    #[test]
    fn the_status_follows_the_children_at_the_time_given() {
        let (set, expansion) = sweep(&[1, 2]);
        let now: Timestamp = "2026-11-25T12:00:00Z".parse().expect("a time");
        let earlier: Timestamp = "2026-11-25T11:00:00Z".parse().expect("a time");
        let started = BenchmarkSetStatus {
            started_at: Some(Time(earlier)),
            ..Default::default()
        };
        // (children, old status, phase, startedAt, finishedAt)
        let table = [
            (
                vec![ChildState::NotCreated, ChildState::NotCreated],
                BenchmarkSetStatus::default(),
                SetPhase::Pending,
                None,
                None,
            ),
            (
                vec![created(Phase::Running), ChildState::NotCreated],
                BenchmarkSetStatus::default(),
                SetPhase::Running,
                Some(now),
                None,
            ),
            (
                vec![created(Phase::Succeeded), created(Phase::Running)],
                started.clone(),
                SetPhase::Running,
                Some(earlier),
                None,
            ),
            (
                vec![created(Phase::Succeeded), created(Phase::Succeeded)],
                started.clone(),
                SetPhase::Succeeded,
                Some(earlier),
                Some(now),
            ),
            (
                vec![created(Phase::Succeeded), created(Phase::Failed)],
                started,
                SetPhase::Failed,
                Some(earlier),
                Some(now),
            ),
        ];
        for (states, old, phase, started_at, finished_at) in table {
            let status = progress_status(&set, &expansion, &states, &old, now);
            assert_eq!(status.phase, Some(phase), "{states:?}");
            assert_eq!(status.started_at.map(|t| t.0), started_at, "{states:?}");
            assert_eq!(status.finished_at.map(|t| t.0), finished_at, "{states:?}");
            assert_eq!(status.total, 2);
            assert_eq!(status.observed_generation, Some(2));
            let valid = status
                .conditions
                .iter()
                .find(|c| c.type_ == "Valid")
                .expect("Valid");
            assert_eq!(
                valid.last_transition_time.0, now,
                "conditions are stamped with now"
            );
        }
    }

    #[test]
    fn acceptance_is_counted_only_for_gated_sets() {
        let (set, expansion) = sweep(&[1, 2]);
        let now = Timestamp::UNIX_EPOCH;
        let mut status = BenchmarkSetStatus::default();
        apply_acceptance(
            &mut status,
            &set,
            &expansion,
            &[ChildAcceptance::Accepted, ChildAcceptance::Pending],
            now,
        );
        assert_eq!(status.acceptance, None, "no criteria, no counts");
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.type_ != acceptance::CONDITION)
        );
    }

    #[test]
    fn no_results_no_summary() {
        let (_, expansion) = sweep(&[1]);
        assert!(results_summary(&expansion, &[]).is_none());
    }

    /// A three-child sweep (streams 1, 2, 3) with `maxParallel` and `failurePolicy`.
    fn three(max_parallel: u32, failure_policy: &str) -> (BenchmarkSet, Expansion) {
        let set: BenchmarkSet = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
            "metadata": {"name": "s", "namespace": "ns", "generation": 1},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
                "permutations": {"product": {"streams": [1, 2, 3]}},
                "maxParallel": max_parallel,
                "failurePolicy": failure_policy,
            },
        }))
        .expect("a set");
        let expansion = set::expand("s", &set.spec).expect("the set expands");
        (set, expansion)
    }

    /// One reconcile of a three-child set: its spec, what the cache shows, and what the
    /// decision must be.
    struct Row {
        max_parallel: u32,
        failure_policy: &'static str,
        /// Each child's phase, `None` where it was not created.
        phases: [Option<&'static str>; 3],
        /// Children of an earlier spec.
        extra: &'static [&'static str],
        to_create: &'static [usize],
        obsolete: &'static [&'static str],
        children: &'static str,
        phase: SetPhase,
    }

    #[test]
    fn what_a_set_creates_deletes_and_reports_follows_its_children() {
        let now: Timestamp = "2026-11-25T12:00:00Z".parse().expect("a time");
        let table = [
            // A new set: as many as maxParallel allows, in order; it runs from then on.
            Row {
                max_parallel: 2,
                failure_policy: "Continue",
                phases: [None, None, None],
                extra: &[],
                to_create: &[0, 1],
                obsolete: &[],
                children: "PP-",
                phase: SetPhase::Running,
            },
            // One finished: the next one starts.
            Row {
                max_parallel: 2,
                failure_policy: "Continue",
                phases: [Some("Succeeded"), Some("Running"), None],
                extra: &[],
                to_create: &[2],
                obsolete: &[],
                children: "SRP",
                phase: SetPhase::Running,
            },
            // A failure with Continue goes on ...
            Row {
                max_parallel: 1,
                failure_policy: "Continue",
                phases: [Some("Failed"), None, None],
                extra: &[],
                to_create: &[1],
                obsolete: &[],
                children: "FP-",
                phase: SetPhase::Running,
            },
            // ... with Stop it creates nothing more, and the set has failed.
            Row {
                max_parallel: 1,
                failure_policy: "Stop",
                phases: [Some("Failed"), None, None],
                extra: &[],
                to_create: &[],
                obsolete: &[],
                children: "F--",
                phase: SetPhase::Failed,
            },
            // A child no longer in the expansion (a spec edit) is deleted.
            Row {
                max_parallel: 3,
                failure_policy: "Continue",
                phases: [Some("Running"), Some("Running"), Some("Running")],
                extra: &["s-old"],
                to_create: &[],
                obsolete: &["s-old"],
                children: "RRR",
                phase: SetPhase::Running,
            },
            // All done.
            Row {
                max_parallel: 3,
                failure_policy: "Continue",
                phases: [Some("Succeeded"), Some("Succeeded"), Some("Succeeded")],
                extra: &[],
                to_create: &[],
                obsolete: &[],
                children: "SSS",
                phase: SetPhase::Succeeded,
            },
        ];
        for row in table {
            let (set, expansion) = three(row.max_parallel, row.failure_policy);
            let mut objects: Vec<DynamicObject> = row
                .phases
                .iter()
                .zip(&expansion.children)
                .filter_map(|(phase, c)| phase.map(|p| child(&c.name, json!({"phase": p}))))
                .collect();
            objects.extend(
                row.extra
                    .iter()
                    .map(|name| child(name, json!({"phase": "Running"}))),
            );
            let existing: Vec<&DynamicObject> = objects.iter().collect();
            let decision = decide(&set, &expansion, &existing, None, now);
            let what = format!(
                "maxParallel {} {} {:?} {:?}",
                row.max_parallel, row.failure_policy, row.phases, row.extra
            );
            assert_eq!(decision.to_create, row.to_create, "{what}");
            assert_eq!(decision.obsolete, row.obsolete, "{what}");
            assert_eq!(
                decision.status.children.as_deref(),
                Some(row.children),
                "{what}"
            );
            assert_eq!(decision.status.phase, Some(row.phase), "{what}");
            assert_eq!(decision.status.total, 3, "{what}");
        }
    }

    #[test]
    fn events_name_what_changed() {
        let (_, expansion) = three(3, "Continue");
        assert_eq!(pruned_note(0), None);
        assert!(pruned_note(2).is_some_and(|n| n.starts_with("Deleted 2 children")));
        assert_eq!(created_note(&expansion, &[]), None);
        let first = &expansion.children[1].name;
        assert_eq!(
            created_note(&expansion, &[1]).as_deref(),
            Some(format!("Created {first}").as_str())
        );
        assert_eq!(
            created_note(&expansion, &[1, 2]).as_deref(),
            Some(format!("Created 2 children, from {first}").as_str())
        );
        let status = |phase| BenchmarkSetStatus {
            phase: Some(phase),
            total: 3,
            failed: 1,
            succeeded: 2,
            ..Default::default()
        };
        let reason = |phase| phase_event(&status(phase)).map(|(_, reason, note)| (reason, note));
        assert_eq!(reason(SetPhase::Pending), None);
        assert_eq!(
            reason(SetPhase::Running),
            Some(("Started", "Running 3 children".to_owned()))
        );
        assert_eq!(
            reason(SetPhase::Failed),
            Some(("Failed", "1 of 3 children failed, 2 succeeded".to_owned()))
        );
        assert_eq!(
            reason(SetPhase::Succeeded),
            Some(("Succeeded", "All 3 children succeeded".to_owned()))
        );
    }
}
