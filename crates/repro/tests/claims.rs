//! One claim-value test per experiment, on `--quick` runs (the sizes `scripts/reproduce.sh`
//! uses). Each asserts that every claim has data (a missing or non-finite value is a
//! failure, never a pass), that the claims reproduced today still hold, each check within
//! its stated margin of the paper's number, and some values directly against the paper.
//! The claims not reproduced today are documented in docs/results.md.

use fairlane_repro::{
    find, planned_runs, run, Options, Outcome, Relation, ReproErrorKind, Source, Verdict,
};

fn outcome(name: &str) -> Outcome {
    let e = find(name).unwrap_or_else(|| panic!("no experiment {name}"));
    run(e, &Options::quick(), &mut |_| {}).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// The claim `id` of `o`, failing the test with the ids there are when it is absent.
fn claim<'a>(o: &'a Outcome, id: &str) -> &'a fairlane_repro::Claim {
    o.claim(id).unwrap_or_else(|| {
        let ids: Vec<&str> = o.claims.iter().map(|c| c.id.as_str()).collect();
        panic!("{}: no claim {id:?}; claims: {ids:?}", o.name)
    })
}

/// Every claim has data; the claims named hold (every check within its margin).
fn assert_claims(o: &Outcome, reproduced: &[&str]) {
    assert!(!o.claims.is_empty(), "{}: no claims", o.name);
    for c in &o.claims {
        assert_ne!(c.verdict(), Verdict::NoData, "{}: {c}", o.name);
    }
    for id in reproduced {
        let c = claim(o, id);
        for check in &c.checks {
            assert!(check.holds(), "{}: {check}\n{c}", o.name);
        }
        assert_eq!(c.verdict(), Verdict::Reproduced, "{}: {c}", o.name);
    }
}

fn assert_from_disk(o: &Outcome) {
    match &o.source {
        Source::Disk(p) => assert!(p.is_file() && p.parent().unwrap().ends_with("experiments")),
        other => panic!("{}: spec not read from the repository: {other:?}", o.name),
    }
}

#[test]
fn tdfq_fig5_worked_example_is_identical_to_the_paper() {
    let o = outcome("2dfq-fig5");
    assert_eq!(o.claims.len(), 3);
    for c in &o.claims {
        assert_eq!(c.checks[0].ours, 0.0, "{c}");
    }
    assert_claims(&o, &["identical"]);
}

#[test]
fn tdfq_fig8_sigma_ratio_against_wfq() {
    let o = outcome("2dfq-fig8");
    assert_from_disk(&o);
    assert_claims(&o, &[]);
    // The paper: 2DFQ's σ is "an order of magnitude lower" than WFQ's at n = 50.
    let wfq = &claim(&o, "sigma-ratio-n50").checks[0];
    assert!(wfq.ours >= 10.0, "{wfq}");
}

#[test]
fn tdfq_fig9_first_quartile_sigma_has_data() {
    let o = outcome("2dfq-fig9");
    assert_claims(&o, &[]);
    let c = claim(&o, "q1-sigma-ratio");
    assert!(c.checks.iter().all(|x| x.target == 10.0), "{c}");
}

#[test]
fn tdfq_fig11_t1_p99_lower_under_2dfqe() {
    let o = outcome("2dfq-fig11");
    assert_claims(&o, &[]);
    // Not the paper's 10× (docs/results.md), but 2DFQᴱ does lower T1's p99 against both.
    for x in &claim(&o, "p99-ratio").checks {
        assert!(x.ours > 1.0, "{x}");
    }
}

#[test]
fn tdfq_fig13_median_speedup_over_wfqe() {
    let o = outcome("2dfq-fig13");
    assert_claims(&o, &[]);
    let over_wfq = &claim(&o, "median-speedup").checks[0];
    assert!(over_wfq.holds(), "{over_wfq}");
}

#[test]
fn tdfqe_mechanism_probe_p99_is_not_ten_times_lower() {
    let o = outcome("2dfqe-mechanism");
    assert_from_disk(&o);
    assert_claims(&o, &[]);
    let c = claim(&o, "probe-p99-ratio");
    for x in &c.checks {
        assert!(x.ours.is_finite() && x.ours > 0.0, "{x}");
        assert_eq!(x.target, 10.0, "{x}");
    }
    // The documented finding (docs/results.md "2DFQᴱ mechanism"): the ≥ 10× of seeds/000 is
    // not there — 2DFQᴱ is far worse than WFQᴱ for the probe and a few × better than WF²Qᴱ.
    let (wfqe, wf2qe) = (c.checks[0].ours, c.checks[1].ours);
    assert!(wfqe < 10.0 && wf2qe < 10.0, "{c}");
    assert_eq!(c.verdict(), Verdict::NotReproduced, "{c}");
}

