//! The results part of a BenchmarkSet's status: per case (permutation), the headline
//! metric's mean, confidence interval and variation across repetitions, and whether it is
//! stable. Bounded: the first [`CASES_LISTED`] cases are listed; the counts cover all.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::judging::stats::{Stability, Summary};
use crate::kinds::registry::KindInfo;

/// Cases listed in the status before the list is cut (counts stay exact).
pub const CASES_LISTED: usize = 100;

/// Statistics of the set's results so far.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResultsSummary {
    /// Cases (permutations) with at least one succeeded repetition.
    pub cases: u32,
    /// Of those, cases whose headline metric is unstable: too few repetitions, or a
    /// coefficient of variation above the threshold.
    pub unstable: u32,
    /// The coefficient of variation above which a case is unstable (0.05 = 5%).
    pub max_cv: f64,
    /// The first cases, in creation order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_case: Vec<CaseSummary>,
    /// What to keep in mind, e.g. that the list was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One case's headline metric across its repetitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaseSummary {
    pub case_id: String,
    /// The headline metric's name (unit included).
    pub metric: String,
    /// Repetitions with a value.
    pub count: u32,
    pub mean: f64,
    /// Half the width of the 95% confidence interval of the mean (Student t).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci95: Option<f64>,
    /// Coefficient of variation (sample stddev / |mean|).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    pub unstable: bool,
}

/// Summarizes succeeded results given as `(case id, status.result)`, in creation order.
pub fn summarize<'a>(
    kind: &KindInfo,
    results: impl IntoIterator<Item = (&'a str, &'a Value)>,
    stability: Stability,
) -> ResultsSummary {
    // Case id → (headline metric, values), in first-seen order.
    let mut order: Vec<(&str, String, Vec<f64>)> = Vec::new();
    for (case_id, result) in results {
        let metrics = kind.metrics(result);
        let position = order.iter().position(|(id, ..)| *id == case_id);
        match position {
            Some(i) => {
                let (_, metric, values) = &mut order[i];
                if let Some(m) = crate::judging::metrics::find(&metrics, metric) {
                    values.push(m.value);
                }
            }
            None => {
                if let Some(headline) = metrics.first() {
                    order.push((case_id, headline.name.clone(), vec![headline.value]));
                }
            }
        }
    }
    let mut summary = ResultsSummary {
        max_cv: stability.max_cv,
        ..Default::default()
    };
    for (case_id, metric, values) in order {
        let Some(stats) = Summary::of(&values, stability) else {
            continue;
        };
        summary.cases += 1;
        if stats.unstable.is_some() {
            summary.unstable += 1;
        }
        if summary.per_case.len() < CASES_LISTED {
            summary.per_case.push(CaseSummary {
                case_id: case_id.to_owned(),
                metric,
                count: stats.count as u32,
                mean: stats.mean,
                ci95: stats.ci95_half_width(),
                cv: stats.cv,
                unstable: stats.unstable.is_some(),
            });
        }
    }
    if summary.cases as usize > CASES_LISTED {
        summary.note = Some(format!(
            "the first {CASES_LISTED} of {} cases are listed; `perfsweep results` has all",
            summary.cases
        ));
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn iperf(bits: f64) -> Value {
        json!({"protocol": "TCP", "reverse": false, "bidirectional": false, "numStreams": 1,
               "durationSeconds": 10.0, "sentBitsPerSecond": bits,
               "receivedBitsPerSecond": bits, "sentBytes": 1, "receivedBytes": 1})
    }

    #[test]
    fn per_case_headline_statistics() {
        let kind = crate::kinds::registry::lookup("IPerf").unwrap();
        let results = [
            ("a", iperf(100.0)),
            ("b", iperf(10.0)),
            ("a", iperf(101.0)),
            ("b", iperf(20.0)),
            ("a", iperf(99.0)),
            ("b", iperf(30.0)),
        ];
        let summary = summarize(
            kind,
            results.iter().map(|(c, r)| (*c, r)),
            Stability::default(),
        );
        assert_eq!((summary.cases, summary.unstable), (2, 1));
        let a = &summary.per_case[0];
        assert_eq!(
            (a.case_id.as_str(), a.metric.as_str(), a.count),
            ("a", "received_bits_per_second", 3)
        );
        assert_eq!(a.mean, 100.0);
        assert!(!a.unstable);
        assert!((a.ci95.unwrap() - 4.303 / 3f64.sqrt()).abs() < 1e-3);
        assert!(summary.per_case[1].unstable);
        assert!(summary.note.is_none());
    }

    #[test]
    fn the_list_is_bounded() {
        let kind = crate::kinds::registry::lookup("IPerf").unwrap();
        let ids: Vec<String> = (0..CASES_LISTED + 5).map(|i| format!("c{i}")).collect();
        let result = iperf(1.0);
        let summary = summarize(
            kind,
            ids.iter().map(|id| (id.as_str(), &result)),
            Stability::default(),
        );
        assert_eq!(summary.cases as usize, CASES_LISTED + 5);
        assert_eq!(summary.per_case.len(), CASES_LISTED);
        assert!(summary.note.unwrap().contains("first 100 of 105"));
    }
}
