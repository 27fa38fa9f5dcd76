//! The status every benchmark kind reports, generic over the kind's result.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a benchmark is in its life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Phase {
    /// Accepted; pods are being created or wait for the scheduler.
    #[default]
    Pending,
    /// All pods are running; the measurement is under way.
    Running,
    /// Finished with a parsed result.
    Succeeded,
    /// Finished without a usable result; the `Failed` condition says why.
    Failed,
}

impl Phase {
    pub fn is_finished(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Running => "Running",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }
}

/// Status of a benchmark of any kind; `R` is the kind's structured result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(
    rename_all = "camelCase",
    bound(serialize = "R: Serialize", deserialize = "R: Deserialize<'de>")
)]
pub struct BenchmarkStatus<R> {
    /// Pending, Running, Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,

    /// The generation of the spec this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Standard conditions: `Scheduled`, `Ready`, `Completed`, `Failed`, `GangScheduled`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,

    /// When the benchmark's pods all started running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,

    /// When the benchmark reached Succeeded or Failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,

    /// The headline result in a few words (for example `9.41 Gbit/s`), for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,

    /// Where a running benchmark is, from the tool's latest progress line (for example
    /// `iteration 2/6: D(100,100) concurrency 8: 340 requests done in 30 s`); refreshed
    /// on the controller's periodic checks of running benchmarks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,

    /// The structured result, parsed from the tool's own output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<R>,

    /// The export to `spec.outputLocation`, once tried: attempts so far and when the
    /// last one was (the `Exported` condition says how it went).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<ExportProgress>,
}

/// Attempts at exporting a finished benchmark's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportProgress {
    /// Attempts made, the first included.
    pub attempts: u32,
    /// When the last attempt was made.
    pub last_attempt_at: Time,
}

impl<R> Default for BenchmarkStatus<R> {
    fn default() -> Self {
        Self {
            phase: None,
            observed_generation: None,
            conditions: Vec::new(),
            started_at: None,
            finished_at: None,
            summary: None,
            progress: None,
            result: None,
            export: None,
        }
    }
}

/// Condition `status` values, as the Kubernetes API spells them.
pub mod condition_status {
    pub const TRUE: &str = "True";
    pub const FALSE: &str = "False";
    pub const UNKNOWN: &str = "Unknown";
}

/// Sets `condition` in `conditions`, keeping `lastTransitionTime` when the status did
/// not change (the meaning Kubernetes gives that field).
pub fn set_condition(conditions: &mut Vec<Condition>, condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            let transition_time = if existing.status == condition.status {
                existing.last_transition_time.clone()
            } else {
                condition.last_transition_time.clone()
            };
            *existing = Condition {
                last_transition_time: transition_time,
                ..condition
            };
        }
        None => conditions.push(condition),
    }
}

/// Builds a condition stamped with `now`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    observed_generation: Option<i64>,
    now: jiff::Timestamp,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation,
        last_transition_time: Time(now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_condition_keeps_transition_time_when_status_is_unchanged() {
        let t0 = jiff::Timestamp::from_second(1_000).unwrap();
        let t1 = jiff::Timestamp::from_second(2_000).unwrap();
        let mut conditions = vec![condition("Ready", "True", "A", "first", Some(1), t0)];
        set_condition(
            &mut conditions,
            condition("Ready", "True", "B", "second", Some(2), t1),
        );
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, Time(t0));
        assert_eq!(conditions[0].reason, "B");

        set_condition(
            &mut conditions,
            condition("Ready", "False", "C", "third", Some(2), t1),
        );
        assert_eq!(conditions[0].last_transition_time, Time(t1));
        assert_eq!(conditions[0].status, "False");
    }
}
