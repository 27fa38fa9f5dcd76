//! Export sinks: where result records and their raw evidence are copied after a run, by
//! the CLI (`run --export`, `results upload`) and by the operator (`outputLocation`).
//!
//! A destination is a URI plus parameters, in the shape of OME's BenchmarkJob
//! `outputLocation {storageUri, parameters}`; every object store goes through the
//! `object_store` crate:
//!
//! - `s3://bucket/prefix`: Amazon S3, or any S3-compatible server (MinIO, Ceph RGW,
//!   moto, other clouds' S3 APIs) with the parameter `endpoint`
//!   (`http(s)://host[:port]`, path-style addressing); `region` (default `us-east-1`).
//! - `gs://bucket/prefix`: Google Cloud Storage (a service account key); `endpoint`
//!   for an emulator.
//! - `az://container/prefix`: Azure Blob Storage; the storage account in the parameter
//!   `account` (or the credential `AZURE_STORAGE_ACCOUNT_NAME`); `endpoint` for Azurite.
//! - `file:///path`: a local directory.
//! - `pvc://claim/path`: a PersistentVolumeClaim, only meaningful where the claim is
//!   mounted; both the CLI and the operator refuse it with an explanation (see
//!   docs/results.md).
//!
//! Credentials are named like the environment variables of each cloud's own tools
//! ([`Credentials::from_lookup`]): the CLI reads them from its environment, the operator
//! from the Secret an `outputLocation` names. `Debug` redacts them and no message here
//! contains them.
//!
//! What is written, per run id: `<prefix>/<run id>/<name>.jsonl` and `<name>.parquet`
//! (`records` from the CLI, the benchmark's name from the operator) and
//! `evidence/<sha256>.txt`, evidence first so that whoever finds the records finds their
//! evidence. The local copy (the CLI's results directory, the operator's evidence
//! ConfigMap and status) is never removed, so a failed upload loses nothing.

pub mod allowed;
pub mod dataset;
pub mod format;
pub mod github;
pub mod http;
pub mod mirror;
pub mod read;
pub mod store;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use perfsweep_benchmarks::execution::agent_report::sha256_hex;
use perfsweep_benchmarks::results::record::{Evidence, ResultRecord};

pub use store::Store;

/// A parsed export destination.
#[derive(Clone, Debug, PartialEq)]
pub enum Destination {
    /// `file:///path`.
    Directory(PathBuf),
    /// `pvc://[namespace:]claim/path`.
    Claim {
        namespace: Option<String>,
        claim: String,
        path: String,
    },
    /// `s3://`, `gs://`, `az://` and `oci://` (OCI's S3-compatible API).
    Bucket(BucketLocation),
    /// `github://owner/repo[@tag]`: assets of a release.
    GitHub(github::Release),
}

/// Which object storage service a bucket is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    S3,
    Gcs,
    Azure,
}

impl Service {
    pub fn scheme(self) -> &'static str {
        match self {
            Self::S3 => "s3",
            Self::Gcs => "gs",
            Self::Azure => "az",
        }
    }
}

/// A bucket (an Azure container) and key prefix, and how to reach it.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketLocation {
    pub service: Service,
    pub bucket: String,
    /// Without leading or trailing `/`; may be empty.
    pub prefix: String,
    /// `http(s)://host[:port]` of an S3-compatible server or an emulator.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// The Azure storage account.
    pub account: Option<String>,
    /// The Secret holding the credentials (operator only; the CLI refuses it).
    pub secret_name: Option<String>,
}

impl std::fmt::Display for BucketLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}/{}",
            self.service.scheme(),
            self.bucket,
            self.prefix
        )?;
        if let Some(endpoint) = &self.endpoint {
            write!(f, " (endpoint {endpoint})")?;
        }
        Ok(())
    }
}

