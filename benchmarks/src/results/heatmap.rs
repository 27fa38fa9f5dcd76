//! The pair matrix of a node-pair sweep as a chart: node × node, each cell coloured by
//! the judged metric, outlier pairs crossed out, suspect nodes' labels in red. Drawn as
//! a [`Scene`], so the SVG and the PNG are the same picture.
//!
//! Rows are the first role's node, columns the second's; a pair tested one way only
//! fills both cells (the matrix is symmetric unless the sweep was directional).

use std::collections::BTreeMap;

use super::fleet::FleetGroup;
use super::plot::{Anchor, Scene, Shape};
use super::si;
use crate::judging::metrics::Better;

/// Sequential colours, worst first (dark purple → yellow, after viridis): readable in
/// grey and by colour-blind readers.
const PALETTE: [&str; 9] = [
    "#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30",
    "#fde725",
];
const MISSING: &str = "#d9d9d9";
const DIAGONAL: &str = "#f4f4f4";
const OUTLIER_MARK: &str = "#ff2a2a";
const SUSPECT_LABEL: &str = "#c00000";
const TEXT: &str = "#222222";

const LEFT: f64 = 110.0;
const TOP: f64 = 110.0;
const LEGEND: f64 = 250.0;
const BOTTOM: f64 = 40.0;

/// The heatmap of one fleet group.
pub fn scene(group: &FleetGroup) -> Scene {
    let verdict = &group.verdict;
    let nodes = &group.nodes;
    let n = nodes.len().max(1);
    let cell = (480.0 / n as f64).clamp(3.0, 48.0);
    let side = cell * n as f64;
    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| (node.as_str(), i))
        .collect();
    let values: Vec<f64> = verdict.pairs.iter().filter_map(|p| p.value).collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // Palette index 0 is the worst value, whichever way the metric is better.
    let colour = |value: f64| {
        // One distinct value (or none): everything is the best colour.
        if high.partial_cmp(&low) != Some(std::cmp::Ordering::Greater) {
            return PALETTE[PALETTE.len() - 1];
        }
        let mut t = (value - low) / (high - low);
        if verdict.better == Better::Lower {
            t = 1.0 - t;
        }
        PALETTE[((t * (PALETTE.len() - 1) as f64).round() as usize).min(PALETTE.len() - 1)]
    };

    let mut shapes = vec![Shape::Text {
        at: (LEFT, 24.0),
        text: format!("{}: {} by node pair", group.label, verdict.metric),
        anchor: Anchor::Start,
        size: 14.0,
        color: TEXT,
        vertical: false,
    }];
    // Empty matrix: missing pairs stay grey, the diagonal pale.
    for i in 0..n {
        for j in 0..n {
            shapes.push(Shape::Rect {
                x: LEFT + j as f64 * cell,
                y: TOP + i as f64 * cell,
                w: cell,
                h: cell,
                fill: Some(if i == j { DIAGONAL } else { MISSING }),
                stroke: None,
            });
        }
    }
    // Cells: a pair's own cell, and its mirror unless the sweep tested that way too.
    let mut cells: BTreeMap<(usize, usize), &crate::judging::fleet::PairVerdict> = BTreeMap::new();
    for pair in &verdict.pairs {
        let (Some(&a), Some(&b)) = (
            index.get(pair.nodes[0].as_str()),
            index.get(pair.nodes[1].as_str()),
        ) else {
            continue;
        };
        cells.insert((a, b), pair);
    }
    let mirrored: Vec<((usize, usize), &crate::judging::fleet::PairVerdict)> = cells
        .iter()
        .filter(|((a, b), _)| !cells.contains_key(&(*b, *a)))
        .map(|((a, b), pair)| ((*b, *a), *pair))
        .collect();
    cells.extend(mirrored);
    for ((row, column), pair) in &cells {
        let (x, y) = (LEFT + *column as f64 * cell, TOP + *row as f64 * cell);
        shapes.push(Shape::Rect {
            x,
            y,
            w: cell,
            h: cell,
            fill: Some(pair.value.map_or(MISSING, colour)),
            stroke: None,
        });
        if pair.outlier {
            let inset = cell * 0.2;
            shapes.push(Shape::Line {
                from: (x + inset, y + inset),
                to: (x + cell - inset, y + cell - inset),
                color: OUTLIER_MARK,
            });
            shapes.push(Shape::Line {
                from: (x + cell - inset, y + inset),
                to: (x + inset, y + cell - inset),
                color: OUTLIER_MARK,
            });
            shapes.push(Shape::Rect {
                x: x + 0.5,
                y: y + 0.5,
                w: cell - 1.0,
                h: cell - 1.0,
                fill: None,
                stroke: Some(OUTLIER_MARK),
            });
        }
    }
    shapes.push(Shape::Rect {
        x: LEFT,
        y: TOP,
        w: side,
        h: side,
        fill: None,
        stroke: Some(TEXT),
    });
    // Node labels, when there is room for them (every k-th otherwise).
    let suspect: Vec<&str> = verdict.suspect_nodes().map(|n| n.node.as_str()).collect();
    let every = (12.0 / cell).ceil().max(1.0) as usize;
    for (i, node) in nodes.iter().enumerate() {
        let is_suspect = suspect.contains(&node.as_str());
        if i % every != 0 && !is_suspect {
            continue;
        }
        let colour = if is_suspect { SUSPECT_LABEL } else { TEXT };
        let middle = i as f64 * cell + cell / 2.0;
        let label = shorten(node);
        shapes.push(Shape::Text {
            at: (LEFT - 6.0, TOP + middle + 4.0),
            text: label.clone(),
            anchor: Anchor::End,
            size: 11.0,
            color: colour,
            vertical: false,
        });
        shapes.push(Shape::Text {
            at: (LEFT + middle + 4.0, TOP - 6.0),
            text: label,
            anchor: Anchor::Start,
            size: 11.0,
            color: colour,
            vertical: true,
        });
    }
    shapes.push(Shape::Text {
        at: (LEFT + side / 2.0, TOP + side + 24.0),
        text: "second role's node (columns); first role's node (rows)".to_owned(),
        anchor: Anchor::Middle,
        size: 11.0,
        color: TEXT,
        vertical: false,
    });
    legend(&mut shapes, verdict, low, high, LEFT + side + 30.0);
    Scene {
        width: LEFT + side + LEGEND,
        height: TOP + side + BOTTOM,
        shapes,
    }
}

