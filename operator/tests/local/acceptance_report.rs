//! An acceptance report from a real local sweep: two tiny iperf3 sets over loopback, one
//! whose criteria any loopback run meets (template-level criteria) and one whose
//! set-level criterion no machine meets (1 Pbit/s), then `perfsweep results report`.

use crate::local_support;

use local_support::{perfsweep, scratch, tool_or_skip};

use std::path::{Path, PathBuf};
use std::process::Output;

/// Any loopback run meets these: at least 1 kbit/s, at least 1% of 1 Mbit/s.
const PASSING: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: gate-pass
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15331
      acceptance:
        - metric: received_bits_per_second
          min: 1000
        - metric: sent_bits_per_second
          minFractionOf: {value: 1.0e6, fraction: 0.01}
  repetitions: 2
  permutations:
    product:
      streams: [1, 2]
";

/// No machine meets this: 1 Pbit/s, as a set-level criterion.
const FAILING: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: gate-fail
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15341
  repetitions: 1
  acceptance:
    - metric: received_bits_per_second
      min: 1.0e15
";

/// Runs `sweep`, which must end with the exit code `expected` (0: accepted, 3: ran
/// fine, not accepted).
fn run(sweep: &str, dir: &Path, name: &str, expected: i32) -> PathBuf {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, sweep).expect("sweep written");
    let out = dir.join(name);
    let output = perfsweep()
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&file)
        .output()
        .expect("perfsweep runs");
    assert_eq!(
        output.status.code(),
        Some(expected),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

fn report(records: &Path, output: &Path) -> Output {
    let result = perfsweep()
        .args(["results", "report"])
        .arg(records)
        .arg("--output")
        .arg(output)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep results report {}\n{}",
        records.display(),
        String::from_utf8_lossy(&result.stderr)
    );
    result
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

#[test]
fn acceptance_report_of_a_local_sweep() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("acceptance-report");
    let pass = run(PASSING, &dir, "pass", 0);
    let fail = run(FAILING, &dir, "fail", 3);

    // The passing sweep: exit 0, every run accepted, a chart per swept parameter.
    let out = dir.join("report-pass");
    let result = report(&pass, &out);
    assert!(result.status.success(), "a passing sweep exits 0");
    let md = read(&out.join("report.md"));
    eprintln!("{md}");
    assert!(
        md.contains("**ACCEPTED: 4 accepted, 0 rejected, 0 failed, 0 without criteria**"),
        "{md}"
    );
    assert!(
        md.contains("| IPerf | received_bits_per_second ≥ 1k |"),
        "{md}"
    );
    assert!(
        md.contains("| IPerf | sent_bits_per_second ≥ 1% of 1M (10k) |"),
        "{md}"
    );
    assert!(
        md.contains("![IPerf: received_bits_per_second by streams](iperf-received_bits_per_second-by-streams.svg)"),
        "{md}"
    );
    let svg = read(&out.join("iperf-received_bits_per_second-by-streams.svg"));
    assert!(svg.starts_with("<?xml") || svg.starts_with("<svg"), "{svg}");
    // Lineage: every record's spec digest and evidence digest, and the evidence exists.
    for entry in std::fs::read_dir(&pass).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let record: serde_json::Value = serde_json::from_str(&read(&path)).unwrap();
        let digest = record["workloadSpecDigest"].as_str().unwrap();
        let evidence = record["evidence"]["path"].as_str().unwrap();
        let sha = record["evidence"]["sha256"].as_str().unwrap();
        assert!(md.contains(digest) && md.contains(evidence) && md.contains(sha));
        assert!(pass.join(evidence).is_file(), "{evidence}");
        // Criteria are in the spec the record keeps, but not in the workload digest.
        assert!(record["spec"]["acceptance"].is_array());
    }
    let html = read(&out.join("report.html"));
    assert!(html.contains("<td class=\"ok\">ACCEPTED</td>"));
    assert!(html.contains("<svg"), "charts are inlined in the HTML");

    // The failing sweep: exit 3 as `run` exits, the criterion and by how much it was missed.
    let out = dir.join("report-fail");
    let result = report(&fail, &out);
    assert_eq!(
        result.status.code(),
        Some(3),
        "a rejected sweep's report exits 3, as its run does"
    );
    let md = read(&out.join("report.md"));
    eprintln!("{md}");
    assert!(
        md.contains("**NOT ACCEPTED: 0 accepted, 1 rejected"),
        "{md}"
    );
    assert!(
        md.contains("| REJECTED | 1 of 1 criteria not met: received_bits_per_second = "),
        "{md}"
    );
    assert!(md.contains("is below the minimum 1P by "), "{md}");
    let html = read(&out.join("report.html"));
    assert!(html.contains("<td class=\"bad\">REJECTED</td>"));

    // Both together: not accepted, all five runs listed.
    let out = dir.join("report-both");
    let result = report(&dir, &out);
    assert_eq!(result.status.code(), Some(3));
    let md = read(&out.join("report.md"));
    assert!(
        md.contains("**NOT ACCEPTED: 4 accepted, 1 rejected"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
