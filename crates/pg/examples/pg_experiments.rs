//! The experiments behind scripts/pg-isolation.sh and scripts/pg-table1.sh, on a real
//! PostgreSQL (started here, as the tests start theirs) behind the pooler; each tenant's CPU
//! is read from its backends' `/proc/<pid>/stat`, independently of the pooler.
//!
//! ```text
//! pg_experiments isolation [SECONDS]      the tight isolation figures (docs/benchmarks.md)
//! pg_experiments reservations [SECONDS]   only their reserved shares (FIFO, then LDF)
//! pg_experiments light [SECONDS]          only the light tenant's latency
//! pg_experiments table1 [SECONDS] [OUT]   seeds/003 Table 1's shape, written to OUT (markdown)
//! ```

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::fmt::Write;

use support::load::{self, clients, tenants_config, Clients, CpuWatch, Outcome, HEAVY};
use support::Postgres;

fn arg<T: std::str::FromStr>(i: usize, default: T) -> T {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

fn run(
    pg: &Postgres,
    watch: &CpuWatch,
    algorithm: &str,
    tenants: &[(String, f64)],
    load: &[Clients],
    secs: u64,
) -> Outcome {
    load::measure(
        tenants_config(pg.port, algorithm, tenants),
        watch,
        load,
        secs,
    )
}

fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let m = v.iter().sum::<f64>() / n;
    (
        m,
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt(),
    )
}

fn start(roles: &[String]) -> (Postgres, CpuWatch) {
    support::renice_this_thread(-20);
    let pg = Postgres::start_with_nice(-20);
    for r in roles {
        pg.role(r, &format!("{r}-pw"));
    }
    (pg, CpuWatch::start())
}

/// The capacity the server delivers here: % of 2 cores all tenants got under `no-res` / FIFO.
fn capacity(shares: &HashMap<String, f64>, roles: &[String]) -> f64 {
    roles
        .iter()
        .map(|r| shares.get(r).copied().unwrap_or(0.0))
        .sum()
}

/// The roles of the isolation experiments: gold, silver, light and four bullies.
fn isolation_roles() -> (Vec<String>, Vec<String>) {
    let bullies: Vec<String> = (1..=4).map(|i| format!("bully{i}")).collect();
    let mut roles: Vec<String> = vec!["gold".into(), "silver".into(), "light".into()];
    roles.extend(bullies.iter().cloned());
    (roles, bullies)
}

/// Every role with gold's and silver's reservations (others none).
fn isolation_tenants(roles: &[String], gold: f64, silver: f64) -> Vec<(String, f64)> {
    roles
        .iter()
        .map(|r| {
            let res = match r.as_str() {
                "gold" => gold,
                "silver" => silver,
                _ => 0.0,
            };
            (r.clone(), res)
        })
        .collect()
}

/// Gold (30 %) and silver (20 %) against four bullies under FIFO, then LDF: the shares read
/// from /proc and the shares the pooler charged.
fn reservations(pg: &Postgres, watch: &CpuWatch, secs: u64) {
    let (roles, bullies) = isolation_roles();
    let mut heavy = vec![clients("gold", 2, HEAVY, 0), clients("silver", 2, HEAVY, 0)];
    heavy.extend(bullies.iter().map(|b| clients(b, 3, HEAVY, 0)));
    let fifo = run(
        pg,
        watch,
        "fifo",
        &isolation_tenants(&roles, 0.0, 0.0),
        &heavy,
        secs,
    );
    let heavy_roles: Vec<String> = roles.iter().filter(|r| *r != "light").cloned().collect();
    let c = capacity(&fifo.shares, &heavy_roles);
    let scale = (c / 100.0).min(1.0);
    let (rg, rs) = (30.0 * scale, 20.0 * scale);
    let ldf = run(
        pg,
        watch,
        "ldf",
        &isolation_tenants(&roles, rg, rs),
        &heavy,
        secs,
    );
    println!(
        "capacity under FIFO: {c:.1} % of 2 cores; reservations gold {rg:.1} %, silver {rs:.1} %"
    );
    println!("| policy | gold % (res {rg:.1}) | silver % (res {rs:.1}) | bullies % (each) | gold, silver % as the pooler charged |");
    println!("|---|---|---|---|---|");
    for (name, r) in [("LDF", &ldf), ("FIFO", &fifo)] {
        let b: f64 = bullies
            .iter()
            .map(|x| r.shares.get(x).copied().unwrap_or(0.0))
            .sum::<f64>()
            / 4.0;
        let charged = |t: &str| r.charged.get(t).copied().unwrap_or(0.0);
        println!(
            "| {name} | {:.1} | {:.1} | {b:.1} | {:.1}, {:.1} |",
            r.shares["gold"],
            r.shares["silver"],
            charged("gold"),
            charged("silver")
        );
    }
    let dev = |r: &Outcome| {
        (
            (r.shares["gold"] - rg).abs() / scale,
            (r.shares["silver"] - rs).abs() / scale,
        )
    };
    let (dg, ds) = dev(&ldf);
    println!("LDF deviation, in points of an idle machine's scale: gold {dg:.1}, silver {ds:.1} (target ≤ 3)");
    // One transaction more or less in an interval moves a share by this much: the grain
    // of a scheduler that dispatches whole transactions, set against the reservations.
    for (t, res) in [("gold", rg), ("silver", rs)] {
        let cpu = ldf.per_transaction.get(t).copied().unwrap_or(0.0);
        let interval = 1.0;
        println!(
            "{t}: {:.1} ms of CPU a transaction, one transaction a {interval} s interval = {:.2} % of 2 cores ({:.1} points at the idle scale); the reservation is {:.1} transactions an interval",
            cpu * 1e3,
            cpu * 100.0 / (2.0 * interval),
            cpu * 100.0 / (2.0 * interval) / scale,
            res * 2.0 * interval / 100.0 / cpu.max(1e-9)
        );
    }
}

