//! Server-sent events from OpenAI-compatible streaming endpoints, reduced to what the
//! load generator measures: when content arrived, how much, the usage the server
//! reported, and whether the stream ended properly.
//!
//! Handled: comment lines (`:`), `data:` with or without a space, multi-line data, CRLF,
//! events split across reads, role-only and empty finish chunks (not token events),
//! usage in the finish chunk, in a separate chunk with empty `choices`, or in every chunk
//! (continuous usage stats; the last one wins), `data: [DONE]`, and error events. A line
//! that is neither a field (`data:`, `event:`, `id:`, `retry:`), a comment nor blank
//! fails the request as a protocol error of its own kind ([`BARE_LINE`],
//! [`UNKNOWN_FIELD`]) instead of being dropped with whatever token it carried.

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
    /// Prompt tokens the server's prefix cache held, when it says.
    #[serde(default)]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
}

/// `usage.prompt_tokens_details`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct PromptTokensDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
}

impl Usage {
    /// Prompt tokens served from the prefix cache, when the server reported them.
    pub fn cached_tokens(&self) -> Option<u64> {
        self.prompt_tokens_details.and_then(|d| d.cached_tokens)
    }
}

/// What one streamed response amounted to.
#[derive(Debug, Default)]
pub struct StreamState {
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    /// When each event carrying content arrived.
    pub token_times: Vec<Instant>,
    /// Events carrying reasoning (`delta.reasoning_content`), and when the first of
    /// them and the first carrying the answer arrived.
    pub reasoning_events: u32,
    pub first_reasoning: Option<Instant>,
    pub first_answer: Option<Instant>,
    /// Characters of content received.
    pub chars: usize,
    /// The content received (for the tokenizer: fallback counts and the usage check).
    pub text: String,
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
        self.reasoning_events = 0;
        self.first_reasoning = None;
        self.first_answer = None;
        self.chars = 0;
        self.text.clear();
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
            return;
        }
        if let Some((kind, message)) = invalid_line(line) {
            // The line's content is lost either way: the request fails rather than
            // reporting a token count and gaps that miss it.
            if self.error.is_none() {
                self.error = Some((kind, message));
            }
        }
        // The other fields (event:, id:, retry:) carry nothing we measure.
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
        // The common chunk shapes are read without building anything; anything else
        // (escapes in the content, errors, unusual layouts) goes through serde_json.
        let before = self.text.len();
        if let Some(scan) = scan::chunk_into(data, &mut self.text) {
            if let Some(usage) = scan.usage {
                self.usage = Some(usage);
            }
            if scan.chars > 0 {
                self.chars += scan.chars;
                self.token_times.push(at);
                self.classify(scan.reasoning_chars, scan.chars - scan.reasoning_chars, at);
            }
            return;
        }
        // The scan gave up: whatever content it copied is read again below.
        self.text.truncate(before);
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
                .map_or_else(|| error.to_string(), str::to_owned);
            self.error = Some(("stream_error", message));
            return;
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage);
        }
        let (mut chars, mut reasoning) = (0, 0);
        for choice in &chunk.choices {
            if let Some(text) = &choice.text {
                chars += text.len();
                self.text.push_str(text);
            }
            if let Some(delta) = &choice.delta {
                if let Some(text) = &delta.reasoning_content {
                    reasoning += text.len();
                }
                for text in [&delta.content, &delta.reasoning_content]
                    .into_iter()
                    .flatten()
                {
                    chars += text.len();
                    self.text.push_str(text);
                }
            }
        }
        if chars > 0 {
            self.chars += chars;
            self.token_times.push(at);
            self.classify(reasoning, chars - reasoning, at);
        }
    }

    /// Counts a content event as reasoning and/or answer.
    fn classify(&mut self, reasoning_chars: usize, answer_chars: usize, at: Instant) {
        if reasoning_chars > 0 {
            self.reasoning_events += 1;
            self.first_reasoning.get_or_insert(at);
        }
        if answer_chars > 0 {
            self.first_answer.get_or_insert(at);
        }
    }
}

