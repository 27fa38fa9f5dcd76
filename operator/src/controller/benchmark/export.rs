//! Exporting a finished benchmark to its `spec.outputLocation`: the result record (JSON
//! Lines and Parquet) and the raw evidence, with credentials from the Secret the
//! location names, reported in the `Exported` condition.
//!
//! One attempt per reconcile: object_store retries a failed request a few times with
//! backoff within the attempt; a failed attempt is tried again later by requeueing with
//! exponential backoff (the next attempt's time is kept in status, so other events do
//! not hurry it), never by sleeping in the reconcile. After [`ExportPolicy::attempts`]
//! the condition says `ExportFailed`, with the last error and the attempt count. Whatever
//! happens, the status and the evidence ConfigMap stay: a failed upload loses nothing.
//!
//! Credentials are read from the Secret on each attempt (an edited Secret is picked up),
//! handed to object_store and nowhere else: messages carry the location, the Secret's
//! name and the service's error, never a key.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::export::allowed::EXPORT_CREDENTIALS_LABEL;
use bytes::Bytes;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::api::status::{
    ExportProgress, condition, condition_status, set_condition,
};
use perfsweep_benchmarks::execution::output::OutputLocation;
use serde_json::Value;

use super::step::{Note, Stage, Update};
use super::{Benchmark, Engine, Target, bounded};
use crate::controller::Error;
use crate::export::{self, Credentials, Destination, Retry, Store};
use crate::records::{Kept, cluster_record};

/// The condition type.
pub const CONDITION: &str = "Exported";
/// Reasons of the condition.
pub const UPLOADED: &str = "Uploaded";
pub const RETRYING: &str = "ExportRetrying";
pub const FAILED: &str = "ExportFailed";

/// How hard the operator tries to export.
#[derive(Clone, Debug)]
pub struct ExportPolicy {
    /// Attempts (reconciles that upload), the first included.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub first_delay: Duration,
    pub max_delay: Duration,
    /// object_store's retries of each request within one attempt.
    pub requests: Retry,
    /// Where the administrator lets benchmarks export to (see
    /// `crate::export::allowed`).
    pub allowed: crate::export::allowed::AllowedDestinations,
}

impl Default for ExportPolicy {
    /// Five attempts over about 2.5 minutes (10 s, 20 s, 40 s, 80 s apart), each request
    /// tried 3 times within an attempt: rides out a restarting endpoint and leaves time
    /// to fix a Secret.
    fn default() -> Self {
        Self {
            attempts: 5,
            first_delay: Duration::from_secs(10),
            max_delay: Duration::from_mins(5),
            requests: Retry {
                attempts: 3,
                initial_delay: Duration::from_millis(200),
                max_delay: Duration::from_secs(2),
            },
            allowed: crate::export::allowed::AllowedDestinations::default(),
        }
    }
}

impl ExportPolicy {
    /// The wait after attempt `attempt` (1-based) failed.
    pub fn delay(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1).min(20);
        self.first_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay)
    }
}

/// Why an attempt failed; `final_` when trying again cannot help (a location the
/// operator does not export to).
struct Problem {
    message: String,
    final_: bool,
}

impl Problem {
    fn retry(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            final_: false,
        }
    }

    fn final_(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            final_: true,
        }
    }
}

