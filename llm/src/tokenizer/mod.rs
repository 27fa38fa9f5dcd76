//! Tokenizers the load generator counts tokens with, offline: a bundled vocabulary
//! (`builtin:cl100k_base`, `builtin:o200k_base`, from tiktoken-rs) or a Hugging Face
//! `tokenizer.json` file (mounted from a ConfigMap or a PVC, or a local path). Never a
//! download: a missing or unusable tokenizer is an error before any request is sent.
//!
//! Used to build prompts of an exact token count ([`PromptWords`]), to count tokens the
//! server did not report, and to cross-check the counts it did report.

pub mod bpe_json;

use std::path::Path;

use anyhow::{Context as _, bail};

use crate::rng::Rng;

/// A tokenizer, counting tokens as the model's own would (without special tokens).
pub enum Tokenizer {
    Tiktoken {
        name: &'static str,
        bpe: Box<tiktoken_rs::CoreBPE>,
    },
    Json {
        path: String,
        bpe: Box<bpe_json::JsonBpe>,
    },
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tokenizer({})", self.name())
    }
}

/// The prefix of a bundled tokenizer's name in `--tokenizer`.
pub const BUILTIN: &str = "builtin:";

impl Tokenizer {
    /// `builtin:cl100k_base`, `builtin:o200k_base`, or the path of a `tokenizer.json`.
    pub fn load(spec: &str) -> anyhow::Result<Self> {
        if let Some(name) = spec.strip_prefix(BUILTIN) {
            let (name, bpe) = match name {
                "cl100k_base" => ("cl100k_base", tiktoken_rs::cl100k_base()),
                "o200k_base" => ("o200k_base", tiktoken_rs::o200k_base()),
                other => bail!(
                    "tokenizer {other:?} is not bundled: use builtin:cl100k_base, builtin:o200k_base or a tokenizer.json file"
                ),
            };
            let bpe = bpe.with_context(|| format!("loading the bundled {name} vocabulary"))?;
            return Ok(Self::Tiktoken {
                name,
                bpe: Box::new(bpe),
            });
        }
        let path = Path::new(spec);
        let text = std::fs::read_to_string(path).with_context(|| {
            format!(
                "cannot read the tokenizer file {} (is the ConfigMap key or PVC path right?)",
                path.display()
            )
        })?;
        let bpe = bpe_json::JsonBpe::from_json(&text)
            .with_context(|| format!("tokenizer file {}", path.display()))?;
        Ok(Self::Json {
            path: spec.to_owned(),
            bpe: Box::new(bpe),
        })
    }

    /// [`Tokenizer::load`], with the bundled vocabularies parsed once per process (a
    /// tenth of a second each, more unoptimised) however many runs use them.
    pub fn shared(spec: &str) -> anyhow::Result<std::sync::Arc<Self>> {
        use std::collections::HashMap;
        use std::sync::{Arc, Mutex, OnceLock};
        static BUILTIN_CACHE: OnceLock<Mutex<HashMap<String, Arc<Tokenizer>>>> = OnceLock::new();
        if !spec.starts_with(BUILTIN) {
            return Self::load(spec).map(Arc::new);
        }
        let cache = BUILTIN_CACHE.get_or_init(Default::default);
        if let Some(tokenizer) = cache.lock().ok().and_then(|c| c.get(spec).cloned()) {
            return Ok(tokenizer);
        }
        let tokenizer = Arc::new(Self::load(spec)?);
        if let Ok(mut cache) = cache.lock() {
            cache.insert(spec.to_owned(), tokenizer.clone());
        }
        Ok(tokenizer)
    }

    /// What it is, for reports.
    pub fn name(&self) -> &str {
        match self {
            Self::Tiktoken { name, .. } => name,
            Self::Json { path, .. } => path,
        }
    }

    /// The token ids of `text`, no special tokens added.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        match self {
            Self::Tiktoken { bpe, .. } => bpe.encode_ordinary(text),
            Self::Json { bpe, .. } => bpe.encode(text),
        }
    }

    /// How many tokens `text` is.
    pub fn count(&self, text: &str) -> usize {
        self.encode(text).len()
    }
}

