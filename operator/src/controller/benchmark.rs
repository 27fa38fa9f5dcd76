//! The benchmark controllers: one small kube-runtime controller per kind, all driven by
//! the same engine. A controller runs a benchmark once: it creates the rendered objects
//! (PodGroup, Service, pods), follows the pods to a result or a failure, records that in
//! status, and deletes what it created. A finished benchmark is never run again.
//!
//! Reconcile runs as dereference → validate → build → apply → update status; only the
//! ends touch the cluster. What the pods mean is decided by pure functions ([`assess`],
//! [`outcome`]). Failures the benchmark cannot recover from (a bad spec, an image that
//! cannot be pulled, a failed pod, pods the scheduler cannot place within the timeout,
//! a result that cannot be read) end it as Failed with a reason; only failures to talk
//! to the API server are retried.
//!
//! Status writes carry the `resourceVersion` the decision was made on, and objects are
//! only created after re-reading the benchmark: a reconcile working from a stale cache
//! can neither overwrite a newer status nor bring back pods of a finished benchmark.

mod assess;
pub mod export;
pub(crate) mod outcome;

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use kube::api::{Api, LogParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::core::object::HasStatus;
use kube::runtime::Controller;
use kube::runtime::controller::{self, Action};
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use perfsweep_benchmarks::acceptance;
use perfsweep_benchmarks::common::CommonSpec;
use perfsweep_benchmarks::kinds;
use perfsweep_benchmarks::labels;
use perfsweep_benchmarks::plan::{PlanError, process_name};
use perfsweep_benchmarks::registry::{self, BenchmarkKind, KindInfo};
use perfsweep_benchmarks::render::{self, BenchmarkRef, RenderError, Rendered};
use perfsweep_benchmarks::status::{
    BenchmarkStatus, Phase, condition, condition_status, set_condition,
};
use perfsweep_benchmarks::volcano::PodGroup;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use self::assess::{Failure, Observed, Verdict};
use self::outcome::Success;
use super::caches::{self, Owned, Routes, Trigger};
use super::{Context, Error, Settings, default_watcher, plumbing, scoped_api};

/// The container that runs `perfsweep agent` in every benchmark pod; its log ends with
/// the agent's report.
pub const AGENT_CONTAINER: &str = render::pod::CONTAINER_NAME;

/// Annotation on a finished benchmark: SHA-256 of the tool's raw output its result was
/// parsed from (the output itself is in the result pod's log and the agent's report).
pub const EVIDENCE_ANNOTATION: &str = "perfsweep.io/evidence-sha256";

/// How often a running benchmark is looked at even without a change.
const RESYNC: Duration = Duration::from_secs(60);
/// How often a running benchmark whose tool reports progress is looked at, to refresh
/// `status.progress` (one bounded read of the result pod's log tail each time).
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// Log lines read for the latest progress line.
const PROGRESS_TAIL_LINES: i64 = 40;
/// How soon to look again after acting on a stale copy of a benchmark.
const STALE_RETRY: Duration = Duration::from_secs(1);
/// The condition that reports the operator's own failure to act on a benchmark (an API
/// request refused or unanswered), while it lasts: so a benchmark stuck on the operator
/// says so, instead of looking like it waits for the scheduler.
pub const OPERATOR_ERROR_CONDITION: &str = "OperatorError";
/// A retried reconcile looks again this long after the benchmark's deadline, so that it
/// sees the deadline passed.
const PAST_DEADLINE: Duration = Duration::from_millis(50);

/// What the controller was doing for a benchmark when a request failed: every stage is
/// bounded by the benchmark's timeout, and a benchmark that ends at its deadline says in
/// which stage and on which error it was stuck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Preparing,
    Creating,
    WaitingForPods,
    Running,
    ReadingResult,
    CleaningUp,
}

impl Stage {
    fn describe(self) -> &'static str {
        match self {
            Self::Preparing => "preparing",
            Self::Creating => "creating its objects",
            Self::WaitingForPods => "waiting for its pods",
            Self::Running => "running",
            Self::ReadingResult => "reading the result",
            Self::CleaningUp => "cleaning up",
        }
    }

    /// The failure of a benchmark whose deadline passed while this stage kept failing.
    fn failure(self, error: &Error, timeout: Duration) -> Failure {
        let timeout = assess::human(timeout);
        match self {
            Self::ReadingResult => Failure::new(
                "ResultUnreadable",
                format!("the result could not be read within the timeout of {timeout}: {error}"),
            ),
            stage => Failure::new(
                "TimedOut",
                format!(
                    "the benchmark did not finish within its timeout of {timeout} ({}; last error: {error})",
                    stage.describe()
                ),
            ),
        }
    }
}

/// The reason of the `OperatorError` condition and event: what kind of failure it was.
fn operator_error_reason(error: &Error) -> &'static str {
    match error {
        Error::Kube {
            source: kube::Error::Api(status),
            ..
        } => match status.code {
            403 => "Forbidden",
            429 | 500.. => "APIUnavailable",
            _ => "APIError",
        },
        // No answer at all: connection refused, TLS, timeouts.
        Error::Kube { .. } => "APIUnavailable",
        Error::MissingNamespace { .. } | Error::Serialize { .. } => "OperatorError",
    }
}

/// What the engine needs of a kind's Rust type; every benchmark kind has it.
pub trait Benchmark:
    BenchmarkKind + Resource<DynamicType = (), Scope = NamespaceResourceScope> + Send + Sync + 'static
{
    /// The kind's structured result (its `BenchmarkKind::Output`).
    type Result: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static;

    fn benchmark_status(&self) -> Option<&BenchmarkStatus<Self::Result>>;
}

impl<K, R> Benchmark for K
where
    K: BenchmarkKind<Output = R>
        + HasStatus<Status = BenchmarkStatus<R>>
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Send
        + Sync
        + 'static,
    R: Serialize + DeserializeOwned + Clone + Debug + PartialEq + Send + Sync + 'static,
{
    type Result = R;

    fn benchmark_status(&self) -> Option<&BenchmarkStatus<R>> {
        self.status()
    }
}

/// A controller's way to stop: resolves when the operator shuts down.
type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// One kind's controller.
struct Registration {
    kind: fn() -> String,
    start: fn(
        Arc<Engine>,
        &Settings,
        futures::channel::mpsc::UnboundedReceiver<Trigger>,
        Shutdown,
    ) -> BoxFuture<'static, ()>,
}

