//! The independent engine: DuckDB (from PyPI) reads the warehouse's Parquet files as
//! they are and gets the same answers as the embedded DataFusion. Without DuckDB the test
//! fails under CI (which installs it, `.ci/run`) and says SKIPPED elsewhere.

mod support;

use perfsweep_warehouse::derive::Options;
use perfsweep_warehouse::output::json_rows;
use perfsweep_warehouse::{Warehouse, build, duckdb};
use support::{CANDIDATE, scratch, sources};

/// The questions, in SQL both engines read the same way.
fn questions() -> Vec<String> {
    vec![
        // Runs per kind, status and day: the partition columns from the paths.
        "SELECT kind, date, status, count(*) AS runs FROM benchmark_run_fact \
         GROUP BY kind, date, status ORDER BY kind, date, status"
            .into(),
        // p99 TTFT per case, workload point and concurrency point.
        "SELECT case_key, scenario, concurrency, count(*) AS n, avg(ttft_p99_ms) AS p99, \
         max(tpot_p99_ms) AS tpot FROM serving_outcome_fact \
         GROUP BY case_key, scenario, concurrency ORDER BY case_key, scenario, concurrency"
            .into(),
        // Per node of the candidate's fleet: mean received bandwidth, worst first.
        format!(
            "SELECT node, avg(value) AS mean_bps, count(*) AS n FROM ( \
               SELECT node_a AS node, value FROM system_outcome_fact \
               WHERE run_id = '{CANDIDATE}' AND metric = 'received_bits_per_second' \
               UNION ALL SELECT node_b AS node, value FROM system_outcome_fact \
               WHERE run_id = '{CANDIDATE}' AND metric = 'received_bits_per_second') t \
             GROUP BY node ORDER BY mean_bps, node"
        ),
        // A join through every dimension.
        "SELECT w.kind, s.perfsweep_version, h.gpu_product, c.zones, count(*) AS runs, \
         sum(a.evidence_bytes) AS evidence_bytes \
         FROM benchmark_run_fact r \
         JOIN workload_dim w ON r.workload_spec_digest = w.workload_spec_digest \
         JOIN software_version_dim s ON r.software_version_digest = s.software_version_digest \
         JOIN hardware_topology_dim h ON r.hardware_topology_digest = h.hardware_topology_digest \
         JOIN cluster_region_dim c ON r.cluster_region_digest = c.cluster_region_digest \
         JOIN artifact_lineage_dim a ON r.artifact_manifest_digest = a.artifact_manifest_digest \
         GROUP BY w.kind, s.perfsweep_version, h.gpu_product, c.zones ORDER BY w.kind"
            .into(),
        // Training and telemetry, nullable columns included.
        "SELECT framework, phase, scale_point, count(*) AS n, avg(samples_per_second) AS sps, \
         avg(clock_time_seconds) AS clock FROM training_outcome_fact \
         GROUP BY framework, phase, scale_point ORDER BY framework, phase, scale_point"
            .into(),
        "SELECT node, count(*) AS slices, avg(cpu_utilization_percent) AS cpu, \
         count(disk_read_bytes_per_second) AS with_disk FROM telemetry_slice_fact \
         GROUP BY node ORDER BY node"
            .into(),
    ]
}

#[tokio::test]
async fn duckdb_reads_the_same_files_and_gets_the_same_answers() {
    if let Err(why) = duckdb::version() {
        assert!(
            std::env::var_os("CI").is_none(),
            "DuckDB is required under CI (.ci/run installs it): {why}"
        );
        println!("SKIPPED duckdb_reads_the_same_files_and_gets_the_same_answers: {why}");
        return;
    }
    let dir = scratch("duckdb");
    let (sources, _) = sources(&dir);
    let wh = dir.join("wh");
    build::build(&sources, &wh, &Options::default())
        .await
        .expect("build");
    let warehouse = Warehouse::open(&wh).await.expect("open");
    let questions = questions();
    let refs: Vec<&str> = questions.iter().map(String::as_str).collect();
    let answer = duckdb::run(&wh, &refs, 1).expect("DuckDB answers");
    assert_eq!(answer.results.len(), questions.len());
    for (sql, theirs) in questions.iter().zip(&answer.results) {
        let ours = json_rows(&warehouse.query(sql).await.expect(sql)).expect("rows");
        assert!(!ours.is_empty(), "no rows to compare: {sql}");
        if let Err(difference) = duckdb::same(&ours, theirs) {
            panic!(
                "DuckDB {} and DataFusion differ on\n{sql}\n{difference}",
                answer.version
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
