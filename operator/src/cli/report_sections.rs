//! What `results report` adds from the warehouse: the figures of a published rollup, each
//! walked back to its evidence, with the records behind them; and what changed since a
//! baseline (the warehouse's pivot, over both sides loaded into a scratch warehouse).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Context;
use perfsweep_benchmarks::results::describe_permutation;
use perfsweep_benchmarks::results::record::ResultRecord;
use perfsweep_benchmarks::results::report::ExtraSection;
use perfsweep_warehouse::derive::{Mode, Options};
use perfsweep_warehouse::{Warehouse, build, changed, publish};

/// A publication's figures and the records of the runs behind them.
pub struct Published {
    pub records: Vec<ResultRecord>,
    pub section: ExtraSection,
    /// Rows whose walk back to the evidence failed: the report says so, and so does the
    /// exit code.
    pub broken: usize,
}

/// Publication `name` of the warehouse in `root`: one row per published row, its values,
/// the runs behind it, whether it is stable, and whether its lineage verifies.
pub fn published(root: &Path, name: &str) -> anyhow::Result<Published> {
    let publication = publish::read_publication(root, name)?;
    let columns: BTreeSet<&String> = publication
        .rows
        .iter()
        .flat_map(|row| row.values.keys())
        .collect();
    let mut header: Vec<String> = columns.iter().map(|c| (*c).clone()).collect();
    header.extend(["runs", "stability", "lineage"].map(String::from));
    let mut broken = 0;
    let mut rows = Vec::with_capacity(publication.rows.len());
    let mut record_paths = BTreeSet::new();
    for row in &publication.rows {
        let mut cells: Vec<String> = columns
            .iter()
            .map(|c| row.values.get(*c).cloned().unwrap_or_default())
            .collect();
        let run_ids: BTreeSet<&str> = row.runs.iter().map(|r| r.run_id.as_str()).collect();
        cells.push(format!(
            "{} run(s) of {}",
            row.runs.len(),
            run_ids.into_iter().collect::<Vec<_>>().join(", ")
        ));
        cells.push(if row.unstable {
            format!("UNSTABLE: {}", row.stability_note)
        } else {
            "stable".into()
        });
        cells.push(match publish::explain(root, name, row.row) {
            Ok(walk) => format!("verified ({} digests)", walk.steps.len()),
            Err(error) => {
                broken += 1;
                format!("BROKEN: {error}")
            }
        });
        rows.push(cells);
        record_paths.extend(row.runs.iter().map(|r| r.record_path.clone()));
    }
    let mut records = Vec::with_capacity(record_paths.len());
    for path in record_paths {
        let file = root.join(&path);
        let text = std::fs::read(&file)
            .with_context(|| format!("publication {name}: cannot read {}", file.display()))?;
        let record: ResultRecord = serde_json::from_slice(&text)
            .with_context(|| format!("publication {name}: {path} is not a result record"))?;
        records.push(record);
    }
    let section = ExtraSection {
        heading: format!(
            "Published figures: {name} (query_spec_digest {})",
            publication.query_spec_digest
        ),
        header,
        rows,
    };
    Ok(Published {
        records,
        section,
        broken,
    })
}

/// `results upload --warehouse`: the results directory `dir` loaded into `warehouse`, in
/// publication mode if asked.
pub async fn load(
    dir: &Path,
    warehouse: &Path,
    publication: bool,
    locations: &super::location::LocationArgs,
) -> anyhow::Result<()> {
    let options = Options {
        mode: if publication {
            Mode::Publication
        } else {
            Mode::Exploration
        },
        price_per_hour: None,
    };
    super::warehouse::load(&[dir.to_owned()], warehouse, &options, locations).await?;
    Ok(())
}

