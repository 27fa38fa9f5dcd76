//! Property tests over every parser: thousands of mutated real tool outputs per kind
//! (random truncation, byte flips, duplicated and deleted lines, numbers replaced by
//! NaN, infinities, −1, 1e309 and other impossible values), each parsed the way both
//! backends parse (through the registry). Whatever the mutation, parsing never panics,
//! and whenever it succeeds every metric of the result lies within the range its kind
//! declares (`perfsweep_benchmarks::judging::metrics::MetricRange`).

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde::de::DeserializeOwned;

use perfsweep_benchmarks::execution::parse_error::ParseError;
use perfsweep_benchmarks::kinds;
use perfsweep_benchmarks::kinds::registry::{self, BenchmarkKind};

#[path = "support/nasty_bytes.rs"]
mod nasty_bytes;

/// How many mutated outputs each kind's property sees.
const CASES: u32 = 2000;

/// Numbers no real output holds, or holds where they are impossible.
const IMPOSSIBLE: &[&str] = &[
    "NaN",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "-1",
    "-1.00",
    "-0.5",
    "1e309",
    "-1e309",
    "1e21",
    "1e23",
    "1e200",
    "0",
    "99999999999999999999",
];

#[derive(Clone, Debug)]
enum Mutation {
    /// Keep this share of the output.
    Truncate(f64),
    /// Replace the byte at this relative position.
    Flip(f64, u8),
    /// Print the line at this relative position twice.
    DuplicateLine(f64),
    DeleteLine(f64),
    /// Replace the number at this relative position among the output's numbers.
    ReplaceNumber(f64, &'static str),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        1 => (0.0..1.0f64).prop_map(Mutation::Truncate),
        2 => (0.0..1.0f64, nasty_bytes::nasty_byte())
            .prop_map(|(at, byte)| Mutation::Flip(at, byte)),
        1 => (0.0..1.0f64).prop_map(Mutation::DuplicateLine),
        1 => (0.0..1.0f64).prop_map(Mutation::DeleteLine),
        5 => (0.0..1.0f64, proptest::sample::select(IMPOSSIBLE))
            .prop_map(|(at, number)| Mutation::ReplaceNumber(at, number)),
    ]
}

fn at(share: f64, len: usize) -> usize {
    ((share * len as f64) as usize).min(len.saturating_sub(1))
}

/// Byte ranges of the decimal numbers in `raw` (an optional sign, digits, a fraction
/// and an exponent).
fn numbers(raw: &str) -> Vec<(usize, usize)> {
    let bytes = raw.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'));
        if !starts_number {
            i += 1;
            continue;
        }
        let start = if i > 0 && bytes[i - 1] == b'-' {
            i - 1
        } else {
            i
        };
        let mut end = i;
        while end < bytes.len()
            && (bytes[end].is_ascii_digit()
                || bytes[end] == b'.'
                || ((bytes[end] == b'e' || bytes[end] == b'E')
                    && bytes
                        .get(end + 1)
                        .is_some_and(|b| b.is_ascii_digit() || *b == b'-')))
        {
            end += if bytes[end] == b'e' || bytes[end] == b'E' {
                2
            } else {
                1
            };
        }
        found.push((start, end.min(bytes.len())));
        i = end.max(i + 1);
    }
    found
}

