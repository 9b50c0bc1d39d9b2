//! Shared SVG pieces: the document shell, plot frame, axes, legend.

use std::fmt::Write;

use crate::axis::{Scaler, Tick};
use crate::fmt::{c, escape, fnv};

/// The qualitative palette (Tableau 10) used, in order, for series without a colour.
pub const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// The palette colour for the `i`-th series.
pub fn palette(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

pub(crate) const FONT: f64 = 11.0;
pub(crate) const TITLE_FONT: f64 = 14.0;
const GRID: &str = "#e6e6e6";
const AXIS: &str = "#888";
const INK: &str = "#333";

/// Estimated rendered width of `s` at `size` px in a sans-serif font.
pub(crate) fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.6
}

/// `s` cut to `max` characters, with an ellipsis if it was longer.
pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('\u{2026}');
        t
    }
}

/// The `<svg>` start tag, an accessible title and a white background.
pub(crate) fn open(out: &mut String, w: f64, h: f64, title: &str) {
    let (w, h) = (c(w), c(h));
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" \
         viewBox=\"0 0 {w} {h}\" style=\"font-family: sans-serif; font-size: {}px\" \
         role=\"img\"><title>{}</title><rect width=\"{w}\" height=\"{h}\" fill=\"#fff\"/>",
        FONT,
        escape(title)
    );
}

/// The chart title, centred at the top.
pub(crate) fn title(out: &mut String, total_w: f64, title: &str) {
    if title.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"{TITLE_FONT}\" \
         font-weight=\"bold\" fill=\"{INK}\">{}</text>",
        c(total_w / 2.0),
        escape(title)
    );
}

/// The plot area in pixels.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plot {
    pub left: f64,
    pub top: f64,
    pub w: f64,
    pub h: f64,
}

impl Plot {
    pub fn x(&self, frac: f64) -> f64 {
        self.left + frac * self.w
    }
    pub fn y(&self, frac: f64) -> f64 {
        self.top + (1.0 - frac) * self.h
    }
    pub fn bottom(&self) -> f64 {
        self.top + self.h
    }
    pub fn right(&self) -> f64 {
        self.left + self.w
    }
}

/// Grid lines, tick marks and labels of a horizontal axis along the bottom of `p`, and the
/// axis label under them.
pub(crate) fn x_axis(out: &mut String, p: &Plot, s: &Scaler, ticks: &[Tick], label: &str) {
    let b = c(p.bottom());
    axis_ticks(out, s, ticks, "middle", |parts, f, len, tick| {
        let x = c(p.x(f));
        let _ = write!(parts.marks, "M{x} {b}v{len}");
        if let Some(l) = tick {
            let _ = write!(parts.grid, "M{x} {}V{b}", c(p.top));
            parts.label(&x, &c(p.bottom() + 17.0), l);
        }
    });
    x_axis_line(out, p);
    if !label.is_empty() {
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{INK}\">{}</text>",
            c(p.x(0.5)),
            c(p.bottom() + 34.0),
            escape(label)
        );
    }
}

/// The line along the bottom of `p`.
pub(crate) fn x_axis_line(out: &mut String, p: &Plot) {
    let _ = write!(
        out,
        "<path d=\"M{} {b}H{}\" stroke=\"{AXIS}\" fill=\"none\"/>",
        c(p.left),
        c(p.right()),
        b = c(p.bottom())
    );
}

/// Grid lines, tick marks and labels of a vertical axis along the left of `p`, and the
/// axis label rotated beside them at `label_x`.
pub(crate) fn y_axis(
    out: &mut String,
    p: &Plot,
    s: &Scaler,
    ticks: &[Tick],
    label: &str,
    label_x: f64,
) {
    let l = c(p.left);
    axis_ticks(out, s, ticks, "end", |parts, f, len, tick| {
        let y = c(p.y(f));
        let _ = write!(parts.marks, "M{l} {y}h-{len}");
        if let Some(t) = tick {
            let _ = write!(parts.grid, "M{l} {y}H{}", c(p.right()));
            parts.label(&c(p.left - 8.0), &c(p.y(f) + 4.0), t);
        }
    });
    let _ = write!(
        out,
        "<path d=\"M{l} {}V{}\" stroke=\"{AXIS}\" fill=\"none\"/>",
        c(p.top),
        c(p.bottom()),
    );
    if !label.is_empty() {
        let (x, y) = (c(label_x), c(p.y(0.5)));
        let _ = write!(
            out,
            "<text x=\"{x}\" y=\"{y}\" transform=\"rotate(-90 {x} {y})\" text-anchor=\"middle\" \
             fill=\"{INK}\">{}</text>",
            escape(label)
        );
    }
}

