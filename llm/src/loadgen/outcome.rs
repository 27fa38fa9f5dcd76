//! What `perfsweep loadgen` hands back to a script: the result document and an exit
//! code that says whether the run failed.
//!
//! - 0: the run finished and its error rate is within `--max-error-rate-percent`;
//! - 1: the run finished, but more requests failed than the limit allows;
//! - 2: the run never started (endpoint unreachable, model not served, no tokenizer or
//!   dataset, bad arguments — clap's own usage errors are 2 as well).
//!
//! A run that never started has no API, streaming mode or worker count to report: its
//! document carries `format`, `model`, `url`, `failure` and `error` only, so nothing in
//! it reads like a measurement (absent fields rather than zeroes).

use std::process::ExitCode;

use crate::report::result::{self, LLMInferenceResult};
use serde_json::{Value, json};

/// Exit code of a run that finished with too many failed requests.
pub const RUN_FAILED: u8 = 1;
/// Exit code of a run that never started.
pub const NOT_STARTED: u8 = 2;

/// How a `perfsweep loadgen` invocation ended.
#[derive(Debug)]
pub enum Outcome {
    /// The iterations ran; `failure` is set when the error rate passed the limit.
    Ran(Box<LLMInferenceResult>),
    /// Nothing was measured.
    NotStarted {
        model: String,
        url: String,
        message: String,
    },
}

impl Outcome {
    /// The JSON document printed (or written to `--output`).
    pub fn document(&self) -> Result<Value, serde_json::Error> {
        match self {
            Self::Ran(report) => {
                let mut value = serde_json::to_value(report)?;
                if let (Some(failure), Some(map)) = (&report.failure, value.as_object_mut()) {
                    map.insert("error".into(), json!({"stage": "run", "message": failure}));
                }
                Ok(value)
            }
            Self::NotStarted {
                model,
                url,
                message,
            } => Ok(json!({
                "format": result::FORMAT,
                "model": model,
                "url": url,
                "failure": message,
                "error": {"stage": "start", "message": message},
            })),
        }
    }

    /// Why the run failed, if it did.
    pub fn failure(&self) -> Option<&str> {
        match self {
            Self::Ran(report) => report.failure.as_deref(),
            Self::NotStarted { message, .. } => Some(message),
        }
    }

    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::Ran(report) if report.failure.is_none() => ExitCode::SUCCESS,
            Self::Ran(_) => ExitCode::from(RUN_FAILED),
            Self::NotStarted { .. } => ExitCode::from(NOT_STARTED),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_never_started_reports_no_measurement_fields() {
        let outcome = Outcome::NotStarted {
            model: "m".into(),
            url: "http://127.0.0.1:1".into(),
            message: "connection refused".into(),
        };
        let document = outcome.document().expect("a document");
        for absent in [
            "api",
            "streaming",
            "workers",
            "iterations",
            "errorRatePercent",
        ] {
            assert!(document.get(absent).is_none(), "{absent} in {document}");
        }
        assert_eq!(document["error"]["stage"], "start");
        assert_eq!(outcome.exit_code(), ExitCode::from(NOT_STARTED));
        // That the agent reads it as the tool's own failure, with its reason, is
        // perfsweep-benchmarks' side: operator/tests/loadgen_exit_code.rs checks it on
        // the documents `perfsweep loadgen` prints.
        assert_eq!(document["failure"], "connection refused");
    }

    #[test]
    fn a_run_over_its_error_limit_exits_one_and_a_clean_run_zero() {
        let mut report = LLMInferenceResult {
            format: result::FORMAT.into(),
            workers: 1,
            ..Default::default()
        };
        assert_eq!(
            Outcome::Ran(Box::new(report.clone())).exit_code(),
            ExitCode::SUCCESS
        );
        report.failure = Some("7 of 10 requests failed".into());
        let outcome = Outcome::Ran(Box::new(report));
        assert_eq!(outcome.exit_code(), ExitCode::from(RUN_FAILED));
        assert_eq!(
            outcome.document().expect("a document")["error"]["stage"],
            "run"
        );
    }
}
