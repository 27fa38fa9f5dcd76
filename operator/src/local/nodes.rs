//! `run --local --nodes a,b,c`: stand-in "nodes" for a node-pair or each-node sweep on
//! one machine.
//! Each named node is played by a loopback address of its own (127.77.0.1 for the
//! first, 127.77.0.2 for the second, …), and a benchmark's processes bind to the address
//! of the node their role is placed on (`placement.<role>.nodes`), so a pair's server
//! and client talk between two "nodes" as they would across the fabric. A node may carry
//! labels (`--nodes c:perfsweep.io/node-class=gold`), which choose the references of an
//! each-node sweep as a real node's labels do.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde_json::Value;

/// The first node's address; far from the 127.0.0.x addresses processes get otherwise.
const FIRST: Ipv4Addr = Ipv4Addr::new(127, 77, 0, 1);

/// Why a `--nodes` list is unusable.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum NodesError {
    #[error("--nodes: {0:?} is not a node name (letters, digits, '-', '.' and '_')")]
    BadName(String),
    #[error("--nodes: node {0:?} is listed twice")]
    Duplicate(String),
    #[error("--nodes: {0} nodes do not fit in the loopback range 127.77.0.0/16")]
    TooMany(usize),
}

/// The stand-in nodes, each with its loopback address and labels.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoopbackNodes {
    addresses: BTreeMap<String, Ipv4Addr>,
    labels: perfsweep_benchmarks::set::NodeLabels,
}

impl LoopbackNodes {
    /// From a `--nodes` list (names with their labels), addresses in the order given.
    pub fn new(nodes: &[(String, BTreeMap<String, String>)]) -> Result<Self, NodesError> {
        if nodes.len() >= 65_000 {
            return Err(NodesError::TooMany(nodes.len()));
        }
        let mut addresses = BTreeMap::new();
        let mut labels = BTreeMap::new();
        for (index, (name, node_labels)) in nodes.iter().enumerate() {
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
            if !valid {
                return Err(NodesError::BadName(name.clone()));
            }
            let address = Ipv4Addr::from(u32::from(FIRST) + index as u32);
            if addresses.insert(name.clone(), address).is_some() {
                return Err(NodesError::Duplicate(name.clone()));
            }
            labels.insert(name.clone(), node_labels.clone());
        }
        Ok(Self { addresses, labels })
    }

    /// The nodes with their labels, as a set expands over them.
    pub fn labelled(&self) -> perfsweep_benchmarks::set::NodeLabels {
        self.labels.clone()
    }

    pub fn names(&self) -> Vec<String> {
        self.addresses.keys().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// Role → the addresses of its placed replicas, in replica order, for a benchmark
    /// spec: replica i on `placement.<role>.nodes[i]` (an MPI pair's two workers on the
    /// pair's two nodes), for the nodes that are among these.
    pub fn role_addresses(&self, spec: &Value) -> BTreeMap<String, Vec<Ipv4Addr>> {
        spec.get("placement")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(role, placement)| {
                let addresses: Vec<Ipv4Addr> = placement
                    .get("nodes")?
                    .as_array()?
                    .iter()
                    .map_while(|node| self.addresses.get(node.as_str()?).copied())
                    .collect();
                (!addresses.is_empty()).then(|| (role.clone(), addresses))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[&str]) -> Vec<(String, BTreeMap<String, String>)> {
        list.iter()
            .map(|n| ((*n).to_owned(), BTreeMap::new()))
            .collect()
    }

    #[test]
    fn each_node_gets_its_own_address_and_roles_follow_their_placement() {
        let nodes = LoopbackNodes::new(&names(&["a", "b", "c"])).expect("valid");
        let spec = json!({"placement": {"server": {"nodes": ["c"]}, "client": {"nodes": ["a"]}}});
        let roles = nodes.role_addresses(&spec);
        assert_eq!(roles["server"], [Ipv4Addr::new(127, 77, 0, 3)]);
        assert_eq!(roles["client"], [Ipv4Addr::new(127, 77, 0, 1)]);
        let unknown = json!({"placement": {"server": {"nodes": ["zz"]}}});
        assert!(nodes.role_addresses(&unknown).is_empty());
        // An MPI pair: the workers' replicas 0 and 1 on the pair's two nodes.
        let pair = json!({"placement": {"worker": {"nodes": ["b", "c"]}}});
        assert_eq!(
            nodes.role_addresses(&pair)["worker"],
            [Ipv4Addr::new(127, 77, 0, 2), Ipv4Addr::new(127, 77, 0, 3)]
        );
    }

    #[test]
    fn labels_stay_with_their_node() {
        let mut gold = BTreeMap::new();
        gold.insert("perfsweep.io/node-class".to_owned(), "gold".to_owned());
        let nodes = LoopbackNodes::new(&[
            ("b".to_owned(), gold.clone()),
            ("a".to_owned(), BTreeMap::new()),
        ])
        .expect("valid");
        let labelled = nodes.labelled();
        assert_eq!(labelled["b"], gold);
        assert!(labelled["a"].is_empty());
        // Addresses in the order given, not the sorted order.
        let spec = json!({"placement": {"server": {"nodes": ["b"]}}});
        assert_eq!(
            nodes.role_addresses(&spec)["server"],
            [Ipv4Addr::new(127, 77, 0, 1)]
        );
    }

    #[test]
    fn bad_lists_are_refused() {
        assert_eq!(
            LoopbackNodes::new(&names(&["a", "a"])),
            Err(NodesError::Duplicate("a".into()))
        );
        assert_eq!(
            LoopbackNodes::new(&names(&["a b"])),
            Err(NodesError::BadName("a b".into()))
        );
    }
}
