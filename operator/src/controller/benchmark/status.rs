//! The status of a benchmark: the one it ends with, its acceptance condition, bounded
//! messages, and writing it.

use super::{
    Benchmark, BenchmarkStatus, Engine, Error, Failure, OPERATOR_ERROR_CONDITION, Phase, Success,
    Target, Time, Timestamp, acceptance, condition, condition_status, plumbing, set_condition,
};

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

/// Writes `status` unless it equals `old` (condition timestamps aside), on the
/// resourceVersion it was decided on. `false`: the benchmark changed meanwhile.
pub(super) async fn write_status<K: Benchmark>(
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
