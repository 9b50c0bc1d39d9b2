//! The simulator's modules import one another in one direction only: the layers of
//! docs/architecture.md ("Inside fairlane-sim") — errors, documents, events, services and
//! metrics at the bottom, the scheduler builder and the experiment interface above them, the
//! four kinds (`pool`, `cores`, `tam`, `llm`) side by side, and `kinds` (the one place a spec's
//! kind is told) on top. A reference from one module to another (`crate::a::b`,
//! `super::c`) is an edge; this test fails, naming the modules, when the edges close a
//! circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

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

#[test]
fn no_module_of_the_simulator_imports_in_a_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    files(&src, &mut paths);
    let modules: BTreeSet<String> = paths.iter().map(|p| module_of(&src, p)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for p in &paths {
        let module = module_of(&src, p);
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
    // The crate root declares and re-exports; a module naming an item through it
    // (`crate::SpecFile`) makes an edge to the root, which re-exports the module back.
    assert!(modules.len() > 20, "{modules:?}");
    assert!(
        edges.values().map(BTreeSet::len).sum::<usize>() > 40,
        "too few edges found: {edges:?}"
    );
    if let Some(c) = circle(&edges) {
        panic!("an import circle: {}", c.join(" → "));
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
