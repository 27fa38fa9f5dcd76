//! The error shared by every benchmark-output parser, plus small helpers the
//! parsers use to produce precise errors (JSON paths, line numbers) without
//! ever panicking on hostile input.

use serde_json::Value;

/// Why a benchmark tool's raw output could not be turned into a result.
///
/// Every message says *what* was wrong and *where* (1-based line number, or a
/// JSON pointer such as `/end/sum_received/bits_per_second`).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The output is empty or only whitespace (the tool printed nothing).
    #[error("the benchmark output is empty (the tool printed nothing)")]
    Empty,

    /// The output stops before the result is complete (tool killed, pod
    /// evicted, log cut off).
    #[error("the benchmark output is truncated: {what}")]
    Truncated {
        /// What was expected but missing.
        what: String,
    },

    /// A line of text output does not have the expected shape.
    #[error("line {line}: {message}")]
    Malformed {
        /// 1-based line number in the raw output.
        line: usize,
        /// What was expected on that line.
        message: String,
    },

    /// The output does not contain the section or document being looked for.
    #[error("no {what} found in the benchmark output")]
    NotFound {
        /// The missing section, e.g. "IMB PingPong section".
        what: String,
    },

    /// The tool itself reported a failure (iperf3 `"error"`, fio job error,
    /// perftest "Couldn't connect", OpenFOAM FATAL ERROR, Python traceback...).
    #[error("the benchmark tool reported an error: {0}")]
    ToolReportedError(String),

    /// The results of the several processes that produce a result (distributed load
    /// generators) do not fit together, or the kind cannot merge results.
    #[error("the results of the result role's replicas cannot be merged: {0}")]
    Unmergeable(String),

    /// The output is not syntactically valid JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    InvalidJson {
        /// 1-based line number in the raw output (junk lines before the JSON
        /// document are counted).
        line: usize,
        /// 1-based column.
        column: usize,
        /// The JSON parser's message.
        message: String,
    },

    /// The output parses, but what it says cannot be a real measurement: a metric
    /// outside its physical range (a negative latency, 1e23 samples/s), or a run far
    /// shorter than the one asked for. `line` is where the value was printed, when it
    /// can be found.
    #[error("{}implausible result: {reason}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Implausible {
        /// 1-based line number in the raw output.
        line: Option<usize>,
        /// What is wrong, with the value and the range it should be in.
        reason: String,
    },

    /// The JSON is valid but a value is missing or has the wrong type.
    #[error("JSON value at {path}: {message}")]
    Json {
        /// JSON pointer (RFC 6901) of the offending value, e.g. `/end/sum_sent`.
        path: String,
        /// What was wrong with it.
        message: String,
    },
}

/// `text` without terminal escape sequences (colours `\x1b[31m`, cursor moves, window
/// titles) and other control characters except newlines and tabs: tools colour their
/// errors, and a failure message quoting them must read as plain text in a status, a
/// record or a table.
pub fn strip_terminal_codes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates up to a final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \ (string terminator).
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next_if_eq(&'\\');
                            break;
                        }
                    }
                }
                // Two-character sequences (ESC ( B, ESC =, ...).
                Some('(' | ')') => {
                    chars.next();
                }
                _ => {}
            },
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Returns `Err(ParseError::Empty)` when `raw` is empty or only whitespace.
pub(crate) fn ensure_not_empty(raw: &str) -> Result<(), ParseError> {
    if raw.trim().is_empty() {
        Err(ParseError::Empty)
    } else {
        Ok(())
    }
}

/// Parses a decimal number token, rejecting NaN and infinities (which the Rust
/// parser otherwise accepts as "NaN", "inf", "infinity").
pub(crate) fn parse_finite(token: &str) -> Option<f64> {
    token.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// `Some(v)` only when `v` is finite, so results never carry NaN/inf (JSON
/// cannot represent them).
pub(crate) fn finite(v: f64) -> Option<f64> {
    v.is_finite().then_some(v)
}

/// The 1-based number of the first line of `raw` that prints `value` (a token that
/// reads as the same number), so a range error can point at it. `None` when the value
/// was computed rather than printed.
// Exact equality is the only test that matches an infinite value; the tolerance covers
// the rest.
#[allow(clippy::float_cmp)]
pub(crate) fn line_of_value(raw: &str, value: f64) -> Option<usize> {
    let is_separator = |c: char| c.is_whitespace() || ",:;=()[]{}\"'|".contains(c);
    raw.lines()
        .position(|line| {
            line.split(is_separator)
                .filter_map(|token| token.parse::<f64>().ok())
                .any(|v| v == value || (v - value).abs() <= value.abs() * 1e-12)
        })
        .map(|i| i + 1)
}

/// The 1-based number of the first line of `raw` containing `marker`, with that line.
pub(crate) fn find_marker<'a>(raw: &'a str, markers: &[&str]) -> Option<(usize, &'a str)> {
    raw.lines()
        .enumerate()
        .find(|(_, line)| markers.iter().any(|m| line.contains(m)))
        .map(|(i, line)| (i + 1, line.trim()))
}

