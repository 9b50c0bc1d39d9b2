//! End-to-end tests of the simulator: determinism, spec errors, arrival and cost models
//! (statistical checks with stated tolerances), the GPS reference on hand-computed cases, and
//! each metric.

mod support;

use fairlane_sim::pool::report;
use fairlane_sim::pool::spec::CostSpec;
use fairlane_sim::rng::Rng;
use fairlane_sim::{run_all, Experiment, RunResult, SpecFile};
use support::{assert_edits_refused, err, run, spec, tmp};

const BASE: &str = include_str!("testdata/pool_base.toml");

#[test]
fn same_spec_and_seed_same_output() {
    let strip = |rs: &[RunResult]| support::fingerprint(rs);
    let a = run(BASE);
    let b = run(BASE);
    assert_eq!(strip(&a), strip(&b));
    let (ta, tb) = (tmp("det-a"), tmp("det-b"));
    let (da, db) = (ta.path(), tb.path());
    report::write_csv(da, &a).unwrap();
    report::write_csv(db, &b).unwrap();
    report::write_html(da, "t", "", &a, 4).unwrap();
    report::write_html(db, "t", "", &b, 4).unwrap();
    let mut files = 0;
    for e in std::fs::read_dir(da.join("csv")).unwrap() {
        let name = e.unwrap().file_name();
        let x = std::fs::read(da.join("csv").join(&name)).unwrap();
        let y = std::fs::read(db.join("csv").join(&name)).unwrap();
        assert_eq!(x, y, "{name:?} differs");
        files += 1;
    }
    assert_eq!(files, 8); // 4 files × 2 schedulers
    assert_eq!(
        std::fs::read(da.join("index.html")).unwrap(),
        std::fs::read(db.join("index.html")).unwrap()
    );
    // A different seed changes the open arrivals.
    let c = run(&BASE.replace("name = \"t\"", "name = \"t\"\nseed = 2"));
    assert_ne!(strip(&a), strip(&c));
    // The workload is the same under every scheduler: the Poisson tenants see the same arrivals.
    assert_eq!(a[0].tenants[1].arrived, a[1].tenants[1].arrived);
}

#[test]
fn spec_errors_name_file_field_and_what_is_allowed() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "cost = { kind = \"normal\"",
            "cost = { kind = \"normall\"",
            &[
                "bad.toml",
                "tenant[0].cost",
                "unknown variant `normall`",
                "lognormal",
            ],
        ),
        (
            "std = 0.1",
            "std = -0.1",
            &["tenant[0].cost.std", "≥ 0", "-0.1"],
        ),
        (
            "workers = 4",
            "workers = 0",
            &["server.workers", "between 1 and 4096"],
        ),
        (
            "[\"wfq\", \"2dfq\"]",
            "[\"wfq\", \"wfqq\"]",
            &["schedulers[1]", "wfqq", "2dfqe"],
        ),
        (
            "rate = 20.0",
            "rate = -3.0",
            &["tenant[1].arrival.rate", "> 0"],
        ),
        (
            "count = 3",
            "count = 3\ncolour = 1",
            &["tenant[1]", "unknown field `colour`"],
        ),
        (
            "track = [\"a\"]",
            "track = [\"zz\"]",
            &["metrics.track[0]", "zz"],
        ),
        (
            "rate = 100.0\n",
            "rate = 100.0\ncapacity = 5.0\n",
            &["server.capacity", "not both"],
        ),
        (
            "duration = 20.0",
            "duration = 20.0\nwarmup = 30.0",
            &["warmup", "shorter than duration"],
        ),
        (
            "kind = \"lognormal\", mean = 10.0, cov = 1.0",
            "kind = \"lognormal\", mean = 10.0, sigma = 1.0",
            &["tenant[1].cost.kind", "median"],
        ),
        (
            "arrival = { kind = \"backlogged\", outstanding = 10 }\n",
            "",
            &["tenant[0].arrival", "missing"],
        ),
        (
            "kind = \"poisson\", rate = 20.0",
            "kind = \"trace\", file = \"/nonexistent.csv\"",
            &["tenant[1].arrival.file", "cannot read trace"],
        ),
        ("name = \"a\"", "name = \"b-1\"", &["used twice"]),
    ];
    assert_edits_refused(BASE, cases);
    let e = err("name = \"x\"\nduration = [");
    assert!(e.starts_with("bad.toml: not valid TOML"), "{e}");
    let e = err(&format!(
        "{BASE}\n[[sweep]]\nlabel = \"p\"\nset = {{ \"tenant.zz.count\" = 1 }}\n"
    ));
    assert!(e.contains("no `tenant` entry is named \"zz\""), "{e}");
}

