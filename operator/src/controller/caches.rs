//! Reflector caches of the objects perfsweep creates for its benchmarks: pods, Services,
//! Volcano PodGroups, PersistentVolumeClaims and evidence ConfigMaps.
//!
//! One watch per resource (labelled `app.kubernetes.io/managed-by=perfsweep`, so only
//! perfsweep's own objects are cached) serves every benchmark kind: reconciles read their
//! objects from these stores and issue no list. Each change to a pod or PodGroup (created,
//! changed, deleted) is routed to the controller of the benchmark that owns it, as
//! `Controller::owns` would, but without one watch per kind. An expired watch (410 Gone)
//! is re-listed by kube's watcher and the store replaced when the new list is complete.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use futures::channel::mpsc;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Service};
use kube::core::NamespaceResourceScope;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};

use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::api::volcano::PodGroup;
use serde::de::DeserializeOwned;

use super::scoped_api;

/// A benchmark to reconcile: (namespace, name).
pub type Trigger = (String, String);

/// Where changes to owned objects go: the trigger channel of each kind's controller.
#[derive(Clone, Default)]
pub struct Routes {
    by_kind: HashMap<String, mpsc::UnboundedSender<Trigger>>,
}

impl Routes {
    /// A channel of benchmarks of `kind` to reconcile, fed by changes to what they own.
    pub fn add(&mut self, kind: &str) -> mpsc::UnboundedReceiver<Trigger> {
        let (tx, rx) = mpsc::unbounded();
        self.by_kind.insert(kind.to_owned(), tx);
        rx
    }

    /// Sends the benchmark `object` belongs to to its kind's controller: its controlling
    /// perfsweep owner, or, for what a benchmark's PodGroup owns (its pods), the benchmark
    /// its labels name.
    fn route(&self, object: &impl Resource) {
        let Some(namespace) = object.meta().namespace.as_deref() else {
            return;
        };
        let Some(owner) = object
            .owner_references()
            .iter()
            .find(|owner| owner.controller == Some(true))
        else {
            return;
        };
        let benchmark = if owner.api_version == perfsweep_benchmarks::API_VERSION {
            Some((owner.kind.as_str(), owner.name.as_str()))
        } else if owner.kind == PodGroup::kind(&()) {
            // `app.kubernetes.io/name` is the kind in lowercase.
            let labels = object.labels();
            labels
                .get(perfsweep_benchmarks::render::NAME_LABEL)
                .zip(labels.get(labels::BENCHMARK))
                .and_then(|(kind, name)| {
                    let kind = self.by_kind.keys().find(|k| k.eq_ignore_ascii_case(kind))?;
                    Some((kind.as_str(), name.as_str()))
                })
        } else {
            None
        };
        if let Some((kind, name)) = benchmark
            && let Some(tx) = self.by_kind.get(kind)
        {
            // A controller that stopped has dropped its receiver: nothing to tell.
            let _ = tx.unbounded_send((namespace.to_owned(), name.to_owned()));
        }
    }
}

/// Read handles of the caches; cheap to clone.
#[derive(Clone)]
pub struct Owned {
    pub pods: Store<Pod>,
    pub services: Store<Service>,
    /// `None` where Volcano's PodGroups are not served.
    pub pod_groups: Option<Store<PodGroup>>,
    pub claims: Store<PersistentVolumeClaim>,
    pub config_maps: Store<ConfigMap>,
}

impl Owned {
    /// Resolves once every cache holds its first complete list.
    pub async fn ready(&self) {
        // A writer only goes away with the operator; then nothing waits for this.
        let _ = self.pods.wait_until_ready().await;
        let _ = self.services.wait_until_ready().await;
        if let Some(groups) = &self.pod_groups {
            let _ = groups.wait_until_ready().await;
        }
        let _ = self.claims.wait_until_ready().await;
        let _ = self.config_maps.wait_until_ready().await;
    }
}

/// Objects in `store` owned by the object of `uid` in `namespace` (those being deleted
/// too: they still hold their names).
pub fn owned_by<T>(store: &Store<T>, namespace: &str, uid: &str) -> Vec<std::sync::Arc<T>>
where
    T: Resource + Clone,
    T::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state_filter(|object| {
        object.meta().namespace.as_deref() == Some(namespace)
            && object.owner_references().iter().any(|o| o.uid == uid)
    })
}

/// Names of the objects in `store` owned by the object of `uid` in `namespace` that are
/// not being deleted already: what is left to delete.
pub fn left_to_delete<T>(store: &Store<T>, namespace: &str, uid: &str) -> Vec<Named>
where
    T: Resource + Clone,
    T::DynamicType: Eq + std::hash::Hash + Clone,
{
    owned_by(store, namespace, uid)
        .iter()
        .filter(|object| object.meta().deletion_timestamp.is_none())
        .filter_map(|object| Named::of(object.as_ref()))
        .collect()
}

/// An object to delete: its name, and its uid, which the delete is conditional on (so a
/// name taken over by someone else's object is never deleted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Named {
    pub name: String,
    pub uid: String,
}

impl Named {
    /// `None` for an object without a uid (never stored, so nothing to delete).
    pub fn of(object: &impl Resource) -> Option<Self> {
        Some(Self {
            name: object.meta().name.clone()?,
            uid: object.meta().uid.clone()?,
        })
    }
}

