//! Export sinks: where result records and their raw evidence are copied after a run.
//!
//! A destination is a URI plus parameters, in the shape of OME's BenchmarkJob
//! `outputLocation {storageUri, parameters}`:
//!
//! - `file:///path`: a local directory.
//! - `pvc://claim/path`: a PersistentVolumeClaim, meaningful only where the claim is
//!   mounted (in the cluster); the CLI rejects it with an explanation.
//! - `s3://bucket/prefix`: Amazon S3, or any S3-compatible server with the parameter
//!   `endpoint` (`http(s)://host[:port]`, path-style addressing); `region`
//!   (default `us-east-1`); `secretName` (the operator's Secret reference; the CLI reads
//!   `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN` from its environment).
//! - `gs://bucket/prefix`: Google Cloud Storage through its S3-compatible XML API, with
//!   HMAC keys as the access key id and secret.
//! - `az://`: not supported yet (Azure Blob Storage has no S3-compatible API).
//!
//! What is written, per run id: `<prefix>/<run id>/records.jsonl`, `records.parquet` and
//! `evidence/<sha256>.txt`. The local results directory is always written first and is
//! never removed, so a failed upload loses nothing.

pub mod format;
pub mod s3;
pub mod sigv4;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use futures::future::BoxFuture;
use perfsweep_benchmarks::record::ResultRecord;

/// A parsed export destination.
#[derive(Clone, Debug, PartialEq)]
pub enum Destination {
    /// `file:///path`.
    Directory(PathBuf),
    /// `pvc://claim/path`.
    Claim { claim: String, path: String },
    /// `s3://` and `gs://`.
    S3(S3Location),
}

/// An S3 bucket and key prefix, and how to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct S3Location {
    /// `s3` or `gs`, as written.
    pub uri_scheme: String,
    /// `http` or `https`.
    pub scheme: String,
    /// `host[:port]` of the endpoint.
    pub authority: String,
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
    pub region: String,
    /// `bucket.endpoint` hosts (AWS) instead of `endpoint/bucket` paths.
    pub virtual_host: bool,
    /// The Secret holding the credentials (in-cluster); `None` for the CLI.
    pub secret_name: Option<String>,
}

impl S3Location {
    /// The object key of `name` under the prefix.
    pub fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}/{name}", self.prefix)
        }
    }

    /// The `Host` requests go to.
    pub fn host(&self) -> String {
        if self.virtual_host {
            format!("{}.{}", self.bucket, self.authority)
        } else {
            self.authority.clone()
        }
    }
}

impl std::fmt::Display for S3Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}/{} (endpoint {}://{})",
            self.uri_scheme, self.bucket, self.prefix, self.scheme, self.authority
        )
    }
}

/// Parameters an export destination accepts.
const PARAMETERS: &[&str] = &["endpoint", "region", "secretName"];

