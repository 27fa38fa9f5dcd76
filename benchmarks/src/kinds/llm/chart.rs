//! The latency-throughput chart a local LLM sweep prints under its table: time to first
//! token (median and p99) against output token throughput, one point pair per
//! iteration, labelled with its load. Plain text, so it shows in any terminal and log.

use super::result::LLMInferenceResult;

/// One iteration on the chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Output tokens per second.
    pub throughput: f64,
    pub ttft_p50_ms: f64,
    pub ttft_p99_ms: f64,
    /// The load: `c16` (streams) or `8/s` (request rate).
    pub label: String,
}

/// The points of every iteration of `result` that completed requests.
pub fn points(result: &LLMInferenceResult) -> Vec<Point> {
    result
        .iterations
        .iter()
        .filter(|it| it.requests > 0)
        .map(|it| Point {
            throughput: it.output_tokens_per_second,
            ttft_p50_ms: it.ttft_millis.p50,
            ttft_p99_ms: it.ttft_millis.p99,
            // A `?` marks an iteration whose figures are in doubt (see its `doubts`).
            label: format!(
                "{}{}",
                match it.request_rate {
                    Some(rate) => format!("{rate}/s"),
                    None => format!("c{}", it.concurrency),
                },
                if it.doubts.is_empty() { "" } else { "?" }
            ),
        })
        .collect()
}

const P50: char = 'o';
const P99: char = '+';

/// The chart of `points` in a plot area of `width` × `height` characters (at least 20 ×
/// 5); an empty string without points.
pub fn render(points: &[Point], width: usize, height: usize) -> String {
    let finite: Vec<&Point> = points
        .iter()
        .filter(|p| {
            p.throughput.is_finite() && p.ttft_p50_ms.is_finite() && p.ttft_p99_ms.is_finite()
        })
        .collect();
    if finite.is_empty() {
        return String::new();
    }
    let (width, height) = (width.max(20), height.max(5));
    let x_max = nice_ceiling(finite.iter().map(|p| p.throughput).fold(0.0, f64::max));
    let y_max = nice_ceiling(
        finite
            .iter()
            .map(|p| p.ttft_p99_ms.max(p.ttft_p50_ms))
            .fold(0.0, f64::max),
    );
    let column = |x: f64| {
        ((x / x_max) * (width - 1) as f64)
            .round()
            .clamp(0.0, (width - 1) as f64) as usize
    };
    let row = |y: f64| {
        let from_bottom = ((y / y_max) * (height - 1) as f64)
            .round()
            .clamp(0.0, (height - 1) as f64) as usize;
        height - 1 - from_bottom
    };
    let mut grid = vec![vec![' '; width]; height];
    for point in &finite {
        let x = column(point.throughput);
        grid[row(point.ttft_p99_ms)][x] = P99;
        // The median wins where both fall on one cell.
        let y = row(point.ttft_p50_ms);
        grid[y][x] = P50;
        // The label right of the median, where it fits over blank cells.
        let label: Vec<char> = point.label.chars().collect();
        let start = x + 2;
        if start + label.len() <= width
            && grid[y][start - 1..start + label.len()]
                .iter()
                .all(|c| *c == ' ')
        {
            grid[y][start..start + label.len()].copy_from_slice(&label);
        }
    }
    let y_label_width = format_number(y_max).len().max(1);
    let mut out = format!(
        "time to first token (ms; {P50} median, {P99} p99) against output throughput (tokens/s)\n"
    );
    if finite.iter().any(|p| p.label.ends_with('?')) {
        out.push_str("(a label ending in ? marks an iteration whose figures are in doubt)\n");
    }
    for (i, cells) in grid.iter().enumerate() {
        let axis = if i == 0 {
            format_number(y_max)
        } else if i == height - 1 {
            "0".into()
        } else {
            String::new()
        };
        let line: String = cells.iter().collect();
        out.push_str(&format!("{axis:>y_label_width$} |{}\n", line.trim_end()));
    }
    out.push_str(&format!("{:>y_label_width$} +{}\n", "", "-".repeat(width)));
    let right = format_number(x_max);
    out.push_str(&format!(
        "{:>y_label_width$}  0{}{right}\n",
        "",
        " ".repeat(width.saturating_sub(1 + right.len()))
    ));
    out
}

/// The smallest of 1, 2, 2.5, 5 times a power of ten at or above `value` (positive).
fn nice_ceiling(value: f64) -> f64 {
    if value.is_nan() || value <= 0.0 {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|step| step * power)
        .find(|candidate| *candidate >= value)
        .unwrap_or(10.0 * power)
}

fn format_number(value: f64) -> String {
    if value >= 10.0 || value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(throughput: f64, p50: f64, p99: f64, label: &str) -> Point {
        Point {
            throughput,
            ttft_p50_ms: p50,
            ttft_p99_ms: p99,
            label: label.into(),
        }
    }

    #[test]
    fn axes_end_on_round_numbers_above_the_largest_value() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(52.0), 100.0);
        assert_eq!(nice_ceiling(210.0), 250.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
        assert_eq!(nice_ceiling(1001.0), 2000.0);
    }

    #[test]
    fn points_land_where_their_values_say() {
        let chart = render(
            &[
                point(100.0, 50.0, 60.0, "c1"),
                point(1000.0, 100.0, 225.0, "c16"),
            ],
            41,
            11,
        );
        let lines: Vec<&str> = chart.lines().collect();
        // Title, 11 rows, the x axis and its labels.
        assert_eq!(lines.len(), 14, "{chart}");
        // y runs to 250 ms in 10 steps of 25 ms.
        assert!(lines[1].starts_with("250 |"), "{chart}");
        let row = |ms: f64| lines[1 + (10 - (ms / 25.0).round() as usize)];
        let column = |tokens: f64| 5 + (tokens / 1000.0 * 40.0).round() as usize;
        assert_eq!(row(225.0).chars().nth(column(1000.0)), Some(P99), "{chart}");
        assert_eq!(row(100.0).chars().nth(column(1000.0)), Some(P50), "{chart}");
        assert_eq!(row(50.0).chars().nth(column(100.0)), Some(P50), "{chart}");
        assert!(row(50.0).contains("o c1"), "{chart}");
        assert!(lines[13].trim_end().ends_with("1000"), "{chart}");
    }

    #[test]
    fn no_points_no_chart_and_odd_values_do_not_panic() {
        assert_eq!(render(&[], 40, 10), "");
        assert_eq!(render(&[point(f64::NAN, 1.0, 2.0, "c1")], 40, 10), "");
        let chart = render(&[point(0.0, 0.0, 0.0, "a-very-long-label")], 1, 1);
        assert!(chart.contains('o'), "{chart}");
    }
}
