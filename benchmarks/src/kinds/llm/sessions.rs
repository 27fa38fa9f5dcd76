//! Multi-turn chat sessions: each of `numConcurrency` streams holds one conversation at
//! a time, of `turns` requests; every turn sends the conversation so far (the earlier
//! user messages and the assistant's actual replies) and a new user message, after
//! `thinkTimeMillis` of "reading". Later turns carry longer prompts whose beginning the
//! server has seen: TTFT grows with the history without a prefix cache and stays low
//! with one. Figures are reported per turn (`perTurn`) as well as for the iteration.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Api, LLMInferenceSpec, Task};
use crate::api::validation::FieldError;
pub use perfsweep_llm::report::sessions::{TurnFigures, summary};

/// The conversation each stream holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionsSpec {
    /// Requests per conversation.
    #[schemars(range(min = 1, max = 1000))]
    pub turns: u32,
    /// Tokens of each new user message.
    #[schemars(range(min = 1, max = 1000000))]
    pub user_tokens: u32,
    /// Tokens each turn generates (the reply carried into the next turns).
    #[schemars(range(min = 1, max = 1000000))]
    pub output_tokens: u32,
    /// Milliseconds between a reply and the next turn (the user reading and typing).
    #[serde(default)]
    #[schemars(range(min = 0, max = 3600000))]
    pub think_time_millis: u64,
}

impl SessionsSpec {
    /// The iteration label: `sessions(T×U/O,think Nms)`.
    pub fn label(&self) -> String {
        format!(
            "sessions({}x{}/{},think {}ms)",
            self.turns, self.user_tokens, self.output_tokens, self.think_time_millis
        )
    }
}

/// What sessions cannot be combined with, by field.
pub fn check(spec: &LLMInferenceSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if spec.sessions.is_none() {
        return errors;
    }
    let conflict = |path: &str, message: &str| FieldError::new(path, message);
    if spec.api != Api::Chat {
        errors.push(conflict(
            "spec.api",
            "sessions carry a chat history: they need api chat",
        ));
    }
    if !spec.streaming {
        errors.push(conflict(
            "spec.streaming",
            "sessions read the assistant's replies from the stream: set streaming true",
        ));
    }
    if spec.task == Task::TextToEmbeddings {
        errors.push(conflict("spec.sessions", "sessions are for text-to-text"));
    }
    if spec.dataset.is_some() || spec.shared_prefix.is_some() {
        errors.push(conflict(
            "spec.sessions",
            "sessions, dataset and sharedPrefix each choose the prompts: set one of them",
        ));
    }
    if !spec.request_rates.is_empty() || spec.saturation.is_some() {
        errors.push(conflict(
            "spec.sessions",
            "sessions run as a closed loop (numConcurrency conversations at once): \
             requestRates and saturation do not apply",
        ));
    }
    if !spec.model_mix.is_empty() {
        errors.push(conflict(
            "spec.modelMix",
            "a model mix draws per request, which would switch models mid-conversation",
        ));
    }
    if spec.workers > 1 {
        errors.push(conflict(
            "spec.workers",
            "sessions run on one load generator (per-turn figures do not merge)",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: serde_json::Value) -> LLMInferenceSpec {
        let mut json = serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "m"},
            "numConcurrency": [2],
            "sessions": {"turns": 3, "userTokens": 64, "outputTokens": 16, "thinkTimeMillis": 250},
        });
        if let (Some(json), Some(extra)) = (json.as_object_mut(), extra.as_object()) {
            json.extend(extra.clone());
        }
        serde_json::from_value(json).expect("valid spec")
    }

    fn paths(spec: &LLMInferenceSpec) -> Vec<String> {
        use crate::kinds::registry::BenchmarkKind as _;
        super::super::LLMInference::check(spec)
            .into_iter()
            .map(|e| e.path)
            .collect()
    }

    #[test]
    fn sessions_render_as_loadgen_flags_and_replace_the_scenarios() {
        use crate::execution::plan::{PeerAddresses, resolve_args};
        let plan = super::super::plan::plan(&spec(serde_json::json!({}))).expect("plan");
        let args = resolve_args(
            &plan.role("loadgen").expect("loadgen").command.args,
            &PeerAddresses::new(),
        )
        .expect("resolvable")
        .join(" ");
        assert!(
            args.contains(
                "--sessions-turns 3 --sessions-user-tokens 64 --sessions-output-tokens 16 \
                 --sessions-think-time-ms 250"
            ),
            "{args}"
        );
        assert!(!args.contains("--scenario"), "{args}");
        assert!(args.contains("--concurrency 2"), "{args}");
    }

    #[test]
    fn sessions_refuse_what_cannot_carry_a_conversation() {
        assert_eq!(paths(&spec(serde_json::json!({}))), Vec::<String>::new());
        assert_eq!(
            paths(&spec(
                serde_json::json!({"api": "completions", "streaming": false})
            )),
            ["spec.api", "spec.streaming"]
        );
        assert_eq!(
            paths(&spec(serde_json::json!({"requestRates": [5]}))),
            ["spec.sessions"]
        );
        assert_eq!(
            paths(&spec(serde_json::json!({"trafficScenarios": ["D(10,10)"]}))),
            ["spec.trafficScenarios"]
        );
        assert_eq!(
            paths(&spec(serde_json::json!({"workers": 2}))),
            ["spec.workers"]
        );
    }

    #[test]
    fn the_label_names_the_shape() {
        let spec = SessionsSpec {
            turns: 3,
            user_tokens: 64,
            output_tokens: 16,
            think_time_millis: 250,
        };
        assert_eq!(spec.label(), "sessions(3x64/16,think 250ms)");
    }
}