impl Registration {
    fn of<K: Benchmark>() -> Self {
        Self {
            kind: || K::kind(&()).into_owned(),
            start: start::<K>,
        }
    }
}

/// Every kind's controller; a new kind is one line here (a test checks that every kind
/// in the registry has one).
fn registrations() -> Vec<Registration> {
    vec![
        Registration::of::<kinds::iperf::IPerf>(),
        Registration::of::<kinds::rdma::bandwidth::RDMABandwidth>(),
        Registration::of::<kinds::rdma::latency::RDMALatency>(),
        Registration::of::<kinds::mpi_pingpong::MPIPingPong>(),
        Registration::of::<kinds::fio::Fio>(),
        Registration::of::<kinds::pytorch::PyTorch>(),
        Registration::of::<kinds::openfoam::OpenFOAM>(),
        Registration::of::<kinds::llm::LLMInference>(),
    ]
}

/// State shared by the benchmark controllers.
pub struct Engine {
    ctx: Arc<Context>,
    namespace: Option<String>,
    /// Whether the cluster serves Volcano's PodGroups (checked once at start).
    volcano: bool,
    defaults: perfsweep_benchmarks::common::ClusterDefaults,
    /// The API server's version (`v1.31.2`), asked once at start, for result records.
    kubernetes_version: Option<String>,
    /// How finished benchmarks are exported to their `outputLocation`.
    export: export::ExportPolicy,
    /// What the benchmarks own, as last seen by the watches: reconciles read these and
    /// list nothing.
    owned: Owned,
}

/// Runs the controller of every benchmark kind until the futures `shutdown` makes
/// resolve, letting in-flight reconciles finish.
pub async fn run<S, F>(ctx: Arc<Context>, settings: Settings, shutdown: S)
where
    S: Fn() -> F,
    F: Future<Output = ()> + Send + Sync + 'static,
{
    let volcano = pod_groups_served(&ctx.client).await;
    if !volcano {
        tracing::info!(
            "Volcano's PodGroups are not served: benchmarks with scheduler: volcano will fail until Volcano is installed and the operator restarted"
        );
    }
    let kubernetes_version = match ctx.client.apiserver_version().await {
        Ok(info) => Some(info.git_version),
        Err(error) => {
            tracing::warn!(%error, "cannot read the API server's version; records will lack it");
            None
        }
    };
    let mut routes = Routes::default();
    let registrations: Vec<_> = registrations()
        .into_iter()
        .map(|registration| {
            let triggers = routes.add(&(registration.kind)());
            (registration, triggers)
        })
        .collect();
    let (owned, reflect) = caches::reflect(
        &ctx.client,
        settings.namespace.as_deref(),
        volcano,
        routes,
        shutdown(),
    );
    let engine = Arc::new(Engine {
        ctx,
        namespace: settings.namespace.clone(),
        volcano,
        defaults: settings.defaults.clone(),
        kubernetes_version,
        export: settings.export.clone(),
        owned,
    });
    let controllers = registrations
        .into_iter()
        .map(|(registration, triggers)| {
            tracing::debug!(
                kind = (registration.kind)(),
                "starting the benchmark controller"
            );
            (registration.start)(engine.clone(), &settings, triggers, Box::pin(shutdown()))
        })
        .collect::<Vec<_>>();
    let owned = engine.owned.clone();
    // The controllers start once the caches hold their first lists: a reconcile on an
    // empty cache would take every benchmark's pods for missing.
    let controllers = async move {
        owned.ready().await;
        futures::future::join_all(controllers).await;
    };
    futures::join!(reflect, controllers);
}

async fn pod_groups_served(client: &Client) -> bool {
    let api_version = PodGroup::api_version(&());
    match client.list_api_group_resources(&api_version).await {
        Ok(list) => list
            .resources
            .iter()
            .any(|r| r.name == PodGroup::plural(&())),
        Err(error) => {
            tracing::debug!(%error, "discovering {api_version}");
            false
        }
    }
}

fn start<K: Benchmark>(
    engine: Arc<Engine>,
    settings: &Settings,
    triggers: futures::channel::mpsc::UnboundedReceiver<Trigger>,
    shutdown: Shutdown,
) -> BoxFuture<'static, ()> {
    let controller = controller::<K>(&engine, triggers);
    let metrics = engine.ctx.metrics.clone();
    let kind = K::kind(&()).into_owned();
    if let Some(info) = registry::lookup(&kind) {
        metrics.watch_benchmarks(info, controller.store());
    }
    controller
        .with_config(controller::Config::default().debounce(settings.debounce))
        .graceful_shutdown_on(shutdown)
        .run(reconcile::<K>, error_policy::<K>, engine)
        .for_each(move |result| {
            metrics.reconciled(&kind, crate::metrics::classify(&result));
            async move {
                match result {
                    Ok((object, _)) => tracing::debug!(%object, "reconciled"),
                    Err(error) => tracing::warn!(%error, "reconcile failed"),
                }
            }
        })
        .boxed()
}

/// The controller of kind `K`: its benchmarks, reconciled again on every change to the
/// pods and PodGroups they own (`triggers`, from the shared watches in [`caches`]).
fn controller<K: Benchmark>(
    engine: &Engine,
    triggers: futures::channel::mpsc::UnboundedReceiver<Trigger>,
) -> Controller<K> {
    let benchmarks: Api<K> = scoped_api(&engine.ctx.client, engine.namespace.as_deref());
    Controller::new(benchmarks, default_watcher()).reconcile_on(triggers.map(caches::object_ref))
}

/// The benchmark being reconciled, dereferenced once.
struct Target {
    info: &'static KindInfo,
    name: String,
    namespace: String,
    uid: String,
    generation: Option<i64>,
    resource_version: Option<String>,
    created: Timestamp,
    /// The installation's defaults, applied to the spec before anything is built.
    defaults: perfsweep_benchmarks::common::ClusterDefaults,
}

impl Target {
    fn of<K: Benchmark>(benchmark: &K, info: &'static KindInfo) -> Result<Self, Error> {
        let name = benchmark.name_any();
        let namespace = benchmark
            .namespace()
            .ok_or_else(|| Error::MissingNamespace {
                kind: info.kind,
                name: name.clone(),
            })?;
        let meta = benchmark.meta();
        Ok(Self {
            info,
            uid: meta.uid.clone().unwrap_or_default(),
            generation: meta.generation,
            resource_version: meta.resource_version.clone(),
            created: meta
                .creation_timestamp
                .as_ref()
                .map_or_else(Timestamp::now, |time| time.0),
            name,
            namespace,
            defaults: Default::default(),
        })
    }

