//! What-if: the paper's remedies, applied to models, make their problems disappear.

use fairlane_tam::catalog;
use fairlane_tam::whatif::{apply, ChangeErrorKind};
use fairlane_tam::{
    analyze, what_if, Change, Model, Problem, ProblemKind, Resource, Scheduling, Usage, WhatIf,
};
use std::collections::BTreeSet;

fn model(toml: &str) -> Model {
    Model::from_toml(toml).unwrap_or_else(|e| panic!("{e}"))
}

/// A model of the catalog.
fn shipped(name: &str) -> Model {
    catalog::get(name)
        .unwrap_or_else(|| panic!("no catalog entry {name}"))
        .model()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn changes(list: &[&str]) -> Vec<Change> {
    list.iter()
        .map(|c| c.parse().unwrap_or_else(|e| panic!("{e}")))
        .collect()
}

/// `model` with the changes in `list` (written as on the command line), analysed.
fn what_if_ok(model: &Model, list: &[&str]) -> WhatIf {
    what_if(model, &changes(list)).unwrap_or_else(|e| panic!("{e}"))
}

const FIG9A: &str = "[model]\nname = \"9a\"\n[[stage]]\nname = \"Req Handle\"\nscheduling = \"pluggable\"\nresources = { cpu = true, io = \"unknown\" }\n";

#[test]
fn changes_parse_and_print_back() {
    for text in [
        "set Data Xceive.scheduling = pluggable",
        "set RPC Handle.io = false",
        "set RPC Handle.network = unknown",
        "set LOG Append.ordering = false",
        "set Mem Flush.host = 2",
        "async RPC Handle",
        "split RPC Handle",
        "combine RPC Read + RPC Respond as RPC Read/Respond",
    ] {
        let change: Change = text.parse().unwrap();
        assert_eq!(change.to_string(), text);
    }
    assert_eq!(
        "set  A.B.cpu=true".parse::<Change>().unwrap(),
        Change::SetResource {
            stage: "A.B".into(),
            resource: Resource::Cpu,
            usage: Usage::True
        },
        "the field is after the last dot"
    );
}

#[test]
fn bad_changes_say_what_is_expected() {
    for (text, needle) in [
        ("frobnicate X", "unknown change `frobnicate`"),
        (
            "set X.scheduling = fifo",
            "scheduling takes on_demand, pluggable or general",
        ),
        ("set X.gpu = true", "unknown field `gpu`"),
        ("set X = 1", "expected `STAGE.FIELD` before `=`"),
        ("set X.io = maybe", "takes true, false or unknown"),
        ("combine A + B", "combine A + B as NAME"),
        ("split", "expected `set STAGE.FIELD = VALUE`"),
    ] {
        let e = text.parse::<Change>().unwrap_err();
        assert_eq!(e.kind, ChangeErrorKind::Syntax, "{text}");
        let err = e.to_string();
        assert!(err.contains(needle), "{text}: {err}");
    }
}

#[test]
fn adding_scheduling_points_removes_no_scheduling_from_hbase() {
    let hbase = shipped("hbase");
    let result = what_if_ok(
        &hbase,
        &[
            "set Data Stream.scheduling = pluggable",
            "set Data Xceive.scheduling = pluggable",
            "set Data Xceive (replica).scheduling = pluggable",
        ],
    );
    assert_eq!(
        result.kinds_disappeared(),
        [ProblemKind::NoScheduling].into_iter().collect()
    );
    assert_eq!(
        result
            .resolved()
            .iter()
            .filter(|p| p.kind == ProblemKind::NoScheduling)
            .count(),
        3
    );
    // New scheduling points expose contention the on-demand stages hid (§3.3 excludes them).
    assert!(result
        .introduced()
        .iter()
        .all(|p| p.kind == ProblemKind::HiddenContention));
    assert!(!result.introduced().is_empty());
}

#[test]
fn splitting_by_resource_fixes_fig_9a() {
    let result = what_if_ok(&model(FIG9A), &["split Req Handle"]);
    assert!(result.after.is_clean(), "{:#?}", result.after);
    let names: Vec<&str> = result
        .model
        .stages
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["Req Handle (CPU)", "Req Handle (I/O)"]);
    assert_eq!(result.model.stages[0].downstream, ["Req Handle (I/O)"]);
    assert_eq!(
        result.model.stages[1].resources.get(Resource::Io),
        Usage::True
    );
}

#[test]
fn split_keeps_relations_on_the_first_part() {
    let m = model(
        "[model]\nname = \"t\"\n\
         [[stage]]\nname = \"Up\"\nscheduling = \"general\"\ndownstream = [\"S\"]\nblocks_on = [\"S\"]\n\
         [[stage]]\nname = \"S\"\nscheduling = \"general\"\nordering = true\nresources = { cpu = true, network = \"unknown\" }\ndownstream = [\"Down\"]\nblocks_on = [\"Down\"]\n\
         [[stage]]\nname = \"Down\"\nscheduling = \"general\"\n",
    );
    let m = apply(&m, &changes(&["split S"])).unwrap();
    let up = m.stage("Up").unwrap();
    assert_eq!(up.downstream, ["S (CPU)"]);
    assert_eq!(up.blocks_on, ["S (CPU)"]);
    let head = m.stage("S (CPU)").unwrap();
    assert_eq!(head.downstream, ["S (NET)", "Down"]);
    assert_eq!(head.blocks_on, ["Down"]);
    let net = m.stage("S (NET)").unwrap();
    assert!(net.ordering, "ordering constraints are inherited (§4.1.3)");
    assert_eq!(net.resources.used(), [Resource::Network]);
}

