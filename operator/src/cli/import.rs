//! `perfsweep results import`: the result record of a benchmark whose pods ran outside a
//! cluster (the image smoke runs in `images/build`), read from its result pods' logs
//! through the same judgment the operator applies to them: report identity, evidence
//! integrity, replicas combined by the kind, the result typed as the kind's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::execution::agent_report;
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::results::record::{
    self, Environment, Evidence, RecordOutcome, ResultRecord,
};
use serde_json::{Map, Value};

use crate::{output_dir, records};
use perfsweep_benchmarks::outcome::{self, Expected, Failure, ProcessOutput, Reason};

#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The benchmark object the pods ran (a file `perfsweep render` wrote; the first
    /// benchmark document in it is used).
    #[arg(long)]
    pub benchmark: PathBuf,
    /// The logs of the result role's pods, replica 0 first.
    #[arg(long = "log", required = true)]
    pub logs: Vec<PathBuf>,
    /// An image the pods ran and its digest, as `IMAGE=sha256:...` (repeatable).
    #[arg(long = "image-digest", value_parser = parse_image_digest)]
    pub image_digests: Vec<(String, String)>,
    /// The run id the record belongs to (default: a new one).
    #[arg(long)]
    pub run_id: Option<String>,
    /// Where to write the record and its evidence.
    #[arg(long, short)]
    pub output: PathBuf,
}

fn parse_image_digest(text: &str) -> Result<(String, String), String> {
    match text.rsplit_once('=') {
        Some((image, digest)) if !image.is_empty() && digest.starts_with("sha256:") => {
            Ok((image.to_owned(), digest.to_owned()))
        }
        _ => Err(format!("{text:?} is not IMAGE=sha256:DIGEST")),
    }
}

