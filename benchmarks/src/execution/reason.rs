//! Why a benchmark failed: one closed list of reasons, shared by the agent, both
//! backends, records and the CLI, and documented in docs/troubleshooting.md (a test
//! keeps the two lists equal).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Declares [`Reason`] with the exact string of each variant (condition reasons are
/// CamelCase words; `APIError` is not what a derive would spell).
macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// Why a benchmark failed, or (the last four) why the operator cannot act on it.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The reason as conditions, events, reports and records spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => $text,)*
                }
            }
        }

        impl FromStr for Reason {
            type Err = UnknownReason;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok(Reason::$variant),)*
                    _ => Err(UnknownReason(text.to_owned())),
                }
            }
        }
    };
}

reasons! {
    // Set by the operator (Kubernetes) or the local runner before or around the agents.
    /// The spec fails the kind's schema, CEL rules or plan checks.
    InvalidSpec => "InvalidSpec",
    /// The plan or a requested feature is not implemented in this version.
    Unsupported => "Unsupported",
    VolcanoNotInstalled => "VolcanoNotInstalled",
    CreateRejected => "CreateRejected",
    ImagePullFailure => "ImagePullFailure",
    Unschedulable => "Unschedulable",
    /// The benchmark did not finish within its timeout (the operator's or the local
    /// runner's deadline).
    TimedOut => "TimedOut",
    NameConflict => "NameConflict",
    ResultUnreadable => "ResultUnreadable",
    PodFailed => "PodFailed",
    PodDeleted => "PodDeleted",
    /// No intact report, a report of another process, a digest that does not match,
    /// success without a result, or output that is not a result of the kind.
    ResultUnparseable => "ResultUnparseable",
    /// The agent reported a reason that is not one of these.
    AgentFailed => "AgentFailed",
    /// The local runner could not set up a run (scratch directory, loopback block).
    LocalSetupFailed => "LocalSetupFailed",
    /// A local run lacks the environment variable standing in for a Secret key.
    SecretMissing => "SecretMissing",
    /// A Secret the benchmark's pods would mount is missing, or its owner has not
    /// labelled it `perfsweep.io/consumable: "true"`.
    SecretNotConsumable => "SecretNotConsumable",
    // Reported by the agent.
    ToolFailed => "ToolFailed",
    ToolMissing => "ToolMissing",
    NoRdmaDevice => "NoRdmaDevice",
    PeerUnreachable => "PeerUnreachable",
    PeerFailed => "PeerFailed",
    /// The tool did not finish before the benchmark's timeout (the agent's deadline).
    Timeout => "Timeout",
    /// The agent was told to stop (SIGTERM: its pod deleted, its node shut down) and
    /// stopped the tool before it finished.
    Interrupted => "Interrupted",
    NetworkUnavailable => "NetworkUnavailable",
    MtuFailed => "MtuFailed",
    SetupFailed => "SetupFailed",
    ControlPortUnavailable => "ControlPortUnavailable",
    WorkdirUnavailable => "WorkdirUnavailable",
    VolumeUnavailable => "VolumeUnavailable",
    LaunchTokenMissing => "LaunchTokenMissing",
    PlanInvalid => "PlanInvalid",
    /// The agent could not serialize its own report.
    ReportUnwritable => "ReportUnwritable",
    // The operator's own trouble (the `OperatorError` condition), not the benchmark's.
    Forbidden => "Forbidden",
    APIUnavailable => "APIUnavailable",
    APIError => "APIError",
    OperatorError => "OperatorError",
}

impl Reason {
    /// The reason a report names, as the one the benchmark gets: a reason the agent
    /// of another version made up is [`Reason::AgentFailed`].
    pub fn reported(text: &str) -> Self {
        text.parse().unwrap_or(Reason::AgentFailed)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Reason {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Reason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A string that is none of the [`Reason`]s.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown failure reason {0:?}")]
pub struct UnknownReason(pub String);

/// Why a benchmark failed: a reason for conditions and a sentence for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{reason}: {message}")]
pub struct Failure {
    pub reason: Reason,
    pub message: String,
}

impl Failure {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }

    /// A failure whose message (which often quotes a tool) is kept as plain text,
    /// without the tool's colour codes.
    pub fn plain(reason: Reason, message: impl Into<String>) -> Self {
        Self::new(
            reason,
            crate::execution::parse_error::strip_terminal_codes(&message.into()),
        )
    }

    /// The failure a plan error is: what the spec asks for wrong, or what this version
    /// cannot do. Both backends map plan errors through this.
    pub fn of_plan(error: &crate::execution::plan::PlanError) -> Self {
        use crate::execution::plan::PlanError;
        let reason = match error {
            PlanError::NotImplemented { .. } => Reason::Unsupported,
            PlanError::Invalid { .. } => Reason::InvalidSpec,
        };
        Self::new(reason, error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_through_its_text_and_json() {
        for reason in Reason::ALL {
            assert_eq!(reason.as_str().parse::<Reason>(), Ok(*reason));
            let json = serde_json::to_string(reason).expect("serializable");
            assert_eq!(json, format!("\"{reason}\""));
            assert_eq!(
                serde_json::from_str::<Reason>(&json).expect("readable"),
                *reason
            );
        }
        assert!(serde_json::from_str::<Reason>("\"NoSuchReason\"").is_err());
        assert_eq!(Reason::reported("NoSuchReason"), Reason::AgentFailed);
        assert_eq!(Reason::reported("ToolFailed"), Reason::ToolFailed);
    }

    #[test]
    fn every_reason_is_a_valid_condition_reason() {
        // ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, as the API server requires.
        for reason in Reason::ALL {
            let text = reason.as_str();
            assert!(
                text.starts_with(|c: char| c.is_ascii_alphabetic())
                    && text.chars().all(|c| c.is_ascii_alphanumeric()),
                "{text}"
            );
        }
    }

    #[test]
    fn the_troubleshooting_guide_lists_exactly_these_reasons() {
        // Every reason a benchmark can fail with (or the operator's error has) is in a
        // table row of docs/troubleshooting.md's "Benchmarks" section, and nothing else.
        let guide = include_str!("../../../docs/troubleshooting.md");
        let section = guide
            .split("\n## ")
            .find(|s| s.starts_with("Benchmarks\n"))
            .expect("a Benchmarks section");
        let mut documented: Vec<&str> = section
            .lines()
            .filter_map(|line| line.strip_prefix("| `"))
            .filter_map(|row| row.split(" |").next())
            .flat_map(|cell| cell.split('`'))
            .map(|word| word.trim_matches(|c: char| c == ',' || c == ' '))
            .filter(|word| !word.is_empty())
            .collect();
        documented.sort_unstable();
        let mut declared: Vec<&str> = Reason::ALL.iter().map(|r| r.as_str()).collect();
        declared.sort_unstable();
        assert_eq!(documented, declared);
    }
}
