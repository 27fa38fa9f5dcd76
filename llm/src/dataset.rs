//! Prompt datasets for the load generator.
//!
//! - `sharegpt`: a JSON array of `{"conversations": [{"from": "human", "value": …},
//!   {"from": "gpt", "value": …}, …]}` (ShareGPT_V3_unfiltered_cleaned_split.json and
//!   its kin). As `vllm bench serve` does, one entry is one request: the prompt is the
//!   first human turn, and the output length is the token count of the reply that
//!   follows it (sent as `max_tokens`, with `min_tokens`/`ignore_eos` unless
//!   `--plain-openai`, so the server generates that many). Entries without a human turn
//!   followed by a reply are skipped (vLLM skips conversations of fewer than two turns);
//!   unlike vLLM, no length filter is applied.
//! - `prompts`: one prompt per line, blank lines skipped (as the GKE Locust load tool
//!   reads its prompt files); the output length is `--dataset-output-tokens` or, without
//!   it, whatever the server generates.
//!
//! Entries are shuffled under the dataset seed, cut to `maxPrompts`, and tokenized once
//! at load; request k of an iteration sends entry k (mod the entry count), so a run is
//! reproducible. The file comes from a path (a ConfigMap or PVC mount, or a local
//! file) or an `http(s)://` URL fetched once at start.

use std::sync::Arc;

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::rng::Rng;
use crate::tokenizer::Tokenizer;

/// The dataset file's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ShareGPT JSON conversations.
    Sharegpt,
    /// One prompt per line.
    Prompts,
    /// A Mooncake-style JSON Lines trace, replayed on its own schedule (see
    /// `loadgen::workload::trace`).
    MooncakeTrace,
}

/// One request of the dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub prompt: Arc<str>,
    /// The prompt's token count.
    pub input_tokens: u32,
    /// Tokens to generate, when the dataset says.
    pub output_tokens: Option<u32>,
}

/// The loaded dataset.
#[derive(Clone, Debug)]
pub struct Dataset {
    pub entries: Vec<Entry>,
    /// Where it came from, for the iteration label.
    pub origin: String,
}

/// How to load a dataset.
#[derive(Clone, Debug)]
pub struct DatasetOptions {
    pub format: Format,
    /// A path or an `http(s)://` URL.
    pub location: String,
    pub max_prompts: Option<usize>,
    pub seed: u64,
    /// Output tokens of `prompts` entries.
    pub output_tokens: Option<u32>,
}

/// A prompt and, for ShareGPT, the reply whose length the output should have.
#[derive(Clone, Debug, PartialEq)]
pub struct Raw {
    pub prompt: String,
    pub reply: Option<String>,
}

/// Reads a ShareGPT JSON document; an error names the entry (and its `id`).
pub fn parse_sharegpt(text: &str) -> anyhow::Result<(Vec<Raw>, usize)> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        anyhow::anyhow!(
            "not valid JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        )
    })?;
    let Value::Array(items) = value else {
        bail!("expected a JSON array of conversations (ShareGPT format)");
    };
    let mut raws = Vec::with_capacity(items.len());
    let mut skipped = 0;
    for (index, item) in items.iter().enumerate() {
        let name = || match item.get("id").and_then(Value::as_str) {
            Some(id) => format!("entry {index} (id {id:?})"),
            None => format!("entry {index}"),
        };
        let turns = item
            .get("conversations")
            .with_context(|| format!("{}: no \"conversations\"", name()))?
            .as_array()
            .with_context(|| format!("{}: \"conversations\" is not a list", name()))?;
        let mut parsed = Vec::with_capacity(turns.len());
        for (turn_index, turn) in turns.iter().enumerate() {
            let field = |key: &str| {
                turn.get(key).and_then(Value::as_str).with_context(|| {
                    format!(
                        "{}: conversations[{turn_index}] has no string \"{key}\"",
                        name()
                    )
                })
            };
            parsed.push((field("from")?, field("value")?));
        }
        let human = parsed
            .iter()
            .position(|(from, _)| matches!(*from, "human" | "user"));
        let pair = human.and_then(|at| {
            let reply = parsed.get(at + 1)?;
            matches!(
                reply.0,
                "gpt" | "chatgpt" | "assistant" | "bard" | "bing" | "model"
            )
            .then(|| (parsed[at].1, reply.1))
        });
        match pair {
            Some((prompt, reply)) if !prompt.trim().is_empty() => raws.push(Raw {
                prompt: prompt.to_owned(),
                reply: Some(reply.to_owned()),
            }),
            _ => skipped += 1,
        }
    }
    Ok((raws, skipped))
}

/// Reads a prompt file: one prompt per line, blank lines skipped.
pub fn parse_prompts(text: &str) -> Vec<Raw> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| Raw {
            prompt: line.to_owned(),
            reply: None,
        })
        .collect()
}

/// Shuffles under `seed` (Fisher-Yates) and keeps at most `max` entries.
pub fn sample<T>(mut items: Vec<T>, seed: u64, max: Option<usize>) -> Vec<T> {
    let mut rng = Rng::new(seed);
    for i in (1..items.len()).rev() {
        let j = rng.below(0, i as u64 + 1) as usize;
        items.swap(i, j);
    }
    if let Some(max) = max {
        items.truncate(max);
    }
    items
}

