//! `perfsweep results report`: an acceptance report of result records as Markdown and
//! HTML: the verdict per run under the acceptance criteria in the records' own spec,
//! statistics per case, the SVG charts of [`super::plot`], and the lineage of every
//! number (run id, spec digests, evidence paths and digests).

use std::fmt::Write;

use super::plot::{self, Axis, PlotSpec, escape};
use super::{Case, describe_permutation, si};
use crate::judging::acceptance::{self, Judgement};
use crate::results::record::{RecordOutcome, ResultRecord};

/// The acceptance of one record.
#[derive(Clone, Debug, PartialEq)]
pub enum RunVerdict {
    /// The spec had no criteria.
    NoCriteria,
    Judged(Judgement),
    /// The run failed: no result, not accepted.
    Failed {
        reason: String,
    },
}

impl RunVerdict {
    pub fn of(record: &ResultRecord) -> Self {
        let criteria = acceptance::criteria_of(&record.spec);
        match &record.outcome {
            RecordOutcome::Failed { reason, .. } if !criteria.is_empty() => Self::Failed {
                reason: reason.clone(),
            },
            _ => match acceptance::evaluate(&criteria, &record.metrics()) {
                Some(verdict) => Self::Judged(verdict),
                None => Self::NoCriteria,
            },
        }
    }

    fn label(&self) -> &'static str {
        match self {
            Self::NoCriteria => "no criteria",
            Self::Judged(v) if v.accepted => "ACCEPTED",
            Self::Judged(_) => "REJECTED",
            Self::Failed { .. } => "FAILED",
        }
    }

    fn detail(&self) -> String {
        match self {
            Self::NoCriteria => String::new(),
            Self::Judged(v) => v.message(),
            Self::Failed { reason } => format!("the run failed ({reason}): no result to judge"),
        }
    }
}

/// Counts over the records and the overall verdict.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overall {
    pub accepted: usize,
    pub rejected: usize,
    pub failed: usize,
    pub without_criteria: usize,
}

impl Overall {
    fn tally(verdicts: &[RunVerdict]) -> Self {
        let mut overall = Self::default();
        for v in verdicts {
            match v {
                RunVerdict::NoCriteria => overall.without_criteria += 1,
                RunVerdict::Judged(v) if v.accepted => overall.accepted += 1,
                RunVerdict::Judged(_) => overall.rejected += 1,
                RunVerdict::Failed { .. } => overall.failed += 1,
            }
        }
        overall
    }

    /// `Some(true)` when every judged run was accepted and none failed; `None` when no
    /// record had criteria.
    pub fn accepted(&self) -> Option<bool> {
        if self.accepted + self.rejected + self.failed == 0 {
            None
        } else {
            Some(self.rejected == 0 && self.failed == 0)
        }
    }

    fn headline(&self) -> String {
        let verdict = match self.accepted() {
            None => "NO ACCEPTANCE CRITERIA",
            Some(true) => "ACCEPTED",
            Some(false) => "NOT ACCEPTED",
        };
        format!(
            "{verdict}: {} accepted, {} rejected, {} failed, {} without criteria",
            self.accepted, self.rejected, self.failed, self.without_criteria
        )
    }
}

/// A rendered report.
#[derive(Clone, Debug)]
pub struct Report {
    pub overall: Overall,
    pub markdown: String,
    pub html: String,
    /// `(file name, SVG)`: the charts the Markdown links to (the HTML inlines them).
    pub charts: Vec<(String, String)>,
}

