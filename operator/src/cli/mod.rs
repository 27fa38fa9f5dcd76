//! The `perfsweep` command line.

mod crds;
mod files;
mod operator;
mod parse;
mod render;
mod run;
mod validate;

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
    },
    /// Run benchmarks and sweeps (`--local`: on this machine, no cluster).
    Run(run::RunArgs),
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
}

/// Runs a parsed command line and returns the process exit code.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Crds { output_dir } => crds::run(output_dir.as_deref()),
        Command::Validate { files } => validate::run(&files),
        Command::Render {
            files,
            namespace,
            objects,
        } => render::run(&files, namespace.as_deref(), objects),
        Command::Run(args) => run::run(args).await,
        Command::Parse { kind, file } => parse::run(&kind, &file),
        Command::Operator(args) => {
            telemetry::init(cli.log_format);
            operator::run(args).await
        }
        Command::Agent => {
            telemetry::init(cli.log_format);
            crate::agent::run_from_env().await
        }
    }
}
