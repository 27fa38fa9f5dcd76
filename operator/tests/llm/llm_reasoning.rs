//! A reasoning model's streams: `reasoning_content` deltas are counted as reasoning
//! tokens, and the times to the first reasoning and the first answer token are both
//! reported — in process against the simulator, and in a local run.

use crate::local_support;

use local_support::{records, run_local_sweep, scratch};
use perfsweep_llm::loadgen::{self, LoadgenArgs};
use perfsweep_llm::sim::{SimArgs, Simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_tokens_and_both_first_token_times_are_measured() {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 10.0;
    args.itl_ms = 5.0;
    args.reasoning_model = Some("sim-reasoner".into());
    args.reasoning_tokens = 4;
    let sim = Simulator::start(args).await.expect("simulator starts");
    let mut run = LoadgenArgs::new(&format!("http://{}", sim.address), "sim-reasoner");
    run.progress = false;
    run.scenarios = vec!["D(16,10)".into()];
    run.concurrency = vec![2];
    run.max_requests = Some(20);
    let report = loadgen::execute(&run).await.expect("run");
    let iteration = &report.iterations[0];
    assert_eq!((iteration.requests, iteration.errors), (20, 0));
    assert_eq!(iteration.reasoning_tokens_mean, Some(4.0));
    assert_eq!(iteration.output_tokens_mean, 10.0);
    let reasoning = iteration
        .time_to_first_reasoning_token_millis
        .as_ref()
        .expect("reasoning measured");
    let answer = iteration
        .time_to_first_answer_token_millis
        .as_ref()
        .expect("answer measured");
    // The first token is reasoning and the answer comes after it, before the end. (Four
    // tokens later, 20 ms on an idle machine; a loaded simulator sends late tokens
    // together, so the gap is shown, not asserted.)
    assert!(reasoning.p50 >= 10.0, "{reasoning:?}");
    assert!((reasoning.p50 - iteration.ttft_millis.p50).abs() < 0.5);
    let gap = answer.p50 - reasoning.p50;
    eprintln!("the answer came {gap:.1} ms after the reasoning (4 tokens of 5 ms)");
    assert!(
        reasoning.p50 < answer.p50 && answer.p50 < iteration.e2e_latency_millis.p50,
        "reasoning {reasoning:?}, answer {answer:?}, end {:?}",
        iteration.e2e_latency_millis
    );

    // The plain model of the same simulator reasons not at all.
    let mut plain = run.clone();
    plain.model = "perfsweep-sim".into();
    let report = loadgen::execute(&plain).await.expect("run");
    assert_eq!(report.iterations[0].reasoning_tokens_mean, None);
    assert!(
        report.iterations[0]
            .time_to_first_answer_token_millis
            .is_none()
    );
}

#[test]
fn a_local_run_against_a_reasoning_simulator_reports_reasoning() {
    let dir = scratch("llm-reasoning");
    let sweep = r#"
apiVersion: perfsweep.io/v1alpha1
kind: LLMInference
metadata:
  name: local-reasoning
spec:
  endpoint:
    simulator:
      ttftMillis: 5
      itlMillis: 2
      reasoningTokens: 3
      port: 18446
  trafficScenarios: ["D(8,6)"]
  numConcurrency: [2]
  maxRequestsPerIteration: 10
"#;
    let (out, _) = run_local_sweep(&dir, "reasoning", sweep);
    let records = records(&out);
    let iteration = &records[0]["outcome"]["result"]["iterations"][0];
    assert_eq!(iteration["reasoningTokensMean"], 3.0, "{iteration}");
    assert!(iteration["timeToFirstReasoningTokenMillis"]["p50"].is_number());
    assert!(iteration["timeToFirstAnswerTokenMillis"]["p50"].is_number());
    let _ = std::fs::remove_dir_all(&dir);
}
