//! NetPIPE's `NPopenmpi` output: one line per message size, as NetPIPE 3.7 prints them
//! on standard error while it runs,
//!
//! ```text
//!  12:      64 bytes    548 times -->      3.82 Mbps in     127.93 usec
//! ```
//!
//! (round, bytes, repetitions, NetPIPE's bandwidth in 2^20 bits per second, one-way
//! time in µs). perfsweep's rank wrapper passes that stream through as rank 0's output,
//! after a [`PREAMBLE`] line naming the largest size it asked for, and ends it with
//! [`crate::kinds::mpi::exit_line`].
//!
//! # Truncated output
//!
//! NetPIPE prints a line's first half (`… times -->`) before it measures, so a run cut
//! short ends in half a line: it is dropped, as is a last line without its newline. The
//! result is `complete` when the table reached the largest size asked for (or, for
//! NetPIPE output without the preamble, when NetPIPE exited with status 0, or nothing
//! says otherwise); at least one whole row is needed.

use super::parse::{ERROR_MARKERS, MPIPingPongResult, PingPongRow, Tool};
use crate::execution::parse_error::{ParseError, find_marker, parse_finite};

/// The line perfsweep's rank wrapper prints before NetPIPE's table:
/// `# perfsweep: NetPIPE NPopenmpi, messages up to N bytes`.
pub const PREAMBLE: &str = "# perfsweep: NetPIPE NPopenmpi, messages up to ";

/// Whether `raw` is NetPIPE's output.
pub fn is_netpipe(raw: &str) -> bool {
    raw.contains(PREAMBLE) || raw.lines().any(|line| row(line).is_some())
}

/// One table line, if `line` is a whole one.
fn row(line: &str) -> Option<PingPongRow> {
    let (round, rest) = line.trim().split_once(':')?;
    round.parse::<u32>().ok()?;
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let ["bytes", "times", "-->", "Mbps", "in", "usec"] = [
        tokens.get(1)?,
        tokens.get(3)?,
        tokens.get(4)?,
        tokens.get(6)?,
        tokens.get(7)?,
        tokens.get(9)?,
    ]
    .map(|t| *t) else {
        return None;
    };
    if tokens.len() != 10 {
        return None;
    }
    let bytes: u64 = tokens[0].parse().ok()?;
    let repetitions: u64 = tokens[2].parse().ok()?;
    // NetPIPE's Mbps column is checked for shape only: the bandwidth is the message over
    // the one-way time, in the same 10^6-byte megabytes as IMB's.
    parse_finite(tokens[5])?;
    let latency_micros = parse_finite(tokens[8]).filter(|t| *t > 0.0)?;
    Some(PingPongRow {
        bytes,
        repetitions,
        latency_micros,
        megabytes_per_second: bytes as f64 / latency_micros,
    })
}

/// Whether `line` is the start of a table line (`N:`), whole or not.
fn starts_row(line: &str) -> bool {
    line.trim()
        .split_once(':')
        .is_some_and(|(round, rest)| round.parse::<u32>().is_ok() && rest.contains("bytes"))
}

