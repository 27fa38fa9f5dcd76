//! Shared-prefix prompts against the simulator's prefix cache, in process: the
//! simulator's statistics (`/sim/stats`) show the hits, the load generator's result the
//! cached tokens the server reported, and shared prefixes are faster to the first token
//! than prompts of the same length without one.

use perfsweep_llm::loadgen::{self, LoadgenArgs};
use perfsweep_llm::sim::{SimArgs, Simulator};

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
    // The simulator prefills 1,600 more tokens without the cache: 80 ms more. A busy
    // machine adds its scheduling delay to both medians, so the gap, not the ratio, is
    // what shows the cache (at least half of it, whatever the load).
    assert!(
        slow - fast > 40.0 && slow >= 80.0,
        "median TTFT {fast} ms with shared prefixes, {slow} ms without"
    );
}

/// A Mooncake-style trace: 600 requests 2 ms apart (500 per second), each of three
/// 32-token blocks: two shared by every fourth request (`groups` of them), one its own
/// — or, with `shared` false, all three its own.
fn trace(dir: &std::path::Path, shared: bool) -> String {
    let mut text = String::new();
    for i in 0..600u64 {
        let group = i % 4;
        let ids = if shared {
            [group * 100, group * 100 + 1, 10_000 + i]
        } else {
            [20_000 + 3 * i, 20_001 + 3 * i, 20_002 + 3 * i]
        };
        text.push_str(&format!(
            "{{\"timestamp\": {}, \"input_length\": 96, \"output_length\": 2, \"hash_ids\": [{}, {}, {}]}}\n",
            1000 + 2 * i,
            ids[0],
            ids[1],
            ids[2]
        ));
    }
    let path = dir.join(if shared {
        "shared.jsonl"
    } else {
        "unique.jsonl"
    });
    std::fs::write(&path, text).expect("trace written");
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_trace_shares_prefixes_by_hash_id_and_keeps_its_schedule() {
    let dir = std::env::temp_dir().join(format!("perfsweep-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch");
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 5.0;
    args.itl_ms = 2.0;
    args.prefill_ms_per_token = 0.5;
    args.prefix_cache_blocks = 100_000;
    args.prefix_block_tokens = 32;
    let sim = Simulator::start(args).await.expect("simulator starts");
    let replay = |path: String| {
        let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
        args.progress = false;
        args.dataset = Some(path);
        args.dataset_format = perfsweep_llm::dataset::Format::MooncakeTrace;
        args.trace_block_tokens = 32;
        args
    };
    let shared = loadgen::execute(&replay(trace(&dir, true)))
        .await
        .expect("replay");
    let stats = sim.stats();
    let iteration = &shared.iterations[0];
    assert_eq!((iteration.requests, iteration.errors), (600, 0));
    assert_eq!(iteration.arrivals.as_deref(), Some("trace"));
    let rate = iteration.request_rate.expect("the trace's rate");
    assert!((rate - 500.0).abs() < 1.0, "{rate}");
    // Every request but the first of each group finds its group's two blocks cached.
    assert_eq!(stats.prefix_cache_hit_tokens, 596 * 64);
    let percent = iteration.cached_input_tokens_percent.expect("reported");
    assert!((percent - 100.0 * 596.0 * 64.0 / (600.0 * 96.0)).abs() < 0.01);
    let lag = iteration.schedule_lag_millis.as_ref().expect("open loop");
    eprintln!(
        "trace replay at 500 req/s: schedule lag p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        lag.p50, lag.p99, lag.max
    );

    let unique = loadgen::execute(&replay(trace(&dir, false)))
        .await
        .expect("replay");
    // The cache shortens what the simulator has to do: 32 uncached prompt tokens (16 ms
    // of prefill) against 96 (48 ms), in the TTFT it drew for each request. (What the
    // load generator measured is shown, not asserted: 600 requests at 500 req/s in one
    // debug process with the simulator queue up on a loaded machine — a median of
    // 1.5 s from the send with the cache against 85 ms without was seen — and the
    // queueing, not the prefill, then decides.)
    let records = sim.stats().records;
    let median_drawn = |ids: std::ops::Range<u64>| {
        let mut drawn: Vec<f64> = records
            .iter()
            .filter(|r| ids.contains(&r.id))
            .map(|r| r.drawn_ttft_ms)
            .collect();
        drawn.sort_by(f64::total_cmp);
        drawn[drawn.len() / 2]
    };
    // Ids count arrivals: the first replay's 600, then the second's.
    let (cached, uncached) = (median_drawn(0..600), median_drawn(600..1200));
    assert!(
        (uncached - cached - 32.0).abs() < 0.01,
        "the simulator drew a median TTFT of {cached} ms with shared hash ids, {uncached} ms without"
    );
    let from_send = |iteration: &perfsweep_llm::report::result::Iteration| {
        iteration
            .ttft_from_send_millis
            .as_ref()
            .map_or(f64::NAN, |d| d.p50)
    };
    eprintln!(
        "median TTFT from the send: {:.1} ms with shared hash ids, {:.1} ms without",
        from_send(iteration),
        from_send(&unique.iterations[0])
    );
    let _ = std::fs::remove_dir_all(&dir);
}
