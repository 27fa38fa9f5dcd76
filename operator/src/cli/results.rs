//! `perfsweep results`: list, show, compare, export and plot result records as written
//! by `perfsweep run --output DIR` (one JSON record per run, evidence under `evidence/`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use perfsweep_benchmarks::judging::stats::Stability;
use perfsweep_benchmarks::results::compare::{self, Criteria, Direction};
use perfsweep_benchmarks::results::plot::{self, Axis, PlotSpec};
use perfsweep_benchmarks::results::record::{RecordOutcome, ResultRecord};
use perfsweep_benchmarks::results::{self, describe_permutation, si};
use perfsweep_benchmarks::results::{intake, raster};

#[derive(Debug, clap::Args)]
pub struct ResultsArgs {
    #[command(subcommand)]
    pub command: ResultsCommand,
    /// Coefficient of variation above which a case is unstable (0.05 = 5%).
    #[arg(long, global = true, default_value_t = 0.05)]
    pub max_cv: f64,
    /// Fewest repetitions for a case to count as stable.
    #[arg(long, global = true, default_value_t = 3)]
    pub min_repetitions: usize,
    /// Where a results argument is an export location (`s3://bucket/prefix`,
    /// `gs://...`, `az://...`, `file:///dir`) rather than a directory: one of its
    /// parameters, KEY=VALUE (repeatable), e.g. `endpoint=http://127.0.0.1:9000`.
    /// Credentials come from the environment, as for `--export`.
    #[arg(long = "location-param", global = true, value_name = "KEY=VALUE",
          value_parser = super::export::key_value)]
    pub location_params: Vec<(String, String)>,
    /// Node-pair and each-node sweeps: a pair (a node) is an outlier when it is more than
    /// this many robust standard deviations (1.4826 × MAD of the node medians) worse than
    /// the fleet median…
    #[arg(long, global = true, default_value_t = 3.0)]
    pub outlier_mads: f64,
    /// …and more than this fraction of the median worse (0.1 = 10%).
    #[arg(long, global = true, default_value_t = 0.1)]
    pub outlier_min_deviation: f64,
}

