//! `endpoint.tls.caFile` end to end: `perfsweep run --local` of an LLMInference against
//! a `perfsweep sim` process serving HTTPS with a self-signed certificate. Trusted
//! through `caFile` the sweep measures; without it the load generator refuses the
//! endpoint before any load.

use crate::local_support;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use local_support::{perfsweep, records, run_local, run_local_sweep, scratch, self_signed_or_skip};

/// The simulator process, killed when the test ends however it ends.
struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sweep(name: &str, port: u16, tls: &str) -> String {
    format!(
        r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: {name}
spec:
  endpoint:
    url: https://127.0.0.1:{port}
    modelName: perfsweep-sim
{tls}
  trafficScenarios: ["D(16,4)"]
  numConcurrency: [2]
  maxRequestsPerIteration: 6
  warmupRequests: 0
"#
    )
}

#[test]
fn a_local_run_trusts_a_self_signed_simulator_through_ca_file() {
    let dir = scratch("llm-tls");
    let Some((cert, key)) = self_signed_or_skip(&dir) else {
        return;
    };
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = perfsweep()
        .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--ttft-ms", "5", "--itl-ms", "1"])
        .arg("--tls-cert")
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("perfsweep sim starts");
    let _sim = Sim(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the simulator never listened");
        std::thread::sleep(Duration::from_millis(50));
    }

    let tls = format!("    tls:\n      caFile: {}", cert.display());
    let (out, _) = run_local_sweep(&dir, "trusted", &sweep("trusted", port, &tls));
    let trusted = records(&out);
    assert_eq!(trusted.len(), 1);
    let record = &trusted[0];
    assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
    let iteration = &record["outcome"]["result"]["iterations"][0];
    assert_eq!(iteration["requests"], 6, "{iteration}");
    assert_eq!(iteration["errors"], 0, "{iteration}");
    assert_eq!(iteration["outputTokensMean"], 4.0, "{iteration}");

    // The same endpoint without the CA: not in the system store, so refused.
    let (out, output) = run_local(&dir, "untrusted", &sweep("untrusted", port, ""));
    assert!(
        !output.status.success(),
        "an untrusted certificate was accepted"
    );
    let untrusted = records(&out);
    assert_eq!(untrusted.len(), 1);
    assert_eq!(untrusted[0]["outcome"]["status"], "failed", "{untrusted:?}");
    // The tool itself failed: not an output that could not be read.
    assert_eq!(
        untrusted[0]["outcome"]["reason"], "ToolFailed",
        "{untrusted:?}"
    );
    // The load generator reports why it could not start, and the record keeps that.
    let message = untrusted[0]["outcome"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(
        message.contains("certificate") && message.contains("UnknownIssuer"),
        "the failure names the untrusted certificate: {message}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
