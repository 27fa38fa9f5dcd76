//! The status of a benchmark: the one it ends with, its acceptance condition, bounded
//! messages, and writing it.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use perfsweep_benchmarks::api::status::{
    BenchmarkStatus, Phase, condition, condition_status, set_condition,
};
use perfsweep_benchmarks::judging::acceptance;
use serde_json::json;

use super::apply::{publish, release};
use super::assess::Failure;
use super::decide;
use super::kind::Benchmark;
use super::outcome::Success;
use super::prepare::Prepared;
use super::step::{At, Ended, Note, Stage, Stuck, Update};
use super::target::Target;
use super::{EVIDENCE_ANNOTATION, Engine, OPERATOR_ERROR_CONDITION, STALE_RETRY};
use crate::controller::{Error, plumbing};

pub(super) fn condition_of<'a, R>(
    status: &'a BenchmarkStatus<R>,
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// The status of a benchmark that ended with `outcome`.
pub(super) fn finished<R: Clone>(
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
                        failure.reason.as_str(),
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

/// The `Accepted` condition: which criteria failed and by how much, or that all were met.
pub(super) fn accepted_condition(
    verdict: &acceptance::Judgement,
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
pub(super) const MAX_MESSAGE_CHARS: usize = 4096;

pub(super) fn bounded(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut out: String = message.chars().take(MAX_MESSAGE_CHARS - 1).collect();
    out.push('…');
    out
}

impl<R: Clone> Update<R> {
    /// The update of a benchmark that ended with `status` (and `failure`, if it failed):
    /// announced, its evidence digest annotated, what it created deleted.
    pub(super) fn ended(
        stored: &BenchmarkStatus<R>,
        status: BenchmarkStatus<R>,
        failure: Option<&Failure>,
        evidence: Option<String>,
        stage: Stage,
    ) -> Self {
        let events = decide::ended_events(&status, failure)
            .into_iter()
            .map(Note::from)
            .collect();
        Self {
            stored: stored.clone(),
            status,
            events,
            ended: Some(Ended { evidence }),
            then: Action::await_change(),
            stage,
        }
    }
}

/// Update status, the last step of every reconcile and the only place it writes status
/// (besides [`claim`], which must precede the creates): writes `update.status` on the
/// resourceVersion it was decided on, then publishes its events; for a benchmark that
/// ended, annotates the evidence digest and deletes what it created (`rendered`).
pub(super) async fn update<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    update: Update<K::Result>,
    prepared: Option<&Prepared>,
    engine: &Engine,
) -> Result<Action, Stuck> {
    let Update {
        stored,
        status,
        events,
        ended,
        then,
        stage,
    } = update;
    if !write_status(benchmark, engine, target, &stored, &status)
        .await
        .at(stage)?
    {
        return Ok(Action::requeue(STALE_RETRY));
    }
    for Note {
        type_,
        reason,
        action,
        text,
    } in events
    {
        publish(engine, benchmark, type_, reason, action, &text).await;
    }
    let Some(Ended { evidence }) = ended else {
        return Ok(then);
    };
    if let Some(digest) = evidence {
        let patch = json!({"metadata": {"annotations": {EVIDENCE_ANNOTATION: digest}}});
        target
            .api::<K>(&engine.ctx)
            .patch(&target.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(Error::kube(format!(
                "annotating {} with its evidence digest",
                target.describe()
            )))
            .at(stage)?;
    }
    release(engine, target, prepared.map(|p| &p.rendered))
        .await
        .at(stage)?;
    Ok(then)
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
    let stored =
        plumbing::apply_status(&api, benchmark, status, target.resource_version.as_deref()).await?;
    Ok(stored.is_some())
}

/// What claiming a benchmark's objects found.
pub(super) enum Claim {
    /// The benchmark is as the cache has it: its objects may be created.
    Current,
    /// The benchmark changed since the cache saw it: decide again.
    Stale,
}

/// Before its objects are created: writes the status the benchmark waits in, on the
/// `resourceVersion` the decision was made on, so a stale copy (one whose benchmark ended
/// meanwhile) is refused by the API server instead of bringing pods back. The write is
/// needed anyway; only when the status is unchanged (a restart between the write and the
/// creates) is the benchmark read again to the same end. On `Current`, `target` and `old`
/// are what the benchmark now is.
pub(super) async fn claim<K: Benchmark>(
    benchmark: &K,
    engine: &Engine,
    target: &mut Target,
    old: &mut BenchmarkStatus<K::Result>,
    waiting: &BenchmarkStatus<K::Result>,
) -> Result<Claim, Error> {
    let api = target.api::<K>(&engine.ctx);
    if !plumbing::status_differs(old, waiting, |s| &mut s.conditions) {
        let fresh = api
            .get_opt(&target.name)
            .await
            .map_err(Error::kube(format!("reading {}", target.describe())))?;
        let current =
            fresh.is_some_and(|fresh| fresh.meta().resource_version == target.resource_version);
        return Ok(if current {
            Claim::Current
        } else {
            Claim::Stale
        });
    }
    let version = target.resource_version.as_deref();
    match plumbing::apply_status(&api, benchmark, waiting, version).await? {
        None => Ok(Claim::Stale),
        Some(stored) => {
            target
                .resource_version
                .clone_from(&stored.meta().resource_version);
            *old = waiting.clone();
            Ok(Claim::Current)
        }
    }
}
