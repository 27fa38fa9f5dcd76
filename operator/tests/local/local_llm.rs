//! A real local LLM sweep: `perfsweep run --local` starts the simulator role and the
//! load generator role as agents, over three concurrency levels, and the recorded time
//! to first token is the one the simulator was told to inject.

use std::process::Command;

use serde_json::Value;

const SWEEP: &str = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-llm
spec:
  endpoint:
    simulator:
      ttftMillis: 40
      itlMillis: 5
      port: 18431
  trafficScenarios: ["D(64,8)"]
  numConcurrency: [1, 2, 4]
  maxRequestsPerIteration: 12
  slo:
    ttftMillis: 100
"#;

#[test]
fn a_local_llm_sweep_measures_the_injected_ttft_at_three_concurrency_levels() {
    let dir = std::env::temp_dir().join(format!("perfsweep-test-llm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let sweep = dir.join("llm.yaml");
    std::fs::write(&sweep, SWEEP).expect("sweep written");
    let out = dir.join("results");
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&sweep)
        .output()
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed:\n{stdout}\n{stderr}");
    // Under the table, the latency-throughput chart with a point per level.
    assert!(
        stdout.contains("time to first token (ms; o median, + p99) against output throughput"),
        "{stdout}"
    );
    for level in ["o c1", "o c2", "o c4"] {
        assert!(stdout.contains(level), "no point for {level}:\n{stdout}");
    }
    let record: Value = std::fs::read_dir(&out)
        .expect("output directory")
        .filter_map(std::result::Result::ok)
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).expect("record")).expect("JSON"))
        .expect("one record");
    assert_eq!(record["outcome"]["status"], "succeeded", "{record}");
    let result = &record["outcome"]["result"];
    let iterations = result["iterations"].as_array().expect("iterations");
    let levels: Vec<u64> = iterations
        .iter()
        .filter_map(|i| i["concurrency"].as_u64())
        .collect();
    assert_eq!(levels, [1, 2, 4]);
    for iteration in iterations {
        assert_eq!(iteration["requests"], 12, "{iteration}");
        assert_eq!(iteration["errors"], 0, "{iteration}");
        assert_eq!(iteration["outputTokensMean"], 8.0);
        // How late the machine woke the load generator in this iteration (its own
        // probe): on a busy machine the simulator is as late, and the bounds widen by it.
        let late = crate::local_support::late_wakeups_ms(iteration);
        let ttft = iteration["ttftMillis"]["mean"].as_f64().expect("TTFT mean");
        // The simulator sleeps 40 ms on a 1 ms timer: it cannot be early, and loopback
        // plus an unoptimised build add little.
        assert!(
            (40.0..45.0 + 2.0 * late).contains(&ttft),
            "TTFT mean {ttft} ms (wakeups up to {late} ms late): {iteration}"
        );
        let itl = iteration["interTokenLatencyMillis"]["mean"]
            .as_f64()
            .expect("ITL");
        // Tokens are due on an absolute schedule: a late one shortens the next gap, so a
        // late first token shortens the mean of the 7 gaps after it.
        assert!(
            (4.5 - late / 7.0..7.0 + late).contains(&itl),
            "ITL mean {itl} ms (wakeups up to {late} ms late)"
        );
        assert_eq!(iteration["goodput"]["attainmentPercent"], 100.0);
    }
    assert!(
        result["outputTokensPerSecond"]
            .as_f64()
            .is_some_and(|t| t > 0.0)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// An endpoint that wants an API key: the spec names a Secret, and a local run takes
/// its value from `PERFSWEEP_SECRET_<NAME>_<KEY>`; the tool's progress lines are echoed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_run_takes_the_api_key_from_its_environment() {
    let sim = simulator_wanting_key("s3cret-key").await;
    let dir = crate::local_support::scratch("llm-key");
    let sweep = dir.join("keyed.yaml");
    std::fs::write(
        &sweep,
        format!(
            r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: keyed
spec:
  endpoint:
    url: http://{}
    modelName: perfsweep-sim
    apiKeySecretRef: {{name: llm-key, key: token}}
  trafficScenarios: ["D(8,4)"]
  requestRates: [50]
  maxConcurrency: 4
  maxRequestsPerIteration: 10
  warmupRequests: 0
"#,
            sim.address
        ),
    )
    .expect("sweep written");
    let run = |out: &str, key: Option<&str>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_perfsweep"));
        command
            .args(["run", "--local", "--output"])
            .arg(dir.join(out))
            .arg(&sweep)
            .env_remove("PERFSWEEP_SECRET_LLM_KEY_TOKEN");
        if let Some(key) = key {
            command.env("PERFSWEEP_SECRET_LLM_KEY_TOKEN", key);
        }
        command.output()
    };
    let output = run("without", None).await.expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("SecretMissing") && stderr.contains("PERFSWEEP_SECRET_LLM_KEY_TOKEN"),
        "{stderr}"
    );
    assert_eq!(sim.stats().requests, 0);

    let output = run("with", Some("s3cret-key"))
        .await
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed:\n{stdout}\n{stderr}");
    assert_eq!(sim.stats().requests, 10, "{stderr}");
    assert!(
        stderr.contains("iteration 1/1: D(8,4) 50 req/s poisson, at most 4 in flight"),
        "progress not echoed: {stderr}"
    );
    assert!(!stderr.contains("s3cret-key") && !stdout.contains("s3cret-key"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every file under `dir`, recursively, as text (lossy).
fn all_text_under(dir: &std::path::Path) -> Vec<(std::path::PathBuf, String)> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(all_text_under(&path));
        } else if let Ok(bytes) = std::fs::read(&path) {
            found.push((path, String::from_utf8_lossy(&bytes).into_owned()));
        }
    }
    found
}

