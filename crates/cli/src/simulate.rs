//! `fairlane simulate SPEC [--json] [--out DIR] [--seed N] [--max-events N]`: run a TOML
//! experiment spec of any kind (worker pool, black box, database server) under each of its
//! schedulers and print, or write, what happened.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fairlane_repro::progress::Progress;
use fairlane_sim::dbserver::DbRun;
use fairlane_sim::{dbreport, report, AnyError, AnyRuns, AnySpec, RunResult};

#[derive(Args)]
pub struct SimulateArgs {
    /// The spec file (TOML; see docs/simulator.md).
    spec: PathBuf,
    /// Print one JSON summary object instead of tables.
    #[arg(long)]
    json: bool,
    /// Write CSV time series and an index.html with plots here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the spec's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// Override the simulated duration (seconds).
    #[arg(long)]
    duration: Option<f64>,
    /// Runs in parallel (default: the number of cores). Wall times are per run.
    #[arg(long)]
    jobs: Option<usize>,
    /// Cap on the events of one run: a run estimated to need more is refused before it
    /// starts, and one that reaches it stops with an error.
    #[arg(long, default_value_t = fairlane_sim::events::DEFAULT_MAX_EVENTS)]
    max_events: u64,
}

/// Default parallelism: the cores we have.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn run(args: SimulateArgs) -> ExitCode {
    let mut spec = match AnySpec::load(&args.spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut overrides = Vec::new();
    if let Some(seed) = args.seed {
        overrides.push(("seed", toml::Value::Integer(seed as i64)));
    }
    if let Some(d) = args.duration {
        overrides.push(("duration", toml::Value::Float(d)));
    }
    for (k, v) in overrides {
        if let Err(e) = spec.set(k, v) {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    // The batch's size is known once it starts: the bar learns it from the first report.
    let tty = std::io::stderr().is_terminal() && !args.json;
    let mut bar = Progress::with_output(spec.name(), 1, tty);
    let results = spec.run(jobs, args.max_events, &mut |p| {
        bar.set_total(p.runs);
        bar.update(p.fraction * p.runs as f64);
    });
    bar.finish();
    let results = match results {
        Ok(r) => r,
        Err(e @ AnyError::Spec(_)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(dir) = &args.out {
        let written = match &results {
            AnyRuns::Pool(r) => report::write_csv(dir, r)
                .and_then(|_| report::write_html(dir, spec.name(), spec.description(), r, 12)),
            AnyRuns::Cores(r) => dbreport::write_csv(dir, r)
                .and_then(|_| dbreport::write_html(dir, spec.name(), spec.description(), r)),
            AnyRuns::Tam(r) => fairlane_sim::tam::write_csv(dir, r).and_then(|_| {
                fairlane_sim::tam::write_html(dir, spec.name(), spec.description(), r)
            }),
        };
        if let Err(e) = written {
            eprintln!("error: writing {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    if args.json {
        match &results {
            AnyRuns::Pool(r) => println!("{}", report::summary_json(r)),
            AnyRuns::Cores(r) => println!("{}", dbreport::summary_json(r)),
            AnyRuns::Tam(r) => println!("{}", fairlane_sim::tam::summary_json(r)),
        }
    } else {
        match &results {
            AnyRuns::Pool(r) => print_tables(r),
            AnyRuns::Cores(r) => print_cores(r),
            AnyRuns::Tam(r) => print_tam(r),
        }
        if let Some(dir) = &args.out {
            println!("report: {}", dir.join("index.html").display());
        }
    }
    ExitCode::SUCCESS
}

/// Per point and scheduler: utilization, then each reserved tenant and the first of each
/// group with its CPU, violation and latency.
fn print_cores(runs: &[DbRun]) {
    for (label, rs) in dbreport::by_point(runs) {
        if !label.is_empty() {
            println!("== {label}");
        }
        for r in &rs {
            println!(
                "{:<12} {:>10} events in {:.2}s, utilization {:.1} %, Jain {}",
                r.scheduler,
                r.events,
                r.wall_seconds,
                r.utilization,
                fairlane_plot::fmt_num(r.jain)
            );
        }
        let first = rs[0];
        print!("{:<14} {:>6}", "tenant", "res %");
        for r in &rs {
            print!(" {:>28}", format!("{}: CPU % / viol / p99 s", r.scheduler));
        }
        println!();
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in first.tenants.iter().enumerate() {
            if t.res <= 0.0 && !seen.insert(t.group.clone()) {
                continue;
            }
            print!("{:<14} {:>6}", t.name, fairlane_plot::fmt_num(t.res));
            for r in &rs {
                let x = &r.tenants[i];
                print!(
                    " {:>28}",
                    format!(
                        "{:.2} / {:.2} / {}",
                        x.cpu_mean,
                        x.viol_points,
                        fairlane_plot::fmt_num(x.latency_p99)
                    )
                );
            }
            println!();
        }
    }
}

fn print_tables(results: &[RunResult]) {
    for (label, runs) in report::by_point(results) {
        if !label.is_empty() {
            println!("== {label}");
        }
        for r in &runs {
            println!(
                "{:<8} {:>10} events in {:.2}s ({:.1} M events/s), utilization {:.3}, mean Gini {:.3}",
                r.scheduler,
                r.events,
                r.wall_seconds,
                r.events as f64 / r.wall_seconds.max(1e-9) / 1e6,
                r.utilization,
                r.gini_mean
            );
        }
        let first = runs[0];
        let tracked: Vec<String> = first.series.iter().map(|s| s.name.clone()).collect();
        let reps = report::representatives(first, &tracked, 20);
        print!("{:<16}", "tenant");
        for r in &runs {
            print!(" {:>26}", format!("{}: lag σ / p50 / p99 (s)", r.scheduler));
        }
        println!();
        for i in reps {
            print!("{:<16}", first.tenants[i].name);
            for r in &runs {
                let t = &r.tenants[i];
                print!(
                    " {:>26}",
                    format!(
                        "{} / {} / {}",
                        fairlane_plot::fmt_num(t.lag_std),
                        fairlane_plot::fmt_num(t.latency_p50),
                        fairlane_plot::fmt_num(t.latency_p99)
                    )
                );
            }
            println!();
        }
    }
}

/// Per run: each client's throughput and latency, then each stage's queue and blocking.
fn print_tam(runs: &[fairlane_sim::tam::TamRun]) {
    for r in runs {
        println!(
            "== pluggable stages: {} ({} stage visits, {} events in {:.2}s)",
            r.scheduler, r.visits, r.events, r.wall_seconds
        );
        println!(
            "{:<16} {:>10} {:>10} {:>10} {:>10}",
            "client", "req/s", "mean ms", "p50 ms", "p99 ms"
        );
        for c in &r.clients {
            println!(
                "{:<16} {:>10.1} {:>10.3} {:>10.3} {:>10.3}",
                c.name,
                c.throughput,
                c.latency_mean * 1e3,
                c.latency_p50 * 1e3,
                c.latency_p99 * 1e3
            );
        }
        println!(
            "{:<24} {:<14} {:>8} {:>10} {:>10}",
            "stage", "scheduler", "threads", "mean queue", "blocked"
        );
        for s in &r.stages {
            println!(
                "{:<24} {:<14} {:>8} {:>10.2} {:>10.2}",
                s.name,
                s.scheduler,
                s.threads.map_or("demand".to_string(), |n| n.to_string()),
                s.queue_mean,
                s.blocked_mean
            );
        }
    }
}
