//! The `perfsweep` command line.

mod crds;
mod export;
mod files;
mod heatmap;
mod import;
mod location;
mod operator;
mod parse;
mod render;
// The warehouse's SQL engine (DataFusion) is the bulk of the binary and of its build: the
// agent build (`--no-default-features`, every benchmark image) leaves it out, and the
// commands that need it say so.
#[cfg(feature = "warehouse")]
mod report_sections;
#[cfg(not(feature = "warehouse"))]
#[path = "report_sections_without_warehouse.rs"]
mod report_sections;
mod results;
mod run;
mod run_fleet;
mod validate;
#[cfg(feature = "warehouse")]
mod warehouse;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::telemetry::{self, LogFormat};

/// Benchmark Kubernetes clusters: network, storage, compute and LLM inference sweeps.
#[derive(Debug, Parser)]
#[command(name = "perfsweep", version, about)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "PERFSWEEP_LOG_FORMAT")]
    pub log_format: LogFormat,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every perfsweep CRD as multi-document YAML (or write one file per CRD).
    Crds {
        /// Write `<plural>.perfsweep.io.yaml` files into this directory instead.
        #[arg(long)]
        output_dir: Option<PathBuf>,
    },
    /// Check sweeps and benchmarks offline: schema, CEL rules and every expanded child.
    Validate {
        /// YAML files (`-` for stdin), each with one or more documents.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// The nodes a node-pair or each-node set (`permutations.nodePairs`, `eachNode`)
        /// runs on, standing in for the nodes its selector matches in the cluster:
        /// `a,b,c`, or `@FILE` with names separated by commas, spaces or newlines
        /// (`kubectl get nodes -l ... -o name` output works). Labels for
        /// `eachNode.references` follow a name, `:`-separated:
        /// `c:perfsweep.io/node-class=gold`.
        #[arg(long, value_name = "NODES")]
        nodes: Option<String>,
    },
    /// Print the child benchmarks a set expands to, as multi-document YAML.
    Render {
        /// YAML files (`-` for stdin).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Namespace to put on rendered objects.
        #[arg(long, short = 'n')]
        namespace: Option<String>,
        /// Also print the Kubernetes objects each benchmark runs as (PodGroup, Service,
        /// pods, ...), as the operator would create them.
        #[arg(long)]
        objects: bool,
        /// The nodes a node-pair or each-node set runs on, as for `validate --nodes`.
        #[arg(long, value_name = "NODES")]
        nodes: Option<String>,
    },
    /// Run benchmarks and sweeps (`--local`: on this machine, no cluster).
    Run(run::RunArgs),
    /// Work with result records (`run --output DIR`): list, show statistics, compare
    /// two result sets, export CSV, plot SVG.
    Results(results::ResultsArgs),
    /// The performance warehouse: curated Parquet tables from result records, SQL over
    /// them, published numbers that walk back to their evidence, what changed.
    #[cfg(feature = "warehouse")]
    Warehouse(warehouse::WarehouseArgs),
    /// (Not in this build: see `report_sections::without_warehouse`.)
    #[cfg(not(feature = "warehouse"))]
    #[command(hide = true)]
    Warehouse {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Parse raw tool output into the structured result, as JSON.
    Parse {
        /// iperf, fio, mpi-pingpong, openfoam, rdma-bandwidth, rdma-latency or pytorch.
        kind: String,
        /// The tool's output (`-` for stdin).
        file: PathBuf,
    },
    /// Run the operator (in the cluster, or against the current kubeconfig).
    Operator(operator::OperatorArgs),
    /// Play one process of a benchmark plan (the entrypoint of benchmark pods and local
    /// processes; configured through PERFSWEEP_* environment variables).
    #[command(hide = true)]
    Agent,
    /// Open MPI's remote shell: run COMMAND on the benchmark agent at HOST (what mpirun
    /// calls through `--mca plm_rsh_agent "perfsweep rsh"`).
    #[command(hide = true)]
    Rsh {
        host: String,
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Run one MPI rank in its worker's directory and report its CPU time.
    #[command(hide = true)]
    MpiRank {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Run one MPI rank of a kind's tool (`mpi-pingpong`, `hpcc`): the tool the kind
    /// picks for where the rank runs, with rank 0's inputs and outputs.
    #[command(hide = true)]
    MpiTool {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Run mpirun and report the CPU time of all its ranks, `/usr/bin/time -v` style.
    #[command(hide = true)]
    MpiTime {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
    /// Fail unless an RDMA device (DEVICE, if given) is present.
    #[command(hide = true)]
    RequireRdmaDevice { device: Option<String> },
    /// Fail with HINT unless PROGRAM is on PATH.
    #[command(hide = true)]
    RequireProgram { program: String, hint: String },
    /// Serve a simulated OpenAI-compatible LLM endpoint (for tests and local runs).
    Sim(perfsweep_llm::sim::SimArgs),
    /// Load an OpenAI-compatible LLM endpoint and print the LLMInference result as JSON.
    Loadgen(Box<perfsweep_llm::loadgen::LoadgenArgs>),
}

/// Runs a parsed command line and returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Crds { output_dir } => crds::run(output_dir.as_deref()),
        Command::Validate { files, nodes } => {
            let nodes = validate::node_list(nodes.as_deref())?;
            validate::run(&files, validate::labelled(nodes.as_deref()).as_ref())
        }
        Command::Render {
            files,
            namespace,
            objects,
            nodes,
        } => {
            let nodes = validate::node_list(nodes.as_deref())?;
            render::run(
                &files,
                namespace.as_deref(),
                objects,
                validate::labelled(nodes.as_deref()).as_ref(),
            )
        }
        Command::Run(args) => run::run(args).await,
        Command::Results(args) => results::run(args).await,
        #[cfg(feature = "warehouse")]
        Command::Warehouse(args) => warehouse::run(args).await,
        #[cfg(not(feature = "warehouse"))]
        Command::Warehouse { .. } => Err(report_sections::without_warehouse("perfsweep warehouse")),
        Command::Parse { kind, file } => parse::run(&kind, &file),
        Command::Operator(args) => {
            telemetry::init(cli.log_format);
            operator::run(args).await
        }
        Command::Agent => {
            telemetry::init(cli.log_format);
            crate::agent::run_from_env().await
        }
        Command::Rsh { host, command } => crate::agent::exec::rsh(&host, &command).await,
        Command::MpiRank { command } => crate::agent::mpi::rank(&command).await,
        Command::MpiTool { command } => crate::agent::mpi::tool(&command).await,
        Command::MpiTime { command } => crate::agent::mpi::time(&command).await,
        Command::RequireRdmaDevice { device } => builtin_check(
            perfsweep_benchmarks::kinds::rdma::plan::REQUIRE_RDMA_DEVICE,
            device.into_iter().collect(),
        ),
        Command::RequireProgram { program, hint } => builtin_check(
            perfsweep_benchmarks::kinds::mpi::REQUIRE_PROGRAM,
            vec![program, hint],
        ),
        Command::Sim(args) => perfsweep_llm::sim::run(args).await,
        Command::Loadgen(args) => {
            let mut args = *args;
            args.hooks = loadgen_hooks();
            perfsweep_llm::loadgen::run(args).await
        }
    }
}

/// What `perfsweep loadgen` gets from the rest of perfsweep: the agent's barrier for
/// distributed runs and the export stores for datasets in object storage.
pub fn loadgen_hooks() -> perfsweep_llm::loadgen::Hooks {
    perfsweep_llm::loadgen::Hooks {
        barrier: Some(std::sync::Arc::new(crate::agent::control::LoadgenBarrier)),
        objects: Some(std::sync::Arc::new(crate::export::dataset::ExportObjects)),
    }
}

/// A built-in check of the agent, run as a command.
fn builtin_check(check: &str, args: Vec<String>) -> anyhow::Result<ExitCode> {
    let command = perfsweep_benchmarks::execution::plan::Command {
        program: perfsweep_benchmarks::execution::plan::AGENT_PROGRAM.into(),
        package: "perfsweep".into(),
        args: Vec::new(),
    };
    let mut argv = vec![check.to_owned()];
    argv.extend(args);
    match crate::agent::builtin::run(&command, &argv) {
        Some(Ok(())) => Ok(ExitCode::SUCCESS),
        Some(Err(failure)) => anyhow::bail!("{}: {}", failure.reason, failure.message),
        None => anyhow::bail!("unknown check {check}"),
    }
}