/// Parses `uri` with its `parameters` (pure: no environment, no I/O).
pub fn parse(uri: &str, parameters: &BTreeMap<String, String>) -> anyhow::Result<Destination> {
    if let Some(unknown) = parameters
        .keys()
        .find(|k| !PARAMETERS.contains(&k.as_str()))
    {
        anyhow::bail!(
            "unknown export parameter {unknown:?} (known: {})",
            PARAMETERS.join(", ")
        );
    }
    let (scheme, rest) = uri.split_once("://").with_context(|| {
        format!("export location {uri:?} is not a URI (e.g. s3://bucket/prefix, file:///dir)")
    })?;
    match scheme {
        "file" => {
            if !rest.starts_with('/') {
                anyhow::bail!("{uri:?}: a file URI needs an absolute path (file:///dir)");
            }
            only(parameters, &[], uri)?;
            Ok(Destination::Directory(PathBuf::from(rest)))
        }
        "pvc" => {
            only(parameters, &[], uri)?;
            let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
            if claim.is_empty() {
                anyhow::bail!("{uri:?}: no claim name (pvc://claim/path)");
            }
            Ok(Destination::Claim {
                claim: claim.into(),
                path: path.trim_matches('/').into(),
            })
        }
        "s3" | "gs" => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                anyhow::bail!("{uri:?}: no bucket ({scheme}://bucket/prefix)");
            }
            let gcs = scheme == "gs";
            let region = parameters
                .get("region")
                .cloned()
                // GCS's XML API takes SigV4 with the region `auto`.
                .unwrap_or_else(|| if gcs { "auto" } else { "us-east-1" }.into());
            let (endpoint, virtual_host) = match parameters.get("endpoint") {
                Some(endpoint) => (endpoint.clone(), false),
                None if gcs => ("https://storage.googleapis.com".into(), false),
                // Virtual-hosted style is what AWS recommends; a bucket name with dots
                // would not match the wildcard certificate, so those go path-style.
                None => (
                    format!("https://s3.{region}.amazonaws.com"),
                    !bucket.contains('.'),
                ),
            };
            let endpoint_uri: http::Uri = endpoint
                .parse()
                .with_context(|| format!("export endpoint {endpoint:?} is not a URL"))?;
            let endpoint_scheme = endpoint_uri.scheme_str().unwrap_or_default();
            if !matches!(endpoint_scheme, "http" | "https") {
                anyhow::bail!("export endpoint {endpoint:?} must start with http:// or https://");
            }
            let authority = endpoint_uri
                .authority()
                .with_context(|| format!("export endpoint {endpoint:?} has no host"))?;
            // Endpoints are printed in messages; credentials belong in the environment.
            if authority.as_str().contains('@') {
                anyhow::bail!(
                    "export endpoint must not contain credentials (user:password@); \
                     set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead"
                );
            }
            if !matches!(endpoint_uri.path(), "" | "/") {
                anyhow::bail!(
                    "export endpoint {endpoint:?} must not have a path (the bucket is in the URI)"
                );
            }
            Ok(Destination::S3(S3Location {
                uri_scheme: scheme.into(),
                scheme: endpoint_scheme.into(),
                authority: authority.to_string(),
                bucket: bucket.into(),
                prefix: prefix.trim_matches('/').into(),
                region,
                virtual_host,
                secret_name: parameters.get("secretName").cloned(),
            }))
        }
        "az" | "azure" | "abfs" | "abfss" => anyhow::bail!(
            "{uri:?}: Azure Blob Storage is not supported yet (it has no S3-compatible API); \
             export to file:// or an S3-compatible store instead"
        ),
        other => anyhow::bail!(
            "{uri:?}: unsupported export scheme {other:?} (supported: file, pvc, s3, gs)"
        ),
    }
}

fn only(parameters: &BTreeMap<String, String>, allowed: &[&str], uri: &str) -> anyhow::Result<()> {
    match parameters.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => anyhow::bail!("{uri:?} takes no parameter {key:?}"),
        None => Ok(()),
    }
}

/// Object-store credentials. `Debug` redacts them, and nothing in this module puts them
/// in an error message, a log line or a status.
#[derive(Clone)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials { <redacted> }")
    }
}

impl Credentials {
    /// The AWS SDKs' environment variables (the CLI's source of credentials).
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        match (var("AWS_ACCESS_KEY_ID"), var("AWS_SECRET_ACCESS_KEY")) {
            (Some(access_key_id), Some(secret_access_key)) => Ok(Self {
                access_key_id,
                secret_access_key,
                session_token: var("AWS_SESSION_TOKEN"),
            }),
            _ => anyhow::bail!(
                "object storage export needs credentials: set AWS_ACCESS_KEY_ID and \
                 AWS_SECRET_ACCESS_KEY (for gs://, a GCS HMAC key and secret)"
            ),
        }
    }
}

/// Why one object could not be written.
#[derive(Debug)]
pub struct PutError {
    pub message: String,
    /// Whether trying again may help (connection failures, 5xx, throttling).
    pub retryable: bool,
}

impl PutError {
    pub fn retryable(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: true,
        }
    }

    pub fn permanent(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            retryable: false,
        }
    }
}

