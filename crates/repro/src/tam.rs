//! seeds/004 §3, Fig. 8–12: each of the five scheduling problems on its problematic
//! architecture (a) and the fixed one (b), simulated from `experiments/tam-figN{a,b}.toml`
//! (model files with a `[simulation]` section) with the workloads of the captions. Each
//! section sweeps what the caption varies and states the figure's shape as typed claims.

use fairlane_plot::{Axis, LineChart, Series, Table};

use crate::claim::{Claim, Relation};
use crate::out::{fmt2, Out};
use crate::runs::{Tam, TamRun};

macro_rules! arch {
    ($path:literal) => {
        ($path, include_str!(concat!("../../../", $path)))
    };
}

/// Read an architecture: from the repository when run inside it, else the copy compiled in.
fn load((path, text): (&str, &str)) -> Result<Tam, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let disk = std::fs::read_to_string(root.join(path)).ok();
    Tam::parse(disk.as_deref().unwrap_or(text), path)
}

/// A figure's (a) and (b) architectures, once `paper` (what the paper shows) is written.
fn figure(
    out: &mut Out,
    a: (&str, &str),
    b: (&str, &str),
    paper: &str,
) -> Result<(Tam, Tam), String> {
    let both = (load(a)?, load(b)?);
    out.push_str(paper);
    Ok(both)
}

/// The (a) and (b) curves of a figure, labelled.
pub(crate) fn ab(
    a: (&str, Vec<(f64, f64)>),
    b: (&str, Vec<(f64, f64)>),
) -> Vec<(String, Vec<(f64, f64)>)> {
    vec![(a.0.to_string(), a.1), (b.0.to_string(), b.1)]
}

/// A client's throughput per interval: `(t, req/s)`.
pub(crate) fn throughput(r: &TamRun, client: usize) -> Vec<(f64, f64)> {
    r.clients[client]
        .series
        .iter()
        .map(|x| (x.0, x.1))
        .collect()
}

