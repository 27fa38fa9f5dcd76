//! The fleet section of `perfsweep results report`: for each node-pair sweep in the
//! records, the verdict, how long the acceptance took, the suspect nodes and links with
//! links to their evidence, and the heatmap. Empty without node-pair records.

use std::fmt::Write;

use super::fleet::{FleetGroup, groups};
use super::plot::escape;
use crate::judging::fleet::{OutlierRule, percent};
use crate::results::record::ResultRecord;

/// The section in both formats, and the heatmap files the Markdown links to.
#[derive(Clone, Debug, Default)]
pub struct FleetSection {
    pub groups: Vec<FleetGroup>,
    pub markdown: String,
    pub html: String,
    /// `(file name, SVG)`.
    pub heatmaps: Vec<(String, String)>,
}

impl FleetSection {
    /// Whether every fleet passed; `None` without any.
    pub fn passed(&self) -> Option<bool> {
        (!self.groups.is_empty()).then(|| self.groups.iter().all(|g| g.verdict.passed()))
    }
}

/// The fleet section of `records`; `records_link` is the path from the report to the
/// records' directory (evidence links are relative to it), e.g. `../results`.
pub fn section(records: &[ResultRecord], rule: OutlierRule, records_link: &str) -> FleetSection {
    let groups = groups(records, rule);
    let mut md = String::new();
    let mut html = String::new();
    let mut heatmaps = Vec::new();
    let link = |file: &str| {
        if records_link.is_empty() {
            file.to_owned()
        } else {
            format!("{}/{file}", records_link.trim_end_matches('/'))
        }
    };
    for (index, group) in groups.iter().enumerate() {
        let verdict = &group.verdict;
        let summary = verdict.summary();
        let passed = verdict.passed();
        let heading = format!("Fleet: {}", group.label);
        let duration = group
            .duration_seconds()
            .map_or_else(|| "unknown".to_owned(), describe_duration);
        let facts = format!(
            "{} nodes, {} pairs judged on {} ({}); fleet median {}; outlier rule: more than {} \
             robust standard deviations and {:.0}% below the median. The acceptance took {duration} \
             ({} to {}).",
            summary.nodes,
            summary.pairs,
            verdict.metric,
            match verdict.better {
                crate::judging::metrics::Better::Higher => "higher is better",
                crate::judging::metrics::Better::Lower => "lower is better",
            },
            verdict.median.map_or_else(
                || "-".to_owned(),
                |m| super::heatmap::quantity(m, &verdict.unit)
            ),
            verdict.rule.mads,
            verdict.rule.min_deviation * 100.0,
            group.started_at.as_deref().unwrap_or("?"),
            group.finished_at.as_deref().unwrap_or("?"),
        );
        let headline = if passed {
            "FLEET PASSED: no suspect node or link".to_owned()
        } else {
            format!(
                "FLEET FAILED: {} suspect node(s), {} suspect link(s), {} of {} pairs outliers",
                summary.suspect_nodes, summary.suspect_links, summary.outlier_pairs, summary.pairs
            )
        };
        let file = format!("fleet-heatmap-{index}.svg");
        let svg = super::plot::to_svg(&super::heatmap::scene(group));

        // Evidence per node: its outlier pairs' records.
        let node_rows: Vec<[String; 5]> = verdict
            .suspect_nodes()
            .map(|node| {
                let evidence: Vec<&str> = verdict
                    .pairs
                    .iter()
                    .filter(|p| p.outlier && p.nodes.contains(&node.node))
                    .filter_map(|p| p.evidence.as_deref())
                    .collect();
                [
                    node.node.clone(),
                    format!("{} of {}", node.outlier_pairs, node.pairs),
                    node.median.map_or_else(
                        || "-".to_owned(),
                        |m| super::heatmap::quantity(m, &verdict.unit),
                    ),
                    percent(node.deviation),
                    evidence.join(" "),
                ]
            })
            .collect();
        let link_rows: Vec<[String; 5]> = verdict
            .suspect_links()
            .into_iter()
            .map(|pair| {
                [
                    format!("{} ↔ {}", pair.nodes[0], pair.nodes[1]),
                    pair.value.map_or_else(
                        || "-".to_owned(),
                        |v| super::heatmap::quantity(v, &verdict.unit),
                    ),
                    percent(pair.deviation),
                    pair.reason.clone().unwrap_or_default(),
                    pair.evidence.clone().unwrap_or_default(),
                ]
            })
            .collect();

        // Markdown.
        let _ = writeln!(md, "## {heading}\n\n**{headline}**\n\n{facts}\n");
        let _ = writeln!(md, "### Suspect nodes\n");
        if node_rows.is_empty() {
            md.push_str("(none)\n\n");
        } else {
            md.push_str("| node | outlier pairs | median | vs fleet | evidence |\n| --- | --- | --- | --- | --- |\n");
            for row in &node_rows {
                let evidence: Vec<String> = row[4]
                    .split_whitespace()
                    .map(|f| format!("[{f}]({})", link(f)))
                    .collect();
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} |",
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    evidence.join(" ")
                );
            }
            md.push('\n');
        }
        let _ = writeln!(md, "### Suspect links\n");
        if link_rows.is_empty() {
            md.push_str("(none)\n\n");
        } else {
            md.push_str(
                "| link | value | vs fleet | why | evidence |\n| --- | --- | --- | --- | --- |\n",
            );
            for row in &link_rows {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | [{}]({}) |",
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    link(&row[4])
                );
            }
            md.push('\n');
        }
        let _ = writeln!(md, "![{heading} heatmap]({file})\n");

        // HTML.
        let class = if passed { "ok" } else { "bad" };
        let _ = writeln!(
            html,
            "<section class=\"fleet\"><h2>{}</h2>\n<p class=\"{class}\" id=\"fleet-verdict-{index}\">{}</p>\n<p>{}</p>",
            escape(&heading),
            escape(&headline),
            escape(&facts)
        );
        let evidence_links = |files: &str| {
            files
                .split_whitespace()
                .map(|f| format!("<a href=\"{}\">{}</a>", escape(&link(f)), escape(f)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        html.push_str("<h3>Suspect nodes</h3>\n");
        if node_rows.is_empty() {
            html.push_str("<p>(none)</p>\n");
        } else {
            html.push_str("<table><tr><th>node</th><th>outlier pairs</th><th>median</th><th>vs fleet</th><th>evidence</th></tr>\n");
            for row in &node_rows {
                let _ = writeln!(
                    html,
                    "<tr><td class=\"bad\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(&row[0]),
                    escape(&row[1]),
                    escape(&row[2]),
                    escape(&row[3]),
                    evidence_links(&row[4])
                );
            }
            html.push_str("</table>\n");
        }
        html.push_str("<h3>Suspect links</h3>\n");
        if link_rows.is_empty() {
            html.push_str("<p>(none)</p>\n");
        } else {
            html.push_str("<table><tr><th>link</th><th>value</th><th>vs fleet</th><th>why</th><th>evidence</th></tr>\n");
            for row in &link_rows {
                let _ = writeln!(
                    html,
                    "<tr><td class=\"bad\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    escape(&row[0]),
                    escape(&row[1]),
                    escape(&row[2]),
                    escape(&row[3]),
                    evidence_links(&row[4])
                );
            }
            html.push_str("</table>\n");
        }
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let _ = writeln!(
            html,
            "<figure class=\"heatmap\" id=\"fleet-heatmap-{index}\">{body}<figcaption>{} by node pair; crossed cells are outlier pairs, red labels suspect nodes</figcaption></figure></section>",
            escape(&verdict.metric)
        );
        heatmaps.push((file, svg));
    }
    FleetSection {
        groups,
        markdown: md,
        html,
        heatmaps,
    }
}

/// A measured span, rounded for reading (`2h 46m`, `3m 12s`, `41.2s`). Durations a user
/// wrote (timeouts) are printed by `crate::formats::duration::format`, which keeps every
/// unit.
fn describe_duration(seconds: f64) -> String {
    let whole = seconds.round() as u64;
    match whole {
        0..=59 => format!("{seconds:.1}s"),
        60..=3599 => format!("{}m {}s", whole / 60, whole % 60),
        _ => format!("{}h {}m", whole / 3600, (whole % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(a: &str, b: &str, gbps: f64) -> ResultRecord {
        serde_json::from_value(json!({
            "schemaVersion": crate::results::record::SCHEMA_VERSION,
            "runId": "r1",
            "benchmark": {"kind": "IPerf", "name": format!("p-{a}{b}"), "set": "fleet",
                "permutation": {"placement.server.nodes": [a], "placement.client.nodes": [b]}},
            "workloadSpecDigest": "d",
            "spec": {"duration": 5},
            "backend": "local",
            "environment": {"perfsweepVersion": "0"},
            "startedAt": "2026-11-25T10:00:00Z",
            "finishedAt": "2026-11-25T10:03:12Z",
            "outcome": {"status": "succeeded", "summary": "", "result": {},
                "metrics": [{"name": "received_bits_per_second", "better": "higher", "value": gbps * 1e9}]},
        }))
        .expect("a record")
    }

    #[test]
    fn the_section_names_the_suspect_with_evidence_and_inlines_the_heatmap() {
        let nodes = ["a", "b", "c", "d"];
        let mut records = Vec::new();
        for (i, a) in nodes.iter().enumerate() {
            for b in &nodes[i + 1..] {
                let slow = *a == "b" || *b == "b";
                records.push(record(a, b, if slow { 5.0 } else { 9.0 }));
            }
        }
        let section = section(&records, OutlierRule::default(), "../results");
        assert_eq!(section.passed(), Some(false));
        assert!(
            section.html.contains("FLEET FAILED: 1 suspect node(s)"),
            "{}",
            section.html
        );
        assert!(section.html.contains("<td class=\"bad\">b</td>"));
        assert!(section.html.contains("href=\"../results/p-ab.json\""));
        assert!(section.html.contains("id=\"fleet-heatmap-0\"><svg"));
        assert!(section.markdown.contains("took 3m 12s"));
        assert_eq!(section.heatmaps.len(), 1);
        let cases = crate::results::group(&records, crate::judging::stats::Stability::default());
        let report = crate::results::report::render_with_fleet(&records, &cases, &section, &[]);
        assert!(
            report.html.contains("FLEET NOT ACCEPTED"),
            "{}",
            report.html
        );
        assert!(
            report
                .charts
                .iter()
                .any(|(f, _)| f == "fleet-heatmap-0.svg")
        );
    }

    #[test]
    fn no_pairs_no_section() {
        let mut plain = record("a", "b", 1.0);
        plain.benchmark.permutation.clear();
        let section = section(&[plain], OutlierRule::default(), "");
        assert_eq!(section.passed(), None);
        assert!(section.html.is_empty());
    }
}
