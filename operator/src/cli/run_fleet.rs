//! `run --local --nodes`: the stand-in nodes a node-pair or each-node sweep runs on. The
//! fleet verdict is the set's own (`local::sweep::SetRun::fleet` and `nodes`), judged as
//! the controller judges it.

use serde_json::Value;

use crate::local::LocalOptions;
use crate::local::nodes::LoopbackNodes;

/// The stand-in nodes of `--nodes` (empty without it).
pub fn loopback_nodes(arg: Option<&str>) -> anyhow::Result<LoopbackNodes> {
    let nodes = super::validate::node_list(arg)?.unwrap_or_default();
    Ok(LoopbackNodes::new(&nodes)?)
}

/// `options` for one benchmark: its placed roles bound to their nodes' addresses.
pub fn options_for(options: &LocalOptions, nodes: &LoopbackNodes, spec: &Value) -> LocalOptions {
    let mut options = options.clone();
    options.role_addresses = nodes.role_addresses(spec);
    options
}
