//! What-if, simulated: the `[simulation]` section follows each architectural change, and
//! the original and the changed architecture run on the same workload and seed.

use fairlane_sim::tam::{whatif, TamSpecFile};
use fairlane_tam::Change;

fn changes(texts: &[&str]) -> Vec<Change> {
    texts.iter().map(|t| t.parse().unwrap()).collect()
}

fn spec(path: &str) -> TamSpecFile {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path);
    whatif::load(&p).unwrap_or_else(|e| panic!("{e}"))
}

fn path_of(f: &TamSpecFile, req: usize) -> Vec<String> {
    f.spec.requests[req]
        .visits
        .iter()
        .map(|v| f.spec.stages[v.stage as usize].name.clone())
        .collect()
}

#[test]
fn no_change_runs_exactly_the_original() {
    let f = spec("experiments/tam-fig13c-orig.toml");
    let c = whatif::compare(&f, &[]).unwrap();
    for (a, b) in c.original[0].clients.iter().zip(&c.changed[0].clients) {
        assert_eq!(a.completed, b.completed);
        assert_eq!(a.latency_p99, b.latency_p99);
    }
}

#[test]
fn combine_sends_the_parts_visits_to_the_new_stage() {
    let f = spec("experiments/tam-fig13c-orig.toml");
    let g = whatif::changed(
        &f,
        &changes(&["combine RPC Read + RPC Respond as RPC Read/Respond"]),
    )
    .unwrap();
    assert_eq!(
        path_of(&g, 0),
        ["RPC Read/Respond", "RPC Handle", "RPC Read/Respond"]
    );
    // The costs are the original visits' (1 KB in, 20 KB out at 1 Gbps).
    let v = &g.spec.requests[0].visits;
    assert!((v[0].declared - 1e3 / 125e6).abs() < 1e-12);
    assert!((v[2].declared - 20e3 / 125e6).abs() < 1e-12);
}

#[test]
fn split_gives_each_part_its_resources_cost_and_reveals_known_unknowns() {
    // Fig. 13(b): RPC Handle does 100 µs of CPU and, for a cold Get, a 100 KB read it could
    // not know beforehand (hit ratio 0); a cached Get never reads (hit ratio 1).
    let f = spec("experiments/tam-fig13b-orig.toml");
    let g = whatif::changed(&f, &changes(&["split RPC Handle"])).unwrap();
    assert_eq!(
        path_of(&g, 0),
        [
            "RPC Read",
            "RPC Handle (CPU)",
            "RPC Handle (I/O)",
            "RPC Respond"
        ]
    );
    assert_eq!(
        path_of(&g, 1),
        ["RPC Read", "RPC Handle (CPU)", "RPC Respond"]
    );
    let cold = &g.spec.requests[0].visits;
    assert!((cold[1].declared - 100e-6).abs() < 1e-12);
    // Known now: the I/O part's scheduler is told the read (100 KB at 100 MB/s).
    assert!(cold[2].steps[0].unknown.is_none());
    assert!((cold[2].declared - 1e-3).abs() < 1e-12);
    // Every part has RPC Handle's 30 threads.
    for s in g
        .spec
        .stages
        .iter()
        .filter(|s| s.name.starts_with("RPC Handle"))
    {
        assert_eq!(s.threads, Some(30), "{}", s.name);
    }
}

#[test]
fn a_drawn_cost_that_the_change_would_reveal_is_refused_with_its_field() {
    let mut f = spec("experiments/tam-fig13b-orig.toml");
    // Cold Gets miss half the time instead of always.
    f.doc.value["simulation"]["request"][0]["path"][1]["unknown"]
        .as_table_mut()
        .unwrap()
        .insert("hit_ratio".into(), toml::Value::Float(0.5));
    let e = whatif::changed(&f, &changes(&["split RPC Handle"]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tam-fig13b-orig.toml") && e.contains("unknown") && e.contains("0.5"),
        "{e}"
    );
}

#[test]
fn a_change_that_does_not_apply_is_an_error() {
    let f = spec("experiments/tam-fig13b-orig.toml");
    let e = whatif::compare(&f, &changes(&["async No Such Stage"])).unwrap_err();
    assert!(e.to_string().contains("No Such Stage"), "{e}");
}
