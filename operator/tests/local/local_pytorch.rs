//! The local backend runs the PyTorch benchmark script on CPU when PyTorch is installed
//! (Debian's python3-torch and python3-torchvision, which `.ci/run` installs), and names
//! what is missing when it is not.

use crate::local_support;

use local_support::{perfsweep, scratch};

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The directories of the `python3` programs on PATH (and Debian's), split by whether
/// they can import torch and torchvision.
fn pythons() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/bin"));
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for dir in dirs {
        let python = dir.join("python3");
        if !python.is_file() {
            continue;
        }
        let imports = Command::new(&python)
            .args(["-c", "import torch, torchvision"])
            .output()
            .is_ok_and(|o| o.status.success());
        if imports {
            with.push(dir);
        } else {
            without.push(dir);
        }
    }
    (with, without)
}

/// PATH with `first` in front.
fn path_with(first: &Path) -> std::ffi::OsString {
    let mut dirs = vec![first.to_path_buf()];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).expect("a valid PATH")
}

const SPEC: &str = "apiVersion: perfsweep.io/v1alpha1\nkind: PyTorch\nmetadata: {name: alexnet}\nspec: {model: alexnet, inputBatchSize: 2}\n";

/// Ignored, so that the README's `cargo test --workspace` passes on a fresh machine
/// without PyTorch; `.ci/run` installs it and runs this test by name. Without PyTorch the
/// test fails, never skips.
#[test]
#[ignore = "needs PyTorch and torchvision (apt-get install python3-torch python3-torchvision, or pip install torch torchvision): cargo test -p perfsweep --test local -- --ignored local_pytorch"]
fn a_local_pytorch_run_reports_what_the_script_measured() {
    let (with, _) = pythons();
    let dir = with.first().unwrap_or_else(|| {
        panic!(
            "no python3 here imports torch and torchvision (apt-get install python3-torch python3-torchvision)"
        )
    });
    let work = scratch("pytorch");
    let spec = work.join("pytorch.yaml");
    std::fs::write(&spec, SPEC).expect("spec written");
    let out = work.join("results");
    let output = perfsweep()
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&spec)
        .env("PATH", path_with(dir))
        .output()
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed:\n{stdout}\n{stderr}");
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("alexnet.json")).expect("the record"),
    )
    .expect("JSON");
    assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
    let raw = std::fs::read_to_string(
        out.join(record["evidence"]["path"].as_str().expect("evidence path")),
    )
    .expect("evidence");
    let line = raw
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("PERFSWEEP_RESULT "))
        .expect("the script's result line");
    let script: Value = serde_json::from_str(line).expect("JSON result");
    let result = &record["outcome"]["result"];
    for field in ["throughputSamplesPerSecond", "batchSize", "iterations"] {
        assert_eq!(result[field], script[field], "{field}");
    }
    assert_eq!(
        result["timePerBatchSeconds"]["mean"],
        script["timePerBatchSeconds"]["mean"]
    );
    assert_eq!(result["model"], "alexnet");
    assert_eq!(result["device"], "cpu");
    assert_eq!(result["batchSize"], 2);
    eprintln!(
        "alexnet eval cpu, batch 2: {} samples/s (torch {})",
        result["throughputSamplesPerSecond"], script["torchVersion"]
    );
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn without_pytorch_the_error_names_the_debian_package() {
    let (_, without) = pythons();
    let Some(dir) = without.first() else {
        eprintln!("SKIPPED: every python3 here has PyTorch");
        return;
    };
    let work = scratch("pytorch-missing");
    let spec = work.join("pytorch.yaml");
    std::fs::write(&spec, SPEC).expect("spec written");
    let output = perfsweep()
        .args(["run", "--local"])
        .arg(&spec)
        .env("PATH", path_with(dir))
        .output()
        .expect("perfsweep runs");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!output.status.success(), "{all}");
    assert!(
        all.contains("install the Debian package python3-torch"),
        "{all}"
    );
    let _ = std::fs::remove_dir_all(&work);
}