/// Issue 24, finding 7: a header that carries a credential (Azure's `api-key`, a bearer
/// token) comes from a Secret (locally, `PERFSWEEP_SECRET_<NAME>_<KEY>`), reaches the
/// server, and appears in no output, log, record or evidence file of the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_header_from_a_secret_reaches_the_server_and_no_record() {
    const SECRET: &str = "h3ader-s3cret";
    let sim = simulator_wanting_key(SECRET).await;
    let dir = crate::local_support::scratch("llm-header");
    let sweep = dir.join("header.yaml");
    std::fs::write(
        &sweep,
        format!(
            r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: header
spec:
  endpoint:
    url: http://{}
    modelName: perfsweep-sim
  requestHeaders: {{X-Team: perf}}
  requestHeaderSecrets:
    Authorization: {{name: llm-header, key: value}}
  trafficScenarios: ["D(8,4)"]
  requestRates: [50]
  maxConcurrency: 4
  maxRequestsPerIteration: 10
  warmupRequests: 0
"#,
            sim.address
        ),
    )
    .expect("sweep written");
    let records = dir.join("records");
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["run", "--local", "--output"])
        .arg(&records)
        .arg(&sweep)
        .env(
            "PERFSWEEP_SECRET_LLM_HEADER_VALUE",
            format!("Bearer {SECRET}"),
        )
        .output()
        .await
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "run failed:\n{stdout}\n{stderr}");
    // The simulator refuses a request without the bearer token: all 10 were accepted.
    assert_eq!(sim.stats().requests, 10, "{stderr}");
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET));
    let files = all_text_under(&records);
    assert!(
        !files.is_empty(),
        "the run wrote its records under {records:?}"
    );
    for (path, text) in &files {
        assert!(
            !text.contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }
    // The record keeps the header's name and where its value came from.
    assert!(
        files.iter().any(|(_, text)| text.contains("llm-header")),
        "no record names the Secret"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fast simulator on loopback that answers only requests carrying `key`.
async fn simulator_wanting_key(key: &str) -> perfsweep_llm::sim::Simulator {
    let mut args =
        perfsweep_llm::sim::SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 2.0;
    args.itl_ms = 1.0;
    args.api_key = Some(key.into());
    perfsweep_llm::sim::Simulator::start(args)
        .await
        .expect("simulator")
}