/// Words that are one token each for a given tokenizer, alone and after a space, so a
/// prompt of N of them separated by single spaces is exactly N tokens. That holds for
/// every tokenizer whose pre-tokenization splits before ` word` (all GPT-style regexes,
/// the GPT-2 ByteLevel one included); [`PromptWords::for_tokenizer`] checks it rather
/// than assuming it. Building a prompt is then a few random picks: no tokenizing per
/// request.
#[derive(Clone, Debug)]
pub struct PromptWords {
    words: Vec<&'static str>,
}

/// Fewer single-token words than this and prompts would be too repetitive to be
/// realistic (and cache too well).
const MIN_WORDS: usize = 8;

impl PromptWords {
    /// The candidates that are single tokens for `tokenizer`; fails when too few are,
    /// or when prompts built from them do not have the exact length.
    pub fn for_tokenizer(tokenizer: &Tokenizer) -> anyhow::Result<Self> {
        let words: Vec<&'static str> = CANDIDATES
            .iter()
            .copied()
            .filter(|w| tokenizer.count(w) == 1 && tokenizer.count(&format!(" {w}")) == 1)
            .collect();
        if words.len() < MIN_WORDS {
            bail!(
                "tokenizer {}: only {} common English words are single tokens (at least {MIN_WORDS} are needed to build prompts of exact length)",
                tokenizer.name(),
                words.len()
            );
        }
        let built = Self { words };
        // The construction's premise, checked once on this tokenizer.
        let mut prompt = String::new();
        for (seed, n) in [(1, 1u32), (2, 2), (3, 97), (4, 500)] {
            prompt.clear();
            built.prompt(&mut Rng::new(seed), n, &mut prompt);
            let counted = tokenizer.count(&prompt);
            if counted != n as usize {
                bail!(
                    "tokenizer {}: a prompt of {n} single-token words is {counted} tokens; this tokenizer's pre-tokenization joins words",
                    tokenizer.name()
                );
            }
        }
        Ok(built)
    }

    /// How many distinct words prompts are drawn from.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// Appends a prompt of exactly `tokens` tokens (`tokens` words) to `out`.
    pub fn prompt(&self, rng: &mut Rng, tokens: u32, out: &mut String) {
        out.reserve(tokens as usize * 6);
        for i in 0..tokens {
            if i > 0 {
                out.push(' ');
            }
            out.push_str(self.words[rng.below(0, self.words.len() as u64) as usize]);
        }
    }
}

/// Common English words; most are single tokens with and without a leading space in the
/// GPT, Llama 3 and Qwen vocabularies.
const CANDIDATES: &[&str] = &[
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
    "file", "run", "test", "data", "node", "server", "model", "result", "value", "set", "use",
    "name", "list", "type", "load", "start", "end", "case", "line", "part", "number", "point",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tokenizers_count_like_tiktoken() {
        let cl100k = Tokenizer::load("builtin:cl100k_base").expect("a bundled tokenizer");
        // tiktoken: "hello world" is [15339, 1917] in cl100k_base.
        assert_eq!(cl100k.encode("hello world"), [15339, 1917]);
        let o200k = Tokenizer::load("builtin:o200k_base").expect("a bundled tokenizer");
        assert_eq!(o200k.count("hello world"), 2);
        let error = Tokenizer::load("builtin:gpt5").unwrap_err();
        assert!(error.to_string().contains("not bundled"), "{error}");
    }

    #[test]
    fn a_missing_file_is_a_clear_error() {
        let error = Tokenizer::load("/nonexistent/tokenizer.json").unwrap_err();
        assert!(
            format!("{error:#}").contains("/nonexistent/tokenizer.json"),
            "{error:#}"
        );
    }

    #[test]
    fn builtin_vocabularies_have_most_candidate_words() {
        for name in ["builtin:cl100k_base", "builtin:o200k_base"] {
            let tokenizer = Tokenizer::load(name).expect("a bundled tokenizer");
            let words = PromptWords::for_tokenizer(&tokenizer).expect("prompt words");
            assert!(words.len() > 150, "{name}: {}", words.len());
        }
    }
}