/// Somewhere objects can be written by key.
pub trait ObjectSink: Send + Sync {
    fn put<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
        content_type: &'static str,
    ) -> BoxFuture<'a, Result<(), PutError>>;

    /// Where the objects go, for messages (never with credentials).
    fn location(&self) -> String;
}

/// A local directory (`file://`).
#[derive(Debug)]
pub struct DirectorySink {
    pub root: PathBuf,
}

impl DirectorySink {
    fn write(&self, key: &str, body: &[u8]) -> Result<(), PutError> {
        let path = self.root.join(key);
        let fail = |what: &str, error: std::io::Error| {
            PutError::retryable(format!("cannot {what} {}: {error}", path.display()))
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail("create the directory of", e))?;
        }
        // Write then rename, so a reader never sees half a file.
        let partial = path.with_extension("partial");
        std::fs::write(&partial, body).map_err(|e| fail("write", e))?;
        std::fs::rename(&partial, &path).map_err(|e| fail("rename into", e))
    }
}

impl ObjectSink for DirectorySink {
    fn put<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
        _content_type: &'static str,
    ) -> BoxFuture<'a, Result<(), PutError>> {
        Box::pin(async move { self.write(key, &body) })
    }

    fn location(&self) -> String {
        format!("file://{}", self.root.display())
    }
}

/// Opens a sink for the CLI: credentials from the environment; `pvc://` refused, since
/// a claim is only reachable where it is mounted.
pub fn open_for_cli(destination: Destination) -> anyhow::Result<Box<dyn ObjectSink>> {
    match destination {
        Destination::Directory(root) => Ok(Box::new(DirectorySink { root })),
        Destination::Claim { claim, .. } => anyhow::bail!(
            "pvc://{claim}/... is an in-cluster destination (a PersistentVolumeClaim is only \
             reachable where it is mounted); from the command line export to file:///path \
             or to object storage"
        ),
        Destination::S3(location) => {
            if location.secret_name.is_some() {
                anyhow::bail!(
                    "the export parameter secretName is for the operator; the command line \
                     reads AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from its environment"
                );
            }
            Ok(Box::new(s3::S3Sink::new(
                location,
                Credentials::from_env()?,
            )?))
        }
    }
}

/// Bounded exponential backoff.
#[derive(Clone, Debug)]
pub struct Retry {
    /// Attempts per object, the first included.
    pub attempts: u32,
    pub initial_delay: Duration,
    pub max_delay: Duration,
}

