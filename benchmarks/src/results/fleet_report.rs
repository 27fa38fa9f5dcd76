//! The fleet section of `perfsweep results report`: for each node-pair sweep in the
//! records, the verdict, how long the acceptance took, the suspect nodes and links with
//! links to their evidence, and the heatmap; for each each-node sweep, every node with
//! its figure, the reference it was judged against and its verdict (what a vendor is
//! shown), and the per-node chart. Empty without node-pair or each-node records.

use std::fmt::Write;

use super::fleet::{FleetGroup, groups};
use super::nodes::NodeGroup;
use super::plot::escape;
use crate::judging::fleet::{OutlierRule, percent};
use crate::judging::metrics::Better;
use crate::results::record::ResultRecord;

/// The section in both formats, and the heatmap files the Markdown links to.
#[derive(Clone, Debug, Default)]
pub struct FleetSection {
    pub groups: Vec<FleetGroup>,
    /// The each-node sweeps.
    pub node_groups: Vec<NodeGroup>,
    pub markdown: String,
    pub html: String,
    /// `(file name, SVG)`.
    pub heatmaps: Vec<(String, String)>,
}

impl FleetSection {
    /// Whether every fleet passed (node pairs and each node); `None` without any.
    pub fn passed(&self) -> Option<bool> {
        (!self.groups.is_empty() || !self.node_groups.is_empty()).then(|| {
            self.groups.iter().all(|g| g.verdict.passed())
                && self.node_groups.iter().all(|g| g.verdict.passed())
        })
    }
}

/// The fleet section of `records`; `records_link` is the path from the report to the
/// records' directory (evidence links are relative to it), e.g. `../results`.
pub fn section(records: &[ResultRecord], rule: OutlierRule, records_link: &str) -> FleetSection {
    let links = Links(records_link);
    let mut out = FleetSection {
        groups: groups(records, rule),
        node_groups: super::nodes::groups(records, rule),
        ..FleetSection::default()
    };
    for (index, group) in out.groups.iter().enumerate() {
        let (md, html, heatmap) = pair_group(index, group, &links);
        out.markdown.push_str(&md);
        out.html.push_str(&html);
        out.heatmaps.push(heatmap);
    }
    for (index, group) in out.node_groups.iter().enumerate() {
        let (md, html, chart) = node_group(index, group, &links);
        out.markdown.push_str(&md);
        out.html.push_str(&html);
        out.heatmaps.push(chart);
    }
    out
}

/// Evidence links, relative to the records' directory.
struct Links<'a>(&'a str);