/// A light tenant's latency against four bullies under SFQ(D), 2DFQᴱ and FIFO.
fn light(pg: &Postgres, watch: &CpuWatch, secs: u64) {
    let (roles, bullies) = isolation_roles();
    let mut mix = vec![clients("light", 1, "select 1", 10)];
    mix.extend(bullies.iter().map(|b| clients(b, 3, HEAVY, 0)));
    let mut ratios = Vec::new();
    for alg in ["sfq", "2dfqe", "fifo"] {
        let r = run(
            pg,
            watch,
            alg,
            &isolation_tenants(&roles, 0.0, 0.0),
            &mix,
            secs,
        );
        let l = &r.latencies["light"];
        let (p50, p99) = (load::quantile(l, 0.5), load::quantile(l, 0.99));
        println!(
            "light tenant under {alg}: p50 {p50:?}, p99 {p99:?} ({} queries)",
            l.len()
        );
        ratios.push((alg, p99));
    }
    let fifo_p99 = ratios[2].1.as_secs_f64();
    for (alg, p99) in &ratios[..2] {
        println!(
            "light p99: {alg} {:.1}× better than FIFO (target ≥ 5×)",
            fifo_p99 / p99.as_secs_f64().max(1e-9)
        );
    }
}

/// `which`: "isolation" (both parts), "reservations" or "light".
fn isolation(which: &str, secs: u64) {
    let (pg, watch) = start(&isolation_roles().0);
    if which != "light" {
        reservations(&pg, &watch, secs);
    }
    if which != "reservations" {
        light(&pg, &watch, secs);
    }
}

fn table1(secs: u64, out: &str) {
    let res = [5.0, 8.0, 8.0, 8.0, 10.0, 10.0, 10.0, 25.0];
    let reserved: Vec<String> = (1..=8).map(|i| format!("t{i}")).collect();
    let bullies: Vec<String> = (1..=8).map(|i| format!("bully{i}")).collect();
    let all: Vec<String> = reserved.iter().chain(&bullies).cloned().collect();
    let (pg, watch) = start(&all);
    let load_of = |k: usize| -> Vec<Clients> {
        all.iter()
            .take(8 + k)
            .map(|r| clients(r, 2, HEAVY, 0))
            .collect()
    };
    // The capacity: every tenant and all 8 bullies, no reservations.
    let none: Vec<(String, f64)> = all.iter().map(|r| (r.clone(), 0.0)).collect();
    let cal = run(&pg, &watch, "no-res", &none, &load_of(8), secs);
    let c = capacity(&cal.shares, &all);
    let scale = (c / 100.0).min(1.0);
    let mut table = String::new();
    let _ = writeln!(table, "Tenant T8's CPU utilization, % of the server's CPU (ResCPU_8 = 25 %), mean and standard deviation of per-second samples over {secs} s; the server delivered {c:.1} % of its 2 cores to the tenants here, and reservations and utilizations are scaled by 100 / {c:.1} (see docs/pg.md).\n");
    let _ = writeln!(table, "| bullies | LDF avg | LDF sd | DRR avg | DRR sd | EDF avg | EDF sd | No Res avg | No Res sd | paper LDF | paper DRR | paper EDF | paper No Res |");
    let _ = writeln!(
        table,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    let paper = [
        (25.0, 25.06, 25.09, 11.89),
        (25.11, 23.86, 25.14, 9.48),
        (25.12, 20.93, 25.11, 7.93),
        (25.09, 19.36, 25.12, 6.82),
        (25.09, 17.5, 24.85, 5.97),
    ];
    for (row, k) in [0usize, 2, 4, 6, 8].into_iter().enumerate() {
        let mut cells = Vec::new();
        for alg in ["ldf", "drr-res", "edf-res", "no-res"] {
            let tenants: Vec<(String, f64)> = all
                .iter()
                .enumerate()
                .map(|(i, r)| {
                    (
                        r.clone(),
                        if i < 8 && alg != "no-res" {
                            res[i] * scale
                        } else {
                            0.0
                        },
                    )
                })
                .collect();
            let r = run(&pg, &watch, alg, &tenants, &load_of(k), secs);
            let t8: Vec<f64> = r
                .samples
                .get("t8")
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|x| x / scale)
                .collect();
            let (m, sd) = mean_sd(&t8);
            eprintln!("{k} bullies, {alg}: T8 {m:.2} ± {sd:.2}");
            cells.push(format!("{m:.2} | {sd:.2}"));
        }
        let p = paper[row];
        let _ = writeln!(
            table,
            "| {k} | {} | {} | {} | {} | {} |",
            cells.join(" | "),
            p.0,
            p.1,
            p.2,
            p.3
        );
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().next().unwrap_or("?");
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let table = format!("<!-- Written by scripts/pg-table1.sh; load average {load} on {cores} cores at the end (above the core count: a loaded machine's figures, preliminary). -->\n\n{table}");
    print!("{table}");
    std::fs::write(out, table).unwrap_or_else(|e| panic!("{out}: {e}"));
    eprintln!("written to {out}");
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some(w @ ("isolation" | "reservations" | "light")) => isolation(w, arg(2, 30)),
        Some("table1") => table1(arg(2, 10), &arg(3, "target/pg-table1.md".to_string())),
        _ => {
            eprintln!("usage: pg_experiments isolation|reservations|light [SECONDS] | table1 [SECONDS] [OUT]");
            std::process::exit(2);
        }
    }
}
