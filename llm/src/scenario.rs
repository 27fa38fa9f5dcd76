//! genai-bench traffic scenarios: how many input and output tokens each request has.
//!
//! - `D(I,O)`: exactly I input and O output tokens.
//! - `N(μi,σi)/(μo,σo)`: normal draws truncated to integers, clipped below at 1 input
//!   and 2 output tokens.
//! - `U(a,b)/(c,d)`: uniform input in [a, b) and output in [c, d), then clipped below at
//!   1 input and 2 output tokens (so `U(…)/(1,4)` gives 2 twice as often as 3).
//! - `U(x,y)`: the short form, lower bounds 1: input in [1, x), output in [1, y) then
//!   clipped at 2.
//! - `E(n)`: embeddings of n input tokens.
//!
//! This is genai-bench's `genai_bench/scenarios/text.py` (checked at commit 7fd04d8):
//! `max(1, int(np.random.normal(μ, σ)))`, `max(2, int(np.random.uniform(a or 1, b)))`.
//! `int(uniform(a, b))` over integers a < b is uniform over a..b-1, and `uniform(a, a)`
//! is a; a lower bound of 0 counts as 1 there (`0 or 1`), and here too. perfsweep
//! rejects what genai-bench would send as an empty request: `D(0,…)`, `E(0)`, and a
//! range whose lower bound is above its upper.

use std::fmt;

/// A parsed traffic scenario.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrafficScenario {
    Deterministic {
        input: u32,
        output: u32,
    },
    Normal {
        input_mean: u32,
        input_stddev: u32,
        output_mean: u32,
        output_stddev: u32,
    },
    Uniform {
        input_min: u32,
        input_max: u32,
        output_min: u32,
        output_max: u32,
    },
    Embedding {
        input: u32,
    },
}

/// Where [`TrafficScenario::sample`] draws from.
pub trait RandomSource {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64;
    /// Standard normal.
    fn normal(&mut self) -> f64;
}

/// A scenario string that does not parse, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid traffic scenario {text:?}: {reason}")]
pub struct ScenarioError {
    pub text: String,
    pub reason: String,
}

impl TrafficScenario {
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let fail = |reason: &str| ScenarioError {
            text: text.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = text.trim();
        let (letter, rest) = trimmed.split_at_checked(1).ok_or_else(|| fail("empty"))?;
        let groups: Vec<Vec<u32>> = rest
            .split('/')
            .map(|group| parse_group(group).ok_or_else(|| fail("expected (number,number) groups")))
            .collect::<Result<_, _>>()?;
        let scenario = match (letter, groups.as_slice()) {
            ("D", [g]) if g.len() == 2 => Self::Deterministic {
                input: g[0],
                output: g[1],
            },
            ("N", [i, o]) if i.len() == 2 && o.len() == 2 => Self::Normal {
                input_mean: i[0],
                input_stddev: i[1],
                output_mean: o[0],
                output_stddev: o[1],
            },
            ("U", [i, o]) if i.len() == 2 && o.len() == 2 => Self::Uniform {
                input_min: i[0].max(1),
                input_max: i[1],
                output_min: o[0].max(1),
                output_max: o[1],
            },
            ("U", [g]) if g.len() == 2 => Self::Uniform {
                input_min: 1,
                input_max: g[0],
                output_min: 1,
                output_max: g[1],
            },
            ("E", [g]) if g.len() == 1 => Self::Embedding { input: g[0] },
            ("D" | "N" | "U" | "E", _) => {
                return Err(fail("wrong number of values for this distribution"));
            }
            _ => return Err(fail("unknown distribution: use D, N, U or E")),
        };
        scenario.check().map_err(|reason| fail(&reason))?;
        Ok(scenario)
    }

    fn check(&self) -> Result<(), String> {
        match *self {
            Self::Deterministic { input, output } if input == 0 || output == 0 => {
                Err("token counts must be at least 1".into())
            }
            Self::Uniform {
                input_min,
                input_max,
                output_min,
                output_max,
            } if input_min > input_max || output_min > output_max => {
                Err("each range needs its lower bound at most its (exclusive) upper bound".into())
            }
            Self::Embedding { input: 0 } => Err("token count must be at least 1".into()),
            _ => Ok(()),
        }
    }

    pub fn is_embedding(&self) -> bool {
        matches!(self, Self::Embedding { .. })
    }

