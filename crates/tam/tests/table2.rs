//! The catalog reproduces Table 2 of the paper, and the findings name the stages the paper
//! names in §4.1 and §5.

use fairlane_tam::catalog::{self, CATALOG};
use fairlane_tam::{analyze, Model, Problem, ProblemKind, ProblemKind::*, Report, Resource};
use std::collections::BTreeSet;

fn load(name: &str) -> (Model, Report) {
    let entry = catalog::get(name).unwrap_or_else(|| panic!("no catalog entry {name}"));
    let model = entry.model().unwrap_or_else(|e| panic!("{e}"));
    let report = analyze(&model);
    (model, report)
}

fn kinds(name: &str) -> BTreeSet<ProblemKind> {
    load(name).1.kinds()
}

fn set(kinds: &[ProblemKind]) -> BTreeSet<ProblemKind> {
    kinds.iter().copied().collect()
}

/// Stages named by the findings of one kind.
fn stages_of(report: &Report, kind: ProblemKind) -> BTreeSet<String> {
    report
        .of_kind(kind)
        .flat_map(|p| p.stages.iter().cloned())
        .collect()
}

/// The stages that block: the first stage of each blocking finding.
fn blocked(report: &Report) -> BTreeSet<String> {
    report
        .of_kind(Blocking)
        .map(|p| p.stages[0].clone())
        .collect()
}