/// The per-node chart of an each-node sweep: a bar per node, coloured by the judged
/// metric (worst dark), rejected nodes' names in red with the reason, each node's
/// reference bounds on the judged metric as ticks, and the fleet median dashed.
pub fn node_scene(group: &super::nodes::NodeGroup) -> Scene {
    const NAME: f64 = 130.0;
    const BARS: f64 = 420.0;
    const VERDICT: f64 = 420.0;
    let verdict = &group.verdict;
    let n = verdict.nodes.len().max(1);
    let row = (6000.0 / n as f64).clamp(3.0, 20.0);
    let bounds = |node: &crate::judging::nodes::NodeJudgement| {
        node.references
            .iter()
            .find(|r| r.metric == verdict.metric)
            .map(|r| (r.low, r.high))
    };
    let values: Vec<f64> = verdict.nodes.iter().filter_map(|n| n.value).collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    // The scale reaches the highest value or bound, from zero: bars compare as lengths.
    let top = verdict
        .nodes
        .iter()
        .filter_map(bounds)
        .flat_map(|(l, h)| [l, h])
        .flatten()
        .chain(values.iter().copied())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x_of = |value: f64| NAME + (value / top).clamp(0.0, 1.0) * BARS;
    let colour = |value: f64| {
        if high.partial_cmp(&low) != Some(std::cmp::Ordering::Greater) {
            return PALETTE[PALETTE.len() - 1];
        }
        let mut t = (value - low) / (high - low);
        if verdict.better == Better::Lower {
            t = 1.0 - t;
        }
        PALETTE[((t * (PALETTE.len() - 1) as f64).round() as usize).min(PALETTE.len() - 1)]
    };
    let mut shapes = vec![Shape::Text {
        at: (10.0, 24.0),
        text: format!("{}: {} by node", group.label, verdict.metric),
        anchor: Anchor::Start,
        size: 14.0,
        color: TEXT,
        vertical: false,
    }];
    let labelled = row >= 9.0;
    for (i, node) in verdict.nodes.iter().enumerate() {
        let y = TOP + i as f64 * row;
        shapes.push(Shape::Rect {
            x: NAME,
            y: y + row * 0.1,
            w: node.value.map_or(BARS, |v| x_of(v) - NAME),
            h: row * 0.8,
            fill: Some(node.value.map_or(MISSING, colour)),
            stroke: (!node.passed).then_some(OUTLIER_MARK),
        });
        if let Some((l, h)) = bounds(node) {
            for bound in [l, h].into_iter().flatten() {
                let x = x_of(bound);
                shapes.push(Shape::Line {
                    from: (x, y),
                    to: (x, y + row),
                    color: TEXT,
                });
            }
        }
        if !labelled && node.passed {
            continue;
        }
        let colour = if node.passed { TEXT } else { SUSPECT_LABEL };
        shapes.push(Shape::Text {
            at: (NAME - 6.0, y + row * 0.5 + 4.0),
            text: shorten(&node.node),
            anchor: Anchor::End,
            size: 11.0,
            color: colour,
            vertical: false,
        });
        let mut text = match node.value {
            Some(v) => format!("{}  {}", quantity(v, &verdict.unit), node.verdict_text()),
            None => node.verdict_text(),
        };
        if text.chars().count() > 70 {
            text = text.chars().take(69).collect::<String>() + "…";
        }
        shapes.push(Shape::Text {
            at: (NAME + BARS + 10.0, y + row * 0.5 + 4.0),
            text,
            anchor: Anchor::Start,
            size: 11.0,
            color: colour,
            vertical: false,
        });
    }
    let bottom = TOP + n as f64 * row;
    if let Some(median) = verdict.median {
        let x = x_of(median);
        shapes.push(Shape::Dashed {
            from: (x, TOP - 6.0),
            to: (x, bottom + 6.0),
            color: TEXT,
        });
        shapes.push(Shape::Text {
            at: (x, TOP - 10.0),
            text: format!("fleet median {}", quantity(median, &verdict.unit)),
            anchor: Anchor::Middle,
            size: 11.0,
            color: TEXT,
            vertical: false,
        });
    }
    shapes.push(Shape::Text {
        at: (NAME, bottom + 24.0),
        text: format!(
            "0 to {} ({}); ticks: the node's reference bounds",
            quantity(top, &verdict.unit),
            short_metric(&verdict.metric)
        ),
        anchor: Anchor::Start,
        size: 11.0,
        color: TEXT,
        vertical: false,
    });
    Scene {
        width: NAME + BARS + VERDICT,
        height: bottom + BOTTOM,
        shapes,
    }
}

