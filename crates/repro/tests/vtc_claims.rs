//! The VTC paper's §5.2 on the simulator's LLM server (`--quick` runs): every claim has data,
//! and each holds by value — VTC's backlogged difference within Theorem 4.4's bound and
//! FCFS's past it, FCFS's accumulated difference growing, VTC's throughput equal to FCFS's
//! on the uniform suites, weighted VTC's shares in the weights' ratio.

use fairlane_repro::{find, run, Options, Outcome, Relation, Source, Verdict};

fn outcome(name: &str) -> Outcome {
    let e = find(name).unwrap_or_else(|| panic!("no experiment {name}"));
    run(e, &Options::quick(), &mut |_| {}).unwrap_or_else(|err| panic!("{name}: {err}"))
}

fn reproduced(o: &Outcome, ids: &[&str]) {
    for c in &o.claims {
        assert_ne!(c.verdict(), Verdict::NoData, "{}: {c}", o.name);
    }
    let have: Vec<&str> = o.claims.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(have, ids, "{}", o.name);
    for c in &o.claims {
        assert_eq!(c.verdict(), Verdict::Reproduced, "{}: {c}", o.name);
    }
    assert!(matches!(o.source, Source::Disk(_)), "{:?}", o.source);
}

/// The bound claim's numbers: VTC's difference, FCFS's, and the bound.
fn bound(o: &Outcome) -> (f64, f64, f64) {
    let c = o.claim("bound").unwrap();
    assert_eq!(c.checks[0].relation, Relation::AtMost);
    (c.checks[0].ours, c.checks[1].ours, c.checks[0].target)
}

#[test]
fn overload_vtc_within_the_bound_fcfs_past_it() {
    let o = outcome("vtc-overload");
    reproduced(&o, &["bound", "fcfs-grows", "work-conserving"]);
    let (vtc, fifo, b) = bound(&o);
    // M = 10,000 and w_q = 2: the bound is 40,000 weighted tokens.
    assert_eq!(b, 40_000.0);
    assert!(vtc > 0.0 && vtc < 0.5 * b, "{vtc}");
    assert!(fifo > 4.0 * b, "{fifo}");
    // FCFS serves the clients 1 : 2, so the difference about doubles from the middle of
    // the window to its end.
    let g = &o.claim("fcfs-grows").unwrap().checks[0];
    assert!((g.ours - 2.0).abs() < 0.2, "{g}");
    let w = &o.claim("work-conserving").unwrap().checks[0];
    assert!((w.ours - 1.0).abs() < 1e-9, "{w}");
    assert_eq!(
        o.blocks
            .iter()
            .filter(|b| matches!(b, fairlane_plot::Block::Svg(_)))
            .count(),
        3
    );
}

#[test]
fn on_off_overload_vtc_within_the_bound() {
    let o = outcome("vtc-on-off-overload");
    reproduced(&o, &["bound", "fcfs-grows", "work-conserving"]);
    let (vtc, fifo, b) = bound(&o);
    assert!(vtc <= b && fifo > 4.0 * b, "{vtc} {fifo}");
}

#[test]
fn poisson_short_long_vtc_within_the_bound() {
    let o = outcome("vtc-poisson-short-long");
    // Mixed sizes: no work-conservation claim (stated as measured instead).
    reproduced(&o, &["bound", "fcfs-grows"]);
    let (vtc, fifo, b) = bound(&o);
    assert!(vtc <= b && fifo > b, "{vtc} {fifo}");
}

#[test]
fn weighted_vtc_shares_by_weight() {
    let o = outcome("vtc-overload-weighted");
    reproduced(&o, &["bound", "fcfs-grows", "work-conserving", "weights"]);
    let c = o.claim("weights").unwrap();
    assert_eq!(c.checks.len(), 4);
    for check in &c.checks {
        assert!((check.ours - 1.0).abs() < 0.03, "{check}");
    }
}