impl Links<'_> {
    fn to(&self, file: &str) -> String {
        if self.0.is_empty() {
            file.to_owned()
        } else {
            format!("{}/{file}", self.0.trim_end_matches('/'))
        }
    }

    /// Whitespace-separated evidence files as Markdown links.
    fn markdown(&self, files: &str) -> String {
        files
            .split_whitespace()
            .map(|f| format!("[{f}]({})", self.to(f)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whitespace-separated evidence files as HTML links.
    fn html(&self, files: &str) -> String {
        files
            .split_whitespace()
            .map(|f| format!("<a href=\"{}\">{}</a>", escape(&self.to(f)), escape(f)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A table of a group: its rows' last cell is the evidence (files, whitespace-separated).
struct Table<'a> {
    title: &'a str,
    header: &'a [&'a str],
    rows: Vec<Vec<String>>,
    /// The CSS class of each row's first cell (`bad` for a suspect).
    first_class: fn(&[String]) -> &'static str,
}

impl Table<'_> {
    fn markdown(&self, md: &mut String, links: &Links) {
        let _ = writeln!(md, "### {}\n", self.title);
        if self.rows.is_empty() {
            md.push_str("(none)\n\n");
            return;
        }
        let _ = writeln!(
            md,
            "| {} |\n|{}",
            self.header.join(" | "),
            " --- |".repeat(self.header.len())
        );
        for row in &self.rows {
            let mut cells: Vec<String> = row.clone();
            if let Some(last) = cells.last_mut() {
                *last = links.markdown(last);
            }
            let _ = writeln!(md, "| {} |", cells.join(" | "));
        }
        md.push('\n');
    }

    fn html(&self, html: &mut String, links: &Links) {
        let _ = writeln!(html, "<h3>{}</h3>", escape(self.title));
        if self.rows.is_empty() {
            html.push_str("<p>(none)</p>\n");
            return;
        }
        html.push_str("<table><tr>");
        for name in self.header {
            let _ = write!(html, "<th>{}</th>", escape(name));
        }
        html.push_str("</tr>\n");
        for row in &self.rows {
            html.push_str("<tr>");
            let last = row.len().saturating_sub(1);
            for (i, cell) in row.iter().enumerate() {
                let class = if i == 0 { (self.first_class)(row) } else { "" };
                let class = if class.is_empty() {
                    String::new()
                } else {
                    format!(" class=\"{class}\"")
                };
                let text = if i == last {
                    links.html(cell)
                } else {
                    escape(cell)
                };
                let _ = write!(html, "<td{class}>{text}</td>");
            }
            html.push_str("</tr>\n");
        }
        html.push_str("</table>\n");
    }
}

fn direction(better: Better) -> &'static str {
    match better {
        Better::Higher => "higher is better",
        Better::Lower => "lower is better",
    }
}

fn duration_of(started: Option<&str>, finished: Option<&str>) -> String {
    let parse = |t: Option<&str>| t?.parse::<jiff::Timestamp>().ok();
    match (parse(started), parse(finished)) {
        (Some(start), Some(end)) => {
            describe_duration((end.as_millisecond() - start.as_millisecond()) as f64 / 1000.0)
        }
        _ => "unknown".to_owned(),
    }
}

/// The heading, verdict line, facts and closing figure of a group, in both formats,
/// around its tables.
struct Group<'a> {
    heading: String,
    headline: String,
    facts: String,
    passed: bool,
    /// `fleet-verdict` / `nodes-verdict`, with the index: the verdict line's HTML id.
    id: String,
    tables: Vec<Table<'a>>,
    /// `(file, SVG, caption)` of the figure.
    figure: (String, String, String),
}

impl Group<'_> {
    fn render(self, links: &Links) -> (String, String, (String, String)) {
        let Group {
            heading,
            headline,
            facts,
            passed,
            id,
            tables,
            figure: (file, svg, caption),
        } = self;
        let mut md = String::new();
        let _ = writeln!(md, "## {heading}\n\n**{headline}**\n\n{facts}\n");
        for table in &tables {
            table.markdown(&mut md, links);
        }
        let _ = writeln!(md, "![{heading}]({file})\n");

        let mut html = String::new();
        let class = if passed { "ok" } else { "bad" };
        let _ = writeln!(
            html,
            "<section class=\"fleet\"><h2>{}</h2>\n<p class=\"{class}\" id=\"{id}\">{}</p>\n<p>{}</p>",
            escape(&heading),
            escape(&headline),
            escape(&facts)
        );
        for table in &tables {
            table.html(&mut html, links);
        }
        let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
        let figure_id = file.trim_end_matches(".svg");
        let _ = writeln!(
            html,
            "<figure class=\"heatmap\" id=\"{figure_id}\">{body}<figcaption>{}</figcaption></figure></section>",
            escape(&caption)
        );
        (md, html, (file, svg))
    }
}

