//! DuckDB, the independent engine: runs the same SQL over the same files through
//! `python3 -m duckdb` (DuckDB from PyPI), for the equivalence test and the bench.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::error::{Error, Result};

const SCRIPT: &str = include_str!("../duckdb/query.py");

/// DuckDB's version, or why it cannot be used.
pub fn version() -> std::result::Result<String, String> {
    let output = Command::new("python3")
        .args(["-c", "import duckdb; print(duckdb.__version__)"])
        .output()
        .map_err(|e| format!("python3 cannot be run: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
    } else {
        Err(format!(
            "the duckdb Python package is not installed (python3 -m pip install duckdb): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[derive(Clone, Debug, Default)]
pub struct Answer {
    pub version: String,
    /// Per query, its rows, each a list of JSON values.
    pub results: Vec<Vec<Vec<Value>>>,
    /// Per query, the best of `repeat` runs.
    pub seconds: Vec<f64>,
    /// Creating the views over the files.
    pub setup_seconds: f64,
}

/// Runs `queries` over the warehouse at `root`, each `repeat` times.
pub fn run(root: &Path, queries: &[&str], repeat: usize) -> Result<Answer> {
    let fail = |message: String| Error::Query {
        context: "DuckDB".into(),
        message,
    };
    let request = json!({"root": root, "queries": queries, "repeat": repeat});
    let mut child = Command::new("python3")
        .args(["-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| fail(format!("python3 cannot be run: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(request.to_string().as_bytes())
            .map_err(|e| fail(format!("writing the request: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| fail(format!("waiting for python3: {e}")))?;
    if !output.status.success() {
        return Err(fail(String::from_utf8_lossy(&output.stderr).into_owned()));
    }
    let answer: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| fail(format!("its answer is not JSON: {e}")))?;
    let results = serde_json::from_value(answer["results"].clone())
        .map_err(|e| fail(format!("its results: {e}")))?;
    let seconds = serde_json::from_value(answer["seconds"].clone())
        .map_err(|e| fail(format!("its timings: {e}")))?;
    Ok(Answer {
        version: answer["duckdb"].as_str().unwrap_or_default().to_owned(),
        results,
        seconds,
        setup_seconds: answer["setup_seconds"].as_f64().unwrap_or(0.0),
    })
}

/// Whether two answers are the same: same rows in the same order, numbers equal to a
/// relative 1e-9 (the engines sum in different orders), an integer equal to the same
/// float. `Err` says where they first differ.
pub fn same(left: &[Vec<Value>], right: &[Vec<Value>]) -> std::result::Result<(), String> {
    if left.len() != right.len() {
        return Err(format!("{} rows against {}", left.len(), right.len()));
    }
    for (index, (a, b)) in left.iter().zip(right).enumerate() {
        if a.len() != b.len() {
            return Err(format!(
                "row {index}: {} columns against {}",
                a.len(),
                b.len()
            ));
        }
        for (column, (x, y)) in a.iter().zip(b).enumerate() {
            let equal = match (x.as_f64(), y.as_f64()) {
                (Some(p), Some(q)) => p == q || (p - q).abs() <= 1e-9 * p.abs().max(q.abs()),
                _ => x == y,
            };
            if !equal {
                return Err(format!("row {index} column {column}: {x} against {y}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_compare_numbers_with_a_tolerance_and_text_exactly() {
        let a = vec![vec![json!("x"), json!(1), json!(0.1 + 0.2)]];
        let b = vec![vec![json!("x"), json!(1.0), json!(0.3)]];
        assert_eq!(same(&a, &b), Ok(()));
        let c = vec![vec![json!("y"), json!(1), json!(0.3)]];
        assert!(same(&a, &c).is_err_and(|e| e.contains("column 0")));
        let d = vec![vec![json!("x"), json!(1), json!(0.31)]];
        assert!(same(&a, &d).is_err_and(|e| e.contains("column 2")));
        assert!(same(&a, &[]).is_err());
    }
}