/// The shortest run, as a share of the run asked for, that counts as complete. Tools end
/// a little early or late (fio's 2 s jobs ran 2000–2002 ms); a run stopped by a signal or
/// a killed peer ends far earlier.
pub(crate) const MIN_RUNTIME_SHARE: f64 = 0.9;

/// Refuses a time-based run that ended well before the time asked for: its figures
/// describe a different (shorter, often warm-up dominated) run than the one configured.
pub(crate) fn ensure_ran_as_asked(
    what: &str,
    ran_seconds: f64,
    asked_seconds: f64,
    line: Option<usize>,
) -> Result<(), ParseError> {
    if asked_seconds > 0.0 && ran_seconds < asked_seconds * MIN_RUNTIME_SHARE {
        return Err(ParseError::Implausible {
            line,
            reason: format!(
                "{what} ran {ran_seconds:.3} s of the {asked_seconds} s asked for \
                 (less than {:.0}%): the run was cut short",
                MIN_RUNTIME_SHARE * 100.0
            ),
        });
    }
    Ok(())
}

/// Finds the first JSON document in `raw`, skipping junk lines before it
/// (fio prints warnings such as `fio: ...` ahead of its JSON), and parses it.
/// Anything after the document is ignored.
///
/// Returns `NotFound` when no line starts with `{`, `Truncated` when the
/// document ends early, and `InvalidJson` with the line number in `raw`
/// otherwise.
pub(crate) fn extract_json_document(raw: &str, tool: &str) -> Result<Value, ParseError> {
    ensure_not_empty(raw)?;
    let mut offset = 0usize;
    let mut start = None;
    for line in raw.split_inclusive('\n') {
        if line.trim_start().starts_with('{') {
            let indent = line.len() - line.trim_start().len();
            start = Some(offset + indent);
            break;
        }
        offset += line.len();
    }
    let Some(start) = start else {
        return Err(ParseError::NotFound {
            what: format!("{tool} JSON document (no line starts with '{{')"),
        });
    };
    let skipped_lines = raw.get(..start).map_or(0, |s| s.matches('\n').count());
    let body = raw.get(start..).unwrap_or_default();
    let mut de = serde_json::Deserializer::from_str(body);
    match <Value as serde::Deserialize>::deserialize(&mut de) {
        Ok(v) => Ok(v),
        Err(e) if e.is_eof() => Err(ParseError::Truncated {
            what: format!(
                "the {tool} JSON document starting at line {} ends (at line {}) before it is complete",
                skipped_lines + 1,
                e.line() + skipped_lines
            ),
        }),
        Err(e) => Err(ParseError::InvalidJson {
            line: e.line() + skipped_lines,
            column: e.column(),
            message: e.to_string(),
        }),
    }
}

/// A borrowed JSON value that remembers its JSON pointer, so that every
/// missing or mistyped value produces a `ParseError::Json` naming its path.
#[derive(Clone, Debug)]
pub(crate) struct JsonAt<'a> {
    value: &'a Value,
    path: String,
}

