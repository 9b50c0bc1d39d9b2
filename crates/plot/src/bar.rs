//! Grouped bar charts.

use std::fmt::Write;

use crate::axis::{extent, resolve, Axis, Scale, Scaler};
use crate::fmt::{c, escape, fmt_sig};
use crate::svg::{self, palette, text_width, truncate, LegendEntry, Plot, Swatch, FONT};

/// Grouped bars: along x one slot per category, and in each slot one bar per group.
///
/// `groups[g].1[k]` is group g's value for category k; missing, NaN or infinite values
/// (and non-positive ones on a log axis) leave a gap. On a linear axis bars start at 0 (the
/// axis always includes 0); on a log axis they rise from the bottom of the axis. Hovering a
/// bar shows its group, category and value.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// Drawn at the top; may be empty.
    pub title: String,
    /// One slot along x per category.
    pub categories: Vec<String>,
    /// (name, one value per category); each group has a palette colour and a legend entry
    /// (unless its name is empty).
    pub groups: Vec<(String, Vec<f64>)>,
    /// The value axis.
    pub y: Axis,
    /// Width in px.
    pub width: u32,
    /// Height in px, not counting a legend that went below the chart.
    pub height: u32,
}

impl BarChart {
    /// A 640 × 360 chart with these categories and no groups yet.
    pub fn new(
        title: impl Into<String>,
        categories: impl IntoIterator<Item = impl Into<String>>,
        y: Axis,
    ) -> Self {
        BarChart {
            title: title.into(),
            categories: categories.into_iter().map(Into::into).collect(),
            groups: Vec::new(),
            y,
            width: 640,
            height: 360,
        }
    }

    /// Adds a group: its name and one value per category.
    pub fn group(mut self, name: impl Into<String>, values: Vec<f64>) -> Self {
        self.groups.push((name.into(), values));
        self
    }

    crate::svg::size_setter!();

    /// The chart as a standalone `<svg>` element.
    pub fn to_svg(&self) -> String {
        let width = f64::from(self.width.max(120));
        let height = f64::from(self.height.max(100));
        let nc = self.categories.len();
        let values = || {
            self.groups
                .iter()
                .flat_map(|(_, v)| v.iter().take(nc).copied())
        };
        let mut yr = extent(&self.y, values());
        if self.y.scale == Scale::Linear {
            yr = yr.map(|(a, b)| (a.min(0.0), b.max(0.0)));
        }
        let has_data = yr.is_some();

        let est_h = height - 90.0;
        let (ys, yticks) = resolve(&self.y, yr, ((est_h / 45.0) as usize).clamp(2, 10), true);
        // Category labels: horizontal if they fit their slot, else rotated.
        let labels: Vec<String> = self.categories.iter().map(|s| truncate(s, 30)).collect();
        let label_w = labels
            .iter()
            .map(|l| text_width(l, FONT))
            .fold(0.0, f64::max);
        let entries: Vec<LegendEntry> = self
            .groups
            .iter()
            .enumerate()
            .filter(|(_, g)| !g.0.is_empty())
            .map(|(i, g)| LegendEntry {
                name: g.0.clone(),
                color: palette(i).to_string(),
                swatch: Swatch::Block,
            })
            .collect();
        let guess_w = width - 80.0;
        let rotate = nc > 0 && label_w > guess_w / nc as f64 - 6.0;
        let tick_h = if rotate { label_w * 0.65 + 16.0 } else { 22.0 };
        let m = svg::margins(
            &yticks,
            !self.y.label.is_empty(),
            !self.title.is_empty(),
            false,
            tick_h,
        );
        // Rotated labels reach down-left of their slot's centre: keep the first one inside.
        let mut left = m.left;
        if rotate {
            let slot_guess = (width - m.left - 20.0) / nc as f64;
            left = left.max(label_w * 0.77 - slot_guess / 2.0 + 6.0);
        }
        let plot_h = (height - m.top - m.bottom).max(40.0);
        let (place, right, extra) = svg::legend_place(&entries, width, plot_h, left);
        let p = Plot {
            left,
            top: m.top,
            w: (width - left - right).max(40.0),
            h: plot_h,
        };

        let mut out = String::new();
        svg::open(&mut out, width, height + extra, &self.title);
        svg::title(&mut out, width, &self.title);
        svg::y_axis(
            &mut out,
            &p,
            &ys,
            &yticks,
            &self.y.label,
            m.y_label_x + left - m.left,
        );
        self.draw_categories(&mut out, &p, &labels, rotate);
        if has_data && nc > 0 && !self.groups.is_empty() {
            self.draw_bars(&mut out, &p, &ys);
        } else {
            svg::no_data(&mut out, &p);
        }
        svg::legend(&mut out, &entries, &place, &p, height);
        out.push_str("</svg>");
        out
    }

