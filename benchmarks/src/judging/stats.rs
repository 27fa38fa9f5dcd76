//! Statistics across repetitions: per case (permutation) and metric, the spread of the
//! repetitions, a 95% confidence interval of the mean (Student t) and whether the numbers
//! are stable enough to trust; and Welch's t-test for "did this change?".
//!
//! The t distribution is statrs' (computed, not tabled), so any number of repetitions
//! and any confidence level work.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// When a case's numbers are too noisy or too few to trust.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stability {
    /// Largest coefficient of variation (stddev / |mean|) still considered stable.
    pub max_cv: f64,
    /// Fewest repetitions that give a usable spread and confidence interval.
    pub min_repetitions: usize,
}

impl Default for Stability {
    fn default() -> Self {
        Self {
            max_cv: 0.05,
            min_repetitions: 3,
        }
    }
}

/// Why a case is unstable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Instability {
    /// Fewer repetitions than [`Stability::min_repetitions`].
    TooFewRepetitions,
    /// Coefficient of variation above [`Stability::max_cv`].
    HighVariation,
}

/// Descriptive statistics of one metric over the repetitions of one case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub count: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); `None` for a single value.
    pub stddev: Option<f64>,
    /// stddev / |mean|; `None` with one value, or when the mean is 0 and values differ.
    pub cv: Option<f64>,
    pub min: f64,
    pub median: f64,
    pub max: f64,
    /// 95% confidence interval of the mean (Student t, n − 1 degrees of freedom);
    /// `None` for a single value.
    pub ci95: Option<(f64, f64)>,
    /// Why these numbers should not be trusted, if they should not.
    pub unstable: Option<Instability>,
}

impl Summary {
    /// Statistics of `values` (non-finite values are ignored); `None` when none is left.
    pub fn of(values: &[f64], stability: Stability) -> Option<Self> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            f64::midpoint(sorted[n / 2 - 1], sorted[n / 2])
        };
        let stddev = (n > 1).then(|| {
            let ss: f64 = sorted.iter().map(|v| (v - mean).powi(2)).sum();
            (ss / (n - 1) as f64).sqrt()
        });
        let cv = stddev.and_then(|s| {
            if s == 0.0 {
                Some(0.0)
            } else if mean == 0.0 {
                None
            } else {
                Some(s / mean.abs())
            }
        });
        let ci95 = stddev.map(|s| {
            let half = t_quantile(0.975, (n - 1) as f64) * s / (n as f64).sqrt();
            (mean - half, mean + half)
        });
        let unstable = if n < stability.min_repetitions {
            Some(Instability::TooFewRepetitions)
        } else if cv.is_none_or(|cv| cv > stability.max_cv) {
            Some(Instability::HighVariation)
        } else {
            None
        };
        Some(Self {
            count: n,
            mean,
            stddev,
            cv,
            min: sorted[0],
            median,
            max: sorted[n - 1],
            ci95,
            unstable,
        })
    }

    /// Half the width of the 95% confidence interval.
    pub fn ci95_half_width(&self) -> Option<f64> {
        self.ci95.map(|(low, high)| (high - low) / 2.0)
    }
}

/// Welch's unequal-variances t-test of two samples' means: the two-sided p-value, or
/// `None` when either side has fewer than two values.
// With no spread at all the means are compared exactly: equal or certainly different.
#[allow(clippy::float_cmp)]
pub fn welch_p_value(a: &Summary, b: &Summary) -> Option<f64> {
    let (sa, sb) = (a.stddev?, b.stddev?);
    let (na, nb) = (a.count as f64, b.count as f64);
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    let se2 = va + vb;
    if se2 == 0.0 {
        // No spread at all: the means are exactly equal or certainly different.
        return Some(if a.mean == b.mean { 1.0 } else { 0.0 });
    }
    let t = (a.mean - b.mean) / se2.sqrt();
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Some(2.0 * t_sf(t.abs(), df))
}

/// Student's t with `df` degrees of freedom (statrs), or `None` for a `df` that is not
/// a positive number.
fn students_t(df: f64) -> Option<StudentsT> {
    StudentsT::new(0.0, 1.0, df).ok()
}

/// P(T > t) for Student's t with `df` degrees of freedom; NaN for an invalid `df`.
pub fn t_sf(t: f64, df: f64) -> f64 {
    students_t(df).map_or(f64::NAN, |distribution| distribution.sf(t))
}

