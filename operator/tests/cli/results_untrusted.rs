//! `perfsweep results` over directories that cannot be trusted (issue 18, findings 8–10):
//! copies of the same records, an unknown schema version, a stray non-record file,
//! missing or altered evidence, impossible numbers, several directories at once, and
//! chart file names that do not say SVG or PNG. The records are written here in code so
//! that each defect is exactly the one planted.

use crate::local_support;

use std::path::{Path, PathBuf};
use std::process::Output;

use local_support::{perfsweep, scratch};
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::results::record::{
    BenchmarkIdentity, Environment, Evidence, RecordOutcome, ResultRecord, SCHEMA_VERSION,
};
use serde_json::json;

/// Writes the record of repetition `repetition` of an iperf case with `streams` and its
/// evidence into `dir`; returns the record's path.
fn write_record(dir: &Path, run: &str, streams: u32, repetition: u32, bits: f64) -> PathBuf {
    let raw = format!("iperf3 output of run {run}, {streams} streams, repetition {repetition}\n");
    let sha = perfsweep_benchmarks::execution::agent_report::sha256_hex(raw.as_bytes());
    let evidence_path = perfsweep_benchmarks::results::record::evidence_path(&sha);
    std::fs::create_dir_all(dir.join("evidence")).expect("evidence directory");
    std::fs::write(dir.join(&evidence_path), &raw).expect("evidence written");
    let result = json!({"protocol": "TCP", "reverse": false, "bidirectional": false,
        "numStreams": streams, "durationSeconds": 10.0, "sentBitsPerSecond": bits,
        "receivedBitsPerSecond": bits, "sentBytes": 1, "receivedBytes": 1, "retransmits": 0});
    let kind = registry::lookup("IPerf").expect("registered");
    let name = format!("sweep-s{streams}-{repetition}");
    let record = ResultRecord {
        schema_version: SCHEMA_VERSION.into(),
        run_id: run.into(),
        benchmark: BenchmarkIdentity {
            kind: "IPerf".into(),
            name: name.clone(),
            set: Some("sweep".into()),
            benchmark_case_id: Some(format!("case-s{streams}")),
            repetition: Some(repetition),
            permutation: serde_json::from_value(json!({"streams": streams})).expect("a map"),
            node: None,
            references: Vec::new(),
        },
        workload_spec_digest: format!("digest-s{streams}"),
        spec: json!({"streams": streams}),
        backend: "local".into(),
        environment: Environment::default(),
        started_at: "2026-11-25T10:00:00Z".into(),
        finished_at: "2026-11-25T10:00:10Z".into(),
        outcome: RecordOutcome::Succeeded {
            summary: format!("{bits} bit/s"),
            metrics: kind.metrics(&result),
            result,
        },
        evidence: Some(Evidence {
            sha256: sha,
            bytes: raw.len() as u64,
            path: evidence_path,
        }),
        artifact_manifest_digest: None,
    };
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&record).expect("JSON")).expect("record");
    path
}

/// Three repetitions of one case in a fresh directory.
fn sweep(name: &str) -> PathBuf {
    let dir = scratch(name);
    for repetition in 0..3 {
        write_record(
            &dir,
            "run-1",
            1,
            repetition,
            9.0e9 + f64::from(repetition) * 1e8,
        );
    }
    dir
}

