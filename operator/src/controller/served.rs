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
//!
//! A CRD that is installed but not this operator's (its `perfsweep.io/schema-digest`
//! annotation differs from the digest of the operator's own CRD, or is absent) is
//! *outdated*: the API server prunes the fields it does not know and enforces rules the
//! operator no longer has. Its kind still runs (most changes add optional fields), and
//! it is reported the same ways: condition [`CRD_CONDITION`] with reason
//! [`CRD_OUTDATED`] and a Warning event on the sets that use it, the log, and
//! `perfsweep_crd_outdated` on `/metrics`. Reading CRDs needs `get` on
//! `customresourcedefinitions` (the chart's ClusterRole has it); without it, outdated
//! CRDs go unnoticed and the log says so once.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use perfsweep_benchmarks::crds::{SCHEMA_DIGEST_ANNOTATION, schema_digest};
use perfsweep_benchmarks::kinds::registry::{self, KindInfo};
use tokio::sync::watch;

/// The condition on a BenchmarkSet whose children's kind the API server does not serve.
pub const CRD_CONDITION: &str = "CRDInstalled";
/// Its reason while the CRD is missing.
pub const CRD_MISSING: &str = "CRDMissing";
/// Its reason while the installed CRD is not this operator's.
pub const CRD_OUTDATED: &str = "CRDOutdated";

/// The longest one look at the installed CRDs may take before it is given up.
const FRESHNESS_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// The served kinds whose installed CRD is not this operator's.
    outdated: watch::Sender<BTreeSet<&'static str>>,
}

impl Default for ServedKinds {
    fn default() -> Self {
        Self {
            state: watch::channel(Discovery::Unknown).0,
            outdated: watch::channel(BTreeSet::new()).0,
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

    /// Whether `kind`'s installed CRD was found not to be this operator's.
    pub fn is_outdated(&self, kind: &str) -> bool {
        self.outdated.borrow().contains(kind)
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

    /// Yields each time the set of missing or of outdated kinds changes.
    pub fn changes(self: &Arc<Self>) -> impl Stream<Item = ()> + Send + 'static {
        fn each_change<T: Send + Sync + 'static>(
            mut rx: watch::Receiver<T>,
        ) -> impl Stream<Item = ()> + Send + 'static {
            rx.mark_unchanged();
            futures::stream::unfold(rx, |mut rx| async move {
                rx.changed().await.ok()?;
                Some(((), rx))
            })
        }
        futures::stream::select(
            each_change(self.state.subscribe()),
            each_change(self.outdated.subscribe()),
        )
    }

