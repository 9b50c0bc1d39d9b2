//! Diagrams: well-formed, deterministic, and drawn in the notation of Table 1.

use fairlane_tam::catalog::CATALOG;
use fairlane_tam::{analyze, render_dot, render_svg, DrawOptions, Model, Scheduling, Usage};

/// Stage A on demand, stage B general (has a queue).
const ON_DEMAND_AND_GENERAL: &str = "[model]\nname = \"q\"\n[[stage]]\nname = \"A\"\nscheduling = \"on_demand\"\n[[stage]]\nname = \"B\"\nscheduling = \"general\"\n";

/// Names with every character SVG and DOT escape.
const ESCAPED_NAMES: &str = "[model]\nname = \"<A & \\\"B\\\">\"\n[[stage]]\nname = \"x<y & \\\"z\\\"\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\n";

fn model(toml: &str) -> Model {
    Model::from_toml(toml).unwrap_or_else(|e| panic!("{e}"))
}

fn plain() -> DrawOptions {
    DrawOptions::default()
}

fn highlighted(model: &Model) -> DrawOptions {
    DrawOptions {
        highlight: Some(analyze(model)),
    }
}

fn count(doc: &roxmltree::Document, class: &str) -> usize {
    doc.descendants()
        .filter(|n| n.attribute("class") == Some(class))
        .count()
}

#[test]
fn svg_of_every_catalog_model_is_well_formed_and_complete() {
    for entry in CATALOG {
        let model = entry.model().unwrap();
        let svg = render_svg(&model, &highlighted(&model));
        let doc =
            roxmltree::Document::parse(&svg).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        let stages: Vec<&str> = doc
            .descendants()
            .filter_map(|n| n.attribute("data-stage"))
            .collect();
        let expected: Vec<&str> = model.stages.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(stages, expected, "{}: one group per stage", entry.name);
        assert_eq!(
            count(&doc, "host"),
            model.host_ids().len(),
            "{}: one node boundary per host",
            entry.name
        );
        let pluggable = model
            .stages
            .iter()
            .filter(|s| s.scheduling == Scheduling::Pluggable)
            .count();
        assert_eq!(
            count(&doc, "plug"),
            pluggable + 1,
            "{}: plugs (+1 in the legend)",
            entry.name
        );
        let ordered = model.stages.iter().filter(|s| s.ordering).count();
        assert_eq!(
            count(&doc, "stop"),
            ordered + 1,
            "{}: stop signs (+1 in the legend)",
            entry.name
        );
        let downstream: usize = model.stages.iter().map(|s| s.downstream.len()).sum();
        assert_eq!(count(&doc, "downstream"), downstream, "{}", entry.name);
        let blocking: usize = model.stages.iter().map(|s| s.blocks_on.len()).sum();
        assert_eq!(count(&doc, "blocking"), blocking, "{}", entry.name);
        let resources: usize = model.stages.iter().map(|s| s.resources.used().len()).sum();
        assert_eq!(count(&doc, "resource"), resources, "{}", entry.name);
    }
}

#[test]
fn unknown_usage_is_drawn_in_brackets_and_dashed() {
    let model = CATALOG[0].model().unwrap(); // HBase: RPC Handle has [I/O] and [NET]
    let svg = render_svg(&model, &plain());
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let handle = doc
        .descendants()
        .find(|n| n.attribute("data-stage") == Some("RPC Handle"))
        .unwrap();
    let texts: Vec<&str> = handle
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    assert_eq!(texts, ["RPC Handle", "CPU", "[I/O]", "[NET]"]);
    let dashed: Vec<&str> = handle
        .descendants()
        .filter(|n| {
            n.attribute("class") == Some("resource") && n.attribute("stroke-dasharray").is_some()
        })
        .filter_map(|n| n.attribute("data-resource"))
        .collect();
    assert_eq!(dashed, ["io", "network"]);
    assert!(
        model
            .stage("RPC Handle")
            .unwrap()
            .resources
            .get(fairlane_tam::Resource::Io)
            == Usage::Unknown
    );
}

#[test]
fn on_demand_stages_have_no_queue() {
    let model = model(ON_DEMAND_AND_GENERAL);
    let svg = render_svg(&model, &plain());
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let rects = |name: &str| {
        doc.descendants()
            .find(|n| n.attribute("data-stage") == Some(name))
            .unwrap()
            .children()
            .filter(|n| n.has_tag_name("rect"))
            .count()
    };
    assert_eq!(rects("A"), 1, "just the stage box");
    assert_eq!(rects("B"), 2, "queue and stage box");
}

