//! Parser for `fio --output-format=json` (and `json+`) output, including
//! `--client` runs against several `fio --server` hosts.
//!
//! # Aggregation across workers
//!
//! fio prints one entry per job (per job *and* host in client/server mode),
//! unless `group_reporting` merged them. The aggregate `read`/`write` figures
//! of [`FioResult`] are computed as follows:
//!
//! * one entry only (single job, or `group_reporting`): copied as is — exact;
//! * client/server with several hosts: fio's own `All clients` entry gives
//!   exact bandwidth, IOPS, byte/IO counts, mean, stddev, min and max; it has
//!   no percentiles, so those are taken from the per-host entries (below);
//! * otherwise (several jobs, no `group_reporting`): bandwidth, IOPS, bytes
//!   and IO counts are summed; the completion-latency mean is the mean of the
//!   job means weighted by each job's number of latency samples (IOs); the
//!   stddev is the pooled standard deviation (within-job variance plus the
//!   spread of job means, weighted the same way); min/max are the min/max.
//!
//! Percentiles cannot be merged exactly from per-job summaries, so whenever
//! more than one entry contributes, each aggregate percentile is the **worst
//! (largest) value across workers** — an upper bound of the true percentile —
//! and [`FioResult::percentiles_exact`] is `false`.
//!
//! Jobs in different reporting groups (e.g. `stonewall` phases) are summed
//! like concurrent jobs; run such phases as separate benchmarks instead.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{
    JsonAt, ParseError, ensure_ran_as_asked, extract_json_document, find_marker, finite, fmt,
    line_of_value,
};

/// What fio prints when a signal stops it (`fio: terminating on signal 2`): the JSON
/// that follows covers only the part of the run before the signal.
const INTERRUPTED_MARKERS: &[&str] = &["terminating on signal"];

/// Statistics for one I/O direction (read or write).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FioDirectionStats {
    /// Bandwidth in bytes per second (fio `bw_bytes`).
    pub bandwidth_bytes_per_second: u64,
    /// I/O operations per second.
    pub iops: f64,
    /// Bytes transferred (fio `io_bytes`).
    pub io_bytes: u64,
    /// Number of I/Os completed (fio `total_ios`).
    pub total_ios: u64,
    /// Mean completion latency (fio `clat_ns.mean`), in microseconds.
    pub clat_mean_micros: f64,
    /// Standard deviation of the completion latency, in microseconds.
    pub clat_stddev_micros: f64,
    /// Minimum completion latency, in microseconds.
    pub clat_min_micros: f64,
    /// Maximum completion latency, in microseconds.
    pub clat_max_micros: f64,
    /// 50th percentile (median) completion latency, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p50_micros: Option<f64>,
    /// 90th percentile completion latency, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p90_micros: Option<f64>,
    /// 99th percentile completion latency, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p99_micros: Option<f64>,
    /// 99.9th percentile completion latency, in microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clat_p999_micros: Option<f64>,
}

/// One fio job entry (per job, or per host in client/server mode).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FioWorker {
    /// fio job name (jobs cloned by `numjobs` share the name).
    pub name: String,
    /// Server host name (client/server mode only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Read statistics; absent when the job did no reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<FioDirectionStats>,
    /// Write statistics; absent when the job did no writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<FioDirectionStats>,
}

/// Result of one fio run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FioResult {
    /// fio version string, e.g. `fio-3.33`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fio_version: Option<String>,
    /// True for `fio --client` output (several servers).
    pub client_server: bool,
    /// Aggregate read statistics over all workers; absent when nothing was
    /// read. Bandwidth/IOPS are sums; see `percentilesExact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<FioDirectionStats>,
    /// Aggregate write statistics over all workers; absent when nothing was
    /// written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write: Option<FioDirectionStats>,
    /// True when the aggregate latency percentiles come from a single fio
    /// entry (one job, or `group_reporting`); false when they are the worst
    /// value across several workers (an upper bound: fio's per-job
    /// percentiles cannot be merged exactly).
    pub percentiles_exact: bool,
    /// Per-worker figures: one per fio job entry, or per host in
    /// client/server mode.
    #[serde(default)]
    pub workers: Vec<FioWorker>,
}

