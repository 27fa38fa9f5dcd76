//! The MPI ranks' wrappers, so that an MPI job reports CPU time across all its ranks:
//!
//! - `perfsweep mpi-rank -- PROGRAM ARGS…` runs one rank: in the working directory its
//!   worker prepared (the worker's agent tells the daemon through
//!   [`super::exec::RANK_WORKDIR`]; mpirun would otherwise use the launcher's directory,
//!   which exists only on the launcher), and, when the rank ends, prints one
//!   [`RANK_LINE`] line with the rank's own user and system time and peak RSS
//!   (`getrusage(RUSAGE_CHILDREN)`).
//! - `perfsweep mpi-time -- mpirun …` runs mpirun, passes its output through except
//!   those lines, and prints at the end, in `/usr/bin/time -v` form, user and system
//!   time summed over all ranks, the largest rank's peak RSS, and mpirun's wall-clock
//!   time — what `/usr/bin/time -v` would say if all ranks were one process.
//! - `perfsweep mpi-tool KIND ARGS…` runs one rank of a kind whose tool needs more than
//!   a command line (MPIPingPong's choice of tool, HPCC's input and output files): it
//!   looks at where the rank runs ([`RankProbe`]), asks the kind what to run
//!   ([`Invocation`], pure), and plays it in the worker's directory.

use std::process::ExitCode;
use std::time::Instant;

use perfsweep_benchmarks::kinds::mpi::{Invocation, RankProbe};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Prefix of a rank's resource-usage line.
pub const RANK_LINE: &str = "PERFSWEEP-RANK-RUSAGE ";

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RankUsage {
    pub rank: Option<u32>,
    pub user_seconds: f64,
    pub system_seconds: f64,
    pub max_rss_kib: u64,
}

/// `perfsweep mpi-rank`.
pub async fn rank(argv: &[String]) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let (program, args) = argv
        .split_first()
        .context("mpi-rank needs a command: perfsweep mpi-rank -- PROGRAM ARGS")?;
    let mut command = tokio::process::Command::new(program);
    command.args(args);
    if let Some(dir) = std::env::var_os(super::exec::RANK_WORKDIR) {
        command.current_dir(dir);
    }
    let status = command
        .status()
        .await
        .with_context(|| format!("cannot run {program}"))?;
    let usage = children_usage(
        std::env::var("OMPI_COMM_WORLD_RANK")
            .ok()
            .and_then(|r| r.parse().ok()),
    );
    let line = format!("{RANK_LINE}{}\n", serde_json::to_string(&usage)?);
    let mut stdout = tokio::io::stdout();
    stdout.write_all(line.as_bytes()).await?;
    stdout.flush().await?;
    Ok(exit_code(status))
}

/// `perfsweep mpi-tool KIND ARGS…`.
pub async fn tool(argv: &[String]) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    use perfsweep_benchmarks::kinds::{hpcc, mpi_pingpong};
    let (kind, args) = argv
        .split_first()
        .context("mpi-tool needs a kind: perfsweep mpi-tool KIND ARGS")?;
    let env_number = |name: &str, default: u32| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let has_program = |program: &str| super::builtin::find_on_path(program);
    let probe = RankProbe {
        rank: env_number("OMPI_COMM_WORLD_RANK", 0),
        world_size: env_number("OMPI_COMM_WORLD_SIZE", 1),
        local_size: env_number("OMPI_COMM_WORLD_LOCAL_SIZE", 1),
        memory_bytes: super::sys::memory_limit_bytes(),
        has_program: &has_program,
    };
    let invocation = match kind.as_str() {
        mpi_pingpong::PARSE_NAME => mpi_pingpong::rank::invocation(args, &probe),
        hpcc::PARSE_NAME => hpcc::rank::invocation(args, &probe),
        other => Err(format!("no rank wrapper for kind {other:?}")),
    }
    .map_err(|message| anyhow::anyhow!("mpi-tool {kind}: {message}"))?;
    let workdir = std::env::var_os(super::exec::RANK_WORKDIR).map(std::path::PathBuf::from);
    play(&invocation, probe.rank == 0, workdir.as_deref()).await
}

