//! BenchmarkSet status and the pure bookkeeping behind it: which children to create next
//! and how to summarize 10,000 children in a few kilobytes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::FailurePolicy;
use crate::api::status::Phase;

/// Failures listed in status before the list is cut (the count stays exact).
pub const FAILURES_LISTED: usize = 10;

/// Above this many children, `status.children` is run-length encoded, so the status of
/// a 1,000-node all-pairs sweep (499,500 children) stays well under the API server's
/// object size limits.
pub const CHILDREN_LISTED_PLAIN: usize = 100_000;

/// Where a set is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum SetPhase {
    /// Valid; no child has started yet.
    #[default]
    Pending,
    /// Children are being created or are running.
    Running,
    /// Every child succeeded.
    Succeeded,
    /// Every child finished and at least one failed, or the set stopped on a failure.
    Failed,
    /// The spec is invalid; the `Valid` condition says what and where. Nothing was created.
    Invalid,
}

/// Status of a BenchmarkSet. Sized to stay small at 10,000 children: counts, one
/// character per child, and the first few failures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BenchmarkSetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<SetPhase>,

    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Number of permutations (product combinations plus explicit entries).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permutation_count: Option<u32>,

    /// Number of children: permutations × repetitions.
    #[serde(default)]
    pub total: u32,
    /// Children not created yet or waiting to be scheduled.
    #[serde(default)]
    pub pending: u32,
    #[serde(default)]
    pub running: u32,
    #[serde(default)]
    pub succeeded: u32,
    #[serde(default)]
    pub failed: u32,

    /// Standard conditions: `Valid`, `Progressing`, `Complete`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// One character per child in creation order: `-` not created yet, `P` pending,
    /// `R` running, `S` succeeded, `F` failed. Above 100,000 children, run-length
    /// encoded: `<count><character>` runs, e.g. `249500S500R249500-`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub children: Option<String>,

    /// The first failed children and why (the `failed` count is exact).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<ChildFailure>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,

    /// Statistics of the results so far: per case (permutation), the headline metric's
    /// mean, 95% confidence interval and variation across repetitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<super::summary::ResultsSummary>,

    /// With acceptance criteria (the set's or the template's): how many children were
    /// accepted, rejected, failed or are not judged yet, and the first rejections. The
    /// `Accepted` condition has the overall verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance: Option<super::acceptance::SetAcceptance>,

    /// A node-pair set's nodes (sorted): those its selector matched when this generation
    /// was first expanded. Kept for the generation, so a node that loses its label or goes
    /// away does not delete its pairs' children and results; edit the set to pick up
    /// nodes labelled since.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,

    /// A node-pair or each-node set's rounds: how many, and the one running now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<RoundProgress>,

    /// A node-pair set's fleet verdict so far: counts of outlier pairs, suspect nodes
    /// and links, and the worst ten of each with how far below the fleet they are. The
    /// full table is in the result records (`perfsweep results report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::judging::fleet::FleetSummary>,

    /// An each-node set's nodes' labels that its references select by (only those
    /// keys), kept with `nodes` for the generation: what chose each node's reference.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub node_labels: super::expand::NodeLabels,

    /// An each-node set's per-node verdict so far: how many nodes were rejected, as
    /// outliers against the fleet or out of their class's reference, and the worst ten
    /// with the reference each was judged against and why. The full table is in the
    /// result records (`perfsweep results report`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_node: Option<crate::judging::nodes::NodesSummary>,
}

/// Where a node-pair set is in its rounds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoundProgress {
    pub total: u32,
    /// The round whose children may run now (from 0); `total` when all have ended.
    pub current: u32,
}

pub use super::acceptance::ChildFailure;

pub use super::child::ChildState;

/// Counts and the per-child string for `states` (in creation order, named `names`).
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub pending: u32,
    pub running: u32,
    pub succeeded: u32,
    pub failed: u32,
    pub children: String,
    pub failures: Vec<ChildFailure>,
}

