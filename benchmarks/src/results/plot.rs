//! `perfsweep results plot`: a metric against a swept parameter (or against another
//! metric, e.g. latency against throughput in an LLM sweep) as a hand-written SVG: the
//! mean of each case's repetitions, with 95% confidence intervals as error bars, one
//! series per combination of the other parameters.

use std::fmt::Write;

use serde_json::Value;

use super::units::{DisplayScale, axis_title, display_scale, metric_def};
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

/// A horizontal reference line, e.g. an acceptance criterion's bound, in the y metric's
/// own (unscaled) unit.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub label: String,
}

/// The y metric that stands for "each case's headline metric": cases whose headlines
/// differ (fio's read and write bandwidth) are then plotted together, one series per
/// metric, instead of dropping every case without the first case's headline.
pub const HEADLINE: &str = "headline";

/// The largest magnitude a chart plots. A value beyond it (1e200 from a corrupt record)
/// would flatten every other point onto the axis and overflow the scale arithmetic.
pub const MAX_PLOTTABLE: f64 = 1e100;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PlotError {
    #[error(
        "case {case} has {metric} = {value:e}, which cannot be plotted (not finite, or \
         beyond ±{MAX_PLOTTABLE:e}); check that record with `perfsweep results list`"
    )]
    Unplottable {
        case: String,
        metric: String,
        value: f64,
    },
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

/// Where a text's x coordinate is: its start, middle or end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Anchor {
    Start,
    Middle,
    End,
}

/// One drawing primitive of a chart, in pixels from the top left. The SVG and the PNG
/// are drawn from the same shapes, so they show the same chart.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    Rect {
        x: f64,
        y: f64,
        w: f64,
        h: f64,
        fill: Option<&'static str>,
        stroke: Option<&'static str>,
    },
    Line {
        from: (f64, f64),
        to: (f64, f64),
        color: &'static str,
    },
    Polyline {
        points: Vec<(f64, f64)>,
        color: &'static str,
        width: f64,
    },
    /// One error bar: its segments (the bar and its caps).
    ErrorBar {
        segments: Vec<((f64, f64), (f64, f64))>,
        color: &'static str,
    },
    Circle {
        center: (f64, f64),
        r: f64,
        color: &'static str,
    },
    /// A dashed reference line (a threshold).
    Dashed {
        from: (f64, f64),
        to: (f64, f64),
        color: &'static str,
    },
    /// `(x, y)` is the baseline point; `vertical` text reads bottom to top around it.
    Text {
        at: (f64, f64),
        text: String,
        anchor: Anchor,
        size: f64,
        color: &'static str,
        vertical: bool,
    },
    /// The start of a series' shapes (SVG `<g>`), with its legend name.
    SeriesStart(String),
    SeriesEnd,
}

/// A chart as shapes on a `width` × `height` canvas.
#[derive(Clone, Debug)]
pub struct Scene {
    pub width: f64,
    pub height: f64,
    pub shapes: Vec<Shape>,
}

/// The chart as an SVG document.
pub fn svg(cases: &[Case], spec: &PlotSpec) -> Result<String, PlotError> {
    Ok(to_svg(&scene(cases, spec)?))
}

/// The chart as shapes, for [`to_svg`] or a rasterizer.
pub fn scene(cases: &[Case], spec: &PlotSpec) -> Result<Scene, PlotError> {
    scene_with(cases, spec, &[])
}

/// [`svg`] with threshold lines.
pub fn svg_with(
    cases: &[Case],
    spec: &PlotSpec,
    thresholds: &[Threshold],
) -> Result<String, PlotError> {
    Ok(to_svg(&scene_with(cases, spec, thresholds)?))
}

