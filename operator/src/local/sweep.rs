//! A BenchmarkSet's own decisions in a local run, made by the functions the BenchmarkSet
//! controller makes them with: whether the next child may start (`failurePolicy`), the
//! set's phase, and its `Accepted` condition over the children's verdicts.

use perfsweep_benchmarks::api::status::Phase;
use perfsweep_benchmarks::judging::fleet::{FleetSummary, OutlierRule};
use perfsweep_benchmarks::judging::nodes::NodesSummary;
use perfsweep_benchmarks::set::acceptance::{
    ChildAcceptance, SetAcceptance, has_criteria, judged_by_fleet,
};
use perfsweep_benchmarks::set::status::{self as set_status, ChildState, SetPhase};
use perfsweep_benchmarks::set::{FailurePolicy, expand::Expansion};

use super::LocalOutcome;

/// One set of a local run, as its children finish one at a time.
#[derive(Debug)]
pub struct SetRun {
    pub name: String,
    policy: FailurePolicy,
    children: Vec<String>,
    states: Vec<ChildState>,
    judged: Vec<ChildAcceptance>,
    /// Any child has acceptance criteria (the set's or the template's).
    gated: bool,
    /// What the fleet verdict of a node-pair set is judged from, as the controller judges
    /// it: the expansion, the set's outlier rule, and the children's results so far.
    expansion: Expansion,
    outlier_rule: OutlierRule,
    results: Vec<(usize, serde_json::Value)>,
    failed: Vec<usize>,
}

