//! Which benchmark kinds the API server serves, found by discovery and looked at again
//! every so often: a kind whose CustomResourceDefinition is not installed must not stop
//! the others.
//!
//! Helm installs a chart's `crds/` only on first install and never upgrades them, so an
//! operator newer than its CRDs meets kinds the API server does not know (issue 23: with
//! the LLMInference CRD missing, the set controller's watch of LLMInference children
//! failed its first list forever and no child of any kind was created). Watches and
//! controllers of a missing kind wait here until it is served; sets that need it say so
//! (condition [`CRD_CONDITION`], a Warning event), as do the log and
//! `perfsweep_crd_missing` on `/metrics`; they carry on once the CRD is installed, without
//! a restart.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kube::Client;
use perfsweep_benchmarks::registry::{self, KindInfo};
use tokio::sync::watch;

/// The condition on a BenchmarkSet whose children's kind the API server does not serve.
pub const CRD_CONDITION: &str = "CRDInstalled";
/// Its reason while the CRD is missing.
pub const CRD_MISSING: &str = "CRDMissing";

/// How often discovery is asked again, by default.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(30);

/// What discovery said last.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Discovery {
    /// Not asked yet.
    #[default]
    Unknown,
    /// The benchmark kinds the API server does not serve.
    Known(BTreeSet<&'static str>),
}

/// The kinds served, shared by every controller; cheap to read.
pub struct ServedKinds {
    state: watch::Sender<Discovery>,
}

impl Default for ServedKinds {
    fn default() -> Self {
        Self {
            state: watch::channel(Discovery::Unknown).0,
        }
    }
}

impl ServedKinds {
    /// Whether discovery found `kind` not served (false until discovery answered).
    pub fn is_missing(&self, kind: &str) -> bool {
        matches!(&*self.state.borrow(), Discovery::Known(missing) if missing.contains(kind))
    }

    /// The kinds found not served, in name order.
    pub fn missing(&self) -> Vec<&'static str> {
        match &*self.state.borrow() {
            Discovery::Known(missing) => missing.iter().copied().collect(),
            Discovery::Unknown => Vec::new(),
        }
    }

    /// Resolves once discovery has answered.
    pub async fn discovered(&self) {
        let mut rx = self.state.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|d| *d != Discovery::Unknown).await;
    }

    /// Resolves once discovery shows `kind` served.
    pub async fn served(&self, kind: &str) {
        let mut rx = self.state.subscribe();
        let _ = rx
            .wait_for(|d| matches!(d, Discovery::Known(missing) if !missing.contains(kind)))
            .await;
    }

    /// Yields each time the set of missing kinds changes.
    pub fn changes(self: &Arc<Self>) -> impl Stream<Item = ()> + Send + 'static {
        let mut rx = self.state.subscribe();
        rx.mark_unchanged();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }

    /// Records what discovery found; returns (newly missing, newly served) kinds.
    fn record(&self, missing: BTreeSet<&'static str>) -> (Vec<&'static str>, Vec<&'static str>) {
        let before = match &*self.state.borrow() {
            Discovery::Known(before) => before.clone(),
            Discovery::Unknown => BTreeSet::new(),
        };
        let gone = missing.difference(&before).copied().collect();
        let back = before.difference(&missing).copied().collect();
        self.state.send_if_modified(|state| match state {
            Discovery::Known(old) if *old == missing => false,
            _ => {
                *state = Discovery::Known(missing.clone());
                true
            }
        });
        (gone, back)
    }
}

/// The name of a kind's CRD, e.g. `llminferences.perfsweep.io`.
pub fn crd_name(kind: &KindInfo) -> String {
    format!("{}.{}", kind.plural(), perfsweep_benchmarks::GROUP)
}

/// What a set waiting for a kind's CRD says, in its condition and event.
pub fn missing_message(kind: &KindInfo) -> String {
    format!(
        "the API server does not serve {kind} (CustomResourceDefinition {crd} is not installed): no child is created until it is; install the CRDs of this operator's version (kubectl apply --server-side -f the chart's crds/, see docs/upgrading.md)",
        kind = kind.kind,
        crd = crd_name(kind),
    )
}

/// Asks discovery which kinds are served, now and every `every`, until `shutdown`.
pub async fn follow(
    client: Client,
    served: Arc<ServedKinds>,
    every: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let look = async {
        loop {
            match missing_kinds(&client).await {
                Ok(missing) => announce(served.record(missing)),
                Err(error) if *served.state.borrow() == Discovery::Unknown => {
                    // Never worse than not asking: every kind is taken for served (its
                    // watch retries with backoff) and discovery is asked again.
                    tracing::warn!(%error, "cannot discover the served benchmark kinds; assuming all are served");
                    served.record(BTreeSet::new());
                }
                Err(error) => {
                    tracing::debug!(%error, "discovering the served benchmark kinds");
                }
            }
            tokio::time::sleep(every).await;
        }
    };
    tokio::select! {
        () = look => {}
        () = shutdown => {}
    }
}

fn announce((gone, back): (Vec<&'static str>, Vec<&'static str>)) {
    for kind in gone.into_iter().filter_map(registry::lookup) {
        tracing::warn!(
            kind = kind.kind,
            crd = %crd_name(kind),
            "{}",
            missing_message(kind)
        );
    }
    for kind in back.into_iter().filter_map(registry::lookup) {
        tracing::info!(kind = kind.kind, crd = %crd_name(kind), "the API server serves {} now", kind.kind);
    }
}

/// The benchmark kinds the API server does not serve.
async fn missing_kinds(client: &Client) -> Result<BTreeSet<&'static str>, kube::Error> {
    let served: BTreeSet<String> = match client
        .list_api_group_resources(perfsweep_benchmarks::API_VERSION)
        .await
    {
        Ok(list) => list.resources.into_iter().map(|r| r.name).collect(),
        // No CRD of the group at all.
        Err(kube::Error::Api(status)) if status.code == 404 => BTreeSet::new(),
        Err(error) => return Err(error),
    };
    Ok(registry::kinds()
        .iter()
        .filter(|kind| !served.contains(kind.plural()))
        .map(|kind| kind.kind)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn a_kind_waits_until_it_is_served() {
        let served = Arc::new(ServedKinds::default());
        assert!(!served.is_missing("LLMInference"), "unknown is not missing");
        let mut changes = Box::pin(served.changes());
        assert_eq!(
            served.record(BTreeSet::from(["LLMInference"])),
            (vec!["LLMInference"], vec![])
        );
        assert!(served.is_missing("LLMInference"));
        assert!(!served.is_missing("IPerf"));
        served.discovered().await;
        served.served("IPerf").await;
        assert_eq!(changes.next().await, Some(()));
        let waiting = {
            let served = served.clone();
            tokio::spawn(async move { served.served("LLMInference").await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "LLMInference is not served yet");
        assert_eq!(
            served.record(BTreeSet::new()),
            (vec![], vec!["LLMInference"])
        );
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("served once discovery shows it")
            .expect("the waiting task ends");
        assert_eq!(changes.next().await, Some(()));
        assert_eq!(served.missing(), Vec::<&str>::new());
    }
}
