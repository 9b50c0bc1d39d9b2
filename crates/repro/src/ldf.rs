//! The reproductions of Das et al., *CPU Sharing Techniques for Performance Isolation in
//! Multi-tenant Relational Database-as-a-Service* (VLDB 2014), §6, on the simulator's
//! database server: Table 1 and Fig. 2, Tables 3–4 and Fig. 3, Fig. 4 (elastic
//! reservations), Fig. 5 (revenue optimization) and Fig. 6 (the fairness index α).
//! Reservations and the utilization cap are read from the spec's runs, never copied here.

use std::fmt::Write as _;

use fairlane_plot::{fmt_num, Axis, BarChart, LineChart, Series, Style, Table};

use crate::claim::{Claim, Relation};
use crate::out::{distinct, fmt2, Out};
use crate::runs::{DbRun, DbTenantResult};

fn fig(body: &mut Out, svg: String) {
    body.fig(svg);
}

fn labels(runs: &[DbRun]) -> Vec<String> {
    distinct(runs, |r| &r.label)
}

/// A tenant's proportional share of the capped CPU: its reservation over all reservations
/// in the run, times the utilization cap (e.g. 50 / 170 × 95 = 27.94 %).
fn proportional_share(r: &DbRun, t: &DbTenantResult, cap: f64) -> f64 {
    let total: f64 = r.tenants.iter().map(|x| x.res).sum();
    t.res / total * cap
}

fn find<'a>(runs: &'a [DbRun], label: &str, sched: &str) -> Option<&'a DbRun> {
    runs.iter()
        .find(|r| r.label == label && r.scheduler == sched)
}

fn pm(m: f64, s: f64) -> String {
    format!("{} ± {}", fmt2(m), fmt2(s))
}

fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.1}×")
    } else {
        "-".into()
    }
}

const SCHEDS: [(&str, &str); 4] = [
    ("ldf", "LDF"),
    ("drr", "DRR"),
    ("edf", "EDF"),
    ("no-res", "No Res"),
];

/// Table 1 of the paper: T8's CPU (avg, std dev) by number of bullies, LDF, DRR, EDF, No Res.
const PAPER_T1: [(u32, [(f64, f64); 4]); 5] = [
    (
        0,
        [(25.0, 1.06), (25.06, 0.71), (25.09, 0.84), (11.89, 1.29)],
    ),
    (
        2,
        [(25.11, 1.49), (23.86, 2.24), (25.14, 1.39), (9.48, 0.78)],
    ),
    (
        4,
        [(25.12, 1.61), (20.93, 3.89), (25.11, 1.46), (7.93, 0.55)],
    ),
    (6, [(25.09, 1.7), (19.36, 4.9), (25.12, 3.45), (6.82, 0.49)]),
    (
        8,
        [(25.09, 1.62), (17.5, 6.01), (24.85, 3.48), (5.97, 0.42)],
    ),
];

