//! The set controller's pure steps: what a child's object says (its state, its
//! acceptance verdict) and what the set's status becomes given its children and `now`.
//! No client, no clock: the reconcile passes both in.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;
use kube::api::DynamicObject;
use perfsweep_benchmarks::acceptance;
use perfsweep_benchmarks::fleet;
use perfsweep_benchmarks::set::acceptance::{ChildAcceptance, SetAcceptance};
use perfsweep_benchmarks::set::status::{self as set_status, ChildState, SetPhase};
use perfsweep_benchmarks::set::{self, BenchmarkSet, BenchmarkSetStatus, Expansion};
use perfsweep_benchmarks::status::{Phase, condition, condition_status, set_condition};
use serde_json::Value;

pub fn child_state(object: &DynamicObject) -> ChildState {
    let status = object.data.get("status");
    let phase = status
        .and_then(|s| s.get("phase"))
        .cloned()
        .and_then(|p| serde_json::from_value::<Phase>(p).ok())
        .unwrap_or(Phase::Pending);
    let message = status
        .and_then(|s| s.get("conditions"))
        .and_then(Value::as_array)
        .and_then(|conditions| {
            conditions
                .iter()
                .find(|c| c["type"] == "Failed" && c["status"] == "True")
        })
        .and_then(|c| c.get("message"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    ChildState::Created { phase, message }
}

/// A child's acceptance verdict, from its `Accepted` condition.
pub fn child_acceptance(object: &DynamicObject, state: &ChildState) -> ChildAcceptance {
    match state {
        ChildState::Created {
            phase: Phase::Failed,
            ..
        } => ChildAcceptance::Failed,
        ChildState::Created {
            phase: Phase::Succeeded,
            ..
        } => {
            let accepted = object
                .data
                .get("status")
                .and_then(|s| s.get("conditions"))
                .and_then(Value::as_array)
                .and_then(|conditions| {
                    conditions
                        .iter()
                        .find(|c| c["type"] == acceptance::CONDITION)
                });
            match accepted {
                Some(c) if c["status"] == condition_status::TRUE => ChildAcceptance::Accepted,
                Some(c) if c["status"] == condition_status::FALSE => ChildAcceptance::Rejected {
                    message: c["message"].as_str().unwrap_or("rejected").to_owned(),
                },
                _ => ChildAcceptance::Pending,
            }
        }
        _ => ChildAcceptance::Pending,
    }
}

/// With acceptance criteria on any child: the counts and the set's `Accepted` condition;
/// without: neither.
pub fn apply_acceptance(
    status: &mut BenchmarkSetStatus,
    set: &BenchmarkSet,
    expansion: &Expansion,
    judged: &[ChildAcceptance],
    now: Timestamp,
) {
    let gated = expansion.children.iter().any(|child| {
        child
            .spec
            .get(acceptance::FIELD)
            .and_then(Value::as_array)
            .is_some_and(|criteria| !criteria.is_empty())
    });
    if !gated {
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
    let (value, reason, message) = counts.condition();
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
    }
}

/// The fleet verdict of a node-pair set over the children finished so far: pairs
/// judged against each other on the judged metric (see [`fleet`]); `None` before any.
pub fn fleet_summary(
    set: &BenchmarkSet,
    expansion: &Expansion,
    results: &[(usize, Value)],
    failed: &[usize],
    judged: &[ChildAcceptance],
) -> Option<fleet::FleetSummary> {
    if results.is_empty() && failed.is_empty() {
        return None;
    }
    let criteria =
        acceptance::criteria_of(&Value::Object((*expansion.children.first()?.spec).clone()));
    let metric = fleet::judged_metric(expansion.kind, &criteria)?;
    let pair_of = |index: usize| expansion.children[index].pair.clone();
    let mut pairs: Vec<fleet::PairResult> = results
        .iter()
        .filter_map(|(index, result)| {
            let value =
                perfsweep_benchmarks::metrics::find(&expansion.kind.metrics(result), metric.name)
                    .map(|m| m.value);
            Some(fleet::PairResult {
                nodes: pair_of(*index)?,
                value,
                accepted: match judged.get(*index) {
                    Some(ChildAcceptance::Accepted) => Some(true),
                    Some(ChildAcceptance::Rejected { .. }) => Some(false),
                    _ => None,
                },
                evidence: Some(expansion.children[*index].name.clone()),
            })
        })
        .collect();
    pairs.extend(failed.iter().filter_map(|&index| {
        Some(fleet::PairResult {
            nodes: pair_of(index)?,
            value: None,
            accepted: None,
            evidence: Some(expansion.children[index].name.clone()),
        })
    }));
    let rule = set
        .spec
        .permutations
        .node_pairs
        .as_ref()
        .map(|p| p.outliers)
        .unwrap_or_default();
    Some(fleet::judge(metric.name, metric.unit, metric.better, rule, &pairs).summary())
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
        perfsweep_benchmarks::stats::Stability::default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn child(status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "c", "namespace": "ns"},
            "status": status,
        }))
        .expect("a child object")
    }

    #[test]
    fn a_childs_state_and_verdict_come_from_its_status() {
        let failed_condition = json!([{"type": "Failed", "status": "True", "reason": "PodFailed",
            "message": "exit 1", "lastTransitionTime": "2026-11-25T00:00:00Z"}]);
        let accepted = |value: &str| {
            json!([{"type": acceptance::CONDITION, "status": value, "reason": "r",
                "message": "under 1 Gbit/s", "lastTransitionTime": "2026-11-25T00:00:00Z"}])
        };
        // (status, state, acceptance)
        let table = [
            (
                json!({}),
                ChildState::Created {
                    phase: Phase::Pending,
                    message: None,
                },
                ChildAcceptance::Pending,
            ),
            (
                json!({"phase": "Running"}),
                ChildState::Created {
                    phase: Phase::Running,
                    message: None,
                },
                ChildAcceptance::Pending,
            ),
            (
                json!({"phase": "Failed", "conditions": failed_condition}),
                ChildState::Created {
                    phase: Phase::Failed,
                    message: Some("exit 1".into()),
                },
                ChildAcceptance::Failed,
            ),
            (
                json!({"phase": "Succeeded"}),
                ChildState::Created {
                    phase: Phase::Succeeded,
                    message: None,
                },
                ChildAcceptance::Pending,
            ),
            (
                json!({"phase": "Succeeded", "conditions": accepted("True")}),
                ChildState::Created {
                    phase: Phase::Succeeded,
                    message: None,
                },
                ChildAcceptance::Accepted,
            ),
            (
                json!({"phase": "Succeeded", "conditions": accepted("False")}),
                ChildState::Created {
                    phase: Phase::Succeeded,
                    message: None,
                },
                ChildAcceptance::Rejected {
                    message: "under 1 Gbit/s".into(),
                },
            ),
        ];
        for (status, state, verdict) in table {
            let object = child(status.clone());
            assert_eq!(child_state(&object), state, "{status}");
            assert_eq!(child_acceptance(&object, &state), verdict, "{status}");
        }
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
}
