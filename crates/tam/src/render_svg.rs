//! Thread Architecture Diagrams (§2.2, Table 1) as standalone SVG, laid out in pure Rust.
//!
//! Notation, as in the paper: a stage is a box with its name and its resource boxes
//! (`CPU`, `I/O`, `NET`, `LOCK`; in brackets and dashed when usage is unknown); a bounded
//! stage has a queue in front of it, with a plug symbol when the scheduler is pluggable;
//! a stop sign marks an ordering constraint; solid arrows are the downstream relation,
//! dashed arrows are blocking (pointing to the blocked stage); dashed rectangles are node
//! boundaries. Findings of the analysis can be highlighted with numbered badges.

use crate::analysis::{Problem, ProblemKind};
use crate::layout::{layout, Band, Layout, Waypoint};
use crate::model::{Model, Resource, Scheduling, Stage, Usage};
use crate::style::{kind_color, kind_fill, text_width, Marks};
use crate::DrawOptions;
use fairlane_plot::escape as esc;
use std::fmt::Write;

const FONT: &str = "Helvetica, Arial, sans-serif";
const MARGIN: f64 = 24.0;
const QUEUE_W: f64 = 30.0;
const BOX_H: f64 = 50.0;
const GAP_X: f64 = 64.0;
const ROW_PITCH: f64 = BOX_H + 52.0;
const BAND_PAD_X: f64 = 22.0;
const BAND_LABEL_H: f64 = 24.0;
/// From the top of a band to the top of the boxes of its first row.
const STAGE_TOP: f64 = BAND_LABEL_H + 22.0;
const BAND_PAD_BOTTOM: f64 = 22.0;
const BAND_GAP: f64 = 26.0;
const NAME_SIZE: f64 = 13.0;
const CHIP_SIZE: f64 = 10.0;
const CHIP_H: f64 = 15.0;
const CHIP_GAP: f64 = 4.0;

/// Pixel geometry of one stage: `x` is the left of its queue slot, `y` the top of its box.
struct Placed {
    x: f64,
    y: f64,
    box_w: f64,
}

impl Placed {
    fn box_x(&self) -> f64 {
        self.x + QUEUE_W
    }
    fn mid(&self) -> f64 {
        self.y + BOX_H / 2.0
    }
    fn right(&self) -> f64 {
        self.box_x() + self.box_w
    }
}

fn chip_label(r: Resource, usage: Usage) -> String {
    match usage {
        Usage::Unknown => format!("[{}]", r.label()),
        _ => r.label().to_string(),
    }
}

fn chip_w(label: &str) -> f64 {
    text_width(label, CHIP_SIZE) + 10.0
}

fn stage_box_w(stage: &Stage) -> f64 {
    let chips: f64 = stage
        .resources
        .used()
        .iter()
        .map(|&r| chip_w(&chip_label(r, stage.resources.get(r))) + CHIP_GAP)
        .sum();
    (text_width(&stage.name, NAME_SIZE) + 22.0)
        .max(chips + 12.0)
        .max(92.0)
        .ceil()
}

