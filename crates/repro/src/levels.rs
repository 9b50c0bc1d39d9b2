//! Priority levels (Kubernetes APF, docs/priority-levels.md): a flooded catch-all beside a
//! high level, with levels, alone and flat (`experiments/priority-levels.toml`). The claims
//! are the issue's: the high level's p99 against alone and against flat, the catch-all's
//! tenants' shares against flat, the idle level's
//! lendable seats used by the busy one, and the lent seats coming back within one
//! adjustment period once demand returns. Plots: each level's seats and limit over time.

use fairlane_plot::{fmt_num, Axis, LineChart, Series, Style, Table};

use crate::claim::{Claim, Relation};
use crate::out::{mean, times, Out};
use crate::runs::RunResult;

/// APF's adjustment period, the simulator's (seconds).
const PERIOD: f64 = 10.0;
/// When the idle phase is measured from: half a second after the first periodic
/// adjustment (the limits before it come from the start's empty demand history).
const SETTLED: f64 = PERIOD + 0.5;
/// The high level's tenant, the exempt level's and the flood's group.
const HIGH: &str = "api";
const EXEMPT: &str = "health";
const FLOOD: &str = "flood";

fn point<'a>(results: &'a [RunResult], label: &str) -> Option<&'a RunResult> {
    results.iter().find(|r| r.label == label)
}

fn p99(r: Option<&RunResult>, tenant: &str) -> f64 {
    r.and_then(|r| r.tenants.iter().find(|t| t.name == tenant))
        .map_or(f64::NAN, |t| t.latency_p99)
}

/// What the "levels" run shows of the borrowing: the catch-all's mean seats while the high
/// level is idle (after the first periodic adjustment) against what it may hold then, and how long after the high level's demand
/// returns the catch-all's limit first falls back.
struct Borrowing {
    /// Mean seats the catch-all held during the high level's idle phase.
    idle_seats: f64,
    /// Its nominal seats plus the high level's lendable ones.
    may_hold: f64,
    /// Seconds from the high tenant's first arrival to the catch-all's limit falling below
    /// `may_hold` (∞ if it never does).
    back_after: f64,
}

/// The borrowing in run `r`: the high level is idle until its first sample with a request
/// (its tenant's start).
fn borrowing(r: &RunResult) -> Option<Borrowing> {
    let high = r.levels.iter().find(|l| l.name == "high")?;
    let all = r.levels.iter().find(|l| l.name == "catch-all")?;
    let busy = high.seats.iter().zip(&high.queued);
    let start = busy.map(|(s, q)| (s.0, s.1 + q.1)).find(|p| p.1 > 0.0)?.0;
    // The high level's idle seats it may lend: its nominal seats above its smallest limit
    // while idle (APF's lower bound for an idle level is MinCL = nominal − lendable).
    let idle = |s: &[(f64, f64)]| -> Vec<f64> {
        s.iter()
            .filter(|p| p.0 >= SETTLED && p.0 < start)
            .map(|p| p.1)
            .collect()
    };
    let min_high = idle(&high.current)
        .into_iter()
        .fold(f64::INFINITY, f64::min);
    let may_hold = all.nominal as f64 + (high.nominal as f64 - min_high);
    let back_after = all
        .current
        .iter()
        .find(|p| p.0 >= start && p.1 < may_hold)
        .map_or(f64::INFINITY, |p| p.0 - start);
    Some(Borrowing {
        idle_seats: mean(idle(&all.seats)),
        may_hold,
        back_after,
    })
}

/// Seats in use and current limit of each non-exempt level over time.
fn seats_chart(r: &RunResult, out: &mut Out) {
    let mut chart = LineChart::new(
        "Seats per level over time (levels run): held (solid) and current limit (step)",
        Axis::linear("time (s)"),
        Axis::linear("seats"),
    );
    for l in r.levels.iter().filter(|l| !l.exempt) {
        chart = chart
            .series(Series::new(format!("{} held", l.name), l.seats.clone()))
            .series(Series::new(format!("{} limit", l.name), l.current.clone()).style(Style::Step));
    }
    out.fig(chart.to_svg());
}

