//! Asks the measured tool for its version (see
//! `perfsweep_benchmarks::execution::tool_version`).

use std::process::Stdio;
use std::time::Duration;

use perfsweep_benchmarks::execution::plan::AGENT_PROGRAM;
use perfsweep_benchmarks::execution::tool_version::{self, ToolVersion};

/// A tool that takes longer than this to print its version is not asked again; the
/// record just lacks the line (the benchmark itself must not wait on it).
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// The version of `program`, or `None` when it cannot be asked safely or did not answer.
pub async fn probe(program: &str) -> Option<ToolVersion> {
    if program == AGENT_PROGRAM {
        return Some(ToolVersion {
            tool: AGENT_PROGRAM.into(),
            version: format!("perfsweep {}", env!("CARGO_PKG_VERSION")),
        });
    }
    let args = tool_version::probe_args(program)?;
    let asked = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(PROBE_TIMEOUT, asked).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => {
            tracing::debug!(program, %error, "cannot ask the tool for its version");
            return None;
        }
        Err(_) => {
            tracing::debug!(program, "the tool did not print its version in time");
            return None;
        }
    };
    // Some tools answer on standard error (older Python, perftest builds).
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    Some(ToolVersion {
        tool: tool_version::tool_name(program).into(),
        version: tool_version::version_line(&text)?,
    })
}
