//! `github://owner/repo@tag`: records and evidence uploaded as release assets through
//! GitHub's REST API, against a fake API server on loopback that records what it was
//! sent (the release lookup, then one asset upload per object, with the token as a
//! bearer token). An unknown release fails the upload with the reason, non-zero.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use perfsweep_benchmarks::execution::agent_report::sha256_hex;

const TOKEN: &str = "ghp_never-printed-0123456789";
const EVIDENCE: &str = "Connecting to host 127.0.0.1, port 5201\n";

/// One request the fake API received.
#[derive(Clone, Debug)]
struct Received {
    method: String,
    target: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// Serves GitHub's release lookup (release `v1.0.0` of `myorg/myrepo` only) and asset
/// uploads, on a free loopback port.
fn fake_github() -> (u16, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("address").port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() || line.is_empty() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let method = parts.next().unwrap_or_default().to_owned();
            let target = parts.next().unwrap_or_default().to_owned();
            let mut headers = BTreeMap::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).is_err() || header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    headers.insert(name.trim().to_lowercase(), value.trim().to_owned());
                }
            }
            let length: usize = headers
                .get("content-length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let (status, reply) = if method == "GET"
                && target == "/repos/myorg/myrepo/releases/tags/v1.0.0"
            {
                (
                    "200 OK",
                    format!(
                        "{{\"id\": 7, \"upload_url\": \"http://127.0.0.1:{port}/uploads/repos/myorg/myrepo/releases/7/assets{{?name,label}}\"}}"
                    ),
                )
            } else if method == "POST"
                && target.starts_with("/uploads/repos/myorg/myrepo/releases/7/assets?name=")
            {
                ("201 Created", "{\"state\": \"uploaded\"}".to_owned())
            } else {
                ("404 Not Found", "{\"message\": \"Not Found\"}".to_owned())
            };
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(Received {
                    method,
                    target,
                    headers,
                    body,
                });
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                reply.len()
            );
        }
    });
    (port, received)
}

fn results_dir() -> (PathBuf, String) {
    // One directory per call: the tests of this file run in parallel in one process.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("perfsweep-github-{}-{call}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("evidence")).expect("scratch");
    let sha = sha256_hex(EVIDENCE.as_bytes());
    std::fs::write(dir.join(format!("evidence/{sha}.txt")), EVIDENCE).expect("evidence");
    let record = serde_json::json!({
        "schemaVersion": "perfsweep.io/result/v1alpha1", "runId": "20261125T000000Z-abc123",
        "benchmark": {"kind": "IPerf", "name": "iperf-0"}, "workloadSpecDigest": "d",
        "spec": {}, "backend": "local", "environment": {"perfsweepVersion": "0"},
        "startedAt": "", "finishedAt": "",
        "outcome": {"status": "succeeded", "summary": "1 Gbit/s", "result": {}},
        "evidence": {"sha256": sha, "bytes": EVIDENCE.len(), "path": format!("evidence/{sha}.txt")}
    });
    std::fs::write(dir.join("iperf-0.json"), record.to_string()).expect("record");
    (dir, sha)
}

fn upload(dir: &PathBuf, uri: &str, port: u16) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["results", "upload"])
        .arg(dir)
        .args(["--export", uri, "--export-param"])
        .arg(format!("endpoint=http://127.0.0.1:{port}"))
        .env("GITHUB_TOKEN", TOKEN)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains(TOKEN), "the token was printed: {stderr}");
    output
}

#[test]
fn records_and_evidence_become_assets_of_the_tagged_release() {
    let (port, received) = fake_github();
    let (dir, sha) = results_dir();
    let output = upload(&dir, "github://myorg/myrepo@v1.0.0", port);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let received = received
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    assert!(
        received
            .iter()
            .all(|r| r.headers.get("authorization").map(String::as_str)
                == Some(&format!("Bearer {TOKEN}"))),
        "every request carries the token"
    );
    let uploads: BTreeMap<String, Vec<u8>> = received
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| {
            let name = r
                .target
                .split_once("name=")
                .map(|(_, n)| n)
                .unwrap_or_default();
            (name.to_owned(), r.body.clone())
        })
        .collect();
    let run = "20261125T000000Z-abc123";
    let names: Vec<&String> = uploads.keys().collect();
    assert_eq!(
        names,
        [
            &format!("{run}__evidence__{sha}.txt"),
            &format!("{run}__records.jsonl"),
            &format!("{run}__records.parquet"),
        ],
        "{received:?}"
    );
    assert_eq!(
        uploads[&format!("{run}__evidence__{sha}.txt")],
        EVIDENCE.as_bytes()
    );
    let line = String::from_utf8_lossy(&uploads[&format!("{run}__records.jsonl")]).into_owned();
    let record: serde_json::Value = serde_json::from_str(line.trim()).expect("a JSON record");
    assert_eq!(record["benchmark"]["name"], "iperf-0");
    assert!(uploads[&format!("{run}__records.parquet")].starts_with(b"PAR1"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unknown_release_fails_the_upload_with_the_reason() {
    let (port, _) = fake_github();
    let (dir, _) = results_dir();
    let output = upload(&dir, "github://myorg/myrepo@v9.9.9", port);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("404") && stderr.contains("no such release"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
