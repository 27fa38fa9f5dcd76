//! `perfsweep results plot`: a metric against a swept parameter (or against another
//! metric, e.g. latency against throughput in an LLM sweep) as a hand-written SVG: the
//! mean of each case's repetitions, with 95% confidence intervals as error bars, one
//! series per combination of the other parameters.

use std::fmt::Write;

use serde_json::Value;

use super::{Case, describe_permutation, si};

/// What goes on the horizontal axis.
#[derive(Clone, Debug, PartialEq)]
pub enum Axis {
    /// A permutation parameter, e.g. `streams`.
    Parameter(String),
    /// Another metric, e.g. `output_tokens_per_second`.
    Metric(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct PlotSpec {
    pub x: Axis,
    /// The metric on the vertical axis.
    pub y: String,
    pub title: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlotError {
    #[error("no case has both metric {y:?} and {x}; metrics present: {present}")]
    Empty {
        x: String,
        y: String,
        present: String,
    },
}

#[derive(Clone, Debug)]
struct Point {
    x: XValue,
    x_err: Option<(f64, f64)>,
    y: f64,
    y_err: Option<(f64, f64)>,
}

#[derive(Clone, Debug, PartialEq)]
enum XValue {
    Number(f64),
    Category(String),
}

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 480.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 230.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 70.0;
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

/// The chart as an SVG document.
pub fn svg(cases: &[Case], spec: &PlotSpec) -> Result<String, PlotError> {
    let (x_label, series) = collect(cases, spec)?;
    let categories: Vec<String> = {
        let mut seen = Vec::new();
        for point in series.iter().flat_map(|(_, points)| points) {
            if let XValue::Category(c) = &point.x
                && !seen.contains(c)
            {
                seen.push(c.clone());
            }
        }
        seen
    };
    let x_of = |x: &XValue| match x {
        XValue::Number(v) => *v,
        XValue::Category(c) => categories.iter().position(|k| k == c).unwrap_or(0) as f64,
    };
    let points = || series.iter().flat_map(|(_, points)| points);
    let (mut x_min, mut x_max) = bounds(points().flat_map(|p| {
        let x = x_of(&p.x);
        let (low, high) = p.x_err.unwrap_or((x, x));
        [x, low, high]
    }));
    let (mut y_min, mut y_max) = bounds(points().flat_map(|p| {
        let (low, high) = p.y_err.unwrap_or((p.y, p.y));
        [p.y, low, high]
    }));
    if y_min >= 0.0 {
        y_min = 0.0;
    }
    if !categories.is_empty() {
        x_min = -0.5;
        x_max = categories.len() as f64 - 0.5;
    } else {
        (x_min, x_max) = pad(x_min, x_max);
    }
    (y_min, y_max) = pad(y_min, y_max);
    if y_min < 0.0 && points().all(|p| p.y_err.map_or(p.y, |e| e.0) >= 0.0) {
        y_min = 0.0;
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let sx = |x: f64| LEFT + (x - x_min) / (x_max - x_min) * plot_w;
    let sy = |y: f64| TOP + plot_h - (y - y_min) / (y_max - y_min) * plot_h;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let title = spec
        .title
        .clone()
        .unwrap_or_else(|| format!("{} by {x_label}", spec.y));
    let _ = writeln!(
        out,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="15">{}</text>"#,
        LEFT + plot_w / 2.0,
        escape(&title)
    );
    // Axes, grid and ticks.
    let _ = writeln!(
        out,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>"##
    );
    for tick in ticks(y_min, y_max) {
        let y = sy(tick);
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0,
            escape(&si(tick))
        );
    }
    if categories.is_empty() {
        for tick in ticks(x_min, x_max) {
            let x = sx(tick);
            let _ = writeln!(
                out,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + plot_h,
                TOP + plot_h + 18.0,
                escape(&si(tick))
            );
        }
    } else {
        for (i, category) in categories.iter().enumerate() {
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                sx(i as f64),
                TOP + plot_h + 18.0,
                escape(category)
            );
        }
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        LEFT + plot_w / 2.0,
        HEIGHT - 30.0,
        escape(&x_label)
    );
    let _ = writeln!(
        out,
        r#"<text transform="translate(20 {:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        escape(&spec.y)
    );
    let _ = writeln!(
        out,
        r##"<text x="{LEFT}" y="{:.1}" fill="#555" font-size="11">points: mean of the repetitions; error bars: 95% confidence interval of the mean (Student t)</text>"##,
        HEIGHT - 10.0
    );
    // Series.
    for (index, (name, points)) in series.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        let mut sorted: Vec<&Point> = points.iter().collect();
        sorted.sort_by(|a, b| x_of(&a.x).total_cmp(&x_of(&b.x)));
        let path: Vec<String> = sorted
            .iter()
            .map(|p| format!("{:.1},{:.1}", sx(x_of(&p.x)), sy(p.y)))
            .collect();
        let _ = writeln!(
            out,
            r#"<g class="series" data-series="{}"><polyline points="{}" fill="none" stroke="{color}" stroke-width="1.5"/>"#,
            escape(name),
            path.join(" ")
        );
        for p in sorted {
            let (x, y) = (sx(x_of(&p.x)), sy(p.y));
            if let Some((low, high)) = p.y_err {
                let _ = write!(
                    out,
                    r#"<path d="M{x:.1},{:.1}V{:.1}M{:.1},{:.1}h8M{:.1},{:.1}h8" stroke="{color}" class="error-bar"/>"#,
                    sy(low),
                    sy(high),
                    x - 4.0,
                    sy(low),
                    x - 4.0,
                    sy(high)
                );
            }
            if let Some((low, high)) = p.x_err {
                let _ = write!(
                    out,
                    r#"<path d="M{:.1},{y:.1}H{:.1}" stroke="{color}" class="error-bar"/>"#,
                    sx(low),
                    sx(high)
                );
            }
            let _ = writeln!(
                out,
                r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{color}"/>"#
            );
        }
        let legend_y = TOP + 10.0 + index as f64 * 18.0;
        let _ = writeln!(
            out,
            r#"<rect x="{:.1}" y="{:.1}" width="12" height="3" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
            WIDTH - RIGHT + 16.0,
            legend_y - 4.0,
            WIDTH - RIGHT + 34.0,
            legend_y,
            escape(if name.is_empty() { "all cases" } else { name })
        );
    }
    out.push_str("</svg>\n");
    Ok(out)
}

type Series = Vec<(String, Vec<Point>)>;

fn collect(cases: &[Case], spec: &PlotSpec) -> Result<(String, Series), PlotError> {
    let mut series: Series = Vec::new();
    let x_label = match &spec.x {
        Axis::Parameter(p) => p.clone(),
        Axis::Metric(m) => m.clone(),
    };
    for case in cases {
        let Some(y) = case.metric(&spec.y) else {
            continue;
        };
        let (x, x_err, name) = match &spec.x {
            Axis::Parameter(parameter) => {
                let Some(value) = case.permutation.get(parameter) else {
                    continue;
                };
                let x = match value {
                    Value::Number(n) => XValue::Number(n.as_f64().unwrap_or(0.0)),
                    Value::String(s) => XValue::Category(s.clone()),
                    other => XValue::Category(other.to_string()),
                };
                let mut rest = case.permutation.clone();
                rest.remove(parameter);
                let name = if rest.is_empty() {
                    String::new()
                } else {
                    describe_permutation(&rest)
                };
                (x, None, name)
            }
            Axis::Metric(metric) => {
                let Some(m) = case.metric(metric) else {
                    continue;
                };
                (
                    XValue::Number(m.summary.mean),
                    m.summary.ci95,
                    case.kind.clone(),
                )
            }
        };
        let point = Point {
            x,
            x_err,
            y: y.summary.mean,
            y_err: y.summary.ci95,
        };
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, points)) => points.push(point),
            None => series.push((name, vec![point])),
        }
    }
    if series.is_empty() {
        let mut present: Vec<&str> = cases
            .iter()
            .flat_map(|c| c.metrics.iter().map(|m| m.name.as_str()))
            .collect();
        present.sort_unstable();
        present.dedup();
        return Err(PlotError::Empty {
            x: match &spec.x {
                Axis::Parameter(p) => format!("parameter {p:?}"),
                Axis::Metric(m) => format!("metric {m:?}"),
            },
            y: spec.y.clone(),
            present: present.join(", "),
        });
    }
    Ok((x_label, series))
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        })
}

