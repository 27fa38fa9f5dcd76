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
mod network;
mod observe;
pub mod outcome;
mod prepare;
mod secrets;
mod status;
mod step;
mod target;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use jiff::Timestamp;
use kube::api::Api;
use kube::core::DeserializeGuard;
use kube::runtime::controller::{self, Action};
use kube::runtime::events::EventType;
use kube::runtime::{Controller, WatchStreamExt as _};
use kube::{Client, Resource, ResourceExt};
use perfsweep_benchmarks::api::status::{
    BenchmarkStatus, Phase, condition, condition_status, set_condition,
};
use perfsweep_benchmarks::api::volcano::PodGroup;
use perfsweep_benchmarks::kinds;
use perfsweep_benchmarks::kinds::registry;
use perfsweep_benchmarks::render::{self, Rendered};

use self::apply::{create_missing, keep_evidence, publish, release};
use self::assess::{Assessment, Failure, Reason};
pub use self::kind::Benchmark;
use self::observe::{
    Observation, observe, observe_environment, read_progress, read_result, reported_failure,
};
use self::prepare::{Prepared, prepare};
use self::status::{Claim, accepted_condition, bounded, claim, condition_of, finished};
use self::step::{At, Halt, Note, Stage, Stuck, Update};
use self::target::Target;
use super::caches::{self, Owned, Routes, Trigger};
use super::{Context, Error, Settings, default_watcher, scoped_api, unreadable};

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
        Error::Stuck { source, .. } => operator_error_reason(source),
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
        Registration::of::<kinds::hpcc::HPCC>(),
        Registration::of::<kinds::llm::LLMInference>(),
    ]
}

