//! Occupancy heat strips: what each worker was busy with, over time.

use std::fmt::Write;

use crate::axis::{resolve, Axis, Scaler};
use crate::fmt::{c, escape, fmt_num};
use crate::svg::{self, text_width, truncate, Plot, FONT};

/// One heat strip per row (e.g. a worker thread) over time.
///
/// `cells[row][i]` is the value (e.g. the cost of the request being served) occupying the
/// row during `[t0 + i·dt, t0 + (i+1)·dt)`; `None` (or NaN) means idle, drawn light grey.
/// Values map to a colour ramp (viridis, quantised to 48 levels), linear or — with
/// `log_color` — logarithmic, explained by a colour legend at the right; on a log ramp
/// values ≤ 0 take the lowest colour. The x axis is time in seconds.
///
/// The SVG stays small: consecutive cells of the same colour are merged into one `<rect>`,
/// and when a row has more cells than the plot has pixel columns, the cells are first
/// binned per pixel column, a bin showing the largest value in it (idle only if all of its
/// cells are). Hovering a strip shows its row, time span and value(s).
#[derive(Clone, Debug, PartialEq)]
pub struct Occupancy {
    /// Drawn at the top; may be empty.
    pub title: String,
    /// Row names, top to bottom, drawn at the left.
    pub rows: Vec<String>,
    /// Start time of the first cell, in seconds.
    pub t0: f64,
    /// Duration of one cell, in seconds.
    pub dt: f64,
    /// `cells[row][i]`; rows may have different lengths (missing cells are idle).
    pub cells: Vec<Vec<Option<f64>>>,
    /// What the values are, shown over the colour legend (e.g. "request cost").
    pub value_label: String,
    /// Logarithmic colour ramp.
    pub log_color: bool,
    /// Width in px.
    pub width: u32,
    /// Height in px.
    pub height: u32,
}

const LEVELS: usize = 48;

/// Viridis, from dark purple (low) to yellow (high).
const RAMP: [(f64, f64, f64); 9] = [
    (68.0, 1.0, 84.0),
    (71.0, 45.0, 123.0),
    (59.0, 82.0, 139.0),
    (44.0, 114.0, 142.0),
    (33.0, 145.0, 140.0),
    (40.0, 174.0, 128.0),
    (94.0, 201.0, 98.0),
    (173.0, 220.0, 48.0),
    (253.0, 231.0, 37.0),
];

const IDLE: &str = "#f0f0f0";

/// The colour of quantised level `l` (0 ..= LEVELS - 1).
fn level_color(l: usize) -> String {
    let t = l as f64 / (LEVELS - 1) as f64 * (RAMP.len() - 1) as f64;
    let i = (t.floor() as usize).min(RAMP.len() - 2);
    let f = t - i as f64;
    let (a, b) = (RAMP[i], RAMP[i + 1]);
    let mix = |x: f64, y: f64| (x + (y - x) * f).round().clamp(0.0, 255.0) as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(a.0, b.0),
        mix(a.1, b.1),
        mix(a.2, b.2)
    )
}

/// A run of cells drawn as one rect.
struct Run {
    start: usize,
    end: usize,
    level: usize,
    vmin: f64,
    vmax: f64,
}

impl Occupancy {
    /// An occupancy chart with `value_label` "value", a linear ramp, 720 px wide and tall
    /// enough for 18 px per row.
    pub fn new(
        title: impl Into<String>,
        rows: impl IntoIterator<Item = impl Into<String>>,
        t0: f64,
        dt: f64,
        cells: Vec<Vec<Option<f64>>>,
    ) -> Self {
        let rows: Vec<String> = rows.into_iter().map(Into::into).collect();
        let n = rows.len().max(cells.len()) as u32;
        Occupancy {
            title: title.into(),
            rows,
            t0,
            dt,
            cells,
            value_label: "value".into(),
            log_color: false,
            width: 720,
            height: (90 + 18 * n).clamp(160, 4000),
        }
    }

    /// Sets what the values are.
    pub fn value_label(mut self, label: impl Into<String>) -> Self {
        self.value_label = label.into();
        self
    }

    /// Chooses a logarithmic (`true`) or linear colour ramp.
    pub fn log_color(mut self, log: bool) -> Self {
        self.log_color = log;
        self
    }

    crate::svg::size_setter!();

