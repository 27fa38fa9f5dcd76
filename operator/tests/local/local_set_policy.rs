//! A local sweep makes a BenchmarkSet's own decisions as the BenchmarkSet controller
//! does: `failurePolicy: Stop` starts no child after a failure, and the set's
//! acceptance (its `Accepted` condition over every child) shows and fails the command.

use crate::local_support;

use local_support::{records, run_local, scratch, tool_or_skip};

/// Two children in order: the first asks iperf3 for a socket buffer beyond its 512 MiB
/// maximum, which iperf3 refuses (a parameter error, exit 1); the second is fine.
fn sweep(name: &str, policy: &str) -> String {
    format!(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: {name}
spec:
  failurePolicy: {policy}
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15241
  permutations:
    explicit:
      - window: 2G
      - window: 1M
"
    )
}

#[test]
fn failure_policy_stop_starts_nothing_after_the_first_failure() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("set-policy");

    let (out, output) = run_local(&dir, "stop", &sweep("stops", "Stop"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a child failed:\n{stderr}");
    let written = records(&out);
    assert_eq!(written.len(), 1, "only the first child ran:\n{stderr}");
    assert_eq!(written[0]["outcome"]["status"], "failed", "{}", written[0]);
    assert_eq!(written[0]["spec"]["window"], "2G");
    assert!(
        stderr.contains("not started: set stops stopped on a failure (failurePolicy: Stop)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("set stops: Failed: 0 succeeded, 1 failed, 1 not started"),
        "{stderr}"
    );

    // The same set under Continue runs its second child: the failure policy, not the
    // failure, is what stopped the first run.
    let (out, output) = run_local(&dir, "continue", &sweep("goes-on", "Continue"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "a child failed:\n{stderr}");
    let mut outcomes: Vec<(String, String)> = records(&out)
        .iter()
        .map(|r| {
            (
                r["spec"]["window"].as_str().unwrap_or_default().to_owned(),
                r["outcome"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    outcomes.sort();
    assert_eq!(
        outcomes,
        vec![
            ("1M".to_owned(), "succeeded".to_owned()),
            ("2G".to_owned(), "failed".to_owned())
        ],
        "{stderr}"
    );
    assert!(
        stderr.contains("set goes-on: Failed: 1 succeeded, 1 failed"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_set_level_criterion_that_fails_shows_and_fails_the_command() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("set-acceptance");
    // No loopback link carries a petabit per second: every child is rejected.
    let set = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: gated
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15242
  acceptance:
    - metric: received_bits_per_second
      min: 1.0e15
";
    let (out, output) = run_local(&dir, "gated", set);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        output.status.code(),
        Some(3),
        "ran, but NOT ACCEPTED:\n{stderr}"
    );
    let records = records(&out);
    assert_eq!(records.len(), 1);
    assert_eq!(
        records[0]["outcome"]["status"], "succeeded",
        "{}",
        records[0]
    );
    assert!(
        stderr.contains("set gated: Accepted=False (CriteriaNotMet): 0 accepted, 1 rejected"),
        "{stderr}"
    );
    assert!(stderr.contains("received_bits_per_second"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
