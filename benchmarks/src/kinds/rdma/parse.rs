//! Parsers for perftest (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_*_lat`) text output, single size or `-a` (all sizes).
//!
//! # Bandwidth units
//!
//! perftest prints bandwidth either as `[MB/sec]` (default) or `[Gb/sec]`
//! (`--report_gbits`). In perftest's `print_report_bw` the divisor is
//! `0x100000` for MB/sec and `125000000` for Gb/sec (confirmed in the Debian
//! perftest 4.5+0.17 binary: both constants are loaded on the two branches of
//! the report-format test). So perftest's "MB" is a **MiB (2^20 bytes)** and
//! its "Gb" is 10^9 bits. All results here are in Gbit/s (10^9 bit/s):
//! `Gbit/s = MB/sec × 2^20 × 8 / 10^9`.
//!
//! # Latency units
//!
//! Latency tables are in `[usec]`; output with `-C/--report-cycles`
//! (`[cycles]`) is rejected because cycles cannot be converted without the
//! CPU frequency.
//!
//! A table whose closing dashed line is missing (output cut off) still parses
//! when it has at least one complete row, with `complete: false`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{ParseError, ensure_not_empty, parse_finite};

/// Bandwidth unit perftest printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RDMABandwidthUnit {
    /// `[MB/sec]` (perftest default; MB = 2^20 bytes).
    #[serde(rename = "MB/sec")]
    MebibytesPerSecond,
    /// `[Gb/sec]` (`--report_gbits`; Gb = 10^9 bits).
    #[serde(rename = "Gb/sec")]
    GigabitsPerSecond,
}

/// One row of a perftest bandwidth table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RDMABandwidthRow {
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations measured.
    pub iterations: u64,
    /// Peak bandwidth in Gbit/s (10^9 bit/s).
    pub peak_gbits_per_second: f64,
    /// Average bandwidth in Gbit/s (10^9 bit/s).
    pub average_gbits_per_second: f64,
    /// Message rate in millions of packets per second.
    pub message_rate_mpps: f64,
}

/// Result of a perftest bandwidth test (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RDMABandwidthResult {
    /// Test title printed by perftest, e.g. `RDMA_Write BW Test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// RDMA device used, e.g. `mlx5_0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Unit perftest printed (values below are converted to Gbit/s).
    pub reported_unit: RDMABandwidthUnit,
    /// Largest average bandwidth over all message sizes, in Gbit/s.
    pub max_average_gbits_per_second: f64,
    /// Message size (bytes) of the largest average bandwidth.
    pub max_average_message_bytes: u64,
    /// False when the output stopped inside the table.
    pub complete: bool,
    /// Table rows (one, or one per size with `-a`).
    pub rows: Vec<RDMABandwidthRow>,
}

/// One row of a perftest latency table. Absent columns (older perftest, or
/// the `-D` duration mode which prints only `t_avg`) are omitted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RDMALatencyRow {
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations measured.
    pub iterations: u64,
    /// Minimum latency in microseconds (`t_min`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_micros: Option<f64>,
    /// Maximum latency in microseconds (`t_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_micros: Option<f64>,
    /// Typical (median) latency in microseconds (`t_typical`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typical_micros: Option<f64>,
    /// Average latency in microseconds (`t_avg`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub average_micros: Option<f64>,
    /// Standard deviation in microseconds (`t_stdev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stddev_micros: Option<f64>,
    /// 99th percentile latency in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_micros: Option<f64>,
    /// 99.9th percentile latency in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p999_micros: Option<f64>,
}

/// Result of a perftest latency test (`ib_write_lat`, `ib_read_lat`, `ib_send_lat`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RDMALatencyResult {
    /// Test title printed by perftest, e.g. `RDMA_Write Latency Test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<String>,
    /// RDMA device used, e.g. `mlx5_0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// Smallest typical latency over all message sizes (falls back to the
    /// average when no typical column is printed), in microseconds.
    pub min_typical_latency_micros: f64,
    /// Message size (bytes) of the smallest typical latency.
    pub min_typical_latency_message_bytes: u64,
    /// False when the output stopped inside the table.
    pub complete: bool,
    /// Table rows (one, or one per size with `-a`).
    pub rows: Vec<RDMALatencyRow>,
}

/// Either kind of perftest result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RDMAResult {
    /// A `ib_*_bw` result.
    Bandwidth(RDMABandwidthResult),
    /// A `ib_*_lat` result.
    Latency(RDMALatencyResult),
}

