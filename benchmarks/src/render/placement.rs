//! Where a benchmark's pods may run: node selectors, tolerations and affinity.
//!
//! By default the pods of roles that use devices are spread one per node, so a network
//! benchmark crosses the network between two nodes rather than the loopback of one, and
//! MPI ranks do not share a node's NIC. Users replace this with `affinity`, or pin roles
//! to nodes with `placement`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, PodAntiAffinity, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use crate::execution::plan::Role;
use crate::kinds::common::CommonSpec;

/// Label on the pods spread one per node; its value is the benchmark name, so only the
/// benchmark's own pods repel each other.
pub const SPREAD_LABEL: &str = "perfsweep.io/spread";
/// The topology key of the default anti-affinity: one spread pod per node.
pub const HOSTNAME_TOPOLOGY_KEY: &str = "kubernetes.io/hostname";
/// The node field a pinned pod's node affinity matches. The node's name, not its
/// `kubernetes.io/hostname` label, which differs from the name on some clouds; the same
/// field the DaemonSet controller pins pods with. Unlike `spec.nodeName` it still goes
/// through the scheduler, so the gang stays whole.
pub const NODE_NAME_FIELD: &str = "metadata.name";

/// The placement of one pod.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PodPlacement {
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub affinity: Option<Affinity>,
    /// Whether the pod carries [`SPREAD_LABEL`] (and the anti-affinity on it).
    pub spread: bool,
}

/// Where replica `index` of `role` of benchmark `benchmark` may run.
pub fn for_pod(common: &CommonSpec, benchmark: &str, role: &Role, index: u32) -> PodPlacement {
    let role_placement = common.placement.as_ref().and_then(|p| p.get(&role.name));
    let listed: &[String] = role_placement.map_or(&[], |p| p.nodes.as_slice());
    // Several replicas of a spread role over at least as many listed nodes (an MPI node
    // pair's two workers): every replica may use every listed node, one per node by the
    // spread. Volcano judges a role's pods alike, and pinning replica 1 to another node
    // than replica 0 left it unplaceable on the real cluster ("0/2 nodes are
    // unavailable: 2 plugin NodeAffinity predicates failed").
    let over_listed = role.uses_devices
        && common.affinity.is_none()
        && role.replicas >= 2
        && listed.len() >= role.replicas as usize;
    // Otherwise replica i on nodes[i % len].
    let pinned: Vec<&String> = if over_listed {
        listed.iter().collect()
    } else {
        listed
            .get(index as usize % listed.len().max(1))
            .into_iter()
            .collect()
    };

    // A pinned pod does not take part in spreading: other pods' anti-affinity would keep
    // them off its node, and if one of them were bound there first the pinned pod could
    // never be placed (its node is fixed) and the whole gang would wait. Replicas spread
    // over their listed nodes do: each has a node to go to.
    let spread =
        role.uses_devices && common.affinity.is_none() && (pinned.is_empty() || over_listed);

    let mut node_selector = common.node_selector.clone().unwrap_or_default();
    if let Some(extra) = role_placement.map(|p| &p.node_selector) {
        // The role's value wins: a pod cannot match two values of one label.
        node_selector.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }

    let mut affinity = common.affinity.clone();
    if spread {
        affinity = Some(Affinity {
            pod_anti_affinity: Some(spread_anti_affinity(benchmark)),
            ..Affinity::default()
        });
    }
    if !pinned.is_empty() {
        pin(affinity.get_or_insert_with(Affinity::default), &pinned);
    }

    PodPlacement {
        node_selector: (!node_selector.is_empty()).then_some(node_selector),
        tolerations: common.tolerations.clone().filter(|t| !t.is_empty()),
        affinity,
        spread,
    }
}

fn spread_anti_affinity(benchmark: &str) -> PodAntiAffinity {
    PodAntiAffinity {
        required_during_scheduling_ignored_during_execution: Some(vec![PodAffinityTerm {
            label_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    SPREAD_LABEL.to_owned(),
                    benchmark.to_owned(),
                )])),
                ..LabelSelector::default()
            }),
            topology_key: HOSTNAME_TOPOLOGY_KEY.to_owned(),
            ..PodAffinityTerm::default()
        }]),
        ..PodAntiAffinity::default()
    }
}

