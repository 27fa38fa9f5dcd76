//! `run --local --nodes`: the stand-in nodes, and the fleet verdict printed after a
//! node-pair sweep. Kept apart from `run.rs` so the local run's own logic stays as it is.

use perfsweep_benchmarks::fleet::{self, FleetVerdict, PairResult};
use perfsweep_benchmarks::registry::KindInfo;
use serde_json::Value;

use crate::local::nodes::LoopbackNodes;
use crate::local::{LocalOptions, LocalOutcome, LocalRun};

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

/// One finished pair test: the kind, the spec it ran, its run.
pub struct PairRun<'a> {
    pub kind: &'static KindInfo,
    pub name: &'a str,
    pub spec: &'a Value,
    pub run: &'a LocalRun,
}

/// The fleet verdict over the pair tests, judged on the judged metric with the default
/// outlier rule; `None` when no test ran on a pair of nodes.
pub fn verdict(runs: &[PairRun]) -> Option<FleetVerdict> {
    let first = runs.first()?;
    let criteria = perfsweep_benchmarks::acceptance::criteria_of(first.spec);
    let metric = fleet::judged_metric(first.kind, &criteria)?;
    let results: Vec<PairResult> = runs
        .iter()
        .filter_map(|pair| {
            let nodes = pair_nodes(pair.kind, pair.spec)?;
            let (value, accepted) = match &pair.run.outcome {
                LocalOutcome::Succeeded { result, .. } => {
                    let metrics = pair.kind.metrics(result);
                    (
                        perfsweep_benchmarks::metrics::find(&metrics, metric.name).map(|m| m.value),
                        perfsweep_benchmarks::acceptance::evaluate(&criteria, &metrics)
                            .map(|v| v.accepted),
                    )
                }
                LocalOutcome::Failed(_) => (None, None),
            };
            Some(PairResult {
                nodes,
                value,
                accepted,
                evidence: Some(format!("{}.json", pair.name)),
            })
        })
        .collect();
    if results.is_empty() {
        return None;
    }
    Some(fleet::judge(
        metric.name,
        metric.unit,
        metric.better,
        fleet::OutlierRule::default(),
        &results,
    ))
}

/// The nodes of the kind's first two roles, when both are placed on one node.
fn pair_nodes(kind: &KindInfo, spec: &Value) -> Option<[String; 2]> {
    let mut nodes = kind.roles.iter().filter_map(|role| {
        spec.pointer(&format!("/placement/{role}/nodes/0"))?
            .as_str()
            .map(str::to_owned)
    });
    Some([nodes.next()?, nodes.next()?])
}