fn n(v: f64) -> String {
    // One decimal, no "-0.0": byte-identical output across runs and platforms.
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// Renders `model` as a standalone SVG document. Deterministic: the same model and
/// options give byte-identical output.
pub fn render_svg(model: &Model, options: &DrawOptions) -> String {
    let lay = layout(model);
    let findings: &[Problem] = options.highlight.as_ref().map_or(&[], |r| &r.problems);

    // Column x positions: each column as wide as its widest stage.
    let mut col_w = vec![0f64; lay.columns];
    for (i, s) in model.stages.iter().enumerate() {
        col_w[lay.col[i]] = col_w[lay.col[i]].max(stage_box_w(s));
    }
    let mut col_x = vec![MARGIN + BAND_PAD_X; lay.columns];
    for c in 1..lay.columns {
        col_x[c] = col_x[c - 1] + QUEUE_W + col_w[c - 1] + GAP_X;
    }
    let title_h = if model.source.is_some() { 58.0 } else { 42.0 };
    let mut band_y = Vec::new();
    let mut y = title_h;
    for band in &lay.bands {
        band_y.push(y);
        y += BAND_LABEL_H + band.rows as f64 * ROW_PITCH + BAND_PAD_BOTTOM + BAND_GAP;
    }
    let diagram_bottom = y - BAND_GAP;
    let placed: Vec<Placed> = (0..model.stages.len())
        .map(|i| Placed {
            x: col_x[lay.col[i]],
            y: band_y[lay.band_of[i]] + STAGE_TOP + lay.slot[i] * ROW_PITCH,
            box_w: col_w[lay.col[i]],
        })
        .collect();
    let diagram_w = lay.columns.checked_sub(1).map_or(2.0 * MARGIN, |last| {
        col_x[last] + QUEUE_W + col_w[last] + BAND_PAD_X + MARGIN
    });

    let findings_lines: Vec<String> = findings.iter().map(finding_line).collect();
    let findings_w = findings_lines
        .iter()
        .map(|l| text_width(l, 12.0) + 60.0)
        .fold(0.0, f64::max);
    let title_w = text_width(&model.name, 17.0)
        .max(model.source.as_deref().map_or(0.0, |s| text_width(s, 11.0)))
        + 2.0 * MARGIN;
    let width = diagram_w.max(findings_w).max(title_w).max(560.0).ceil();

    let mut body = String::new();
    draw_title(&mut body, model);
    for (b, band) in lay.bands.iter().enumerate() {
        draw_band(&mut body, band, band_y[b], &col_x, &col_w);
    }
    let grid = Grid {
        col_x: &col_x,
        col_w: &col_w,
        band_y: &band_y,
    };
    let marks = Marks::new(model, findings);
    draw_edges(&mut body, model, &lay, &placed, &grid, &marks);
    for (i, stage) in model.stages.iter().enumerate() {
        draw_stage(&mut body, stage, &placed[i], &marks, i);
    }
    // Host labels last, with a halo, so that edges crossing a boundary do not hide them.
    for (b, band) in lay.bands.iter().enumerate() {
        let _ = writeln!(
            body,
            r##"<text class="host-label" x="{}" y="{}" font-size="12" font-style="italic" fill="#495057" stroke="#f8f9fa" stroke-width="4" paint-order="stroke">{}</text>"##,
            n(col_x[band.min_col] - BAND_PAD_X + 10.0),
            n(band_y[b] + 17.0),
            esc(&model.host_label(band.host))
        );
    }
    draw_badges(&mut body, &placed, &marks);
    let mut y = diagram_bottom + 18.0;
    if !findings.is_empty() {
        y = draw_findings(&mut body, findings, &findings_lines, y);
    }
    y = draw_legend(&mut body, y, width);
    let height = (y + MARGIN).ceil();

    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="{FONT}">"##,
        w = n(width),
        h = n(height)
    );
    let _ = writeln!(
        out,
        "<title>{}</title>",
        esc(&format!("Thread Architecture Diagram: {}", model.name))
    );
    out += DEFS;
    let _ = writeln!(
        out,
        r##"<rect x="0" y="0" width="{}" height="{}" fill="#ffffff"/>"##,
        n(width),
        n(height)
    );
    out += &body;
    out += "</svg>\n";
    out
}

const DEFS: &str = r##"<defs>
<marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#333333"/></marker>
<marker id="arrow-blocking" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#1971c2"/></marker>
</defs>
"##;

fn draw_title(out: &mut String, model: &Model) {
    let _ = writeln!(
        out,
        r##"<text x="{MARGIN}" y="28" font-size="17" font-weight="bold" fill="#111111">{}</text>"##,
        esc(&model.name)
    );
    if let Some(source) = &model.source {
        let _ = writeln!(
            out,
            r##"<text x="{MARGIN}" y="45" font-size="11" fill="#666666">{}</text>"##,
            esc(source)
        );
    }
}

