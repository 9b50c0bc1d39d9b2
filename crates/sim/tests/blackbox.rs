//! The black-box server of seeds/002 §5: closed-network throughput, exponential service,
//! FIFO components, the depth bound, determinism, spec errors, periodic ON/OFF clients.
//! Statistical checks state their tolerance; runs are long enough that it holds with a
//! wide margin for the fixed seeds used.

mod support;

use fairlane_sim::RunResult;
use support::{assert_edits_refused, err, run};

/// One backlogged client keeping far more than D requests outstanding: the server always
/// holds exactly D.
fn backlogged(depth: usize, routing: &str, schedulers: &str) -> String {
    format!(
        r#"
name = "closed"
duration = 300.0
warmup = 10.0
schedulers = [{schedulers}]
[server]
model = "blackbox"
components = 6
rate = 100.0
routing = "{routing}"
depth = {depth}
[[tenant]]
name = "a"
arrival = {{ kind = "backlogged", outstanding = 200 }}
cost = {{ kind = "constant", value = 1.0 }}
"#
    )
}

fn throughput(r: &RunResult) -> f64 {
    r.tenants[0].completed as f64 / (r.sim_seconds - 10.0)
}

#[test]
fn random_routing_is_a_closed_network_of_k_queues() {
    // K = 6 exponential queues of μ = 100/s with D customers routed uniformly:
    // X(D) = K·μ·D / (D + K − 1) (product form; every state equally likely).
    for d in [1usize, 4, 8, 32] {
        let rs = run(&backlogged(d, "random", "\"fifo\", \"sfq\""));
        let want = 600.0 * d as f64 / (d as f64 + 5.0);
        for r in &rs {
            let got = throughput(r);
            assert!(
                (got / want - 1.0).abs() < 0.03,
                "D = {d} under {}: {got:.1} IO/s, formula {want:.1}",
                r.scheduler
            );
            let bb = r.blackbox.as_ref().unwrap();
            assert_eq!(bb.max_outstanding, d);
            assert_eq!(bb.over_depth, 0);
            assert!((bb.mean_outstanding - d as f64).abs() < 0.05 * d as f64);
        }
        // Both schedulers see the same requests with the same service times.
        assert_eq!(rs[0].tenants[0].completed, rs[1].tenants[0].completed);
    }
}

#[test]
fn shared_routing_is_one_queue_feeding_k_servers() {
    // D customers at an M/M/K station: min(D, K) busy, X = μ·min(D, K).
    for d in [2usize, 6, 16] {
        let r = &run(&backlogged(d, "shared", "\"fifo\""))[0];
        let want = 100.0 * d.min(6) as f64;
        let got = throughput(r);
        assert!(
            (got / want - 1.0).abs() < 0.03,
            "D = {d}: {got:.1} IO/s, want {want:.1}"
        );
    }
}

/// One component, Poisson arrivals at `lambda`, depth `d`.
fn mm1(lambda: f64, d: usize) -> RunResult {
    run(&format!(
        r#"
name = "mm1"
duration = 2000.0
warmup = 20.0
schedulers = ["fifo"]
[server]
model = "blackbox"
components = 1
rate = 100.0
depth = {d}
[[tenant]]
name = "a"
arrival = {{ kind = "poisson", rate = {lambda} }}
cost = {{ kind = "constant", value = 1.0 }}
"#
    ))
    .remove(0)
}

#[test]
fn service_is_exponential_with_mean_cost_over_rate() {
    // Nearly no queueing (λ = 2/s on μ = 100/s): response ≈ service, exponential of mean
    // 10 ms: median 10·ln 2 ≈ 6.93 ms, p99 10·ln 100 ≈ 46.1 ms. M/M/1 mean 1/(μ − λ).
    let r = mm1(2.0, 1);
    let t = &r.tenants[0];
    let mean = 1.0 / (100.0 - 2.0);
    assert!(
        (t.latency_mean / mean - 1.0).abs() < 0.05,
        "{}",
        t.latency_mean
    );
    let p50 = 0.01 * 2f64.ln();
    let p99 = 0.01 * 100f64.ln();
    assert!(
        (t.latency_p50 / p50 - 1.0).abs() < 0.08,
        "{}",
        t.latency_p50
    );
    assert!((t.latency_p99 / p99 - 1.0).abs() < 0.1, "{}", t.latency_p99);
}

