//! The `fairlane` binary run through its argument parser: every subcommand, exit codes,
//! `--json` shapes, and errors that name the file and the field.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fairlane(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fairlane"))
        .args(args)
        // From the repository root, as a user runs it (specs and models are found there).
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("run fairlane")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The stderr of a run that must have failed as a usage error (exit 2).
fn refused(out: Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    err
}

/// A fresh directory for one test, removed when dropped (also when the test panics).
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fairlane-cli-{name}-"))
        .tempdir()
        .unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

const SPEC: &str = include_str!("testdata/two_tenants.toml");

fn spec_file(dir: &Path) -> PathBuf {
    let p = dir.join("two.toml");
    std::fs::write(&p, SPEC).unwrap();
    p
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out.stdout)))
}

/// The JSON without wall-clock fields (they differ between any two runs).
fn without_wall_times(mut v: serde_json::Value) -> serde_json::Value {
    for r in v["runs"].as_array_mut().unwrap() {
        let o = r.as_object_mut().unwrap();
        o.remove("wall_seconds");
        o.remove("events_per_second");
    }
    v
}

#[test]
fn simulate_json_gives_every_run_and_tenant() {
    let tmp = temp_dir("sim-json");
    let dir = tmp.path();
    let spec = spec_file(dir);
    let out = fairlane(&["simulate", s(&spec), "--json", "--jobs", "1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = json(&out);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["scheduler"], "wfq");
    assert_eq!(runs[1]["scheduler"], "2dfq");
    for r in runs {
        assert_eq!(r["sim_seconds"], 4.0);
        let small = &r["tenants"]["small"];
        assert!(small["completed"].as_u64().unwrap() > 1000, "{small}");
        assert!(r["tenants"]["large"]["lag_std"].is_number());
    }
}

#[test]
fn simulate_seed_duration_and_jobs() {
    let tmp = temp_dir("sim-flags");
    let dir = tmp.path();
    let spec = spec_file(dir);
    let run = |extra: &[&str]| {
        let mut args = vec!["simulate", s(&spec), "--json"];
        args.extend_from_slice(extra);
        let out = fairlane(&args);
        assert!(out.status.success(), "{}", text(&out.stderr));
        without_wall_times(json(&out))
    };
    let a = run(&["--seed", "11", "--jobs", "1"]);
    let b = run(&["--seed", "11", "--jobs", "2"]);
    assert_eq!(a, b, "same seed, same results, whatever the parallelism");
    let c = run(&["--seed", "12", "--jobs", "2"]);
    assert_ne!(
        a["runs"][0]["tenants"]["small"]["arrived"], c["runs"][0]["tenants"]["small"]["arrived"],
        "another seed, other arrivals"
    );
    let d = run(&["--duration", "2"]);
    assert_eq!(d["runs"][0]["sim_seconds"], 2.0);
}

#[test]
fn simulate_out_writes_the_report_and_csv() {
    let tmp = temp_dir("sim-out");
    let dir = tmp.path();
    let spec = spec_file(dir);
    let report = dir.join("report");
    let out = fairlane(&["simulate", s(&spec), "--out", s(&report)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("report: ") && stdout.contains("wfq"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(html.contains("<svg"));
    let csvs: Vec<_> = std::fs::read_dir(report.join("csv")).unwrap().collect();
    assert!(!csvs.is_empty());
}

#[test]
fn simulate_errors_name_the_file_and_field() {
    let tmp = temp_dir("sim-bad");
    let dir = tmp.path();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, SPEC.replace("workers = 2", "workers = 2\ncores = 8")).unwrap();
    let err = refused(fairlane(&["simulate", s(&bad)]));
    assert!(err.contains("bad.toml") && err.contains("cores"), "{err}");
    let out = fairlane(&["simulate", s(&dir.join("missing.toml"))]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("missing.toml"));
    let spec = spec_file(dir);
    let out = fairlane(&["simulate", s(&spec), "--duration=-1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("two.toml") && err.contains("duration"),
        "{err}"
    );
}

#[test]
fn demo_pool_quick_json() {
    let out = fairlane(&[
        "demo",
        "pool",
        "--quick",
        "--json",
        "--schedulers",
        "fifo,2dfqe",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v = json(&out);
    let text = v.to_string();
    assert!(text.contains("fifo") && text.contains("2dfqe"), "{text}");
    let out = fairlane(&["demo", "pool", "--seconds", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--seconds"));
}

#[test]
fn reproduce_unknown_name_exits_2_listing_the_known() {
    let err = refused(fairlane(&["reproduce", "ldf-table9"]));
    assert!(
        err.contains("ldf-table9") && err.contains("ldf-table1"),
        "{err}"
    );
}

#[test]
fn reproduce_writes_the_report_and_prints_each_verdict() {
    let tmp = temp_dir("repro");
    let dir = tmp.path();
    let out = fairlane(&["reproduce", "2dfq-fig5", "tam-table2", "--out", s(dir)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let verdicts: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("2dfq-fig5: ") || l.starts_with("tam-table2: "))
        .collect();
    assert_eq!(verdicts.len(), 3 + 6, "{stdout}");
    for l in verdicts {
        let verdict = l.split(": ").nth(1).unwrap();
        assert_eq!(verdict, "reproduced", "{l}");
    }
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 6);
}

#[test]
fn reproduce_says_which_spec_it_read() {
    let tmp = temp_dir("repro-src");
    let dir = tmp.path();
    let out = fairlane(&[
        "reproduce",
        "ldf-table1",
        "--quick",
        "--embedded",
        "--out",
        s(dir),
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("ldf-table1: spec compiled into the binary"),
        "{err}"
    );
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.contains("the copy compiled into this binary"));
}

#[test]
fn proxy_check_validates_and_names_the_field() {
    let tmp = temp_dir("proxy-check");
    let dir = tmp.path();
    // `fairlane proxy --config NAME --check` on `config` written to `dir/NAME`.
    let check = |name: &str, config: &str| {
        let p = dir.join(name);
        std::fs::write(&p, config).unwrap();
        fairlane(&["proxy", "--config", s(&p), "--check"])
    };
    let out = check(
        "good.toml",
        "[upstream]\naddr = \"127.0.0.1:8000\"\n[[tenant]]\nname = \"a\"\nkeys = [\"k\"]\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("good.toml: ok"));
    let err = refused(check(
        "bad.toml",
        "[upstream]\naddr = \"127.0.0.1:8000\"\n[[tenant]]\nname = \"a\"\nweight = 0\n",
    ));
    assert!(
        err.contains("bad.toml") && err.contains("tenant[0].weight"),
        "{err}"
    );
    // A subnormal weight must be refused: it once passed the check and panicked in 2DFQ.
    let err = refused(check(
        "tiny.toml",
        "[upstream]\naddr = \"127.0.0.1:8000\"\n[scheduler]\nalgorithm = \"2dfq\"\n\
         [[tenant]]\nname = \"a\"\nweight = 1e-320\n",
    ));
    assert!(
        err.contains("tiny.toml") && err.contains("tenant[0].weight") && err.contains("1e-320"),
        "{err}"
    );
}

#[test]
fn tam_check_draw_and_catalog() {
    // HBase has all five problems: exit 1, and --json lists them.
    let out = fairlane(&["tam", "check", "--json", "models/hbase.toml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let v = json(&out);
    let mut kinds: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(kinds.len(), 5, "{v}");
    let tmp = temp_dir("tam");
    let dir = tmp.path();
    let svg = dir.join("hbase.svg");
    let out = fairlane(&[
        "tam",
        "draw",
        "models/hbase.toml",
        "--highlight",
        "-o",
        s(&svg),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
    let out = fairlane(&["tam", "catalog"]);
    assert!(out.status.success());
    let list = text(&out.stdout);
    for name in [
        "hbase",
        "mongodb",
        "cassandra",
        "riak",
        "tamed-hbase",
        "muzzled-hbase",
    ] {
        assert!(list.contains(name), "{list}");
    }
    let out = fairlane(&["tam", "catalog", "riak"]);
    assert!(out.status.success());
    assert!(text(&out.stdout).contains("[model]"));
    // A bad model: exit 2 naming the file, the stage and the field.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "[model]\nname = \"m\"\n[[stage]]\nname = \"a\"\nscheduling = \"general\"\nfoo = 1\n",
    )
    .unwrap();
    let err = refused(fairlane(&["tam", "check", s(&bad)]));
    assert!(err.contains("bad.toml") && err.contains("`foo`"), "{err}");
}

#[test]
fn simulate_set_changes_any_field_by_its_path() {
    let tmp = temp_dir("sim-set");
    let spec = spec_file(tmp.path());
    let base = ["simulate", s(&spec), "--json", "--jobs", "1"];
    let set = |extra: &[&str]| fairlane(&[&base[..], extra].concat());
    // A tenant's field, by the tenant's name; the value is TOML.
    let out = set(&["--set", "tenant.small.arrival.rate=60"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let small = |out: &Output| json(out)["runs"][0]["tenants"]["small"]["arrived"].as_u64();
    let (few, many) = (small(&out).unwrap(), small(&fairlane(&base)).unwrap());
    assert!(few * 5 < many, "{few} vs {many}");
    // Several at once, checked together; a string needs no quotes.
    let out = set(&[
        "--set",
        "schedulers=[\"drr\"]",
        "--set",
        "server.model=workers",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(json(&out)["runs"][0]["scheduler"], "drr");
    // A path that names nothing, or no `=`: exit 2 naming the file and the path.
    let out = set(&["--set", "tenant.nobody.weight=2"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("two.toml: tenant.nobody.weight") && err.contains("\"nobody\""),
        "{err}"
    );
    let out = set(&["--set", "duration"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("PATH=VALUE"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn simulate_set_reaches_a_tam_models_default_clients() {
    let base = ["simulate", "models/hbase.toml", "--json", "--duration", "1"];
    let c2 = |out: &Output| {
        json(out)["runs"][0]["clients"]["C2"]["completed"]
            .as_u64()
            .unwrap()
    };
    let before = fairlane(&base);
    assert!(before.status.success(), "{}", text(&before.stderr));
    let out = fairlane(&[&base[..], &["--set", "simulation.client.C2.threads=64"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The default clients have 8 threads each; C2 with 64 completes more.
    assert!(c2(&out) > c2(&before), "{} vs {}", c2(&out), c2(&before));
    assert!(json(&out)["runs"][0]["clients"]["C1"].is_object());
}

#[test]
fn simulate_into_a_closed_pipe_ends_quietly_with_status_0() {
    let tmp = temp_dir("sim-pipe");
    let spec = spec_file(tmp.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_fairlane"))
        .args(["simulate", s(&spec), "--json", "--jobs", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before anything is written (`| true`).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn a_suite_of_a_billion_runs_is_refused_up_front() {
    let tmp = temp_dir("sim-suite");
    let p = tmp.path().join("huge.toml");
    let huge = format!(
        "{SPEC}\n[suite]\nruns = 1_000_000_000\n[suite.vary]\n\"seed\" = {{ min = 1, max = 9, int = true }}\n"
    );
    std::fs::write(&p, huge).unwrap();
    let err = refused(fairlane(&["simulate", s(&p), "--json"]));
    assert!(
        err.contains("suite.runs") && err.contains("100000"),
        "{err}"
    );
}

#[test]
fn help_texts_list_every_experiment_and_subcommand() {
    let out = fairlane(&["reproduce", "--help"]);
    let help = text(&out.stdout).replace('\n', " ");
    for name in [
        "2dfq-fig8",
        "2dfqe-mechanism",
        "ldf-fig6",
        "tam-table2",
        "tam-fig13e",
    ] {
        assert!(help.contains(name), "{name} missing: {help}");
    }
    let out = fairlane(&["tam", "--help"]);
    let first = text(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    for sub in ["check", "draw", "catalog", "what-if", "discover"] {
        assert!(first.contains(sub), "{sub} missing: {first}");
    }
}
