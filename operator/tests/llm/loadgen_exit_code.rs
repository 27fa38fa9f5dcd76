//! Scripts can trust `perfsweep loadgen`'s exit code: a server that is down, a model it
//! does not serve, and an error rate above the limit each exit non-zero, with a result
//! document that says why and reports no measurement it did not make.

use std::net::TcpListener;
use std::process::{Command, Output};

use perfsweep_llm::sim::{SimArgs, Simulator};
use serde_json::Value;

fn loadgen(url: &str, model: &str, extra: &[&str]) -> (Output, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args([
            "loadgen",
            "--url",
            url,
            "--model",
            model,
            "--progress",
            "false",
        ])
        .args([
            "--scenario",
            "D(8,4)",
            "--concurrency",
            "2",
            "--max-requests",
            "20",
        ])
        .args(extra)
        .output()
        .expect("perfsweep runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON document in {stdout:?}"));
    let document = serde_json::from_str(line).expect("a JSON document");
    (output, document)
}

async fn simulator(error_rate: f64) -> Simulator {
    let mut args = SimArgs::with_listen("127.0.0.1:0".parse().expect("address"));
    args.ttft_ms = 1.0;
    args.itl_ms = 0.5;
    args.error_rate = error_rate;
    args.seed = 3;
    Simulator::start(args).await.expect("simulator starts")
}

fn assert_not_started(output: &Output, document: &Value, why: &str) {
    assert_eq!(output.status.code(), Some(2), "{document}");
    assert_eq!(document["error"]["stage"], "start", "{document}");
    let message = document["error"]["message"].as_str().expect("a message");
    assert!(message.contains(why), "{message}");
    assert_eq!(document["failure"].as_str(), Some(message));
    // The agent (perfsweep-benchmarks' parser) reads it as the tool's own failure,
    // with its reason.
    let parsed = perfsweep_benchmarks::kinds::llm::plan::parse(&document.to_string());
    assert!(
        matches!(&parsed, Err(perfsweep_benchmarks::execution::parse_error::ParseError::ToolReportedError(m)) if m == message),
        "{parsed:?}"
    );
    for misleading in [
        "api",
        "streaming",
        "workers",
        "iterations",
        "errorRatePercent",
    ] {
        assert!(
            document.get(misleading).is_none(),
            "{misleading} reported for a run that never started: {document}"
        );
    }
}

#[test]
fn a_server_that_is_down_exits_non_zero_with_the_reason() {
    // A port that was free a moment ago: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (output, document) = loadgen(&format!("http://127.0.0.1:{port}"), "m", &[]);
    assert_not_started(&output, &document, "127.0.0.1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_the_server_does_not_serve_exits_non_zero() {
    let sim = simulator(0.0).await;
    let url = format!("http://{}", sim.address);
    let (output, document) =
        tokio::task::spawn_blocking(move || loadgen(&url, "no-such-model", &[]))
            .await
            .expect("loadgen ran");
    assert_not_started(&output, &document, "no-such-model");
    assert_eq!(sim.stats().requests, 0, "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_rate_above_the_limit_exits_one_and_a_clean_run_zero() {
    let failing = simulator(0.5).await;
    let url = format!("http://{}", failing.address);
    let (output, document) = tokio::task::spawn_blocking(move || {
        loadgen(&url, "perfsweep-sim", &["--max-error-rate-percent", "10"])
    })
    .await
    .expect("loadgen ran");
    assert_eq!(output.status.code(), Some(1), "{document}");
    assert_eq!(document["error"]["stage"], "run");
    let rate = document["errorRatePercent"]
        .as_f64()
        .expect("an error rate");
    assert!(rate > 10.0, "{rate}");

    let clean = simulator(0.0).await;
    let url = format!("http://{}", clean.address);
    let (output, document) =
        tokio::task::spawn_blocking(move || loadgen(&url, "perfsweep-sim", &[]))
            .await
            .expect("loadgen ran");
    assert_eq!(output.status.code(), Some(0), "{document}");
    assert!(document.get("error").is_none() && document.get("failure").is_none());
    assert_eq!(document["iterations"][0]["requests"], 20);
}