/// Parameters an export destination accepts.
pub use perfsweep_benchmarks::execution::output::PARAMETERS;

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
    let service = match scheme {
        "file" => {
            if !rest.starts_with('/') {
                anyhow::bail!("{uri:?}: a file URI needs an absolute path (file:///dir)");
            }
            only(parameters, &[], uri)?;
            return Ok(Destination::Directory(PathBuf::from(rest)));
        }
        "pvc" => {
            only(parameters, &[], uri)?;
            let (claim, path) = rest.split_once('/').unwrap_or((rest, ""));
            // OME's pvc://[namespace:]claim/path.
            let (namespace, claim) = match claim.split_once(':') {
                Some((namespace, claim)) => (Some(namespace.to_owned()), claim),
                None => (None, claim),
            };
            if claim.is_empty() {
                anyhow::bail!("{uri:?}: no claim name (pvc://claim/path)");
            }
            if path.split('/').any(|part| part == "..") {
                anyhow::bail!("{uri:?}: the path must stay inside the claim (no ..)");
            }
            return Ok(Destination::Claim {
                namespace,
                claim: claim.into(),
                path: path.trim_matches('/').into(),
            });
        }
        "github" => {
            only(parameters, &["endpoint", "secretName"], uri)?;
            let endpoint = parameters.get("endpoint").cloned();
            if let Some(endpoint) = &endpoint {
                check_endpoint(endpoint, EndpointPath::Allowed)?;
            }
            return github::Release::parse(rest, endpoint, parameters.get("secretName").cloned())
                .map(Destination::GitHub)
                .with_context(|| format!("{uri:?}"));
        }
        "oci" => return oci(uri, rest, parameters).map(Destination::Bucket),
        "s3" => Service::S3,
        "gs" => Service::Gcs,
        "az" => Service::Azure,
        other => anyhow::bail!(
            "{uri:?}: unsupported export scheme {other:?} (supported: s3, gs, az, oci, github, \
             pvc, file)"
        ),
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        anyhow::bail!("{uri:?}: no bucket ({scheme}://bucket/prefix)");
    }
    match service {
        Service::S3 => only(parameters, &["endpoint", "region", "secretName"], uri)?,
        Service::Gcs => only(parameters, &["endpoint", "secretName"], uri)?,
        Service::Azure => only(parameters, &["endpoint", "account", "secretName"], uri)?,
    }
    refuse_foreign_hosts(uri, parameters)?;
    let endpoint = parameters.get("endpoint").cloned();
    if let Some(endpoint) = &endpoint {
        check_endpoint(endpoint, EndpointPath::Refused)?;
    }
    let mut location = BucketLocation {
        service,
        bucket: bucket.into(),
        prefix: prefix.trim_matches('/').into(),
        endpoint,
        region: parameters.get("region").cloned(),
        account: parameters.get("account").cloned(),
        secret_name: parameters.get("secretName").cloned(),
    };
    match service {
        // OME's s3://bucket@region/path.
        Service::S3 => {
            if let Some((bucket, region)) = location.bucket.clone().split_once('@') {
                if bucket.is_empty() || region.is_empty() {
                    anyhow::bail!("{uri:?}: expected s3://bucket@region/prefix");
                }
                if location.region.as_deref().is_some_and(|r| r != region) {
                    anyhow::bail!("{uri:?}: the region in the URI and parameters.region differ");
                }
                location.bucket = bucket.into();
                location.region = Some(region.into());
            }
        }
        // OME's az://account/container/path (or account.blob.core.windows.net); with the
        // parameter account, az://container/path.
        Service::Azure if location.account.is_none() => {
            let (container, prefix) = location
                .prefix
                .split_once('/')
                .unwrap_or((&location.prefix, ""));
            if container.is_empty() {
                anyhow::bail!("{uri:?}: expected az://account/container/prefix");
            }
            let account = bucket
                .strip_suffix(".blob.core.windows.net")
                .unwrap_or(bucket);
            location = BucketLocation {
                bucket: container.into(),
                prefix: prefix.into(),
                account: Some(account.into()),
                ..location
            };
        }
        _ => {}
    }
    Ok(Destination::Bucket(location))
}

/// OME's `oci://n/{namespace}/b/{bucket}/o/{path}`: OCI Object Storage through its
/// S3-compatible API, at `https://{namespace}.compat.objectstorage.{region}.oraclecloud.com`
/// (the parameter `endpoint` overrides it), with a Customer Secret Key as credentials.
fn oci(
    uri: &str,
    rest: &str,
    parameters: &BTreeMap<String, String>,
) -> anyhow::Result<BucketLocation> {
    only(parameters, &["endpoint", "region", "secretName"], uri)?;
    refuse_foreign_hosts(uri, parameters)?;
    let parts: Vec<&str> = rest.splitn(6, '/').collect();
    let (namespace, bucket, prefix) = match parts.as_slice() {
        ["n", namespace, "b", bucket, "o", prefix] => (*namespace, *bucket, *prefix),
        ["n", namespace, "b", bucket] | ["n", namespace, "b", bucket, "o"] => {
            (*namespace, *bucket, "")
        }
        _ => anyhow::bail!("{uri:?}: expected oci://n/{{namespace}}/b/{{bucket}}/o/{{path}}"),
    };
    if namespace.is_empty() || bucket.is_empty() {
        anyhow::bail!("{uri:?}: expected oci://n/{{namespace}}/b/{{bucket}}/o/{{path}}");
    }
    let region = parameters.get("region").cloned();
    let endpoint = match (parameters.get("endpoint"), &region) {
        (Some(endpoint), _) => endpoint.clone(),
        (None, Some(region)) => {
            format!("https://{namespace}.compat.objectstorage.{region}.oraclecloud.com")
        }
        (None, None) => anyhow::bail!(
            "{uri:?}: OCI's S3-compatible endpoint needs the region: set parameters.region \
             (e.g. us-phoenix-1)"
        ),
    };
    check_endpoint(&endpoint, EndpointPath::Refused)?;
    Ok(BucketLocation {
        service: Service::S3,
        bucket: bucket.into(),
        prefix: prefix.trim_matches('/').into(),
        endpoint: Some(endpoint),
        region,
        account: None,
        secret_name: parameters.get("secretName").cloned(),
    })
}