impl FioResult {
    /// Short human summary, e.g. `read 35.3 MiB/s 9.0k IOPS, write 35.4 MiB/s 9.0k IOPS`.
    pub fn headline(&self) -> String {
        let part = |label: &str, d: &FioDirectionStats| {
            format!(
                "{label} {} {} IOPS",
                fmt::bytes_per_second(d.bandwidth_bytes_per_second as f64),
                fmt::count(d.iops)
            )
        };
        let parts: Vec<String> = [("read", &self.read), ("write", &self.write)]
            .into_iter()
            .filter_map(|(l, d)| d.as_ref().map(|d| part(l, d)))
            .collect();
        if parts.is_empty() {
            "no I/O".to_string()
        } else {
            parts.join(", ")
        }
    }
}

/// A direction plus the latency sample count used to weight it.
#[derive(Clone, Debug)]
struct Weighted {
    stats: FioDirectionStats,
    samples: u64,
}

struct ParsedEntry {
    worker: FioWorker,
    /// fio's `job_runtime`, in milliseconds.
    runtime_millis: Option<u64>,
    /// The entry's own `job options` (they override the global ones).
    options: Option<serde_json::Value>,
    read: Option<Weighted>,
    write: Option<Weighted>,
    is_all_clients: bool,
}

/// Parses fio JSON / JSON+ output. Leading non-JSON lines (e.g. `fio: ...`
/// warnings) are skipped; if there is no JSON at all, `fio: ...` lines are
/// reported as `ToolReportedError`. A job with a non-zero `error`, and fio's
/// "terminating on signal" line, are also `ToolReportedError`; a time-based job that ran
/// well short of its `runtime` is `Implausible`.
pub fn parse(raw: &str) -> Result<FioResult, ParseError> {
    if let Some((line, text)) = find_marker(raw, INTERRUPTED_MARKERS) {
        return Err(ParseError::ToolReportedError(format!(
            "line {line}: {text} (fio was interrupted; its figures cover only part of the run)"
        )));
    }
    let doc = match extract_json_document(raw, "fio") {
        Ok(doc) => doc,
        Err(e @ ParseError::NotFound { .. }) => {
            let errors: Vec<&str> = raw
                .lines()
                .map(str::trim)
                .filter(|l| l.starts_with("fio: ") || l.contains("err="))
                .collect();
            if errors.is_empty() {
                return Err(e);
            }
            return Err(ParseError::ToolReportedError(errors.join("; ")));
        }
        Err(e) => return Err(e),
    };
    let root = JsonAt::root(&doc);
    let fio_version = root.opt_str("fio version")?.map(str::to_string);
    let (entries, client_server) = match (root.get("client_stats"), root.get("jobs")) {
        (Some(c), _) => (c.as_array()?, true),
        (None, Some(j)) => (j.as_array()?, false),
        (None, None) => {
            return Err(ParseError::Json {
                path: "/jobs".into(),
                message: "fio JSON has neither \"jobs\" nor \"client_stats\"".into(),
            });
        }
    };

    let mut parsed = Vec::with_capacity(entries.len());
    for e in &entries {
        parsed.push(entry(e)?);
    }
    let (all_clients, workers): (Vec<ParsedEntry>, Vec<ParsedEntry>) =
        parsed.into_iter().partition(|p| p.is_all_clients);
    let global_options = root.get("global options").map(|o| o.value().clone());
    for worker in &workers {
        check_runtime(raw, worker, global_options.as_ref())?;
    }
    if workers.is_empty() {
        return Err(ParseError::NotFound {
            what: format!(
                "fio job results ({} is empty)",
                if client_server {
                    "/client_stats"
                } else {
                    "/jobs"
                }
            ),
        });
    }

    let single = workers.len() == 1;
    let exact_source = all_clients.first();
    let read = aggregate(
        workers.iter().filter_map(|w| w.read.as_ref()),
        exact_source.and_then(|a| a.read.as_ref()),
    );
    let write = aggregate(
        workers.iter().filter_map(|w| w.write.as_ref()),
        exact_source.and_then(|a| a.write.as_ref()),
    );

    Ok(FioResult {
        fio_version,
        client_server,
        read,
        write,
        percentiles_exact: single,
        workers: workers.into_iter().map(|w| w.worker).collect(),
    })
}

