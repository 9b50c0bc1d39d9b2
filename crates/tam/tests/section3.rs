//! The five predicates of §3 on the paper's minimal examples: in each of Fig. 8–12, system
//! (a) has the problem and system (b), with the same function, does not.

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

// §3.1, Fig. 8: Req Handle (Q1, CPU) feeds an I/O stage; I/O is the bottleneck.
const FIG8A: &str = r#"
[model]
name = "Fig. 8a"
[[stage]]
name = "Req Handle"
scheduling = "pluggable"
resources = { cpu = true }
downstream = ["I/O"]
[[stage]]
name = "I/O"
scheduling = "on_demand"
resources = { io = true }
"#;

#[test]
fn fig8a_on_demand_io_stage_has_no_scheduling() {
    let report = check(FIG8A);
    assert_only(
        &report,
        ProblemKind::NoScheduling,
        &["I/O"],
        &[Resource::Io],
    );
    assert!(report.problems[0].remedy.contains("scheduling point"));
}

#[test]
fn fig8b_io_stage_with_a_queue_is_fine() {
    assert!(check(&FIG8A.replace("\"on_demand\"", "\"pluggable\"")).is_clean());
}

// §3.2, Fig. 9: (a) Req Handle looks up the cache and does I/O on a miss; (b) a separate
// I/O stage does the I/O.
const FIG9A: &str = r#"
[model]
name = "Fig. 9a"
[[stage]]
name = "Req Handle"
scheduling = "pluggable"
resources = { cpu = true, io = "unknown" }
"#;

const FIG9B: &str = r#"
[model]
name = "Fig. 9b"
[[stage]]
name = "Req Handle"
scheduling = "pluggable"
resources = { cpu = true }
downstream = ["I/O"]
[[stage]]
name = "I/O"
scheduling = "pluggable"
resources = { io = true }
"#;

#[test]
fn fig9a_cache_lookup_then_io_is_unknown_resource_usage() {
    let report = check(FIG9A);
    assert_only(
        &report,
        ProblemKind::UnknownResourceUsage,
        &["Req Handle"],
        &[Resource::Io],
    );
    assert!(report.problems[0].remedy.contains("Split"));
}

#[test]
fn fig9b_separate_io_stage_is_fine() {
    assert!(check(FIG9B).is_clean());
}

// §3.3, Fig. 10: (a) S1 reads requests and S2 sends replies, both using the network with
// their own schedulers; (b) one stage does both.
const FIG10A: &str = r#"
[model]
name = "Fig. 10a"
[[stage]]
name = "Req Read"
scheduling = "pluggable"
resources = { network = true }
downstream = ["Resp Send"]
[[stage]]
name = "Resp Send"
scheduling = "pluggable"
resources = { network = true }
"#;

const FIG10B: &str = r#"
[model]
name = "Fig. 10b"
[[stage]]
name = "Req Handle"
scheduling = "pluggable"
resources = { network = true }
"#;

#[test]
fn fig10a_two_schedulers_for_one_network_is_hidden_contention() {
    let report = check(FIG10A);
    assert_only(
        &report,
        ProblemKind::HiddenContention,
        &["Req Read", "Resp Send"],
        &[Resource::Network],
    );
    assert!(report.problems[0].remedy.contains("Combine"));
}

#[test]
fn fig10b_one_stage_for_the_network_is_fine() {
    assert!(check(FIG10B).is_clean());
}

// §3.4, Fig. 11: (a) Req Handle threads block on the I/O stage; (b) Req Handle is
// asynchronous.
const FIG11A: &str = r#"
[model]
name = "Fig. 11a"
[[stage]]
name = "Req Handle"
scheduling = "pluggable"
resources = { cpu = true }
downstream = ["I/O"]
blocks_on = ["I/O"]
[[stage]]
name = "I/O"
scheduling = "pluggable"
resources = { io = true }
"#;

#[test]
fn fig11a_bounded_stage_blocking_downstream_is_blocking() {
    let report = check(FIG11A);
    assert_only(
        &report,
        ProblemKind::Blocking,
        &["Req Handle", "I/O"],
        &[Resource::Io],
    );
    assert!(report.problems[0].remedy.contains("asynchronous"));
    assert!(report.problems[0].remedy.contains("threads as a resource"));
}

#[test]
fn fig11b_asynchronous_req_handle_is_fine() {
    assert!(check(&FIG11A.replace("blocks_on = [\"I/O\"]\n", "")).is_clean());
}

// §3.5, Fig. 12: (a) Worker (CPU) feeds LOG Append (I/O), which must keep the order of one
// shared WAL; (b) each client has its own stream.
const FIG12A: &str = r#"
[model]
name = "Fig. 12a"
[[stage]]
name = "Worker"
scheduling = "pluggable"
resources = { cpu = true }
downstream = ["LOG Append"]
[[stage]]
name = "LOG Append"
scheduling = "pluggable"
ordering = true
resources = { io = true }
"#;

#[test]
fn fig12a_ordered_io_stage_is_an_ordering_constraint() {
    let report = check(FIG12A);
    assert_only(
        &report,
        ProblemKind::OrderingConstraint,
        &["LOG Append"],
        &[Resource::Io],
    );
    assert!(report.problems[0].remedy.contains("streams"));
}

#[test]
fn fig12b_separate_streams_are_fine() {
    assert!(check(&FIG12A.replace("ordering = true\n", "")).is_clean());
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