/// Failure kind of a line that is neither a field nor a comment, e.g. a JSON chunk
/// without its `data:` prefix.
pub const BARE_LINE: &str = "protocol_sse_bare_line";
/// Failure kind of a field other than `data`, `event`, `id` and `retry`.
pub const UNKNOWN_FIELD: &str = "protocol_sse_unknown_field";

/// Why a non-empty line that is neither a comment nor `data:` breaks the protocol, if it
/// does: the SSE fields the OpenAI streams use are `data`, `event`, `id` and `retry`.
fn invalid_line(line: &[u8]) -> Option<(&'static str, String)> {
    let shown = || String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
    // A field name is a word; anything else before the first colon (a JSON chunk's
    // `{"choices"`) means the line is no field at all.
    let name = line
        .iter()
        .position(|&b| b == b':')
        .map(|colon| &line[..colon])
        .filter(|name| {
            name.iter()
                .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        });
    match name {
        None => Some((
            BARE_LINE,
            format!("a stream line is not an SSE field: {:?}", shown()),
        )),
        Some(b"event" | b"id" | b"retry") => None,
        Some(_) => Some((
            UNKNOWN_FIELD,
            format!("a stream line has an unknown SSE field: {:?}", shown()),
        )),
    }
}

/// A scanner for streamed chunks: walks the JSON once, reads the content lengths and the
/// usage, skips everything else, and gives up (`None`) on anything it does not expect.
mod scan {
    use super::Usage;

    pub struct Scan {
        pub chars: usize,
        /// Of `chars`, those of `reasoning_content`.
        pub reasoning_chars: usize,
        pub usage: Option<Usage>,
    }

    /// Nesting deeper than this is left to serde_json.
    const MAX_DEPTH: u32 = 32;

    #[cfg(test)]
    pub fn chunk(data: &[u8]) -> Option<Scan> {
        chunk_into(data, &mut String::new())
    }

    /// Scans `data`, appending the content to `text` (partly, when it gives up).
    pub fn chunk_into(data: &[u8], text: &mut String) -> Option<Scan> {
        let mut p = Parser { b: data, i: 0 };
        let mut scan = Scan {
            chars: 0,
            reasoning_chars: 0,
            usage: None,
        };
        p.object(|p, key| match key {
            b"choices" => p.array(|p| {
                p.object(|p, key| match key {
                    b"text" => p.content(&mut scan.chars, text),
                    b"delta" => p.nullable_object(|p, key| match key {
                        b"content" => p.content(&mut scan.chars, text),
                        b"reasoning_content" => {
                            let before = scan.chars;
                            p.content(&mut scan.chars, text)?;
                            scan.reasoning_chars += scan.chars - before;
                            Some(())
                        }
                        _ => p.skip(0),
                    }),
                    _ => p.skip(0),
                })
            }),
            b"usage" => {
                let mut usage = Usage::default();
                let mut seen = false;
                p.nullable_object(|p, key| {
                    seen = true;
                    match key {
                        b"prompt_tokens" => p.count(&mut usage.prompt_tokens),
                        b"completion_tokens" => p.count(&mut usage.completion_tokens),
                        b"prompt_tokens_details" => {
                            let mut details = super::PromptTokensDetails::default();
                            p.nullable_object(|p, key| match key {
                                b"cached_tokens" => p.count(&mut details.cached_tokens),
                                _ => p.skip(0),
                            })?;
                            usage.prompt_tokens_details = Some(details);
                            Some(())
                        }
                        _ => p.skip(0),
                    }
                })?;
                if seen {
                    scan.usage = Some(usage);
                }
                Some(())
            }
            b"error" => None,
            _ => p.skip(0),
        })?;
        p.ws();
        (p.i == data.len()).then_some(scan)
    }

