//! The `-o DIR` of `perfsweep run`: never silently mixed with or written over an earlier
//! run's records, and every file written whole or not at all.
//!
//! A directory that already holds result records is refused unless the user says what
//! to do with them: `--append` keeps them and puts this run in `DIR/<run id>/` (the
//! `results` commands read directories recursively, so both runs are seen), and
//! `--overwrite` removes them (records, `evidence/`, earlier appended runs) first.

use std::path::{Path, PathBuf};

/// What to do when `-o DIR` already holds records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Existing {
    #[default]
    Refuse,
    Append,
    Overwrite,
}

#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error(
        "{dir} already holds {count} result record(s) (run {runs}): pass --append to keep them and write this run into {dir}/<run id>/, or --overwrite to replace them"
    )]
    HoldsRecords {
        dir: String,
        count: usize,
        runs: String,
    },
    #[error("cannot prepare the output directory {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The result records under `dir` (its own, and those of appended runs one level down):
/// each path with its run id.
pub fn records_in(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for path in entries.filter_map(Result::ok).map(|e| e.path()) {
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "evidence") {
                found.extend(
                    std::fs::read_dir(&path)
                        .into_iter()
                        .flatten()
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter_map(|p| record_run(&p).map(|run| (p, run))),
                );
            }
        } else if let Some(run) = record_run(&path) {
            found.push((path, run));
        }
    }
    found.sort();
    found
}

/// The run id of the record at `path`, if it is one (a `*.json` naming a result schema).
fn record_run(path: &Path) -> Option<String> {
    if path.extension().is_none_or(|e| e != "json") {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["schemaVersion"]
        .as_str()
        .is_some_and(|s| s.starts_with("perfsweep.io/result/"))
        .then(|| value["runId"].as_str().unwrap_or("unknown").to_owned())
}

/// Makes `dir` ready for run `run_id`'s records under `existing`, and returns where
/// they go (`dir`, or `dir/<run id>` when appending to a directory with records).
pub fn prepare(dir: &Path, existing: Existing, run_id: &str) -> Result<PathBuf, OutputError> {
    let records = records_in(dir);
    let target = if records.is_empty() {
        dir.to_owned()
    } else {
        match existing {
            Existing::Refuse => {
                let mut runs: Vec<&str> = records.iter().map(|(_, run)| run.as_str()).collect();
                runs.sort_unstable();
                runs.dedup();
                return Err(OutputError::HoldsRecords {
                    dir: dir.display().to_string(),
                    count: records.len(),
                    runs: runs.join(", "),
                });
            }
            Existing::Append => dir.join(run_id),
            Existing::Overwrite => {
                for (path, _) in &records {
                    std::fs::remove_file(path).map_err(io(path))?;
                    // An appended run's directory goes with its records.
                    if let Some(parent) = path.parent().filter(|p| *p != dir) {
                        let _ = std::fs::remove_dir_all(parent);
                    }
                }
                let evidence = dir.join("evidence");
                if evidence.is_dir() {
                    std::fs::remove_dir_all(&evidence).map_err(io(&evidence))?;
                }
                dir.to_owned()
            }
        }
    };
    let evidence = target.join("evidence");
    std::fs::create_dir_all(&evidence).map_err(io(&evidence))?;
    Ok(target)
}

/// Writes `contents` to `path` through a temporary file beside it and a rename, so a
/// reader (or a run interrupted mid-write) never sees half a record.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = path.with_file_name(format!(".{name}.partial-{}", std::process::id()));
    let written = (|| {
        use std::io::Write;
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(contents)?;
        file.sync_all()
    })();
    match written.and_then(|()| std::fs::rename(&temporary, path)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = std::fs::remove_file(&temporary);
            Err(error)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("perfsweep-outdir-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    fn record(dir: &Path, name: &str, run: &str) {
        let text =
            format!(r#"{{"schemaVersion": "perfsweep.io/result/v1alpha1", "runId": "{run}"}}"#);
        write_atomic(&dir.join(format!("{name}.json")), text.as_bytes()).expect("written");
    }

    #[test]
    fn a_directory_with_records_is_refused_appended_to_or_overwritten() {
        let dir = scratch("policy");
        // Empty or holding other files: used as it is.
        std::fs::write(dir.join("notes.txt"), "mine").expect("written");
        assert_eq!(prepare(&dir, Existing::Refuse, "r1").expect("fresh"), dir);
        record(&dir, "a", "r1");
        let refused = prepare(&dir, Existing::Refuse, "r2").expect_err("refused");
        let message = refused.to_string();
        assert!(message.contains("1 result record(s) (run r1)"), "{message}");
        assert!(message.contains("--append") && message.contains("--overwrite"));

        let appended = prepare(&dir, Existing::Append, "r2").expect("appended");
        assert_eq!(appended, dir.join("r2"));
        assert!(appended.join("evidence").is_dir());
        record(&appended, "a", "r2");
        assert_eq!(records_in(&dir).len(), 2, "both runs kept");

        std::fs::write(dir.join("evidence/x.out"), "raw").expect("written");
        assert_eq!(
            prepare(&dir, Existing::Overwrite, "r3").expect("overwritten"),
            dir
        );
        assert!(records_in(&dir).is_empty());
        assert!(!dir.join("r2").exists());
        assert!(!dir.join("evidence/x.out").exists());
        assert!(
            dir.join("notes.txt").exists(),
            "files that are not records stay"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_atomic_write_leaves_no_temporary_file() {
        let dir = scratch("atomic");
        let path = dir.join("r.json");
        write_atomic(&path, b"one").expect("written");
        write_atomic(&path, b"two").expect("rewritten");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "two");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .expect("dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