/// An axis's grid lines, tick marks and tick labels, gathered before they are written.
#[derive(Default)]
struct AxisParts {
    grid: String,
    marks: String,
    text: String,
}

impl AxisParts {
    fn label(&mut self, x: &str, y: &str, text: &str) {
        let _ = write!(
            self.text,
            "<text x=\"{x}\" y=\"{y}\">{}</text>",
            escape(text)
        );
    }
}

/// The ticks that fall on the axis (`s` places them at a fraction within [0, 1]), each with
/// its fraction and the length of its mark (longer when labelled).
pub(crate) fn visible_ticks<'a>(
    s: &'a Scaler,
    ticks: &'a [Tick],
) -> impl Iterator<Item = (f64, &'a Tick)> + 'a {
    ticks.iter().filter_map(move |t| {
        let f = s.frac(t.value)?;
        (-1e-9..=1.0 + 1e-9).contains(&f).then_some((f, t))
    })
}

/// Draw the visible ticks through `each` (fraction, mark length, label), then write the
/// grid, the marks and the labels (anchored by `anchor`).
fn axis_ticks(
    out: &mut String,
    s: &Scaler,
    ticks: &[Tick],
    anchor: &str,
    mut each: impl FnMut(&mut AxisParts, f64, f64, Option<&str>),
) {
    let mut parts = AxisParts::default();
    for (f, t) in visible_ticks(s, ticks) {
        let len = if t.label.is_some() { 5.0 } else { 3.0 };
        each(&mut parts, f, len, t.label.as_deref());
    }
    let AxisParts { grid, marks, text } = parts;
    if !grid.is_empty() {
        let _ = write!(out, "<path d=\"{grid}\" stroke=\"{GRID}\" fill=\"none\"/>");
    }
    if !marks.is_empty() {
        let _ = write!(out, "<path d=\"{marks}\" stroke=\"{AXIS}\" fill=\"none\"/>");
    }
    if !text.is_empty() {
        let _ = write!(out, "<g text-anchor=\"{anchor}\" fill=\"{INK}\">{text}</g>");
    }
}

/// A grey "no data" note in the middle of the plot area.
pub(crate) fn no_data(out: &mut String, p: &Plot) {
    let _ = write!(
        out,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\" fill=\"#999\">\
         no data</text>",
        c(p.x(0.5)),
        c(p.y(0.5) + 4.0)
    );
}

/// A clip path around `p` (grown by `grow` px) with an id derived from `content`, so that
/// several charts inlined in one page do not clash, and output stays deterministic.
pub(crate) fn clip(out: &mut String, p: &Plot, grow: f64, content: &str) -> String {
    let id = format!("fl-clip-{:016x}", fnv(content));
    let _ = write!(
        out,
        "<defs><clipPath id=\"{id}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>\
         </clipPath></defs>",
        c(p.left - grow),
        c(p.top - grow),
        c(p.w + 2.0 * grow),
        c(p.h + 2.0 * grow)
    );
    id
}

/// What a legend entry's swatch looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Swatch {
    Line,
    Points,
    LinePoints,
    Block,
}

pub(crate) struct LegendEntry {
    pub name: String,
    pub color: String,
    pub swatch: Swatch,
}

const LEGEND_ROW: f64 = 18.0;
const LEGEND_CHARS: usize = 32;
const SWATCH_W: f64 = 18.0;

/// Where the legend goes: to the right of the plot, or in rows below the chart.
pub(crate) enum LegendPlace {
    None,
    Right,
    Below { rows: Vec<Vec<usize>> },
}

/// Chooses the legend placement for a chart of `width` × `height` whose plot area would be
/// `plot_h` tall: to the right if it takes at most 30% of the width and fits the height,
/// otherwise in rows below. Returns the placement, the right margin it needs, and the extra
/// height below the chart.
pub(crate) fn legend_place(
    entries: &[LegendEntry],
    width: f64,
    plot_h: f64,
    left: f64,
) -> (LegendPlace, f64, f64) {
    if entries.is_empty() {
        return (LegendPlace::None, 20.0, 0.0);
    }
    let entry_w =
        |e: &LegendEntry| SWATCH_W + 6.0 + text_width(&truncate(&e.name, LEGEND_CHARS), FONT);
    let max_w = entries.iter().map(entry_w).fold(0.0, f64::max);
    let right = 16.0 + max_w + 8.0;
    if right <= width * 0.3 && entries.len() as f64 * LEGEND_ROW <= plot_h {
        return (LegendPlace::Right, right, 0.0);
    }
    let avail = (width - left - 20.0).max(100.0);
    let mut rows: Vec<Vec<usize>> = vec![vec![]];
    let mut used = 0.0;
    for (i, e) in entries.iter().enumerate() {
        let w = entry_w(e) + 16.0;
        let row = rows.last_mut().expect("one row");
        if !row.is_empty() && used + w > avail {
            rows.push(vec![i]);
            used = w;
        } else {
            row.push(i);
            used += w;
        }
    }
    let extra = rows.len() as f64 * LEGEND_ROW + 8.0;
    (LegendPlace::Below { rows }, 20.0, extra)
}

