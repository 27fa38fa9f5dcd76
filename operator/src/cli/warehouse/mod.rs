//! `perfsweep warehouse`: build the curated tables from result records, query them with
//! SQL, publish numbers with lineage and walk them back, the "what changed?" pivot and
//! retention. The logic is perfsweep-warehouse's; this module parses and prints.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use perfsweep_warehouse::derive::{Mode, Options};
use perfsweep_warehouse::output::Format;
use perfsweep_warehouse::prometheus as telemetry;
use perfsweep_warehouse::{Warehouse, build, changed, publish, retention};

pub use super::location::LocationArgs;

#[derive(Debug, clap::Args)]
pub struct WarehouseArgs {
    #[command(subcommand)]
    pub command: WarehouseCommand,
    #[command(flatten)]
    pub location: LocationArgs,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Table,
    Csv,
    Json,
}

impl From<OutputFormat> for Format {
    fn from(format: OutputFormat) -> Self {
        match format {
            OutputFormat::Table => Format::Table,
            OutputFormat::Csv => Format::Csv,
            OutputFormat::Json => Format::Json,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum BuildMode {
    Publication,
    #[default]
    Exploration,
}

#[derive(Debug, clap::Subcommand)]
pub enum WarehouseCommand {
    /// Load result records (results directories, record files, `*.json` and `*.jsonl`,
    /// with their `evidence/`, or export locations such as `s3://bucket/prefix`) and
    /// telemetry slices into the warehouse at OUTPUT (a directory or an export
    /// location). Idempotent: runs already there are left alone.
    Build {
        #[arg(required = true)]
        sources: Vec<PathBuf>,
        #[arg(long)]
        output: PathBuf,
        /// Whether these runs are publication runs or exploration.
        #[arg(long, value_enum, default_value_t = BuildMode::Exploration)]
        mode: BuildMode,
        /// Price of the serving deployment per hour, for cost per request and per token.
        #[arg(long)]
        price_per_hour: Option<f64>,
    },
    /// Pull telemetry slices from Prometheus for the runs in SOURCES (results
    /// directories or record files): per run and node it ran on, the mean CPU, memory,
    /// network and disk (node_exporter) and GPU (DCGM exporter) series over the run's
    /// window. Written as slice documents under OUTPUT, one file per run, which
    /// `warehouse build` loads into telemetry_slice_fact.
    Telemetry {
        #[arg(required = true)]
        sources: Vec<PathBuf>,
        /// Prometheus' base URL, e.g. http://prometheus.monitoring:9090.
        #[arg(long)]
        prometheus: String,
        #[arg(long)]
        output: PathBuf,
        /// The series label whose value is the node's name, as the records name it.
        #[arg(long, default_value = "node")]
        node_label: String,
        /// Prometheus' scrape interval in seconds: the averaging step (rates span four).
        #[arg(long, default_value_t = 15)]
        scrape_interval: u64,
        /// Network devices left out (a regular expression).
        #[arg(long, default_value_t = perfsweep_warehouse::prometheus::Settings::default().exclude_devices)]
        exclude_devices: String,
    },
    /// Run one SQL statement over the warehouse's tables and saved views
    /// (latest_per_case, trend_per_case, serving_trend, regressions, worst_nodes,
    /// training_scaling).
    Query {
        /// The warehouse: a directory or an export location (`s3://bucket/prefix`, ...).
        location: PathBuf,
        sql: String,
        #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
        format: OutputFormat,
    },
    /// Materialize a query's answer as a published rollup whose rows carry the query's
    /// digest and the runs behind each number. The query names its runs in a
    /// `run_keys` column (`string_agg(run_key, ',') AS run_keys`).
    Publish {
        /// The warehouse: a directory or an export location (`s3://bucket/prefix`, ...).
        #[arg(long, env = "PERFSWEEP_WAREHOUSE")]
        warehouse: PathBuf,
        /// A file holding the SQL query.
        #[arg(long)]
        query: PathBuf,
        #[arg(long)]
        name: String,
    },
    /// Walk row ROW of publication NAME back to its query, runs and raw evidence,
    /// verifying every digest. Exits 1 when a digest does not match.
    Explain {
        name: String,
        row: usize,
        #[arg(long, env = "PERFSWEEP_WAREHOUSE")]
        warehouse: PathBuf,
        /// Print the walk as JSON.
        #[arg(long)]
        json: bool,
    },
    /// From run BASELINE to run CANDIDATE (run ids): the cases that got worse, their
    /// workload points, abnormal nodes and the raw evidence. Exits 1 when a case got
    /// worse.
    WhatChanged {
        baseline: String,
        candidate: String,
        #[arg(long, env = "PERFSWEEP_WAREHOUSE")]
        warehouse: PathBuf,
        /// Worse by more than this percent counts.
        #[arg(long, default_value_t = 5.0)]
        threshold_percent: f64,
        #[arg(long)]
        json: bool,
    },
    /// Apply the retention tiers (docs/warehouse.md#retention): fact partitions older
    /// than --warm-days, raw records and evidence older than --cold-days unless a
    /// publication references them. Prints the plan; deletes only with --apply.
    Retention {
        /// The warehouse: a directory or an export location (`s3://bucket/prefix`, ...).
        location: PathBuf,
        #[arg(long, default_value_t = retention::Policy::default().warm_days)]
        warm_days: u32,
        #[arg(long, default_value_t = retention::Policy::default().cold_days)]
        cold_days: u32,
        /// The date to apply the policy at (YYYY-MM-DD), today by default.
        #[arg(long)]
        today: Option<String>,
        #[arg(long)]
        apply: bool,
    },
}

pub async fn run(args: WarehouseArgs) -> anyhow::Result<ExitCode> {
    let locations = args.location;
    match args.command {
        WarehouseCommand::Build {
            sources,
            output,
            mode,
            price_per_hour,
        } => {
            let options = Options {
                mode: match mode {
                    BuildMode::Publication => Mode::Publication,
                    BuildMode::Exploration => Mode::Exploration,
                },
                price_per_hour,
            };
            load(&sources, &output, &options, &locations).await?;
            Ok(ExitCode::SUCCESS)
        }
        WarehouseCommand::Telemetry {
            sources,
            prometheus,
            output,
            node_label,
            scrape_interval,
            exclude_devices,
        } => {
            let settings = telemetry::Settings {
                node_label,
                scrape_interval: std::time::Duration::from_secs(scrape_interval.max(1)),
                exclude_devices,
            };
            let pulled = pull_telemetry(&sources, &prometheus, &output, &settings).await?;
            println!(
                "{} run(s) read: {} telemetry slice(s) from {prometheus} written to {} ({} run(s) with no window: no node or no times; {} run(s) Prometheus had nothing for)",
                pulled.runs,
                pulled.slices,
                output.display(),
                pulled.without_window,
                pulled.without_series
            );
            Ok(ExitCode::SUCCESS)
        }
        WarehouseCommand::Query {
            location,
            sql,
            format,
        } => {
            let opened = locations.open(&location).await?;
            let warehouse = open(opened.dir()).await?;
            let batches = warehouse.query(&sql).await?;
            let bytes = perfsweep_warehouse::output::render(&batches, format.into())?;
            std::io::stdout()
                .write_all(&bytes)
                .context("writing the answer")?;
            Ok(ExitCode::SUCCESS)
        }
        WarehouseCommand::Publish {
            warehouse,
            query,
            name,
        } => {
            let sql = std::fs::read_to_string(&query)
                .with_context(|| format!("cannot read {}", query.display()))?;
            let opened = locations.open(&warehouse).await?;
            let warehouse = open(opened.dir()).await?;
            let publication = publish::publish(&warehouse, &name, &sql).await?;
            opened.push().await?;
            let unstable = publication.rows.iter().filter(|r| r.unstable).count();
            println!(
                "published {name}: {} row(s), {unstable} flagged unstable; query_spec_digest {}",
                publication.rows.len(),
                publication.query_spec_digest
            );
            for row in publication.rows.iter().filter(|r| r.unstable) {
                println!("  row {}: {}", row.row, row.stability_note);
            }
            Ok(ExitCode::SUCCESS)
        }
        WarehouseCommand::Explain {
            name,
            row,
            warehouse,
            json,
        } => match publish::explain(locations.open(&warehouse).await?.dir(), &name, row) {
            Ok(walk) => {
                if json {
                    println!("{}", serde_json::to_string_pretty(&walk)?);
                } else {
                    println!("publication {name}, row {row}");
                    for (column, value) in &walk.values {
                        println!("  {column} = {value}");
                    }
                    if walk.unstable {
                        println!("  UNSTABLE: {}", walk.stability_note);
                    }
                    println!("query:\n  {}", walk.query.replace('\n', "\n  "));
                    println!("verified:");
                    for step in &walk.steps {
                        println!("  ok  {}  sha256 {}", step.what, step.digest);
                    }
                }
                Ok(ExitCode::SUCCESS)
            }
            Err(error) => {
                eprintln!("error: {error}");
                Ok(ExitCode::FAILURE)
            }
        },
        WarehouseCommand::WhatChanged {
            baseline,
            candidate,
            warehouse,
            threshold_percent,
            json,
        } => {
            let opened = locations.open(&warehouse).await?;
            let warehouse = open(opened.dir()).await?;
            let report =
                changed::what_changed(&warehouse, &baseline, &candidate, threshold_percent).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", changed::render(&report));
            }
            Ok(if report.slower_cases.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        WarehouseCommand::Retention {
            location,
            warm_days,
            cold_days,
            today,
            apply,
        } => {
            let today = match today {
                Some(text) => text
                    .parse::<jiff::civil::Date>()
                    .with_context(|| format!("--today {text}: not a YYYY-MM-DD date"))?,
                None => jiff::Zoned::now().date(),
            };
            let policy = retention::Policy {
                warm_days,
                cold_days,
            };
            let opened = locations.open(&location).await?;
            let plan = retention::plan(opened.dir(), policy, today)?;
            println!(
                "{} fact partition(s) past {warm_days} days, {} raw record(s) and {} evidence object(s) past {cold_days} days; {} raw record(s) kept for publications",
                plan.fact_partitions.len(),
                plan.records.len(),
                plan.evidence.len(),
                plan.kept_for_publications.len()
            );
            for path in plan
                .fact_partitions
                .iter()
                .chain(&plan.records)
                .chain(&plan.evidence)
            {
                println!(
                    "  {} {path}",
                    if apply { "deleted" } else { "would delete" }
                );
            }
            if apply {
                retention::apply(opened.dir(), &plan)?;
                opened.push().await?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Loads `sources` into the warehouse at `output` (either may be an export location)
/// and says what happened: `warehouse build`, and `results upload --warehouse`.
pub async fn load(
    sources: &[PathBuf],
    output: &std::path::Path,
    options: &Options,
    locations: &LocationArgs,
) -> anyhow::Result<build::Summary> {
    let mut local_sources = Vec::with_capacity(sources.len());
    for source in sources {
        local_sources.push(locations.open(source).await?.dir().to_owned());
    }
    let target = locations.open(output).await?;
    let summary = build::build(&local_sources, target.dir(), options).await?;
    for note in summary.notes.iter().chain(&summary.evidence_problems) {
        eprintln!("warning: {note}");
    }
    for conflict in &summary.conflicts {
        eprintln!("warning: {conflict}");
    }
    println!(
        "{} record(s) read: {} run(s) added, {} already in the warehouse, {} copies counted once; {} telemetry slice(s), {} evidence object(s) copied, {} file(s) written to {}",
        summary.records_read,
        summary.runs_added,
        summary.runs_present,
        summary.copies,
        summary.slices_added,
        summary.evidence_copied,
        summary.files_written,
        output.display()
    );
    target.push().await?;
    Ok(summary)
}

async fn open(location: &std::path::Path) -> anyhow::Result<Warehouse> {
    anyhow::ensure!(
        location.is_dir(),
        "{} is not a warehouse directory (build one with `perfsweep warehouse build`)",
        location.display()
    );
    Ok(Warehouse::open(location).await?)
}

/// What `warehouse telemetry` did.
struct Pulled {
    runs: usize,
    slices: usize,
    without_window: usize,
    without_series: usize,
}

/// The slices of every run in `sources`, asked of the Prometheus at `base`, written to
/// `output` as `telemetry-<digest>.jsonl`, one file per run (named by the run, so a
/// second pull rewrites the same file).
async fn pull_telemetry(
    sources: &[PathBuf],
    base: &str,
    output: &std::path::Path,
    settings: &telemetry::Settings,
) -> anyhow::Result<Pulled> {
    let read = perfsweep_warehouse::source::read_sources(sources)?;
    let prometheus = crate::prometheus::Prometheus::new(base)?;
    std::fs::create_dir_all(output)
        .with_context(|| format!("cannot create {}", output.display()))?;
    let mut pulled = Pulled {
        runs: read.records.len(),
        slices: 0,
        without_window: 0,
        without_series: 0,
    };
    for sourced in &read.records {
        let Some(window) = telemetry::window(&sourced.record) else {
            pulled.without_window += 1;
            continue;
        };
        let mut answers = Vec::new();
        for query in telemetry::queries(&window, settings) {
            let (status, body) = prometheus.get(&query.path()).await?;
            let values = telemetry::parse_vector(&body, &settings.node_label).map_err(|e| {
                anyhow::anyhow!(
                    "{} of run {} ({}): HTTP {status}: {e}",
                    query.metric,
                    window.run_id,
                    sourced.origin
                )
            })?;
            answers.push((query.metric, values));
        }
        let slices = telemetry::slices(&window, &answers);
        if slices.is_empty() {
            pulled.without_series += 1;
            continue;
        }
        let mut lines = String::new();
        for slice in &slices {
            lines.push_str(&serde_json::to_string(slice).context("a telemetry slice")?);
            lines.push('\n');
        }
        let name = perfsweep_benchmarks::formats::digest::sha256_hex(&serde_json::json!([
            window.run_id,
            window.benchmark.kind,
            window.benchmark.name,
            window.benchmark.repetition,
        ]));
        let file = output.join(format!("telemetry-{}.jsonl", &name[..16]));
        std::fs::write(&file, lines).with_context(|| format!("cannot write {}", file.display()))?;
        pulled.slices += slices.len();
    }
    Ok(pulled)
}
