//! Synthetic requests from genai-bench traffic scenarios.
//!
//! Token counts are drawn exactly as genai-bench does: `D` fixed, `N` normal draws
//! truncated to integers and clipped below at 1 input / 2 output tokens, `U` uniform with
//! an exclusive upper bound. Prompts are built from common English words that are one
//! token each (with their leading space) in the GPT, Llama and Qwen BPE vocabularies, so
//! a prompt of N words is approximately N tokens; chat templates add a few tokens of
//! their own. perfsweep ships no tokenizer (it would be large to build); the server's
//! reported usage is what the throughput figures use when it is available.

use perfsweep_benchmarks::kinds::llm::scenario::TrafficScenario;

use crate::llm::rng::Rng;

/// One request's shape and prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct Draw {
    pub input_tokens: u32,
    pub output_tokens: u32,
}

/// Token counts for request `ticket` of a scenario (deterministic for a seed).
pub fn draw(scenario: &TrafficScenario, rng: &mut Rng) -> Draw {
    let (input_tokens, output_tokens) = match *scenario {
        TrafficScenario::Deterministic { input, output } => (input, output),
        TrafficScenario::Normal {
            input_mean,
            input_stddev,
            output_mean,
            output_stddev,
        } => {
            let input = input_mean as f64 + input_stddev as f64 * rng.normal();
            let output = output_mean as f64 + output_stddev as f64 * rng.normal();
            (
                (input as i64).clamp(1, u32::MAX as i64) as u32,
                (output as i64).clamp(2, u32::MAX as i64) as u32,
            )
        }
        TrafficScenario::Uniform {
            input_min,
            input_max,
            output_min,
            output_max,
        } => (
            rng.below(input_min as u64, input_max as u64) as u32,
            rng.below(output_min as u64, output_max as u64) as u32,
        ),
        TrafficScenario::Embedding { input } => (input, 0),
    };
    Draw {
        input_tokens,
        output_tokens,
    }
}

/// A prompt of `tokens` words, appended to `out`.
pub fn prompt(rng: &mut Rng, tokens: u32, out: &mut String) {
    for i in 0..tokens {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(VOCABULARY[rng.below(0, VOCABULARY.len() as u64) as usize]);
    }
}

/// Common words that are single tokens with a leading space in the major BPE vocabularies.
const VOCABULARY: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "are", "with", "as", "at", "be",
    "by", "this", "had", "not", "but", "from", "or", "have", "an", "they", "which", "one", "you",
    "were", "her", "all", "she", "there", "would", "their", "we", "him", "been", "has", "when",
    "who", "will", "more", "no", "if", "out", "so", "said", "what", "up", "its", "about", "into",
    "than", "them", "can", "only", "other", "new", "some", "could", "time", "these", "two", "may",
    "then", "do", "first", "any", "my", "now", "such", "like", "our", "over", "man", "me", "even",
    "most", "made", "after", "also", "did", "many", "before", "must", "through", "back", "years",
    "where", "much", "your", "way", "well", "down", "should", "because", "each", "just", "those",
    "people", "how", "too", "little", "state", "good", "very", "make", "world", "still", "own",
    "see", "men", "work", "long", "get", "here", "between", "both", "life", "being", "under",
    "never", "day", "same", "another", "know", "while", "last", "might", "us", "great", "old",
    "year", "off", "come", "since", "against", "go", "came", "right", "used", "take", "three",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_follow_genai_bench_semantics() {
        let mut rng = Rng::new(1);
        let normal = TrafficScenario::parse("N(3,50)/(3,50)").expect("valid");
        for _ in 0..2000 {
            let d = draw(&normal, &mut rng);
            assert!(d.input_tokens >= 1 && d.output_tokens >= 2, "{d:?}");
        }
        let uniform = TrafficScenario::parse("U(10,12)/(3,4)").expect("valid");
        let draws: Vec<Draw> = (0..2000).map(|_| draw(&uniform, &mut rng)).collect();
        assert!(
            draws
                .iter()
                .all(|d| (10..12).contains(&d.input_tokens) && d.output_tokens == 3)
        );
        assert!(
            draws.iter().any(|d| d.input_tokens == 10)
                && draws.iter().any(|d| d.input_tokens == 11)
        );
        let fixed = TrafficScenario::parse("D(128,64)").expect("valid");
        assert_eq!(
            draw(&fixed, &mut rng),
            Draw {
                input_tokens: 128,
                output_tokens: 64
            }
        );
    }

    #[test]
    fn prompts_have_one_word_per_token() {
        let mut text = String::new();
        prompt(&mut Rng::new(3), 100, &mut text);
        assert_eq!(text.split_whitespace().count(), 100);
    }
}