/// The finished benchmark's export, if it has an `outputLocation` and the export is not
/// settled yet. Returns when to look again.
pub(super) async fn export<K: Benchmark>(
    benchmark: &K,
    target: &Target,
    engine: &Engine,
) -> Result<Update<K::Result>, Error> {
    let old = benchmark.benchmark_status().cloned().unwrap_or_default();
    let done = |then: Action| Ok(Update::nothing(&old, then, Stage::CleaningUp));
    let object = serde_json::to_value(benchmark).map_err(|source| Error::Serialize {
        what: "a benchmark",
        source,
    })?;
    let location = match object.pointer("/spec/outputLocation") {
        None | Some(Value::Null) => return done(Action::await_change()),
        Some(value) => serde_json::from_value::<OutputLocation>(value.clone()),
    };
    let settled = old.conditions.iter().any(|c| {
        c.type_ == CONDITION && (c.status == condition_status::TRUE || c.reason == FAILED)
    });
    if settled {
        return done(Action::await_change());
    }
    let policy = &engine.export;
    let attempts = old.export.as_ref().map_or(0, |p| p.attempts);
    if let Some(progress) = &old.export {
        let due = progress
            .last_attempt_at
            .0
            .checked_add(policy.delay(attempts))
            .unwrap_or(Timestamp::MAX);
        let now = Timestamp::now();
        if now < due {
            let wait = now.duration_until(due).unsigned_abs();
            return done(Action::requeue(wait.max(Duration::from_millis(10))));
        }
    }
    let attempt = attempts + 1;
    let outcome = match location {
        Ok(location) => upload(&object, &location, target, engine).await,
        Err(error) => Err(Problem::final_(format!("spec.outputLocation: {error}"))),
    };
    let now = Timestamp::now();
    let mut status = old.clone();
    status.export = Some(ExportProgress {
        attempts: attempt,
        last_attempt_at: Time(now),
    });
    let kept_in = format!(
        "the results stay in status and ConfigMap {}",
        labels::evidence_config_map(&target.name)
    );
    let (value, reason, message, action) = match outcome {
        Ok(message) => (
            condition_status::TRUE,
            UPLOADED,
            format!("{message} (attempt {attempt})"),
            Action::await_change(),
        ),
        Err(problem) if problem.final_ || attempt >= policy.attempts => (
            condition_status::FALSE,
            FAILED,
            format!(
                "gave up after {attempt} attempt(s): {}; {kept_in}",
                problem.message
            ),
            Action::await_change(),
        ),
        Err(problem) => {
            let delay = policy.delay(attempt);
            (
                condition_status::FALSE,
                RETRYING,
                format!(
                    "attempt {attempt} of {} failed: {}; next attempt in {}s; {kept_in}",
                    policy.attempts,
                    problem.message,
                    delay.as_secs()
                ),
                Action::requeue(delay),
            )
        }
    };
    let message = bounded(&message);
    set_condition(
        &mut status.conditions,
        condition(CONDITION, value, reason, &message, target.generation, now),
    );
    let type_ = if value == condition_status::TRUE {
        tracing::info!(benchmark = %target.describe(), %message, "exported");
        EventType::Normal
    } else {
        tracing::warn!(benchmark = %target.describe(), %message, "export failed");
        EventType::Warning
    };
    Ok(Update {
        status,
        events: vec![Note {
            type_,
            reason,
            action: "Export",
            text: message,
        }],
        ..Update::nothing(&old, action, Stage::CleaningUp)
    })
}

/// One attempt: credentials, the record and evidence, the upload. `Ok` says what was
/// written where.
async fn upload(
    object: &Value,
    location: &OutputLocation,
    target: &Target,
    engine: &Engine,
) -> Result<String, Problem> {
    let destination = export::parse(&location.storage_uri, &location.sink_parameters())
        .map_err(|e| Problem::final_(format!("spec.outputLocation: {e:#}")))?;
    // Before any Secret is read: credentials go only where the administrator allows.
    engine
        .export
        .allowed
        .check(&destination)
        .map_err(Problem::final_)?;
    let store = match destination {
        Destination::Bucket(bucket) => {
            let secret = bucket.secret_name.clone().ok_or_else(|| {
                Problem::final_(format!(
                    "spec.outputLocation names no Secret with the credentials (secretName; keys {})",
                    export::credential_names(bucket.service).join(", ")
                ))
            })?;
            let (data, source) = secret_data(engine, target, &secret).await?;
            let credentials =
                Credentials::from_lookup(bucket.service, |k| data.get(k).cloned(), &source)
                    .map_err(|e| Problem::retry(format!("{e:#}")))?;
            Store::bucket(&bucket, &credentials, &engine.export.requests)
                .map_err(|e| Problem::final_(format!("{e:#}")))?
        }
        Destination::GitHub(release) => {
            let secret = release.secret_name.clone().ok_or_else(|| {
                Problem::final_(
                    "spec.outputLocation names no Secret with the credentials (secretName; key GITHUB_TOKEN)",
                )
            })?;
            let (data, source) = secret_data(engine, target, &secret).await?;
            let credentials = Credentials::github_from_lookup(|k| data.get(k).cloned(), &source)
                .map_err(|e| Problem::retry(format!("{e:#}")))?;
            Store::github(release, &credentials, &engine.export.requests)
                .map_err(|e| Problem::final_(format!("{e:#}")))?
        }
        Destination::Claim {
            namespace,
            claim,
            path,
        } => return written_by_pod(target, namespace.as_deref(), &claim, &path),
        Destination::Directory(_) => {
            return Err(Problem::final_(
                "spec.outputLocation: the operator's own filesystem is not kept: file:// is for \
                 perfsweep run --export; use pvc://claim/path",
            ));
        }
    };

    let maps: Api<ConfigMap> = target.api(&engine.ctx);
    let evidence_map = labels::evidence_config_map(&target.name);
    let kept = match maps.get_opt(&evidence_map).await {
        Ok(Some(map)) => Kept::from_config_map(&map),
        Ok(None) => Kept::default(),
        Err(error) => {
            return Err(Problem::retry(format!(
                "reading ConfigMap {evidence_map}: {error}"
            )));
        }
    };
    let set = object["metadata"]["labels"][labels::SET]
        .as_str()
        .map(str::to_owned);
    let run_id = run_id(object, target, set.as_deref());
    let record = cluster_record(target.info, object, set, &kept, &run_id);
    let mut evidence = BTreeMap::new();
    if let Some(report) = &kept.report
        && let (Some(raw), Some(sha)) = (&report.raw_output, &report.raw_output_sha256)
    {
        evidence.insert(sha.clone(), Bytes::from(raw.clone()));
    }
    let objects = export::objects(std::slice::from_ref(&record), &evidence, &target.name)
        .map_err(|e| Problem::final_(format!("{e:#}")))?;
    let report = export::write(&store, &objects, false)
        .await
        .map_err(|e| Problem::retry(format!("{e:#}")))?;
    Ok(format!(
        "exported {} object(s), {} bytes, to {}/{run_id}/{}",
        report.objects,
        report.bytes,
        store.location(),
        if report.retries > 0 {
            format!(" ({} request(s) retried)", report.retries)
        } else {
            String::new()
        }
    ))
}

