//! From the reports of a benchmark's result processes to its outcome: the one judgement
//! both backends (and `perfsweep import`) make of what the agents printed. Pure: the
//! backends read the pod logs or process outputs, this decides what they mean.
//!
//! In order: every process's last report line is found and must be from the process
//! the plan says it is (kind, role, replica); each report's raw output must match its
//! digest; a reported failure fails the benchmark with its reason; a success must carry
//! a result; the replicas' results merge through the kind; the result must have the
//! kind's shape; and the benchmark's acceptance criteria judge it.

// The reasons are a leaf of their own: the report format (below this module) names them too.
pub use crate::execution::reason;

pub use crate::execution::reason::{Failure, Reason, UnknownReason};

use serde_json::Value;

use crate::execution::agent_report::{self, AgentReport, Outcome};
use crate::execution::plan::process_name;
use crate::judging::acceptance;
use crate::kinds::registry::KindInfo;

/// What the outcome is judged against.
#[derive(Clone, Copy, Debug)]
pub struct Expected<'a> {
    pub kind: &'a KindInfo,
    /// The plan's result role: every output below is one of its replicas, in order.
    pub role: &'a str,
    /// The benchmark's spec, for its acceptance criteria.
    pub spec: &'a Value,
}

/// What one replica of the result role printed, as its backend read it.
#[derive(Clone, Copy, Debug)]
pub struct ProcessOutput<'a> {
    /// Where it ran (a pod, a local process), for messages.
    pub name: &'a str,
    /// The pod log or the process's standard output.
    pub output: &'a str,
    /// Said after a missing or malformed report (the end of a local agent's log).
    pub note: Option<&'a str>,
}

/// The result of a succeeded benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Success {
    pub result: Value,
    pub summary: Option<String>,
    /// SHA-256 of the tool's raw output, the evidence the result was read from.
    pub evidence_sha256: Option<String>,
    /// The whole report (with the raw output), to keep as evidence.
    pub report: AgentReport,
    /// The acceptance criteria's verdict on the result; `None` without criteria.
    pub acceptance: Option<acceptance::Judgement>,
}

/// The benchmark's outcome, and the report it was read from when there was one (a
/// failed benchmark's records still say where it ran).
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub outcome: Result<Success, Failure>,
    pub report: Option<AgentReport>,
}

impl Evaluation {
    fn failed(failure: Failure, report: Option<AgentReport>) -> Self {
        Self {
            outcome: Err(failure),
            report,
        }
    }
}

/// The outcome of a benchmark whose result processes printed `outputs` (replica 0
/// first).
pub fn evaluate(expected: &Expected<'_>, outputs: &[ProcessOutput<'_>]) -> Evaluation {
    if outputs.is_empty() {
        return Evaluation::failed(
            Failure::new(Reason::ResultUnparseable, "no process reported a result"),
            None,
        );
    }
    let mut reports = Vec::with_capacity(outputs.len());
    for (index, output) in (0u32..).zip(outputs) {
        match replica_report(expected, output, index) {
            Ok(report) => reports.push(report),
            Err(failure) => return Evaluation::failed(failure, None),
        }
    }
    let names: Vec<&str> = outputs.iter().map(|o| o.name).collect();
    evaluate_reports(expected, &names, reports)
}

/// The outcome from the replicas' reports, each already found in its output by
/// [`replica_report`] (replica 0 first, `names` where each ran): so that a caller may
/// read one output at a time and keep only its report.
pub fn evaluate_reports(
    expected: &Expected<'_>,
    names: &[&str],
    reports: Vec<AgentReport>,
) -> Evaluation {
    let unparseable =
        |name: &str, why: String| Failure::new(Reason::ResultUnparseable, format!("{name}: {why}"));
    if reports.is_empty() || names.len() != reports.len() {
        return Evaluation::failed(
            Failure::new(Reason::ResultUnparseable, "no process reported a result"),
            None,
        );
    }
    let (report, parts) = match combine(expected.kind, names, reports) {
        Ok(combined) => combined,
        Err((failure, report)) => return Evaluation::failed(failure, Some(*report)),
    };
    let name = names[0];
    let checked = expected.kind.check_result(&parts.result).map_err(|e| {
        unparseable(
            name,
            format!(
                "the reported result is not a valid {} result: {e}",
                expected.kind.kind
            ),
        )
    });
    if let Err(failure) = checked {
        return Evaluation::failed(failure, Some(report));
    }
    let acceptance = acceptance::judge(expected.kind, expected.spec, &parts.result);
    Evaluation {
        outcome: Ok(Success {
            result: parts.result,
            summary: parts.summary,
            evidence_sha256: report.raw_output_sha256.clone(),
            report: report.clone(),
            acceptance,
        }),
        report: Some(report),
    }
}