/// Runs an invocation in `workdir`: rank 0 writes the inputs, prints the preamble, the
/// tool's output (its standard error too, when that is the result) and the output files,
/// and ends with [`perfsweep_benchmarks::kinds::mpi::exit_line`].
async fn play(
    invocation: &Invocation,
    first: bool,
    workdir: Option<&std::path::Path>,
) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let dir = workdir.map_or_else(
        || std::path::PathBuf::from("."),
        std::path::Path::to_path_buf,
    );
    let mut out = tokio::io::stdout();
    if first {
        for file in &invocation.input_files {
            let path = dir.join(&file.path);
            tokio::fs::write(&path, &file.contents)
                .await
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        for name in &invocation.output_files {
            // hpcc appends to its output file: a stale one would be read as this run's.
            match tokio::fs::remove_file(dir.join(name)).await {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(e).with_context(|| format!("cannot remove the old {name}"));
                }
                _ => {}
            }
        }
        for line in &invocation.preamble {
            out.write_all(format!("{line}\n").as_bytes()).await?;
        }
        out.flush().await?;
    }
    let mut command = tokio::process::Command::new(&invocation.program);
    command.args(&invocation.args).current_dir(&dir);
    let capture_stderr = first && invocation.stderr_is_output;
    if capture_stderr {
        command.stderr(std::process::Stdio::piped());
    }
    let mut child = command
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {}", invocation.program))?;
    if let Some(stderr) = child.stderr.take() {
        let mut lines = BufReader::new(stderr).lines();
        while let Some(line) = lines.next_line().await? {
            out.write_all(format!("{line}\n").as_bytes()).await?;
            out.flush().await?;
        }
    }
    let status = child.wait().await?;
    if first {
        for name in &invocation.output_files {
            let path = dir.join(name);
            match tokio::fs::File::open(&path).await {
                Ok(mut file) => {
                    let mut text = Vec::new();
                    file.read_to_end(&mut text).await?;
                    out.write_all(&text).await?;
                    if !text.ends_with(b"\n") {
                        out.write_all(b"\n").await?;
                    }
                }
                Err(e) => {
                    let note = format!("# perfsweep: no {name} ({e})\n");
                    out.write_all(note.as_bytes()).await?;
                }
            }
        }
        let line = perfsweep_benchmarks::kinds::mpi::exit_line(
            &invocation.program,
            status.code().unwrap_or(-1),
        );
        out.write_all(format!("{line}\n").as_bytes()).await?;
        out.flush().await?;
    }
    Ok(exit_code(status))
}

fn children_usage(rank: Option<u32>) -> RankUsage {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &raw mut usage) } == 0;
    if !ok {
        return RankUsage {
            rank,
            ..RankUsage::default()
        };
    }
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    RankUsage {
        rank,
        user_seconds: seconds(usage.ru_utime),
        system_seconds: seconds(usage.ru_stime),
        max_rss_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
    }
}

fn exit_code(status: std::process::ExitStatus) -> ExitCode {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return ExitCode::from(u8::try_from(128 + signal).unwrap_or(255));
        }
    }
    ExitCode::from(u8::try_from(status.code().unwrap_or(1)).unwrap_or(1))
}

/// `perfsweep mpi-time`.
pub async fn time(argv: &[String]) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let (program, args) = argv
        .split_first()
        .context("mpi-time needs a command: perfsweep mpi-time -- mpirun ARGS")?;
    let started = Instant::now();
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut out = tokio::io::stdout();
    let mut ranks = Vec::new();
    while let Some(line) = lines.next_line().await? {
        match line.find(RANK_LINE) {
            Some(at) => match serde_json::from_str::<RankUsage>(&line[at + RANK_LINE.len()..]) {
                Ok(usage) => {
                    // Output of another rank may precede it on the same line.
                    if at > 0 {
                        out.write_all(format!("{}\n", &line[..at]).as_bytes())
                            .await?;
                    }
                    ranks.push(usage);
                }
                Err(_) => out.write_all(format!("{line}\n").as_bytes()).await?,
            },
            None => out.write_all(format!("{line}\n").as_bytes()).await?,
        }
        out.flush().await?;
    }
    let status = child.wait().await?;
    let wall = started.elapsed().as_secs_f64();
    if !ranks.is_empty() {
        let summary = summary(program, &ranks, wall, status.code().unwrap_or(1));
        out.write_all(summary.as_bytes()).await?;
        out.flush().await?;
    }
    Ok(exit_code(status))
}

/// `/usr/bin/time -v`'s lines for the ranks taken together.
pub fn summary(program: &str, ranks: &[RankUsage], wall_seconds: f64, exit: i32) -> String {
    let user: f64 = ranks.iter().map(|r| r.user_seconds).sum();
    let system: f64 = ranks.iter().map(|r| r.system_seconds).sum();
    let rss = ranks.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
    let minutes = (wall_seconds / 60.0).floor();
    let seconds = wall_seconds - minutes * 60.0;
    format!(
        "\n\tCommand being timed: \"{program}\" ({} ranks; user and system time summed over the ranks, maximum resident set size of the largest rank)\n\tUser time (seconds): {user:.2}\n\tSystem time (seconds): {system:.2}\n\tElapsed (wall clock) time (h:mm:ss or m:ss): {}:{seconds:05.2}\n\tMaximum resident set size (kbytes): {rss}\n\tExit status: {exit}\n",
        ranks.len(),
        minutes as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_is_what_the_openfoam_parser_reads() {
        let ranks = [
            RankUsage {
                rank: Some(0),
                user_seconds: 1.5,
                system_seconds: 0.25,
                max_rss_kib: 1000,
            },
            RankUsage {
                rank: Some(1),
                user_seconds: 2.0,
                system_seconds: 0.5,
                max_rss_kib: 3000,
            },
        ];
        let log = format!(
            "{}{}",
            include_str!("../../../benchmarks/testdata/openfoam/icofoam-cavity-time-v.log")
                .split("\tCommand being timed")
                .next()
                .unwrap_or_default(),
            summary("mpirun", &ranks, 75.5, 0)
        );
        let parsed = perfsweep_benchmarks::kinds::openfoam::parse::parse(&log).expect("parses");
        let timing = parsed.process_timing.expect("timing");
        assert_eq!(timing.user_seconds, 3.5);
        assert_eq!(timing.system_seconds, 0.75);
        assert_eq!(timing.wall_seconds, 75.5);
        assert_eq!(timing.max_resident_bytes, Some(3000 * 1024));
    }
}