/// Requires one of `nodes` on top of whatever node affinity is there. A node field
/// selector takes one value (the API server refuses `metadata.name In [a, b]`), and node
/// selector terms are ORed: so each term is repeated once per node, with that node's
/// requirement added.
fn pin(affinity: &mut Affinity, nodes: &[&String]) {
    let node_affinity = affinity
        .node_affinity
        .get_or_insert_with(NodeAffinity::default);
    let required = node_affinity
        .required_during_scheduling_ignored_during_execution
        .get_or_insert_with(NodeSelector::default);
    if required.node_selector_terms.is_empty() {
        required
            .node_selector_terms
            .push(NodeSelectorTerm::default());
    }
    let terms = std::mem::take(&mut required.node_selector_terms);
    for node in nodes {
        for term in &terms {
            let mut term = term.clone();
            term.match_fields
                .get_or_insert_with(Vec::new)
                .push(NodeSelectorRequirement {
                    key: NODE_NAME_FIELD.to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec![(*node).clone()]),
                });
            required.node_selector_terms.push(term);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{Command, Lifetime, Readiness};
    use crate::kinds::common::RolePlacement;

    fn role(uses_devices: bool) -> Role {
        Role {
            name: "worker".into(),
            replicas: 3,
            setup: Vec::new(),
            command: Command {
                program: "true".into(),
                package: "coreutils".into(),
                args: Vec::new(),
            },
            files: Vec::new(),
            ports: Vec::new(),
            ready_when: Readiness::Started,
            waits_for: Vec::new(),
            lifetime: Lifetime::Serve,
            uses_devices,
            capabilities: Vec::new(),
            env: BTreeMap::default(),
            secret_env: Vec::new(),
            volumes: Vec::new(),
        }
    }

    fn pinned_nodes(affinity: &Affinity) -> Vec<Vec<String>> {
        affinity
            .node_affinity
            .as_ref()
            .and_then(|n| {
                n.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(|r| {
                r.node_selector_terms
                    .iter()
                    .map(|t| {
                        t.match_fields
                            .iter()
                            .flatten()
                            .filter(|f| f.key == NODE_NAME_FIELD)
                            .flat_map(|f| f.values.clone().unwrap_or_default())
                            .collect()
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An MPI node pair's two workers: both may use both listed nodes, and the spread puts
    /// one on each. Pinning replica 1 to the second node alone left it unplaceable under
    /// Volcano on the real cluster.
    #[test]
    fn replicas_listed_with_as_many_nodes_spread_over_them() {
        let mut common = CommonSpec::default();
        common.placement = Some(BTreeMap::from([(
            "worker".to_owned(),
            crate::kinds::common::RolePlacement {
                nodes: vec!["n1".into(), "n2".into()],
                ..Default::default()
            },
        )]));
        let mut workers = role(true);
        workers.replicas = 2;
        for index in 0..2 {
            let p = for_pod(&common, "b", &workers, index);
            assert!(p.spread, "replica {index}");
            let affinity = p.affinity.expect("affinity");
            assert!(affinity.pod_anti_affinity.is_some(), "replica {index}");
            assert_eq!(
                pinned_nodes(&affinity),
                [vec!["n1"], vec!["n2"]],
                "replica {index}"
            );
        }
    }

    #[test]
    fn device_roles_spread_and_others_do_not() {
        let common = CommonSpec::default();
        let spread = for_pod(&common, "b", &role(true), 0);
        assert!(spread.spread);
        let term = &spread
            .affinity
            .as_ref()
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|p| {
                p.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .expect("required anti-affinity")[0];
        assert_eq!(term.topology_key, HOSTNAME_TOPOLOGY_KEY);
        let launcher = for_pod(&common, "b", &role(false), 0);
        assert_eq!(launcher, PodPlacement::default());
    }

    #[test]
    fn pinning_replaces_spreading_and_combines_with_user_affinity() {
        let mut common = CommonSpec {
            placement: Some(BTreeMap::from([(
                "worker".to_owned(),
                RolePlacement {
                    nodes: vec!["n1".into(), "n2".into()],
                    node_selector: BTreeMap::from([("zone".into(), "b".into())]),
                },
            )])),
            node_selector: Some(BTreeMap::from([
                ("zone".into(), "a".into()),
                ("pool".into(), "bench".into()),
            ])),
            ..CommonSpec::default()
        };
        let nodes: Vec<_> = (0..3)
            .map(|i| {
                let p = for_pod(&common, "b", &role(true), i);
                assert!(!p.spread);
                let affinity = p.affinity.expect("node affinity");
                assert!(affinity.pod_anti_affinity.is_none());
                assert_eq!(
                    p.node_selector,
                    Some(BTreeMap::from([
                        ("pool".into(), "bench".into()),
                        ("zone".into(), "b".into())
                    ]))
                );
                pinned_nodes(&affinity)
            })
            .collect();
        assert_eq!(
            nodes,
            [vec![vec!["n1"]], vec![vec!["n2"]], vec![vec!["n1"]]]
        );

        // User node affinity with two alternative terms: the pin is added to both.
        common.affinity = Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: vec![NodeSelectorTerm::default(); 2],
                }),
                ..NodeAffinity::default()
            }),
            ..Affinity::default()
        });
        let p = for_pod(&common, "b", &role(true), 1);
        assert_eq!(
            pinned_nodes(&p.affinity.expect("affinity")),
            [vec!["n2"], vec!["n2"]]
        );
    }
}
