//! Published numbers with lineage. `publish` runs a query and materializes its answer as
//! a rollup whose every row carries the query's digest and text and the runs behind it
//! (run ids, record digests, workload spec and artifact manifest digests), and says in
//! the row when its number is unstable. `explain` walks one row back to the raw evidence
//! and verifies every digest on the way.
//!
//! The walk reads the publication's own lineage and the raw store, never the fact
//! tables: retention may expire facts (they are rebuildable from raw records) but keeps
//! what a publication references.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use perfsweep_benchmarks::execution::agent_report::sha256_hex;
use perfsweep_benchmarks::results::record::ResultRecord;
use serde::{Deserialize, Serialize};

use crate::build::write_atomic;
use crate::engine::{Warehouse, text_column};
use crate::error::{Error, Result};
use crate::layout;

pub const PUBLICATION_SCHEMA_VERSION: &str = "perfsweep.io/publication/v1alpha1";
/// Fewer runs than this behind a number (per case) and it is flagged.
pub const MIN_REPETITIONS: usize = 3;
/// A coefficient of variation above this (percent) and the number is flagged.
pub const MAX_CV_PERCENT: f64 = 10.0;
/// The column a publishable query names its runs in (`string_agg(run_key, ',')`).
pub const RUN_KEYS_COLUMN: &str = "run_keys";

/// The publication's manifest, `published/<name>/publication.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Publication {
    pub schema_version: String,
    pub name: String,
    pub query: String,
    /// SHA-256 of the query text as written in `query`.
    pub query_spec_digest: String,
    pub published_at: String,
    /// `rollup.parquet`, relative to the publication's directory.
    pub rollup: String,
    pub rollup_sha256: String,
    pub rows: Vec<PublishedRow>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedRow {
    pub row: usize,
    /// The row's values as text, column → value (the query's own columns).
    pub values: BTreeMap<String, String>,
    pub runs: Vec<RunLineage>,
    pub unstable: bool,
    /// Why, in words; empty when stable.
    pub stability_note: String,
}

/// One run behind a published number.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunLineage {
    pub run_key: String,
    pub run_id: String,
    pub case_key: String,
    pub record_path: String,
    pub record_digest: String,
    pub workload_spec_digest: String,
    pub artifact_manifest_digest: Option<String>,
}

/// Facts of one run that stability needs.
struct RunFacts {
    lineage: RunLineage,
    headline: Option<f64>,
    doubt: Option<String>,
    failed: bool,
}

