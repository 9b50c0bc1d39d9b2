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

/// Crates whose top-level modules must not import each other in a circle.
const ACYCLIC: &[&str] = &["proxy", "runtime"];

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

/// The top-level modules of `src` (a file `m.rs` or a folder `m/`) and the modules each one
/// names as `crate::x` (in code, docs or macros: any mention counts).
fn module_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, files);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(src, &mut files);
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "lib" || module == "main" {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        let names = graph.entry(module.clone()).or_default();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect();
            if !name.is_empty() && name != module {
                names.insert(name);
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for names in graph.values_mut() {
        names.retain(|n| modules.contains(n));
    }
    graph
}

/// A circle of imports, if there is one.
fn circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0 = unvisited, 1 = on the path, 2 = done.
    fn visit<'a>(
        m: &'a str,
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(m, 1);
        path.push(m);
        for n in &graph[m] {
            match state.get(n.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|p| p == n).unwrap();
                    let mut c: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                    c.push(n.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(n, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(m, 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if state.get(m.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(m, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn modules_import_each_other_without_a_circle() {
    for krate in ACYCLIC {
        let graph = module_imports(&root().join("crates").join(krate).join("src"));
        assert!(graph.len() > 3, "{krate}: modules found");
        if let Some(c) = circle(&graph) {
            panic!(
                "crates/{krate}: the modules import in a circle: {}",
                c.join(" → ")
            );
        }
    }
    // The checker itself finds a circle.
    let g: BTreeMap<String, BTreeSet<String>> = [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")]
        .iter()
        .map(|(m, n)| (m.to_string(), BTreeSet::from([n.to_string()])))
        .collect();
    assert_eq!(circle(&g).unwrap(), ["a", "b", "c", "a"]);
}
