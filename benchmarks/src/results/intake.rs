//! Reading result records without trusting them: which files are records at all, which
//! schema versions this perfsweep understands, which records are the same run counted
//! twice, and whether a record's evidence is still what it says. Pure: the CLI reads the
//! files and prints what this module finds.

use std::collections::HashSet;

use serde_json::Value;

use crate::results::record::{Evidence, ResultRecord, SCHEMA_VERSION};

/// What one JSON file in a results directory turned out to be.
#[derive(Debug)]
pub enum Intake {
    Record(Box<ResultRecord>),
    /// Not a result record (a stray `notes.json`, a file that is not JSON): skipped,
    /// with the reason.
    NotARecord(String),
}

/// A file that claims to be a result record but cannot be used.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum IntakeError {
    #[error(
        "schemaVersion {found:?} is not one this perfsweep reads ({SCHEMA_VERSION}); \
         read it with the perfsweep release that wrote it"
    )]
    UnknownSchema { found: String },
    #[error("a {SCHEMA_VERSION} record, but {path}: {message}")]
    Invalid { path: String, message: String },
}

/// Reads one file's text.
pub fn read(text: &str) -> Result<Intake, IntakeError> {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(e) => return Ok(Intake::NotARecord(format!("not JSON ({e})"))),
    };
    let Some(version) = value.get("schemaVersion") else {
        return Ok(Intake::NotARecord(
            "no schemaVersion: not a result record".into(),
        ));
    };
    let Some(version) = version.as_str() else {
        return Ok(Intake::NotARecord(
            "schemaVersion is not a string: not a result record".into(),
        ));
    };
    if version != SCHEMA_VERSION {
        return Err(IntakeError::UnknownSchema {
            found: version.to_owned(),
        });
    }
    serde_path_to_error::deserialize(value)
        .map(|record| Intake::Record(Box::new(record)))
        .map_err(|e| IntakeError::Invalid {
            path: e.path().to_string(),
            message: e.into_inner().to_string(),
        })
}

/// The identity of a run of a benchmark: two records with the same one are copies.
fn identity(record: &ResultRecord) -> (String, String, String, Option<u32>) {
    (
        record.run_id.clone(),
        record.benchmark.kind.clone(),
        record.benchmark.name.clone(),
        record.benchmark.repetition,
    )
}

/// Keeps the first record of every run id and benchmark; a warning for each copy left
/// out (copies would count one run as several repetitions and narrow its confidence
/// interval). `origins` names where each record came from, for the warnings.
pub fn dedupe<T>(records: Vec<(T, ResultRecord)>) -> (Vec<(T, ResultRecord)>, Vec<String>)
where
    T: std::fmt::Display,
{
    let mut seen = HashSet::new();
    let mut kept = Vec::with_capacity(records.len());
    let mut warnings = Vec::new();
    for (origin, record) in records {
        if seen.insert(identity(&record)) {
            kept.push((origin, record));
        } else {
            warnings.push(format!(
                "{origin}: a copy of run {} benchmark {} already read; counted once",
                record.run_id, record.benchmark.name
            ));
        }
    }
    (kept, warnings)
}

/// What is wrong with a record's evidence file (`bytes` as read, `None` when it is not
/// there), or `None` when it matches its digest.
pub fn evidence_problem(evidence: &Evidence, bytes: Option<&[u8]>) -> Option<String> {
    let Some(bytes) = bytes else {
        return Some(format!("evidence {} is missing", evidence.path));
    };
    let digest = crate::execution::agent_report::sha256_hex(bytes);
    (digest != evidence.sha256).then(|| {
        format!(
            "evidence {} does not match its digest (sha256 {digest}, the record says {})",
            evidence.path, evidence.sha256
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::testing::iperf;

    fn text(record: &ResultRecord) -> String {
        serde_json::to_string(record).expect("serializes")
    }

    /// Finding 9 of issue 18: an unknown schema version was accepted.
    #[test]
    fn unknown_schema_versions_are_refused() {
        let mut record = iperf("r", "a", 1, 0, 1.0);
        assert!(matches!(read(&text(&record)), Ok(Intake::Record(_))));
        record.schema_version = "perfsweep.io/result/v9".into();
        let error = read(&text(&record)).unwrap_err();
        assert_eq!(
            error,
            IntakeError::UnknownSchema {
                found: "perfsweep.io/result/v9".into()
            }
        );
        assert!(error.to_string().contains(SCHEMA_VERSION));
    }

    /// Finding 9: a stray `notes.json` aborted every `results` command.
    #[test]
    fn other_files_are_not_records() {
        for other in [
            "{\"notes\": \"baseline on node-a\"}",
            "[1, 2]",
            "not json",
            "{\"schemaVersion\": 3}",
        ] {
            assert!(matches!(read(other), Ok(Intake::NotARecord(_))), "{other}");
        }
        let mut broken: Value = serde_json::to_value(iperf("r", "a", 1, 0, 1.0)).unwrap();
        broken["benchmark"]["name"] = Value::from(7);
        let error = read(&broken.to_string()).unwrap_err();
        assert!(
            matches!(&error, IntakeError::Invalid { path, .. } if path == "benchmark.name"),
            "{error}"
        );
    }

    /// Finding 9: the same records copied twice counted as twice the repetitions.
    #[test]
    fn copies_count_once() {
        let records = vec![
            ("a/1.json", iperf("r", "a", 1, 0, 1.0)),
            ("a/2.json", iperf("r", "a", 1, 1, 1.1)),
            ("copy/1.json", iperf("r", "a", 1, 0, 1.0)),
            ("other-run/1.json", iperf("s", "a", 1, 0, 1.0)),
        ];
        let (kept, warnings) = dedupe(records);
        let kept: Vec<&str> = kept.iter().map(|(origin, _)| *origin).collect();
        assert_eq!(kept, ["a/1.json", "a/2.json", "other-run/1.json"]);
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].starts_with("copy/1.json: a copy of run r"),
            "{}",
            warnings[0]
        );
    }

    /// Finding 9: missing or altered evidence went unnoticed.
    #[test]
    fn evidence_is_checked_against_its_digest() {
        let raw = b"iperf3 output\n";
        let evidence = Evidence {
            sha256: crate::execution::agent_report::sha256_hex(raw),
            bytes: raw.len() as u64,
            path: "evidence/x.txt".into(),
        };
        assert_eq!(evidence_problem(&evidence, Some(raw)), None);
        assert!(evidence_problem(&evidence, None).is_some_and(|p| p.contains("missing")));
        assert!(
            evidence_problem(&evidence, Some(b"edited\n"))
                .is_some_and(|p| p.contains("does not match"))
        );
    }
}
