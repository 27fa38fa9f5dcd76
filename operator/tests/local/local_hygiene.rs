//! Local runs that cannot be broken by being run twice, signalled or pointed at an
//! earlier run's results, and that say whether the results were accepted: the real
//! binary, real iperf3 and fio.

use crate::local_support;

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use local_support::{perfsweep, records, scratch, tool_or_skip};
use perfsweep::local::tree;
use serde_json::Value;

/// An iperf3 sweep of `streams` (one benchmark each) on `port`.
fn iperf_sweep(name: &str, port: u16, streams: &str, duration: u32) -> String {
    format!(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: {name}
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: {duration}
      port: {port}
  permutations:
    product:
      streams: {streams}
"
    )
}

/// Starts `perfsweep run --local FILE --output OUT` as the leader of a session of its
/// own, so every process it starts can be found by session id afterwards.
fn start_in_own_session(dir: &Path, sweep: &str, out: &str, extra: &[&str]) -> Child {
    let file = dir.join(format!("{out}.yaml"));
    std::fs::write(&file, sweep).expect("sweep written");
    let mut command = perfsweep();
    command
        .args(["run", "--local", "--output"])
        .arg(dir.join(out))
        .args(extra)
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe and the closure allocates nothing.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn().expect("perfsweep starts")
}