/// Starts nothing yet: the caches, and the future that fills them (and routes changes of
/// pods and PodGroups through `routes`) until `shutdown` resolves.
pub fn reflect(
    client: &Client,
    namespace: Option<&str>,
    volcano: bool,
    routes: Routes,
    recent: &Arc<Recent>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> (Owned, impl Future<Output = ()> + Send + 'static) {
    let follow = |routes: &Routes| Some((routes.clone(), recent.clone()));
    let (pods, pods_run) = cache::<Pod>(client, namespace, follow(&routes));
    let (services, services_run) = cache::<Service>(client, namespace, None);
    let (claims, claims_run) = cache::<PersistentVolumeClaim>(client, namespace, None);
    let (config_maps, maps_run) = cache::<ConfigMap>(client, namespace, None);
    let mut runs = vec![pods_run, services_run, claims_run, maps_run];
    let pod_groups = volcano.then(|| {
        let (store, run) = cache::<PodGroup>(client, namespace, follow(&routes));
        runs.push(run);
        store
    });
    let owned = Owned {
        pods,
        services,
        pod_groups,
        claims,
        config_maps,
    };
    let run = async move {
        let all = futures::future::join_all(runs);
        futures::future::select(all, Box::pin(shutdown)).await;
    };
    (owned, run)
}

/// A cache of `T`; with `follow`, each change is routed to its benchmark's controller
/// and marks what [`Recent`] noted of the object as seen.
fn cache<T>(
    client: &Client,
    namespace: Option<&str>,
    follow: Option<(Routes, Arc<Recent>)>,
) -> (Store<T>, futures::future::BoxFuture<'static, ()>)
where
    T: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    let api: Api<T> = scoped_api(client, namespace);
    let config =
        watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGER));
    let (store, writer) = reflector::store();
    let kind = T::kind(&()).into_owned();
    let run = reflector::reflector(
        writer,
        watcher(api, config).modify(super::without_managed_fields),
    )
    // An error (the API server unavailable, 403) is retried with backoff, as a
    // controller's own watches are.
    .default_backoff()
    .touched_objects()
    .for_each(move |object| {
        match object {
            Ok(object) => {
                if let Some((routes, recent)) = &follow {
                    if let Some(uid) = object.meta().uid.as_deref() {
                        recent.seen(uid);
                    }
                    routes.route(&object);
                }
            }
            Err(error) => tracing::warn!(kind, %error, "watching perfsweep's objects"),
        }
        futures::future::ready(())
    })
    .boxed();
    (store, run)
}

/// The `ObjectRef` of a routed benchmark.
pub fn object_ref<K>((namespace, name): Trigger) -> ObjectRef<K>
where
    K: Resource<DynamicType = ()>,
{
    ObjectRef::new(&name).within(&namespace)
}

/// How long this operator's own creates and deletes stand in for what its caches do not
/// show yet, at most: a change is forgotten as soon as the cache shows it
/// ([`Recent::forget`]); this only bounds a change whose watch event never comes.
const RECENT: std::time::Duration = std::time::Duration::from_mins(5);

/// What the operator created or deleted a moment ago, by owner uid: its caches show a
/// change only when the watch event arrives, and a reconcile in between would otherwise
/// create the same pods again (409) or delete the same objects again (404).
#[derive(Default)]
pub struct Recent {
    by_owner: std::sync::Mutex<HashMap<String, Vec<(std::time::Instant, Change)>>>,
}

/// One change the operator made.
#[derive(Clone)]
pub enum Change {
    /// A pod, as stored (with its uid) where the create answered it.
    Created(Box<Pod>),
    /// A PodGroup, as stored where the create answered it.
    CreatedGroup(Box<PodGroup>),
    /// `Kind/name`.
    Deleted(String),
}

impl Change {
    /// The uid of the object created, as the API server answered the create.
    fn uid(&self) -> Option<&str> {
        match self {
            Self::Created(pod) => pod.metadata.uid.as_deref(),
            Self::CreatedGroup(group) => group.metadata.uid.as_deref(),
            Self::Deleted(_) => None,
        }
    }
}

impl Recent {
    pub fn note(&self, owner: &str, change: Change) {
        let mut by_owner = self
            .by_owner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        by_owner
            .entry(owner.to_owned())
            .or_default()
            .push((std::time::Instant::now(), change));
    }

    /// The owner's changes of the last [`RECENT`]; older ones are forgotten.
    pub fn of(&self, owner: &str) -> Vec<Change> {
        let mut by_owner = self
            .by_owner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        by_owner.retain(|_, changes| {
            changes.retain(|(at, _)| at.elapsed() < RECENT);
            !changes.is_empty()
        });
        by_owner
            .get(owner)
            .map(|changes| changes.iter().map(|(_, c)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// Forgets the owner's changes that `seen` says the caches show now.
    pub fn forget(&self, owner: &str, seen: impl Fn(&Change) -> bool) {
        let mut by_owner = self
            .by_owner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(changes) = by_owner.get_mut(owner) {
            changes.retain(|(_, change)| !seen(change));
        }
    }

    /// Forgets the creation of the object of `uid`: the watch has seen it, so the caches
    /// show it, or show that it is gone again (a pod deleted by someone else right after
    /// its creation must not be taken for present until the creation is forgotten).
    pub fn seen(&self, uid: &str) {
        let mut by_owner = self
            .by_owner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for changes in by_owner.values_mut() {
            changes.retain(|(_, change)| change.uid() != Some(uid));
        }
    }

    /// Whether `Kind/name` of the owner was deleted a moment ago.
    pub fn deleted(&self, owner: &str, what: &str) -> bool {
        self.of(owner)
            .iter()
            .any(|c| matches!(c, Change::Deleted(d) if d == what))
    }
}
