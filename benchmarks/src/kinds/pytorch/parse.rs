//! Parser for the output of perfsweep's PyTorch benchmark script
//! (`images/pytorch/benchmark.py`).
//!
//! The script prints exactly one line
//!
//! ```text
//! PERFSWEEP_RESULT {"schemaVersion": 1, "model": "resnet50", "device": "cpu", ...}
//! ```
//!
//! whose JSON object has the same camelCase fields as [`PyTorchResult`]
//! (unknown extra fields are ignored). Other output (warnings, progress) may
//! surround it; the **last** such line wins. Without a result line, a Python
//! traceback is reported as `ToolReportedError` with its final line (e.g.
//! `torch.OutOfMemoryError: CUDA out of memory...`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{ParseError, ensure_not_empty, find_marker};

/// The prefix marking the result line.
pub const RESULT_PREFIX: &str = "PERFSWEEP_RESULT ";

/// Whether the benchmark trained or only ran inference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PyTorchBenchmarkType {
    /// Forward + backward + optimizer step per batch.
    Train,
    /// Forward pass only, under `torch.no_grad()`.
    Eval,
}

/// Time per batch statistics, in seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PyTorchBatchTimes {
    /// Mean time per batch in seconds.
    pub mean: f64,
    /// Median time per batch in seconds.
    pub p50: f64,
    /// 90th percentile time per batch in seconds.
    pub p90: f64,
}

/// Result of one PyTorch benchmark run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PyTorchResult {
    /// Model benchmarked: `alexnet`, `resnet50` or `llama`.
    pub model: String,
    /// Device used, e.g. `cpu`, `cuda`.
    pub device: String,
    /// `train` or `eval`.
    pub benchmark_type: PyTorchBenchmarkType,
    /// Samples per batch.
    pub batch_size: u64,
    /// Measured iterations (batches), excluding warm-up.
    pub iterations: u64,
    /// Time per batch in seconds (mean, median, 90th percentile).
    pub time_per_batch_seconds: PyTorchBatchTimes,
    /// Samples processed per second (batchSize / mean time per batch).
    pub throughput_samples_per_second: f64,
    /// Peak resident memory of the process in bytes (`ru_maxrss`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_cpu_memory_bytes: Option<u64>,
    /// Peak GPU memory allocated by PyTorch in bytes (CUDA only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gpu_memory_bytes: Option<u64>,
    /// Wall time of the whole benchmark (including warm-up) in seconds.
    pub wall_time_seconds: f64,
    /// PyTorch version used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub torch_version: Option<String>,
}

impl PyTorchResult {
    /// Short human summary, e.g. `resnet50 train cpu: 12.3 samples/s`.
    pub fn headline(&self) -> String {
        let kind = match self.benchmark_type {
            PyTorchBenchmarkType::Train => "train",
            PyTorchBenchmarkType::Eval => "eval",
        };
        format!(
            "{} {kind} {}: {:.1} samples/s",
            self.model, self.device, self.throughput_samples_per_second
        )
    }
}

