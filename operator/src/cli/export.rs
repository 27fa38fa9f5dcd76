//! `--export URI` (on `perfsweep run`) and `perfsweep results upload`: copy a results
//! directory to an export sink. The directory is written first and kept whatever
//! happens, so a failed upload loses nothing and can be repeated.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;

use crate::export::{self, Retry};
use perfsweep_benchmarks::execution::output::{self, OutputLocation};

#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// Also export the records (JSON Lines and Parquet) and raw evidence to URI:
    /// `s3://bucket[@region]/prefix`, `gs://bucket/prefix`, `az://account/container/prefix`,
    /// `oci://n/NS/b/BUCKET/o/prefix`, `github://owner/repo[@tag]` or `file:///dir` (see
    /// docs/results.md and docs/ome.md). Without it, `run --local` uses the benchmarks'
    /// own outputLocation. Credentials come from the environment: AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), GOOGLE_SERVICE_ACCOUNT_KEY (or
    /// GOOGLE_APPLICATION_CREDENTIALS), AZURE_STORAGE_ACCOUNT_KEY (or a connection string
    /// or SAS token), GITHUB_TOKEN.
    #[arg(long, value_name = "URI")]
    pub export: Option<String>,
    /// A parameter of the export location, KEY=VALUE (repeatable): `endpoint` (an
    /// S3-compatible server, e.g. http://127.0.0.1:9000), `region`, or `account`
    /// (Azure storage account).
    #[arg(long = "export-param", value_name = "KEY=VALUE", value_parser = key_value)]
    pub export_params: Vec<(String, String)>,
    /// Attempts per request before the export gives up (exponential backoff between them).
    #[arg(long, value_name = "N", default_value_t = Retry::default().attempts,
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub export_attempts: u32,
}

pub fn key_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.into(), value.into())),
        _ => Err(format!("expected KEY=VALUE, got {text:?}")),
    }
}

impl ExportArgs {
    /// Checks the destination before anything runs, so a typo in the URI or missing
    /// credentials fail fast rather than after an hour of benchmarks.
    pub fn open(&self) -> anyhow::Result<Option<export::Store>> {
        let Some(uri) = &self.export else {
            return Ok(None);
        };
        let parameters: BTreeMap<String, String> = self.export_params.iter().cloned().collect();
        let destination = export::parse(uri, &parameters)?;
        export::open_for_cli(destination, &self.retry()).map(Some)
    }

    pub fn retry(&self) -> Retry {
        Retry {
            attempts: self.export_attempts,
            ..Retry::default()
        }
    }
}

/// Exports `dir` to `sink`; on failure says where the results are and how to retry.
/// Returns whether the export succeeded.
pub async fn export(dir: &Path, sink: &export::Store, args: &ExportArgs) -> bool {
    eprintln!("exporting {} to {} ...", dir.display(), sink.location());
    match export::export_dir(dir, sink).await {
        Ok(report) => {
            eprintln!(
                "exported {} object(s), {} bytes, to {}{}",
                report.objects,
                report.bytes,
                sink.location(),
                if report.retries > 0 {
                    format!(" ({} retried attempt(s))", report.retries)
                } else {
                    String::new()
                }
            );
            true
        }
        Err(error) => {
            eprintln!("error: export failed: {error:#}");
            eprintln!(
                "the results are kept in {}; export them again with: perfsweep results upload {} --export {}{}",
                dir.display(),
                dir.display(),
                args.export.as_deref().unwrap_or_default(),
                args.export_params
                    .iter()
                    .map(|(k, v)| format!(" --export-param {k}={v}"))
                    .collect::<String>()
            );
            false
        }
    }
}

/// `perfsweep results upload DIR --export URI`.
pub async fn upload(dir: &Path, args: &ExportArgs) -> anyhow::Result<std::process::ExitCode> {
    let sink = args
        .open()?
        .context("results upload needs --export URI (where to upload to) or --warehouse LOCATION (which warehouse to load into)")?;
    Ok(if export(dir, &sink, args).await {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    })
}

/// The data of the Secrets a document's inline credentials moved into (for local runs,
/// which use them directly instead of creating the Secret).
pub fn secret_data(secrets: &[serde_json::Value]) -> BTreeMap<String, String> {
    secrets
        .iter()
        .filter_map(|secret| secret.get("stringData")?.as_object())
        .flatten()
        .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_owned())))
        .collect()
}

/// The export sink of a local run without `--export`: the benchmarks' own
/// `outputLocation` (OME's form), which must be the same for all that name one.
/// Credentials: those a document carried inline, then the environment.
pub fn from_specs<'a>(
    jobs: impl Iterator<Item = (&'a serde_json::Value, &'a BTreeMap<String, String>)>,
    args: &ExportArgs,
) -> anyhow::Result<Option<export::Store>> {
    let mut chosen: Option<(OutputLocation, &BTreeMap<String, String>)> = None;
    for (spec, credentials) in jobs {
        let Some(value) = spec.get(output::FIELD).filter(|v| !v.is_null()) else {
            continue;
        };
        let location: OutputLocation = serde_json::from_value(value.clone())
            .context("spec.outputLocation is not an output location")?;
        match &chosen {
            None => chosen = Some((location, credentials)),
            Some((first, _)) if *first == location => {}
            Some((first, _)) => anyhow::bail!(
                "the benchmarks export to different places ({} and {}): run them separately, \
                 or pass --export to send all to one",
                first.storage_uri,
                location.storage_uri
            ),
        }
    }
    let Some((location, credentials)) = chosen else {
        return Ok(None);
    };
    let mut parameters = location.parameters.clone();
    parameters.remove("secretName");
    let destination = export::parse(&location.storage_uri, &parameters)
        .with_context(|| format!("spec.outputLocation {}", location.storage_uri))?;
    eprintln!("exporting to spec.outputLocation {}", location.storage_uri);
    export::open_local(destination, credentials, location.secret(), &args.retry()).map(Some)
}
