//! `fairlane reproduce [NAME…] [--all] [--quick] [--out DIR]`: glue over `fairlane_repro`.
//! Runs the chosen reproductions, writes one HTML report, and prints every claim's verdict.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fairlane_repro::{progress::Progress, Options, Source, EXPERIMENTS};

/// The help of NAMES, from the registry.
fn names_help() -> String {
    format!(
        "Which reproductions to run (default: all). Known: {}",
        fairlane_repro::names().join(", ")
    )
}

#[derive(Args)]
pub struct ReproduceArgs {
    // Which reproductions to run: the help lists the registry's names (`names_help`).
    #[arg(help = names_help())]
    names: Vec<String>,
    /// Run every reproduction (the default when no name is given).
    #[arg(long)]
    all: bool,
    /// Where to write the report (created if missing).
    #[arg(long, default_value = "report")]
    out: PathBuf,
    /// Halve the simulated durations and run 40 suite runs instead of 150 (the whole set
    /// then takes a few minutes on two cores).
    #[arg(long)]
    quick: bool,
    /// Simulation runs in parallel (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Use the specs compiled into the binary even inside the repository.
    #[arg(long)]
    embedded: bool,
}

pub fn run(args: ReproduceArgs) -> ExitCode {
    let known = fairlane_repro::names();
    if let Some(bad) = args.names.iter().find(|n| !known.contains(&n.as_str())) {
        eprintln!(
            "reproduce: unknown reproduction {bad:?}; known: {}",
            known.join(", ")
        );
        return ExitCode::from(2);
    }
    let chosen: Vec<_> = EXPERIMENTS
        .iter()
        .filter(|e| args.all || args.names.is_empty() || args.names.iter().any(|n| n == e.name))
        .collect();
    let mut opts = if args.quick {
        Options::quick()
    } else {
        Options::full()
    };
    opts.embedded_only = args.embedded;
    if let Some(j) = args.jobs {
        opts.jobs = j.max(1);
    }
    let planned: Vec<usize> = chosen
        .iter()
        // A spec that does not parse counts as one run here; `run` below reports its error.
        .map(|e| fairlane_repro::planned_runs(e, &opts).unwrap_or(1))
        .collect();
    let mut bar = Progress::new("reproduce", planned.iter().sum());
    let (mut done, mut outcomes) = (0usize, Vec::new());
    for (e, n) in chosen.into_iter().zip(planned) {
        eprintln!("reproduce: {} ({n} runs)", e.name);
        bar.set_what(e.name);
        let base = done as f64;
        let outcome = fairlane_repro::run(e, &opts, &mut |f| bar.update(base + f * n as f64));
        done += n;
        bar.finish();
        match outcome {
            Ok(o) => {
                match &o.source {
                    Source::Disk(p) => eprintln!("reproduce: {}: spec {}", e.name, p.display()),
                    Source::Embedded => {
                        eprintln!("reproduce: {}: spec compiled into the binary", e.name)
                    }
                    Source::None => {}
                }
                outcomes.push(o);
            }
            Err(err) => {
                eprintln!("reproduce: {}: {err}", e.name);
                return ExitCode::FAILURE;
            }
        }
    }
    bar.finish();
    let path = args.out.join("index.html");
    if let Err(e) = fairlane_repro::page(&outcomes).write(&path) {
        eprintln!("reproduce: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    let printed = crate::out::print(|w| {
        for o in &outcomes {
            for c in &o.claims {
                writeln!(w, "{}: {}: {}", o.name, c.verdict(), c.text)?;
            }
        }
        writeln!(w, "wrote {}", path.display())
    });
    if let Some(code) = printed {
        return code;
    }
    if fairlane_repro::clean(&outcomes) {
        ExitCode::SUCCESS
    } else {
        eprintln!("reproduce: an exact comparison differs from the paper, or a claim has no data (see the report)");
        ExitCode::FAILURE
    }
}