impl Default for Retry {
    /// Six attempts over about 15 seconds: rides out a restarting endpoint or a short
    /// network blip without holding a run up for long.
    fn default() -> Self {
        Self {
            attempts: 6,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

/// What an export wrote.
#[derive(Debug, Default)]
pub struct Report {
    pub objects: usize,
    pub bytes: u64,
    /// Attempts that failed and were retried (0 when everything went through at once).
    pub retries: u32,
}

/// Puts one object, retrying retryable failures with exponential backoff.
pub async fn put_with_retry(
    sink: &dyn ObjectSink,
    key: &str,
    body: Bytes,
    content_type: &'static str,
    retry: &Retry,
    report: &mut Report,
) -> anyhow::Result<()> {
    let mut delay = retry.initial_delay;
    let mut attempt = 1;
    loop {
        match sink.put(key, body.clone(), content_type).await {
            Ok(()) => {
                report.objects += 1;
                report.bytes += body.len() as u64;
                return Ok(());
            }
            Err(error) if error.retryable && attempt < retry.attempts => {
                // The operator logs through tracing; the CLI (no subscriber) talks on stderr.
                tracing::warn!(key, attempt, error = %error.message, "export failed; retrying");
                eprintln!(
                    "  export: {key}: attempt {attempt}/{} failed ({}); retrying in {:.1}s",
                    retry.attempts,
                    error.message,
                    delay.as_secs_f64()
                );
                report.retries += 1;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(retry.max_delay);
                attempt += 1;
            }
            Err(error) => anyhow::bail!(
                "cannot export {key} to {} (attempt {attempt} of {}): {}",
                sink.location(),
                retry.attempts,
                error.message
            ),
        }
    }
}

/// Exports the results directory `dir` (as `perfsweep run --output` writes it: one
/// `*.json` record per run and `evidence/`): per run id, the evidence files first (each
/// checked against its digest), then `records.jsonl` and `records.parquet`, so whoever
/// finds the records finds their evidence.
pub async fn export_dir(
    dir: &Path,
    sink: &dyn ObjectSink,
    retry: &Retry,
) -> anyhow::Result<Report> {
    let records = read_records(dir)?;
    let mut runs: BTreeMap<&str, Vec<ResultRecord>> = BTreeMap::new();
    for record in &records {
        runs.entry(record.run_id.as_str())
            .or_default()
            .push(record.clone());
    }
    let mut report = Report::default();
    for (run_id, records) in runs {
        let mut evidence: Vec<&perfsweep_benchmarks::record::Evidence> =
            records.iter().filter_map(|r| r.evidence.as_ref()).collect();
        evidence.sort_by(|a, b| a.path.cmp(&b.path));
        evidence.dedup_by(|a, b| a.path == b.path);
        for item in evidence {
            let path = dir.join(&item.path);
            let body = std::fs::read(&path)
                .with_context(|| format!("cannot read evidence {}", path.display()))?;
            let actual = sigv4::sha256_hex(&body);
            if actual != item.sha256 {
                anyhow::bail!(
                    "evidence {} has SHA-256 {actual}, its record says {}: not exporting it",
                    path.display(),
                    item.sha256
                );
            }
            let key = format!("{run_id}/evidence/{}.txt", item.sha256);
            let body = Bytes::from(body);
            put_with_retry(sink, &key, body, "text/plain", retry, &mut report).await?;
        }
        let lines = Bytes::from(format::json_lines(&records)?);
        let key = format!("{run_id}/records.jsonl");
        put_with_retry(
            sink,
            &key,
            lines,
            "application/x-ndjson",
            retry,
            &mut report,
        )
        .await?;
        let table = Bytes::from(format::parquet(&records)?);
        let key = format!("{run_id}/records.parquet");
        put_with_retry(
            sink,
            &key,
            table,
            "application/vnd.apache.parquet",
            retry,
            &mut report,
        )
        .await?;
    }
    Ok(report)
}

/// The records directly in `dir` (not recursive: one run's output directory).
fn read_records(dir: &Path) -> anyhow::Result<Vec<ResultRecord>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read results directory {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .with_context(|| format!("cannot read results directory {}", dir.display()))?;
    paths.retain(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    if paths.is_empty() {
        anyhow::bail!("no result records (*.json) in {}", dir.display());
    }
    paths
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not a result record", path.display()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn uris_parse_into_destinations() {
        assert_eq!(
            parse("file:///var/results", &params(&[])).expect("file"),
            Destination::Directory("/var/results".into())
        );
        assert_eq!(
            parse("pvc://results/perf/a/", &params(&[])).expect("pvc"),
            Destination::Claim {
                claim: "results".into(),
                path: "perf/a".into()
            }
        );
        let Destination::S3(aws) = parse("s3://bench/nightly/", &params(&[])).expect("s3") else {
            panic!("not S3")
        };
        assert_eq!(aws.host(), "bench.s3.us-east-1.amazonaws.com");
        assert_eq!(aws.key("r/records.jsonl"), "nightly/r/records.jsonl");
        let Destination::S3(minio) = parse(
            "s3://bench",
            &params(&[
                ("endpoint", "http://127.0.0.1:9000"),
                ("region", "eu-1"),
                ("secretName", "s3-creds"),
            ]),
        )
        .expect("s3 with endpoint") else {
            panic!("not S3")
        };
        assert_eq!(
            (minio.scheme.as_str(), minio.host(), minio.virtual_host),
            ("http", "127.0.0.1:9000".to_owned(), false)
        );
        assert_eq!(minio.key("x"), "x");
        assert_eq!(minio.secret_name.as_deref(), Some("s3-creds"));
        let Destination::S3(gcs) = parse("gs://b/p", &params(&[])).expect("gs") else {
            panic!("not S3")
        };
        assert_eq!(
            (gcs.host(), gcs.region.as_str()),
            ("storage.googleapis.com".to_owned(), "auto")
        );
    }

    #[test]
    fn unsupported_or_malformed_destinations_are_explained() {
        let error =
            |uri: &str, p: &[(&str, &str)]| parse(uri, &params(p)).expect_err(uri).to_string();
        assert!(error("az://container/x", &[]).contains("not supported yet"));
        assert!(error("ftp://x", &[]).contains("unsupported export scheme"));
        assert!(error("results/", &[]).contains("not a URI"));
        assert!(error("file://relative", &[]).contains("absolute path"));
        assert!(error("s3:///p", &[]).contains("no bucket"));
        assert!(error("s3://b", &[("endpont", "x")]).contains("unknown export parameter"));
        assert!(error("s3://b", &[("endpoint", "ftp://h")]).contains("http:// or https://"));
        let leaked = error("s3://b", &[("endpoint", "http://id:pw@h:9000")]);
        assert!(leaked.contains("must not contain credentials") && !leaked.contains("pw"));
        assert!(error("file:///x", &[("region", "r")]).contains("takes no parameter"));
        let cli = open_for_cli(parse("pvc://claim/x", &params(&[])).expect("pvc"));
        assert!(
            cli.err()
                .expect("refused")
                .to_string()
                .contains("in-cluster")
        );
    }

    #[test]
    fn credentials_never_show_in_debug_output() {
        let credentials = Credentials {
            access_key_id: "AKIDVISIBLE".into(),
            secret_access_key: "very-secret-key".into(),
            session_token: Some("session-token-value".into()),
        };
        let Destination::S3(location) = parse("s3://b/p", &params(&[])).expect("s3") else {
            panic!("not S3")
        };
        let sink = s3::S3Sink::new(location, credentials.clone()).expect("sink");
        for text in [format!("{credentials:?}"), format!("{sink:?}")] {
            for secret in ["AKIDVISIBLE", "very-secret-key", "session-token-value"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
    }

    /// Fails the first `failures` puts (retryably), then accepts.
    struct Flaky {
        failures: u32,
        calls: AtomicU32,
        permanent: bool,
    }

    impl ObjectSink for Flaky {
        fn put<'a>(
            &'a self,
            _key: &'a str,
            _body: Bytes,
            _content_type: &'static str,
        ) -> BoxFuture<'a, Result<(), PutError>> {
            let call = self.calls.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                if self.permanent {
                    Err(PutError::permanent("HTTP 403"))
                } else if call < self.failures {
                    Err(PutError::retryable("HTTP 503"))
                } else {
                    Ok(())
                }
            })
        }

        fn location(&self) -> String {
            "flaky://".into()
        }
    }

    #[tokio::test]
    async fn retryable_failures_are_retried_up_to_the_bound_and_permanent_ones_not() {
        let retry = Retry {
            attempts: 3,
            initial_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        };
        let put = |sink: &'static Flaky| async {
            let mut report = Report::default();
            let outcome = put_with_retry(
                sink,
                "k",
                Bytes::from_static(b"x"),
                "t",
                &retry,
                &mut report,
            )
            .await;
            (outcome, report, sink.calls.load(Ordering::SeqCst))
        };
        let leak = |failures, permanent| {
            &*Box::leak(Box::new(Flaky {
                failures,
                calls: AtomicU32::new(0),
                permanent,
            }))
        };
        let (outcome, report, calls) = put(leak(2, false)).await;
        assert!(outcome.is_ok());
        assert_eq!((report.retries, report.objects, calls), (2, 1, 3));
        let (outcome, _, calls) = put(leak(3, false)).await;
        assert!(
            outcome
                .expect_err("gave up")
                .to_string()
                .contains("attempt 3 of 3")
        );
        assert_eq!(calls, 3);
        let (outcome, _, calls) = put(leak(0, true)).await;
        assert!(outcome.is_err());
        assert_eq!(calls, 1);
    }
}
