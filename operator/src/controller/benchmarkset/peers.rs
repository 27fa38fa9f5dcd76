//! A set's one NetworkPolicy, made before its first child: its children's pods are
//! admitted by it instead of a policy each (one create per set instead of one per child).
//!
//! Only this process's word counts that a set's policy is in place ([`SetPolicies`]): a
//! benchmark is covered by its set's policy when its controlling owner is a set whose
//! policy this operator made or found to be the set's own. A benchmark that merely names
//! a set as its owner (a forged or stale owner reference), or a child reconciled before
//! its set after a restart, gets its own policy as before: never neither.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use perfsweep_benchmarks::render::network_policy;
use perfsweep_benchmarks::set::BenchmarkSet;

use crate::controller::Context;

/// By set uid: whether the set's one policy is in place (made, or found owned by the
/// set), or not to be had (someone else's of that name, or forbidden). Asked once per set
/// and process.
#[derive(Default)]
pub struct SetPolicies {
    known: Mutex<HashMap<String, bool>>,
}

impl SetPolicies {
    /// The uid of the set whose policy admits the pods of a benchmark with these owner
    /// references, if any: its controlling owner is a set whose policy is in place.
    pub fn covering(&self, owners: &[OwnerReference]) -> Option<String> {
        let owner = controlling_set(owners)?;
        (self.lock().get(&owner.uid) == Some(&true)).then(|| owner.uid.clone())
    }

    fn is_known(&self, uid: &str) -> bool {
        self.lock().contains_key(uid)
    }

    fn learn(&self, uid: &str, in_place: bool) {
        self.lock().insert(uid.to_owned(), in_place);
    }

    /// Forgets a set that is gone.
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, bool>> {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Makes the set's policy once per process: created, or found (409) owned by this set.
/// Anything else leaves the children to policies of their own, and the set goes on: one
/// of the same name owned by someone else, a forbidden create (a role without the verb),
/// or a failed request (one more create per child is all it costs; a set never waits on
/// its policy).
pub async fn ensure(set: &BenchmarkSet, namespace: &str, ctx: &Context) {
    let Some(uid) = set.uid() else {
        return;
    };
    if ctx.set_policies.is_known(&uid) {
        return;
    }
    let name = set.name_any();
    let policy = network_policy::for_set(&name, namespace, &uid);
    let api: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), namespace);
    let policy_name = network_policy::set_policy_name(&name);
    let outcome = match api.create(&PostParams::default(), &policy).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            match api.get_opt(&policy_name).await {
                Ok(Some(found)) if owned_by(&found, &uid) => Ok(()),
                Ok(_) => Err("a NetworkPolicy of that name is someone else's".to_owned()),
                Err(error) => Err(format!("reading it after its create answered 409: {error}")),
            }
        }
        Err(error) => Err(format!("creating it: {error}")),
    };
    if let Err(why) = &outcome {
        tracing::warn!(set = %format!("{namespace}/{name}"), policy = %policy_name, %why,
            "the set's NetworkPolicy is not to be had: each child gets its own");
    }
    ctx.set_policies.learn(&uid, outcome.is_ok());
}

/// The set a benchmark with these owner references claims as its controlling owner: what
/// a set's shared objects are granted by, and only when this process made them for it.
pub(super) fn controlling_set(owners: &[OwnerReference]) -> Option<&OwnerReference> {
    owners.iter().find(|owner| {
        owner.controller == Some(true)
            && owner.kind == "BenchmarkSet"
            && owner.api_version == perfsweep_benchmarks::API_VERSION
    })
}

fn owned_by(policy: &NetworkPolicy, uid: &str) -> bool {
    policy
        .owner_references()
        .iter()
        .any(|owner| owner.uid == uid && owner.controller == Some(true))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// An owner reference of `kind` with `uid`, controlling or not.
    pub(in crate::controller::benchmarkset) fn owner(
        kind: &str,
        uid: &str,
        controller: Option<bool>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: perfsweep_benchmarks::API_VERSION.to_owned(),
            kind: kind.to_owned(),
            name: "s".to_owned(),
            uid: uid.to_owned(),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn only_a_controlling_set_whose_policy_is_in_place_covers_a_benchmark() {
        let policies = SetPolicies::default();
        policies.learn("made", true);
        policies.learn("squatted", false);
        let covering = |owners: &[OwnerReference]| policies.covering(owners);
        assert_eq!(
            covering(&[owner("BenchmarkSet", "made", Some(true))]).as_deref(),
            Some("made")
        );
        // Named, but not the controller; another kind with that uid; a set the
        // operator made no policy for; one whose name someone else holds.
        assert_eq!(covering(&[owner("BenchmarkSet", "made", None)]), None);
        assert_eq!(covering(&[owner("IPerf", "made", Some(true))]), None);
        assert_eq!(
            covering(&[owner("BenchmarkSet", "unknown", Some(true))]),
            None
        );
        assert_eq!(
            covering(&[owner("BenchmarkSet", "squatted", Some(true))]),
            None
        );
        assert_eq!(covering(&[]), None);
        policies.forget("made");
        assert_eq!(covering(&[owner("BenchmarkSet", "made", Some(true))]), None);
    }
}