/// State shared by the benchmark controllers.
pub struct Engine {
    ctx: Arc<Context>,
    namespace: Option<String>,
    /// Whether the cluster serves Volcano's PodGroups (checked once at start).
    volcano: bool,
    defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults,
    /// The API server's version (`v1.31.2`), asked once at start, for result records.
    kubernetes_version: Option<String>,
    /// How finished benchmarks are exported to their `outputLocation`.
    export: export::ExportPolicy,
    /// What the benchmarks own, as last seen by the watches: reconciles read these and
    /// list nothing.
    owned: Owned,
    /// What reconciles created and deleted that the caches may not show yet.
    recent: Arc<caches::Recent>,
    /// Turns at reading results, shared by every kind's controller (see
    /// [`observe::RESULT_READS_AT_ONCE`]).
    result_reads: tokio::sync::Semaphore,
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
        result_reads: tokio::sync::Semaphore::new(observe::RESULT_READS_AT_ONCE),
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

/// Reconciles of one kind that run at once.
const RECONCILES_AT_ONCE: u16 = 16;

/// Kind `K`'s controller, started once the API server serves the kind: a controller
/// of a kind whose CRD is missing would only fail its watch, over and over.
fn start<K: Benchmark>(
    engine: Arc<Engine>,
    settings: &Settings,
    triggers: futures::channel::mpsc::UnboundedReceiver<Trigger>,
    shutdown: Shutdown,
) -> BoxFuture<'static, ()> {
    // Bounded, so that a burst of finishing benchmarks cannot hold an unbounded number
    // of reconciles (and what they read) at once.
    let config = controller::Config::default()
        .debounce(settings.debounce)
        .concurrency(RECONCILES_AT_ONCE);
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
    let (store, writer) = kube::runtime::reflector::store();
    let changes = kube::runtime::reflector::reflector(
        writer,
        kube::runtime::watcher(benchmarks, default_watcher()).modify(|guard| {
            if let Ok(benchmark) = &mut guard.0 {
                super::without_managed_fields(benchmark);
            }
        }),
    )
    // A failing list or watch (the CRD deleted, 403) is retried with backoff.
    .default_backoff()
    .applied_objects();
    Controller::for_stream(changes, store).reconcile_on(triggers.map(caches::object_ref))
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

/// One look at a benchmark, in the steps its files are named for: dereference
/// ([`target`]) → validate and build, once ([`prepare`]) → observe ([`observe`]) and
/// decide ([`decide`], pure) → apply ([`apply`]) → update status ([`status::update`],
/// the one place a reconcile's status is written). Every step that talks to the cluster
/// returns a [`Step`]: done, the benchmark fails, or the operator is [`Stuck`] at a
/// stage, which becomes an `OperatorError` condition (or, past the deadline, a failure
/// naming the stage).
pub async fn reconcile<K: Benchmark>(benchmark: &K, engine: Arc<Engine>) -> Result<Action, Error> {
    let Some(mut target) = dereference(benchmark, &engine)? else {
        return Ok(Action::await_change());
    };
    let stored = benchmark.benchmark_status().cloned().unwrap_or_default();
    let prepared = prepare(benchmark, &target);
    let update = match &prepared {
        _ if stored.phase.is_some_and(Phase::is_finished) => {
            let rendered = prepared.as_ref().ok().map(|p| &p.rendered);
            tidy_up(benchmark, &target, &stored, rendered, &engine).await
        }
        Ok(prepared) => advance(benchmark, &mut target, &stored, prepared, &engine).await,
        Err(failure) => Ok(Update::ended(
            &stored,
            finished(&stored, &target, Err(failure.clone()), Timestamp::now()),
            Some(failure),
            None,
            Stage::Preparing,
        )),
    };
    let prepared = prepared.as_ref().ok();
    let written = match update {
        Ok(update) => status::update(benchmark, &target, update, prepared, &engine).await,
        Err(stuck) => Err(stuck),
    };
    match written {
        Ok(action) => {
            engine.ctx.backoff.reset(&target.describe());
            Ok(action)
        }
        Err(stuck) => on_stuck(benchmark, &target, &stored, prepared, stuck, &engine).await,
    }
}

/// The benchmark being reconciled, with the cluster's defaults; `None` for one being
/// deleted (what it created goes with it through owner references) or of a kind the
/// registry does not know.
fn dereference<K: Benchmark>(benchmark: &K, engine: &Engine) -> Result<Option<Target>, Error> {
    let kind = K::kind(&());
    let Some(info) = registry::lookup(&kind) else {
        tracing::error!(%kind, "no such benchmark kind in the registry");
        return Ok(None);
    };
    if benchmark.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    let mut target = Target::of(benchmark, info)?;
    target.defaults = engine.defaults.clone();
    target.covering_set = engine
        .ctx
        .set_policies
        .covering(benchmark.owner_references());
    target.token_source = engine.ctx.set_tokens.source_for(
        &target.namespace,
        info.kind,
        &target.name,
        benchmark.owner_references(),
    );
    Ok(Some(target))
}

/// A finished benchmark: delete what is left of it, drop an `OperatorError` condition
/// that no longer holds, and export it.
async fn tidy_up<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    stored: &BenchmarkStatus<K::Result>,
    rendered: Option<&Rendered>,
    engine: &Engine,
) -> Result<Update<K::Result>, Stuck> {
    release(engine, target, rendered)
        .await
        .at(Stage::CleaningUp)?;
    if condition_of(stored, OPERATOR_ERROR_CONDITION).is_some() {
        let mut status = stored.clone();
        status
            .conditions
            .retain(|c| c.type_ != OPERATOR_ERROR_CONDITION);
        // The export (which writes status too) follows on the next look.
        return Ok(Update {
            status,
            ..Update::nothing(stored, Action::requeue(STALE_RETRY), Stage::CleaningUp)
        });
    }
    export::export(benchmark, target, engine)
        .await
        .at(Stage::CleaningUp)
}