#[test]
fn interposed_fig3_4_isolation() {
    let o = outcome("interposed-fig3-4");
    assert_claims(&o, &["edf-no-isolation", "fsfq-isolates", "rw-isolates"]);
    // Client 2 under FSFQ: the paper's ≈ 18 ms, ours within 50 ms.
    let c2 = &claim(&o, "fsfq-isolates").checks[1];
    assert_eq!(c2.relation, Relation::Below);
    assert!(c2.ours > 0.010 && c2.ours < 0.05, "{c2}");
}

#[test]
fn interposed_fig5_sfq_vs_fsfq() {
    let o = outcome("interposed-fig5");
    assert_claims(&o, &["isolation", "weight-matters", "fsfq-better"]);
    assert_eq!(
        claim(&o, "isolation").checks.len(),
        16,
        "2 schedulers × 2 weights × 2 rates × 2"
    );
}

#[test]
fn interposed_fig6_fsfq_vs_rw() {
    let o = outcome("interposed-fig6");
    assert_claims(&o, &["rw-isolates", "rw-worse-client2"]);
}

#[test]
fn interposed_fig7_depth() {
    let o = outcome("interposed-fig7");
    assert_claims(
        &o,
        &[
            "higher-d-weakens",
            "higher-d-client2",
            "d4-starves",
            "rw-client2-every-d",
        ],
    );
    // RW(4)'s window of 2.67 slots cannot carry 240 IO/s: the only check that fails.
    let c = claim(&o, "rw-client1-every-d");
    let failing: Vec<_> = c.checks.iter().filter(|x| !x.holds()).collect();
    assert_eq!(failing.len(), 1, "{c}");
    assert!(failing[0].quantity.ends_with("D = 4"), "{c}");
}

#[test]
fn interposed_fig8_adaptive_depth_meets_the_feasible_targets() {
    let o = outcome("interposed-fig8");
    assert_claims(&o, &["targets-met feasible"]);
    // The targets are the spec's: 1 s for client 1, 20 ms for client 2 at the feasible point.
    let c = claim(&o, "targets-met feasible");
    assert_eq!(c.checks[0].target, 1.0, "{c}");
    assert_eq!(c.checks[2].target, 0.020, "{c}");
}

#[test]
fn ldf_table1_t8_holds_its_reservation() {
    let o = outcome("ldf-table1");
    assert_from_disk(&o);
    assert_claims(
        &o,
        &[
            "ldf-holds-reservation",
            "nores-falls",
            "drr-below-ldf",
            "p99-vs-nores",
        ],
    );
    // Table 1: LDF keeps T8 at 25.0–25.12 %; ours within 0.5 points of the spec's 25 %.
    let c = claim(&o, "ldf-holds-reservation");
    assert_eq!(c.checks.len(), 5, "0, 2, 4, 6, 8 bullies");
    for x in &c.checks {
        assert_eq!(x.target, 25.0, "read from the spec");
        assert_eq!(x.relation, Relation::Within(0.5));
        assert!((x.ours - 25.0).abs() <= 0.5, "{x}");
    }
}

#[test]
fn ldf_table3_proportional_shares() {
    let o = outcome("ldf-table3");
    assert_claims(
        &o,
        &[
            "ldf-proportional",
            "edf-favours-large",
            "jain",
            "ldf-steady",
        ],
    );
    // T8's share from the spec's reservations (10 + 3·16 + 3·20 + 50 = 168 %; the paper
    // rounds to 170 % and 27.94 %) and its 95 % cap: 50 / 168 × 95 = 28.27 %.
    let c = claim(&o, "ldf-steady");
    assert_eq!(c.checks.len(), 5);
    for x in &c.checks {
        assert!((x.target - 50.0 / 168.0 * 95.0).abs() < 1e-9, "{x}");
        assert!(
            (x.ours - 27.94).abs() <= 0.6 + 0.34,
            "paper 27.47–27.89: {x}"
        );
    }
}

#[test]
fn ldf_fig4_elastic_reservations() {
    let o = outcome("ldf-fig4");
    assert_claims(&o, &["elastic-ldf", "boost-impact"]);
    let x = &claim(&o, "elastic-ldf").checks[0];
    assert!(x.ours >= 2.5, "paper 3–5×: {x}");
}

#[test]
fn ldf_fig5_revenue_optimization() {
    let o = outcome("ldf-fig5");
    assert_claims(&o, &["opt-refunds-less", "opt-vs-edf", "opt-less-fair"]);
    assert!(!claim(&o, "opt-refunds-less").checks.is_empty());
}

#[test]
fn ldf_fig6_alpha_tradeoff() {
    let o = outcome("ldf-fig6");
    assert_claims(&o, &["C1-tradeoff", "C2-tradeoff"]);
}

#[test]
fn tam_table2_rows_are_the_papers() {
    let o = outcome("tam-table2");
    assert_eq!(o.claims.len(), 6);
    assert_claims(&o, &[]);
    assert!(o.claims.iter().all(|c| c.verdict() == Verdict::Reproduced));
}