impl RDMABandwidthResult {
    /// Short human summary, e.g. `96.47 Gbit/s @ 65536 B`.
    pub fn headline(&self) -> String {
        format!(
            "{:.2} Gbit/s @ {} B{}",
            self.max_average_gbits_per_second,
            self.max_average_message_bytes,
            if self.complete { "" } else { " (partial)" }
        )
    }
}

impl RDMALatencyResult {
    /// Short human summary, e.g. `1.07 µs @ 2 B`.
    pub fn headline(&self) -> String {
        format!(
            "{:.2} µs @ {} B{}",
            self.min_typical_latency_micros,
            self.min_typical_latency_message_bytes,
            if self.complete { "" } else { " (partial)" }
        )
    }
}

impl RDMAResult {
    /// Short human summary of either variant.
    pub fn headline(&self) -> String {
        match self {
            RDMAResult::Bandwidth(b) => b.headline(),
            RDMAResult::Latency(l) => l.headline(),
        }
    }
}

/// Column labels perftest prints, in the spelling used to find them in the
/// header. Unknown trailing columns (dual-port figures) are ignored.
const COLUMNS: &[&str] = &[
    "#bytes",
    "#iterations",
    "BW peak[",
    "BW average[",
    "MsgRate[",
    "BW Port1[",
    "MsgRate Port1[",
    "BW Port2[",
    "MsgRate Port2[",
    "t_min[",
    "t_max[",
    "t_typical[",
    "t_avg[",
    "t_stdev[",
    "99% percentile[",
    "99.9% percentile[",
    "tps average",
];

/// Lines perftest prints when it fails.
const ERROR_MARKERS: &[&str] = &[
    "Couldn't",
    "Unable to",
    "Failed to",
    "Did not detect devices",
    "No IB devices found",
    "Error",
    "error",
];

struct Table<'a> {
    /// Column label → position in a data row.
    columns: Vec<&'static str>,
    header: &'a str,
    header_line: usize,
    /// (1-based line number, tokens)
    rows: Vec<(usize, Vec<&'a str>)>,
    complete: bool,
    test: Option<String>,
    device: Option<String>,
}

fn find_table(raw: &str, want_latency: Option<bool>) -> Result<Table<'_>, ParseError> {
    ensure_not_empty(raw)?;
    let lines: Vec<&str> = raw.lines().collect();
    let mut test = None;
    let mut device = None;
    let mut header_at = None;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim();
        if (t.ends_with(" BW Test") || t.ends_with(" Latency Test")) && test.is_none() {
            test = Some(t.to_string());
        }
        if let Some(pos) = t.find("Device         :") {
            let v = t.get(pos + "Device         :".len()..).unwrap_or_default();
            device = v.split_whitespace().next().map(str::to_string);
        }
        if t.starts_with("#bytes") {
            let is_latency = t.contains("t_avg[") || t.contains("t_typical[");
            if want_latency.is_none_or(|w| w == is_latency) {
                header_at = Some(i);
                break;
            }
        }
    }
    let Some(header_line) = header_at else {
        // Conflicting CPU frequency is only a warning; prefer real errors.
        let errors: Vec<&str> = lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| {
                ERROR_MARKERS.iter().any(|m| l.contains(m)) && !l.contains("Conflicting CPU")
            })
            .collect();
        if !errors.is_empty() {
            return Err(ParseError::ToolReportedError(errors.join("; ")));
        }
        return Err(ParseError::NotFound {
            what: match want_latency {
                Some(true) => {
                    "perftest latency table ('#bytes #iterations t_min[usec] ...' header)"
                }
                Some(false) => {
                    "perftest bandwidth table ('#bytes #iterations BW peak[...] ...' header)"
                }
                None => "perftest result table (a line starting with '#bytes')",
            }
            .into(),
        });
    };
    let header = lines.get(header_line).copied().unwrap_or_default();
    if header.contains("[cycles]") {
        return Err(ParseError::Malformed {
            line: header_line + 1,
            message: "latency is reported in CPU cycles (-C/--report-cycles); rerun without it to get microseconds".into(),
        });
    }
    let mut found: Vec<(usize, &'static str)> = COLUMNS
        .iter()
        .filter_map(|c| header.find(c).map(|p| (p, *c)))
        .collect();
    found.sort_unstable();
    let columns: Vec<&'static str> = found.into_iter().map(|(_, c)| c).collect();

    let ends_with_newline = raw.ends_with('\n');
    let mut rows = Vec::new();
    let mut complete = false;
    for (i, line) in lines.iter().enumerate().skip(header_line + 1) {
        let t = line.trim();
        if t.starts_with("---") {
            complete = true;
            break;
        }
        if t.is_empty() {
            continue;
        }
        if !t.starts_with(|c: char| c.is_ascii_digit()) {
            // Warnings interleaved with rows (perftest prints some) are skipped; an
            // error ended the run, and the rows before it do not describe it.
            if ERROR_MARKERS.iter().any(|m| t.contains(m)) && !t.contains("Conflicting CPU") {
                return Err(ParseError::ToolReportedError(format!(
                    "line {}: {t}",
                    i + 1
                )));
            }
            continue;
        }
        if i + 1 == lines.len() && !ends_with_newline {
            break; // possibly cut mid-row
        }
        rows.push((i + 1, t.split_whitespace().collect()));
    }
    Ok(Table {
        columns,
        header,
        header_line: header_line + 1,
        rows,
        complete,
        test,
        device,
    })
}

