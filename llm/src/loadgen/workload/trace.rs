//! Trace replay: a Mooncake-style JSON Lines trace, one request per line —
//! `{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, ...]}`
//! — sent on the trace's own schedule (`timestamp`, milliseconds, relative to the
//! first line) with latency counted from the scheduled time.
//!
//! Each hash id stands for one block of `block_tokens` prompt tokens (512 in
//! Mooncake's traces). The prompt of a request is its blocks' words in order, each block
//! drawn from a generator seeded by its hash id, so requests that share leading hash
//! ids share those prompt prefixes exactly — what a server's prefix cache sees in
//! production. The last block is cut to `input_length`; a prompt longer than its
//! blocks is padded with words of its own.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::rng::Rng;
use crate::tokenizer::PromptWords;

use super::Draw;

/// One line of the trace.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TraceRequest {
    /// Milliseconds from the trace's start.
    pub timestamp: u64,
    pub input_length: u32,
    pub output_length: u32,
    #[serde(default)]
    pub hash_ids: Vec<u64>,
}

/// Why a trace cannot be replayed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("trace line {line}: {message}")]
    Line { line: usize, message: String },
    #[error("the trace has no request")]
    Empty,
}

/// A trace ready to replay.
#[derive(Clone, Debug)]
pub struct Trace {
    requests: Arc<Vec<TraceRequest>>,
    /// When each request is due, from the first one (the trace's order).
    offsets: Arc<[Duration]>,
    block_tokens: u32,
    words: Arc<PromptWords>,
    seed: u64,
    origin: String,
}

/// Parses JSON Lines (blank lines skipped), in time order.
pub fn parse(text: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut requests = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let request: TraceRequest =
            serde_json::from_str(line).map_err(|error| TraceError::Line {
                line: index + 1,
                message: error.to_string(),
            })?;
        if request.output_length == 0 {
            return Err(TraceError::Line {
                line: index + 1,
                message: "output_length must be at least 1".into(),
            });
        }
        requests.push(request);
    }
    if requests.is_empty() {
        return Err(TraceError::Empty);
    }
    // Stable: lines with one timestamp keep their order.
    requests.sort_by_key(|r| r.timestamp);
    Ok(requests)
}

impl Trace {
    pub fn new(
        requests: Vec<TraceRequest>,
        block_tokens: u32,
        words: Arc<PromptWords>,
        seed: u64,
        origin: String,
    ) -> Self {
        let start = requests.first().map_or(0, |r| r.timestamp);
        let offsets = requests
            .iter()
            .map(|r| Duration::from_millis(r.timestamp - start))
            .collect();
        Self {
            requests: Arc::new(requests),
            offsets,
            block_tokens: block_tokens.max(1),
            words,
            seed,
            origin,
        }
    }

    /// The iteration label.
    pub fn label(&self) -> String {
        format!("trace {}", self.origin)
    }

    /// Requests in the trace (never none: [`parse`] refuses an empty trace).
    pub fn requests(&self) -> usize {
        self.requests.len()
    }

    /// When each request is due, from the first.
    pub fn offsets(&self) -> Arc<[Duration]> {
        self.offsets.clone()
    }

    /// The mean request rate over the trace, per second.
    pub fn mean_rate(&self) -> f64 {
        let span = self.offsets.last().map_or(0.0, Duration::as_secs_f64);
        if span > 0.0 {
            (self.offsets.len() - 1) as f64 / span
        } else {
            self.offsets.len() as f64
        }
    }

    /// Request `ticket`'s prompt (appended to `prompt`) and shape.
    pub fn next(&self, ticket: u64, prompt: &mut String) -> Draw {
        let count = self.requests.len().max(1) as u64;
        let Some(request) = self.requests.get((ticket % count) as usize) else {
            return Draw {
                input_tokens: 0,
                output_tokens: None,
                system_bytes: 0,
            };
        };
        let mut left = request.input_length;
        for &hash in &request.hash_ids {
            if left == 0 {
                break;
            }
            let take = left.min(self.block_tokens);
            if !prompt.is_empty() {
                prompt.push(' ');
            }
            // The block's words depend on its hash id only (and the run's seed).
            let mut rng = Rng::derive(self.seed ^ 0x74_7261_6365, hash);
            self.words.prompt(&mut rng, take, prompt);
            left -= take;
        }
        if left > 0 {
            if !prompt.is_empty() {
                prompt.push(' ');
            }
            let mut rng = Rng::derive(self.seed ^ 0x7061_6464, ticket);
            self.words.prompt(&mut rng, left, prompt);
        }
        Draw {
            input_tokens: request.input_length,
            output_tokens: Some(request.output_length),
            system_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Tokenizer;

    const TRACE: &str = r#"{"timestamp": 100, "input_length": 10, "output_length": 3, "hash_ids": [7, 8, 9]}
{"timestamp": 0, "input_length": 8, "output_length": 2, "hash_ids": [7, 8]}

{"timestamp": 250, "input_length": 6, "output_length": 1, "hash_ids": [5]}
"#;

    #[test]
    fn requests_sharing_hash_ids_share_their_prompt_prefixes() {
        let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
        let words = Arc::new(PromptWords::for_tokenizer(&tokenizer).expect("words"));
        let requests = parse(TRACE).expect("parses");
        assert_eq!(requests[0].timestamp, 0, "sorted by time");
        let trace = Trace::new(requests, 4, words, 1, "t.jsonl".into());
        assert_eq!(
            &trace.offsets()[..],
            &[
                Duration::ZERO,
                Duration::from_millis(100),
                Duration::from_millis(250)
            ]
        );
        assert!((trace.mean_rate() - 8.0).abs() < 1e-9);
        let prompts: Vec<(String, Draw)> = (0..3)
            .map(|ticket| {
                let mut prompt = String::new();
                let draw = trace.next(ticket, &mut prompt);
                (prompt, draw)
            })
            .collect();
        for (prompt, draw) in &prompts {
            assert_eq!(
                tokenizer.count(prompt),
                draw.input_tokens as usize,
                "{prompt}"
            );
        }
        // Blocks 7 and 8 (4 tokens each) open both of the first two prompts.
        let first: Vec<&str> = prompts[0].0.split(' ').collect();
        let second: Vec<&str> = prompts[1].0.split(' ').collect();
        assert_eq!(first[..8], second[..8]);
        assert_ne!(first[..4], prompts[2].0.split(' ').collect::<Vec<_>>()[..4]);
        assert_eq!(prompts[1].1.output_tokens, Some(3));
    }

    #[test]
    fn bad_lines_are_reported_by_number() {
        let error =
            parse("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\nnot json\n")
                .expect_err("line 2");
        assert!(error.to_string().starts_with("trace line 2:"), "{error}");
        let error = parse("{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 0}")
            .expect_err("no output");
        assert!(error.to_string().contains("output_length"), "{error}");
        assert!(matches!(parse("\n\n"), Err(TraceError::Empty)));
    }
}
