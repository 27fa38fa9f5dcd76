//! Workloads against the simulator, in process: embeddings, ShareGPT and prompt-file
//! datasets, tokenizer fallback counts and the usage cross-check.

use perfsweep_llm::dataset::{self, Format};
use perfsweep_llm::loadgen::{self, LoadgenArgs, Task};
use perfsweep_llm::sim::{SimArgs, Simulator};
use perfsweep_llm::tokenizer::Tokenizer;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/llm/{name}", env!("CARGO_MANIFEST_DIR"))
}

async fn simulator(configure: impl FnOnce(&mut SimArgs)) -> Simulator {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 2.0;
    args.itl_ms = 0.5;
    configure(&mut args);
    Simulator::start(args).await.expect("simulator starts")
}

fn loadgen(sim: &Simulator) -> LoadgenArgs {
    let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
    args.progress = false;
    args.warmup_requests = Some(0);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_measure_latency_and_input_tokens_without_ttft() {
    let sim = simulator(|a| {
        a.ttft_ms = 8.0;
        a.embedding_dimensions = 16;
    })
    .await;
    let mut args = loadgen(&sim);
    args.scenarios = vec!["E(64)".into()];
    args.concurrency = vec![4];
    args.max_requests = Some(40);
    let report = loadgen::execute(&args).await.expect("run");
    assert_eq!(report.api, "embeddings");
    let iteration = &report.iterations[0];
    assert_eq!(iteration.scenario, "E(64)");
    assert_eq!((iteration.requests, iteration.errors), (40, 0));
    assert_eq!(iteration.input_tokens_mean, 64.0);
    assert_eq!(iteration.output_tokens_mean, 0.0);
    assert_eq!(iteration.token_counts, "server");
    assert_eq!(iteration.ttft_millis.count, 0, "no TTFT for embeddings");
    assert_eq!(iteration.e2e_latency_millis.count, 40);
    assert!(
        iteration.e2e_latency_millis.mean >= 8.0,
        "{:?}",
        iteration.e2e_latency_millis
    );
    assert!(iteration.requests_per_second > 0.0 && iteration.input_tokens_per_second > 0.0);
    // The simulator counts words; the prompt words are one cl100k token each.
    let check = iteration.usage_check.as_ref().expect("usage compared");
    let input = check.input.as_ref().expect("input compared");
    assert_eq!((input.compared, input.mismatched_percent), (40, 0.0));
    let stats = sim.stats();
    assert_eq!(stats.requests, 40);
    assert!(stats.records.iter().all(|r| r.input_tokens == 64));
    assert!(report.failure.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_need_e_scenarios_and_e_scenarios_need_embeddings() {
    let sim = simulator(|_| {}).await;
    let mut args = loadgen(&sim);
    args.scenarios = vec!["D(10,10)".into()];
    args.task = Some(Task::TextToEmbeddings);
    let error = loadgen::execute(&args).await.expect_err("mismatch");
    assert!(format!("{error:#}").contains("E(n)"), "{error:#}");
    args.task = Some(Task::TextToText);
    args.scenarios = vec!["E(10)".into()];
    assert!(loadgen::execute(&args).await.is_err());
    assert_eq!(sim.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharegpt_dataset_sends_first_human_turns_with_reply_lengths() {
    let sim = simulator(|_| {}).await;
    let mut args = loadgen(&sim);
    args.dataset = Some(fixture("sharegpt-sample.json"));
    args.dataset_format = Format::Sharegpt;
    args.concurrency = vec![2];
    args.max_requests = Some(8);
    let report = loadgen::execute(&args).await.expect("run");
    let iteration = &report.iterations[0];
    assert_eq!(iteration.scenario, "dataset");
    assert_eq!((iteration.requests, iteration.errors), (8, 0));
    // What the simulator was asked to generate: the cl100k length of each reply.
    let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
    let text = std::fs::read_to_string(fixture("sharegpt-sample.json")).expect("fixture");
    let (raws, skipped) = dataset::parse_sharegpt(&text).expect("parses");
    assert_eq!((raws.len(), skipped), (4, 2));
    let mut expected: Vec<u32> = raws
        .iter()
        .map(|r| tokenizer.count(r.reply.as_deref().expect("reply")) as u32)
        .collect();
    expected.sort_unstable();
    let mut asked: Vec<u32> = sim
        .stats()
        .records
        .iter()
        .map(|r| r.output_tokens)
        .collect();
    asked.sort_unstable();
    asked.dedup();
    assert_eq!(asked, expected);
    // The first human turn, not the system prompt nor a later turn.
    assert_eq!(raws[0].prompt.split_whitespace().next(), Some("Summer"));
    assert!(raws.iter().all(|r| !r.prompt.contains("helpful assistant")));
    // The simulator counts words, the tokenizer BPE tokens: the check reports it.
    let input = iteration
        .usage_check
        .as_ref()
        .and_then(|c| c.input.clone())
        .expect("input compared");
    assert_eq!(input.compared, 8);
    assert!(
        input.mismatched_percent > 0.0 && input.mean_ratio < 1.0,
        "{input:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_file_is_read_one_prompt_per_line() {
    let sim = simulator(|_| {}).await;
    let mut args = loadgen(&sim);
    args.dataset = Some(fixture("prompts-sample.txt"));
    args.dataset_format = Format::Prompts;
    args.dataset_output_tokens = Some(5);
    args.concurrency = vec![1];
    args.max_requests = Some(6);
    let report = loadgen::execute(&args).await.expect("run");
    let iteration = &report.iterations[0];
    assert_eq!((iteration.requests, iteration.output_tokens_mean), (6, 5.0));
    let words: std::collections::BTreeSet<u32> =
        sim.stats().records.iter().map(|r| r.input_tokens).collect();
    // "What is the capital of France?" (6), "List three prime numbers." (4),
    // "Describe a sunset in one sentence." (6).
    assert_eq!(words, [4, 6].into());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_server_usage_the_tokenizer_counts_and_with_it_checks() {
    let sim = simulator(|_| {}).await;
    for (usage, stream) in [(false, true), (true, true), (true, false)] {
        let mut args = loadgen(&sim);
        args.scenarios = vec!["D(20,12)".into()];
        args.concurrency = vec![2];
        args.max_requests = Some(16);
        args.no_stream = !stream;
        if !usage {
            args.params = vec![r#"stream_options={"include_usage": false}"#.into()];
        }
        let report = loadgen::execute(&args).await.expect("run");
        let iteration = &report.iterations[0];
        assert_eq!(iteration.requests, 16);
        // The simulator's output words are single cl100k tokens: the count is exact
        // either way.
        assert_eq!(iteration.output_tokens_mean, 12.0, "usage {usage}");
        assert_eq!(iteration.input_tokens_mean, 20.0, "usage {usage}");
        if usage {
            assert_eq!(iteration.token_counts, "server");
            let check = iteration.usage_check.as_ref().expect("checked");
            let output = check.output.as_ref().expect("output checked");
            assert_eq!(output.compared, 2, "one request in eight");
            assert_eq!((output.mismatched_percent, output.mean_ratio), (0.0, 1.0));
        } else {
            assert_eq!(iteration.token_counts, "estimated");
            assert!(iteration.usage_check.is_none());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_tokenizer_or_dataset_fails_before_any_request() {
    let sim = simulator(|_| {}).await;
    let mut args = loadgen(&sim);
    args.tokenizer = "/perfsweep/tokenizer/tokenizer.json".into();
    let error = format!("{:#}", loadgen::execute(&args).await.expect_err("missing"));
    assert!(
        error.contains("/perfsweep/tokenizer/tokenizer.json"),
        "{error}"
    );
    let mut args = loadgen(&sim);
    args.dataset = Some("/nonexistent/sharegpt.json".into());
    let error = format!("{:#}", loadgen::execute(&args).await.expect_err("missing"));
    assert!(error.contains("/nonexistent/sharegpt.json"), "{error}");
    let mut args = loadgen(&sim);
    args.tokenizer = fixture("llama3-style.tokenizer.json");
    args.max_requests = Some(2);
    args.scenarios = vec!["D(30,2)".into()];
    let report = loadgen::execute(&args)
        .await
        .expect("a tokenizer.json works");
    assert_eq!(report.iterations[0].input_tokens_mean, 30.0);
    assert!(report.tokenizer.ends_with("llama3-style.tokenizer.json"));
    assert_eq!(sim.stats().requests, 2);
}
