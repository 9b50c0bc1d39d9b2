//! The LLM server as a kind of spec (`[server] model = "llm"`): every `experiments/vtc-*.toml`
//! runs through the experiment interface, fields change by path, sweeps make points, the
//! outputs are written, and bad input is an error naming the file and the field.

mod support;

use std::path::{Path, PathBuf};

use fairlane_sim::llm::LlmRuns;
use fairlane_sim::{Experiment, RunOptions, Runs};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn specs() -> Vec<PathBuf> {
    support::shipped("experiments", "vtc-")
}

fn load(name: &str) -> Box<dyn Experiment> {
    fairlane_sim::load(&root().join("experiments").join(name)).unwrap_or_else(|e| panic!("{e}"))
}

fn go(e: &dyn Experiment) -> Box<dyn Runs> {
    e.run(&RunOptions::default(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{e}"))
}

fn set(e: &mut dyn Experiment, path: &str, value: &str) {
    let (p, v) = fairlane_sim::doc::assignment(&format!("{path}={value}")).unwrap();
    e.set(&p, v).unwrap_or_else(|e| panic!("{e}"));
}

/// Every VTC spec reads as the LLM kind and runs each of its policies (60 s of arrivals).
#[test]
fn every_vtc_spec_runs_all_its_policies() {
    let all = specs();
    assert_eq!(all.len(), 9, "{all:?}");
    for path in all {
        let mut e = fairlane_sim::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            e.as_any().is::<fairlane_sim::llm::LlmSpecFile>(),
            "{path:?}"
        );
        assert_eq!(e.planned_runs().unwrap(), 6, "{path:?}");
        set(e.as_mut(), "duration", "60.0");
        let runs = go(e.as_ref());
        let json = runs.summary_json();
        assert_eq!(json["kind"], "llm");
        let rs = json["runs"].as_array().unwrap();
        let names: Vec<&str> = rs
            .iter()
            .map(|r| r["scheduler"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["vtc", "fifo", "lcf", "rpm20", "wfqe", "2dfqe"]);
        for r in rs {
            assert!(r["generated_tokens"].as_u64().unwrap() > 0, "{path:?}");
            assert_eq!(r["window"], 60.0);
        }
        assert_eq!(runs.tenants().len(), 6);
        assert!(runs.work().0 > 0);
    }
}

/// `--set` reaches any field by its path, and the spec is checked again.
#[test]
fn fields_change_by_path() {
    let mut e = load("vtc-overload.toml");
    assert_eq!(e.duration(), 360.0);
    set(e.as_mut(), "duration", "30");
    set(e.as_mut(), "schedulers", r#"["vtc", "fifo"]"#);
    // Rates and weights for three clients change together.
    let three: Vec<(String, toml::Value)> = [
        "workload.rates=[0.5, 0.5, 3.0]",
        "workload.weights=[1, 1, 2]",
    ]
    .iter()
    .map(|a| fairlane_sim::doc::assignment(a).unwrap())
    .collect();
    e.set_all(&three).unwrap_or_else(|e| panic!("{e}"));
    set(e.as_mut(), "server.kv_tokens", "5000");
    set(e.as_mut(), "server.batching", r#"{ kind = "mixed" }"#);
    assert_eq!(e.duration(), 30.0);
    assert_eq!(e.planned_runs().unwrap(), 2);
    let runs = go(e.as_ref());
    let r = &runs.as_any().downcast_ref::<LlmRuns>().unwrap().runs[0].result;
    assert_eq!(r.clients.len(), 3);
    assert_eq!(r.clients[2].weight, 2.0);
    // M = 5,000 bounds what the batch holds; the bound follows M.
    assert!(r.max_kv_used < 5000, "{}", r.max_kv_used);
    assert_eq!(r.bound, 2.0 * 2.0 * 5000.0);
    // A change that breaks the spec is refused, naming the field.
    let e2 = e
        .set("workload.output", toml::Value::Integer(3))
        .unwrap_err();
    assert_eq!(e2.field, "workload.output", "{e2}");
}

/// `[[sweep]]` points set fields; each runs under every policy, labelled.
#[test]
fn sweep_points_run_under_every_policy() {
    let text = std::fs::read_to_string(root().join("experiments/vtc-overload.toml")).unwrap()
        + r#"
[[sweep]]
label = "M=5000"
set = { "server.kv_tokens" = 5000, "duration" = 30.0 }

[[sweep]]
label = "weighted"
set = { "workload.weights" = [1.0, 3.0], "duration" = 30.0 }
"#;
    let mut e = fairlane_sim::parse(&text, "sweep.toml", ".".into()).unwrap();
    set(e.as_mut(), "schedulers", r#"["vtc"]"#);
    assert_eq!(e.points().unwrap(), 2);
    let runs = go(e.as_ref());
    let runs = &runs.as_any().downcast_ref::<LlmRuns>().unwrap().runs;
    let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["M=5000", "weighted"]);
    assert!(runs[0].result.max_kv_used < 5000);
    // Weights 1 : 3, both backlogged: VTC serves them about 1 : 3.
    let c = &runs[1].result.clients;
    let ratio = c[1].window_service / c[0].window_service;
    assert!((ratio - 3.0).abs() < 0.3, "{ratio}");
    // One point alone.
    let one = e
        .run(
            &RunOptions {
                point: Some(1),
                ..RunOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
    assert_eq!(one.len(), 1);
    let bad = text.replace("\"server.kv_tokens\" = 5000", "\"server.kv_tokens\" = 100");
    let e = fairlane_sim::parse(&bad, "sweep.toml", ".".into()).unwrap();
    let err = e.run(&RunOptions::default(), &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("sweep.toml: sweep \"M=5000\": server.kv_tokens:"),
        "{msg}"
    );
}

/// The same spec and seed give the same summary; the outputs are written.
#[test]
fn outputs_are_deterministic_and_written() {
    let mut e = load("vtc-poisson-short-long.toml");
    set(e.as_mut(), "duration", "40");
    set(e.as_mut(), "schedulers", r#"["vtc", "fifo"]"#);
    let (a, b) = (go(e.as_ref()), go(e.as_ref()));
    assert_eq!(a.untimed_json(), b.untimed_json());
    let series = a.series_json();
    let rows = series[0].as_array().unwrap();
    for kind in ["service", "first_token", "difference"] {
        assert!(rows.iter().any(|r| r[0] == kind), "{kind}");
    }
    let dir = tempfile::tempdir().unwrap();
    fairlane_sim::experiment::write_outputs(a.as_ref(), dir.path(), "t", "d").unwrap();
    let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    assert_eq!(
        html.matches("<svg").count(),
        3,
        "difference + one service chart per policy"
    );
    for f in ["vtc-clients.csv", "vtc-service.csv", "fifo-difference.csv"] {
        let text = std::fs::read_to_string(dir.path().join("csv").join(f)).unwrap();
        assert!(text.lines().count() > 2, "{f}");
    }
    let mut out = Vec::new();
    a.print(&mut out).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("vtc") && out.contains("fifo"), "{out}");
}

/// Bad input of every kind: an error naming the file and the field, never a panic.
#[test]
fn bad_input_names_the_file_and_field() {
    // Each assignment, refused with an error on the field it sets.
    let same: &[&str] = &[
        r#"workload.suite = "nope""#,
        r#"workload.mode = "gamma""#,
        "schedulers = []",
        "server.kv_tokens = -5",
        "server.kv_tokens = 400",
        "server.kv_tokens = 1",
        "server.max_prefill_tokens = 100",
        "server.max_batch = 0",
        "server.speed.fixed = -1.0",
        "server.speed.per_decode_token = nan",
        "server.colour = 3",
        "workload.input = [0, 5]",
        "workload.output = [1, 99999999999]",
        "workload.rates = [1e9, 1.0]",
        "workload.rates = [0.0, 0.0]",
        "workload.cv = 0.0",
        "workload.on_off = -60.0",
        "duration = -1.0",
        "duration = inf",
        "warmup = 10.0",
        "seed = -3",
        "cost.output_token_weight = -2.0",
        "metrics.sample_every = 0.0",
        "metrics.max_points = 1",
        "tenant = 1",
    ];
    // Assignments refused with an error on another field (`""`: any).
    let other: &[(&str, &str)] = &[
        (r#"schedulers = ["vtc", "nope"]"#, "schedulers[1]"),
        (r#"schedulers = ["rpm0"]"#, "schedulers[0]"),
        (r#"server.model = "cores""#, ""),
        (
            r#"server.batching = { kind = "eager" }"#,
            "server.batching.kind",
        ),
        ("workload.input = [-1, 5]", "workload.input[0]"),
        ("workload.rates = [-1.0, 1.0]", "workload.rates[0]"),
        ("workload.weights = [0.0, 1.0]", "workload.weights[0]"),
    ];
    let cases = same
        .iter()
        .map(|a| (*a, a.split(" = ").next().unwrap()))
        .chain(other.iter().copied());
    for (assignment, field) in cases {
        let mut e = load("vtc-overload.toml");
        let (p, v) = fairlane_sim::doc::assignment(assignment).unwrap();
        let err = match e.set(&p, v) {
            Err(err) => err,
            Ok(()) => panic!("{assignment} accepted"),
        };
        assert!(err.file.ends_with("vtc-overload.toml"), "{err}");
        if !field.is_empty() {
            assert_eq!(err.field, field, "{assignment}: {err}");
        }
        assert!(!err.message.is_empty());
    }
}

/// A run far past the event cap is refused before it starts; one that reaches the cap
/// stops with an error.
#[test]
fn the_event_cap_refuses_or_stops_a_run() {
    let mut e = load("vtc-overload.toml");
    set(e.as_mut(), "server.kv_tokens", "1099511627776");
    set(e.as_mut(), "workload.output", "[4000000000, 4000000001]");
    let err = e.run(&RunOptions::default(), &mut |_| {}).unwrap_err();
    assert!(err.to_string().contains("more than the cap"), "{err}");
    // About 4 million events (each decoded token one), of which the estimate sees half:
    // a cap between the two lets the run start and stops it.
    let mut e = load("vtc-overload.toml");
    set(e.as_mut(), "duration", "3600");
    set(e.as_mut(), "schedulers", r#"["vtc"]"#);
    let opts = RunOptions {
        max_events: 3_000_000,
        ..RunOptions::default()
    };
    match e.run(&opts, &mut |_| {}) {
        Err(err) => assert!(err.to_string().contains("stopped at t ="), "{err}"),
        Ok(_) => panic!("the run passed its cap"),
    }
}

/// The summary has what Python's result table reads: per run a label, a scheduler and
/// tenants by name.
#[test]
fn the_summary_has_runs_labels_and_tenants() {
    let mut e = load("vtc-overload-weighted.toml");
    set(e.as_mut(), "duration", "60");
    set(e.as_mut(), "schedulers", r#"["vtc"]"#);
    let runs = go(e.as_ref());
    let json = runs.summary_json();
    let r = &json["runs"][0];
    assert_eq!(r["label"], "");
    let tenants = r["tenants"].as_object().unwrap();
    assert_eq!(runs.tenants()[0].len(), tenants.len());
    let share = |c: &str| tenants[c]["share"].as_f64().unwrap();
    for (i, c) in ["client0", "client1", "client2", "client3"]
        .iter()
        .enumerate()
    {
        let want = (i + 1) as f64 / 10.0;
        assert!((share(c) - want).abs() < 0.02, "{c}: {}", share(c));
    }
    assert!(matches!(r["max_backlogged_difference"], Value::Number(_)));
}