/// The report of replica `index` of the expected role in `output`: found, and from
/// that very process.
pub fn replica_report(
    expected: &Expected<'_>,
    output: &ProcessOutput<'_>,
    index: u32,
) -> Result<AgentReport, Failure> {
    let name = output.name;
    let report = agent_report::find(output.output).map_err(|e| {
        let note = output.note.map(|n| format!("; {n}")).unwrap_or_default();
        Failure::new(Reason::ResultUnparseable, format!("{name}: {e}{note}"))
    })?;
    let (kind, role) = (expected.kind.kind, expected.role);
    if report.kind != kind || report.role != role || report.index != index {
        return Err(Failure::new(
            Reason::ResultUnparseable,
            format!(
                "{name}: the report is from {} {}-{}, not from {kind} {role}-{index}",
                report.kind, report.role, report.index
            ),
        ));
    }
    Ok(report)
}

/// A succeeded report's result and summary.
struct Parts {
    result: Value,
    summary: Option<String>,
}

/// The replicas' reports as one: with one replica its own report; with several (the
/// distributed load generators) their results merged by the kind, the evidence every
/// replica's raw output under a `==> ROLE-INDEX <==` line. Any tampered, failed or
/// empty replica fails the whole, and is named when there are several.
fn combine(
    kind: &KindInfo,
    names: &[&str],
    mut reports: Vec<AgentReport>,
) -> Result<(AgentReport, Parts), (Failure, Box<AgentReport>)> {
    let several = reports.len() > 1;
    let mut results = Vec::with_capacity(reports.len());
    let mut summary = None;
    for (report, name) in reports.iter().zip(names) {
        // Our own findings name the process; a reported failure keeps the agent's
        // words, named only among several replicas.
        let fail = |reason: Reason, why: String, ours: bool| {
            let message = if several || ours {
                format!("{name}: {why}")
            } else {
                why
            };
            (Failure::new(reason, message), Box::new(report.clone()))
        };
        if !report.evidence_is_intact() {
            return Err(fail(
                Reason::ResultUnparseable,
                "the tool's raw output in the report does not match its SHA-256 digest".into(),
                true,
            ));
        }
        match &report.outcome {
            Outcome::Failed { reason, message } => {
                return Err(fail(Reason::reported(reason), message.clone(), false));
            }
            Outcome::Succeeded { result: None, .. } => {
                return Err(fail(
                    Reason::ResultUnparseable,
                    "the agent reported success but no result".into(),
                    true,
                ));
            }
            Outcome::Succeeded {
                result: Some(result),
                summary: reported,
            } => {
                results.push(result.clone());
                summary.clone_from(reported);
            }
        }
    }
    if !several && let (Some(report), Some(result)) = (reports.pop(), results.pop()) {
        return Ok((report, Parts { result, summary }));
    }
    let first = reports[0].clone();
    let mut evidence = String::new();
    for report in &reports {
        evidence.push_str(&format!(
            "==> {} <==\n",
            process_name(&report.role, report.index)
        ));
        evidence.push_str(report.raw_output.as_deref().unwrap_or_default());
        if !evidence.ends_with('\n') {
            evidence.push('\n');
        }
    }
    let merged = match kind.merge(&results) {
        Ok(merged) => merged,
        Err(error) => {
            let failed = AgentReport {
                outcome: Outcome::Failed {
                    reason: Reason::ResultUnparseable.to_string(),
                    message: error.to_string(),
                },
                raw_output: None,
                raw_output_sha256: None,
                ..first
            };
            return Err((
                Failure::new(Reason::ResultUnparseable, error.to_string()),
                Box::new(failed),
            ));
        }
    };
    let combined = AgentReport {
        outcome: Outcome::Succeeded {
            result: Some(merged.result.clone()),
            summary: Some(merged.summary.clone()),
        },
        started_at: reports
            .iter()
            .map(|r| r.started_at.clone())
            .min()
            .unwrap_or_default(),
        finished_at: reports
            .iter()
            .map(|r| r.finished_at.clone())
            .max()
            .unwrap_or_default(),
        raw_output_sha256: Some(agent_report::sha256_hex(evidence.as_bytes())),
        raw_output: Some(evidence),
        ..first
    };
    Ok((
        combined,
        Parts {
            result: merged.result,
            summary: Some(merged.summary),
        },
    ))
}

#[cfg(test)]
mod tests;
