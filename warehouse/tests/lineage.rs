//! A published number walks back to its query, runs and raw evidence, every digest
//! verified; a tampered artifact, record, rollup or query breaks the walk.

mod support;

use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
use perfsweep_warehouse::derive::Options;
use perfsweep_warehouse::publish::{self, MIN_REPETITIONS};
use perfsweep_warehouse::{Error, Warehouse, build};
use support::{BASELINE, scratch, sources};

const FIO_BY_CASE: &str = "
SELECT case_key, avg(headline_value) AS mean_iops, count(*) AS runs,
       string_agg(run_key, ',') AS run_keys
FROM benchmark_run_fact
WHERE kind = 'Fio' AND status = 'succeeded' AND headline_metric = 'read_bandwidth_bytes_per_second'
GROUP BY case_key ORDER BY case_key";

#[tokio::test]
async fn a_published_number_walks_back_to_verified_evidence_and_tampering_breaks_the_walk() {
    let dir = scratch("lineage");
    let (sources, runs) = sources(&dir);
    let wh = dir.join("wh");
    build::build(&sources, &wh, &Options::default())
        .await
        .expect("build");
    let warehouse = Warehouse::open(&wh).await.expect("open");

    let publication = publish::publish(&warehouse, "fio", FIO_BY_CASE)
        .await
        .expect("publish");
    let fio_cases: std::collections::BTreeSet<String> = runs
        .iter()
        .filter(|r| r.record.benchmark.kind == "Fio" && r.record.succeeded())
        .map(|r| r.record.case_key())
        .collect();
    assert_eq!(publication.rows.len(), fio_cases.len());
    assert_eq!(
        publication.query_spec_digest,
        perfsweep_benchmarks::execution::agent_report::sha256_hex(FIO_BY_CASE.trim().as_bytes())
    );
    for row in &publication.rows {
        let runs_column: usize = row.values["runs"].parse().expect("a count");
        assert_eq!(
            row.runs.len(),
            runs_column,
            "every run behind the number is named"
        );
        // Both nightlies, the second with fio slowed by 30%: the spread is high.
        assert!(row.unstable, "{row:?}");
        assert!(
            row.stability_note.contains("high CV"),
            "{}",
            row.stability_note
        );
    }
    // The rollup is Parquet with the query's columns and the lineage columns.
    let file = std::fs::File::open(wh.join("published/fio/rollup.parquet")).expect("rollup");
    let reader = SerializedFileReader::new(file).expect("a Parquet rollup");
    let metadata = reader.metadata().file_metadata();
    assert_eq!(metadata.num_rows(), publication.rows.len() as i64);
    let columns: Vec<&str> = metadata
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name())
        .collect();
    for column in [
        "case_key",
        "mean_iops",
        "run_keys",
        "query_spec_digest",
        "query_text",
        "record_digests",
        "artifact_manifest_digests",
        "unstable",
        "stability_note",
    ] {
        assert!(columns.contains(&column), "{column} in {columns:?}");
    }

    // One repetition behind a number is flagged as such.
    let single = publish::publish(
        &warehouse,
        "single",
        &format!(
            "SELECT name, headline_value, run_key AS run_keys FROM benchmark_run_fact \
             WHERE kind = 'Fio' AND run_id = '{BASELINE}' AND status = 'succeeded' ORDER BY name LIMIT 1"
        ),
    )
    .await
    .expect("publish one run");
    assert!(single.rows[0].unstable);
    assert!(
        single.rows[0]
            .stability_note
            .contains(&format!("< {MIN_REPETITIONS}")),
        "{}",
        single.rows[0].stability_note
    );

    // A query that does not name its runs cannot be published.
    let untraceable = publish::publish(
        &warehouse,
        "untraceable",
        "SELECT kind, count(*) FROM benchmark_run_fact GROUP BY kind",
    )
    .await;
    assert!(
        matches!(&untraceable, Err(Error::Publication { message, .. }) if message.contains("run_keys")),
        "{untraceable:?}"
    );

    // The walk: rollup, query, then per run its record, spec, evidence and manifest.
    let walk = publish::explain(&wh, "fio", 0).expect("an intact walk");
    let row = &publication.rows[0];
    let evidence_steps = walk
        .steps
        .iter()
        .filter(|s| s.what.starts_with("evidence "))
        .count();
    assert_eq!(evidence_steps, row.runs.len());
    assert_eq!(
        walk.steps
            .iter()
            .filter(|s| s.what.contains(" record "))
            .count(),
        row.runs.len()
    );
    assert_eq!(walk.values, row.values);
    assert!(publish::explain(&wh, "fio", publication.rows.len()).is_err());

    // Tampered evidence: one byte of one object of the row.
    let first = &row.runs[0];
    let record: perfsweep_benchmarks::results::record::ResultRecord =
        serde_json::from_slice(&std::fs::read(wh.join(&first.record_path)).expect("record"))
            .expect("a record");
    let sha = &record.evidence.as_ref().expect("evidence").sha256;
    let evidence = wh.join(perfsweep_warehouse::layout::evidence_path(sha));
    let original = std::fs::read(&evidence).expect("evidence");
    let mut altered = original.clone();
    altered[0] ^= 1;
    std::fs::write(&evidence, &altered).expect("tamper");
    let broken = publish::explain(&wh, "fio", 0).expect_err("a tampered artifact");
    let message = broken.to_string();
    assert!(matches!(broken, Error::Lineage { .. }), "{message}");
    assert!(
        message.contains(sha) && message.contains("altered"),
        "{message}"
    );
    // Other rows do not reference it and still walk.
    publish::explain(&wh, "fio", 1).expect("an untouched row");
    std::fs::write(&evidence, &original).expect("restore");
    publish::explain(&wh, "fio", 0).expect("restored");

    // Tampered raw record.
    let record_path = wh.join(&first.record_path);
    let original = std::fs::read(&record_path).expect("record");
    std::fs::write(
        &record_path,
        String::from_utf8_lossy(&original).replace("\"Fio\"", "\"Fio \""),
    )
    .expect("tamper");
    let message = publish::explain(&wh, "fio", 0)
        .expect_err("a tampered record")
        .to_string();
    assert!(message.contains(&first.record_path), "{message}");
    std::fs::write(&record_path, &original).expect("restore");

    // Deleted evidence is a broken walk too.
    std::fs::remove_file(&evidence).expect("delete");
    let message = publish::explain(&wh, "fio", 0)
        .expect_err("missing evidence")
        .to_string();
    assert!(message.contains("cannot be read"), "{message}");
    std::fs::write(&evidence, original_evidence(&runs, sha)).expect("restore");

    // Tampered rollup and query text.
    let rollup = wh.join("published/fio/rollup.parquet");
    let bytes = std::fs::read(&rollup).expect("rollup");
    let mut altered = bytes.clone();
    let middle = altered.len() / 2;
    altered[middle] ^= 1;
    std::fs::write(&rollup, &altered).expect("tamper");
    assert!(publish::explain(&wh, "fio", 0).is_err_and(|e| e.to_string().contains("rollup")));
    std::fs::write(&rollup, &bytes).expect("restore");
    let manifest = wh.join("published/fio/publication.json");
    let text = std::fs::read_to_string(&manifest).expect("manifest");
    std::fs::write(
        &manifest,
        text.replace("avg(headline_value)", "max(headline_value)"),
    )
    .expect("tamper");
    assert!(publish::explain(&wh, "fio", 0).is_err_and(|e| e.to_string().contains("query")));
    std::fs::write(&manifest, text).expect("restore");
    publish::explain(&wh, "fio", 0).expect("whole again");
    let _ = std::fs::remove_dir_all(&dir);
}

fn original_evidence(runs: &[perfsweep_warehouse::synth::Generated], sha: &str) -> Vec<u8> {
    runs.iter()
        .find(|r| r.record.evidence.as_ref().is_some_and(|e| e.sha256 == sha))
        .map(|r| r.evidence.clone().into_bytes())
        .unwrap_or_default()
}
