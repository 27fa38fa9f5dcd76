//! Byte-level BPE tokenizers read from a Hugging Face `tokenizer.json`: GPT-2, RoBERTa,
//! Llama 3, Qwen 2, DeepSeek-style files (model `BPE` over the ByteLevel alphabet).
//!
//! Implemented here rather than with the `tokenizers` crate, which needs a look-around
//! regex engine (fancy-regex or onig) and ~80 crates, 70+ s of build on 2 cores
//! (docs/llm-workloads.md). What is supported is what the loadgen needs to count tokens exactly
//! like `tokenizers` does (`encode(text, add_special_tokens=False)`):
//!
//! - added tokens (special tokens) matched in the text first, as `tokenizers` does;
//! - pre-tokenizers `ByteLevel` (with or without its GPT-2 regex, `add_prefix_space`),
//!   `Split` with behavior `Isolated` and a `Regex` or `String` pattern, and `Sequence`s
//!   of them. The one look-around these files use, `\s+(?!\S)`, is rewritten as a
//!   capture (`\s+$|(\s+)\s`, keeping the group) for the `regex` crate;
//! - model `BPE` with `merges` in either file format, and `ignore_merges`.
//!
//! Not supported (a clear error when loading): other models (Unigram, WordPiece),
//! SentencePiece-style `Metaspace` BPE with byte fallback (Llama 2, Mistral), and
//! normalizers other than none or NFC. NFC is not applied: it changes nothing in
//! text already in NFC, which synthetic prompts (ASCII) and nearly all datasets are.

use std::collections::HashMap;

use regex::Regex;
use serde_json::Value;

/// Why a `tokenizer.json` cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct JsonTokenizerError {
    /// Where in the file (a JSON path such as `model.merges[12]`).
    pub path: String,
    pub message: String,
}

fn fail(path: impl Into<String>, message: impl Into<String>) -> JsonTokenizerError {
    JsonTokenizerError {
        path: path.into(),
        message: message.into(),
    }
}

/// GPT-2's pre-tokenization regex, which `ByteLevel { use_regex: true }` applies.
const GPT2_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// One pre-tokenization step.
#[derive(Debug)]
enum PreStep {
    /// Splits into the regex's matches and the text between them.
    Split(SplitRegex),
    /// Prepends a space to a piece that does not start with one.
    PrefixSpace,
}

/// A split regex; `lookahead` names the group that holds the piece when the rewritten
/// `\s+(?!\S)` alternative matched.
#[derive(Debug)]
struct SplitRegex {
    regex: Regex,
    lookahead: bool,
}

const LOOKAHEAD: &str = r"\s+(?!\S)";
const LOOKAHEAD_GROUP: &str = "la";

impl SplitRegex {
    fn new(pattern: &str, path: &str) -> Result<Self, JsonTokenizerError> {
        let lookahead = pattern.contains(LOOKAHEAD);
        let rewritten = pattern.replace(LOOKAHEAD, &format!(r"\s+$|(?P<{LOOKAHEAD_GROUP}>\s+)\s"));
        if rewritten.contains("(?=")
            || rewritten.contains("(?!")
            || rewritten.contains("(?<=")
            || rewritten.contains("(?<!")
        {
            return Err(fail(
                path,
                format!(
                    "the pattern {pattern:?} uses look-around beyond \\s+(?!\\S), which is not supported"
                ),
            ));
        }
        let regex = Regex::new(&rewritten).map_err(|e| {
            fail(
                path,
                format!("the pattern {pattern:?} is not supported: {e}"),
            )
        })?;
        Ok(Self { regex, lookahead })
    }

    /// Splits `text` into pieces: every match and every run between matches (the
    /// `Isolated` behavior).
    fn split<'t>(&self, text: &'t str, out: &mut Vec<&'t str>) {
        let mut at = 0;
        let mut gap_start = 0;
        while at < text.len() {
            let Some(captures) = self.regex.captures_at(text, at) else {
                break;
            };
            let Some(whole) = captures.get(0) else {
                break;
            };
            let piece = if self.lookahead {
                captures.name(LOOKAHEAD_GROUP).unwrap_or(whole)
            } else {
                whole
            };
            if piece.is_empty() {
                // An empty match: step over one character so the scan advances.
                at = text[whole.start()..]
                    .chars()
                    .next()
                    .map_or(text.len(), |c| whole.start() + c.len_utf8());
                continue;
            }
            if piece.start() > gap_start {
                out.push(&text[gap_start..piece.start()]);
            }
            out.push(piece.as_str());
            at = piece.end();
            gap_start = at;
        }
        if gap_start < text.len() {
            out.push(&text[gap_start..]);
        }
    }
}

