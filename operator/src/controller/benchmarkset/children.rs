//! The set controller's caches of the children of every kind: one watch per kind
//! (children only: label `perfsweep.io/set`), whose changes also trigger the owning set's
//! reconcile, as `Controller::owns` would. Reconciles read a set's children from here
//! and list nothing.

use std::sync::Arc;

use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::kinds::registry::{self, KindInfo};

use futures::StreamExt;

use super::{SetController, api_resource};
use crate::controller::default_watcher;
use crate::controller::served::ServedKinds;

/// One store of children per benchmark kind.
#[derive(Clone)]
pub struct Children {
    by_kind: Vec<(&'static KindInfo, Store<DynamicObject>)>,
    served: Arc<ServedKinds>,
}

impl Children {
    /// Resolves once discovery has answered and the store of every kind served holds its
    /// first complete list (a kind not served has none to wait for).
    pub async fn ready(&self) {
        self.served.discovered().await;
        for (kind, store) in &self.by_kind {
            if self.served.is_missing(kind.kind) {
                continue;
            }
            // The writer only goes away with the controller, and with it this reconcile.
            let _ = store.wait_until_ready().await;
        }
    }

    /// The children of kind `kind` of the set `name` in `namespace`.
    pub fn of(&self, kind: &KindInfo, namespace: &str, name: &str) -> Vec<Arc<DynamicObject>> {
        let Some((_, store)) = self.by_kind.iter().find(|(k, _)| k.kind == kind.kind) else {
            return Vec::new();
        };
        store.state_filter(|child| {
            child.namespace().as_deref() == Some(namespace)
                && child.labels().get(labels::SET).map(String::as_str) == Some(name)
        })
    }
}

/// `controller` with a watch of every kind's children that fills the returned stores
/// (driven by the controller itself) and triggers their sets' reconciles. A kind's watch
/// starts once the API server serves it (`served`): before, its list would fail.
pub fn watch(
    mut controller: SetController,
    client: &Client,
    namespace: Option<&str>,
    served: &Arc<ServedKinds>,
) -> (SetController, Children) {
    let mut children = Children {
        by_kind: Vec::new(),
        served: served.clone(),
    };
    for kind in registry::kinds() {
        let resource = api_resource(kind);
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let writer = reflector::store::Writer::new(resource.clone());
        children.by_kind.push((kind, writer.as_reader()));
        // Only perfsweep's children, not benchmarks users create by hand.
        let changes = reflector::reflector(
            writer,
            watcher(api, default_watcher().labels(labels::SET))
                .modify(crate::controller::without_managed_fields),
        )
        // A failing list or watch (the CRD deleted, 403) is retried with backoff,
        // not in a tight loop.
        .default_backoff()
        .touched_objects();
        let served = served.clone();
        let until_served = futures::stream::once(async move { served.served(kind.kind).await })
            .filter_map(|()| futures::future::ready(None));
        controller = controller.owns_stream_with(until_served.chain(changes), resource);
    }
    (controller, children)
}