#[test]
fn a_component_is_a_fifo_queue() {
    // With D large the queue forms inside the component: M/M/1 at ρ = 0.6, mean response
    // 1/(μ − λ) = 25 ms whether it waits in the scheduler (D = 1) or in the disk (D = 64).
    for d in [1usize, 64] {
        let t = &mm1(60.0, d).tenants[0];
        assert!(
            (t.latency_mean / 0.025 - 1.0).abs() < 0.06,
            "D = {d}: {}",
            t.latency_mean
        );
    }
}

const TWO: &str = include_str!("testdata/blackbox_two.toml");

#[test]
fn same_spec_and_seed_same_black_box_output() {
    let strip = |rs: &[RunResult]| support::fingerprint(rs);
    let (a, b) = (run(TWO), run(TWO));
    assert_eq!(strip(&a), strip(&b));
    for (x, y) in a.iter().zip(&b) {
        let (x, y) = (x.blackbox.as_ref().unwrap(), y.blackbox.as_ref().unwrap());
        assert_eq!(format!("{x:?}"), format!("{y:?}"));
    }
    let s = strip(&a);
    assert!(s.contains("\"blackbox\""), "{s}");
}

#[test]
fn periodic_on_off_is_on_exactly_half_the_time() {
    let rs = run(TWO);
    let bb = rs[0].blackbox.as_ref().unwrap();
    let bursty = &bb.tenants[1];
    assert_eq!(bursty.target, Some(0.01));
    // ON during [0, 5), [10, 15), …: the interval ending at t has completions only when
    // [t − 1, t) overlaps an ON period (allowing a straggler right after the end).
    for &(t, x) in &bursty.throughput {
        let phase = (t - 1.0).rem_euclid(10.0);
        if (6.0..9.0).contains(&phase) {
            assert_eq!(x, 0.0, "completions in an OFF period at t = {t}");
        }
    }
    let t = &rs[0].tenants[1];
    let rate = t.arrived as f64 / 38.0;
    assert!((rate / 60.0 - 1.0).abs() < 0.1, "{rate}");
    // Interval means are recorded, and the depth series is flat at D.
    assert!(!bursty.response.is_empty());
    assert!(bb.depth.iter().all(|&(_, d)| d == 8.0));
    assert_eq!(bb.max_outstanding, 8);
}

#[test]
fn black_box_spec_errors_name_the_field() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "model = \"blackbox\"",
            "model = \"blackboxx\"",
            &["server.model", "workers, blackbox"],
        ),
        (
            "components = 6",
            "components = 0",
            &["server.components", "between 1 and 4096"],
        ),
        ("components = 6\n", "", &["server.components", "missing"]),
        (
            "depth = 8",
            "depth = 8\nrouting = \"striped\"",
            &["server.routing", "random, shared"],
        ),
        ("depth = 8", "depth = 0", &["server.depth", "between 1"]),
        ("depth = 8\n", "", &["server.depth", "missing"]),
        (
            "depth = 8",
            "depth = \"deep\"",
            &["server.depth", "integer D or a table"],
        ),
        (
            "depth = 8",
            "depth = { min = 8, max = 4 }",
            &["server.depth.max", "≥ min"],
        ),
        (
            "depth = 8",
            "depth = { min = 1, max = 4, initial = 9 }",
            &["server.depth.initial", "between min"],
        ),
        (
            "depth = 8",
            "depth = { min = 1, max = 4, step = 2 }",
            &["server.depth", "unknown field `step`"],
        ),
        (
            "depth = 8",
            "depth = { min = 1, max = 4, interval = -1.0 }",
            &["server.depth.interval", "> 0"],
        ),
        (
            "depth = 8",
            "depth = 8\nworkers = 4",
            &["server.workers", "`depth`"],
        ),
        (
            "target = 0.01",
            "target = -0.01",
            &["tenant[1].target", "> 0"],
        ),
        (
            "periodic = true",
            "periodic = 1",
            &["tenant[1].arrival", "invalid type"],
        ),
    ];
    assert_edits_refused(TWO, cases);
    // Black-box fields on the worker model.
    let e = err("name = \"w\"\nduration = 1.0\nschedulers = [\"fifo\"]\n[server]\nworkers = 2\ndepth = 4\n[[tenant]]\nname = \"a\"\narrival = { kind = \"poisson\", rate = 1.0 }\ncost = { kind = \"constant\", value = 1.0 }\n");
    assert!(e.contains("server.depth") && e.contains("blackbox"), "{e}");
    let e = err("name = \"w\"\nduration = 1.0\nschedulers = [\"fifo\"]\n[server]\nrate = 2.0\n[[tenant]]\nname = \"a\"\narrival = { kind = \"poisson\", rate = 1.0 }\ncost = { kind = \"constant\", value = 1.0 }\n");
    assert!(e.contains("server.workers") && e.contains("missing"), "{e}");
}

