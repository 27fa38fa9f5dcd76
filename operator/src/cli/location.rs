//! Where results and warehouses are read and written: a local directory, or an export location (`s3://bucket/prefix`,
//! `gs://…`, `az://…`, `file:///dir`) that the commands work on through a local mirror
//! (`export::mirror`): pulled before, pushed after a command that writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::export::mirror::{Mirror, Moved};
use crate::export::{self, Destination, Retry};

/// How to reach object-store locations, from the warehouse command's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct LocationArgs {
    /// Where a warehouse or source argument is an export location (`s3://bucket/prefix`,
    /// `gs://...`, `az://...`, `file:///dir`): one of its parameters, KEY=VALUE
    /// (repeatable), e.g. `endpoint=http://127.0.0.1:9000`. Credentials come from the
    /// environment, as for `--export`.
    #[arg(long = "location-param", global = true, value_name = "KEY=VALUE",
          value_parser = crate::cli::export::key_value)]
    pub params: Vec<(String, String)>,
    /// Where object-store locations are mirrored (default: $XDG_CACHE_HOME or
    /// ~/.cache, under perfsweep/warehouse). Digest-named objects are fetched once.
    #[arg(
        long,
        global = true,
        env = "PERFSWEEP_WAREHOUSE_CACHE",
        value_name = "DIR"
    )]
    pub cache_dir: Option<PathBuf>,
}

/// A location opened for one command.
pub struct Opened {
    dir: PathBuf,
    // Pushed back only by the warehouse's writing commands.
    #[cfg_attr(not(feature = "warehouse"), allow(dead_code))]
    mirror: Option<Mirror>,
}

impl Opened {
    /// The directory the command works in: the location itself, or its mirror.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sends what the command wrote back to an object-store location (nothing to do for
    /// a directory). The run rows go last: a reader sees a run once all its rows are there.
    #[cfg_attr(not(feature = "warehouse"), allow(dead_code))]
    pub async fn push(&self) -> anyhow::Result<()> {
        let Some(mirror) = &self.mirror else {
            return Ok(());
        };
        let moved = mirror
            .push(|name| name.starts_with("benchmark_run_fact/"))
            .await?;
        eprintln!(
            "pushed to {}: {} object(s) uploaded ({} bytes), {} deleted",
            mirror.location(),
            moved.uploaded,
            moved.bytes,
            moved.deleted
        );
        Ok(())
    }
}

impl LocationArgs {
    /// For commands other than `warehouse` (`results upload --warehouse`): their own
    /// location parameters, the cache from the environment.
    pub fn with_params(params: Vec<(String, String)>) -> Self {
        Self {
            params,
            cache_dir: std::env::var_os("PERFSWEEP_WAREHOUSE_CACHE").map(PathBuf::from),
        }
    }

    /// Opens `argument`: a path as it is, an export location through its mirror.
    pub async fn open(&self, argument: &Path) -> anyhow::Result<Opened> {
        let Some(uri) = argument
            .to_str()
            .filter(|text| export::read::is_location(text))
        else {
            return Ok(Opened {
                dir: argument.to_owned(),
                mirror: None,
            });
        };
        let parameters: BTreeMap<String, String> = self.params.iter().cloned().collect();
        let destination = export::parse(uri, &parameters)?;
        if let Destination::Directory(dir) = &destination {
            return Ok(Opened {
                dir: dir.clone(),
                mirror: None,
            });
        }
        let store = export::open_for_cli(destination, &Retry::default())?;
        let cache = self.cache_root().join(cache_name(uri, &parameters));
        let (mirror, moved) = Mirror::pull(store, cache.clone()).await?;
        report_pull(uri, &cache, &moved);
        Ok(Opened {
            dir: cache,
            mirror: Some(mirror),
        })
    }

    fn cache_root(&self) -> PathBuf {
        if let Some(dir) = &self.cache_dir {
            return dir.clone();
        }
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("perfsweep").join("warehouse")
    }
}

/// One cache directory per location and endpoint: the same bucket name on two servers
/// is two locations.
fn cache_name(uri: &str, parameters: &BTreeMap<String, String>) -> String {
    let endpoint = parameters.get("endpoint").map_or("", String::as_str);
    let digest =
        perfsweep_benchmarks::formats::digest::sha256_hex(&serde_json::json!([uri, endpoint]));
    digest[..16].to_owned()
}

fn report_pull(uri: &str, cache: &Path, moved: &Moved) {
    eprintln!(
        "mirrored {uri} in {}: {} object(s) fetched ({} bytes), {} already cached",
        cache.display(),
        moved.fetched,
        moved.bytes,
        moved.cached
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_tells_locations_and_endpoints_apart() {
        let none = BTreeMap::new();
        let here: BTreeMap<String, String> =
            [("endpoint".to_owned(), "http://127.0.0.1:9000".to_owned())].into();
        let names = [
            cache_name("s3://bucket/warehouse", &none),
            cache_name("s3://bucket/warehouse", &here),
            cache_name("s3://bucket/other", &none),
        ];
        assert_ne!(names[0], names[1]);
        assert_ne!(names[0], names[2]);
        assert_eq!(names[0], cache_name("s3://bucket/warehouse", &none));
    }
}