    struct Parser<'a> {
        b: &'a [u8],
        i: usize,
    }

    impl<'a> Parser<'a> {
        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
                self.i += 1;
            }
        }

        fn peek(&mut self) -> Option<u8> {
            self.ws();
            self.b.get(self.i).copied()
        }

        fn eat(&mut self, byte: u8) -> Option<()> {
            (self.peek()? == byte).then(|| self.i += 1)
        }

        fn literal(&mut self, word: &[u8]) -> Option<()> {
            self.ws();
            let end = self.i.checked_add(word.len())?;
            (self.b.get(self.i..end)? == word).then(|| self.i = end)
        }

        /// A string without escapes (with them: `None`, serde_json decodes those).
        fn string(&mut self) -> Option<&'a [u8]> {
            self.eat(b'"')?;
            let start = self.i;
            let rest = self.b.get(start..)?;
            let len = rest.iter().position(|&c| c == b'"' || c == b'\\')?;
            if rest[len] != b'"' {
                return None;
            }
            self.i = start + len + 1;
            Some(&rest[..len])
        }

        fn object(&mut self, mut field: impl FnMut(&mut Self, &[u8]) -> Option<()>) -> Option<()> {
            self.eat(b'{')?;
            if self.eat(b'}').is_some() {
                return Some(());
            }
            loop {
                let key = self.string()?;
                self.eat(b':')?;
                field(self, key)?;
                match self.peek()? {
                    b',' => self.i += 1,
                    b'}' => {
                        self.i += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        }

        fn nullable_object(
            &mut self,
            field: impl FnMut(&mut Self, &[u8]) -> Option<()>,
        ) -> Option<()> {
            if self.peek()? == b'n' {
                return self.literal(b"null");
            }
            self.object(field)
        }

        fn array(&mut self, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
            self.eat(b'[')?;
            if self.eat(b']').is_some() {
                return Some(());
            }
            loop {
                item(self)?;
                match self.peek()? {
                    b',' => self.i += 1,
                    b']' => {
                        self.i += 1;
                        return Some(());
                    }
                    _ => return None,
                }
            }
        }

        /// A content string (its length is added) or null.
        fn content(&mut self, chars: &mut usize, text: &mut String) -> Option<()> {
            if self.peek()? == b'n' {
                return self.literal(b"null");
            }
            let content = self.string()?;
            *chars += content.len();
            // No escapes (`string` gives up on them): the bytes are the text.
            text.push_str(std::str::from_utf8(content).ok()?);
            Some(())
        }

        /// A token count: a non-negative integer or null.
        fn count(&mut self, into: &mut Option<u64>) -> Option<()> {
            if self.peek()? == b'n' {
                return self.literal(b"null");
            }
            let start = self.i;
            while let Some(b'0'..=b'9') = self.b.get(self.i) {
                self.i += 1;
            }
            let digits = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
            *into = Some(digits.parse().ok()?);
            Some(())
        }

        /// Skips any value.
        fn skip(&mut self, depth: u32) -> Option<()> {
            if depth > MAX_DEPTH {
                return None;
            }
            match self.peek()? {
                b'"' => self.string().map(drop),
                b'{' => self.object(|p, _| p.skip(depth + 1)),
                b'[' => self.array(|p| p.skip(depth + 1)),
                b't' => self.literal(b"true"),
                b'f' => self.literal(b"false"),
                b'n' => self.literal(b"null"),
                b'-' | b'0'..=b'9' => {
                    self.i += 1;
                    while let Some(b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-') =
                        self.b.get(self.i)
                    {
                        self.i += 1;
                    }
                    Some(())
                }
                _ => None,
            }
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
                    completion_tokens: Some(2),
                    prompt_tokens_details: None,
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
    fn the_scanner_agrees_with_serde_or_defers_to_it() {
        type Expected = Option<(usize, Option<Usage>)>;
        let usage = |p, c| {
            Some(Usage {
                prompt_tokens: Some(p),
                completion_tokens: Some(c),
                prompt_tokens_details: None,
            })
        };
        let cases: [(&str, Expected); 10] = [
            (
                r#"{"id":"x","choices":[{"index":0,"delta":{"content":" to"},"finish_reason":null}]}"#,
                Some((3, None)),
            ),
            (
                r#"{"choices":[{"text":"ab","logprobs":null,"x":[1,-2.5e3,{"y":true}]}],"usage":null}"#,
                Some((2, None)),
            ),
            (
                r#" { "choices" : [ ] , "usage" : { "prompt_tokens" : 7 , "completion_tokens" : 2 , "total_tokens" : 9 } } "#,
                Some((0, usage(7, 2))),
            ),
            (
                r#"{"choices":[{"delta":{"reasoning_content":"hm","content":null}}]}"#,
                Some((2, None)),
            ),
            (
                r#"{"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#,
                Some((
                    0,
                    Some(Usage {
                        prompt_tokens: Some(7),
                        completion_tokens: Some(2),
                        prompt_tokens_details: Some(PromptTokensDetails {
                            cached_tokens: Some(4),
                        }),
                    }),
                )),
            ),
            // Escapes, errors, trailing garbage and truncation go to serde_json.
            (r#"{"choices":[{"delta":{"content":" w\u00f6rld"}}]}"#, None),
            (r#"{"error":{"message":"x"}}"#, None),
            (r#"{"choices":[]} x"#, None),
            (r#"{"choices":[{"delta":{"content":"ab"#, None),
            (r#"{"usage":{"completion_tokens":-1}}"#, None),
        ];
        for (text, expected) in cases {
            let got = scan::chunk(text.as_bytes()).map(|s| (s.chars, s.usage));
            assert_eq!(got, expected, "{text}");
        }
        // Whatever the scanner accepts, the full parse reads the same way.
        for (text, _) in cases {
            for cut in 0..text.len() {
                let _ = scan::chunk(&text.as_bytes()[..cut]);
            }
        }
    }

    #[test]
    fn lines_that_are_no_sse_field_are_protocol_errors_by_kind() {
        // A chunk without its `data:` prefix: its token would be lost.
        let text = "data: {\"choices\":[{\"text\":\"a\"}]}\n\n\
            {\"choices\":[{\"text\":\"b\"}]}\n\n\
            data: [DONE]\n\n";
        for piece in [1, 5, 1000] {
            let state = feed_all(text, piece);
            assert_eq!(
                state.error.as_ref().map(|e| e.0),
                Some(BARE_LINE),
                "{piece}"
            );
        }
        let state = feed_all("delta: {}\n\ndata: [DONE]\n\n", 3);
        assert_eq!(state.error.map(|e| e.0), Some(UNKNOWN_FIELD));
        // The fields OpenAI-compatible servers send, comments and CRLF are fine.
        let fine = "event: message\r\nid: 7\r\nretry: 100\r\n: keep-alive\r\n\
            data: {\"choices\":[{\"text\":\"a\"}]}\r\n\r\ndata: [DONE]\r\n\r\n";
        let state = feed_all(fine, 4);
        assert!(state.error.is_none(), "{:?}", state.error);
        assert_eq!(state.token_times.len(), 1);
        assert!(state.done);
    }

    #[test]
    fn an_event_without_its_blank_line_is_dispatched_at_the_end() {
        let state = feed_all("data: {\"choices\":[{\"text\":\"x\"}]}\ndata: [DONE]", 100);
        // Two data lines without a blank line form one event: not JSON.
        assert!(state.error.is_some());
        let state = feed_all("data: {\"choices\":[{\"text\":\"x\"}]}", 100);
        assert_eq!(state.token_times.len(), 1);
    }

    #[test]
    fn the_content_is_kept_for_the_tokenizer_on_both_paths() {
        // Plain chunks take the scanner; an escape sends one through serde_json.
        let text = "data: {\"choices\":[{\"delta\":{\"content\":\" Hello\"}}]}\n\n\
            data: {\"choices\":[{\"delta\":{\"content\":\" \\\"wor\\u006cd\\\"\"}}]}\n\n\
            data: {\"choices\":[{\"text\":\" caf\u{e9}\"}]}\n\n\
            data: [DONE]\n\n";
        for piece in [1, 7, 1000] {
            let state = feed_all(text, piece);
            assert_eq!(state.text, " Hello \"world\" caf\u{e9}", "piece {piece}");
            assert_eq!(state.token_times.len(), 3);
        }
    }
}
