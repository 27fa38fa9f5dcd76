//! The operator: controllers on kube-runtime, their shared context and error type.

pub mod backoff;
pub mod benchmark;
pub mod benchmarkset;
pub mod caches;
pub mod leader;
pub(crate) mod plumbing;
pub mod served;
pub mod unreadable;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::controller::Action;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::{Controller, controller, watcher};
use kube::{Api, Client};

use crate::health::{self, Readiness};

/// What every reconcile can fail with. Each variant says what was being done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: kube::Error,
    },
    #[error("{kind} {name} has no namespace")]
    MissingNamespace { kind: &'static str, name: String },
    #[error("cannot serialize {what}: {source}")]
    Serialize {
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("making {what}: {source}")]
    Random {
        what: String,
        #[source]
        source: crate::token::RandomUnavailable,
    },
    /// A benchmark's reconcile failed at `stage`: retried, but never past `deadline`
    /// (when the benchmark fails naming the stage).
    #[error("{stage}: {source}")]
    Stuck {
        stage: &'static str,
        deadline: Option<jiff::Timestamp>,
        #[source]
        source: Box<Error>,
    },
}

impl Error {
    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

/// State shared by reconciles.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub backoff: backoff::PerObjectBackoff,
    /// Expansions by set uid and generation: a set's children only change when its spec
    /// does, and expanding and validating 10,000 children takes half a second.
    pub expansions: benchmarkset::ExpansionCache,
    /// Served on `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The sets' children of every kind, as the set controller's watches see them; set
    /// when the set controller is built ([`benchmarkset::controller`]).
    pub set_children: std::sync::OnceLock<benchmarkset::Children>,
    /// Which benchmark kinds the API server serves ([`served::follow`] keeps it current).
    pub served: Arc<served::ServedKinds>,
    /// The sets whose one NetworkPolicy admits their children's pods: the set controller
    /// learns it, the benchmark controllers render by it.
    pub set_policies: benchmarkset::SetPolicies,
    /// Where the children of a set read their launch tokens, when the set wrote them in
    /// batches (see `benchmarkset::SetTokens`).
    pub set_tokens: benchmarkset::SetTokens,
}

impl Context {
    pub fn new(client: Client, instance: Option<String>) -> Self {
        let reporter = Reporter {
            controller: "perfsweep".into(),
            instance,
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            backoff: backoff::PerObjectBackoff::default(),
            expansions: benchmarkset::ExpansionCache::default(),
            metrics: Arc::default(),
            set_children: std::sync::OnceLock::new(),
            served: Arc::default(),
            set_policies: benchmarkset::SetPolicies::default(),
            set_tokens: benchmarkset::SetTokens::default(),
        }
    }
}

/// Operator settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Watch one namespace, or all when `None`.
    pub namespace: Option<String>,
    /// Where `/healthz` and `/readyz` are served.
    pub health_addr: SocketAddr,
    /// Reconcile requests for the same object within this window are merged.
    pub debounce: Duration,
    /// Name of this replica, for events.
    pub instance: Option<String>,
    /// Defaults for benchmarks that leave image, scheduler or queue unset.
    pub defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults,
    /// Attempts and backoff of exports to a benchmark's `outputLocation`, and where it
    /// may go.
    pub export: benchmark::export::ExportPolicy,
    /// The most children a set may expand to, whatever its `maxChildren` says: one
    /// tenant's set must not take the operator's memory.
    pub max_children_per_set: u32,
    /// How often the API server is asked again which benchmark kinds it serves (a CRD
    /// installed later is picked up within this), [`served::DEFAULT_RECHECK`] by default.
    pub crd_recheck: Duration,
}

/// [`Settings::max_children_per_set`] unless the administrator sets it: the default
/// `maxChildren`, which the status is sized for.
pub const DEFAULT_MAX_CHILDREN_PER_SET: u32 = 10_000;

