//! Outputs of LLM-server (`model = "llm"`) specs: the JSON summary, CSV files, the HTML
//! page with the paper's two plots (service rate per client over time, Figs. 3–10 (b); the
//! accumulated service difference, Fig. 3 (a)), and the printed table. Everything here is
//! deterministic except `wall_seconds`.

use std::io::{self, Write};
use std::path::Path;

use fairlane_plot::{fmt_num, Axis, Block, LineChart, Series, Table};
use serde_json::{json, Map, Value};

use super::{LatencySummary, LlmClient, LlmResult, LlmRun};
use crate::report::{
    csv_dir, group_by_label, long_rows, num, run_stem, time_chart, write_page, Csv,
};

/// The window of the service-rate plots, seconds (the artifact's plots use 60).
pub const RATE_WINDOW: f64 = 60.0;

/// Each client's share of the service within the arrival window.
pub fn shares(r: &LlmResult) -> Vec<f64> {
    let total: f64 = r.clients.iter().map(|c| c.window_service).sum();
    r.clients.iter().map(|c| c.window_service / total).collect()
}

/// A cumulative series `(t, W(0, t))` as a rate over the trailing `window` seconds
/// (`(W(t) − W(t − window)) / window`, over `[0, t)` before a whole window has passed),
/// read at each of its points.
pub fn rate(series: &[(f64, f64)], window: f64) -> Vec<(f64, f64)> {
    series
        .iter()
        .map(|&(t, w)| {
            let from = t - window;
            // The last point at or before `from` (the origin before the first).
            let k = series.partition_point(|p| p.0 <= from);
            let (t0, w0) = if k == 0 { (0.0, 0.0) } else { series[k - 1] };
            let dt = t - t0;
            (t, if dt > 0.0 { (w - w0) / dt } else { 0.0 })
        })
        .collect()
}

/// The accumulated service difference `max_{i,j} |W_i(0,t) − W_j(0,t)|` over time, one line
/// per run (the paper's Fig. 3 (a)).
pub fn difference_chart(title: impl Into<String>, runs: &[&LlmRun]) -> LineChart {
    let mut c = time_chart(title, Axis::linear("service difference (weighted tokens)"));
    for r in runs {
        c = c.series(Series::new(
            r.result.policy.clone(),
            r.result.accumulated_difference.clone(),
        ));
    }
    c
}

/// Each client's service rate over a [`RATE_WINDOW`] window, one line per client (the
/// paper's "Service (Token/s)" plots).
pub fn service_chart(title: impl Into<String>, r: &LlmResult) -> LineChart {
    let mut c = time_chart(title, Axis::linear("service (weighted tokens/s)"));
    for client in &r.clients {
        c = c.series(Series::new(
            client.name.clone(),
            rate(&client.service_series, RATE_WINDOW),
        ));
    }
    c
}

fn latency_json(l: &LatencySummary) -> Value {
    json!({ "count": l.count, "mean": num(l.mean), "p50": num(l.p50), "p99": num(l.p99) })
}

fn client_json(c: &LlmClient, share: f64) -> Value {
    json!({
        "weight": c.weight,
        "arrived": c.arrived,
        "rejected": c.rejected,
        "completed": c.completed,
        "service": c.service,
        "window_service": c.window_service,
        "share": num(share),
        "response": latency_json(&c.response),
        "first_token": latency_json(&c.first_token),
    })
}

