//! `endpoint.tls.caFile` end to end: `perfsweep run --local` of an LLMInference against
//! a `perfsweep sim` process serving HTTPS with a self-signed certificate. Trusted
//! through `caFile` the sweep measures; without it the load generator refuses the
//! endpoint before any load.

mod local_support;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use local_support::{perfsweep, records, run_local_sweep, scratch, self_signed};

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
    let (cert, key) = match self_signed(&dir) {
        Ok(files) => files,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI installs openssl: {why}"
            );
            assert!(
        !output.status.success(),
        "an untrusted certificate was accepted"
    );
    assert_eq!(untrusted.len(), 1);
    assert_eq!(untrusted[0]["outcome"]["status"], "failed", "{untrusted:?}");
    // The record keeps the exit, not the tool's stderr; the in-process test
    // (llm_sim_loadgen) checks that the error names the certificate.
    assert_eq!(
        untrusted[0]["outcome"]["reason"], "ToolFailed",
        "{untrusted:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
