//! The same reports, judged by both backends: the controller's evaluation of result pod
//! logs (what `read_result` calls) and the local backend's judgement of its result
//! processes' output (what `local::run` calls) must agree on the phase, the reason and
//! the result of every case.

use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};
use perfsweep_benchmarks::kinds::iperf::parse::IPerfResult;
use perfsweep_benchmarks::kinds::registry::{self, KindInfo};
use serde_json::{Value, json};

use perfsweep::controller::benchmark::outcome as controller;
use perfsweep::local::{self, LocalOutcome};

/// A real iperf3 run's output: the evidence in every report.
const RAW: &str = include_str!("../../../benchmarks/testdata/iperf/tcp-1stream.json");

fn iperf() -> &'static KindInfo {
    registry::lookup("IPerf").expect("registered")
}

/// What a backend concluded, in the terms both share.
#[derive(Debug, PartialEq)]
struct Concluded {
    phase: &'static str,
    /// The `Failed` condition's reason, or the `Accepted` condition's for a success
    /// judged by criteria.
    reason: Option<String>,
    result: Option<Value>,
}

fn report(index: u32, outcome: Outcome) -> AgentReport {
    AgentReport {
        kind: "IPerf".into(),
        role: "client".into(),
        index,
        outcome,
        command: vec!["iperf3".into(), "--json".into()],
        started_at: "2026-11-25T00:00:00Z".into(),
        finished_at: "2026-11-25T00:00:10Z".into(),
        host: Some("node-a".into()),
        raw_output_sha256: Some(sha256_hex(RAW.as_bytes())),
        raw_output: Some(RAW.into()),
        tool_version: None,
        network: None,
    }
}

/// The report the agent prints after running the tool on `raw` (its parse, its reason).
fn agent_report(index: u32, raw: &str) -> AgentReport {
    let outcome = match iperf().parse(raw) {
        Ok(parsed) => Outcome::Succeeded {
            result: Some(parsed.result),
            summary: Some(parsed.summary),
        },
        Err(error) => Outcome::Failed {
            reason: perfsweep::agent::failure_reason(&error).to_string(),
            message: error.to_string(),
        },
    };
    AgentReport {
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw.into()),
        ..report(index, outcome)
    }
}

fn log(report: &AgentReport) -> String {
    format!("iperf3 --json ...\n{}\n", report.to_line())
}

/// The Kubernetes path: the result pods' logs, evaluated as `read_result` does, typed
/// as the IPerf status holds it.
fn on_kubernetes(spec: &Value, logs: &[String]) -> Concluded {
    let pods: Vec<(String, String)> = logs
        .iter()
        .enumerate()
        .map(|(index, log)| (format!("b-client-{index}"), log.clone()))
        .collect();
    match controller::evaluate_logs::<IPerfResult>(iperf(), "client", spec, &pods) {
        Ok(success) => Concluded {
            phase: "Succeeded",
            reason: success.acceptance.map(|v| v.reason().to_owned()),
            result: Some(serde_json::to_value(&success.result).expect("serializable")),
        },
        Err(failure) => Concluded {
            phase: "Failed",
            reason: Some(failure.reason.to_string()),
            result: None,
        },
    }
}

/// The local path: the result processes' standard outputs, judged as `local::run` does.
fn locally(spec: &Value, logs: &[String]) -> Concluded {
    let finished = local::Finished {
        kind: "IPerf".into(),
        result_role: "client".into(),
        outputs: logs
            .iter()
            .enumerate()
            .map(|(index, log)| (format!("client-{index}"), log.clone(), "agent log".into()))
            .collect(),
        stragglers: Vec::new(),
    };
    match local::judge(&finished, spec).0 {
        LocalOutcome::Succeeded {
            result, acceptance, ..
        } => Concluded {
            phase: "Succeeded",
            reason: acceptance.map(|v| v.reason().to_owned()),
            result: Some(result),
        },
        LocalOutcome::Failed(failure) => Concluded {
            phase: "Failed",
            reason: Some(failure.reason.to_string()),
            result: None,
        },
    }
}

#[test]
fn both_backends_judge_the_same_reports_alike() {
    let parsed = iperf().parse(RAW).expect("the fixture parses").result;
    let received = iperf()
        .metrics(&parsed)
        .iter()
        .find(|m| m.name == "received_bits_per_second")
        .map(|m| m.value)
        .expect("IPerf reports it");
    let gate =
        json!({"acceptance": [{"metric": "received_bits_per_second", "min": received * 1.5}]});
    let none = json!({});
    let good = agent_report(0, RAW);
    let mut tampered = good.clone();
    tampered.raw_output = Some(RAW.replace("sum_received", "sum_receivd"));
    let mut wrong_identity = good.clone();
    wrong_identity.role = "server".into();
    let no_result = report(
        0,
        Outcome::Succeeded {
            result: None,
            summary: Some("done".into()),
        },
    );
    let tool_failed = report(
        0,
        Outcome::Failed {
            reason: "ToolFailed".into(),
            message: "iperf3: error - unable to connect to server".into(),
        },
    );
    let unknown_reason = report(
        0,
        Outcome::Failed {
            reason: "SomethingNew".into(),
            message: "from another agent version".into(),
        },
    );
    let unparseable = agent_report(0, "iperf3: this is not JSON\n");
    let failed = |reason: &str| Concluded {
        phase: "Failed",
        reason: Some(reason.into()),
        result: None,
    };
    let rows: Vec<(&str, &Value, Vec<String>, Concluded)> = vec![
        (
            "success",
            &none,
            vec![log(&good)],
            Concluded {
                phase: "Succeeded",
                reason: None,
                result: Some(parsed.clone()),
            },
        ),
        (
            "success without result",
            &none,
            vec![log(&no_result)],
            failed("ResultUnparseable"),
        ),
        (
            "tampered evidence",
            &none,
            vec![log(&tampered)],
            failed("ResultUnparseable"),
        ),
        (
            "wrong identity",
            &none,
            vec![log(&wrong_identity)],
            failed("ResultUnparseable"),
        ),
        (
            "tool failure",
            &none,
            vec![log(&tool_failed)],
            failed("ToolFailed"),
        ),
        (
            "unknown reported reason",
            &none,
            vec![log(&unknown_reason)],
            failed("AgentFailed"),
        ),
        (
            "unparseable output",
            &none,
            vec![log(&unparseable)],
            failed("ResultUnparseable"),
        ),
        (
            "no report at all",
            &none,
            vec!["Killed\n".into()],
            failed("ResultUnparseable"),
        ),
        (
            "acceptance failed",
            &gate,
            vec![log(&good)],
            Concluded {
                phase: "Succeeded",
                reason: Some("CriteriaNotMet".into()),
                result: Some(parsed.clone()),
            },
        ),
        (
            "partial replicas",
            &none,
            vec![log(&good), "killed before reporting\n".into()],
            failed("ResultUnparseable"),
        ),
        (
            "replicas out of order",
            &none,
            vec![log(&agent_report(1, RAW)), log(&good)],
            failed("ResultUnparseable"),
        ),
    ];
    for (case, spec, logs, expected) in rows {
        let kubernetes = on_kubernetes(spec, &logs);
        let local = locally(spec, &logs);
        assert_eq!(kubernetes, expected, "{case}: Kubernetes");
        assert_eq!(local, expected, "{case}: local");
    }
}
