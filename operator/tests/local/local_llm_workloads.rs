//! Real local LLM runs beyond synthetic text (`perfsweep run --local`, the simulator and
//! the load generator as agents): embeddings, a ShareGPT dataset with a tokenizer.json
//! file, and a tokenizer that is not there failing before any request.

use crate::local_support;

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
        r"
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
",
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
    let sweep = r"
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
";
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

/// A BenchmarkSet permutes the shared-prefix workload against the simulator's prefix
/// cache: the permutation that shares a 1,600-token system prompt is served from the
/// cache (the cached tokens the simulator reported) and reaches the first token sooner
/// than the one whose prompts of the same length share nothing.
#[test]
fn a_local_shared_prefix_set_shows_prefix_cache_hits_and_a_lower_ttft() {
    let dir = scratch("llm-shared-prefix");
    let sweep = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: prefix
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: LLMInference
    spec:
      endpoint:
        simulator:
          ttftMillis: 5
          itlMillis: 2
          prefillMillisPerToken: 0.05
          prefixCache:
            blocks: 4096
            blockTokens: 16
          port: 18444
      numConcurrency: [2]
      maxRequestsPerIteration: 30
  permutations:
    product:
      sharedPrefix:
        - {groups: 2, systemPromptTokens: 1600, questionTokens: 32, outputTokens: 4}
        - {groups: 1, systemPromptTokens: 0, questionTokens: 1632, outputTokens: 4}
";
    let (out, _) = run_local_sweep(&dir, "shared-prefix", sweep);
    let records = records(&out);
    assert_eq!(records.len(), 2);
    let mut by_system = std::collections::BTreeMap::new();
    for record in &records {
        let result = &record["outcome"]["result"];
        let iteration = &result["iterations"][0];
        let label = iteration["scenario"].as_str().expect("label").to_owned();
        let cached = iteration["cachedInputTokensPercent"]
            .as_f64()
            .expect("the simulator reports cached tokens");
        let ttft = iteration["ttftMillis"]["p50"].as_f64().expect("TTFT");
        by_system.insert(label, (cached, ttft));
    }
    let (shared_cached, shared_ttft) = by_system["shared-prefix(2x1600+32/4)"];
    let (unshared_cached, unshared_ttft) = by_system["shared-prefix(1x0+1632/4)"];
    assert!(shared_cached > 90.0, "{by_system:?}");
    assert!(unshared_cached < 5.0, "{by_system:?}");
    assert!(shared_ttft * 2.0 < unshared_ttft, "{by_system:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Mooncake-style trace as the dataset: replayed once on its own schedule (20
/// requests 10 ms apart), its shared hash ids served from the simulator's prefix cache.
#[test]
fn a_local_trace_replay_runs_on_the_traces_schedule_with_prefix_hits() {
    let dir = scratch("llm-trace");
    let mut trace = String::new();
    for i in 0..20u64 {
        trace.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 48, \"output_length\": 3, \"hash_ids\": [1, 2, {}]}}\n",
            10 * i,
            100 + i
        ));
    }
    let trace_path = dir.join("trace.jsonl");
    std::fs::write(&trace_path, trace).expect("trace written");
    let sweep = format!(
        r"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-trace
spec:
  endpoint:
    simulator:
      ttftMillis: 2
      itlMillis: 1
      prefixCache:
        blockTokens: 16
      port: 18445
  dataset:
    format: mooncakeTrace
    blockTokens: 16
    source:
      file: {trace}
",
        trace = trace_path.display()
    );
    let (out, _) = run_local_sweep(&dir, "trace", &sweep);
    let records = records(&out);
    assert_eq!(records.len(), 1);
    let iteration = &records[0]["outcome"]["result"]["iterations"][0];
    assert_eq!(iteration["arrivals"], "trace", "{iteration}");
    assert_eq!(iteration["requests"], 20, "{iteration}");
    let rate = iteration["requestRate"].as_f64().expect("rate");
    assert!((rate - 100.0).abs() < 1.0, "{rate}");
    // Blocks 1 and 2 (32 of 48 tokens) are cached for all but the first request.
    let cached = iteration["cachedInputTokens"]
        .as_u64()
        .expect("cached tokens");
    assert_eq!(cached, 19 * 32, "{iteration}");
    assert!(iteration["scheduleLagMillis"]["p99"].is_number());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Multi-turn chat sessions from a BenchmarkSet that permutes the simulator's prefix
/// cache (65,536 blocks against one, i.e. none): every iteration reports its figures per
/// turn; with the cache, later turns find the history cached and reach the first token
/// sooner than without, where TTFT grows with the history (prefill of every prompt token).
#[test]
fn a_local_sessions_set_reports_each_turn_and_the_prefix_cache_effect() {
    let dir = scratch("llm-sessions");
    let sweep = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: sessions
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: LLMInference
    spec:
      endpoint:
        simulator:
          ttftMillis: 5
          itlMillis: 1
          prefillMillisPerToken: 0.2
          prefixCache:
            blocks: 65536
            blockTokens: 16
          port: 18446
      sessions:
        turns: 3
        userTokens: 200
        outputTokens: 40
        thinkTimeMillis: 20
      numConcurrency: [2]
      maxRequestsPerIteration: 18
  permutations:
    product:
      endpoint.simulator.prefixCache.blocks: [65536, 1]
";
    let (out, _) = run_local_sweep(&dir, "sessions", sweep);
    let records = records(&out);
    assert_eq!(records.len(), 2);
    // Per cache size: per turn, (prompt tokens mean, cached percent, TTFT p50).
    let mut by_cache = std::collections::BTreeMap::new();
    for record in &records {
        let result = &record["outcome"]["result"];
        let iteration = &result["iterations"][0];
        assert_eq!(iteration["scenario"], "sessions(3x200/40,think 20ms)");
        // 18 requests are six whole conversations of three turns.
        assert_eq!(iteration["requests"], 18, "{iteration}");
        let turns = iteration["perTurn"].as_array().expect("perTurn");
        let figures: Vec<(u64, f64, f64, f64)> = turns
            .iter()
            .map(|t| {
                (
                    t["requests"].as_u64().unwrap_or_default(),
                    t["inputTokensMean"].as_f64().unwrap_or_default(),
                    t["cachedInputTokensPercent"].as_f64().unwrap_or(-1.0),
                    t["ttftMillis"]["p50"].as_f64().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(figures.len(), 3, "{iteration}");
        assert!(figures.iter().all(|f| f.0 == 6), "{figures:?}");
        // The history grows: 200, then 200 + 40 + 200, then 680 prompt tokens.
        assert_eq!(
            figures.iter().map(|f| f.1).collect::<Vec<_>>(),
            [200.0, 440.0, 680.0],
            "{figures:?}"
        );
        // The run's summary line shows TTFT by turn.
        let outcome = record["outcome"].to_string();
        assert!(outcome.contains("TTFT p50 by turn 1: "), "{outcome}");
        let blocks = record["benchmark"]["permutation"]["endpoint.simulator.prefixCache.blocks"]
            .as_u64()
            .expect("the permuted cache size in the record");
        eprintln!(
            "cache of {blocks} blocks, per turn (requests, prompt tokens, cached %, TTFT p50 ms): {figures:?}"
        );
        by_cache.insert(blocks, figures);
    }
    let cached = &by_cache[&65536];
    let uncached = &by_cache[&1];
    // With the cache: the first turn has nothing cached, later turns their history.
    assert!(cached[0].2 < 5.0, "{cached:?}");
    assert!(cached[1].2 > 40.0 && cached[2].2 > 60.0, "{cached:?}");
    // Without: TTFT grows with the prompt (136 ms of prefill on turn 3 against 40 on
    // turn 1), and with the cache the later turns are faster than that.
    assert!(uncached[2].2 < 5.0, "{uncached:?}");
    assert!(uncached[2].3 > uncached[0].3 + 50.0, "{uncached:?}");
    assert!(
        cached[2].3 + 50.0 < uncached[2].3,
        "{cached:?} {uncached:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