/// The metric a kind's records are judged by (their first acceptance criterion's, when
/// the cases report it), with a threshold line per bound of the criteria on it.
fn judged_metric(
    records: &[ResultRecord],
    kind: &str,
    of_kind: &[Case],
) -> Option<(String, Vec<plot::Threshold>)> {
    let criteria: Vec<acceptance::Criterion> = records
        .iter()
        .filter(|r| r.benchmark.kind == kind)
        .flat_map(|r| acceptance::criteria_of(&r.spec))
        .collect();
    let metric = criteria
        .iter()
        .map(|c| c.metric.clone())
        .find(|m| of_kind.iter().any(|c| c.metric(m).is_some()))?;
    let mut thresholds: Vec<plot::Threshold> = Vec::new();
    for criterion in criteria.iter().filter(|c| c.metric == metric) {
        let bounds = [
            criterion.lower_bound().map(|v| (v, "≥")),
            criterion.max.map(|v| (v, "≤")),
        ];
        for (value, sign) in bounds.into_iter().flatten() {
            let threshold = plot::Threshold {
                value,
                label: format!("acceptance: {sign} {}", si(value)),
            };
            if !thresholds.contains(&threshold) {
                thresholds.push(threshold);
            }
        }
    }
    Some((metric, thresholds))
}

/// An LLM sweep's latency-throughput curve: time to first token against output token
/// throughput, one point per iteration of every record (the records' metrics keep only
/// the best iteration; their results keep them all).
fn llm_iteration_chart(records: &[ResultRecord]) -> Option<(String, String, String)> {
    use super::MetricStats;
    use crate::judging::metrics::Better;
    use crate::judging::stats::{Stability, Summary};
    use crate::kinds::llm::LLMInferenceResult;

    const KIND: &str = "LLMInference";
    let mut cases = Vec::new();
    for record in records.iter().filter(|r| r.benchmark.kind == KIND) {
        let RecordOutcome::Succeeded { result, .. } = &record.outcome else {
            continue;
        };
        let Ok(result) = serde_json::from_value::<LLMInferenceResult>(result.clone()) else {
            continue;
        };
        for (index, iteration) in result.iterations.iter().enumerate() {
            if iteration.requests == 0 {
                continue;
            }
            let single = |value: f64| Summary::of(&[value], Stability::default());
            let (Some(throughput), Some(ttft)) = (
                single(iteration.output_tokens_per_second),
                single(iteration.ttft_millis.mean),
            ) else {
                continue;
            };
            let mut permutation = record.benchmark.permutation.clone();
            permutation.insert("iteration".into(), index.into());
            cases.push(Case {
                key: format!("{}#{index}", record.case_key()),
                kind: KIND.into(),
                set: record.benchmark.set.clone(),
                permutation,
                workload_spec_digest: record.workload_spec_digest.clone(),
                runs: 1,
                failed: 0,
                metrics: vec![
                    MetricStats {
                        name: "output_tokens_per_second".into(),
                        better: Better::Higher,
                        summary: throughput,
                    },
                    MetricStats {
                        name: "ttft_mean_milliseconds".into(),
                        better: Better::Lower,
                        summary: ttft,
                    },
                ],
                records: Vec::new(),
            });
        }
    }
    if cases.is_empty() {
        return None;
    }
    let title = format!("{KIND}: time to first token against throughput, every iteration");
    let spec = PlotSpec {
        x: Axis::Metric("output_tokens_per_second".into()),
        y: "ttft_mean_milliseconds".into(),
        title: Some(title.clone()),
    };
    let svg = plot::svg(&cases, &spec).ok()?;
    Some(("llminference-latency-throughput.svg".into(), title, svg))
}