#[test]
fn combining_the_two_network_stages_fixes_fig_10a() {
    let fig10a = model(
        "[model]\nname = \"10a\"\n\
         [[stage]]\nname = \"Req Read\"\nscheduling = \"pluggable\"\nresources = { network = true }\ndownstream = [\"Resp Send\"]\n\
         [[stage]]\nname = \"Resp Send\"\nscheduling = \"pluggable\"\nresources = { network = true }\n",
    );
    let result = what_if_ok(&fig10a, &["combine Req Read + Resp Send as Req Handle"]);
    assert!(result.after.is_clean());
    assert_eq!(result.model.stages.len(), 1);
    assert!(
        result.model.stages[0].downstream.is_empty(),
        "the internal edge disappears"
    );
}

#[test]
fn async_and_separate_streams_fix_fig_11a_and_12a() {
    let fig11a = model(
        "[model]\nname = \"11a\"\n\
         [[stage]]\nname = \"Req Handle\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\ndownstream = [\"I/O\"]\nblocks_on = [\"I/O\"]\n\
         [[stage]]\nname = \"I/O\"\nscheduling = \"pluggable\"\nresources = { io = true }\n",
    );
    let r = what_if_ok(&fig11a, &["async Req Handle"]);
    assert_eq!(
        r.kinds_disappeared(),
        [ProblemKind::Blocking].into_iter().collect()
    );
    assert!(r.after.is_clean());

    let fig12a = model(
        "[model]\nname = \"12a\"\n\
         [[stage]]\nname = \"Worker\"\nscheduling = \"pluggable\"\nresources = { cpu = true }\ndownstream = [\"LOG Append\"]\n\
         [[stage]]\nname = \"LOG Append\"\nscheduling = \"pluggable\"\nordering = true\nresources = { io = true }\n",
    );
    let r = what_if_ok(&fig12a, &["set LOG Append.ordering = false"]);
    assert!(r.after.is_clean());
    assert_eq!(r.resolved().len(), 1);
}

/// Findings without the prose, order-independent.
fn shape(problems: &[Problem]) -> BTreeSet<(ProblemKind, BTreeSet<String>, Vec<Resource>)> {
    problems
        .iter()
        .map(|p| {
            (
                p.kind,
                p.stages.iter().cloned().collect(),
                p.resources.clone(),
            )
        })
        .collect()
}

#[test]
fn hbase_with_the_muzzled_changes_analyzes_like_the_muzzled_model() {
    let hbase = shipped("hbase");
    let muzzled = shipped("muzzled-hbase");
    let result = what_if_ok(
        &hbase,
        &[
            "combine RPC Read + RPC Respond as RPC Read/Respond",
            "set RPC Read/Respond.scheduling = pluggable",
            "set Data Stream.scheduling = pluggable",
            "set Data Xceive.scheduling = pluggable",
            "set Data Xceive (replica).scheduling = pluggable",
        ],
    );
    assert_eq!(
        shape(&result.after.problems),
        shape(&analyze(&muzzled).problems)
    );
}

#[test]
fn changes_that_cannot_apply_are_errors_not_panics() {
    let hbase = shipped("hbase");
    use ChangeErrorKind::{Conflict, UnknownStage};
    for (change, needle, kind) in [
        (
            "set Nowhere.scheduling = pluggable",
            "no stage `Nowhere`",
            UnknownStage,
        ),
        (
            "split Mem Flush",
            "splitting by resource needs at least two",
            Conflict,
        ),
        (
            "combine RPC Read + Data Xceive (replica) as X",
            "different hosts",
            Conflict,
        ),
        (
            "combine RPC Read + RPC Respond as Mem Flush",
            "already exists",
            Conflict,
        ),
        ("combine RPC Read as X", "at least two", Conflict),
    ] {
        let e = what_if(&hbase, &changes(&[change])).unwrap_err();
        assert_eq!(e.kind, kind, "{change}");
        let err = e.to_string();
        assert!(err.contains(needle), "{change}: {err}");
    }
}

#[test]
fn the_original_model_is_left_untouched() {
    let hbase = shipped("hbase");
    let before = hbase.clone();
    let r = what_if_ok(
        &hbase,
        &["async RPC Handle", "set RPC Handle.scheduling = general"],
    );
    assert_eq!(hbase, before);
    assert_eq!(
        r.model.stage("RPC Handle").unwrap().scheduling,
        Scheduling::General
    );
    assert_eq!(r.before, analyze(&hbase));
}

#[test]
fn what_if_json_lists_resolved_findings() {
    let r = what_if_ok(&model(FIG9A), &["split Req Handle"]);
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(v["resolved"][0]["kind"], "unknown_resource_usage");
    assert_eq!(v["after"], serde_json::json!([]));
}