/// Before anything is built from them: an account, region, namespace or bucket that
/// could name another host than the service's (issue 34).
fn refuse_foreign_hosts(uri: &str, parameters: &BTreeMap<String, String>) -> anyhow::Result<()> {
    match perfsweep_benchmarks::execution::output::host_part_errors(uri, parameters)
        .into_iter()
        .next()
    {
        Some(error) => anyhow::bail!("{error}"),
        None => Ok(()),
    }
}

/// Whether an endpoint may have a path: a bucket's is in the URI, but a GitHub
/// Enterprise server's API is under one (`https://ghe.example/api/v3`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum EndpointPath {
    Allowed,
    Refused,
}

/// An endpoint is printed in messages and status: it must not carry credentials.
fn check_endpoint(endpoint: &str, path: EndpointPath) -> anyhow::Result<()> {
    let uri: ::http::Uri = endpoint
        .parse()
        .with_context(|| format!("export endpoint {endpoint:?} is not a URL"))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        anyhow::bail!("export endpoint {endpoint:?} must start with http:// or https://");
    }
    let authority = uri
        .authority()
        .with_context(|| format!("export endpoint {endpoint:?} has no host"))?;
    if authority.as_str().contains('@') {
        anyhow::bail!(
            "export endpoint must not contain credentials (user:password@); put them in \
             the credentials (environment or Secret) instead"
        );
    }
    if uri.query().is_some() {
        anyhow::bail!("export endpoint {endpoint:?} must not have a query");
    }
    if path == EndpointPath::Refused && !matches!(uri.path(), "" | "/") {
        anyhow::bail!(
            "export endpoint {endpoint:?} must not have a path (the bucket is in the URI)"
        );
    }
    Ok(())
}

fn only(parameters: &BTreeMap<String, String>, allowed: &[&str], uri: &str) -> anyhow::Result<()> {
    match parameters.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => anyhow::bail!("{uri:?} takes no parameter {key:?}"),
        None => Ok(()),
    }
}

/// The credentials of one object storage service. `Debug` redacts them, and nothing in
/// this module puts them in an error message, a log line or a status.
#[derive(Clone)]
pub enum Credentials {
    /// S3 and S3-compatible servers.
    Aws {
        access_key_id: String,
        secret_access_key: String,
        session_token: Option<String>,
    },
    /// A Google service account key (its JSON).
    Gcs { service_account_key: String },
    /// An Azure storage account key or SAS token; the account may also come from the
    /// parameters.
    Azure {
        account: Option<String>,
        key: AzureKey,
    },
    /// A GitHub token allowed to upload release assets.
    GitHub { token: String },
}

/// How an Azure request is authorised.
#[derive(Clone)]
pub enum AzureKey {
    /// The storage account key.
    AccessKey(String),
    /// A shared access signature (query string, without the leading `?`).
    Sas(String),
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let service = match self {
            Self::Aws { .. } => "Aws",
            Self::Gcs { .. } => "Gcs",
            Self::Azure { .. } => "Azure",
            Self::GitHub { .. } => "GitHub",
        };
        write!(f, "Credentials::{service} {{ <redacted> }}")
    }
}

/// The account and key of an Azure connection string
/// (`AccountName=...;AccountKey=...` or `...;SharedAccessSignature=...`).
fn azure_connection_string(text: &str) -> Option<(Option<String>, AzureKey)> {
    let field = |name: &str| {
        text.split(';').find_map(|part| {
            let (key, value) = part.split_once('=')?;
            (key.trim() == name).then(|| value.trim().to_owned())
        })
    };
    let key = match (field("AccountKey"), field("SharedAccessSignature")) {
        (Some(key), _) => AzureKey::AccessKey(key),
        (None, Some(sas)) => AzureKey::Sas(sas),
        (None, None) => return None,
    };
    Some((field("AccountName"), key))
}

