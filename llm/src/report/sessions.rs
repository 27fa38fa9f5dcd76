//! Figures per turn of multi-turn chat sessions (the spec is the LLMInference kind's
//! `sessions`): each turn's latencies and prefix-cache share, and their summary line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::distribution::Distribution;

/// One turn index's figures in an iteration of sessions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnFigures {
    /// 1 for the first request of a conversation.
    pub turn: u32,
    /// Successful requests of this turn index.
    pub requests: u64,
    /// Failed requests of this turn index (a failed turn ends its conversation).
    pub errors: u64,
    /// Mean prompt tokens: the history grows with every turn.
    pub input_tokens_mean: f64,
    pub output_tokens_mean: f64,
    pub ttft_millis: Distribution,
    pub e2e_latency_millis: Distribution,
    /// Share of the prompt tokens the server's prefix cache held, when it reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens_percent: Option<f64>,
}

/// "TTFT p50 by turn: 1: 20.1, 2: 9.3 ms; cached 0%, 62%": how the figures move with
/// the history, for the summary line.
pub fn summary(per_turn: &[TurnFigures]) -> Option<String> {
    if per_turn.is_empty() {
        return None;
    }
    let ttft: Vec<String> = per_turn
        .iter()
        .map(|t| format!("{}: {:.1}", t.turn, t.ttft_millis.p50))
        .collect();
    let mut text = format!("TTFT p50 by turn {} ms", ttft.join(", "));
    let cached: Vec<String> = per_turn
        .iter()
        .filter_map(|t| t.cached_input_tokens_percent.map(|p| format!("{p:.0}%")))
        .collect();
    if cached.len() == per_turn.len() {
        text.push_str(&format!(" (prompt cached {})", cached.join(", ")));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(turn: u32, p50: f64, cached: Option<f64>) -> TurnFigures {
        TurnFigures {
            turn,
            requests: 4,
            ttft_millis: Distribution {
                p50,
                ..Distribution::default()
            },
            cached_input_tokens_percent: cached,
            ..TurnFigures::default()
        }
    }

    #[test]
    fn the_summary_shows_ttft_and_cache_hits_by_turn() {
        assert_eq!(summary(&[]), None);
        let turns = [turn(1, 20.04, Some(0.0)), turn(2, 9.31, Some(61.6))];
        assert_eq!(
            summary(&turns).as_deref(),
            Some("TTFT p50 by turn 1: 20.0, 2: 9.3 ms (prompt cached 0%, 62%)")
        );
        // Without cache reports, only the latencies.
        let turns = [turn(1, 20.0, None), turn(2, 30.0, None)];
        assert_eq!(
            summary(&turns).as_deref(),
            Some("TTFT p50 by turn 1: 20.0, 2: 30.0 ms")
        );
    }
}
