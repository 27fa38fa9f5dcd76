//! A local copy of an object-store location, for commands that work on a directory (the
//! warehouse's engine reads local Parquet files; a build writes files). [`Mirror::pull`]
//! brings the location's objects into a cache directory; [`Mirror::push`] sends back what
//! the command added or changed and deletes what it removed.
//!
//! Objects whose names are content-addressed (`part-<digest>.parquet`, everything under
//! `raw/`) are fetched once: a cached file under such a name is that object. Others
//! (publications, which a republish rewrites) are fetched on every pull. So a second
//! command on the same location downloads only what is new there.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use anyhow::Context;

use super::Store;

/// What a file looked like after the pull, to tell afterwards what a command changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
}

pub struct Mirror {
    store: Store,
    dir: PathBuf,
    pulled: BTreeMap<String, Stamp>,
}

/// What a pull or a push moved.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Moved {
    pub fetched: usize,
    /// Content-addressed objects the cache held already.
    pub cached: usize,
    pub uploaded: usize,
    pub deleted: usize,
    pub bytes: u64,
}

impl Mirror {
    /// Makes `dir` a copy of what `store` holds: fetches what the cache lacks, removes
    /// what the location no longer has.
    pub async fn pull(store: Store, dir: PathBuf) -> anyhow::Result<(Self, Moved)> {
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create the cache {}", dir.display()))?;
        let mut moved = Moved::default();
        let names: Vec<String> = store
            .list()
            .await?
            .into_iter()
            .filter(|name| !temporary(name))
            .collect();
        for name in &names {
            let local = local_path(&dir, name).with_context(|| {
                format!("{}/{name}: not a name to copy locally", store.location())
            })?;
            if local.is_file() && content_addressed(name) {
                moved.cached += 1;
                continue;
            }
            let body = store.get(name).await?;
            moved.fetched += 1;
            moved.bytes += body.len() as u64;
            write_atomic(&local, &body)?;
        }
        let wanted: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
        for name in files(&dir)?.keys() {
            if !wanted.contains(name.as_str()) {
                let path = dir.join(name);
                std::fs::remove_file(&path)
                    .with_context(|| format!("cannot remove {}", path.display()))?;
            }
        }
        let pulled = files(&dir)?;
        Ok((Self { store, dir, pulled }, moved))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn location(&self) -> &str {
        self.store.location()
    }

    /// Uploads the files added or changed since the pull and deletes the objects whose
    /// files were removed. Names `commit_last` accepts are uploaded after all others, so
    /// that a reader never sees them before what they stand for (a warehouse's run rows
    /// after the rows that hang off them).
    pub async fn push(&self, commit_last: impl Fn(&str) -> bool) -> anyhow::Result<Moved> {
        let now = files(&self.dir)?;
        let mut changed: Vec<&String> = now
            .iter()
            .filter(|(name, stamp)| self.pulled.get(*name) != Some(stamp))
            .map(|(name, _)| name)
            .collect();
        changed.sort_by_key(|name| commit_last(name));
        let mut moved = Moved::default();
        for name in changed {
            let path = self.dir.join(name);
            let body =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            moved.bytes += body.len() as u64;
            self.store.put(name, body.into()).await?;
            moved.uploaded += 1;
        }
        for name in self.pulled.keys().filter(|name| !now.contains_key(*name)) {
            self.store.delete(name).await?;
            moved.deleted += 1;
        }
        Ok(moved)
    }
}

/// Where an object's copy lives, refusing names that would leave the cache (`..`, an
/// absolute path): a location's listing is not to be trusted with the local disk.
fn local_path(dir: &Path, name: &str) -> Option<PathBuf> {
    let relative = Path::new(name);
    let plain = relative
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    (plain && !name.is_empty()).then(|| dir.join(relative))
}

/// Whether an object's name says what it holds, so a cached copy needs no fetch.
fn content_addressed(name: &str) -> bool {
    let file = name.rsplit('/').next().unwrap_or(name);
    name.starts_with("raw/") || (file.starts_with("part-") && file.ends_with(".parquet"))
}

/// A file being written (the `.tmp` of an atomic write): never part of a location.
fn temporary(name: &str) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|extension| extension.eq_ignore_ascii_case("tmp"))
}

