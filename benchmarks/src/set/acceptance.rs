//! A set's acceptance: the verdicts of its children counted into the set's own
//! `Accepted` condition. The criteria themselves are [`crate::judging::acceptance`]'s.

use serde::{Deserialize, Serialize};

use crate::api::status::Phase;
use crate::judging::acceptance::{
    CHILDREN_FAILED, CRITERIA_MET, CRITERIA_NOT_MET, FLEET_OUTLIERS, IN_PROGRESS, NODES_REJECTED,
};
use crate::judging::fleet::FleetSummary;
use crate::judging::nodes::NodesSummary;
use crate::set::child::ChildState;
use crate::set::expand::Expansion;

/// A failed child.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildFailure {
    pub name: String,
    pub message: String,
}

/// A set's acceptance: counts over its children and the overall verdict.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetAcceptance {
    /// Succeeded children whose results met every criterion.
    pub accepted: u32,
    /// Succeeded children whose results missed a criterion.
    pub rejected: u32,
    /// Failed children: no result, so not accepted.
    pub failed: u32,
    /// Children not judged yet (not finished).
    pub pending: u32,
    /// The first rejected children and why (the count is exact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejections: Vec<ChildFailure>,
}

/// What a set knows of one child's acceptance.
#[derive(Clone, Debug, PartialEq)]
pub enum ChildAcceptance {
    /// Not finished, or finished without a verdict yet.
    Pending,
    Accepted,
    Rejected {
        message: String,
    },
    /// Failed: no result to judge.
    Failed,
}

/// Whether any child of the set carries acceptance criteria (the set's or the template's).
pub fn has_criteria(expansion: &Expansion) -> bool {
    expansion.children.iter().any(|child| {
        child
            .spec
            .get(crate::judging::acceptance::FIELD)
            .and_then(serde_json::Value::as_array)
            .is_some_and(|criteria| !criteria.is_empty())
    })
}

/// The children of a node-pair or each-node set without criteria of their own, judged
/// by the fleet verdict alone: a succeeded child is accepted (nothing of its own rejects it), a failed
/// one failed, the rest pending.
pub fn judged_by_fleet(states: &[ChildState]) -> Vec<ChildAcceptance> {
    states
        .iter()
        .map(|state| match state {
            ChildState::Created {
                phase: Phase::Succeeded,
                ..
            } => ChildAcceptance::Accepted,
            ChildState::Created {
                phase: Phase::Failed,
                ..
            } => ChildAcceptance::Failed,
            _ => ChildAcceptance::Pending,
        })
        .collect()
}

/// Rejections listed in a set's status before the list is cut.
pub const REJECTIONS_LISTED: usize = 10;