/// The keys of `profile` in an AWS shared credentials file (`~/.aws/credentials`):
/// `(access key id, secret access key, session token)`.
pub fn aws_profile_keys(file: &str, profile: &str) -> Option<(String, String, Option<String>)> {
    let mut in_profile = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in file.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            in_profile = name.trim() == profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !in_profile {
            continue;
        }
        let value = Some(value.trim().to_owned());
        match key.trim() {
            "aws_access_key_id" => id = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    Some((id?, secret?, token))
}

/// The names credentials are looked up by, per service: the environment variables each
/// cloud's own tools read, and the keys of an operator Secret (required ones first).
pub fn credential_names(service: Service) -> Vec<&'static str> {
    perfsweep_benchmarks::execution::output::credential_names(service.scheme())
        .map(|(required, optional)| required.iter().chain(optional).copied().collect())
        .unwrap_or_default()
}

impl Credentials {
    /// The credentials for `service` by name ([`credential_names`]); `lookup` is the
    /// environment (CLI) or a Secret's data (operator). `source` says where, for the
    /// message when some are missing.
    pub fn from_lookup(
        service: Service,
        lookup: impl Fn(&str) -> Option<String>,
        source: &str,
    ) -> anyhow::Result<Self> {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let missing = |names: &str| {
            anyhow::anyhow!(
                "{} export needs credentials: set {names} in {source}",
                service.scheme()
            )
        };
        match service {
            Service::S3 => match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
                (Some(access_key_id), Some(secret_access_key)) => Ok(Self::Aws {
                    access_key_id,
                    secret_access_key,
                    session_token: get("AWS_SESSION_TOKEN"),
                }),
                _ => match get("AWS_PROFILE") {
                    Some(profile) => Err(anyhow::anyhow!(
                        "s3 export names the AWS profile {profile:?}, whose keys are not in \
                         {source}: put AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY there (the \
                         command line reads a profile from ~/.aws/credentials or \
                         AWS_SHARED_CREDENTIALS_FILE)"
                    )),
                    None => Err(missing("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")),
                },
            },
            Service::Gcs => get("GOOGLE_SERVICE_ACCOUNT_KEY")
                .map(|service_account_key| Self::Gcs {
                    service_account_key,
                })
                .ok_or_else(|| {
                    missing("GOOGLE_SERVICE_ACCOUNT_KEY (a service account key's JSON)")
                }),
            Service::Azure => {
                let account = get("AZURE_STORAGE_ACCOUNT_NAME");
                if let Some(key) = get("AZURE_STORAGE_ACCOUNT_KEY") {
                    return Ok(Self::Azure {
                        account,
                        key: AzureKey::AccessKey(key),
                    });
                }
                if let Some(text) = get("AZURE_STORAGE_CONNECTION_STRING") {
                    let (named, key) = azure_connection_string(&text).ok_or_else(|| {
                        anyhow::anyhow!(
                            "AZURE_STORAGE_CONNECTION_STRING in {source} has neither \
                             AccountKey nor SharedAccessSignature"
                        )
                    })?;
                    return Ok(Self::Azure {
                        account: named.or(account),
                        key,
                    });
                }
                get("AZURE_STORAGE_SAS_TOKEN")
                    .map(|sas| Self::Azure {
                        account,
                        key: AzureKey::Sas(sas.trim_start_matches('?').to_owned()),
                    })
                    .ok_or_else(|| {
                        missing(
                            "AZURE_STORAGE_ACCOUNT_KEY, AZURE_STORAGE_CONNECTION_STRING or \
                             AZURE_STORAGE_SAS_TOKEN",
                        )
                    })
            }
        }
    }

    /// A GitHub token (`GITHUB_TOKEN`) from `lookup`.
    pub fn github_from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
        source: &str,
    ) -> anyhow::Result<Self> {
        lookup("GITHUB_TOKEN")
            .filter(|t| !t.trim().is_empty())
            .map(|token| Self::GitHub { token })
            .ok_or_else(|| {
                anyhow::anyhow!("github export needs credentials: set GITHUB_TOKEN in {source}")
            })
    }

    /// The command line's credentials: `given` (credentials a document carried inline,
    /// moved out of its spec), then the environment. A file named by
    /// GOOGLE_APPLICATION_CREDENTIALS is read for gs://, and an AWS_PROFILE's keys from
    /// AWS_SHARED_CREDENTIALS_FILE (default `~/.aws/credentials`) for s3://.
    pub fn local_lookup(given: &BTreeMap<String, String>) -> impl Fn(&str) -> Option<String> + '_ {
        let plain = move |name: &str| {
            given
                .get(name)
                .cloned()
                .or_else(|| std::env::var(name).ok())
                .filter(|v| !v.trim().is_empty())
        };
        move |name: &str| {
            if let Some(value) = plain(name) {
                return Some(value);
            }
            match name {
                "GOOGLE_SERVICE_ACCOUNT_KEY" => {
                    std::fs::read_to_string(plain("GOOGLE_APPLICATION_CREDENTIALS")?).ok()
                }
                "AWS_ACCESS_KEY_ID" | "AWS_SECRET_ACCESS_KEY" | "AWS_SESSION_TOKEN" => {
                    let profile = plain("AWS_PROFILE")?;
                    let file = plain("AWS_SHARED_CREDENTIALS_FILE").or_else(|| {
                        std::env::var("HOME")
                            .ok()
                            .map(|home| format!("{home}/.aws/credentials"))
                    })?;
                    let (id, secret, token) =
                        aws_profile_keys(&std::fs::read_to_string(file).ok()?, &profile)?;
                    match name {
                        "AWS_ACCESS_KEY_ID" => Some(id),
                        "AWS_SECRET_ACCESS_KEY" => Some(secret),
                        _ => token,
                    }
                }
                _ => None,
            }
        }
    }

    /// The CLI's credentials: its environment (see [`Credentials::local_lookup`]).
    pub fn from_env(service: Service) -> anyhow::Result<Self> {
        let none = BTreeMap::new();
        Self::from_lookup(service, Self::local_lookup(&none), "the environment")
    }
}

