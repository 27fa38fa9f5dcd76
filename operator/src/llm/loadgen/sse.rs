//! Server-sent events from OpenAI-compatible streaming endpoints, reduced to what the
//! load generator measures: when content arrived, how much, the usage the server
//! reported, and whether the stream ended properly.
//!
//! Handled: comment lines (`:`), `data:` with or without a space, multi-line data, CRLF,
//! events split across reads, role-only and empty finish chunks (not token events),
//! usage in the finish chunk, in a separate chunk with empty `choices`, or in every chunk
//! (continuous usage stats; the last one wins), `data: [DONE]`, and error events.

use std::borrow::Cow;

use serde::Deserialize;
use tokio::time::Instant;

#[derive(Deserialize)]
struct StreamChunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<ChunkChoice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
}

/// Token counts reported by the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// What one streamed response amounted to.
#[derive(Debug, Default)]
pub struct StreamState {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// When each event carrying content arrived.
    pub token_times: Vec<Instant>,
    /// Characters of content received.
    pub chars: usize,
    pub usage: Option<Usage>,
    /// `data: [DONE]` was received.
    pub done: bool,
    /// An error event, or a chunk that is not JSON.
    pub error: Option<(&'static str, String)>,
}

impl StreamState {
    /// Ready for a new response, keeping allocations.
    pub fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.token_times.clear();
        self.chars = 0;
        self.usage = None;
        self.done = false;
        self.error = None;
    }

    /// Feeds bytes read at `at`.
    pub fn feed(&mut self, mut bytes: &[u8], at: Instant) {
        while let Some(newline) = bytes.iter().position(|&b| b == b'\n') {
            let (head, rest) = bytes.split_at(newline);
            bytes = &rest[1..];
            if self.line.is_empty() {
                self.line_complete(head, at);
            } else {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(head);
                self.line_complete(&line, at);
                line.clear();
                self.line = line;
            }
        }
        self.line.extend_from_slice(bytes);
    }

    /// The body ended: dispatch an event left without its blank line.
    pub fn finish(&mut self, at: Instant) {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            self.line_complete(&line, at);
        }
        if self.has_data {
            self.dispatch(at);
        }
    }

    fn line_complete(&mut self, line: &[u8], at: Instant) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data {
                self.dispatch(at);
            }
            return;
        }
        if line[0] == b':' {
            return; // comment
        }
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        // Other fields (event:, id:, retry:) carry nothing we measure.
    }

    fn dispatch(&mut self, at: Instant) {
        let data = std::mem::take(&mut self.data);
        self.has_data = false;
        self.event(&data, at);
        let mut data = data;
        data.clear();
        self.data = data;
    }

    fn event(&mut self, data: &[u8], at: Instant) {
        if data.trim_ascii() == b"[DONE]" {
            self.done = true;
            return;
        }
        if self.error.is_some() {
            return;
        }
        let chunk: StreamChunk<'_> = match serde_json::from_slice(data) {
            Ok(chunk) => chunk,
            Err(error) => {
                self.error = Some(("protocol", format!("a streamed event is not JSON: {error}")));
                return;
            }
        };
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string());
            self.error = Some(("stream_error", message));
            return;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let mut chars = 0;
        for choice in &chunk.choices {
            if let Some(text) = &choice.text {
                chars += text.len();
            }
            if let Some(delta) = &choice.delta {
                chars += delta.content.as_deref().map_or(0, str::len);
                chars += delta.reasoning_content.as_deref().map_or(0, str::len);
            }
        }
        if chars > 0 {
            self.chars += chars;
            self.token_times.push(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(text: &str, piece: usize) -> StreamState {
        let mut state = StreamState::default();
        let start = Instant::now();
        for (i, bytes) in text.as_bytes().chunks(piece).enumerate() {
            state.feed(bytes, start + std::time::Duration::from_millis(i as u64));
        }
        state.finish(Instant::now());
        state
    }

    const CHAT: &str = ": ping\r\n\r\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\r\n\r\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" Hello\"}}]}\n\n\
        data:{\"choices\":[{\"index\":0,\"delta\":{\"content\":\" w\\u00f6rld\"}}]}\n\n\
        data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":2,\"total_tokens\":9}}\n\n\
        data: [DONE]\n\n";

    #[test]
    fn counts_content_events_only_whatever_the_read_boundaries() {
        for piece in [1, 2, 7, 64, 4096] {
            let state = feed_all(CHAT, piece);
            assert_eq!(state.token_times.len(), 2, "piece {piece}");
            assert!(state.done);
            assert!(state.error.is_none());
            assert_eq!(
                state.usage,
                Some(Usage {
                    prompt_tokens: Some(7),
                    completion_tokens: Some(2)
                })
            );
            assert_eq!(state.chars, " Hello".len() + " wörld".len());
        }
    }

    #[test]
    fn usage_in_the_finish_chunk_and_continuous_usage() {
        let text = "data: {\"choices\":[{\"text\":\"a\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\n\
            data: {\"choices\":[{\"text\":\"b\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
            data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\n\
            data: [DONE]\n\n";
        let state = feed_all(text, 5);
        assert_eq!(state.token_times.len(), 2);
        assert_eq!(state.usage.and_then(|u| u.completion_tokens), Some(2));
    }

    #[test]
    fn errors_mid_stream_and_garbage_are_reported() {
        let text = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n\
            data: {\"error\":{\"message\":\"out of memory\",\"code\":500}}\n\n";
        let state = feed_all(text, 3);
        assert_eq!(state.token_times.len(), 1);
        assert!(!state.done);
        assert_eq!(state.error, Some(("stream_error", "out of memory".into())));
        let state = feed_all("data: {not json\n\n", 4);
        assert_eq!(state.error.map(|e| e.0), Some("protocol"));
    }

    #[test]
    fn an_event_without_its_blank_line_is_dispatched_at_the_end() {
        let state = feed_all("data: {\"choices\":[{\"text\":\"x\"}]}\ndata: [DONE]", 100);
        // Two data lines without a blank line form one event: not JSON.
        assert!(state.error.is_some());
        let state = feed_all("data: {\"choices\":[{\"text\":\"x\"}]}", 100);
        assert_eq!(state.token_times.len(), 1);
    }
}
