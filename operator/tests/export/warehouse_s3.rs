//! A warehouse kept in S3 (moto): built from records exported to the same bucket, built
//! again idempotently from another machine's cache, queried, published and walked back
//! through fresh caches, a tampered evidence object failing the walk; and a results
//! directory loaded with `results upload --warehouse`.

use crate::export_s3::{SECRET, results_dir, upload};
use crate::support;

use std::path::Path;

use perfsweep_benchmarks::results::record::{ResultRecord, artifact_manifest_digest};
use perfsweep_benchmarks::set::expand::workload_spec_digest;
use std::process::{Command, Output};

/// `perfsweep ARGS` against the moto on `port`, with its credentials.
fn perfsweep_s3(port: u16, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_perfsweep"));
    command
        .args(args)
        .arg("--location-param")
        .arg(format!("endpoint=http://127.0.0.1:{port}"))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", SECRET);
    command
}

fn warehouse(port: u16, cache: &Path, args: &[&str]) -> Output {
    let output = perfsweep_s3(port, &[&["warehouse"], args].concat())
        .arg("--cache-dir")
        .arg(cache)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep warehouse {args:?}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&output.stderr).contains(SECRET),
        "the secret key was printed"
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test]
async fn a_warehouse_in_s3_builds_from_exported_records_and_walks_back_to_evidence() {
    let Some(moto) = support::s3::moto() else {
        return;
    };
    let port = moto.port;
    moto.create_bucket("perf");
    let (results, sha256) = results_dir("warehouse-s3");
    // The walk recomputes the digests: the record must carry the real ones.
    let file = results.join("iperf-0.json");
    let mut record: ResultRecord =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("record")).expect("a record");
    record.workload_spec_digest = workload_spec_digest("IPerf", &record.spec);
    record.artifact_manifest_digest = artifact_manifest_digest(record.evidence.iter());
    std::fs::write(&file, serde_json::to_vec(&record).expect("JSON")).expect("record");
    assert!(
        upload(&results, "s3://perf/exports", port, 3)
            .status
            .success()
    );
    let caches = std::env::temp_dir().join(format!("perfsweep-wh-s3-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&caches);
    let cache = |n: &str| caches.join(n);

    let built = warehouse(
        port,
        &cache("a"),
        &["build", "s3://perf/exports", "--output", "s3://perf/wh"],
    );
    assert!(built.status.success());
    assert!(
        stdout(&built).contains("1 run(s) added"),
        "{}",
        stdout(&built)
    );
    let names = support::s3::store(port, "perf", "wh", SECRET)
        .list()
        .await
        .expect("the warehouse's listing");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("benchmark_run_fact/kind=IPerf/")),
        "{names:?}"
    );
    assert!(
        names.contains(&format!("raw/evidence/{sha256}.txt")),
        "{names:?}"
    );

    // Another machine (a fresh cache) finds the run already there.
    let again = warehouse(
        port,
        &cache("b"),
        &["build", "s3://perf/exports", "--output", "s3://perf/wh"],
    );
    assert!(
        stdout(&again).contains("0 run(s) added, 1 already"),
        "{}",
        stdout(&again)
    );

    let query = warehouse(
        port,
        &cache("c"),
        &[
            "query",
            "s3://perf/wh",
            "SELECT count(*) AS runs FROM benchmark_run_fact",
            "--format",
            "csv",
        ],
    );
    assert!(query.status.success());
    assert_eq!(
        stdout(&query).lines().nth(1),
        Some("1"),
        "{}",
        stdout(&query)
    );

    let sql = caches.join("p.sql");
    std::fs::write(
        &sql,
        "SELECT kind, string_agg(run_key, ',') AS run_keys FROM benchmark_run_fact GROUP BY kind",
    )
    .expect("query file");
    let sql = sql.to_str().expect("UTF-8");
    let published = warehouse(
        port,
        &cache("c"),
        &[
            "publish",
            "--warehouse",
            "s3://perf/wh",
            "--query",
            sql,
            "--name",
            "kinds",
        ],
    );
    assert!(published.status.success());
    let explained = warehouse(
        port,
        &cache("d"),
        &["explain", "kinds", "0", "--warehouse", "s3://perf/wh"],
    );
    assert!(explained.status.success());
    assert!(
        stdout(&explained).contains(&sha256),
        "{}",
        stdout(&explained)
    );

    // Someone rewrites the evidence in the bucket: a walk from a fresh copy fails.
    support::s3::store(port, "perf", "wh", SECRET)
        .put(
            &format!("raw/evidence/{sha256}.txt"),
            bytes::Bytes::from_static(b"made up\n"),
        )
        .await
        .expect("tampering");
    let tampered = warehouse(
        port,
        &cache("e"),
        &["explain", "kinds", "0", "--warehouse", "s3://perf/wh"],
    );
    assert!(!tampered.status.success());
    assert!(
        String::from_utf8_lossy(&tampered.stderr).contains(&sha256),
        "the failed walk names the digest"
    );

    // `results upload --warehouse` loads a results directory the same way, once.
    for expected in ["1 run(s) added", "0 run(s) added, 1 already"] {
        let results = results.to_str().expect("UTF-8 path");
        let uploaded = perfsweep_s3(port, &["results", "upload", results])
            .args(["--warehouse", "s3://perf/wh2"])
            .env("PERFSWEEP_WAREHOUSE_CACHE", cache("f"))
            .output()
            .expect("perfsweep runs");
        assert!(uploaded.status.success(), "{uploaded:?}");
        assert!(stdout(&uploaded).contains(expected), "{uploaded:?}");
    }
    let names = support::s3::store(port, "perf", "wh2", SECRET)
        .list()
        .await
        .expect("the second warehouse's listing");
    assert!(
        names.iter().any(|n| n.starts_with("benchmark_run_fact/")),
        "{names:?}"
    );

    // `results report` reads the export location's JSON Lines through the same mirror.
    let report_dir = caches.join("report");
    let report_arg = report_dir.to_str().expect("UTF-8 path");
    let reported = perfsweep_s3(port, &["results", "report", "s3://perf/exports"])
        .args(["-o", report_arg])
        .env("PERFSWEEP_WAREHOUSE_CACHE", cache("g"))
        .output()
        .expect("perfsweep runs");
    assert!(reported.status.success(), "{reported:?}");
    let md = std::fs::read_to_string(report_dir.join("report.md")).expect("report.md");
    assert!(
        md.contains("1 runs from run 20260101T000000Z-abc123"),
        "{md}"
    );
    let _ = std::fs::remove_dir_all(&caches);
    let _ = std::fs::remove_dir_all(&results);
}
