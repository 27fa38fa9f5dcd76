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

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::Context;

/// The policy named after the benchmark, selecting its pods by name and uid.
pub(crate) fn render(context: &Context) -> NetworkPolicy {
    let own = LabelSelector {
        match_labels: Some(context.selector()),
        match_expressions: None,
    };
    NetworkPolicy {
        metadata: context.metadata(context.benchmark.name.clone()),
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
