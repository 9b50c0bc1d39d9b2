//! The five predicates of §3 on the paper's minimal examples: in each of Fig. 8–12, system
//! (a) has the problem and system (b), with the same function, does not. The examples are
//! the models of `experiments/tam-fig*.toml`, the files the simulator reproduces the
//! figures from, so the analysis and the simulation judge the same architectures.

use fairlane_tam::{analyze, Model, ProblemKind, Report, Resource};

fn model(toml: &str) -> Model {
    Model::from_toml(toml).unwrap_or_else(|e| panic!("{e}"))
}

fn check(toml: &str) -> Report {
    analyze(&model(toml))
}

/// Asserts that the report has exactly one finding, of `kind`, naming `stages` and `resources`.
fn assert_only(report: &Report, kind: ProblemKind, stages: &[&str], resources: &[Resource]) {
    assert_eq!(report.problems.len(), 1, "{report:#?}");
    let p = &report.problems[0];
    assert_eq!(p.kind, kind);
    assert_eq!(p.stages, stages);
    assert_eq!(p.resources, resources);
    assert!(
        p.explanation.contains(kind.section()),
        "explanation cites the section: {}",
        p.explanation
    );
    assert!(!p.remedy.is_empty());
}

/// One of Fig. 8–12: system (a) has exactly one problem, system (b) none.
struct Figure {
    /// `experiments/tam-figNa.toml`.
    a: &'static str,
    /// `experiments/tam-figNb.toml`.
    b: &'static str,
    /// (a)'s one finding: its kind, stages and resources.
    kind: ProblemKind,
    stages: &'static [&'static str],
    resources: &'static [Resource],
    /// Words the remedy must use (the fix the paper names).
    remedy: &'static [&'static str],
}

/// The `Figure` of Fig. `$n`: its (a) and (b) are `experiments/tam-fig{$n}a.toml` and `…b.toml`.
macro_rules! figure {
    ($n:literal, $kind:ident, $stages:expr, $resources:expr, $remedy:expr) => {
        Figure {
            a: include_str!(concat!("../../../experiments/tam-fig", $n, "a.toml")),
            b: include_str!(concat!("../../../experiments/tam-fig", $n, "b.toml")),
            kind: ProblemKind::$kind,
            stages: $stages,
            resources: $resources,
            remedy: $remedy,
        }
    };
}

const FIGURES: [Figure; 5] = [
    // §3.1, Fig. 8: Req Handle (Q1, CPU) feeds an I/O stage; I/O is the bottleneck. (b)
    // gives the I/O stage a queue.
    figure!(
        "8",
        NoScheduling,
        &["I/O"],
        &[Resource::Io],
        &["scheduling point"]
    ),
    // §3.2, Fig. 9: (a) Req Handle looks up the cache and does I/O on a miss; (b) a separate
    // I/O stage does the I/O.
    figure!(
        "9",
        UnknownResourceUsage,
        &["Req Handle"],
        &[Resource::Io],
        &["Split"]
    ),
    // §3.3, Fig. 10: (a) one stage reads requests and another sends replies, both using the
    // network with their own schedulers; (b) one stage does both.
    figure!(
        "10",
        HiddenContention,
        &["Req Read", "Req Respond"],
        &[Resource::Network],
        &["Combine"]
    ),
    // §3.4, Fig. 11: (a) Req Handle threads block on the I/O stage; (b) Req Handle is
    // asynchronous.
    figure!(
        "11",
        Blocking,
        &["Req Handle", "I/O"],
        &[Resource::Io],
        &["asynchronous", "threads as a resource"]
    ),
    // §3.5, Fig. 12: (a) Worker (CPU) feeds LOG Append (I/O), which must keep the order of
    // one shared WAL; (b) each client has its own stream.
    figure!(
        "12",
        OrderingConstraint,
        &["LOG Append"],
        &[Resource::Io],
        &["streams"]
    ),
];

#[test]
fn each_figure_a_has_its_one_problem_and_b_with_the_same_function_is_clean() {
    for f in &FIGURES {
        let report = check(f.a);
        assert_only(&report, f.kind, f.stages, f.resources);
        for word in f.remedy {
            assert!(
                report.problems[0].remedy.contains(word),
                "{:?}: the remedy names `{word}`: {}",
                f.kind,
                report.problems[0].remedy
            );
        }
        let report = check(f.b);
        assert!(report.is_clean(), "{:?}'s (b): {report:#?}", f.kind);
    }
}