/// The colour scale (values in the metric's unit), and what the marks mean.
fn legend(
    shapes: &mut Vec<Shape>,
    verdict: &crate::judging::fleet::FleetVerdict,
    low: f64,
    high: f64,
    x: f64,
) {
    let unit = &verdict.unit;
    let text = |shapes: &mut Vec<Shape>, y: f64, text: String, color: &'static str| {
        shapes.push(Shape::Text {
            at: (x + 22.0, y),
            text,
            anchor: Anchor::Start,
            size: 11.0,
            color,
            vertical: false,
        });
    };
    text(
        shapes,
        TOP - 10.0,
        format!("{} ({unit})", short_metric(&verdict.metric)),
        TEXT,
    );
    let step = 18.0;
    let have_values = low.is_finite() && high.is_finite();
    for (k, colour) in PALETTE.iter().enumerate().rev() {
        let y = TOP + (PALETTE.len() - 1 - k) as f64 * step;
        shapes.push(Shape::Rect {
            x,
            y,
            w: 16.0,
            h: step,
            fill: Some(colour),
            stroke: None,
        });
        if have_values && (k == 0 || k == PALETTE.len() - 1 || k == PALETTE.len() / 2) {
            let mut t = k as f64 / (PALETTE.len() - 1) as f64;
            if verdict.better == Better::Lower {
                t = 1.0 - t;
            }
            let value = low + t * (high - low);
            text(shapes, y + 13.0, quantity(value, unit), TEXT);
        }
    }
    let below = TOP + PALETTE.len() as f64 * step + 24.0;
    shapes.push(Shape::Rect {
        x: x + 1.0,
        y: below - 11.0,
        w: 14.0,
        h: 14.0,
        fill: Some(MISSING),
        stroke: Some(OUTLIER_MARK),
    });
    text(shapes, below, "outlier pair".to_owned(), TEXT);
    text(
        shapes,
        below + 20.0,
        "red label: suspect node".to_owned(),
        SUSPECT_LABEL,
    );
    if let Some(median) = verdict.median {
        text(
            shapes,
            below + 40.0,
            format!("fleet median {}", quantity(median, unit)),
            TEXT,
        );
    }
}

