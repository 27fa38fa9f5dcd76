//! The local backend runs a real distributed fio sweep — two `fio --server` workers on
//! their own loopback addresses, driven by one `fio --client` — and every recorded number
//! is the one fio itself reported in its JSON (kept as evidence beside the record).

use crate::local_support;

use local_support::{perfsweep, records, run_local_sweep, scratch, tool_or_skip};

use std::path::Path;

use serde_json::Value;

// psync and direct: 0 work on any filesystem (tmpfs has no O_DIRECT, libaio may be
// missing); small files and 1 s runs keep the sweep to seconds.
const SWEEP: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: local-fio
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: Fio
    spec:
      numWorkers: 2
      fioPort: 18765
      ioengine: psync
      direct: 0
      size: 16M
      runtime: 1s
      emptyDir: true
  permutations:
    product:
      rw: [randread, randwrite]
      bs: [4k, 64k]
";

fn number(value: &Value, pointer: &str) -> f64 {
    value
        .pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer} in {value}"))
}

#[test]
fn a_local_fio_sweep_reports_what_fio_measured_on_two_workers() {
    if !tool_or_skip("fio", "fio") {
        return;
    }
    let dir = scratch("fio");
    let (out, stdout) = run_local_sweep(&dir, "results", SWEEP);
    assert!(
        stdout.contains("BENCHMARK") && stdout.contains("IOPS"),
        "results table:\n{stdout}"
    );

    let records = records(&out);
    assert_eq!(records.len(), 4, "2 rw × 2 bs");
    let mut seen = Vec::new();
    for record in &records {
        assert_eq!(record["backend"], "local");
        assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
        let rw = record["spec"]["rw"]
            .as_str()
            .expect("rw in spec")
            .to_owned();
        let bs = record["spec"]["bs"]
            .as_str()
            .expect("bs in spec")
            .to_owned();
        let command = record["environment"]["command"].to_string();
        assert!(command.contains("--client=fio-hosts.list"), "{command}");

        // The evidence is fio's own JSON, intact.
        let evidence_path = out.join(record["evidence"]["path"].as_str().expect("evidence path"));
        let raw = std::fs::read_to_string(&evidence_path).expect("evidence file");
        assert_eq!(
            perfsweep_benchmarks::execution::agent_report::sha256_hex(raw.as_bytes()),
            record["evidence"]["sha256"].as_str().expect("digest"),
        );
        let start = raw.find('{').expect("JSON in fio's output");
        let fio: Value = serde_json::from_str(&raw[start..]).expect("fio --output-format=json");
        let entries = fio["client_stats"].as_array().expect("client_stats");

        // fio ran the permutation.
        let options = &fio["global options"];
        assert_eq!(options["rw"], rw.as_str(), "{options}");
        assert_eq!(options["bs"], bs.as_str(), "{options}");

        // The aggregate is fio's own `All clients` entry, number for number.
        let all = entries
            .iter()
            .find(|e| e["jobname"] == "All clients")
            .expect("fio's All clients entry");
        let direction = if rw.contains("read") { "read" } else { "write" };
        let other = if direction == "read" { "write" } else { "read" };
        let result = &record["outcome"]["result"];
        assert_eq!(
            number(result, &format!("/{direction}/bandwidthBytesPerSecond")),
            number(all, &format!("/{direction}/bw_bytes")),
            "{rw} {bs}: bandwidth"
        );
        assert_eq!(
            number(result, &format!("/{direction}/iops")),
            number(all, &format!("/{direction}/iops")),
            "{rw} {bs}: IOPS"
        );
        assert_eq!(
            number(result, &format!("/{direction}/ioBytes")),
            number(all, &format!("/{direction}/io_bytes")),
        );
        // Latencies are converted from fio's nanoseconds (to within rounding).
        let clat = number(result, &format!("/{direction}/clatMeanMicros"));
        let fio_clat = number(all, &format!("/{direction}/clat_ns/mean")) / 1000.0;
        assert!(
            (clat - fio_clat).abs() <= 1e-9 * fio_clat.abs(),
            "{clat} vs {fio_clat}"
        );
        assert!(number(result, &format!("/{direction}/bandwidthBytesPerSecond")) > 0.0);
        assert!(
            result.get(other).is_none(),
            "{rw} did no {other}s: {result}"
        );

        // Two workers really ran: one entry per server, each on its own address, with
        // I/O of its own that adds up to the aggregate.
        let workers = result["workers"].as_array().expect("per-worker entries");
        assert_eq!(workers.len(), 2, "{result}");
        let mut hosts: Vec<&str> = workers
            .iter()
            .map(|w| w["host"].as_str().expect("worker host"))
            .collect();
        hosts.sort_unstable();
        hosts.dedup();
        assert_eq!(hosts.len(), 2, "two distinct servers: {hosts:?}");
        assert!(hosts.iter().all(|h| h.starts_with("127.")), "{hosts:?}");
        let mut sum = 0.0;
        for worker in workers {
            let host = worker["host"].as_str().unwrap_or_default();
            let entry = entries
                .iter()
                .find(|e| e["hostname"] == host && e["jobname"] != "All clients")
                .unwrap_or_else(|| panic!("fio has an entry for {host}"));
            let bw = number(worker, &format!("/{direction}/bandwidthBytesPerSecond"));
            assert_eq!(bw, number(entry, &format!("/{direction}/bw_bytes")));
            assert!(bw > 0.0, "worker {host} did I/O");
            sum += number(worker, &format!("/{direction}/ioBytes"));
        }
        assert_eq!(sum, number(all, &format!("/{direction}/io_bytes")));
        seen.push(format!("{rw}/{bs}"));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "randread/4k",
            "randread/64k",
            "randwrite/4k",
            "randwrite/64k"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn prefill_and_a_raw_job_file_run_for_real() {
    if !tool_or_skip("fio", "fio") {
        return;
    }
    let dir = scratch("fio-prefill");
    let spec = dir.join("fio.yaml");
    std::fs::write(
        &spec,
        r"
apiVersion: perfsweep.io/v1alpha1
kind: Fio
metadata: {name: prefill}
spec:
  numWorkers: 1
  fioPort: 18766
  ioengine: psync
  direct: 0
  size: 8M
  runtime: 1s
  rw: read
  bs: 1M
  prefill: true
---
apiVersion: perfsweep.io/v1alpha1
kind: Fio
metadata: {name: jobfile}
spec:
  numWorkers: 2
  fioPort: 18767
  jobFile: |
    [global]
    ioengine=psync
    size=4M
    directory=/nonexistent
    [seqwrite]
    rw=write
    bs=128k
",
    )
    .expect("spec written");
    let out = dir.join("results");
    let output = perfsweep()
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&spec)
        .output()
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed:\n{stdout}\n{stderr}");
    let records = records(&out);
    assert_eq!(records.len(), 2);
    for record in &records {
        assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
    }
    // The raw job file ran in the volume (its `directory` was replaced), on both workers.
    let jobfile = &records[0]["outcome"]["result"];
    assert_eq!(jobfile["workers"].as_array().map(Vec::len), Some(2));
    assert_eq!(
        jobfile["write"]["ioBytes"].as_u64(),
        Some(2 * 4 * 1024 * 1024),
        "{jobfile}"
    );
    let prefill = &records[1]["outcome"]["result"];
    assert!(
        prefill["read"]["bandwidthBytesPerSecond"].as_u64() > Some(0),
        "{prefill}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn parse_reads_fio_client_output() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../benchmarks/testdata/fio/client-server-2hosts-group-reporting.json");
    let output = perfsweep()
        .args(["parse", "fio"])
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
    let all = raw["client_stats"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["jobname"] == "All clients"))
        .expect("All clients");
    let direction = if parsed["result"]["read"].is_object() {
        "read"
    } else {
        "write"
    };
    assert_eq!(
        parsed["result"][direction]["bandwidthBytesPerSecond"].as_f64(),
        all[direction]["bw_bytes"].as_f64()
    );
    assert_eq!(
        parsed["result"]["workers"].as_array().map(Vec::len),
        Some(2)
    );
}
