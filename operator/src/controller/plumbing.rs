//! What both controllers do the same way around their decisions: write status by
//! server-side apply, tell whether a status changed, publish events, delete what may
//! already be gone.

use std::fmt::Debug;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::Error;

/// The field manager of every status the operator applies.
pub const FIELD_MANAGER: &str = "perfsweep";

/// Event notes are limited; longer ones are cut.
const MAX_NOTE_CHARS: usize = 1024;

/// Applies `status` as the object's whole status (server-side apply, field manager
/// [`FIELD_MANAGER`]): fields the operator set before and `status` leaves out are
/// removed by the API server. With `resource_version`, only onto that version of the
/// object: `Ok(None)` when it changed meanwhile (409), so the decision is made again.
/// Returns the object as stored.
pub async fn apply_status<K>(
    api: &Api<K>,
    object: &K,
    status: &impl Serialize,
    resource_version: Option<&str>,
) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let name = object.name_any();
    let status = serde_json::to_value(status).map_err(|source| Error::Serialize {
        what: "a status",
        source,
    })?;
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name},
        "status": status,
    });
    if let Some(version) = resource_version {
        body["metadata"]["resourceVersion"] = json!(version);
    }
    // force: the operator is the only writer of its objects' status.
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch_status(&name, &params, &Patch::Apply(&body)).await {
        Ok(stored) => Ok(Some(stored)),
        Err(kube::Error::Api(status)) if status.code == 409 && resource_version.is_some() => {
            tracing::debug!(object = %name, "status decided on a stale copy; looking again");
            Ok(None)
        }
        Err(source) => Err(Error::Kube {
            action: format!(
                "updating the status of {} {}/{name}",
                K::kind(&()),
                object.namespace().unwrap_or_default()
            ),
            source,
        }),
    }
}

/// Whether a status write is needed: `old` and `new` differ in more than their
/// conditions' transition times (`conditions` gives a status' conditions).
pub fn status_differs<S: Clone + PartialEq>(
    old: &S,
    new: &S,
    conditions: fn(&mut S) -> &mut Vec<Condition>,
) -> bool {
    let strip = |status: &S| {
        let mut status = status.clone();
        for condition in conditions(&mut status) {
            condition.last_transition_time = Time(Timestamp::UNIX_EPOCH);
        }
        status
    };
    strip(old) != strip(new)
}

/// Publishes an event about `object`. Best effort: a failure to record one is logged,
/// never fails a reconcile.
pub async fn publish<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    object: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    publish_related(recorder, object, None, type_, reason, action, note).await;
}

/// As [`publish`], naming a second object the event is about (`related`). The recorder
/// merges events of the same object, reason and action into one series, keeping the
/// first note: events about different related objects (a set's children) stay apart.
pub async fn publish_related<K: Resource<DynamicType = ()>>(
    recorder: &Recorder,
    object: &K,
    related: Option<ObjectReference>,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note.chars().take(MAX_NOTE_CHARS).collect()),
        action: action.into(),
        secondary: related,
    };
    if let Err(error) = recorder.publish(&event, &object.object_ref(&())).await {
        let name = object.meta().name.clone().unwrap_or_default();
        tracing::warn!(kind = %K::kind(&()), %name, %error, "cannot record event");
    }
}

/// Deletes `name` (background propagation) if it is still the object with `uid`: the
/// API server refuses the delete (409) when the name now belongs to another object —
/// someone else's made after ours went — and that object is left alone. One already gone
/// is no error.
pub async fn delete_if_present<T>(api: &Api<T>, name: &str, uid: &str) -> Result<(), kube::Error>
where
    T: Resource + Clone + DeserializeOwned + Debug,
{
    let params = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::background()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            tracing::info!(%name, %uid, message = %status.message, "not deleted: the name belongs to another object now");
            Ok(())
        }
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::api::status::{BenchmarkStatus, Phase, condition, set_condition};
    use serde_json::Value;

    #[test]
    fn a_status_differs_only_in_substance() {
        fn conditions(s: &mut BenchmarkStatus<Value>) -> &mut Vec<Condition> {
            &mut s.conditions
        }
        let mut old = BenchmarkStatus::<Value>::default();
        set_condition(
            &mut old.conditions,
            condition(
                "Ready",
                "False",
                "PodsNotRunning",
                "0 of 2",
                None,
                Timestamp::UNIX_EPOCH,
            ),
        );
        let mut new = old.clone();
        new.conditions[0].last_transition_time = Time(Timestamp::now());
        assert!(!status_differs(&old, &new, conditions));
        new.phase = Some(Phase::Pending);
        assert!(status_differs(&old, &new, conditions));
    }
}
