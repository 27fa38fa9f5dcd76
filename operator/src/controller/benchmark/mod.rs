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
//! only created after such a write (or, with nothing new to write, a re-read) succeeded:
//! a reconcile working from a stale cache can neither overwrite a newer status nor bring
//! back pods of a finished benchmark. A gang's members are owned by its PodGroup, so a
//! finished benchmark is cleaned up with one delete.

mod apply;
mod assess;
mod decide;
pub mod export;
pub mod kind;
mod observe;
pub mod outcome;
mod prepare;
mod status;
mod target;

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
use kube::core::{DeserializeGuard, NamespaceResourceScope};
use kube::runtime::Controller;
use kube::runtime::controller::{self, Action};
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt};
use perfsweep_benchmarks::acceptance;
use perfsweep_benchmarks::common::CommonSpec;
use perfsweep_benchmarks::kinds;
use perfsweep_benchmarks::labels;
use perfsweep_benchmarks::plan::process_name;
use perfsweep_benchmarks::registry::{self, KindInfo};
use perfsweep_benchmarks::render::{self, BenchmarkRef, RenderError, Rendered};
use perfsweep_benchmarks::status::{
    BenchmarkStatus, Phase, condition, condition_status, set_condition,
};
use perfsweep_benchmarks::volcano::PodGroup;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use self::apply::{create_missing, keep_evidence, publish, release};
use self::assess::{Assessment, Failure, Reason};
pub use self::kind::Benchmark;
use self::observe::{
    Observation, observe, observe_environment, read_progress, read_result, reported_failure,
};
use self::outcome::Success;
use self::prepare::{Prepared, prepare};
use self::status::{
    Claim, accepted_condition, bounded, claim, condition_of, finished, write_status,
};
use self::target::Target;
use super::caches::{self, Owned, Routes, Trigger};
use super::{Context, Error, Settings, default_watcher, plumbing, scoped_api, unreadable};

/// The container that runs `perfsweep agent` in every benchmark pod; its log ends with
/// the agent's report.
pub const AGENT_CONTAINER: &str = render::pod::CONTAINER_NAME;

/// Annotation on a finished benchmark: SHA-256 of the tool's raw output its result was
/// parsed from (the output itself is in the result pod's log and the agent's report).
pub const EVIDENCE_ANNOTATION: &str = "perfsweep.io/evidence-sha256";

/// How often a running benchmark is looked at even without a change.
const RESYNC: Duration = Duration::from_mins(1);
/// How often a running benchmark whose tool reports progress is looked at, to refresh
/// `status.progress` (one bounded read of the result pod's log tail each time).
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
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
        let timeout = perfsweep_benchmarks::duration::format(timeout);
        match self {
            Self::ReadingResult => Failure::new(
                Reason::ResultUnreadable,
                format!("the result could not be read within the timeout of {timeout}: {error}"),
            ),
            stage => Failure::new(
                Reason::TimedOut,
                format!(
                    "the benchmark did not finish within its timeout of {timeout} ({}; last error: {error})",
                    stage.describe()
                ),
            ),
        }
    }
}