/// Runs `query` and publishes its answer as `name`.
pub async fn publish(warehouse: &Warehouse, name: &str, query: &str) -> Result<Publication> {
    if !layout::valid_name(name) {
        return Err(Error::Publication {
            name: name.into(),
            message: "a name is letters, digits, '-', '_' and '.'".into(),
        });
    }
    let query = query.trim().to_owned();
    let query_spec_digest = sha256_hex(query.as_bytes());
    let batches = warehouse.query(&query).await?;
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Err(Error::Publication {
            name: name.into(),
            message: "the query returned no rows: nothing to publish".into(),
        });
    };
    if schema.index_of(RUN_KEYS_COLUMN).is_err() {
        return Err(Error::Publication {
            name: name.into(),
            message: format!(
                "the query has no {RUN_KEYS_COLUMN} column: name the runs behind each row \
                 (`string_agg(run_key, ',') AS {RUN_KEYS_COLUMN}`), or its numbers cannot be traced"
            ),
        });
    }
    let facts = run_facts(warehouse).await?;

    let mut rows = Vec::new();
    for batch in &batches {
        let keys = text_column(batch.column(schema.index_of(RUN_KEYS_COLUMN).unwrap_or(0)))?;
        let formatters: Vec<(String, ArrayFormatter<'_>)> = schema
            .fields()
            .iter()
            .zip(batch.columns())
            .map(|(field, column)| {
                ArrayFormatter::try_new(column.as_ref(), &FormatOptions::default())
                    .map(|f| (field.name().clone(), f))
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| Error::Query {
                context: "formatting the rollup".into(),
                message: e.to_string(),
            })?;
        for index in 0..batch.num_rows() {
            let run_keys: BTreeSet<&str> = if keys.is_null(index) {
                BTreeSet::new()
            } else {
                keys.value(index)
                    .split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .collect()
            };
            let mut runs = Vec::new();
            for key in &run_keys {
                let Some(run) = facts.get(*key) else {
                    return Err(Error::Publication {
                        name: name.into(),
                        message: format!(
                            "row {} names run {key}, which is not in benchmark_run_fact",
                            rows.len()
                        ),
                    });
                };
                runs.push(run);
            }
            let (unstable, note) = stability(&runs);
            rows.push(PublishedRow {
                row: rows.len(),
                values: formatters
                    .iter()
                    .filter(|(name, _)| name != RUN_KEYS_COLUMN)
                    .map(|(name, f)| (name.clone(), f.value(index).to_string()))
                    .collect(),
                runs: runs.iter().map(|r| r.lineage.clone()).collect(),
                unstable,
                stability_note: note,
            });
        }
    }
    if rows.iter().any(|r| r.runs.is_empty()) {
        return Err(Error::Publication {
            name: name.into(),
            message: "a row names no run in run_keys: its number cannot be traced".into(),
        });
    }

    let rollup = rollup_batch(&batches, &rows, &query, &query_spec_digest)?;
    let bytes = crate::batch::parquet_bytes("rollup", &[rollup])?;
    let dir = warehouse.root().join(layout::publication_dir(name));
    write_atomic(&dir.join("rollup.parquet"), &bytes)?;
    let publication = Publication {
        schema_version: PUBLICATION_SCHEMA_VERSION.into(),
        name: name.into(),
        query,
        query_spec_digest,
        published_at: jiff::Timestamp::now().to_string(),
        rollup: "rollup.parquet".into(),
        rollup_sha256: sha256_hex(&bytes),
        rows,
    };
    let manifest = serde_json::to_vec_pretty(&publication).map_err(|e| Error::Publication {
        name: name.into(),
        message: e.to_string(),
    })?;
    write_atomic(&dir.join("publication.json"), &manifest)?;
    Ok(publication)
}

async fn run_facts(warehouse: &Warehouse) -> Result<BTreeMap<String, RunFacts>> {
    let batches = warehouse
        .query(
            "SELECT run_key, run_id, case_key, record_path, record_digest, workload_spec_digest, \
             artifact_manifest_digest, doubt_flags, status, headline_value FROM benchmark_run_fact",
        )
        .await?;
    let mut facts = BTreeMap::new();
    for batch in &batches {
        let text = |i: usize| text_column(batch.column(i));
        let (key, run_id, case, path, digest, spec, manifest, doubt, status) = (
            text(0)?,
            text(1)?,
            text(2)?,
            text(3)?,
            text(4)?,
            text(5)?,
            text(6)?,
            text(7)?,
            text(8)?,
        );
        let headline = batch
            .column(9)
            .as_any()
            .downcast_ref::<Float64Array>()
            .cloned();
        for i in 0..batch.num_rows() {
            let optional = |a: &StringArray| (!a.is_null(i)).then(|| a.value(i).to_owned());
            facts.insert(
                key.value(i).to_owned(),
                RunFacts {
                    lineage: RunLineage {
                        run_key: key.value(i).to_owned(),
                        run_id: run_id.value(i).to_owned(),
                        case_key: case.value(i).to_owned(),
                        record_path: path.value(i).to_owned(),
                        record_digest: digest.value(i).to_owned(),
                        workload_spec_digest: spec.value(i).to_owned(),
                        artifact_manifest_digest: optional(&manifest),
                    },
                    headline: headline
                        .as_ref()
                        .and_then(|h| (!h.is_null(i)).then(|| h.value(i))),
                    doubt: optional(&doubt),
                    failed: status.value(i) != "succeeded",
                },
            );
        }
    }
    Ok(facts)
}

use datafusion::arrow::array::Array;

/// Whether the number behind `runs` is unstable, and why: per case, fewer than
/// MIN_REPETITIONS runs or a headline CV above MAX_CV_PERCENT; any run in doubt or failed.
fn stability(runs: &[&RunFacts]) -> (bool, String) {
    let mut reasons = Vec::new();
    let mut by_case: BTreeMap<&str, Vec<&RunFacts>> = BTreeMap::new();
    for run in runs {
        by_case.entry(&run.lineage.case_key).or_default().push(run);
    }
    let fewest = by_case.values().map(Vec::len).min().unwrap_or(0);
    if fewest < MIN_REPETITIONS {
        reasons.push(format!(
            "too few repetitions: {fewest} run(s) of a case (< {MIN_REPETITIONS})"
        ));
    }
    let worst_cv = by_case
        .values()
        .filter_map(|runs| {
            let values: Vec<f64> = runs.iter().filter_map(|r| r.headline).collect();
            cv_percent(&values)
        })
        .fold(None, |worst: Option<f64>, cv| {
            Some(worst.map_or(cv, |w| w.max(cv)))
        });
    if let Some(cv) = worst_cv.filter(|cv| *cv > MAX_CV_PERCENT) {
        reasons.push(format!("high CV: {cv:.1}% (> {MAX_CV_PERCENT}%)"));
    }
    let doubts: BTreeSet<&str> = runs
        .iter()
        .filter_map(|r| r.doubt.as_deref())
        .flat_map(|d| d.split(','))
        .collect();
    if !doubts.is_empty() {
        reasons.push(format!(
            "in doubt: {}",
            doubts.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let failed = runs.iter().filter(|r| r.failed).count();
    if failed > 0 {
        reasons.push(format!("{failed} failed run(s) behind the number"));
    }
    (!reasons.is_empty(), reasons.join("; "))
}

/// Sample coefficient of variation, percent; `None` under two values or a zero mean.
pub fn cv_percent(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return None;
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(variance.sqrt() / mean.abs() * 100.0)
}

/// The query's columns (its `run_keys` included) followed by the lineage columns.
fn rollup_batch(
    batches: &[RecordBatch],
    rows: &[PublishedRow],
    query: &str,
    query_spec_digest: &str,
) -> Result<RecordBatch> {
    let schema = batches
        .first()
        .map_or_else(|| Arc::new(Schema::empty()), RecordBatch::schema);
    let combined =
        datafusion::arrow::compute::concat_batches(&schema, batches).map_err(|e| Error::Query {
            context: "collecting the rollup".into(),
            message: e.to_string(),
        })?;
    let joined = |f: &dyn Fn(&RunLineage) -> Option<String>| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| {
            r.runs.iter().filter_map(f).collect::<Vec<_>>().join(",")
        })))
    };
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns: Vec<ArrayRef> = combined.columns().to_vec();
    let extra: Vec<(&str, DataType, ArrayRef)> = vec![
        (
            "row_number",
            DataType::Int64,
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| r.row as i64),
            )),
        ),
        (
            "query_spec_digest",
            DataType::Utf8,
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|_| query_spec_digest),
            )),
        ),
        (
            "query_text",
            DataType::Utf8,
            Arc::new(StringArray::from_iter_values(rows.iter().map(|_| query))),
        ),
        ("run_ids", DataType::Utf8, {
            let ids = |r: &PublishedRow| {
                let ids: BTreeSet<&str> = r.runs.iter().map(|l| l.run_id.as_str()).collect();
                ids.into_iter().collect::<Vec<_>>().join(",")
            };
            Arc::new(StringArray::from_iter_values(rows.iter().map(ids)))
        }),
        (
            "record_digests",
            DataType::Utf8,
            joined(&|l| Some(l.record_digest.clone())),
        ),
        (
            "workload_spec_digests",
            DataType::Utf8,
            joined(&|l| Some(l.workload_spec_digest.clone())),
        ),
        (
            "artifact_manifest_digests",
            DataType::Utf8,
            joined(&|l| l.artifact_manifest_digest.clone()),
        ),
        (
            "n_runs",
            DataType::Int64,
            Arc::new(Int64Array::from_iter_values(
                rows.iter().map(|r| r.runs.len() as i64),
            )),
        ),
        (
            "unstable",
            DataType::Boolean,
            Arc::new(BooleanArray::from(
                rows.iter().map(|r| r.unstable).collect::<Vec<_>>(),
            )),
        ),
        (
            "stability_note",
            DataType::Utf8,
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|r| r.stability_note.as_str()),
            )),
        ),
    ];
    for (name, ty, column) in extra {
        if schema.index_of(name).is_ok() {
            return Err(Error::Publication {
                name: String::new(),
                message: format!("the query's column {name} clashes with a lineage column"),
            });
        }
        fields.push(Field::new(name, ty, false));
        columns.push(column);
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| Error::Query {
        context: "building the rollup".into(),
        message: e.to_string(),
    })
}