/// Draws the legend: at the right of `p`, or in rows starting at `below_y`.
pub(crate) fn legend(
    out: &mut String,
    entries: &[LegendEntry],
    place: &LegendPlace,
    p: &Plot,
    below_y: f64,
) {
    let mut positions = Vec::new();
    match place {
        LegendPlace::None => return,
        LegendPlace::Right => {
            for i in 0..entries.len() {
                positions.push((i, p.right() + 16.0, p.top + 6.0 + i as f64 * LEGEND_ROW));
            }
        }
        LegendPlace::Below { rows } => {
            for (r, row) in rows.iter().enumerate() {
                let mut x = p.left;
                let y = below_y + 10.0 + r as f64 * LEGEND_ROW;
                for &i in row {
                    positions.push((i, x, y));
                    x += SWATCH_W
                        + 6.0
                        + text_width(&truncate(&entries[i].name, LEGEND_CHARS), FONT)
                        + 16.0;
                }
            }
        }
    }
    out.push_str("<g fill=\"#333\">");
    for (i, x, y) in positions {
        let e = &entries[i];
        let color = escape(&e.color);
        let mid = c(x + SWATCH_W / 2.0);
        let yc = c(y);
        match e.swatch {
            Swatch::Block => {
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{color}\"/>",
                    c(x + 3.0),
                    c(y - 6.0)
                );
            }
            Swatch::Points => {
                let _ = write!(
                    out,
                    "<circle cx=\"{mid}\" cy=\"{yc}\" r=\"3\" fill=\"{color}\"/>"
                );
            }
            Swatch::Line | Swatch::LinePoints => {
                let _ = write!(
                    out,
                    "<path d=\"M{} {yc}h{SWATCH_W}\" stroke=\"{color}\" stroke-width=\"2.5\"/>",
                    c(x)
                );
                if e.swatch == Swatch::LinePoints {
                    let _ = write!(
                        out,
                        "<circle cx=\"{mid}\" cy=\"{yc}\" r=\"3\" fill=\"{color}\"/>"
                    );
                }
            }
        }
        let short = truncate(&e.name, LEGEND_CHARS);
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\">{}",
            c(x + SWATCH_W + 6.0),
            c(y + 4.0),
            escape(&short)
        );
        if short != e.name {
            let _ = write!(out, "<title>{}</title>", escape(&e.name));
        }
        out.push_str("</text>");
    }
    out.push_str("</g>");
}

/// Margins around a plot area with y tick labels `ylabels`, an optional rotated y label,
/// an optional title, an optional x label and `extra_bottom` px of x tick text.
pub(crate) struct Margins {
    pub left: f64,
    pub top: f64,
    pub bottom: f64,
    pub y_label_x: f64,
}

pub(crate) fn margins(
    ylabels: &[Tick],
    has_y_label: bool,
    has_title: bool,
    has_x_label: bool,
    x_tick_h: f64,
) -> Margins {
    let tick_w = ylabels
        .iter()
        .filter_map(|t| t.label.as_deref())
        .map(|l| text_width(l, FONT))
        .fold(0.0, f64::max);
    let y_label_x = 14.0;
    let left = (if has_y_label { 24.0 } else { 6.0 }) + tick_w + 10.0;
    Margins {
        left: left.max(36.0),
        top: if has_title { 34.0 } else { 12.0 },
        bottom: x_tick_h + if has_x_label { 22.0 } else { 4.0 },
        y_label_x,
    }
}

/// A chart's `size(width, height)` builder method (its `width` and `height` fields, in px).
macro_rules! size_setter {
    () => {
        /// Sets the size in px.
        pub fn size(mut self, width: u32, height: u32) -> Self {
            self.width = width;
            self.height = height;
            self
        }
    };
}
pub(crate) use size_setter;