/// One tenant alone on a server so fast that nothing queues.
fn alone(arrival: &str, cost: &str, duration: f64) -> RunResult {
    let text = format!(
        "name = \"x\"\nduration = {duration}\nschedulers = [\"fifo\"]\n[server]\nworkers = 64\nrate = 1e9\n\
         [[tenant]]\nname = \"a\"\narrival = {arrival}\ncost = {cost}\n"
    );
    run(&text).remove(0)
}

#[test]
fn poisson_arrivals_have_the_stated_rate() {
    // 100/s for 200 s: 20000 expected, σ = √20000 ≈ 141; tolerance 4σ.
    let r = alone(
        "{ kind = \"poisson\", rate = 100.0 }",
        "{ kind = \"constant\", value = 1.0 }",
        200.0,
    );
    let n = r.tenants[0].arrived as f64;
    assert!((n - 20_000.0).abs() < 4.0 * 141.0, "{n}");
    assert_eq!(r.tenants[0].completed, r.tenants[0].arrived);
}

#[test]
fn on_off_arrivals_average_rate_times_on_fraction() {
    // 200/s while ON, ON 1 s and OFF 3 s on average: 50/s on average; over 2000 s the count's
    // relative error is dominated by the ~500 ON/OFF cycles: tolerance 10 %.
    let r = alone(
        "{ kind = \"on-off\", rate = 200.0, on = 1.0, off = 3.0 }",
        "{ kind = \"constant\", value = 1.0 }",
        2000.0,
    );
    let rate = r.tenants[0].arrived as f64 / 2000.0;
    assert!((rate - 50.0).abs() < 5.0, "{rate}");
}

#[test]
fn closed_loop_cycles_through_think_time() {
    // 4 clients, think 0.1 s on average, service 0.01 s on one worker at rate 100 (cost 1):
    // each client cycles every ~0.11 s (a little more when queued): 36 req/s at most.
    let text = "name = \"x\"\nduration = 500.0\nschedulers = [\"fifo\"]\n[server]\nworkers = 4\nrate = 100.0\n\
                [[tenant]]\nname = \"a\"\narrival = { kind = \"closed\", clients = 4, think = 0.1 }\n\
                cost = { kind = \"constant\", value = 1.0 }\n";
    let r = run(text).remove(0);
    let rate = r.tenants[0].completed as f64 / 500.0;
    let want = 4.0 / 0.11;
    assert!((rate - want).abs() < 0.05 * want, "{rate} vs {want}");
    // Latency is exactly the service time: 4 workers, never queued.
    assert!((r.tenants[0].latency_p99 - 0.01).abs() < 1e-4);
}

#[test]
fn backlogged_tenant_keeps_the_server_busy_and_gets_its_weight() {
    let text = "name = \"x\"\nduration = 100.0\nschedulers = [\"wfq\", \"wf2q\", \"2dfq\", \"drr\", \"sfq\"]\n\
                [server]\nworkers = 2\nrate = 10.0\n\
                [[tenant]]\nname = \"a\"\nweight = 3.0\narrival = { kind = \"backlogged\" }\ncost = { kind = \"uniform\", min = 0.5, max = 1.5 }\n\
                [[tenant]]\nname = \"b\"\narrival = { kind = \"backlogged\" }\ncost = { kind = \"constant\", value = 1.0 }\n";
    for r in run(text) {
        assert!((r.utilization - 1.0).abs() < 1e-3, "{}", r.utilization);
        let share = r.tenants[0].work / (r.tenants[0].work + r.tenants[1].work);
        assert!((share - 0.75).abs() < 0.02, "{}: {share}", r.scheduler);
        // Backlogged against a GPS reference with infinite demand: lag stays small.
        assert!(r.tenants[0].lag_max.abs() < 1.0, "{}", r.tenants[0].lag_max);
    }
}

