//! `/metrics` of an operator running against the API double: the exposition has the
//! controllers' counters and the benchmarks and sets from their caches, and passes
//! `promtool check metrics` (skipped with a reason when promtool is missing outside CI).

mod support;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use perfsweep::controller::Settings;
use serde_json::json;
use support::{NS, WAIT, create_set, double_with_crds, wait_until};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn scrape(port: u16) -> Result<String, String> {
    let mut stream =
        std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP response: {response}"))?;
    if !head.starts_with("HTTP/1.0 200") && !head.starts_with("HTTP/1.1 200") {
        return Err(head.to_owned());
    }
    if !head
        .to_ascii_lowercase()
        .contains("text/plain; version=0.0.4")
    {
        return Err(format!("content type: {head}"));
    }
    Ok(body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_and_pass_promtool() {
    let double = double_with_crds().await;
    let port = free_port();
    let settings = Settings {
        namespace: None,
        health_addr: format!("127.0.0.1:{port}").parse().expect("an address"),
        debounce: Duration::from_millis(50),
        instance: Some("metrics-test".into()),
        defaults: Default::default(),
        export: Default::default(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let operator = tokio::spawn(perfsweep::controller::run(
        double.client(),
        settings,
        async move {
            let _ = stopped.await;
        },
    ));
    create_set(
        &double,
        json!({
            "apiVersion": "perfsweep.io/v1alpha1",
            "kind": "BenchmarkSet",
            "metadata": {"name": "scraped", "namespace": NS},
            "spec": {
                "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
                             "spec": {"duration": 5}},
                "acceptance": [{"metric": "received_bits_per_second", "min": 1e9}],
            },
        }),
    )
    .await;

    let text = wait_until(WAIT, "/metrics with the pending IPerf", || {
        let text = scrape(port)?;
        if text.contains("perfsweep_benchmarks{kind=\"IPerf\",phase=\"Pending\"} 1\n")
            && text.contains("perfsweep_benchmarksets_accepted{accepted=\"Unknown\"} 1\n")
            && text.contains("perfsweep_reconciles_total{controller=\"IPerf\"}")
        {
            Ok(text)
        } else {
            Err(text)
        }
    })
    .await;
    eprintln!("{text}");
    assert!(text.contains("perfsweep_up 1\n"), "{text}");
    assert!(text.contains("# TYPE perfsweep_reconciles_total counter\n"));
    assert!(text.contains("perfsweep_reconciles_total{controller=\"BenchmarkSet\"}"));
    assert!(text.contains("perfsweep_reconciles_total{controller=\"IPerf\"}"));
    assert!(
        text.contains("perfsweep_benchmarksets{phase=\"Running\"} 1\n"),
        "{text}"
    );

    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("promtool reads the metrics");
            let output = child.wait_with_output().expect("promtool finishes");
            assert!(
                output.status.success(),
                "promtool check metrics failed:\n{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            eprintln!(
                "promtool check metrics: ok {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
        Err(error) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "promtool is missing in CI ({error}); .ci/run installs the Debian package prometheus"
            );
            eprintln!(
                "SKIPPED promtool check: promtool is not installed ({error}); apt-get install --no-install-recommends prometheus"
            );
        }
    }
    let _ = stop.send(());
    let _ = tokio::time::timeout(WAIT, operator).await;
}