/// A byte-level BPE tokenizer from a `tokenizer.json`.
#[derive(Debug)]
pub struct JsonBpe {
    /// Token bytes → id, for `ignore_merges` and the byte alphabet.
    vocab: HashMap<Vec<u8>, u32>,
    /// (left, right) → (rank, merged id).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The id of each single byte.
    byte_ids: [u32; 256],
    ignore_merges: bool,
    steps: Vec<PreStep>,
    /// Added tokens matched in the text before anything else, longest first.
    added: Vec<(String, u32)>,
}

impl JsonBpe {
    /// Reads a `tokenizer.json` document.
    pub fn from_json(text: &str) -> Result<Self, JsonTokenizerError> {
        let root: Value = serde_json::from_str(text)
            .map_err(|e| fail(format!("line {}", e.line()), format!("not JSON: {e}")))?;
        let model = root.get("model").ok_or_else(|| fail("model", "missing"))?;
        match model.get("type").and_then(Value::as_str) {
            Some("BPE") | None if model.get("merges").is_some() => {}
            other => {
                return Err(fail(
                    "model.type",
                    format!(
                        "{} models are not supported: use a byte-level BPE tokenizer.json (GPT-2, Llama 3, Qwen, ...) or a builtin tokenizer",
                        other.unwrap_or("unknown")
                    ),
                ));
            }
        }
        if model.get("byte_fallback").and_then(Value::as_bool) == Some(true) {
            return Err(fail(
                "model.byte_fallback",
                "SentencePiece-style BPE with byte fallback (Llama 2, Mistral) is not supported",
            ));
        }
        for field in ["continuing_subword_prefix", "end_of_word_suffix"] {
            if model
                .get(field)
                .is_some_and(|v| v.as_str().is_some_and(|s| !s.is_empty()))
            {
                return Err(fail(format!("model.{field}"), "is not supported"));
            }
        }
        match root.get("normalizer") {
            None | Some(Value::Null) => {}
            Some(n) if n.get("type").and_then(Value::as_str) == Some("NFC") => {}
            Some(n) => {
                return Err(fail(
                    "normalizer",
                    format!(
                        "normalizer {} is not supported (none or NFC are)",
                        n.get("type").and_then(Value::as_str).unwrap_or("?")
                    ),
                ));
            }
        }
        let steps = pre_steps(
            root.get("pre_tokenizer").unwrap_or(&Value::Null),
            "pre_tokenizer",
        )?;
        if !steps.1 {
            return Err(fail(
                "pre_tokenizer",
                "no ByteLevel pre-tokenizer: only byte-level BPE tokenizers are supported",
            ));
        }
        let steps = steps.0;

        let vocab_json = model
            .get("vocab")
            .and_then(Value::as_object)
            .ok_or_else(|| fail("model.vocab", "missing or not an object"))?;
        let decode_table = byte_level_decoder();
        let mut vocab: HashMap<Vec<u8>, u32> = HashMap::with_capacity(vocab_json.len());
        let mut by_string: HashMap<&str, u32> = HashMap::with_capacity(vocab_json.len());
        for (token, id) in vocab_json {
            let id = id
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| fail(format!("model.vocab[{token:?}]"), "id is not a number"))?;
            by_string.insert(token.as_str(), id);
            // Tokens outside the byte-level alphabet (added special tokens kept in the
            // vocabulary) are never produced by merges; skip them.
            if let Some(bytes) = decode_byte_level(token, &decode_table) {
                vocab.insert(bytes, id);
            }
        }
        let mut byte_ids = [0u32; 256];
        for (byte, slot) in byte_ids.iter_mut().enumerate() {
            *slot = *vocab.get(&vec![byte as u8]).ok_or_else(|| {
                fail(
                    "model.vocab",
                    format!("byte {byte:#04x} has no token: not a byte-level vocabulary"),
                )
            })?;
        }
        let merges_json = model
            .get("merges")
            .and_then(Value::as_array)
            .ok_or_else(|| fail("model.merges", "missing or not a list"))?;
        let mut merges = HashMap::with_capacity(merges_json.len());
        for (rank, merge) in merges_json.iter().enumerate() {
            let path = || format!("model.merges[{rank}]");
            let (left, right) = match merge {
                Value::String(pair) => pair
                    .split_once(' ')
                    .ok_or_else(|| fail(path(), "expected \"left right\""))?,
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(l), Value::String(r)] => (l.as_str(), r.as_str()),
                    _ => return Err(fail(path(), "expected [left, right]")),
                },
                _ => return Err(fail(path(), "expected a pair")),
            };
            let id = |token: &str| {
                by_string
                    .get(token)
                    .copied()
                    .ok_or_else(|| fail(path(), format!("{token:?} is not in the vocabulary")))
            };
            let merged = format!("{left}{right}");
            merges.insert((id(left)?, id(right)?), (rank as u32, id(&merged)?));
        }
        let mut added = Vec::new();
        if let Some(tokens) = root.get("added_tokens").and_then(Value::as_array) {
            for (index, token) in tokens.iter().enumerate() {
                let content = token.get("content").and_then(Value::as_str);
                let id = token
                    .get("id")
                    .and_then(Value::as_u64)
                    .and_then(|id| u32::try_from(id).ok());
                match (content, id) {
                    (Some(content), Some(id)) if !content.is_empty() => {
                        added.push((content.to_owned(), id));
                    }
                    _ => {
                        return Err(fail(
                            format!("added_tokens[{index}]"),
                            "expected content and id",
                        ));
                    }
                }
            }
        }
        added.sort_by_key(|(content, _)| std::cmp::Reverse(content.len()));
        Ok(Self {
            vocab,
            merges,
            byte_ids,
            ignore_merges: model
                .get("ignore_merges")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            steps,
            added,
        })
    }

    /// The token ids of `text`, without special tokens added around it.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            // The earliest added token (the longest at the same place) ends a segment.
            let found = self
                .added
                .iter()
                .filter_map(|(content, id)| {
                    rest.find(content.as_str()).map(|at| (at, content, *id))
                })
                .min_by_key(|(at, content, _)| (*at, std::cmp::Reverse(content.len())));
            if let Some((at, content, id)) = found {
                self.encode_segment(&rest[..at], &mut ids);
                ids.push(id);
                rest = &rest[at + content.len()..];
            } else {
                self.encode_segment(rest, &mut ids);
                break;
            }
        }
        ids
    }

    fn encode_segment(&self, text: &str, ids: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let mut pieces: Vec<std::borrow::Cow<'_, str>> = vec![text.into()];
        for step in &self.steps {
            let mut next = Vec::with_capacity(pieces.len());
            match step {
                PreStep::PrefixSpace => {
                    for piece in pieces {
                        if piece.starts_with(' ') {
                            next.push(piece);
                        } else {
                            next.push(format!(" {piece}").into());
                        }
                    }
                }
                PreStep::Split(regex) => {
                    for piece in &pieces {
                        let mut split = Vec::new();
                        regex.split(piece, &mut split);
                        next.extend(
                            split
                                .into_iter()
                                .map(|s| std::borrow::Cow::Owned(s.to_owned())),
                        );
                    }
                }
            }
            pieces = next;
        }
        for piece in &pieces {
            self.encode_piece(piece.as_bytes(), ids);
        }
    }

    /// BPE of one pre-token: merge the lowest-ranked adjacent pair (leftmost on ties)
    /// until none is in the merge table, as `tokenizers` does.
    fn encode_piece(&self, bytes: &[u8], ids: &mut Vec<u32>) {
        if bytes.is_empty() {
            return;
        }
        if self.ignore_merges
            && let Some(&id) = self.vocab.get(bytes)
        {
            ids.push(id);
            return;
        }
        let mut symbols: Vec<u32> = bytes.iter().map(|&b| self.byte_ids[b as usize]).collect();
        loop {
            let best = symbols
                .windows(2)
                .enumerate()
                .filter_map(|(at, pair)| {
                    self.merges
                        .get(&(pair[0], pair[1]))
                        .map(|&(rank, merged)| (rank, at, merged))
                })
                .min_by_key(|&(rank, at, _)| (rank, at));
            let Some((_, at, merged)) = best else {
                break;
            };
            symbols[at] = merged;
            symbols.remove(at + 1);
        }
        ids.extend_from_slice(&symbols);
    }
}