#[test]
fn trace_replay_and_gps_reference_by_hand() {
    // Two requests of cost 2 at t = 0 on one worker of rate 1 under FIFO: a runs in [0, 2], b
    // in [2, 4]. GPS serves both at rate 1/2 until t = 4. Sampled every second:
    //   t:        1     2     3     4
    //   a actual  1     2     2     2     GPS 0.5 1 1.5 2   lag −0.5 −1 −0.5 0
    //   b actual  0     0     1     2     GPS same         lag  0.5  1  0.5 0
    let tmp = tmp("trace");
    let dir = tmp.path();
    std::fs::write(
        dir.join("t.csv"),
        "time,tenant,class,cost\n0,a,get,2\n0,b,get,2\n",
    )
    .unwrap();
    let text = "name = \"x\"\nduration = 6.0\nschedulers = [\"fifo\"]\n[server]\nworkers = 1\nrate = 1.0\n\
                [metrics]\ninterval = 1.0\noccupancy_interval = 1.0\ntrack = [\"a\", \"b\"]\n\
                [[tenant]]\nname = \"a\"\narrival = { kind = \"trace\", file = \"t.csv\" }\n\
                [[tenant]]\nname = \"b\"\narrival = { kind = \"trace\", file = \"t.csv\" }\n";
    let sf = SpecFile::parse(text, "x.toml", dir.to_path_buf()).unwrap();
    let r = run_all(&sf.scenarios().unwrap(), 1, &mut |_| {})
        .unwrap()
        .remove(0);
    let lag_a: Vec<f64> = r.series[0].lag.iter().map(|p| p.1).collect();
    let lag_b: Vec<f64> = r.series[1].lag.iter().map(|p| p.1).collect();
    assert_eq!(&lag_a[..5], &[-0.5, -1.0, -0.5, 0.0, 0.0]);
    assert_eq!(&lag_b[..5], &[0.5, 1.0, 0.5, 0.0, 0.0]);
    let service_a: Vec<f64> = r.series[0].service.iter().map(|p| p.1).collect();
    assert_eq!(&service_a[..4], &[1.0, 1.0, 0.0, 0.0]);
    // Latency: a waits 0 and runs 2; b waits 2 and runs 2.
    assert!((r.tenants[0].latency_p50 - 2.0).abs() < 2e-3);
    assert!((r.tenants[1].latency_p50 - 4.0).abs() < 4e-3);
    assert_eq!((r.tenants[0].completed, r.tenants[1].completed), (1, 1));
    assert_eq!((r.tenants[0].work, r.tenants[1].work), (2.0, 2.0));
    // Lag σ over the 6 samples (−0.5, −1, −0.5, 0, 0, 0): mean −1/3, σ = √(1/3·… ) computed:
    let xs = [-0.5f64, -1.0, -0.5, 0.0, 0.0, 0.0];
    let m = xs.iter().sum::<f64>() / 6.0;
    let sd = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / 6.0).sqrt();
    assert!((r.tenants[0].lag_std - sd).abs() < 1e-12);
    // Occupancy at t = 0, 1, …: worker 0 runs cost-2 requests until t = 4, then idles.
    let occ: Vec<Option<f32>> = r.occupancy.cells[0].clone();
    assert_eq!(
        &occ[..6],
        &[Some(2.0), Some(2.0), Some(2.0), Some(2.0), None, None]
    );
    // Gini in [0, 2): service over entitlement is (2, 0) → 1/2 for two tenants.
    assert!((r.gini[1].1 - 0.5).abs() < 1e-12, "{:?}", r.gini);
    assert!((r.utilization - 4.0 / 6.0).abs() < 1e-12);
}