/// Opens a store for the CLI: credentials from the environment; `pvc://` refused, since
/// a claim is only reachable where it is mounted.
pub fn open_for_cli(destination: Destination, retry: &Retry) -> anyhow::Result<Store> {
    match destination {
        Destination::Claim { claim, .. } => anyhow::bail!(
            "pvc://{claim}/... is an in-cluster destination (a PersistentVolumeClaim is only \
             reachable where it is mounted); from the command line export to file:///path \
             or to object storage"
        ),
        Destination::Bucket(BucketLocation {
            secret_name: Some(_),
            ..
        }) => anyhow::bail!(
            "the export parameter secretName is for the operator; the command line \
             reads credentials from its environment (e.g. AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY)"
        ),
        other => open_local(other, &BTreeMap::new(), None, retry),
    }
}

/// Where `perfsweep run --local` writes a `pvc://claim/path` export: the directory
/// `$PERFSWEEP_PVC_ROOT/claim/path` (default root `perfsweep-pvc` in the current
/// directory), standing in for the claim.
pub fn local_claim_dir(claim: &str, path: &str) -> PathBuf {
    let root = std::env::var_os("PERFSWEEP_PVC_ROOT")
        .map_or_else(|| PathBuf::from("perfsweep-pvc"), PathBuf::from);
    root.join(claim).join(path)
}

/// Opens a store on this machine with credentials from `given`, then the environment;
/// `pvc://` is the directory [`local_claim_dir`]. `secret` names the Secret the spec
/// refers to (for messages: its data is not reachable from here unless given).
pub fn open_local(
    destination: Destination,
    given: &BTreeMap<String, String>,
    secret: Option<&str>,
    retry: &Retry,
) -> anyhow::Result<Store> {
    let source = match secret {
        Some(secret) if given.is_empty() => format!(
            "the environment (Secret {secret} is in the cluster; locally the same names are \
             read from the environment)"
        ),
        _ => "the environment".to_owned(),
    };
    match destination {
        Destination::Directory(root) => Store::directory(&root),
        Destination::Claim { claim, path, .. } => Store::directory(&local_claim_dir(&claim, &path)),
        Destination::Bucket(location) => {
            let lookup = Credentials::local_lookup(given);
            let credentials = Credentials::from_lookup(location.service, lookup, &source)?;
            Store::bucket(&location, &credentials, retry)
        }
        Destination::GitHub(release) => {
            let lookup = Credentials::local_lookup(given);
            let credentials = Credentials::github_from_lookup(lookup, &source)?;
            Store::github(release, &credentials, retry)
        }
    }
}

/// Bounded exponential backoff of the requests to an object store (object_store's
/// `RetryConfig`: server errors, throttling and connection failures are retried).
#[derive(Clone, Debug)]
pub struct Retry {
    /// Attempts per request, the first included.
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
    /// Requests that failed and were retried (0 when everything went through at once).
    pub retries: u32,
}

/// One object to write.
pub struct Object {
    pub key: String,
    pub body: Bytes,
}

