//! The NetworkPolicy that lets only the benchmark's own pods reach its pods: the
//! agents' control port and the tools' ports are for the benchmark, not for every pod of
//! the cluster. The agents authenticate each other anyway (the benchmark's token); the
//! policy keeps other pods from even connecting, where the cluster's network plugin
//! enforces policies.
//!
//! Every port is admitted between the benchmark's pods, not only the plan's: MPI's
//! daemons and collectives open ports they pick at run time. Egress is left alone (an
//! LLM benchmark reaches an endpoint outside). Pods on the host network are outside any
//! NetworkPolicy; for them the token is the only guard.
//!
//! A set's children share one policy instead ([`for_set`]): one create per set rather
//! than per child, a request saved per benchmark at fleet scale. It admits the set's
//! pods to each other; a child's pods only run beside its own round's, which belong to
//! the same set and creator.

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec,
};
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::api::labels;

use super::Context;

/// The policy named after the benchmark, selecting its pods by name and uid.
pub(crate) fn render(context: &Context) -> NetworkPolicy {
    admitting_only(
        context.metadata(context.benchmark.name.clone()),
        context.selector(),
    )
}

/// A set's one policy, named [`set_policy_name`] and owned by the set: it selects the
/// pods labelled with the set's uid ([`labels::SET_UID`], which
/// [`super::Rendered::covered_by_set`] puts on its children's pods) and admits only them.
pub fn for_set(set_name: &str, namespace: &str, set_uid: &str) -> NetworkPolicy {
    admitting_only(
        set_owned(set_policy_name(set_name), set_name, namespace, set_uid),
        BTreeMap::from([(labels::SET_UID.to_owned(), set_uid.to_owned())]),
    )
}

/// The metadata of an object a set's controller makes for its children (its one policy,
/// a batch of launch tokens): labelled with the set, and controlled by it, so that it
/// goes when the set goes and the operator recognises it as the set's own.
pub(crate) fn set_owned(
    name: String,
    set_name: &str,
    namespace: &str,
    set_uid: &str,
) -> ObjectMeta {
    let labels = BTreeMap::from([
        (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
        (labels::SET.to_owned(), set_name.to_owned()),
        (labels::SET_UID.to_owned(), set_uid.to_owned()),
    ]);
    ObjectMeta {
        name: Some(name),
        namespace: Some(namespace.to_owned()),
        labels: Some(labels),
        owner_references: Some(vec![OwnerReference {
            api_version: crate::API_VERSION.to_owned(),
            kind: "BenchmarkSet".to_owned(),
            name: set_name.to_owned(),
            uid: set_uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]),
        ..ObjectMeta::default()
    }
}

/// The name of a set's policy. A child's own policy is named after the child
/// (`<set>-<case>-<repetition>`), so the two never meet; a standalone benchmark of this
/// name is someone else's object, which the operator recognises by its owner.
pub fn set_policy_name(set_name: &str) -> String {
    format!("{set_name}-set")
}

/// A policy selecting the pods `selector` matches and admitting only them.
fn admitting_only(metadata: ObjectMeta, selector: BTreeMap<String, String>) -> NetworkPolicy {
    let own = LabelSelector {
        match_labels: Some(selector),
        match_expressions: None,
    };
    NetworkPolicy {
        metadata,
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(own.clone()),
            policy_types: Some(vec!["Ingress".to_owned()]),
            ingress: Some(vec![NetworkPolicyIngressRule {
                // A peer with only a pod selector is a pod of the policy's namespace.
                from: Some(vec![NetworkPolicyPeer {
                    pod_selector: Some(own),
                    ..NetworkPolicyPeer::default()
                }]),
                ports: None,
            }]),
            egress: None,
        }),
    }
}
