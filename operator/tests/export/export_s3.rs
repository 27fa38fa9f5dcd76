//! Export sinks against a real S3-compatible server: moto's server mode (PyPI
//! `moto[server]`), started per test on a free port. The records and evidence of a
//! results directory are uploaded by the `perfsweep` binary, then read back (through
//! object_store, and with `perfsweep results list/show s3://...`) and compared byte for
//! byte; a proxy that fails the first requests with 503 shows
//! the retries; an unreachable endpoint shows the local copy is kept.

use crate::support;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use perfsweep::export::Store;
use perfsweep_benchmarks::execution::agent_report::sha256_hex;

pub(crate) const SECRET: &str = "s3cr3t-never-printed-0123456789";
const EVIDENCE: &str = "Connecting to host 127.0.0.1, port 5201\n[  5] 0.00-1.00 sec 1.1 GBytes\n";

fn create_bucket(port: u16, bucket: &str) {
    support::s3::Moto::create_bucket_at(port, bucket);
}

/// The bucket through perfsweep's own object_store client, with the test's credentials.
fn store(port: u16, bucket: &str, prefix: &str) -> Store {
    support::s3::store(port, bucket, prefix, SECRET)
}

/// A results directory as `perfsweep run --output` writes it: one record, one evidence file.
pub(crate) fn results_dir(name: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("perfsweep-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("evidence")).expect("scratch directory");
    let sha256 = sha256_hex(EVIDENCE.as_bytes());
    std::fs::write(dir.join(format!("evidence/{sha256}.txt")), EVIDENCE).expect("evidence");
    let record = serde_json::json!({
        "schemaVersion": "perfsweep.io/result/v1alpha1",
        "runId": "20260101T000000Z-abc123",
        "benchmark": {"kind": "IPerf", "name": "iperf-0", "set": "sweep", "repetition": 0},
        "workloadSpecDigest": "digest",
        "spec": {"duration": 1},
        "backend": "local",
        "environment": {"hosts": ["here"], "perfsweepVersion": "0.1.0", "command": ["iperf3"]},
        "startedAt": "2026-01-01T00:00:00Z",
        "finishedAt": "2026-01-01T00:00:01Z",
        "outcome": {"status": "succeeded", "summary": "1 Gbit/s", "result": {},
                    "metrics": [{"name": "received_bits_per_second", "value": 1e9, "better": "higher"}]},
        "evidence": {"sha256": sha256, "bytes": EVIDENCE.len(), "path": format!("evidence/{sha256}.txt")}
    });
    std::fs::write(
        dir.join("iperf-0.json"),
        serde_json::to_string_pretty(&record).expect("json"),
    )
    .expect("record");
    (dir, sha256)
}

pub(crate) fn upload(dir: &Path, uri: &str, endpoint_port: u16, attempts: u32) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["results", "upload"])
        .arg(dir)
        .args(["--export", uri, "--export-param"])
        .arg(format!("endpoint=http://127.0.0.1:{endpoint_port}"))
        .args(["--export-attempts", &attempts.to_string()])
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}");
    assert!(!stderr.contains(SECRET), "the secret key was printed");
    output
}

/// The uploaded objects match the local files: evidence byte for byte, JSON Lines one
/// record per line equal to the record file, Parquet a Parquet file.
async fn assert_uploaded(port: u16, bucket: &str, prefix: &str, dir: &Path, sha256: &str) {
    let run = "20260101T000000Z-abc123";
    let store = store(port, bucket, prefix);
    let names = store.list().await.expect("the listing");
    for key in [
        format!("{run}/evidence/{sha256}.txt"),
        format!("{run}/records.jsonl"),
        format!("{run}/records.parquet"),
    ] {
        assert!(names.contains(&key), "{key} missing: {names:?}");
    }
    let evidence = store
        .get(&format!("{run}/evidence/{sha256}.txt"))
        .await
        .expect("the evidence");
    assert_eq!(evidence.as_ref(), EVIDENCE.as_bytes());
    let lines = store
        .get(&format!("{run}/records.jsonl"))
        .await
        .expect("the records");
    let lines = String::from_utf8(lines.to_vec()).expect("UTF-8");
    assert_eq!(lines.lines().count(), 1);
    let uploaded: serde_json::Value = serde_json::from_str(lines.trim_end()).expect("JSON");
    let local: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("iperf-0.json")).expect("record"))
            .expect("JSON");
    assert_eq!(uploaded, local);
    let parquet = store
        .get(&format!("{run}/records.parquet"))
        .await
        .expect("the table");
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"));
}

#[tokio::test]
async fn records_and_evidence_upload_to_an_s3_compatible_server_and_read_back_identically() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    create_bucket(moto.port, "perf-results");
    let (dir, sha256) = results_dir("export-s3");
    let output = upload(&dir, "s3://perf-results/nightly/", moto.port, 3);
    assert!(output.status.success());
    assert_uploaded(moto.port, "perf-results", "nightly", &dir, &sha256).await;

    // `perfsweep results list/show` read the same location back.
    let endpoint = format!("endpoint=http://127.0.0.1:{}", moto.port);
    for command in ["list", "show"] {
        let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
            .args(["results", command, "s3://perf-results/nightly"])
            .args(["--location-param", &endpoint])
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .output()
            .expect("perfsweep runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "results {command}: {stderr}");
        assert!(
            stdout.contains("iperf-0") || stdout.contains("IPerf"),
            "{stdout}"
        );
        assert!(
            stdout.contains("received_bits_per_second") || command == "list",
            "{stdout}"
        );
        assert!(!stderr.contains(SECRET));
    }
}