/// Parses the benchmark script's output.
pub fn parse(raw: &str) -> Result<PyTorchResult, ParseError> {
    ensure_not_empty(raw)?;
    // Interrupted (Ctrl-C, SIGTERM turned into KeyboardInterrupt) even if a result line
    // was printed first.
    if let Some((line, text)) = find_marker(raw, &["KeyboardInterrupt"]) {
        return Err(ParseError::ToolReportedError(format!(
            "line {line}: {text} (the PyTorch benchmark was interrupted)"
        )));
    }
    let found = raw
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            l.trim_start()
                .strip_prefix(RESULT_PREFIX)
                .map(|j| (i + 1, j))
        })
        .last();
    let Some((line, json)) = found else {
        if raw.contains("Traceback (most recent call last)") {
            let last = raw
                .lines()
                .map(str::trim)
                .rfind(|l| !l.is_empty())
                .unwrap_or_default();
            return Err(ParseError::ToolReportedError(format!(
                "the PyTorch benchmark raised an exception: {last}"
            )));
        }
        return Err(ParseError::NotFound {
            what: format!("result line (a line starting with {RESULT_PREFIX:?})"),
        });
    };
    let mut de = serde_json::Deserializer::from_str(json.trim());
    let result: PyTorchResult = match serde_path_to_error::deserialize(&mut de) {
        Ok(r) => r,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            return Err(if inner.is_eof() {
                ParseError::Truncated {
                    what: format!("the {RESULT_PREFIX:?} JSON on line {line} is cut off"),
                }
            } else if inner.is_syntax() {
                ParseError::InvalidJson {
                    line,
                    column: inner.column() + RESULT_PREFIX.len(),
                    message: inner.to_string(),
                }
            } else {
                ParseError::Json {
                    path: format!("line {line}: {}", json_pointer(&path)),
                    message: inner.to_string(),
                }
            });
        }
    };
    if let Err(e) = de.end() {
        return Err(ParseError::InvalidJson {
            line,
            column: e.column() + RESULT_PREFIX.len(),
            message: format!("unexpected text after the result object: {e}"),
        });
    }
    validate(&result).map_err(|(field, message)| ParseError::Json {
        path: format!("line {line}: /{field}"),
        message,
    })?;
    Ok(result)
}

/// serde_path_to_error prints `a.b[0]`; render it as a JSON pointer.
fn json_pointer(path: &str) -> String {
    if path == "." {
        return "/".into();
    }
    let mut out = String::new();
    for seg in path.split('.') {
        for part in seg.split('[') {
            let part = part.trim_end_matches(']');
            if !part.is_empty() {
                out.push('/');
                out.push_str(part);
            }
        }
    }
    out
}