fn draw_band(out: &mut String, band: &Band, y: f64, col_x: &[f64], col_w: &[f64]) {
    let x0 = col_x[band.min_col] - BAND_PAD_X;
    let x1 = col_x[band.max_col] + QUEUE_W + col_w[band.max_col] + BAND_PAD_X;
    let h = BAND_LABEL_H + band.rows as f64 * ROW_PITCH + BAND_PAD_BOTTOM;
    let _ = writeln!(
        out,
        r##"<g class="host" data-host="{}"><rect x="{}" y="{}" width="{}" height="{}" rx="10" fill="#f8f9fa" stroke="#868e96" stroke-width="1.3" stroke-dasharray="8 5"/></g>"##,
        band.host,
        n(x0),
        n(y),
        n(x1 - x0),
        n(h)
    );
}

/// Stage `i`: its queue, plug and stop sign, box, name and resource boxes.
fn draw_stage(out: &mut String, stage: &Stage, at: &Placed, marks: &Marks, i: usize) {
    let qx = at.x;
    let mid = at.mid();
    let _ = writeln!(
        out,
        r##"<g class="stage" data-stage="{}" data-host="{}">"##,
        esc(&stage.name),
        stage.host
    );
    if stage.scheduling.has_queue() {
        // The queue: a box of slots in front of the stage.
        let _ = writeln!(
            out,
            r##"<rect x="{}" y="{}" width="24" height="22" fill="#ffffff" stroke="#333333" stroke-width="1.2"/>"##,
            n(qx + 2.0),
            n(mid - 11.0)
        );
        for dx in [8.0, 14.0, 20.0] {
            let _ = writeln!(
                out,
                r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#333333" stroke-width="1.2"/>"##,
                n(mid - 11.0),
                n(mid + 11.0),
                x = n(qx + dx)
            );
        }
        let _ = writeln!(
            out,
            r##"<line x1="{}" y1="{m}" x2="{}" y2="{m}" stroke="#333333" stroke-width="1.2"/>"##,
            n(qx + 26.0),
            n(at.box_x()),
            m = n(mid)
        );
    }
    if stage.scheduling == Scheduling::Pluggable {
        draw_plug(out, qx + 14.0, mid - 11.0);
    }
    if stage.ordering {
        draw_stop(out, qx + 14.0, mid + 20.0);
    }
    let (stroke, sw) = match marks.first(i) {
        Some(p) => (kind_color(p.kind), "2.6"),
        None => ("#222222", "1.4"),
    };
    let _ = writeln!(
        out,
        r##"<rect x="{}" y="{}" width="{}" height="{BOX_H}" rx="6" fill="#ffffff" stroke="{stroke}" stroke-width="{sw}"/>"##,
        n(at.box_x()),
        n(at.y),
        n(at.box_w)
    );
    let _ = writeln!(
        out,
        r##"<text x="{}" y="{}" font-size="{NAME_SIZE}" font-weight="bold" text-anchor="middle" fill="#111111">{}</text>"##,
        n(at.box_x() + at.box_w / 2.0),
        // Centred when there are no resource boxes below the name.
        n(at.y + if stage.resources.any() { 19.0 } else { 30.0 }),
        esc(&stage.name)
    );
    // Resource boxes, centred under the name.
    let used = stage.resources.used();
    let labels: Vec<String> = used
        .iter()
        .map(|&r| chip_label(r, stage.resources.get(r)))
        .collect();
    let total: f64 = labels.iter().map(|l| chip_w(l) + CHIP_GAP).sum::<f64>() - CHIP_GAP;
    let mut x = at.box_x() + (at.box_w - total) / 2.0;
    for (r, label) in used.iter().zip(&labels) {
        let w = chip_w(label);
        let unknown = stage.resources.get(*r) == Usage::Unknown;
        let fill = marks
            .resource(i, *r)
            .map_or("#f1f3f5", |p| kind_fill(p.kind));
        let dash = if unknown {
            r##" stroke-dasharray="3 2""##
        } else {
            ""
        };
        let _ = writeln!(
            out,
            r##"<rect class="resource" data-resource="{}" x="{}" y="{}" width="{}" height="{CHIP_H}" rx="2" fill="{fill}" stroke="#495057" stroke-width="1"{dash}/>"##,
            r.key(),
            n(x),
            n(at.y + 27.0),
            n(w)
        );
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="{CHIP_SIZE}" text-anchor="middle" fill="#212529">{}</text>"##,
            n(x + w / 2.0),
            n(at.y + 38.0),
            esc(label)
        );
        x += w + CHIP_GAP;
    }
    out.push_str("</g>\n");
}