/// The pre-tokenization steps of a `pre_tokenizer` object, and whether it includes
/// `ByteLevel`.
fn pre_steps(value: &Value, path: &str) -> Result<(Vec<PreStep>, bool), JsonTokenizerError> {
    let kind = value.get("type").and_then(Value::as_str);
    match kind {
        None if value.is_null() => Ok((Vec::new(), false)),
        Some("Sequence") => {
            let list = value
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or_else(|| fail(path, "Sequence without pretokenizers"))?;
            let mut steps = Vec::new();
            let mut byte_level = false;
            for (index, item) in list.iter().enumerate() {
                let (more, is_byte_level) =
                    pre_steps(item, &format!("{path}.pretokenizers[{index}]"))?;
                steps.extend(more);
                byte_level |= is_byte_level;
            }
            Ok((steps, byte_level))
        }
        Some("ByteLevel") => {
            let mut steps = Vec::new();
            if value.get("add_prefix_space").and_then(Value::as_bool) == Some(true) {
                steps.push(PreStep::PrefixSpace);
            }
            if value
                .get("use_regex")
                .and_then(Value::as_bool)
                .unwrap_or(true)
            {
                steps.push(PreStep::Split(SplitRegex::new(GPT2_PATTERN, path)?));
            }
            Ok((steps, true))
        }
        Some("Split") => {
            let behavior = value.get("behavior").and_then(Value::as_str);
            if behavior != Some("Isolated") {
                return Err(fail(
                    format!("{path}.behavior"),
                    format!("Split behavior {behavior:?} is not supported (Isolated is)"),
                ));
            }
            if value.get("invert").and_then(Value::as_bool) == Some(true) {
                return Err(fail(
                    format!("{path}.invert"),
                    "inverted splits are not supported",
                ));
            }
            let pattern = value.get("pattern");
            let regex = match (
                pattern.and_then(|p| p.get("Regex")).and_then(Value::as_str),
                pattern
                    .and_then(|p| p.get("String"))
                    .and_then(Value::as_str),
            ) {
                (Some(regex), _) => SplitRegex::new(regex, &format!("{path}.pattern"))?,
                (None, Some(literal)) => {
                    SplitRegex::new(&regex::escape(literal), &format!("{path}.pattern"))?
                }
                _ => return Err(fail(format!("{path}.pattern"), "expected Regex or String")),
            };
            Ok((vec![PreStep::Split(regex)], false))
        }
        other => Err(fail(
            path,
            format!(
                "pre-tokenizer {} is not supported (ByteLevel, Split and Sequence are)",
                other.unwrap_or("?")
            ),
        )),
    }
}