/// A node-pair sweep: verdict, suspect nodes and links, heatmap.
fn pair_group(
    index: usize,
    group: &FleetGroup,
    links: &Links,
) -> (String, String, (String, String)) {
    let verdict = &group.verdict;
    let summary = verdict.summary();
    let passed = verdict.passed();
    let facts = format!(
        "{} nodes, {} pairs judged on {} ({}); fleet median {}; outlier rule: more than {} \
         robust standard deviations and {:.0}% below the median. The acceptance took {} \
         ({} to {}).",
        summary.nodes,
        summary.pairs,
        verdict.metric,
        direction(verdict.better),
        verdict.median.map_or_else(
            || "-".to_owned(),
            |m| super::heatmap::quantity(m, &verdict.unit)
        ),
        verdict.rule.mads,
        verdict.rule.min_deviation * 100.0,
        duration_of(group.started_at.as_deref(), group.finished_at.as_deref()),
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
    let quantity = |v: Option<f64>| {
        v.map_or_else(
            || "-".to_owned(),
            |v| super::heatmap::quantity(v, &verdict.unit),
        )
    };
    // Evidence per node: its outlier pairs' records.
    let node_rows = verdict
        .suspect_nodes()
        .map(|node| {
            let evidence: Vec<&str> = verdict
                .pairs
                .iter()
                .filter(|p| p.outlier && p.nodes.contains(&node.node))
                .filter_map(|p| p.evidence.as_deref())
                .collect();
            vec![
                node.node.clone(),
                format!("{} of {}", node.outlier_pairs, node.pairs),
                quantity(node.median),
                percent(node.deviation),
                evidence.join(" "),
            ]
        })
        .collect();
    let link_rows = verdict
        .suspect_links()
        .into_iter()
        .map(|pair| {
            vec![
                format!("{} ↔ {}", pair.nodes[0], pair.nodes[1]),
                quantity(pair.value),
                percent(pair.deviation),
                pair.reason.clone().unwrap_or_default(),
                pair.evidence.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let bad = |_: &[String]| "bad";
    Group {
        heading: format!("Fleet: {}", group.label),
        headline,
        facts,
        passed,
        id: format!("fleet-verdict-{index}"),
        tables: vec![
            Table {
                title: "Suspect nodes",
                header: &["node", "outlier pairs", "median", "vs fleet", "evidence"],
                rows: node_rows,
                first_class: bad,
            },
            Table {
                title: "Suspect links",
                header: &["link", "value", "vs fleet", "why", "evidence"],
                rows: link_rows,
                first_class: bad,
            },
        ],
        figure: (
            format!("fleet-heatmap-{index}.svg"),
            super::plot::to_svg(&super::heatmap::scene(group)),
            format!(
                "{} by node pair; crossed cells are outlier pairs, red labels suspect nodes",
                verdict.metric
            ),
        ),
    }
    .render(links)
}

/// An each-node sweep: verdict, then every node with its figure, the reference it was
/// judged against and its verdict, and the per-node chart.
fn node_group(
    index: usize,
    group: &NodeGroup,
    links: &Links,
) -> (String, String, (String, String)) {
    let verdict = &group.verdict;
    let summary = verdict.summary();
    let passed = verdict.passed();
    let quantity = |v: Option<f64>| {
        v.map_or_else(
            || "-".to_owned(),
            |v| super::heatmap::quantity(v, &verdict.unit),
        )
    };
    let facts = format!(
        "{} nodes judged on {} ({}); fleet median {}; outlier rule: more than {} robust \
         standard deviations and {:.0}% worse than the median; each node also against the \
         reference its labels chose (column reference). The acceptance took {} ({} to {}).",
        summary.nodes,
        verdict.metric,
        direction(verdict.better),
        quantity(verdict.median),
        verdict.rule.mads,
        verdict.rule.min_deviation * 100.0,
        duration_of(group.started_at.as_deref(), group.finished_at.as_deref()),
        group.started_at.as_deref().unwrap_or("?"),
        group.finished_at.as_deref().unwrap_or("?"),
    );
    let headline = if passed {
        format!(
            "NODES PASSED: all {} nodes within the fleet and their references",
            summary.nodes
        )
    } else {
        format!(
            "NODES FAILED: {} of {} nodes rejected ({} outlier(s), {} out of reference)",
            summary.rejected, summary.nodes, summary.outliers, summary.out_of_reference
        )
    };
    let rows = verdict
        .nodes
        .iter()
        .map(|node| {
            let figure = match node.value {
                Some(_) => format!("{} ({})", quantity(node.value), percent(node.deviation)),
                None => "failed".to_owned(),
            };
            vec![
                node.node.clone(),
                figure,
                node.references_text(),
                node.verdict_text(),
                node.evidence.clone().unwrap_or_default(),
            ]
        })
        .collect();
    Group {
        heading: format!("Nodes: {}", group.label),
        headline,
        facts,
        passed,
        id: format!("nodes-verdict-{index}"),
        tables: vec![Table {
            title: "Per node",
            header: &["node", "figure", "reference", "verdict", "evidence"],
            rows,
            first_class: |row| {
                if row.get(3).is_some_and(|v| v.starts_with("FAIL")) {
                    "bad"
                } else {
                    ""
                }
            },
        }],
        figure: (
            format!("nodes-{index}.svg"),
            super::plot::to_svg(&super::heatmap::node_scene(group)),
            format!(
                "{} by node; red: rejected nodes, ticks: each node's reference bounds",
                verdict.metric
            ),
        ),
    }
    .render(links)
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
    fn an_each_node_sweep_gets_a_per_node_table_with_figure_reference_and_verdict() {
        use crate::results::nodes::tests::{gold, record as node_record};
        let mut records: Vec<ResultRecord> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| node_record(n, Some(10.0), json!([])))
            .collect();
        // A gold node at 90% of its 11 Gbit/s reference.
        records.push(node_record("g", Some(9.9), gold(11.0)));
        let section = section(&records, OutlierRule::default(), "../results");
        assert!(section.groups.is_empty(), "not a pair sweep");
        assert_eq!(section.passed(), Some(false));
        assert!(
            section
                .markdown
                .contains("| node | figure | reference | verdict | evidence |"),
            "{}",
            section.markdown
        );
        let row = section
            .markdown
            .lines()
            .find(|l| l.starts_with("| g |"))
            .expect("a row for g");
        assert!(row.contains("9.90 Gbit/s"), "{row}");
        assert!(
            row.contains("gold (perfsweep.io/node-class=gold): received_bits_per_second 11G"),
            "{row}"
        );
        assert!(
            row.contains("FAIL: received_bits_per_second = 9.9G is below 10.45G"),
            "{row}"
        );
        assert!(
            row.contains("[rack-g.json](../results/rack-g.json)"),
            "{row}"
        );
        let a = section
            .markdown
            .lines()
            .find(|l| l.starts_with("| a |"))
            .expect("a row for a");
        assert!(a.contains("| fleet median only | PASS |"), "{a}");
        assert!(
            section.html.contains("<td class=\"bad\">g</td>"),
            "{}",
            section.html
        );
        assert!(section.html.contains("NODES FAILED: 1 of 5 nodes rejected"));
        assert!(section.html.contains("id=\"nodes-0\"><svg"));
        assert_eq!(section.heatmaps[0].0, "nodes-0.svg");
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
