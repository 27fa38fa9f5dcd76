//! Intel MPI Benchmarks' `IMB-MPI1 PingPong` text output.
//!
//! Only the first `# Benchmarking PingPong` section is read; other benchmark
//! sections (PingPing, Sendrecv, ...) are skipped.
//!
//! # Truncated output
//!
//! * A PingPong table with at least one complete row but no proper end (the
//!   log stops inside the table) parses to a **partial result** with
//!   `complete: false`. A final line without a trailing newline is treated as
//!   possibly cut mid-row and dropped, even if it happens to parse.
//! * A PingPong section with no complete row is `ParseError::Truncated`.
//!
//! # Units
//!
//! `t[usec]` is half the round-trip time in microseconds. IMB's `Mbytes/sec`
//! (printed as `Mbytes/s` by some versions) is bytes / t / 10^6 in IMB 2021
//! (checked on the fixture: 131072 B / 9.00 µs = 14563.6 ≈ 14564.50 MB/s);
//! older IMB releases may have used 2^20. Values are kept as printed.

use super::parse::{ERROR_MARKERS, MPIPingPongResult, PingPongRow, Tool};
use crate::execution::parse_error::{ParseError, find_marker, parse_finite};

fn strip_comment(line: &str) -> Option<&str> {
    line.trim().strip_prefix('#').map(str::trim)
}

