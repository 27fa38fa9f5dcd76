//! Shared-prefix prompts for prefix-cache tests: `groups` system prompts of
//! `system_tokens` tokens each, fixed for the run, and per request one of them (drawn
//! at random) followed by a fresh question of `question_tokens` tokens. A server with a
//! prefix cache prefills each system prompt once; one without pays for it every time.
//! In chat requests the system prompt is the `system` message and the question the
//! `user` message; in completions they are one prompt.

use std::sync::Arc;

use crate::rng::Rng;
use crate::tokenizer::PromptWords;

use super::Draw;

/// What the workload asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharedPrefixShape {
    pub groups: u32,
    pub system_tokens: u32,
    pub question_tokens: u32,
    pub output_tokens: u32,
}

/// The run's system prompts and the question words.
#[derive(Clone, Debug)]
pub struct SharedPrefix {
    pub shape: SharedPrefixShape,
    prefixes: Arc<Vec<String>>,
    words: Arc<PromptWords>,
}

impl SharedPrefix {
    /// The system prompts of `seed` (the same for every worker of a run, so that the
    /// workers share the prefixes too).
    pub fn new(shape: SharedPrefixShape, words: Arc<PromptWords>, seed: u64) -> Self {
        let prefixes = (0..shape.groups.max(1))
            .map(|group| {
                let mut prompt = String::new();
                let mut rng = Rng::derive(seed ^ 0x5348_4152_4544, u64::from(group));
                words.prompt(&mut rng, shape.system_tokens, &mut prompt);
                prompt
            })
            .collect();
        Self {
            shape,
            prefixes: Arc::new(prefixes),
            words,
        }
    }

    /// The iteration label: `shared-prefix(G×S+Q/O)`.
    pub fn label(&self) -> String {
        let s = &self.shape;
        format!(
            "shared-prefix({}x{}+{}/{})",
            s.groups, s.system_tokens, s.question_tokens, s.output_tokens
        )
    }

    /// One request: a group's system prompt, then a question (appended to `prompt`).
    pub fn next(&self, rng: &mut Rng, prompt: &mut String) -> Draw {
        let group = rng.below(0, self.prefixes.len() as u64) as usize;
        let prefix = self.prefixes.get(group).map_or("", String::as_str);
        prompt.push_str(prefix);
        let system_bytes = prompt.len();
        if !prefix.is_empty() && self.shape.question_tokens > 0 {
            prompt.push(' ');
        }
        self.words.prompt(rng, self.shape.question_tokens, prompt);
        Draw {
            input_tokens: self.shape.system_tokens + self.shape.question_tokens,
            output_tokens: Some(self.shape.output_tokens),
            system_bytes,
        }
    }
}
