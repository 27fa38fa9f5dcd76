//! Result records (one per benchmark run) and working with them: grouping repetitions
//! into cases with statistics, comparing two result sets, CSV export, SVG charts and
//! reports. Pure: records in, text out; reading directories is the CLI's job
//! (`perfsweep results`).

pub mod compare;
pub mod csv;
pub mod fleet;
pub mod fleet_report;
pub mod heatmap;
pub mod intake;
pub mod nodes;
pub mod plot;
pub mod provenance;
pub mod raster;
pub mod record;
pub mod report;
pub mod units;

use serde_json::{Map, Value};

use crate::judging::metrics::Better;
use crate::judging::stats::{Stability, Summary};
use crate::results::record::ResultRecord;

// Kept here for the CLI and reports that format numbers through `results`.
pub use crate::formats::number::si;

/// The repetitions of one permutation (one case) and their statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Case {
    /// The benchmark case id, or for records without one the kind and permutation.
    pub key: String,
    pub kind: String,
    pub set: Option<String>,
    pub permutation: Map<String, Value>,
    pub workload_spec_digest: String,
    /// Runs of this case, succeeded or not.
    pub runs: usize,
    pub failed: usize,
    /// Per metric (in the kind's order, headline first), over succeeded runs.
    pub metrics: Vec<MetricStats>,
    /// Indices into the records given to [`group`].
    pub records: Vec<usize>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct MetricStats {
    pub name: String,
    pub better: Better,
    pub summary: Summary,
}

impl Case {
    pub fn metric(&self, name: &str) -> Option<&MetricStats> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// The headline metric: the first one.
    pub fn headline(&self) -> Option<&MetricStats> {
        self.metrics.first()
    }

    /// The key used to match cases without a shared case id: kind + permutation values.
    pub fn fallback_key(&self) -> String {
        crate::results::record::fallback_case_key(&self.kind, &self.permutation)
    }
}

/// Groups records into cases (first-seen order) with per-metric statistics.
pub fn group(records: &[ResultRecord], stability: Stability) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut values: Vec<Vec<(String, Better, Vec<f64>)>> = Vec::new();
    for (index, record) in records.iter().enumerate() {
        let key = record.case_key();
        let position = if let Some(position) = cases.iter().position(|c| c.key == key) {
            position
        } else {
            cases.push(Case {
                key,
                kind: record.benchmark.kind.clone(),
                set: record.benchmark.set.clone(),
                permutation: record.benchmark.permutation.clone(),
                workload_spec_digest: record.workload_spec_digest.clone(),
                runs: 0,
                failed: 0,
                metrics: Vec::new(),
                records: Vec::new(),
            });
            values.push(Vec::new());
            cases.len() - 1
        };
        let case = &mut cases[position];
        case.runs += 1;
        case.records.push(index);
        if !record.succeeded() {
            case.failed += 1;
            continue;
        }
        let series = &mut values[position];
        for metric in record.metrics() {
            match series.iter_mut().find(|(name, ..)| *name == metric.name) {
                Some((.., v)) => v.push(metric.value),
                None => series.push((metric.name, metric.better, vec![metric.value])),
            }
        }
    }
    for (case, series) in cases.iter_mut().zip(values) {
        case.metrics = series
            .into_iter()
            .filter_map(|(name, better, v)| {
                Some(MetricStats {
                    name,
                    better,
                    summary: Summary::of(&v, stability)?,
                })
            })
            .collect();
    }
    cases
}

