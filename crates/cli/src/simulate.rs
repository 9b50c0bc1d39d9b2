//! `fairlane simulate SPEC [--json] [--out DIR] [--seed N] [--set PATH=VALUE]…`: run a TOML
//! experiment spec of any kind (worker pool, black box, database server, TAM) under each of
//! its schedulers and print, or write, what happened. Glue over `fairlane_sim`'s
//! [`Experiment`] interface.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fairlane_repro::progress::Progress;
use fairlane_sim::{AnyError, Experiment, RunOptions};

use crate::out;

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
    #[command(flatten)]
    set: SetArgs,
    /// Runs in parallel (default: the number of cores). Wall times are per run.
    #[arg(long)]
    jobs: Option<usize>,
    /// Cap on the events of one run: a run estimated to need more is refused before it
    /// starts, and one that reaches it stops with an error.
    #[arg(long, default_value_t = fairlane_sim::events::DEFAULT_MAX_EVENTS)]
    max_events: u64,
}

/// `--set PATH=VALUE`, shared by `simulate` and `tam what-if --simulate`.
#[derive(Args, Default)]
pub struct SetArgs {
    /// Set any field of the spec before running, by its path: `tenant.small.count=50`,
    /// `simulation.client.C2.threads=200` (repeatable; the value is TOML, else a string;
    /// docs/simulator.md "Changing fields").
    #[arg(long = "set", value_name = "PATH=VALUE")]
    pub set: Vec<String>,
}

impl SetArgs {
    /// The assignments, with `extra` ones (`--seed`, `--duration`) first.
    pub fn changes(
        &self,
        extra: Vec<(String, toml::Value)>,
    ) -> Result<Vec<(String, toml::Value)>, String> {
        let mut out = extra;
        for s in &self.set {
            out.push(fairlane_sim::doc::assignment(s).map_err(|m| format!("--set: {m}"))?);
        }
        Ok(out)
    }

    /// Apply the assignments (and `extra` first) to `spec`; a message when one is wrong.
    pub fn apply(
        &self,
        spec: &mut dyn Experiment,
        extra: Vec<(String, toml::Value)>,
    ) -> Result<(), String> {
        let changes = self.changes(extra)?;
        if changes.is_empty() {
            return Ok(());
        }
        spec.set_all(&changes).map_err(|e| e.to_string())
    }
}

/// Default parallelism: the cores we have.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

pub fn run(args: SimulateArgs) -> ExitCode {
    let mut spec = match fairlane_sim::load(&args.spec) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let mut extra = Vec::new();
    if let Some(seed) = args.seed {
        extra.push(("seed".to_string(), toml::Value::Integer(seed as i64)));
    }
    if let Some(d) = args.duration {
        extra.push(("duration".to_string(), toml::Value::Float(d)));
    }
    if let Err(e) = args.set.apply(spec.as_mut(), extra) {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let opts = RunOptions {
        jobs: args.jobs.unwrap_or_else(default_jobs).max(1),
        max_events: args.max_events,
        point: None,
    };
    // The batch's size is known once it starts: the bar learns it from the first report.
    let tty = std::io::stderr().is_terminal() && !args.json;
    let mut bar = Progress::with_output(spec.name(), 1, tty);
    let runs = spec.run(&opts, &mut |p| {
        bar.set_total(p.runs);
        bar.update(p.fraction * p.runs as f64);
    });
    bar.finish();
    let runs = match runs {
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
        let written = runs
            .write_csv(dir)
            .and_then(|()| runs.write_html(dir, spec.name(), spec.description()));
        if let Err(e) = written {
            eprintln!("error: writing {}: {e}", dir.display());
            return ExitCode::from(1);
        }
    }
    let printed = out::print(|w| {
        if args.json {
            writeln!(w, "{}", runs.summary_json())
        } else {
            runs.print(w)?;
            match &args.out {
                Some(dir) => writeln!(w, "report: {}", dir.join("index.html").display()),
                None => Ok(()),
            }
        }
    });
    printed.unwrap_or(ExitCode::SUCCESS)
}