/// One chart per kind against its first swept parameter: the metric the acceptance
/// criteria judge, with their bounds drawn, or without criteria the headline metric.
fn charts(records: &[ResultRecord], cases: &[Case]) -> Vec<(String, String, String)> {
    let mut kinds: Vec<&str> = Vec::new();
    for case in cases {
        if !kinds.contains(&case.kind.as_str()) {
            kinds.push(&case.kind);
        }
    }
    let mut out = Vec::new();
    for kind in kinds {
        let of_kind: Vec<Case> = cases.iter().filter(|c| c.kind == kind).cloned().collect();
        let Some((metric, thresholds)) = judged_metric(records, kind, &of_kind).or_else(|| {
            of_kind
                .iter()
                .find_map(|c| c.headline())
                .map(|m| (m.name.clone(), Vec::new()))
        }) else {
            continue;
        };
        let Some(parameter) = of_kind
            .iter()
            .flat_map(|c| c.permutation.keys())
            .next()
            .cloned()
        else {
            continue;
        };
        let title = format!("{kind}: {metric} by {parameter}");
        let spec = PlotSpec {
            x: Axis::Parameter(parameter.clone()),
            y: metric.clone(),
            title: Some(title.clone()),
        };
        if let Ok(svg) = plot::svg_with(&of_kind, &spec, &thresholds) {
            let file = format!("{}-{metric}-by-{parameter}.svg", kind.to_lowercase()).replace(
                |c: char| !(c.is_ascii_alphanumeric() || "-_.".contains(c)),
                "_",
            );
            out.push((file, title, svg));
        }
    }
    out
}

/// The report of `records` (sorted as the CLI loads them) grouped into `cases`.
pub fn render(records: &[ResultRecord], cases: &[Case]) -> Report {
    render_with_fleet(
        records,
        cases,
        &super::fleet_report::FleetSection::default(),
        &[],
    )
}

/// A section from outside the records (a published rollup, what changed since a
/// baseline), rendered like the report's own tables, before the lineage.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtraSection {
    pub heading: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// [`render`], with the fleet section of a node-pair sweep (see
/// [`super::fleet_report::section`]) after the verdict, and `extra` sections.
pub fn render_with_fleet(
    records: &[ResultRecord],
    cases: &[Case],
    fleet: &super::fleet_report::FleetSection,
    extra: &[ExtraSection],
) -> Report {
    let verdicts: Vec<RunVerdict> = records.iter().map(RunVerdict::of).collect();
    let overall = Overall::tally(&verdicts);
    let mut run_ids: Vec<&str> = records.iter().map(|r| r.run_id.as_str()).collect();
    run_ids.dedup();

    // Sections as (heading, header row, rows); each format renders them its own way.
    let runs = runs_table(records, &verdicts);
    let criteria = criteria_table(records);
    let stats = stats_table(cases);
    let per_case = case_table(records, &verdicts, cases);
    let lineage = lineage_table(records);
    let mut charts = charts(records, cases);
    charts.extend(llm_iteration_chart(records));

    let intro = format!(
        "{} runs from run {} ({} cases).",
        records.len(),
        run_ids.join(", "),
        cases.len()
    );
    // Where and when, first: what a reader outside the team needs to place the numbers.
    let provenance = table(
        &["what", "value"],
        super::provenance::rows(records)
            .into_iter()
            .map(|(k, v)| vec![k, v])
            .collect(),
    );
    let extra: Vec<(&str, Table)> = extra
        .iter()
        .map(|section| {
            let table = Table {
                header: section.header.clone(),
                rows: section.rows.clone(),
            };
            (section.heading.as_str(), table)
        })
        .collect();
    let sections: Vec<(&str, &Table)> = [
        ("Where and when", &provenance),
        ("Verdict per case", &per_case),
        ("Runs", &runs),
        ("Acceptance criteria", &criteria),
        ("Statistics per case", &stats),
    ]
    .into_iter()
    .chain(extra.iter().map(|(heading, table)| (*heading, table)))
    .chain([("Lineage", &lineage)])
    .collect();
    // A failed fleet verdict overrides runs that each met their criteria.
    let headline = match fleet.passed() {
        Some(false) => format!(
            "{} — FLEET NOT ACCEPTED: suspect nodes or links, or nodes rejected (below)",
            overall.headline()
        ),
        _ => overall.headline(),
    };
    let class = match (overall.accepted(), fleet.passed()) {
        (_, Some(false)) | (Some(false), _) => "bad",
        (Some(true), _) => "ok",
        (None, _) => "",
    };
    let page = Page {
        headline: &headline,
        intro: &intro,
        fleet,
        sections: &sections,
        charts: &charts,
    };

    Report {
        overall,
        markdown: page.markdown(),
        html: page.html(class),
        charts: charts
            .into_iter()
            .map(|(f, _, svg)| (f, svg))
            .chain(fleet.heatmaps.iter().cloned())
            .collect(),
    }
}

