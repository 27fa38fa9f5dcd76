//! Benchmarks and sets that do not deserialize: a field of the wrong type, written by
//! hand, by an older or newer perfsweep, or before a schema change. Every controller
//! watches through kube's [`DeserializeGuard`], so such an object fails alone instead of
//! failing the list of its kind (kube-rs/kube#774); it is reported once per change,
//! naming the field.

use kube::api::{Api, DynamicObject};
use kube::core::{DeserializeGuard, NamespaceResourceScope, error_boundary::InvalidObject};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Context, plumbing};

/// What can be read back and reported: a namespaced perfsweep kind.
pub trait Guarded:
    Resource<DynamicType = (), Scope = NamespaceResourceScope> + DeserializeOwned + Clone
{
}

impl<K> Guarded for K where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + DeserializeOwned + Clone
{
}

/// The event reason of an unreadable object.
pub const REASON: &str = "InvalidObject";

/// Logs and publishes a Warning event on `guard`'s object: which field is wrong and why.
pub(super) async fn report<K: Guarded>(
    guard: &DeserializeGuard<K>,
    invalid: &InvalidObject,
    ctx: &Context,
) {
    let name = guard.name_any();
    let namespace = guard.namespace().unwrap_or_default();
    // The guard keeps serde's message but not where it happened: the object is read
    // again as plain JSON and deserialized once more, tracking the path.
    let field = match raw::<K>(ctx, &namespace, &name).await {
        Some(object) => field_error::<K>(object),
        None => None,
    };
    let what = field.unwrap_or_else(|| invalid.error.clone());
    let note = format!(
        "{} {namespace}/{name} cannot be read, so it is not run: {what}. Fix the field (or delete the object and create it again); other {}s are unaffected.",
        K::kind(&()),
        K::kind(&())
    );
    tracing::warn!(kind = %K::kind(&()), %namespace, %name, error = %what, "an object does not deserialize");
    plumbing::publish(
        &ctx.recorder,
        guard,
        EventType::Warning,
        REASON,
        "Read",
        &note,
    )
    .await;
}

/// The object as the API server has it, or `None` when it cannot be read now (the event
/// then carries serde's message without the path).
async fn raw<K: Guarded>(ctx: &Context, namespace: &str, name: &str) -> Option<Value> {
    let resource = kube::api::ApiResource::erase::<K>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    match api.get(name).await {
        Ok(object) => serde_json::to_value(object).ok(),
        Err(error) => {
            tracing::debug!(%error, %name, "cannot re-read an unreadable object");
            None
        }
    }
}

/// `spec.duration: invalid type: …`: the path of the first field `K` cannot take, and
/// serde's message; `None` when `object` deserializes after all (it changed meanwhile).
pub fn field_error<K: DeserializeOwned>(object: Value) -> Option<String> {
    match serde_path_to_error::deserialize::<_, K>(object) {
        Ok(_) => None,
        Err(error) => Some(format!("{}: {}", error.path(), error.inner())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfsweep_benchmarks::kinds::iperf::IPerf;
    use serde_json::json;

    #[test]
    fn the_error_names_the_field_that_is_wrong() {
        let object = json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "bad", "namespace": "ns"},
            "spec": {"duration": "ten seconds"},
        });
        let message = field_error::<IPerf>(object).expect("a string duration is wrong");
        assert!(message.starts_with("spec.duration: "), "{message}");
        let fine = json!({
            "apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf",
            "metadata": {"name": "good", "namespace": "ns"},
            "spec": {"duration": 10},
        });
        assert_eq!(field_error::<IPerf>(fine), None);
    }
}