/// What changed from the run in `baseline` to the run in `candidate` (directories or
/// their mirrors), as report sections; and whether a case got worse. Both sides are
/// loaded into the warehouse at `into` (beside the report, so that the evidence the
/// sections name is there to open).
pub async fn what_changed(
    sides: [(&Path, &str); 2],
    records: &[ResultRecord],
    into: &Path,
    threshold_percent: f64,
) -> anyhow::Result<(Vec<ExtraSection>, bool)> {
    let [(baseline, baseline_run), (candidate, candidate_run)] = sides;
    let sources = [baseline.to_owned(), candidate.to_owned()];
    let options = Options {
        mode: Mode::Exploration,
        price_per_hour: None,
    };
    build::build(&sources, into, &options).await?;
    let warehouse = Warehouse::open(into).await?;
    let report =
        changed::what_changed(&warehouse, baseline_run, candidate_run, threshold_percent).await?;
    let worse = !report.slower_cases.is_empty();
    let prefix = into
        .file_name()
        .map_or_else(String::new, |name| format!("{}/", name.to_string_lossy()));
    // Case keys are digests; a reader knows a case by its permutation.
    let cases: BTreeMap<String, String> = records
        .iter()
        .map(|r| {
            let permutation = describe_permutation(&r.benchmark.permutation);
            (r.case_key(), format!("{} ({permutation})", r.case_key()))
        })
        .collect();
    let named = |key: &str| cases.get(key).cloned().unwrap_or_else(|| key.to_owned());
    Ok((sections(&report, &prefix, &named), worse))
}

fn number(value: f64) -> String {
    format!("{value:.4}")
}

/// The pivot's four steps as tables: cases, points, nodes, evidence.
/// `prefix` leads from the report to the warehouse the evidence paths are relative to.
fn sections(
    report: &changed::Report,
    prefix: &str,
    case: &dyn Fn(&str) -> String,
) -> Vec<ExtraSection> {
    let title = |step: &str| {
        format!(
            "What changed since run {}: {step} (worse by more than {}%)",
            report.baseline, report.threshold_percent
        )
    };
    let strings = |cells: &[&str]| cells.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
    if report.slower_cases.is_empty() {
        return vec![ExtraSection {
            heading: title("cases"),
            header: strings(&["finding"]),
            rows: vec![vec![format!(
                "no case of run {} got worse than in run {}",
                report.candidate, report.baseline
            )]],
        }];
    }
    vec![
        ExtraSection {
            heading: title("cases that got worse"),
            header: strings(&["kind", "case", "metric", "baseline", "candidate", "worse"]),
            rows: report
                .slower_cases
                .iter()
                .map(|c| {
                    vec![
                        c.kind.clone(),
                        case(&c.case_key),
                        c.metric.clone(),
                        number(c.baseline),
                        number(c.candidate),
                        format!("{:.1}%", c.worse_percent),
                    ]
                })
                .collect(),
        },
        ExtraSection {
            heading: title("affected workload points"),
            header: strings(&["case", "point", "metric", "baseline", "candidate", "worse"]),
            rows: report
                .points
                .iter()
                .map(|p| {
                    vec![
                        case(&p.case_key),
                        p.point.clone(),
                        p.metric.clone(),
                        number(p.baseline),
                        number(p.candidate),
                        format!("{:.1}%", p.worse_percent),
                    ]
                })
                .collect(),
        },
        ExtraSection {
            heading: title("abnormal nodes"),
            header: strings(&["node", "finding"]),
            rows: report
                .abnormal_nodes
                .iter()
                .map(|n| vec![n.node.clone(), n.finding.clone()])
                .collect(),
        },
        ExtraSection {
            heading: title("raw evidence of the worse runs"),
            header: strings(&["benchmark", "record", "evidence"]),
            rows: report
                .evidence
                .iter()
                .map(|e| {
                    let evidence: Vec<String> = e
                        .evidence_paths
                        .split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| format!("{prefix}{p}"))
                        .collect();
                    vec![
                        e.name.clone(),
                        format!("{prefix}{}", e.record_path),
                        evidence.join(", "),
                    ]
                })
                .collect(),
        },
    ]
}
