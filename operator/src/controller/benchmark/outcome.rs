//! From the result pods' logs to the benchmark's outcome: the logs are read here (by
//! the controller), what they mean is decided by the one outcome logic both backends
//! share ([`perfsweep_benchmarks::outcome::evaluate`]). Pure.

use perfsweep_benchmarks::execution::agent_report;
use perfsweep_benchmarks::kinds::registry::KindInfo;
use perfsweep_benchmarks::outcome::{self, Expected, ProcessOutput};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::assess::{Failure, Reason};

/// The result of a finished benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Success<R> {
    pub result: R,
    pub summary: Option<String>,
    /// SHA-256 of the tool's raw output, the evidence the result was parsed from.
    pub evidence_sha256: Option<String>,
    /// The whole report (with the raw output), to keep once the pods are gone.
    pub report: agent_report::AgentReport,
    /// The acceptance criteria's verdict on the result; `None` without criteria.
    pub acceptance: Option<perfsweep_benchmarks::judging::acceptance::Judgement>,
}

/// The outcome of a `kind` benchmark with `spec` whose result role `role` has the pods
/// and logs `logs` (replica 0 first): what the controller concludes from the result
/// pods, and `perfsweep import` from saved logs.
pub fn evaluate_logs<R: DeserializeOwned>(
    kind: &KindInfo,
    role: &str,
    spec: &Value,
    logs: &[(String, String)],
) -> Result<Success<R>, Failure> {
    evaluate_logs_with_report(kind, role, spec, logs).0
}

/// [`evaluate_logs`], and the (combined) report the outcome was read from, when there
/// was one.
pub fn evaluate_logs_with_report<R: DeserializeOwned>(
    kind: &KindInfo,
    role: &str,
    spec: &Value,
    logs: &[(String, String)],
) -> (
    Result<Success<R>, Failure>,
    Option<agent_report::AgentReport>,
) {
    let names: Vec<String> = logs.iter().map(|(pod, _)| format!("pod {pod}")).collect();
    let outputs: Vec<ProcessOutput<'_>> = logs
        .iter()
        .zip(&names)
        .map(|((_, log), name)| ProcessOutput {
            name,
            output: log,
            note: None,
        })
        .collect();
    let expected = Expected { kind, role, spec };
    typed(kind, &names[0], outcome::evaluate(&expected, &outputs))
}

/// The outcome from reports already taken out of the result pods' logs one by one
/// (`names` as `pod NAME`, replica 0 first), and the combined report.
pub fn evaluate_reports<R: DeserializeOwned>(
    kind: &KindInfo,
    role: &str,
    spec: &Value,
    names: &[String],
    reports: Vec<agent_report::AgentReport>,
) -> (
    Result<Success<R>, Failure>,
    Option<agent_report::AgentReport>,
) {
    let expected = Expected { kind, role, spec };
    let borrowed: Vec<&str> = names.iter().map(String::as_str).collect();
    let first = names.first().map_or("", String::as_str);
    typed(
        kind,
        first,
        outcome::evaluate_reports(&expected, &borrowed, reports),
    )
}

/// The evaluation's result read as the kind's own type, for the status.
fn typed<R: DeserializeOwned>(
    kind: &KindInfo,
    first: &str,
    evaluation: outcome::Evaluation,
) -> (
    Result<Success<R>, Failure>,
    Option<agent_report::AgentReport>,
) {
    let typed = evaluation.outcome.and_then(|success| {
        // The shared logic checked the result's shape against the kind's; this is the
        // same type, read for the status.
        let result = serde_json::from_value(success.result).map_err(|e| {
            Failure::new(
                Reason::ResultUnparseable,
                format!(
                    "{first}: the reported result is not a valid {} result: {e}",
                    kind.kind
                ),
            )
        })?;
        Ok(Success {
            result,
            summary: success.summary,
            evidence_sha256: success.evidence_sha256,
            report: success.report,
            acceptance: success.acceptance,
        })
    });
    (typed, evaluation.report)
}

/// What the agent of a failed result pod reported, if it got to report a failure of
/// its own (anything but an unreadable report).
pub fn reported_failure(kind: &KindInfo, role: &str, pod: &str, log: &str) -> Option<Failure> {
    let logs = [(pod.to_owned(), log.to_owned())];
    match evaluate_logs::<Value>(kind, role, &Value::Null, &logs) {
        Err(failure) if failure.reason != Reason::ResultUnparseable => Some(failure),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
    use serde_json::json;

    const RAW: &str = include_str!("../../../../benchmarks/testdata/iperf/tcp-1stream.json");

    fn iperf() -> &'static KindInfo {
        perfsweep_benchmarks::kinds::registry::lookup("IPerf").expect("registered")
    }

    fn report(outcome: Outcome) -> AgentReport {
        AgentReport {
            tool_version: None,
            network: None,
            kind: "IPerf".into(),
            role: "client".into(),
            index: 0,
            outcome,
            command: vec!["iperf3".into()],
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:10Z".into(),
            host: None,
            raw_output_sha256: Some(sha256_hex(RAW.as_bytes())),
            raw_output: Some(RAW.into()),
        }
    }

    fn evaluate_log(log: &str) -> Result<Success<Value>, Failure> {
        evaluate_logs(
            iperf(),
            "client",
            &json!({}),
            &[("b-client-0".into(), log.into())],
        )
    }

    #[test]
    fn reads_the_result_from_the_last_report_line() {
        let parsed = iperf().parse(RAW).expect("fixture parses");
        let succeeded = Outcome::Succeeded {
            result: Some(parsed.result.clone()),
            summary: Some(parsed.summary.clone()),
        };
        let log = format!("connecting\n{}\n", report(succeeded).to_line());
        let success = evaluate_log(&log).expect("a result");
        assert_eq!(success.result, parsed.result);
        assert_eq!(success.summary, Some(parsed.summary));
        assert_eq!(success.evidence_sha256, Some(sha256_hex(RAW.as_bytes())));
    }

    #[test]
    fn unreadable_reports_name_the_pod() {
        let failure = evaluate_log("iperf3: error - unable to connect\n").expect_err("no report");
        assert_eq!(failure.reason, Reason::ResultUnparseable);
        assert!(
            failure.message.starts_with("pod b-client-0: "),
            "{failure:?}"
        );
    }

    #[test]
    fn a_failed_pod_gives_the_reported_failure_but_not_an_unreadable_report() {
        let failed = report(Outcome::Failed {
            reason: "ToolFailed".into(),
            message: "iperf3 exited with 1".into(),
        });
        assert_eq!(
            reported_failure(iperf(), "client", "b-client-0", &failed.to_line()),
            Some(Failure::new(Reason::ToolFailed, "iperf3 exited with 1"))
        );
        assert_eq!(
            reported_failure(iperf(), "client", "b-client-0", "no report"),
            None
        );
    }
}
