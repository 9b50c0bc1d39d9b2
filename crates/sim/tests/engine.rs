//! The one interface: every spec kind through `Experiment`, errors against the spec's own kind,
//! a user-edited copy of a shipped reservation spec, determinism of all three service
//! models, and the limits that refuse absurd specs.

mod support;

use std::path::{Path, PathBuf};

use fairlane_sim::cores::{CoresRuns, DbSpecFile};
use fairlane_sim::{AnyError, Experiment, RunOptions, Runs, SpecFile};

fn experiments() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments")
}

fn opts(jobs: usize, max_events: u64) -> RunOptions {
    RunOptions {
        jobs,
        max_events,
        point: None,
    }
}

fn run(spec: &dyn Experiment) -> Result<Box<dyn Runs>, AnyError> {
    spec.run(
        &opts(2, fairlane_sim::events::DEFAULT_MAX_EVENTS),
        &mut |_| {},
    )
}

/// The pool spec behind an experiment.
fn pool(e: &dyn Experiment) -> &SpecFile {
    e.as_any().downcast_ref::<SpecFile>().expect("a pool spec")
}

const POOL: &str = include_str!("testdata/pool_wfq_drr.toml");

const BLACKBOX: &str = include_str!("testdata/blackbox_bb.toml");

const CORES: &str = include_str!("testdata/cores_gold_bully.toml");

fn parse(text: &str) -> Result<Box<dyn Experiment>, String> {
    fairlane_sim::parse(text, "t.toml", ".".into()).map_err(|e| e.to_string())
}

/// Everything a run reports except its wall time.
fn fingerprint(runs: &dyn Runs) -> String {
    runs.untimed_json().to_string()
}

#[test]
fn every_service_model_is_deterministic() {
    for text in [POOL, BLACKBOX, CORES] {
        let spec = parse(text).unwrap();
        let a = fingerprint(run(spec.as_ref()).unwrap().as_ref());
        let b = fingerprint(spec.run(&opts(1, u64::MAX), &mut |_| {}).unwrap().as_ref());
        assert_eq!(a, b, "{}", spec.name());
        // A different seed gives a different run (the streams are used).
        let mut other = spec.clone();
        other.set("seed", toml::Value::Integer(99)).unwrap();
        assert_ne!(
            a,
            fingerprint(run(other.as_ref()).unwrap().as_ref()),
            "{}",
            spec.name()
        );
    }
}

#[test]
fn the_kind_is_read_from_the_server_model() {
    let is_pool = |t: &str| parse(t).unwrap().as_any().is::<SpecFile>();
    assert!(is_pool(POOL));
    assert!(is_pool(BLACKBOX));
    assert!(parse(CORES).unwrap().as_any().is::<DbSpecFile>());
}

/// The error the reader gives `base` with `from` replaced by `to`: from parsing (then it
/// starts with the file's name), or, for a pool spec that parses, from resolving its points.
fn refusal(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from}");
    match parse(&base.replace(from, to)) {
        Err(e) => {
            assert!(e.starts_with("t.toml: "), "{e}");
            e
        }
        Ok(spec) => pool(spec.as_ref())
            .scenarios()
            .expect_err("refused")
            .to_string(),
    }
}