#[derive(Debug, clap::Subcommand)]
pub enum ResultsCommand {
    /// A result record from the logs of a benchmark's result pods run outside a cluster
    /// (the image smoke runs), judged as the operator judges them. Exits 1 when the
    /// benchmark failed (its record is written all the same).
    Import(super::import::ImportArgs),
    /// One line per run: name, repetition, outcome, headline metric. Runs whose
    /// evidence is missing or altered are flagged.
    List {
        /// Results directories, record files or export locations (one or more).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
    },
    /// Per case (permutation) and metric: count, mean, stddev, CV, min/median/max and
    /// the 95% confidence interval of the mean, flagged when unstable.
    Show {
        /// Results directories, record files or export locations (one or more).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Only the headline metric of each case.
        #[arg(long)]
        headline: bool,
    },
    /// What changed from BASELINE to CANDIDATE, per case and metric (Welch's t-test).
    /// Exits 1 when something regressed.
    Compare {
        baseline: PathBuf,
        candidate: PathBuf,
        /// Significance level of the two-sided test.
        #[arg(long, default_value_t = 0.05)]
        alpha: f64,
        /// Smallest relative change that counts (0.01 = 1%).
        #[arg(long, default_value_t = 0.01)]
        min_change: f64,
        /// Compare every metric, not only each case's headline metric.
        #[arg(long)]
        all_metrics: bool,
        /// Print the comparison as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every run and metric as CSV (one row per run and metric).
    Export {
        /// Results directories, record files or export locations (one or more).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Output file (default: stdout).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
    },
    /// A metric against a swept parameter (or another metric) as SVG or PNG, with 95%
    /// confidence intervals as error bars.
    Plot {
        /// Results directories, record files or export locations (one or more).
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// The metric on the vertical axis (default: the headline metric).
        #[arg(long)]
        metric: Option<String>,
        /// The permutation parameter on the horizontal axis.
        #[arg(long, conflicts_with = "x_metric")]
        parameter: Option<String>,
        /// A metric on the horizontal axis instead (e.g. latency against throughput).
        #[arg(long)]
        x_metric: Option<String>,
        /// The file to write; with `--format both`, its `.svg` and `.png` siblings.
        #[arg(long, short = 'o')]
        output: PathBuf,
        /// `svg`, `png` or `both` (default: `png` for an output ending in `.png`,
        /// otherwise `svg`).
        #[arg(long, value_enum)]
        format: Option<PlotFormat>,
        /// Draw a node-pair sweep's pair matrix instead: node × node, coloured by the
        /// judged metric, outlier pairs crossed out, suspect nodes in red. For an
        /// each-node sweep, the per-node view: a bar per node with its reference bounds
        /// and verdict, rejected nodes in red.
        #[arg(long, conflicts_with_all = ["metric", "parameter", "x_metric"])]
        heatmap: bool,
    },
    /// An acceptance report: verdicts under the criteria in the records' spec
    /// (`acceptance`), statistics, SVG charts and lineage (run ids, spec digests,
    /// evidence), as `report.md` and `report.html` in OUTPUT. Exits 1 when a run with
    /// criteria was rejected or failed.
    Report {
        /// The results directory (not needed with --publication, whose runs' records the
        /// warehouse holds).
        #[arg(required_unless_present = "publication")]
        dir: Option<PathBuf>,
        /// The directory to write the report into (created if missing).
        #[arg(long, short = 'o')]
        output: PathBuf,
        /// Also say what changed since the run in BASELINE (a results directory of one
        /// run, or an export location): the cases that got worse, their workload points,
        /// abnormal nodes and the raw evidence, as `warehouse what-changed` finds them.
        /// Both sides are loaded into `changed-warehouse/` beside the report.
        #[arg(long, value_name = "BASELINE")]
        baseline: Option<PathBuf>,
        /// Worse by more than this percent counts (with --baseline).
        #[arg(long, default_value_t = 5.0, requires = "baseline")]
        threshold_percent: f64,
        /// Take the figures from publication NAME of --warehouse: its rows, each walked
        /// back to its evidence, and the records of the runs behind them. Exits 1 when a
        /// row's lineage does not verify.
        #[arg(long, value_name = "NAME", requires = "warehouse")]
        publication: Option<String>,
        /// The warehouse of --publication (a directory or an export location).
        #[arg(long, value_name = "LOCATION", env = "PERFSWEEP_WAREHOUSE")]
        warehouse: Option<PathBuf>,
    },
    /// Upload a results directory (`run --output DIR`) to an export location: records as
    /// JSON Lines and Parquet, evidence as files (e.g. after `run --export` failed);
    /// and/or load it into a warehouse's curated tables (`--warehouse`).
    Upload {
        dir: PathBuf,
        #[command(flatten)]
        export: super::export::ExportArgs,
        /// Also load the records into the warehouse at LOCATION (a directory or an
        /// export location such as `s3://bucket/warehouse`), as `warehouse build` does;
        /// runs already there are left alone.
        #[arg(long, value_name = "LOCATION")]
        warehouse: Option<PathBuf>,
        /// Load them as publication runs rather than exploration.
        #[arg(long, requires = "warehouse")]
        publication: bool,
    },
}

pub async fn run(args: ResultsArgs) -> anyhow::Result<ExitCode> {
    let stability = Stability {
        max_cv: args.max_cv,
        min_repetitions: args.min_repetitions,
    };
    let rule = perfsweep_benchmarks::judging::fleet::OutlierRule {
        mads: args.outlier_mads,
        min_deviation: args.outlier_min_deviation,
    };
    let params: std::collections::BTreeMap<String, String> =
        args.location_params.iter().cloned().collect();
    let load_any = |path: PathBuf| {
        let params = params.clone();
        async move { load_location_or_dir(&path, &params).await }
    };
    let load_many = |paths: Vec<PathBuf>| {
        let params = params.clone();
        async move { load_locations_or_dirs(&paths, &params).await }
    };
    match args.command {
        ResultsCommand::List { dirs } => {
            let loaded = load_many(dirs).await?;
            print!("{}", list(&loaded.records, &loaded.flags));
            Ok(ExitCode::SUCCESS)
        }
        ResultsCommand::Show { dirs, headline } => {
            let records = load_many(dirs).await?.records;
            print!("{}", show(&results::group(&records, stability), headline));
            Ok(ExitCode::SUCCESS)
        }
        ResultsCommand::Compare {
            baseline,
            candidate,
            alpha,
            min_change,
            all_metrics,
            json,
        } => {
            let before = results::group(&load_any(baseline).await?, stability);
            let after = results::group(&load_any(candidate).await?, stability);
            let comparison = compare::compare(
                &before,
                &after,
                Criteria {
                    alpha,
                    min_relative_change: min_change,
                },
                !all_metrics,
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&comparison)?);
            } else {
                print!("{}", compare_table(&comparison));
            }
            Ok(if comparison.count(Direction::Regressed) > 0 {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        ResultsCommand::Export { dirs, output } => {
            let csv = results::csv::export(&load_many(dirs).await?.records);
            match output {
                Some(path) => std::fs::write(&path, csv)
                    .with_context(|| format!("cannot write {}", path.display()))?,
                None => print!("{csv}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        ResultsCommand::Import(import) => {
            let (path, succeeded) = super::import::import(&import, &super::run::run_id())?;
            println!("wrote {}", path.display());
            Ok(if succeeded {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        ResultsCommand::Report {
            dir,
            output,
            baseline,
            threshold_percent,
            publication,
            warehouse,
        } => {
            let inputs = ReportInputs {
                dir,
                baseline,
                threshold_percent,
                publication: publication.zip(warehouse),
                locations: super::location::LocationArgs::with_params(args.location_params),
            };
            write_report(&inputs, &output, stability, rule).await
        }
        ResultsCommand::Upload {
            dir,
            export,
            warehouse,
            publication,
        } => {
            let Some(warehouse) = warehouse else {
                return super::export::upload(&dir, &export).await;
            };
            let exported = if export.export.is_some() {
                super::export::upload(&dir, &export).await?
            } else {
                ExitCode::SUCCESS
            };
            let locations = super::location::LocationArgs::with_params(args.location_params);
            super::report_sections::load(&dir, &warehouse, publication, &locations).await?;
            Ok(exported)
        }
        ResultsCommand::Plot {
            dirs,
            metric,
            parameter,
            x_metric,
            output,
            format,
            heatmap,
        } => {
            // Refuse a file name that does not say what it holds before any work.
            let targets = plot_targets(&output, format)?;
            let records = load_many(dirs).await?.records;
            if heatmap {
                let scene = super::heatmap::scene(&records, rule)?;
                return write_scene(&scene, targets);
            }
            let cases = results::group(&records, stability);
            if cases.iter().all(|c| c.headline().is_none()) {
                anyhow::bail!("no succeeded run has a metric to plot");
            }
            // Without --metric, each case's own headline (fio's read or write bandwidth).
            let metric = metric.unwrap_or_else(|| plot::HEADLINE.to_owned());
            let x = match (parameter, x_metric) {
                (_, Some(m)) => Axis::Metric(m),
                (Some(p), None) => Axis::Parameter(p),
                (None, None) => Axis::Parameter(
                    cases
                        .iter()
                        .flat_map(|c| c.permutation.keys())
                        .next()
                        .cloned()
                        .context("the runs have no permutation parameters: give --x-metric")?,
                ),
            };
            let scene = plot::scene(
                &cases,
                &PlotSpec {
                    x,
                    y: metric,
                    title: None,
                },
            )?;
            write_scene(&scene, targets)
        }
    }
}

/// Writes a chart to each of `targets` (see [`plot_targets`]).
fn write_scene(
    scene: &plot::Scene,
    targets: Vec<(PathBuf, PlotFormat)>,
) -> anyhow::Result<ExitCode> {
    let mut files: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for (path, format) in targets {
        let bytes = match format {
            PlotFormat::Png => {
                raster::png(scene).with_context(|| format!("drawing {}", path.display()))?
            }
            _ => plot::to_svg(scene).into_bytes(),
        };
        files.push((path, bytes));
    }
    for (path, bytes) in files {
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// What `results plot` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlotFormat {
    Svg,
    Png,
    /// An `.svg` and a `.png` file.
    Both,
}

/// The files `results plot` writes and their formats. Without `--format` the extension
/// decides (`.svg` or `.png`); a name that says another format (`x.jpg`) is refused
/// rather than filled with SVG.
fn plot_targets(
    output: &Path,
    format: Option<PlotFormat>,
) -> anyhow::Result<Vec<(PathBuf, PlotFormat)>> {
    let extension = output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let by_extension = match extension.as_deref() {
        Some("svg") => Some(PlotFormat::Svg),
        Some("png") => Some(PlotFormat::Png),
        _ => None,
    };
    match (format, by_extension, extension.as_deref()) {
        (Some(PlotFormat::Both), ..) => Ok(vec![
            (output.with_extension("svg"), PlotFormat::Svg),
            (output.with_extension("png"), PlotFormat::Png),
        ]),
        (Some(format), Some(named), _) if format != named => anyhow::bail!(
            "{} is named as {named:?} but --format asks for {format:?}: name the file .{}",
            output.display(),
            format!("{format:?}").to_ascii_lowercase()
        ),
        (Some(format), _, None) | (Some(format), Some(_), _) => {
            Ok(vec![(output.to_owned(), format)])
        }
        (None, Some(format), _) => Ok(vec![(output.to_owned(), format)]),
        (_, None, Some(other)) => anyhow::bail!(
            "cannot write a .{other} chart to {}: `results plot` writes SVG or PNG; \
             name the file .svg or .png",
            output.display()
        ),
        (None, None, None) => anyhow::bail!(
            "{} has no extension: name it .svg or .png, or give --format",
            output.display()
        ),
    }
}

/// The one run id of a side, which what-changed compares.
fn single_run_id(records: &[ResultRecord], side: &str) -> anyhow::Result<String> {
    let ids: BTreeSet<&str> = records.iter().map(|r| r.run_id.as_str()).collect();
    match ids.len() {
        1 => Ok(ids.into_iter().next().unwrap_or_default().to_owned()),
        0 => anyhow::bail!("{side} holds no result records"),
        _ => anyhow::bail!(
            "{side} holds several runs ({}): what changed compares one run with one run; \
             give the results directory of one `perfsweep run`",
            ids.into_iter().collect::<Vec<_>>().join(", ")
        ),
    }
}

/// What `results report` is made from.
struct ReportInputs {
    dir: Option<PathBuf>,
    baseline: Option<PathBuf>,
    threshold_percent: f64,
    /// Publication name and its warehouse.
    publication: Option<(String, PathBuf)>,
    locations: super::location::LocationArgs,
}

/// Where the report's sections from the warehouse stand.
#[derive(Default)]
struct FromWarehouse {
    sections: Vec<results::report::ExtraSection>,
    /// Published rows whose lineage does not verify.
    broken: usize,
}

async fn write_report(
    inputs: &ReportInputs,
    output: &Path,
    stability: Stability,
    rule: perfsweep_benchmarks::judging::fleet::OutlierRule,
) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let mut records = Vec::new();
    let mut from_warehouse = FromWarehouse::default();
    if let Some((name, warehouse)) = &inputs.publication {
        let opened = inputs.locations.open(warehouse).await?;
        let published = super::report_sections::published(opened.dir(), name)?;
        records.extend(published.records);
        from_warehouse.sections.push(published.section);
        from_warehouse.broken = published.broken;
    }
    if let Some(dir) = &inputs.dir {
        let candidate = inputs.locations.open(dir).await?;
        let own = load(candidate.dir())?;
        if let Some(baseline) = &inputs.baseline {
            let base = inputs.locations.open(baseline).await?;
            let base_records = load(base.dir())?;
            let base_run =
                single_run_id(&base_records, &format!("--baseline {}", baseline.display()))?;
            let own_run = single_run_id(&own, &dir.display().to_string())?;
            let both: Vec<ResultRecord> = base_records.into_iter().chain(own.clone()).collect();
            let (sections, worse) = super::report_sections::what_changed(
                [(base.dir(), &base_run), (candidate.dir(), &own_run)],
                &both,
                &output.join("changed-warehouse"),
                inputs.threshold_percent,
            )
            .await?;
            eprintln!(
                "what changed since run {base_run}: {}",
                if worse {
                    "some cases got worse (see the report)"
                } else {
                    "no case got worse"
                }
            );
            from_warehouse.sections.extend(sections);
        }
        records.extend(own);
    }
    // A run both published and given directly is one run.
    records.sort_by(|a, b| {
        (&a.run_id, &a.benchmark.name, a.benchmark.repetition).cmp(&(
            &b.run_id,
            &b.benchmark.name,
            b.benchmark.repetition,
        ))
    });
    records.dedup_by(|a, b| {
        a.run_id == b.run_id
            && a.benchmark.name == b.benchmark.name
            && a.benchmark.repetition == b.benchmark.repetition
    });
    let cases = results::group(&records, stability);
    let link_dir = inputs.dir.clone().unwrap_or_else(|| output.to_owned());
    let fleet = results::fleet_report::section(
        &records,
        rule,
        &super::heatmap::relative_link(output, &link_dir),
    );
    let report =
        results::report::render_with_fleet(&records, &cases, &fleet, &from_warehouse.sections);
    let mut files = vec![
        ("report.md".to_owned(), report.markdown),
        ("report.html".to_owned(), report.html),
    ];
    files.extend(report.charts);
    for (name, text) in &files {
        let path = output.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    for group in &fleet.groups {
        eprintln!("{}: {}", group.label, group.verdict.headline());
    }
    if !fleet.groups.is_empty() {
        // The full per-node and per-link table, next to the report.
        let table = output.join("fleet.json");
        let all: Vec<&perfsweep_benchmarks::judging::fleet::FleetVerdict> =
            fleet.groups.iter().map(|g| &g.verdict).collect();
        std::fs::write(&table, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("cannot write {}", table.display()))?;
    }
    for group in &fleet.node_groups {
        eprintln!("{}: {}", group.label, group.verdict.headline());
    }
    if !fleet.node_groups.is_empty() {
        // Every node with its figure, reference and verdict, next to the report.
        let table = output.join("nodes.json");
        let all: Vec<&perfsweep_benchmarks::judging::nodes::NodesVerdict> =
            fleet.node_groups.iter().map(|g| &g.verdict).collect();
        std::fs::write(&table, serde_json::to_string_pretty(&all)?)
            .with_context(|| format!("cannot write {}", table.display()))?;
    }
    let o = &report.overall;
    eprintln!(
        "wrote {} ({} accepted, {} rejected, {} failed, {} without criteria)",
        output.join("report.html").display(),
        o.accepted,
        o.rejected,
        o.failed,
        o.without_criteria
    );
    if from_warehouse.broken > 0 {
        eprintln!(
            "error: {} published row(s) do not walk back to their evidence (see the report)",
            from_warehouse.broken
        );
        return Ok(ExitCode::FAILURE);
    }
    // Not accepted has the exit code `perfsweep run` gives it (1 stays "could not do it").
    Ok(
        if o.accepted() == Some(false) || fleet.passed() == Some(false) {
            ExitCode::from(crate::verdict::EXIT_NOT_ACCEPTED)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// The records at an export location (`s3://...`, read through object_store) or under
/// a local path ([`load`]), sorted alike.
pub async fn load_location_or_dir(
    path: &Path,
    params: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<Vec<ResultRecord>> {
    Ok(
        load_locations_or_dirs(std::slice::from_ref(&path.to_owned()), params)
            .await?
            .records,
    )
}

/// The records of several locations or directories together, duplicates counted once.
pub async fn load_locations_or_dirs(
    paths: &[PathBuf],
    params: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<Loaded> {
    let mut loaded = Loaded::default();
    let mut read = Vec::new();
    for path in paths {
        match path.to_str() {
            Some(uri) if crate::export::read::is_location(uri) => {
                let records = crate::export::read::load(uri, params).await?;
                read.extend(records.into_iter().map(|r| (uri.to_owned(), r)));
            }
            _ => read.extend(read_dir_records(path, &mut loaded)?),
        }
    }
    finish(read, &mut loaded);
    Ok(loaded)
}

/// Records read, with what reading them noticed.
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: Vec<ResultRecord>,
    /// Files skipped, copies counted once, evidence problems: printed on standard error
    /// by every `results` command.
    pub notes: Vec<String>,
    /// Per record (run id, benchmark name): what is wrong with its evidence.
    pub flags: std::collections::BTreeMap<(String, String), String>,
}

/// Every record under `path` (a record file, or a directory searched recursively,
/// skipping `evidence/`), sorted by set, case and repetition. What reading noticed is
/// printed on standard error.
pub fn load(path: &Path) -> anyhow::Result<Vec<ResultRecord>> {
    let mut loaded = Loaded::default();
    let read = read_dir_records(path, &mut loaded)?;
    finish(read, &mut loaded);
    Ok(loaded.records)
}

/// Dedupes and sorts what was read, and prints the notes.
fn finish(read: Vec<(String, ResultRecord)>, loaded: &mut Loaded) {
    let (kept, copies) = intake::dedupe(read);
    loaded
        .notes
        .extend(copies.into_iter().map(|c| format!("warning: {c}")));
    loaded.records = kept.into_iter().map(|(_, record)| record).collect();
    sort(&mut loaded.records);
    for note in &loaded.notes {
        eprintln!("{note}");
    }
}

/// The records under `path` with the file each came from. Files that are not records are
/// skipped with a note; records of an unknown schema version, or broken ones, stop the
/// command; records whose evidence is missing or altered are flagged in a note.
fn read_dir_records(
    path: &Path,
    loaded: &mut Loaded,
) -> anyhow::Result<Vec<(String, ResultRecord)>> {
    let mut files = Vec::new();
    collect(path, &mut files)?;
    let mut records = Vec::with_capacity(files.len());
    for file in files {
        let text = std::fs::read_to_string(&file)
            .with_context(|| format!("cannot read {}", file.display()))?;
        // A record per file (`run --output`), or per line (an export's JSON Lines).
        let documents: Vec<(String, &str)> = if file
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("jsonl"))
        {
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim().is_empty())
                .map(|(index, line)| (format!("{}:{}", file.display(), index + 1), line))
                .collect()
        } else {
            vec![(file.display().to_string(), text.as_str())]
        };
        for (origin, text) in documents {
            match intake::read(text).with_context(|| origin.clone())? {
                intake::Intake::NotARecord(why) => {
                    loaded
                        .notes
                        .push(format!("note: skipped {}: {why}", file.display()));
                }
                intake::Intake::Record(record) => {
                    if let Some(evidence) = &record.evidence {
                        let candidates = [
                            file.parent().map(|d| d.join(&evidence.path)),
                            path.is_dir().then(|| path.join(&evidence.path)),
                        ];
                        let bytes = candidates
                            .into_iter()
                            .flatten()
                            .find_map(|p| std::fs::read(p).ok());
                        if let Some(problem) = intake::evidence_problem(evidence, bytes.as_deref())
                        {
                            loaded.notes.push(format!(
                                "warning: {} (run {} benchmark {}): {problem}",
                                file.display(),
                                record.run_id,
                                record.benchmark.name
                            ));
                            loaded.flags.insert(
                                (record.run_id.clone(), record.benchmark.name.clone()),
                                problem,
                            );
                        }
                    }
                    records.push((origin, *record));
                }
            }
        }
    }
    if records.is_empty() {
        anyhow::bail!(
            "no result records (*.json, *.jsonl) under {}",
            path.display()
        );
    }
    Ok(records)
}

/// By run, set, repetition and name.
fn sort(records: &mut [ResultRecord]) {
    records.sort_by(|a, b| {
        let key = |r: &ResultRecord| {
            (
                r.run_id.clone(),
                r.benchmark.set.clone(),
                r.benchmark.repetition,
                r.benchmark.name.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}

fn collect(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if path.is_file() {
        files.push(path.to_owned());
        return Ok(());
    }
    let entries =
        std::fs::read_dir(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut entries: Vec<PathBuf> = entries
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read {}", path.display()))?;
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            if entry.file_name().is_some_and(|n| n != "evidence") {
                collect(&entry, files)?;
            }
        } else if entry
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json") || e.eq_ignore_ascii_case("jsonl"))
        {
            files.push(entry);
        }
    }
    Ok(())
}

fn list(
    records: &[ResultRecord],
    flags: &std::collections::BTreeMap<(String, String), String>,
) -> String {
    let mut rows = vec![vec![
        "RUN".to_owned(),
        "NAME".into(),
        "KIND".into(),
        "PERMUTATION".into(),
        "REP".into(),
        "OUTCOME".into(),
        "HEADLINE".into(),
    ]];
    for r in records {
        let headline = r
            .metrics()
            .first()
            .map(|m| format!("{} = {}", m.name, si(m.value)))
            .unwrap_or_default();
        rows.push(vec![
            r.run_id.clone(),
            r.benchmark.name.clone(),
            r.benchmark.kind.clone(),
            describe_permutation(&r.benchmark.permutation),
            r.benchmark
                .repetition
                .map_or_else(|| "-".into(), |n| n.to_string()),
            {
                let outcome = match &r.outcome {
                    RecordOutcome::Succeeded { summary, .. } => summary.clone(),
                    RecordOutcome::Failed { reason, .. } => format!("FAILED ({reason})"),
                };
                match flags.get(&(r.run_id.clone(), r.benchmark.name.clone())) {
                    Some(_) => format!("{outcome} [EVIDENCE NOT VERIFIED]"),
                    None => outcome,
                }
            },
            headline,
        ]);
    }
    table(&rows)
}

fn show(cases: &[results::Case], headline_only: bool) -> String {
    let mut rows = vec![
        [
            "KIND",
            "PERMUTATION",
            "METRIC",
            "N",
            "MEAN",
            "±CI95",
            "STDDEV",
            "CV",
            "MIN",
            "MEDIAN",
            "MAX",
            "STABLE",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for case in cases {
        let metrics = if headline_only {
            &case.metrics[..case.metrics.len().min(1)]
        } else {
            &case.metrics[..]
        };
        for m in metrics {
            let s = &m.summary;
            rows.push(vec![
                case.kind.clone(),
                describe_permutation(&case.permutation),
                m.name.clone(),
                if case.failed > 0 {
                    format!("{} ({} failed)", s.count, case.failed)
                } else {
                    s.count.to_string()
                },
                si(s.mean),
                s.ci95_half_width().map_or_else(|| "-".into(), si),
                s.stddev.map_or_else(|| "-".into(), si),
                s.cv.map_or_else(|| "-".into(), |cv| format!("{:.1}%", cv * 100.0)),
                si(s.min),
                si(s.median),
                si(s.max),
                match s.unstable {
                    None => "yes".into(),
                    Some(why) => format!("NO ({why:?})"),
                },
            ]);
        }
        if case.metrics.is_empty() {
            rows.push(vec![
                case.kind.clone(),
                describe_permutation(&case.permutation),
                "-".into(),
                format!("0 ({} failed)", case.failed),
            ]);
        }
    }
    table(&rows)
}

fn compare_table(comparison: &compare::Comparison) -> String {
    let mut rows = vec![
        [
            "KIND",
            "PERMUTATION",
            "METRIC",
            "BASELINE",
            "CANDIDATE",
            "CHANGE",
            "P (WELCH)",
            "VERDICT",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for c in &comparison.changes {
        let side = |s: &perfsweep_benchmarks::judging::stats::Summary| match s.ci95_half_width() {
            Some(h) => format!("{} ±{} (n={})", si(s.mean), si(h), s.count),
            None => format!("{} (n={})", si(s.mean), s.count),
        };
        rows.push(vec![
            c.kind.clone(),
            c.permutation.clone(),
            format!("{} ({} better)", c.metric, c.better.as_str()),
            side(&c.baseline),
            side(&c.candidate),
            c.relative_change
                .map_or_else(|| "-".into(), |r| format!("{:+.2}%", r * 100.0)),
            c.p_value.map_or_else(|| "-".into(), |p| format!("{p:.4}")),
            c.verdict.as_str().to_uppercase(),
        ]);
    }
    let mut out = table(&rows);
    for case in &comparison.only_baseline {
        let _ = writeln!(out, "only in the baseline: {case}");
    }
    for case in &comparison.only_candidate {
        let _ = writeln!(out, "only in the candidate: {case}");
    }
    let _ = writeln!(
        out,
        "{} improved, {} regressed, {} no significant change, {} unstable \
         (Welch's two-sided t-test on the repetitions)",
        comparison.count(Direction::Improved),
        comparison.count(Direction::Regressed),
        comparison.count(Direction::NoSignificantChange),
        comparison.count(Direction::Unstable),
    );
    out
}

/// Left-aligned columns separated by two spaces.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            line.push_str(&" ".repeat(widths[i] - cell.chars().count()));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