/// Waits for `child` up to `limit`; kills it and fails the test beyond.
fn finish(mut child: Child, limit: Duration, what: &str) -> (i32, String, String) {
    let started = Instant::now();
    loop {
        match child.try_wait().expect("waitable") {
            Some(_) => break,
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let output = child.wait_with_output().expect("output");
                panic!(
                    "{what} still running after {limit:?}:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let output = child.wait_with_output().expect("output");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Processes (not zombies) of session `session`.
fn alive_in_session(session: u32) -> Vec<tree::Stat> {
    let session = i32::try_from(session).expect("a pid");
    tree::processes()
        .into_iter()
        .filter(|p| p.session == session && p.state != 'Z')
        .collect()
}

/// Polls `done` every 50 ms up to `limit`.
fn wait_for(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn record_count(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .count()
    })
}

#[test]
fn two_local_sweeps_at_once_both_finish() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("concurrent");
    // The same port in both: each run's servers bind their own loopback addresses.
    let sweep = iperf_sweep("twice", 15611, "[1, 2]", 1);
    let started = Instant::now();
    let first = start_in_own_session(&dir, &sweep, "a", &[]);
    let second = start_in_own_session(&dir, &sweep, "b", &[]);
    let (code_a, _, err_a) = finish(first, Duration::from_mins(2), "the first run");
    let (code_b, _, err_b) = finish(second, Duration::from_mins(2), "the second run");
    eprintln!("both runs took {:.1}s", started.elapsed().as_secs_f64());
    assert_eq!(code_a, 0, "{err_a}");
    assert_eq!(code_b, 0, "{err_b}");
    for out in ["a", "b"] {
        let records = records(&dir.join(out));
        assert_eq!(records.len(), 2, "{out}: one record per benchmark");
        for record in &records {
            assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep is signalled once its first benchmark is recorded: it exits with 128 + the
/// signal, says what it kept, leaves that record and its evidence, and no process of
/// the run outlives it.
fn signalled_mid_run(dir: &Path, sweep: &str, signal: libc::c_int, name: &str, tool: &str) {
    let child = start_in_own_session(dir, sweep, "out", &[]);
    let session = child.id();
    let out = dir.join("out");
    wait_for(Duration::from_secs(90), "the first record", || {
        record_count(&out) >= 1
    });
    // The next benchmark's tool is running.
    wait_for(
        Duration::from_secs(30),
        "the second benchmark's tool",
        || {
            std::fs::read_dir(&out).is_ok()
                && tree::processes().iter().any(|p| {
                    p.session == i32::try_from(session).unwrap_or(-1)
                        && std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                            .is_ok_and(|comm| comm.trim() == tool)
                })
        },
    );
    let before: BTreeSet<i32> = alive_in_session(session).iter().map(|p| p.pid).collect();
    assert!(before.len() > 2, "agents and tools run: {before:?}");
    // SAFETY: sending a signal to our own child touches no memory.
    unsafe { libc::kill(i32::try_from(session).expect("pid"), signal) };
    let (code, stdout, stderr) = finish(child, Duration::from_secs(30), "the signalled run");
    assert_eq!(code, 128 + signal, "{stderr}");
    assert!(
        stderr.contains(&format!("interrupted by {name}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("kept the records of the 1 finished benchmark(s)"),
        "{stderr}"
    );
    assert!(stdout.contains("BENCHMARK"), "the summary table: {stdout}");
    // Nothing of the run is left: not in its session, not among the pids seen running.
    std::thread::sleep(Duration::from_millis(200));
    let left = alive_in_session(session);
    assert!(left.is_empty(), "processes of the run survived: {left:?}");
    let still: Vec<i32> = before
        .iter()
        .copied()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|t| tree::parse_stat(&t))
                .is_some_and(|p| {
                    p.state != 'Z' && p.session == i32::try_from(session).unwrap_or(-1)
                })
        })
        .collect();
    assert!(still.is_empty(), "{still:?} survived");
    // The finished benchmark's record and evidence are on disk, whole.
    let kept = records(&out);
    assert_eq!(kept.len(), 1, "only the finished benchmark is recorded");
    assert_eq!(kept[0]["outcome"]["status"], "succeeded");
    let evidence = out.join(kept[0]["evidence"]["path"].as_str().expect("evidence path"));
    let raw = std::fs::read(&evidence).expect("evidence kept");
    assert_eq!(
        perfsweep_benchmarks::execution::agent_report::sha256_hex(&raw),
        kept[0]["evidence"]["sha256"].as_str().expect("digest")
    );
}

#[test]
fn sigterm_mid_run_ends_every_process_and_keeps_finished_records() {
    if !tool_or_skip("fio", "fio") {
        return;
    }
    let dir = scratch("sigterm");
    // Two `fio --server` workers per benchmark: the processes the issue found orphaned.
    let sweep = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: sigterm-fio
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: Fio
    spec:
      numWorkers: 2
      ioengine: psync
      direct: 0
      size: 16M
      runtime: 3s
  permutations:
    product:
      bs: [4k, 8k, 16k]
";
    signalled_mid_run(&dir, sweep, libc::SIGTERM, "SIGTERM", "fio");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sighup_and_ctrl_c_mid_run_do_the_same() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    for (signal, name, port) in [
        (libc::SIGHUP, "SIGHUP", 15621),
        (libc::SIGINT, "SIGINT (Ctrl-C)", 15622),
    ] {
        let dir = scratch(&format!("signal-{signal}"));
        let sweep = iperf_sweep("signalled", port, "[1, 2, 3]", 3);
        signalled_mid_run(&dir, &sweep, signal, name, "iperf3");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn even_sigkill_leaves_no_process_behind() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("sigkill");
    let child = start_in_own_session(
        &dir,
        &iperf_sweep("killed", 15671, "[1, 2]", 30),
        "out",
        &[],
    );
    let session = child.id();
    wait_for(Duration::from_secs(30), "iperf3 running", || {
        alive_in_session(session).iter().any(|p| {
            std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                .is_ok_and(|comm| comm.trim() == "iperf3")
        })
    });
    // SIGKILL cannot be caught: the kernel ends the agents (parent-death signal), and
    // their tools with them.
    // SAFETY: sending a signal to our own child touches no memory.
    unsafe { libc::kill(i32::try_from(session).expect("pid"), libc::SIGKILL) };
    let (code, _, _) = finish(child, Duration::from_secs(10), "the killed run");
    assert_eq!(code, -1, "killed by a signal");
    wait_for(
        Duration::from_secs(10),
        "every process of the run gone",
        || alive_in_session(session).is_empty(),
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_cannot_start_fails_the_benchmark_instead_of_hanging_it() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("peer-failed");
    // Something else holds the port on every address: iperf3's server cannot bind it.
    let port = 15631;
    let _holder = std::net::TcpListener::bind(("0.0.0.0", port)).expect("port free for the test");
    let sweep = iperf_sweep("blocked", port, "[1]", 1);
    let child = start_in_own_session(&dir, &sweep, "out", &[]);
    let started = Instant::now();
    let (code, stdout, stderr) = finish(child, Duration::from_mins(1), "the blocked run");
    eprintln!(
        "a failed server ended the run in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(code, 1, "failed to run: {stderr}");
    assert!(stdout.contains("FAILED (PeerFailed)"), "{stdout}");
    assert!(stderr.contains("server-0 failed"), "{stderr}");
    // The record says why, in plain text (no terminal colour codes from the agent's log).
    let failed = records(&dir.join("out"));
    let message = failed[0]["outcome"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("server-0 failed"), "{message}");
    assert!(!message.contains('\u{1b}'), "escape codes in {message:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn run_into(dir: &Path, sweep: &str, out: &str, extra: &[&str]) -> (i32, String, String) {
    let child = start_in_own_session(dir, sweep, out, extra);
    finish(child, Duration::from_mins(1), "the run")
}

fn run_ids(dir: &Path) -> Vec<String> {
    records(dir)
        .iter()
        .map(|r| r["runId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[test]
fn an_output_directory_with_records_is_refused_unless_appended_to_or_overwritten() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("outdir");
    let sweep = iperf_sweep("outdir", 15641, "[1]", 1);
    let results: PathBuf = dir.join("results");
    let (code, _, stderr) = run_into(&dir, &sweep, "results", &[]);
    assert_eq!(code, 0, "{stderr}");
    let first = run_ids(&results);
    assert_eq!(first.len(), 1);

    // Again into the same directory: refused at once, nothing touched.
    let started = Instant::now();
    let (code, _, stderr) = run_into(&dir, &sweep, "results", &[]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused at once"
    );
    assert!(
        stderr.contains("already holds 1 result record(s)")
            && stderr.contains("--append")
            && stderr.contains("--overwrite"),
        "{stderr}"
    );
    assert_eq!(
        run_ids(&results),
        first,
        "the first run's record is untouched"
    );

    // --append: both kept, the new run in a subdirectory named after it.
    let (code, _, stderr) = run_into(&dir, &sweep, "results", &["--append"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(run_ids(&results), first);
    let appended: Vec<PathBuf> = std::fs::read_dir(&results)
        .expect("results")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_dir() && p.file_name().is_some_and(|n| n != "evidence"))
        .collect();
    assert_eq!(appended.len(), 1, "{appended:?}");
    let second = run_ids(&appended[0]);
    assert_eq!(second.len(), 1);
    assert_ne!(second, first);
    assert_eq!(
        appended[0].file_name().and_then(|n| n.to_str()),
        Some(second[0].as_str()),
        "the subdirectory is the run id"
    );

    // --overwrite: only this run's record and evidence remain.
    let (code, _, stderr) = run_into(&dir, &sweep, "results", &["--overwrite"]);
    assert_eq!(code, 0, "{stderr}");
    let third = run_ids(&results);
    assert_eq!(third.len(), 1);
    assert!(third != first && third != second);
    assert!(!appended[0].exists(), "the appended run was replaced too");
    let evidence = std::fs::read_dir(results.join("evidence"))
        .expect("evidence")
        .count();
    assert_eq!(evidence, 1, "one evidence file for one record");

    // Both flags at once make no sense.
    let (code, _, stderr) = run_into(&dir, &sweep, "results", &["--append", "--overwrite"]);
    assert_eq!(code, 2, "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn run_prints_the_verdict_and_exits_3_when_not_accepted() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("verdict");
    let criteria = |min: &str| {
        format!("  acceptance:\n  - metric: received_bits_per_second\n    min: {min}\n")
    };
    // Set-level criteria (at the set's spec indentation): every child is judged.
    let sweep = |min: &str| {
        iperf_sweep("verdict", 15651, "[1, 2]", 1).replace(
            "  permutations:",
            &format!("{}  permutations:", criteria(min)),
        )
    };
    let (code, stdout, stderr) = run_into(&dir, &sweep("1"), "met", &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("VERDICT"), "{stdout}");
    assert_eq!(stdout.matches("accepted").count(), 2, "{stdout}");
    assert!(
        stderr.contains("ACCEPTED: 2 accepted, 0 rejected"),
        "{stderr}"
    );

    // No loopback carries a petabit per second.
    let (code, stdout, stderr) = run_into(&dir, &sweep("1e15"), "missed", &[]);
    assert_eq!(code, 3, "ran fine, not accepted: {stderr}");
    assert_eq!(stdout.matches("REJECTED").count(), 2, "{stdout}");
    assert!(
        stderr.contains("NOT ACCEPTED: 0 accepted, 2 rejected"),
        "{stderr}"
    );
    assert!(stderr.contains("is below the minimum"), "{stderr}");
    // The records are kept all the same.
    let kept: Vec<Value> = records(&dir.join("missed"));
    assert_eq!(kept.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_tools_are_named_once_before_anything_runs() {
    let dir = scratch("tools-once");
    let file = dir.join("sweep.yaml");
    std::fs::write(&file, iperf_sweep("tools", 15661, "[1, 2, 3, 4]", 1)).expect("written");
    let output = perfsweep()
        .args(["run", "--local", "--output"])
        .arg(dir.join("out"))
        .arg(&file)
        .env("PATH", &dir)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("install the Debian package iperf3").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("nothing was run"), "{stderr}");
    assert!(!stderr.contains("[1/4]"), "no benchmark started: {stderr}");
    assert!(!dir.join("out").exists(), "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_file_is_an_error_for_validate_and_run() {
    let dir = scratch("empty");
    let file = dir.join("empty.yaml");
    std::fs::write(&file, "# nothing here\n").expect("written");
    for args in [&["validate"][..], &["run", "--local"][..]] {
        let output = perfsweep()
            .args(args)
            .arg(&file)
            .output()
            .expect("perfsweep runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains("empty.yaml: no documents"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains("0 valid, 0 invalid"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn help_documents_the_exit_codes() {
    let output = perfsweep()
        .args(["run", "--help"])
        .output()
        .expect("perfsweep runs");
    let help = String::from_utf8_lossy(&output.stdout);
    for line in [
        "Exit codes:",
        "NOT ACCEPTED",
        "143",
        "--append",
        "--overwrite",
    ] {
        assert!(help.contains(line), "{line} in:\n{help}");
    }
}