/// A value with its unit, three significant digits: `13.4 Gbit/s`, `2.31 µs`.
pub fn quantity(value: f64, unit: &str) -> String {
    let text = si(value);
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(text.len());
    let (digits, prefix) = text.split_at(split);
    let Ok(number) = digits.parse::<f64>() else {
        return format!("{text} {unit}");
    };
    let decimals = match number.abs() {
        n if n >= 100.0 => 0,
        n if n >= 10.0 => 1,
        _ => 2,
    };
    format!("{number:.decimals$} {prefix}{unit}")
}

/// Node names can be long (FQDNs): the first 14 characters.
fn shorten(node: &str) -> String {
    let mut label: String = node.chars().take(14).collect();
    if node.chars().count() > 14 {
        label.push('~');
    }
    label
}

/// The metric name without its unit suffix, for the legend title.
fn short_metric(metric: &str) -> &str {
    metric
        .strip_suffix("_bits_per_second")
        .or_else(|| metric.strip_suffix("_microseconds"))
        .unwrap_or(metric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::fleet::{OutlierRule, PairResult, judge};

    fn group(n: usize, slow: usize) -> FleetGroup {
        let nodes: Vec<String> = (0..n).map(|i| format!("node-{i}")).collect();
        let mut results = Vec::new();
        for a in 0..n {
            for b in a + 1..n {
                let value = if a == slow || b == slow {
                    6e9
                } else {
                    10e9 + (a + b) as f64 * 1e7
                };
                results.push(PairResult {
                    nodes: [nodes[a].clone(), nodes[b].clone()],
                    value: Some(value),
                    accepted: None,
                    evidence: None,
                });
            }
        }
        FleetGroup {
            label: "fleet (IPerf)".into(),
            kind: "IPerf".into(),
            verdict: judge(
                "received_bits_per_second",
                "bit/s",
                Better::Higher,
                OutlierRule::default(),
                &results,
            ),
            nodes,
            started_at: None,
            finished_at: None,
        }
    }

    #[test]
    fn outlier_pairs_are_crossed_and_suspects_labelled_red() {
        let scene = scene(&group(5, 3));
        let crosses = scene
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Line { color, .. } if *color == OUTLIER_MARK))
            .count();
        // Node 3's four pairs, both cells each, two strokes per cross.
        assert_eq!(crosses, 4 * 2 * 2);
        let red: Vec<&str> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Text { text, color, .. }
                    if *color == SUSPECT_LABEL && text.starts_with("node") =>
                {
                    Some(text.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(red, ["node-3", "node-3"]);
        // The worst colour is on the slow node's cells, the best elsewhere.
        let fills: Vec<&str> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Rect { fill: Some(f), .. } => Some(*f),
                _ => None,
            })
            .collect();
        assert!(fills.contains(&PALETTE[0]) && fills.contains(&PALETTE[PALETTE.len() - 1]));
    }

    #[test]
    fn the_per_node_view_names_rejected_nodes_in_red_with_their_reference_bounds() {
        use crate::results::nodes::tests::{gold, record};
        let mut records: Vec<_> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| record(n, Some(10.0), serde_json::json!([])))
            .collect();
        records.push(record("slow", Some(5.0), serde_json::json!([])));
        records.push(record("g", Some(10.0), gold(10.0)));
        let groups = crate::results::nodes::groups(&records, OutlierRule::default());
        let scene = node_scene(&groups[0]);
        let red: Vec<&str> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Text { text, color, .. } if *color == SUSPECT_LABEL => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(red[0], "slow", "{red:?}");
        assert!(red[1].contains("FAIL: outlier"), "{red:?}");
        assert_eq!(red.len(), 2, "only the slow node: {red:?}");
        // g's reference: 9.5 to 11 Gbit/s, two ticks.
        let ticks = scene
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Line { color, .. } if *color == TEXT))
            .count();
        assert_eq!(ticks, 2);
    }

    #[test]
    fn quantities_have_three_digits_and_the_unit() {
        assert_eq!(quantity(13.4147e9, "bit/s"), "13.4 Gbit/s");
        assert_eq!(quantity(9.5e9, "bit/s"), "9.50 Gbit/s");
        assert_eq!(quantity(2.31e-6, "s"), "2.31 µs");
    }

    #[test]
    fn a_large_fleet_fits_on_the_canvas() {
        let scene = scene(&group(300, 7));
        assert!(
            scene.width <= 8192.0 && scene.height <= 8192.0,
            "{}×{}",
            scene.width,
            scene.height
        );
    }
}