fn validate(r: &PyTorchResult) -> Result<(), (&'static str, String)> {
    let checks: [(&'static str, f64); 5] = [
        ("timePerBatchSeconds/mean", r.time_per_batch_seconds.mean),
        ("timePerBatchSeconds/p50", r.time_per_batch_seconds.p50),
        ("timePerBatchSeconds/p90", r.time_per_batch_seconds.p90),
        (
            "throughputSamplesPerSecond",
            r.throughput_samples_per_second,
        ),
        ("wallTimeSeconds", r.wall_time_seconds),
    ];
    for (field, v) in checks {
        if !(v.is_finite() && v >= 0.0) {
            return Err((field, format!("expected a non-negative number, found {v}")));
        }
    }
    if r.batch_size == 0 {
        return Err(("batchSize", "must be at least 1".into()));
    }
    if r.iterations == 0 {
        return Err(("iterations", "must be at least 1".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{
        assert_round_trips, check_prefixes, corrupt, edits,
    };
    use proptest::prelude::*;

    const RESNET: &str = include_str!("../../../testdata/pytorch/resnet50-train-cpu.txt");
    const LLAMA: &str = include_str!("../../../testdata/pytorch/llama-small-eval-cuda.txt");
    const OOM: &str = include_str!("../../../testdata/pytorch/cuda-oom-traceback.txt");
    const REAL: &str = include_str!("../../../testdata/pytorch/alexnet-eval-cpu-real.txt");
    const ALL: &[&str] = &[RESNET, LLAMA, OOM, REAL];

    #[test]
    fn a_real_cpu_run() {
        // The last line of a real run (Debian torch 1.13 on this VM), read independently.
        let line = REAL
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("PERFSWEEP_RESULT "))
            .expect("a result line");
        let raw: serde_json::Value = serde_json::from_str(line).expect("JSON");
        let r = parse(REAL).unwrap();
        assert_eq!(r.model, "alexnet");
        assert_eq!(r.device, "cpu");
        assert_eq!(r.benchmark_type, PyTorchBenchmarkType::Eval);
        assert_eq!(Some(r.batch_size), raw["batchSize"].as_u64());
        assert_eq!(
            Some(r.throughput_samples_per_second),
            raw["throughputSamplesPerSecond"].as_f64()
        );
        assert_eq!(
            Some(r.time_per_batch_seconds.mean),
            raw["timePerBatchSeconds"]["mean"].as_f64()
        );
        assert_eq!(r.torch_version.as_deref(), raw["torchVersion"].as_str());
        assert!(r.throughput_samples_per_second > 0.0);
    }

    #[test]
    fn resnet_cpu_train() {
        let r = parse(RESNET).unwrap();
        assert_eq!(r.model, "resnet50");
        assert_eq!(r.device, "cpu");
        assert_eq!(r.benchmark_type, PyTorchBenchmarkType::Train);
        assert_eq!(r.batch_size, 16);
        assert_eq!(r.iterations, 10);
        assert_eq!(r.time_per_batch_seconds.mean, 1.5049);
        assert_eq!(r.time_per_batch_seconds.p50, 1.5019999999999998);
        assert_eq!(r.time_per_batch_seconds.p90, 1.5218999999999998);
        assert_eq!(r.throughput_samples_per_second, 10.631935676789157);
        assert_eq!(r.peak_cpu_memory_bytes, Some(3105112064));
        assert_eq!(r.peak_gpu_memory_bytes, None);
        assert_eq!(r.wall_time_seconds, 18.27);
        assert_eq!(r.torch_version.as_deref(), Some("2.5.1+cpu"));
        assert_eq!(r.headline(), "resnet50 train cpu: 10.6 samples/s");
        assert_round_trips(&r);
    }

    #[test]
    fn llama_cuda_eval_and_last_line_wins() {
        let r = parse(LLAMA).unwrap();
        assert_eq!(r.model, "llama");
        assert_eq!(r.benchmark_type, PyTorchBenchmarkType::Eval);
        assert_eq!(r.peak_gpu_memory_bytes, Some(48234496));
        let both = format!("{RESNET}{LLAMA}");
        assert_eq!(parse(&both).unwrap(), r);
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse(OOM).unwrap_err(),
            ParseError::ToolReportedError(
                "the PyTorch benchmark raised an exception: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.77 GiB of which 1.02 GiB is free.".into()
            )
        );
        assert!(matches!(
            parse("iteration 1/2\n"),
            Err(ParseError::NotFound { .. })
        ));
        let line = LLAMA.trim_end();
        assert!(matches!(
            parse(&line[..line.len() - 5]),
            Err(ParseError::Truncated { .. })
        ));
        let wrong = LLAMA.replace("\"batchSize\": 8", "\"batchSize\": \"eight\"");
        match parse(&wrong).unwrap_err() {
            ParseError::Json { path, message } => {
                assert_eq!(path, "line 1: /batchSize");
                assert!(message.contains("invalid type"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let nested = LLAMA.replace("\"p50\": 0.00401", "\"p50\": null");
        assert!(
            matches!(parse(&nested), Err(ParseError::Json { path, .. }) if path == "line 1: /timePerBatchSeconds/p50")
        );
        let missing = LLAMA.replace("\"model\": \"llama\", ", "");
        assert!(matches!(parse(&missing), Err(ParseError::Json { .. })));
        let negative = LLAMA.replace("\"wallTimeSeconds\": 0.93", "\"wallTimeSeconds\": -1");
        assert!(
            matches!(parse(&negative), Err(ParseError::Json { path, .. }) if path == "line 1: /wallTimeSeconds")
        );
        let nan = LLAMA.replace("\"wallTimeSeconds\": 0.93", "\"wallTimeSeconds\": NaN");
        assert!(matches!(
            parse(&nan),
            Err(ParseError::InvalidJson { line: 1, .. })
        ));
        let trailing = LLAMA.trim_end().to_string() + " extra\n";
        assert!(matches!(
            parse(&trailing),
            Err(ParseError::InvalidJson { .. })
        ));
    }

    #[test]
    fn every_prefix_is_handled() {
        for raw in ALL {
            check_prefixes(raw, parse, PyTorchResult::headline);
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