/// Parses IMB-MPI1 output containing a PingPong section (the caller has checked it is
/// not empty).
pub fn parse(raw: &str) -> Result<MPIPingPongResult, ParseError> {
    if let Some((line, text)) = find_marker(raw, ERROR_MARKERS) {
        return Err(ParseError::ToolReportedError(format!(
            "line {line}: {text}"
        )));
    }
    let lines: Vec<&str> = raw.lines().collect();
    let ends_with_newline = raw.ends_with('\n');

    let mut imb_version = None;
    let mut max_message_bytes: Option<u64> = None;
    let mut section_line = None;
    for (i, line) in lines.iter().enumerate() {
        if let Some(rest) = line.split("MPI Benchmarks ").nth(1)
            && imb_version.is_none()
        {
            let v = rest.split([',', ' ']).next().unwrap_or_default().trim();
            if !v.is_empty() {
                imb_version = Some(v.to_string());
            }
        }
        if let Some(c) = strip_comment(line) {
            if let Some(v) = c.strip_prefix("Maximum message length in bytes:") {
                max_message_bytes = v.trim().parse().ok();
            }
            if c == "Benchmarking PingPong" {
                section_line = Some(i);
                break;
            }
        }
    }
    let Some(section_line) = section_line else {
        return Err(ParseError::NotFound {
            what: "IMB PingPong section (a '# Benchmarking PingPong' line)".into(),
        });
    };

    let mut processes = None;
    let mut header_line = None;
    for (i, line) in lines.iter().enumerate().skip(section_line + 1) {
        if let Some(c) = strip_comment(line)
            && let Some(v) = c.strip_prefix("#processes =")
        {
            processes = v.trim().parse().ok();
        }
        if line.contains("#bytes") && line.contains("#repetitions") {
            header_line = Some(i);
            break;
        }
        if strip_comment(line).is_some_and(|c| c.starts_with("Benchmarking ")) {
            break;
        }
    }
    let Some(header_line) = header_line else {
        return Err(ParseError::Truncated {
            what: format!(
                "the PingPong section at line {} has no '#bytes #repetitions t[usec] Mbytes/sec' table header",
                section_line + 1
            ),
        });
    };
    let header = lines.get(header_line).copied().unwrap_or_default();
    if !header.contains("t[usec]") || !header.contains("Mbytes/s") {
        return Err(ParseError::Malformed {
            line: header_line + 1,
            message: format!(
                "expected the PingPong header '#bytes #repetitions t[usec] Mbytes/sec', found {:?}",
                header.trim()
            ),
        });
    }

    let mut rows = Vec::new();
    let mut terminated = false;
    for (i, line) in lines.iter().enumerate().skip(header_line + 1) {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            terminated = true;
            break;
        }
        let is_last = i + 1 == lines.len();
        if is_last && !ends_with_newline {
            // Possibly cut mid-row: do not trust it.
            break;
        }
        let tokens: Vec<&str> = trimmed.split_whitespace().collect();
        let row = match tokens.as_slice() {
            [b, r, t, bw] => (|| {
                Some(PingPongRow {
                    bytes: b.parse().ok()?,
                    repetitions: r.parse().ok()?,
                    latency_micros: parse_finite(t)?,
                    megabytes_per_second: parse_finite(bw)?,
                })
            })(),
            _ => None,
        };
        match row {
            Some(row) => rows.push(row),
            None => {
                return Err(ParseError::Malformed {
                    line: i + 1,
                    message: format!(
                        "expected a PingPong row '#bytes #repetitions t[usec] Mbytes/sec' (4 numbers), found {trimmed:?}"
                    ),
                });
            }
        }
    }

    let complete = terminated
        || (ends_with_newline
            && max_message_bytes.is_some()
            && rows.last().map(|r| r.bytes) == max_message_bytes);
    let Some(result) = MPIPingPongResult::of_rows(Tool::Imb, rows, complete) else {
        return Err(ParseError::Truncated {
            what: format!(
                "the PingPong table (header at line {}) has no complete row",
                header_line + 1
            ),
        });
    };
    Ok(MPIPingPongResult {
        imb_version,
        processes,
        ..result
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    // Through the kind's parser, as both backends parse: it tells the tools apart.
    use crate::execution::parse_error::test_support::{
        assert_round_trips, check_prefixes, corrupt, edits,
    };
    use crate::kinds::mpi_pingpong::parse::parse;
    use proptest::prelude::*;

    const REAL: &str =
        include_str!("../../../testdata/mpi_pingpong/imb-mpi1-pingpong-msglog22.txt");

    #[test]
    fn real_fixture() {
        let r = parse(REAL).unwrap();
        assert_eq!(r.imb_version.as_deref(), Some("2021.11"));
        assert_eq!(r.processes, Some(2));
        assert!(r.complete);
        assert_eq!(r.rows.len(), 24);
        assert_eq!(
            r.rows[0],
            PingPongRow {
                bytes: 0,
                repetitions: 100,
                latency_micros: 0.36,
                megabytes_per_second: 0.0
            }
        );
        assert_eq!(
            r.rows[23],
            PingPongRow {
                bytes: 4194304,
                repetitions: 10,
                latency_micros: 2793.93,
                megabytes_per_second: 1501.22
            }
        );
        assert_eq!(r.rows[20].repetitions, 80);
        assert_eq!(r.min_latency_micros, 0.36);
        assert_eq!(r.min_latency_message_bytes, 0);
        assert_eq!(r.peak_bandwidth_megabytes_per_second, 14564.50);
        assert_eq!(r.peak_bandwidth_message_bytes, 131072);
        assert_eq!(r.headline(), "0.36 µs / 14.56 GB/s");
        // IMB 2021's MB is 10^6 bytes: bytes / t[usec] reproduces the column.
        let row = &r.rows[18];
        assert!((row.bytes as f64 / row.latency_micros - row.megabytes_per_second).abs() < 2.0);
        assert_round_trips(&r);
    }

    #[test]
    fn mbytes_per_s_spelling_and_other_sections() {
        let text = format!(
            "#---------------------------------------------------\n\
             # Benchmarking PingPing \n\
             # #processes = 2 \n\
             #---------------------------------------------------\n\
             \x20      #bytes #repetitions      t[usec]   Mbytes/sec\n\
             \x20           0         1000         9.99         0.00\n\
             \n\n{}",
            REAL.replace("Mbytes/sec", "Mbytes/s")
        );
        let r = parse(&text).unwrap();
        assert_eq!(r.rows.len(), 24);
        assert_eq!(r.min_latency_micros, 0.36);
    }

    #[test]
    fn truncated_mid_row_gives_partial_result() {
        let cut = REAL.find("      1048576           40").unwrap() + 28;
        let r = parse(&REAL[..cut]).unwrap();
        assert!(!r.complete);
        assert_eq!(r.rows.len(), 21); // 0 B plus 2^0..2^19: 524288 is the last complete row
        assert_eq!(r.rows.last().unwrap().bytes, 524288);
        assert!(r.headline().ends_with("(partial)"));
        // Cut right after a complete row's newline: still partial (the
        // 4 MiB maximum was never reached).
        let cut = REAL.find("      2097152").unwrap();
        let r = parse(&REAL[..cut]).unwrap();
        assert!(!r.complete);
        assert_eq!(r.rows.len(), 22);
        assert_eq!(r.rows.last().unwrap().bytes, 1048576);
        // Cut after the last row's newline: max size reached → complete.
        let cut = REAL.find("\n\n\n# All processes").unwrap() + 1;
        assert!(parse(&REAL[..cut]).unwrap().complete);
    }

    #[test]
    fn header_without_rows_is_truncated() {
        let cut = REAL.find("            0          100").unwrap() + 10;
        assert!(matches!(
            parse(&REAL[..cut]),
            Err(ParseError::Truncated { .. })
        ));
        let cut = REAL.find("       #bytes").unwrap();
        assert!(matches!(
            parse(&REAL[..cut]),
            Err(ParseError::Truncated { .. })
        ));
    }

    #[test]
    fn malformed_row_reports_line() {
        let bad = REAL.replace(
            "         1024          100         1.15       889.93",
            "         1024          100         1.15",
        );
        assert_eq!(
            parse(&bad).unwrap_err(),
            ParseError::Malformed {
                line: 46,
                message: "expected a PingPong row '#bytes #repetitions t[usec] Mbytes/sec' (4 numbers), found \"1024          100         1.15\"".into()
            }
        );
        let nan = REAL.replace("889.93", "NaN");
        assert!(matches!(
            parse(&nan),
            Err(ParseError::Malformed { line: 46, .. })
        ));
    }

    #[test]
    fn missing_section_and_mpi_errors() {
        assert!(matches!(parse("hello\n"), Err(ParseError::NotFound { .. })));
        let err = "--------------------------------------------------------------------------\n\
                   There are not enough slots available in the system to satisfy the 2\n\
                   slots that were requested by the application:\n\n  IMB-MPI1\n";
        assert_eq!(
            parse(err).unwrap_err(),
            ParseError::ToolReportedError(
                "line 2: There are not enough slots available in the system to satisfy the 2"
                    .into()
            )
        );
        // A complete table followed by mpirun's report of a killed rank is no result.
        let killed = format!(
            "{REAL}mpirun noticed that process rank 1 with PID 0 on node a exited on signal 9 (Killed).\n"
        );
        assert!(matches!(
            parse(&killed),
            Err(ParseError::ToolReportedError(m)) if m.contains("exited on signal 9")
        ));
    }

    #[test]
    fn every_prefix_is_handled() {
        check_prefixes(REAL, parse, MPIPingPongResult::headline);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn corruption_never_panics(e in edits()) {
            let raw = corrupt(REAL, &e);
            if let Ok(r) = parse(&raw) {
                assert_round_trips(&r);
                let _ = r.headline();
            }
        }
    }
}
