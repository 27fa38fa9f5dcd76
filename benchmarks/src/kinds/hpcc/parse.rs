//! The HPC Challenge result, read from the summary section hpcc writes at the end of
//! `hpccoutf.txt` (`Begin of Summary section.` … `End of Summary section.`): one
//! `Name=value` line per figure, the same names in every hpcc 1.x. The sections above it
//! are each test's own report; only the HPL residual check is read from them, to say why
//! a run failed.
//!
//! Units as hpcc prints them: HPL in TFLOP/s (kept here in GFLOP/s), DGEMM and FFT in
//! GFLOP/s, STREAM and PTRANS in GB/s (10^9 bytes), RandomAccess in GUP/s, ping-pong and
//! ring latency in µs and bandwidth in GB/s. `Star` figures are per rank with every rank
//! running at once (HPCC's "embarrassingly parallel" mode), `Single` figures one rank
//! alone; the system figures are the Star ones times the ranks, as HPCC's own result
//! tables give "EP-STREAM Sys" and "EP-DGEMM Sys".
//!
//! A figure hpcc could not measure is printed negative (or absent in an older release):
//! for the optional figures that means "not measured"; HPL, DGEMM and STREAM are required.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{ParseError, ensure_not_empty, parse_finite};

const BEGIN: &str = "Begin of Summary section.";
const END: &str = "End of Summary section.";

/// High-Performance Linpack.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hpl {
    /// Problem size (the matrix order).
    pub n: u64,
    /// Block size.
    pub nb: u64,
    /// Process grid rows.
    pub p: u64,
    /// Process grid columns.
    pub q: u64,
    pub gflops: f64,
    /// Seconds to solve.
    pub seconds: f64,
}

/// STREAM's four kernels, GB/s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stream {
    pub copy: f64,
    pub scale: f64,
    pub add: f64,
    pub triad: f64,
}

/// MPI ping-pong and ring figures (hpcc's b_eff latency-bandwidth test).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LatencyBandwidth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ping_pong_latency_micros: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_ping_pong_latency_micros: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ping_pong_latency_micros: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_ping_pong_bandwidth_gbytes_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_ping_pong_bandwidth_gbytes_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ping_pong_bandwidth_gbytes_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub randomly_ordered_ring_latency_micros: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub randomly_ordered_ring_bandwidth_gbytes_per_second: Option<f64>,
}

/// Result of an hpcc run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HPCCResult {
    /// hpcc's version, e.g. `1.5.0f`.
    pub version: String,
    /// MPI ranks of the run (`CommWorldProcs`).
    pub processes: u64,
    pub hpl: Hpl,
    /// DGEMM GFLOP/s of one rank while every rank runs it.
    pub star_dgemm_gflops: f64,
    /// DGEMM GFLOP/s of one rank alone.
    pub single_dgemm_gflops: f64,
    /// STREAM of one rank while every rank runs it.
    pub star_stream: Stream,
    /// STREAM of one rank alone.
    pub single_stream: Stream,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptrans_gbytes_per_second: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_random_access_gups: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpi_fft_gflops: Option<f64>,
    #[serde(default)]
    pub latency_bandwidth: LatencyBandwidth,
}

impl HPCCResult {
    /// STREAM Triad of all ranks at once, summed: the node's (or the nodes') memory
    /// bandwidth.
    pub fn system_stream_triad(&self) -> f64 {
        self.star_stream.triad * self.processes as f64
    }

    /// DGEMM of all ranks at once, summed: the compute HPL could reach at best.
    pub fn system_dgemm_gflops(&self) -> f64 {
        self.star_dgemm_gflops * self.processes as f64
    }

    /// HPL as a share of [`Self::system_dgemm_gflops`]: how much of the machine's own
    /// matrix-multiply rate the solver turns into a solution.
    pub fn hpl_fraction_of_dgemm(&self) -> Option<f64> {
        let dgemm = self.system_dgemm_gflops();
        (dgemm > 0.0).then(|| self.hpl.gflops / dgemm)
    }

    /// Short human summary, e.g. `HPL 1.18 GFLOP/s (N=1000), STREAM Triad 146.2 GB/s`.
    pub fn headline(&self) -> String {
        format!(
            "HPL {:.2} GFLOP/s (N={}), STREAM Triad {:.1} GB/s, DGEMM {:.2} GFLOP/s",
            self.hpl.gflops,
            self.hpl.n,
            self.system_stream_triad(),
            self.system_dgemm_gflops()
        )
    }
}

/// The summary's `Name=value` lines, with the line number each was on.
struct Summary<'a> {
    values: BTreeMap<&'a str, (usize, &'a str)>,
}

