//! Multi-turn chat sessions: what each turn asks (a new user message of `user_tokens`
//! tokens, a reply of `output_tokens`) and the conversation a stream carries from turn
//! to turn (the earlier user messages and the assistant's actual replies, sent again in
//! front of every new message, as a chat client does).

use std::sync::Arc;
use std::time::Duration;

use crate::rng::Rng;
use crate::tokenizer::PromptWords;

use super::Draw;

/// What the workload asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SessionShape {
    pub turns: u32,
    pub user_tokens: u32,
    pub output_tokens: u32,
    /// Between a reply and the next turn of the same conversation.
    pub think_time: Duration,
}

/// The new user messages of every turn.
#[derive(Clone, Debug)]
pub struct Sessions {
    pub shape: SessionShape,
    words: Arc<PromptWords>,
}

impl Sessions {
    pub fn new(shape: SessionShape, words: Arc<PromptWords>) -> Self {
        Self { shape, words }
    }

    /// The iteration label, as the LLMInference kind writes it.
    pub fn label(&self) -> String {
        let s = &self.shape;
        format!(
            "sessions({}x{}/{},think {}ms)",
            s.turns,
            s.user_tokens,
            s.output_tokens,
            s.think_time.as_millis()
        )
    }

    /// A turn's new user message (appended to `prompt`); the history is the
    /// conversation's, sent in front of it.
    pub fn next(&self, rng: &mut Rng, prompt: &mut String) -> Draw {
        self.words.prompt(rng, self.shape.user_tokens, prompt);
        Draw {
            input_tokens: self.shape.user_tokens,
            output_tokens: Some(self.shape.output_tokens),
            system_bytes: 0,
        }
    }
}

/// The conversation a stream holds: the chat messages of its finished turns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Conversation {
    /// Turns finished so far (the next request is turn `finished + 1`).
    pub finished: u32,
    /// The messages so far as JSON objects, each followed by a comma, ready to go in
    /// front of the new user message of a `messages` array.
    messages: String,
    /// Prompt tokens of the history, by the run's tokenizer (what the next turn's
    /// prompt adds to its new message when the server reports no usage).
    pub tokens: u32,
}

impl Conversation {
    /// The history's messages: `{"role":"user",...},{"role":"assistant",...},` (empty
    /// before the first turn).
    pub fn messages(&self) -> &str {
        &self.messages
    }

    /// The turn the next request is (1 for the first).
    pub fn turn(&self) -> u32 {
        self.finished + 1
    }

    /// Adds a finished turn: the user's message and the assistant's reply.
    pub fn push(&mut self, user: &str, user_tokens: u32, reply: &str, reply_tokens: u32) {
        for (role, content) in [("user", user), ("assistant", reply)] {
            let content = serde_json::to_string(content).unwrap_or_else(|_| "\"\"".into());
            self.messages.push_str(r#"{"role":""#);
            self.messages.push_str(role);
            self.messages.push_str(r#"","content":"#);
            self.messages.push_str(&content);
            self.messages.push_str("},");
        }
        self.tokens = self
            .tokens
            .saturating_add(user_tokens)
            .saturating_add(reply_tokens);
        self.finished += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::Tokenizer;

    #[test]
    fn a_conversation_carries_every_message_in_order_as_json() {
        let mut conversation = Conversation::default();
        assert_eq!((conversation.turn(), conversation.messages()), (1, ""));
        conversation.push("hello there", 2, "hi \"you\"", 3);
        conversation.push("and now?", 2, "done", 1);
        assert_eq!(conversation.turn(), 3);
        assert_eq!(conversation.tokens, 8);
        // With the next user message it is a valid messages array.
        let array = format!(
            r#"[{}{{"role":"user","content":"next"}}]"#,
            conversation.messages()
        );
        let messages: Vec<serde_json::Value> = serde_json::from_str(&array).expect("JSON");
        let pairs: Vec<(&str, &str)> = messages
            .iter()
            .map(|m| {
                (
                    m["role"].as_str().unwrap_or_default(),
                    m["content"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("user", "hello there"),
                ("assistant", "hi \"you\""),
                ("user", "and now?"),
                ("assistant", "done"),
                ("user", "next"),
            ]
        );
    }

    #[test]
    fn each_turn_asks_a_new_message_of_the_users_length() {
        let tokenizer = Tokenizer::load("builtin:cl100k_base").expect("bundled");
        let words = Arc::new(PromptWords::for_tokenizer(&tokenizer).expect("words"));
        let shape = SessionShape {
            turns: 3,
            user_tokens: 24,
            output_tokens: 7,
            think_time: Duration::from_millis(150),
        };
        let sessions = Sessions::new(shape, words);
        assert_eq!(sessions.label(), "sessions(3x24/7,think 150ms)");
        let (mut first, mut second) = (String::new(), String::new());
        let draw = sessions.next(&mut Rng::derive(1, 0), &mut first);
        sessions.next(&mut Rng::derive(1, 1), &mut second);
        assert_eq!(draw.input_tokens, 24);
        assert_eq!(draw.output_tokens, Some(7));
        assert_eq!(tokenizer.count(&first), 24);
        assert_ne!(first, second, "every turn says something new");
    }
}