pub fn summarize<'a>(states: impl IntoIterator<Item = (&'a str, &'a ChildState)>) -> Summary {
    let mut summary = Summary::default();
    for (name, state) in states {
        summary.children.push(state.symbol());
        match state {
            ChildState::NotCreated => summary.pending += 1,
            ChildState::Created { phase, message } => match phase {
                Phase::Pending => summary.pending += 1,
                Phase::Running => summary.running += 1,
                Phase::Succeeded => summary.succeeded += 1,
                Phase::Failed => {
                    summary.failed += 1;
                    if summary.failures.len() < FAILURES_LISTED {
                        summary.failures.push(ChildFailure {
                            name: name.to_owned(),
                            message: message.clone().unwrap_or_else(|| "failed".to_owned()),
                        });
                    }
                }
            },
        }
    }
    if summary.children.len() > CHILDREN_LISTED_PLAIN {
        summary.children = run_length(&summary.children);
    }
    summary
}

/// `aaab` → `3a1b`.
fn run_length(symbols: &str) -> String {
    let mut encoded = String::new();
    let mut chars = symbols.chars().peekable();
    while let Some(symbol) = chars.next() {
        let mut count = 1;
        while chars.next_if_eq(&symbol).is_some() {
            count += 1;
        }
        encoded.push_str(&format!("{count}{symbol}"));
    }
    encoded
}

/// The round whose children may run now: the first with a child that has not finished
/// (`rounds[i]` is child `i`'s round, in creation order, non-decreasing). `None` when
/// every child has finished.
pub fn current_round(states: &[ChildState], rounds: &[u32]) -> Option<u32> {
    states
        .iter()
        .zip(rounds)
        .find(|(state, _)| !state.is_finished())
        .map(|(_, round)| *round)
}

/// [`next_to_create`] for a node-pair set: only children of the current round, up to
/// `per_round` of them active at once. A round starts only when every child of the
/// previous one has finished, so no node is in two tests at once.
pub fn next_to_create_in_rounds(
    states: &[ChildState],
    rounds: &[u32],
    per_round: u32,
    policy: FailurePolicy,
) -> Vec<usize> {
    let Some(current) = current_round(states, rounds) else {
        return Vec::new();
    };
    let in_round: Vec<usize> = rounds
        .iter()
        .enumerate()
        .filter(|(_, round)| **round == current)
        .map(|(i, _)| i)
        .collect();
    let round_states: Vec<ChildState> = in_round.iter().map(|&i| states[i].clone()).collect();
    // A failure in an earlier round stops the set just as one in this round.
    let failed_before = policy == FailurePolicy::Stop
        && states.iter().any(|s| {
            matches!(
                s,
                ChildState::Created {
                    phase: Phase::Failed,
                    ..
                }
            )
        });
    if failed_before {
        return Vec::new();
    }
    next_to_create(&round_states, per_round, policy)
        .into_iter()
        .map(|i| in_round[i])
        .collect()
}

/// Indexes of the children to create now: the next ones in order, while fewer than
/// `max_parallel` are active, and none after a failure under [`FailurePolicy::Stop`].
pub fn next_to_create(
    states: &[ChildState],
    max_parallel: u32,
    policy: FailurePolicy,
) -> Vec<usize> {
    let stopped = policy == FailurePolicy::Stop
        && states.iter().any(|s| {
            matches!(
                s,
                ChildState::Created {
                    phase: Phase::Failed,
                    ..
                }
            )
        });
    if stopped {
        return Vec::new();
    }
    let active = states.iter().filter(|s| s.is_active()).count();
    let free = (max_parallel as usize).saturating_sub(active);
    states
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == ChildState::NotCreated)
        .map(|(i, _)| i)
        .take(free)
        .collect()
}

