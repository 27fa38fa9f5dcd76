//! Shared-prefix prompts against the simulator's prefix cache, in process: the
//! simulator's statistics (`/sim/stats`) show the hits, the load generator's result the
//! cached tokens the server reported, and shared prefixes are faster to the first token
//! than prompts of the same length without one.

use perfsweep::llm::loadgen::{self, LoadgenArgs};
use perfsweep::llm::sim::{SimArgs, Simulator};

async fn simulator() -> Simulator {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 5.0;
    args.itl_ms = 2.0;
    // 0.05 ms per uncached prompt token: 1,632 tokens cost 82 ms, 32 cost under 2.
    args.prefill_ms_per_token = 0.05;
    args.prefix_cache_blocks = 4096;
    args.prefix_block_tokens = 16;
    Simulator::start(args).await.expect("simulator starts")
}

fn loadgen(sim: &Simulator) -> LoadgenArgs {
    let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
    args.progress = false;
    args.concurrency = vec![2];
    args.max_requests = Some(40);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_prefixes_hit_the_simulators_cache_and_reach_the_first_token_sooner() {
    let sim = simulator().await;
    let mut shared = loadgen(&sim);
    shared.shared_prefix_groups = Some(2);
    shared.shared_prefix_system_tokens = 1600;
    shared.shared_prefix_question_tokens = 32;
    shared.shared_prefix_output_tokens = 4;
    let with_prefix = loadgen::execute(&shared).await.expect("shared-prefix run");
    let stats = sim.stats();
    assert!(
        stats.prefix_cache_hit_tokens > 0 && stats.prompt_tokens > 0,
        "the simulator saw no prefix hit: {} of {} prompt tokens",
        stats.prefix_cache_hit_tokens,
        stats.prompt_tokens
    );
    let iteration = &with_prefix.iterations[0];
    assert_eq!(iteration.scenario, "shared-prefix(2x1600+32/4)");
    assert_eq!((iteration.requests, iteration.errors), (40, 0));
    // After the first request of each group (warmup), every system prompt is cached:
    // 1,600 of 1,632 tokens.
    let percent = iteration
        .cached_input_tokens_percent
        .expect("the simulator reports cached tokens");
    assert!(percent > 90.0, "{percent}% of prompt tokens cached");

    let mut unshared = loadgen(&sim);
    unshared.scenarios = vec!["D(1632,4)".into()];
    let without = loadgen::execute(&unshared).await.expect("unshared run");
    let unshared_iteration = &without.iterations[0];
    assert!(
        unshared_iteration
            .cached_input_tokens_percent
            .is_some_and(|p| p < 5.0),
        "{:?}",
        unshared_iteration.cached_input_tokens_percent
    );
    let (fast, slow) = (
        iteration.ttft_millis.p50,
        unshared_iteration.ttft_millis.p50,
    );
    assert!(
        fast * 2.0 < slow && slow >= 80.0,
        "median TTFT {fast} ms with shared prefixes, {slow} ms without"
    );
}