/// A `pvc://` location: the benchmark's result pod mounted the claim and wrote its
/// report and evidence there (the operator mounts no claim); the condition says where.
fn written_by_pod(
    target: &Target,
    namespace: Option<&str>,
    claim: &str,
    path: &str,
) -> Result<String, Problem> {
    if let Some(namespace) = namespace.filter(|ns| *ns != target.namespace) {
        return Err(Problem::final_(format!(
            "spec.outputLocation: claim {namespace}:{claim} is in another namespace: a pod \
             mounts claims of its own namespace ({}) only",
            target.namespace
        )));
    }
    let short: String = target.uid.chars().filter(|c| *c != '-').take(8).collect();
    let run = format!("{}-{short}", target.name);
    let under = if path.is_empty() {
        run
    } else {
        format!("{path}/{run}")
    };
    Ok(format!(
        "the benchmark's result pod wrote its report and evidence into claim {claim} under \
         {under}/"
    ))
}

/// The data of Secret `name` (read on each attempt: a fixed Secret is picked up), and
/// how to name it in messages.
async fn secret_data(
    engine: &Engine,
    target: &Target,
    name: &str,
) -> Result<(BTreeMap<String, String>, String), Problem> {
    let secrets: Api<Secret> = target.api(&engine.ctx);
    let secret = match secrets.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            return Err(Problem::retry(format!(
                "Secret {}/{name} (spec.outputLocation) does not exist",
                target.namespace
            )));
        }
        Err(error) => {
            return Err(Problem::retry(format!(
                "reading Secret {}/{name}: {error}",
                target.namespace
            )));
        }
    };
    let marked = secret
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(EXPORT_CREDENTIALS_LABEL))
        .is_some_and(|value| value == "true");
    if !marked {
        // The operator reads Secrets with its own rights: only one its owner marked for
        // exports is sent anywhere.
        return Err(Problem::retry(format!(
            "Secret {}/{name} (spec.outputLocation) is not labelled {EXPORT_CREDENTIALS_LABEL}=true: the operator uses only Secrets marked as export credentials (kubectl label secret {name} {EXPORT_CREDENTIALS_LABEL}=true)",
            target.namespace
        )));
    }
    let mut data: BTreeMap<String, String> = secret.string_data.unwrap_or_default();
    for (key, bytes) in secret.data.unwrap_or_default() {
        if let Ok(text) = String::from_utf8(bytes.0) {
            data.insert(key, text);
        }
    }
    Ok((data, format!("Secret {}/{name}", target.namespace)))
}

/// The run a benchmark's record belongs to: its set (children of one set share it) or
/// the benchmark itself, named and made unique by the uid.
fn run_id(object: &Value, target: &Target, set: Option<&str>) -> String {
    let set_uid = set.and_then(|set| {
        object["metadata"]["ownerReferences"]
            .as_array()?
            .iter()
            .find(|owner| owner["kind"] == "BenchmarkSet" && owner["name"] == set)?["uid"]
            .as_str()
    });
    let (name, uid) = match (set, set_uid) {
        (Some(set), Some(uid)) => (set, uid),
        _ => (target.name.as_str(), target.uid.as_str()),
    };
    let short: String = uid.chars().filter(|c| *c != '-').take(8).collect();
    if short.is_empty() {
        name.to_owned()
    } else {
        format!("{name}-{short}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_back_off_exponentially_up_to_the_bound() {
        let policy = ExportPolicy {
            attempts: 6,
            first_delay: Duration::from_secs(10),
            max_delay: Duration::from_mins(1),
            ..ExportPolicy::default()
        };
        let delays: Vec<u64> = (1..=5).map(|a| policy.delay(a).as_secs()).collect();
        assert_eq!(delays, [10, 20, 40, 60, 60]);
    }
}