    /// `Kind ns/name`, for messages and backoff keys.
    fn describe(&self) -> String {
        format!("{} {}/{}", self.info.kind, self.namespace, self.name)
    }

    fn api<T>(&self, ctx: &Context) -> Api<T>
    where
        T: Resource<DynamicType = (), Scope = NamespaceResourceScope>,
    {
        Api::namespaced(ctx.client.clone(), &self.namespace)
    }

    fn owns(&self, object: &impl Resource) -> bool {
        object
            .owner_references()
            .iter()
            .any(|owner| owner.uid == self.uid)
    }
}

pub async fn reconcile<K: Benchmark>(
    benchmark: Arc<K>,
    engine: Arc<Engine>,
) -> Result<Action, Error> {
    let kind = K::kind(&());
    let Some(info) = registry::lookup(&kind) else {
        tracing::error!(%kind, "no such benchmark kind in the registry");
        return Ok(Action::await_change());
    };
    let mut target = Target::of(&*benchmark, info)?;
    target.defaults = engine.defaults.clone();
    if benchmark.meta().deletion_timestamp.is_some() {
        // What it created goes with it through owner references.
        return Ok(Action::await_change());
    }
    let old = benchmark.benchmark_status().cloned().unwrap_or_default();
    // Validated and built once: every step below works from this.
    let prepared = prepare(&*benchmark, &target);
    let mut stage = Stage::Preparing;
    let outcome = if old.phase.is_some_and(Phase::is_finished) {
        stage = Stage::CleaningUp;
        tidy_up(&*benchmark, &target, &old, prepared.as_ref().ok(), &engine).await
    } else {
        advance(
            &*benchmark,
            &target,
            old.clone(),
            &prepared,
            &engine,
            &mut stage,
        )
        .await
    };
    match outcome {
        Ok(action) => {
            engine.ctx.backoff.reset(&target.describe());
            Ok(action)
        }
        Err(error) => {
            let prepared = prepared.as_ref().ok();
            on_operator_error(&*benchmark, &target, &old, prepared, error, stage, &engine).await
        }
    }
}

/// A finished benchmark: delete what is left of it, export it, and drop an
/// `OperatorError` condition that no longer holds.
async fn tidy_up<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    old: &BenchmarkStatus<K::Result>,
    prepared: Option<&Prepared>,
    engine: &Engine,
) -> Result<Action, Error> {
    release(engine, target, prepared.map(|p| &p.rendered)).await?;
    if condition_of(old, OPERATOR_ERROR_CONDITION).is_some() {
        let mut status = old.clone();
        status
            .conditions
            .retain(|c| c.type_ != OPERATOR_ERROR_CONDITION);
        write_status(benchmark, engine, target, old, &status).await?;
        // The export (which writes status too) follows on the next look.
        return Ok(Action::requeue(STALE_RETRY));
    }
    export::export(benchmark, target, engine).await
}

fn condition_of<'a, R>(
    status: &'a BenchmarkStatus<R>,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// When and how long: the benchmark's deadline (creation plus `timeout`), if its spec
/// can be prepared.
fn deadline_of<K: Benchmark>(benchmark: &K, target: &Target) -> Option<(Timestamp, Duration)> {
    let timeout = prepare(benchmark, target).ok()?.timeout;
    Some((assess::later(target.created, timeout), timeout))
}

/// A request of this reconcile failed. Past the benchmark's deadline the benchmark ends,
/// naming the stage it was stuck in and the error; before it, the error is shown in the
/// status (`OperatorError`) and as a Warning event, and the reconcile is retried.
async fn on_operator_error<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    old: &BenchmarkStatus<K::Result>,
    prepared: Option<&Prepared>,
    error: Error,
    stage: Stage,
    engine: &Engine,
) -> Result<Action, Error> {
    let now = Timestamp::now();
    let running = !old.phase.is_some_and(Phase::is_finished);
    if running
        && let Some(prepared) = prepared
        && let timeout = prepared.timeout
        && let deadline = assess::later(target.created, timeout)
        && deadline <= now
    {
        let failure = stage.failure(&error, timeout);
        tracing::warn!(benchmark = %target.describe(), %error, stage = stage.describe(), "the deadline passed; the benchmark fails");
        let status = finished(old, target, Err(failure.clone()), now);
        let rendered = Some(&prepared.rendered);
        return conclude(
            benchmark,
            target,
            old,
            &status,
            Some(&failure),
            None,
            rendered,
            engine,
        )
        .await;
    }
    let reason = operator_error_reason(&error);
    let message = bounded(&format!("{}: {error}", stage.describe()));
    let mut status = old.clone();
    set_condition(
        &mut status.conditions,
        condition(
            OPERATOR_ERROR_CONDITION,
            condition_status::TRUE,
            reason,
            message.clone(),
            target.generation,
            now,
        ),
    );
    if let Err(write_error) = write_status(benchmark, engine, target, old, &status).await {
        tracing::warn!(benchmark = %target.describe(), error = %write_error, "cannot record the operator's error in status");
    }
    publish(
        engine,
        benchmark,
        EventType::Warning,
        reason,
        "Reconcile",
        &message,
    )
    .await;
    Err(error)
}