pub(crate) fn table1(runs: &[DbRun], _cap: f64, body: &mut Out) {
    let mut t = Table::new(
        ["bullies"].into_iter().map(String::from).chain(
            SCHEDS
                .iter()
                .flat_map(|(_, n)| [format!("{n} ours"), format!("{n} paper")]),
        ),
    );
    let mut p99: Vec<Vec<(f64, f64)>> = vec![Vec::new(); 4];
    // T8's reservation, from the spec (every run carries its tenants' ResCPU).
    let res = runs
        .iter()
        .find_map(|r| r.tenant("T8"))
        .map_or(f64::NAN, |t| t.res);
    let mut ldf_ok = Claim::new(
        "ldf-holds-reservation",
        format!(
            "LDF keeps T8 within 0.5 points of its {} % reservation at every number of bullies (paper 25.0–25.12)",
            fmt_num(res)
        ),
    );
    let mut nores_ok = Claim::new("nores-falls", "");
    let mut at8 = [f64::NAN; 4];
    let mut p99_8 = [f64::NAN; 4];
    for (bullies, paper) in PAPER_T1 {
        let label = bullies.to_string();
        let mut row = vec![label.clone()];
        for (k, (s, _)) in SCHEDS.iter().enumerate() {
            let t8 = find(runs, &label, s).and_then(|r| r.tenant("T8"));
            let (m, sd, lat) = t8.map_or((f64::NAN, f64::NAN, f64::NAN), |t| {
                (t.cpu_mean, t.cpu_std, t.latency_p99)
            });
            row.push(pm(m, sd));
            row.push(pm(paper[k].0, paper[k].1));
            p99[k].push((bullies as f64, lat * 1000.0));
            let res = t8.map_or(f64::NAN, |t| t.res);
            if *s == "ldf" {
                ldf_ok.push(
                    format!("T8's CPU % under LDF, {bullies} bullies, against its ResCPU"),
                    m,
                    Relation::Within(0.5),
                    res,
                );
            }
            if *s == "no-res" {
                nores_ok.push(
                    format!("T8's CPU % under No Res, {bullies} bullies"),
                    m,
                    Relation::Within(0.5),
                    paper[k].0,
                );
            }
            if bullies == 8 {
                at8[k] = m;
                p99_8[k] = lat;
            }
        }
        t.push_row(row);
    }
    let _ = write!(
        body,
        "<h3>Table 1: T8's CPU utilization (%), ResCPU = MaxCPU = {} %</h3>",
        fmt_num(res)
    );
    body.table(t);
    fig2(&p99, &p99_8, body);
    body.claim(ldf_ok);
    nores_ok.text = format!(
        "No Res falls with the bullies as the paper's does (within 0.5 points of 11.89 … 5.97; ours {} at 8)",
        fmt2(at8[3])
    );
    body.claim(nores_ok);
    body.claim(
        Claim::new(
            "drr-below-ldf",
            format!(
                "DRR falls below LDF as bullies are added (paper 17.5 vs 25.09 at 8; ours {} vs {})",
                fmt2(at8[1]),
                fmt2(at8[0])
            ),
        )
        .check("T8's CPU points, LDF − DRR, 8 bullies", at8[0] - at8[1], Relation::Above, 3.0),
    );
    p99_claims(&p99_8, body);
}

/// Fig. 2: T8's p99 latency against the bullies, per scheduler, and the ratios at 8.
fn fig2(p99: &[Vec<(f64, f64)>], p99_8: &[f64; 4], body: &mut Out) {
    let mut c = LineChart::new(
        "Fig. 2: 99th percentile latency of T8's queries",
        Axis::linear("number of bullies"),
        Axis::linear("p99 latency (ms)"),
    );
    for (k, (_, n)) in SCHEDS.iter().enumerate() {
        c = c.series(Series::new(*n, p99[k].clone()).style(Style::LinePoints));
    }
    fig(body, c.to_svg());
    let _ = write!(
        body,
        "<p>At 8 bullies, T8's p99: LDF {} ms, DRR {} ms, EDF {} ms, No Res {} ms — No Res / LDF \
         = {}, DRR / LDF = {}, EDF / LDF = {} (paper: ~8×, ~5×, ~2×).</p>",
        fmt_num(p99_8[0] * 1000.0),
        fmt_num(p99_8[1] * 1000.0),
        fmt_num(p99_8[2] * 1000.0),
        fmt_num(p99_8[3] * 1000.0),
        times(p99_8[3] / p99_8[0]),
        times(p99_8[1] / p99_8[0]),
        times(p99_8[2] / p99_8[0]),
    );
}