/// Runs the controllers until `shutdown` completes, then lets in-flight reconciles finish.
/// Running benchmarks are left alone: they carry on and are picked up again on restart.
pub async fn run(
    client: Client,
    settings: Settings,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) -> anyhow::Result<()> {
    let readiness = Readiness::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };
    let mut ctx = Context::new(client.clone(), settings.instance.clone());
    ctx.expansions = benchmarkset::ExpansionCache::with_ceiling(settings.max_children_per_set);
    let ctx = Arc::new(ctx);
    let (health_addr, health_server) = health::serve_with_metrics(
        settings.health_addr,
        readiness.clone(),
        Some(ctx.metrics.clone()),
        stopped(),
    )
    .await?;
    tracing::info!(%health_addr, "serving health probes and /metrics");
    let health_task = tokio::spawn(health_server);

    let discovery = served::follow(
        client.clone(),
        ctx.served.clone(),
        settings.crd_recheck,
        stopped(),
    );
    ctx.metrics.watch_served(ctx.served.clone());
    let benchmarks = benchmark::run(ctx.clone(), settings.clone(), stopped.clone());
    let metrics = ctx.metrics.clone();
    let set_controller = benchmarkset::controller(&ctx, &settings);
    let sets_store = set_controller.store();
    metrics.watch_sets(set_controller.store());
    let sets = set_controller
        .with_config(controller::Config::default().debounce(settings.debounce))
        .graceful_shutdown_on(stopped())
        .run(
            benchmarkset::reconcile_guarded,
            benchmarkset::error_policy_guarded,
            ctx,
        )
        .for_each(move |result| {
            metrics.reconciled("BenchmarkSet", crate::metrics::classify(&result));
            async move {
                log_reconciled(&result);
            }
        });
    let sets = stopping_before_ready(sets_store, sets, stopped());
    readiness.set_ready(true);
    tokio::spawn(async move {
        shutdown.await;
        tracing::info!("shutting down: finishing in-flight reconciles");
        let _ = stop_tx.send(true);
    });
    futures::join!(sets, benchmarks, discovery);
    readiness.set_ready(false);
    let _ = health_task.await;
    Ok(())
}

/// Runs a controller (`run`, shut down gracefully on `shutdown`) to its end, or stops it
/// at once when `shutdown` comes before its cache (`store`) has held its first list.
/// kube-runtime's graceful shutdown lets in-flight reconciles finish, but a runner that
/// still waits for its cache keeps waiting after the shutdown for a list that no longer
/// comes (the watch is not read any more), so the operator never stopped: seen when a
/// replica lost or gave up its lease right after it became the leader, on a loaded
/// machine where the first lists take a while. Before that first list no reconcile has
/// started, so stopping then cuts nothing short.
pub(crate) async fn stopping_before_ready<K>(
    store: kube::runtime::reflector::Store<K>,
    run: impl std::future::Future<Output = ()>,
    shutdown: impl std::future::Future<Output = ()>,
) where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    use futures::FutureExt as _;
    let early = async {
        shutdown.await;
        if store.wait_until_ready().now_or_never().is_some() {
            // Ready (or its writer gone): the graceful shutdown ends the run itself.
            std::future::pending::<()>().await;
        }
        tracing::debug!("shut down before the controller's cache was ready: stopping it");
    };
    tokio::select! {
        () = run => {}
        () = early => {}
    }
}

/// Logs one item of a controller's output: a failed reconcile or watch as a warning;
/// what is no failure (an object deleted before its reconcile ran, as after every normal
/// delete; an expired watch) only at debug level.
pub(crate) fn log_reconciled<T: std::fmt::Display, E: std::fmt::Display>(
    result: &Result<(T, Action), controller::Error<E, watcher::Error>>,
) {
    match (result, crate::metrics::classify(result)) {
        (Ok((object, _)), _) => tracing::debug!(%object, "reconciled"),
        (Err(error), crate::metrics::Reconciled::Benign) => {
            tracing::debug!(%error, "nothing to reconcile");
        }
        (Err(error), _) => tracing::warn!(%error, "reconcile failed"),
    }
}

/// An `Api` over the watched namespace or all namespaces.
pub(crate) fn scoped_api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// An object as the operator's caches keep it: without its managed fields, which no
/// reconcile reads and which are often the largest part of a watched object (a pod's
/// run to about as much as the rest of it), held once per child, pod and PodGroup.
pub(crate) fn without_managed_fields<K: kube::Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

pub(crate) fn default_watcher() -> watcher::Config {
    watcher::Config::default()
}

pub(crate) type SetController =
    Controller<kube::core::DeserializeGuard<perfsweep_benchmarks::set::BenchmarkSet>>;