/// GPT-2's byte ↔ printable character table, inverted: character → byte.
fn byte_level_decoder() -> HashMap<char, u8> {
    let mut printable: Vec<u32> = (u32::from(b'!')..=u32::from(b'~'))
        .chain(0xA1..=0xAC)
        .chain(0xAE..=0xFF)
        .collect();
    let mut table = HashMap::with_capacity(256);
    for &byte in &printable {
        if let Some(c) = char::from_u32(byte) {
            table.insert(c, byte as u8);
        }
    }
    let mut next = 0u32;
    for byte in 0u32..256 {
        if !printable.contains(&byte) {
            if let Some(c) = char::from_u32(256 + next) {
                table.insert(c, byte as u8);
            }
            next += 1;
        }
    }
    printable.clear();
    table
}

/// A vocabulary entry's bytes, or `None` when it is not in the byte-level alphabet.
fn decode_byte_level(token: &str, table: &HashMap<char, u8>) -> Option<Vec<u8>> {
    token.chars().map(|c| table.get(&c).copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_byte_table_covers_every_byte_once() {
        let table = byte_level_decoder();
        assert_eq!(table.len(), 256);
        let mut bytes: Vec<u8> = table.values().copied().collect();
        bytes.sort_unstable();
        bytes.dedup();
        assert_eq!(bytes.len(), 256);
        // GPT-2's famous ones: space is Ġ (U+0120), newline is Ċ (U+010A).
        assert_eq!(table.get(&'\u{120}'), Some(&b' '));
        assert_eq!(table.get(&'\u{10A}'), Some(&b'\n'));
        assert_eq!(table.get(&'a'), Some(&b'a'));
    }

    #[test]
    fn the_lookahead_rewrite_splits_whitespace_like_the_original() {
        let regex = SplitRegex::new(r"[^\r\n\p{L}\p{N}]?\p{L}+|\s+(?!\S)|\s+", "test")
            .expect("a valid split regex");
        let mut pieces = Vec::new();
        regex.split("a   b c  ", &mut pieces);
        // "   b": the run gives up its last space to the word; the trailing run is whole.
        assert_eq!(pieces, ["a", "  ", " b", " c", "  "]);
    }

    #[test]
    fn malformed_files_are_refused_with_the_path() {
        for (text, path) in [
            ("{", "line 1"),
            (
                r#"{"model": {"type": "Unigram", "vocab": []}}"#,
                "model.type",
            ),
            (
                r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Metaspace"}}"#,
                "pre_tokenizer",
            ),
            (
                r#"{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}}"#,
                "model.vocab",
            ),
        ] {
            let error = JsonBpe::from_json(text).unwrap_err();
            assert_eq!(error.path, path, "{error}");
        }
    }
}
