//! Helpers shared by the simulator's tests: parse and run a worker-pool or black-box spec,
//! check that an invalid spec's error names what was wrong, list the shipped specs.
#![allow(dead_code)]

use fairlane_sim::{run_all, PoolRuns, RunResult, Runs, SpecFile};

/// A valid spec (trace paths relative to the temp dir).
pub fn spec(text: &str) -> SpecFile {
    SpecFile::parse(text, "test.toml", std::env::temp_dir()).unwrap()
}

/// Every run of a valid spec.
pub fn run(text: &str) -> Vec<RunResult> {
    run_all(&spec(text).scenarios().unwrap(), 2, &mut |_| {}).unwrap()
}

/// Everything the runs report except their wall-clock times, as text.
pub fn fingerprint(rs: &[RunResult]) -> String {
    PoolRuns { runs: rs.to_vec() }.untimed_json().to_string()
}

/// The error of a spec (named `bad.toml`) that must be refused.
pub fn err(text: &str) -> String {
    match SpecFile::parse(text, "bad.toml", ".".into()).and_then(|s| s.scenarios().map(|_| ())) {
        Ok(()) => panic!("spec was accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

/// `base` with its first `from` replaced by `to`: a variant of a test's base spec, the edit
/// spelled out where the test makes it. Panics when `base` has no `from`.
pub fn with(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from:?} is not in the base text");
    base.replacen(from, to, 1)
}

/// For each `(from, to, wants)`: `base` with `from` replaced by `to` is refused with an error
/// containing every one of `wants`.
pub fn assert_edits_refused(base: &str, cases: &[(&str, &str, &[&str])]) {
    for (from, to, wants) in cases {
        let e = err(&with(base, from, to));
        for w in *wants {
            assert!(e.contains(w), "error {e:?} lacks {w:?}");
        }
    }
}

/// The shipped `.toml` files in the repository's `dir` (`experiments`, `models`) whose names
/// start with `prefix`, in name order.
pub fn shipped(dir: &str, prefix: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(dir);
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(prefix) && n.ends_with(".toml")
        })
        .collect();
    v.sort();
    v
}

/// A fresh directory for one test, removed when dropped (also when the test panics).
pub fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("fairlane-sim-{name}-"))
        .tempdir()
        .unwrap()
}
