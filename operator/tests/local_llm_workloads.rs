//! Real local LLM runs beyond synthetic text (`perfsweep run --local`, the simulator and
//! the load generator as agents): embeddings, a ShareGPT dataset with a tokenizer.json
//! file, and a tokenizer that is not there failing before any request.

mod local_support;

use local_support::{records, run_local, run_local_sweep, scratch};

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/llm/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_local_embeddings_sweep_measures_latency_without_ttft() {
    let dir = scratch("llm-embeddings");
    let sweep = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-embeddings
spec:
  endpoint:
    simulator:
      ttftMillis: 15
      port: 18441
  task: text-to-embeddings
  trafficScenarios: ["E(32)"]
  numConcurrency: [1, 4]
  maxRequestsPerIteration: 12
"#;
    let (out, _) = run_local_sweep(&dir, "embeddings", sweep);
    let records = records(&out);
    assert_eq!(records.len(), 1);
    let result = &records[0]["outcome"]["result"];
    assert_eq!(result["api"], "embeddings", "{result}");
    let iterations = result["iterations"].as_array().expect("iterations");
    assert_eq!(iterations.len(), 2);
    for iteration in iterations {
        assert_eq!(iteration["scenario"], "E(32)");
        assert_eq!(iteration["requests"], 12, "{iteration}");
        assert_eq!(iteration["inputTokensMean"], 32.0);
        assert_eq!(iteration["ttftMillis"]["count"], 0);
        let e2e = iteration["e2eLatencyMillis"]["min"].as_f64().expect("e2e");
        // The simulator sleeps 15 ms: no request can be faster; a busy machine with an
        // unoptimised build adds some.
        assert!((15.0..60.0).contains(&e2e), "E2E min {e2e} ms");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_local_sharegpt_run_uses_the_dataset_and_the_tokenizer_file() {
    let dir = scratch("llm-sharegpt");
    let sweep = format!(
        r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-sharegpt
spec:
  endpoint:
    simulator:
      ttftMillis: 2
      itlMillis: 1
      port: 18442
  tokenizer:
    file: {tokenizer}
  dataset:
    format: sharegpt
    source:
      file: {dataset}
    maxPrompts: 3
    seed: 5
  numConcurrency: [2]
  maxRequestsPerIteration: 6
"#,
        tokenizer = fixture("llama3-style.tokenizer.json"),
        dataset = fixture("sharegpt-sample.json"),
    );
    let (out, _) = run_local_sweep(&dir, "sharegpt", &sweep);
    let result = &records(&out)[0]["outcome"]["result"];
    assert!(
        result["tokenizer"]
            .as_str()
            .is_some_and(|t| t.ends_with("llama3-style.tokenizer.json")),
        "{result}"
    );
    let iteration = &result["iterations"][0];
    assert_eq!(iteration["scenario"], "dataset");
    assert_eq!(iteration["requests"], 6, "{iteration}");
    assert_eq!(iteration["usageCheck"]["input"]["compared"], 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tokenizer_that_is_not_there_fails_the_benchmark_before_the_run() {
    let dir = scratch("llm-no-tokenizer");
    // On the local backend a ConfigMap volume is an empty directory: the key is missing.
    let sweep = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-no-tokenizer
spec:
  endpoint:
    simulator:
      port: 18443
  tokenizer:
    configMap:
      name: llama3-tokenizer
      key: tokenizer.json
  numConcurrency: [1]
  maxRequestsPerIteration: 4
"#;
    let (out, output) = run_local(&dir, "out", sweep);
    let records = records(&out);
    assert_eq!(
        records.len(),
        1,
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let outcome = &records[0]["outcome"];
    assert_ne!(outcome["status"], "succeeded", "{outcome}");
    let text = outcome.to_string();
    assert!(
        text.contains("tokenizer") && text.contains("tokenizer.json"),
        "the failure names the tokenizer file: {text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