/// Mean of a client's per-interval throughput over `(from, to]`.
pub(crate) fn tput(r: &TamRun, client: usize, from: f64, to: f64) -> f64 {
    let xs: Vec<f64> = r.clients[client]
        .series
        .iter()
        .filter(|p| p.0 > from && p.0 <= to)
        .map(|p| p.1)
        .collect();
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

pub(crate) fn chart(
    title: &str,
    x: &str,
    y: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> String {
    let mut c = LineChart::new(title, Axis::linear(x), Axis::linear(y));
    for (n, p) in series {
        c = c.series(Series::new(n, p));
    }
    c.to_svg()
}

/// Runs (a) and (b) at each point of a sweep, `set` applying the point to a copy of each:
/// per point, the point and the two runs.
pub(crate) fn sweep<X: Copy>(
    (a, b): (&Tam, &Tam),
    points: &[X],
    set: impl Fn(&mut Tam, &mut Tam, X) -> Result<(), String>,
) -> Result<SweepRuns<X>, String> {
    points
        .iter()
        .map(|&x| {
            let (mut sa, mut sb) = (a.clone(), b.clone());
            set(&mut sa, &mut sb, x)?;
            Ok((x, sa.go()?, sb.go()?))
        })
        .collect()
}

/// (a) and (b) at each of C2's thread counts `ns` (see [`sweep`]).
pub(crate) fn c2_threads(ab: (&Tam, &Tam), ns: &[u32]) -> Result<SweepRuns<u32>, String> {
    sweep(ab, ns, |sa, sb, n| {
        sa.set_threads(1, n)?;
        sb.set_threads(1, n)
    })
}

/// C1's mean latency in ms.
fn c1_ms(r: &TamRun) -> f64 {
    r.clients[0].latency_mean * 1e3
}

/// Per sweep point, the point and the runs of (a) and (b).
type SweepRuns<X> = Vec<(X, TamRun, TamRun)>;

/// A sweep's (a) and (b) curves: `y` of each run against `x` of its point.
type Curves = (Vec<(f64, f64)>, Vec<(f64, f64)>);

/// The (a) and (b) curves of a sweep, `y` of each run against `x` of its point.
fn curves<X: Copy>(
    runs: &[(X, TamRun, TamRun)],
    x: impl Fn(X) -> f64,
    y: impl Fn(&TamRun) -> f64,
) -> Curves {
    runs.iter()
        .map(|(p, ra, rb)| ((x(*p), y(ra)), (x(*p), y(rb))))
        .unzip()
}

/// A sweep's table, one row per point (`row` of the point and its two runs).
fn sweep_table<X: Copy, const N: usize>(
    header: [&str; N],
    runs: &[(X, TamRun, TamRun)],
    row: impl Fn(X, &TamRun, &TamRun) -> [String; N],
) -> Table {
    let mut t = Table::new(header);
    for (p, ra, rb) in runs {
        t.push_row(row(*p, ra, rb));
    }
    t
}

/// The figure of a sweep's (a) and (b) curves, each with its label.
fn ab_chart(title: &str, x: &str, y: &str, labels: [&str; 2], (pa, pb): &Curves) -> String {
    chart(
        title,
        x,
        y,
        ab((labels[0], pa.clone()), (labels[1], pb.clone())),
    )
}

/// A stage measure beside C1's latency: the (a) and (b) columns' headers, and the measure of
/// an (a) and of a (b) run.
type StageColumns = ([&'static str; 2], fn(&TamRun) -> f64, fn(&TamRun) -> f64);

/// Fig. 8 and 12: C1's mean latency under (a) and (b) against C2's threads `ns`, in a table
/// with a stage measure of each run beside it, and in the figure `fig` of the curves
/// `labels`. Returns the runs and the curves.
fn latency_sweep(
    out: &mut Out,
    ab: (&Tam, &Tam),
    ns: &[u32],
    (columns, stage_a, stage_b): StageColumns,
    (fig, labels): (&str, [&str; 2]),
) -> Result<(SweepRuns<u32>, Curves), String> {
    let runs = c2_threads(ab, ns)?;
    let header = [
        "C2 threads",
        "(a) C1 ms",
        columns[0],
        "(b) C1 ms",
        columns[1],
    ];
    out.table(sweep_table(header, &runs, |n, ra, rb| {
        [
            n.to_string(),
            fmt2(c1_ms(ra)),
            fmt2(stage_a(ra)),
            fmt2(c1_ms(rb)),
            fmt2(stage_b(rb)),
        ]
    }));
    let ab = curves(&runs, f64::from, c1_ms);
    out.fig(ab_chart(
        &format!("{fig}: C1's mean latency"),
        "C2 threads",
        "ms",
        labels,
        &ab,
    ));
    Ok((runs, ab))
}

/// Fig. 8: C1's latency against C2's threads, on-demand I/O (a) vs scheduled I/O (b).
pub(crate) fn fig8(out: &mut Out) -> Result<(), String> {
    let (a, b) = figure(
        out,
        arch!("experiments/tam-fig8a.toml"),
        arch!("experiments/tam-fig8b.toml"),
        "<p>Paper: under (a) EDF at Req Handle cannot help C1 (deadline 15 ms): its latency \
         exceeds the deadline by up to 5× as C2 adds threads, while Req Handle's queue stays \
         empty and the requests pile up at the unscheduled I/O stage. Under (b) the I/O stage's \
         EDF keeps C1 within its deadline.</p>",
    )?;
    let (_, ab) = latency_sweep(
        out,
        (&a, &b),
        &[10, 50, 100, 200],
        (
            ["(a) at I/O", "(b) I/O queue"],
            // On demand: the requests in flight at the I/O stage are its busy threads.
            |ra| mean_busy(ra, 1),
            |rb| rb.stages[1].queue_mean,
        ),
        ("Fig. 8", ["(a) no scheduling", "(b) scheduled I/O"]),
    )?;
    let (pa, pb) = ab;
    let last = pa.len() - 1;
    let worst_b = pb.iter().map(|p| p.1).fold(f64::NAN, f64::max);
    out.claim(
        Claim::new(
            "fig8-deadline",
            format!(
                "C1's latency leaves its 15 ms deadline as C2 grows under (a) ({} → {} ms) and \
                 stays within it under (b) (at most {} ms)",
                fmt2(pa[0].1),
                fmt2(pa[last].1),
                fmt2(worst_b)
            ),
        )
        .check(
            "(a) C1 mean latency at 200 C2 threads (ms)",
            pa[last].1,
            Relation::Above,
            15.0,
        )
        .check(
            "(a) C1 latency growth, 200 vs 10 C2 threads (ms)",
            pa[last].1 - pa[0].1,
            Relation::Above,
            0.0,
        )
        .check(
            "(b) C1's worst mean latency over the sweep (ms)",
            worst_b,
            Relation::AtMost,
            15.0,
        ),
    );
    Ok(())
}

fn mean_busy(r: &TamRun, stage: usize) -> f64 {
    let s = &r.stages[stage].series;
    s.iter().map(|x| x.3 as f64).sum::<f64>() / s.len().max(1) as f64
}

/// Fig. 9: C2's cached requests, unknown I/O in Req Handle (a) vs a separate I/O stage (b).
pub(crate) fn fig9(out: &mut Out) -> Result<(), String> {
    let (a, b) = figure(
        out,
        arch!("experiments/tam-fig9a.toml"),
        arch!("experiments/tam-fig9b.toml"),
        "<p>Paper: under (a) Req Handle's scheduler treats C2's cold and cached requests alike \
         (it cannot know which will do I/O), so its threads wait on the contended disk while \
         the CPU idles and C2-cached gets little throughput; under (b) the cache lookup and the \
         I/O are separate stages and C2-cached runs at CPU speed.</p>",
    )?;
    let (ra, rb) = (a.go()?, b.go()?);
    let span = a.duration() - a.warmup();
    let cached = |r: &TamRun| r.clients[1].completed_by_type[1] as f64 / span;
    let cold = |r: &TamRun, c: usize| r.clients[c].completed_by_type[0] as f64 / span;
    let mut t = Table::new([
        "architecture",
        "C1 cold req/s",
        "C2 cold req/s",
        "C2 cached req/s",
        "CPU util",
    ]);
    for (n, r) in [("(a) unknown I/O", &ra), ("(b) separate I/O stage", &rb)] {
        t.push_row([
            n.to_string(),
            fmt2(cold(r, 0)),
            fmt2(cold(r, 1)),
            fmt2(cached(r)),
            fmt2(r.resources[0].1),
        ]);
    }
    out.table(t);
    out.claim(
        Claim::new(
            "fig9-cached",
            format!(
                "C2's cached requests gain throughput under (b): {} → {} req/s",
                fmt2(cached(&ra)),
                fmt2(cached(&rb))
            ),
        )
        .check(
            "C2-cached throughput, (b) / (a)",
            cached(&rb) / cached(&ra),
            Relation::AtLeast,
            2.0,
        ),
    );
    Ok(())
}

/// Fig. 10: C1's throughput against C2's reply size, two network stages (a) vs one (b).
pub(crate) fn fig10(out: &mut Out) -> Result<(), String> {
    let (a, b) = figure(
        out,
        arch!("experiments/tam-fig10a.toml"),
        arch!("experiments/tam-fig10b.toml"),
        "<p>Paper: under (a) Req Read and Req Respond each share fairly, but they contend for \
         the one network link; as C2's replies grow C2 takes up to 95% of the network and \
         C1's throughput falls. Under (b) one stage controls the network and isolates C1.</p>",
    )?;
    let sizes = [10_000.0, 50_000.0, 100_000.0, 500_000.0, 1_000_000.0];
    let runs = sweep((&a, &b), &sizes, |sa, sb, sz| {
        // The reply is C2's second visit under (a), its only one under (b); a net cost is
        // net_bytes over the host's default 1 Gbit/s.
        sa.set("request.1.path.1.net_bytes", sz)?;
        sb.set("request.1.path.0.net_bytes", sz + 1000.0)
    })?;
    let header = [
        "C2 reply KB",
        "(a) C1 req/s",
        "(a) C2 req/s",
        "(b) C1 req/s",
        "(b) C2 req/s",
    ];
    out.table(sweep_table(header, &runs, |sz, ra, rb| {
        [
            format!("{}", sz / 1e3),
            fmt2(ra.clients[0].throughput),
            fmt2(ra.clients[1].throughput),
            fmt2(rb.clients[0].throughput),
            fmt2(rb.clients[1].throughput),
        ]
    }));
    let ab = curves(&runs, |sz| sz / 1e3, |r| r.clients[0].throughput);
    out.fig(ab_chart(
        "Fig. 10: C1's throughput",
        "C2 reply (KB)",
        "req/s",
        ["(a) two stages", "(b) one stage"],
        &ab,
    ));
    let (pa, pb) = ab;
    let last = pa.len() - 1;
    out.claim(
        Claim::new(
            "fig10-contention",
            format!(
                "C1's throughput falls with C2's reply size under (a) ({} → {} req/s); under (b) \
                 it is {} → {} req/s",
                fmt2(pa[0].1),
                fmt2(pa[last].1),
                fmt2(pb[0].1),
                fmt2(pb[last].1)
            ),
        )
        .check(
            "(a) C1 throughput, 1 MB vs 10 KB C2 replies",
            pa[last].1 / pa[0].1,
            Relation::AtMost,
            0.5,
        )
        .check(
            "(b) / (a) C1 throughput at 1 MB C2 replies",
            pb[last].1 / pa[last].1,
            Relation::AtLeast,
            2.0,
        ),
    );
    Ok(())
}

/// Fig. 11: C1's throughput before and after C2 turns to I/O at 60 s, blocking (a) vs
/// asynchronous (b) Req Handle.
pub(crate) fn fig11(out: &mut Out) -> Result<(), String> {
    let (a, b) = figure(
        out,
        arch!("experiments/tam-fig11a.toml"),
        arch!("experiments/tam-fig11b.toml"),
        "<p>Paper: at 60 s C2 switches to I/O requests. Under (a) all 10 Req Handle threads end \
         up blocked on the I/O stage and C1 (still CPU-only) collapses; under (b) Req Handle is \
         asynchronous, no thread blocks and C1 keeps a high throughput.</p>",
    )?;
    let (ra, rb) = (a.go()?, b.go()?);
    let blocked_after = |r: &TamRun| {
        let s: Vec<f64> = r.stages[0]
            .series
            .iter()
            .filter(|x| x.0 > 70.0)
            .map(|x| x.2 as f64)
            .collect();
        s.iter().sum::<f64>() / s.len().max(1) as f64
    };
    let mut t = Table::new([
        "architecture",
        "C1 req/s before 60 s",
        "C1 req/s after",
        "Req Handle blocked after (of 10)",
    ]);
    for (n, r) in [("(a) blocking", &ra), ("(b) asynchronous", &rb)] {
        t.push_row([
            n.to_string(),
            fmt2(tput(r, 0, 10.0, 60.0)),
            fmt2(tput(r, 0, 70.0, 120.0)),
            fmt2(blocked_after(r)),
        ]);
    }
    out.table(t);
    out.fig(chart(
        "Fig. 11: C1's throughput over time",
        "time (s)",
        "req/s",
        ab(
            ("(a) blocking", throughput(&ra, 0)),
            ("(b) asynchronous", throughput(&rb, 0)),
        ),
    ));
    let (a0, a1) = (tput(&ra, 0, 10.0, 60.0), tput(&ra, 0, 70.0, 120.0));
    let (b0, b1) = (tput(&rb, 0, 10.0, 60.0), tput(&rb, 0, 70.0, 120.0));
    out.claim(
        Claim::new(
            "fig11-blocking",
            format!(
                "After 60 s, (a) blocks {} of Req Handle's 10 threads on average and C1 falls \
                 {} → {} req/s; (b) blocks {} and C1 goes {} → {} req/s",
                fmt2(blocked_after(&ra)),
                fmt2(a0),
                fmt2(a1),
                fmt2(blocked_after(&rb)),
                fmt2(b0),
                fmt2(b1)
            ),
        )
        .check(
            "(a) Req Handle threads blocked after 60 s",
            blocked_after(&ra),
            Relation::AtLeast,
            8.0,
        )
        .check(
            "(a) C1 throughput after / before 60 s",
            a1 / a0,
            Relation::AtMost,
            0.5,
        )
        .check(
            "(b) Req Handle threads blocked after 60 s",
            blocked_after(&rb),
            Relation::Within(0.0),
            0.0,
        )
        .check(
            "(b) C1 throughput after / before 60 s",
            b1 / b0,
            Relation::AtLeast,
            0.9,
        ),
    );
    Ok(())
}

/// Fig. 12: high-priority C1's latency against C2's threads, ordered LOG Append (a) vs
/// one WAL per client (b).
pub(crate) fn fig12(out: &mut Out) -> Result<(), String> {
    let (a, b) = figure(
        out,
        arch!("experiments/tam-fig12a.toml"),
        arch!("experiments/tam-fig12b.toml"),
        "<p>Paper: under (a) high-priority C1's latency grows with LOG Append's queue as \
         low-priority C2 issues more: the stage must serve in arrival order. Under (b) each \
         client has its own WAL, the scheduler picks C1 first and C1 keeps a low latency \
         although LOG Append's queue grows.</p>",
    )?;
    let queue = |r: &TamRun| r.stages[1].queue_mean;
    let (runs, ab) = latency_sweep(
        out,
        (&a, &b),
        &[5, 10, 20, 40],
        (
            ["(a) LOG Append queue", "(b) LOG Append queue"],
            queue,
            queue,
        ),
        ("Fig. 12", ["(a) ordered", "(b) one WAL per client"]),
    )?;
    let qa: Vec<f64> = runs.iter().map(|(_, ra, _)| queue(ra)).collect();
    let (pa, pb) = ab;
    let la: Vec<f64> = pa.iter().map(|p| p.1).collect();
    let r = pearson(&la, &qa);
    let last = la.len() - 1;
    out.claim(
        Claim::new(
            "fig12-ordering",
            format!(
                "C1's latency follows LOG Append's queue under (a) (correlation {}, {} → {} ms); \
                 under (b) it stays at {} ms with 40 C2 threads",
                fmt2(r),
                fmt2(la[0]),
                fmt2(la[last]),
                fmt2(pb[last].1)
            ),
        )
        .check(
            "(a) correlation of C1's latency with LOG Append's queue",
            r,
            Relation::AtLeast,
            0.9,
        )
        .check(
            "(a) C1 latency, 40 vs 5 C2 threads",
            la[last] / la[0],
            Relation::AtLeast,
            2.0,
        )
        .check(
            "(b) / (a) C1 latency at 40 C2 threads",
            pb[last].1 / la[last],
            Relation::AtMost,
            0.5,
        ),
    );
    Ok(())
}

fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    sxy / (sxx * syy).sqrt()
}