/// The objects of one export: per run id, the evidence files (checked against their
/// digests), then `<name>.jsonl` and `<name>.parquet` with the records.
pub fn objects(
    records: &[ResultRecord],
    evidence: &BTreeMap<String, Bytes>,
    name: &str,
) -> anyhow::Result<Vec<Object>> {
    let mut runs: BTreeMap<&str, Vec<ResultRecord>> = BTreeMap::new();
    for record in records {
        runs.entry(record.run_id.as_str())
            .or_default()
            .push(record.clone());
    }
    let mut objects = Vec::new();
    for (run_id, records) in runs {
        let mut items: Vec<&Evidence> =
            records.iter().filter_map(|r| r.evidence.as_ref()).collect();
        items.sort_by(|a, b| a.path.cmp(&b.path));
        items.dedup_by(|a, b| a.path == b.path);
        for item in items {
            // Evidence too large to keep (the operator's ConfigMap limit) has only its
            // digest; the record says so, and there is no file to upload.
            let Some(body) = evidence.get(&item.sha256) else {
                continue;
            };
            let actual = sha256_hex(body);
            if actual != item.sha256 {
                anyhow::bail!(
                    "evidence {} has SHA-256 {actual}, its record says {}: not exporting it",
                    item.path,
                    item.sha256
                );
            }
            objects.push(Object {
                key: format!("{run_id}/evidence/{}.txt", item.sha256),
                body: body.clone(),
            });
        }
        objects.push(Object {
            key: format!("{run_id}/{name}.jsonl"),
            body: Bytes::from(format::json_lines(&records)?),
        });
        objects.push(Object {
            key: format!("{run_id}/{name}.parquet"),
            body: Bytes::from(format::parquet(&records)?),
        });
    }
    Ok(objects)
}

/// Writes `objects` in order, stopping at the first that fails for good (after the
/// store's own retries). Each failed request is logged, and with `tell` also printed
/// (the command line has no log subscriber).
pub async fn write(store: &Store, objects: &[Object], tell: bool) -> anyhow::Result<Report> {
    let mut report = Report::default();
    for object in objects {
        let outcome = store.put(&object.key, object.body.clone()).await;
        let failures = store.take_failures();
        for (index, failure) in failures.iter().enumerate() {
            tracing::warn!(key = %object.key, %failure, "export request failed");
            if tell {
                eprintln!(
                    "  export: {}: attempt {}/{} failed ({failure})",
                    object.key,
                    index + 1,
                    store.attempts()
                );
            }
        }
        let failed = u32::try_from(failures.len()).unwrap_or(u32::MAX);
        if let Err(error) = outcome {
            anyhow::bail!(
                "cannot export {} to {} (attempt {} of {}): {error}",
                object.key,
                store.location(),
                failed.max(1),
                store.attempts()
            );
        }
        report.retries += failed;
        report.objects += 1;
        report.bytes += object.body.len() as u64;
    }
    Ok(report)
}

