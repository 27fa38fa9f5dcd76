//! What each request asks for: a genai-bench traffic scenario drawn per request, or an
//! entry of a dataset.
//!
//! Token counts are drawn exactly as genai-bench does ([`TrafficScenario::sample`]).
//! Synthetic prompts are built from words that are one token each for the run's
//! tokenizer ([`PromptWords`]), so a prompt of N words is exactly N tokens of that
//! tokenizer, without tokenizing anything per request. Chat templates add a few tokens
//! of their own on the server, which the usage cross-check reports.

use std::sync::Arc;

use crate::scenario::{RandomSource, TrafficScenario};

use crate::dataset::Dataset;
use crate::rng::Rng;
use crate::tokenizer::PromptWords;

pub mod sessions;
pub mod shared_prefix;
pub mod trace;
use sessions::Sessions;
use shared_prefix::SharedPrefix;
use trace::Trace;

impl RandomSource for Rng {
    fn unit(&mut self) -> f64 {
        Rng::unit(self)
    }

    fn normal(&mut self) -> f64 {
        Rng::normal(self)
    }
}

/// One request's shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Draw {
    /// Prompt tokens, by the run's tokenizer.
    pub input_tokens: u32,
    /// Tokens to generate; `None` leaves it to the server (dataset prompts without a
    /// length), and embeddings generate none.
    pub output_tokens: Option<u32>,
    /// The prompt's first bytes that are a system prompt (sent as the `system` message
    /// of a chat request); 0 for none.
    pub system_bytes: usize,
}

/// Token counts of one request of a scenario (deterministic for a seed).
pub fn draw(scenario: &TrafficScenario, rng: &mut Rng) -> Draw {
    let (input_tokens, output_tokens) = scenario.sample(rng);
    Draw {
        input_tokens,
        output_tokens: (!scenario.is_embedding()).then_some(output_tokens),
        system_bytes: 0,
    }
}

/// Where an iteration's requests come from.
#[derive(Clone, Debug)]
pub enum Workload {
    Scenario {
        scenario: TrafficScenario,
        words: Arc<PromptWords>,
    },
    Dataset {
        dataset: Arc<Dataset>,
        /// Embeddings of the dataset's prompts rather than completions.
        embeddings: bool,
        /// The entry request 0 sends: workers of a distributed run start at different
        /// places so that together they cover the dataset.
        offset: u64,
    },
    /// Prompts sharing system prompts (prefix-cache tests).
    SharedPrefix(SharedPrefix),
    /// A production trace, replayed on its own schedule.
    Trace(Trace),
    /// Multi-turn chat sessions (the history comes from the stream's conversation).
    Sessions(Sessions),
}

impl Workload {
    /// The iteration's label: the scenario string, or `dataset`.
    pub fn label(&self) -> String {
        match self {
            Self::Scenario { scenario, .. } => scenario.to_string(),
            Self::Dataset { .. } => "dataset".into(),
            Self::SharedPrefix(shared) => shared.label(),
            Self::Trace(trace) => trace.label(),
            Self::Sessions(sessions) => sessions.label(),
        }
    }

    /// Whether requests go to `/v1/embeddings`.
    pub fn is_embedding(&self) -> bool {
        match self {
            Self::Scenario { scenario, .. } => scenario.is_embedding(),
            Self::Dataset { embeddings, .. } => *embeddings,
            Self::SharedPrefix(_) | Self::Trace(_) | Self::Sessions(_) => false,
        }
    }

