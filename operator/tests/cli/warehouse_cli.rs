//! `perfsweep warehouse` over the records of two real local iperf3 sweeps: build (twice,
//! idempotent), query, publish, explain (and a tampered artifact failing the walk),
//! what-changed and the retention plan; `results report` from a publication and against a
//! baseline.

use crate::local_support;

use local_support::{perfsweep, run_local_sweep, scratch, tool_or_skip};

use std::path::Path;
use std::process::Output;

use serde_json::Value;

const SWEEP: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: wh-iperf
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15331
  repetitions: 3
  permutations:
    product:
      streams: [1, 2]
";

fn warehouse(args: &[&str]) -> Output {
    let output = perfsweep()
        .arg("warehouse")
        .args(args)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep warehouse {args:?}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// `perfsweep results report ARGS`, and the report.md it wrote.
fn results_report(args: &[&str]) -> (Output, String) {
    let output = perfsweep()
        .args(["results", "report"])
        .args(args)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep results report {args:?}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = args
        .windows(2)
        .find(|w| w[0] == "-o")
        .map(|w| w[1])
        .expect("-o DIR");
    let md = std::fs::read_to_string(Path::new(dir).join("report.md")).unwrap_or_default();
    (output, md)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn json(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[test]
fn build_query_publish_explain_and_what_changed_over_real_records() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("warehouse-cli");
    let (first, _) = run_local_sweep(&dir, "first", SWEEP);
    let (second, _) = run_local_sweep(&dir, "second", SWEEP);
    let wh = dir.join("wh");

    let built = warehouse(&["build", path(&first), path(&second), "--output", path(&wh)]);
    assert!(built.status.success());
    assert!(String::from_utf8_lossy(&built.stdout).contains("12 run(s) added"));
    let again = warehouse(&["build", path(&first), path(&second), "--output", path(&wh)]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 run(s) added, 12 already"));

    let runs = json(&warehouse(&[
        "query",
        path(&wh),
        "SELECT run_id, count(*) AS runs, count(DISTINCT case_key) AS cases \
         FROM benchmark_run_fact GROUP BY run_id ORDER BY run_id",
        "--format",
        "json",
    ]));
    let runs = runs.as_array().expect("rows");
    assert_eq!(runs.len(), 2);
    for run in runs {
        assert_eq!(run["runs"], 6);
        assert_eq!(run["cases"], 2);
    }
    let (baseline, candidate) = (
        runs[0]["run_id"].as_str().expect("run id"),
        runs[1]["run_id"].as_str().expect("run id"),
    );
    let csv = warehouse(&[
        "query",
        path(&wh),
        "SELECT metric, count(*) AS n FROM system_outcome_fact \
         WHERE metric = 'received_bits_per_second' GROUP BY metric",
        "--format",
        "csv",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout),
        "metric,n\nreceived_bits_per_second,12\n"
    );

    let query = dir.join("by-case.sql");
    std::fs::write(
        &query,
        "SELECT case_key, avg(headline_value) AS mean_bps, count(*) AS runs, \
         string_agg(run_key, ',') AS run_keys FROM benchmark_run_fact \
         WHERE status = 'succeeded' GROUP BY case_key ORDER BY case_key",
    )
    .expect("query file");
    let published = warehouse(&[
        "publish",
        "--warehouse",
        path(&wh),
        "--query",
        path(&query),
        "--name",
        "iperf-by-case",
    ]);
    assert!(published.status.success());
    assert!(String::from_utf8_lossy(&published.stdout).contains("2 row(s)"));

    // `results report` takes its figures from the publication, each row verified.
    let from_publication = results_report(&[
        "--publication",
        "iperf-by-case",
        "--warehouse",
        path(&wh),
        "-o",
        path(&dir.join("report-published")),
    ]);
    assert!(from_publication.0.status.success());
    let md = &from_publication.1;
    assert!(md.contains("Published figures: iperf-by-case"), "{md}");
    assert_eq!(md.matches("verified (").count(), 2, "{md}");
    assert!(
        md.contains("12 runs from run"),
        "the records behind the rows: {md}"
    );

    let walk = warehouse(&[
        "explain",
        "iperf-by-case",
        "0",
        "--warehouse",
        path(&wh),
        "--json",
    ]);
    assert!(walk.status.success());
    let walk = json(&walk);
    let evidence: Vec<&str> = walk["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s["what"].as_str())
        .filter(|w| w.starts_with("evidence "))
        .collect();
    assert_eq!(
        evidence.len(),
        6,
        "six runs of a case, one evidence object each"
    );

    // Tamper with one evidence object: the walk fails and names it.
    let object = evidence[0]
        .split_whitespace()
        .nth(1)
        .expect("the evidence path");
    let file = wh.join(object);
    let original = std::fs::read(&file).expect("evidence");
    std::fs::write(&file, [original.as_slice(), b"edited\n"].concat()).expect("tamper");
    let broken = warehouse(&["explain", "iperf-by-case", "0", "--warehouse", path(&wh)]);
    assert!(!broken.status.success());
    let error = String::from_utf8_lossy(&broken.stderr);
    assert!(
        error.contains(object) && error.contains("altered"),
        "{error}"
    );
    let tampered = results_report(&[
        "--publication",
        "iperf-by-case",
        "--warehouse",
        path(&wh),
        "-o",
        path(&dir.join("report-tampered")),
    ]);
    assert_eq!(tampered.0.status.code(), Some(1));
    assert!(tampered.1.contains("BROKEN"), "{}", tampered.1);
    std::fs::write(&file, original).expect("restore");

    let changed = warehouse(&[
        "what-changed",
        baseline,
        candidate,
        "--warehouse",
        path(&wh),
        "--json",
    ]);
    let report = json(&changed);
    assert_eq!(report["baseline"], baseline);
    assert_eq!(report["candidate"], candidate);
    // Exit 1 exactly when some case got worse.
    let slower = report["slower_cases"].as_array().expect("cases").len();
    assert_eq!(changed.status.success(), slower == 0);

    // The same pivot in `results report` when both sides are given, its evidence links
    // resolving beside the report.
    let out = dir.join("report-changed");
    let (reported, md) =
        results_report(&[path(&second), "--baseline", path(&first), "-o", path(&out)]);
    assert!(reported.status.code() != Some(1), "{reported:?}");
    assert!(
        md.contains(&format!("What changed since run {baseline}")),
        "{md}"
    );
    let links: Vec<&str> = md
        .split(|c: char| c.is_whitespace() || c == '|' || c == ',')
        .filter(|word| word.starts_with("changed-warehouse/"))
        .collect();
    assert_eq!(links.is_empty(), slower == 0, "{md}");
    for link in links {
        assert!(out.join(link).is_file(), "{link} beside the report");
    }

    let plan = warehouse(&[
        "retention",
        path(&wh),
        "--today",
        "2100-01-01",
        "--warm-days",
        "30",
        "--cold-days",
        "60",
    ]);
    let text = String::from_utf8_lossy(&plan.stdout);
    // Every fact partition is past the warm tier; every record is past the cold one, and
    // kept, since the publication's two rows reference all twelve.
    assert!(
        text.contains(
            "0 raw record(s) and 0 evidence object(s) past 60 days; 12 raw record(s) kept for publications"
        ),
        "{text}"
    );
    assert!(
        text.contains("would delete benchmark_run_fact/kind=IPerf/date="),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node_exporter (Debian's prometheus-node-exporter) on loopback, with the collectors
/// the slices read; killed on drop.
struct NodeExporter(std::process::Child);

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 25: telemetry slices from a real Prometheus for the runs of a real local sweep.
/// node_exporter on this machine is scraped every second, its series labelled with the
/// node name the records carry (this machine's hostname, as a cluster's relabelling
/// would); `warehouse telemetry` asks Prometheus for each run's window, and `build`
/// loads one slice per run and node into telemetry_slice_fact.
#[test]
fn telemetry_slices_from_a_real_prometheus_load_for_every_run() {
    if !tool_or_skip("iperf3", "iperf3")
        || !tool_or_skip("prometheus-node-exporter", "prometheus-node-exporter")
    {
        return;
    }
    let exporter_port = crate::prometheus::free_port();
    let exporter = NodeExporter(
        std::process::Command::new("prometheus-node-exporter")
            .arg(format!("--web.listen-address=127.0.0.1:{exporter_port}"))
            .args([
                "--collector.disable-defaults",
                "--collector.cpu",
                "--collector.meminfo",
                "--collector.netdev",
                // Debian's default leaves loopback out; here it carries the benchmark.
                "--collector.netdev.device-exclude=^$",
                "--collector.diskstats",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("node_exporter starts"),
    );
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the hostname")
        .trim()
        .to_owned();
    let Some(prometheus) = crate::prometheus::Prometheus::scraping(
        &format!("127.0.0.1:{exporter_port}"),
        &[("node", hostname.as_str())],
    ) else {
        return;
    };
    // A few scrapes before the runs, so that their first rates have samples.
    let started = std::time::Instant::now();
    loop {
        match prometheus.target_up() {
            Ok(()) if started.elapsed() > std::time::Duration::from_secs(4) => break,
            Err(targets) if started.elapsed() > std::time::Duration::from_mins(1) => {
                panic!("node_exporter was not scraped within 60 s: {targets}")
            }
            _ => std::thread::sleep(std::time::Duration::from_millis(500)),
        }
    }

    let dir = scratch("warehouse-telemetry");
    let sweep = SWEEP
        .replace("name: wh-iperf", "name: wh-telemetry")
        .replace("duration: 1", "duration: 2")
        .replace("port: 15331", "port: 15341")
        .replace("repetitions: 3", "repetitions: 2")
        .replace("streams: [1, 2]", "streams: [1]");
    let (runs, _) = run_local_sweep(&dir, "runs", &sweep);
    // Let Prometheus scrape past the last run's end.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let slices = dir.join("telemetry");
    let pulled = warehouse(&[
        "telemetry",
        path(&runs),
        "--prometheus",
        &prometheus.url(),
        "--output",
        path(&slices),
        // Prometheus scrapes every second; rates over 8 s rather than 4 still find two
        // samples when a loaded machine makes a few scrapes late.
        "--scrape-interval",
        "2",
        // Loopback carries this machine's benchmark traffic: keep it.
        "--exclude-devices",
        "^$",
    ]);
    assert!(pulled.status.success());
    assert!(
        String::from_utf8_lossy(&pulled.stdout).contains("2 telemetry slice(s)"),
        "one slice per run on its one node"
    );
    let wh = dir.join("wh");
    let built = warehouse(&["build", path(&runs), path(&slices), "--output", path(&wh)]);
    assert!(built.status.success());
    assert!(String::from_utf8_lossy(&built.stdout).contains("2 telemetry slice(s)"));
    let rows = json(&warehouse(&[
        "query",
        path(&wh),
        "SELECT t.node, t.cpu_utilization_percent AS cpu, t.memory_used_bytes AS memory, \
         t.network_receive_bytes_per_second AS received, r.run_key IS NOT NULL AS joined \
         FROM telemetry_slice_fact t LEFT JOIN benchmark_run_fact r ON r.run_key = t.run_key \
         ORDER BY t.window_start",
        "--format",
        "json",
    ]));
    let rows = rows.as_array().expect("rows");
    assert_eq!(rows.len(), 2, "{rows:?}");
    for row in rows {
        assert_eq!(row["node"], hostname.as_str());
        assert_eq!(row["joined"], true, "a slice joins its run: {row}");
        let cpu = row["cpu"].as_f64().expect("CPU utilization");
        assert!((0.0..=100.0).contains(&cpu), "{row}");
        assert!(row["memory"].as_f64().is_some_and(|m| m > 0.0), "{row}");
        // How much of iperf3's loopback traffic the window's rates catch depends on when
        // a loaded machine got to scrape; that the column is filled is what is asserted
        // (docs/warehouse.md#a-local-journey shows the figures).
        assert!(row["received"].as_f64().is_some_and(|r| r >= 0.0), "{row}");
    }
    drop(exporter);
}