/// One row per record: what ran, its headline and its verdict with the reason.
fn runs_table(records: &[ResultRecord], verdicts: &[RunVerdict]) -> Table {
    table(
        &[
            "benchmark",
            "kind",
            "permutation",
            "rep",
            "headline",
            "verdict",
            "why",
        ],
        records
            .iter()
            .zip(verdicts)
            .map(|(r, v)| {
                vec![
                    r.benchmark.name.clone(),
                    r.benchmark.kind.clone(),
                    describe_permutation(&r.benchmark.permutation),
                    r.benchmark
                        .repetition
                        .map_or_else(|| "-".into(), |n| n.to_string()),
                    match &r.outcome {
                        RecordOutcome::Succeeded { .. } => r
                            .metrics()
                            .first()
                            .map(|m| format!("{} = {}", m.name, si(m.value)))
                            .unwrap_or_default(),
                        RecordOutcome::Failed { reason, .. } => format!("failed ({reason})"),
                    },
                    v.label().to_owned(),
                    v.detail(),
                ]
            })
            .collect(),
    )
}

/// Every kind's distinct criteria, in the order the records state them.
fn criteria_table(records: &[ResultRecord]) -> Table {
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in records {
        for c in acceptance::criteria_of(&r.spec) {
            let row = (r.benchmark.kind.clone(), c.describe());
            if !seen.contains(&row) {
                seen.push(row);
            }
        }
    }
    table(
        &["kind", "criterion"],
        seen.into_iter().map(|(k, c)| vec![k, c]).collect(),
    )
}

/// One row per case and metric: its summary over the repetitions.
fn stats_table(cases: &[Case]) -> Table {
    table(
        &[
            "kind",
            "permutation",
            "metric",
            "n",
            "mean",
            "±ci95",
            "cv",
            "stable",
        ],
        cases
            .iter()
            .flat_map(|case| {
                case.metrics.iter().map(move |m| {
                    let s = &m.summary;
                    vec![
                        case.kind.clone(),
                        describe_permutation(&case.permutation),
                        format!("{} ({} better)", m.name, m.better.as_str()),
                        if case.failed > 0 {
                            format!("{} ({} failed)", s.count, case.failed)
                        } else {
                            s.count.to_string()
                        },
                        si(s.mean),
                        s.ci95_half_width().map_or_else(|| "-".into(), si),
                        s.cv.map_or_else(|| "-".into(), |cv| format!("{:.1}%", cv * 100.0)),
                        match s.unstable {
                            None => "yes".into(),
                            Some(why) => format!("no ({why:?})"),
                        },
                    ]
                })
            })
            .collect(),
    )
}

/// One row per record: the ids and digests that trace it to its spec and evidence.
fn lineage_table(records: &[ResultRecord]) -> Table {
    table(
        &[
            "benchmark",
            "run id",
            "backend",
            "case id",
            "permutation",
            "workload spec digest",
            "artifact manifest digest",
            "evidence",
            "evidence sha256",
        ],
        records
            .iter()
            .map(|r| {
                vec![
                    r.benchmark.name.clone(),
                    r.run_id.clone(),
                    r.backend.clone(),
                    r.benchmark.benchmark_case_id.clone().unwrap_or_default(),
                    // Named for a person too: the digest alone says nothing.
                    describe_permutation(&r.benchmark.permutation),
                    r.workload_spec_digest.clone(),
                    r.artifact_manifest_digest.clone().unwrap_or_default(),
                    r.evidence
                        .as_ref()
                        .map(|e| e.path.clone())
                        .unwrap_or_default(),
                    r.evidence
                        .as_ref()
                        .map(|e| e.sha256.clone())
                        .unwrap_or_default(),
                ]
            })
            .collect(),
    )
}

