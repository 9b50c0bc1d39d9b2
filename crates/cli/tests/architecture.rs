//! docs/architecture.md is the project's map; these tests keep it true.
//!
//! * The crate arrows (`a → b`, `a → {b, c}` in the paragraph before the crate table) are
//!   exactly the workspace's dependencies between its own crates, as `cargo metadata`
//!   reports them (normal and build dependencies; dev-dependencies are not arrows).
//! * The crate table has one row per workspace crate, `crates/DIR` with its package name.
//! * The modules of the crates listed in [`ACYCLIC`] import each other without a circle.
//!
//! It lives in the CLI crate because the CLI is the crate that sees the whole workspace; it
//! reads the repository, not the binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Crates whose modules must not import each other in a circle, and how deep a module is
/// told apart: 1, its top-level modules (`crate::levels`, its submodules counted in it);
/// [`usize::MAX`], every module (`crate::pool::engine`).
const ACYCLIC: &[(&str, usize)] = &[("proxy", 1), ("runtime", 1), ("sim", usize::MAX)];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/cli sits two levels below the workspace root")
        .to_path_buf()
}

/// A workspace crate: its directory under `crates/` (the name the map uses) and package.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Crate {
    dir: String,
    package: String,
}

/// The workspace's crates and the arrows between them, from `cargo metadata`.
fn workspace() -> (BTreeMap<String, Crate>, BTreeSet<(String, String)>) {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root())
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let mut crates = BTreeMap::new(); // package name → crate
    for p in packages {
        let manifest = Path::new(p["manifest_path"].as_str().expect("manifest_path"));
        let dir = manifest
            .parent()
            .and_then(|d| d.strip_prefix(root().join("crates")).ok())
            .and_then(|d| d.to_str())
            .expect("a crate directory under crates/")
            .to_string();
        let package = p["name"].as_str().expect("name").to_string();
        crates.insert(package.clone(), Crate { dir, package });
    }
    let mut arrows = BTreeSet::new();
    for p in packages {
        let from = &crates[p["name"].as_str().expect("name")].dir;
        for d in p["dependencies"].as_array().expect("dependencies") {
            let is_dev = d["kind"].as_str() == Some("dev");
            if let (false, Some(to)) = (is_dev, crates.get(d["name"].as_str().expect("name"))) {
                arrows.insert((from.clone(), to.dir.clone()));
            }
        }
    }
    (crates, arrows)
}

fn map_text() -> String {
    let path = root().join("docs/architecture.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The arrows the map draws: every `` `a → b` `` or `` `a → {b, c}` `` before the table.
fn drawn_arrows(map: &str) -> BTreeSet<(String, String)> {
    let head = map.split("\n|").next().unwrap_or("");
    let mut arrows = BTreeSet::new();
    for span in head.split('`').skip(1).step_by(2) {
        let Some((from, to)) = span.split_once('→') else {
            continue;
        };
        let from = from.trim().to_string();
        let to = to.trim().trim_start_matches('{').trim_end_matches('}');
        for t in to.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            arrows.insert((from.clone(), t.to_string()));
        }
    }
    arrows
}

/// The crate table's rows: `` | `crates/DIR` (`PACKAGE`) | … ``.
fn table_rows(map: &str) -> BTreeSet<Crate> {
    map.lines()
        .filter_map(|l| l.strip_prefix("| `crates/"))
        .filter_map(|rest| {
            let (dir, rest) = rest.split_once('`')?;
            let package = rest.split('`').nth(1)?;
            Some(Crate {
                dir: dir.to_string(),
                package: package.to_string(),
            })
        })
        .collect()
}

#[test]
fn the_crate_arrows_are_the_workspace_dependencies() {
    let (crates, real) = workspace();
    let drawn = drawn_arrows(&map_text());
    let package = |dir: &str| {
        crates
            .values()
            .find(|c| c.dir == dir)
            .map_or(dir.to_string(), |c| c.package.clone())
    };
    let mut wrong = Vec::new();
    for (from, to) in real.difference(&drawn) {
        wrong.push(format!(
            "missing arrow `{from} → {to}`: crates/{from}/Cargo.toml depends on {}",
            package(to)
        ));
    }
    for (from, to) in drawn.difference(&real) {
        wrong.push(format!(
            "arrow `{from} → {to}` is drawn, but crate {from} does not depend on crate {to}"
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate arrows differ from `cargo metadata`:\n  {}",
        wrong.join("\n  ")
    );
}

#[test]
fn the_crate_table_has_one_row_per_workspace_crate() {
    let (crates, _) = workspace();
    let real: BTreeSet<Crate> = crates.into_values().collect();
    let rows = table_rows(&map_text());
    let mut wrong = Vec::new();
    for c in real.difference(&rows) {
        wrong.push(format!(
            "missing row: | `crates/{}` (`{}`) | … |",
            c.dir, c.package
        ));
    }
    for c in rows.difference(&real) {
        wrong.push(format!(
            "row `crates/{}` (`{}`) names no crate of the workspace",
            c.dir, c.package
        ));
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's crate table differs from `cargo metadata`:\n  {}",
        wrong.join("\n  ")
    );
}

/// Every `.rs` file under `dir`.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// A file's module path: `lib.rs` is `crate`, `pool/mod.rs` is `crate::pool`,
/// `pool/engine.rs` is `crate::pool::engine`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    std::iter::once("crate".to_string())
        .chain(parts)
        .collect::<Vec<_>>()
        .join("::")
}

/// The paths a line of code names: `crate::a::b…` and `super::c…`, resolved from `module`.
fn references(module: &str, code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let text = code;
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            // `$crate::` in a macro is `crate::`; `foo_crate::` is not a path of ours.
            let before = text[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let path: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            let mut base: Vec<&str> = module.split("::").collect();
            while segs.first() == Some(&"super") {
                segs.remove(0);
                base.pop();
            }
            if segs.first() == Some(&"crate") {
                base = vec!["crate"];
                segs.remove(0);
            }
            out.push(base.into_iter().chain(segs).collect::<Vec<_>>().join("::"));
        }
    }
    out
}

/// The longest module among `modules` that `path` starts with.
fn owner<'a>(path: &str, modules: &'a BTreeSet<String>) -> &'a str {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find_map(|p| modules.get(&p))
        .map_or("crate", String::as_str)
}