    /// Records which served kinds have an outdated CRD; returns (newly outdated, newly
    /// current) kinds.
    fn record_outdated(
        &self,
        outdated: BTreeSet<&'static str>,
    ) -> (Vec<&'static str>, Vec<&'static str>) {
        let before = self.outdated.borrow().clone();
        let stale = outdated.difference(&before).copied().collect();
        let current = before.difference(&outdated).copied().collect();
        self.outdated.send_if_modified(|old| {
            if *old == outdated {
                false
            } else {
                old.clone_from(&outdated);
                true
            }
        });
        (stale, current)
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

/// What a set of a kind whose installed CRD is outdated says, in its condition and event.
pub fn outdated_message(kind: &KindInfo) -> String {
    format!(
        "CustomResourceDefinition {crd} is not this operator's (its {SCHEMA_DIGEST_ANNOTATION} annotation differs): the API server drops the fields it does not know and may refuse valid specs; install the CRDs of this operator's version (kubectl apply --server-side -f the chart's crds/, see docs/upgrading.md)",
        crd = crd_name(kind),
    )
}

/// Whether an installed CRD's annotations say it is this operator's CRD of `kind`.
pub fn is_current(annotations: Option<&BTreeMap<String, String>>, kind: &KindInfo) -> bool {
    annotations
        .and_then(|a| a.get(SCHEMA_DIGEST_ANNOTATION))
        .is_some_and(|digest| *digest == schema_digest(&kind.crd))
}

/// Asks discovery which kinds are served, now and every `every`, until `shutdown`.
pub async fn follow(
    client: Client,
    served: Arc<ServedKinds>,
    every: Duration,
    shutdown: impl Future<Output = ()> + Send,
) {
    let discovery = async {
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
    // The CRDs' freshness in a loop of its own, each look bounded: discovery, which
    // controllers wait for, never waits for these reads.
    let freshness = async {
        served.discovered().await;
        let mut said_unreadable = false;
        loop {
            let missing: BTreeSet<&'static str> = served.missing().into_iter().collect();
            match tokio::time::timeout(
                every.max(FRESHNESS_TIMEOUT),
                outdated_kinds(&client, &missing),
            )
            .await
            {
                Ok(Ok(outdated)) => announce_outdated(served.record_outdated(outdated)),
                Ok(Err(error)) if !said_unreadable => {
                    said_unreadable = true;
                    tracing::warn!(%error, "cannot read the installed CRDs (the chart's ClusterRole grants get on customresourcedefinitions): an outdated CRD goes unnoticed");
                }
                Ok(Err(error)) => tracing::debug!(%error, "reading the installed CRDs"),
                Err(_) => tracing::debug!("reading the installed CRDs took too long; trying again"),
            }
            tokio::time::sleep(every).await;
        }
    };
    let look = async {
        futures::join!(discovery, freshness);
    };
    tokio::select! {
        () = look => {}
        () = shutdown => {}
    }
    // A reconcile in flight may wait for discovery (`discovered`), and a graceful
    // shutdown waits for it: stopped before the API server answered (a loaded machine, a
    // slow first request), the operator would never stop. Take every kind for served,
    // as when discovery fails; nothing new starts after the shutdown anyway.
    if *served.state.borrow() == Discovery::Unknown {
        served.record(BTreeSet::new());
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

fn announce_outdated((stale, current): (Vec<&'static str>, Vec<&'static str>)) {
    for kind in stale.into_iter().filter_map(registry::lookup) {
        tracing::warn!(kind = kind.kind, crd = %crd_name(kind), "{}", outdated_message(kind));
    }
    for kind in current.into_iter().filter_map(registry::lookup) {
        tracing::info!(kind = kind.kind, crd = %crd_name(kind), "the installed CRD of {} is this operator's now", kind.kind);
    }
}

/// The served benchmark kinds whose installed CRD is not this operator's: one metadata
/// read per kind.
async fn outdated_kinds(
    client: &Client,
    missing: &BTreeSet<&'static str>,
) -> Result<BTreeSet<&'static str>, kube::Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut outdated = BTreeSet::new();
    for kind in registry::kinds()
        .iter()
        .filter(|kind| !missing.contains(kind.kind))
    {
        if let Some(installed) = crds.get_metadata_opt(&crd_name(kind)).await?
            && !is_current(installed.metadata.annotations.as_ref(), kind)
        {
            outdated.insert(kind.kind);
        }
    }
    Ok(outdated)
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

    /// Found when discovery was made slower by the outdated-CRD check: an operator
    /// stopped before discovery answered never stopped, since a set reconcile waited
    /// for discovery and the graceful shutdown waited for the reconcile.
    #[tokio::test]
    async fn a_shutdown_before_discovery_answers_releases_its_waiters() {
        // An API server that accepts connections and never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a listener");
        let url = format!("http://{}", silent.local_addr().expect("an address"));
        let config = kube::Config::new(url.parse().expect("a URL"));
        let client = Client::try_from(config).expect("a client");
        let served = Arc::new(ServedKinds::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let following = tokio::spawn(follow(
            client,
            served.clone(),
            Duration::from_secs(30),
            async move {
                let _ = stopped.await;
            },
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(*served.state.borrow(), Discovery::Unknown, "no answer yet");
        let _ = stop.send(());
        tokio::time::timeout(Duration::from_secs(5), served.discovered())
            .await
            .expect("a waiter for discovery is released by the shutdown");
        tokio::time::timeout(Duration::from_secs(5), following)
            .await
            .expect("follow ends on shutdown")
            .expect("follow did not panic");
        drop(silent);
    }

    #[tokio::test]
    async fn an_outdated_crd_is_recorded_and_announced_as_a_change() {
        let served = Arc::new(ServedKinds::default());
        let mut changes = Box::pin(served.changes());
        assert_eq!(
            served.record_outdated(BTreeSet::from(["IPerf"])),
            (vec!["IPerf"], vec![])
        );
        assert!(served.is_outdated("IPerf") && !served.is_outdated("Fio"));
        assert_eq!(changes.next().await, Some(()));
        assert_eq!(
            served.record_outdated(BTreeSet::new()),
            (vec![], vec!["IPerf"])
        );
        assert!(!served.is_outdated("IPerf"));
    }

    #[test]
    fn a_crd_is_current_only_with_this_operators_digest() {
        let kind = registry::lookup("IPerf").expect("IPerf is a kind");
        let annotated = |digest: &str| {
            BTreeMap::from([(SCHEMA_DIGEST_ANNOTATION.to_owned(), digest.to_owned())])
        };
        assert!(is_current(
            Some(&annotated(&schema_digest(&kind.crd))),
            kind
        ));
        assert!(!is_current(Some(&annotated("0123")), kind));
        assert!(
            !is_current(None, kind),
            "a CRD without the annotation predates it"
        );
        assert!(outdated_message(kind).contains("iperfs.perfsweep.io"));
    }
}
