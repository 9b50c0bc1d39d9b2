//! Sheng et al., *Fairness in Serving Large Language Models* (OSDI '24), §5.2: the Virtual
//! Token Counter on the simulator's continuous-batching server (`[server] model = "llm"`,
//! docs/llm.md), against FCFS, LCF, the RPM limiter, and what fairlane adds: WFQᴱ and 2DFQᴱ
//! with token costs. One shared analysis judges, from the runs:
//!
//! * Theorem 4.4: VTC's service difference between two backlogged clients stays within
//!   `2·max(w_p·L_input, w_q·M)`, and FCFS's passes it;
//! * Fig. 3 (a): FCFS's accumulated difference grows with time (the end of the arrival
//!   window against its middle);
//! * work conservation, on suites whose requests all have one size: VTC serves as many
//!   tokens in the window as FCFS, within 1 %;
//! * §4.3 (Fig. 16): with weights, each client's share of VTC's service over its share of
//!   the weights is 1 within 5 %.
//!
//! and shows the paper's plots: the accumulated difference under every policy, and each
//! client's service rate over time under VTC and FCFS.

use std::fmt::Write as _;

use fairlane_plot::{escape, Table};

use crate::claim::{Claim, Relation};
use crate::out::{fmt2, Out};
use crate::runs::{self, LlmResult, LlmRun};

/// Whether a suite's requests all have one size (work conservation is then checked) or
/// their sizes differ (the token throughput depends on the mix a policy serves; stated as
/// measured).
#[derive(Clone, Copy, PartialEq)]
enum Sizes {
    One,
    Mixed,
}

/// A suite whose requests all have one size (`overload`, `on_off_overload`, the weighted
/// overload).
pub(crate) fn uniform(runs: &[LlmRun], out: &mut Out) {
    section(runs, out, Sizes::One);
}

/// A suite of mixed sizes (`poisson_short_long`).
pub(crate) fn mixed(runs: &[LlmRun], out: &mut Out) {
    section(runs, out, Sizes::Mixed);
}

fn find<'a>(runs: &'a [LlmRun], policy: &str) -> Option<&'a LlmResult> {
    runs.iter().map(|r| &r.result).find(|r| r.policy == policy)
}

/// The largest backlogged difference (NaN when the run or the pair tracking is missing).
fn diff(r: Option<&LlmResult>) -> f64 {
    r.and_then(|r| r.max_backlogged_difference)
        .unwrap_or(f64::NAN)
}

