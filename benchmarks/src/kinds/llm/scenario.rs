//! genai-bench traffic scenarios: how many input and output tokens each request has.
//!
//! - `D(I,O)`: exactly I input and O output tokens.
//! - `N(μi,σi)/(μo,σo)`: normal draws, clipped below at 1 input and 2 output tokens.
//! - `U(a,b)/(c,d)`: uniform input in [a, b) and output in [c, d).
//! - `U(x,y)`: uniform input in [1, x) and output in [1, y) (genai-bench's short form).
//! - `E(n)`: embeddings of n input tokens.

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
                input_min: i[0],
                input_max: i[1],
                output_min: o[0],
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
            Self::Normal {
                input_mean,
                output_mean,
                ..
            } if input_mean == 0 || output_mean == 0 => Err("means must be at least 1".into()),
            Self::Uniform {
                input_min,
                input_max,
                output_min,
                output_max,
            } if input_min >= input_max || output_min >= output_max => {
                Err("each range needs its lower bound below its (exclusive) upper bound".into())
            }
            Self::Embedding { input: 0 } => Err("token count must be at least 1".into()),
            _ => Ok(()),
        }
    }

    pub fn is_embedding(&self) -> bool {
        matches!(self, Self::Embedding { .. })
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
            TrafficScenario::parse("D(100,100)").unwrap(),
            TrafficScenario::Deterministic {
                input: 100,
                output: 100
            }
        );
        assert_eq!(
            TrafficScenario::parse("N(480,240)/(300,150)").unwrap(),
            TrafficScenario::Normal {
                input_mean: 480,
                input_stddev: 240,
                output_mean: 300,
                output_stddev: 150
            }
        );
        assert_eq!(
            TrafficScenario::parse("U(50,100)/(200,300)").unwrap(),
            TrafficScenario::Uniform {
                input_min: 50,
                input_max: 100,
                output_min: 200,
                output_max: 300
            }
        );
        assert_eq!(
            TrafficScenario::parse("U(512,128)").unwrap(),
            TrafficScenario::Uniform {
                input_min: 1,
                input_max: 512,
                output_min: 1,
                output_max: 128
            }
        );
        assert_eq!(
            TrafficScenario::parse("E(64)").unwrap(),
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
            assert_eq!(TrafficScenario::parse(text).unwrap().to_string(), text);
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
}