pub fn error_policy<K: Benchmark>(benchmark: Arc<K>, error: &Error, engine: Arc<Engine>) -> Action {
    let key = format!(
        "{} {}/{}",
        K::kind(&()),
        benchmark.namespace().unwrap_or_default(),
        benchmark.name_any()
    );
    let mut delay = engine.ctx.backoff.next_delay(&key);
    // Retries never carry a benchmark past its deadline unseen: every stage of it is
    // bounded by its timeout.
    if let Some(info) = registry::lookup(&K::kind(&()))
        && let Ok(mut target) = Target::of(&*benchmark, info)
        && !benchmark
            .benchmark_status()
            .and_then(|s| s.phase)
            .is_some_and(Phase::is_finished)
    {
        target.defaults = engine.defaults.clone();
        if let Some((deadline, _)) = deadline_of(&*benchmark, &target) {
            let left = Timestamp::now().duration_until(deadline);
            if left.is_positive() {
                delay = delay.min(left.unsigned_abs().saturating_add(PAST_DEADLINE));
            }
        }
    }
    tracing::warn!(benchmark = %key, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// What a benchmark of this spec runs as.
struct Prepared {
    rendered: Rendered,
    /// Names of the pods, in plan order.
    pods: Vec<String>,
    result_role: String,
    result_pod: String,
    /// The other replicas of the result role, whose results merge with the result
    /// pod's (distributed load generators); usually none.
    result_siblings: Vec<String>,
    timeout: Duration,
}

/// Validate and build: the spec checked as admission would, its plan, its objects.
fn prepare<K: Benchmark>(benchmark: &K, target: &Target) -> Result<Prepared, Failure> {
    let mut object = serde_json::to_value(benchmark)
        .map_err(|e| Failure::new("InvalidSpec", format!("the object cannot be read: {e}")))?;
    if let Some(spec) = object.get_mut("spec") {
        target
            .defaults
            .apply(spec, |registry| target.info.image_in(registry));
    }
    let errors = target.info.validate(&object);
    if !errors.is_empty() {
        let message = errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ");
        return Err(Failure::new("InvalidSpec", message));
    }
    let spec = object.get("spec").cloned().unwrap_or(Value::Null);
    let timeout = serde_json::from_value::<CommonSpec>(spec.clone())
        .map_err(|e| Failure::new("InvalidSpec", format!("spec: {e}")))?
        .timeout()
        .map_err(|e| Failure::new("InvalidSpec", format!("spec.timeout: {e}")))?;
    let plan = target.info.plan(&spec).map_err(|error| match error {
        PlanError::NotImplemented { .. } => Failure::new("Unsupported", error.to_string()),
        PlanError::Invalid { .. } => Failure::new("InvalidSpec", error.to_string()),
    })?;
    let reference = BenchmarkRef {
        kind: target.info.kind.to_owned(),
        name: target.name.clone(),
        namespace: target.namespace.clone(),
        uid: target.uid.clone(),
    };
    let rendered = render::render(&reference, &spec, &plan).map_err(|error| match error {
        RenderError::Unsupported(_) => Failure::new("Unsupported", error.to_string()),
        RenderError::Invalid { .. } => Failure::new("InvalidSpec", error.to_string()),
    })?;
    let pods: Vec<String> = rendered.pods.iter().map(ResourceExt::name_any).collect();
    let result_pod = format!("{}-{}", target.name, process_name(&plan.result_role, 0));
    if !pods.contains(&result_pod) {
        return Err(Failure::new(
            "Unsupported",
            format!(
                "the rendered pods ({}) lack the result pod {result_pod}",
                pods.join(", ")
            ),
        ));
    }
    let result_replicas = plan.role(&plan.result_role).map_or(1, |r| r.replicas);
    let result_siblings = (1..result_replicas)
        .map(|index| format!("{}-{}", target.name, process_name(&plan.result_role, index)))
        .collect();
    Ok(Prepared {
        rendered,
        pods,
        result_role: plan.result_role,
        result_pod,
        result_siblings,
        timeout,
    })
}

/// The benchmark's objects as they are.
struct Observation {
    pods: Vec<Pod>,
    pod_group: Option<PodGroup>,
}

/// The benchmark's pods and PodGroup, from the caches (no request).
fn observe(engine: &Engine, target: &Target, prepared: &Prepared) -> Observation {
    let owned = &engine.owned;
    let pods = caches::owned_by(&owned.pods, &target.namespace, &target.uid)
        .into_iter()
        .map(|pod| (*pod).clone())
        .collect();
    let pod_group = match (&prepared.rendered.pod_group, &owned.pod_groups) {
        (Some(group), Some(groups)) => {
            let name = group.name_any();
            caches::owned_by(groups, &target.namespace, &target.uid)
                .into_iter()
                .find(|group| group.name_any() == name)
                .map(|group| (*group).clone())
        }
        _ => None,
    };
    Observation { pods, pod_group }
}

/// Apply, step one: the rendered objects that are missing. Returns what was created, or
/// the failure that keeps them from being created.
async fn create_missing(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
    observation: &Observation,
) -> Result<Result<Vec<String>, Failure>, Error> {
    let ctx = &engine.ctx;
    let mut created = Vec::new();
    if let Some(group) = &prepared.rendered.pod_group
        && observation.pod_group.is_none()
    {
        if !engine.volcano {
            return Ok(Err(volcano_missing()));
        }
        match create(&target.api::<PodGroup>(ctx), group, target).await? {
            Created::Yes => created.push(format!("PodGroup {}", group.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    let missing: Vec<&Pod> = prepared
        .rendered
        .pods
        .iter()
        .filter(|pod| {
            !observation
                .pods
                .iter()
                .any(|p| p.name_any() == pod.name_any())
        })
        .collect();
    if missing.is_empty() {
        return Ok(Ok(created));
    }
    let service = &prepared.rendered.service;
    match create(&target.api::<Service>(ctx), service, target).await? {
        Created::Yes => created.push(format!("Service {}", service.name_any())),
        Created::Existed => {}
        Created::Rejected(failure) => return Ok(Err(failure)),
    }
    for secret in &prepared.rendered.secrets {
        // A launch token is made here, once: rendering is pure, and a Secret that
        // exists already keeps its token (create answers Existed).
        let secret = &if render::launch::needs_token(secret) {
            let token = crate::agent::exec::random_token().map_err(|e| Error::Kube {
                action: format!("making the launch token of {}", target.describe()),
                source: kube::Error::Service(e.into()),
            })?;
            render::launch::with_token(secret, &token)
        } else {
            secret.clone()
        };
        match create(&target.api::<Secret>(ctx), secret, target).await? {
            Created::Yes => created.push(format!("Secret {}", secret.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    for claim in &prepared.rendered.claims {
        match create(&target.api::<PersistentVolumeClaim>(ctx), claim, target).await? {
            Created::Yes => created.push(format!("PersistentVolumeClaim {}", claim.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    let pods = target.api::<Pod>(ctx);
    let mut pod_count = 0;
    for pod in missing {
        match create(&pods, pod, target).await? {
            Created::Yes => pod_count += 1,
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    if pod_count > 0 {
        created.push(format!(
            "{pod_count} pod{}",
            if pod_count == 1 { "" } else { "s" }
        ));
    }
    Ok(Ok(created))
}

fn volcano_missing() -> Failure {
    Failure::new(
        "VolcanoNotInstalled",
        format!(
            "scheduler: volcano needs Volcano's PodGroup ({}), which this cluster does not serve: install Volcano (then restart the operator) or set scheduler: default",
            PodGroup::api_version(&())
        ),
    )
}

enum Created {
    Yes,
    Existed,
    /// The API server refused the object for good (admission, quota, validation).
    Rejected(Failure),
}

async fn create<T>(api: &Api<T>, object: &T, target: &Target) -> Result<Created, Error>
where
    T: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let kind = T::kind(&());
    let name = object.name_any();
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(Created::Yes),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            // Created by an earlier reconcile that the list did not show yet, or someone
            // else's object of the same name, which the benchmark must not adopt.
            let existing = api.get_opt(&name).await.map_err(Error::kube(format!(
                "reading {kind} {}/{name} of {}",
                target.namespace,
                target.describe()
            )))?;
            match existing {
                Some(existing) if !target.owns(&existing) => {
                    let owner = existing
                        .owner_references()
                        .first()
                        .map(|o| format!(" (it belongs to {} {})", o.kind, o.name))
                        .unwrap_or_default();
                    Ok(Created::Rejected(Failure::new(
                        "NameConflict",
                        format!(
                            "{kind} {}/{name} already exists and does not belong to this benchmark{owner}: delete it or rename the benchmark",
                            target.namespace
                        ),
                    )))
                }
                // Created for this benchmark before (by an earlier reconcile or operator
                // instance): adopted as it is.
                _ => Ok(Created::Existed),
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 && kind == PodGroup::kind(&()) => {
            Ok(Created::Rejected(volcano_missing()))
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 403 | 422) => {
            Ok(Created::Rejected(Failure::new(
                "CreateRejected",
                format!("the API server rejected {kind} {name}: {}", status.message),
            )))
        }
        Err(source) => Err(Error::Kube {
            action: format!(
                "creating {kind} {}/{name} of {}",
                target.namespace,
                target.describe()
            ),
            source,
        }),
    }
}

/// Whether the cached benchmark is still the stored one: objects are only created from
/// the latest state, so a stale copy never revives a finished benchmark.
async fn still_current<K: Benchmark>(engine: &Engine, target: &Target) -> Result<bool, Error> {
    let fresh = target
        .api::<K>(&engine.ctx)
        .get_opt(&target.name)
        .await
        .map_err(Error::kube(format!("reading {}", target.describe())))?;
    Ok(fresh.is_some_and(|fresh| fresh.meta().resource_version == target.resource_version))
}

/// An unfinished benchmark: create what is missing, look at the pods, read the result.
async fn advance<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    old: BenchmarkStatus<K::Result>,
    prepared: &Result<Prepared, Failure>,
    engine: &Engine,
    stage: &mut Stage,
) -> Result<Action, Error> {
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => {
            let status = finished(&old, target, Err(failure.clone()), Timestamp::now());
            return conclude(
                benchmark,
                target,
                &old,
                &status,
                Some(failure),
                None,
                None,
                engine,
            )
            .await;
        }
    };

    *stage = if old.started_at.is_some() {
        Stage::Running
    } else {
        Stage::WaitingForPods
    };
    let observation = observe(engine, target, prepared);
    let now = Timestamp::now();
    let phase = old.phase.unwrap_or_default();
    let gang = prepared.rendered.pod_group.is_some();
    let observed = Observed {
        expected: &prepared.pods,
        result_pod: &prepared.result_pod,
        result_siblings: &prepared.result_siblings,
        pods: &observation.pods,
        gang,
        pod_group: observation.pod_group.as_ref(),
        ran: old.started_at.is_some(),
        created: target.created,
        timeout: prepared.timeout,
        now,
    };
    let (mut verdict, progress) = assess::assess(&observed);

    let mut created = Vec::new();
    // Objects are created until every pod has been seen running, never after.
    if matches!(verdict, Verdict::Waiting { .. }) && old.started_at.is_none() {
        let incomplete = !progress.missing.is_empty()
            || (gang && engine.volcano && observation.pod_group.is_none());
        if incomplete || (gang && !engine.volcano) {
            *stage = Stage::Creating;
            if !still_current::<K>(engine, target).await? {
                return Ok(Action::requeue(STALE_RETRY));
            }
            match create_missing(engine, target, prepared, &observation).await? {
                Ok(what) => created = what,
                Err(failure) => verdict = Verdict::Failed { failure, pod: None },
            }
        }
    }

    let mut status = old.clone();
    status.observed_generation = target.generation;
    // This reconcile got this far: the operator's error of an earlier one is over.
    status
        .conditions
        .retain(|c| c.type_ != OPERATOR_ERROR_CONDITION);
    for condition in assess::progress_conditions(
        &progress,
        gang,
        observation.pod_group.as_ref(),
        target.generation,
        now,
    ) {
        set_condition(&mut status.conditions, condition);
    }
    if verdict == Verdict::ReadResult {
        *stage = Stage::ReadingResult;
    }
    let (failure, evidence) = match verdict {
        Verdict::Waiting { recheck_in } | Verdict::Running { recheck_in } => {
            let mut recheck_in = recheck_in.min(RESYNC);
            if matches!(verdict, Verdict::Running { .. }) {
                *stage = Stage::Running;
                status.phase = Some(Phase::Running);
                status.started_at.get_or_insert(Time(now));
                if target.info.reports_progress {
                    if let Some(progress) = read_progress(engine, target, prepared).await {
                        status.progress = Some(progress);
                    }
                    recheck_in = recheck_in.min(PROGRESS_EVERY);
                }
            } else if phase != Phase::Running {
                // A benchmark that ran never goes back to Pending.
                status.phase = Some(Phase::Pending);
            }
            if !write_status(benchmark, engine, target, &old, &status).await? {
                return Ok(Action::requeue(STALE_RETRY));
            }
            if !created.is_empty() {
                let note = format!("Created {}", created.join(", "));
                publish(
                    engine,
                    benchmark,
                    EventType::Normal,
                    "Created",
                    "Create",
                    &note,
                )
                .await;
            }
            if old.phase != Some(Phase::Running) && status.phase == Some(Phase::Running) {
                let note = format!("All {} pods are running", prepared.pods.len());
                publish(
                    engine,
                    benchmark,
                    EventType::Normal,
                    "Running",
                    "Run",
                    &note,
                )
                .await;
            }
            return Ok(Action::requeue(recheck_in));
        }
        Verdict::ReadResult => match read_result::<K::Result>(engine, target, prepared).await? {
            Ok(success) => {
                let environment = observe_environment(engine, target, &observation.pods).await;
                keep_evidence(engine, target, Some(&success.report), &environment).await?;
                let evidence = success.evidence_sha256.clone();
                let verdict = judge(benchmark, target, &success.result);
                status = finished(&status, target, Ok(success), now);
                if let Some(verdict) = verdict {
                    set_condition(
                        &mut status.conditions,
                        accepted_condition(&verdict, target, now),
                    );
                }
                (None, evidence)
            }
            Err(failure) => (Some(failure), None),
        },
        Verdict::Failed { failure, pod } => {
            if pod.as_deref() == Some(prepared.result_pod.as_str()) {
                let reported = reported_failure(engine, target, prepared).await;
                (Some(reported.unwrap_or(failure)), None)
            } else {
                (Some(failure), None)
            }
        }
    };
    *stage = Stage::CleaningUp;
    if let Some(failure) = &failure {
        // What there is of a failed run: where it ran, for its record.
        let environment = observe_environment(engine, target, &observation.pods).await;
        keep_evidence(engine, target, None, &environment).await?;
        status = finished(&status, target, Err(failure.clone()), now);
    }
    conclude(
        benchmark,
        target,
        &old,
        &status,
        failure.as_ref(),
        evidence.as_deref(),
        Some(&prepared.rendered),
        engine,
    )
    .await
}

/// Reads the result pod's log and what the agent reported in it; with several replicas
/// of the result role, every replica's report, merged by the kind.
async fn read_result<R: DeserializeOwned>(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
) -> Result<Result<Success<R>, Failure>, Error> {
    let pod = &prepared.result_pod;
    let log = match read_log(engine, target, pod).await? {
        Ok(log) => log,
        Err(failure) => return Ok(Err(failure)),
    };
    if prepared.result_siblings.is_empty() {
        return Ok(outcome::evaluate(
            &log,
            target.info.kind,
            &prepared.result_role,
            pod,
        ));
    }
    let mut reports = Vec::with_capacity(prepared.result_siblings.len() + 1);
    for (index, pod) in std::iter::once(pod)
        .chain(&prepared.result_siblings)
        .enumerate()
    {
        let log = if index == 0 {
            log.clone()
        } else {
            match read_log(engine, target, pod).await? {
                Ok(log) => log,
                Err(failure) => return Ok(Err(failure)),
            }
        };
        match outcome::replica_report(
            &log,
            target.info.kind,
            &prepared.result_role,
            index as u32,
            pod,
        ) {
            Ok(report) => reports.push(report),
            Err(failure) => return Ok(Err(failure)),
        }
    }
    let combined = perfsweep_benchmarks::report::combine(target.info, reports);
    Ok(outcome::evaluate_report(
        combined,
        target.info.kind,
        &prepared.result_pod,
    ))
}

/// The latest progress line in the tail of the result pod's log; best effort (a log
/// that cannot be read now leaves the last progress shown).
async fn read_progress(engine: &Engine, target: &Target, prepared: &Prepared) -> Option<String> {
    let params = LogParams {
        container: Some(AGENT_CONTAINER.to_owned()),
        tail_lines: Some(PROGRESS_TAIL_LINES),
        limit_bytes: Some(64 * 1024),
        ..LogParams::default()
    };
    match target
        .api::<Pod>(&engine.ctx)
        .logs(&prepared.result_pod, &params)
        .await
    {
        Ok(log) => perfsweep_benchmarks::progress::latest(&log),
        Err(error) => {
            tracing::debug!(benchmark = %target.describe(), %error, "progress not readable");
            None
        }
    }
}

/// What the agent of a failed result pod reported, if it got to report a failure.
async fn reported_failure(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
) -> Option<Failure> {
    let pod = &prepared.result_pod;
    let log = read_log(engine, target, pod).await.ok()?.ok()?;
    match outcome::evaluate::<Value>(&log, target.info.kind, &prepared.result_role, pod) {
        Err(failure) if failure.reason != outcome::UNPARSEABLE => Some(failure),
        _ => None,
    }
}

/// A result log the API server will not give (or not within the timeout).
const RESULT_UNREADABLE: &str = "ResultUnreadable";

/// The agent container's log; a log the API server will not give (the pod or its node
/// is gone) is a failure, other errors (the kubelet unreachable, the API server
/// unavailable) are retried until the benchmark's deadline (`on_operator_error`).
async fn read_log(
    engine: &Engine,
    target: &Target,
    pod: &str,
) -> Result<Result<String, Failure>, Error> {
    let params = LogParams {
        container: Some(AGENT_CONTAINER.to_owned()),
        ..LogParams::default()
    };
    match target.api::<Pod>(&engine.ctx).logs(pod, &params).await {
        Ok(log) => Ok(Ok(log)),
        Err(kube::Error::Api(status))
            if (400..500).contains(&status.code) && status.code != 429 =>
        {
            Ok(Err(Failure::new(
                RESULT_UNREADABLE,
                format!("pod {pod}: the log cannot be read: {}", status.message),
            )))
        }
        Err(source) => Err(Error::Kube {
            action: format!(
                "reading the log of pod {}/{pod} of {}",
                target.namespace,
                target.describe()
            ),
            source,
        }),
    }
}

/// The status of a benchmark that ended with `outcome`.
fn finished<R: Clone>(
    status: &BenchmarkStatus<R>,
    target: &Target,
    outcome: Result<Success<R>, Failure>,
    now: Timestamp,
) -> BenchmarkStatus<R> {
    let mut status = status.clone();
    status.observed_generation = target.generation;
    status.finished_at = Some(Time(now));
    status.progress = None;
    let generation = target.generation;
    // Conditions describe the present: the pods are about to be deleted, and whatever
    // the operator failed at before is settled by the outcome.
    status
        .conditions
        .retain(|c| c.type_ != OPERATOR_ERROR_CONDITION);
    if condition_of(&status, "Ready").is_some() {
        set_condition(
            &mut status.conditions,
            condition(
                "Ready",
                condition_status::FALSE,
                "Finished",
                "the benchmark has finished; its pods are deleted",
                generation,
                now,
            ),
        );
    }
    match outcome {
        Ok(success) => {
            status.phase = Some(Phase::Succeeded);
            status.started_at.get_or_insert(Time(now));
            status.result = Some(success.result);
            status.summary = success.summary;
            let evidence = success
                .evidence_sha256
                .map(|digest| format!(" (raw output SHA-256 {digest})"))
                .unwrap_or_default();
            set_condition(
                &mut status.conditions,
                condition(
                    "Completed",
                    condition_status::TRUE,
                    "ResultParsed",
                    format!("the result was read from the tool's output{evidence}"),
                    generation,
                    now,
                ),
            );
        }
        Err(failure) => {
            status.phase = Some(Phase::Failed);
            for type_ in ["Failed", "Completed"] {
                let value = if type_ == "Failed" {
                    condition_status::TRUE
                } else {
                    condition_status::FALSE
                };
                set_condition(
                    &mut status.conditions,
                    condition(
                        type_,
                        value,
                        &failure.reason,
                        bounded(&failure.message),
                        generation,
                        now,
                    ),
                );
            }
        }
    }
    status
}

/// The verdict of the benchmark's acceptance criteria on its result; `None` without
/// criteria.
fn judge<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    result: &K::Result,
) -> Option<acceptance::Verdict> {
    let object = serde_json::to_value(benchmark).ok()?;
    let result = serde_json::to_value(result).ok()?;
    acceptance::judge(target.info, object.get("spec")?, &result)
}

/// The `Accepted` condition: which criteria failed and by how much, or that all were met.
fn accepted_condition(
    verdict: &acceptance::Verdict,
    target: &Target,
    now: Timestamp,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    condition(
        acceptance::CONDITION,
        if verdict.accepted {
            condition_status::TRUE
        } else {
            condition_status::FALSE
        },
        verdict.reason(),
        bounded(&verdict.message()),
        target.generation,
        now,
    )
}

/// Condition messages are limited (32 KiB); failure messages come from tools and pods.
const MAX_MESSAGE_CHARS: usize = 4096;

fn bounded(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut out: String = message.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    out.push('…');
    out
}

/// A finished benchmark: record the outcome, announce it, delete what it created.
async fn conclude<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    old: &BenchmarkStatus<K::Result>,
    status: &BenchmarkStatus<K::Result>,
    failure: Option<&Failure>,
    evidence: Option<&str>,
    rendered: Option<&Rendered>,
    engine: &Engine,
) -> Result<Action, Error> {
    if !write_status(benchmark, engine, target, old, status).await? {
        return Ok(Action::requeue(STALE_RETRY));
    }
    match failure {
        Some(failure) => {
            publish(
                engine,
                benchmark,
                EventType::Warning,
                &failure.reason,
                "Run",
                &failure.message,
            )
            .await;
        }
        None => {
            let note = match &status.summary {
                Some(summary) => format!("Succeeded: {summary}"),
                None => "Succeeded".to_owned(),
            };
            publish(
                engine,
                benchmark,
                EventType::Normal,
                "Succeeded",
                "Run",
                &note,
            )
            .await;
            let rejected = status
                .conditions
                .iter()
                .find(|c| c.type_ == acceptance::CONDITION && c.status == condition_status::FALSE);
            if let Some(rejected) = rejected {
                publish(
                    engine,
                    benchmark,
                    EventType::Warning,
                    "NotAccepted",
                    "Judge",
                    &rejected.message,
                )
                .await;
            }
        }
    }
    if let Some(digest) = evidence {
        let patch = json!({"metadata": {"annotations": {EVIDENCE_ANNOTATION: digest}}});
        target
            .api::<K>(&engine.ctx)
            .patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Error::kube(format!(
                "annotating {} with its evidence digest",
                target.describe()
            )))?;
    }
    release(engine, target, rendered).await?;
    Ok(Action::await_change())
}

/// Writes `status` unless it equals `old` (condition timestamps aside), on the
/// resourceVersion it was decided on. `false`: the benchmark changed meanwhile.
async fn write_status<K: Benchmark>(
    benchmark: &K,
    engine: &Engine,
    target: &Target,
    old: &BenchmarkStatus<K::Result>,
    status: &BenchmarkStatus<K::Result>,
) -> Result<bool, Error> {
    if !plumbing::status_differs(old, status, |s| &mut s.conditions) {
        return Ok(true);
    }
    let api = target.api::<K>(&engine.ctx);
    plumbing::apply_status(&api, benchmark, status, target.resource_version.as_deref()).await
}

/// Largest report kept whole in the evidence ConfigMap; ConfigMaps hold at most 1 MiB.
const EVIDENCE_LIMIT: usize = 900 * 1024;

/// Keeps the agent's report (of a succeeded run), raw output included, and the
/// environment the benchmark ran in, in a ConfigMap owned by the benchmark, so the
/// evidence behind the result outlives the pods. A raw output too big for a ConfigMap
/// is left out (its digest stays, and the log had it).
async fn keep_evidence(
    engine: &Engine,
    target: &Target,
    report: Option<&perfsweep_benchmarks::report::AgentReport>,
    environment: &perfsweep_benchmarks::record::Environment,
) -> Result<(), Error> {
    let json = |text: Result<String, serde_json::Error>, what: &'static str| {
        text.map_err(|source| Error::Serialize { what, source })
    };
    let mut data = BTreeMap::from([(
        labels::EVIDENCE_ENVIRONMENT_KEY.to_owned(),
        json(serde_json::to_string(environment), "the environment")?,
    )]);
    if let Some(report) = report {
        let mut report = report.clone();
        let mut text = json(serde_json::to_string(&report), "the agent report")?;
        if text.len() > EVIDENCE_LIMIT {
            report.raw_output = None;
            text = json(serde_json::to_string(&report), "the agent report")?;
        }
        data.insert(labels::EVIDENCE_REPORT_KEY.to_owned(), text);
    }
    let name = labels::evidence_config_map(&target.name);
    let kept = caches::owned_by(&engine.owned.config_maps, &target.namespace, &target.uid);
    if kept.iter().any(|map| map.name_any() == name) {
        // Kept by an earlier reconcile whose status write lost a race.
        return Ok(());
    }
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(target.namespace.clone()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
                (labels::BENCHMARK.to_owned(), target.name.clone()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: perfsweep_benchmarks::API_VERSION.to_owned(),
                kind: target.info.kind.to_owned(),
                name: target.name.clone(),
                uid: target.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    match target
        .api::<ConfigMap>(&engine.ctx)
        .create(&PostParams::default(), &map)
        .await
    {
        Ok(_) => Ok(()),
        // Kept by an earlier reconcile whose status write lost a race.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!(
                "keeping the evidence of {} in ConfigMap {name}",
                target.describe()
            ),
            source,
        }),
    }
}

/// Where the benchmark's pods ran: their nodes (and those nodes' recorded labels), the
/// image digests they ran, the Kubernetes version. Best effort: a node that cannot be
/// read leaves its labels out, and never fails the benchmark.
async fn observe_environment(
    engine: &Engine,
    target: &Target,
    pods: &[Pod],
) -> perfsweep_benchmarks::record::Environment {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(engine.ctx.client.clone());
    let mut found = Vec::new();
    let hosts: std::collections::BTreeSet<&str> = pods
        .iter()
        .filter_map(|pod| pod.spec.as_ref()?.node_name.as_deref())
        .collect();
    for host in hosts {
        // Each node the pods ran on, by name: a benchmark runs on a few nodes, and
        // watching every node of a cluster for that would cost more than it saves.
        match nodes.get_opt(host).await {
            Ok(node) => found.extend(node),
            Err(error) => tracing::debug!(
                benchmark = %target.describe(), node = host, %error,
                "cannot read the node; its labels are left out of the record"
            ),
        }
    }
    crate::records::observe_environment(pods, &found, engine.kubernetes_version.as_deref())
}

/// Deletes what the benchmark created that is still there: pods, Service, claims and
/// PodGroup as the caches show them, and the rendered Secrets by name (Secrets are not
/// watched: that would need read access to every Secret in the namespace, which the
/// operator does not ask for). Idempotent: what is already gone is skipped.
async fn release(
    engine: &Engine,
    target: &Target,
    rendered: Option<&Rendered>,
) -> Result<(), Error> {
    let ctx = &engine.ctx;
    let owned = &engine.owned;
    let (namespace, uid) = (target.namespace.as_str(), target.uid.as_str());
    let pods = caches::left_to_delete(&owned.pods, namespace, uid);
    delete_named(&target.api::<Pod>(ctx), &pods, target).await?;
    let services = caches::left_to_delete(&owned.services, namespace, uid);
    delete_named(&target.api::<Service>(ctx), &services, target).await?;
    if let Some(rendered) = rendered {
        let secrets: Vec<String> = rendered.secrets.iter().map(ResourceExt::name_any).collect();
        delete_named(&target.api::<Secret>(ctx), &secrets, target).await?;
    }
    let claims = caches::left_to_delete(&owned.claims, namespace, uid);
    delete_named(&target.api::<PersistentVolumeClaim>(ctx), &claims, target).await?;
    if let Some(groups) = &owned.pod_groups {
        let groups = caches::left_to_delete(groups, namespace, uid);
        delete_named(&target.api::<PodGroup>(ctx), &groups, target).await?;
    }
    Ok(())
}

async fn delete_named<T>(api: &Api<T>, names: &[String], target: &Target) -> Result<(), Error>
where
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    for name in names {
        plumbing::delete_if_present(api, name)
            .await
            .map_err(Error::kube(format!(
                "deleting {} {}/{name} of {}",
                T::kind(&()),
                target.namespace,
                target.describe()
            )))?;
    }
    Ok(())
}

async fn publish<K: Benchmark>(
    engine: &Engine,
    benchmark: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    plumbing::publish(&engine.ctx.recorder, benchmark, type_, reason, action, note).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_controller() {
        let registered: Vec<String> = registrations().iter().map(|r| (r.kind)()).collect();
        let kinds: Vec<String> = registry::kind_names()
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(registered, kinds);
    }

    fn target(name: &str) -> Target {
        Target {
            info: registry::lookup("IPerf").expect("IPerf is registered"),
            name: name.into(),
            namespace: "ns".into(),
            uid: "u-1".into(),
            generation: Some(1),
            resource_version: Some("7".into()),
            created: Timestamp::UNIX_EPOCH,
            defaults: Default::default(),
        }
    }

    fn iperf(name: &str, spec: Value) -> kinds::iperf::IPerf {
        serde_json::from_value(json!({
            "apiVersion": "perfsweep.io/v1alpha1",
            "kind": "IPerf",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1"},
            "spec": spec,
        }))
        .expect("a valid IPerf")
    }

    #[test]
    fn prepares_an_iperf_as_a_server_and_a_client() {
        let prepared = prepare(&iperf("b", json!({"timeout": "90s"})), &target("b"))
            .unwrap_or_else(|f| panic!("{f:?}"));
        assert_eq!(prepared.pods, ["b-server-0", "b-client-0"]);
        assert_eq!(prepared.result_pod, "b-client-0");
        assert_eq!(prepared.timeout, Duration::from_secs(90));
        assert!(prepared.rendered.pod_group.is_some(), "Volcano by default");
        for pod in &prepared.rendered.pods {
            let owner = &pod.owner_references()[0];
            assert_eq!((owner.uid.as_str(), owner.controller), ("u-1", Some(true)));
        }
    }

    #[test]
    fn installation_defaults_fill_what_the_spec_leaves_unset() {
        let mut with_defaults = target("d");
        with_defaults.defaults = perfsweep_benchmarks::common::ClusterDefaults {
            image_registry: Some("mirror.example/ps".into()),
            scheduler: Some(perfsweep_benchmarks::common::Scheduler::Default),
            queue: Some("ignored-without-volcano".into()),
        };
        let prepared =
            prepare(&iperf("d", json!({})), &with_defaults).unwrap_or_else(|f| panic!("{f:?}"));
        assert!(
            prepared.rendered.pod_group.is_none(),
            "the default scheduler"
        );
        let image = prepared.rendered.pods[0]
            .spec
            .as_ref()
            .map(|s| s.containers[0].image.clone());
        assert_eq!(
            image.flatten().as_deref(),
            Some(concat!(
                "mirror.example/ps/iperf:",
                env!("CARGO_PKG_VERSION")
            ))
        );
        let own = prepare(&iperf("e", json!({"image": "mine:1"})), &with_defaults)
            .unwrap_or_else(|f| panic!("{f:?}"));
        let image = own.rendered.pods[0]
            .spec
            .as_ref()
            .map(|s| s.containers[0].image.clone());
        assert_eq!(
            image.flatten().as_deref(),
            Some("mine:1"),
            "a spec's own image wins"
        );
    }

    #[test]
    fn an_invalid_spec_is_refused_with_its_path() {
        // Deserializing skips validation: the schema's minimum is checked by prepare.
        let failure = prepare(&iperf("b", json!({"streams": 0})), &target("b"))
            .err()
            .expect("streams 0 is invalid");
        assert_eq!(failure.reason, "InvalidSpec");
        assert!(
            failure.message.contains("spec.streams"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn long_messages_are_bounded() {
        assert_eq!(bounded("short"), "short");
        let long = bounded(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), MAX_MESSAGE_CHARS);
        assert!(long.ends_with('…'));
    }
}
