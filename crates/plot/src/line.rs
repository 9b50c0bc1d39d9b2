//! Line charts and empirical CDFs.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::axis::{extent, resolve, Axis};
use crate::fmt::{c, escape};
use crate::svg::{self, palette, LegendEntry, Plot, Swatch};

/// How a series is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Style {
    /// Straight segments between consecutive points.
    #[default]
    Line,
    /// A staircase: each value holds until the next point's x ("step after").
    Step,
    /// A dot per point, no line.
    Points,
    /// Straight segments and a dot per point.
    LinePoints,
}

/// A named sequence of (x, y) points, drawn in the given order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Shown in the legend and on hover; an empty name keeps the series out of the legend.
    pub name: String,
    /// The data; points with a NaN or infinite coordinate (or a non-positive one on a log
    /// axis) are skipped.
    pub points: Vec<(f64, f64)>,
    /// How the series is drawn.
    pub style: Style,
    /// Any SVG colour (`#4e79a7`, `teal` …); `None` takes the next [`PALETTE`](crate::PALETTE)
    /// colour by series index.
    pub color: Option<String>,
}

impl Series {
    /// A [`Style::Line`] series in a palette colour.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
            style: Style::Line,
            color: None,
        }
    }

    /// Sets the style.
    pub fn style(mut self, style: Style) -> Self {
        self.style = style;
        self
    }

    /// Sets the colour.
    pub fn color(mut self, color: impl Into<String>) -> Self {
        self.color = Some(color.into());
        self
    }
}

/// A chart of one or more series over two axes, with a title and a legend.
#[derive(Clone, Debug, PartialEq)]
pub struct LineChart {
    /// Drawn at the top; may be empty.
    pub title: String,
    /// The horizontal axis.
    pub x: Axis,
    /// The vertical axis.
    pub y: Axis,
    /// Drawn in order, later ones on top.
    pub series: Vec<Series>,
    /// Width in px.
    pub width: u32,
    /// Height in px, not counting a legend that did not fit to the right and went below.
    pub height: u32,
}

impl LineChart {
    /// An empty 640 × 360 chart.
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Self {
        LineChart {
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            width: 640,
            height: 360,
        }
    }

    /// Adds a series.
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    crate::svg::size_setter!();

    /// The chart as a standalone `<svg>` element.
    ///
    /// Long Line and Step series are thinned per pixel column (see [`downsample`]), and
    /// Points series draw at most one dot per pixel, so the output stays small for any
    /// number of points.
    pub fn to_svg(&self) -> String {
        let width = f64::from(self.width.max(120));
        let height = f64::from(self.height.max(100));
        let valid: Vec<Vec<(f64, f64)>> = self
            .series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .copied()
                    .filter(|&(x, y)| self.x.accepts(x) && self.y.accepts(y))
                    .collect()
            })
            .collect();
        let all = || valid.iter().flatten();
        let xr = extent(&self.x, all().map(|p| p.0));
        let yr = extent(&self.y, all().map(|p| p.1));
        let has_data = all().next().is_some();

        let est_h = height - 80.0;
        let (ys, yticks) = resolve(&self.y, yr, ((est_h / 45.0) as usize).clamp(2, 10), true);
        let m = svg::margins(
            &yticks,
            !self.y.label.is_empty(),
            !self.title.is_empty(),
            !self.x.label.is_empty(),
            22.0,
        );
        let entries: Vec<LegendEntry> = self
            .series
            .iter()
            .enumerate()
            .filter(|(_, s)| !s.name.is_empty())
            .map(|(i, s)| LegendEntry {
                name: s.name.clone(),
                color: self.color_of(i),
                swatch: match s.style {
                    Style::Line | Style::Step => Swatch::Line,
                    Style::Points => Swatch::Points,
                    Style::LinePoints => Swatch::LinePoints,
                },
            })
            .collect();
        let plot_h = (height - m.top - m.bottom).max(40.0);
        let (place, right, extra) = svg::legend_place(&entries, width, plot_h, m.left);
        let p = Plot {
            left: m.left,
            top: m.top,
            w: (width - m.left - right).max(40.0),
            h: plot_h,
        };
        let (xs, xticks) = resolve(&self.x, xr, ((p.w / 90.0) as usize).clamp(2, 12), true);

        let mut body = String::new();
        for (i, (s, pts)) in self.series.iter().zip(&valid).enumerate() {
            let px: Vec<(f64, f64)> = pts
                .iter()
                .filter_map(|&(x, y)| Some((p.x(xs.frac(x)?), p.y(ys.frac(y)?))))
                .collect();
            if !px.is_empty() {
                draw_series(&mut body, s, &px, &escape(&self.color_of(i)));
            }
        }

        let mut out = String::with_capacity(body.len() + 4096);
        svg::open(&mut out, width, height + extra, &self.title);
        svg::title(&mut out, width, &self.title);
        svg::y_axis(&mut out, &p, &ys, &yticks, &self.y.label, m.y_label_x);
        svg::x_axis(&mut out, &p, &xs, &xticks, &self.x.label);
        if has_data {
            let id = svg::clip(&mut out, &p, 3.0, &body);
            let _ = write!(out, "<g clip-path=\"url(#{id})\">{body}</g>");
        } else {
            svg::no_data(&mut out, &p);
        }
        svg::legend(&mut out, &entries, &place, &p, height);
        out.push_str("</svg>");
        out
    }

    fn color_of(&self, i: usize) -> String {
        self.series[i]
            .color
            .clone()
            .unwrap_or_else(|| palette(i).to_string())
    }
}

