//! Reading exported records back (`perfsweep results list/show/... s3://bucket/prefix`):
//! every `*.jsonl` object under the location's prefix, one record per line.

use std::collections::BTreeMap;

use anyhow::Context;
use perfsweep_benchmarks::results::record::ResultRecord;

use super::{Destination, Retry, Store};

/// Whether a results argument names an export location rather than a local path.
pub fn is_location(argument: &str) -> bool {
    ["s3://", "gs://", "az://", "file://", "pvc://"]
        .iter()
        .any(|scheme| argument.starts_with(scheme))
}

/// The records at `uri` (credentials from the environment, as for `--export`).
pub async fn load(
    uri: &str,
    parameters: &BTreeMap<String, String>,
) -> anyhow::Result<Vec<ResultRecord>> {
    let destination = super::parse(uri, parameters)?;
    let store = super::open_for_cli(destination.clone(), &Retry::default())?;
    let records = load_from(&store).await?;
    if records.is_empty() {
        let hint = match destination {
            Destination::Directory(_) => "",
            _ => " (is the prefix right?)",
        };
        anyhow::bail!("no result records (*.jsonl) under {uri}{hint}");
    }
    Ok(records)
}

/// Every record in the `*.jsonl` objects of `store`, in key order.
pub async fn load_from(store: &Store) -> anyhow::Result<Vec<ResultRecord>> {
    let mut records = Vec::new();
    for name in store.list().await? {
        if !std::path::Path::new(&name)
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("jsonl"))
        {
            continue;
        }
        let body = store.get(&name).await?;
        let text = std::str::from_utf8(&body)
            .with_context(|| format!("{}/{name} is not UTF-8", store.location()))?;
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: ResultRecord = serde_json::from_str(line).with_context(|| {
                format!(
                    "{}/{name} line {}: not a result record",
                    store.location(),
                    index + 1
                )
            })?;
            records.push(record);
        }
    }
    Ok(records)
}
