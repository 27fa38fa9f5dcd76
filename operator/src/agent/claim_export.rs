//! A `pvc://` output location, written by the benchmark's own pod: the result role's
//! agent writes its report (outcome, structured result, command, times) and the raw
//! evidence into the claim the plan mounts (see
//! `perfsweep_benchmarks::execution::output::export_into_claim`), under
//! `<path>/<run>/<name>[-<index>].json` and `<path>/<run>/evidence/<sha256>.txt`.
//!
//! A failed write does not change the benchmark's outcome (what was measured stands); it
//! is logged, and the report is still in the pod's log and the benchmark's status.

use std::path::{Path, PathBuf};

use perfsweep_benchmarks::execution::agent_env;
use perfsweep_benchmarks::execution::agent_report::AgentReport;

use super::config::AgentConfig;

/// Where the report goes: the role's `PERFSWEEP_EXPORT_DIR` with `{volume:NAME}`
/// resolved, or `None` when the benchmark exports no claim.
pub fn directory(config: &AgentConfig) -> Option<PathBuf> {
    let template = config.role().env.get(agent_env::EXPORT_DIR)?;
    let mut dir = template.clone();
    for (key, paths) in config.plan.volume_paths(config.volumes_dir.as_deref()) {
        if let Some(path) = paths.first() {
            dir = dir.replace(&format!("{{{key}}}"), path);
        }
    }
    (!dir.contains('{')).then(|| PathBuf::from(dir))
}

/// Writes `report` under `dir`: the evidence first, then the report without the raw
/// output it points to. Returns the report's path.
pub fn write(
    dir: &Path,
    run: &str,
    name: &str,
    index: u32,
    report: &AgentReport,
) -> std::io::Result<PathBuf> {
    let run_dir = dir.join(run);
    std::fs::create_dir_all(run_dir.join("evidence"))?;
    if let (Some(raw), Some(sha)) = (&report.raw_output, &report.raw_output_sha256) {
        std::fs::write(run_dir.join("evidence").join(format!("{sha}.txt")), raw)?;
    }
    let mut kept = report.clone();
    kept.raw_output = None;
    let file = match index {
        0 => run_dir.join(format!("{name}.json")),
        index => run_dir.join(format!("{name}-{index}.json")),
    };
    let text = serde_json::to_string_pretty(&kept).map_err(std::io::Error::other)?;
    std::fs::write(&file, text + "\n")?;
    Ok(file)
}

/// Writes the result process's report when the plan asks for it (logs the outcome).
pub fn write_if_asked(config: &AgentConfig, report: &AgentReport) {
    if !config.produces_result() {
        return;
    }
    let Some(dir) = directory(config) else {
        return;
    };
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let name = env(agent_env::EXPORT_NAME).unwrap_or_else(|| config.plan.kind.to_lowercase());
    let run = env(agent_env::EXPORT_RUN).unwrap_or_else(|| "local".to_owned());
    match write(&dir, &run, &name, config.index, report) {
        Ok(file) => tracing::info!(file = %file.display(), "report written into the claim"),
        Err(error) => {
            tracing::error!(dir = %dir.display(), %error, "cannot write the report into the claim");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::execution::agent_report::{Outcome, sha256_hex};

    #[test]
    fn the_report_and_its_evidence_land_under_the_run() {
        let dir = std::env::temp_dir().join(format!("perfsweep-claim-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let raw = "{\"format\":\"x\"}\n".to_owned();
        let report = AgentReport {
            tool_version: None,
            network: None,
            kind: "LLMInference".into(),
            role: "loadgen".into(),
            index: 0,
            outcome: Outcome::Succeeded {
                result: Some(serde_json::json!({"api": "chat"})),
                summary: Some("s".into()),
            },
            command: vec!["perfsweep".into(), "loadgen".into()],
            started_at: "2026-11-25T00:00:00Z".into(),
            finished_at: "2026-11-25T00:00:01Z".into(),
            host: Some("node-a".into()),
            raw_output_sha256: Some(sha256_hex(raw.as_bytes())),
            raw_output: Some(raw.clone()),
        };
        let file = write(&dir, "bench-0123abcd", "bench", 0, &report).expect("written");
        assert_eq!(file, dir.join("bench-0123abcd/bench.json"));
        let kept: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("JSON");
        assert_eq!(kept["outcome"]["result"]["api"], "chat");
        assert!(kept.get("rawOutput").is_none() && kept.get("raw_output").is_none());
        let evidence = dir.join(format!(
            "bench-0123abcd/evidence/{}.txt",
            sha256_hex(raw.as_bytes())
        ));
        assert_eq!(std::fs::read_to_string(evidence).expect("evidence"), raw);
        let second = write(&dir, "bench-0123abcd", "bench", 2, &report).expect("written");
        assert!(second.ends_with("bench-2.json"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