/// A circle of `edges`, if there is one.
fn circle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        v: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(v.to_string(), 1);
        stack.push(v.to_string());
        for w in edges.get(v).into_iter().flatten() {
            match state.get(w.as_str()).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|x| x == w).unwrap_or(0);
                    let mut c = stack[from..].to_vec();
                    c.push(w.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(w, edges, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(v.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for v in edges.keys() {
        if state.get(v.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(v, edges, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

/// The import edges among a crate's modules: a reference from one module to another
/// (`crate::a::b`, `super::c`) is an edge. The crate root declares and re-exports; a module
/// naming an item through it (`crate::Spec`) makes an edge to the root, which re-exports the
/// module back.
fn module_imports(src: &Path, depth: usize) -> BTreeMap<String, BTreeSet<String>> {
    let module_of = |src: &Path, p: &Path| {
        let m = module_of(src, p);
        m.split("::")
            .take(depth.saturating_add(1))
            .collect::<Vec<_>>()
            .join("::")
    };
    let mut paths = Vec::new();
    files(src, &mut paths);
    let modules: BTreeSet<String> = paths.iter().map(|p| module_of(src, p)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &paths {
        let module = module_of(src, p);
        let text = std::fs::read_to_string(p).unwrap();
        for line in text.lines() {
            // Comments and module declarations are not imports.
            let code = line.split("//").next().unwrap_or("");
            let code = code.trim_start();
            if code.starts_with("mod ") || code.starts_with("pub mod ") {
                continue;
            }
            for r in references(&module, code) {
                let to = owner(&r, &modules);
                if to != module {
                    edges
                        .entry(module.clone())
                        .or_default()
                        .insert(to.to_string());
                }
            }
        }
    }
    edges
}

#[test]
fn modules_import_each_other_without_a_circle() {
    for &(krate, depth) in ACYCLIC {
        let graph = module_imports(&root().join("crates").join(krate).join("src"), depth);
        assert!(
            graph.values().map(BTreeSet::len).sum::<usize>() > 10,
            "{krate}: too few edges found: {graph:?}"
        );
        if let Some(c) = circle(&graph) {
            panic!(
                "crates/{krate}: the modules import in a circle: {}",
                c.join(" → ")
            );
        }
    }
}

#[test]
fn the_circle_finder_finds_a_circle() {
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        edges.entry(a.into()).or_default().insert(b.into());
    }
    let c = circle(&edges).expect("x → y → z → x");
    assert_eq!(c.first(), c.last());
    assert_eq!(c.len(), 4);
    edges.get_mut("z").unwrap().remove("x");
    assert!(circle(&edges).is_none());
    assert_eq!(
        references(
            "crate::pool::engine",
            "use super::spec::Depth; crate::events::drive"
        ),
        ["crate::events::drive", "crate::pool::spec::Depth"]
    );
}
