//! The local backend runs a real iperf3 sweep, and every recorded number is the one
//! iperf3 itself reported in its JSON (kept as evidence beside the record).

use crate::local_support;

use local_support::{perfsweep, records, run_local_sweep, scratch, tool_or_skip};

use std::path::Path;

use serde_json::Value;

const SWEEP: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: local-iperf
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15201
  repetitions: 2
  permutations:
    product:
      streams: [1, 2]
";

#[test]
fn a_local_iperf_sweep_reports_what_iperf3_measured() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("iperf");
    let (out, stdout) = run_local_sweep(&dir, "results", SWEEP);
    assert!(
        stdout.contains("BENCHMARK") && stdout.contains("Gbit/s"),
        "results table:\n{stdout}"
    );

    let records = records(&out);
    assert_eq!(records.len(), 4, "2 permutations × 2 repetitions");
    let mut streams_seen = Vec::new();
    for record in &records {
        assert_eq!(record["schemaVersion"], "perfsweep.io/result/v1alpha1");
        assert_eq!(record["backend"], "local");
        assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
        let streams = record["spec"]["streams"].as_u64().expect("streams in spec");
        streams_seen.push(streams);
        let evidence_path = out.join(record["evidence"]["path"].as_str().expect("evidence path"));
        let raw = std::fs::read_to_string(&evidence_path).expect("evidence file");
        assert_eq!(
            perfsweep_benchmarks::execution::agent_report::sha256_hex(raw.as_bytes()),
            record["evidence"]["sha256"].as_str().expect("digest"),
            "evidence matches its digest"
        );
        let iperf: Value = serde_json::from_str(&raw).expect("iperf3 --json output");
        let measured = iperf
            .pointer("/end/sum_received/bits_per_second")
            .and_then(Value::as_f64)
            .expect("iperf3 reports received bits/s");
        let recorded = record["outcome"]["result"]["receivedBitsPerSecond"]
            .as_f64()
            .expect("recorded received bits/s");
        assert_eq!(recorded, measured, "the record holds iperf3's own number");
        // The record names the build that measured: iperf3's own answer to --version,
        // whose version the JSON output also carries.
        let tool_version = record["environment"]["toolVersions"]["iperf3"]
            .as_str()
            .expect("iperf3's version in the record");
        let json_version = iperf
            .pointer("/start/version")
            .and_then(Value::as_str)
            .expect("iperf3 names its version in its JSON");
        let number = json_version.trim_start_matches("iperf ");
        assert!(
            tool_version.contains(number),
            "{tool_version:?} names iperf3 {number}"
        );
        assert!(measured > 0.0);
        // The record says which interface carried the bytes (here the loopback the
        // local stand-in nodes share), and the kernel counted at least what the server
        // received. Not what the client wrote: up to a send buffer of it (204,440 B in
        // one run on a loaded machine) may still be queued when the client exits and its
        // agent reads the counters.
        let network = &record["environment"]["networkUse"];
        let carrier = network["interface"]
            .as_str()
            .expect("the data address's interface");
        let sent_on_carrier = network["interfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["name"] == carrier)
            .and_then(|i| i["txBytes"].as_u64())
            .unwrap_or_else(|| panic!("no counters for {carrier}: {network}"));
        let received = record["outcome"]["result"]["receivedBytes"]
            .as_u64()
            .expect("received bytes");
        assert!(received > 0, "{}", record["outcome"]["result"]);
        assert!(
            sent_on_carrier >= received,
            "{carrier} sent {sent_on_carrier} B, less than iperf3's server received, {received}: {network}"
        );
        let iperf_streams = iperf
            .pointer("/start/test_start/num_streams")
            .and_then(Value::as_u64);
        assert_eq!(
            iperf_streams,
            Some(streams),
            "iperf3 ran with the permutation's streams"
        );
    }
    streams_seen.sort_unstable();
    assert_eq!(streams_seen, vec![1, 1, 2, 2]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_tool_names_its_debian_package() {
    let dir = scratch("missing");
    let spec = dir.join("iperf.yaml");
    std::fs::write(
        &spec,
        "apiVersion: perfsweep.io/v1alpha1\nkind: IPerf\nmetadata: {name: x}\nspec: {duration: 1}\n",
    )
    .expect("spec written");
    let output = perfsweep()
        .args(["run", "--local"])
        .arg(&spec)
        .env("PATH", &dir)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("install the Debian package iperf3"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parse_prints_the_structured_result_and_rejects_garbage() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../benchmarks/testdata/iperf");
    let file = std::fs::read_dir(&fixture)
        .expect("iperf fixtures")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("tcp"))
                && p.extension().is_some_and(|e| e == "json")
        })
        .expect("a TCP iperf3 fixture");
    let output = perfsweep()
        .args(["parse", "iperf"])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let parsed: Value = serde_json::from_slice(&output.stdout).expect("JSON output");
    let raw: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("fixture")).expect("JSON");
    assert_eq!(
        parsed["result"]["receivedBitsPerSecond"].as_f64(),
        raw.pointer("/end/sum_received/bits_per_second")
            .and_then(Value::as_f64)
    );

    let garbage = scratch("garbage").join("garbage.txt");
    std::fs::write(&garbage, "{\"start\": {\"truncated").expect("written");
    let output = perfsweep()
        .args(["parse", "iperf"])
        .arg(&garbage)
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(!String::from_utf8_lossy(&output.stderr).contains("panicked"));
}
