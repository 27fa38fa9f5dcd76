//! `perfsweep`: the operator, the CLI and the in-pod agent, in one binary.

// The few system calls std lacks are wrapped in `perfsweep::agent::sys`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    restore_sigpipe();
    let cli = perfsweep::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(perfsweep::cli::run(cli)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Rust ignores SIGPIPE, which turns `perfsweep parse ... | head` into a panic on the
/// next write; restore the default so a closed pipe ends the process quietly, as it
/// does every other command-line tool.
fn restore_sigpipe() {
    perfsweep::agent::sys::restore_default_sigpipe();
}
