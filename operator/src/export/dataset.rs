//! Datasets the LLM load generator reads from object storage (`--dataset
//! s3://bucket/path/to/file`), through the same stores and credentials as `--export`:
//! the [`ObjectReader`] perfsweep-llm asks its host for.

use std::collections::BTreeMap;

use anyhow::bail;
use perfsweep_llm::loadgen::hooks::{BoxFuture, ObjectReader};

use super::Retry;

/// Reads one object through an export store.
pub struct ExportObjects;

impl ObjectReader for ExportObjects {
    fn read<'a>(
        &'a self,
        location: &'a str,
        parameters: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<u8>>> {
        Box::pin(read(location, parameters))
    }
}

/// The object at `location` (`scheme://bucket/prefix/name`): a store opened on
/// `scheme://bucket/prefix` with the export `parameters`, asked for `name`.
async fn read(location: &str, parameters: &BTreeMap<String, String>) -> anyhow::Result<Vec<u8>> {
    let (scheme, rest) = location.split_once("://").unwrap_or(("", location));
    let Some((bucket_and_prefix, name)) = rest
        .rsplit_once('/')
        .filter(|(b, n)| !b.is_empty() && !n.is_empty())
    else {
        bail!("expected {scheme}://bucket/path/to/file");
    };
    let destination = super::parse(&format!("{scheme}://{bucket_and_prefix}"), parameters)?;
    let store = super::open_for_cli(destination, &Retry::default())?;
    Ok(store.get(name).await?.to_vec())
}