/// The report's content, which [`Page::markdown`] and [`Page::html`] lay out the same
/// way: headline, intro, fleet section, the tables, the charts.
struct Page<'a> {
    headline: &'a str,
    intro: &'a str,
    fleet: &'a super::fleet_report::FleetSection,
    sections: &'a [(&'a str, &'a Table)],
    /// `(file name, title, SVG)`.
    charts: &'a [(String, String, String)],
}

impl Page<'_> {
    /// Markdown that links the charts as files next to it.
    fn markdown(&self) -> String {
        let mut md = String::new();
        let _ = writeln!(md, "# perfsweep acceptance report\n");
        let _ = writeln!(md, "**{}**\n", self.headline);
        let _ = writeln!(md, "{}\n", self.intro);
        md.push_str(&self.fleet.markdown);
        for (heading, t) in self.sections {
            let _ = writeln!(md, "## {heading}\n");
            md.push_str(&t.markdown());
            md.push('\n');
        }
        if !self.charts.is_empty() {
            let _ = writeln!(md, "## Charts\n");
            for (file, title, _) in self.charts {
                let _ = writeln!(md, "![{title}]({file})\n");
            }
        }
        let _ = writeln!(
            md,
            "Means with 95% confidence intervals (Student t); a case is unstable with fewer \
             than the minimum repetitions or a coefficient of variation above the threshold. \
             Every number traces back to its raw evidence file by the SHA-256 above \
             (`perfsweep parse KIND FILE` re-derives the result)."
        );
        md
    }

    /// A standalone HTML page with the charts inline; `class` styles the headline.
    fn html(&self, class: &str) -> String {
        let mut html = String::new();
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>perfsweep acceptance report</title><style>\
             body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse;margin-bottom:1.5em}}\
             td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;font-size:90%}}\
             .ok{{color:#1a7f37;font-weight:bold}}.bad{{color:#cf222e;font-weight:bold}}\
             </style></head><body>\n<h1>perfsweep acceptance report</h1>\n"
        );
        let _ = writeln!(
            html,
            "<p class=\"{class}\">{}</p>\n<p>{}</p>",
            escape(self.headline),
            escape(self.intro)
        );
        html.push_str(&self.fleet.html);
        for (heading, t) in self.sections {
            let _ = writeln!(html, "<h2>{}</h2>", escape(heading));
            html.push_str(&t.html());
        }
        if !self.charts.is_empty() {
            let _ = writeln!(html, "<h2>Charts</h2>");
            for (_, _, svg) in self.charts {
                let body = svg.find("<svg").map_or(svg.as_str(), |i| &svg[i..]);
                let _ = writeln!(html, "<figure>{body}</figure>");
            }
        }
        html.push_str("</body></html>\n");
        html
    }
}

/// A case's verdict from its repetitions' verdicts: ACCEPTED only when every
/// repetition was judged and accepted; one rejected or failed repetition makes the case
/// NOT ACCEPTED (a vendor cannot average a failure away).
pub fn case_verdict(repetitions: &[&RunVerdict]) -> &'static str {
    let judged = repetitions
        .iter()
        .filter(|v| !matches!(v, RunVerdict::NoCriteria))
        .count();
    if judged == 0 {
        "no criteria"
    } else if repetitions
        .iter()
        .all(|v| matches!(v, RunVerdict::Judged(verdict) if verdict.accepted))
    {
        "ACCEPTED"
    } else {
        "NOT ACCEPTED"
    }
}