/// `{"kind": "llm", "runs": [{"scheduler", "label", "throughput", "makespan", "bound",
/// "max_backlogged_difference", …, "tenants": {CLIENT: {"service", "share", "response":
/// {"mean", "p50", "p99"}, …}}}]}`: service in weighted tokens, times in seconds,
/// throughput in tokens per second over the arrival window.
pub fn summary_json(runs: &[LlmRun]) -> Value {
    let runs: Vec<Value> = runs
        .iter()
        .map(|run| {
            let r = &run.result;
            let mut tenants = Map::new();
            for (c, s) in r.clients.iter().zip(shares(r)) {
                tenants.insert(c.name.clone(), client_json(c, s));
            }
            json!({
                "scheduler": r.policy,
                "core_scheduler": r.scheduler,
                "label": run.label,
                "events": r.events,
                "wall_seconds": r.wall_seconds,
                "events_per_second": r.events as f64 / r.wall_seconds.max(1e-9),
                "window": r.window,
                "makespan": r.makespan,
                "throughput": r.window_throughput(),
                "window_tokens": r.window_tokens,
                "prompt_tokens": r.prompt_tokens,
                "generated_tokens": r.generated_tokens,
                "service": r.service,
                "iterations": r.iterations,
                "prefill_iterations": r.prefill_iterations,
                "holds": r.holds,
                "max_batch_seen": r.max_batch_seen,
                "max_kv_used": r.max_kv_used,
                "bound": r.bound,
                "max_backlogged_difference": r.max_backlogged_difference.map(num),
                "final_accumulated_difference":
                    r.accumulated_difference.last().map(|p| num(p.1)),
                "tenants": tenants,
            })
        })
        .collect();
    json!({ "kind": "llm", "runs": runs })
}

/// One run's series in long form: `["service", CLIENT, t, W(0,t)]`, `["first_token",
/// CLIENT, t, mean s]` and `["difference", "", t, max |W_i − W_j|]`.
pub fn series_json(run: &LlmRun) -> Value {
    let r = &run.result;
    let mut rows = Vec::new();
    for c in &r.clients {
        long_rows(&mut rows, "service", &c.name, &c.service_series);
        long_rows(&mut rows, "first_token", &c.name, &c.first_token_series);
    }
    long_rows(&mut rows, "difference", "", &r.accumulated_difference);
    Value::Array(rows)
}

fn stem(r: &LlmRun) -> String {
    run_stem(&r.label, &r.result.policy)
}

/// Write per run `csv/STEM-clients.csv` (per client), `csv/STEM-service.csv` (every sample
/// of every client's cumulative service and its rate) and `csv/STEM-difference.csv`.
pub fn write_csv(dir: &Path, runs: &[LlmRun]) -> io::Result<()> {
    let dir = csv_dir(dir)?;
    for run in runs {
        let (r, stem) = (&run.result, stem(run));
        let mut c = Csv::new(
            "client,weight,arrived,rejected,completed,service,window_service,share,response_mean_s,response_p99_s,first_token_mean_s,first_token_p99_s",
        );
        for (x, share) in r.clients.iter().zip(shares(r)) {
            c.row(&[
                &x.name,
                &x.weight,
                &x.arrived,
                &x.rejected,
                &x.completed,
                &x.service,
                &x.window_service,
                &share,
                &x.response.mean,
                &x.response.p99,
                &x.first_token.mean,
                &x.first_token.p99,
            ]);
        }
        c.write(&dir, &stem, "clients")?;
        let mut c = Csv::new("client,t_s,service,service_rate");
        for x in &r.clients {
            let rates = rate(&x.service_series, RATE_WINDOW);
            for (&(t, w), &(_, v)) in x.service_series.iter().zip(&rates) {
                c.row(&[&x.name, &t, &w, &v]);
            }
        }
        c.write(&dir, &stem, "service")?;
        Csv::of_points("t_s,difference", &r.accumulated_difference).write(
            &dir,
            &stem,
            "difference",
        )?;
    }
    Ok(())
}

/// The largest backlogged difference as a table cell.
fn diff_cell(r: &LlmResult) -> String {
    r.max_backlogged_difference
        .map_or("-".into(), |d| format!("{d:.0}"))
}