fn entry(e: &JsonAt<'_>) -> Result<ParsedEntry, ParseError> {
    let name = e.req("jobname")?.as_str()?.to_string();
    let host = e.opt_str("hostname")?.map(str::to_string);
    if let Some(code) = e.get("error") {
        let code = code.as_i64()?;
        if code != 0 {
            return Err(ParseError::ToolReportedError(format!(
                "fio job {name:?}{} failed with error code {code} ({})",
                host.as_deref()
                    .map(|h| format!(" on host {h}"))
                    .unwrap_or_default(),
                e.path()
            )));
        }
    }
    let read = e.get("read").map(|d| direction(&d)).transpose()?.flatten();
    let write = e.get("write").map(|d| direction(&d)).transpose()?.flatten();
    Ok(ParsedEntry {
        runtime_millis: e.opt_u64("job_runtime")?,
        options: e.get("job options").map(|o| o.value().clone()),
        is_all_clients: name == "All clients",
        worker: FioWorker {
            name,
            host,
            read: read.as_ref().map(|w| w.stats.clone()),
            write: write.as_ref().map(|w| w.stats.clone()),
        },
        read,
        write,
    })
}

/// A time-based job (`time_based=1`) must have run about its `runtime`; the job's own
/// options override the global ones, as in fio.
fn check_runtime(
    raw: &str,
    worker: &ParsedEntry,
    global: Option<&serde_json::Value>,
) -> Result<(), ParseError> {
    let option = |name: &str| {
        worker
            .options
            .as_ref()
            .and_then(|o| o.get(name))
            .or_else(|| global.and_then(|g| g.get(name)))
            .and_then(|v| v.as_str())
    };
    let time_based = option("time_based").is_some_and(|v| v != "0");
    let (Some(asked), Some(ran)) = (
        option("runtime").and_then(fio_seconds),
        worker.runtime_millis,
    ) else {
        return Ok(());
    };
    if !time_based {
        return Ok(());
    }
    ensure_ran_as_asked(
        &format!("fio job {:?}", worker.worker.name),
        ran as f64 / 1000.0,
        asked,
        line_of_value(raw, ran as f64),
    )
}

/// A fio time option (`runtime=30`, `10s`, `5m`, `250ms`) in seconds; fio reads a bare
/// number as seconds.
fn fio_seconds(text: &str) -> Option<f64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let number: f64 = text.get(..digits)?.parse().ok()?;
    let scale = match text.get(digits..)?.to_ascii_lowercase().as_str() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return None,
    };
    Some(number * scale)
}