/// Forwards to `target`, answering the first `failures` connections with 503 instead.
fn flaky_proxy(target: u16, failures: u32) -> (u16, Arc<AtomicU32>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("proxy listens");
    let port = listener.local_addr().expect("address").port();
    let failed = Arc::new(AtomicU32::new(0));
    let counter = failed.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(mut client) = client else { continue };
            if counter.load(Ordering::SeqCst) < failures {
                counter.fetch_add(1, Ordering::SeqCst);
                support::s3::read_request(&mut client);
                let _ = client.write_all(
                    b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                continue;
            };
            let (mut client_in, mut server_out) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            let (mut server_in, mut client_out) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut client_in, &mut server_out);
                let _ = server_out.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut server_in, &mut client_out);
                let _ = client_out.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, failed)
}

#[tokio::test]
async fn a_failing_server_is_retried_with_backoff_until_the_upload_goes_through() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    create_bucket(moto.port, "flaky");
    let (proxy, failed) = flaky_proxy(moto.port, 2);
    let (dir, sha256) = results_dir("export-retry");
    let output = upload(&dir, "s3://flaky/p", proxy, 4);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert_eq!(
        failed.load(Ordering::SeqCst),
        2,
        "the proxy failed two requests"
    );
    assert!(stderr.contains("attempt 1/4 failed") && stderr.contains("HTTP 503"));
    assert!(stderr.contains("2 retried attempt(s)"), "{stderr}");
    assert_uploaded(moto.port, "flaky", "p", &dir, &sha256).await;
}

#[test]
fn an_unreachable_server_fails_after_bounded_retries_and_keeps_the_local_copy() {
    // No moto needed: nothing listens on the port.
    let port = support::s3::free_port();
    let (dir, _) = results_dir("export-unreachable");
    let output = upload(&dir, "s3://nowhere/p", port, 2);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("attempt 2 of 2"), "{stderr}");
    assert!(stderr.contains("the results are kept in"), "{stderr}");
    assert!(stderr.contains("perfsweep results upload"), "{stderr}");
    assert!(dir.join("iperf-0.json").is_file());
}

#[test]
fn export_destinations_are_checked_before_anything_runs() {
    let run = |args: &[&str], env_secret: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_perfsweep"));
        command
            .args(["run", "--local", "../examples/llm-local.yaml"])
            .args(args)
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY");
        if env_secret {
            command
                .env("AWS_ACCESS_KEY_ID", "id")
                .env("AWS_SECRET_ACCESS_KEY", SECRET);
        }
        let output = command.output().expect("perfsweep runs");
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    assert!(run(&["--export", "az://acct/c/p"], false).contains("AZURE_STORAGE_ACCOUNT_KEY"));
    assert!(run(&["--export", "pvc://claim/p"], false).contains("in-cluster"));
    assert!(run(&["--export", "s3://b/p"], false).contains("AWS_ACCESS_KEY_ID"));
    let stderr = run(
        &["--export", "s3://b/p", "--export-param", "secretName=x"],
        true,
    );
    assert!(
        stderr.contains("secretName is for the operator"),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET));
}

/// The whole journey: `perfsweep run --local --export s3://...` runs a small LLM sweep
/// against the built-in simulator, writes the local copy, and uploads it.
#[tokio::test]
async fn a_local_run_exports_its_records_and_evidence_to_s3() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    create_bucket(moto.port, "runs");
    let dir =
        std::env::temp_dir().join(format!("perfsweep-test-export-run-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let sweep = dir.join("llm.yaml");
    std::fs::write(
        &sweep,
        format!(
            "apiVersion: perfsweep.io/v1alpha1\nkind: LLMInference\nmetadata:\n  name: export-llm\n\
             spec:\n  endpoint:\n    simulator:\n      ttftMillis: 5\n      itlMillis: 1\n      port: {}\n\
             \x20 trafficScenarios: [\"D(16,4)\"]\n  numConcurrency: [1]\n  maxRequestsPerIteration: 4\n",
            support::s3::free_port()
        ),
    )
    .expect("sweep file");
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["run", "--local"])
        .arg(&sweep)
        .arg("--output")
        .arg(dir.join("out"))
        .args(["--export", "s3://runs/ci", "--export-param"])
        .arg(format!("endpoint=http://127.0.0.1:{}", moto.port))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains(SECRET));
    assert!(stderr.contains("exported 3 object(s)"), "{stderr}");
    let names = store(moto.port, "runs", "ci")
        .list()
        .await
        .expect("the listing");
    assert!(
        names.iter().any(|n| n.ends_with("/records.jsonl")),
        "{names:?}"
    );
    assert!(
        names.iter().any(|n| n.ends_with("/records.parquet")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n.contains("/evidence/")), "{names:?}");
}
