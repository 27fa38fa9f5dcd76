//! Reading what `warehouse build` loads: result records (one per `*.json` file, as `run
//! --output` writes them, or one per line of a `*.jsonl` file, as export writes them) and
//! telemetry slices (the same files, told apart by their schemaVersion), from files or
//! directories searched recursively (`evidence/` directories are skipped: they hold the
//! raw tool output the records point at).

use std::path::{Path, PathBuf};

use perfsweep_benchmarks::results::intake::{self, Intake};
use perfsweep_benchmarks::results::record::ResultRecord;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};

/// The schemaVersion of a telemetry slice document.
pub const TELEMETRY_SCHEMA_VERSION: &str = "perfsweep.io/telemetry/v1alpha1";

/// Infrastructure metrics of one node over one window of a run, reduced to a few means
/// (the reduced-cardinality form of what Prometheus holds: no per-request or per-pod
/// series). Written by whatever pulls them from Prometheus for the run's window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TelemetrySlice {
    pub schema_version: String,
    pub run_id: String,
    /// The benchmark the window belongs to (kind, name, repetition), when it is one
    /// benchmark's; absent for a slice of the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub benchmark: Option<SliceBenchmark>,
    pub window_start: String,
    pub window_end: String,
    pub node: String,
    /// Column name (see `telemetry_slice_fact`) → mean over the window.
    #[serde(default)]
    pub metrics: std::collections::BTreeMap<String, f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SliceBenchmark {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetition: Option<u32>,
}

/// A record with where it came from, for evidence lookup and messages.
pub struct SourcedRecord {
    pub record: ResultRecord,
    /// The file it was read from (`file.jsonl:12` for a line).
    pub origin: String,
    /// Directories its evidence paths may be relative to: its file's directory, then the
    /// source root.
    pub evidence_roots: Vec<PathBuf>,
}

#[derive(Default)]
pub struct Read {
    pub records: Vec<SourcedRecord>,
    pub slices: Vec<TelemetrySlice>,
    /// Files skipped (not records), for the summary.
    pub notes: Vec<String>,
}

/// A file to read, with the source root its records' evidence paths may be relative to.
pub struct SourceFile {
    pub file: PathBuf,
    pub root: PathBuf,
}

/// The files under `sources`, in a stable order; a source without any is an error.
pub fn list(sources: &[PathBuf]) -> Result<Vec<SourceFile>> {
    let mut out = Vec::new();
    for source in sources {
        let mut files = Vec::new();
        collect(source, &mut files)?;
        if files.is_empty() {
            return Err(Error::Source {
                path: source.display().to_string(),
                message: "no *.json or *.jsonl files".into(),
            });
        }
        let root = if source.is_dir() {
            source.clone()
        } else {
            source.parent().map(Path::to_owned).unwrap_or_default()
        };
        out.extend(files.into_iter().map(|file| SourceFile {
            file,
            root: root.clone(),
        }));
    }
    Ok(out)
}

/// Reads one file's records and slices into `read`.
pub fn read_file(source: &SourceFile, read: &mut Read) -> Result<()> {
    let file = &source.file;
    let text = std::fs::read_to_string(file).map_err(Error::io(file))?;
    let roots: Vec<PathBuf> = file
        .parent()
        .map(Path::to_owned)
        .into_iter()
        .chain(std::iter::once(source.root.clone()))
        .collect();
    if file.extension().is_some_and(|e| e == "jsonl") {
        for (line, text) in text.lines().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            let origin = format!("{}:{}", file.display(), line + 1);
            read_document(text, origin, &roots, read)?;
        }
    } else {
        read_document(&text, file.display().to_string(), &roots, read)?;
    }
    Ok(())
}

/// Everything under `sources` at once (small inputs; `build` reads in chunks).
pub fn read_sources(sources: &[PathBuf]) -> Result<Read> {
    let mut read = Read::default();
    for source in list(sources)? {
        read_file(&source, &mut read)?;
    }
    Ok(read)
}

fn read_document(text: &str, origin: String, roots: &[PathBuf], read: &mut Read) -> Result<()> {
    // A telemetry slice first: intake would call it "not a record".
    if let Ok(value) = serde_json::from_str::<Value>(text)
        && value["schemaVersion"] == TELEMETRY_SCHEMA_VERSION
    {
        let slice = serde_json::from_value(value).map_err(|e| Error::Source {
            path: origin.clone(),
            message: format!("not a valid telemetry slice: {e}"),
        })?;
        read.slices.push(slice);
        return Ok(());
    }
    match intake::read(text).map_err(|e| Error::Source {
        path: origin.clone(),
        message: e.to_string(),
    })? {
        Intake::NotARecord(why) => read.notes.push(format!("skipped {origin}: {why}")),
        Intake::Record(record) => read.records.push(SourcedRecord {
            record: *record,
            origin,
            evidence_roots: roots.to_vec(),
        }),
    }
    Ok(())
}

/// `*.json` and `*.jsonl` files under `path` (or `path` itself), sorted so that a build
/// reads in the same order every time.
fn collect(path: &Path, files: &mut Vec<PathBuf>) -> Result<()> {
    if path.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    let entries = std::fs::read_dir(path).map_err(Error::io(path))?;
    let mut children: Vec<PathBuf> = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .map_err(Error::io(path))?;
    children.sort();
    for child in children {
        if child.is_dir() {
            if child.file_name().is_some_and(|n| n == "evidence") {
                continue;
            }
            collect(&child, files)?;
        } else if child
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl")
        {
            files.push(child);
        }
    }
    Ok(())
}
