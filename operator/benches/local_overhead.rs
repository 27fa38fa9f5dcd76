//! The local backend's overhead: iperf3 bandwidth and wall time through
//! `perfsweep run --local` against iperf3 run directly, alternating in the same run.
//!
//! Run with `cargo bench -p perfsweep --bench local_overhead`. Prints figures; asserts
//! nothing about speed.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use perfsweep_benchmarks::kinds::registry;

const ROUNDS: usize = 5;
const SECONDS: u32 = 3;

fn main() {
    if Command::new("iperf3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: iperf3 is not installed (apt-get install iperf3)");
        return;
    }
    let scratch = std::env::temp_dir().join(format!("perfsweep-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let mut direct = Vec::new();
    let mut through = Vec::new();
    for round in 0..ROUNDS {
        direct.push(direct_run(15300 + round as u16 * 2));
        through.push(perfsweep_run(&scratch, 15301 + round as u16 * 2));
        eprintln!(
            "round {round}: direct {:.2} Gbit/s in {:.2}s, perfsweep {:.2} Gbit/s in {:.2}s",
            direct[round].0 / 1e9,
            direct[round].1.as_secs_f64(),
            through[round].0 / 1e9,
            through[round].1.as_secs_f64()
        );
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let mut direct_bw: Vec<f64> = direct.iter().map(|r| r.0).collect();
    let mut through_bw: Vec<f64> = through.iter().map(|r| r.0).collect();
    let mut direct_wall: Vec<f64> = direct.iter().map(|r| r.1.as_secs_f64()).collect();
    let mut through_wall: Vec<f64> = through.iter().map(|r| r.1.as_secs_f64()).collect();
    let (db, tb) = (median(&mut direct_bw), median(&mut through_bw));
    let (dw, tw) = (median(&mut direct_wall), median(&mut through_wall));
    println!("iperf3 over loopback, {SECONDS}s per run, {ROUNDS} alternating rounds (medians):");
    println!(
        "  iperf3 directly:            {:.2} Gbit/s, {dw:.2}s wall",
        db / 1e9
    );
    println!(
        "  perfsweep run --local:      {:.2} Gbit/s, {tw:.2}s wall",
        tb / 1e9
    );
    println!("  bandwidth ratio (perfsweep / direct): {:.3}", tb / db);
    println!("  wall-time overhead per benchmark:     {:.2}s", tw - dw);
    let _ = std::fs::remove_dir_all(&scratch);
}

fn direct_run(port: u16) -> (f64, Duration) {
    let start = Instant::now();
    let mut server = Command::new("iperf3")
        .args(["--server", "--one-off", "--port", &port.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .expect("iperf3 server starts");
    // The same readiness check the agent uses: a listener in /proc/net/tcp, without a
    // probing connection that iperf3 would take for its one client.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !perfsweep::agent::listening::is_listening(port) {
        assert!(
            Instant::now() < deadline,
            "iperf3 server did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let output = Command::new("iperf3")
        .args([
            "--client",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--time",
            &SECONDS.to_string(),
            "--json",
        ])
        .output()
        .expect("iperf3 client runs");
    let elapsed = start.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        output.status.success(),
        "iperf3 client failed: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let parsed = registry::lookup("IPerf")
        .expect("IPerf kind")
        .parse(&String::from_utf8_lossy(&output.stdout))
        .expect("iperf3 output parses");
    (
        parsed.result["receivedBitsPerSecond"]
            .as_f64()
            .unwrap_or(0.0),
        elapsed,
    )
}

fn perfsweep_run(scratch: &std::path::Path, port: u16) -> (f64, Duration) {
    let file = scratch.join("iperf.yaml");
    let out: PathBuf = scratch.join(format!("out-{port}"));
    std::fs::write(
        &file,
        format!(
            "apiVersion: perfsweep.io/v1alpha1\nkind: IPerf\nmetadata: {{name: overhead}}\nspec: {{duration: {SECONDS}, port: {port}}}\n"
        ),
    )
    .expect("spec written");
    let start = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_perfsweep"))
        .args(["run", "--local", "--output"])
        .arg(&out)
        .arg(&file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("perfsweep runs");
    let elapsed = start.elapsed();
    assert!(status.success(), "perfsweep run --local failed");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("overhead.json")).expect("record written"),
    )
    .expect("record is JSON");
    (
        record["outcome"]["result"]["receivedBitsPerSecond"]
            .as_f64()
            .unwrap_or(0.0),
        elapsed,
    )
}