/// A plug: a cord from the queue up to a small body with two prongs.
fn draw_plug(out: &mut String, cx: f64, top: f64) {
    let _ = writeln!(
        out,
        r##"<g class="plug"><line x1="{cx}" y1="{}" x2="{cx}" y2="{}" stroke="#333333" stroke-width="1.4"/><rect x="{}" y="{}" width="12" height="8" rx="2" fill="#333333"/><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333333" stroke-width="1.6"/><line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#333333" stroke-width="1.6"/></g>"##,
        n(top),
        n(top - 6.0),
        n(cx - 6.0),
        n(top - 14.0),
        n(cx - 3.0),
        n(top - 14.0),
        n(cx - 3.0),
        n(top - 19.0),
        n(cx + 3.0),
        n(top - 14.0),
        n(cx + 3.0),
        n(top - 19.0),
        cx = n(cx)
    );
}

/// A stop sign (red octagon with a white bar): the ordering constraint.
fn draw_stop(out: &mut String, cx: f64, cy: f64) {
    let r = 8.0;
    let points: Vec<String> = (0..8)
        .map(|k| {
            let a = std::f64::consts::PI / 8.0 + k as f64 * std::f64::consts::PI / 4.0;
            format!("{},{}", n(cx + r * a.cos()), n(cy + r * a.sin()))
        })
        .collect();
    let _ = writeln!(
        out,
        r##"<g class="stop"><polygon points="{}" fill="#e03131" stroke="#ffffff" stroke-width="1"/><rect x="{}" y="{}" width="9" height="3" fill="#ffffff"/></g>"##,
        points.join(" "),
        n(cx - 4.5),
        n(cy - 1.5)
    );
}

/// A point as `x,y` for path data.
fn pt((x, y): (f64, f64)) -> String {
    format!("{},{}", n(x), n(y))
}

/// A cubic Bézier path from `p0` to `p1` with control points `c1`, `c2`.
fn bezier(p0: (f64, f64), c1: (f64, f64), c2: (f64, f64), p1: (f64, f64)) -> String {
    format!("M{} C{} {} {}", pt(p0), pt(c1), pt(c2), pt(p1))
}

/// Column and band positions, for the waypoints of long edges.
struct Grid<'a> {
    col_x: &'a [f64],
    col_w: &'a [f64],
    band_y: &'a [f64],
}

fn draw_edges(
    out: &mut String,
    model: &Model,
    lay: &Layout,
    placed: &[Placed],
    grid: &Grid,
    marks: &Marks,
) {
    let index = model.names();
    let mut arc = 0usize;
    for (u, stage) in model.stages.iter().enumerate() {
        for target in &stage.downstream {
            let Some(&v) = index.get(target.as_str()) else {
                continue;
            };
            let (a, b) = (&placed[u], &placed[v]);
            let end = (
                if model.stages[v].scheduling.has_queue() {
                    b.x + 2.0
                } else {
                    b.box_x()
                },
                b.mid(),
            );
            let forward = lay.col[v] > lay.col[u] && !lay.back_edges.contains(&(u, v));
            let d = if forward {
                let route = lay.routes.get(&(u, v)).map_or(&[][..], |r| &r[..]);
                forward_path((a.right(), a.mid()), route, grid, end)
            } else {
                // An edge closing a cycle: arch over the boxes, entering the queue from the left.
                let lift = 44.0 + 10.0 * (arc % 3) as f64;
                arc += 1;
                let start = (a.box_x() + a.box_w * 0.7, a.y);
                let top = start.1.min(b.y) - lift;
                bezier(start, (start.0, top), (end.0 - 60.0, top), end)
            };
            let _ = writeln!(
                out,
                r##"<path class="downstream" d="{d}" fill="none" stroke="#333333" stroke-width="1.4" marker-end="url(#arrow)"><title>{}</title></path>"##,
                esc(&format!("{} → {}", stage.name, target))
            );
        }
    }
    for (u, stage) in model.stages.iter().enumerate() {
        let (color, width) = if marks.blocked(u) {
            (kind_color(ProblemKind::Blocking), "2")
        } else {
            ("#1971c2", "1.4")
        };
        for (k, target) in stage.blocks_on.iter().enumerate() {
            let Some(&v) = index.get(target.as_str()) else {
                continue;
            };
            let d = blocking_path(&placed[v], &placed[u], k);
            let _ = writeln!(
                out,
                r##"<path class="blocking" d="{d}" fill="none" stroke="{color}" stroke-width="{width}" stroke-dasharray="6 4" marker-end="url(#arrow-blocking)"><title>{}</title></path>"##,
                esc(&format!("{} blocks on {}", stage.name, target))
            );
        }
    }
}