fn apply(raw: &str, mutation: &Mutation) -> String {
    match mutation {
        Mutation::Truncate(share) => {
            let mut cut = (share * raw.len() as f64) as usize;
            while !raw.is_char_boundary(cut) {
                cut -= 1;
            }
            raw[..cut].to_owned()
        }
        Mutation::Flip(share, byte) => {
            let mut bytes = raw.as_bytes().to_vec();
            if !bytes.is_empty() {
                let i = at(*share, bytes.len());
                bytes[i] = *byte;
            }
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Mutation::DuplicateLine(share) | Mutation::DeleteLine(share) => {
            let mut lines: Vec<&str> = raw.split_inclusive('\n').collect();
            if !lines.is_empty() {
                let i = at(*share, lines.len());
                if matches!(mutation, Mutation::DuplicateLine(_)) {
                    lines.insert(i, lines[i]);
                } else {
                    lines.remove(i);
                }
            }
            lines.concat()
        }
        Mutation::ReplaceNumber(share, number) => {
            let spans = numbers(raw);
            if spans.is_empty() {
                return raw.to_owned();
            }
            let (start, end) = spans[at(*share, spans.len())];
            format!("{}{number}{}", &raw[..start], &raw[end..])
        }
    }
}

/// Counts of what the mutated outputs gave, printed for the record.
#[derive(Default, Debug)]
struct Tally {
    parsed: usize,
    refused_as_implausible: usize,
    refused_otherwise: usize,
}

/// Runs the property for kind `K` over mutations of `fixtures`.
fn property<K: BenchmarkKind>(fixtures: &[&str])
where
    K::Output: DeserializeOwned,
{
    let kind = K::kind(&()).into_owned();
    let info = registry::lookup(&kind).expect("registered kind");
    // Every fixture the property starts from must itself parse (a real, good output),
    // except error outputs, which are mutated too but need not.
    assert!(
        fixtures.iter().any(|raw| info.parse(raw).is_ok()),
        "no fixture of {kind} parses"
    );
    let tally = std::cell::RefCell::new(Tally::default());
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = (
        0..fixtures.len(),
        proptest::collection::vec(mutation(), 1..4),
    );
    let outcome = runner.run(&strategy, |(which, mutations)| {
        let raw = mutations
            .iter()
            .fold(fixtures[which].to_owned(), |raw, m| apply(&raw, m));
        match info.parse(&raw) {
            Ok(parsed) => {
                tally.borrow_mut().parsed += 1;
                let output: K::Output =
                    serde_json::from_value(parsed.result.clone()).map_err(|e| {
                        TestCaseError::fail(format!("the result does not round-trip: {e}"))
                    })?;
                for metric in K::metrics(&output) {
                    let def = K::METRICS.iter().find(|d| d.name == metric.name);
                    let def = def.ok_or_else(|| {
                        TestCaseError::fail(format!("undeclared metric {}", metric.name))
                    })?;
                    if let Some(why) = def.valid.violation(metric.value) {
                        return Err(TestCaseError::fail(format!(
                            "{kind} accepted {} = {}: {why}",
                            metric.name, metric.value
                        )));
                    }
                }
            }
            Err(ParseError::Implausible { .. }) => {
                tally.borrow_mut().refused_as_implausible += 1;
            }
            Err(_) => tally.borrow_mut().refused_otherwise += 1,
        }
        Ok(())
    });
    let tally = tally.into_inner();
    eprintln!("{kind}: {CASES} mutated outputs: {tally:?}");
    if let Err(failure) = outcome {
        panic!("{kind}: {failure}");
    }
    // The property is only worth something if mutations reach the range checks.
    assert!(tally.parsed > 0, "{kind}: no mutated output parsed");
}

macro_rules! fixtures {
    ($($path:literal),+ $(,)?) => {
        &[$(include_str!(concat!("../testdata/", $path))),+]
    };
}

#[test]
fn iperf_results_stay_in_range() {
    property::<kinds::iperf::IPerf>(fixtures!(
        "iperf/tcp-1stream.json",
        "iperf/tcp-4streams.json",
        "iperf/tcp-bidir.json",
        "iperf/tcp-reverse.json",
        "iperf/udp-100m.json",
        "iperf/udp-2streams.json",
        "iperf/error-connrefused.json",
    ));
}

#[test]
fn fio_results_stay_in_range() {
    property::<kinds::fio::Fio>(fixtures!(
        "fio/single-randread.json",
        "fio/numjobs3-randwrite.json",
        "fio/numjobs3-randwrite-group-reporting.json",
        "fio/read-only-seq.json",
        "fio/write-only-seq.json",
        "fio/randrw-mixed-jsonplus.json",
        "fio/client-server-2hosts.json",
        "fio/client-server-2hosts-group-reporting.json",
        "fio/error-job-failed-with-noise.txt",
    ));
}

#[test]
fn mpi_pingpong_results_stay_in_range() {
    property::<kinds::mpi_pingpong::MPIPingPong>(fixtures!(
        "mpi_pingpong/imb-mpi1-pingpong-msglog22.txt"
    ));
}

#[test]
fn rdma_bandwidth_results_stay_in_range() {
    property::<kinds::rdma::bandwidth::RDMABandwidth>(fixtures!(
        "rdma/ib_write_bw-65536-mbsec.txt",
        "rdma/ib_write_bw-all-sizes-gbits.txt",
        "rdma/ib_write_bw-client-connect-error.txt",
    ));
}

#[test]
fn rdma_latency_results_stay_in_range() {
    property::<kinds::rdma::latency::RDMALatency>(fixtures!(
        "rdma/ib_write_lat-all-sizes.txt",
        "rdma/ib_send_lat-2-cpu-warning.txt",
    ));
}

#[test]
fn openfoam_results_stay_in_range() {
    property::<kinds::openfoam::OpenFOAM>(fixtures!(
        "openfoam/icofoam-cavity-time-v.log",
        "openfoam/icofoam-cavity80-bash-time.log",
        "openfoam/icofoam-missing-field-fatal-error.log",
    ));
}

#[test]
fn pytorch_results_stay_in_range() {
    property::<kinds::pytorch::PyTorch>(fixtures!(
        "pytorch/alexnet-eval-cpu-real.txt",
        "pytorch/resnet50-train-cpu.txt",
        "pytorch/llama-small-eval-cuda.txt",
        "pytorch/cuda-oom-traceback.txt",
    ));
}

#[test]
fn llm_results_stay_in_range() {
    property::<kinds::llm::LLMInference>(fixtures!("llm/loadgen-sim-two-scenarios.txt"));
}

/// The mutations themselves do what they say.
#[test]
fn mutations_reach_numbers_lines_and_bytes() {
    let raw = "a 1.5 -2 3e-4\nb 7\n";
    assert_eq!(numbers(raw).len(), 4);
    assert_eq!(
        apply(raw, &Mutation::ReplaceNumber(0.3, "NaN")),
        "a 1.5 NaN 3e-4\nb 7\n"
    );
    assert_eq!(
        apply(raw, &Mutation::DuplicateLine(0.9)),
        "a 1.5 -2 3e-4\nb 7\nb 7\n"
    );
    assert_eq!(apply(raw, &Mutation::DeleteLine(0.0)), "b 7\n");
    assert_eq!(apply(raw, &Mutation::Truncate(0.5)), "a 1.5 -2 ");
}

/// Every kind states a finite upper bound for each of its metrics (the default is only
/// "non-negative").
#[test]
fn every_metric_states_its_range() {
    for info in registry::kinds() {
        for def in info.metric_defs {
            assert!(
                def.valid.max < f64::MAX && def.valid.min <= def.valid.max,
                "{}: {} has no stated range",
                info.kind,
                def.name
            );
        }
    }
}
