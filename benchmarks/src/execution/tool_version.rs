//! Which tools can be asked for their version without measuring anything, and how to read
//! the answer. The agent asks the measured tool just before running it, so a result
//! record names the exact build that produced the numbers (iperf3 3.12 and 3.16 differ in
//! how they count retransmits; fio's defaults change between releases).
//!
//! Only tools known to answer `--version` and exit are asked: running an unknown program
//! with an unknown flag could start a measurement (IMB-MPI1, for example, ignores
//! arguments it does not know and runs every benchmark).

use serde::{Deserialize, Serialize};

/// A tool's version as the tool printed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolVersion {
    /// The program's file name, e.g. `iperf3`.
    pub tool: String,
    /// The line of its answer that carries the version, e.g. `iperf 3.12 (cJSON 1.7.15)`.
    pub version: String,
}

/// Longest version line kept: a record field, not a place for a whole banner.
const MAX_LINE: usize = 200;

/// The program's file name, without any directory.
pub fn tool_name(program: &str) -> &str {
    program.rsplit('/').next().unwrap_or(program)
}

/// The arguments that make `program` print its version and exit, if it is one of the
/// tools known to do so safely.
pub fn probe_args(program: &str) -> Option<&'static [&'static str]> {
    match tool_name(program) {
        "iperf3" | "fio" | "mpirun" | "mpiexec" | "ib_write_bw" | "ib_read_bw" | "ib_send_bw"
        | "ib_atomic_bw" | "ib_write_lat" | "ib_read_lat" | "ib_send_lat" | "ib_atomic_lat"
        | "python3" | "python" => Some(&["--version"]),
        _ => None,
    }
}

/// The version line of a tool's answer: the first non-empty line that contains a digit
/// (Open MPI prints `mpirun (Open MPI) 4.1.4` then a blank line and a bug-report address;
/// perftest prints `Version: 6.10`). Truncated on a character boundary.
pub fn version_line(output: &str) -> Option<String> {
    let line = output
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && line.chars().any(|c| c.is_ascii_digit()))?;
    let mut end = line.len().min(MAX_LINE);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    Some(line[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_tools_are_asked_with_version_and_unknown_ones_are_not() {
        assert_eq!(probe_args("/usr/bin/iperf3"), Some(&["--version"][..]));
        assert_eq!(probe_args("ib_write_bw"), Some(&["--version"][..]));
        assert_eq!(probe_args("IMB-MPI1"), None);
        assert_eq!(probe_args("icoFoam"), None);
        assert_eq!(tool_name("/opt/x/fio"), "fio");
    }

    #[test]
    fn the_version_line_skips_blank_and_digitless_lines() {
        // Real answers (Debian bookworm/trixie packages).
        assert_eq!(
            version_line("iperf 3.12 (cJSON 1.7.15)\nLinux host 6.1.0 #1 SMP x86_64\n").as_deref(),
            Some("iperf 3.12 (cJSON 1.7.15)")
        );
        assert_eq!(version_line("fio-3.33\n").as_deref(), Some("fio-3.33"));
        assert_eq!(
            version_line("\nmpirun (Open MPI) 4.1.4\n\nReport bugs to https://www.open-mpi.org/community/help/\n")
                .as_deref(),
            Some("mpirun (Open MPI) 4.1.4")
        );
        assert_eq!(version_line("usage: tool [options]\n"), None);
        assert_eq!(version_line(""), None);
    }

    #[test]
    fn a_long_line_is_cut_on_a_character_boundary() {
        let long = format!("v1 {}", "é".repeat(300));
        let line = version_line(&long).unwrap_or_default();
        assert!(line.len() <= MAX_LINE);
        assert!(line.starts_with("v1 "));
    }
}
