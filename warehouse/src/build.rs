//! `warehouse build`: records and telemetry slices into the curated tables, raw records
//! and evidence into the content-addressed raw store.
//!
//! Idempotent: a run whose key is already in `benchmark_run_fact` is not loaded again,
//! a dimension row whose digest is already there is not written again, and every file's
//! name is the digest of what it holds, so an interrupted build run again rewrites the
//! same files rather than adding copies. `benchmark_run_fact` is written last: a run is
//! in the warehouse once its run row is.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use perfsweep_benchmarks::execution::agent_report;
use perfsweep_benchmarks::formats::digest::sha256_hex;
use serde_json::json;

use crate::batch;
use crate::derive::{self, Derived, Loaded, Options};
use crate::engine::Warehouse;
use crate::error::{Error, Result};
use crate::layout;
use crate::row::Row;
use crate::schema::Table;
use crate::source::{self, SourcedRecord};

#[derive(Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Summary {
    /// Records read from the sources.
    pub records_read: usize,
    /// Runs added to the warehouse.
    pub runs_added: usize,
    /// Runs already in it (same key and same content): left alone.
    pub runs_present: usize,
    /// Runs read twice from the sources: counted once.
    pub copies: usize,
    /// Runs already in it with different content (a record rewritten after loading):
    /// the loaded one is kept, and this is said.
    pub conflicts: Vec<String>,
    pub slices_added: usize,
    pub evidence_copied: usize,
    /// Evidence missing or not matching its digest: the run loads, flagged in doubt.
    pub evidence_problems: Vec<String>,
    pub files_written: usize,
    pub notes: Vec<String>,
}

/// Records are loaded in chunks of about this many documents, so that memory stays
/// bounded whatever the sources hold; each chunk writes its own part files.
const CHUNK: usize = 20_000;

/// Loads `sources` into the warehouse at `output` (created if needed).
pub async fn build(sources: &[PathBuf], output: &Path, options: &Options) -> Result<Summary> {
    build_in_chunks(sources, output, options, CHUNK).await
}

/// [`build`], loading about `chunk` documents at a time.
pub async fn build_in_chunks(
    sources: &[PathBuf],
    output: &Path,
    options: &Options,
    chunk: usize,
) -> Result<Summary> {
    std::fs::create_dir_all(output).map_err(Error::io(output))?;
    let files = source::list(sources)?;
    let mut existing = Existing::load(output).await?;
    let mut summary = Summary::default();
    let mut seen = HashSet::new();
    let mut read = source::Read::default();
    for file in &files {
        source::read_file(file, &mut read)?;
        if read.records.len() + read.slices.len() >= chunk {
            let chunk = std::mem::take(&mut read);
            load_chunk(
                chunk,
                output,
                options,
                &mut existing,
                &mut seen,
                &mut summary,
            )?;
        }
    }
    load_chunk(
        read,
        output,
        options,
        &mut existing,
        &mut seen,
        &mut summary,
    )?;
    Ok(summary)
}

fn load_chunk(
    mut read: source::Read,
    output: &Path,
    options: &Options,
    existing: &mut Existing,
    seen: &mut HashSet<String>,
    summary: &mut Summary,
) -> Result<()> {
    summary.records_read += read.records.len();
    summary.notes.append(&mut read.notes);
    // Which records are new: one per key, and not already loaded.
    let mut new_records: Vec<(&SourcedRecord, Vec<u8>, String)> = Vec::new();
    for sourced in &read.records {
        let key = derive::run_key(&sourced.record);
        if !seen.insert(key.clone()) {
            summary.copies += 1;
            continue;
        }
        let bytes = serde_json::to_vec(&sourced.record).map_err(|e| Error::Source {
            path: sourced.origin.clone(),
            message: format!("cannot serialize the record: {e}"),
        })?;
        let digest = agent_report::sha256_hex(&bytes);
        match existing.runs.get(&key) {
            Some(loaded) if *loaded == digest => summary.runs_present += 1,
            Some(_) => {
                summary.runs_present += 1;
                summary.conflicts.push(format!(
                    "{}: run {} benchmark {} is already in the warehouse with other content; kept as loaded",
                    sourced.origin, sourced.record.run_id, sourced.record.benchmark.name
                ));
            }
            None => new_records.push((sourced, bytes, digest)),
        }
    }

    let mut derived = Vec::with_capacity(new_records.len());
    for (sourced, bytes, digest) in &new_records {
        let problems = copy_evidence(sourced, output, summary)?;
        let d = derive::derive(
            &Loaded {
                record: &sourced.record,
                record_digest: digest,
                evidence_problems: &problems,
            },
            options,
        );
        write_once(&output.join(layout::record_path(&d.date, digest)), bytes)?;
        derived.push(d);
    }
    let runs_added = derived.len();
    for slice in &read.slices {
        let d = derive::telemetry_row(slice).map_err(|message| Error::Source {
            path: format!(
                "telemetry slice of run {} node {}",
                slice.run_id, slice.node
            ),
            message,
        })?;
        if existing.slices.contains(&d.run_key) || !seen.insert(d.run_key.clone()) {
            continue;
        }
        summary.slices_added += 1;
        derived.push(d);
    }
    drop(new_records);
    drop(read);

    summary.files_written += write_dims(output, &derived, existing)?;
    // Facts by table and partition; the run fact last (see the module doc).
    let mut partitions: BTreeMap<(Table, String, String), Vec<(String, Row)>> = BTreeMap::new();
    for d in derived {
        for (table, row) in d.facts {
            partitions
                .entry((table, d.kind.clone(), d.date.clone()))
                .or_default()
                .push((d.run_key.clone(), row));
        }
    }
    let (runs, others): (Vec<_>, Vec<_>) = partitions
        .into_iter()
        .partition(|((table, _, _), _)| *table == Table::BenchmarkRunFact);
    for ((table, kind, date), rows) in others.into_iter().chain(runs) {
        let keys: BTreeSet<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
        let digest = sha256_hex(&json!([table.name(), kind, date, keys]));
        let rows: Vec<Row> = rows.into_iter().map(|(_, row)| row).collect();
        let file = layout::fact_file(table.name(), &kind, &date, &digest);
        write_table_file(output, table, &file, &rows)?;
        summary.files_written += 1;
    }
    summary.runs_added += runs_added;
    Ok(())
}