/// T8's p99 at 8 bullies: LDF's against No Res, DRR and EDF.
fn p99_claims(p99_8: &[f64; 4], body: &mut Out) {
    body.claim(
        Claim::new(
            "p99-vs-nores",
            format!(
                "T8's p99 is much lower under LDF than under No Res at 8 bullies (paper ~8×, ours {})",
                times(p99_8[3] / p99_8[0])
            ),
        )
        .check("T8's p99, No Res / LDF, 8 bullies", p99_8[3] / p99_8[0], Relation::AtLeast, 2.0),
    );
    body.claim(
        Claim::new(
            "p99-vs-drr-edf",
            format!(
                "…and than under DRR and EDF (paper ~5× and ~2×; ours {} and {})",
                times(p99_8[1] / p99_8[0]),
                times(p99_8[2] / p99_8[0])
            ),
        )
        .check(
            "T8's p99, DRR / LDF, 8 bullies",
            p99_8[1] / p99_8[0],
            Relation::AtLeast,
            1.5,
        )
        .check(
            "T8's p99, EDF / LDF, 8 bullies",
            p99_8[2] / p99_8[0],
            Relation::AtLeast,
            1.5,
        ),
    );
}

/// CPU avg, its std dev, violation avg, its std dev.
type CpuViol = (f64, f64, f64, f64);

/// Table 3 (no bullies): (tenant, ResCPU, [CpuViol for LDF, DRR, EDF]).
const PAPER_T3: [(&str, f64, [CpuViol; 3]); 4] = [
    (
        "T1",
        10.0,
        [
            (5.75, 0.37, 2.94, 0.4),
            (6.35, 2.51, 1.36, 1.95),
            (0.93, 0.53, 8.54, 0.97),
        ],
    ),
    (
        "T3",
        16.0,
        [
            (9.09, 0.62, 4.91, 0.64),
            (9.58, 3.81, 2.67, 3.26),
            (6.89, 0.58, 8.18, 1.0),
        ],
    ),
    (
        "T5",
        20.0,
        [
            (11.31, 0.89, 6.47, 0.97),
            (11.69, 4.9, 3.69, 4.22),
            (10.87, 0.68, 8.04, 1.13),
        ],
    ),
    (
        "T8",
        50.0,
        [
            (27.89, 2.45, 17.68, 2.32),
            (26.67, 12.58, 12.97, 9.97),
            (40.81, 3.01, 7.48, 1.37),
        ],
    ),
];

/// Table 4: T8's CPU by bullies (avg, sd) for LDF, DRR, EDF, No Res.
const PAPER_T4: [(u32, [(f64, f64); 4]); 5] = [
    (
        0,
        [(27.89, 2.45), (26.67, 12.58), (40.81, 3.01), (11.89, 1.29)],
    ),
    (
        2,
        [(27.89, 1.75), (24.32, 11.29), (40.67, 3.19), (9.48, 0.78)],
    ),
    (
        4,
        [(27.70, 2.86), (28.24, 9.99), (40.5, 2.95), (7.93, 0.55)],
    ),
    (
        6,
        [(27.64, 1.43), (17.71, 12.28), (40.58, 2.59), (6.82, 0.49)],
    ),
    (
        8,
        [(27.47, 2.55), (14.32, 11.035), (40.56, 2.96), (5.97, 0.42)],
    ),
];

pub(crate) fn table3(runs: &[DbRun], cap: f64, body: &mut Out) {
    no_bullies(runs, cap, body);
    table4(runs, cap, body);
    fig3(runs, body);
}