/// [`scene`] with horizontal threshold lines (drawn dashed and labelled). Values are
/// shown in a readable unit (Gbit/s, MiB/s, ms) when the metric declares one, and the
/// error bars of a metric that cannot be negative stop at zero.
pub fn scene_with(
    cases: &[Case],
    spec: &PlotSpec,
    thresholds: &[Threshold],
) -> Result<Scene, PlotError> {
    let (x_name, mut series) = collect(cases, spec)?;
    let y_defs = y_defs(cases, spec);
    clamp_whiskers_at_zero(&mut series, &y_defs);
    let y_scale = y_display_scale(&series, thresholds, &y_defs);
    let x_scale = x_display_scale(cases, spec, &series);
    rescale(&mut series, x_scale.as_ref(), y_scale.as_ref());
    let y_factor = y_scale.as_ref().map_or(1.0, |s| s.factor);
    let thresholds: Vec<(f64, &str)> = thresholds
        .iter()
        .map(|t| (t.value * y_factor, t.label.as_str()))
        .filter(|(v, _)| v.is_finite())
        .collect();
    let labels = Labels::new(
        cases,
        spec,
        x_name,
        x_scale.as_ref(),
        y_scale.as_ref(),
        &y_defs,
    );
    let frame = Frame::fit(&series, &thresholds);

    let mut shapes = Vec::new();
    draw_axes(&mut shapes, &frame, labels);
    draw_thresholds(&mut shapes, &frame, &thresholds);
    for (index, (name, points)) in series.iter().enumerate() {
        draw_series(&mut shapes, &frame, index, name, points);
    }
    Ok(Scene {
        width: WIDTH,
        height: HEIGHT,
        shapes,
    })
}

/// The plot area's size in pixels, inside the margins.
const PLOT_W: f64 = WIDTH - LEFT - RIGHT;
const PLOT_H: f64 = HEIGHT - TOP - BOTTOM;