impl SetRun {
    pub fn new(
        name: &str,
        policy: FailurePolicy,
        outlier_rule: OutlierRule,
        expansion: Expansion,
    ) -> Self {
        let count = expansion.children.len();
        Self {
            name: name.to_owned(),
            policy,
            children: expansion.children.iter().map(|c| c.name.clone()).collect(),
            states: vec![ChildState::NotCreated; count],
            judged: vec![ChildAcceptance::Pending; count],
            gated: has_criteria(&expansion),
            expansion,
            outlier_rule,
            results: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// Whether child `index` may start now, one child at a time: what the controller
    /// would create next with `maxParallel: 1`. Nothing after a failure under
    /// `failurePolicy: Stop`.
    pub fn may_start(&self, index: usize) -> bool {
        set_status::next_to_create(&self.states, 1, self.policy).contains(&index)
    }

    /// Child `index` ended with `outcome`.
    pub fn finished(&mut self, index: usize, outcome: &LocalOutcome) {
        let (state, judged) = match outcome {
            LocalOutcome::Succeeded { acceptance, .. } => (
                ChildState::Created {
                    phase: Phase::Succeeded,
                    message: None,
                },
                match acceptance {
                    Some(verdict) if verdict.accepted => ChildAcceptance::Accepted,
                    Some(verdict) => ChildAcceptance::Rejected {
                        message: verdict.message(),
                    },
                    None => ChildAcceptance::Pending,
                },
            ),
            LocalOutcome::Failed(failure) => (
                ChildState::Created {
                    phase: Phase::Failed,
                    message: Some(failure.message.clone()),
                },
                ChildAcceptance::Failed,
            ),
        };
        if let (Some(slot), Some(verdict)) =
            (self.states.get_mut(index), self.judged.get_mut(index))
        {
            *slot = state;
            *verdict = judged;
        }
        match outcome.result() {
            Some(result) => self.results.push((index, result.clone())),
            None => self.failed.push(index),
        }
    }

    /// Whether the set sweeps single nodes (`permutations.eachNode`).
    fn each_node(&self) -> bool {
        self.expansion.children.iter().any(|c| c.node.is_some())
    }

    /// The fleet verdict of a node-pair set over its children so far (`None` for other
    /// sets), by the function the controller writes `status.fleet` with.
    pub fn fleet(&self) -> Option<FleetSummary> {
        if self.expansion.rounds == 0 || self.each_node() {
            return None;
        }
        perfsweep_benchmarks::set::fleet::summary(
            self.outlier_rule,
            &self.expansion,
            &self.results,
            &self.failed,
            &self.judged,
        )
    }

    /// The per-node verdict of an each-node set over its children so far (`None` for
    /// other sets), by the function the controller writes `status.perNode` with.
    pub fn nodes(&self) -> Option<NodesSummary> {
        if !self.each_node() {
            return None;
        }
        perfsweep_benchmarks::set::nodes::summary(
            self.outlier_rule,
            &self.expansion,
            &self.results,
            &self.failed,
            &self.judged,
        )
    }

    /// The set's phase, as the controller reports it.
    pub fn phase(&self) -> SetPhase {
        set_status::phase(&self.states, self.policy)
    }

    /// Children that never started: the set stopped on a failure.
    pub fn not_started(&self) -> usize {
        self.states
            .iter()
            .filter(|s| **s == ChildState::NotCreated)
            .count()
    }

    /// The set's `Accepted` condition `(status, reason, message)`, when it has criteria
    /// or a fleet verdict: what the controller would write, fleet included.
    pub fn acceptance(&self) -> Option<(&'static str, &'static str, String)> {
        let fleet = self.fleet();
        let nodes = self.nodes();
        let judged = match (fleet.is_some() || nodes.is_some(), self.gated) {
            (_, true) => self.judged.clone(),
            (true, false) => judged_by_fleet(&self.states),
            (false, false) => return None,
        };
        Some(
            SetAcceptance::of(self.children.iter().map(String::as_str).zip(&judged))
                .judged_condition(fleet.as_ref(), nodes.as_ref()),
        )
    }

    /// What the run's summary says of the set.
    pub fn lines(&self) -> Vec<String> {
        let summary =
            set_status::summarize(self.children.iter().map(String::as_str).zip(&self.states));
        let stopped = match self.not_started() {
            0 => String::new(),
            n => format!(", {n} not started (failurePolicy: Stop)"),
        };
        let mut lines = vec![format!(
            "set {}: {:?}: {} succeeded, {} failed{stopped}",
            self.name,
            self.phase(),
            summary.succeeded,
            summary.failed
        )];
        if let Some((status, reason, message)) = self.acceptance() {
            lines.push(format!(
                "set {}: Accepted={status} ({reason}): {message}",
                self.name
            ));
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::judging::acceptance;
    use perfsweep_benchmarks::outcome::{Failure, Reason};
    use serde_json::json;

    fn expansion(criteria: serde_json::Value) -> Expansion {
        let set: perfsweep_benchmarks::set::BenchmarkSet = serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "BenchmarkSet",
            "metadata": {"name": "s"},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 1}},
                "repetitions": 3,
                "acceptance": criteria,
            }
        }))
        .expect("a set");
        perfsweep_benchmarks::set::expand::expand("s", &set.spec).expect("expands")
    }

    fn failed() -> LocalOutcome {
        LocalOutcome::Failed(Failure::new(Reason::ToolFailed, "exit 1"))
    }

    #[test]
    fn stop_starts_nothing_after_a_failure_and_continue_does() {
        let mut stop = SetRun::new(
            "s",
            FailurePolicy::Stop,
            OutlierRule::default(),
            expansion(json!([])),
        );
        assert!(stop.may_start(0));
        stop.finished(0, &failed());
        assert!(!stop.may_start(1));
        assert_eq!(stop.phase(), SetPhase::Failed);
        assert_eq!(stop.not_started(), 2);
        assert_eq!(stop.acceptance(), None);
        let mut go_on = SetRun::new(
            "s",
            FailurePolicy::Continue,
            OutlierRule::default(),
            expansion(json!([])),
        );
        go_on.finished(0, &failed());
        assert!(go_on.may_start(1));
        assert_eq!(go_on.phase(), SetPhase::Running);
    }

    #[test]
    fn the_set_is_accepted_only_when_every_child_is() {
        let expansion = expansion(json!([{"metric": "received_bits_per_second", "min": 1.0}]));
        let mut set = SetRun::new(
            "s",
            FailurePolicy::Continue,
            OutlierRule::default(),
            expansion,
        );
        let verdict = |accepted: bool| acceptance::Judgement {
            accepted,
            checks: Vec::new(),
        };
        let succeeded = |accepted: bool| LocalOutcome::Succeeded {
            summary: String::new(),
            result: json!({}),
            acceptance: Some(verdict(accepted)),
        };
        set.finished(0, &succeeded(true));
        assert_eq!(set.acceptance().map(|a| a.1), Some(acceptance::IN_PROGRESS));
        set.finished(1, &succeeded(true));
        set.finished(2, &succeeded(false));
        assert_eq!(
            set.acceptance().map(|a| a.1),
            Some(acceptance::CRITERIA_NOT_MET)
        );
    }
}