/// Parses NetPIPE output (the caller has checked it is not empty).
pub fn parse(raw: &str) -> Result<MPIPingPongResult, ParseError> {
    if let Some((line, text)) = find_marker(raw, ERROR_MARKERS) {
        return Err(ParseError::ToolReportedError(format!(
            "line {line}: {text}"
        )));
    }
    if let Some(status) = crate::kinds::mpi::exit_status(raw, Tool::NetPipe.program())
        && status != 0
    {
        return Err(ParseError::ToolReportedError(format!(
            "NPopenmpi exited with status {status}"
        )));
    }
    let upper: Option<u64> = raw.lines().find_map(|line| {
        line.trim()
            .strip_prefix(PREAMBLE)?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    });
    let lines: Vec<&str> = raw.lines().collect();
    let ends_with_newline = raw.ends_with('\n');
    let mut rows: Vec<PingPongRow> = Vec::new();
    let mut cut = false;
    for (index, line) in lines.iter().enumerate() {
        if !starts_row(line) {
            continue;
        }
        let last = index + 1 == lines.len();
        match row(line) {
            Some(row) if !last || ends_with_newline => {
                if let Some(previous) = rows.last()
                    && row.bytes <= previous.bytes
                {
                    return Err(ParseError::Malformed {
                        line: index + 1,
                        message: format!(
                            "message sizes must grow: {} bytes after {} bytes",
                            row.bytes, previous.bytes
                        ),
                    });
                }
                rows.push(row);
            }
            // Half a line, NetPIPE's own or the log's: the run stopped there.
            _ if last || index + 2 == lines.len() && lines[index + 1].trim().is_empty() => {
                cut = true;
            }
            _ => {
                return Err(ParseError::Malformed {
                    line: index + 1,
                    message: format!(
                        "expected a NetPIPE line 'N: BYTES bytes TIMES times --> MBPS Mbps in USEC usec', found {:?}",
                        line.trim()
                    ),
                });
            }
        }
    }
    let reached = |upper: u64| rows.last().is_some_and(|r| r.bytes >= upper);
    let complete = !cut
        && match upper {
            Some(upper) => reached(upper),
            None => ends_with_newline,
        };
    MPIPingPongResult::of_rows(Tool::NetPipe, rows, complete).ok_or_else(|| {
        ParseError::Truncated {
            what: "NetPIPE's table has no complete line ('N: BYTES bytes TIMES times --> MBPS Mbps in USEC usec')".into(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;

    /// NetPIPE 3.7.2's standard error, `mpirun -np 2 NPopenmpi -u 65536` over TCP on
    /// loopback, as the rank wrapper passes it through.
    const REAL: &str = include_str!("../../../testdata/netpipe/stderr-tcp-loopback-64k.txt");
    /// The same under heavy load, `-p 0 -u 4194304`, killed by `timeout` mid-line.
    const CUT: &str = include_str!("../../../testdata/netpipe/stderr-truncated-under-load.txt");

    fn wrapped(table: &str, upper: u64, status: Option<i32>) -> String {
        let exit = status
            .map(|s| format!("{}\n", crate::kinds::mpi::exit_line("NPopenmpi", s)))
            .unwrap_or_default();
        format!("{PREAMBLE}{upper} bytes\n{table}{exit}")
    }

    #[test]
    fn real_table_gives_latency_bandwidth_and_every_size() {
        let r = super::super::parse::parse(&wrapped(REAL, 65536, Some(0))).expect("parses");
        assert_eq!(r.tool, Tool::NetPipe);
        assert_eq!(r.rows.len(), 82);
        assert!(r.complete);
        assert_eq!(
            r.rows[0],
            PingPongRow {
                bytes: 1,
                repetitions: 1034,
                latency_micros: 58.70,
                megabytes_per_second: 1.0 / 58.70,
            }
        );
        // The one-way time of 65536 bytes is 64.75 µs: 1012 MB/s, which NetPIPE prints
        // as 7721.93 Mbps of 2^20 bits (65536 × 8 / 64.75e-6 / 2^20).
        let row = r
            .rows
            .iter()
            .find(|r| r.bytes == 65536)
            .expect("64 KiB row");
        assert!((row.megabytes_per_second - 1012.13).abs() < 0.01, "{row:?}");
        assert!((row.bytes as f64 * 8.0 / 64.75e-6 / f64::from(1 << 20) - 7721.93).abs() < 0.1);
        let fastest = r
            .rows
            .iter()
            .map(|r| r.latency_micros)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(r.min_latency_micros, fastest);
        let peak = r
            .rows
            .iter()
            .map(|r| r.megabytes_per_second)
            .fold(0.0, f64::max);
        assert_eq!(r.peak_bandwidth_megabytes_per_second, peak);
        assert_eq!(r.peak_bandwidth_message_bytes, 24579);
        assert_round_trips(&r);
    }

    #[test]
    fn raw_netpipe_without_the_wrapper_parses_too() {
        let r = super::super::parse::parse(REAL).expect("parses");
        assert_eq!(r.tool, Tool::NetPipe);
        assert!(r.complete);
    }

    #[test]
    fn a_run_cut_mid_line_is_partial() {
        let r = super::super::parse::parse(&wrapped(CUT, 4_194_304, None)).expect("parses");
        assert!(!r.complete);
        assert_eq!(r.rows.len(), 38);
        assert_eq!(r.rows.last().map(|r| r.bytes), Some(524_288));
        assert!(r.headline().ends_with("(partial)"));
        // Whole lines, but short of the size asked for: partial as well.
        let short = wrapped(REAL, 4_194_304, Some(0));
        assert!(!super::super::parse::parse(&short).expect("parses").complete);
    }

    #[test]
    fn a_failed_netpipe_is_no_result() {
        let failed = wrapped(REAL, 65536, Some(1));
        assert_eq!(
            super::super::parse::parse(&failed),
            Err(ParseError::ToolReportedError(
                "NPopenmpi exited with status 1".into()
            ))
        );
        let killed = format!("{REAL}mpirun noticed that process rank 1 exited on signal 9.\n");
        assert!(matches!(
            parse(&killed),
            Err(ParseError::ToolReportedError(m)) if m.contains("signal 9")
        ));
    }

    #[test]
    fn malformed_and_shrinking_lines_name_their_line() {
        let bad = REAL.replace(
            "  3:       4 bytes   1026 times -->      0.39 Mbps in      78.93 usec",
            "  3:       4 bytes   1026 times -->      0.39 Mbps in      NaN usec",
        );
        assert!(matches!(
            parse(&bad),
            Err(ParseError::Malformed { line: 5, .. })
        ));
        let shrinking = REAL.replace("  3:       4 bytes", "  3:       1 bytes");
        assert!(matches!(
            parse(&shrinking),
            Err(ParseError::Malformed { line: 5, message }) if message.contains("must grow")
        ));
        assert!(matches!(
            parse(&format!("{PREAMBLE}64 bytes\n")),
            Err(ParseError::Truncated { .. })
        ));
    }

    #[test]
    fn every_prefix_is_handled() {
        check_prefixes(
            &wrapped(REAL, 65536, Some(0)),
            super::super::parse::parse,
            MPIPingPongResult::headline,
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn corruption_never_panics(e in edits()) {
            let raw = corrupt(&wrapped(REAL, 65536, Some(0)), &e);
            if let Ok(r) = super::super::parse::parse(&raw) {
                assert_round_trips(&r);
                let _ = r.headline();
            }
        }
    }
}