/// One row per case: its repetitions' verdicts counted, the judged metric's mean and
/// interval, and the case's verdict under [`case_verdict`].
fn case_table(records: &[ResultRecord], verdicts: &[RunVerdict], cases: &[Case]) -> Table {
    let rows = cases
        .iter()
        .map(|case| {
            let of_case: Vec<&RunVerdict> = case
                .records
                .iter()
                .filter_map(|i| verdicts.get(*i))
                .collect();
            let count = |f: fn(&RunVerdict) -> bool| of_case.iter().filter(|v| f(v)).count();
            let accepted = count(|v| matches!(v, RunVerdict::Judged(v) if v.accepted));
            let rejected = count(|v| matches!(v, RunVerdict::Judged(v) if !v.accepted));
            let failed = count(|v| matches!(v, RunVerdict::Failed { .. }));
            let judged = case
                .records
                .iter()
                .filter_map(|i| records.get(*i))
                .flat_map(|r| acceptance::criteria_of(&r.spec))
                .map(|c| c.metric)
                .find_map(|m| case.metric(&m))
                .or_else(|| case.headline());
            let judged = judged.map_or_else(String::new, |m| {
                let interval = m
                    .summary
                    .ci95_half_width()
                    .map(|h| format!(" ± {}", si(h)))
                    .unwrap_or_default();
                format!("{} = {}{interval}", m.name, si(m.summary.mean))
            });
            vec![
                case.kind.clone(),
                describe_permutation(&case.permutation),
                case.runs.to_string(),
                accepted.to_string(),
                rejected.to_string(),
                failed.to_string(),
                judged,
                case_verdict(&of_case).to_owned(),
            ]
        })
        .collect();
    table(
        &[
            "kind",
            "permutation",
            "reps",
            "accepted",
            "rejected",
            "failed",
            "judged metric (mean ± ci95)",
            "verdict",
        ],
        rows,
    )
}

struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

fn table(header: &[&str], rows: Vec<Vec<String>>) -> Table {
    Table {
        header: header.iter().map(|h| (*h).to_owned()).collect(),
        rows,
    }
}

impl Table {
    fn markdown(&self) -> String {
        if self.rows.is_empty() {
            return "(none)\n".into();
        }
        let cell = |c: &str| c.replace('|', "\\|").replace('\n', " ");
        let mut out = format!("| {} |\n", self.header.join(" | "));
        let _ = writeln!(out, "|{}", " --- |".repeat(self.header.len()));
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out
    }