impl<'a> Summary<'a> {
    fn text(&self, name: &str) -> Result<&'a str, ParseError> {
        self.values
            .get(name)
            .map(|(_, value)| *value)
            .ok_or_else(|| ParseError::NotFound {
                what: format!("{name}= in hpcc's summary section"),
            })
    }

    /// A required figure: finite and not negative.
    fn number(&self, name: &str) -> Result<f64, ParseError> {
        let text = self.text(name)?;
        let line = self.values.get(name).map_or(0, |(line, _)| *line);
        let value = parse_finite(text).ok_or_else(|| ParseError::Malformed {
            line,
            message: format!("{name}= should be a number, found {text:?}"),
        })?;
        if value < 0.0 {
            return Err(ParseError::Implausible {
                line: Some(line),
                reason: format!("{name} is {value}: hpcc did not measure it"),
            });
        }
        Ok(value)
    }

    fn whole(&self, name: &str) -> Result<u64, ParseError> {
        let text = self.text(name)?;
        text.parse().map_err(|_| ParseError::Malformed {
            line: self.values.get(name).map_or(0, |(line, _)| *line),
            message: format!("{name}= should be a whole number, found {text:?}"),
        })
    }

    /// An optional figure: `None` when absent, unreadable or negative (not measured).
    fn optional(&self, name: &str) -> Option<f64> {
        let (_, text) = self.values.get(name)?;
        parse_finite(text).filter(|v| *v >= 0.0)
    }

    fn stream(&self, prefix: &str) -> Result<Stream, ParseError> {
        Ok(Stream {
            copy: self.number(&format!("{prefix}STREAM_Copy"))?,
            scale: self.number(&format!("{prefix}STREAM_Scale"))?,
            add: self.number(&format!("{prefix}STREAM_Add"))?,
            triad: self.number(&format!("{prefix}STREAM_Triad"))?,
        })
    }
}

