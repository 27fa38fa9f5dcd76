//! Shared by the tests that run real tools through the `perfsweep` binary on this
//! machine (`perfsweep run --local`, `perfsweep parse`, `perfsweep results`).

// Each target that includes this module uses a different subset of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The binary under test.
pub fn perfsweep() -> Command {
    Command::new(env!("CARGO_BIN_EXE_perfsweep"))
}

/// Whether `program` runs here. When it does not, the test is skipped with the reason
/// printed — except under CI, where `.ci/run` installs the Debian `package`, so a
/// missing tool fails the test instead of hiding it.
pub fn tool_or_skip(program: &str, package: &str) -> bool {
    let available = Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !available {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing under CI: .ci/run installs the Debian package {package}"
        );
        eprintln!(
            "SKIPPED: {program} is not installed (apt-get install {package}); .ci/run installs it"
        );
    }
    available
}

/// Like [`tool_or_skip`], for programs that have no `--version` to answer (MPI programs
/// such as NPopenmpi and hpcc start MPI instead): whether `program` is on `PATH`.
pub fn program_or_skip(program: &str, package: &str) -> bool {
    let available = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    if !available {
        assert!(
            std::env::var_os("CI").is_none(),
            "{program} is missing under CI: .ci/run installs the Debian package {package}"
        );
        eprintln!(
            "SKIPPED: {program} is not installed (apt-get install {package}); .ci/run installs it"
        );
    }
    available
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("perfsweep-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// The result records `perfsweep run --output DIR` wrote, sorted by benchmark name.
pub fn records(dir: &Path) -> Vec<Value> {
    let mut records: Vec<Value> = std::fs::read_dir(dir)
        .expect("output directory")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            serde_json::from_str(&std::fs::read_to_string(&p).expect("readable record"))
                .expect("JSON record")
        })
        .collect();
    records.sort_by_key(|r| {
        r["benchmark"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    });
    records
}

/// Writes `sweep` into `dir` and runs it with `perfsweep run --local --output
/// <dir>/<name>`, whatever the outcome; the output directory and the process output.
pub fn run_local(dir: &Path, name: &str, sweep: &str) -> (PathBuf, std::process::Output) {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, sweep).expect("sweep written");
    let out = dir.join(name);
    let output = perfsweep()
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&file)
        .output()
        .expect("perfsweep runs");
    (out, output)
}

/// [`run_local`], failing the test with both output streams unless the run succeeded;
/// the output directory and the printed results table.
pub fn run_local_sweep(dir: &Path, name: &str, sweep: &str) -> (PathBuf, String) {
    let (out, output) = run_local(dir, name, sweep);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    (out, stdout)
}

/// [`self_signed`], or `None` after saying why the test is skipped (openssl missing);
/// under CI, which installs openssl, a failure fails the test instead.
pub fn self_signed_or_skip(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    match self_signed(dir) {
        Ok(files) => Some(files),
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI installs openssl: {why}"
            );
            eprintln!("SKIPPED: {why}");
            None
        }
    }
}

/// A self-signed certificate for 127.0.0.1 from the openssl command line, or why not.
pub fn self_signed(
    dir: &std::path::Path,
) -> Result<(std::path::PathBuf, std::path::PathBuf), String> {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=perfsweep-sim"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
        // An end-entity certificate (webpki refuses a CA certificate as one).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("openssl: {e}"))?;
    if !status.success() {
        return Err(format!("openssl req failed: {status}"));
    }
    Ok((cert, key))
}

/// How late the machine woke the load generator in an LLM iteration (the largest
/// `maxWakeupDelayMillis` of its clients, 0 without one): timing bounds widen by it, so a
/// loaded machine does not fail a correct run (issue 27).
pub fn late_wakeups_ms(iteration: &Value) -> f64 {
    iteration["clients"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["maxWakeupDelayMillis"].as_f64())
        .fold(0.0, f64::max)
}