/// A forward edge from `start` to `end` through the waypoints of a long edge: straight
/// across each reserved slot, S-curves between columns.
fn forward_path(start: (f64, f64), route: &[Waypoint], grid: &Grid, end: (f64, f64)) -> String {
    let mut points = vec![start];
    for w in route {
        let y = grid.band_y[w.band] + STAGE_TOP + w.slot * ROW_PITCH + BOX_H / 2.0;
        points.push((grid.col_x[w.col], y));
        points.push((grid.col_x[w.col] + QUEUE_W + grid.col_w[w.col], y));
    }
    points.push(end);
    let mut d = format!("M{}", pt(start));
    for (k, pair) in points.windows(2).enumerate() {
        let (p, q) = (pair[0], pair[1]);
        if k % 2 == 1 {
            d += &format!(" L{}", pt(q));
        } else {
            let dx = (q.0 - p.0) / 2.0;
            d += &format!(
                " C{} {} {}",
                pt((p.0 + dx, p.1)),
                pt((q.0 - dx, q.1)),
                pt(q)
            );
        }
    }
    d
}

/// The `k`-th dashed arrow of a blocked stage `b`, from the stage `a` it waits on (§2.2).
fn blocking_path(a: &Placed, b: &Placed, k: usize) -> String {
    if b.y + BOX_H + 24.0 < a.y {
        // The blocked stage is higher up: leave from the top, arrive at its bottom.
        let (p0, p1) = ((a.box_x() + 14.0, a.y), (b.right() - 14.0, b.y + BOX_H));
        let bend = (p0.1 - p1.1) / 2.0;
        bezier(p0, (p0.0, p0.1 - bend), (p1.0, p1.1 + bend), p1)
    } else {
        // Otherwise dip under both boxes and arrive at the blocked stage's bottom.
        let (p0, p1) = (
            (a.box_x() + 14.0, a.y + BOX_H),
            (b.right() - 14.0, b.y + BOX_H),
        );
        let bottom = p0.1.max(p1.1) + 30.0 + 9.0 * k as f64;
        bezier(p0, (p0.0, bottom), (p1.0, bottom), p1)
    }
}

fn draw_badges(out: &mut String, placed: &[Placed], marks: &Marks) {
    for (i, at) in placed.iter().enumerate() {
        for (k, (number, p)) in marks.on(i).enumerate() {
            draw_badge(
                out,
                at.right() - 6.0 - 19.0 * k as f64,
                at.y - 1.0,
                number + 1,
                p.kind,
            );
        }
    }
}

fn draw_badge(out: &mut String, cx: f64, cy: f64, number: usize, kind: ProblemKind) {
    let _ = writeln!(
        out,
        r##"<g class="badge"><circle cx="{}" cy="{}" r="8.5" fill="{}" stroke="#ffffff" stroke-width="1.2"/><text x="{}" y="{}" font-size="10" font-weight="bold" text-anchor="middle" fill="#ffffff">{number}</text></g>"##,
        n(cx),
        n(cy),
        kind_color(kind),
        n(cx),
        n(cy + 3.5)
    );
}

fn finding_line(p: &Problem) -> String {
    let res = crate::analysis::resource_suffix(p, Resource::label);
    format!(
        "{} ({}): {}{}",
        p.kind.title(),
        p.kind.section(),
        p.stages.join(", "),
        res
    )
}

