//! PNG charts: a plot's [`Scene`] rasterized here, the same shapes as its SVG.
//!
//! Drawing is a few anti-aliased primitives (coverage from the distance to a segment or
//! a circle) and text from a built-in bitmap font (DejaVu Sans at 12 px, ASCII; see
//! `font.rs`), so the only dependency is the `png` encoder. A rasterizer with font
//! shaping (resvg with text) would build about ten times as long; charts need neither
//! curves nor scripts beyond ASCII labels.

mod font;

use super::plot::{Anchor, Scene, Shape};

#[derive(Debug, thiserror::Error)]
pub enum RasterError {
    #[error("encoding the PNG: {0}")]
    Encode(#[from] png::EncodingError),
    #[error("the chart is {width}×{height}, too large to rasterize")]
    TooLarge { width: f64, height: f64 },
}

/// The largest canvas side, in pixels: far above any chart, well below memory trouble.
const MAX_SIDE: f64 = 8192.0;

/// The scene as a PNG image (8-bit RGB, one pixel per SVG unit).
pub fn png(scene: &Scene) -> Result<Vec<u8>, RasterError> {
    let canvas = rasterize(scene)?;
    let mut out = Vec::new();
    {
        let mut encoder = png::Encoder::new(&mut out, canvas.width as u32, canvas.height as u32);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header()?;
        writer.write_image_data(&canvas.pixels)?;
        writer.finish()?;
    }
    Ok(out)
}

/// An RGB image being drawn on.
pub struct Canvas {
    pub width: usize,
    pub height: usize,
    /// Row-major RGB.
    pub pixels: Vec<u8>,
}

/// The scene drawn on a white canvas.
pub fn rasterize(scene: &Scene) -> Result<Canvas, RasterError> {
    let valid = |side: f64| side.is_finite() && (1.0..=MAX_SIDE).contains(&side);
    if !valid(scene.width) || !valid(scene.height) {
        return Err(RasterError::TooLarge {
            width: scene.width,
            height: scene.height,
        });
    }
    let (width, height) = (scene.width.ceil() as usize, scene.height.ceil() as usize);
    let mut canvas = Canvas {
        width,
        height,
        pixels: vec![255; width * height * 3],
    };
    for shape in &scene.shapes {
        canvas.draw(shape);
    }
    Ok(canvas)
}

impl Canvas {
    /// The RGB value at a pixel.
    pub fn pixel(&self, x: usize, y: usize) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y * self.width + x) * 3;
        Some([self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]])
    }

    fn draw(&mut self, shape: &Shape) {
        match shape {
            Shape::Rect {
                x,
                y,
                w,
                h,
                fill,
                stroke,
            } => {
                if let Some(color) = fill.and_then(parse_color) {
                    let (x0, x1) = self.columns(x.round(), (x + w).round());
                    let (y0, y1) = self.rows(y.round(), (y + h).round());
                    for py in y0..y1 {
                        for px in x0..x1 {
                            self.blend(px, py, color, 1.0);
                        }
                    }
                }
                if let Some(color) = stroke.and_then(parse_color) {
                    let corners = [(*x, *y), (x + w, *y), (x + w, y + h), (*x, y + h)];
                    for i in 0..4 {
                        self.segment(corners[i], corners[(i + 1) % 4], 1.0, color);
                    }
                }
            }
            Shape::Line { from, to, color } => {
                if let Some(color) = parse_color(color) {
                    self.segment(*from, *to, 1.0, color);
                }
            }
            Shape::Polyline {
                points,
                color,
                width,
            } => {
                if let Some(color) = parse_color(color) {
                    for pair in points.windows(2) {
                        self.segment(pair[0], pair[1], *width, color);
                    }
                }
            }
            Shape::ErrorBar { segments, color } => {
                if let Some(color) = parse_color(color) {
                    for (from, to) in segments {
                        self.segment(*from, *to, 1.0, color);
                    }
                }
            }
            Shape::Dashed { from, to, color } => {
                if let Some(color) = parse_color(color) {
                    // 6 px on, 4 px off, as the SVG's stroke-dasharray.
                    let length = (to.0 - from.0).hypot(to.1 - from.1);
                    let mut at = 0.0;
                    while at < length {
                        let end = (at + 6.0).min(length);
                        let point = |t: f64| {
                            (
                                from.0 + (to.0 - from.0) * t / length,
                                from.1 + (to.1 - from.1) * t / length,
                            )
                        };
                        self.segment(point(at), point(end), 1.5, color);
                        at += 10.0;
                    }
                }
            }
            Shape::Circle { center, r, color } => {
                if let Some(color) = parse_color(color) {
                    self.circle(*center, *r, color);
                }
            }
            Shape::Text {
                at,
                text,
                anchor,
                size,
                color,
                vertical,
            } => {
                if let Some(color) = parse_color(color) {
                    // One font size: a larger text (the title) is drawn bold instead.
                    let bold = *size >= 14.0;
                    self.text(*at, text, *anchor, *vertical, bold, color);
                }
            }
            Shape::SeriesStart(_) | Shape::SeriesEnd => {}
        }
    }

    /// The pixel columns from `from` up to (not including) `to`, cut to the canvas: a
    /// shape reaching far outside it (a huge or infinite coordinate) costs no more than
    /// one spanning it, instead of looping over billions of invisible pixels.
    fn columns(&self, from: f64, to: f64) -> (i64, i64) {
        clip(from, to, self.width)
    }

    /// The pixel rows from `from` up to `to`, cut to the canvas; see [`Canvas::columns`].
    fn rows(&self, from: f64, to: f64) -> (i64, i64) {
        clip(from, to, self.height)
    }

    /// Mixes `color` into a pixel with opacity `alpha`; outside the canvas, nothing.
    fn blend(&mut self, x: i64, y: i64, color: [u8; 3], alpha: f64) {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return;
        }
        let alpha = alpha.clamp(0.0, 1.0);
        let i = (y as usize * self.width + x as usize) * 3;
        for (channel, value) in self.pixels[i..i + 3].iter_mut().zip(color) {
            let mixed = f64::from(*channel) * (1.0 - alpha) + f64::from(value) * alpha;
            *channel = mixed.round() as u8;
        }
    }

    /// An anti-aliased segment `width` wide: each pixel nearby is covered by how far
    /// its center is from the segment.
    fn segment(&mut self, a: (f64, f64), b: (f64, f64), width: f64, color: [u8; 3]) {
        let reach = width / 2.0 + 1.0;
        let (x0, x1) = (a.0.min(b.0) - reach, a.0.max(b.0) + reach);
        let (y0, y1) = (a.1.min(b.1) - reach, a.1.max(b.1) + reach);
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let length2 = dx * dx + dy * dy;
        let (x0, x1) = self.columns(x0.floor(), x1.ceil() + 1.0);
        let (y0, y1) = self.rows(y0.floor(), y1.ceil() + 1.0);
        for py in y0..y1 {
            for px in x0..x1 {
                let (cx, cy) = (px as f64 + 0.5, py as f64 + 0.5);
                let t = if length2 > 0.0 {
                    (((cx - a.0) * dx + (cy - a.1) * dy) / length2).clamp(0.0, 1.0)
                } else {
                    0.0
                };
                let distance = (cx - (a.0 + t * dx)).hypot(cy - (a.1 + t * dy));
                let coverage = width / 2.0 + 0.5 - distance;
                if coverage > 0.0 {
                    self.blend(px, py, color, coverage.min(1.0));
                }
            }
        }
    }

    fn circle(&mut self, center: (f64, f64), r: f64, color: [u8; 3]) {
        let (x0, x1) = self.columns(
            (center.0 - r - 1.0).floor(),
            (center.0 + r + 1.0).ceil() + 1.0,
        );
        let (y0, y1) = self.rows(
            (center.1 - r - 1.0).floor(),
            (center.1 + r + 1.0).ceil() + 1.0,
        );
        for py in y0..y1 {
            for px in x0..x1 {
                let distance = (px as f64 + 0.5 - center.0).hypot(py as f64 + 0.5 - center.1);
                let coverage = r + 0.5 - distance;
                if coverage > 0.0 {
                    self.blend(px, py, color, coverage.min(1.0));
                }
            }
        }
    }

    /// Text with its baseline through `at`; vertical text reads bottom to top (SVG's
    /// `rotate(-90)` about `at`).
    fn text(
        &mut self,
        at: (f64, f64),
        text: &str,
        anchor: Anchor,
        vertical: bool,
        bold: bool,
        color: [u8; 3],
    ) {
        let width = text_width(text);
        let start = match anchor {
            Anchor::Start => 0,
            Anchor::Middle => -width / 2,
            Anchor::End => -width,
        };
        let (ox, oy) = (at.0.round() as i64, at.1.round() as i64);
        let mut pen = start;
        for c in text.chars() {
            let (advance, left, top, w, h, first) = glyph(c);
            for j in 0..h {
                for i in 0..w {
                    let alpha = coverage(first + j * w + i);
                    if alpha == 0.0 {
                        continue;
                    }
                    // Along the text (u) and down from the baseline (v).
                    // Glyph pixel indices are below a few hundred.
                    #[allow(clippy::cast_possible_wrap)]
                    let (u, v) = (pen + left + i as i64, top + j as i64);
                    let (x, y) = if vertical {
                        (ox + v, oy - u)
                    } else {
                        (ox + u, oy + v)
                    };
                    self.blend(x, y, color, alpha);
                    if bold {
                        let (bx, by) = if vertical { (x, y - 1) } else { (x + 1, y) };
                        self.blend(bx, by, color, alpha);
                    }
                }
            }
            pen += advance + i64::from(bold);
        }
    }
}

