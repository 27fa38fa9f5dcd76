//! More streams than the open-file limit, from one load generator process to one
//! simulator process: both spread their sockets over threads with a file table each.
//! The limit is lowered for the two processes (`ulimit -n`), so the test needs no
//! privilege and shows what happens where the hard limit is below the streams wanted.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use perfsweep_benchmarks::kinds::llm::result::{Iteration, LLMInferenceResult};
use perfsweep_llm::report::doubt::CLIENT_DELAY_TOLERANCE_MILLIS;
use perfsweep_llm::sim::SimStats;

const EXE: &str = env!("CARGO_BIN_EXE_perfsweep");
/// Low enough that the streams below need several tables in both processes.
const OPEN_FILE_LIMIT: u32 = 512;
const STREAMS: u32 = 1200;

/// `perfsweep ARGS` with both open-file limits lowered to `OPEN_FILE_LIMIT`.
fn limited(args: &[&str]) -> Command {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {OPEN_FILE_LIMIT} && exec \"$0\" \"$@\""))
        .arg(EXE)
        .args(args);
    command
}

struct Sim(Child, String);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn get(address: &str, path: &str) -> Vec<u8> {
    let mut stream = TcpStream::connect(address).expect("connect to the simulator");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").expect("request");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("response");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    response[split + 4..].to_vec()
}

/// A simulator under the lowered limit, ready for `connections`, answering after
/// `ttft_ms`.
fn simulator(connections: u32, ttft_ms: u32) -> Sim {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let address = format!("127.0.0.1:{port}");
    let child = limited(&[
        "sim",
        "--listen",
        &address,
        "--ttft-ms",
        &ttft_ms.to_string(),
        "--itl-ms",
        "20",
        "--max-connections",
        &connections.to_string(),
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start the simulator");
    let sim = Sim(child, address.clone());
    for _ in 0..250 {
        if TcpStream::connect(&sim.1).is_ok() {
            return sim;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the simulator did not listen on {address}");
}

/// `perfsweep loadgen ARGS` against `sim` under the lowered limit; its result.
fn loadgen(sim: &Sim, args: &[&str]) -> LLMInferenceResult {
    let output = std::env::temp_dir().join(format!(
        "past-limit-{}-{}.json",
        std::process::id(),
        sim.1.replace([':', '.'], "-")
    ));
    let url = format!("http://{}", sim.1);
    let mut all = vec![
        "loadgen",
        "--url",
        &url,
        "--model",
        "perfsweep-sim",
        "--progress",
        "false",
        "--output",
        output.to_str().expect("a UTF-8 temporary path"),
    ];
    all.extend_from_slice(args);
    let status = limited(&all).status().expect("run the load generator");
    assert!(status.success(), "the load generator failed: {status}");
    let result: LLMInferenceResult =
        serde_json::from_slice(&std::fs::read(&output).expect("the result file"))
            .expect("a result document");
    let _ = std::fs::remove_file(&output);
    result
}

/// The only iteration of `result`, which completed `requests` requests without an error.
fn all_answered(result: &LLMInferenceResult, requests: u64) -> &Iteration {
    assert_eq!(result.failure, None);
    let iteration = &result.iterations[0];
    assert_eq!(
        iteration.errors, 0,
        "errors: {:?}",
        iteration.errors_by_kind
    );
    assert_eq!(iteration.requests, requests);
    iteration
}

#[test]
fn more_streams_than_the_open_file_limit_run_from_one_process() {
    // Every stream waits 300 ms for its first token, so all of them are in flight at
    // once (the simulator counts that), far more than one table's descriptors.
    let sim = simulator(STREAMS + 100, 300);

    let streams = STREAMS.to_string();
    let result = loadgen(
        &sim,
        &[
            "--scenario",
            "D(16,4)",
            "--concurrency",
            &streams,
            "--max-requests",
            &streams,
            // One warmup request per stream opens its connection (the measured ones
            // then do not count connecting).
            "--warmup-requests",
            &streams,
        ],
    );
    let iteration = all_answered(&result, u64::from(STREAMS));

    let stats: SimStats =
        serde_json::from_slice(&get(&sim.1, "/sim/stats")).expect("simulator stats");
    assert_eq!(stats.requests, 2 * u64::from(STREAMS));
    assert!(
        stats.max_active > u64::from(OPEN_FILE_LIMIT),
        "{} requests in flight at once; more than the limit of {OPEN_FILE_LIMIT} needs several tables",
        stats.max_active
    );
    // Timing holds on every thread: what was measured is what the simulator did. The
    // client's TTFT runs from its send stamp, the simulator's from the request's
    // arrival in the kernel: the client's is longer by its delay between stamping and
    // writing, which the load generator measures in this same run (its longest, plus
    // the 5 ms tolerance it flags by). The simulator's records are in arrival order,
    // and the warmup's are the first STREAMS only roughly (a stream may send its
    // measured request before another's warmup arrives), so the two means are over
    // nearly but not exactly the same requests: they may differ by the spread of the
    // simulator's own TTFTs in this run too. On an idle machine both allowances are a
    // few ms; a loaded one widens them, from what it did to this very run.
    let mut records = stats.records;
    records.sort_by_key(|r| r.id);
    let measured: Vec<f64> = records
        .iter()
        .skip(STREAMS as usize)
        .map(|r| r.ttft_ms)
        .collect();
    let simulated = measured.iter().sum::<f64>() / measured.len() as f64;
    let delta = iteration.ttft_millis.mean - simulated;
    let own_delay = iteration
        .client_delay
        .as_ref()
        .map_or(0.0, |d| d.max_millis);
    let spread = stats.ttft_p99_ms - stats.ttft_p50_ms;
    let (low, high) = (
        -spread - 0.1,
        CLIENT_DELAY_TOLERANCE_MILLIS + own_delay + spread,
    );
    assert!(
        (low..high).contains(&delta),
        "measured TTFT mean {} ms, simulator {simulated} ms: {delta} ms apart, not within \
         {low}..{high} ms (the client's own delay at most {own_delay} ms, the simulator's \
         TTFT p99 - p50 {spread} ms)",
        iteration.ttft_millis.mean,
    );
}

#[test]
fn an_open_loop_keeps_more_requests_in_flight_than_the_open_file_limit() {
    // 800 requests a second that each take over a second: ~1,000 in flight at once.
    let sim = simulator(1400, 1000);
    let result = loadgen(
        &sim,
        &[
            "--scenario",
            "D(16,2)",
            "--request-rate",
            "800",
            "--arrivals",
            "constant",
            "--max-concurrency",
            "1300",
            "--warmup-requests",
            "400",
            "--max-requests",
            "1600",
        ],
    );
    let iteration = all_answered(&result, 1600);
    assert_eq!(iteration.warmup_requests, 400);
    // The lanes together offer the asked rate: 1,600 requests due over 2 s, the last
    // answered about 1.1 s later (3 s at twice the rate would be 2.1 s, at a third 5.1).
    assert_eq!(iteration.request_rate, Some(800.0));
    assert!(
        (2.7..=3.9).contains(&iteration.duration_seconds),
        "measured for {} s",
        iteration.duration_seconds
    );
    let stats: SimStats =
        serde_json::from_slice(&get(&sim.1, "/sim/stats")).expect("simulator stats");
    assert!(
        stats.max_active > u64::from(OPEN_FILE_LIMIT),
        "{} requests in flight at once; the limit is {OPEN_FILE_LIMIT}",
        stats.max_active
    );
}