impl Table<'_> {
    fn index(&self, label: &str) -> Option<usize> {
        self.columns.iter().position(|c| *c == label)
    }

    fn value(&self, line: usize, tokens: &[&str], label: &str) -> Result<Option<f64>, ParseError> {
        let Some(idx) = self.index(label) else {
            return Ok(None);
        };
        let Some(tok) = tokens.get(idx) else {
            return Err(ParseError::Malformed {
                line,
                message: format!(
                    "row has {} columns but the header has {} (missing {label:?} column)",
                    tokens.len(),
                    self.columns.len()
                ),
            });
        };
        parse_finite(tok)
            .map(Some)
            .ok_or_else(|| ParseError::Malformed {
                line,
                message: format!("column {label:?}: expected a number, found {tok:?}"),
            })
    }

    fn req(&self, line: usize, tokens: &[&str], label: &str) -> Result<f64, ParseError> {
        self.value(line, tokens, label)?
            .ok_or_else(|| ParseError::Malformed {
                line: self.header_line,
                message: format!("header {:?} lacks the {label:?} column", self.header.trim()),
            })
    }

    fn int(line: usize, tokens: &[&str], idx: usize, label: &str) -> Result<u64, ParseError> {
        let tok = tokens.get(idx).copied().unwrap_or_default();
        tok.parse().map_err(|_| ParseError::Malformed {
            line,
            message: format!("column {label:?}: expected an integer, found {tok:?}"),
        })
    }

    fn no_rows(&self) -> ParseError {
        ParseError::Truncated {
            what: format!(
                "the perftest table (header at line {}) has no complete row",
                self.header_line
            ),
        }
    }
}

/// Parses `ib_*_bw` output.
pub fn parse_bandwidth(raw: &str) -> Result<RDMABandwidthResult, ParseError> {
    let table = find_table(raw, Some(false))?;
    let unit = if table.header.contains("[Gb/sec]") {
        RDMABandwidthUnit::GigabitsPerSecond
    } else if table.header.contains("[MB/sec]") {
        RDMABandwidthUnit::MebibytesPerSecond
    } else {
        return Err(ParseError::Malformed {
            line: table.header_line,
            message: format!(
                "bandwidth header has neither [Gb/sec] nor [MB/sec]: {:?}",
                table.header.trim()
            ),
        });
    };
    let to_gbits = |v: f64| match unit {
        RDMABandwidthUnit::GigabitsPerSecond => v,
        RDMABandwidthUnit::MebibytesPerSecond => v * 1_048_576.0 * 8.0 / 1e9,
    };
    let mut rows = Vec::with_capacity(table.rows.len());
    for (line, tokens) in &table.rows {
        rows.push(RDMABandwidthRow {
            bytes: Table::int(*line, tokens, 0, "#bytes")?,
            iterations: Table::int(*line, tokens, 1, "#iterations")?,
            peak_gbits_per_second: to_gbits(table.req(*line, tokens, "BW peak[")?),
            average_gbits_per_second: to_gbits(table.req(*line, tokens, "BW average[")?),
            message_rate_mpps: table.req(*line, tokens, "MsgRate[")?,
        });
    }
    // First (smallest) size reaching the maximum, if several tie.
    let best = rows
        .iter()
        .reduce(|best, r| {
            if r.average_gbits_per_second > best.average_gbits_per_second {
                r
            } else {
                best
            }
        })
        .ok_or_else(|| table.no_rows())?;
    Ok(RDMABandwidthResult {
        test: table.test.clone(),
        device: table.device.clone(),
        reported_unit: unit,
        max_average_gbits_per_second: best.average_gbits_per_second,
        max_average_message_bytes: best.bytes,
        complete: table.complete,
        rows,
    })
}