fn escape_pointer_segment(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

impl<'a> JsonAt<'a> {
    pub(crate) fn root(value: &'a Value) -> Self {
        JsonAt {
            value,
            path: String::new(),
        }
    }

    /// The value itself.
    pub(crate) fn value(&self) -> &'a Value {
        self.value
    }

    /// JSON pointer of this value (`/` for the root).
    pub(crate) fn path(&self) -> &str {
        if self.path.is_empty() {
            "/"
        } else {
            &self.path
        }
    }

    fn child_path(&self, key: &str) -> String {
        format!("{}/{}", self.path, escape_pointer_segment(key))
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError::Json {
            path: self.path().to_string(),
            message: message.into(),
        }
    }

    fn type_name(&self) -> &'static str {
        match self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Number(_) => "a number",
            Value::String(_) => "a string",
            Value::Array(_) => "an array",
            Value::Object(_) => "an object",
        }
    }

    /// The member `key` of this object; `None` when absent or `null`.
    pub(crate) fn get(&self, key: &str) -> Option<JsonAt<'a>> {
        match self.value.get(key) {
            None | Some(Value::Null) => None,
            Some(value) => Some(JsonAt {
                value,
                path: self.child_path(key),
            }),
        }
    }

    /// The member `key`, or an error naming its path.
    pub(crate) fn req(&self, key: &str) -> Result<JsonAt<'a>, ParseError> {
        self.get(key).ok_or_else(|| ParseError::Json {
            path: self.child_path(key),
            message: "required value is missing".to_string(),
        })
    }

    pub(crate) fn as_f64(&self) -> Result<f64, ParseError> {
        self.value
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| {
                self.error(format!(
                    "expected a finite number, found {}",
                    self.type_name()
                ))
            })
    }

    pub(crate) fn as_u64(&self) -> Result<u64, ParseError> {
        if let Some(v) = self.value.as_u64() {
            return Ok(v);
        }
        // Some tools print integral counters as floats ("io_kbytes": 12.0).
        match self.value.as_f64() {
            Some(f) if f.is_finite() && f >= 0.0 && f.fract() == 0.0 && f < 1.8e19 => Ok(f as u64),
            _ => Err(self.error(format!(
                "expected a non-negative integer, found {}",
                match self.value {
                    Value::Number(n) => n.to_string(),
                    _ => self.type_name().to_string(),
                }
            ))),
        }
    }

    pub(crate) fn as_i64(&self) -> Result<i64, ParseError> {
        self.value
            .as_i64()
            .ok_or_else(|| self.error(format!("expected an integer, found {}", self.type_name())))
    }

    pub(crate) fn as_str(&self) -> Result<&'a str, ParseError> {
        self.value
            .as_str()
            .ok_or_else(|| self.error(format!("expected a string, found {}", self.type_name())))
    }

    /// Booleans, or the 0/1 integers iperf3 uses for flags.
    pub(crate) fn as_flag(&self) -> Result<bool, ParseError> {
        match self.value {
            Value::Bool(b) => Ok(*b),
            Value::Number(n) if n.as_i64() == Some(0) => Ok(false),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(true),
            _ => Err(self.error(format!(
                "expected a boolean or 0/1, found {}",
                self.type_name()
            ))),
        }
    }

    pub(crate) fn as_array(&self) -> Result<Vec<JsonAt<'a>>, ParseError> {
        let items = self
            .value
            .as_array()
            .ok_or_else(|| self.error(format!("expected an array, found {}", self.type_name())))?;
        Ok(items
            .iter()
            .enumerate()
            .map(|(i, value)| JsonAt {
                value,
                path: format!("{}/{i}", self.path),
            })
            .collect())
    }

    /// Members of an object, in document order (keys sorted if serde_json's
    /// `preserve_order` is off; callers must not rely on order).
    pub(crate) fn entries(&self) -> Result<Vec<(&'a str, JsonAt<'a>)>, ParseError> {
        let map = self
            .value
            .as_object()
            .ok_or_else(|| self.error(format!("expected an object, found {}", self.type_name())))?;
        Ok(map
            .iter()
            .map(|(k, value)| {
                (
                    k.as_str(),
                    JsonAt {
                        value,
                        path: self.child_path(k),
                    },
                )
            })
            .collect())
    }

    pub(crate) fn req_f64(&self, key: &str) -> Result<f64, ParseError> {
        self.req(key)?.as_f64()
    }
    pub(crate) fn req_u64(&self, key: &str) -> Result<u64, ParseError> {
        self.req(key)?.as_u64()
    }
    pub(crate) fn opt_f64(&self, key: &str) -> Result<Option<f64>, ParseError> {
        self.get(key).map(|v| v.as_f64()).transpose()
    }
    pub(crate) fn opt_u64(&self, key: &str) -> Result<Option<u64>, ParseError> {
        self.get(key).map(|v| v.as_u64()).transpose()
    }
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&'a str>, ParseError> {
        self.get(key).map(|v| v.as_str()).transpose()
    }
}

