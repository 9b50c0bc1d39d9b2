//! Each mechanism of the TAM service model in isolation, on a tiny model with a
//! hand-computed expectation (seeds/004 §3's five problems), and the spec errors.

mod support;

use fairlane_sim::tam::TamRuns;
use fairlane_sim::tam::{run_all, TamRun, TamSpecFile};
use fairlane_sim::{RunOptions, Runs};
use support::with;

fn runs(text: &str) -> Vec<TamRun> {
    let spec = TamSpecFile::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
    run_all(&spec.spec, 1, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    match TamSpecFile::parse(text, "bad.toml") {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn close(x: f64, want: f64, rel: f64) -> bool {
    (x - want).abs() <= rel * want.abs()
}

/// The first clients' throughputs are `want` (requests/s), each within `rel` of it.
fn assert_throughputs(r: &TamRun, want: &[f64], rel: f64) {
    assert!(r.clients.len() >= want.len(), "{:?}", r.clients);
    for (c, &w) in r.clients.iter().zip(want) {
        assert!(close(c.throughput, w, rel), "{c:?}");
    }
}

/// One stage `S` of the given scheduling, disk-heavy requests of 10 ms (1 MB at 100 MB/s),
/// C1 with 10 client threads and C2 with 30.
fn disk_stage(scheduling: &str, threads: &str) -> String {
    let text = include_str!("testdata/tam_disk_stage.toml");
    let text = with(text, "\"on_demand\"", &format!("\"{scheduling}\""));
    with(
        &text,
        "[[simulation.request]]",
        &format!("{threads}\n[[simulation.request]]"),
    )
}

#[test]
fn an_on_demand_stage_lets_the_heavier_client_take_the_disk_in_proportion_to_its_threads() {
    // No queue, no scheduler: all 40 requests wait at the disk in arrival order, so each
    // client gets its share of the 100 requests/s by its threads: 25 and 75.
    let r = &runs(&disk_stage("on_demand", ""))[0];
    let (c1, c2) = (r.clients[0].throughput, r.clients[1].throughput);
    assert!(close(c1, 25.0, 0.03), "{c1}");
    assert!(close(c2, 75.0, 0.03), "{c2}");
    // Its report says so: no threads to count and no scheduler.
    assert_eq!(r.stages[0].threads, None);
    assert_eq!(r.stages[0].scheduler, "none");
    // A pluggable stage of one thread with WFQ shares the disk equally instead: 50 / 50.
    let r = &runs(&disk_stage(
        "pluggable",
        "[simulation.stage.S]\nthreads = 1\nscheduler = \"wfq\"",
    ))[0];
    let (c1, c2) = (r.clients[0].throughput, r.clients[1].throughput);
    assert!(close(c1, 50.0, 0.03) && close(c2, 50.0, 0.03), "{c1} {c2}");
}

fn blocking(blocks: bool) -> String {
    let text = include_str!("testdata/tam_blocking.toml");
    if !blocks {
        return text.to_string();
    }
    with(
        text,
        "downstream = [\"B\"]\n",
        "downstream = [\"B\"]\nblocks_on = [\"B\"]\n",
    )
}

#[test]
fn a_blocked_thread_is_not_available_to_other_requests() {
    // B's disk has 10 channels of 10 MB/s: a visit takes 10 ms and never waits. A's two
    // threads each hold a request for 1 µs + 10 ms when A blocks on B: 2 / 10.001 ms ≈ 200/s.
    let r = &runs(&blocking(true))[0];
    let x = r.clients[0].throughput;
    assert!(close(x, 2.0 / 0.010001, 0.01), "{x}");
    let a = &r.stages[0];
    assert!(a.blocked_mean > 1.9, "{}", a.blocked_mean);
    // Without blocking A's threads are free after 1 µs: the 10 client threads all reach
    // the disk, ≈ 10 / 10 ms = 1000/s.
    let r = &runs(&blocking(false))[0];
    let x = r.clients[0].throughput;
    assert!(close(x, 10.0 / 0.010001, 0.01), "{x}");
    assert_eq!(r.stages[0].blocked_mean, 0.0);
}

fn priority(ordered: bool) -> String {
    let text = include_str!("testdata/tam_priority.toml");
    with(text, "ordering = false", &format!("ordering = {ordered}"))
}

#[test]
fn an_ordered_stage_ignores_a_priority_schedulers_order() {
    // Priority: `high` always has a request queued, so it takes the whole 1000/s.
    let r = &runs(&priority(false))[0];
    assert_throughputs(r, &[1000.0], 0.01);
    assert_eq!(r.clients[1].completed, 0);
    assert_eq!(r.stages[0].scheduler, "priority");
    // Ordered: arrival order whatever the scheduler says; 5 threads each, 500/s each.
    let r = &runs(&priority(true))[0];
    assert_throughputs(r, &[500.0, 500.0], 0.01);
    assert_eq!(r.stages[0].scheduler, "priority (ordered)");
}

fn two_stages(host_b: u32) -> String {
    let text = include_str!("testdata/tam_two_hosts.toml");
    with(text, "host = 2", &format!("host = {host_b}"))
}

#[test]
fn two_stages_on_one_host_share_its_cpu() {
    // 1 M cycles at 1 GHz is 1 ms. On separate hosts each stage runs 1000/s; on one host
    // the two stages' threads take turns on its one core: 500/s each.
    let r = &runs(&two_stages(2))[0];
    for c in &r.clients {
        assert!(close(c.throughput, 1000.0, 0.01), "{c:?}");
    }
    let r = &runs(&two_stages(1))[0];
    for c in &r.clients {
        assert!(close(c.throughput, 500.0, 0.01), "{c:?}");
    }
}

fn unknown(known: bool) -> String {
    let text = include_str!("testdata/tam_unknown.toml");
    if known {
        return text.to_string();
    }
    let unknown = r#"unknown = { resource = "io", hit_ratio = 0.0, hit = 0, miss = 900_000 }"#;
    with(text, "io_bytes = 900_000", unknown)
}

#[test]
fn an_unknown_cost_is_revealed_only_at_run_time() {
    // Known: WFQ sees 1 ms against 10 ms and gives each client half the thread:
    // C1 500/s, C2 50/s.
    let r = &runs(&unknown(true))[0];
    assert_throughputs(r, &[500.0, 50.0], 0.03);
    // Unknown: the scheduler is told 1 ms for both; the 9 ms of disk appear only when the
    // thread runs. WFQ alternates, 11 ms a pair: both ≈ 90.9/s, and C2 holds the thread
    // 10/11 of the time.
    let r = &runs(&unknown(false))[0];
    for c in &r.clients {
        assert!(close(c.throughput, 1000.0 / 11.0, 0.03), "{c:?}");
    }
    let s = &r.stages[0];
    let share = s.thread_seconds[1] / (s.thread_seconds[0] + s.thread_seconds[1]);
    assert!(close(share, 10.0 / 11.0, 0.02), "{share}");
}

#[test]
fn same_spec_and_seed_give_the_same_run() {
    let strip = |runs: Vec<TamRun>| TamRuns { runs }.untimed_json();
    let text = unknown(false).replace("hit_ratio = 0.0", "hit_ratio = 0.5");
    assert_eq!(strip(runs(&text)), strip(runs(&text)));
}

const TWO: &str = include_str!("testdata/tam_two_stages.toml");

#[test]
fn a_path_through_a_missing_stage_names_the_file_and_field() {
    let e = err(&format!(
        "{TWO}[simulation]\n[[simulation.request]]\nname = \"r\"\npath = [{{ stage = \"A\" }}, {{ stage = \"Disk\" }}]\n"
    ));
    assert!(
        e.starts_with("bad.toml: simulation.request[0].path[1].stage:") && e.contains("`Disk`"),
        "{e}"
    );
}

#[test]
fn a_blocks_on_cycle_is_refused_up_front_naming_the_stages() {
    let text = TWO
        .replace(
            "downstream = [\"B\"]",
            "downstream = [\"B\"]\nblocks_on = [\"B\"]",
        )
        .replace(
            "resources = { io = true }",
            "resources = { io = true }\ndownstream = [\"A\"]\nblocks_on = [\"A\"]",
        );
    let e = err(&text);
    assert!(e.contains("blocks_on") && e.contains("A → B → A"), "{e}");
}

#[test]
fn an_unknown_scheduler_is_named_with_each_known_one_once() {
    let e = err(&disk_stage(
        "pluggable",
        "[simulation.stage.S]\nscheduler = \"wfqq\"",
    ));
    assert!(
        e.contains("simulation.stage.S.scheduler") && e.contains("unknown scheduler `wfqq`"),
        "{e}"
    );
    let known = e.split("known: ").nth(1).unwrap_or_else(|| panic!("{e}"));
    let names: Vec<&str> = known.split(", ").collect();
    for name in ["fifo", "priority", "wfq", "2dfq", "edf"] {
        assert_eq!(
            names.iter().filter(|n| **n == name).count(),
            1,
            "{name} in {e}"
        );
    }
}

#[test]
fn a_zero_capacity_resource_is_refused() {
    for (table, field) in [
        (
            "[simulation.host.1]\ncpu_cores = 0",
            "simulation.host.1.cpu_cores",
        ),
        (
            "[simulation.host.1]\ndisk_mbps = 0",
            "simulation.host.1.disk_mbps",
        ),
        (
            "[simulation.host.1]\nnet_gbps = 0.0",
            "simulation.host.1.net_gbps",
        ),
        (
            "[simulation.stage.A]\nthreads = 0",
            "simulation.stage.A.threads",
        ),
    ] {
        let e = err(&format!("{TWO}{table}\n"));
        assert!(e.starts_with(&format!("bad.toml: {field}:")), "{e}");
        assert!(e.contains("zero-capacity"), "{e}");
    }
}

#[test]
fn unknown_simulation_keys_are_refused_and_tam_check_ignores_the_section() {
    let e = err(&format!("{TWO}[simulation]\nduraton = 3.0\n"));
    assert!(
        e.contains("simulation.duraton") && e.contains("unknown field"),
        "{e}"
    );
    let text = format!("{TWO}[simulation]\nduration = 3.0\n");
    let m = fairlane_tam::Model::from_toml(&text).unwrap();
    assert_eq!(m.stages.len(), 2);
    assert!(fairlane_tam::Model::from_toml(&format!("{TWO}[simulatoin]\n")).is_err());
}

#[test]
fn a_run_time_deadlock_is_reported_with_the_stages() {
    // A blocks on B, and the path visits A twice before B: A's one thread, held until B,
    // waits for itself.
    let text = format!(
        "{}[simulation]\nduration = 5.0\n[simulation.stage.A]\nthreads = 1\n\
         [[simulation.request]]\nname = \"r\"\npath = [{{ stage = \"A\", cpu_us = 1 }}, \
         {{ stage = \"A\", cpu_us = 1 }}, {{ stage = \"B\", io_bytes = 1000 }}]\n",
        TWO.replace(
            "downstream = [\"B\"]",
            "downstream = [\"B\"]\nblocks_on = [\"B\"]"
        )
    );
    let spec = TamSpecFile::parse(&text, "t.toml").unwrap();
    let e = run_all(&spec.spec, 1, &mut |_| {}).unwrap_err().to_string();
    assert!(e.contains("deadlock") && e.contains("`A`"), "{e}");
}

#[test]
fn every_shipped_model_simulates_with_the_default_workload() {
    let models = support::shipped("models", "");
    for p in &models {
        let mut spec = fairlane_sim::load(p).unwrap_or_else(|e| panic!("{e}"));
        spec.set("duration", toml::Value::Float(1.0)).unwrap();
        let opts = RunOptions {
            max_events: u64::MAX,
            ..RunOptions::default()
        };
        let all = spec
            .run(&opts, &mut |_| {})
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        let runs = &all
            .as_any()
            .downcast_ref::<TamRuns>()
            .unwrap_or_else(|| panic!("{}: not a TAM run", p.display()))
            .runs;
        assert!(
            runs[0].clients.iter().all(|c| c.completed > 0),
            "{}",
            p.display()
        );
    }
    assert!(models.len() >= 6, "{}", models.len());
}

#[test]
fn every_shipped_tam_experiment_parses() {
    let specs = support::shipped("experiments", "tam-");
    for p in &specs {
        assert!(
            fairlane_sim::load(p).is_ok_and(|s| s.as_any().is::<TamSpecFile>()),
            "{}",
            p.display()
        );
    }
    assert!(specs.len() >= 11, "{}", specs.len());
}

/// `[[sweep]]` in a TAM file: each point sets fields of `[simulation]` by the same paths as
/// `--set`, runs under every scheduler, and is labelled in the JSON; `--jobs` changes nothing
/// but the wall time.
#[test]
fn a_tam_sweep_runs_each_point_under_each_scheduler() {
    // One stage of one I/O thread, the default clients (8 threads each), 100 kB requests,
    // WFQ and FIFO; the points: as written (5 s), and C2 of 24 threads for 4 s.
    let text = include_str!("testdata/tam_sweep.toml");
    let spec = fairlane_sim::parse(text, "sweep.toml", ".".into()).unwrap();
    assert_eq!(spec.points().unwrap(), 2);
    assert_eq!(spec.planned_runs().unwrap(), 4);
    let run = |jobs| {
        let opts = RunOptions {
            jobs,
            ..RunOptions::default()
        };
        spec.run(&opts, &mut |_| {}).unwrap()
    };
    let all = run(2);
    let runs = &all.as_any().downcast_ref::<TamRuns>().unwrap().runs;
    let points: Vec<(&str, &str)> = runs
        .iter()
        .map(|r| (r.label.as_str(), r.scheduler.as_str()))
        .collect();
    assert_eq!(
        points,
        [
            ("C2 8", "wfq"),
            ("C2 8", "fifo"),
            ("C2 24", "wfq"),
            ("C2 24", "fifo")
        ]
    );
    // One disk, 1000 requests a second (1 ms each). WFQ shares it evenly whatever C2's
    // threads; FIFO by threads: 8 of 16, then 24 of 32 (the default C1 has 8).
    let c2 = |r: &TamRun| r.clients[1].throughput;
    assert!(close(c2(&runs[0]), 500.0, 0.02) && close(c2(&runs[2]), 500.0, 0.02));
    assert!(close(c2(&runs[1]), 500.0, 0.02) && close(c2(&runs[3]), 750.0, 0.02));
    assert_eq!(runs[3].sim_seconds, 4.0);
    assert_eq!(all.summary_json()["runs"][3]["label"], "C2 24");
    assert_eq!(all.untimed_json(), run(1).untimed_json());
    // A point that names nothing says which point and which path.
    let bad = text.replace("client.C2.threads", "client.C9.threads");
    let e = fairlane_sim::parse(&bad, "sweep.toml", ".".into())
        .unwrap()
        .run(&RunOptions::default(), &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("sweep.toml: set.\"client.C9.threads\" (point \"C2 24\")")
            && e.contains("\"C9\""),
        "{e}"
    );
}