// Edges of the predicates, taken literally from §3.

fn one_stage(body: &str) -> Report {
    check(&format!(
        "[model]\nname = \"t\"\n[[stage]]\nname = \"S\"\n{body}\n"
    ))
}

#[test]
fn no_scheduling_needs_some_resource_and_counts_unknown_as_used() {
    assert!(
        one_stage("scheduling = \"on_demand\"").is_clean(),
        "an idle on-demand stage is harmless"
    );
    let report = one_stage("scheduling = \"on_demand\"\nresources = { lock = \"unknown\" }");
    assert_eq!(report.table2_row(), "N U . . .");
}

#[test]
fn unknown_usage_is_reported_per_stage_with_every_unknown_resource() {
    let report = one_stage("scheduling = \"general\"\nresources = { cpu = true, io = \"unknown\", network = \"unknown\" }");
    assert_only(
        &report,
        ProblemKind::UnknownResourceUsage,
        &["S"],
        &[Resource::Io, Resource::Network],
    );
}

const CONTENTION: &str = r#"
[model]
name = "contention"
[[stage]]
name = "A"
host = 1
scheduling = "general"
resources = { cpu = true, io = true }
[[stage]]
name = "B"
host = 1
scheduling = "pluggable"
resources = { cpu = true, lock = "unknown" }
[[stage]]
name = "C"
host = 1
scheduling = "general"
resources = { cpu = "unknown", lock = true }
[[stage]]
name = "D"
host = 2
scheduling = "general"
resources = { io = true }
[[stage]]
name = "E"
host = 1
scheduling = "on_demand"
resources = { io = true }
"#;

#[test]
fn hidden_contention_is_per_host_and_resource_among_bounded_stages() {
    let report = analyze(&model(CONTENTION));
    let found: Vec<(Vec<String>, Vec<Resource>)> = report
        .of_kind(ProblemKind::HiddenContention)
        .map(|p| (p.stages.clone(), p.resources.clone()))
        .collect();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(
        found,
        vec![
            (s(&["A", "B", "C"]), vec![Resource::Cpu]),
            (s(&["B", "C"]), vec![Resource::Lock])
        ],
        "A and D share I/O but not a host; E shares I/O with A but is on-demand"
    );
}

#[test]
fn blocking_only_for_bounded_stages() {
    let toml = |q: &str| {
        format!(
            "[model]\nname = \"t\"\n[[stage]]\nname = \"A\"\nscheduling = \"{q}\"\ndownstream = [\"B\"]\nblocks_on = [\"B\"]\n\
             [[stage]]\nname = \"B\"\nscheduling = \"general\"\n"
        )
    };
    assert!(
        check(&toml("on_demand")).is_clean(),
        "a thread per request may block: more are created"
    );
    assert_eq!(
        check(&toml("general")).table2_row(),
        ". . . B .",
        "blocking does not need resources"
    );
    assert_eq!(check(&toml("pluggable")).table2_row(), ". . . B .");
}

#[test]
fn ordering_without_resources_is_not_a_problem_but_unknown_usage_is() {
    assert!(
        one_stage("scheduling = \"general\"\nordering = true").is_clean(),
        "like HBase's LOG Sync (§4.1.5)"
    );
    let report = one_stage(
        "scheduling = \"general\"\nordering = true\nresources = { network = \"unknown\" }",
    );
    assert_eq!(report.table2_row(), ". U . . O");
}

#[test]
fn findings_are_ordered_by_table_2_column_then_stage_order() {
    let report = check(
        r#"
        [model]
        name = "all five"
        [[stage]]
        name = "Z"
        scheduling = "general"
        resources = { cpu = true }
        ordering = true
        downstream = ["Y"]
        blocks_on = ["Y"]
        [[stage]]
        name = "Y"
        scheduling = "general"
        resources = { cpu = "unknown" }
        downstream = ["X"]
        [[stage]]
        name = "X"
        scheduling = "on_demand"
        resources = { io = true }
        "#,
    );
    let kinds: Vec<ProblemKind> = report.problems.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        vec![
            ProblemKind::NoScheduling,
            ProblemKind::UnknownResourceUsage,
            ProblemKind::HiddenContention,
            ProblemKind::Blocking,
            ProblemKind::OrderingConstraint
        ]
    );
    assert_eq!(report.table2_row(), "N U C B O");
}
