//! `run --local --nodes`: the stand-in nodes a node-pair sweep runs on. The fleet verdict
//! is the set's own (`local::sweep::SetRun::fleet`), judged as the controller judges it.

use serde_json::Value;

use crate::local::LocalOptions;
use crate::local::nodes::LoopbackNodes;

/// The stand-in nodes of `--nodes` (empty without it).
pub fn loopback_nodes(arg: Option<&str>) -> anyhow::Result<LoopbackNodes> {
    let names = super::validate::node_list(arg)?.unwrap_or_default();
    Ok(LoopbackNodes::new(&names)?)
}

/// `options` for one benchmark: its placed roles bound to their nodes' addresses.
pub fn options_for(options: &LocalOptions, nodes: &LoopbackNodes, spec: &Value) -> LocalOptions {
    let mut options = options.clone();
    options.role_addresses = nodes.role_addresses(spec);
    options
}
