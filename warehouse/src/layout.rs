//! Where things are in a warehouse location. Facts are Hive-partitioned
//! (`<table>/kind=<kind>/date=<date>/part-<digest>.parquet`), dimensions are flat
//! (`<table>/part-<digest>.parquet`); raw records and evidence are content-addressed
//! under `raw/`; publications under `published/<name>/`. File names are digests of their
//! content, so writing the same rows twice writes the same file.

/// A partition value safe as a directory name: Hive escapes `/`, `=` and `%`; perfsweep's
/// kinds and dates never hold them, but a hand-made record might.
pub fn partition_value(value: &str) -> String {
    value
        .chars()
        .map(|c| match c {
            '/' | '=' | '%' | '\\' | ':' | ' ' => '_',
            other => other,
        })
        .collect()
}

pub fn fact_file(table: &str, kind: &str, date: &str, digest: &str) -> String {
    format!(
        "{table}/kind={}/date={}/part-{digest}.parquet",
        partition_value(kind),
        partition_value(date)
    )
}

pub fn dim_file(table: &str, digest: &str) -> String {
    format!("{table}/part-{digest}.parquet")
}

/// The raw record with `digest` (of its bytes), under its run's date so that retention
/// can expire raw records by age without reading them.
pub fn record_path(date: &str, digest: &str) -> String {
    format!("raw/records/date={}/{digest}.json", partition_value(date))
}

/// An evidence object, by the SHA-256 of its bytes.
pub fn evidence_path(sha256: &str) -> String {
    format!("raw/evidence/{sha256}.txt")
}

pub const PUBLISHED: &str = "published";

pub fn publication_dir(name: &str) -> String {
    format!("{PUBLISHED}/{name}")
}

/// A publication name is a directory name: letters, digits, `-`, `_`, `.`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_hive_partitioned_and_content_addressed() {
        assert_eq!(
            fact_file("benchmark_run_fact", "IPerf", "2026-11-27", "ab"),
            "benchmark_run_fact/kind=IPerf/date=2026-11-27/part-ab.parquet"
        );
        assert_eq!(
            fact_file("t", "a/b=c", "d", "x"),
            "t/kind=a_b_c/date=d/part-x.parquet"
        );
        assert_eq!(
            record_path("2026-01-02", "ff"),
            "raw/records/date=2026-01-02/ff.json"
        );
        assert!(valid_name("p99-ttft_v1.2"));
        for bad in ["", "../x", "a/b", ".hidden", "a b"] {
            assert!(!valid_name(bad), "{bad}");
        }
    }
}