/// The `p` quantile of Student's t with `df` degrees of freedom; NaN for an invalid `df`.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    students_t(df).map_or(f64::NAN, |distribution| distribution.inverse_cdf(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn t_quantiles_match_the_published_table() {
        // Two-sided 95% critical values.
        for (df, expected) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (4.0, 2.776),
            (9.0, 2.262),
            (29.0, 2.045),
            (120.0, 1.980),
            (1e6, 1.960),
        ] {
            let t = t_quantile(0.975, df);
            assert!((t - expected).abs() < 0.001, "df {df}: {t} vs {expected}");
        }
    }

    #[test]
    fn t_tail_matches_closed_forms() {
        for t in [0.0, 0.3, 1.0, 2.5, 10.0] {
            // df = 1 is the Cauchy distribution; df = 2 has a closed form too.
            let cauchy = 0.5 - f64::atan(t) / std::f64::consts::PI;
            assert!((t_sf(t, 1.0) - cauchy).abs() < 1e-12, "df 1, t {t}");
            let two = 0.5 * (1.0 - t / (2.0 + t * t).sqrt());
            assert!((t_sf(t, 2.0) - two).abs() < 1e-12, "df 2, t {t}");
        }
    }

    #[test]
    fn summary_of_known_values() {
        let s = Summary::of(
            &[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0],
            Stability::default(),
        )
        .unwrap();
        assert_eq!(s.count, 8);
        assert_eq!(s.mean, 5.0);
        assert!((s.stddev.unwrap() - 2.138_089_935).abs() < 1e-9);
        assert_eq!((s.min, s.median, s.max), (2.0, 4.5, 9.0));
        let (low, high) = s.ci95.unwrap();
        // 5 ± 2.365 · 2.138 / √8
        assert!((low - 3.2125).abs() < 1e-3 && (high - 6.7875).abs() < 1e-3);
        assert_eq!(s.unstable, Some(Instability::HighVariation));
    }

    #[test]
    fn stability_flags() {
        let stable = Summary::of(&[100.0, 101.0, 99.0], Stability::default()).unwrap();
        assert_eq!(stable.unstable, None);
        let few = Summary::of(&[100.0, 101.0], Stability::default()).unwrap();
        assert_eq!(few.unstable, Some(Instability::TooFewRepetitions));
        let one = Summary::of(&[100.0], Stability::default()).unwrap();
        assert_eq!((one.stddev, one.ci95), (None, None));
        let loose = Stability {
            max_cv: 0.5,
            min_repetitions: 1,
        };
        assert_eq!(Summary::of(&[1.0, 1.5, 2.0], loose).unwrap().unstable, None);
        assert!(Summary::of(&[f64::NAN], loose).is_none());
    }

    #[test]
    fn welch_against_a_reference() {
        // Means 3 and 5, variances 2.5: t = −2 with 8 degrees of freedom, two-sided
        // p = 0.080516 (scipy.stats.ttest_ind(..., equal_var=False)).
        let a = Summary::of(&[1.0, 2.0, 3.0, 4.0, 5.0], Stability::default()).unwrap();
        let b = Summary::of(&[3.0, 4.0, 5.0, 6.0, 7.0], Stability::default()).unwrap();
        let p = welch_p_value(&a, &b).unwrap();
        assert!((p - 0.080_516).abs() < 1e-5, "{p}");
        assert!((welch_p_value(&a, &a).unwrap() - 1.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn summary_invariants(values in prop::collection::vec(-1e6f64..1e6, 1..40)) {
            let s = Summary::of(&values, Stability::default()).unwrap();
            prop_assert_eq!(s.count, values.len());
            prop_assert!(s.min <= s.median && s.median <= s.max);
            prop_assert!(s.min - 1e-6 <= s.mean && s.mean <= s.max + 1e-6);
            if let (Some(sd), Some((low, high))) = (s.stddev, s.ci95) {
                prop_assert!(sd >= 0.0);
                prop_assert!(low <= s.mean + 1e-9 && s.mean <= high + 1e-9);
            }
        }

        #[test]
        fn shifting_and_scaling_keep_cv_and_p(
            values in prop::collection::vec(1.0f64..1e3, 3..20),
            scale in 0.5f64..100.0,
        ) {
            let a = Summary::of(&values, Stability::default()).unwrap();
            let scaled: Vec<f64> = values.iter().map(|v| v * scale).collect();
            let b = Summary::of(&scaled, Stability::default()).unwrap();
            if let (Some(x), Some(y)) = (a.cv, b.cv) {
                prop_assert!((x - y).abs() < 1e-9 * x.max(1.0));
            }
            // A sample never differs significantly from itself.
            prop_assert!(welch_p_value(&a, &a).unwrap() > 0.999);
        }

        #[test]
        fn p_values_are_probabilities(
            a in prop::collection::vec(0.0f64..100.0, 2..10),
            b in prop::collection::vec(0.0f64..100.0, 2..10),
        ) {
            let sa = Summary::of(&a, Stability::default()).unwrap();
            let sb = Summary::of(&b, Stability::default()).unwrap();
            let p = welch_p_value(&sa, &sb).unwrap();
            prop_assert!((0.0..=1.0 + 1e-12).contains(&p), "{}", p);
        }

        #[test]
        fn quantile_inverts_the_tail(df in 1.0f64..200.0, p in 0.55f64..0.999) {
            let t = t_quantile(p, df);
            prop_assert!((t_sf(t, df) - (1.0 - p)).abs() < 1e-9);
        }
    }
}
