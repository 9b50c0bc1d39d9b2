//! Thread Architecture Diagrams (§2.2, Table 1) as Graphviz DOT, for users who have `dot`
//! or want to restyle the diagram. Hosts are clusters (node boundaries), stages are
//! HTML-like labels with a queue cell (`|||`, plus `plug` when pluggable), a `STOP` cell
//! for ordering constraints and one cell per resource (`[I/O]` when unknown); blocking
//! edges are dashed and point to the blocked stage.

use crate::analysis::Problem;
use crate::model::{Model, Resource, Scheduling, Usage};
use crate::style::{kind_color, kind_fill, Marks};
use crate::DrawOptions;
use fairlane_plot::escape as esc;
use std::fmt::Write;

fn quoted(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    format!("\"{escaped}\"")
}

/// Renders `model` as a DOT digraph. Deterministic.
pub fn render_dot(model: &Model, options: &DrawOptions) -> String {
    let findings = options
        .highlight
        .as_ref()
        .map_or(&[][..], |r| &r.problems[..]);
    let marks = Marks::new(model, findings);
    let mut out = String::new();
    let mut label = format!("Thread Architecture Diagram: {}", model.name);
    if let Some(source) = &model.source {
        label += &format!("\n{source}");
    }
    let _ = writeln!(out, "digraph {} {{", quoted(&model.name));
    let _ = writeln!(out, "  graph [rankdir=LR, fontname=\"Helvetica\", labelloc=t, label={}, nodesep=0.4, ranksep=0.7];", quoted(&label));
    let _ = writeln!(out, "  node [shape=plain, fontname=\"Helvetica\"];");
    let _ = writeln!(out, "  edge [color=\"#333333\", arrowsize=0.8];");
    for (host, members) in model.stages_by_host() {
        let _ = writeln!(out, "  subgraph cluster_host_{host} {{");
        let _ = writeln!(out, "    label={}; style=\"dashed,rounded\"; color=\"#868e96\"; fontname=\"Helvetica-Oblique\";", quoted(&model.host_label(host)));
        for i in members {
            write_stage(&mut out, model, i, &marks);
        }
        let _ = writeln!(out, "  }}");
    }
    write_edges(&mut out, model, &marks);
    if !findings.is_empty() {
        write_findings(&mut out, findings);
    }
    out += "}\n";
    out
}

/// Stage `i` as a node: queue, stop sign and name in the first row, resources in the second.
fn write_stage(out: &mut String, model: &Model, i: usize, marks: &Marks) {
    let stage = &model.stages[i];
    let border = marks.first(i).map_or("#222222", |p| kind_color(p.kind));
    let mut cells = String::new();
    if stage.scheduling.has_queue() {
        let plug = if stage.scheduling == Scheduling::Pluggable {
            "<BR/><FONT POINT-SIZE=\"8\">plug</FONT>"
        } else {
            ""
        };
        let _ = write!(
            cells,
            "<TD ROWSPAN=\"2\" BGCOLOR=\"#ffffff\">|||{plug}</TD>"
        );
    }
    if stage.ordering {
        cells += "<TD ROWSPAN=\"2\" BGCOLOR=\"#e03131\"><FONT COLOR=\"#ffffff\" POINT-SIZE=\"8\">STOP</FONT></TD>";
    }
    let used = stage.resources.used();
    let span = used.len().max(1);
    let _ = write!(
        cells,
        "<TD COLSPAN=\"{span}\" COLOR=\"{border}\"><B>{}</B></TD>",
        esc(&stage.name)
    );
    let mut chips = String::new();
    for r in &used {
        let unknown = stage.resources.get(*r) == Usage::Unknown;
        let text = if unknown {
            format!("[{}]", r.label())
        } else {
            r.label().to_string()
        };
        let fill = marks
            .resource(i, *r)
            .map_or("#f1f3f5", |p| kind_fill(p.kind));
        let style = if unknown { " STYLE=\"dashed\"" } else { "" };
        let _ = write!(
            chips,
            "<TD BGCOLOR=\"{fill}\"{style}><FONT POINT-SIZE=\"9\">{}</FONT></TD>",
            esc(&text)
        );
    }
    if used.is_empty() {
        chips += "<TD BORDER=\"0\"> </TD>";
    }
    let _ = writeln!(
        out,
        "    s{i} [label=<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"4\"><TR>{cells}</TR><TR>{chips}</TR></TABLE>>, tooltip={}];",
        quoted(&format!("{} (host {}, {})", stage.name, stage.host, stage.scheduling.key()))
    );
}

/// Downstream edges, then blocking edges (dashed, from the stage waited on to the blocked
/// stage, as in the paper).
fn write_edges(out: &mut String, model: &Model, marks: &Marks) {
    let index = model.names();
    for (i, stage) in model.stages.iter().enumerate() {
        for target in &stage.downstream {
            if let Some(j) = index.get(target.as_str()) {
                let _ = writeln!(out, "  s{i} -> s{j};");
            }
        }
    }
    for (i, stage) in model.stages.iter().enumerate() {
        let width = if marks.blocked(i) { ", penwidth=2" } else { "" };
        for target in &stage.blocks_on {
            if let Some(j) = index.get(target.as_str()) {
                let _ = writeln!(
                    out,
                    "  s{j} -> s{i} [style=dashed, color=\"#1971c2\", constraint=false{width}];"
                );
            }
        }
    }
}

/// The table of findings, numbered as in the report.
fn write_findings(out: &mut String, findings: &[Problem]) {
    let mut rows = String::new();
    for (k, p) in findings.iter().enumerate() {
        let res = crate::analysis::resource_suffix(p, Resource::label);
        let _ = write!(
            rows,
            "<TR><TD ALIGN=\"LEFT\"><FONT COLOR=\"{}\">{}. {}: {}{}</FONT></TD></TR>",
            kind_color(p.kind),
            k + 1,
            esc(p.kind.title()),
            esc(&p.stages.join(", ")),
            esc(&res)
        );
    }
    let _ = writeln!(out, "  problems [label=<<TABLE BORDER=\"0\" CELLSPACING=\"2\"><TR><TD ALIGN=\"LEFT\"><B>Problems found</B></TD></TR>{rows}</TABLE>>];");
}