/// Reads a publication's manifest.
pub fn read_publication(root: &Path, name: &str) -> Result<Publication> {
    if !layout::valid_name(name) {
        return Err(Error::Publication {
            name: name.into(),
            message: "not a publication name".into(),
        });
    }
    let path = root
        .join(layout::publication_dir(name))
        .join("publication.json");
    let bytes = std::fs::read(&path).map_err(Error::io(&path))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Publication {
        name: name.into(),
        message: format!("{}: {e}", path.display()),
    })
}

/// Every publication in the location.
pub fn publications(root: &Path) -> Result<Vec<Publication>> {
    let dir = root.join(layout::PUBLISHED);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("publication.json").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
        .collect();
    names.sort();
    names.iter().map(|n| read_publication(root, n)).collect()
}

/// One verified step of a walk.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Step {
    pub what: String,
    pub digest: String,
}

/// The walk from a published row to its evidence, every digest verified.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Walk {
    pub publication: String,
    pub row: usize,
    pub values: BTreeMap<String, String>,
    pub unstable: bool,
    pub stability_note: String,
    pub query: String,
    pub steps: Vec<Step>,
}

/// Walks row `row` of publication `name` back to the raw evidence. Any digest that does
/// not match (rollup, query, raw record, workload spec, evidence object, manifest) ends
/// the walk with an error that names the object and both digests.
pub fn explain(root: &Path, name: &str, row: usize) -> Result<Walk> {
    let publication = read_publication(root, name)?;
    let dir = root.join(layout::publication_dir(name));
    let mut steps = Vec::new();
    let broken = |step: String, message: String| Error::Lineage { step, message };

    let rollup_path = dir.join(&publication.rollup);
    let rollup = std::fs::read(&rollup_path).map_err(Error::io(&rollup_path))?;
    check(
        &format!("rollup {}", rollup_path.display()),
        &sha256_hex(&rollup),
        &publication.rollup_sha256,
    )?;
    steps.push(Step {
        what: format!("rollup {}", rollup_path.display()),
        digest: publication.rollup_sha256.clone(),
    });
    check(
        "query",
        &sha256_hex(publication.query.as_bytes()),
        &publication.query_spec_digest,
    )?;
    steps.push(Step {
        what: "query text".into(),
        digest: publication.query_spec_digest.clone(),
    });
    let Some(published) = publication.rows.get(row) else {
        return Err(broken(
            format!("row {row}"),
            format!("publication {name} has {} row(s)", publication.rows.len()),
        ));
    };
    for run in &published.runs {
        let record_path = root.join(&run.record_path);
        let bytes = std::fs::read(&record_path).map_err(|e| {
            broken(
                format!("run {} record {}", run.run_id, run.record_path),
                format!(
                    "the raw record cannot be read ({e}): evidence a publication references is gone"
                ),
            )
        })?;
        check(
            &format!("run {} record {}", run.run_id, run.record_path),
            &sha256_hex(&bytes),
            &run.record_digest,
        )?;
        steps.push(Step {
            what: format!(
                "run {} ({}) record {}",
                run.run_id, run.run_key, run.record_path
            ),
            digest: run.record_digest.clone(),
        });
        let record: ResultRecord = serde_json::from_slice(&bytes).map_err(|e| {
            broken(
                format!("record {}", run.record_path),
                format!("not a result record: {e}"),
            )
        })?;
        let spec_digest = perfsweep_benchmarks::set::expand::workload_spec_digest(
            &record.benchmark.kind,
            &record.spec,
        );
        // The record's digest must be the published one.
        check(
            &format!("workload spec of {}", run.record_path),
            &record.workload_spec_digest,
            &run.workload_spec_digest,
        )?;
        // Every backend digests the spec the record holds, so a recomputed digest that
        // differs means the record's spec is not the one that was identified.
        check(
            &format!("workload spec recomputed from {}", run.record_path),
            &spec_digest,
            &record.workload_spec_digest,
        )?;
        steps.push(Step {
            what: "workload spec digest recomputed".into(),
            digest: spec_digest,
        });
        if let Some(evidence) = &record.evidence {
            let path = layout::evidence_path(&evidence.sha256);
            let bytes = std::fs::read(root.join(&path)).map_err(|e| {
                broken(
                    format!("evidence {path} of run {}", run.run_id),
                    format!("cannot be read ({e})"),
                )
            })?;
            check(
                &format!("evidence {path} of run {}", run.run_id),
                &sha256_hex(&bytes),
                &evidence.sha256,
            )?;
            steps.push(Step {
                what: format!("evidence {path} ({} bytes)", bytes.len()),
                digest: evidence.sha256.clone(),
            });
        }
        let manifest =
            perfsweep_benchmarks::results::record::artifact_manifest_digest(record.evidence.iter());
        if manifest != run.artifact_manifest_digest || manifest != record.artifact_manifest_digest {
            return Err(broken(
                format!("artifact manifest of run {}", run.run_id),
                format!(
                    "recomputed {manifest:?}, the record says {:?}, the publication {:?}",
                    record.artifact_manifest_digest, run.artifact_manifest_digest
                ),
            ));
        }
        if let Some(manifest) = manifest {
            steps.push(Step {
                what: format!("artifact manifest of run {}", run.run_id),
                digest: manifest,
            });
        }
    }
    Ok(Walk {
        publication: name.into(),
        row,
        values: published.values.clone(),
        unstable: published.unstable,
        stability_note: published.stability_note.clone(),
        query: publication.query,
        steps,
    })
}

fn check(what: &str, actual: &str, expected: &str) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(Error::Lineage {
            step: what.into(),
            message: format!(
                "sha256 is {actual}, the lineage says {expected}: the object was altered after publication"
            ),
        })
    }
}
