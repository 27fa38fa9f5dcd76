//! The load generator against the simulator, in process: what it measures is what the
//! simulator recorded doing, and the SSE and error edge cases are counted right.

use perfsweep::llm::loadgen::{self, Api, LoadgenArgs};
use perfsweep::llm::sim::{SimArgs, Simulator};

async fn simulator(configure: impl FnOnce(&mut SimArgs)) -> Simulator {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    configure(&mut args);
    Simulator::start(args).await.expect("simulator starts")
}

fn loadgen(sim: &Simulator) -> LoadgenArgs {
    let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
    args.progress = false;
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn measured_ttft_matches_what_the_simulator_did() {
    let sim = simulator(|a| {
        a.ttft_ms = 30.0;
        a.itl_ms = 5.0;
        a.ttft_jitter_ms = 5.0;
        a.seed = 7;
    })
    .await;
    let mut args = loadgen(&sim);
    args.scenarios = vec!["D(64,16)".into()];
    args.concurrency = vec![8];
    args.max_requests = Some(64);
    args.warmup_requests = Some(0);
    let report = loadgen::execute(&args).await.expect("run");
    let stats = sim.stats();
    let iteration = &report.iterations[0];
    assert_eq!(iteration.requests, 64);
    assert_eq!(stats.requests, 64);
    assert_eq!(iteration.token_counts, "server");
    assert_eq!(iteration.output_tokens_mean, 16.0);
    assert_eq!(iteration.input_tokens_mean, 64.0);
    // The loadgen's clock starts before it sends and stops after it reads; the
    // simulator's starts after it parsed the request and stops when it hands the chunk
    // over. The difference is loopback and parsing: well under 2 ms even unoptimised.
    let delta = iteration.ttft_millis.mean - stats.ttft_mean_ms;
    assert!(
        (0.0..2.0).contains(&delta),
        "measured TTFT mean {} ms, simulator {} ms",
        iteration.ttft_millis.mean,
        stats.ttft_mean_ms
    );
    assert!((iteration.inter_token_latency_millis.mean - stats.itl_mean_ms).abs() < 1.0);
    assert_eq!(iteration.inter_token_latency_millis.count, 64 * 15);
    assert!(report.failure.is_none());
    assert_eq!(report.best_iteration, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_variants_and_non_streaming_count_the_same_tokens() {
    let sim = simulator(|a| {
        a.ttft_ms = 2.0;
        a.itl_ms = 1.0;
        a.usage_in_finish_chunk = true;
        a.sse_comments = true;
    })
    .await;
    for (api, stream) in [
        (Api::Chat, true),
        (Api::Completions, true),
        (Api::Chat, false),
        (Api::Completions, false),
    ] {
        let mut args = loadgen(&sim);
        args.api = api;
        args.no_stream = !stream;
        args.scenarios = vec!["D(10,6)".into()];
        args.concurrency = vec![2];
        args.max_requests = Some(6);
        args.params = vec!["temperature=0.0".into(), "user=bench".into()];
        let report = loadgen::execute(&args).await.expect("run");
        let iteration = &report.iterations[0];
        assert_eq!(
            (iteration.requests, iteration.errors),
            (6, 0),
            "{api:?} {stream}"
        );
        assert_eq!(iteration.output_tokens_mean, 6.0, "{api:?} {stream}");
        let expected_itls = if stream { 6 * 5 } else { 0 };
        assert_eq!(iteration.inter_token_latency_millis.count, expected_itls);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_counted_by_kind_and_fail_the_run_above_the_limit() {
    let sim = simulator(|a| {
        a.ttft_ms = 1.0;
        a.itl_ms = 0.5;
        a.error_rate = 0.3;
        a.midstream_error_rate = 0.3;
        a.seed = 3;
    })
    .await;
    let mut args = loadgen(&sim);
    args.scenarios = vec!["D(4,4)".into()];
    args.concurrency = vec![4];
    args.max_requests = Some(100);
    args.warmup_requests = Some(0);
    let report = loadgen::execute(&args).await.expect("run");
    let iteration = &report.iterations[0];
    assert_eq!(iteration.requests + iteration.errors, 100);
    assert!(
        iteration
            .errors_by_kind
            .get("http_500")
            .is_some_and(|&n| n > 0)
    );
    assert!(
        iteration
            .errors_by_kind
            .get("stream_error")
            .is_some_and(|&n| n > 0)
    );
    let failure = report.failure.expect("error rate above 5%");
    assert!(failure.contains("http_500"), "{failure}");
    // The parser turns the reported failure into a failed benchmark.
    let json = serde_json::to_string(&report_with(failure)).expect("json");
    assert!(perfsweep_benchmarks::kinds::llm::plan::parse(&json).is_err());
}

fn report_with(failure: String) -> perfsweep_benchmarks::kinds::llm::LLMInferenceResult {
    perfsweep_benchmarks::kinds::llm::LLMInferenceResult {
        format: perfsweep_benchmarks::kinds::llm::result::FORMAT.into(),
        failure: Some(failure),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_is_refused_before_any_load() {
    let sim = simulator(|_| {}).await;
    let mut args = loadgen(&sim);
    args.model = "llama".into();
    let error = loadgen::execute(&args).await.expect_err("unknown model");
    assert!(format!("{error:#}").contains("perfsweep-sim"), "{error:#}");
    assert_eq!(sim.stats().requests, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_capacity_model_slows_tokens_down_under_load() {
    let sim = simulator(|a| {
        a.ttft_ms = 1.0;
        a.itl_ms = 2.0;
        a.capacity = Some(2);
    })
    .await;
    let mut args = loadgen(&sim);
    args.scenarios = vec!["D(4,20)".into()];
    args.concurrency = vec![1, 8];
    args.max_requests = Some(16);
    let report = loadgen::execute(&args).await.expect("run");
    let (light, heavy) = (&report.iterations[0], &report.iterations[1]);
    // 8 active against capacity 2: ITL × (1 + 6/2) = 4×.
    assert!(
        heavy.inter_token_latency_millis.mean > 2.5 * light.inter_token_latency_millis.mean,
        "light {} ms, heavy {} ms",
        light.inter_token_latency_millis.mean,
        heavy.inter_token_latency_millis.mean
    );
}