/// `None` when the direction did no I/O.
fn direction(d: &JsonAt<'_>) -> Result<Option<Weighted>, ParseError> {
    // fio >= 3 reports latencies in ns (`clat_ns`); older fio in µs (`clat`).
    // Divide (not multiply by 1e-3) so 140288 ns gives exactly 140.288 µs.
    let (clat, micros_divisor) = match (d.get("clat_ns"), d.get("clat")) {
        (Some(c), _) => (Some(c), 1000.0),
        (None, Some(c)) => (Some(c), 1.0),
        (None, None) => (None, 1.0),
    };
    let io_bytes = match d.opt_u64("io_bytes")? {
        Some(b) => b,
        None => d.req_u64("io_kbytes")?.saturating_mul(1024),
    };
    let samples = match &clat {
        Some(c) => c.opt_u64("N")?.unwrap_or(0),
        None => 0,
    };
    let total_ios = d.opt_u64("total_ios")?.unwrap_or(samples);
    if io_bytes == 0 && total_ios == 0 {
        return Ok(None);
    }
    let Some(clat) = clat else {
        return Err(d.error("missing completion latency (clat_ns)"));
    };
    let bandwidth = match d.opt_u64("bw_bytes")? {
        Some(b) => b,
        None => d.req_u64("bw")?.saturating_mul(1024),
    };
    let stddev = match clat.get("stddev") {
        Some(s) => s.as_f64()?,
        None => clat.req_f64("stdev")?,
    };
    let pct = |p: f64| -> Result<Option<f64>, ParseError> {
        let Some(list) = clat.get("percentile") else {
            return Ok(None);
        };
        for (key, value) in list.entries()? {
            if let Ok(k) = key.parse::<f64>()
                && (k - p).abs() < 1e-6
            {
                return Ok(Some(value.as_f64()? / micros_divisor));
            }
        }
        Ok(None)
    };
    Ok(Some(Weighted {
        samples: if samples == 0 { total_ios } else { samples },
        stats: FioDirectionStats {
            bandwidth_bytes_per_second: bandwidth,
            iops: d.req_f64("iops")?,
            io_bytes,
            total_ios,
            clat_mean_micros: clat.req_f64("mean")? / micros_divisor,
            clat_stddev_micros: stddev / micros_divisor,
            clat_min_micros: clat.req_f64("min")? / micros_divisor,
            clat_max_micros: clat.req_f64("max")? / micros_divisor,
            clat_p50_micros: pct(50.0)?,
            clat_p90_micros: pct(90.0)?,
            clat_p99_micros: pct(99.0)?,
            clat_p999_micros: pct(99.9)?,
        },
    }))
}

fn max_opt(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().reduce(f64::max)
}

