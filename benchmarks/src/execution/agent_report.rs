//! What the agent reports when its role ends: one line at the end of its output, so the
//! same text works as a pod log (Kubernetes) and as a process's stdout (local). The line
//! carries the tool's raw output too, so the evidence behind every number travels with
//! it, unchanged and verifiable by its digest.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of the report line.
pub const MARKER: &str = "PERFSWEEP-REPORT ";

/// An agent's account of its role.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentReport {
    pub kind: String,
    pub role: String,
    pub index: u32,
    pub outcome: Outcome,
    /// The measured command as run (after placeholders were filled).
    pub command: Vec<String>,
    /// RFC 3339 times of the measured command.
    pub started_at: String,
    pub finished_at: String,
    /// Where the agent ran (node or host name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The tool's standard output, exactly as printed (only the result role's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output: Option<String>,
    /// Lower-case hex SHA-256 of `raw_output`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_output_sha256: Option<String>,
    /// The measured tool's own account of its version (see
    /// [`crate::execution::tool_version`]), when it has a safe way to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_version: Option<crate::execution::tool_version::ToolVersion>,
}

/// How a role ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "status")]
pub enum Outcome {
    /// The role finished; `result` is set for the result role.
    Succeeded {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// The role failed; `reason` is one of [`crate::execution::reason::Reason`] (kept as
    /// text on the wire, so that a report of another agent version still reads: see
    /// [`crate::execution::reason::Reason::reported`]).
    Failed { reason: String, message: String },
}

impl AgentReport {
    /// The report as the single line the agent prints last.
    pub fn to_line(&self) -> String {
        // Serializing these plain types cannot fail; fall back to a report of that.
        let json = serde_json::to_string(self).unwrap_or_else(|e| {
            let reason = crate::execution::reason::Reason::ReportUnwritable;
            format!(r#"{{"outcome":{{"status":"failed","reason":"{reason}","message":"{e}"}}}}"#)
        });
        format!("{MARKER}{json}")
    }

    /// Whether `raw_output` matches its digest.
    pub fn evidence_is_intact(&self) -> bool {
        match (&self.raw_output, &self.raw_output_sha256) {
            (Some(raw), Some(digest)) => sha256_hex(raw.as_bytes()) == *digest,
            (None, None) => true,
            _ => false,
        }
    }
}

/// Why no report could be read from an output.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReportError {
    #[error(
        "the output has no {MARKER}line: the agent did not finish (killed, evicted or crashed)"
    )]
    Missing,
    #[error("the report line is malformed: {0}")]
    Malformed(String),
}

/// The last report in `output`.
pub fn find(output: &str) -> Result<AgentReport, ReportError> {
    let line = output
        .lines()
        .rev()
        .find_map(|line| line.strip_prefix(MARKER))
        .ok_or(ReportError::Missing)?;
    serde_json::from_str(line).map_err(|e| ReportError::Malformed(e.to_string()))
}

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> AgentReport {
        let raw = "line one\n{\"json\": true}\n".to_owned();
        AgentReport {
            kind: "IPerf".into(),
            role: "client".into(),
            index: 0,
            outcome: Outcome::Succeeded {
                result: Some(serde_json::json!({"receivedBitsPerSecond": 1.0e9})),
                summary: Some("1.00 Gbit/s".into()),
            },
            command: vec!["iperf3".into(), "--json".into()],
            started_at: "2026-11-21T00:00:00Z".into(),
            finished_at: "2026-11-21T00:00:10Z".into(),
            host: Some("node-a".into()),
            raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
            raw_output: Some(raw),
            tool_version: None,
        }
    }

    #[test]
    fn round_trips_through_a_log() {
        let log = format!("some tool output\nmore\n{}\n", report().to_line());
        let found = find(&log).expect("report found");
        assert_eq!(found, report());
        assert!(found.evidence_is_intact());
    }

    #[test]
    fn tampered_evidence_is_detected() {
        let mut tampered = report();
        tampered.raw_output = Some("other".into());
        assert!(!tampered.evidence_is_intact());
    }

    #[test]
    fn missing_and_malformed_reports_are_errors() {
        assert_eq!(find("no report here"), Err(ReportError::Missing));
        assert!(matches!(
            find("PERFSWEEP-REPORT {broken"),
            Err(ReportError::Malformed(_))
        ));
    }
}