    /// The chart as a standalone `<svg>` element.
    pub fn to_svg(&self) -> String {
        let width = f64::from(self.width.max(160));
        let height = f64::from(self.height.max(100));
        let nrows = self.rows.len().max(self.cells.len());
        let n = self.cells.iter().map(Vec::len).max().unwrap_or(0);
        let dt_ok = self.dt.is_finite() && self.dt > 0.0 && self.t0.is_finite();
        let has_data = nrows > 0 && n > 0 && dt_ok;
        let (range, cs, cticks) = self.color_scale();
        let any_busy = self
            .cells
            .iter()
            .flatten()
            .any(|v| v.is_some_and(f64::is_finite));

        // Layout.
        let names: Vec<String> = (0..nrows)
            .map(|r| truncate(self.rows.get(r).map_or("", String::as_str), 24))
            .collect();
        let name_w = names
            .iter()
            .map(|s| text_width(s, FONT))
            .fold(0.0, f64::max);
        let top = if self.title.is_empty() { 12.0 } else { 34.0 };
        let left = (name_w + 16.0).max(40.0);
        let bottom = 44.0;
        let vlabel = truncate(&self.value_label, 28);
        let ctick_w = cticks
            .iter()
            .filter_map(|t| t.label.as_deref())
            .map(|l| text_width(l, FONT))
            .fold(text_width("idle", FONT), f64::max);
        let right =
            (16.0 + 14.0 + 6.0 + ctick_w + 12.0).max(16.0 + text_width(&vlabel, FONT) + 12.0);
        let p = Plot {
            left,
            top,
            w: (width - left - right).max(40.0),
            h: (height - top - bottom).max(20.0),
        };

        let mut out = String::new();
        svg::open(&mut out, width, height, &self.title);
        svg::title(&mut out, width, &self.title);

        // Time axis.
        let (t_lo, t_hi) = if has_data {
            (self.t0, self.t0 + n as f64 * self.dt)
        } else {
            (0.0, 1.0)
        };
        let time = Axis::linear("time (s)").range(t_lo, t_hi);
        let (ts, tticks) = resolve(&time, None, ((p.w / 90.0) as usize).clamp(2, 12), false);
        svg::x_axis(&mut out, &p, &ts, &tticks, &time.label);

        let rows = Rows::new(&p, nrows);
        rows.draw_backgrounds(&mut out, &p, &names);
        if has_data {
            let level = |v: f64| -> usize {
                let f = cs.frac(v).unwrap_or(0.0).clamp(0.0, 1.0);
                (f * (LEVELS - 1) as f64).round() as usize
            };
            self.draw_runs(&mut out, &p, &rows, n, &level);
        } else {
            svg::no_data(&mut out, &p);
        }

        self.color_legend(
            &mut out,
            &p,
            &cs,
            &cticks,
            &vlabel,
            any_busy && range.is_some(),
        );
        out.push_str("</svg>");
        out
    }

    /// The colour scale over the busy values (positive ones with a log ramp): their range,
    /// the scale and its ticks.
    fn color_scale(&self) -> (Option<(f64, f64)>, Scaler, Vec<crate::Tick>) {
        let mut range: Option<(f64, f64)> = None;
        for v in self
            .cells
            .iter()
            .flatten()
            .filter_map(|v| v.filter(|x| x.is_finite()))
        {
            if self.log_color && v <= 0.0 {
                continue;
            }
            range = Some(range.map_or((v, v), |(a, b)| (a.min(v), b.max(v))));
        }
        let color_axis = Axis {
            label: String::new(),
            scale: if self.log_color {
                crate::Scale::Log
            } else {
                crate::Scale::Linear
            },
            min: range.map(|r| r.0),
            max: range.map(|r| r.1),
        };
        let (cs, cticks) = resolve(&color_axis, range, 4, false);
        (range, cs, cticks)
    }

