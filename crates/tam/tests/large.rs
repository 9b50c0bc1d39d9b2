//! A model of 100,000 stages is read, checked and drawn: every step resolves stage names
//! through one index, so the work grows with the model, not with its square (a chain this
//! long took minutes when each relation looked its target up by scanning the stages).
//! Timings are in docs/benchmarks.md; this test only says that it completes, and what.

use std::fmt::Write as _;

use fairlane_tam::{
    analyze, render_dot, render_svg, DrawOptions, Model, ProblemKind, Resource, Scheduling, Stage,
    Usage,
};

const STAGES: usize = 100_000;
/// Stages per host: the chain crosses 1,000 node boundaries.
const PER_HOST: usize = 100;

/// A chain as a model file: stage i hands every request to stage i + 1 and blocks on it, on
/// host 1 + i / 100, using the CPU.
fn chain_toml() -> String {
    let mut text = String::with_capacity(STAGES * 120);
    text.push_str("format = 1\n[model]\nname = \"chain\"\n");
    for i in 0..STAGES {
        let _ = write!(
            text,
            "\n[[stage]]\nname = \"s{i}\"\nhost = {}\nscheduling = \"pluggable\"\nresources = {{ cpu = true }}\n",
            1 + i / PER_HOST
        );
        if i + 1 < STAGES {
            let _ = write!(
                text,
                "downstream = [\"s{next}\"]\nblocks_on = [\"s{next}\"]\n",
                next = i + 1
            );
        }
    }
    text
}

/// The same chain built in code (the file's reading is the other test's).
fn chain() -> Model {
    let mut model = Model {
        name: "chain".into(),
        ..Model::default()
    };
    for i in 0..STAGES {
        let mut stage = Stage::new(format!("s{i}"), Scheduling::Pluggable);
        stage.host = (1 + i / PER_HOST) as u32;
        stage.resources.set(Resource::Cpu, Usage::True);
        if i + 1 < STAGES {
            stage.downstream = vec![format!("s{}", i + 1)];
            stage.blocks_on = vec![format!("s{}", i + 1)];
        }
        model.stages.push(stage);
    }
    model
}

#[test]
fn a_chain_of_100000_stages_is_checked_and_drawn() {
    let model = chain();
    model.validate().unwrap();

    let report = analyze(&model);
    let hosts = STAGES / PER_HOST;
    // Every host's 100 CPU stages contend; every stage but the last blocks.
    assert_eq!(report.of_kind(ProblemKind::HiddenContention).count(), hosts);
    assert_eq!(report.of_kind(ProblemKind::Blocking).count(), STAGES - 1);
    assert_eq!(report.problems.len(), hosts + STAGES - 1);
    let text = report.to_text(&model);
    assert!(text.contains(&format!("{}. blocking (§3.4)", hosts + STAGES - 1)));

    let options = DrawOptions {
        highlight: Some(report),
    };
    let svg = render_svg(&model, &options);
    assert_eq!(svg.matches("<g class=\"stage\"").count(), STAGES);
    assert_eq!(
        svg.matches("<path class=\"downstream\"").count(),
        STAGES - 1
    );
    assert_eq!(svg.matches("<path class=\"blocking\"").count(), STAGES - 1);
    assert_eq!(svg.matches("<g class=\"host\"").count(), hosts);
    assert!(svg.ends_with("</svg>\n"));

    let dot = render_dot(&model, &options);
    assert_eq!(dot.matches("subgraph cluster_host_").count(), hosts);
    assert_eq!(dot.matches("style=dashed, color=").count(), STAGES - 1);
    assert!(dot.contains(&format!("  s{} -> s{};\n", STAGES - 2, STAGES - 1)));
}

#[test]
fn unknown_names_in_a_large_model_are_reported_without_a_scan_each() {
    // The file is read, and every downstream relation of the chain names a stage that does
    // not exist, in a different case: each error carries its "did you mean" hint, found
    // through one index.
    let text = chain_toml().replace("downstream = [\"s", "downstream = [\"S");
    let err = Model::from_toml(&text).unwrap_err();
    let shown = err.to_string();
    assert_eq!(shown.matches("unknown stage `S").count(), STAGES - 1);
    assert!(shown.contains("unknown stage `S1` (did you mean `s1`?)"));
}
