//! `fairlane simulate SPEC [--json] [--out DIR] [--seed N]`: run a TOML experiment spec
//! under each of its schedulers and print, or write, what happened.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use fairlane_sim::{report, RunResult, SpecFile};

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
}

/// A progress bar on stderr, shown only on a terminal and only once a run passes a second.
pub struct Progress {
    start: Instant,
    shown: bool,
    last: f64,
    tty: bool,
    what: String,
}

impl Progress {
    pub fn new(what: &str) -> Self {
        Progress {
            start: Instant::now(),
            shown: false,
            last: -1.0,
            tty: std::io::stderr().is_terminal(),
            what: what.to_string(),
        }
    }

    pub fn update(&mut self, done: f64) {
        if !self.tty || self.start.elapsed().as_secs_f64() < 1.0 || done - self.last < 0.005 {
            return;
        }
        self.last = done;
        self.shown = true;
        let width = 30;
        let filled = ((done.clamp(0.0, 1.0)) * width as f64) as usize;
        let secs = self.start.elapsed().as_secs_f64();
        let eta = if done > 0.0 { secs / done - secs } else { 0.0 };
        eprint!(
            "\r{} [{}{}] {:>3.0}%  {:.0}s elapsed, ~{:.0}s left ",
            self.what,
            "#".repeat(filled),
            " ".repeat(width - filled),
            done * 100.0,
            secs,
            eta
        );
        let _ = std::io::stderr().flush();
    }

    pub fn finish(&mut self) {
        if self.shown {
            eprintln!();
        }
    }
}

/// Default parallelism: the cores we have.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn run(args: SimulateArgs) -> ExitCode {
    let mut spec = match SpecFile::load(&args.spec) {
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
    let scenarios = match spec.scenarios() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let jobs = args.jobs.unwrap_or_else(default_jobs);
    let mut bar = Progress::new(&spec.spec.name);
    let results = fairlane_sim::run_all(&scenarios, jobs, &mut |x| bar.update(x));
    bar.finish();
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(dir) = &args.out {
        let written = report::write_csv(dir, &results).and_then(|_| {
            report::write_html(dir, &spec.spec.name, &spec.spec.description, &results, 12)
        });
        if let Err(e) = written {
            eprintln!("error: writing {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    if args.json {
        println!("{}", report::summary_json(&results));
    } else {
        print_tables(&results);
        if let Some(dir) = &args.out {
            println!("report: {}", dir.join("index.html").display());
        }
    }
    ExitCode::SUCCESS
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
