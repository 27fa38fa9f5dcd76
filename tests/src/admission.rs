//! Admission webhooks of the cluster's add-ons, as the double can play them: checks that
//! run on a create before it has any effect, and refuse it the way the webhook does
//! (400 with the webhook's message).

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ResourceType;
use crate::store::Store;

/// The pod annotation naming a pod's Volcano PodGroup.
const GROUP_NAME_ANNOTATION: &str = "scheduling.k8s.io/group-name";

/// Volcano's `/pods/validate` webhook (on where `custom.enabled_admissions` lists it):
/// a pod for the Volcano scheduler that names a PodGroup is refused while that PodGroup
/// is missing or still `Pending`; Volcano's scheduler moves a PodGroup from `Pending` to
/// `Inqueue` once its queue admits it, and only then may its pods be created.
///
/// A PodGroup without a status yet counts as `Pending` here: Volcano's scheduler gives a
/// new PodGroup its `Pending` phase within one scheduling period, so a pod created a
/// moment later is refused; the double takes that ordering of the race.
pub(crate) fn volcano_pod(store: &Store, ns: &str, pod: &Value) -> Result<(), ApiError> {
    if pod.pointer("/spec/schedulerName").and_then(Value::as_str) != Some("volcano") {
        return Ok(());
    }
    let Some(group) = pod
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(GROUP_NAME_ANNOTATION))
        .and_then(Value::as_str)
    else {
        return Ok(());
    };
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let denied = |reason: String| {
        ApiError::new(
            400,
            "BadRequest",
            format!("admission webhook \"validatepod.volcano.sh\" denied the request: {reason}"),
        )
    };
    let Some(podgroups) = store.resolve("scheduling.volcano.sh", "v1beta1", "podgroups") else {
        return Err(denied(format!(
            "failed to get PodGroup for pod <{ns}/{name}>: the server could not find the requested resource"
        )));
    };
    let phase = match store.get(&podgroups, ns, group) {
        Ok(found) => found
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending")
            .to_owned(),
        Err(_) => {
            return Err(denied(format!(
                "failed to get PodGroup for pod <{ns}/{name}>: podgroups.scheduling.volcano.sh \"{group}\" not found"
            )));
        }
    };
    if phase == "Pending" {
        return Err(denied(format!(
            "failed to create pod <{ns}/{name}> as the podgroup phase is Pending"
        )));
    }
    Ok(())
}

/// Whether `rt` is the core group's pods.
pub(crate) fn is_pods(rt: &ResourceType) -> bool {
    rt.group.is_empty() && rt.plural == "pods"
}