fn results(args: &[&str]) -> Output {
    let output = perfsweep()
        .arg("results")
        .args(args)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep results {args:?} → {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn p(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// The N column of `results show` for the headline metric.
fn repetitions_shown(output: &Output) -> String {
    let text = stdout(output);
    let row = text
        .lines()
        .find(|l| l.contains("received_bits_per_second"))
        .unwrap_or_else(|| panic!("no headline row in {text}"));
    row.split_whitespace().nth(3).expect("N column").to_owned()
}

/// Finding 9 (copies counted twice) and finding 10 (`show` took one directory): the
/// same records in two directories are three repetitions, with a warning per copy.
#[test]
fn copies_in_several_directories_count_once() {
    let original = sweep("untrusted-original");
    let copy = scratch("untrusted-copy");
    for entry in std::fs::read_dir(&original).expect("records") {
        let file = entry.expect("entry").path();
        if file.is_file() {
            std::fs::copy(&file, copy.join(file.file_name().expect("name"))).expect("copied");
        }
    }
    let output = results(&["show", p(&original), p(&copy)]);
    assert!(output.status.success());
    assert_eq!(repetitions_shown(&output), "3");
    assert_eq!(stderr(&output).matches("counted once").count(), 3);
    // `list` takes several directories too.
    let output = results(&["list", p(&original), p(&copy)]);
    assert!(output.status.success());
    assert_eq!(stdout(&output).matches("run-1").count(), 3);
}

/// Finding 9: a record of an unknown schema version is refused, naming the file and
/// the version this perfsweep reads.
#[test]
fn unknown_schema_versions_are_refused() {
    let dir = sweep("untrusted-schema");
    let record = write_record(&dir, "run-2", 2, 0, 9e9);
    let text = std::fs::read_to_string(&record).expect("record");
    let text = text.replace(SCHEMA_VERSION, "perfsweep.io/result/v9");
    std::fs::write(&record, text).expect("rewritten");
    let output = results(&["show", p(&dir)]);
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("perfsweep.io/result/v9"), "{message}");
    assert!(message.contains(p(&record)), "{message}");
}

/// Finding 9: a stray `notes.json` is skipped with a note; every command still works.
#[test]
fn other_json_files_are_skipped_with_a_note() {
    let dir = sweep("untrusted-notes");
    std::fs::write(dir.join("notes.json"), r#"{"notes": "baseline"}"#).expect("notes");
    for command in ["list", "show", "export"] {
        let output = results(&[command, p(&dir)]);
        assert!(output.status.success(), "{command}");
        assert!(
            stderr(&output).contains("note: skipped") && stderr(&output).contains("notes.json"),
            "{command}"
        );
    }
}

/// Finding 9: missing or altered evidence is flagged by every command that reads the
/// records, and marked in `list`.
#[test]
fn missing_or_altered_evidence_is_flagged() {
    let dir = sweep("untrusted-evidence");
    let mut evidence: Vec<PathBuf> = std::fs::read_dir(dir.join("evidence"))
        .expect("evidence")
        .map(|e| e.expect("entry").path())
        .collect();
    evidence.sort();
    std::fs::remove_file(&evidence[0]).expect("removed");
    std::fs::write(&evidence[1], "edited afterwards\n").expect("edited");
    let output = results(&["list", p(&dir)]);
    assert!(output.status.success());
    assert_eq!(
        stdout(&output).matches("[EVIDENCE NOT VERIFIED]").count(),
        2
    );
    let chart = dir.join("chart.svg");
    for args in [
        vec!["show", p(&dir)],
        vec!["export", p(&dir)],
        vec!["plot", p(&dir), "-o", p(&chart)],
    ] {
        let output = results(&args);
        assert!(output.status.success(), "{args:?}");
        let message = stderr(&output);
        assert!(message.contains("is missing"), "{args:?}: {message}");
        assert!(
            message.contains("does not match its digest"),
            "{args:?}: {message}"
        );
    }
}

/// Finding 8: a metric of 1e200 prints in scientific notation, and the chart refuses
/// it by name instead of hanging (PNG) or writing `inf` coordinates (SVG).
#[test]
fn extreme_values_print_short_and_are_not_plotted() {
    let dir = sweep("untrusted-extreme");
    for repetition in 0..2 {
        write_record(&dir, "run-1", 4, repetition, 1e200);
    }
    let output = results(&["show", p(&dir)]);
    assert!(output.status.success());
    let longest = stdout(&output).split_whitespace().map(str::len).max();
    assert!(longest < Some(40), "{}", stdout(&output));
    assert!(stdout(&output).contains("1.000e200"));
    for chart in ["chart.png", "chart.svg"] {
        let path = dir.join(chart);
        let output = results(&["plot", p(&dir), "--parameter", "streams", "-o", p(&path)]);
        assert!(!output.status.success(), "{chart}");
        assert!(stderr(&output).contains("streams=4"), "{chart}");
        assert!(!path.exists(), "{chart}");
    }
}

/// Finding 10: `-o x.jpg` wrote SVG into x.jpg; the extension now decides, and one that
/// is neither .svg nor .png is refused before anything is written.
#[test]
fn chart_formats_follow_the_file_name() {
    let dir = sweep("untrusted-format");
    let jpg = dir.join("chart.jpg");
    let output = results(&["plot", p(&dir), "-o", p(&jpg)]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("name the file .svg or .png"));
    assert!(!jpg.exists());
    let output = results(&[
        "plot",
        p(&dir),
        "-o",
        p(&dir.join("c.svg")),
        "--format",
        "png",
    ]);
    assert!(!output.status.success());
    let png = dir.join("chart.png");
    let output = results(&["plot", p(&dir), "-o", p(&png)]);
    assert!(output.status.success());
    let bytes = std::fs::read(&png).expect("written");
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let svg = dir.join("chart.svg");
    assert!(results(&["plot", p(&dir), "-o", p(&svg)]).status.success());
    assert!(
        std::fs::read_to_string(&svg)
            .expect("written")
            .starts_with("<svg")
    );
}