/// `(base, from, to, wants)`: `base` with `from` replaced by `to` is refused with an error
/// containing every one of `wants`.
const REFUSED: &[(&str, &str, &str, &[&str])] = &[
    // A database field in a pool spec: the fields listed are the pool spec's own, and the
    // hint names the other kind.
    (
        POOL,
        "duration = 3.0",
        "duration = 3.0\nutilization_cap = 95.0",
        &[
            "unknown field `utilization_cap`",
            "`speed`",
            "`server`",
            "model = \"cores\"",
        ],
    ),
    // `cores` in a pool's [server].
    (POOL, "workers = 2", "cores = 2", &["server", "`workers`"]),
    // A reservation scheduler on a pool.
    (
        POOL,
        "\"drr\"]",
        "\"ldf\"]",
        &["schedulers[1]", "CPU-reservation"],
    ),
    // DRR's quantum too small to make progress.
    (
        POOL,
        "schedulers = [\"wfq\", \"drr\"]",
        "schedulers = [\"wfq\"]\n[[scheduler]]\npreset = \"drr\"\nquantum = 1e-300",
        &["scheduler[0].quantum", "too small"],
    ),
    // A pool field in a database spec: the database fields are listed.
    (
        CORES,
        "duration = 4.0",
        "duration = 4.0\nspeed = 2.0",
        &["unknown field `speed`", "`utilization_cap`", "worker-pool"],
    ),
    // A pool's tenant field in a database tenant.
    (
        CORES,
        "res = 40.0",
        "res = 40.0\narrival = { kind = \"backlogged\" }",
        &["tenant[0]", "`workload`"],
    ),
    // The old top-level `cores` is pointed to its new place.
    (
        CORES,
        "server = { model = \"cores\", cores = 4 }",
        "cores = 4",
        &["t.toml: cores:", "[server]"],
    ),
];

#[test]
fn a_field_of_the_other_kind_or_a_bad_value_is_named() {
    for (base, from, to, wants) in REFUSED {
        let e = refusal(base, from, to);
        for w in *wants {
            assert!(e.contains(w), "{to}: error {e:?} lacks {w:?}");
        }
    }
    // A pool spec's error does not list the database spec's fields.
    let e = refusal(
        POOL,
        "duration = 3.0",
        "duration = 3.0\nutilization_cap = 95.0",
    );
    assert!(!e.contains("`tenant`, `sweep`, `max_events`"), "{e}");
}

/// A user copies ldf-table1.toml and edits it: 8 cores, 4 reserved tenants, 6 bullies.
#[test]
fn an_edited_copy_of_ldf_table1_runs_and_reports_each_tenants_cpu() {
    let text = std::fs::read_to_string(experiments().join("ldf-table1.toml")).unwrap();
    let mut doc: toml::Value = toml::from_str(&text).unwrap();
    let t = doc.as_table_mut().unwrap();
    t.remove("sweep");
    t.insert("duration".into(), toml::Value::Float(12.0));
    t["server"]
        .as_table_mut()
        .unwrap()
        .insert("cores".into(), toml::Value::Integer(8));
    let tenants = t["tenant"].as_array_mut().unwrap();
    // Keep T1…T4 (5, 8, 8, 8 %) and the bullies, six of them.
    tenants.retain(|x| {
        let n = x["name"].as_str().unwrap();
        matches!(n, "T1" | "T2" | "T3" | "T4" | "bully")
    });
    let bully = tenants.last_mut().unwrap().as_table_mut().unwrap();
    bully.insert("count".into(), toml::Value::Integer(6));
    let edited = toml::to_string(&doc).unwrap();
    let spec = fairlane_sim::parse(&edited, "my-ldf.toml", ".".into()).unwrap();
    let all = run(spec.as_ref()).unwrap();
    let runs = &all
        .as_any()
        .downcast_ref::<CoresRuns>()
        .expect("a database-server spec")
        .runs;
    assert_eq!(runs.len(), 4);
    let json = all.summary_json();
    for (k, r) in runs.iter().enumerate() {
        let tenants = &json["runs"][k]["tenants"];
        assert_eq!(
            tenants.as_object().unwrap().len(),
            10,
            "4 reserved + 6 bullies"
        );
        let share: f64 = (0..10)
            .map(|i| tenants[&r.tenants[i].name]["cpu_mean"].as_f64().unwrap())
            .sum();
        // The cap (95 %) bounds the total; the server is busy.
        assert!(share <= 95.5 && share > 80.0, "{}: {share}", r.scheduler);
        if r.scheduler == "ldf" {
            for t in &r.tenants[..4] {
                assert!(t.cpu_mean >= t.res - 0.5, "{}: {}", t.name, t.cpu_mean);
            }
        }
    }
    // Without reservations the 10 identical tenants share the server about equally: T1
    // gets more than its 5 %.
    let no_res = runs.iter().find(|r| r.scheduler == "no-res").unwrap();
    assert!(
        no_res.tenants[0].cpu_mean > 7.0,
        "{}",
        no_res.tenants[0].cpu_mean
    );
}