    /// The width of one category's slot.
    fn slot(&self, p: &Plot) -> f64 {
        let nc = self.categories.len();
        if nc > 0 {
            p.w / nc as f64
        } else {
            p.w
        }
    }

    /// The x axis line and the category labels (`labels`, truncated), rotated if asked.
    fn draw_categories(&self, out: &mut String, p: &Plot, labels: &[String], rotate: bool) {
        svg::x_axis_line(out, p);
        if self.categories.is_empty() {
            return;
        }
        let slot = self.slot(p);
        out.push_str(if rotate {
            "<g text-anchor=\"end\" fill=\"#333\">"
        } else {
            "<g text-anchor=\"middle\" fill=\"#333\">"
        });
        for (k, (l, full)) in labels.iter().zip(&self.categories).enumerate() {
            let x = p.left + (k as f64 + 0.5) * slot;
            let y = p.bottom() + 16.0;
            if rotate {
                let (xs, ys) = (c(x + 4.0), c(y - 4.0));
                let _ = write!(
                    out,
                    "<text x=\"{xs}\" y=\"{ys}\" transform=\"rotate(-40 {xs} {ys})\">{}",
                    escape(l)
                );
            } else {
                let _ = write!(out, "<text x=\"{}\" y=\"{}\">{}", c(x), c(y), escape(l));
            }
            if l != full {
                let _ = write!(out, "<title>{}</title>", escape(full));
            }
            out.push_str("</text>");
        }
        out.push_str("</g>");
    }

    /// One bar per group and category with a value, rising from 0 (or the bottom of a log
    /// axis), with its value on hover.
    fn draw_bars(&self, out: &mut String, p: &Plot, ys: &Scaler) {
        let nc = self.categories.len();
        let slot = self.slot(p);
        let ng = self.groups.len() as f64;
        let bar_w = slot * 0.8 / ng;
        let base_y = if ys.log {
            p.bottom()
        } else {
            ys.frac(0.0).map_or(p.bottom(), |f| p.y(f.clamp(0.0, 1.0)))
        };
        for (g, (name, vals)) in self.groups.iter().enumerate() {
            let _ = write!(out, "<g fill=\"{}\">", palette(g));
            for (k, &v) in vals.iter().take(nc).enumerate() {
                let Some(f) = ys.frac(v) else { continue };
                let top = p.y(f.clamp(0.0, 1.0));
                let x = p.left + k as f64 * slot + slot * 0.1 + g as f64 * bar_w;
                let _ = write!(
                    out,
                    "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}{}: {}</title></rect>",
                    c(x),
                    c(top.min(base_y)),
                    c((bar_w - if bar_w > 4.0 { 1.0 } else { 0.0 }).max(0.5)),
                    c((top - base_y).abs()),
                    if name.is_empty() {
                        String::new()
                    } else {
                        format!("{} \u{b7} ", escape(name))
                    },
                    escape(&self.categories[k]),
                    fmt_sig(v, 4)
                );
            }
            out.push_str("</g>");
        }
        if !ys.log && ys.lo < 0.0 {
            let _ = write!(
                out,
                "<path d=\"M{} {y}H{}\" stroke=\"#555\" fill=\"none\"/>",
                c(p.left),
                c(p.right()),
                y = c(base_y)
            );
        }
    }
}