#[test]
fn cost_distributions_have_their_moments() {
    let mut rng = Rng::new(42, 7);
    let n = 200_000;
    let check = |spec: CostSpec, mean: f64, sd: f64, rng: &mut Rng| {
        let d = spec.resolve().unwrap();
        let xs: Vec<f64> = (0..n).map(|_| d.sample(rng)).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let s = (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        // Tolerances: 5 standard errors of the mean, and 3 % on σ (5 % for heavy tails).
        assert!(
            (m - mean).abs() < 5.0 * sd / (n as f64).sqrt() + 1e-12,
            "{spec:?}: mean {m} vs {mean}"
        );
        assert!(
            (s - sd).abs() < 0.05 * sd + 1e-12,
            "{spec:?}: sd {s} vs {sd}"
        );
        assert!(xs.iter().all(|&x| x > 0.0));
        assert!((d.mean() - mean).abs() < 1e-9 * mean.max(1.0));
    };
    check(CostSpec::Constant { value: 3.0 }, 3.0, 0.0, &mut rng);
    check(
        CostSpec::Normal {
            mean: 1000.0,
            std: 100.0,
        },
        1000.0,
        100.0,
        &mut rng,
    );
    check(CostSpec::Exponential { mean: 5.0 }, 5.0, 5.0, &mut rng);
    check(
        CostSpec::Uniform { min: 2.0, max: 4.0 },
        3.0,
        2.0 / 12f64.sqrt(),
        &mut rng,
    );
    check(
        CostSpec::Lognormal {
            mean: Some(10.0),
            cov: Some(0.5),
            median: None,
            sigma: None,
        },
        10.0,
        5.0,
        &mut rng,
    );
    let s: f64 = 0.5;
    let ln_mean = (s * s / 2.0).exp() * 100.0;
    let ln_sd = ln_mean * ((s * s).exp() - 1.0).sqrt();
    check(
        CostSpec::Lognormal {
            mean: None,
            cov: None,
            median: Some(100.0),
            sigma: Some(s),
        },
        ln_mean,
        ln_sd,
        &mut rng,
    );
    check(
        CostSpec::Empirical {
            values: vec![1.0, 3.0],
        },
        2.0,
        1.0,
        &mut rng,
    );
    // Histogram: [0,1) weight 1 and [1,3) weight 3: mean 0.25·0.5 + 0.75·2 = 1.625.
    let m2 = 0.25 * (1.0 / 3.0) + 0.75 * (27.0 - 1.0) / 6.0;
    check(
        CostSpec::Histogram {
            bins: vec![[1e-9, 1.0, 1.0], [1.0, 3.0, 3.0]],
        },
        1.625,
        (m2 - 1.625f64.powi(2)).sqrt(),
        &mut rng,
    );
    // A normal with mass below 0 is redrawn: every cost stays positive.
    let d = CostSpec::Normal {
        mean: 1.0,
        std: 2.0,
    }
    .resolve()
    .unwrap();
    assert!((0..10_000).all(|_| d.sample(&mut rng) > 0.0));
}

#[test]
fn pooled_tenants_draw_from_everyone_elses_classes() {
    let text = include_str!("testdata/pooled_costs.toml");
    let r = run(text).remove(0);
    // Half of u's requests come from each source tenant: mean cost 50.5 (±5 % for 10k draws).
    let m = r.tenants[2].mean_cost;
    assert!((m - 50.5).abs() < 0.05 * 50.5, "{m}");
    let e = err(&text
        .replace(
            "class = [{ name = \"get\", cost = { kind = \"constant\", value = 1.0 } }]",
            "cost = { kind = \"pooled\" }",
        )
        .replace(
            "class = [{ name = \"scan\", cost = { kind = \"constant\", value = 100.0 } }]",
            "cost = { kind = \"pooled\" }",
        ));
    assert!(
        e.contains("at least one tenant with its own cost model"),
        "{e}"
    );
}

#[test]
fn sweeps_and_suites_expand_deterministically() {
    let sweep = format!(
        "{BASE}\n[[sweep]]\nlabel = \"few\"\nset = {{ \"tenant.b.count\" = 1, \"server.workers\" = 2 }}\n\
         [[sweep]]\nlabel = \"many\"\nset = {{ \"tenant.b.count\" = 5 }}\n"
    );
    let sc = spec(&sweep).scenarios().unwrap();
    assert_eq!(sc.len(), 2);
    assert_eq!((sc[0].tenants.len(), sc[0].workers), (2, 2));
    assert_eq!((sc[1].tenants.len(), sc[1].workers), (6, 4));
    let suite = format!(
        "{BASE}\n[suite]\nruns = 5\n[suite.vary]\n\"server.workers\" = {{ min = 2, max = 64, int = true, log = true }}\n\"speed\" = {{ min = 0.5, max = 4.0 }}\n"
    );
    let a = spec(&suite).scenarios().unwrap();
    let b = spec(&suite).scenarios().unwrap();
    assert_eq!(a.len(), 5);
    let w: Vec<usize> = a.iter().map(|s| s.workers).collect();
    assert_eq!(w, b.iter().map(|s| s.workers).collect::<Vec<_>>());
    assert!(w.iter().all(|&x| (2..=64).contains(&x)));
    assert!(w.windows(2).any(|p| p[0] != p[1]), "{w:?}");
    assert_eq!(a[0].label, "run-0");
    // A suite of 10⁹ runs is refused before any point is drawn or held.
    let huge = suite.replace("runs = 5", "runs = 1_000_000_000");
    let e = spec(&huge).scenarios().unwrap_err().to_string();
    assert!(
        e.contains("suite.runs") && e.contains("between 1 and 100000") && e.contains("1000000000"),
        "{e}"
    );
}

#[test]
fn memory_is_bounded_by_max_points_not_duration() {
    let text = BASE
        .replace("duration = 20.0", "duration = 400.0")
        .replace("track = [\"a\"]", "track = [\"a\"]\nmax_points = 64");
    for r in run(&text) {
        assert!(r.series[0].lag.len() < 64 && r.series[0].lag.len() >= 32);
        assert!(r.gini.len() < 64);
        assert!(r
            .occupancy
            .cells
            .iter()
            .all(|c| c.len() < 64 && c.len() >= 32));
        // Thinning keeps time order and spans the run.
        let t: Vec<f64> = r.series[0].lag.iter().map(|p| p.0).collect();
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert!(*t.last().unwrap() > 300.0);
    }
}

#[test]
fn shipped_experiments_parse() {
    let mut n = 0;
    for p in support::shipped("experiments", "") {
        // ldf-*.toml are database-server specs, checked in dbserver.rs; tam-*.toml are TAM
        // simulations, checked in tam_mechanisms.rs; vtc-*.toml are LLM servers, in llm_spec.rs.
        let f = p.file_name().unwrap().to_string_lossy();
        if !(f.starts_with("ldf-") || f.starts_with("tam-") || f.starts_with("vtc-")) {
            let s = SpecFile::load(&p).unwrap();
            let sc = s.scenarios().unwrap_or_else(|e| panic!("{e}"));
            assert!(!sc.is_empty());
            n += 1;
        }
    }
    assert!(n >= 4, "{n} specs");
}

#[test]
fn the_docs_example_runs() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/simulator.md"),
    )
    .unwrap();
    let start = doc
        .find("```toml\nname = ")
        .expect("docs/simulator.md has an example spec")
        + 8;
    let text = &doc[start..start + doc[start..].find("```").unwrap()];
    let mut s = spec(text);
    s.set("duration", toml::Value::Float(5.0)).unwrap();
    let rs = run_all(&s.scenarios().unwrap(), 2, &mut |_| {}).unwrap();
    assert_eq!(rs.len(), 3);
    // Small tenants fare best under 2DFQ in this two-size workload.
    let small_sigma = |r: &RunResult| r.tenants[0].lag_std;
    assert!(
        small_sigma(&rs[2]) < small_sigma(&rs[0]),
        "{} vs {}",
        small_sigma(&rs[2]),
        small_sigma(&rs[0])
    );
}