fn pad(low: f64, high: f64) -> (f64, f64) {
    if !low.is_finite() || !high.is_finite() {
        return (0.0, 1.0);
    }
    if high - low <= f64::EPSILON * high.abs().max(1.0) {
        let margin = if high == 0.0 { 1.0 } else { high.abs() * 0.1 };
        return (low - margin, high + margin);
    }
    let margin = (high - low) * 0.05;
    (low - margin, high + margin)
}

/// About five round tick values between `low` and `high`.
fn ticks(low: f64, high: f64) -> Vec<f64> {
    let span = high - low;
    let raw = span / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(magnitude * 10.0);
    let mut tick = (low / step).ceil() * step;
    let mut out = Vec::new();
    while tick <= high + step * 1e-9 && out.len() < 50 {
        out.push(if tick.abs() < step * 1e-9 { 0.0 } else { tick });
        tick += step;
    }
    out
}

/// `text` safe inside XML text and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::group;
    use crate::results::testing::iperf;
    use crate::stats::Stability;

    fn cases() -> Vec<Case> {
        let mut records = Vec::new();
        for rep in 0..3 {
            for (case, streams, bits) in [("a", 1, 9e9), ("b", 2, 9.3e9), ("c", 4, 9.4e9)] {
                records.push(iperf(
                    "r",
                    case,
                    streams,
                    rep,
                    bits * (1.0 + rep as f64 * 0.01),
                ));
            }
        }
        group(&records, Stability::default())
    }

    #[test]
    fn draws_one_point_and_error_bar_per_case() {
        let svg = svg(
            &cases(),
            &PlotSpec {
                x: Axis::Parameter("streams".into()),
                y: "received_bits_per_second".into(),
                title: None,
            },
        )
        .unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert_eq!(svg.matches("<circle").count(), 3);
        assert_eq!(svg.matches("class=\"error-bar\"").count(), 3);
        assert!(svg.contains("received_bits_per_second by streams"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn metric_against_metric_and_missing_metrics() {
        let svg = svg(
            &cases(),
            &PlotSpec {
                x: Axis::Metric("sent_bits_per_second".into()),
                y: "retransmits".into(),
                title: Some("a <b>".into()),
            },
        )
        .unwrap();
        assert!(svg.contains("a &lt;b&gt;"));
        let error = super::svg(
            &cases(),
            &PlotSpec {
                x: Axis::Parameter("streams".into()),
                y: "ttft_mean_milliseconds".into(),
                title: None,
            },
        )
        .unwrap_err();
        assert!(error.to_string().contains("received_bits_per_second"));
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 9.9e9).len(), 5);
    }
}
