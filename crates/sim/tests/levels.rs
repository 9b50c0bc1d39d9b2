//! Priority levels in pool and black-box specs (`[[priority_level]]`, a tenant's `level`):
//! a flooded catch-all beside a high level, the borrowing in the levels' series, and bad
//! input named by its field.

mod support;

use fairlane_sim::RunResult;
use support::{assert_edits_refused, err, run};

/// The levels: an exempt level, a high level lending half its seats, the catch-all.
const LEVELS: &str = include_str!("testdata/levels.toml");

/// Four WFQ workers of 100 units/s (400 requests/s); a light tenant in the high level
/// from t = 20 s (10 % of the capacity); with `flood`, 50 catch-all tenants offering 20×
/// the capacity together (flat, the light tenant's fair share is 1/51 of the server).
fn spec(levels: bool, flood: bool) -> String {
    let mut s = String::from(
        r#"
name = "levels"
duration = 60.0
warmup = 5.0
schedulers = ["wfq"]
[server]
workers = 4
rate = 100.0
[[tenant]]
name = "api"
level = "high"
start = 20.0
arrival = { kind = "poisson", rate = 40.0 }
cost = { kind = "exponential", mean = 1.0 }
"#,
    );
    if flood {
        s += r#"
[[tenant]]
name = "flood"
count = 50
arrival = { kind = "poisson", rate = 160.0 }
cost = { kind = "exponential", mean = 1.0 }
"#;
    }
    if levels {
        s += LEVELS;
    } else {
        s = s.replace("level = \"high\"\n", "");
    }
    s
}

fn p99(r: &RunResult, name: &str) -> f64 {
    r.tenants
        .iter()
        .find(|t| t.name == name)
        .unwrap()
        .latency_p99
}

/// The largest value of a level's series over `[from, to)`.
fn max_in(series: &[(f64, f64)], from: f64, to: f64) -> f64 {
    series
        .iter()
        .filter(|p| p.0 >= from && p.0 < to)
        .map(|p| p.1)
        .fold(f64::NEG_INFINITY, f64::max)
}

#[test]
fn a_flooded_catch_all_leaves_the_high_level_alone_and_borrows_its_idle_seats() {
    let with = &run(&spec(true, true))[0];
    let alone = &run(&spec(true, false))[0];
    let flat = &run(&spec(false, true))[0];
    let (w, a, f) = (p99(with, "api"), p99(alone, "api"), p99(flat, "api"));
    assert!(w <= 2.0 * a, "high level p99 {w} against {a} alone");
    assert!(f >= 10.0 * w, "flat p99 {f} against {w} with levels");
    assert!(flat.levels.is_empty());
    let names: Vec<&str> = with.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["exempt", "high", "catch-all"]);
    let (high, all) = (&with.levels[1], &with.levels[2]);
    assert_eq!((high.nominal, all.nominal), (2, 2));
    // Before t = 20 s the high level is idle: the catch-all borrows its lendable seat.
    assert_eq!(max_in(&all.seats, 1.0, 20.0), 3.0);
    assert_eq!(max_in(&high.current, 1.0, 20.0), 1.0);
    // Its demand back, the high level gets its nominal seats again within a period.
    assert_eq!(max_in(&high.current, 31.0, 60.0), 2.0);
    assert_eq!(max_in(&all.current, 31.0, 60.0), 2.0);
    // Never more than ServerCL in use by the levels.
    for (i, p) in all.seats.iter().enumerate() {
        assert!(p.1 + high.seats[i].1 <= 4.0, "{p:?}");
    }
}

#[test]
fn priority_level_errors_name_the_field() {
    let base = spec(true, true);
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "level = \"high\"",
            "level = \"hihg\"",
            &["bad.toml", "tenant[0].level", "\"hihg\"", "high, catch-all"],
        ),
        (
            "shares = 1.0\nlendable",
            "shares = 0.0\nlendable",
            &["priority_level[1].shares", "> 0"],
        ),
        (
            "shares = 1.0\nlendable",
            "shares = nan\nlendable",
            &["priority_level[1].shares", "finite"],
        ),
        (
            "shares = 1.0\nlendable",
            "lendable",
            &["priority_level[1].shares", "missing"],
        ),
        (
            "lendable_percent = 50.0",
            "lendable_percent = 150.0",
            &["priority_level[1].lendable_percent", "[0, 100]"],
        ),
        (
            "lendable_percent = 50.0",
            "borrowing_limit_percent = -1.0",
            &["priority_level[1].borrowing_limit_percent", "[0, 100]"],
        ),
        (
            "name = \"catch-all\"",
            "name = \"low\"",
            &["priority_level", "\"catch-all\"", "exempt, high, low"],
        ),
        (
            "workers = 4",
            "workers = 1",
            &["server.workers", "2 non-exempt priority levels"],
        ),
        (
            "exempt = true",
            "exempt = true\nshares = 2.0",
            &["priority_level[0].shares", "exempt"],
        ),
        (
            "name = \"high\"",
            "name = \"catch-all\"",
            &["priority_level[2].name", "same name"],
        ),
        (
            "exempt = true",
            "exempt = true\nqueue_limit = 5",
            &["priority_level[0]", "unknown field `queue_limit`"],
        ),
    ];
    assert_edits_refused(&base, cases);
    // A level named without levels; and the black box's depth as ServerCL.
    let e = err(&spec(false, true).replace("name = \"api\"", "name = \"api\"\nlevel = \"x\""));
    assert!(
        e.contains("tenant[0].level") && e.contains("no [[priority_level]]"),
        "{e}"
    );
    let bb = base.replace(
        "workers = 4",
        "model = \"blackbox\"\ncomponents = 4\ndepth = { min = 1, max = 8 }",
    );
    let e = err(&bb);
    assert!(
        e.contains("server.depth.min") && e.contains("ServerCL"),
        "{e}"
    );
}

#[test]
fn a_black_box_shares_its_depth_among_levels() {
    let bb = spec(true, true).replace(
        "workers = 4",
        "model = \"blackbox\"\ncomponents = 4\ndepth = 4",
    );
    let r = &run(&bb)[0];
    let all = &r.levels[2];
    assert_eq!(max_in(&all.seats, 1.0, 20.0), 3.0);
    let flat = &run(&spec(false, true).replace(
        "workers = 4",
        "model = \"blackbox\"\ncomponents = 4\ndepth = 4",
    ))[0];
    assert!(p99(flat, "api") > 10.0 * p99(r, "api"));
}