/// `a=1,b=x` for a permutation; `-` when empty.
pub fn describe_permutation(permutation: &Map<String, Value>) -> String {
    if permutation.is_empty() {
        return "-".into();
    }
    permutation
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            other => format!("{k}={other}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
pub(crate) mod testing {
    //! Records made in code, for tests.

    use serde_json::{Map, json};

    use crate::results::record::{
        BenchmarkIdentity, Environment, Evidence, RecordOutcome, ResultRecord, SCHEMA_VERSION,
    };

    /// An IPerf record of `case` (permutation `streams`) with the given throughput.
    pub fn iperf(run: &str, case: &str, streams: u32, repetition: u32, bits: f64) -> ResultRecord {
        let mut permutation = Map::new();
        permutation.insert("streams".into(), json!(streams));
        let result = json!({"protocol": "TCP", "reverse": false, "bidirectional": false,
            "numStreams": streams, "durationSeconds": 10.0, "sentBitsPerSecond": bits,
            "receivedBitsPerSecond": bits, "sentBytes": 1, "receivedBytes": 1, "retransmits": 0});
        let kind = crate::kinds::registry::lookup("IPerf").unwrap();
        ResultRecord {
            schema_version: SCHEMA_VERSION.into(),
            run_id: run.into(),
            benchmark: BenchmarkIdentity {
                kind: "IPerf".into(),
                name: format!("sweep-{case}-{repetition}"),
                set: Some("sweep".into()),
                benchmark_case_id: Some(case.into()),
                repetition: Some(repetition),
                permutation,
                node: None,
                references: Vec::new(),
            },
            workload_spec_digest: format!("digest-{case}"),
            spec: json!({"streams": streams}),
            backend: "local".into(),
            environment: Environment {
                hosts: vec!["node-a".into()],
                perfsweep_version: "0.1.0".into(),
                ..Default::default()
            },
            started_at: "2025-01-01T00:00:00Z".into(),
            finished_at: "2025-01-01T00:00:10Z".into(),
            outcome: RecordOutcome::Succeeded {
                summary: format!("{bits}"),
                metrics: kind.metrics(&result),
                result,
            },
            evidence: Some(Evidence {
                sha256: format!("{case}{repetition}"),
                bytes: 10,
                path: format!("evidence/{case}{repetition}.txt"),
            }),
            artifact_manifest_digest: None,
        }
        .complete()
    }

    pub fn failed(run: &str, case: &str, streams: u32, repetition: u32) -> ResultRecord {
        let mut record = iperf(run, case, streams, repetition, 0.0);
        record.outcome = RecordOutcome::Failed {
            reason: "Timeout".into(),
            message: "no result".into(),
        };
        record.evidence = None;
        record
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn groups_repetitions_into_cases() {
        let records = vec![
            iperf("r", "a", 1, 0, 10.0),
            iperf("r", "b", 2, 0, 20.0),
            iperf("r", "a", 1, 1, 12.0),
            failed("r", "b", 2, 1),
        ];
        let cases = group(&records, Stability::default());
        assert_eq!(cases.len(), 2);
        let a = &cases[0];
        assert_eq!((a.key.as_str(), a.runs, a.failed), ("a", 2, 0));
        let headline = a.headline().unwrap();
        assert_eq!(headline.name, "received_bits_per_second");
        assert_eq!(headline.summary.mean, 11.0);
        assert_eq!((cases[1].runs, cases[1].failed), (2, 1));
        assert_eq!(cases[1].records, vec![1, 3]);
        assert_eq!(describe_permutation(&a.permutation), "streams=1");
    }

    #[test]
    fn si_prefixes() {
        assert_eq!(si(9.41e9), "9.41G");
        assert_eq!(si(0.000_12), "120µ");
        assert_eq!(si(1.0), "1");
        assert_eq!(si(-2500.0), "-2.5k");
    }

    /// Finding 8 of issue 18: `results show` printed 300-digit numbers.
    #[test]
    fn extreme_numbers_stay_short() {
        assert_eq!(si(1e200), "1.000e200");
        assert_eq!(si(-1e300), "-1.000e300");
        assert_eq!(si(2.5e-15), "2.500e-15");
        assert_eq!(si(999e12), "999T");
        assert_eq!(si(1e15), "1P");
        assert_eq!(si(1e21), "1.000e21");
        for value in [f64::MAX, f64::MIN_POSITIVE, 1e15, 1e20, 1e-12] {
            assert!(si(value).len() <= 12, "{value} → {}", si(value));
        }
    }
}
