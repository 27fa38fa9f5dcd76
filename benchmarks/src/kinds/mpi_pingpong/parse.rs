//! The MPIPingPong result and its parser: the output of whichever tool measured it,
//! Intel MPI Benchmarks' `IMB-MPI1 PingPong` ([`super::imb`]) or NetPIPE's
//! `NPopenmpi` ([`super::netpipe`]), told apart by what they print, into one result with
//! the same metrics, naming the tool.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{ParseError, ensure_not_empty};

/// The ping-pong tools perfsweep runs and reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Tool {
    /// Intel MPI Benchmarks, `IMB-MPI1 PingPong`.
    #[default]
    #[serde(rename = "IMB-MPI1")]
    Imb,
    /// NetPIPE's MPI module, `NPopenmpi` (Debian's `netpipe-openmpi`).
    #[serde(rename = "NPopenmpi")]
    NetPipe,
}

impl Tool {
    /// The program, as on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Self::Imb => "IMB-MPI1",
            Self::NetPipe => "NPopenmpi",
        }
    }
}

/// One row of the PingPong table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PingPongRow {
    /// Message size in bytes (IMB's `#bytes`).
    pub bytes: u64,
    /// Repetitions measured (IMB's `#repetitions`, NetPIPE's `times`).
    pub repetitions: u64,
    /// One-way latency (half round trip) in microseconds (IMB's `t[usec]`, NetPIPE's
    /// `usec`).
    pub latency_micros: f64,
    /// Bandwidth in megabytes (10^6 bytes) per second: IMB 2021's `Mbytes/sec` as
    /// printed; for NetPIPE, bytes over the one-way time (NetPIPE's own column is in
    /// 2^20 bits per second).
    pub megabytes_per_second: f64,
}

/// Result of a ping-pong run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MPIPingPongResult {
    /// The tool that measured (records from before NetPIPE was supported were IMB's).
    #[serde(default)]
    pub tool: Tool,
    /// IMB version from the banner, e.g. `2021.11`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imb_version: Option<String>,
    /// Number of MPI processes taking part (`#processes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// Smallest latency over all message sizes, in microseconds.
    pub min_latency_micros: f64,
    /// Message size (bytes) at which the smallest latency was measured.
    pub min_latency_message_bytes: u64,
    /// Largest bandwidth over all message sizes, in IMB megabytes per second.
    pub peak_bandwidth_megabytes_per_second: f64,
    /// Message size (bytes) at which the largest bandwidth was measured.
    pub peak_bandwidth_message_bytes: u64,
    /// False when the output stopped inside the table (partial result).
    pub complete: bool,
    /// The table rows, smallest message first.
    pub rows: Vec<PingPongRow>,
}

impl MPIPingPongResult {
    /// Short human summary, e.g. `0.36 µs / 14.56 GB/s`.
    pub fn headline(&self) -> String {
        format!(
            "{:.2} µs / {:.2} GB/s{}",
            self.min_latency_micros,
            self.peak_bandwidth_megabytes_per_second / 1000.0,
            if self.complete { "" } else { " (partial)" }
        )
    }

    /// The result of a table of rows, smallest message first; `None` without rows.
    pub(super) fn of_rows(tool: Tool, rows: Vec<PingPongRow>, complete: bool) -> Option<Self> {
        let min_latency = rows
            .iter()
            .min_by(|a, b| a.latency_micros.total_cmp(&b.latency_micros))?;
        // First (smallest) size reaching the maximum, if several tie.
        let peak = rows.iter().reduce(|best, r| {
            if r.megabytes_per_second > best.megabytes_per_second {
                r
            } else {
                best
            }
        })?;
        Some(Self {
            tool,
            imb_version: None,
            processes: None,
            min_latency_micros: min_latency.latency_micros,
            min_latency_message_bytes: min_latency.bytes,
            peak_bandwidth_megabytes_per_second: peak.megabytes_per_second,
            peak_bandwidth_message_bytes: peak.bytes,
            complete,
            rows,
        })
    }
}

/// Parses the output of either tool: NetPIPE's when it has NetPIPE's table lines (or
/// the preamble perfsweep's rank wrapper prints for it), IMB's otherwise.
pub fn parse(raw: &str) -> Result<MPIPingPongResult, ParseError> {
    ensure_not_empty(raw)?;
    if super::netpipe::is_netpipe(raw) {
        super::netpipe::parse(raw)
    } else {
        super::imb::parse(raw)
    }
}

/// Lines that show the MPI job failed or was interrupted, wherever they appear: a table
/// printed before them does not describe a finished run.
pub(super) const ERROR_MARKERS: &[&str] = &[
    "abort is already in progress",
    "exited on signal",
    "MPI_ABORT",
    "mpirun noticed",
    "mpirun was unable",
    "There are not enough slots",
    "ORTE_ERROR",
    "PMIX ERROR",
    "Fatal error in",
    "Abort(",
    "BAD TERMINATION",
    "Segmentation fault",
    "Killed",
];