/// Parses hpcc's output file (`hpccoutf.txt`, or anything that contains its summary).
pub fn parse(raw: &str) -> Result<HPCCResult, ParseError> {
    ensure_not_empty(raw)?;
    let lines: Vec<&str> = raw.lines().collect();
    let Some(begin) = lines.iter().rposition(|l| l.trim() == BEGIN) else {
        return Err(ParseError::NotFound {
            what: format!("hpcc summary section (a '{BEGIN}' line)"),
        });
    };
    let Some(end) = lines
        .iter()
        .skip(begin)
        .position(|l| l.trim() == END)
        .map(|offset| begin + offset)
    else {
        return Err(ParseError::Truncated {
            what: format!(
                "hpcc's summary section (line {}) has no '{END}' line",
                begin + 1
            ),
        });
    };
    let mut values = BTreeMap::new();
    for (index, line) in lines.iter().enumerate().take(end).skip(begin + 1) {
        if let Some((name, value)) = line.trim().split_once('=') {
            values.insert(name.trim(), (index + 1, value.trim()));
        }
    }
    let summary = Summary { values };
    if summary.text("Success")? != "1" {
        let residual = lines
            .iter()
            .find(|l| l.contains("||Ax-b||") && l.contains("FAILED"))
            .map(|l| format!(": HPL's residual check failed ({})", l.trim()))
            .unwrap_or_default();
        return Err(ParseError::ToolReportedError(format!(
            "hpcc reports a failed test (Success={}){residual}",
            summary.text("Success")?
        )));
    }
    let version = ["VersionMajor", "VersionMinor", "VersionMicro"]
        .iter()
        .map(|name| summary.text(name))
        .collect::<Result<Vec<_>, _>>()?
        .join(".")
        + summary.text("VersionRelease").unwrap_or_default();
    let processes = summary.whole("CommWorldProcs")?;
    if processes == 0 {
        return Err(ParseError::Implausible {
            line: None,
            reason: "CommWorldProcs is 0: a run has at least one rank".into(),
        });
    }
    Ok(HPCCResult {
        version,
        processes,
        hpl: Hpl {
            n: summary.whole("HPL_N")?,
            nb: summary.whole("HPL_NB")?,
            p: summary.whole("HPL_nprow")?,
            q: summary.whole("HPL_npcol")?,
            gflops: summary.number("HPL_Tflops")? * 1000.0,
            seconds: summary.number("HPL_time")?,
        },
        star_dgemm_gflops: summary.number("StarDGEMM_Gflops")?,
        single_dgemm_gflops: summary.number("SingleDGEMM_Gflops")?,
        star_stream: summary.stream("Star")?,
        single_stream: summary.stream("Single")?,
        ptrans_gbytes_per_second: summary.optional("PTRANS_GBs"),
        mpi_random_access_gups: summary.optional("MPIRandomAccess_GUPs"),
        mpi_fft_gflops: summary.optional("MPIFFT_Gflops"),
        latency_bandwidth: LatencyBandwidth {
            min_ping_pong_latency_micros: summary.optional("MinPingPongLatency_usec"),
            avg_ping_pong_latency_micros: summary.optional("AvgPingPongLatency_usec"),
            max_ping_pong_latency_micros: summary.optional("MaxPingPongLatency_usec"),
            min_ping_pong_bandwidth_gbytes_per_second: summary
                .optional("MinPingPongBandwidth_GBytes"),
            avg_ping_pong_bandwidth_gbytes_per_second: summary
                .optional("AvgPingPongBandwidth_GBytes"),
            max_ping_pong_bandwidth_gbytes_per_second: summary
                .optional("MaxPingPongBandwidth_GBytes"),
            randomly_ordered_ring_latency_micros: summary
                .optional("RandomlyOrderedRingLatency_usec"),
            randomly_ordered_ring_bandwidth_gbytes_per_second: summary
                .optional("RandomlyOrderedRingBandwidth_GBytes"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;

    /// Debian's hpcc 1.5.0, `mpirun -np 2 hpcc` with N=1000, NB=80, P×Q=1×2.
    const REAL: &str = include_str!("../../../testdata/hpcc/hpcc-1.5.0-2ranks-n1000.txt");

    #[test]
    fn real_output_gives_hpl_dgemm_stream_and_the_network() {
        let r = parse(REAL).expect("parses");
        assert_eq!(r.version, "1.5.0f");
        assert_eq!(r.processes, 2);
        assert_eq!(
            r.hpl,
            Hpl {
                n: 1000,
                nb: 80,
                p: 1,
                q: 2,
                gflops: 0.001_182_44 * 1000.0,
                seconds: 0.565_075,
            }
        );
        assert_eq!(r.star_dgemm_gflops, 1.472);
        assert_eq!(r.single_dgemm_gflops, 1.615_27);
        assert_eq!(r.star_stream.triad, 73.0951);
        assert_eq!(r.single_stream.copy, 99.0218);
        assert_eq!(r.system_stream_triad(), 73.0951 * 2.0);
        assert_eq!(r.system_dgemm_gflops(), 2.944);
        let fraction = r.hpl_fraction_of_dgemm().expect("dgemm measured");
        assert!((fraction - 1.182_44 / 2.944).abs() < 1e-9);
        assert_eq!(r.ptrans_gbytes_per_second, Some(0.106_128));
        assert_eq!(r.mpi_random_access_gups, Some(0.000_728_214));
        assert_eq!(
            r.latency_bandwidth.max_ping_pong_latency_micros,
            Some(0.135_95)
        );
        assert_eq!(
            r.latency_bandwidth
                .min_ping_pong_bandwidth_gbytes_per_second,
            Some(0.317_873)
        );
        assert!(
            r.headline().starts_with("HPL 1.18 GFLOP/s (N=1000)"),
            "{}",
            r.headline()
        );
        assert_round_trips(&r);
    }

    #[test]
    fn a_summary_without_its_end_is_truncated() {
        let cut = REAL.find("FFT_N=").expect("FFT line");
        assert!(matches!(
            parse(&REAL[..cut]),
            Err(ParseError::Truncated { .. })
        ));
        let before = REAL.find(BEGIN).expect("summary");
        assert!(matches!(
            parse(&REAL[..before]),
            Err(ParseError::NotFound { .. })
        ));
    }

    #[test]
    fn a_failed_test_is_no_result_and_says_why() {
        let failed = REAL.replace("Success=1", "Success=0").replace(
            "=        0.0072510 ...... PASSED",
            "=        97.0072510 ...... FAILED",
        );
        assert!(matches!(
            parse(&failed),
            Err(ParseError::ToolReportedError(m)) if m.contains("Success=0") && m.contains("residual check failed")
        ));
    }

    #[test]
    fn an_unmeasured_required_figure_is_refused_and_an_optional_one_left_out() {
        let unmeasured = REAL.replace("StarDGEMM_Gflops=1.472", "StarDGEMM_Gflops=-1");
        assert!(matches!(
            parse(&unmeasured),
            Err(ParseError::Implausible { reason, .. }) if reason.contains("StarDGEMM_Gflops")
        ));
        let no_ptrans = REAL.replace("PTRANS_GBs=0.106128", "PTRANS_GBs=-1");
        assert_eq!(
            parse(&no_ptrans).expect("parses").ptrans_gbytes_per_second,
            None
        );
        let garbled = REAL.replace("HPL_N=1000", "HPL_N=1e3x");
        assert!(matches!(parse(&garbled), Err(ParseError::Malformed { .. })));
    }

    #[test]
    fn every_prefix_is_handled() {
        check_prefixes(REAL, parse, HPCCResult::headline);
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