/// (advance, left, top, width, height, first nibble) of a character's glyph; characters
/// the font does not have are drawn as `?`.
/// `from..to` within `0..side`; empty for NaN bounds (`as` saturates infinities).
fn clip(from: f64, to: f64, side: usize) -> (i64, i64) {
    let side = side as f64;
    if from.is_nan() || to.is_nan() {
        return (0, 0);
    }
    (from.clamp(0.0, side) as i64, to.clamp(0.0, side) as i64)
}

fn glyph(c: char) -> (i64, i64, i64, usize, usize, usize) {
    let index = match c {
        ' '..='~' => c as usize - ' ' as usize,
        _ => '?' as usize - ' ' as usize,
    };
    let (advance, left, top, w, h, first) = font::GLYPHS[index];
    (
        i64::from(advance),
        i64::from(left),
        i64::from(top),
        usize::from(w),
        usize::from(h),
        usize::from(first),
    )
}

fn coverage(nibble: usize) -> f64 {
    let byte = font::COVERAGE.get(nibble / 2).copied().unwrap_or(0);
    let value = if nibble.is_multiple_of(2) {
        byte & 0x0f
    } else {
        byte >> 4
    };
    f64::from(value) / 15.0
}

/// The width of `text` in pixels.
fn text_width(text: &str) -> i64 {
    text.chars().map(|c| glyph(c).0).sum()
}