/// A request of this reconcile failed. Past the benchmark's deadline the benchmark ends,
/// naming the stage it was stuck in and the error; before it, the error is shown in the
/// status (`OperatorError`) and as a Warning event, and the reconcile is retried.
async fn on_stuck<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    stored: &BenchmarkStatus<K::Result>,
    prepared: Option<&Prepared>,
    stuck: Stuck,
    engine: &Engine,
) -> Result<Action, Error> {
    let Stuck { stage, error } = stuck;
    let now = Timestamp::now();
    let running = !stored.phase.is_some_and(Phase::is_finished);
    let deadline = prepared
        .filter(|_| running)
        .map(|prepared| assess::later(target.created, prepared.timeout));
    if let Some(prepared) = prepared
        && let Some(deadline) = deadline
        && deadline <= now
    {
        let timeout = prepared.timeout;
        let failure = stage.failure(&error, timeout);
        tracing::warn!(benchmark = %target.describe(), %error, stage = stage.describe(), "the deadline passed; the benchmark fails");
        let status = finished(stored, target, Err(failure.clone()), now);
        let ended = Update::ended(stored, status, Some(&failure), None, Stage::CleaningUp);
        return status::update(benchmark, target, ended, Some(prepared), engine)
            .await
            .map_err(|stuck| stuck.error);
    }
    let reason = operator_error_reason(&error);
    let message = bounded(&format!("{}: {error}", stage.describe()));
    let mut status = stored.clone();
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
    let shown = Update {
        status,
        ..Update::nothing(stored, Action::await_change(), stage)
    };
    if let Err(write) = status::update(benchmark, target, shown, prepared, engine).await {
        tracing::warn!(benchmark = %target.describe(), error = %write.error, "cannot record the operator's error in status");
    }
    // Announced whether or not the status could say it: the event may get through
    // where the status write did not.
    publish(
        engine,
        benchmark,
        EventType::Warning,
        reason.as_str(),
        "Reconcile",
        &message,
    )
    .await;
    Err(Error::Stuck {
        stage: stage.describe(),
        deadline,
        source: Box::new(error),
    })
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
    // bounded by its timeout, which the error carries.
    if let Error::Stuck {
        deadline: Some(deadline),
        ..
    } = error
    {
        let left = Timestamp::now().duration_until(*deadline);
        if left.is_positive() {
            delay = delay.min(left.unsigned_abs().saturating_add(PAST_DEADLINE));
        }
    }
    tracing::warn!(benchmark = %key, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// An unfinished benchmark: observe its pods (caches) → decide what they mean and what
/// to do (pure: [`decide::next`]) → create what is missing → the status it goes on
/// with; once it ends, [`finish`] it.
async fn advance<K: Benchmark>(
    benchmark: &K,
    target: &mut Target,
    stored: &BenchmarkStatus<K::Result>,
    prepared: &Prepared,
    engine: &Engine,
) -> Result<Update<K::Result>, Stuck> {
    let mut stored = stored.clone();
    let observation = observe(engine, target, prepared);
    let now = Timestamp::now();
    let decide::Next {
        mut verdict,
        status,
        create,
    } = decide::next(target, &stored, prepared, &observation, engine.volcano, now);
    if let Some(waiting) = create {
        // The one status write before the update: it claims the benchmark, so a stale
        // copy creates nothing.
        let claimed = claim(benchmark, engine, target, &mut stored, &waiting);
        if let Claim::Stale = claimed.await.at(Stage::Creating)? {
            return Ok(Update::nothing(
                &stored,
                Action::requeue(STALE_RETRY),
                Stage::Creating,
            ));
        }
        match create_missing(engine, target, prepared, &observation).await {
            Ok(_) => {}
            Err(Halt::Fails(failure)) => verdict = Assessment::Failed { failure, pod: None },
            Err(Halt::Stuck(stuck)) => return Err(stuck),
        }
    }
    if let Some(going_on) = decide::going_on(&status, &verdict, now) {
        return Ok(keep_going(target, stored, going_on, prepared, engine).await);
    }
    let ended = Ending {
        stored: &stored,
        status,
        verdict,
        observation: &observation,
        prepared,
        now,
    };
    finish::<K>(target, ended, engine).await
}

/// A benchmark whose pods ended (or failed): what [`finish`] needs.
struct Ending<'a, R> {
    stored: &'a BenchmarkStatus<R>,
    /// Its status as of this reconcile, before the outcome.
    status: BenchmarkStatus<R>,
    verdict: Assessment,
    observation: &'a Observation,
    prepared: &'a Prepared,
    now: Timestamp,
}

/// Reads the outcome of a benchmark that ended, keeps the evidence of a failed one
/// (where it ran): the status it ends with.
async fn finish<K: Benchmark>(
    target: &Target,
    ending: Ending<'_, K::Result>,
    engine: &Engine,
) -> Result<Update<K::Result>, Stuck> {
    let Ending {
        stored,
        mut status,
        verdict,
        observation,
        prepared,
        now,
    } = ending;
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
    if let Some(failure) = &failure {
        // What there is of a failed run: where it ran, for its record.
        let environment = observe_environment(engine, target, &observation.pods).await;
        keep_evidence(engine, target, None, &environment)
            .await
            .at(Stage::CleaningUp)?;
        status = finished(&status, target, Err(failure.clone()), now);
    }
    Ok(Update::ended(
        stored,
        status,
        failure.as_ref(),
        evidence,
        Stage::CleaningUp,
    ))
}

/// A benchmark that goes on: its progress line refreshed, the status it runs or waits
/// with and what that announces; look again when [`decide::going_on`] says.
async fn keep_going<R: Clone>(
    target: &Target,
    stored: BenchmarkStatus<R>,
    going_on: decide::GoingOn<R>,
    prepared: &Prepared,
    engine: &Engine,
) -> Update<R> {
    let decide::GoingOn {
        mut status,
        mut recheck_in,
        running,
    } = going_on;
    if running && target.info.reports_progress {
        if let Some(progress) = read_progress(engine, target, prepared).await {
            status.progress = Some(progress);
        }
        recheck_in = recheck_in.min(PROGRESS_EVERY);
    }
    let events = decide::going_on_events(&stored, &status, prepared.pods.len())
        .into_iter()
        .map(Note::from)
        .collect();
    let stage = if stored.started_at.is_some() || running {
        Stage::Running
    } else {
        Stage::WaitingForPods
    };
    Update {
        stored,
        status,
        events,
        ended: None,
        then: Action::requeue(recheck_in),
        stage,
    }
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
) -> Result<(Option<Failure>, Option<String>), Stuck> {
    match verdict {
        Assessment::ReadResult => match read_result::<K::Result>(engine, target, prepared).await {
            Ok(success) => {
                let environment = observe_environment(engine, target, &observation.pods).await;
                keep_evidence(engine, target, Some(&success.report), &environment)
                    .await
                    .at(Stage::ReadingResult)?;
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
            Err(Halt::Fails(failure)) => Ok((Some(failure), None)),
            Err(Halt::Stuck(stuck)) => Err(stuck),
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

#[cfg(test)]
mod tests {
    use super::status::MAX_MESSAGE_CHARS;
    use super::*;
    use serde_json::{Value, json};

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
            defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults::default(),
            covering_set: None,
            token_source: None,
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

    /// A restart between a benchmark's first pods and its others forgets its set's batch:
    /// the pods still to make read the token where the first ones did.
    #[test]
    fn pods_made_later_read_their_token_where_the_first_ones_did() {
        use perfsweep_benchmarks::render::launch;
        let target = target("b");
        let own = prepare(&iperf("b", json!({})), &target).unwrap_or_else(|f| panic!("{f:?}"));
        let batch = launch::batch_source("s-launch-12345678", "b");
        let batched = own.rendered.clone().with_token_source(&batch);
        let observed = |pods: Vec<k8s_openapi::api::core::v1::Pod>| observe::Observation {
            pods,
            pod_group: None,
        };
        let first_read_batch = observed(vec![batched.pods[0].clone()]);
        assert_eq!(
            apply::token_source_of_existing(&first_read_batch, &own, &target),
            Some(batch.clone())
        );
        // The first pods read the benchmark's own Secret, or where this rendering reads:
        // nothing to change.
        let first_read_own = observed(vec![own.rendered.pods[0].clone()]);
        assert_eq!(
            apply::token_source_of_existing(&first_read_own, &own, &target),
            None
        );
        assert_eq!(
            apply::token_source_of_existing(&observed(Vec::new()), &own, &target),
            None
        );
        let mut rendered_batched = own;
        rendered_batched.rendered = batched;
        assert_eq!(
            apply::token_source_of_existing(&first_read_batch, &rendered_batched, &target),
            None
        );
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
        with_defaults.defaults = perfsweep_benchmarks::kinds::common::ClusterDefaults {
            image_registry: Some("mirror.example/ps".into()),
            scheduler: Some(perfsweep_benchmarks::kinds::common::Scheduler::Default),
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
