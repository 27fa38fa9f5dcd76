//! Running the role's commands: setup steps, then the measured command with its output
//! streamed to our own output and captured as evidence.

use std::path::Path;
use std::process::{ExitStatus, Stdio};

use perfsweep_benchmarks::execution::plan::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdout};

use super::{Failure, Reason};

/// Starts `argv` in `workdir`. Standard output is piped for capture; standard error goes
/// straight to ours (it is logged, never parsed).
pub fn spawn(
    command: &Command,
    argv: &[String],
    workdir: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Child, Failure> {
    // `perfsweep …` steps run as this very binary, wherever it is.
    let program = match std::env::current_exe() {
        Ok(exe) if command.program == perfsweep_benchmarks::execution::plan::AGENT_PROGRAM => exe,
        _ => std::path::PathBuf::from(&command.program),
    };
    let mut process = tokio::process::Command::new(program);
    process
        .args(argv)
        .current_dir(workdir)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    // A tool must not outlive its agent: killed outright (SIGKILL of a local run, whose
    // agents then get SIGTERM), the agent cannot stop it any other way.
    crate::local::tree::end_with_parent(&mut process);
    process.spawn().map_err(|error| {
        if error.kind() == std::io::ErrorKind::NotFound {
            Failure::plain(
                Reason::ToolMissing,
                format!(
                    "{} is not installed: install the Debian package {} (apt-get install {})",
                    command.program, command.package, command.package
                ),
            )
        } else {
            Failure::plain(
                Reason::ToolFailed,
                format!("cannot start {}: {error}", command.program),
            )
        }
    })
}

/// Copies the child's standard output to ours as it arrives and returns all of it.
pub async fn tee_stdout(stdout: Option<ChildStdout>) -> Vec<u8> {
    let mut captured = Vec::new();
    let Some(mut stdout) = stdout else {
        return captured;
    };
    let mut ours = tokio::io::stdout();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match stdout.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                captured.extend_from_slice(&buffer[..n]);
                // Losing the live copy must not lose the captured evidence.
                let _ = ours.write_all(&buffer[..n]).await;
                let _ = ours.flush().await;
            }
        }
    }
    captured
}

/// Runs a setup command to completion; its output is only logged.
pub async fn run_setup(
    command: &Command,
    argv: &[String],
    workdir: &Path,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<(), Failure> {
    let mut child = spawn(command, argv, workdir, env)?;
    let output = tee_stdout(child.stdout.take()).await;
    let status = child.wait().await.map_err(|e| {
        Failure::plain(
            Reason::ToolFailed,
            format!("waiting for {}: {e}", command.program),
        )
    })?;
    if status.success() {
        Ok(())
    } else {
        let tail = String::from_utf8_lossy(&output);
        let tail: String = tail.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        Err(Failure::plain(
            Reason::SetupFailed,
            format!(
                "{} exited with {}: {tail}",
                command.program,
                describe(status)
            ),
        ))
    }
}

/// `exit code 1` or `signal 9`.
pub fn describe(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("signal {signal}");
        }
    }
    match status.code() {
        Some(code) => format!("exit code {code}"),
        None => "an unknown status".into(),
    }
}