fn draw_findings(out: &mut String, findings: &[Problem], lines: &[String], y: f64) -> f64 {
    let mut y = y + 6.0;
    let _ = writeln!(
        out,
        r##"<text x="{MARGIN}" y="{}" font-size="13" font-weight="bold" fill="#111111">Problems found ({})</text>"##,
        n(y),
        findings.len()
    );
    y += 10.0;
    for (i, (p, line)) in findings.iter().zip(lines).enumerate() {
        y += 20.0;
        draw_badge(out, MARGIN + 9.0, y - 4.0, i + 1, p.kind);
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}" font-size="12" fill="{}">{}</text>"##,
            n(MARGIN + 24.0),
            n(y),
            kind_color(p.kind),
            esc(line)
        );
    }
    y + 16.0
}

/// The notation of Table 1, drawn with the same symbols as the diagram.
fn draw_legend(out: &mut String, y: f64, width: f64) -> f64 {
    let items = [
        "queue (scheduling point)",
        "pluggable scheduler",
        "ordering constraint",
        "resource used",
        "unknown usage",
        "downstream",
        "blocks on (to the blocked stage)",
        "node boundary",
    ];
    let mut x = MARGIN;
    let mut y = y + 14.0;
    let _ = writeln!(out, r##"<g class="legend" font-size="11" fill="#495057">"##);
    for (k, label) in items.iter().enumerate() {
        let w = 44.0 + text_width(label, 11.0) + 18.0;
        if x + w > width - MARGIN && x > MARGIN {
            x = MARGIN;
            y += 30.0;
        }
        let cy = y;
        match k {
            0 => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="24" height="16" fill="#ffffff" stroke="#333333"/><line x1="{a}" y1="{}" x2="{a}" y2="{}" stroke="#333333"/><line x1="{b}" y1="{}" x2="{b}" y2="{}" stroke="#333333"/>"##,
                    n(x + 6.0),
                    n(cy - 8.0),
                    n(cy - 8.0),
                    n(cy + 8.0),
                    n(cy - 8.0),
                    n(cy + 8.0),
                    a = n(x + 14.0),
                    b = n(x + 22.0)
                );
            }
            1 => draw_plug(out, x + 18.0, cy + 9.0),
            2 => draw_stop(out, x + 18.0, cy),
            3 => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="30" height="15" rx="2" fill="#f1f3f5" stroke="#495057"/><text x="{}" y="{}" font-size="10" text-anchor="middle" fill="#212529">CPU</text>"##,
                    n(x + 3.0),
                    n(cy - 7.5),
                    n(x + 18.0),
                    n(cy + 3.5)
                );
            }
            4 => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="34" height="15" rx="2" fill="#f1f3f5" stroke="#495057" stroke-dasharray="3 2"/><text x="{}" y="{}" font-size="10" text-anchor="middle" fill="#212529">[I/O]</text>"##,
                    n(x + 1.0),
                    n(cy - 7.5),
                    n(x + 18.0),
                    n(cy + 3.5)
                );
            }
            5 => {
                let _ = writeln!(
                    out,
                    r##"<path d="M{},{c} L{},{c}" stroke="#333333" stroke-width="1.4" marker-end="url(#arrow)"/>"##,
                    n(x + 2.0),
                    n(x + 36.0),
                    c = n(cy)
                );
            }
            6 => {
                let _ = writeln!(
                    out,
                    r##"<path d="M{},{c} L{},{c}" stroke="#1971c2" stroke-width="1.4" stroke-dasharray="6 4" marker-end="url(#arrow-blocking)"/>"##,
                    n(x + 2.0),
                    n(x + 36.0),
                    c = n(cy)
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    r##"<rect x="{}" y="{}" width="34" height="18" rx="5" fill="#f8f9fa" stroke="#868e96" stroke-dasharray="8 5"/>"##,
                    n(x + 1.0),
                    n(cy - 9.0)
                );
            }
        }
        let _ = writeln!(
            out,
            r##"<text x="{}" y="{}">{}</text>"##,
            n(x + 44.0),
            n(cy + 4.0),
            esc(label)
        );
        x += w;
    }
    out.push_str("</g>\n");
    y + 14.0
}
