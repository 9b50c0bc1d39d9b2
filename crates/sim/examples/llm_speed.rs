//! How fast the continuous-batching LLM server simulates, and what VTC's suites measure.
//!
//! `cargo run --release -p fairlane-sim --example llm_speed` simulates the `overload` suite
//! (2 clients, M = 10,000 tokens, batch up to 64, Llama-2-7b on an A10G) with its arrivals
//! stretched to `LLM_SPEED_SECONDS` (default 36,000 simulated seconds, about 16 million
//! generated tokens), alternating VTC and FCFS for `LLM_SPEED_ROUNDS` rounds (default 3),
//! and prints generated tokens per wall second for each run and the median per policy
//! (about 15 wall seconds on an idle core), with the process CPU seconds of each run where
//! Linux's `/proc/self/stat` tells them (on a loaded machine wall time includes the time the
//! run waited for a core).
//!
//! `cargo run --release -p fairlane-sim --example llm_speed -- suites` runs every suite of
//! the paper's §5.2 (seed 42) under VTC, FCFS, LCF, RPM(20), WFQᴱ and 2DFQᴱ and prints, per
//! run, the throughput over the arrival window, each client's share of it, the largest
//! service difference between backlogged clients against Theorem 4.4's bound, and the
//! accumulated difference at a quarter, half and the end of the window (a few minutes).

use std::time::Instant;

use fairlane_sim::llm::{simulate, LlmOptions, LlmResult, Policy, Server, Suite, SUITES};

fn env(name: &str, default: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU seconds of this process, from `/proc/self/stat` (Linux; clock ticks of
/// 1/100 s), if readable.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

fn speed() {
    let seconds = env("LLM_SPEED_SECONDS", 36_000.0);
    let rounds = env("LLM_SPEED_ROUNDS", 3.0) as usize;
    let trace = Suite::overload().duration(seconds).trace(42).unwrap();
    let server = Server::a10g_llama2_7b().max_batch(64);
    let opts = LlmOptions::default();
    println!(
        "overload, {} requests over {seconds} s, M = {}, batch ≤ {}",
        trace.requests.len(),
        server.kv_tokens,
        server.max_batch
    );
    let mut rates: Vec<(&str, Vec<f64>)> = vec![("vtc", Vec::new()), ("fifo", Vec::new())];
    for round in 0..rounds {
        for (name, v) in rates.iter_mut() {
            let policy = Policy::by_name(name).unwrap();
            let (t, cpu) = (Instant::now(), cpu_seconds());
            let r = simulate(&trace, &server, &policy, &opts).unwrap();
            let wall = t.elapsed().as_secs_f64();
            let cpu = cpu.zip(cpu_seconds()).map(|(a, b)| b - a);
            let rate = r.generated_tokens as f64 / wall;
            let per_cpu = cpu.map_or(String::new(), |c| {
                format!(
                    " ({c:.2} CPU s: {:.2e} per CPU s)",
                    r.generated_tokens as f64 / c
                )
            });
            println!(
                "round {round} {name:5}: {} tokens generated, {} iterations, {:.0} simulated s \
                 in {wall:.3} wall s: {rate:.2e} tokens/s{per_cpu}",
                r.generated_tokens, r.iterations, r.makespan
            );
            v.push(rate);
        }
    }
    for (name, mut v) in rates {
        v.sort_by(f64::total_cmp);
        println!(
            "{name}: median {:.2e} generated tokens per wall second",
            v[v.len() / 2]
        );
    }
}

/// The accumulated difference at the sample nearest to `t`.
fn acc_at(r: &LlmResult, t: f64) -> f64 {
    r.accumulated_difference
        .iter()
        .min_by(|a, b| (a.0 - t).abs().total_cmp(&(b.0 - t).abs()))
        .map_or(f64::NAN, |p| p.1)
}

fn suites() {
    let server = Server::a10g_llama2_7b();
    let opts = LlmOptions::default();
    for name in SUITES {
        let suite = Suite::by_name(name).unwrap();
        let trace = suite.trace(42).unwrap();
        println!(
            "\n{name}: {} requests, {} s",
            trace.requests.len(),
            suite.duration
        );
        for p in ["vtc", "fifo", "lcf", "rpm20", "wfqe", "2dfqe"] {
            let r = simulate(&trace, &server, &Policy::by_name(p).unwrap(), &opts).unwrap();
            let total: f64 = r.clients.iter().map(|c| c.window_service).sum();
            let shares: Vec<String> = r
                .clients
                .iter()
                .map(|c| format!("{:.3}", c.window_service / total))
                .collect();
            let w = suite.duration;
            println!(
                "  {p:6} {:7.1} tok/s  shares [{}]  max backlogged diff {:8.0} (bound {:.0})  \
                 acc diff {:.0} / {:.0} / {:.0}  holds {}  rejected {}  makespan {:.0} s",
                r.window_throughput(),
                shares.join(" "),
                r.max_backlogged_difference.unwrap_or(f64::NAN),
                r.bound,
                acc_at(&r, w / 4.0),
                acc_at(&r, w / 2.0),
                acc_at(&r, w),
                r.holds,
                r.clients.iter().map(|c| c.rejected).sum::<u64>(),
                r.makespan,
            );
        }
    }
}

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("suites") => suites(),
        _ => speed(),
    }
}