    /// Input and output tokens of one request, as genai-bench samples them, from the
    /// caller's (reproducible) random source. Embeddings have no output.
    pub fn sample(&self, random: &mut impl RandomSource) -> (u32, u32) {
        // Python's int() truncates toward zero; `as` saturates at the u32 range.
        let truncate = |x: f64| x.trunc().clamp(0.0, f64::from(u32::MAX)) as u32;
        match *self {
            Self::Deterministic { input, output } => (input, output),
            Self::Normal {
                input_mean,
                input_stddev,
                output_mean,
                output_stddev,
            } => {
                let input = f64::from(input_mean) + f64::from(input_stddev) * random.normal();
                let output = f64::from(output_mean) + f64::from(output_stddev) * random.normal();
                (truncate(input).max(1), truncate(output).max(2))
            }
            Self::Uniform {
                input_min,
                input_max,
                output_min,
                output_max,
            } => {
                // genai-bench: int(np.random.uniform(low, high)); uniform(a, a) is a.
                let mut uniform = |low: u32, high: u32| {
                    if high <= low {
                        return low;
                    }
                    truncate(f64::from(low) + f64::from(high - low) * random.unit()).min(high - 1)
                };
                let input = uniform(input_min, input_max);
                let output = uniform(output_min, output_max);
                (input.max(1), output.max(2))
            }
            Self::Embedding { input } => (input, 0),
        }
    }
}

fn parse_group(group: &str) -> Option<Vec<u32>> {
    let inner = group.strip_prefix('(')?.strip_suffix(')')?;
    inner.split(',').map(|n| n.trim().parse().ok()).collect()
}