/// Table 3 and Jain's index: every tenant's CPU and violation without bullies.
fn no_bullies(runs: &[DbRun], cap: f64, body: &mut Out) {
    let mut t = Table::new(
        ["tenant", "ResCPU", "share"]
            .into_iter()
            .map(String::from)
            .chain(SCHEDS[..3].iter().flat_map(|(_, n)| {
                [
                    format!("{n} CPU ours"),
                    format!("{n} CPU paper"),
                    format!("{n} viol. ours"),
                    format!("{n} viol. paper"),
                ]
            })),
    );
    // Reservations and the cap come from the spec (through the LDF run without bullies).
    let base = find(runs, "0", "ldf");
    let total = base.map_or(f64::NAN, |r| r.tenants.iter().map(|t| t.res).sum());
    let mut ldf_prop = Claim::new(
        "ldf-proportional",
        format!(
            "LDF shares the {} % in proportion to reservations (each tenant within 0.5 points of ResCPU/{} × {})",
            fmt_num(cap),
            fmt_num(total),
            fmt_num(cap)
        ),
    );
    let mut edf_ok = Claim::new(
        "edf-favours-large",
        "EDF favours large reservations as in the paper (each CPU within 1 point of 0.93 / 6.89 / 10.87 / 40.81)",
    );
    for (name, _, paper) in PAPER_T3 {
        let spec_tenant = base.and_then(|r| r.tenant(name).map(|t| (r, t)));
        let res = spec_tenant.map_or(f64::NAN, |(_, t)| t.res);
        let share = spec_tenant.map_or(f64::NAN, |(r, t)| proportional_share(r, t, cap));
        let mut row = vec![name.to_string(), fmt_num(res), fmt2(share)];
        for (k, (s, _)) in SCHEDS[..3].iter().enumerate() {
            let x = find(runs, "0", s).and_then(|r| r.tenant(name));
            let (c, cs, v, vs) = x.map_or((f64::NAN, 0.0, f64::NAN, 0.0), |t| {
                (t.cpu_mean, t.cpu_std, t.viol_points, t.viol_points_std)
            });
            row.push(pm(c, cs));
            row.push(pm(paper[k].0, paper[k].1));
            row.push(pm(v, vs));
            row.push(pm(paper[k].2, paper[k].3));
            if *s == "ldf" {
                ldf_prop.push(
                    format!("{name}'s CPU % under LDF against ResCPU / ΣResCPU × cap"),
                    c,
                    Relation::Within(0.5),
                    share,
                );
            }
            if *s == "edf" {
                edf_ok.push(
                    format!("{name}'s CPU % under EDF"),
                    c,
                    Relation::Within(1.0),
                    paper[k].0,
                );
            }
        }
        t.push_row(row);
    }
    let _ = write!(
        body,
        "<h3>Table 3: CPU (%) and violation (ResCPU − CPU_eff, points) with no bullies, {} % reserved</h3>",
        fmt_num(total)
    );
    body.table(t);
    jain(runs, [ldf_prop, edf_ok], body);
}

/// Jain's index over the tenants' mean ViolCPU without bullies, after Table 3's `claims`.
fn jain(runs: &[DbRun], claims: [Claim; 2], body: &mut Out) {
    let jain = |s: &str| find(runs, "0", s).map_or(f64::NAN, |r| r.jain);
    let (jl, jd, je) = (jain("ldf"), jain("drr"), jain("edf"));
    let _ = write!(
        body,
        "<p>Jain's index over the tenants' mean ViolCPU: LDF {}, DRR {}, EDF {} (paper: LDF 0.99, EDF 0.87).</p>",
        fmt_num(jl),
        fmt_num(jd),
        fmt_num(je)
    );
    for c in claims {
        body.claim(c);
    }
    body.claim(
        Claim::new(
            "jain",
            format!(
                "Jain's index: LDF ≈ 0.99, EDF ≈ 0.87 (ours {} and {})",
                fmt_num(jl),
                fmt_num(je)
            ),
        )
        .check("Jain's index, LDF", jl, Relation::AtLeast, 0.98)
        .check(
            "Jain's index, EDF (lower bound)",
            je,
            Relation::AtLeast,
            0.8,
        )
        .check(
            "Jain's index, EDF (upper bound)",
            je,
            Relation::AtMost,
            0.92,
        ),
    );
}

