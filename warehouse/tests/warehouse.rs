//! A warehouse built from generated sweeps answers queries as the records say, loads
//! idempotently, finds what changed, and keeps what publications reference.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use perfsweep_benchmarks::results::record::RecordOutcome;
use perfsweep_warehouse::derive::Options;
use perfsweep_warehouse::output::json_rows;
use perfsweep_warehouse::{Warehouse, build, changed, publish, retention};
use serde_json::Value;
use support::{BASELINE, CANDIDATE, SLOW_NODE, files, scratch, sources};

async fn rows(warehouse: &Warehouse, sql: &str) -> Vec<Vec<Value>> {
    let batches = warehouse.query(sql).await.expect(sql);
    json_rows(&batches).expect("rows")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[tokio::test]
async fn queries_answer_what_the_records_say_and_loading_twice_adds_nothing() {
    let dir = scratch("queries");
    let (sources, runs) = sources(&dir);
    let wh = dir.join("wh");
    let summary = build::build(&sources, &wh, &Options::default())
        .await
        .expect("build");
    assert_eq!(summary.records_read, runs.len());
    assert_eq!(summary.runs_added, runs.len());
    assert_eq!(summary.copies, 0);
    assert!(
        summary.evidence_problems.is_empty(),
        "{:?}",
        summary.evidence_problems
    );
    let slices: usize = runs.iter().map(|r| r.slices.len()).sum();
    assert_eq!(summary.slices_added, slices);

    let warehouse = Warehouse::open(&wh).await.expect("open");
    // Runs per kind and status.
    let mut expected: BTreeMap<(String, String), i64> = BTreeMap::new();
    for run in &runs {
        let status = if run.record.succeeded() {
            "succeeded"
        } else {
            "failed"
        };
        *expected
            .entry((run.record.benchmark.kind.clone(), status.to_owned()))
            .or_default() += 1;
    }
    let got = rows(
        &warehouse,
        "SELECT kind, status, count(*) FROM benchmark_run_fact GROUP BY kind, status ORDER BY kind, status",
    )
    .await;
    let got: BTreeMap<(String, String), i64> = got
        .iter()
        .map(|r| {
            (
                (
                    r[0].as_str().unwrap_or_default().to_owned(),
                    r[1].as_str().unwrap_or_default().to_owned(),
                ),
                r[2].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    assert_eq!(got, expected);

    // p99 TTFT per case, scenario and concurrency of the baseline, from the records.
    let mut p99: BTreeMap<(String, String, i64), Vec<f64>> = BTreeMap::new();
    for run in runs.iter().filter(|r| r.record.run_id == BASELINE) {
        let RecordOutcome::Succeeded { result, .. } = &run.record.outcome else {
            continue;
        };
        for it in result["iterations"].as_array().into_iter().flatten() {
            p99.entry((
                run.record.case_key(),
                it["scenario"].as_str().unwrap_or_default().to_owned(),
                it["concurrency"].as_i64().unwrap_or(0),
            ))
            .or_default()
            .push(it["ttftMillis"]["p99"].as_f64().unwrap_or(f64::NAN));
        }
    }
    assert!(!p99.is_empty());
    let got = rows(
        &warehouse,
        &format!(
            "SELECT case_key, scenario, concurrency, avg(ttft_p99_ms) FROM serving_outcome_fact \
             WHERE run_id = '{BASELINE}' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ),
    )
    .await;
    assert_eq!(got.len(), p99.len());
    for (row, ((case, scenario, concurrency), values)) in got.iter().zip(&p99) {
        assert_eq!(row[0].as_str(), Some(case.as_str()));
        assert_eq!(row[1].as_str(), Some(scenario.as_str()));
        assert_eq!(row[2].as_i64(), Some(*concurrency));
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert!(
            close(row[3].as_f64().unwrap_or(f64::NAN), mean),
            "{row:?} against {mean}"
        );
    }

    // The fleet's worst node in the candidate is the one made slow.
    let worst = rows(
        &warehouse,
        &format!(
            "SELECT node FROM worst_nodes WHERE run_id = '{CANDIDATE}' \
             AND metric = 'received_bits_per_second' ORDER BY mean_score, node LIMIT 10"
        ),
    )
    .await;
    assert_eq!(worst.first().and_then(|r| r[0].as_str()), Some(SLOW_NODE));
    let baseline_worst = rows(
        &warehouse,
        &format!(
            "SELECT min(mean_score) FROM worst_nodes WHERE run_id = '{BASELINE}' \
             AND metric = 'received_bits_per_second'"
        ),
    )
    .await;
    assert!(
        baseline_worst[0][0].as_f64().is_some_and(|s| s > 0.9),
        "{baseline_worst:?}"
    );

    // Every run joins exactly one row of every dimension; dimensions hold each digest
    // once, and as many as the records have distinct ones.
    let joined = rows(
        &warehouse,
        "SELECT count(*) FROM benchmark_run_fact r
         JOIN workload_dim w ON r.workload_spec_digest = w.workload_spec_digest
         JOIN software_version_dim s ON r.software_version_digest = s.software_version_digest
         JOIN hardware_topology_dim h ON r.hardware_topology_digest = h.hardware_topology_digest
         JOIN cluster_region_dim c ON r.cluster_region_digest = c.cluster_region_digest
         JOIN artifact_lineage_dim a ON r.artifact_manifest_digest = a.artifact_manifest_digest",
    )
    .await;
    assert_eq!(joined[0][0].as_i64(), Some(runs.len() as i64));
    let specs: BTreeSet<&str> = runs
        .iter()
        .map(|r| r.record.workload_spec_digest.as_str())
        .collect();
    let manifests: BTreeSet<&str> = runs
        .iter()
        .filter_map(|r| r.record.artifact_manifest_digest.as_deref())
        .collect();
    for (table, key, distinct) in [
        ("workload_dim", "workload_spec_digest", Some(specs.len())),
        (
            "artifact_lineage_dim",
            "artifact_manifest_digest",
            Some(manifests.len()),
        ),
        ("software_version_dim", "software_version_digest", None),
        ("hardware_topology_dim", "hardware_topology_digest", None),
        ("cluster_region_dim", "cluster_region_digest", None),
    ] {
        let got = rows(
            &warehouse,
            &format!("SELECT count(*), count(DISTINCT {key}) FROM {table}"),
        )
        .await;
        assert_eq!(got[0][0], got[0][1], "{table} holds a digest twice");
        if let Some(distinct) = distinct {
            assert_eq!(got[0][0].as_i64(), Some(distinct as i64), "{table}");
        }
    }

    // Queries are read-only: nothing writes into the warehouse or reads elsewhere.
    for statement in [
        format!("COPY (SELECT 1) TO '{}/x.csv'", wh.display()),
        "CREATE VIEW v AS SELECT 1".to_owned(),
        "SET datafusion.execution.batch_size = 1".to_owned(),
    ] {
        assert!(warehouse.query(&statement).await.is_err(), "{statement}");
    }

    // Loading the same sources again, or one of them twice, adds no row and no file.
    let before = files(&wh);
    let again = build::build(&sources, &wh, &Options::default())
        .await
        .expect("rebuild");
    assert_eq!(again.runs_added, 0);
    assert_eq!(again.runs_present, runs.len());
    assert_eq!(again.slices_added, 0);
    assert_eq!(files(&wh), before);
    let twice = [sources[0].clone(), sources[0].clone()];
    let doubled = build::build(&twice, &wh, &Options::default())
        .await
        .expect("doubled");
    assert_eq!(doubled.runs_added, 0);
    assert_eq!(doubled.copies, doubled.records_read / 2);
    let warehouse = Warehouse::open(&wh).await.expect("reopen");
    let count = rows(
        &warehouse,
        "SELECT count(*), count(DISTINCT run_key) FROM benchmark_run_fact",
    )
    .await;
    assert_eq!(count[0][0].as_i64(), Some(runs.len() as i64));
    assert_eq!(count[0][0], count[0][1]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn what_changed_walks_from_slower_cases_to_nodes_and_evidence() {
    let dir = scratch("changed");
    let (sources, _) = sources(&dir);
    let wh = dir.join("wh");
    build::build(&sources, &wh, &Options::default())
        .await
        .expect("build");
    let warehouse = Warehouse::open(&wh).await.expect("open");
    let report = changed::what_changed(&warehouse, BASELINE, CANDIDATE, 5.0)
        .await
        .expect("what changed");
    // Slowed fio: every fio case got worse; the slow node's pairs too.
    let kinds: BTreeSet<&str> = report
        .slower_cases
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert!(kinds.contains("Fio"), "{kinds:?}");
    assert!(kinds.contains("IPerf"), "{kinds:?}");
    assert!(report.slower_cases.iter().all(|c| c.worse_percent > 5.0));
    // Named for a person by their permutation, not only by their digest.
    assert!(
        report
            .slower_cases
            .iter()
            .all(|c| !c.permutation.is_empty()),
        "{:?}",
        report.slower_cases
    );
    assert!(
        report
            .points
            .iter()
            .any(|p| p.point.contains(SLOW_NODE) && p.metric == "received_bits_per_second"),
        "{:?}",
        report.points
    );
    let nodes: BTreeSet<&str> = report
        .abnormal_nodes
        .iter()
        .map(|n| n.node.as_str())
        .collect();
    assert!(nodes.contains(SLOW_NODE), "{nodes:?}");
    assert!(
        report
            .abnormal_nodes
            .iter()
            .any(|n| n.node == SLOW_NODE && n.finding.contains("cpu_utilization_percent")),
        "telemetry names the hot node: {:?}",
        report.abnormal_nodes
    );
    assert!(!report.evidence.is_empty());
    for link in &report.evidence {
        assert!(wh.join(&link.record_path).is_file(), "{}", link.record_path);
        for path in link.evidence_paths.split(',').filter(|p| !p.is_empty()) {
            assert!(wh.join(path).is_file(), "{path}");
        }
    }
    let text = changed::render(&report);
    assert!(text.contains("abnormal nodes") && text.contains(SLOW_NODE));
    let first = &report.slower_cases[0];
    assert!(
        text.contains(&format!("{} (case {})", first.permutation, first.case_key)),
        "{text}"
    );

    // Against itself nothing changed.
    let same = changed::what_changed(&warehouse, BASELINE, BASELINE, 5.0)
        .await
        .expect("same run");
    assert!(same.slower_cases.is_empty());
    let missing = changed::what_changed(&warehouse, BASELINE, "nightly-9", 5.0).await;
    assert!(missing.is_err_and(|e| e.to_string().contains("nightly-9")));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn retention_expires_by_tier_but_keeps_what_a_publication_references() {
    let dir = scratch("retention");
    let (sources, runs) = sources(&dir);
    let wh = dir.join("wh");
    build::build(&sources, &wh, &Options::default())
        .await
        .expect("build");
    let warehouse = Warehouse::open(&wh).await.expect("open");
    let publication = publish::publish(
        &warehouse,
        "fio-baseline",
        &format!(
            "SELECT case_key, avg(headline_value) AS mean, string_agg(run_key, ',') AS run_keys \
             FROM benchmark_run_fact WHERE kind = 'Fio' AND run_id = '{BASELINE}' \
             AND status = 'succeeded' GROUP BY case_key ORDER BY case_key"
        ),
    )
    .await
    .expect("publish");
    let referenced: BTreeSet<String> = publication
        .rows
        .iter()
        .flat_map(|r| r.runs.iter().map(|run| run.record_path.clone()))
        .collect();
    assert!(!referenced.is_empty());

    let policy = retention::Policy {
        warm_days: 30,
        cold_days: 60,
    };
    // Ten days later nothing expires.
    let early = retention::plan(&wh, policy, "2026-11-30".parse().expect("date")).expect("plan");
    assert_eq!(early, retention::Plan::default());
    // 45 days later the facts have, the raw store has not.
    let warm = retention::plan(&wh, policy, "2027-01-04".parse().expect("date")).expect("plan");
    assert!(!warm.fact_partitions.is_empty());
    assert!(warm.records.is_empty() && warm.evidence.is_empty());
    // 90 days later all but the referenced raw records and their evidence go.
    let cold = retention::plan(&wh, policy, "2027-02-18".parse().expect("date")).expect("plan");
    assert_eq!(
        cold.records.len() + cold.kept_for_publications.len(),
        runs.len()
    );
    let kept: BTreeSet<String> = cold.kept_for_publications.iter().cloned().collect();
    assert_eq!(kept, referenced);
    assert!(cold.records.iter().all(|r| !referenced.contains(r)));
    retention::apply(&wh, &cold).expect("apply");
    for path in &cold.records {
        assert!(!wh.join(path).exists(), "{path}");
    }
    // The published numbers still walk back to their evidence.
    for row in 0..publication.rows.len() {
        publish::explain(&wh, "fio-baseline", row).expect("the walk survives retention");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_build_in_small_chunks_holds_the_same_rows() {
    let dir = scratch("chunks");
    let (sources, runs) = sources(&dir);
    let (whole, chunked) = (dir.join("whole"), dir.join("chunked"));
    build::build(&sources, &whole, &Options::default())
        .await
        .expect("build");
    // A chunk per source file or so: many part files, dimension rows written once.
    let summary = build::build_in_chunks(&sources, &chunked, &Options::default(), 50)
        .await
        .expect("chunked build");
    assert_eq!(summary.runs_added, runs.len());
    let questions = [
        "SELECT kind, date, count(*), sum(headline_value) FROM benchmark_run_fact GROUP BY kind, date ORDER BY kind, date",
        "SELECT count(*), count(DISTINCT workload_spec_digest) FROM workload_dim",
        "SELECT count(*), count(DISTINCT software_version_digest) FROM software_version_dim",
        "SELECT count(*), avg(ttft_p99_ms) FROM serving_outcome_fact",
        "SELECT count(*), count(DISTINCT slice_digest) FROM telemetry_slice_fact",
    ];
    let (a, b) = (
        Warehouse::open(&whole).await.expect("open"),
        Warehouse::open(&chunked).await.expect("open"),
    );
    for sql in questions {
        let (x, y) = (rows(&a, sql).await, rows(&b, sql).await);
        assert!(!x.is_empty());
        assert_eq!(perfsweep_warehouse::duckdb::same(&x, &y), Ok(()), "{sql}");
    }
    let part_files = |dir: &std::path::Path| {
        files(dir)
            .iter()
            .filter(|f| f.ends_with(".parquet"))
            .count()
    };
    assert!(part_files(&chunked) > part_files(&whole));
    let _ = std::fs::remove_dir_all(&dir);
}
