//! Pod logs: `GET /api/v1/namespaces/{ns}/pods/{name}/log`, answered from text a test
//! sets with [`crate::ApiDouble::set_pod_log`], as a kubelet would from a container's log.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::error::ApiError;

/// Logs by namespace, pod and container, and the pods whose logs cannot be read.
#[derive(Debug, Default)]
pub(crate) struct PodLogs {
    logs: Mutex<HashMap<(String, String, String), Log>>,
    failures: Mutex<HashMap<(String, String), LogFailure>>,
}

/// A container's log: text, or a huge one never held in memory — `filler_lines` lines
/// of [`FILLER_LINE`] followed by `tail` — served a piece at a time, as a kubelet
/// streams a log file.
#[derive(Debug, Clone)]
enum Log {
    Text(String),
    Padded { filler_lines: u64, tail: String },
    LongLine(LongLine),
}

/// A log whose one line is huge: `head`, then `filler_bytes` of `x` (no newline), then
/// `tail` — a report line carrying a huge raw output, which `tailLines` cannot shorten.
#[derive(Debug, Clone)]
pub(crate) struct LongLine {
    head: String,
    filler_bytes: u64,
    tail: String,
}

/// One line of a padded log's filler (100 bytes with its newline).
pub const FILLER_LINE: &str = "filler filler filler filler filler filler filler filler filler filler filler filler filler filler f\n";

/// What a log request selects: text, or a run of filler lines and then text, with the
/// total cut at `limit` bytes. Turned into a body that is made as it is sent.
#[derive(Debug)]
pub(crate) enum Selected {
    Text(String),
    LongLine {
        line: LongLine,
        limit: Option<u64>,
    },
    Padded {
        filler_lines: u64,
        tail: String,
        limit: Option<u64>,
    },
}

impl Selected {
    /// The whole selection as text (tests of small logs).
    #[cfg(test)]
    fn into_text(self) -> String {
        match self {
            Self::Text(text) => text,
            Self::Padded { .. } | Self::LongLine { .. } => {
                unreachable!("a padded log is never read whole in tests")
            }
        }
    }

    /// The chunks of the response body, made one at a time as the client reads them.
    pub fn into_chunks(self) -> Box<dyn Iterator<Item = bytes::Bytes> + Send> {
        match self {
            Self::Text(text) => Box::new(std::iter::once(bytes::Bytes::from(text))),
            Self::LongLine { line, limit } => {
                const CHUNK: u64 = 64 * 1024;
                let chunk = bytes::Bytes::from(vec![b'x'; CHUNK as usize]);
                let full = line.filler_bytes / CHUNK;
                let rest = usize::try_from(line.filler_bytes % CHUNK).unwrap_or(0);
                let pieces = std::iter::once(bytes::Bytes::from(line.head))
                    .chain((0..full).map(move |_| chunk.clone()))
                    .chain(std::iter::once(bytes::Bytes::from(vec![b'x'; rest])))
                    .chain(std::iter::once(bytes::Bytes::from(line.tail)));
                cut_at(pieces, limit)
            }
            Self::Padded {
                filler_lines,
                tail,
                limit,
            } => {
                const LINES_PER_CHUNK: u64 = 640;
                let chunk = bytes::Bytes::from(FILLER_LINE.repeat(640));
                let full_chunks = filler_lines / LINES_PER_CHUNK;
                let rest = usize::try_from(filler_lines % LINES_PER_CHUNK).unwrap_or(0);
                let filler = (0..full_chunks)
                    .map(move |_| chunk.clone())
                    .chain(std::iter::once(bytes::Bytes::from(
                        FILLER_LINE.repeat(rest),
                    )));
                let pieces = filler.chain(std::iter::once(bytes::Bytes::from(tail)));
                cut_at(pieces, limit)
            }
        }
    }
}

/// `pieces` up to `limit` bytes in all (`limitBytes`). Filler is ASCII; a tail cut here
/// may split a character, as a kubelet's byte limit may.
fn cut_at(
    pieces: impl Iterator<Item = bytes::Bytes> + Send + 'static,
    limit: Option<u64>,
) -> Box<dyn Iterator<Item = bytes::Bytes> + Send> {
    let mut left = limit.unwrap_or(u64::MAX);
    Box::new(pieces.map_while(move |mut piece| {
        if left == 0 {
            return None;
        }
        let len = piece.len() as u64;
        if len > left {
            piece.truncate(usize::try_from(left).unwrap_or(0));
        }
        left = left.saturating_sub(len);
        Some(piece)
    }))
}