/// The colors charts use: `#rgb`, `#rrggbb`, `white`, `black`; `none` (and anything
/// else) draws nothing.
fn parse_color(color: &str) -> Option<[u8; 3]> {
    match color {
        "white" => return Some([255; 3]),
        "black" => return Some([0; 3]),
        _ => {}
    }
    let hex = color.strip_prefix('#')?;
    let digit = |i: usize| u8::from_str_radix(hex.get(i..i + 1)?, 16).ok();
    match hex.len() {
        3 => Some([digit(0)? * 17, digit(1)? * 17, digit(2)? * 17]),
        6 => {
            let byte = |i: usize| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok();
            Some([byte(0)?, byte(2)?, byte(4)?])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Finding 8 of issue 18: a PNG of a metric of 1e200 ran for minutes, looping over
    /// the pixels of shapes far outside the canvas.
    #[test]
    fn shapes_far_outside_the_canvas_cost_nothing() {
        let scene = Scene {
            width: 100.0,
            height: 50.0,
            shapes: vec![
                Shape::Line {
                    from: (-1e9, 10.0),
                    to: (1e9, 10.0),
                    color: "#000",
                },
                Shape::ErrorBar {
                    segments: vec![
                        ((50.0, -1e12), (50.0, 1e12)),
                        ((60.0, f64::NEG_INFINITY), (60.0, f64::INFINITY)),
                    ],
                    color: "#000",
                },
                Shape::Circle {
                    center: (f64::NAN, 1e200),
                    r: 3.5,
                    color: "#000",
                },
                Shape::Rect {
                    x: -1e200,
                    y: -1e200,
                    w: 1e300,
                    h: 1e300,
                    fill: None,
                    stroke: Some("#000"),
                },
            ],
        };
        let canvas = rasterize(&scene).expect("drawn");
        // The visible parts are still drawn: the horizontal line and the vertical bar.
        assert_ne!(canvas.pixel(20, 10), Some([255, 255, 255]));
        assert_ne!(canvas.pixel(50, 40), Some([255, 255, 255]));
        assert_eq!(canvas.pixel(80, 40), Some([255, 255, 255]));
    }

    #[test]
    fn colors_and_text_metrics() {
        assert_eq!(parse_color("#1f77b4"), Some([0x1f, 0x77, 0xb4]));
        assert_eq!(parse_color("#333"), Some([0x33; 3]));
        assert_eq!(parse_color("white"), Some([255; 3]));
        assert_eq!(parse_color("none"), None);
        assert_eq!(parse_color("#12"), None);
        assert!(text_width("streams") > text_width("1"));
        assert_eq!(text_width("é"), text_width("?"));
    }
}