/// Asserts that the findings of `kind` name exactly `stages`.
#[track_caller]
fn assert_stages(report: &Report, kind: ProblemKind, stages: &[&str]) {
    assert_eq!(stages_of(report, kind), names(stages), "{kind:?}");
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn table_2_hbase_has_all_five_problems() {
    assert_eq!(kinds("hbase"), set(&ProblemKind::ALL));
}

#[test]
fn table_2_mongodb_has_unknown_usage_contention_and_blocking() {
    assert_eq!(
        kinds("mongodb"),
        set(&[UnknownResourceUsage, HiddenContention, Blocking])
    );
}

#[test]
fn table_2_cassandra_has_unknown_usage_contention_and_blocking() {
    assert_eq!(
        kinds("cassandra"),
        set(&[UnknownResourceUsage, HiddenContention, Blocking])
    );
}

#[test]
fn table_2_riak_has_no_scheduling_unknown_usage_and_contention() {
    assert_eq!(
        kinds("riak"),
        set(&[NoScheduling, UnknownResourceUsage, HiddenContention])
    );
}

#[test]
fn table_2_rows_as_printed() {
    let rows: Vec<(&str, String)> = CATALOG
        .iter()
        .map(|e| (e.name, analyze(&e.model().unwrap()).table2_row()))
        .collect();
    assert_eq!(
        rows,
        vec![
            ("hbase", "N U C B O".to_string()),
            ("mongodb", ". U C B .".to_string()),
            ("cassandra", ". U C B .".to_string()),
            ("riak", "N U C . .".to_string()),
            ("tamed-hbase", ". . C . .".to_string()),
            ("muzzled-hbase", ". U C B O".to_string()),
        ]
    );
}

#[test]
fn hbase_findings_name_the_stages_of_section_4_1() {
    let (_, r) = load("hbase");
    // §4.1.1: Data Xceive and Data Stream are on-demand and use resources.
    assert_stages(
        &r,
        NoScheduling,
        &["Data Stream", "Data Xceive", "Data Xceive (replica)"],
    );
    // §4.1.2: the I/O and network components of RPC Handle are unknown.
    let u: Vec<&Problem> = r.of_kind(UnknownResourceUsage).collect();
    assert_eq!(u.len(), 1);
    assert_eq!(u[0].stages, ["RPC Handle"]);
    assert_eq!(u[0].resources, [Resource::Io, Resource::Network]);
    // §4.1.3: RPC Read, RPC Handle and RPC Respond share the network.
    assert!(r
        .of_kind(HiddenContention)
        .any(|p| p.resources == [Resource::Network]
            && names(&["RPC Read", "RPC Handle", "RPC Respond"])
                .is_subset(&p.stages.iter().cloned().collect())));
    // §4.1.4: three bounded stages block: RPC Handle, Mem Flush and LOG Sync.
    assert_eq!(blocked(&r), names(&["RPC Handle", "Mem Flush", "LOG Sync"]));
    // §4.1.5: Data Stream and Data Xceive; LOG Sync (and LOG Append) are ordered but use
    // no resource, so they are not flagged.
    assert_stages(
        &r,
        OrderingConstraint,
        &["Data Stream", "Data Xceive", "Data Xceive (replica)"],
    );
}

#[test]
fn hbase_log_stages_are_ordered_yet_not_an_ordering_problem() {
    let (m, r) = load("hbase");
    for name in ["LOG Append", "LOG Sync"] {
        let stage = m.stage(name).unwrap();
        assert!(stage.ordering && !stage.resources.any(), "{name}");
        assert!(!stages_of(&r, OrderingConstraint).contains(name));
    }
}

#[test]
fn tamed_hbase_keeps_only_the_accepted_cpu_contention() {
    let (_, r) = load("tamed-hbase");
    assert_eq!(r.problems.len(), 1, "{}", r.to_text(&load("tamed-hbase").0));
    let p = &r.problems[0];
    assert_eq!(p.kind, HiddenContention);
    assert_eq!(p.resources, [Resource::Cpu]);
    assert_eq!(p.stages, ["Network", "CPU"]);
}

#[test]
fn muzzled_hbase_fixes_no_scheduling_and_the_rpc_network_contention_only() {
    let (_, r) = load("muzzled-hbase");
    assert_eq!(
        r.kinds(),
        set(&[
            UnknownResourceUsage,
            HiddenContention,
            Blocking,
            OrderingConstraint
        ])
    );
    // RPC Read and RPC Respond are one stage now; network contention remains only with the
    // stages the paper leaves to cross-stage coordination.
    assert!(!stages_of(&r, HiddenContention)
        .iter()
        .any(|s| s == "RPC Read" || s == "RPC Respond"));
    // With scheduling points in HDFS, Data Xceive now contends with RPC Handle for I/O.
    assert!(r
        .of_kind(HiddenContention)
        .any(|p| p.resources == [Resource::Io] && p.stages == ["RPC Handle", "Data Xceive"]));
}

#[test]
fn mongodb_findings_follow_section_5() {
    let (_, r) = load("mongodb");
    assert_stages(&r, UnknownResourceUsage, &["Worker", "Secondary Worker"]);
    // Worker and Oplog Writer compete for the database lock on the secondary.
    assert!(r.of_kind(HiddenContention).any(
        |p| p.resources == [Resource::Lock] && p.stages == ["Secondary Worker", "Oplog Writer"]
    ));
    assert_eq!(blocked(&r), names(&["Worker"]));
}

#[test]
fn cassandra_findings_follow_section_5() {
    let (_, r) = load("cassandra");
    assert_stages(
        &r,
        UnknownResourceUsage,
        &["Read", "Mutation", "View-Mutation"],
    );
    let contended: BTreeSet<Resource> = r
        .of_kind(HiddenContention)
        .flat_map(|p| p.resources.clone())
        .collect();
    assert_eq!(
        contended,
        [Resource::Cpu, Resource::Io, Resource::Network]
            .into_iter()
            .collect()
    );
    assert_eq!(blocked(&r), names(&["C-ReqHandle"]));
}

#[test]
fn riak_findings_follow_section_5() {
    let (m, r) = load("riak");
    assert_stages(&r, NoScheduling, &["Req In-Out", "Req Process"]);
    assert_stages(&r, UnknownResourceUsage, &["Req Process", "Cmd Handle"]);
    // Every bounded stage takes part in some hidden contention.
    let bounded: BTreeSet<String> = m
        .stages
        .iter()
        .filter(|s| s.scheduling.has_queue())
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(stages_of(&r, HiddenContention), bounded);
    // The on-demand request processes wait for replies, but that is not blocking (§3.4).
    assert!(!m.stage("Req Process").unwrap().blocks_on.is_empty());
}

#[test]
fn every_finding_has_explanation_and_remedy_naming_its_stages() {
    for entry in CATALOG {
        for p in analyze(&entry.model().unwrap()).problems {
            assert!(!p.stages.is_empty());
            assert!(
                p.explanation.contains(&format!("`{}`", p.stages[0])),
                "{}: {}",
                entry.name,
                p.explanation
            );
            assert!(p.remedy.len() > 40, "{}: {}", entry.name, p.remedy);
        }
    }
}

#[test]
fn catalog_lists_exactly_the_files_in_models() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models");
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        // Models measured by `tam discover` are not the paper's catalog.
        .filter(|f| f.ends_with(".toml") && !f.ends_with("-discovered.toml"))
        .collect();
    files.sort();
    let mut listed: Vec<String> = CATALOG.iter().map(|e| format!("{}.toml", e.name)).collect();
    listed.sort();
    assert_eq!(files, listed);
}

#[test]
fn json_report_is_deterministic_and_has_the_documented_keys() {
    let (_, r) = load("hbase");
    let json = r.to_json();
    assert_eq!(json, load("hbase").1.to_json());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let first = &v["problems"][0];
    assert_eq!(first["kind"], "no_scheduling");
    assert_eq!(first["stages"], serde_json::json!(["Data Stream"]));
    assert_eq!(first["resources"], serde_json::json!(["cpu", "network"]));
    let kinds: BTreeSet<String> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap().to_string())
        .collect();
    let expected: BTreeSet<String> = [
        "no_scheduling",
        "unknown_resource_usage",
        "hidden_contention",
        "blocking",
        "ordering_constraint",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(kinds, expected);
}