#[test]
fn every_shipped_experiment_parses_as_some_kind() {
    let mut n = 0;
    for p in support::shipped("experiments", "") {
        let spec = fairlane_sim::load(&p).unwrap_or_else(|e| panic!("{e}"));
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        assert_eq!(
            name.starts_with("ldf-"),
            spec.as_any().is::<DbSpecFile>(),
            "{name}"
        );
        spec.planned_runs().unwrap_or_else(|e| panic!("{e}"));
        n += 1;
    }
    assert!(n >= 14, "{n}");
}

#[test]
fn absurd_specs_are_refused_up_front() {
    let refused = |text: String, what: &str| {
        let spec = parse(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
        match run(spec.as_ref()) {
            Err(AnyError::Run(e)) => {
                assert!(
                    e.message.contains("refused") && e.message.contains("--max-events"),
                    "{what}: {e}"
                );
                assert_eq!(e.kind, fairlane_sim::SimErrorKind::EventCap, "{what}");
            }
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
    };
    refused(POOL.replace("rate = 80.0", "rate = 1e12"), "arrival rate");
    refused(
        POOL.replace("duration = 3.0", "duration = 3.0\nspeed = 1e300"),
        "speed",
    );
    refused(POOL.replace("rate = 100.0", "rate = 1e300"), "server rate");
    refused(
        POOL.replace("rate = 100.0", "rate = 100.0\nrefresh = 1e-12"),
        "refresh",
    );
    refused(
        CORES.replace("mean = 0.02 } }", "mean = 0.02 }, quantum = 1e-300 }"),
        "quantum",
    );
}

#[test]
fn the_event_cap_stops_a_run() {
    let spec = parse(POOL).unwrap();
    match spec.run(&opts(1, 1000), &mut |_| {}) {
        Err(AnyError::Run(e)) => {
            assert!(e.message.contains("--max-events"), "{e}");
            assert_eq!(e.kind, fairlane_sim::SimErrorKind::EventCap);
        }
        other => panic!("{:?}", other.map(|_| ())),
    }
}

/// A service model from outside the crate: two workers, the second at half speed. The
/// engine runs it like its own, and measures against its capacity.
struct TwoSpeed;

/// Measured for nothing beyond its requests.
impl fairlane_sim::pool::blackbox::Measure for TwoSpeed {}

impl fairlane_sim::service::Service for TwoSpeed {
    fn slots(&self) -> usize {
        2
    }
    fn capacity(&self) -> f64 {
        150.0
    }
    fn begin(
        &mut self,
        slot: u32,
        work: fairlane_sim::service::Work,
        now: f64,
        at: &mut impl FnMut(f64, u32),
    ) {
        let rate = if slot == 0 { 100.0 } else { 50.0 };
        at(now + work.cost / rate, slot);
    }
    fn fire(
        &mut self,
        idx: u32,
        _now: f64,
        _at: &mut impl FnMut(f64, u32),
    ) -> fairlane_sim::service::Outcome {
        fairlane_sim::service::Outcome::Done { slot: idx }
    }
}

#[test]
fn a_caller_supplied_service_and_scheduler_run_on_the_engine() {
    let text = include_str!("testdata/custom_fifo.toml");
    let spec = parse(text).unwrap();
    let sc = &pool(spec.as_ref()).scenarios().unwrap()[0];
    let sched = fairlane_core::Config::preset("fifo")
        .unwrap()
        .workers(2)
        .build::<fairlane_sim::pool::engine::Job>()
        .unwrap();
    let r = fairlane_sim::pool::engine::run_on(sc, sched, true, TwoSpeed, &mut |_| {}).unwrap();
    // 100 + 50 unit-cost requests per second, for 20 s.
    let done = r.tenants[0].completed as f64;
    assert!((done - 3000.0).abs() <= 2.0, "{done}");
    assert!((r.utilization - 1.0).abs() < 1e-3, "{}", r.utilization);
}
