//! The warehouse at scale: records of 100,000 runs of mixed kinds (serving sweeps with
//! scenario × concurrency iterations, a 16-node IPerf fleet, fio, RDMA, MPI, PyTorch,
//! OpenFOAM; with telemetry slices), built into a warehouse; prints build time, peak
//! memory, size on disk and five queries' times, each side by side with DuckDB on the
//! same files.
//!
//! `cargo bench -p perfsweep-warehouse --bench warehouse` (PERFSWEEP_BENCH_RUNS to change
//! the count; the scratch directory is PERFSWEEP_BENCH_DIR or the system's temporary
//! directory).

use std::path::{Path, PathBuf};
use std::time::Instant;

use perfsweep_warehouse::derive::Options;
use perfsweep_warehouse::output::json_rows;
use perfsweep_warehouse::synth::{self, Sweep};
use perfsweep_warehouse::{Warehouse, build, duckdb};

fn vm_hwm_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Resets the peak resident set size, so that the build's peak is not generation's.
fn reset_hwm() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            total += size(&path);
        } else {
            total += entry.metadata().map_or(0, |m| m.len());
        }
    }
    total
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

#[tokio::main]
async fn main() {
    let root = std::env::var_os("PERFSWEEP_BENCH_DIR").map_or_else(
        || std::env::temp_dir().join("perfsweep-warehouse-bench"),
        PathBuf::from,
    );
    // PERFSWEEP_BENCH_REUSE=1: query the warehouse an earlier run kept (it is kept then
    // too), to compare query settings without generating and building again.
    let reuse = std::env::var_os("PERFSWEEP_BENCH_REUSE").is_some();
    let source = root.join("results");
    let wh = root.join("wh");
    if !(reuse && wh.exists()) {
        generate_and_build(&root, &source, &wh).await;
    }

    let started = Instant::now();
    let warehouse = Warehouse::open(&wh).await.expect("open");
    let open_seconds = started.elapsed().as_secs_f64();
    let run_key = warehouse
        .strings(
            "SELECT run_key FROM benchmark_run_fact WHERE kind = 'Fio' ORDER BY run_key LIMIT 1",
        )
        .await
        .expect("a run key")
        .pop()
        .unwrap_or_default();
    let (base, cand) = ("sweep-0006", "sweep-0007");
    let queries: Vec<(&str, String)> = vec![
        (
            "trend of p99 TTFT per case",
            "SELECT case_key, date, avg(ttft_p99_ms) AS p99_ttft_ms FROM serving_outcome_fact \
             WHERE concurrency = 16 GROUP BY case_key, date ORDER BY case_key, date"
                .into(),
        ),
        (
            "regressions between two run groups",
            format!(
                "WITH sides AS (SELECT case_key, headline_metric, headline_better, \
                   avg(CASE WHEN run_id = '{base}' THEN headline_value END) AS baseline, \
                   avg(CASE WHEN run_id = '{cand}' THEN headline_value END) AS candidate \
                 FROM benchmark_run_fact WHERE run_id IN ('{base}', '{cand}') AND status = 'succeeded' \
                 GROUP BY case_key, headline_metric, headline_better) \
                 SELECT case_key, headline_metric, baseline, candidate, \
                   CASE WHEN headline_better = 'higher' THEN (baseline - candidate) / baseline \
                   ELSE (candidate - baseline) / baseline END * 100 AS worse_percent \
                 FROM sides WHERE baseline <> 0 AND candidate IS NOT NULL \
                 ORDER BY worse_percent DESC, case_key LIMIT 20"
            ),
        ),
        (
            "worst 10 nodes of a fleet sweep",
            format!(
                "WITH pairs AS (SELECT node_a, node_b, value FROM system_outcome_fact \
                   WHERE run_id = '{cand}' AND metric = 'received_bits_per_second' AND scope = 'pair'), \
                 med AS (SELECT median(value) AS m FROM pairs), \
                 per_node AS (SELECT node_a AS node, value FROM pairs UNION ALL SELECT node_b, value FROM pairs) \
                 SELECT node, avg(value) / (SELECT m FROM med) AS score, count(*) AS n \
                 FROM per_node GROUP BY node ORDER BY score, node LIMIT 10"
            ),
        ),
        (
            "join through all dims",
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
        ),
        (
            "point lookup by run key",
            format!(
                "SELECT run_id, name, headline_metric, headline_value, record_path \
                 FROM benchmark_run_fact WHERE run_key = '{run_key}'"
            ),
        ),
    ];

    // PERFSWEEP_BENCH_SETTINGS="key=value,...": DataFusion settings to try.
    for setting in std::env::var("PERFSWEEP_BENCH_SETTINGS")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
    {
        let (key, value) = setting.split_once('=').expect("key=value");
        warehouse
            .context()
            .sql(&format!("SET {key} = '{value}'"))
            .await
            .expect(setting);
        println!("setting {key} = {value}");
    }
    let mut ours = Vec::new();
    for (_, sql) in &queries {
        let mut best = f64::INFINITY;
        let mut answer = Vec::new();
        for _ in 0..3 {
            let started = Instant::now();
            let batches = warehouse.query(sql).await.expect(sql);
            best = best.min(started.elapsed().as_secs_f64());
            answer = json_rows(&batches).expect("rows");
        }
        ours.push((best, answer));
    }
    println!("DataFusion: tables registered in {open_seconds:.3} s");
    let sqls: Vec<&str> = queries.iter().map(|(_, sql)| sql.as_str()).collect();
    match duckdb::run(&wh, &sqls, 3) {
        Ok(theirs) => {
            println!(
                "DuckDB {}: views created in {:.3} s",
                theirs.version, theirs.setup_seconds
            );
            println!(
                "{:<38} {:>12} {:>12} {:>8}  same answer",
                "query (best of 3)", "DataFusion", "DuckDB", "ratio"
            );
            for (i, (name, _)) in queries.iter().enumerate() {
                let (df, rows) = &ours[i];
                let dk = theirs.seconds.get(i).copied().unwrap_or(f64::NAN);
                let same = theirs
                    .results
                    .get(i)
                    .map_or_else(|| Err("no answer".to_owned()), |t| duckdb::same(rows, t));
                println!(
                    "{name:<38} {:>10.1}ms {:>10.1}ms {:>7.2}x  {} ({} rows)",
                    df * 1e3,
                    dk * 1e3,
                    df / dk,
                    match &same {
                        Ok(()) => "yes".to_owned(),
                        Err(e) => format!("NO: {e}"),
                    },
                    rows.len()
                );
            }
        }
        Err(error) => {
            println!("DuckDB not run: {error}");
            for (i, (name, _)) in queries.iter().enumerate() {
                println!(
                    "{name:<38} {:>10.1}ms ({} rows)",
                    ours[i].0 * 1e3,
                    ours[i].1.len()
                );
            }
        }
    }
    // PERFSWEEP_BENCH_EXPLAIN=1: where each query's time goes.
    if std::env::var_os("PERFSWEEP_BENCH_EXPLAIN").is_some() {
        for (name, sql) in &queries {
            let batches = warehouse
                .context()
                .sql(&format!("EXPLAIN ANALYZE {sql}"))
                .await
                .expect(sql)
                .collect()
                .await
                .expect(sql);
            println!("\n== {name} ==");
            for row in json_rows(&batches).expect("rows") {
                // (plan_type, plan)
                if let Some(plan) = row.get(1).and_then(|p| p.as_str()) {
                    println!("{plan}");
                }
            }
        }
    }
    if !reuse {
        let _ = std::fs::remove_dir_all(&root);
    }
}