/// Each client's share of the service in the window, `0.493 / 0.507`.
fn shares_text(r: &LlmResult) -> String {
    runs::llm_shares(r)
        .iter()
        .map(|s| format!("{s:.3}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The accumulated difference at the first sample at or after `t`.
fn acc_at(r: &LlmResult, t: f64) -> f64 {
    r.accumulated_difference
        .iter()
        .find(|p| p.0 >= t)
        .map_or(f64::NAN, |p| p.1)
}

fn section(runs: &[LlmRun], out: &mut Out, sizes: Sizes) {
    let (vtc, fifo) = (find(runs, "vtc"), find(runs, "fifo"));
    out.table(table(runs));
    let bound = vtc.map_or(f64::NAN, |r| r.bound);
    out.claim(
        Claim::new(
            "bound",
            format!(
                "Theorem 4.4: VTC's largest service difference between backlogged clients, {}, \
                 stays within 2·max(w_p·L_input, w_q·M) = {}; FCFS's, {}, does not",
                fmt2(diff(vtc)),
                fmt2(bound),
                fmt2(diff(fifo))
            ),
        )
        .check(
            "VTC's largest backlogged service difference",
            diff(vtc),
            Relation::AtMost,
            bound,
        )
        .check(
            "FCFS's largest backlogged service difference",
            diff(fifo),
            Relation::Above,
            bound,
        ),
    );
    out.claim(grows(fifo));
    let ratio = match (vtc, fifo) {
        (Some(v), Some(f)) => v.window_tokens as f64 / f.window_tokens as f64,
        _ => f64::NAN,
    };
    match sizes {
        Sizes::One => out.claim(
            Claim::new(
                "work-conserving",
                format!(
                    "VTC is work-conserving: the tokens it serves in the arrival window are \
                     {}× FCFS's",
                    fmt2(ratio)
                ),
            )
            .check(
                "VTC's tokens in the window over FCFS's",
                ratio,
                Relation::Within(0.01),
                1.0,
            ),
        ),
        Sizes::Mixed => {
            let _ = write!(
                out,
                "<p>Requests of two sizes: VTC serves {}× FCFS's tokens in the window. The \
                 token throughput depends on the mix a policy serves (docs/llm.md, \
                 \"Throughput on mixed sizes\"), so work conservation is judged on the \
                 uniform suites.</p>",
                fmt2(ratio)
            );
        }
    }
    if let Some(v) = vtc.filter(|v| v.clients.windows(2).any(|w| w[0].weight != w[1].weight)) {
        out.claim(weighted(v));
    }
    family(runs, out);
    plots(runs, out);
}

/// Fig. 3 (a): FCFS's accumulated difference at the end of the arrival window is at least
/// 1.5× its value at the middle.
fn grows(fifo: Option<&LlmResult>) -> Claim {
    let (half, end) = fifo.map_or((f64::NAN, f64::NAN), |f| {
        (acc_at(f, f.window / 2.0), acc_at(f, f.window))
    });
    Claim::new(
        "fcfs-grows",
        format!(
            "Under FCFS the accumulated service difference grows with time: {} at the middle \
             of the arrival window, {} at its end",
            fmt2(half),
            fmt2(end)
        ),
    )
    .check(
        "FCFS's accumulated difference, end of the window over its middle",
        end / half,
        Relation::AtLeast,
        1.5,
    )
}

/// §4.3: each client's share of VTC's service within the window, over its share of the
/// weights, is 1 within 5 %.
fn weighted(v: &LlmResult) -> Claim {
    let shares = runs::llm_shares(v);
    let total: f64 = v.clients.iter().map(|c| c.weight).sum();
    let mut c = Claim::new(
        "weights",
        format!(
            "Weighted VTC serves the clients in the ratio of their weights: shares {} for \
             weights {}",
            shares_text(v),
            v.clients
                .iter()
                .map(|c| c.weight.to_string())
                .collect::<Vec<_>>()
                .join(" : ")
        ),
    );
    for (client, share) in v.clients.iter().zip(&shares) {
        c.push(
            format!("{}'s share over its weight's share", client.name),
            share / (client.weight / total),
            Relation::Within(0.05),
            1.0,
        );
    }
    c
}

/// What fairlane adds, as measured: WFQᴱ and 2DFQᴱ, told nothing of a request's tokens
/// at arrival and charged as they are generated, on the same workload.
fn family(runs: &[LlmRun], out: &mut Out) {
    let vtc = find(runs, "vtc");
    let mut text = String::from("<p>The 2DFQ family on the same workload, as measured: ");
    for name in ["wfqe", "2dfqe"] {
        let Some(r) = find(runs, name) else { continue };
        let tokens = vtc.map_or(f64::NAN, |v| {
            r.window_tokens as f64 / v.window_tokens as f64
        });
        let _ = write!(
            text,
            "{} keeps the backlogged difference at {} (VTC {}), shares {}, {}× VTC's tokens \
             in the window; ",
            escape(name),
            fmt2(diff(Some(r))),
            fmt2(diff(vtc)),
            shares_text(r),
            fmt2(tokens)
        );
    }
    text.push_str("see docs/results.md.</p>");
    out.push_str(&text);
}

fn plots(runs: &[LlmRun], out: &mut Out) {
    let all: Vec<&LlmRun> = runs.iter().collect();
    out.fig(runs::llm_difference_chart(
        "Accumulated service difference max |W_i(0,t) − W_j(0,t)| (Fig. 3 (a))",
        &all,
    ));
    for name in ["vtc", "fifo"] {
        if let Some(r) = find(runs, name) {
            out.fig(runs::llm_service_chart(
                format!("{name}: service per client, 60 s window (Fig. 3 (b))"),
                r,
            ));
        }
    }
}

fn table(runs: &[LlmRun]) -> Table {
    let mut t = Table::new([
        "policy",
        "tokens/s in the window",
        "shares",
        "max backlogged diff.",
        "bound",
        "acc. diff. at the window's end",
        "makespan (s)",
        "holds",
    ]);
    for r in runs.iter().map(|r| &r.result) {
        t.push_row([
            r.policy.clone(),
            fmt2(r.window_throughput()),
            shares_text(r),
            fmt2(diff(Some(r))),
            fmt2(r.bound),
            fmt2(acc_at(r, r.window)),
            fmt2(r.makespan),
            r.holds.to_string(),
        ]);
    }
    t
}