    /// Request `ticket`'s prompt (appended to `prompt`) and shape; `rng` is the request's
    /// own generator.
    pub fn next(&self, rng: &mut Rng, ticket: u64, prompt: &mut String) -> Draw {
        match self {
            Self::Scenario { scenario, words } => {
                let shape = draw(scenario, rng);
                words.prompt(rng, shape.input_tokens, prompt);
                shape
            }
            Self::Dataset {
                dataset,
                embeddings,
                offset,
            } => {
                let count = dataset.entries.len().max(1) as u64;
                let Some(entry) = dataset
                    .entries
                    .get((ticket.wrapping_add(*offset) % count) as usize)
                else {
                    return Draw {
                        input_tokens: 0,
                        output_tokens: None,
                        system_bytes: 0,
                    };
                };
                prompt.push_str(&entry.prompt);
                Draw {
                    input_tokens: entry.input_tokens,
                    output_tokens: if *embeddings {
                        None
                    } else {
                        entry.output_tokens
                    },
                    system_bytes: 0,
                }
            }
            Self::SharedPrefix(shared) => shared.next(rng, prompt),
            Self::Trace(trace) => trace.next(ticket, prompt),
            Self::Sessions(sessions) => sessions.next(rng, prompt),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::Entry;
    use crate::tokenizer::Tokenizer;

    fn words() -> Arc<PromptWords> {
        let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
        Arc::new(PromptWords::for_tokenizer(&tokenizer).expect("words"))
    }

    #[test]
    fn scenario_requests_have_the_drawn_prompt_length() {
        let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
        let workload = Workload::Scenario {
            scenario: TrafficScenario::parse("U(10,200)/(5,9)").expect("valid"),
            words: words(),
        };
        for ticket in 0..50 {
            let mut prompt = String::new();
            let shape = workload.next(&mut Rng::derive(3, ticket), ticket, &mut prompt);
            assert!((10..200).contains(&shape.input_tokens));
            assert!(shape.output_tokens.is_some_and(|o| (5..9).contains(&o)));
            assert_eq!(tokenizer.count(&prompt), shape.input_tokens as usize);
        }
        let embedding = Workload::Scenario {
            scenario: TrafficScenario::parse("E(32)").expect("valid"),
            words: words(),
        };
        assert!(embedding.is_embedding());
        let shape = embedding.next(&mut Rng::new(1), 0, &mut String::new());
        assert_eq!(
            shape,
            Draw {
                input_tokens: 32,
                output_tokens: None,
                system_bytes: 0,
            }
        );
    }

    #[test]
    fn shared_prefix_requests_share_one_of_the_groups_system_prompts() {
        use shared_prefix::SharedPrefixShape;
        let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
        let shape = SharedPrefixShape {
            groups: 3,
            system_tokens: 40,
            question_tokens: 10,
            output_tokens: 5,
        };
        let workload = Workload::SharedPrefix(SharedPrefix::new(shape, words(), 1));
        assert_eq!(workload.label(), "shared-prefix(3x40+10/5)");
        let mut systems = std::collections::BTreeSet::new();
        for ticket in 0..60 {
            let mut prompt = String::new();
            let draw = workload.next(&mut Rng::derive(9, ticket), ticket, &mut prompt);
            assert_eq!(draw.input_tokens, 50);
            assert_eq!(draw.output_tokens, Some(5));
            let (system, question) = prompt.split_at(draw.system_bytes);
            assert_eq!(tokenizer.count(system), 40);
            assert_eq!(tokenizer.count(&prompt), 50, "{prompt}");
            assert!(!question.trim().is_empty());
            systems.insert(system.to_owned());
        }
        assert_eq!(systems.len(), 3, "every group drawn, and only those");
    }

    #[test]
    fn dataset_requests_cycle_through_the_entries() {
        let entry = |text: &str, output| Entry {
            prompt: text.into(),
            input_tokens: 2,
            output_tokens: output,
        };
        let workload = Workload::Dataset {
            dataset: Arc::new(Dataset {
                entries: vec![entry("a b", Some(5)), entry("c d", None)],
                origin: "test".into(),
            }),
            embeddings: false,
            offset: 0,
        };
        let prompts: Vec<(String, Draw)> = (0..4)
            .map(|ticket| {
                let mut prompt = String::new();
                let shape = workload.next(&mut Rng::new(ticket), ticket, &mut prompt);
                (prompt, shape)
            })
            .collect();
        assert_eq!(prompts[0].0, "a b");
        assert_eq!(prompts[0].1.output_tokens, Some(5));
        assert_eq!(prompts[1].0, "c d");
        assert_eq!(prompts[1].1.output_tokens, None);
        assert_eq!(prompts[2], prompts[0]);
        assert_eq!(workload.label(), "dataset");
        // A second worker starts one entry further.
        let Workload::Dataset { dataset, .. } = &workload else {
            unreachable!()
        };
        let second = Workload::Dataset {
            dataset: dataset.clone(),
            embeddings: false,
            offset: 1,
        };
        let mut prompt = String::new();
        second.next(&mut Rng::new(0), 0, &mut prompt);
        assert_eq!(prompt, "c d");
    }
}