/// Generates the runs' records and builds the warehouse from them, printing the figures.
async fn generate_and_build(root: &Path, source: &Path, wh: &Path) {
    let runs: usize = std::env::var("PERFSWEEP_BENCH_RUNS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(100_000);
    let _ = std::fs::remove_dir_all(root);

    // Sweeps of ~200 runs, ten a day over a month, as nightly sweeps of many clusters
    // would be; sweep 7 has a slow node and slowed fio, so the regression query finds
    // something.
    let started = Instant::now();
    let mut generated = 0;
    let mut sweep_index = 0_u64;
    let mut run_ids = Vec::new();
    while generated < runs {
        let day = sweep_index / 10;
        let start = format!(
            "2026-10-{:02}T{:02}:00:00Z",
            1 + day % 30,
            (sweep_index % 10) * 2
        );
        let run_id = format!("sweep-{sweep_index:04}");
        let mut sweep = Sweep::new(&run_id, &start, sweep_index + 1);
        sweep.fleet_nodes = 16;
        sweep.limit = Some(runs - generated);
        if sweep_index == 7 {
            sweep.slow_node = Some(("node-005".into(), 1.5));
            sweep.slow_kind = Some(("Fio".into(), 1.3));
        }
        let batch = synth::sweep(&sweep);
        generated += batch.len();
        synth::write_source(&source.join(&run_id), &batch, true).expect("sources written");
        run_ids.push(run_id);
        sweep_index += 1;
    }
    println!(
        "generated {generated} runs in {} sweeps ({:.1} MiB of JSON Lines and evidence) in {:.1} s",
        run_ids.len(),
        mib(size(source)),
        started.elapsed().as_secs_f64()
    );

    reset_hwm();
    let started = Instant::now();
    let summary = build::build(&[source.to_path_buf()], wh, &Options::default())
        .await
        .expect("build");
    let build_seconds = started.elapsed().as_secs_f64();
    let peak = vm_hwm_kib().unwrap_or(0);
    println!(
        "build: {} runs, {} telemetry slices, {} files in {build_seconds:.1} s; peak RSS {:.0} MiB",
        summary.runs_added,
        summary.slices_added,
        summary.files_written,
        peak as f64 / 1024.0
    );
    let started = Instant::now();
    let again = build::build(&[source.to_path_buf()], wh, &Options::default())
        .await
        .expect("rebuild");
    println!(
        "rebuild (idempotent): {} runs added, {} present, in {:.1} s",
        again.runs_added,
        again.runs_present,
        started.elapsed().as_secs_f64()
    );
    let raw = size(&wh.join("raw"));
    let total = size(wh);
    println!(
        "size on disk: tables {:.1} MiB, raw records and evidence {:.1} MiB, total {:.1} MiB",
        mib(total - raw),
        mib(raw),
        mib(total)
    );
}
