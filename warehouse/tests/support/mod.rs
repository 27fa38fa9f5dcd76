//! Shared by the warehouse's integration tests: scratch directories and two generated
//! nightly sweeps, the second with a slow node and a slowed fio.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use perfsweep_warehouse::synth::{self, Generated, Sweep};

/// A fresh directory under the system's temporary directory, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("perfsweep-warehouse-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

pub const BASELINE: &str = "nightly-1";
pub const CANDIDATE: &str = "nightly-2";
pub const SLOW_NODE: &str = "node-003";

pub fn baseline() -> Vec<Generated> {
    synth::sweep(&Sweep::new(BASELINE, "2026-11-20T02:00:00Z", 1))
}

pub fn candidate() -> Vec<Generated> {
    let mut sweep = Sweep::new(CANDIDATE, "2026-11-21T02:00:00Z", 2);
    sweep.slow_node = Some((SLOW_NODE.into(), 1.6));
    sweep.slow_kind = Some(("Fio".into(), 1.3));
    synth::sweep(&sweep)
}

/// Both sweeps written as results directories (the baseline one file per record, the
/// candidate as JSON Lines), returned with their runs.
pub fn sources(dir: &Path) -> (Vec<PathBuf>, Vec<Generated>) {
    let (one, two) = (baseline(), candidate());
    let (a, b) = (dir.join("results-1"), dir.join("results-2"));
    synth::write_source(&a, &one, false).expect("baseline written");
    synth::write_source(&b, &two, true).expect("candidate written");
    (vec![a, b], one.into_iter().chain(two).collect())
}

/// Every file under `dir`, relative, sorted.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}
