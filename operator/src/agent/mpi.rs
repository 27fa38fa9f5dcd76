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

use std::process::ExitCode;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

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