/// How reading a pod's log fails, as a real apiserver answers when it cannot get the
/// log from the pod's kubelet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFailure {
    /// The kubelet does not answer (its node is gone or unreachable): 500 with the
    /// apiserver's `connect: connection refused` message.
    KubeletUnreachable,
    /// The apiserver or kubelet fails: 503 ServiceUnavailable.
    ServiceUnavailable,
}

impl LogFailure {
    fn error(self, ns: &str, pod: &str, container: &str) -> ApiError {
        match self {
            Self::KubeletUnreachable => ApiError::new(
                500,
                "InternalError",
                format!(
                    "Get \"https://127.0.0.1:10250/containerLogs/{ns}/{pod}/{container}\": dial tcp 127.0.0.1:10250: connect: connection refused"
                ),
            ),
            Self::ServiceUnavailable => ApiError::new(
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
        }
    }
}

/// The query parameters of a log request the double honours.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LogQuery {
    pub container: Option<String>,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
}

impl LogQuery {
    pub fn parse(query: &HashMap<String, String>) -> Result<Self, ApiError> {
        let number = |key: &str| {
            query
                .get(key)
                .map(|value| {
                    value.parse::<usize>().map_err(|_| {
                        ApiError::bad_request(format!("invalid {key} {value:?}: not a number"))
                    })
                })
                .transpose()
        };
        Ok(Self {
            container: query.get("container").filter(|c| !c.is_empty()).cloned(),
            tail_lines: number("tailLines")?,
            limit_bytes: number("limitBytes")?,
        })
    }
}

impl PodLogs {
    pub fn set(&self, ns: &str, pod: &str, container: &str, text: &str) {
        self.lock().insert(
            (ns.to_owned(), pod.to_owned(), container.to_owned()),
            Log::Text(text.to_owned()),
        );
    }

    /// A log of `filler_bytes` (rounded down to whole 100-byte lines) of filler, then
    /// `tail`; never held in memory.
    pub fn set_padded(&self, ns: &str, pod: &str, container: &str, filler_bytes: u64, tail: &str) {
        self.lock().insert(
            (ns.to_owned(), pod.to_owned(), container.to_owned()),
            Log::Padded {
                filler_lines: filler_bytes / FILLER_LINE.len() as u64,
                tail: tail.to_owned(),
            },
        );
    }

    /// A log of `head`, `filler_bytes` of `x` on the same line, then `tail`; never held
    /// in memory. `head` holds no newline after its last line's start that matters:
    /// `tailLines` counts the long line as one.
    pub fn set_long_line(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        head: &str,
        filler_bytes: u64,
        tail: &str,
    ) {
        self.lock().insert(
            (ns.to_owned(), pod.to_owned(), container.to_owned()),
            Log::LongLine(LongLine {
                head: head.to_owned(),
                filler_bytes,
                tail: tail.to_owned(),
            }),
        );
    }