/// A 95% interval of a throughput or a latency may reach below zero with few
/// repetitions; the quantity itself cannot, so the whisker stops at zero.
fn clamp_whiskers_at_zero(
    series: &mut Series,
    y_defs: &[&'static crate::judging::metrics::MetricDef],
) {
    if !y_defs.is_empty() && y_defs.iter().all(|d| d.valid.min >= 0.0) {
        for point in series.iter_mut().flat_map(|(_, points)| points) {
            if let Some((low, _)) = &mut point.y_err {
                *low = low.max(0.0);
            }
        }
    }
}

/// The unit the y axis is shown in, fitted to the largest value (thresholds included);
/// none unless every y metric declares the same unit.
fn y_display_scale(
    series: &Series,
    thresholds: &[Threshold],
    y_defs: &[&'static crate::judging::metrics::MetricDef],
) -> Option<DisplayScale> {
    let y_unit = y_defs
        .first()
        .filter(|first| y_defs.iter().all(|d| d.unit == first.unit))
        .map(|d| d.unit);
    let largest_y = series
        .iter()
        .flat_map(|(_, points)| points)
        .flat_map(|p| [p.y, p.y_err.map_or(p.y, |e| e.1)])
        .chain(thresholds.iter().map(|t| t.value))
        .fold(0.0f64, |a, v| a.max(v.abs()));
    y_unit.map(|unit| display_scale(unit, largest_y))
}

/// The unit the x axis is shown in when it is a metric that declares one.
fn x_display_scale(cases: &[Case], spec: &PlotSpec, series: &Series) -> Option<DisplayScale> {
    let x_def = match &spec.x {
        Axis::Metric(m) => cases.iter().find_map(|c| metric_def(&c.kind, m)),
        Axis::Parameter(_) => None,
    };
    let largest_x = series
        .iter()
        .flat_map(|(_, points)| points)
        .filter_map(|p| match p.x {
            XValue::Number(x) => Some(x.abs().max(p.x_err.map_or(0.0, |e| e.1.abs()))),
            XValue::Category(_) => None,
        })
        .fold(0.0f64, f64::max);
    x_def.map(|d| display_scale(d.unit, largest_x))
}

/// The chart's title and axis titles.
struct Labels {
    title: String,
    x: String,
    y: String,
}

impl Labels {
    fn new(
        cases: &[Case],
        spec: &PlotSpec,
        x_name: String,
        x_scale: Option<&DisplayScale>,
        y_scale: Option<&DisplayScale>,
        y_defs: &[&'static crate::judging::metrics::MetricDef],
    ) -> Labels {
        let x = match (x_scale, &spec.x) {
            (Some(scale), Axis::Metric(m)) => axis_title(m, &scale.unit),
            _ => x_name.clone(),
        };
        let y_names = y_label(cases, spec);
        let y = match y_scale {
            Some(scale) => {
                y_defs
                    .iter()
                    .map(|d| axis_title(d.name, ""))
                    .collect::<Vec<_>>()
                    .join(" / ")
                    + &format!(" ({})", scale.unit)
            }
            None => y_names.clone(),
        };
        let title = spec
            .title
            .clone()
            .unwrap_or_else(|| format!("{y_names} by {x_name}"));
        Labels { title, x, y }
    }
}

/// The data ranges the plot area shows, and how a value maps to a pixel.
struct Frame {
    /// The x values of a categorical axis, in display order; empty for a numeric one.
    categories: Vec<String>,
    x_min: f64,
    x_max: f64,
    y_min: f64,
    y_max: f64,
}

impl Frame {
    /// Ranges that hold every point, whisker and threshold, with a margin.
    fn fit(series: &Series, thresholds: &[(f64, &str)]) -> Frame {
        let categories = categories(series);
        let points = || series.iter().flat_map(|(_, points)| points);
        let (mut x_min, mut x_max) = bounds(points().flat_map(|p| {
            let x = x_position(&categories, &p.x);
            let (low, high) = p.x_err.unwrap_or((x, x));
            [x, low, high]
        }));
        let (mut y_min, mut y_max) = bounds(
            points()
                .flat_map(|p| {
                    let (low, high) = p.y_err.unwrap_or((p.y, p.y));
                    [p.y, low, high]
                })
                .chain(thresholds.iter().map(|(v, _)| *v)),
        );
        if y_min >= 0.0 {
            y_min = 0.0;
        }
        if categories.is_empty() {
            (x_min, x_max) = pad(x_min, x_max);
        } else {
            x_min = -0.5;
            x_max = categories.len() as f64 - 0.5;
        }
        (y_min, y_max) = pad(y_min, y_max);
        if y_min < 0.0 && points().all(|p| p.y_err.map_or(p.y, |e| e.0) >= 0.0) {
            y_min = 0.0;
        }
        Frame {
            categories,
            x_min,
            x_max,
            y_min,
            y_max,
        }
    }

    fn x_of(&self, x: &XValue) -> f64 {
        x_position(&self.categories, x)
    }

    fn sx(&self, x: f64) -> f64 {
        LEFT + (x - self.x_min) / (self.x_max - self.x_min) * PLOT_W
    }

    fn sy(&self, y: f64) -> f64 {
        TOP + PLOT_H - (y - self.y_min) / (self.y_max - self.y_min) * PLOT_H
    }
}

/// Where `x` stands on the axis: a category at its index.
fn x_position(categories: &[String], x: &XValue) -> f64 {
    match x {
        XValue::Number(v) => *v,
        XValue::Category(c) => categories.iter().position(|k| k == c).unwrap_or(0) as f64,
    }
}

/// The distinct categories of the x values, in [`category_order`].
fn categories(series: &Series) -> Vec<String> {
    let mut seen = Vec::new();
    for point in series.iter().flat_map(|(_, points)| points) {
        if let XValue::Category(c) = &point.x
            && !seen.contains(c)
        {
            seen.push(c.clone());
        }
    }
    seen.sort_by(|a, b| category_order(a, b));
    seen
}

fn styled(at: (f64, f64), text: String, anchor: Anchor, size: f64, color: &'static str) -> Shape {
    Shape::Text {
        at,
        text,
        anchor,
        size,
        color,
        vertical: false,
    }
}

fn text(at: (f64, f64), text: String, anchor: Anchor) -> Shape {
    styled(at, text, anchor, 12.0, "#000")
}

/// The background, the title, the plot area with its grid and ticks, the axis titles
/// and the note on what points and bars mean.
fn draw_axes(shapes: &mut Vec<Shape>, frame: &Frame, labels: Labels) {
    shapes.push(Shape::Rect {
        x: 0.0,
        y: 0.0,
        w: WIDTH,
        h: HEIGHT,
        fill: Some("white"),
        stroke: None,
    });
    shapes.push(styled(
        (LEFT + PLOT_W / 2.0, 24.0),
        labels.title,
        Anchor::Middle,
        15.0,
        "#000",
    ));
    shapes.push(Shape::Rect {
        x: LEFT,
        y: TOP,
        w: PLOT_W,
        h: PLOT_H,
        fill: None,
        stroke: Some("#333"),
    });
    draw_grid(shapes, frame);
    shapes.push(text(
        (LEFT + PLOT_W / 2.0, HEIGHT - 30.0),
        labels.x,
        Anchor::Middle,
    ));
    shapes.push(Shape::Text {
        at: (20.0, TOP + PLOT_H / 2.0),
        text: labels.y,
        anchor: Anchor::Middle,
        size: 12.0,
        color: "#000",
        vertical: true,
    });
    shapes.push(styled(
        (LEFT, HEIGHT - 10.0),
        "points: mean of the repetitions; error bars: 95% confidence interval of the mean (Student t)".to_owned(),
        Anchor::Start,
        11.0,
        "#555",
    ));
}

/// Grid lines with their tick labels; a categorical x axis has a label per category
/// and no vertical grid.
fn draw_grid(shapes: &mut Vec<Shape>, frame: &Frame) {
    for tick in ticks(frame.y_min, frame.y_max) {
        let y = frame.sy(tick);
        shapes.push(Shape::Line {
            from: (LEFT, y),
            to: (LEFT + PLOT_W, y),
            color: "#ddd",
        });
        shapes.push(text((LEFT - 6.0, y + 4.0), si(tick), Anchor::End));
    }
    if frame.categories.is_empty() {
        for tick in ticks(frame.x_min, frame.x_max) {
            let x = frame.sx(tick);
            shapes.push(Shape::Line {
                from: (x, TOP),
                to: (x, TOP + PLOT_H),
                color: "#eee",
            });
            shapes.push(text((x, TOP + PLOT_H + 18.0), si(tick), Anchor::Middle));
        }
    } else {
        for (i, category) in frame.categories.iter().enumerate() {
            shapes.push(text(
                (frame.sx(i as f64), TOP + PLOT_H + 18.0),
                category.clone(),
                Anchor::Middle,
            ));
        }
    }
}

fn draw_thresholds(shapes: &mut Vec<Shape>, frame: &Frame, thresholds: &[(f64, &str)]) {
    for (value, label) in thresholds {
        let y = frame.sy(*value);
        shapes.push(Shape::Dashed {
            from: (LEFT, y),
            to: (LEFT + PLOT_W, y),
            color: "#cf222e",
        });
        shapes.push(styled(
            (LEFT + PLOT_W - 4.0, y - 4.0),
            label.to_string(),
            Anchor::End,
            11.0,
            "#cf222e",
        ));
    }
}

/// The `index`th series: its line through the points in x order, each point with its
/// error bars, and its legend entry.
fn draw_series(shapes: &mut Vec<Shape>, frame: &Frame, index: usize, name: &str, points: &[Point]) {
    let color = COLORS[index % COLORS.len()];
    let mut sorted: Vec<&Point> = points.iter().collect();
    sorted.sort_by(|a, b| frame.x_of(&a.x).total_cmp(&frame.x_of(&b.x)));
    shapes.push(Shape::SeriesStart(name.to_owned()));
    shapes.push(Shape::Polyline {
        points: sorted
            .iter()
            .map(|p| (frame.sx(frame.x_of(&p.x)), frame.sy(p.y)))
            .collect(),
        color,
        width: 1.5,
    });
    for p in sorted {
        draw_point(shapes, frame, p, color);
    }
    let legend_y = TOP + 10.0 + index as f64 * 18.0;
    shapes.push(Shape::Rect {
        x: WIDTH - RIGHT + 16.0,
        y: legend_y - 4.0,
        w: 12.0,
        h: 3.0,
        fill: Some(color),
        stroke: None,
    });
    shapes.push(text(
        (WIDTH - RIGHT + 34.0, legend_y),
        if name.is_empty() {
            "all cases".to_owned()
        } else {
            name.to_owned()
        },
        Anchor::Start,
    ));
    shapes.push(Shape::SeriesEnd);
}

/// A point's error bars (a capped vertical one, a plain horizontal one) under its dot.
fn draw_point(shapes: &mut Vec<Shape>, frame: &Frame, p: &Point, color: &'static str) {
    let (x, y) = (frame.sx(frame.x_of(&p.x)), frame.sy(p.y));
    if let Some((low, high)) = p.y_err {
        let (low, high) = (frame.sy(low), frame.sy(high));
        shapes.push(Shape::ErrorBar {
            segments: vec![
                ((x, low), (x, high)),
                ((x - 4.0, low), (x + 4.0, low)),
                ((x - 4.0, high), (x + 4.0, high)),
            ],
            color,
        });
    }
    if let Some((low, high)) = p.x_err {
        shapes.push(Shape::ErrorBar {
            segments: vec![((frame.sx(low), y), (frame.sx(high), y))],
            color,
        });
    }
    shapes.push(Shape::Circle {
        center: (x, y),
        r: 3.5,
        color,
    });
}

/// The scene as an SVG document.
pub fn to_svg(scene: &Scene) -> String {
    let (width, height) = (scene.width, scene.height);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
    );
    for shape in &scene.shapes {
        match shape {
            Shape::Rect {
                x,
                y,
                w,
                h,
                fill,
                stroke,
            } => {
                let _ = write!(
                    out,
                    r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{}""#,
                    fill.unwrap_or("none")
                );
                if let Some(stroke) = stroke {
                    let _ = write!(out, r#" stroke="{stroke}""#);
                }
                out.push_str("/>\n");
            }
            Shape::Line { from, to, color } => {
                let _ = writeln!(
                    out,
                    r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}"/>"#,
                    from.0, from.1, to.0, to.1
                );
            }
            Shape::Polyline {
                points,
                color,
                width,
            } => {
                let path: Vec<String> = points
                    .iter()
                    .map(|(x, y)| format!("{x:.1},{y:.1}"))
                    .collect();
                let _ = writeln!(
                    out,
                    r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="{width}"/>"#,
                    path.join(" ")
                );
            }
            Shape::ErrorBar { segments, color } => {
                let d: String = segments
                    .iter()
                    .map(|(a, b)| format!("M{:.1},{:.1}L{:.1},{:.1}", a.0, a.1, b.0, b.1))
                    .collect();
                let _ = writeln!(out, r#"<path d="{d}" stroke="{color}" class="error-bar"/>"#);
            }
            Shape::Dashed { from, to, color } => {
                let _ = writeln!(
                    out,
                    r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4" class="threshold"/>"#,
                    from.0, from.1, to.0, to.1
                );
            }
            Shape::Circle { center, r, color } => {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="{r}" fill="{color}"/>"#,
                    center.0, center.1
                );
            }
            Shape::Text {
                at,
                text,
                anchor,
                size,
                color,
                vertical,
            } => {
                let anchor = match anchor {
                    Anchor::Start => "start",
                    Anchor::Middle => "middle",
                    Anchor::End => "end",
                };
                let position = if *vertical {
                    format!(
                        r#"transform="translate({:.1} {:.1}) rotate(-90)""#,
                        at.0, at.1
                    )
                } else {
                    format!(r#"x="{:.1}" y="{:.1}""#, at.0, at.1)
                };
                let _ = writeln!(
                    out,
                    r#"<text {position} text-anchor="{anchor}" font-size="{size}" fill="{color}">{}</text>"#,
                    escape(text)
                );
            }
            Shape::SeriesStart(name) => {
                let _ = writeln!(out, r#"<g class="series" data-series="{}">"#, escape(name));
            }
            Shape::SeriesEnd => out.push_str("</g>\n"),
        }
    }
    out.push_str("</svg>\n");
    out
}

type Series = Vec<(String, Vec<Point>)>;

/// The declarations of the y metric (for [`HEADLINE`], of each headline), in the
/// cases' kinds; empty when one is unknown.
fn y_defs(cases: &[Case], spec: &PlotSpec) -> Vec<&'static crate::judging::metrics::MetricDef> {
    let mut defs: Vec<&'static crate::judging::metrics::MetricDef> = Vec::new();
    for case in cases {
        let metric = if spec.y == HEADLINE {
            case.headline()
        } else {
            case.metric(&spec.y)
        };
        let Some(metric) = metric else { continue };
        let Some(def) = metric_def(&case.kind, &metric.name) else {
            return Vec::new();
        };
        if !defs.iter().any(|d| d.name == def.name) {
            defs.push(def);
        }
    }
    defs
}

/// Every value in the displayed units.
fn rescale(series: &mut Series, x: Option<&DisplayScale>, y: Option<&DisplayScale>) {
    let (fx, fy) = (x.map_or(1.0, |s| s.factor), y.map_or(1.0, |s| s.factor));
    for point in series.iter_mut().flat_map(|(_, points)| points) {
        point.y *= fy;
        point.y_err = point.y_err.map(|(low, high)| (low * fy, high * fy));
        if let XValue::Number(x) = &mut point.x {
            *x *= fx;
        }
        point.x_err = point.x_err.map(|(low, high)| (low * fx, high * fx));
    }
}

/// The y metric's name; for [`HEADLINE`], the headline metrics the cases have.
fn y_label(cases: &[Case], spec: &PlotSpec) -> String {
    if spec.y != HEADLINE {
        return spec.y.clone();
    }
    let mut names: Vec<&str> = Vec::new();
    for name in cases
        .iter()
        .filter_map(|c| c.headline().map(|m| m.name.as_str()))
    {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(" / ")
}

fn collect(cases: &[Case], spec: &PlotSpec) -> Result<(String, Series), PlotError> {
    let mut series: Series = Vec::new();
    let x_label = match &spec.x {
        Axis::Parameter(p) => p.clone(),
        Axis::Metric(m) => m.clone(),
    };
    let by_headline = spec.y == HEADLINE;
    let headlines: Vec<&str> = {
        let mut names: Vec<&str> = Vec::new();
        for name in cases
            .iter()
            .filter_map(|c| c.headline().map(|m| m.name.as_str()))
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    };
    for case in cases {
        let y = if by_headline {
            case.headline()
        } else {
            case.metric(&spec.y)
        };
        let Some(y) = y else {
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
                let mut name = if rest.is_empty() {
                    String::new()
                } else {
                    describe_permutation(&rest)
                };
                // Several headline metrics on one axis: each names its series.
                if by_headline && headlines.len() > 1 {
                    name = if name.is_empty() {
                        y.name.clone()
                    } else {
                        format!("{name} ({})", y.name)
                    };
                }
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
        let plottable = |value: f64| value.is_finite() && value.abs() <= MAX_PLOTTABLE;
        let unplottable = |metric: &str, value: f64| PlotError::Unplottable {
            case: describe_permutation(&case.permutation),
            metric: metric.to_owned(),
            value,
        };
        if !plottable(y.summary.mean) {
            return Err(unplottable(&spec.y, y.summary.mean));
        }
        if let XValue::Number(x) = x
            && !plottable(x)
        {
            return Err(unplottable(&x_label, x));
        }
        // An interval that overflowed (the variance of huge values) is left out.
        let bar = |interval: Option<(f64, f64)>| {
            interval.filter(|(low, high)| plottable(*low) && plottable(*high))
        };
        let point = Point {
            x,
            x_err: bar(x_err),
            y: y.summary.mean,
            y_err: bar(y.summary.ci95),
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

/// Category order on the x axis: sizes by size (`4k` before `64k` before `1M`), other
/// labels naturally (`job2` before `job10`), so a swept `bs` reads left to right.
pub fn category_order(a: &str, b: &str) -> std::cmp::Ordering {
    match (size_bytes(a), size_bytes(b)) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        _ => natural_key(a).cmp(&natural_key(b)),
    }
}

/// `4k`, `1M`, `512`, `2GiB`, `64KB` in bytes (binary prefixes, as fio reads `bs`).
fn size_bytes(text: &str) -> Option<f64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let number: f64 = text.get(..digits)?.parse().ok()?;
    let suffix = text.get(digits..)?.to_ascii_lowercase();
    let suffix = suffix.trim_end_matches('b').trim_end_matches('i');
    let scale = match suffix {
        "" => 1.0,
        "k" => 1024.0,
        "m" => 1024f64.powi(2),
        "g" => 1024f64.powi(3),
        "t" => 1024f64.powi(4),
        "p" => 1024f64.powi(5),
        _ => return None,
    };
    Some(number * scale)
}

/// Text split into runs of digits (compared as numbers) and the rest.
fn natural_key(text: &str) -> Vec<(String, u128)> {
    let mut key = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (word, tail) = rest.split_at(split);
        let digits = tail
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(tail.len());
        let (number, tail) = tail.split_at(digits);
        key.push((word.to_owned(), number.parse().unwrap_or(u128::MAX)));
        rest = tail;
    }
    key
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
    use crate::judging::stats::Stability;
    use crate::results::group;
    use crate::results::testing::iperf;

    fn cases() -> Vec<Case> {
        let mut records = Vec::new();
        for rep in 0..3 {
            for (case, streams, bits) in [("a", 1, 9e9), ("b", 2, 9.3e9), ("c", 4, 9.4e9)] {
                records.push(iperf(
                    "r",
                    case,
                    streams,
                    rep,
                    bits * (1.0 + f64::from(rep) * 0.01),
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
    fn png_decodes_with_the_series_drawn_where_the_svg_has_them() {
        let scene = scene(
            &cases(),
            &PlotSpec {
                x: Axis::Parameter("streams".into()),
                y: "received_bits_per_second".into(),
                title: None,
            },
        )
        .unwrap();
        let bytes = crate::results::raster::png(&scene).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // IHDR comes first: width and height, big-endian.
        assert_eq!(&bytes[12..16], b"IHDR");
        assert_eq!(u32::from_be_bytes(bytes[16..20].try_into().unwrap()), 800);
        assert_eq!(u32::from_be_bytes(bytes[20..24].try_into().unwrap()), 480);

        let mut reader = png::Decoder::new(std::io::Cursor::new(&bytes))
            .read_info()
            .unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), (800, 480));
        assert_eq!(info.color_type, png::ColorType::Rgb);
        let at = |x: f64, y: f64| {
            let i = (y as usize * 800 + x as usize) * 3;
            [pixels[i], pixels[i + 1], pixels[i + 2]]
        };
        let circles: Vec<(f64, f64)> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Circle { center, .. } => Some(*center),
                _ => None,
            })
            .collect();
        assert_eq!(circles.len(), 3);
        for (x, y) in &circles {
            // The first series' color, #1f77b4, at every point.
            assert_eq!(at(*x, *y), [0x1f, 0x77, 0xb4], "point at ({x}, {y})");
        }
        // Halfway between two points, on the line: drawn; well above it: background.
        let (a, b) = (circles[0], circles[1]);
        let middle = at(f64::midpoint(a.0, b.0), f64::midpoint(a.1, b.1));
        assert_ne!(middle, [255, 255, 255], "the line between the points");
        assert_eq!(
            at(f64::midpoint(a.0, b.0) + 7.0, TOP + 20.0),
            [255, 255, 255]
        );
        // Text is drawn: the title's row has dark pixels, the row above it none.
        let dark = |y: f64| (0..800).filter(|x| at(f64::from(*x), y)[0] < 128).count();
        assert!(dark(20.0) > 20, "title pixels");
        assert_eq!(dark(2.0), 0);
    }

    /// Records of a fio sweep over `bs` and `rw`, one repetition each.
    fn fio_cases() -> Vec<Case> {
        let mut records = Vec::new();
        for (i, bs) in ["64k", "4k", "1M", "16k"].iter().enumerate() {
            for rw in ["randread", "randwrite"] {
                let mut record = iperf("r", &format!("{bs}-{rw}"), 1, 0, 1.0);
                let direction = if rw == "randread" { "read" } else { "write" };
                let stats = serde_json::json!({"bandwidthBytesPerSecond": 1000 * (i + 1),
                    "iops": 10.0, "ioBytes": 1, "totalIos": 1, "clatMeanMicros": 1.0,
                    "clatStddevMicros": 0.0, "clatMinMicros": 1.0, "clatMaxMicros": 1.0});
                let result = serde_json::json!({"clientServer": false,
                    "percentilesExact": true, direction: stats});
                let kind = crate::kinds::registry::lookup("Fio").expect("registered");
                record.benchmark.kind = "Fio".into();
                record.benchmark.permutation =
                    serde_json::from_value(serde_json::json!({"bs": bs, "rw": rw})).expect("a map");
                record.outcome = crate::results::record::RecordOutcome::Succeeded {
                    summary: String::new(),
                    metrics: kind.metrics(&result),
                    result,
                };
                records.push(record);
            }
        }
        group(&records, Stability::default())
    }

    /// Finding 10 of issue 18: by `bs`, the randwrite cases were dropped (their headline
    /// is write bandwidth, the first case's read bandwidth) and 64k came before 4k.
    #[test]
    fn headline_plots_keep_every_direction_in_size_order() {
        let scene = scene(
            &fio_cases(),
            &PlotSpec {
                x: Axis::Parameter("bs".into()),
                y: HEADLINE.into(),
                title: None,
            },
        )
        .expect("plotted");
        let series: Vec<&str> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::SeriesStart(name) => Some(name.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(
            series,
            [
                "rw=randread (read_bandwidth_bytes_per_second)",
                "rw=randwrite (write_bandwidth_bytes_per_second)"
            ]
        );
        let circles = scene
            .shapes
            .iter()
            .filter(|s| matches!(s, Shape::Circle { .. }))
            .count();
        assert_eq!(circles, 8, "every case is drawn");
        let labels: Vec<&str> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                // x-axis labels are centred; the y ticks (here also "4k") are not.
                Shape::Text {
                    text,
                    anchor: Anchor::Middle,
                    ..
                } if ["4k", "16k", "64k", "1M"].contains(&text.as_str()) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(labels, ["4k", "16k", "64k", "1M"]);
        let svg = to_svg(&scene);
        assert!(
            svg.contains(
                "read_bandwidth_bytes_per_second / write_bandwidth_bytes_per_second by bs"
            ),
            "the title names both metrics"
        );
        let mut names = vec!["job10", "job2", "b", "a"];
        names.sort_by(|a, b| category_order(a, b));
        assert_eq!(names, ["a", "b", "job2", "job10"]);
    }

    /// Finding 8 of issue 18: a metric of 1e200 is refused with a message naming the
    /// case instead of hanging the PNG or writing `inf` into the SVG.
    #[test]
    fn extreme_values_are_refused_by_name() {
        let mut records = vec![iperf("r", "a", 1, 0, 9e9), iperf("r", "b", 2, 0, 1e200)];
        records.push(iperf("r", "b", 2, 1, 1.1e200));
        let cases = group(&records, Stability::default());
        let spec = PlotSpec {
            x: Axis::Parameter("streams".into()),
            y: "received_bits_per_second".into(),
            title: None,
        };
        let error = scene(&cases, &spec).unwrap_err();
        assert!(
            matches!(&error, PlotError::Unplottable { case, .. } if case == "streams=2"),
            "{error}"
        );
        assert!(error.to_string().contains("1.05e200"), "{error}");
    }

    /// Issue 15: three repetitions far apart give a 95% interval reaching below zero;
    /// a throughput cannot be negative, so the whisker stops at the zero line.
    #[test]
    fn error_bars_of_non_negative_metrics_stop_at_zero() {
        let records: Vec<_> = [1e9, 9e9, 0.1e9]
            .iter()
            .enumerate()
            .map(|(rep, bits)| iperf("r", "a", 1, rep as u32, *bits))
            .collect();
        let cases = group(&records, Stability::default());
        let interval = cases[0].metrics[0].summary.ci95.expect("an interval");
        assert!(interval.0 < 0.0, "the raw interval reaches below zero");
        let spec = PlotSpec {
            x: Axis::Parameter("streams".into()),
            y: "received_bits_per_second".into(),
            title: None,
        };
        let scene = scene(&cases, &spec).unwrap();
        let zero_line = TOP + (HEIGHT - TOP - BOTTOM);
        let mut bars = 0;
        for shape in &scene.shapes {
            if let Shape::ErrorBar { segments, .. } = shape {
                bars += 1;
                for (a, b) in segments {
                    assert!(
                        a.1 <= zero_line + 1e-9 && b.1 <= zero_line + 1e-9,
                        "{a:?} {b:?}"
                    );
                }
                // The lower cap sits on the zero line.
                assert!(segments.iter().any(|(a, _)| (a.1 - zero_line).abs() < 1e-6));
            }
        }
        assert_eq!(bars, 1);
    }

    #[test]
    fn axes_carry_scaled_units_and_thresholds_are_drawn() {
        let spec = PlotSpec {
            x: Axis::Parameter("streams".into()),
            y: "received_bits_per_second".into(),
            title: None,
        };
        let threshold = Threshold {
            value: 9.2e9,
            label: "min 9.2 Gbit/s".into(),
        };
        let scene = scene_with(&cases(), &spec, std::slice::from_ref(&threshold)).unwrap();
        let svg = to_svg(&scene);
        assert!(
            svg.contains(">Received throughput (Gbit/s)</text>"),
            "{svg}"
        );
        // Ticks in Gbit/s (0 to about 10), not in bit/s (9.4G).
        assert!(
            !svg.contains("G</text>") && svg.contains(">7.5</text>"),
            "{svg}"
        );
        assert_eq!(svg.matches("class=\"threshold\"").count(), 1);
        assert!(svg.contains(">min 9.2 Gbit/s</text>"));
        // The line sits where a point of 9.2 Gbit/s would: between the 9.0 and 9.3 cases.
        let dashed_y = scene
            .shapes
            .iter()
            .find_map(|s| match s {
                Shape::Dashed { from, .. } => Some(from.1),
                _ => None,
            })
            .expect("a threshold line");
        let ys: Vec<f64> = scene
            .shapes
            .iter()
            .filter_map(|s| match s {
                Shape::Circle { center, .. } => Some(center.1),
                _ => None,
            })
            .collect();
        // Rep means: 9.09 and 9.393 Gbit/s for cases a and b (pixels grow downwards).
        assert!(ys[0] > dashed_y && ys[1] < dashed_y, "{ys:?} {dashed_y}");
        let png = crate::results::raster::png(&scene).unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 10.0), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 9.9e9).len(), 5);
    }
}
