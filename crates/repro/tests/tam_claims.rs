//! seeds/004 §3 Fig. 8–12 reproductions: every claim has data, and the shapes reproduced
//! today still hold (each check within its stated bound).

use fairlane_repro::{find, run, Options, Outcome, Verdict};

fn outcome(name: &str) -> Outcome {
    let e = find(name).unwrap_or_else(|| panic!("no experiment {name}"));
    run(e, &Options::quick(), &mut |_| {}).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn reproduced(name: &str, id: &str) {
    let o = outcome(name);
    let c = o
        .claim(id)
        .unwrap_or_else(|| panic!("{name}: no claim {id}"));
    for check in &c.checks {
        assert!(check.holds(), "{name}: {check}\n{c}");
    }
    assert_eq!(c.verdict(), Verdict::Reproduced, "{c}");
}

#[test]
fn fig8_no_scheduling() {
    reproduced("tam-fig8", "fig8-deadline");
}

#[test]
fn fig9_unknown_resource_usage() {
    reproduced("tam-fig9", "fig9-cached");
}

#[test]
fn fig10_hidden_contention() {
    reproduced("tam-fig10", "fig10-contention");
}

#[test]
fn fig11_blocking() {
    reproduced("tam-fig11", "fig11-blocking");
}

#[test]
fn fig12_ordering_constraint() {
    reproduced("tam-fig12", "fig12-ordering");
}

// seeds/004 §4.1 Fig. 13 (a)–(e): Orig-HBase against Tamed-HBase.

#[test]
fn fig13a_no_scheduling() {
    reproduced("tam-fig13a", "fig13a-no-scheduling");
}

#[test]
fn fig13b_unknown_resource_usage() {
    reproduced("tam-fig13b", "fig13b-unknown-usage");
}

#[test]
fn fig13c_hidden_contention() {
    reproduced("tam-fig13c", "fig13c-hidden-contention");
}

#[test]
fn fig13d_blocking() {
    reproduced("tam-fig13d", "fig13d-blocking");
}

#[test]
fn fig13e_ordering_constraint() {
    reproduced("tam-fig13e", "fig13e-ordering");
}