/// Exports the results directory `dir` (as `perfsweep run --output` writes it: one
/// `*.json` record per run and `evidence/`).
pub async fn export_dir(dir: &Path, store: &Store) -> anyhow::Result<Report> {
    let records = read_records(dir)?;
    let mut evidence = BTreeMap::new();
    for item in records.iter().filter_map(|r| r.evidence.as_ref()) {
        let path = dir.join(&item.path);
        let body = std::fs::read(&path)
            .with_context(|| format!("cannot read evidence {}", path.display()))?;
        evidence.insert(item.sha256.clone(), Bytes::from(body));
    }
    write(store, &objects(&records, &evidence, "records")?, true).await
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
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn bucket(uri: &str, p: &[(&str, &str)]) -> BucketLocation {
        match parse(uri, &params(p)) {
            Ok(Destination::Bucket(location)) => location,
            other => panic!("{uri}: {other:?}"),
        }
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
                namespace: None,
                claim: "results".into(),
                path: "perf/a".into()
            }
        );
        let aws = bucket("s3://bench/nightly/", &[]);
        assert_eq!(
            (aws.service, aws.bucket.as_str(), aws.prefix.as_str()),
            (Service::S3, "bench", "nightly")
        );
        let minio = bucket(
            "s3://bench",
            &[
                ("endpoint", "http://127.0.0.1:9000"),
                ("region", "eu-1"),
                ("secretName", "s3-creds"),
            ],
        );
        assert_eq!(minio.endpoint.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(minio.region.as_deref(), Some("eu-1"));
        assert_eq!(minio.secret_name.as_deref(), Some("s3-creds"));
        assert_eq!(minio.prefix, "");
        let gcs = bucket("gs://b/p/q", &[]);
        assert_eq!((gcs.service, gcs.prefix.as_str()), (Service::Gcs, "p/q"));
        let azure = bucket("az://results/x", &[("account", "perfacct")]);
        assert_eq!(
            (azure.service, azure.account.as_deref()),
            (Service::Azure, Some("perfacct"))
        );
    }

    /// Every `storageUri` format of OME's BenchmarkJob, as OME's documentation writes it.
    #[test]
    fn omes_storage_uri_formats_parse() {
        let oci = bucket(
            "oci://n/idqj093njucb/b/ome-benchmark-results/o/llama-3-1-70b-benchmark",
            &[("region", "us-phoenix-1")],
        );
        assert_eq!(
            (oci.service, oci.bucket.as_str(), oci.prefix.as_str()),
            (
                Service::S3,
                "ome-benchmark-results",
                "llama-3-1-70b-benchmark"
            )
        );
        assert_eq!(
            oci.endpoint.as_deref(),
            Some("https://idqj093njucb.compat.objectstorage.us-phoenix-1.oraclecloud.com")
        );
        let no_region = parse("oci://n/ns/b/bkt/o/p", &params(&[])).expect_err("no region");
        assert!(
            no_region.to_string().contains("parameters.region"),
            "{no_region}"
        );
        let s3 = bucket("s3://my-benchmarks@us-east-1/experiments/2024", &[]);
        assert_eq!(
            (s3.bucket.as_str(), s3.region.as_deref(), s3.prefix.as_str()),
            ("my-benchmarks", Some("us-east-1"), "experiments/2024")
        );
        for uri in [
            "az://myaccount/mycontainer/path/to/results",
            "az://myaccount.blob.core.windows.net/mycontainer/path/to/results",
        ] {
            let azure = bucket(uri, &[]);
            assert_eq!(
                (
                    azure.account.as_deref(),
                    azure.bucket.as_str(),
                    azure.prefix.as_str()
                ),
                (Some("myaccount"), "mycontainer", "path/to/results"),
                "{uri}"
            );
        }
        let gcs = bucket("gs://my-bucket/path/to/results", &[]);
        assert_eq!(
            (gcs.service, gcs.bucket.as_str()),
            (Service::Gcs, "my-bucket")
        );
        match parse("github://myorg/myrepo@v1.0.0", &params(&[])).expect("github") {
            Destination::GitHub(release) => assert_eq!(
                (
                    release.owner.as_str(),
                    release.repo.as_str(),
                    release.tag.as_deref()
                ),
                ("myorg", "myrepo", Some("v1.0.0"))
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse("pvc://default:my-pvc/results", &params(&[])).expect("pvc"),
            Destination::Claim {
                namespace: Some("default".into()),
                claim: "my-pvc".into(),
                path: "results".into()
            }
        );
        assert!(parse("pvc://c/../x", &params(&[])).is_err());
    }

    #[test]
    fn profiles_connection_strings_and_sas_tokens_are_credentials_too() {
        let file = "[default]\naws_access_key_id = A\naws_secret_access_key = B\n\n\
                    [production]\naws_access_key_id=PRODID\naws_secret_access_key=PRODKEY\n";
        assert_eq!(
            aws_profile_keys(file, "production"),
            Some(("PRODID".into(), "PRODKEY".into(), None))
        );
        assert_eq!(aws_profile_keys(file, "missing"), None);
        let profile_only = Credentials::from_lookup(
            Service::S3,
            |name| (name == "AWS_PROFILE").then(|| "production".to_owned()),
            "Secret s",
        )
        .expect_err("a profile alone is no key");
        assert!(
            profile_only.to_string().contains("production"),
            "{profile_only}"
        );
        let connection = "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=a2V5;EndpointSuffix=core.windows.net";
        match Credentials::from_lookup(
            Service::Azure,
            |name| (name == "AZURE_STORAGE_CONNECTION_STRING").then(|| connection.to_owned()),
            "Secret s",
        ) {
            Ok(Credentials::Azure {
                account: Some(account),
                key: AzureKey::AccessKey(key),
            }) => assert_eq!((account.as_str(), key.as_str()), ("acct", "a2V5")),
            other => panic!("{other:?}"),
        }
        match Credentials::from_lookup(
            Service::Azure,
            |name| (name == "AZURE_STORAGE_SAS_TOKEN").then(|| "?sv=2024&sig=x".to_owned()),
            "Secret s",
        ) {
            Ok(Credentials::Azure {
                key: AzureKey::Sas(sas),
                ..
            }) => assert_eq!(sas, "sv=2024&sig=x"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unsupported_or_malformed_destinations_are_explained() {
        let error =
            |uri: &str, p: &[(&str, &str)]| parse(uri, &params(p)).expect_err(uri).to_string();
        assert!(error("ftp://x", &[]).contains("unsupported export scheme"));
        assert!(error("results/", &[]).contains("not a URI"));
        assert!(error("file://relative", &[]).contains("absolute path"));
        assert!(error("s3:///p", &[]).contains("no bucket"));
        assert!(error("s3://b", &[("endpont", "x")]).contains("unknown export parameter"));
        assert!(error("s3://b", &[("account", "x")]).contains("takes no parameter"));
        assert!(error("gs://b", &[("region", "x")]).contains("takes no parameter"));
        assert!(error("s3://b", &[("endpoint", "ftp://h")]).contains("http:// or https://"));
        let leaked = error("s3://b", &[("endpoint", "http://id:pw@h:9000")]);
        assert!(leaked.contains("must not contain credentials") && !leaked.contains("pw"));
        assert!(error("file:///x", &[("region", "r")]).contains("takes no parameter"));
        let cli = open_for_cli(
            parse("pvc://claim/x", &params(&[])).expect("pvc"),
            &Retry::default(),
        );
        assert!(cli.expect_err("refused").to_string().contains("in-cluster"));
    }

    #[test]
    fn credentials_are_looked_up_by_the_cloud_tools_names_and_never_shown() {
        let secret: BTreeMap<&str, &str> = [
            ("AWS_ACCESS_KEY_ID", "AKIDVISIBLE"),
            ("AWS_SECRET_ACCESS_KEY", "very-secret-key"),
            ("AWS_SESSION_TOKEN", "session-token-value"),
        ]
        .into();
        let lookup = |name: &str| secret.get(name).map(|v| (*v).to_owned());
        let credentials = Credentials::from_lookup(Service::S3, lookup, "Secret s").expect("s3");
        let store = Store::bucket(&bucket("s3://b/p", &[]), &credentials, &Retry::default())
            .expect("store");
        for text in [format!("{credentials:?}"), format!("{store:?}")] {
            for secret in ["AKIDVISIBLE", "very-secret-key", "session-token-value"] {
                assert!(!text.contains(secret), "{text}");
            }
        }
        let missing = Credentials::from_lookup(Service::Azure, lookup, "Secret s")
            .expect_err("no Azure key")
            .to_string();
        assert!(
            missing.contains("AZURE_STORAGE_ACCOUNT_KEY") && missing.contains("Secret s"),
            "{missing}"
        );
    }

    fn record(run: &str, sha: Option<&str>) -> ResultRecord {
        let mut value = serde_json::json!({
            "schemaVersion": "perfsweep.io/result/v1alpha1", "runId": run,
            "benchmark": {"kind": "IPerf", "name": "a"}, "workloadSpecDigest": "d",
            "spec": {}, "backend": "local", "environment": {"perfsweepVersion": "0"},
            "startedAt": "", "finishedAt": "",
            "outcome": {"status": "failed", "reason": "R", "message": "m"}
        });
        if let Some(sha) = sha {
            value["evidence"] = serde_json::json!({"sha256": sha, "bytes": 3, "path": format!("evidence/{sha}.txt")});
        }
        serde_json::from_value(value).expect("record")
    }

    #[test]
    fn objects_put_evidence_first_and_refuse_evidence_that_does_not_match_its_digest() {
        let body = Bytes::from_static(b"raw");
        let sha = sha256_hex(&body);
        let evidence = BTreeMap::from([(sha.clone(), body)]);
        let objects = objects(
            &[record("r1", Some(&sha)), record("r2", None)],
            &evidence,
            "bench",
        )
        .expect("objects");
        let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
        let evidence_key = format!("r1/evidence/{sha}.txt");
        assert_eq!(
            keys,
            [
                evidence_key.as_str(),
                "r1/bench.jsonl",
                "r1/bench.parquet",
                "r2/bench.jsonl",
                "r2/bench.parquet"
            ]
        );
        let tampered = BTreeMap::from([(sha.clone(), Bytes::from_static(b"changed"))]);
        let error = super::objects(&[record("r1", Some(&sha))], &tampered, "x")
            .err()
            .expect("a digest mismatch");
        assert!(error.to_string().contains("not exporting it"), "{error}");
    }

    #[tokio::test]
    async fn a_directory_store_writes_objects_under_its_root() {
        let root =
            std::env::temp_dir().join(format!("perfsweep-export-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let store = Store::directory(&root).expect("directory store");
        let report = write(
            &store,
            &[Object {
                key: "run/a.jsonl".into(),
                body: Bytes::from_static(b"{}\n"),
            }],
            false,
        )
        .await
        .expect("written");
        assert_eq!((report.objects, report.bytes, report.retries), (1, 3, 0));
        assert_eq!(
            std::fs::read_to_string(root.join("run/a.jsonl")).expect("file"),
            "{}\n"
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