#[test]
fn highlighting_numbers_every_finding() {
    for entry in CATALOG {
        let model = entry.model().unwrap();
        let report = analyze(&model);
        let doc_text = render_svg(&model, &highlighted(&model));
        let doc = roxmltree::Document::parse(&doc_text).unwrap();
        let plain_text = render_svg(&model, &plain());
        let plain_doc = roxmltree::Document::parse(&plain_text).unwrap();
        assert_eq!(count(&plain_doc, "badge"), 0);
        // One badge per (finding, stage it marks) plus one per finding in the list.
        let marks: usize = report
            .problems
            .iter()
            .map(|p| {
                if p.kind == fairlane_tam::ProblemKind::Blocking {
                    1
                } else {
                    p.stages.len()
                }
            })
            .sum();
        assert_eq!(
            count(&doc, "badge"),
            marks + report.problems.len(),
            "{}",
            entry.name
        );
        for p in &report.problems {
            assert!(
                doc_text.contains(p.kind.title()),
                "{}: {}",
                entry.name,
                p.kind
            );
        }
    }
}

#[test]
fn rendering_is_deterministic() {
    for entry in CATALOG {
        let model = entry.model().unwrap();
        let again = entry.model().unwrap();
        assert_eq!(
            render_svg(&model, &highlighted(&model)),
            render_svg(&again, &highlighted(&again))
        );
        assert_eq!(
            render_dot(&model, &highlighted(&model)),
            render_dot(&again, &highlighted(&again))
        );
    }
}

#[test]
fn names_are_escaped() {
    let model = model(ESCAPED_NAMES);
    let svg = render_svg(&model, &plain());
    roxmltree::Document::parse(&svg).unwrap();
    assert!(svg.contains("x&lt;y &amp; &quot;z&quot;"));
    let dot = render_dot(&model, &plain());
    assert!(dot.contains("digraph \"<A & \\\"B\\\">\""), "{dot}");
    assert!(dot.contains("<B>x&lt;y &amp; &quot;z&quot;</B>"), "{dot}");
}

#[test]
fn dot_has_clusters_edges_and_dashed_blocking() {
    let model = CATALOG[0].model().unwrap();
    let dot = render_dot(&model, &highlighted(&model));
    assert!(dot.starts_with("digraph \"HBase/HDFS\" {"));
    assert_eq!(dot.matches("subgraph cluster_host_").count(), 2);
    let downstream: usize = model.stages.iter().map(|s| s.downstream.len()).sum();
    let blocking: usize = model.stages.iter().map(|s| s.blocks_on.len()).sum();
    assert_eq!(
        dot.lines()
            .filter(|l| l.contains(" -> ") && !l.contains("dashed"))
            .count(),
        downstream
    );
    assert_eq!(
        dot.lines()
            .filter(|l| l.contains(" -> ") && l.contains("style=dashed"))
            .count(),
        blocking
    );
    assert_eq!(
        dot.matches(">STOP<").count(),
        model.stages.iter().filter(|s| s.ordering).count()
    );
    assert!(dot.contains("[I/O]"));
    assert!(dot.contains("Problems found"));
    assert_eq!(dot.matches('{').count(), dot.matches('}').count());
}

/// `(x, y, width, height)`.
type Rect = (f64, f64, f64, f64);

/// The geometry of an SVG rect.
fn rect(node: roxmltree::Node) -> Rect {
    let get = |a: &str| node.attribute(a).unwrap().parse::<f64>().unwrap();
    (get("x"), get("y"), get("width"), get("height"))
}

#[test]
fn boxes_do_not_overlap_and_stay_inside_their_node_boundary() {
    for entry in CATALOG {
        let model = entry.model().unwrap();
        let svg = render_svg(&model, &highlighted(&model));
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let hosts: Vec<(String, Rect)> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("host"))
            .map(|g| {
                let r = g.children().find(|c| c.has_tag_name("rect")).unwrap();
                (g.attribute("data-host").unwrap().to_string(), rect(r))
            })
            .collect();
        // The stage box is the group's rect with rounded corners (rx = 6).
        let boxes: Vec<(String, String, Rect)> = doc
            .descendants()
            .filter(|n| n.attribute("class") == Some("stage"))
            .map(|g| {
                let r = g
                    .children()
                    .find(|c| c.attribute("rx") == Some("6"))
                    .unwrap();
                (
                    g.attribute("data-stage").unwrap().to_string(),
                    g.attribute("data-host").unwrap().to_string(),
                    rect(r),
                )
            })
            .collect();
        for (i, (name, host, (x, y, w, h))) in boxes.iter().enumerate() {
            let (_, (hx, hy, hw, hh)) = hosts.iter().find(|(id, _)| id == host).unwrap();
            assert!(
                *x >= *hx && *y >= *hy && x + w <= hx + hw && y + h <= hy + hh,
                "{}: {name} outside host {host}",
                entry.name
            );
            for (other, _, (x2, y2, w2, h2)) in &boxes[i + 1..] {
                let apart = x + w <= *x2 || x2 + w2 <= *x || y + h <= *y2 || y2 + h2 <= *y;
                assert!(apart, "{}: {name} overlaps {other}", entry.name);
            }
        }
        for (i, (a, (x, y, w, h))) in hosts.iter().enumerate() {
            for (b, (x2, y2, w2, h2)) in &hosts[i + 1..] {
                let apart = x + w <= *x2 || x2 + w2 <= *x || y + h <= *y2 || y2 + h2 <= *y;
                assert!(apart, "{}: hosts {a} and {b} overlap", entry.name);
            }
        }
    }
}