fn shares_cell(r: &LlmResult) -> String {
    shares(r)
        .iter()
        .map(|s| format!("{s:.3}"))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// One row per run.
pub fn runs_table(runs: &[LlmRun]) -> Table {
    let mut t = Table::new([
        "point",
        "policy",
        "tokens/s",
        "shares",
        "max backlogged diff.",
        "bound",
        "makespan (s)",
        "holds",
        "rejected",
    ]);
    for run in runs {
        let r = &run.result;
        t.push_row([
            run.label.clone(),
            r.policy.clone(),
            format!("{:.1}", r.window_throughput()),
            shares_cell(r),
            diff_cell(r),
            format!("{:.0}", r.bound),
            format!("{:.0}", r.makespan),
            r.holds.to_string(),
            r.clients
                .iter()
                .map(|c| c.rejected)
                .sum::<u64>()
                .to_string(),
        ]);
    }
    t
}

/// A point's blocks: the accumulated difference under every policy, then each policy's
/// service rate per client, then a table of latencies.
pub fn point_blocks(runs: &[&LlmRun]) -> Vec<Block> {
    let mut blocks = vec![Block::from(difference_chart(
        "Accumulated service difference max |W_i(0,t) − W_j(0,t)|",
        runs,
    ))];
    for r in runs {
        blocks.push(Block::from(service_chart(
            format!(
                "{}: service per client ({RATE_WINDOW:.0} s window)",
                r.result.policy
            ),
            &r.result,
        )));
    }
    let mut t = Table::new([
        "policy",
        "client",
        "service",
        "response mean (s)",
        "response p99 (s)",
        "first token mean (s)",
        "first token p99 (s)",
    ]);
    for r in runs {
        for c in &r.result.clients {
            t.push_row([
                r.result.policy.clone(),
                c.name.clone(),
                format!("{:.0}", c.service),
                fmt_num(c.response.mean),
                fmt_num(c.response.p99),
                fmt_num(c.first_token.mean),
                fmt_num(c.first_token.p99),
            ]);
        }
    }
    blocks.push(Block::Table(t));
    blocks
}

/// Write `index.html`: the runs table and each point's charts and table.
pub fn write_html(dir: &Path, title: &str, description: &str, runs: &[LlmRun]) -> io::Result<()> {
    let intro = format!(
        "<p>{}</p><p>Service is in weighted tokens (w_p·prompt + w_q·output); shares and \
         tokens/s are over the arrival window; the bound is Theorem 4.4's \
         2·max(w_p·L_input, w_q·M). CSV files with every number are in <code>csv/</code>.</p>",
        fairlane_plot::escape(description)
    );
    let points = group_by_label(runs, |r| &r.label)
        .into_iter()
        .map(|(label, rs)| (label, point_blocks(&rs)));
    write_page(dir, title, intro, runs_table(runs), points)
}

/// Per point, one line per policy: throughput, shares, the largest backlogged difference
/// against the bound, makespan, holds and rejections (what `fairlane simulate` prints).
pub fn print(out: &mut dyn Write, runs: &[LlmRun]) -> io::Result<()> {
    for (label, rs) in group_by_label(runs, |r| &r.label) {
        if !label.is_empty() {
            writeln!(out, "== {label}")?;
        }
        writeln!(
            out,
            "{:<10} {:>10} {:>10} {:>9} {:>9}  shares",
            "policy", "tokens/s", "max diff", "bound", "makespan"
        )?;
        for run in rs {
            let r = &run.result;
            let rejected: u64 = r.clients.iter().map(|c| c.rejected).sum();
            writeln!(
                out,
                "{:<10} {:>10.1} {:>10} {:>9.0} {:>8.0}s  {}{}{}",
                r.policy,
                r.window_throughput(),
                diff_cell(r),
                r.bound,
                r.makespan,
                shares_cell(r),
                if r.holds > 0 {
                    format!(", {} holds", r.holds)
                } else {
                    String::new()
                },
                if rejected > 0 {
                    format!(", {rejected} rejected")
                } else {
                    String::new()
                },
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_is_the_trailing_window_slope() {
        let s: Vec<(f64, f64)> = (1..=200).map(|t| (t as f64, 10.0 * t as f64)).collect();
        let r = rate(&s, 60.0);
        assert!(r.iter().all(|p| (p.1 - 10.0).abs() < 1e-9), "{r:?}");
        // A step at t = 100: the rate is the step over the window for 60 s, then 0.
        let s: Vec<(f64, f64)> = (1..=200)
            .map(|t| (t as f64, if t >= 100 { 600.0 } else { 0.0 }))
            .collect();
        let r = rate(&s, 60.0);
        assert_eq!(r[98].1, 0.0);
        assert_eq!(r[99].1, 10.0);
        assert_eq!(r[158].1, 10.0);
        assert_eq!(r[159].1, 0.0);
        assert!(rate(&[], 60.0).is_empty());
    }
}