/// Every file under `dir` (names relative to it, `/`-separated), but temporary ones.
fn files(dir: &Path) -> anyhow::Result<BTreeMap<String, Stamp>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current)
            .with_context(|| format!("cannot read {}", current.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot read {}", current.display()))?;
            let path = entry.path();
            let metadata = entry
                .metadata()
                .with_context(|| format!("cannot read {}", path.display()))?;
            if metadata.is_dir() {
                pending.push(path);
                continue;
            }
            let Ok(relative) = path.strip_prefix(dir) else {
                continue;
            };
            let name = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            if temporary(&name) {
                continue;
            }
            found.insert(
                name,
                Stamp {
                    len: metadata.len(),
                    modified: metadata.modified().ok(),
                },
            );
        }
    }
    Ok(found)
}

fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, bytes)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("perfsweep-mirror-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn names_that_would_leave_the_cache_are_refused() {
        let dir = Path::new("/cache");
        assert_eq!(
            local_path(dir, "a/part-1.parquet"),
            Some(PathBuf::from("/cache/a/part-1.parquet"))
        );
        for bad in ["../etc/passwd", "/etc/passwd", "a/../../b", "", "./a"] {
            assert_eq!(local_path(dir, bad), None, "{bad}");
        }
    }

    #[test]
    fn only_digest_named_objects_count_as_content_addressed() {
        assert!(content_addressed(
            "benchmark_run_fact/kind=IPerf/date=2026-01-01/part-ab.parquet"
        ));
        assert!(content_addressed("raw/evidence/ff.txt"));
        assert!(!content_addressed("published/p99/publication.json"));
        assert!(!content_addressed("published/p99/rows.parquet"));
    }

    /// A pull copies, a second pull fetches only what is not content-addressed, and a
    /// push sends back exactly what changed, in commit order, and deletes what went.
    #[tokio::test]
    async fn pull_then_push_moves_only_what_changed() {
        let remote = scratch("remote");
        let cache = scratch("cache");
        let put = |name: &str, body: &str| {
            let path = remote.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            std::fs::write(path, body).expect("write");
        };
        put("benchmark_run_fact/part-a.parquet", "run a");
        put("published/p/publication.json", "{}");
        put("raw/evidence/e.txt", "evidence");
        put("half.parquet.tmp", "an interrupted upload");

        let open = || Store::directory(&remote).expect("store");
        let (_, first) = Mirror::pull(open(), cache.clone()).await.expect("pull");
        assert_eq!((first.fetched, first.cached), (3, 0));
        assert!(!cache.join("half.parquet.tmp").exists());

        std::fs::write(cache.join("stale.txt"), "gone from the location").expect("stale");
        let (mirror, second) = Mirror::pull(open(), cache.clone()).await.expect("pull");
        assert_eq!((second.fetched, second.cached), (1, 2));
        assert!(!cache.join("stale.txt").exists(), "the cache mirrors");

        std::fs::create_dir_all(cache.join("serving_outcome_fact")).expect("dir");
        std::fs::write(cache.join("serving_outcome_fact/part-b.parquet"), "x").expect("new");
        std::fs::write(cache.join("benchmark_run_fact/part-c.parquet"), "run c").expect("run");
        std::fs::remove_file(cache.join("raw/evidence/e.txt")).expect("remove");
        let pushed = mirror
            .push(|name| name.starts_with("benchmark_run_fact/"))
            .await
            .expect("push");
        assert_eq!((pushed.uploaded, pushed.deleted), (2, 1));
        assert_eq!(
            std::fs::read_to_string(remote.join("benchmark_run_fact/part-c.parquet"))
                .expect("uploaded"),
            "run c"
        );
        assert!(!remote.join("raw/evidence/e.txt").exists());
        assert_eq!(
            std::fs::read_to_string(remote.join("benchmark_run_fact/part-a.parquet"))
                .expect("untouched"),
            "run a"
        );
        let _ = std::fs::remove_dir_all(&remote);
        let _ = std::fs::remove_dir_all(&cache);
    }
}
