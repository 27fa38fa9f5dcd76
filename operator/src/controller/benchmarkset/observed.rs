//! Observe, for the set controller: what a child's object says — its state and its
//! acceptance verdict — from its status. Pure.

use kube::api::DynamicObject;
use perfsweep_benchmarks::api::status::{Phase, condition_status};
use perfsweep_benchmarks::judging::acceptance;
use perfsweep_benchmarks::set::acceptance::ChildAcceptance;
use perfsweep_benchmarks::set::status::ChildState;
use serde_json::Value;

/// A created child's phase (`Pending` before its controller wrote one) and, if it
/// failed, why.
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
}