impl SetAcceptance {
    pub fn of<'a>(children: impl IntoIterator<Item = (&'a str, &'a ChildAcceptance)>) -> Self {
        let mut out = Self::default();
        for (name, child) in children {
            match child {
                ChildAcceptance::Pending => out.pending += 1,
                ChildAcceptance::Accepted => out.accepted += 1,
                ChildAcceptance::Failed => out.failed += 1,
                ChildAcceptance::Rejected { message } => {
                    out.rejected += 1;
                    if out.rejections.len() < REJECTIONS_LISTED {
                        out.rejections.push(ChildFailure {
                            name: name.to_owned(),
                            message: message.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// [`Self::judged_condition`] of a set without a per-node verdict.
    pub fn condition(&self, fleet: Option<&FleetSummary>) -> (&'static str, &'static str, String) {
        self.judged_condition(fleet, None)
    }

    /// The set's `Accepted` condition: `(status, reason, message)`. False as soon as one
    /// child is rejected or failed, or once every child is in and the `fleet` verdict of a
    /// node-pair set names outliers or the `nodes` verdict of an each-node set rejects
    /// nodes (the message names them and why); True when every child was accepted and
    /// the fleet passed; Unknown before. The one acceptance outcome: the set's condition,
    /// `run`'s summary and exit code, and the report all read it.
    pub fn judged_condition(
        &self,
        fleet: Option<&FleetSummary>,
        nodes: Option<&NodesSummary>,
    ) -> (&'static str, &'static str, String) {
        use crate::api::status::condition_status::{FALSE, TRUE, UNKNOWN};
        let total = self.accepted + self.rejected + self.failed + self.pending;
        let counts = format!(
            "{} accepted, {} rejected, {} failed, {} pending of {total}",
            self.accepted, self.rejected, self.failed, self.pending
        );
        if self.rejected > 0 {
            let first = self
                .rejections
                .first()
                .map(|r| format!("; first: {}: {}", r.name, r.message))
                .unwrap_or_default();
            (FALSE, CRITERIA_NOT_MET, format!("{counts}{first}"))
        } else if self.failed > 0 {
            // An each-node set's failed children are nodes: name them.
            let named = nodes
                .filter(|nodes| !nodes.passed())
                .map(|nodes| format!("; {}", nodes.headline()))
                .unwrap_or_default();
            (FALSE, CHILDREN_FAILED, format!("{counts}{named}"))
        } else if self.pending > 0 {
            (UNKNOWN, IN_PROGRESS, counts)
        } else if let Some(fleet) = fleet.filter(|fleet| !fleet.passed()) {
            (
                FALSE,
                FLEET_OUTLIERS,
                format!("{counts}; {}", fleet.headline()),
            )
        } else if let Some(nodes) = nodes.filter(|nodes| !nodes.passed()) {
            (
                FALSE,
                NODES_REJECTED,
                format!("{counts}; {}", nodes.headline()),
            )
        } else {
            (TRUE, CRITERIA_MET, counts)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::acceptance::criteria_of;
    use serde_json::{Value, json};

    #[test]
    fn set_criteria_reach_every_child_without_renaming_it() {
        let set = |acceptance: Value| -> crate::set::BenchmarkSetSpec {
            serde_json::from_value(json!({
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                             "spec": {"duration": 5, "acceptance": [{"metric": "retransmits", "max": 10}]}},
                "permutations": {"product": {"streams": [1, 2]}},
                "acceptance": acceptance,
            }))
            .unwrap()
        };
        let plain = crate::set::expand("s", &set(json!([]))).unwrap();
        let gated = crate::set::expand(
            "s",
            &set(json!([{"metric": "received_bits_per_second", "min": 1e9}])),
        )
        .unwrap();
        assert_eq!(plain.children[0].name, gated.children[0].name);
        let criteria = criteria_of(&Value::Object((*gated.children[1].spec).clone()));
        let metrics: Vec<&str> = criteria.iter().map(|c| c.metric.as_str()).collect();
        assert_eq!(metrics, ["retransmits", "received_bits_per_second"]);
        let error =
            crate::set::expand("s", &set(json!([{"metric": "iops", "min": 1}]))).unwrap_err();
        assert_eq!(error.field_path(), "spec.acceptance[0].metric");
    }

    #[test]
    fn set_verdict() {
        let rejected = ChildAcceptance::Rejected {
            message: "too slow".into(),
        };
        let verdict = |children: &[ChildAcceptance]| {
            let names: Vec<String> = (0..children.len()).map(|i| format!("c{i}")).collect();
            SetAcceptance::of(names.iter().map(String::as_str).zip(children))
        };
        let all = verdict(&[ChildAcceptance::Accepted, ChildAcceptance::Accepted]);
        assert_eq!(all.condition(None).0, "True");
        let running = verdict(&[ChildAcceptance::Accepted, ChildAcceptance::Pending]);
        assert_eq!(running.condition(None).1, IN_PROGRESS);
        let failed = verdict(&[ChildAcceptance::Accepted, ChildAcceptance::Failed]);
        assert_eq!(failed.condition(None).1, CHILDREN_FAILED);
        let rejected = verdict(&[ChildAcceptance::Pending, rejected]);
        assert_eq!(
            (rejected.accepted, rejected.rejected, rejected.pending),
            (0, 1, 1)
        );
        let (status, reason, message) = rejected.condition(None);
        assert_eq!((status, reason), ("False", CRITERIA_NOT_MET));
        assert!(message.ends_with("first: c1: too slow"), "{message}");
    }

    #[test]
    fn a_fleet_with_outliers_is_not_accepted_once_every_child_is_in() {
        use crate::judging::fleet::{OutlierRule, PairResult, judge};
        use crate::judging::metrics::Better;
        let pair = |a: &str, b: &str, value: f64| PairResult {
            nodes: [a.to_owned(), b.to_owned()],
            value: Some(value),
            accepted: Some(true),
            evidence: None,
        };
        // b↔d at a third of the others' bandwidth: an outlier link.
        let pairs = [
            pair("a", "b", 9.0e9),
            pair("a", "c", 9.1e9),
            pair("a", "d", 8.9e9),
            pair("b", "c", 9.0e9),
            pair("b", "d", 3.0e9),
            pair("c", "d", 9.2e9),
        ];
        let failing = judge(
            "bps",
            "bit/s",
            Better::Higher,
            OutlierRule::default(),
            &pairs,
        )
        .summary();
        assert!(!failing.passed(), "{failing:?}");
        let passing = judge(
            "bps",
            "bit/s",
            Better::Higher,
            OutlierRule::default(),
            &pairs[..4],
        )
        .summary();
        assert!(passing.passed(), "{passing:?}");

        let children = |list: &[ChildAcceptance]| {
            let names: Vec<String> = (0..list.len()).map(|i| format!("c{i}")).collect();
            SetAcceptance::of(names.iter().map(String::as_str).zip(list))
        };
        let all_accepted = children(&[ChildAcceptance::Accepted, ChildAcceptance::Accepted]);
        let (status, reason, message) = all_accepted.condition(Some(&failing));
        assert_eq!((status, reason), ("False", FLEET_OUTLIERS));
        assert!(
            message.contains("b↔d"),
            "the message names the suspect link: {message}"
        );
        assert_eq!(all_accepted.condition(Some(&passing)).1, CRITERIA_MET);
        // Before every child is in, the fleet's verdict is partial: still in progress.
        let running = children(&[ChildAcceptance::Accepted, ChildAcceptance::Pending]);
        assert_eq!(running.condition(Some(&failing)).1, IN_PROGRESS);
    }
}