/// The set's phase given its children.
pub fn phase(states: &[ChildState], policy: FailurePolicy) -> SetPhase {
    let summary = summarize(states.iter().map(|s| ("", s)));
    let total = states.len() as u32;
    let any_created = states.iter().any(|s| *s != ChildState::NotCreated);
    if summary.succeeded == total {
        SetPhase::Succeeded
    } else if summary.succeeded + summary.failed == total
        || (policy == FailurePolicy::Stop
            && summary.failed > 0
            && summary.running == 0
            && !states.iter().any(ChildState::is_active))
    {
        SetPhase::Failed
    } else if any_created {
        SetPhase::Running
    } else {
        SetPhase::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(phase: Phase) -> ChildState {
        ChildState::Created {
            phase,
            message: None,
        }
    }

    #[test]
    fn creates_up_to_max_parallel_in_order() {
        let states = vec![
            created(Phase::Running),
            ChildState::NotCreated,
            ChildState::NotCreated,
            ChildState::NotCreated,
        ];
        assert_eq!(
            next_to_create(&states, 1, FailurePolicy::Continue),
            Vec::<usize>::new()
        );
        assert_eq!(
            next_to_create(&states, 3, FailurePolicy::Continue),
            vec![1, 2]
        );
    }

    #[test]
    fn stop_policy_creates_nothing_after_a_failure() {
        let states = vec![created(Phase::Failed), ChildState::NotCreated];
        assert_eq!(
            next_to_create(&states, 4, FailurePolicy::Stop),
            Vec::<usize>::new()
        );
        assert_eq!(next_to_create(&states, 4, FailurePolicy::Continue), vec![1]);
        assert_eq!(phase(&states, FailurePolicy::Stop), SetPhase::Failed);
        assert_eq!(phase(&states, FailurePolicy::Continue), SetPhase::Running);
    }

    #[test]
    fn summary_is_one_character_per_child_and_caps_failures() {
        let mut states: Vec<ChildState> = (0..25).map(|_| created(Phase::Failed)).collect();
        states.push(created(Phase::Succeeded));
        states.push(ChildState::NotCreated);
        let names: Vec<String> = (0..states.len()).map(|i| format!("c{i}")).collect();
        let summary = summarize(names.iter().map(String::as_str).zip(&states));
        assert_eq!(summary.failed, 25);
        assert_eq!(summary.failures.len(), FAILURES_LISTED);
        assert_eq!(summary.children.len(), 27);
        assert!(summary.children.ends_with("FS-"));
        assert_eq!(summary.pending, 1);
    }

    #[test]
    fn rounds_start_only_when_the_previous_round_has_ended() {
        let rounds = [0, 0, 1, 1, 2];
        let mut states = vec![ChildState::NotCreated; 5];
        let policy = FailurePolicy::Continue;
        assert_eq!(
            next_to_create_in_rounds(&states, &rounds, 10, policy),
            [0, 1]
        );
        assert_eq!(next_to_create_in_rounds(&states, &rounds, 1, policy), [0]);
        states[0] = created(Phase::Succeeded);
        states[1] = created(Phase::Running);
        assert!(next_to_create_in_rounds(&states, &rounds, 10, policy).is_empty());
        states[1] = created(Phase::Failed);
        assert_eq!(
            next_to_create_in_rounds(&states, &rounds, 10, policy),
            [2, 3]
        );
        assert!(next_to_create_in_rounds(&states, &rounds, 10, FailurePolicy::Stop).is_empty());
        assert_eq!(current_round(&states, &rounds), Some(1));
    }

    #[test]
    fn a_huge_children_string_is_run_length_encoded() {
        let mut states = vec![created(Phase::Succeeded); 150_000];
        states.extend(vec![ChildState::NotCreated; 50_000]);
        let summary = summarize(states.iter().map(|s| ("", s)));
        assert_eq!(summary.children, "150000S50000-");
        assert_eq!(run_length("aab"), "2a1b");
    }

    #[test]
    fn phases() {
        assert_eq!(
            phase(&[ChildState::NotCreated], FailurePolicy::Continue),
            SetPhase::Pending
        );
        assert_eq!(
            phase(&[created(Phase::Succeeded)], FailurePolicy::Continue),
            SetPhase::Succeeded
        );
        assert_eq!(
            phase(
                &[created(Phase::Succeeded), created(Phase::Failed)],
                FailurePolicy::Continue
            ),
            SetPhase::Failed
        );
    }
}
