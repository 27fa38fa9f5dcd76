//! What the load generator needs from the program that runs it, passed in rather than
//! built here so that this crate needs neither the operator nor its object-storage
//! stack: the barrier the workers of a distributed run pass together (held by the
//! perfsweep agent) and a reader for datasets in object storage (`s3://`, `gs://`,
//! `az://`, through the operator's export stores).

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// A boxed future that can cross threads (the load generator runs on its own).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The barrier every worker of a distributed run passes before each iteration and at
/// its end (`--sync`).
pub trait Barrier: Send + Sync {
    /// Waits at barrier `name` held at `endpoint` (the `--sync` value) until every
    /// worker has arrived; `worker` is this process's index. An error when the barrier
    /// fails (a worker ended without arriving) or its holder goes away.
    fn wait<'a>(
        &'a self,
        endpoint: &'a str,
        name: &'a str,
        worker: u32,
    ) -> BoxFuture<'a, std::io::Result<()>>;
}

/// The barrier every worker passes at the end of a distributed run.
pub const DONE_BARRIER: &str = "done";

/// The barrier every worker passes before iteration `number`.
pub fn iteration_barrier(number: usize) -> String {
    format!("iteration-{number}")
}

/// Whether `name` is a barrier a distributed run passes ([`DONE_BARRIER`] or
/// [`iteration_barrier`]): the barrier's holder refuses others, so nothing can make it
/// keep state for names no worker will ever use.
pub fn is_barrier_name(name: &str) -> bool {
    name == DONE_BARRIER
        || name
            .strip_prefix("iteration-")
            .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()) && n.parse::<u32>().is_ok())
}

/// Reads one object from object storage.
pub trait ObjectReader: Send + Sync {
    /// The bytes of the object at `location` (`s3://bucket/path/to/file`, `gs://...`,
    /// `az://...`); `parameters` are the `--dataset-param` pairs (`endpoint`, `region`).
    fn read<'a>(
        &'a self,
        location: &'a str,
        parameters: &'a BTreeMap<String, String>,
    ) -> BoxFuture<'a, anyhow::Result<Vec<u8>>>;
}

/// The host program's services a run may use. Missing ones make the runs that need
/// them fail before any request, saying what is missing.
#[derive(Clone, Default)]
pub struct Hooks {
    /// For `--sync` (distributed runs).
    pub barrier: Option<Arc<dyn Barrier>>,
    /// For `--dataset` at an object-storage location.
    pub objects: Option<Arc<dyn ObjectReader>>,
}

impl Hooks {
    /// The barrier, or why a distributed run cannot start without one.
    pub fn barrier(&self) -> anyhow::Result<&dyn Barrier> {
        self.barrier.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "--sync needs the perfsweep agent's barrier client, which this program does \
                 not provide (run the load generator as `perfsweep loadgen`)"
            )
        })
    }

    /// The object reader, or why a dataset in object storage cannot be read.
    pub fn objects(&self) -> anyhow::Result<&dyn ObjectReader> {
        self.objects.as_deref().ok_or_else(|| {
            anyhow::anyhow!(
                "datasets in object storage need perfsweep's export stores, which this \
                 program does not provide (run the load generator as `perfsweep loadgen`)"
            )
        })
    }
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("barrier", &self.barrier.is_some())
            .field("objects", &self.objects.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_hooks_say_what_is_missing() {
        let hooks = Hooks::default();
        let barrier = hooks.barrier().err().map(|e| e.to_string());
        assert!(barrier.is_some_and(|m| m.contains("--sync")));
        let objects = hooks.objects().err().map(|e| e.to_string());
        assert!(objects.is_some_and(|m| m.contains("object storage")));
        assert_eq!(
            format!("{hooks:?}"),
            "Hooks { barrier: false, objects: false }"
        );
    }

    #[test]
    fn only_the_runs_own_barrier_names_are_barrier_names() {
        assert!(is_barrier_name(DONE_BARRIER));
        assert!(is_barrier_name(&iteration_barrier(0)));
        assert!(is_barrier_name(&iteration_barrier(4096)));
        for other in [
            "",
            "iteration-",
            "iteration-x",
            "iteration--1",
            "x",
            "done2",
        ] {
            assert!(!is_barrier_name(other), "{other}");
        }
    }
}