/// The reason of the `OperatorError` condition and event: what kind of failure it was.
fn operator_error_reason(error: &Error) -> Reason {
    match error {
        Error::Kube {
            source: kube::Error::Api(status),
            ..
        } => match status.code {
            403 => Reason::Forbidden,
            429 | 500.. => Reason::APIUnavailable,
            _ => Reason::APIError,
        },
        // No answer at all: connection refused, TLS, timeouts.
        Error::Kube { .. } => Reason::APIUnavailable,
        Error::MissingNamespace { .. } | Error::Serialize { .. } | Error::Random { .. } => {
            Reason::OperatorError
        }
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
    /// What reconciles created and deleted that the caches may not show yet.
    recent: Arc<caches::Recent>,
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
    let recent = Arc::new(caches::Recent::default());
    let (owned, reflect) = caches::reflect(
        &ctx.client,
        settings.namespace.as_deref(),
        volcano,
        routes,
        &recent,
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
        recent,
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

/// Kind `K`'s controller, started once the API server serves the kind: a controller
/// of a kind whose CRD is missing would only fail its watch, over and over.
fn start<K: Benchmark>(
    engine: Arc<Engine>,
    settings: &Settings,
    triggers: futures::channel::mpsc::UnboundedReceiver<Trigger>,
    shutdown: Shutdown,
) -> BoxFuture<'static, ()> {
    let config = controller::Config::default().debounce(settings.debounce);
    async move {
        let kind = K::kind(&()).into_owned();
        let served = engine.ctx.served.clone();
        let shutdown = shutdown.shared();
        tokio::select! {
            () = served.served(&kind) => {}
            () = shutdown.clone() => return,
        }
        let controller = controller::<K>(&engine, triggers);
        let metrics = engine.ctx.metrics.clone();
        if let Some(info) = registry::lookup(&kind) {
            metrics.watch_benchmarks(info, controller.store());
        }
        let store = controller.store();
        let run = controller
            .with_config(config)
            .graceful_shutdown_on(shutdown.clone())
            .run(reconcile_guarded::<K>, error_policy_guarded::<K>, engine)
            .for_each(move |result| {
                metrics.reconciled(&kind, crate::metrics::classify(&result));
                super::log_reconciled(&result);
                async {}
            });
        super::stopping_before_ready(store, run, shutdown).await;
    }
    .boxed()
}

/// The controller of kind `K`: its benchmarks, reconciled again on every change to the
/// pods and PodGroups they own (`triggers`, from the shared watches in [`caches`]). It
/// watches through [`DeserializeGuard`]: one object that does not deserialize is
/// reported ([`unreadable`]) while the others of its kind go on.
fn controller<K: Benchmark>(
    engine: &Engine,
    triggers: futures::channel::mpsc::UnboundedReceiver<Trigger>,
) -> Controller<DeserializeGuard<K>> {
    let benchmarks: Api<DeserializeGuard<K>> =
        scoped_api(&engine.ctx.client, engine.namespace.as_deref());
    Controller::new(benchmarks, default_watcher()).reconcile_on(triggers.map(caches::object_ref))
}

/// A benchmark that deserialized is reconciled; one that did not is reported, and waits
/// for a change (a fix) without retries.
/// Each reconcile runs in its own span and is timed for
/// `perfsweep_reconcile_duration_seconds`.
pub async fn reconcile_guarded<K: Benchmark>(
    guard: Arc<DeserializeGuard<K>>,
    engine: Arc<Engine>,
) -> Result<Action, Error> {
    use tracing::Instrument as _;
    let kind = K::kind(&());
    let span = tracing::info_span!(
        "reconcile",
        controller = %kind,
        namespace = %guard.namespace().unwrap_or_default(),
        name = %guard.name_any(),
    );
    let started = std::time::Instant::now();
    let metrics = engine.ctx.metrics.clone();
    let result = async {
        match &guard.0 {
            Ok(benchmark) => reconcile(benchmark, engine).await,
            Err(invalid) => {
                unreadable::report(&*guard, invalid, &engine.ctx).await;
                Ok(Action::await_change())
            }
        }
    }
    .instrument(span)
    .await;
    metrics.reconcile_took(&kind, started.elapsed());
    result
}

fn error_policy_guarded<K: Benchmark>(
    guard: Arc<DeserializeGuard<K>>,
    error: &Error,
    engine: Arc<Engine>,
) -> Action {
    match &guard.0 {
        Ok(benchmark) => error_policy(benchmark, error, engine),
        Err(_) => Action::await_change(),
    }
}

pub async fn reconcile<K: Benchmark>(benchmark: &K, engine: Arc<Engine>) -> Result<Action, Error> {
    let kind = K::kind(&());
    let Some(info) = registry::lookup(&kind) else {
        tracing::error!(%kind, "no such benchmark kind in the registry");
        return Ok(Action::await_change());
    };
    let mut target = Target::of(benchmark, info)?;
    target.defaults = engine.defaults.clone();
    if benchmark.meta().deletion_timestamp.is_some() {
        // What it created goes with it through owner references.
        return Ok(Action::await_change());
    }
    let old = benchmark.benchmark_status().cloned().unwrap_or_default();
    // Validated and built once: every step below works from this.
    let prepared = prepare(benchmark, &target);
    let mut stage = Stage::Preparing;
    let outcome = if old.phase.is_some_and(Phase::is_finished) {
        stage = Stage::CleaningUp;
        tidy_up(benchmark, &target, &old, prepared.as_ref().ok(), &engine).await
    } else {
        advance(
            benchmark,
            &mut target,
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
            on_operator_error(benchmark, &target, &old, prepared, error, stage, &engine).await
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
            reason.as_str(),
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
        reason.as_str(),
        "Reconcile",
        &message,
    )
    .await;
    Err(error)
}

pub fn error_policy<K: Benchmark>(benchmark: &K, error: &Error, engine: Arc<Engine>) -> Action {
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
        && let Ok(mut target) = Target::of(benchmark, info)
        && !benchmark
            .benchmark_status()
            .and_then(|s| s.phase)
            .is_some_and(Phase::is_finished)
    {
        target.defaults = engine.defaults.clone();
        if let Some((deadline, _)) = deadline_of(benchmark, &target) {
            let left = Timestamp::now().duration_until(deadline);
            if left.is_positive() {
                delay = delay.min(left.unsigned_abs().saturating_add(PAST_DEADLINE));
            }
        }
    }
    tracing::warn!(benchmark = %key, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// An unfinished benchmark: observe its pods (caches) → decide what they mean and what
/// to do (pure: [`decide::next`]) → create what is missing → update status while it goes
/// on; once it ends, [`finish`] it.
async fn advance<K: Benchmark>(
    benchmark: &K,
    target: &mut Target,
    mut old: BenchmarkStatus<K::Result>,
    prepared: &Result<Prepared, Failure>,
    engine: &Engine,
    stage: &mut Stage,
) -> Result<Action, Error> {
    let prepared = match prepared {
        Ok(prepared) => prepared,
        Err(failure) => {
            let status = finished(&old, target, Err(failure.clone()), Timestamp::now());
            let failure = Some(failure);
            return conclude(
                benchmark, target, &old, &status, failure, None, None, engine,
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
    let decide::Next {
        mut verdict,
        status,
        create,
    } = decide::next(target, &old, prepared, &observation, engine.volcano, now);
    if let Some(waiting) = create {
        *stage = Stage::Creating;
        if let Claim::Stale = claim(benchmark, engine, target, &mut old, &waiting).await? {
            return Ok(Action::requeue(STALE_RETRY));
        }
        if let Err(failure) = create_missing(engine, target, prepared, &observation).await? {
            verdict = Assessment::Failed { failure, pod: None };
        }
    }
    if let Some(going_on) = decide::going_on(&status, &verdict, now) {
        return keep_going(benchmark, target, &old, going_on, prepared, engine, stage).await;
    }
    let ended = Ended {
        old: &old,
        status,
        verdict,
        observation: &observation,
        prepared,
        now,
    };
    finish(benchmark, target, ended, engine, stage).await
}

/// A benchmark whose pods ended (or failed): what [`finish`] needs.
struct Ended<'a, R> {
    old: &'a BenchmarkStatus<R>,
    /// Its status as of this reconcile, before the outcome.
    status: BenchmarkStatus<R>,
    verdict: Assessment,
    observation: &'a Observation,
    prepared: &'a Prepared,
    now: Timestamp,
}

/// Reads the outcome of a benchmark that ended, keeps the evidence of a failed one
/// (where it ran), and concludes it.
async fn finish<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    ended: Ended<'_, K::Result>,
    engine: &Engine,
    stage: &mut Stage,
) -> Result<Action, Error> {
    let Ended {
        old,
        mut status,
        verdict,
        observation,
        prepared,
        now,
    } = ended;
    if verdict == Assessment::ReadResult {
        *stage = Stage::ReadingResult;
    }
    let (failure, evidence) = read_outcome::<K>(
        target,
        &mut status,
        verdict,
        observation,
        prepared,
        engine,
        now,
    )
    .await?;
    *stage = Stage::CleaningUp;
    if let Some(failure) = &failure {
        // What there is of a failed run: where it ran, for its record.
        let environment = observe_environment(engine, target, &observation.pods).await;
        keep_evidence(engine, target, None, &environment).await?;
        status = finished(&status, target, Err(failure.clone()), now);
    }
    let (failure, evidence) = (failure.as_ref(), evidence.as_deref());
    let rendered = Some(&prepared.rendered);
    conclude(
        benchmark, target, old, &status, failure, evidence, rendered, engine,
    )
    .await
}

/// A benchmark that goes on: refresh its progress line, write its status, announce that
/// it runs; look again when [`decide::going_on`] says.
async fn keep_going<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    old: &BenchmarkStatus<K::Result>,
    going_on: decide::GoingOn<K::Result>,
    prepared: &Prepared,
    engine: &Engine,
    stage: &mut Stage,
) -> Result<Action, Error> {
    let decide::GoingOn {
        mut status,
        mut recheck_in,
        running,
    } = going_on;
    if running {
        *stage = Stage::Running;
        if target.info.reports_progress {
            if let Some(progress) = read_progress(engine, target, prepared).await {
                status.progress = Some(progress);
            }
            recheck_in = recheck_in.min(PROGRESS_EVERY);
        }
    }
    if !write_status(benchmark, engine, target, old, &status).await? {
        return Ok(Action::requeue(STALE_RETRY));
    }
    for (type_, reason, action, note) in decide::going_on_events(old, &status, prepared.pods.len())
    {
        publish(engine, benchmark, type_, reason, action, &note).await;
    }
    Ok(Action::requeue(recheck_in))
}

/// A benchmark that ended: its result (kept as evidence, judged by its acceptance
/// criteria, recorded in `status`) or its failure, and the digest of its evidence.
#[allow(clippy::too_many_arguments)]
async fn read_outcome<K: Benchmark>(
    target: &Target,
    status: &mut BenchmarkStatus<K::Result>,
    verdict: Assessment,
    observation: &Observation,
    prepared: &Prepared,
    engine: &Engine,
    now: Timestamp,
) -> Result<(Option<Failure>, Option<String>), Error> {
    match verdict {
        Assessment::ReadResult => match read_result::<K::Result>(engine, target, prepared).await? {
            Ok(success) => {
                let environment = observe_environment(engine, target, &observation.pods).await;
                keep_evidence(engine, target, Some(&success.report), &environment).await?;
                let evidence = success.evidence_sha256.clone();
                let verdict = success.acceptance.clone();
                *status = finished(status, target, Ok(success), now);
                if let Some(verdict) = verdict {
                    set_condition(
                        &mut status.conditions,
                        accepted_condition(&verdict, target, now),
                    );
                }
                Ok((None, evidence))
            }
            Err(failure) => Ok((Some(failure), None)),
        },
        Assessment::Failed { failure, pod } => {
            // A deleted pod's own report (interrupted, or a result it finished in its
            // grace period) does not change that it was deleted mid-run.
            if pod.as_deref() == Some(prepared.result_pod.as_str())
                && failure.reason != Reason::PodDeleted
            {
                let reported = reported_failure(engine, target, prepared).await;
                Ok((Some(reported.unwrap_or(failure)), None))
            } else {
                Ok((Some(failure), None))
            }
        }
        // `decide::going_on` keeps these.
        Assessment::Waiting { .. } | Assessment::Running { .. } => Ok((None, None)),
    }
}

/// A finished benchmark: record the outcome, announce it, delete what it created.
#[allow(clippy::too_many_arguments)]
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
    for (type_, reason, action, note) in decide::ended_events(status, failure) {
        publish(engine, benchmark, type_, reason, action, &note).await;
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

#[cfg(test)]
mod tests {
    use super::status::MAX_MESSAGE_CHARS;
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
            defaults: perfsweep_benchmarks::common::ClusterDefaults::default(),
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