    fn html(&self) -> String {
        if self.rows.is_empty() {
            return "<p>(none)</p>\n".into();
        }
        let mut out = String::from("<table><tr>");
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", escape(h));
        }
        out.push_str("</tr>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for c in row {
                let class = match c.as_str() {
                    "ACCEPTED" => " class=\"ok\"",
                    "REJECTED" | "FAILED" | "NOT ACCEPTED" => " class=\"bad\"",
                    _ => "",
                };
                let _ = write!(out, "<td{class}>{}</td>", escape(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::judging::stats::Stability;
    use crate::results::record::{BenchmarkIdentity, Environment, Evidence};
    use serde_json::{Map, json};

    fn record(name: &str, streams: u64, bits: Option<f64>) -> ResultRecord {
        let spec = json!({"streams": streams, "acceptance": [
            {"metric": "received_bits_per_second", "min": 5e9}]});
        let mut permutation = Map::new();
        permutation.insert("streams".into(), json!(streams));
        ResultRecord {
            schema_version: crate::results::record::SCHEMA_VERSION.into(),
            run_id: "run-1".into(),
            benchmark: BenchmarkIdentity {
                kind: "IPerf".into(),
                name: name.into(),
                set: Some("s".into()),
                benchmark_case_id: Some(format!("case{streams}")),
                repetition: Some(0),
                permutation,
                node: None,
                references: Vec::new(),
            },
            workload_spec_digest: format!("digest{streams}"),
            spec,
            backend: "local".into(),
            environment: Environment::default(),
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:10Z".into(),
            outcome: match bits {
                Some(bits) => RecordOutcome::Succeeded {
                    summary: "x".into(),
                    result: json!({}),
                    metrics: vec![
                        crate::judging::metrics::MetricDef::higher(
                            "received_bits_per_second",
                            "",
                            "",
                        )
                        .of(bits),
                    ],
                },
                None => RecordOutcome::Failed {
                    reason: "ToolFailed".into(),
                    message: "boom".into(),
                },
            },
            evidence: Some(Evidence {
                sha256: "ab".repeat(32),
                bytes: 10,
                path: "evidence/abab.txt".into(),
            }),
            artifact_manifest_digest: None,
        }
    }

    #[test]
    fn verdicts_tables_charts_and_lineage() {
        let records = vec![
            record("a", 1, Some(9e9)),
            record("b", 2, Some(4e9)),
            record("c", 4, None),
        ];
        let cases = super::super::group(&records, Stability::default());
        let report = render(&records, &cases);
        assert_eq!(
            report.overall,
            Overall {
                accepted: 1,
                rejected: 1,
                failed: 1,
                without_criteria: 0
            }
        );
        assert_eq!(report.overall.accepted(), Some(false));
        let md = &report.markdown;
        assert!(
            md.contains("**NOT ACCEPTED: 1 accepted, 1 rejected, 1 failed"),
            "{md}"
        );
        assert!(md.contains("| b | IPerf | streams=2 | 0 | received_bits_per_second = 4G | REJECTED | 1 of 1 criteria not met: received_bits_per_second = 4G is below the minimum 5G by 1G (20%) |"), "{md}");
        assert!(
            md.contains("| IPerf | received_bits_per_second ≥ 5G |"),
            "{md}"
        );
        assert!(md.contains("digest2"), "{md}");
        assert!(md.contains("evidence/abab.txt"), "{md}");
        assert_eq!(report.charts.len(), 1);
        assert!(md.contains(&format!("]({})", report.charts[0].0)), "{md}");
        assert!(report.html.contains("<td class=\"bad\">REJECTED</td>"));
        assert!(report.html.contains("<svg"));
        assert!(report.html.contains("≥ 5G"));
    }

    /// Issue 15: cases are judged across their repetitions, and the chart shows the
    /// judged metric in Gbit/s with the criterion's bound as a labelled dashed line.
    /// Sections from outside the records come before the lineage, escaped like the rest.
    #[test]
    fn extra_sections_render_before_the_lineage_escaped() {
        let records = vec![record("a", 1, Some(9e9))];
        let cases = super::super::group(&records, Stability::default());
        let extra = ExtraSection {
            heading: "What changed since run base".into(),
            header: vec!["case".into(), "worse".into()],
            rows: vec![vec!["<script>x</script>".into(), "12.0% | a lot".into()]],
        };
        let report = render_with_fleet(
            &records,
            &cases,
            &super::super::fleet_report::FleetSection::default(),
            &[extra],
        );
        let md = &report.markdown;
        let at = |text: &str| md.find(text).unwrap_or_else(|| panic!("{text} in {md}"));
        assert!(at("What changed since run base") < at("## Lineage"));
        assert!(md.contains("12.0% \\| a lot"), "{md}");
        assert!(report.html.contains("What changed since run base"));
        assert!(!report.html.contains("<script>x"), "escaped in HTML");
    }

    #[test]
    fn cases_are_judged_and_charts_show_the_judged_metric_and_its_bound() {
        let mut records = Vec::new();
        for (rep, (one, two)) in [(9e9, 9e9), (9.2e9, 4e9), (9.1e9, 9.3e9)]
            .into_iter()
            .enumerate()
        {
            for (name, streams, bits) in [("a", 1, one), ("b", 2, two)] {
                let mut r = record(&format!("{name}{rep}"), streams, Some(bits));
                r.benchmark.repetition = Some(rep as u32);
                // The headline comes first; the criterion judges the second metric.
                if let RecordOutcome::Succeeded { metrics, .. } = &mut r.outcome {
                    metrics.insert(
                        0,
                        crate::judging::metrics::MetricDef::lower("retransmits", "count", "")
                            .of(3.0),
                    );
                }
                records.push(r);
            }
        }
        records.push(record("c0", 4, None));
        let cases = super::super::group(&records, Stability::default());
        let report = render(&records, &cases);
        let md = &report.markdown;
        assert!(md.contains("## Verdict per case"), "{md}");
        let row = |perm: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| IPerf | {perm} | ")))
                .unwrap_or_default()
                .to_owned()
        };
        assert!(
            row("streams=1").ends_with(
                "| 3 | 3 | 0 | 0 | received_bits_per_second = 9.1G ± 248.4138M | ACCEPTED |"
            ),
            "{md}"
        );
        assert!(row("streams=2").ends_with("| NOT ACCEPTED |"), "{md}");
        assert!(row("streams=2").contains("| 3 | 2 | 1 | 0 |"), "{md}");
        assert!(row("streams=4").contains("| 1 | 0 | 0 | 1 |"), "{md}");
        assert!(row("streams=4").ends_with("| NOT ACCEPTED |"), "{md}");
        assert!(report.html.contains("<td class=\"bad\">NOT ACCEPTED</td>"));

        assert_eq!(report.charts.len(), 1);
        let (file, svg) = &report.charts[0];
        assert!(file.contains("received_bits_per_second"), "{file}");
        assert!(!svg.contains("Retransmits"), "the headline is not charted");
        assert!(
            svg.contains(">Received throughput (Gbit/s)</text>"),
            "{svg}"
        );
        assert_eq!(svg.matches("class=\"threshold\"").count(), 1, "{svg}");
        assert!(svg.contains(">acceptance: ≥ 5G</text>"), "{svg}");
    }

    /// Issue 15: an LLM sweep's chart has a point per iteration of every record, not
    /// only the best iteration its metrics keep.
    #[test]
    fn llm_latency_throughput_has_a_point_per_iteration() {
        let raw = include_str!("../../testdata/llm/loadgen-sim-two-scenarios.txt");
        let kind = crate::kinds::registry::lookup("LLMInference").expect("registered");
        let parsed = kind.parse(raw).expect("the fixture parses");
        let iterations = parsed.result["iterations"]
            .as_array()
            .expect("iterations")
            .iter()
            .filter(|it| it["requests"].as_u64().unwrap_or(0) > 0)
            .count();
        assert!(iterations >= 2, "the fixture has several iterations");
        let mut r = record("llm", 1, Some(1.0));
        r.benchmark.kind = "LLMInference".into();
        r.spec = json!({});
        r.outcome = RecordOutcome::Succeeded {
            summary: parsed.summary,
            metrics: kind.metrics(&parsed.result),
            result: parsed.result,
        };
        let records = vec![r];
        let cases = super::super::group(&records, Stability::default());
        assert_eq!(cases.len(), 1, "one record: one case, one best iteration");
        let report = render(&records, &cases);
        let (_, svg) = report
            .charts
            .iter()
            .find(|(file, _)| file == "llminference-latency-throughput.svg")
            .expect("the latency-throughput chart");
        assert_eq!(svg.matches("<circle").count(), iterations, "{svg}");
        assert!(svg.contains("Output tokens per second (tokens/s)"), "{svg}");
        assert!(
            svg.contains("TTFT mean (ms)") || svg.contains("TTFT mean (µs)"),
            "{svg}"
        );
        assert!(
            report
                .markdown
                .contains("](llminference-latency-throughput.svg)")
        );
    }

    #[test]
    fn without_criteria_there_is_no_verdict() {
        let mut r = record("a", 1, Some(1.0));
        r.spec = json!({"streams": 1});
        let report = render(std::slice::from_ref(&r), &[]);
        assert_eq!(report.overall.accepted(), None);
        assert!(report.markdown.contains("NO ACCEPTANCE CRITERIA"));
    }
}
