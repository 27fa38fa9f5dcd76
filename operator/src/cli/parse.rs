//! `perfsweep parse KIND FILE`: the structured result of raw tool output, as JSON.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use perfsweep_benchmarks::kinds::registry;
use serde_json::json;

pub fn run(kind: &str, file: &Path) -> anyhow::Result<ExitCode> {
    let info = registry::lookup_parse_name(kind).ok_or_else(|| {
        let known: Vec<&str> = registry::kinds().iter().map(|k| k.parse_name).collect();
        anyhow::anyhow!("unknown kind {kind:?}; known kinds: {}", known.join(", "))
    })?;
    let raw = if file == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?
    };
    match info.parse(&raw) {
        Ok(parsed) => {
            let output =
                json!({"kind": info.kind, "summary": parsed.summary, "result": parsed.result});
            println!("{}", serde_json::to_string_pretty(&output)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!("error: {}: {error}", file.display());
            Ok(ExitCode::FAILURE)
        }
    }
}
