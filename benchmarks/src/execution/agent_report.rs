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
    /// What crossed the agent's network interfaces while the measured command ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkUse>,
}

/// The evidence that a benchmark used the network it asked for: the interface that
/// carried the agent's data address, and what the kernel counted on each interface
/// while the measured command ran.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkUse {
    /// The data address the agent gave its peers.
    pub address: String,
    /// The interface that has it (a Multus attachment's, or `eth0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    pub interfaces: Vec<InterfaceUse>,
}

/// One interface: its MTU at the end of the run and the bytes it sent and received
/// during it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceUse {
    pub name: String,
    pub mtu: u32,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// An interface's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub mtu: u32,
    pub tx_bytes: u64,
    pub rx_bytes: u64,
}

/// Pure: the use of each interface present at both moments, by name. Counters that went
/// backwards (an interface replaced meanwhile) count from zero.
pub fn interface_use(
    before: &std::collections::BTreeMap<String, Counters>,
    after: &std::collections::BTreeMap<String, Counters>,
) -> Vec<InterfaceUse> {
    after
        .iter()
        .filter_map(|(name, end)| {
            let start = before.get(name)?;
            let delta = |end: u64, start: u64| end.checked_sub(start).unwrap_or(end);
            Some(InterfaceUse {
                name: name.clone(),
                mtu: end.mtu,
                tx_bytes: delta(end.tx_bytes, start.tx_bytes),
                rx_bytes: delta(end.rx_bytes, start.rx_bytes),
            })
        })
        .collect()
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
    // A kubelet serves only its current log file: a report line longer than its
    // containerLogMaxSize is rotated away from its start (issue 35, on the real cluster).
    #[error(
        "the output has no {MARKER}line: the agent did not finish (killed, evicted or crashed), \
         or its report was longer than the kubelet keeps in one log file (containerLogMaxSize, \
         10 MiB by default)"
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

/// Pure: the interface named `carrier` first, then the others that carried anything,
/// busiest first, at most `limit` in all.
pub fn most_used(
    mut used: Vec<InterfaceUse>,
    carrier: Option<&str>,
    limit: usize,
) -> Vec<InterfaceUse> {
    used.retain(|i| Some(i.name.as_str()) == carrier || i.tx_bytes + i.rx_bytes > 0);
    used.sort_by_key(|i| {
        (
            Some(i.name.as_str()) != carrier,
            std::cmp::Reverse(i.tx_bytes + i.rx_bytes),
        )
    });
    used.truncate(limit);
    used
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
            network: Some(NetworkUse {
                address: "10.78.0.5".into(),
                interface: Some("net1".into()),
                interfaces: vec![InterfaceUse {
                    name: "net1".into(),
                    mtu: 3000,
                    tx_bytes: 1_000_000,
                    rx_bytes: 2_000,
                }],
            }),
        }
    }

    #[test]
    fn the_carrier_comes_first_then_the_busiest_and_idle_ones_are_left_out() {
        let used = |name: &str, tx: u64| InterfaceUse {
            name: name.into(),
            mtu: 1500,
            tx_bytes: tx,
            rx_bytes: 0,
        };
        let all = vec![
            used("a", 5),
            used("idle", 0),
            used("b", 50),
            used("c", 7),
            used("lo0", 0),
        ];
        let names = |kept: Vec<InterfaceUse>| kept.into_iter().map(|i| i.name).collect::<Vec<_>>();
        assert_eq!(
            names(most_used(all.clone(), Some("lo0"), 3)),
            ["lo0", "b", "c"]
        );
        assert_eq!(names(most_used(all, None, 8)), ["b", "c", "a"]);
    }

    #[test]
    fn interface_use_is_the_change_of_each_interface_present_throughout() {
        let at = |mtu, tx, rx| Counters {
            mtu,
            tx_bytes: tx,
            rx_bytes: rx,
        };
        let before = [
            ("eth0".to_owned(), at(1500, 100, 200)),
            ("net1".to_owned(), at(1500, 50, 0)),
            ("gone".to_owned(), at(1500, 1, 1)),
        ]
        .into();
        let after = [
            ("eth0".to_owned(), at(1500, 150, 260)),
            ("net1".to_owned(), at(3000, 10, 5)),
            ("new".to_owned(), at(1500, 9, 9)),
        ]
        .into();
        let used = interface_use(&before, &after);
        assert_eq!(
            used,
            vec![
                InterfaceUse {
                    name: "eth0".into(),
                    mtu: 1500,
                    tx_bytes: 50,
                    rx_bytes: 60
                },
                // Went backwards: replaced meanwhile, so counted from zero.
                InterfaceUse {
                    name: "net1".into(),
                    mtu: 3000,
                    tx_bytes: 10,
                    rx_bytes: 5
                },
            ]
        );
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