/// Table 4: T8's CPU with 0–8 bullies, overbooked.
fn table4(runs: &[DbRun], cap: f64, body: &mut Out) {
    let mut t4 = Table::new(
        ["bullies"].into_iter().map(String::from).chain(
            SCHEDS
                .iter()
                .flat_map(|(_, n)| [format!("{n} ours"), format!("{n} paper")]),
        ),
    );
    let mut ldf_steady = Claim::new("ldf-steady", "");
    let mut steady_share = f64::NAN;
    let mut at8 = [f64::NAN; 4];
    let mut at0 = [f64::NAN; 4];
    for (bullies, paper) in PAPER_T4 {
        let label = bullies.to_string();
        let mut row = vec![label.clone()];
        for (k, (s, _)) in SCHEDS.iter().enumerate() {
            let run = find(runs, &label, s);
            let x = run.and_then(|r| r.tenant("T8"));
            let (m, sd) = x.map_or((f64::NAN, 0.0), |t| (t.cpu_mean, t.cpu_std));
            row.push(pm(m, sd));
            row.push(pm(paper[k].0, paper[k].1));
            if *s == "ldf" {
                let share = run
                    .zip(x)
                    .map_or(f64::NAN, |(r, t)| proportional_share(r, t, cap));
                if bullies == 0 {
                    steady_share = share;
                }
                ldf_steady.push(
                    format!(
                        "T8's CPU % under LDF, {bullies} bullies, against its proportional share"
                    ),
                    m,
                    Relation::Within(0.6),
                    share,
                );
            }
            if bullies == 8 {
                at8[k] = m;
            }
            if bullies == 0 {
                at0[k] = m;
            }
        }
        t4.push_row(row);
    }
    body.push_str("<h3>Table 4: T8's CPU (%) with 0–8 bullies, overbooked</h3>");
    body.table(t4);
    ldf_steady.text = format!(
        "LDF keeps T8 at its proportional share ({} %) whatever the bullies (paper 27.89 … 27.47)",
        fmt2(steady_share)
    );
    body.claim(ldf_steady);
    body.claim(
        Claim::new(
            "drr-falls",
            format!(
                "DRR's T8 falls with bullies, well below LDF's (paper 26.67 → 14.32; ours {} → {})",
                fmt2(at0[1]),
                fmt2(at8[1])
            ),
        )
        .check(
            "T8's CPU points, LDF − DRR, 8 bullies",
            at8[0] - at8[1],
            Relation::Above,
            3.0,
        ),
    );
}

/// Fig. 3: T1's and T8's p99 latency with 8 bullies.
fn fig3(runs: &[DbRun], body: &mut Out) {
    let mut p99: Vec<(String, Vec<f64>)> = Vec::new();
    for (s, n) in SCHEDS {
        let vals: Vec<f64> = ["T1", "T8"]
            .iter()
            .map(|t| {
                find(runs, "8", s)
                    .and_then(|r| r.tenant(t))
                    .map_or(f64::NAN, |x| x.latency_p99 * 1000.0)
            })
            .collect();
        p99.push((n.to_string(), vals));
    }
    let mut b = BarChart::new(
        "Fig. 3: p99 latency of T1's and T8's queries, overbooked, 8 bullies",
        ["T1 (10 %)", "T8 (50 %)"],
        Axis::log("p99 latency (ms)"),
    );
    for (n, v) in p99 {
        b = b.group(n, v);
    }
    fig(body, b.to_svg());
}