/// Writes the record; its path is returned. A benchmark that failed still gets its
/// record (the failure is the finding); the caller decides what a failure means.
pub fn import(args: &ImportArgs, default_run_id: &str) -> anyhow::Result<(PathBuf, bool)> {
    let (kind, object) = benchmark_object(&args.benchmark)?;
    let name = object["metadata"]["name"]
        .as_str()
        .context("the benchmark has no metadata.name")?
        .to_owned();
    // The record is written as <name>.json in the output directory: the name must be
    // one Kubernetes would accept, never a path (`../x`, `/etc/x`).
    if !is_object_name(&name) {
        anyhow::bail!(
            "metadata.name {name:?} is not a Kubernetes object name (lower-case letters, digits, '-' and '.', at most 253 characters)"
        );
    }
    let logs = args
        .logs
        .iter()
        .map(|path| {
            std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let judged = judge(kind, &logs, &args.logs);
    let run_id = args
        .run_id
        .clone()
        .unwrap_or_else(|| default_run_id.to_owned());
    let succeeded = matches!(judged.outcome, RecordOutcome::Succeeded { .. });
    let evidence = match &judged.report {
        Some(report) => records::write_evidence(&args.output, report).with_context(|| {
            format!(
                "cannot write the evidence of {name} in {}",
                args.output.display()
            )
        })?,
        None => None,
    };
    let record = assemble(
        kind,
        &object,
        &run_id,
        judged,
        evidence,
        args.image_digests.iter().cloned().collect(),
    );
    let path = args.output.join(format!("{name}.json"));
    let text = serde_json::to_string_pretty(&record)?;
    output_dir::write_atomic(&path, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok((path, succeeded))
}

/// A DNS subdomain (RFC 1123), as Kubernetes names objects: no `/`, no `..` segment.
fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn benchmark_object(path: &Path) -> anyhow::Result<(&'static registry::KindInfo, Value)> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let documents = perfsweep_benchmarks::formats::yaml::documents(&text)
        .with_context(|| format!("{}: not valid YAML", path.display()))?;
    documents
        .into_iter()
        .find_map(|document| {
            let kind = registry::lookup(document["kind"].as_str()?)?;
            Some((kind, document))
        })
        .with_context(|| format!("{}: no benchmark object in it", path.display()))
}

/// What the logs say, judged as the operator judges a result pod's log.
struct Judged {
    outcome: RecordOutcome,
    report: Option<agent_report::AgentReport>,
}

fn judge(kind: &registry::KindInfo, logs: &[String], paths: &[PathBuf]) -> Judged {
    let failed = |failure: Failure| Judged {
        outcome: RecordOutcome::failed(&failure),
        report: None,
    };
    let Some(first) = logs.first() else {
        return failed(Failure::new(Reason::ResultUnparseable, "no log was given"));
    };
    // The role is the first log's; every replica must be of the same role, in order.
    let role = match agent_report::find(first) {
        Ok(found) => found.role,
        Err(e) => {
            let message = format!("{}: {e}", paths[0].display());
            return failed(Failure::new(Reason::ResultUnparseable, message));
        }
    };
    let names: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let outputs: Vec<ProcessOutput<'_>> = logs
        .iter()
        .zip(&names)
        .map(|(log, name)| ProcessOutput {
            name,
            output: log,
            note: None,
        })
        .collect();
    let expected = Expected {
        kind,
        role: &role,
        spec: &Value::Null,
    };
    // The record says what the result was, not whether it met a gate: no criteria.
    let evaluation = outcome::evaluate(&expected, &outputs);
    match evaluation.outcome {
        Ok(success) => Judged {
            outcome: RecordOutcome::Succeeded {
                summary: success.summary.unwrap_or_default(),
                metrics: kind.metrics(&success.result),
                result: success.result,
            },
            report: Some(success.report),
        },
        Err(failure) => Judged {
            outcome: RecordOutcome::failed(&failure),
            report: evaluation.report,
        },
    }
}

fn assemble(
    kind: &registry::KindInfo,
    object: &Value,
    run_id: &str,
    judged: Judged,
    evidence: Option<Evidence>,
    image_digests: BTreeMap<String, String>,
) -> ResultRecord {
    let spec = object
        .get("spec")
        .cloned()
        .unwrap_or_else(|| Value::Object(Map::new()));
    let metadata = &object["metadata"];
    let report = judged.report.as_ref();
    ResultRecord {
        schema_version: record::SCHEMA_VERSION.into(),
        run_id: run_id.into(),
        benchmark: records::identity_of(
            kind,
            metadata,
            metadata["labels"][labels::SET].as_str().map(str::to_owned),
        ),
        workload_spec_digest: perfsweep_benchmarks::set::expand::workload_spec_digest(
            kind.kind, &spec,
        ),
        spec,
        // Pods of the rendered benchmark, run as containers without a cluster.
        backend: "containers".into(),
        environment: Environment {
            image_digests,
            ..records::report_environment(report)
        },
        started_at: report.map(|r| r.started_at.clone()).unwrap_or_default(),
        finished_at: report.map(|r| r.finished_at.clone()).unwrap_or_default(),
        outcome: judged.outcome,
        evidence,
        artifact_manifest_digest: None,
    }
    .complete()
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::execution::agent_report::{AgentReport, Outcome, sha256_hex};

    const IPERF_OUTPUT: &str = include_str!("../../../benchmarks/testdata/iperf/tcp-1stream.json");

    fn log(report: &AgentReport) -> String {
        format!("agent: starting\n{}\n", report.to_line())
    }

    fn iperf_report(raw: &str) -> AgentReport {
        let kind = registry::lookup("IPerf").expect("IPerf is registered");
        let result = kind.parse(raw).ok().map(|parsed| parsed.result);
        AgentReport {
            kind: "IPerf".into(),
            role: "client".into(),
            index: 0,
            outcome: Outcome::Succeeded {
                result,
                summary: Some("measured".into()),
            },
            command: vec!["iperf3".into(), "--client".into()],
            started_at: "2026-11-25T16:00:00Z".into(),
            finished_at: "2026-11-25T16:00:10Z".into(),
            host: Some("node-a".into()),
            raw_output: Some(raw.into()),
            raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
            tool_version: None,
            network: None,
        }
    }

    fn paths(n: usize) -> Vec<PathBuf> {
        (0..n)
            .map(|i| PathBuf::from(format!("pod-{i}.log")))
            .collect()
    }

    #[test]
    fn a_good_report_is_a_success_with_metrics_and_evidence() {
        let kind = registry::lookup("IPerf").expect("IPerf is registered");
        let judged = judge(kind, &[log(&iperf_report(IPERF_OUTPUT))], &paths(1));
        let RecordOutcome::Succeeded { metrics, .. } = &judged.outcome else {
            panic!("expected success, got {:?}", judged.outcome);
        };
        assert!(
            metrics.iter().any(|m| m.name == "received_bits_per_second"),
            "{metrics:?}"
        );
        assert!(judged.report.is_some_and(|r| r.evidence_is_intact()));
    }

    #[test]
    fn tampered_evidence_and_a_missing_report_are_failures() {
        let kind = registry::lookup("IPerf").expect("IPerf is registered");
        let mut tampered = iperf_report(IPERF_OUTPUT);
        tampered.raw_output = Some(format!("{IPERF_OUTPUT} "));
        let judged = judge(kind, &[log(&tampered)], &paths(1));
        assert!(
            matches!(&judged.outcome, RecordOutcome::Failed { reason, .. } if reason == Reason::ResultUnparseable.as_str()),
            "{:?}",
            judged.outcome
        );
        let judged = judge(kind, &["no report here\n".to_owned()], &paths(1));
        assert!(matches!(judged.outcome, RecordOutcome::Failed { .. }));
    }

    #[test]
    fn a_report_of_another_kind_is_refused() {
        let kind = registry::lookup("Fio").expect("Fio is registered");
        let judged = judge(kind, &[log(&iperf_report(IPERF_OUTPUT))], &paths(1));
        let RecordOutcome::Failed { message, .. } = &judged.outcome else {
            panic!("expected a failure, got {:?}", judged.outcome);
        };
        assert!(message.contains("not from Fio"), "{message}");
    }

    /// Issue 24: `metadata.name: ../../x` wrote the record outside the output directory.
    #[test]
    fn a_name_that_is_a_path_is_refused() {
        for name in ["../escape", "/etc/passwd", "a/b", "..", "", "UPPER", "a..b"] {
            assert!(!is_object_name(name), "{name:?}");
        }
        for name in ["iperf-1", "a.b", "x"] {
            assert!(is_object_name(name), "{name:?}");
        }
    }

    #[test]
    fn image_digests_are_read_as_pairs() {
        assert_eq!(
            parse_image_digest("ghcr.io/perfsweep/iperf:0.1.0=sha256:ab"),
            Ok(("ghcr.io/perfsweep/iperf:0.1.0".into(), "sha256:ab".into()))
        );
        assert!(parse_image_digest("ghcr.io/perfsweep/iperf:0.1.0").is_err());
    }
}