    /// Every row's busy runs, coloured by level, with their times and values on hover.
    fn draw_runs(
        &self,
        out: &mut String,
        p: &Plot,
        rows: &Rows,
        n: usize,
        level: &dyn Fn(f64) -> usize,
    ) {
        let cols = (p.w.floor() as usize).max(1);
        out.push_str("<g>");
        for r in 0..rows.count {
            let row = self.cells.get(r).map_or(&[][..], Vec::as_slice);
            let runs = self.runs(row, n, cols, level);
            let name = self.rows.get(r).map_or("", String::as_str);
            for run in runs {
                let x0 = p.x(run.start as f64 / n as f64);
                let x1 = p.x(run.end as f64 / n as f64);
                let value = if run.vmin == run.vmax {
                    fmt_num(run.vmin)
                } else {
                    format!("{}\u{2013}{}", fmt_num(run.vmin), fmt_num(run.vmax))
                };
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">\
                     <title>{}t {}\u{2013}{} s: {} {}</title></rect>",
                    c(x0),
                    c(p.top + r as f64 * rows.height),
                    c((x1 - x0).max(0.01)),
                    c((rows.height - rows.gap).max(0.5)),
                    level_color(run.level),
                    if name.is_empty() {
                        String::new()
                    } else {
                        format!("{} \u{b7} ", escape(name))
                    },
                    fmt_num(self.t0 + run.start as f64 * self.dt),
                    fmt_num(self.t0 + run.end as f64 * self.dt),
                    escape(&self.value_label),
                    value
                );
            }
        }
        out.push_str("</g>");
    }

    /// The runs of equal colour in `row`, binned to `cols` pixel columns if longer.
    fn runs(
        &self,
        row: &[Option<f64>],
        n: usize,
        cols: usize,
        level: &dyn Fn(f64) -> usize,
    ) -> Vec<Run> {
        // Units: (start cell, end cell, value).
        let units: Vec<(usize, usize, Option<f64>)> = if n > cols {
            (0..cols)
                .map(|b| {
                    let (s, e) = (b * n / cols, (b + 1) * n / cols);
                    let v = row
                        .get(s..e.min(row.len()))
                        .unwrap_or(&[])
                        .iter()
                        .filter_map(|v| v.filter(|x| x.is_finite()))
                        .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))));
                    (s, e, v)
                })
                .collect()
        } else {
            row.iter()
                .enumerate()
                .map(|(i, v)| (i, i + 1, v.filter(|x| x.is_finite())))
                .collect()
        };
        let mut runs: Vec<Run> = Vec::new();
        let mut prev_end = usize::MAX;
        for (s, e, v) in units {
            let Some(v) = v else { continue };
            let l = level(v);
            match runs.last_mut() {
                Some(run) if run.level == l && prev_end == s => {
                    run.end = e;
                    run.vmin = run.vmin.min(v);
                    run.vmax = run.vmax.max(v);
                }
                _ => runs.push(Run {
                    start: s,
                    end: e,
                    level: l,
                    vmin: v,
                    vmax: v,
                }),
            }
            prev_end = e;
        }
        runs
    }

    /// The colour bar with its ticks and label, and the idle swatch under it.
    fn color_legend(
        &self,
        out: &mut String,
        p: &Plot,
        cs: &Scaler,
        ticks: &[crate::Tick],
        vlabel: &str,
        show_bar: bool,
    ) {
        let x = p.right() + 16.0;
        let bar_top = p.top + 16.0;
        let bar_h = (p.h - 40.0).clamp(30.0, 160.0);
        let mut idle_y = bar_top;
        if show_bar {
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\" fill=\"#333\">{}</text>",
                c(x),
                c(p.top + 8.0),
                escape(vlabel)
            );
            let step = bar_h / LEVELS as f64;
            out.push_str("<g>");
            for l in 0..LEVELS {
                // Highest level at the top.
                let y = bar_top + (LEVELS - 1 - l) as f64 * step;
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"{}\" fill=\"{}\"/>",
                    c(x),
                    c(y),
                    c(step + 0.3),
                    level_color(l)
                );
            }
            out.push_str("</g><g fill=\"#333\">");
            let mut marks = String::new();
            for (f, t) in svg::visible_ticks(cs, ticks) {
                let Some(label) = &t.label else { continue };
                let y = bar_top + (1.0 - f) * bar_h;
                let _ = write!(marks, "M{} {}h4", c(x + 14.0), c(y));
                let _ = write!(
                    out,
                    "<text x=\"{}\" y=\"{}\">{}</text>",
                    c(x + 20.0),
                    c(y + 4.0),
                    escape(label)
                );
            }
            out.push_str("</g>");
            if !marks.is_empty() {
                let _ = write!(out, "<path d=\"{marks}\" stroke=\"#888\" fill=\"none\"/>");
            }
            idle_y = bar_top + bar_h + 10.0;
        }
        let _ = write!(
            out,
            "<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"10\" fill=\"{IDLE}\" stroke=\"#ccc\"/>\
             <text x=\"{}\" y=\"{}\" fill=\"#333\">idle</text>",
            c(x),
            c(idle_y),
            c(x + 20.0),
            c(idle_y + 9.0)
        );
    }
}

/// The rows' geometry: `count` strips of `height` px (a `gap` between them when there is
/// room), labelled in a font that fits, every `label_every`-th row.
struct Rows {
    count: usize,
    height: f64,
    gap: f64,
    font: f64,
    label_every: usize,
}

impl Rows {
    fn new(p: &Plot, count: usize) -> Rows {
        let height = if count > 0 { p.h / count as f64 } else { p.h };
        let font = (height * 0.85).clamp(7.0, FONT);
        Rows {
            count,
            height,
            gap: if height >= 6.0 { 1.0 } else { 0.0 },
            font,
            label_every: ((font * 1.15) / height).ceil().max(1.0) as usize,
        }
    }

    /// The idle background of every row, and the row labels (`names`, truncated).
    fn draw_backgrounds(&self, out: &mut String, p: &Plot, names: &[String]) {
        let _ = write!(out, "<g fill=\"{IDLE}\">");
        for r in 0..self.count {
            let _ = write!(
                out,
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
                c(p.left),
                c(p.top + r as f64 * self.height),
                c(p.w),
                c((self.height - self.gap).max(0.5))
            );
        }
        out.push_str("</g>");
        let _ = write!(
            out,
            "<g text-anchor=\"end\" fill=\"#333\" font-size=\"{}\">",
            c(self.font)
        );
        for (r, name) in names.iter().enumerate() {
            if r % self.label_every != 0 || name.is_empty() {
                continue;
            }
            let _ = write!(
                out,
                "<text x=\"{}\" y=\"{}\">{}</text>",
                c(p.left - 6.0),
                c(p.top + (r as f64 + 0.5) * self.height + self.font * 0.35),
                escape(name)
            );
        }
        out.push_str("</g>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ramp_ends_and_levels() {
        assert_eq!(level_color(0), "#440154");
        assert_eq!(level_color(LEVELS - 1), "#fde725");
        let distinct: std::collections::BTreeSet<String> = (0..LEVELS).map(level_color).collect();
        assert_eq!(distinct.len(), LEVELS);
    }
}