/// Parses, samples and tokenizes a dataset's text.
pub fn build(
    text: &str,
    options: &DatasetOptions,
    tokenizer: &Tokenizer,
) -> anyhow::Result<Dataset> {
    let origin = &options.location;
    let (raws, skipped) = match options.format {
        Format::Sharegpt => parse_sharegpt(text).with_context(|| format!("dataset {origin}"))?,
        Format::Prompts => (parse_prompts(text), 0),
        Format::MooncakeTrace => {
            bail!("dataset {origin}: a Mooncake trace is replayed, not sampled as prompts")
        }
    };
    if skipped > 0 {
        eprintln!(
            "perfsweep loadgen: dataset {origin}: skipped {skipped} conversations without a human turn followed by a reply"
        );
    }
    let raws = sample(raws, options.seed, options.max_prompts);
    if raws.is_empty() {
        bail!("dataset {origin}: no usable prompt");
    }
    let count = |text: &str| u32::try_from(tokenizer.count(text)).unwrap_or(u32::MAX);
    let entries = raws
        .into_iter()
        .map(|raw| Entry {
            input_tokens: count(&raw.prompt),
            output_tokens: match &raw.reply {
                Some(reply) => Some(count(reply).max(1)),
                None => options.output_tokens,
            },
            prompt: raw.prompt.into(),
        })
        .collect();
    Ok(Dataset {
        entries,
        origin: origin.clone(),
    })
}

/// Reads the dataset from a path, downloads it from an `http(s)://` URL, or reads it
/// from object storage (`s3://`, `gs://`, `az://bucket/key`, through the host's
/// [`ObjectReader`](crate::loadgen::hooks::ObjectReader) in `hooks`: in perfsweep, the
/// export module's client; `parameters` are the export parameters such as `endpoint` and
/// `region`, credentials come from the environment as for `--export`).
pub async fn fetch(
    location: &str,
    parameters: &std::collections::BTreeMap<String, String>,
    hooks: &crate::loadgen::hooks::Hooks,
) -> anyhow::Result<String> {
    if location.starts_with("http://") || location.starts_with("https://") {
        return download(location).await;
    }
    if ["s3://", "gs://", "az://"]
        .iter()
        .any(|scheme| location.starts_with(scheme))
    {
        return read_object(location, parameters, hooks)
            .await
            .with_context(|| format!("reading the dataset {location}"));
    }
    tokio::fs::read_to_string(location)
        .await
        .with_context(|| format!("cannot read the dataset file {location}"))
}

async fn read_object(
    location: &str,
    parameters: &std::collections::BTreeMap<String, String>,
    hooks: &crate::loadgen::hooks::Hooks,
) -> anyhow::Result<String> {
    let body = hooks.objects()?.read(location, parameters).await?;
    String::from_utf8(body).context("the dataset is not UTF-8 text")
}

/// Largest dataset downloaded (ShareGPT_V3 is ~640 MiB).
const MAX_DOWNLOAD: usize = 2 << 30;

async fn download(url: &str) -> anyhow::Result<String> {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;

    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|error| anyhow::anyhow!("cannot load the system's TLS roots: {error}"))?
        .https_or_http()
        .enable_http1()
        .build();
    let client: Client<_, Empty<bytes::Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let mut uri: http::Uri = url
        .parse()
        .with_context(|| format!("dataset URL {url:?} is not a URL"))?;
    // Follow a few redirects (object stores and file hosts use them).
    for _ in 0..5 {
        let response = client
            .get(uri.clone())
            .await
            .with_context(|| format!("downloading the dataset {url}"))?;
        let status = response.status();
        if status.is_redirection()
            && let Some(location) = response.headers().get(http::header::LOCATION)
        {
            let next = location
                .to_str()
                .ok()
                .and_then(|l| l.parse::<http::Uri>().ok())
                .with_context(|| format!("downloading the dataset {url}: bad redirect"))?;
            uri = if next.scheme().is_some() {
                next
            } else {
                let mut parts = uri.clone().into_parts();
                parts.path_and_query = next.path_and_query().cloned();
                http::Uri::from_parts(parts)
                    .with_context(|| format!("downloading the dataset {url}: bad redirect"))?
            };
            continue;
        }
        if !status.is_success() {
            bail!("downloading the dataset {url}: HTTP {status}");
        }
        let body = http_body_util::Limited::new(response.into_body(), MAX_DOWNLOAD)
            .collect()
            .await
            .map_err(|e| anyhow::anyhow!("downloading the dataset {url}: {e}"))?
            .to_bytes();
        return String::from_utf8(body.to_vec())
            .with_context(|| format!("the dataset {url} is not UTF-8 text"));
    }
    bail!("downloading the dataset {url}: too many redirects")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_is_a_deterministic_permutation() {
        let items: Vec<u32> = (0..100).collect();
        let a = sample(items.clone(), 7, None);
        let b = sample(items.clone(), 7, None);
        assert_eq!(a, b);
        assert_ne!(a, items, "shuffled");
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, items, "a permutation");
        assert_ne!(sample(items.clone(), 8, None), a);
        assert_eq!(sample(items, 7, Some(10)), a[..10]);
    }

    #[test]
    fn prompt_files_skip_blank_lines() {
        let raws = parse_prompts("first prompt\n\n  second prompt  \r\n\n");
        assert_eq!(
            raws.iter().map(|r| r.prompt.as_str()).collect::<Vec<_>>(),
            ["first prompt", "second prompt"]
        );
    }

    #[test]
    fn malformed_sharegpt_names_the_entry() {
        let error = parse_sharegpt(r#"[{"id": "a", "conversations": []}, {"id": "b"}]"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("entry 1 (id \"b\")"), "{error}");
        let error = parse_sharegpt(r#"[{"id": "x", "conversations": [{"from": "human"}]}]"#)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("conversations[0]") && error.contains("\"value\""),
            "{error}"
        );
        let error = parse_sharegpt("[{\"id\": \n").unwrap_err().to_string();
        assert!(error.contains("line 2"), "{error}");
        assert!(parse_sharegpt("{}").is_err());
    }
}