/// Human formatting helpers shared by the `headline()` implementations.
pub(crate) mod fmt {
    /// `9.57 Gbit/s`, `100.0 Mbit/s`, `512 kbit/s`.
    pub(crate) fn bits_per_second(bps: f64) -> String {
        if bps >= 1e9 {
            format!("{:.2} Gbit/s", bps / 1e9)
        } else if bps >= 1e6 {
            format!("{:.1} Mbit/s", bps / 1e6)
        } else if bps >= 1e3 {
            format!("{:.0} kbit/s", bps / 1e3)
        } else {
            format!("{bps:.0} bit/s")
        }
    }

    /// Binary prefixes like fio: `1.2 GiB/s`, `35.3 MiB/s`.
    pub(crate) fn bytes_per_second(bytes: f64) -> String {
        const K: f64 = 1024.0;
        if bytes >= K * K * K {
            format!("{:.1} GiB/s", bytes / (K * K * K))
        } else if bytes >= K * K {
            format!("{:.1} MiB/s", bytes / (K * K))
        } else if bytes >= K {
            format!("{:.1} KiB/s", bytes / K)
        } else {
            format!("{bytes:.0} B/s")
        }
    }

    /// `300`, `9.0k`, `1.2M`.
    pub(crate) fn count(n: f64) -> String {
        if n >= 1e6 {
            format!("{:.1}M", n / 1e6)
        } else if n >= 1e3 {
            format!("{:.1}k", n / 1e3)
        } else {
            format!("{n:.0}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_leading_junk_and_reports_lines() {
        let v =
            extract_json_document("fio: warning\nmore noise\n{\"a\": 1}\ntrailing", "fio").unwrap();
        assert_eq!(v["a"], 1);
        let err = extract_json_document("noise\n{\n\"a\": ]\n}", "fio").unwrap_err();
        assert!(
            matches!(err, ParseError::InvalidJson { line: 3, .. }),
            "{err:?}"
        );
        let err = extract_json_document("noise\n{\"a\": [1,\n", "fio").unwrap_err();
        assert!(matches!(err, ParseError::Truncated { .. }), "{err:?}");
        assert_eq!(extract_json_document(" \n\t", "x"), Err(ParseError::Empty));
        assert!(matches!(
            extract_json_document("no json here", "x"),
            Err(ParseError::NotFound { .. })
        ));
    }

    #[test]
    fn json_paths_in_errors() {
        let v: Value = serde_json::from_str(r#"{"end": {"a/b": {"x": "str"}}}"#).unwrap();
        let root = JsonAt::root(&v);
        let err = root
            .req("end")
            .and_then(|e| e.req("a/b"))
            .and_then(|e| e.req_f64("x"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "JSON value at /end/a~1b/x: expected a finite number, found a string"
        );
        let err = root.req("end").and_then(|e| e.req("zzz")).unwrap_err();
        assert_eq!(
            err,
            ParseError::Json {
                path: "/end/zzz".into(),
                message: "required value is missing".into()
            }
        );
    }

    /// Finding 10 of issue 18: failure messages kept raw colour codes.
    #[test]
    fn terminal_codes_are_stripped() {
        assert_eq!(
            strip_terminal_codes(
                "\x1b[1;31mERROR:\x1b[0m device \x1b]0;title\x07not found\r\n\tnext"
            ),
            "ERROR: device not found\n\tnext"
        );
        assert_eq!(strip_terminal_codes("\x1b(Bplain\x1b[K"), "plain");
        assert_eq!(strip_terminal_codes("µs ok"), "µs ok");
        assert_eq!(strip_terminal_codes("cut \x1b["), "cut ");
    }

    #[test]
    fn values_and_markers_are_located() {
        let raw = "header\n  1024   100   -1.00   5.5\nend 1e21\n";
        assert_eq!(line_of_value(raw, -1.0), Some(2));
        assert_eq!(line_of_value(raw, 1e21), Some(3));
        assert_eq!(line_of_value(raw, 7.0), None);
        assert_eq!(find_marker(raw, &["end", "nothing"]), Some((3, "end 1e21")));
        let err = ParseError::Implausible {
            line: Some(2),
            reason: "x".into(),
        };
        assert_eq!(err.to_string(), "line 2: implausible result: x");
    }

    #[test]
    fn finite_parsing() {
        assert_eq!(parse_finite("1.5"), Some(1.5));
        assert_eq!(parse_finite("NaN"), None);
        assert_eq!(parse_finite("inf"), None);
        assert_eq!(parse_finite("-infinity"), None);
    }
}

#[cfg(test)]
#[path = "../../tests/support/nasty_bytes.rs"]
mod nasty_bytes;

/// Shared robustness checks for the parsers' tests.
#[cfg(test)]
pub(crate) mod test_support {
    use super::ParseError;
    use proptest::prelude::*;
    use serde::{Serialize, de::DeserializeOwned};
    use std::fmt::Debug;

    /// Compares with a literal: serde_json's default (fast) float parser may
    /// be 1 ulp off the correctly rounded value of the Rust literal.
    #[track_caller]
    pub(crate) fn approx(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() <= expected.abs() * 1e-14,
            "{actual} != {expected}"
        );
    }

    /// A successful result must survive a JSON round trip unchanged, which
    /// also proves it holds no NaN/inf (serde_json writes those as `null`,
    /// which would not deserialize back into an `f64`).
    pub(crate) fn assert_round_trips<T>(value: &T)
    where
        T: Serialize + DeserializeOwned + PartialEq + Debug,
    {
        // Via `Value` (not text) so floats are compared bit-exactly; a NaN or
        // infinity becomes `null` and fails to come back.
        let json = serde_json::to_value(value).expect("serializes");
        let back: T = serde_json::from_value(json.clone())
            .unwrap_or_else(|e| panic!("round trip failed ({e}) for {json}"));
        assert_eq!(&back, value, "round trip changed the value: {json}");
    }

    /// Parses every prefix of `raw` (every byte offset for small inputs, a
    /// stride plus the first/last 300 offsets for big ones). Never panics;
    /// successful results must round-trip.
    pub(crate) fn check_prefixes<T, H>(
        raw: &str,
        parse: fn(&str) -> Result<T, ParseError>,
        headline: H,
    ) where
        T: Serialize + DeserializeOwned + PartialEq + Debug,
        H: Fn(&T) -> String,
    {
        let len = raw.len();
        let stride = (len / 1500).max(1);
        let offsets = (0..=len)
            .step_by(stride)
            .chain(0..len.min(300))
            .chain(len.saturating_sub(300)..=len);
        for i in offsets {
            if let Some(prefix) = raw.get(..i)
                && let Ok(v) = parse(prefix)
            {
                assert_round_trips(&v);
                let _ = headline(&v);
            }
        }
        assert_eq!(parse("").unwrap_err(), ParseError::Empty);
        assert_eq!(parse(" \n\t\n").unwrap_err(), ParseError::Empty);
    }

    pub(crate) use super::nasty_bytes::nasty_byte;

    /// Replaces, inserts or deletes bytes at (relative) positions.
    pub(crate) fn corrupt(raw: &str, edits: &[(f64, u8, u8)]) -> String {
        let mut bytes = raw.as_bytes().to_vec();
        for &(pos, byte, op) in edits {
            if bytes.is_empty() {
                break;
            }
            let i = ((pos * bytes.len() as f64) as usize).min(bytes.len() - 1);
            match op % 3 {
                0 => bytes[i] = byte,
                1 => bytes.insert(i, byte),
                _ => {
                    bytes.remove(i);
                }
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }

    pub(crate) fn edits() -> impl Strategy<Value = Vec<(f64, u8, u8)>> {
        proptest::collection::vec((0.0..1.0f64, nasty_byte(), any::<u8>()), 1..8)
    }
}

/// Results are stored in a Kubernetes status: the results of the biggest
/// fixtures must stay under 4 KiB of JSON.
#[cfg(test)]
mod status_size_budget {
    use crate::kinds::*;

    #[track_caller]
    fn small<T: serde::Serialize>(r: &T) {
        let n = serde_json::to_string(r).unwrap().len();
        assert!(n < 4096, "result is {n} bytes of JSON");
    }

    #[test]
    fn biggest_results_fit() {
        small(
            &iperf::parse::parse(include_str!("../../testdata/iperf/tcp-4streams.json")).unwrap(),
        );
        small(
            &fio::parse::parse(include_str!("../../testdata/fio/client-server-2hosts.json"))
                .unwrap(),
        );
        small(
            &mpi_pingpong::parse::parse(include_str!(
                "../../testdata/mpi_pingpong/imb-mpi1-pingpong-msglog22.txt"
            ))
            .unwrap(),
        );
        small(
            &rdma::parse::parse(include_str!(
                "../../testdata/rdma/ib_write_lat-all-sizes.txt"
            ))
            .unwrap(),
        );
        small(
            &rdma::parse::parse(include_str!(
                "../../testdata/rdma/ib_write_bw-all-sizes-gbits.txt"
            ))
            .unwrap(),
        );
    }
}
