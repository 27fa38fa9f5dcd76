//! `perfsweep results plot --heatmap` and the links from a report to its records.

use std::path::{Component, Path};

use anyhow::Context;
use perfsweep_benchmarks::judging::fleet::OutlierRule;
use perfsweep_benchmarks::results::record::ResultRecord;
use perfsweep_benchmarks::results::{fleet, heatmap, nodes, plot::Scene};

/// The heatmap of the first node-pair sweep in `records`, or without one the per-node
/// chart of the first each-node sweep (the others are named).
pub fn scene(records: &[ResultRecord], rule: OutlierRule) -> anyhow::Result<Scene> {
    let groups = fleet::groups(records, rule);
    if let Some(first) = groups.first() {
        for other in &groups[1..] {
            eprintln!(
                "note: also a node-pair sweep, not drawn: {} (give its records alone to draw it)",
                other.label
            );
        }
        eprintln!("{}", first.verdict.headline());
        return Ok(heatmap::scene(first));
    }
    let node_groups = nodes::groups(records, rule);
    let first = node_groups.first().context(
        "no record is from a node-pair or each-node sweep (permutations.nodePairs, eachNode): nothing to draw a heatmap of",
    )?;
    for other in &node_groups[1..] {
        eprintln!(
            "note: also an each-node sweep, not drawn: {} (give its records alone to draw it)",
            other.label
        );
    }
    eprintln!("{}", first.verdict.headline());
    Ok(heatmap::node_scene(first))
}

/// The path from directory `from` to `to`, for links in a report written to `from`
/// (`../results`); absolute when the two share no root.
pub fn relative_link(from: &Path, to: &Path) -> String {
    let (Ok(from), Ok(to)) = (from.canonicalize(), to.canonicalize()) else {
        return to.display().to_string();
    };
    let from: Vec<Component> = from.components().collect();
    let to_parts: Vec<Component> = to.components().collect();
    let common = from
        .iter()
        .zip(&to_parts)
        .take_while(|(a, b)| a == b)
        .count();
    let mut parts: Vec<String> = vec!["..".to_owned(); from.len() - common];
    parts.extend(
        to_parts[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    }
}
