//! LLM load generator figures (harness = false; `cargo bench -p perfsweep --bench llm`):
//!
//! - CPU per request of the load generator (this process only, all threads, from
//!   /proc/self/task/*/schedstat) at 64 concurrent streams of 128 in / 64 out tokens
//!   against the simulator running as a separate process;
//! - accuracy: measured mean and p99 TTFT against what the simulator recorded, with
//!   TTFT 50 ms / ITL 10 ms, at 64 and 4,096 streams;
//! - scale: resident memory per stream at 4,096 streams.
//!
//! `LLM_BENCH_QUICK=1` shortens the runs.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use perfsweep::llm::loadgen::http::{Connection, Target};
use perfsweep::llm::loadgen::{self, LoadgenArgs};
use perfsweep::llm::sim::SimStats;

struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .map(|tasks| {
            tasks
                .filter_map(|t| t.ok())
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

async fn sim_call(target: &Target, method: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let mut connection = Connection::open(target).await?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: 0\r\n\r\n",
        target.host_header()
    );
    connection.send(request.as_bytes()).await?;
    let head = connection.read_head().await?;
    let mut body = Vec::new();
    connection
        .read_body(&head, |d, _| body.extend_from_slice(d))
        .await?;
    Ok(body)
}

async fn measure(
    url: &str,
    target: &Target,
    concurrency: u32,
    requests: u64,
) -> anyhow::Result<()> {
    sim_call(target, "POST", "/sim/reset").await?;
    let mut args = LoadgenArgs::new(url, "perfsweep-sim");
    args.progress = false;
    args.scenarios = vec!["D(128,64)".into()];
    args.concurrency = vec![concurrency];
    args.max_requests = Some(requests);
    args.warmup_requests = Some(0);
    let rss_before = rss_bytes();
    let cpu_before = cpu_ns();
    let report = loadgen::execute(&args).await?;
    let cpu = cpu_ns() - cpu_before;
    let rss_after = rss_bytes();
    let stats: SimStats = serde_json::from_slice(&sim_call(target, "GET", "/sim/stats").await?)?;
    let it = &report.iterations[0];
    let mut sim_ttfts: Vec<f64> = stats
        .records
        .iter()
        .filter(|r| r.outcome == "ok")
        .map(|r| r.ttft_ms)
        .collect();
    sim_ttfts.sort_by(f64::total_cmp);
    let sim_p99 = sim_ttfts
        .get(((sim_ttfts.len() as f64 * 0.99).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0);
    println!(
        "streams {concurrency:>5}: {} requests ({} errors) in {:.1} s, {:.0} req/s, {:.0} output tok/s",
        it.requests,
        it.errors,
        it.duration_seconds,
        it.requests_per_second,
        it.output_tokens_per_second
    );
    println!(
        "  loadgen CPU {:.3} ms/request ({:.2} µs/token event)",
        cpu as f64 / 1e6 / (it.requests + it.errors).max(1) as f64,
        cpu as f64 / 1e3 / (it.inter_token_latency_millis.count + it.requests).max(1) as f64,
    );
    println!(
        "  TTFT mean measured {:.3} ms vs simulator {:.3} ms (Δ {:+.3} ms); p99 {:.3} vs {:.3} ms (Δ {:+.3} ms); ITL mean {:.3} vs {:.3} ms",
        it.ttft_millis.mean,
        stats.ttft_mean_ms,
        it.ttft_millis.mean - stats.ttft_mean_ms,
        it.ttft_millis.p99,
        sim_p99,
        it.ttft_millis.p99 - sim_p99,
        it.inter_token_latency_millis.mean,
        stats.itl_mean_ms,
    );
    println!(
        "  RSS {:.1} MiB -> {:.1} MiB ({:.1} KiB per stream, upper bound: peak not sampled)",
        rss_before as f64 / 1048576.0,
        rss_after as f64 / 1048576.0,
        rss_after.saturating_sub(rss_before) as f64 / 1024.0 / concurrency as f64
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let quick = std::env::var_os("LLM_BENCH_QUICK").is_some();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let _sim = Sim(Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args([
            "sim",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--ttft-ms",
            "50",
            "--itl-ms",
            "10",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let target = Target::parse(&url)?;
        for _ in 0..100 {
            if Connection::open(&target).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        println!("simulator: separate process, TTFT 50 ms, ITL 10 ms; D(128,64) requests");
        measure(&url, &target, 64, if quick { 256 } else { 2048 }).await?;
        measure(&url, &target, 4096, if quick { 4096 } else { 8192 }).await?;
        anyhow::Ok(())
    })
}
