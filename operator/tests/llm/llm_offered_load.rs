//! Issue 18, finding 7: `loadgen --request-rate 1e6 --max-requests 3` grew to 2.1 GB and
//! never finished. A load one process cannot offer is refused at once, with the limit
//! and the way out (more workers) in the message.

use std::time::Duration;

use perfsweep_llm::loadgen::{self, LoadgenArgs};
use perfsweep_llm::sim::{SimArgs, Simulator};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_beyond_one_process_is_refused_at_once() {
    let sim = Simulator::start(SimArgs::with_listen(
        "127.0.0.1:0".parse().expect("address"),
    ))
    .await
    .expect("simulator starts");
    let mut args = LoadgenArgs::new(&format!("http://{}", sim.address), "perfsweep-sim");
    args.progress = false;
    args.request_rates = vec![1e6];
    args.max_requests = Some(3);
    // Before the fix this ran until memory ran out; a bounded wait turns that into a
    // failure instead of a hung test.
    let outcome = tokio::time::timeout(Duration::from_mins(1), loadgen::execute(&args))
        .await
        .expect("refused at once, not run");
    let error = format!("{:#}", outcome.expect_err("refused"));
    assert!(error.contains("--request-rate 1000000"), "{error}");
    assert!(error.contains("at most 20000 requests/s"), "{error}");
    assert!(error.contains("--workers 50"), "{error}");
    assert_eq!(sim.stats().requests, 0, "nothing was sent");
}
