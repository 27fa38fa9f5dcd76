//! Retention tiers (docs/warehouse.md#retention):
//! - hot: Prometheus' own series, kept by Prometheus (`--storage.tsdb.retention.time`);
//!   the warehouse keeps only their reduced slices, in `telemetry_slice_fact`.
//! - warm: the curated fact partitions, kept `warm_days` by partition date. Expired ones
//!   can be rebuilt from the raw store while it keeps the records.
//! - cold: raw records and evidence, kept `cold_days` by run date, except what any
//!   publication references, which is kept as long as the publication exists.
//!
//! Dimensions (small, shared by many runs) and publications are never expired.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jiff::civil::Date;
use perfsweep_benchmarks::results::record::ResultRecord;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::layout;
use crate::schema::Table;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    pub warm_days: u32,
    pub cold_days: u32,
}

impl Default for Policy {
    /// A little over a year of facts for year-on-year trends; three years of raw
    /// evidence, the usual audit horizon of acceptance results.
    fn default() -> Self {
        Self {
            warm_days: 400,
            cold_days: 1095,
        }
    }
}

/// What applying the policy deletes (paths relative to the location) and keeps.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Plan {
    pub fact_partitions: Vec<String>,
    pub records: Vec<String>,
    pub evidence: Vec<String>,
    /// Raw records past the cold tier kept because a publication references them.
    pub kept_for_publications: Vec<String>,
}

fn cutoff(today: Date, days: u32) -> Result<Date> {
    today
        .checked_sub(jiff::Span::new().days(i64::from(days)))
        .map_err(|e| Error::Invalid(format!("{days} days before {today}: {e}")))
}

/// `name=value` directories under `dir`, sorted.
fn partitions(dir: &Path, name: &str) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let prefix = format!("{name}=");
    let mut found: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| {
            let file = e.file_name().to_str()?.to_owned();
            Some((file.strip_prefix(&prefix)?.to_owned(), e.path()))
        })
        .collect();
    found.sort();
    found
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn read_record(path: &Path) -> Result<ResultRecord> {
    let bytes = std::fs::read(path).map_err(Error::io(path))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Source {
        path: path.display().to_string(),
        message: format!("not a result record: {e}"),
    })
}

/// What `policy` expires at `root` on `today`. A partition dated `unknown` never expires.
pub fn plan(root: &Path, policy: Policy, today: Date) -> Result<Plan> {
    let warm = cutoff(today, policy.warm_days)?;
    let cold = cutoff(today, policy.cold_days)?;
    let mut plan = Plan::default();
    let expired = |date: &str, limit: Date| date.parse::<Date>().is_ok_and(|d| d < limit);

    for table in Table::ALL.into_iter().filter(|t| t.is_fact()) {
        for (_, kind_dir) in partitions(&root.join(table.name()), "kind") {
            for (date, dir) in partitions(&kind_dir, "date") {
                if expired(&date, warm) {
                    plan.fact_partitions.push(relative(root, &dir));
                }
            }
        }
    }

    let referenced: BTreeSet<String> = crate::publish::publications(root)?
        .into_iter()
        .flat_map(|p| p.rows)
        .flat_map(|r| r.runs)
        .map(|run| run.record_path)
        .collect();
    let mut kept_evidence = BTreeSet::new();
    let mut dropped_evidence = BTreeSet::new();
    for (date, dir) in partitions(&root.join("raw/records"), "date") {
        let entries = std::fs::read_dir(&dir).map_err(Error::io(&dir))?;
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for file in files {
            let path = relative(root, &file);
            let record = read_record(&file)?;
            let shas = record.evidence.iter().map(|e| e.sha256.clone());
            if !expired(&date, cold) {
                kept_evidence.extend(shas);
            } else if referenced.contains(&path) {
                kept_evidence.extend(shas);
                plan.kept_for_publications.push(path);
            } else {
                dropped_evidence.extend(shas);
                plan.records.push(path);
            }
        }
    }
    plan.evidence = dropped_evidence
        .difference(&kept_evidence)
        .map(|sha| layout::evidence_path(sha))
        .filter(|p| root.join(p).exists())
        .collect();
    Ok(plan)
}

/// Deletes what `plan` lists.
pub fn apply(root: &Path, plan: &Plan) -> Result<()> {
    for dir in &plan.fact_partitions {
        let path = root.join(dir);
        std::fs::remove_dir_all(&path).map_err(Error::io(&path))?;
    }
    for file in plan.records.iter().chain(&plan.evidence) {
        let path = root.join(file);
        std::fs::remove_file(&path).map_err(Error::io(&path))?;
    }
    Ok(())
}