/// The section: a table of p99s, the seats chart and the claims.
pub fn priority_levels(results: &[RunResult], out: &mut Out) {
    let (with, alone, flat) = (
        point(results, "levels"),
        point(results, "alone"),
        point(results, "flat"),
    );
    let mut t = Table::new(["tenant (level)", "p99 with levels", "p99 alone", "p99 flat"]);
    for (tenant, level) in [(HIGH, "high"), (EXEMPT, "exempt")] {
        let ps = [p99(with, tenant), p99(alone, tenant), p99(flat, tenant)];
        t.push_row([
            format!("{tenant} ({level})"),
            format!("{} s", fmt_num(ps[0])),
            format!("{} s", fmt_num(ps[1])),
            format!("{} s", fmt_num(ps[2])),
        ]);
    }
    out.table(t);
    let (w, a, f) = (p99(with, HIGH), p99(alone, HIGH), p99(flat, HIGH));
    out.claim(
        Claim::new(
            "high-p99-vs-alone",
            format!(
                "with the catch-all flooded at 20× the capacity, the high level's tenant keeps \
                 its p99 within 10 % of its p99 alone ({})",
                times(w / a)
            ),
        )
        .check(
            "high tenant p99, levels / alone",
            w / a,
            Relation::AtMost,
            1.1,
        ),
    );
    out.claim(
        Claim::new(
            "flat-much-worse",
            format!(
                "on one flat level the same tenant's p99 is far worse: at least 10× its p99 \
                 with levels ({})",
                times(f / w)
            ),
        )
        .check(
            "high tenant p99, flat / levels",
            f / w,
            Relation::AtLeast,
            10.0,
        ),
    );
    let (e, ea) = (p99(with, EXEMPT), p99(alone, EXEMPT));
    out.claim(
        Claim::new(
            "exempt-p99-vs-alone",
            "the exempt level's tenant takes the next free worker ahead of every level: its \
             p99 stays within 2× of its p99 alone",
        )
        .check(
            "exempt tenant p99, levels / alone",
            e / ea,
            Relation::AtMost,
            2.0,
        ),
    );
    out.claim(shares_claim(with, flat));
    borrowing_claims(with, out);
}

/// Each flood tenant's share of the flood's work, by name, in run `r`.
fn flood_shares(r: Option<&RunResult>) -> Vec<(String, f64)> {
    let flood: Vec<_> = r
        .map(|r| r.tenants.iter().filter(|t| t.group == FLOOD).collect())
        .unwrap_or_default();
    let total: f64 = flood.iter().map(|t| t.work).sum();
    flood
        .iter()
        .map(|t| (t.name.clone(), t.work / total))
        .collect()
}

/// Inside the catch-all level, its tenants share as the flat scheduler shares them: the
/// largest difference of a flood tenant's share of the flood's work between the two runs,
/// in percentage points (NaN when the runs do not have the same flood tenants).
fn shares_claim(with: Option<&RunResult>, flat: Option<&RunResult>) -> Claim {
    let (l, f) = (flood_shares(with), flood_shares(flat));
    let same = !l.is_empty() && l.len() == f.len() && l.iter().zip(&f).all(|(a, b)| a.0 == b.0);
    let largest = if same {
        l.iter()
            .zip(&f)
            .map(|(a, b)| (a.1 - b.1).abs() * 100.0)
            .fold(0.0, f64::max)
    } else {
        f64::NAN
    };
    Claim::new(
        "level-shares-match-flat",
        format!(
            "inside the catch-all level its {} tenants share its work as the flat scheduler \
             shares the whole server among them: each tenant's share of their work within 1 \
             percentage point of its share flat (largest difference {} points, around an \
             equal share of {} %)",
            l.len(),
            fmt_num(largest),
            fmt_num(100.0 / l.len().max(1) as f64)
        ),
    )
    .check(
        "largest |share with levels − share flat|, percentage points",
        largest,
        Relation::AtMost,
        1.0,
    )
}

/// The seats chart and the two borrowing claims of the "levels" run.
fn borrowing_claims(with: Option<&RunResult>, out: &mut Out) {
    let b = with.and_then(|r| {
        seats_chart(r, out);
        borrowing(r)
    });
    let (idle_seats, may_hold, back_after) = b.map_or((f64::NAN, f64::NAN, f64::NAN), |b| {
        (b.idle_seats, b.may_hold, b.back_after)
    });
    out.claim(
        Claim::new(
            "idle-seats-borrowed",
            format!(
                "while the high level is idle (after the first adjustment) the flooded \
                 catch-all uses its nominal seats and every seat the high level may lend ({} \
                 of {} on average)",
                fmt_num(idle_seats),
                fmt_num(may_hold)
            ),
        )
        .check(
            "catch-all seats held while the high level is idle / (its nominal + lendable)",
            idle_seats / may_hold,
            Relation::AtLeast,
            0.99,
        ),
    );
    out.claim(
        Claim::new(
            "lent-seats-come-back",
            format!(
                "once the high level's demand returns, the catch-all's limit falls back within \
                 one adjustment period ({PERIOD} s) plus one mean service time (0.1 s): after \
                 {} s",
                fmt_num(back_after)
            ),
        )
        .check(
            "seconds from the high tenant's start to the catch-all's limit falling back",
            back_after,
            Relation::AtMost,
            PERIOD + 0.1,
        ),
    );
}