impl fmt::Display for TrafficScenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deterministic { input, output } => write!(f, "D({input},{output})"),
            Self::Normal {
                input_mean,
                input_stddev,
                output_mean,
                output_stddev,
            } => {
                write!(
                    f,
                    "N({input_mean},{input_stddev})/({output_mean},{output_stddev})"
                )
            }
            Self::Uniform {
                input_min,
                input_max,
                output_min,
                output_max,
            } if *input_min == 1 && *output_min == 1 => write!(f, "U({input_max},{output_max})"),
            Self::Uniform {
                input_min,
                input_max,
                output_min,
                output_max,
            } => {
                write!(f, "U({input_min},{input_max})/({output_min},{output_max})")
            }
            Self::Embedding { input } => write!(f, "E({input})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_genai_bench_forms() {
        assert_eq!(
            TrafficScenario::parse("D(100,100)").expect("a valid scenario"),
            TrafficScenario::Deterministic {
                input: 100,
                output: 100
            }
        );
        assert_eq!(
            TrafficScenario::parse("N(480,240)/(300,150)").expect("a valid scenario"),
            TrafficScenario::Normal {
                input_mean: 480,
                input_stddev: 240,
                output_mean: 300,
                output_stddev: 150
            }
        );
        assert_eq!(
            TrafficScenario::parse("U(50,100)/(200,300)").expect("a valid scenario"),
            TrafficScenario::Uniform {
                input_min: 50,
                input_max: 100,
                output_min: 200,
                output_max: 300
            }
        );
        assert_eq!(
            TrafficScenario::parse("U(512,128)").expect("a valid scenario"),
            TrafficScenario::Uniform {
                input_min: 1,
                input_max: 512,
                output_min: 1,
                output_max: 128
            }
        );
        assert_eq!(
            TrafficScenario::parse("E(64)").expect("a valid scenario"),
            TrafficScenario::Embedding { input: 64 }
        );
    }

    #[test]
    fn round_trips_through_display() {
        for text in [
            "D(100,100)",
            "N(480,240)/(300,150)",
            "U(50,100)/(200,300)",
            "E(64)",
        ] {
            assert_eq!(
                TrafficScenario::parse(text)
                    .expect("a valid scenario")
                    .to_string(),
                text
            );
        }
    }

    #[test]
    fn rejects_malformed_scenarios() {
        for bad in [
            "",
            "D(100)",
            "X(1,2)",
            "U(100,50)/(1,2)",
            "D(0,5)",
            "E(0)",
            "N(1,2)",
            "D(a,b)",
            "E(1,2)",
            "D(1,2",
        ] {
            assert!(
                TrafficScenario::parse(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
    }

    /// SplitMix64 and Box-Muller: a reproducible source for the sampling tests.
    struct TestRng(u64);

    impl RandomSource for TestRng {
        fn normal(&mut self) -> f64 {
            let (u1, u2) = (1.0 - self.unit(), self.unit());
            (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
        }

        fn unit(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn samples(text: &str, n: usize) -> Vec<(u32, u32)> {
        let scenario = TrafficScenario::parse(text).expect("a valid scenario");
        let mut rng = TestRng(42);
        (0..n).map(|_| scenario.sample(&mut rng)).collect()
    }

    fn mean(values: impl Iterator<Item = u32>) -> f64 {
        let values: Vec<f64> = values.map(f64::from).collect();
        values.iter().sum::<f64>() / values.len() as f64
    }

    #[test]
    fn normal_draws_are_truncated_and_clipped_at_one_and_two() {
        let draws = samples("N(480,24)/(300,15)", 50_000);
        // int() truncates: the mean of the integers is about μ - 0.5.
        let input = mean(draws.iter().map(|d| d.0));
        let output = mean(draws.iter().map(|d| d.1));
        assert!((input - 479.5).abs() < 0.5, "input mean {input}");
        assert!((output - 299.5).abs() < 0.3, "output mean {output}");
        let sd = {
            let values: Vec<f64> = draws.iter().map(|d| f64::from(d.0)).collect();
            (values.iter().map(|v| (v - input).powi(2)).sum::<f64>() / values.len() as f64).sqrt()
        };
        assert!((sd - 24.0).abs() < 0.5, "input stddev {sd}");
        // Far below zero: everything is clipped, 1 input and 2 output tokens.
        let clipped = samples("N(3,50)/(3,50)", 20_000);
        assert!(clipped.iter().all(|&(i, o)| i >= 1 && o >= 2));
        let at_floor = clipped.iter().filter(|&&(i, _)| i == 1).count() as f64 / 20_000.0;
        // P(int(3 + 50 Z) <= 1) = P(3 + 50 Z < 2) = Φ(-0.02) ≈ 0.492.
        assert!((at_floor - 0.492).abs() < 0.02, "{at_floor}");
        assert!(clipped.iter().any(|&(_, o)| o == 2) && clipped.iter().any(|&(_, o)| o > 50));
    }

    #[test]
    fn uniform_draws_exclude_the_upper_bound_and_clip_output_at_two() {
        let draws = samples("U(10,14)/(1,4)", 40_000);
        let mut input_counts = [0usize; 4];
        let mut output_counts = [0usize; 4];
        for &(i, o) in &draws {
            assert!((10..14).contains(&i), "input {i}");
            assert!((2..4).contains(&o), "output {o}");
            input_counts[(i - 10) as usize] += 1;
            output_counts[o as usize] += 1;
        }
        for count in input_counts {
            assert!(
                (count as f64 / 10_000.0 - 1.0).abs() < 0.05,
                "{input_counts:?}"
            );
        }
        // Output 1 is clipped to 2: 2 comes up twice as often as 3.
        let ratio = output_counts[2] as f64 / output_counts[3] as f64;
        assert!((ratio - 2.0).abs() < 0.1, "{output_counts:?}");
        // Equal bounds give the bound.
        assert!(samples("U(7,7)/(9,9)", 100).iter().all(|&d| d == (7, 9)));
    }

    #[test]
    fn the_short_uniform_form_starts_at_one() {
        let short = TrafficScenario::parse("U(512,128)").expect("a valid scenario");
        assert_eq!(
            short,
            TrafficScenario::parse("U(1,512)/(1,128)").expect("a valid scenario"),
            "U(x,y) is U(1,x)/(1,y)"
        );
        assert_eq!(short.to_string(), "U(512,128)");
        // A lower bound of 0 is 1, as genai-bench's `min or 1`.
        assert_eq!(
            TrafficScenario::parse("U(0,512)/(0,128)").expect("a valid scenario"),
            short
        );
        let draws = samples("U(512,128)", 40_000);
        assert!(
            draws
                .iter()
                .all(|&(i, o)| (1..512).contains(&i) && (2..128).contains(&o))
        );
        let input = mean(draws.iter().map(|d| d.0));
        assert!(
            (input - 256.0).abs() < 3.0,
            "mean of 1..511 is 256, got {input}"
        );
        assert!(draws.iter().any(|d| d.0 == 1) && draws.iter().any(|d| d.0 == 511));
    }

    #[test]
    fn fixed_and_embedding_scenarios_do_not_vary() {
        assert!(samples("D(128,64)", 100).iter().all(|&d| d == (128, 64)));
        assert!(samples("E(64)", 100).iter().all(|&d| d == (64, 0)));
    }
}
