use super::*;
use crate::execution::agent_report::sha256_hex;
use serde_json::json;

fn iperf() -> &'static KindInfo {
    crate::kinds::registry::lookup("IPerf").expect("registered")
}

/// A real iperf3 run's output, the evidence every report below carries.
const RAW: &str = include_str!("../../testdata/iperf/tcp-1stream.json");

fn result() -> Value {
    iperf().parse(RAW).expect("the fixture parses").result
}

fn received_bits_per_second() -> f64 {
    iperf()
        .metrics(&result())
        .iter()
        .find(|m| m.name == "received_bits_per_second")
        .map(|m| m.value)
        .expect("IPerf reports it")
}

fn report(index: u32, outcome: Outcome) -> AgentReport {
    let raw = RAW.to_owned();
    AgentReport {
        kind: "IPerf".into(),
        role: "client".into(),
        index,
        outcome,
        command: vec!["iperf3".into()],
        started_at: format!("2026-01-01T00:00:0{index}Z"),
        finished_at: format!("2026-01-01T00:00:1{index}Z"),
        host: None,
        raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
        raw_output: Some(raw),
        tool_version: None,
        network: None,
    }
}

fn succeeded(index: u32) -> AgentReport {
    report(
        index,
        Outcome::Succeeded {
            result: Some(result()),
            summary: Some("9.40 Gbit/s".into()),
        },
    )
}

fn judge(spec: &Value, logs: &[String]) -> Evaluation {
    let names = ["p-0", "p-1", "p-2"];
    let outputs: Vec<ProcessOutput<'_>> = logs
        .iter()
        .zip(names)
        .map(|(log, name)| ProcessOutput {
            name,
            output: log,
            note: None,
        })
        .collect();
    let expected = Expected {
        kind: iperf(),
        role: "client",
        spec,
    };
    evaluate(&expected, &outputs)
}

fn reason_of(evaluation: &Evaluation) -> Option<Reason> {
    evaluation.outcome.as_ref().err().map(|f| f.reason)
}

#[test]
fn the_check_for_result_shape_is_the_kinds() {
    // Guards the fixture: were it not an IPerf result, every success below would fail.
    assert_eq!(iperf().check_result(&result()), Ok(()));
    assert!(
        iperf()
            .check_result(&json!({"bitsPerSecond": "fast"}))
            .is_err()
    );
}

#[test]
fn a_single_intact_report_is_the_outcome() {
    let evaluation = judge(
        &json!({}),
        &[format!("noise\n{}\n", succeeded(0).to_line())],
    );
    let success = evaluation.outcome.expect("a success");
    assert_eq!(success.result, result());
    assert_eq!(success.summary.as_deref(), Some("9.40 Gbit/s"));
    assert_eq!(success.evidence_sha256, Some(sha256_hex(RAW.as_bytes())));
    assert_eq!(success.acceptance, None);
    assert_eq!(evaluation.report, Some(succeeded(0)));
}

#[test]
fn one_replica_is_checked_like_several() {
    // The identity and evidence checks used to be skipped when one report was combined.
    let mut tampered = succeeded(0);
    tampered.raw_output = Some("edited".into());
    let mut other_role = succeeded(0);
    other_role.role = "server".into();
    let empty = report(
        0,
        Outcome::Succeeded {
            result: None,
            summary: None,
        },
    );
    let wrong_shape = report(
        0,
        Outcome::Succeeded {
            result: Some(json!({"bitsPerSecond": "fast"})),
            summary: None,
        },
    );
    for (what, log) in [
        ("no report", "iperf3: error\n".to_owned()),
        ("malformed", format!("{}{{broken\n", agent_report::MARKER)),
        ("tampered", tampered.to_line()),
        ("another role", other_role.to_line()),
        ("success without result", empty.to_line()),
        ("not an IPerf result", wrong_shape.to_line()),
        ("replica 1 in replica 0's place", succeeded(1).to_line()),
    ] {
        let evaluation = judge(&json!({}), &[log]);
        let failure = evaluation.outcome.expect_err(what);
        assert_eq!(failure.reason, Reason::ResultUnparseable, "{what}");
        assert!(failure.message.starts_with("p-0: "), "{what}: {failure:?}");
    }
}

#[test]
fn a_reported_failure_keeps_its_reason_and_words() {
    let failed = |reason: &str| {
        report(
            0,
            Outcome::Failed {
                reason: reason.into(),
                message: "iperf3 exited with 1".into(),
            },
        )
        .to_line()
    };
    let evaluation = judge(&json!({}), &[failed("ToolFailed")]);
    assert_eq!(
        evaluation.outcome,
        Err(Failure::new(Reason::ToolFailed, "iperf3 exited with 1"))
    );
    // The failed report is kept: it says where the benchmark ran.
    assert!(evaluation.report.is_some());
    let evaluation = judge(&json!({}), &[failed("MadeUpByAnotherVersion")]);
    assert_eq!(reason_of(&evaluation), Some(Reason::AgentFailed));
}

#[test]
fn replicas_merge_through_the_kind_or_fail_with_the_replica_named() {
    // IPerf results do not merge: two succeeded replicas are unparseable as a whole.
    let both = [succeeded(0).to_line(), succeeded(1).to_line()];
    let evaluation = judge(&json!({}), &both);
    let failure = evaluation.outcome.expect_err("IPerf does not merge");
    assert_eq!(failure.reason, Reason::ResultUnparseable);
    assert!(failure.message.contains("IPerf"), "{failure:?}");
    // A failed replica fails the whole, named.
    let failed = report(
        1,
        Outcome::Failed {
            reason: "ToolFailed".into(),
            message: "exit 1".into(),
        },
    );
    let evaluation = judge(&json!({}), &[succeeded(0).to_line(), failed.to_line()]);
    assert_eq!(
        evaluation.outcome,
        Err(Failure::new(Reason::ToolFailed, "p-1: exit 1"))
    );
    // So does a replica that reported nothing.
    let evaluation = judge(&json!({}), &[succeeded(0).to_line(), "killed\n".into()]);
    let failure = evaluation.outcome.expect_err("partial");
    assert_eq!(failure.reason, Reason::ResultUnparseable);
    assert!(failure.message.starts_with("p-1: "), "{failure:?}");
    // And no output at all.
    assert_eq!(
        reason_of(&judge(&json!({}), &[])),
        Some(Reason::ResultUnparseable)
    );
}

#[test]
fn the_acceptance_criteria_judge_a_success() {
    let spec =
        |min: f64| json!({"acceptance": [{"metric": "received_bits_per_second", "min": min}]});
    let log = [succeeded(0).to_line()];
    let measured = received_bits_per_second();
    let met = judge(&spec(measured * 0.9), &log)
        .outcome
        .expect("a success");
    assert!(met.acceptance.expect("judged").accepted);
    let missed = judge(&spec(measured * 1.1), &log)
        .outcome
        .expect("still a success");
    let verdict = missed.acceptance.expect("judged");
    assert!(!verdict.accepted);
    assert_eq!(
        verdict.reason(),
        crate::judging::acceptance::CRITERIA_NOT_MET
    );
}

#[test]
fn plan_errors_fail_as_invalid_spec_or_unsupported() {
    use crate::execution::plan::PlanError;
    let invalid = PlanError::Invalid {
        path: "spec.x".into(),
        message: "bad".into(),
    };
    assert_eq!(Failure::of_plan(&invalid).reason, Reason::InvalidSpec);
}