/// One series at its pixel positions `px` (non-empty): its line (thinned per pixel column),
/// its dots (at most one per pixel), or both.
fn draw_series(body: &mut String, s: &Series, px: &[(f64, f64)], color: &str) {
    let name = escape(&s.name);
    if matches!(s.style, Style::Line | Style::Step | Style::LinePoints) {
        let d = line_path(&downsample(px), s.style == Style::Step);
        let _ = write!(
            body,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.75\" \
             stroke-linejoin=\"round\" stroke-linecap=\"round\"><title>{name}</title></path>"
        );
    }
    if matches!(s.style, Style::Points | Style::LinePoints) {
        let mut seen = BTreeSet::new();
        let _ = write!(body, "<g fill=\"{color}\"><title>{name}</title>");
        for &(x, y) in px {
            if seen.insert((x.round() as i64, y.round() as i64)) {
                let _ = write!(body, "<circle cx=\"{}\" cy=\"{}\" r=\"2.5\"/>", c(x), c(y));
            }
        }
        body.push_str("</g>");
    }
}

/// Path data through `kept` (non-empty): straight segments, or horizontal-then-vertical
/// steps; a single point still shows as a dot.
fn line_path(kept: &[(f64, f64)], step: bool) -> String {
    let mut d = format!("M{} {}", c(kept[0].0), c(kept[0].1));
    if step {
        for w in kept.windows(2) {
            let (a, b) = (w[0], w[1]);
            if c(a.0) != c(b.0) {
                let _ = write!(d, "H{}", c(b.0));
            }
            if c(a.1) != c(b.1) {
                let _ = write!(d, "V{}", c(b.1));
            }
        }
    } else if kept.len() > 1 {
        d.push('L');
        for (j, q) in kept[1..].iter().enumerate() {
            if j > 0 {
                d.push(' ');
            }
            let _ = write!(d, "{} {}", c(q.0), c(q.1));
        }
    } else {
        d.push_str("h0");
    }
    d
}

/// Thins a polyline given in pixel coordinates for drawing.
///
/// Consecutive points in the same pixel column (same `floor(x)`) are reduced to the first,
/// the lowest, the highest and the last of them, in their original order, so spikes
/// survive; and among those, a point in the same column as the previously kept point and
/// within a pixel of it vertically is dropped. The first point is always kept. The output
/// has at most 4 points per pixel column crossed.
pub fn downsample(px: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut i = 0;
    while i < px.len() {
        let col = px[i].0.floor();
        let mut j = i + 1;
        let (mut lo, mut hi) = (i, i);
        while j < px.len() && px[j].0.floor() == col {
            if px[j].1 < px[lo].1 {
                lo = j;
            }
            if px[j].1 > px[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let mut picks = [i, lo, hi, j - 1];
        picks.sort_unstable();
        let mut prev = usize::MAX;
        for k in picks {
            if k == prev {
                continue;
            }
            prev = k;
            let q = px[k];
            if let Some(last) = out.last() {
                if last.0.floor() == q.0.floor() && (last.1 - q.1).abs() < 1.0 {
                    continue;
                }
            }
            out.push(q);
        }
        i = j;
    }
    out
}

/// An empirical CDF chart: one [`Style::Step`] series per named sample set, y = fraction of
/// the set's samples ≤ x, from 0 at its smallest sample to 1 at its largest.
///
/// NaN and infinite samples are ignored (they count in no fraction); on a log `x` axis,
/// non-positive samples count in the fractions but are not drawn. The y axis is linear over
/// [0, 1], labelled "fraction of samples" (change `chart.y.label` to name what they are).
///
/// ```
/// use fairlane_plot::{cdf, Axis};
/// let chart = cdf("latency", Axis::log("seconds"), &[("fifo".into(), vec![0.1, 0.2, 3.0])]);
/// assert_eq!(chart.series[0].points.last(), Some(&(3.0, 1.0)));
/// ```
pub fn cdf(title: &str, x: Axis, samples: &[(String, Vec<f64>)]) -> LineChart {
    let mut chart = LineChart::new(
        title,
        x,
        Axis::linear("fraction of samples").range(0.0, 1.0),
    );
    for (name, values) in samples {
        chart = chart.series(Series::new(name.clone(), cdf_points(values)).style(Style::Step));
    }
    chart
}

/// The points of an empirical CDF: (smallest, 0), then (v, fraction ≤ v) for each distinct
/// finite value v in increasing order.
pub fn cdf_points(values: &[f64]) -> Vec<(f64, f64)> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let mut pts = vec![(v[0], 0.0)];
    for i in 0..v.len() {
        if i + 1 == v.len() || v[i + 1] != v[i] {
            pts.push((v[i], (i + 1) as f64 / n));
        }
    }
    pts
}