/// Parses `ib_*_lat` output.
pub fn parse_latency(raw: &str) -> Result<RDMALatencyResult, ParseError> {
    let table = find_table(raw, Some(true))?;
    if !table.header.contains("[usec]") {
        return Err(ParseError::Malformed {
            line: table.header_line,
            message: format!("latency header is not in [usec]: {:?}", table.header.trim()),
        });
    }
    let mut rows = Vec::with_capacity(table.rows.len());
    for (line, tokens) in &table.rows {
        let l = *line;
        rows.push(RDMALatencyRow {
            bytes: Table::int(l, tokens, 0, "#bytes")?,
            iterations: Table::int(l, tokens, 1, "#iterations")?,
            min_micros: table.value(l, tokens, "t_min[")?,
            max_micros: table.value(l, tokens, "t_max[")?,
            typical_micros: table.value(l, tokens, "t_typical[")?,
            average_micros: table.value(l, tokens, "t_avg[")?,
            stddev_micros: table.value(l, tokens, "t_stdev[")?,
            p99_micros: table.value(l, tokens, "99% percentile[")?,
            p999_micros: table.value(l, tokens, "99.9% percentile[")?,
        });
    }
    let best = rows
        .iter()
        .filter_map(|r| r.typical_micros.or(r.average_micros).map(|t| (t, r.bytes)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .ok_or_else(|| table.no_rows())?;
    Ok(RDMALatencyResult {
        test: table.test.clone(),
        device: table.device.clone(),
        min_typical_latency_micros: best.0,
        min_typical_latency_message_bytes: best.1,
        complete: table.complete,
        rows,
    })
}

/// Parses perftest output of either kind, deciding from the table header.
pub fn parse(raw: &str) -> Result<RDMAResult, ParseError> {
    let table = find_table(raw, None)?;
    if table.header.contains("t_avg[") || table.header.contains("t_typical[") {
        parse_latency(raw).map(RDMAResult::Latency)
    } else {
        parse_bandwidth(raw).map(RDMAResult::Bandwidth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        approx, assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;

    // Transcribed from perftest 4.5's printf formats (see testdata/README.md).
    const BW_MB: &str = include_str!("../../../testdata/rdma/ib_write_bw-65536-mbsec.txt");
    const BW_ALL: &str = include_str!("../../../testdata/rdma/ib_write_bw-all-sizes-gbits.txt");
    const LAT_ALL: &str = include_str!("../../../testdata/rdma/ib_write_lat-all-sizes.txt");
    const LAT_WARN: &str = include_str!("../../../testdata/rdma/ib_send_lat-2-cpu-warning.txt");
    const CONNECT: &str =
        include_str!("../../../testdata/rdma/ib_write_bw-client-connect-error.txt");
    // Real output of `ib_write_bw 127.0.0.1` on a host without RDMA devices.
    const NO_DEVICE: &str = include_str!("../../../testdata/rdma/ib_write_bw-no-device.txt");
    const ALL: &[&str] = &[BW_MB, BW_ALL, LAT_ALL, LAT_WARN, CONNECT, NO_DEVICE];

    #[test]
    fn bandwidth_mb_per_sec_is_mebibytes() {
        let r = parse_bandwidth(BW_MB).unwrap();
        assert_eq!(r.test.as_deref(), Some("RDMA_Write BW Test"));
        assert_eq!(r.device.as_deref(), Some("mlx5_0"));
        assert_eq!(r.reported_unit, RDMABandwidthUnit::MebibytesPerSecond);
        assert!(r.complete);
        assert_eq!(r.rows.len(), 1);
        let row = &r.rows[0];
        assert_eq!((row.bytes, row.iterations), (65536, 5000));
        // 11781.53 MiB/s × 1048576 × 8 / 1e9 = 98.83 Gbit/s
        approx(
            row.average_gbits_per_second,
            11781.53 * 1_048_576.0 * 8.0 / 1e9,
        );
        assert!((row.average_gbits_per_second - 98.831).abs() < 0.001);
        approx(row.peak_gbits_per_second, 11782.24 * 0.008388608);
        assert_eq!(row.message_rate_mpps, 0.188504);
        assert_eq!(r.headline(), "98.83 Gbit/s @ 65536 B");
        assert_eq!(parse(BW_MB).unwrap(), RDMAResult::Bandwidth(r));
    }

    #[test]
    fn bandwidth_all_sizes_gbits() {
        let r = parse_bandwidth(BW_ALL).unwrap();
        assert_eq!(r.reported_unit, RDMABandwidthUnit::GigabitsPerSecond);
        assert_eq!(r.rows.len(), 23);
        assert_eq!(r.rows[0].bytes, 2);
        assert_eq!(r.rows[22].bytes, 8_388_608);
        assert_eq!(r.rows[0].average_gbits_per_second, 0.15);
        assert_eq!(r.rows[0].message_rate_mpps, 9.31);
        assert_eq!(r.rows[10].bytes, 2048);
        assert_eq!(r.rows[10].peak_gbits_per_second, 96.23);
        assert_eq!(r.rows[10].average_gbits_per_second, 95.84);
        // Several sizes reach 97.80: the smallest one is reported.
        assert_eq!(r.max_average_gbits_per_second, 97.80);
        assert_eq!(r.max_average_message_bytes, 4096);
        assert!(r.complete);
        assert_round_trips(&r);
    }

    #[test]
    fn latency_all_sizes() {
        let r = parse_latency(LAT_ALL).unwrap();
        assert_eq!(r.test.as_deref(), Some("RDMA_Write Latency Test"));
        assert_eq!(r.rows.len(), 23);
        assert_eq!(
            r.rows[0],
            RDMALatencyRow {
                bytes: 2,
                iterations: 1000,
                min_micros: Some(1.04),
                max_micros: Some(4.84),
                typical_micros: Some(1.07),
                average_micros: Some(1.08),
                stddev_micros: Some(0.07),
                p99_micros: Some(1.21),
                p999_micros: Some(4.84),
            }
        );
        assert_eq!(r.rows[22].bytes, 8_388_608);
        assert_eq!(r.rows[22].typical_micros, Some(692.91));
        assert_eq!(r.rows[22].p999_micros, Some(696.68));
        assert_eq!(r.min_typical_latency_micros, 1.07);
        assert_eq!(r.min_typical_latency_message_bytes, 2);
        assert_eq!(r.headline(), "1.07 µs @ 2 B");
        assert!(matches!(parse(LAT_ALL).unwrap(), RDMAResult::Latency(_)));
    }

    #[test]
    fn latency_cut_off_with_warning() {
        let r = parse_latency(LAT_WARN).unwrap();
        assert_eq!(r.test.as_deref(), Some("Send Latency Test"));
        assert!(!r.complete, "no closing dashed line");
        assert_eq!(r.rows.len(), 1);
        assert_eq!(r.rows[0].typical_micros, Some(1.15));
        assert_eq!(r.headline(), "1.15 µs @ 2 B (partial)");
    }

    #[test]
    fn duration_mode_latency() {
        let text = " #bytes        #iterations       t_avg[usec]    tps average\n 2             1283491          0.78           1283491.45\n---\n";
        let r = parse_latency(text).unwrap();
        assert_eq!(r.rows[0].average_micros, Some(0.78));
        assert_eq!(r.rows[0].typical_micros, None);
        assert_eq!(r.min_typical_latency_micros, 0.78);
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse(CONNECT).unwrap_err(),
            ParseError::ToolReportedError(
                "Couldn't connect to 192.168.10.2:18515; Unable to open file descriptor for socket connection Unable to init the socket connection".into()
            )
        );
        assert_eq!(
            parse(NO_DEVICE).unwrap_err(),
            ParseError::ToolReportedError(
                "Did not detect devices; Unable to find the Infiniband/RoCE device".into()
            )
        );
        assert!(matches!(
            parse_latency(BW_MB),
            Err(ParseError::NotFound { .. })
        ));
        assert!(matches!(
            parse_bandwidth(LAT_ALL),
            Err(ParseError::NotFound { .. })
        ));
        let cycles = LAT_ALL.replace("[usec]", "[cycles]");
        assert!(matches!(
            parse_latency(&cycles),
            Err(ParseError::Malformed { line: 18, .. })
        ));
        let header_only = &BW_MB[..BW_MB.find(" 65536").unwrap()];
        assert!(matches!(
            parse_bandwidth(header_only),
            Err(ParseError::Truncated { .. })
        ));
        let bad = BW_MB.replace("11781.53", "oops");
        assert_eq!(
            parse_bandwidth(&bad).unwrap_err(),
            ParseError::Malformed {
                line: 20,
                message: "column \"BW average[\": expected a number, found \"oops\"".into()
            }
        );
    }

    #[test]
    fn every_prefix_is_handled() {
        for raw in ALL {
            check_prefixes(raw, parse, RDMAResult::headline);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn corruption_never_panics(which in 0..ALL.len(), e in edits()) {
            let raw = corrupt(ALL[which], &e);
            if let Ok(r) = parse(&raw) {
                assert_round_trips(&r);
                let _ = r.headline();
            }
            let _ = parse_latency(&raw);
            let _ = parse_bandwidth(&raw);
        }
    }
}