/// Mean over bursty tenants of their mean query latency, and the resource tenants' p99.
fn bursty_latency(r: &DbRun) -> (f64, f64, f64) {
    let b: Vec<f64> = r
        .tenants
        .iter()
        .filter(|t| (t.group == "static" || t.group == "elastic") && t.queries > 0)
        .map(|t| t.latency_mean)
        .collect();
    let res: Vec<&DbTenantResult> = r.tenants.iter().filter(|t| t.group == "res").collect();
    let mean = |v: Vec<f64>| {
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    (
        mean(b),
        mean(res.iter().map(|t| t.latency_mean).collect()),
        mean(res.iter().map(|t| t.latency_p99).collect()),
    )
}

pub(crate) fn fig4(runs: &[DbRun], _cap: f64, body: &mut Out) {
    let scheds = ["ldf", "drr", "edf"];
    let mut t = Table::new([
        "scenario",
        "scheduler",
        "static (ms)",
        "elastic (ms)",
        "static / elastic",
        "Res tenants' mean, p99 change",
    ]);
    let mut chart = BarChart::new(
        "Fig. 4: mean query latency of the bursty tenants",
        [
            "4Res-20Bursty static",
            "4Res-20Bursty elastic",
            "40Bursty static",
            "40Bursty elastic",
        ],
        Axis::log("mean latency (ms)"),
    );
    let mut ratios = Vec::new();
    // Largest relative change of the Res tenants' mean and p99 under LDF; NaN propagates (a
    // missing value must not vanish in a max), and no scenario with Res tenants leaves it
    // NaN too.
    let mut impact: Option<f64> = None;
    for s in scheds {
        let mut vals = Vec::new();
        for scen in ["4Res-20Bursty", "40Bursty"] {
            let st = find(runs, &format!("{scen} static"), s).map(bursty_latency);
            let el = find(runs, &format!("{scen} elastic"), s).map(bursty_latency);
            let (Some(st), Some(el)) = (st, el) else {
                continue;
            };
            vals.push(st.0 * 1000.0);
            vals.push(el.0 * 1000.0);
            let change = if st.1.is_finite() {
                let (dm, dp) = (el.1 / st.1 - 1.0, el.2 / st.2 - 1.0);
                if s == "ldf" {
                    let worst = if dm.is_finite() && dp.is_finite() {
                        dm.abs().max(dp.abs())
                    } else {
                        f64::NAN
                    };
                    impact = Some(match impact {
                        Some(i) if i.is_finite() => i.max(worst),
                        Some(i) => i,
                        None => worst,
                    });
                }
                format!("{:+.1} %, {:+.1} %", dm * 100.0, dp * 100.0)
            } else {
                "-".into()
            };
            ratios.push((scen, s, st.0 / el.0));
            t.push_row([
                scen.to_string(),
                s.to_string(),
                fmt_num(st.0 * 1000.0),
                fmt_num(el.0 * 1000.0),
                times(st.0 / el.0),
                change,
            ]);
        }
        chart = chart.group(s.to_uppercase(), vals);
    }
    fig(body, chart.to_svg());
    body.table(t);
    fig4_claims(&ratios, impact, body);
}

/// Fig. 4's claims: elastic reservations cut the bursty tenants' latency; boosting barely
/// touches the static ones.
fn fig4_claims(ratios: &[(&str, &str, f64)], impact: Option<f64>, body: &mut Out) {
    let r = |scen: &str, s: &str| {
        ratios
            .iter()
            .find(|x| x.0 == scen && x.1 == s)
            .map_or(f64::NAN, |x| x.2)
    };
    let impact = impact.unwrap_or(f64::NAN);
    for (id, scen, sched, text) in [
        (
            "elastic-ldf",
            "4Res-20Bursty",
            "ldf",
            "4Res-20Bursty: elastic reservations cut LDF's bursty latency 3–5×",
        ),
        (
            "elastic-drr",
            "4Res-20Bursty",
            "drr",
            "4Res-20Bursty: …and DRR's",
        ),
        (
            "elastic-ldf-40",
            "40Bursty",
            "ldf",
            "40Bursty: elastic reservations cut LDF's bursty latency 3–5×",
        ),
    ] {
        let x = r(scen, sched);
        body.claim(Claim::new(id, format!("{text} (ours {})", times(x))).check(
            format!("{scen} bursty mean latency, static / elastic, {sched}"),
            x,
            Relation::AtLeast,
            2.5,
        ));
    }
    body.claim(
        Claim::new(
            "boost-impact",
            format!(
                "boosting has a small impact on the static tenants under LDF (< 5 % on mean and p99; paper < 1 %; ours at most {:.1} %)",
                impact * 100.0
            ),
        )
        .check(
            "largest relative change of the Res tenants' mean or p99 under LDF",
            impact,
            Relation::Below,
            0.05,
        ),
    );
}

fn penalty_pct(r: &DbRun) -> f64 {
    let refund: f64 = r.tenants.iter().map(|t| t.refund).sum();
    let max: f64 = r.tenants.iter().map(|t| t.revenue_max).sum();
    refund / max * 100.0
}

pub(crate) fn fig5(runs: &[DbRun], _cap: f64, body: &mut Out) {
    let scheds = ["ldf-noopt", "ldf-opt", "drr-noopt", "drr-opt", "edf"];
    let labels = labels(runs);
    let mut t = Table::new(
        ["configuration"].into_iter().map(String::from).chain(
            scheds
                .iter()
                .map(|s| format!("{s} % penalty / Jain / Gold p99 ms")),
        ),
    );
    let mut opt_better = Claim::new(
        "opt-refunds-less",
        "LDF-Opt refunds less than LDF-NoOpt in every configuration with penalties",
    );
    let mut opt_vs_edf = Claim::new(
        "opt-vs-edf",
        "LDF-Opt refunds no more than EDF in every configuration with penalties",
    );
    let mut less_fair = Claim::new(
        "opt-less-fair",
        "revenue optimization comes at a lower (or equal) Jain's index",
    );
    for l in &labels {
        let mut row = vec![l.clone()];
        for s in scheds {
            let r = find(runs, l, s);
            let (p, j, g) = r.map_or((f64::NAN, f64::NAN, f64::NAN), |r| {
                (
                    penalty_pct(r),
                    r.jain,
                    r.tenant("gold-0")
                        .map_or(f64::NAN, |t| t.latency_p99 * 1000.0),
                )
            });
            row.push(format!("{} / {} / {}", fmt2(p), fmt2(j), fmt_num(g)));
        }
        t.push_row(row);
        let get = |s: &str| find(runs, l, s).map_or(f64::NAN, penalty_pct);
        let getj = |s: &str| find(runs, l, s).map_or(f64::NAN, |r| r.jain);
        // Configurations without penalties say nothing; a missing penalty (NaN) is kept,
        // so that it makes the claims "no data" instead of skipping the configuration.
        if !(get("ldf-opt") == 0.0 && get("ldf-noopt") == 0.0) {
            opt_better.push(
                format!("{l}: LDF-Opt penalty % against LDF-NoOpt's"),
                get("ldf-opt"),
                Relation::Below,
                get("ldf-noopt"),
            );
            opt_vs_edf.push(
                format!("{l}: LDF-Opt penalty % against EDF's"),
                get("ldf-opt"),
                Relation::AtMost,
                get("edf"),
            );
            less_fair.push(
                format!("{l}: LDF-Opt Jain's index against LDF-NoOpt's"),
                getj("ldf-opt"),
                Relation::AtMost,
                getj("ldf-noopt"),
            );
        }
    }
    fig5_charts(runs, &labels, &scheds, body);
    body.table(t);
    body.push_str(
        "<p>Paper (§6.5): LDF-Opt refunds considerably less than LDF-NoOpt; EDF less than \
         LDF-NoOpt but more than LDF-Opt; DRR's local decisions do not reach the global optimum; \
         optimization lowers Jain's index and improves Gold's p99 by 20–30 %.</p>",
    );
    body.claim(opt_better);
    body.claim(opt_vs_edf);
    body.claim(less_fair);
}

/// Fig. 5 (a)–(c): penalty, Jain's index and a Gold tenant's p99, per configuration and
/// scheduler.
fn fig5_charts(runs: &[DbRun], labels: &[String], scheds: &[&str], body: &mut Out) {
    let mut pen = BarChart::new(
        "Fig. 5(a): penalty (% of the maximum revenue)",
        labels.to_vec(),
        Axis::linear("% penalty"),
    );
    let mut jain = BarChart::new(
        "Fig. 5(b): Jain's index over ViolCPU",
        labels.to_vec(),
        Axis::linear("Jain"),
    );
    let mut gold = BarChart::new(
        "Fig. 5(c): p99 latency of a Gold tenant's queries",
        labels.to_vec(),
        Axis::linear("p99 latency (ms)"),
    );
    for &s in scheds {
        let col = |f: &dyn Fn(&DbRun) -> f64| -> Vec<f64> {
            labels
                .iter()
                .map(|l| find(runs, l, s).map_or(f64::NAN, f))
                .collect()
        };
        pen = pen.group(s, col(&penalty_pct));
        jain = jain.group(s, col(&|r| r.jain));
        gold = gold.group(
            s,
            col(&|r| {
                r.tenant("gold-0")
                    .map_or(f64::NAN, |t| t.latency_p99 * 1000.0)
            }),
        );
    }
    fig(body, pen.to_svg());
    fig(body, jain.to_svg());
    fig(body, gold.to_svg());
}

pub(crate) fn fig6(runs: &[DbRun], _cap: f64, body: &mut Out) {
    let mut rev = LineChart::new(
        "Fig. 6: revenue (% of the maximum) against the fairness index α",
        Axis::linear("α").range(0.0, 1.0),
        Axis::linear("revenue (% of maximum)"),
    );
    let mut fair = LineChart::new(
        "Fig. 6: Jain's index against α",
        Axis::linear("α").range(0.0, 1.0),
        Axis::linear("Jain's index"),
    );
    let mut t = Table::new(["configuration", "α", "revenue (%)", "Jain"]);
    let mut notes = Vec::new();
    for c in ["C1", "C2"] {
        let mut rp = Vec::new();
        let mut jp = Vec::new();
        for r in runs
            .iter()
            .filter(|r| r.label.starts_with(&format!("{c} ")))
        {
            let a: f64 = r
                .label
                .rsplit('=')
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(f64::NAN);
            let revenue = 100.0 - penalty_pct(r);
            rp.push((a, revenue));
            jp.push((a, r.jain));
            t.push_row([c.to_string(), fmt_num(a), fmt2(revenue), fmt_num(r.jain)]);
        }
        let first = (rp.first().copied(), jp.first().copied());
        let last = (rp.last().copied(), jp.last().copied());
        let nan = (f64::NAN, f64::NAN);
        let (r0, j0) = (first.0.unwrap_or(nan), first.1.unwrap_or(nan));
        let (r1, j1) = (last.0.unwrap_or(nan), last.1.unwrap_or(nan));
        let steady = rp.windows(2).all(|w| w[1].1 <= w[0].1 + 0.5);
        notes.push((c, r0.1, r1.1, j0.1, j1.1, steady));
        rev = rev.series(Series::new(c, rp).style(Style::LinePoints));
        fair = fair.series(Series::new(c, jp).style(Style::LinePoints));
    }
    fig(body, rev.to_svg());
    fig(body, fair.to_svg());
    body.table(t);
    for (c, r0, r1, j0, j1, steady) in notes {
        body.claim(
            Claim::new(
                format!("{c}-tradeoff"),
                format!(
                    "{c}: from α = 0 to α = 1 revenue falls and fairness rises (revenue {} → {} %, \
                     Jain {} → {}; {})",
                    fmt2(r0),
                    fmt2(r1),
                    fmt_num(j0),
                    fmt_num(j1),
                    if steady {
                        "monotone in between"
                    } else {
                        "not monotone in between"
                    }
                ),
            )
            .check(
                format!("{c}: revenue % at α = 1 against α = 0"),
                r1,
                Relation::AtMost,
                r0,
            )
            .check(
                format!("{c}: Jain's index at α = 1 against α = 0"),
                j1,
                Relation::AtLeast,
                j0,
            ),
        );
    }
}