    /// Makes every read of `pod`'s log fail this way (`None`: readable again).
    pub fn set_failure(&self, ns: &str, pod: &str, failure: Option<LogFailure>) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (ns.to_owned(), pod.to_owned());
        match failure {
            Some(failure) => failures.insert(key, failure),
            None => failures.remove(&key),
        };
    }

    /// The log of a container of `pod` (the stored object), as the kubelet would serve it.
    /// A container that has logged nothing (or was never given a log) has an empty log.
    pub fn read(&self, ns: &str, pod: &Value, query: &LogQuery) -> Result<Selected, ApiError> {
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        let containers = container_names(pod);
        let container = match &query.container {
            Some(container) if containers.contains(container) => container.clone(),
            Some(container) => {
                return Err(ApiError::bad_request(format!(
                    "container {container} is not valid for pod {name}"
                )));
            }
            None if containers.len() == 1 => containers[0].clone(),
            None => {
                return Err(ApiError::bad_request(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    containers.join(" ")
                )));
            }
        };
        let failure = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(ns.to_owned(), name.to_owned()))
            .copied();
        if let Some(failure) = failure {
            return Err(failure.error(ns, name, &container));
        }
        let log = self
            .lock()
            .get(&(ns.to_owned(), name.to_owned(), container))
            .cloned()
            .unwrap_or(Log::Text(String::new()));
        Ok(match current_file(log) {
            Log::Text(text) => Selected::Text(select(&text, query)),
            Log::Padded { filler_lines, tail } => select_padded(filler_lines, &tail, query),
            Log::LongLine(line) => select_long_line(line, query),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String, String), Log>> {
        self.logs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The kubelet's `containerLogMaxSize` (10 MiB by default): it rotates a container's log
/// file past this size, and the API serves only the current file (seen on the real
/// cluster, issue 35: a report line of 24 MiB was served from its middle, without its
/// start). The kubelet rotates on a timer; the double rotates at every multiple of the
/// size, so the current file is what a log holds past its last multiple.
pub const CONTAINER_LOG_MAX: u64 = 10 * 1024 * 1024;

/// What the API serves of `log` once the kubelet has rotated it: [`CONTAINER_LOG_MAX`].
fn current_file(log: Log) -> Log {
    let rotated_at = |total: u64| {
        (total > CONTAINER_LOG_MAX).then(|| (total - 1) / CONTAINER_LOG_MAX * CONTAINER_LOG_MAX)
    };
    let from = |text: &str, cut: u64| {
        let mut cut = usize::try_from(cut).unwrap_or(usize::MAX).min(text.len());
        while !text.is_char_boundary(cut) {
            cut += 1;
        }
        text[cut..].to_owned()
    };
    match log {
        Log::Text(text) => match rotated_at(text.len() as u64) {
            Some(cut) => Log::Text(from(&text, cut)),
            None => Log::Text(text),
        },
        Log::Padded { filler_lines, tail } => {
            let filler = filler_lines * FILLER_LINE.len() as u64;
            match rotated_at(filler + tail.len() as u64) {
                // The file starts at the first whole filler line past the cut.
                Some(cut) if cut < filler => Log::Padded {
                    filler_lines: filler_lines - cut.div_ceil(FILLER_LINE.len() as u64),
                    tail,
                },
                Some(cut) => Log::Text(from(&tail, cut - filler)),
                None => Log::Padded { filler_lines, tail },
            }
        }
        Log::LongLine(line) => {
            let head = line.head.len() as u64;
            match rotated_at(head + line.filler_bytes + line.tail.len() as u64) {
                Some(cut) if cut < head => Log::LongLine(LongLine {
                    head: from(&line.head, cut),
                    ..line
                }),
                Some(cut) if cut < head + line.filler_bytes => Log::LongLine(LongLine {
                    head: String::new(),
                    filler_bytes: head + line.filler_bytes - cut,
                    tail: line.tail,
                }),
                Some(cut) => Log::Text(from(&line.tail, cut - head - line.filler_bytes)),
                None => Log::LongLine(line),
            }
        }
    }
}

/// Names of the pod's init and regular containers.
fn container_names(pod: &Value) -> Vec<String> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| pod["spec"][field].as_array())
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

/// The longest log entry containerd writes (`max_container_log_line_size`, 16 KiB): a
/// longer line becomes several entries, and the kubelet's `tailLines` counts entries,
/// not lines (seen on the real cluster, issue 34: a report line of 24 MiB was cut to its
/// last 1.6 MiB by `tailLines: 100`).
pub const CRI_ENTRY: usize = 16 * 1024;

/// How many log entries a line of `content` bytes (without its newline) is.
fn entries(content: usize) -> usize {
    content.div_ceil(CRI_ENTRY).max(1)
}

/// Where the last `wanted` log entries of `text` begin.
fn tail_start(text: &str, wanted: usize) -> usize {
    let mut left = wanted;
    let mut end = text.len();
    for line in text.split_inclusive('\n').rev() {
        if left == 0 {
            return end;
        }
        let start = end - line.len();
        let n = entries(line.strip_suffix('\n').unwrap_or(line).len());
        if n <= left {
            left -= n;
            end = start;
        } else {
            // Inside this line: its last `left` entries.
            let mut offset = start + (n - left) * CRI_ENTRY;
            while !text.is_char_boundary(offset) {
                offset += 1;
            }
            return offset;
        }
    }
    end
}

/// `tailLines` first (the last N entries: lines, a long one counting as several), then
/// `limitBytes` (the first N bytes of what is left, cut at a character boundary), as
/// the kubelet applies them.
fn select(text: &str, query: &LogQuery) -> String {
    let mut text = text;
    if let Some(tail) = query.tail_lines {
        text = &text[tail_start(text, tail)..];
    }
    if let Some(limit) = query.limit_bytes
        && limit < text.len()
    {
        let mut end = limit;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text = &text[..end];
    }
    text.to_owned()
}

/// [`select`] for a log with one long line, without making its filler: the lines of
/// `head` before the long line's start, the long line, the lines of `tail` after it.
fn select_long_line(line: LongLine, query: &LogQuery) -> Selected {
    let limit = query.limit_bytes.map(|n| n as u64);
    let Some(wanted) = query.tail_lines else {
        return Selected::LongLine { line, limit };
    };
    let (long_end, after) = match line.tail.find('\n') {
        Some(newline) => line.tail.split_at(newline + 1),
        None => (line.tail.as_str(), ""),
    };
    let after_entries: usize = after
        .split_inclusive('\n')
        .map(|l| entries(l.strip_suffix('\n').unwrap_or(l).len()))
        .sum();
    if wanted <= after_entries {
        return Selected::Text(select(after, query));
    }
    let head_start = line.head.rfind('\n').map_or(0, |i| i + 1);
    let (before, long_start) = line.head.split_at(head_start);
    let filler = usize::try_from(line.filler_bytes).unwrap_or(usize::MAX);
    let long_len = long_start.len() + filler + long_end.trim_end_matches('\n').len();
    let (n, k) = (entries(long_len), wanted - after_entries);
    if k >= n {
        let before = select(
            before,
            &LogQuery {
                tail_lines: Some(k - n),
                limit_bytes: None,
                container: None,
            },
        );
        return Selected::LongLine {
            line: LongLine {
                head: before + long_start,
                filler_bytes: line.filler_bytes,
                tail: format!("{long_end}{after}"),
            },
            limit,
        };
    }
    // The long line's last `k` entries: it is cut `offset` bytes from its start.
    let offset = (n - k) * CRI_ENTRY;
    let (head, filler_bytes, end) = if offset < long_start.len() {
        (&long_start[offset..], filler, long_end)
    } else if offset < long_start.len() + filler {
        ("", filler - (offset - long_start.len()), long_end)
    } else {
        ("", 0, &long_end[offset - long_start.len() - filler..])
    };
    Selected::LongLine {
        line: LongLine {
            head: head.to_owned(),
            filler_bytes: filler_bytes as u64,
            tail: format!("{end}{after}"),
        },
        limit,
    }
}

/// [`select`] for a padded log, without making its filler.
fn select_padded(filler_lines: u64, tail: &str, query: &LogQuery) -> Selected {
    let tail_line_count = tail.split_inclusive('\n').count() as u64;
    let (filler_lines, tail) = match query.tail_lines.map(|n| n as u64) {
        Some(wanted) if wanted <= tail_line_count => (
            0,
            select(
                tail,
                &LogQuery {
                    limit_bytes: None,
                    ..query.clone()
                },
            ),
        ),
        Some(wanted) => (filler_lines.min(wanted - tail_line_count), tail.to_owned()),
        None => (filler_lines, tail.to_owned()),
    };
    Selected::Padded {
        filler_lines,
        tail,
        limit: query.limit_bytes.map(|n| n as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(tail_lines: Option<usize>, limit_bytes: Option<usize>) -> LogQuery {
        LogQuery {
            container: None,
            tail_lines,
            limit_bytes,
        }
    }

    fn served(selected: Selected) -> String {
        selected
            .into_chunks()
            .map(|chunk| String::from_utf8(chunk.to_vec()).expect("ASCII"))
            .collect()
    }

    /// As containerd writes it and the kubelet tails it: a line of 40 KiB is three
    /// entries, and `tailLines: 2` gives its last two (from 16 KiB on), not the line.
    #[test]
    fn a_line_longer_than_an_entry_is_tailed_by_entries() {
        let line = LongLine {
            head: "before\nREPORT ".into(),
            filler_bytes: 40 * 1024 - 7 - 1,
            tail: "!\nafter\n".into(),
        };
        let two = served(select_long_line(line.clone(), &query(Some(3), None)));
        assert!(!two.contains("REPORT"), "the start of the line is cut");
        assert_eq!(two.len(), 40 * 1024 - CRI_ENTRY + 1 + "after\n".len());
        let all = served(select_long_line(line.clone(), &query(Some(4), None)));
        assert!(
            all.starts_with("REPORT ") && all.ends_with("!\nafter\n"),
            "{}",
            &all[..20]
        );
        let text = format!("a\n{}\nb\n", "y".repeat(CRI_ENTRY + 10));
        assert_eq!(
            select(&text, &query(Some(2), None)),
            format!("{}\nb\n", "y".repeat(10))
        );
        assert_eq!(select(&text, &query(Some(3), None)), text[2..]);
    }

    /// The kubelet serves only the current file of a rotated log: a report line of
    /// 24 MiB is served without its start (its last 4 MiB), one of 9 MiB whole.
    #[test]
    fn a_log_past_the_kubelets_rotation_size_is_served_from_its_last_file() {
        let line = |filler_bytes: u64| {
            Log::LongLine(LongLine {
                head: "agent\nREPORT ".into(),
                filler_bytes,
                tail: "!\n".into(),
            })
        };
        let total = |filler: u64| filler + "agent\nREPORT ".len() as u64 + 2;
        let Log::LongLine(cut) = current_file(line(24 << 20)) else {
            panic!("a long line stays one")
        };
        assert!(cut.head.is_empty(), "the start is in a rotated file");
        assert_eq!(
            cut.filler_bytes + 2,
            total(24 << 20) - 2 * CONTAINER_LOG_MAX
        );
        let Log::LongLine(whole) = current_file(line(9 << 20)) else {
            panic!("a long line stays one")
        };
        assert_eq!(whole.head, "agent\nREPORT ");
        let text = "y".repeat(usize::try_from(CONTAINER_LOG_MAX).unwrap() + 3);
        let Log::Text(end) = current_file(Log::Text(text)) else {
            panic!("text stays text")
        };
        assert_eq!(end, "yyy");
    }

    /// A long line is one line to `tailLines`, however long, and `limitBytes` cuts it.
    #[test]
    fn a_long_line_counts_as_one_line() {
        let line = LongLine {
            head: "one\ntwo\n{\"raw\":\"".into(),
            filler_bytes: 5,
            tail: "\"}\nafter\n".into(),
        };
        let whole = "one\ntwo\n{\"raw\":\"xxxxx\"}\nafter\n";
        assert_eq!(
            served(select_long_line(line.clone(), &query(None, None))),
            whole
        );
        assert_eq!(
            served(select_long_line(line.clone(), &query(Some(9), None))),
            whole
        );
        assert_eq!(
            served(select_long_line(line.clone(), &query(Some(3), None))),
            "two\n{\"raw\":\"xxxxx\"}\nafter\n"
        );
        assert_eq!(
            served(select_long_line(line.clone(), &query(Some(2), None))),
            "{\"raw\":\"xxxxx\"}\nafter\n"
        );
        assert_eq!(
            served(select_long_line(line.clone(), &query(Some(1), None))),
            "after\n"
        );
        assert_eq!(
            served(select_long_line(line, &query(Some(2), Some(10)))),
            "{\"raw\":\"xx"
        );
    }

    #[test]
    fn tail_lines_then_limit_bytes() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(select(text, &query(None, None)), text);
        assert_eq!(select(text, &query(Some(2), None)), "two\nthree\n");
        assert_eq!(select(text, &query(Some(9), None)), text);
        assert_eq!(select(text, &query(Some(0), None)), "");
        assert_eq!(select("a\nlast", &query(Some(1), None)), "last");
        assert_eq!(select(text, &query(Some(2), Some(5))), "two\nt");
        assert_eq!(
            select("é", &query(None, Some(1))),
            "",
            "never splits a character"
        );
    }

    #[test]
    fn a_padded_log_is_selected_without_making_it() {
        let collect = |selected: Selected| -> Vec<u8> {
            selected.into_chunks().flat_map(|b| b.to_vec()).collect()
        };
        let tail = "report\n";
        // 1 TiB of filler: only what is read is ever made.
        let huge = 1u64 << 40;
        let lines = huge / FILLER_LINE.len() as u64;
        let last = collect(select_padded(lines, tail, &query(Some(3), Some(1000))));
        assert_eq!(last, [FILLER_LINE, FILLER_LINE, tail].concat().as_bytes());
        let first = collect(select_padded(lines, tail, &query(None, Some(150))));
        assert_eq!(first.len(), 150);
        assert_eq!(
            collect(select_padded(lines, tail, &query(Some(1), None))),
            tail.as_bytes()
        );
        let small = collect(select_padded(2, tail, &query(None, None)));
        assert_eq!(small, [FILLER_LINE, FILLER_LINE, tail].concat().as_bytes());
    }

    #[test]
    fn picks_the_container() {
        let logs = PodLogs::default();
        let pod = serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "init"}], "containers": [{"name": "agent"}]},
        });
        logs.set("ns", "p", "agent", "hello\n");
        let with = |container: Option<&str>| LogQuery {
            container: container.map(str::to_owned),
            ..LogQuery::default()
        };
        assert_eq!(
            logs.read("ns", &pod, &with(Some("agent")))
                .unwrap()
                .into_text(),
            "hello\n"
        );
        assert_eq!(
            logs.read("ns", &pod, &with(Some("init")))
                .unwrap()
                .into_text(),
            ""
        );
        let error = logs.read("ns", &pod, &with(Some("nope"))).unwrap_err();
        assert_eq!(error.code, 400);
        let error = logs.read("ns", &pod, &with(None)).unwrap_err();
        assert!(error.message.contains("[init agent]"), "{}", error.message);
    }

    #[tokio::test]
    async fn served_over_http_and_recorded_as_pods_log() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, LogParams, PostParams};

        let double = crate::ApiDouble::start().await;
        let pods: Api<Pod> = Api::default_namespaced(double.client());
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "client-0"},
            "spec": {"containers": [{"name": "agent", "image": "x"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        double.set_pod_log("default", "client-0", "agent", "a\nb\nc\n");

        let all = pods
            .logs(
                "client-0",
                &LogParams {
                    container: Some("agent".into()),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(all, "a\nb\nc\n");
        let tail = pods
            .logs(
                "client-0",
                &LogParams {
                    tail_lines: Some(1),
                    ..LogParams::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(tail, "c\n", "the only container is the default");

        match pods.logs("missing", &LogParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
            other => panic!("expected 404, got {other:?}"),
        }
        let logged: Vec<_> = double
            .requests()
            .into_iter()
            .filter(|r| r.rbac_resource() == "pods/log")
            .map(|r| (r.verb, r.name.unwrap_or_default(), r.status_code))
            .collect();
        assert_eq!(
            logged,
            [
                ("get".to_owned(), "client-0".to_owned(), 200),
                ("get".to_owned(), "client-0".to_owned(), 200),
                ("get".to_owned(), "missing".to_owned(), 404),
            ]
        );

        double.fail_next(
            crate::RequestMatcher::new("get", "pods/log"),
            500,
            "InternalError",
        );
        match pods.logs("client-0", &LogParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 500),
            other => panic!("expected the injected 500, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_pods_log_fails_until_its_kubelet_is_back() {
        use k8s_openapi::api::core::v1::Pod;
        use kube::api::{Api, LogParams, PostParams};

        let double = crate::ApiDouble::start().await;
        let pods: Api<Pod> = Api::default_namespaced(double.client());
        for name in ["gone-0", "here-0"] {
            let pod: Pod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "spec": {"containers": [{"name": "agent", "image": "x"}]},
            }))
            .unwrap();
            pods.create(&PostParams::default(), &pod).await.unwrap();
        }
        double.fail_pod_log("default", "gone-0", Some(LogFailure::KubeletUnreachable));
        for _ in 0..2 {
            match pods.logs("gone-0", &LogParams::default()).await {
                Err(kube::Error::Api(status)) => {
                    assert_eq!(status.code, 500);
                    assert!(
                        status.message.ends_with("connect: connection refused"),
                        "{}",
                        status.message
                    );
                }
                other => panic!("expected a 500, got {other:?}"),
            }
        }
        assert_eq!(
            pods.logs("here-0", &LogParams::default()).await.unwrap(),
            ""
        );
        double.fail_pod_log("default", "gone-0", None);
        assert_eq!(
            pods.logs("gone-0", &LogParams::default()).await.unwrap(),
            ""
        );
    }
}
