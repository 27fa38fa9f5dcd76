//! From the result pod's log to the benchmark's outcome: the agent's report (its last
//! line), checked for integrity and typed as the kind's result. Pure.

use perfsweep_benchmarks::report::{self, Outcome};
use serde::de::DeserializeOwned;

use super::assess::Failure;

/// Reason of every failure to get a usable result out of a finished result pod.
pub const UNPARSEABLE: &str = "ResultUnparseable";

/// The result of a finished benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Success<R> {
    pub result: R,
    pub summary: Option<String>,
    /// SHA-256 of the tool's raw output, the evidence the result was parsed from.
    pub evidence_sha256: Option<String>,
    /// The whole report (with the raw output), to keep once the pods are gone.
    pub report: report::AgentReport,
}

/// What the agent of `pod` (which played `role` of a `kind` benchmark) reported in `log`.
pub fn evaluate<R: DeserializeOwned>(
    log: &str,
    kind: &str,
    role: &str,
    pod: &str,
) -> Result<Success<R>, Failure> {
    let report = replica_report(log, kind, role, 0, pod)?;
    evaluate_report(report, kind, pod)
}

/// The report of replica `index` of `role` in the log of its pod `pod`.
pub fn replica_report(
    log: &str,
    kind: &str,
    role: &str,
    index: u32,
    pod: &str,
) -> Result<report::AgentReport, Failure> {
    let unparseable = |why: String| Failure::new(UNPARSEABLE, format!("pod {pod}: {why}"));
    let report = report::find(log).map_err(|e| unparseable(e.to_string()))?;
    if report.kind != kind || report.role != role || report.index != index {
        return Err(unparseable(format!(
            "the report is from {} {}-{}, not from {kind} {role}-{index}",
            report.kind, report.role, report.index
        )));
    }
    Ok(report)
}

/// The outcome a report (of the result pod `pod`, or the combined reports of the result
/// role's replicas) gives.
pub fn evaluate_report<R: DeserializeOwned>(
    report: report::AgentReport,
    kind: &str,
    pod: &str,
) -> Result<Success<R>, Failure> {
    let unparseable = |why: String| Failure::new(UNPARSEABLE, format!("pod {pod}: {why}"));
    if !report.evidence_is_intact() {
        return Err(unparseable(
            "the tool's raw output in the report does not match its SHA-256 digest".into(),
        ));
    }
    match report.outcome.clone() {
        Outcome::Failed { reason, message } => {
            let reason = if is_condition_reason(&reason) {
                reason
            } else {
                "AgentFailed".into()
            };
            Err(Failure::new(&reason, message))
        }
        Outcome::Succeeded { result: None, .. } => Err(unparseable(
            "the agent reported success but no result".into(),
        )),
        Outcome::Succeeded {
            result: Some(result),
            summary,
        } => {
            let result = serde_json::from_value(result).map_err(|e| {
                unparseable(format!(
                    "the reported result is not a valid {kind} result: {e}"
                ))
            })?;
            Ok(Success {
                result,
                summary,
                evidence_sha256: report.raw_output_sha256.clone(),
                report,
            })
        }
    }
}

/// Whether `reason` can be a condition reason (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`,
/// at most 1024 characters), as the API server requires.
fn is_condition_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner_ok = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            bytes.len() <= 1024
                && first.is_ascii_alphabetic()
                && (last.is_ascii_alphanumeric() || *last == b'_')
                && bytes.iter().all(inner_ok)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::report::{AgentReport, sha256_hex};
    use serde_json::json;

    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Throughput {
        bits_per_second: f64,
    }

    fn report(outcome: Outcome) -> AgentReport {
        let raw = "{\"end\": {}}\n".to_owned();
        AgentReport {
            tool_version: None,
            kind: "IPerf".into(),
            role: "client".into(),
            index: 0,
            outcome,
            command: vec!["iperf3".into()],
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:10Z".into(),
            host: None,
            raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
            raw_output: Some(raw),
        }
    }

    fn succeeded() -> Outcome {
        Outcome::Succeeded {
            result: Some(json!({"bitsPerSecond": 9.4e9})),
            summary: Some("9.40 Gbit/s".into()),
        }
    }

    fn evaluate_log(log: &str) -> Result<Success<Throughput>, Failure> {
        evaluate(log, "IPerf", "client", "b-client-0")
    }

    #[test]
    fn reads_the_result_from_the_last_report_line() {
        let log = format!("connecting\n{}\n", report(succeeded()).to_line());
        let success = evaluate_log(&log).expect("a result");
        assert_eq!(
            success.result,
            Throughput {
                bits_per_second: 9.4e9
            }
        );
        assert_eq!(success.summary.as_deref(), Some("9.40 Gbit/s"));
        assert_eq!(
            success.evidence_sha256,
            Some(sha256_hex("{\"end\": {}}\n".as_bytes()))
        );
    }

    #[test]
    fn anything_but_an_intact_matching_report_is_unparseable() {
        let mut tampered = report(succeeded());
        tampered.raw_output = Some("edited".into());
        let mut other_role = report(succeeded());
        other_role.role = "server".into();
        let logs = [
            "iperf3: error - unable to connect\n".to_owned(),
            format!("{}{{not json\n", report::MARKER),
            tampered.to_line(),
            other_role.to_line(),
            report(Outcome::Succeeded {
                result: None,
                summary: None,
            })
            .to_line(),
            report(Outcome::Succeeded {
                result: Some(json!({"bitsPerSecond": "fast"})),
                summary: None,
            })
            .to_line(),
        ];
        for log in logs {
            let failure = evaluate_log(&log).expect_err(&log);
            assert_eq!(failure.reason, UNPARSEABLE, "{log}");
            assert!(
                failure.message.starts_with("pod b-client-0: "),
                "{failure:?}"
            );
        }
    }

    #[test]
    fn a_reported_failure_keeps_its_reason() {
        let failed = |reason: &str| {
            report(Outcome::Failed {
                reason: reason.into(),
                message: "iperf3 exited with 1".into(),
            })
            .to_line()
        };
        let failure = evaluate_log(&failed("ToolFailed")).expect_err("a failure");
        assert_eq!(failure, Failure::new("ToolFailed", "iperf3 exited with 1"));
        let failure = evaluate_log(&failed("not a reason!")).expect_err("a failure");
        assert_eq!(failure.reason, "AgentFailed");
    }

    #[test]
    fn condition_reasons() {
        assert!(is_condition_reason("ParseFailed"));
        assert!(is_condition_reason("A_b:c,d1"));
        assert!(!is_condition_reason(""));
        assert!(!is_condition_reason("1abc"));
        assert!(!is_condition_reason("has space"));
        assert!(!is_condition_reason("trailing:"));
    }
}