#[test]
fn capacity_is_split_over_components() {
    let text = backlogged(64, "random", "\"fifo\"").replace("rate = 100.0", "capacity = 600.0");
    let r = &run(&text)[0];
    let want = 600.0 * 64.0 / 69.0;
    assert!((throughput(r) / want - 1.0).abs() < 0.03);
    assert!((r.utilization - want / 600.0 * 290.0 / 300.0).abs() < 0.05);
}

/// [`TWO`] with this `depth` table and client 2's response-time `target`, run.
fn adaptive(depth: &str, target: &str) -> Vec<RunResult> {
    run(&TWO
        .replace("depth = 8", &format!("depth = {depth}"))
        .replace("target = 0.01", &format!("target = {target}")))
}

#[test]
fn adaptive_depth_changes_are_honoured() {
    // A 5 ms target for client 2 is below one disk's 10 ms mean service: every ON period
    // misses. The controller halves D, sees that halving did not help, and holds a floor
    // instead of collapsing; in OFF periods only client 1 is judged and D may grow. Whatever
    // it decides, the server never holds more than D.
    for r in &adaptive(
        "{ min = 2, max = 32, initial = 16, interval = 0.5 }",
        "0.005",
    ) {
        let bb = r.blackbox.as_ref().unwrap();
        assert_eq!(bb.over_depth, 0, "{}", r.scheduler);
        assert!(bb.max_outstanding <= 32);
        assert_eq!(
            bb.depth.first().map(|p| p.1),
            Some(8.0),
            "16 → 8 at t = 0.5"
        );
        assert!(bb.depth.iter().all(|p| (2.0..=32.0).contains(&p.1)));
        assert!(
            bb.depth.windows(2).any(|w| w[1].1 > w[0].1),
            "shrinking did not help, so D went back up at least once"
        );
    }
    // A loose target lets it grow towards max.
    for r in &adaptive("{ min = 1, max = 32, initial = 2, interval = 0.5 }", "5.0") {
        let bb = r.blackbox.as_ref().unwrap();
        assert_eq!(bb.over_depth, 0);
        assert!(bb.depth.last().unwrap().1 > 20.0, "{:?}", bb.depth.last());
        assert!(bb.max_outstanding > 2);
    }
}

#[test]
fn request_windows_idle_on_purpose_without_stalling() {
    // RW(D) answers RetryAt(∞) when every flow with queued requests is at its window; the
    // engine schedules nothing for it and asks again at the next completion.
    let text = TWO.replace("[\"fifo\", \"sfq\"]", "[\"rw\", \"fsfq\", \"edf\"]");
    for r in &run(&text) {
        let bb = r.blackbox.as_ref().unwrap();
        assert_eq!(bb.over_depth, 0);
        for t in &r.tenants {
            // Light load (320 IO/s at most against 369): everything that arrived is served.
            assert!(
                t.completed as f64 >= 0.98 * t.arrived as f64,
                "{} {}: {} of {}",
                r.scheduler,
                t.name,
                t.completed,
                t.arrived
            );
        }
    }
    // RW caps the heavy flow at its window: 2/3 of D = 8 → at most 5 of its requests inside.
    let heavy = TWO
        .replace("[\"fifo\", \"sfq\"]", "[\"rw\"]")
        .replace("rate = 200.0", "rate = 2000.0");
    let r = &run(&heavy)[0];
    assert_eq!(r.blackbox.as_ref().unwrap().over_depth, 0);
    assert!(r.tenants[0].completed > 1000);
}