#[test]
fn the_embedded_copy_is_used_and_said_when_asked() {
    let opts = Options {
        embedded_only: true,
        ..Options::quick()
    };
    let o = run(find("2dfq-fig5").unwrap(), &opts, &mut |_| {}).unwrap();
    assert_eq!(o.source, Source::None);
    let e = find("ldf-table1").unwrap();
    let o = run(e, &opts, &mut |_| {}).unwrap();
    assert_eq!(o.source, Source::Embedded);
}

#[test]
fn an_edited_spec_on_disk_is_the_one_that_runs() {
    // A repository root whose ldf-table1 gives T8 a 30 % reservation: the claim's target
    // follows the file, proving the disk copy was read and targets come from the spec.
    let tmp = repo_root();
    let root = tmp.path().to_path_buf();
    let text = include_str!("../../../experiments/ldf-table1.toml");
    let edited = text.replacen(
        "name = \"T8\"\nres = 25.0\nmax = 25.0",
        "name = \"T8\"\nres = 30.0\nmax = 30.0",
        1,
    );
    assert_ne!(edited, text, "the T8 block moved; update this test");
    let edited = edited
        .replace("duration = 40.0", "duration = 6.0")
        .replace("warmup = 4.0", "warmup = 1.0");
    std::fs::write(root.join("experiments/ldf-table1.toml"), edited).unwrap();
    let opts = Options {
        root: Some(root.clone()),
        ..Options::quick()
    };
    let o = run(find("ldf-table1").unwrap(), &opts, &mut |_| {}).unwrap();
    assert_eq!(
        o.source,
        Source::Disk(root.join("experiments/ldf-table1.toml"))
    );
    let c = claim(&o, "ldf-holds-reservation");
    assert!(c.checks.iter().all(|x| x.target == 30.0), "{c}");
}

/// A scratch repository root with an `experiments/` directory, removed when dropped.
fn repo_root() -> tempfile::TempDir {
    let tmp = tempfile::Builder::new()
        .prefix("fairlane-repro-")
        .tempdir()
        .unwrap();
    std::fs::create_dir_all(tmp.path().join("experiments")).unwrap();
    tmp
}

#[test]
fn a_broken_spec_on_disk_is_an_error_naming_the_experiment_file_and_field() {
    let tmp = repo_root();
    let path = tmp.path().join("experiments/ldf-table1.toml");
    let text = include_str!("../../../experiments/ldf-table1.toml");
    let broken = text.replacen("duration = 40.0", "duration = -1.0", 1);
    assert_ne!(broken, text, "the duration line moved; update this test");
    std::fs::write(&path, broken).unwrap();
    let opts = Options {
        root: Some(tmp.path().to_path_buf()),
        ..Options::quick()
    };
    let e = find("ldf-table1").unwrap();
    for err in [
        planned_runs(e, &opts).unwrap_err(),
        match run(e, &opts, &mut |_| {}) {
            Ok(_) => panic!("a broken spec ran"),
            Err(err) => err,
        },
    ] {
        assert_eq!(err.experiment, "ldf-table1");
        assert!(
            matches!(&err.kind, ReproErrorKind::Spec { file, .. } if file == &path.display().to_string()),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.starts_with("ldf-table1: ") && text.contains("duration"),
            "{text}"
        );
    }
}

#[test]
fn the_page_lists_every_verdict() {
    let o = outcome("tam-table2");
    let html = fairlane_repro::page(std::slice::from_ref(&o)).to_html();
    assert_eq!(html.matches("<svg").count(), 6);
    assert!(html.contains("Verdicts"));
}

#[test]
fn priority_levels_isolate_the_high_level_and_lend_idle_seats() {
    let o = outcome("priority-levels");
    assert_from_disk(&o);
    assert_claims(
        &o,
        &[
            "high-p99-vs-alone",
            "flat-much-worse",
            "exempt-p99-vs-alone",
            "level-shares-match-flat",
            "idle-seats-borrowed",
            "lent-seats-come-back",
        ],
    );
    // With levels the high tenant is served as if alone; flat, it waits behind 50 flows.
    let alone = &claim(&o, "high-p99-vs-alone").checks[0];
    assert!(alone.ours <= 1.2, "{alone}");
    let shares = &claim(&o, "level-shares-match-flat").checks[0];
    assert!(shares.ours.is_finite() && shares.ours < 1.0, "{shares}");
    let flat = &claim(&o, "flat-much-worse").checks[0];
    assert!(flat.ours >= 50.0, "{flat}");
    // The catch-all holds its 4 nominal seats and the high level's 2 lendable ones.
    let c = claim(&o, "idle-seats-borrowed");
    assert!(c.text.contains("of 6 on average"), "{c}");
    let back = &claim(&o, "lent-seats-come-back").checks[0];
    assert!(back.ours > 0.0 && back.ours <= 10.1, "{back}");
}