/// What the warehouse holds already: run key → record digest, slice and dimension keys.
struct Existing {
    runs: HashMap<String, String>,
    slices: HashSet<String>,
    dims: HashMap<Table, HashSet<String>>,
}

impl Existing {
    async fn load(root: &Path) -> Result<Self> {
        let warehouse = Warehouse::open(root).await?;
        let keys = warehouse
            .strings("SELECT run_key FROM benchmark_run_fact ORDER BY run_key")
            .await?;
        let digests = warehouse
            .strings("SELECT record_digest FROM benchmark_run_fact ORDER BY run_key")
            .await?;
        let runs = keys.into_iter().zip(digests).collect();
        let slices = warehouse
            .strings("SELECT slice_digest FROM telemetry_slice_fact")
            .await?
            .into_iter()
            .collect();
        let mut dims = HashMap::new();
        for table in Table::ALL.into_iter().filter(|t| !t.is_fact()) {
            let keys = warehouse
                .strings(&format!("SELECT {} FROM {}", table.key(), table.name()))
                .await?;
            dims.insert(table, keys.into_iter().collect());
        }
        Ok(Self { runs, slices, dims })
    }
}

/// New dimension rows, one file per dimension holding only digests not already there.
fn write_dims(output: &Path, derived: &[Derived], existing: &mut Existing) -> Result<usize> {
    let mut by_table: BTreeMap<Table, BTreeMap<String, Row>> = BTreeMap::new();
    for d in derived {
        for (table, row) in &d.dims {
            let Some(key) = row.text(table.key()) else {
                continue;
            };
            if existing.dims.get(table).is_some_and(|k| k.contains(key)) {
                continue;
            }
            by_table
                .entry(*table)
                .or_default()
                .entry(key.to_owned())
                .or_insert_with(|| row.clone());
        }
    }
    let mut written = 0;
    for (table, rows) in by_table {
        let keys: Vec<&String> = rows.keys().collect();
        let digest = sha256_hex(&json!([table.name(), keys]));
        existing
            .dims
            .entry(table)
            .or_default()
            .extend(rows.keys().cloned());
        let rows: Vec<Row> = rows.into_values().collect();
        write_table_file(
            output,
            table,
            &layout::dim_file(table.name(), &digest),
            &rows,
        )?;
        written += 1;
    }
    Ok(written)
}

fn write_table_file(output: &Path, table: Table, file: &str, rows: &[Row]) -> Result<()> {
    let batch = batch::to_batch(table, rows)?;
    let bytes = batch::parquet_bytes(table.name(), &[batch])?;
    write_atomic(&output.join(file), &bytes)
}

/// Copies a record's evidence into the raw store, checking each object against its
/// digest; returns the problems found (`evidenceMissing`, `evidenceMismatch`).
fn copy_evidence(
    sourced: &SourcedRecord,
    output: &Path,
    summary: &mut Summary,
) -> Result<Vec<String>> {
    let mut problems = Vec::new();
    // A record has one evidence object (the tool's output) or none.
    let Some(evidence) = &sourced.record.evidence else {
        return Ok(problems);
    };
    let target = output.join(layout::evidence_path(&evidence.sha256));
    if target.exists() {
        return Ok(problems);
    }
    let bytes = sourced
        .evidence_roots
        .iter()
        .find_map(|root| std::fs::read(root.join(&evidence.path)).ok());
    match perfsweep_benchmarks::results::intake::evidence_problem(evidence, bytes.as_deref()) {
        None => {
            if let Some(bytes) = bytes {
                write_once(&target, &bytes)?;
                summary.evidence_copied += 1;
            }
        }
        Some(problem) => {
            problems.push(
                if bytes.is_none() {
                    "evidenceMissing"
                } else {
                    "evidenceMismatch"
                }
                .to_owned(),
            );
            summary
                .evidence_problems
                .push(format!("{}: {problem}", sourced.origin));
        }
    }
    Ok(problems)
}

/// Writes a content-addressed file unless it is there: same name, same content.
fn write_once(path: &Path, bytes: &[u8]) -> Result<()> {
    if path.exists() {
        return Ok(());
    }
    write_atomic(path, bytes)
}

/// Through a temporary name that no reader lists (not `*.parquet`), then a rename, so a
/// reader or an interrupted build never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(Error::io(parent))?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, bytes).map_err(Error::io(&temporary))?;
    std::fs::rename(&temporary, path).map_err(Error::io(path))
}