/// Combines per-worker stats (see the module documentation). `exact` is
/// fio's own `All clients` aggregate when present.
fn aggregate<'a>(
    workers: impl Iterator<Item = &'a Weighted>,
    exact: Option<&Weighted>,
) -> Option<FioDirectionStats> {
    let list: Vec<&Weighted> = workers.collect();
    let first = list.first()?;
    if list.len() == 1 && exact.is_none() {
        return Some(first.stats.clone());
    }
    let p = |f: fn(&FioDirectionStats) -> Option<f64>| max_opt(list.iter().map(|w| f(&w.stats)));
    let percentiles = |mut s: FioDirectionStats| {
        // Keep fio's own percentiles if the exact aggregate had any.
        s.clat_p50_micros = s.clat_p50_micros.or(p(|s| s.clat_p50_micros));
        s.clat_p90_micros = s.clat_p90_micros.or(p(|s| s.clat_p90_micros));
        s.clat_p99_micros = s.clat_p99_micros.or(p(|s| s.clat_p99_micros));
        s.clat_p999_micros = s.clat_p999_micros.or(p(|s| s.clat_p999_micros));
        s
    };
    if let Some(exact) = exact {
        return Some(percentiles(exact.stats.clone()));
    }

    let total_samples: f64 = list.iter().map(|w| w.samples as f64).sum();
    let (mean, stddev) = if total_samples > 0.0 {
        let mean = list
            .iter()
            .map(|w| w.samples as f64 * w.stats.clat_mean_micros)
            .sum::<f64>()
            / total_samples;
        let var = list
            .iter()
            .map(|w| {
                let d = w.stats.clat_mean_micros - mean;
                w.samples as f64 * (w.stats.clat_stddev_micros.powi(2) + d * d)
            })
            .sum::<f64>()
            / total_samples;
        (mean, var.sqrt())
    } else {
        (first.stats.clat_mean_micros, first.stats.clat_stddev_micros)
    };
    let s = FioDirectionStats {
        bandwidth_bytes_per_second: list.iter().fold(0u64, |a, w| {
            a.saturating_add(w.stats.bandwidth_bytes_per_second)
        }),
        iops: list.iter().map(|w| w.stats.iops).sum(),
        io_bytes: list
            .iter()
            .fold(0u64, |a, w| a.saturating_add(w.stats.io_bytes)),
        total_ios: list
            .iter()
            .fold(0u64, |a, w| a.saturating_add(w.stats.total_ios)),
        clat_mean_micros: finite(mean).unwrap_or(0.0),
        clat_stddev_micros: finite(stddev).unwrap_or(0.0),
        clat_min_micros: list
            .iter()
            .map(|w| w.stats.clat_min_micros)
            .fold(f64::INFINITY, f64::min),
        clat_max_micros: list
            .iter()
            .map(|w| w.stats.clat_max_micros)
            .fold(0.0, f64::max),
        clat_p50_micros: None,
        clat_p90_micros: None,
        clat_p99_micros: None,
        clat_p999_micros: None,
    };
    let mut s = percentiles(s);
    // Guard the sums against overflow to infinity on absurd input.
    s.iops = finite(s.iops).unwrap_or(0.0);
    s.clat_min_micros = finite(s.clat_min_micros).unwrap_or(0.0);
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        approx, assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;
    use serde_json::Value;

    const SINGLE: &str = include_str!("../../../testdata/fio/single-randread.json");
    const NUMJOBS3: &str = include_str!("../../../testdata/fio/numjobs3-randwrite.json");
    const GROUP: &str =
        include_str!("../../../testdata/fio/numjobs3-randwrite-group-reporting.json");
    const READ_ONLY: &str = include_str!("../../../testdata/fio/read-only-seq.json");
    const WRITE_ONLY: &str = include_str!("../../../testdata/fio/write-only-seq.json");
    const MIXED_PLUS: &str = include_str!("../../../testdata/fio/randrw-mixed-jsonplus.json");
    const CS: &str = include_str!("../../../testdata/fio/client-server-2hosts.json");
    const CS_GROUP: &str =
        include_str!("../../../testdata/fio/client-server-2hosts-group-reporting.json");
    const BAD_DIR: &str = include_str!("../../../testdata/fio/error-bad-directory.txt");
    const JOB_FAILED: &str = include_str!("../../../testdata/fio/error-job-failed-with-noise.txt");
    const ALL: &[&str] = &[
        SINGLE, NUMJOBS3, GROUP, READ_ONLY, WRITE_ONLY, MIXED_PLUS, CS, CS_GROUP, BAD_DIR,
        JOB_FAILED,
    ];

    fn doc(raw: &str) -> Value {
        let start = raw.find('{').unwrap();
        serde_json::from_str(&raw[start..]).unwrap()
    }
    fn f(v: &Value, ptr: &str) -> f64 {
        v.pointer(ptr)
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("{ptr}"))
    }
    fn u(v: &Value, ptr: &str) -> u64 {
        v.pointer(ptr)
            .and_then(Value::as_u64)
            .unwrap_or_else(|| panic!("{ptr}"))
    }

    /// Checks a parsed direction against fio's JSON entry at `base`.
    #[track_caller]
    fn assert_matches_entry(s: &FioDirectionStats, d: &Value, base: &str) {
        assert_eq!(
            s.bandwidth_bytes_per_second,
            u(d, &format!("{base}/bw_bytes"))
        );
        assert_eq!(s.iops, f(d, &format!("{base}/iops")));
        assert_eq!(s.io_bytes, u(d, &format!("{base}/io_bytes")));
        assert_eq!(s.total_ios, u(d, &format!("{base}/total_ios")));
        assert_eq!(
            s.clat_mean_micros,
            f(d, &format!("{base}/clat_ns/mean")) / 1000.0
        );
        assert_eq!(
            s.clat_stddev_micros,
            f(d, &format!("{base}/clat_ns/stddev")) / 1000.0
        );
        assert_eq!(
            s.clat_min_micros,
            f(d, &format!("{base}/clat_ns/min")) / 1000.0
        );
        assert_eq!(
            s.clat_max_micros,
            f(d, &format!("{base}/clat_ns/max")) / 1000.0
        );
        if d.pointer(&format!("{base}/clat_ns/percentile")).is_some() {
            let p = |k: &str| Some(f(d, &format!("{base}/clat_ns/percentile/{k}")) / 1000.0);
            assert_eq!(s.clat_p50_micros, p("50.000000"));
            assert_eq!(s.clat_p90_micros, p("90.000000"));
            assert_eq!(s.clat_p99_micros, p("99.000000"));
            assert_eq!(s.clat_p999_micros, p("99.900000"));
        }
    }

    #[test]
    fn single_job_read_only() {
        let d = doc(SINGLE);
        let r = parse(SINGLE).unwrap();
        assert_eq!(r.fio_version.as_deref(), Some("fio-3.33"));
        assert!(!r.client_server);
        assert!(r.percentiles_exact);
        assert!(r.write.is_none());
        let read = r.read.as_ref().unwrap();
        assert_matches_entry(read, &d, "/jobs/0/read");
        // Literal values from the fixture.
        assert_eq!(read.bandwidth_bytes_per_second, 54074978);
        assert_eq!(read.clat_p99_micros, Some(140.288));
        assert_eq!(r.workers.len(), 1);
        assert_eq!(r.workers[0].name, "randread");
        assert_eq!(r.workers[0].host, None);
        assert_eq!(r.workers[0].read.as_ref(), Some(read));
        assert_eq!(r.headline(), "read 51.6 MiB/s 13.2k IOPS");

        let ro = parse(READ_ONLY).unwrap();
        assert!(ro.write.is_none());
        assert_matches_entry(ro.read.as_ref().unwrap(), &doc(READ_ONLY), "/jobs/0/read");
    }

    #[test]
    fn write_only() {
        let d = doc(WRITE_ONLY);
        let r = parse(WRITE_ONLY).unwrap();
        assert!(r.read.is_none());
        assert_matches_entry(r.write.as_ref().unwrap(), &d, "/jobs/0/write");
        assert_eq!(
            r.write.as_ref().unwrap().bandwidth_bytes_per_second,
            5667930578
        );
        assert!(
            r.headline().starts_with("write 5.3 GiB/s 43.2k IOPS"),
            "{}",
            r.headline()
        );
    }

    #[test]
    fn mixed_json_plus() {
        let d = doc(MIXED_PLUS);
        let r = parse(MIXED_PLUS).unwrap();
        assert_matches_entry(r.read.as_ref().unwrap(), &d, "/jobs/0/read");
        assert_matches_entry(r.write.as_ref().unwrap(), &d, "/jobs/0/write");
        assert_eq!(r.read.as_ref().unwrap().total_ios, 24302);
        assert_eq!(r.write.as_ref().unwrap().total_ios, 10393);
        assert!(r.headline().starts_with("read ") && r.headline().contains(", write "));
    }

    #[test]
    fn several_jobs_are_combined() {
        let d = doc(NUMJOBS3);
        let r = parse(NUMJOBS3).unwrap();
        assert_eq!(r.workers.len(), 3);
        assert!(!r.percentiles_exact);
        assert!(r.read.is_none());
        for (i, w) in r.workers.iter().enumerate() {
            assert_matches_entry(w.write.as_ref().unwrap(), &d, &format!("/jobs/{i}/write"));
        }
        let w = r.write.as_ref().unwrap();
        assert_eq!(
            w.bandwidth_bytes_per_second,
            706111137 + 668104475 + 628519128
        );
        assert_eq!(w.total_ios, 345298 + 326386 + 307201);
        approx(w.iops, 172390.414378 + 163111.444278 + 153447.052947);
        // Mean weighted by IO count (computed independently).
        let n: f64 = (0..3)
            .map(|i| f(&d, &format!("/jobs/{i}/write/clat_ns/N")))
            .sum();
        let mean: f64 = (0..3)
            .map(|i| {
                f(&d, &format!("/jobs/{i}/write/clat_ns/N"))
                    * f(&d, &format!("/jobs/{i}/write/clat_ns/mean"))
            })
            .sum::<f64>()
            / n
            / 1000.0;
        assert!((w.clat_mean_micros - mean).abs() < 1e-9);
        assert!((w.clat_mean_micros - 3.808108468184153).abs() < 1e-9);
        assert!((w.clat_stddev_micros - 75.01056635858157).abs() < 1e-6);
        // Worst job's percentile.
        assert_eq!(w.clat_p99_micros, Some(5.344));
        assert_eq!(
            w.clat_min_micros,
            (0..3)
                .map(|i| f(&d, &format!("/jobs/{i}/write/clat_ns/min")))
                .fold(f64::MAX, f64::min)
                / 1000.0
        );
    }

    #[test]
    fn group_reporting_is_exact() {
        let d = doc(GROUP);
        let r = parse(GROUP).unwrap();
        assert_eq!(r.workers.len(), 1);
        assert!(r.percentiles_exact);
        assert_matches_entry(r.write.as_ref().unwrap(), &d, "/jobs/0/write");
        assert_eq!(r.write.as_ref().unwrap().clat_p99_micros, Some(4.384));
    }

    #[test]
    fn client_server_uses_all_clients() {
        let d = doc(CS);
        let r = parse(CS).unwrap();
        assert!(r.client_server);
        assert_eq!(r.workers.len(), 4);
        assert!(!r.percentiles_exact);
        let hosts: Vec<_> = r
            .workers
            .iter()
            .map(|w| w.host.as_deref().unwrap())
            .collect();
        assert_eq!(hosts, ["127.0.0.2", "127.0.0.2", "127.0.0.1", "127.0.0.1"]);
        for (i, w) in r.workers.iter().enumerate() {
            assert_matches_entry(
                w.read.as_ref().unwrap(),
                &d,
                &format!("/client_stats/{i}/read"),
            );
        }
        assert_eq!(
            d.pointer("/client_stats/4/jobname").and_then(Value::as_str),
            Some("All clients")
        );
        let read = r.read.as_ref().unwrap();
        assert_eq!(read.bandwidth_bytes_per_second, 97468833);
        assert_eq!(read.iops, f(&d, "/client_stats/4/read/iops"));
        assert_eq!(
            read.clat_mean_micros,
            f(&d, "/client_stats/4/read/clat_ns/mean") / 1000.0
        );
        assert_eq!(
            read.clat_stddev_micros,
            f(&d, "/client_stats/4/read/clat_ns/stddev") / 1000.0
        );
        // `All clients` has no percentiles: worst host is used.
        assert_eq!(read.clat_p99_micros, Some(643.072));
        assert_eq!(r.write.as_ref().unwrap().clat_p99_micros, Some(52.992));

        // Our own combination of the per-host entries agrees with fio's
        // `All clients` aggregate (mean exactly, pooled stddev closely).
        let mut without_all: Value = d.clone();
        without_all["client_stats"].as_array_mut().unwrap().pop();
        let ours = parse(&without_all.to_string()).unwrap();
        let o = ours.read.as_ref().unwrap();
        assert!((o.clat_mean_micros - read.clat_mean_micros).abs() < 1e-6);
        assert!(
            (o.clat_stddev_micros - read.clat_stddev_micros).abs() / read.clat_stddev_micros < 1e-3
        );
        assert!(
            o.bandwidth_bytes_per_second
                .abs_diff(read.bandwidth_bytes_per_second)
                <= 4
        );

        let g = parse(CS_GROUP).unwrap();
        assert_eq!(g.workers.len(), 2);
        assert_eq!(
            g.read.as_ref().unwrap().bandwidth_bytes_per_second,
            94531422
        );
        assert_eq!(g.read.as_ref().unwrap().clat_p99_micros, Some(610.304));
    }

    #[test]
    fn leading_noise_is_skipped() {
        let noisy = format!(
            "fio: this platform does not support process shared mutexes, forcing use of threads. Use the 'thread' option to get rid of this warning.\n\n{SINGLE}"
        );
        assert_eq!(parse(&noisy).unwrap(), parse(SINGLE).unwrap());
        // Line numbers of JSON errors count the skipped lines.
        let broken = format!(
            "noise\n{}",
            SINGLE.replacen("\"jobs\" : [", "\"jobs\" : [[", 1)
        );
        match parse(&broken).unwrap_err() {
            ParseError::InvalidJson { line, .. } => assert!(line > 10, "{line}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tool_errors() {
        let e = parse(BAD_DIR).unwrap_err();
        assert_eq!(
            e,
            ParseError::ToolReportedError(
                "fio: /nonexistent/dir is not a directory; fio: failed parsing directory=/nonexistent/dir; fio: file:options.c:1457, func=lstat, error=No such file or directory".into()
            )
        );
        let e = parse(JOB_FAILED).unwrap_err();
        assert_eq!(
            e,
            ParseError::ToolReportedError(
                "fio job \"ro\" failed with error code 1 (/jobs/0)".into()
            )
        );
        assert!(matches!(
            parse("{\"fio version\": \"fio-3.33\"}"),
            Err(ParseError::Json { .. })
        ));
        assert!(matches!(
            parse("{\"jobs\": []}"),
            Err(ParseError::NotFound { .. })
        ));
        assert!(matches!(
            parse(&SINGLE[..SINGLE.len() - 20]),
            Err(ParseError::Truncated { .. })
        ));
    }

    /// Finding 4 of issue 18: fio stopped by Ctrl-C prints its (partial) JSON after
    /// `fio: terminating on signal 2`; that was recorded as a success.
    #[test]
    fn an_interrupted_run_is_a_tool_failure() {
        let interrupted = format!("fio: terminating on signal 2\n{SINGLE}");
        match parse(&interrupted).unwrap_err() {
            ParseError::ToolReportedError(message) => {
                assert!(
                    message.starts_with("line 1: fio: terminating on signal 2"),
                    "{message}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Through the registry, as `perfsweep parse` and the agent call it.
        let fio = crate::kinds::registry::lookup("Fio").expect("registered");
        assert!(matches!(
            fio.parse(&interrupted),
            Err(ParseError::ToolReportedError(_))
        ));
    }

    /// Finding 4: 2,488 ms of a 5,000 ms time-based run, even without the marker.
    #[test]
    fn a_time_based_run_far_shorter_than_asked_is_refused() {
        let short = SINGLE
            .replacen("\"runtime\" : \"2\"", "\"runtime\" : \"5\"", 1)
            .replacen("\"job_runtime\" : 2000", "\"job_runtime\" : 2488", 1);
        assert_ne!(short, SINGLE);
        match parse(&short).unwrap_err() {
            ParseError::Implausible { line, reason } => {
                assert!(reason.contains("2.488 s of the 5 s"), "{reason}");
                let line = line.expect("the job_runtime line");
                assert!(
                    short.lines().nth(line - 1).unwrap().contains("job_runtime"),
                    "line {line}"
                );
            }
            other => panic!("{other:?}"),
        }
        // Runs that end about on time pass, as do size-bound (not time-based) runs.
        let on_time = SINGLE.replacen("\"job_runtime\" : 2000", "\"job_runtime\" : 1950", 1);
        assert!(parse(&on_time).is_ok());
        let size_bound = short.replacen("\"time_based\" : \"1\"", "\"time_based\" : \"0\"", 1);
        assert!(parse(&size_bound).is_ok());
        assert_eq!(fio_seconds("5m"), Some(300.0));
        assert_eq!(fio_seconds("250ms"), Some(0.25));
        assert_eq!(fio_seconds("x"), None);
    }

    #[test]
    fn every_prefix_is_handled() {
        for raw in ALL {
            check_prefixes(raw, parse, FioResult::headline);
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
        }
    }
}
