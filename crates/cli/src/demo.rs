//! `fairlane demo pool`: real work on a `FairPool` under several schedulers, side by side
//! (thin glue over `fairlane_demo`).

use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use fairlane_demo::pool::{self as demo, DemoOptions};

#[derive(Subcommand)]
pub enum DemoCommand {
    /// Small, large and unpredictable tenants hashing real data on a FairPool, under FIFO,
    /// WFQᴱ, WF²Qᴱ and 2DFQᴱ: per-tenant throughput and p50/p99 latency.
    Pool(PoolArgs),
}

#[derive(Args)]
pub struct PoolArgs {
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// About 10 s in all instead of about 30 s.
    #[arg(long)]
    quick: bool,
    /// Worker threads of the pool.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Measured seconds per scheduler (ignored with --quick).
    #[arg(long, default_value_t = 6.0)]
    seconds: f64,
    /// Schedulers to compare, comma-separated presets.
    #[arg(long, value_delimiter = ',')]
    schedulers: Option<Vec<String>>,
    /// Seed of the arrivals and request sizes.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Instead: CPU reservations under LDF (reserved tenants of 20 % and 30 % of the pool
    /// next to four bullies), per metering interval, against 2DFQᴱ with equal weights.
    #[arg(long)]
    reservations: bool,
    /// With --reservations: the metering interval, ms.
    #[arg(long, default_value_t = 500)]
    interval_ms: u64,
    /// With --reservations: intervals measured.
    #[arg(long, default_value_t = 10)]
    intervals: usize,
}

/// Print a demo's report (one JSON object with `--json`, else the table); a demo that
/// cannot run exits 2 with its error.
fn finish<R, E: std::fmt::Display>(
    result: Result<R, E>,
    json: bool,
    to_json: fn(&R) -> String,
    to_table: fn(&R) -> String,
) -> ExitCode {
    match result {
        Ok(report) if json => println!("{}", to_json(&report)),
        Ok(report) => print!("{}", to_table(&report)),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

fn reservations(args: &PoolArgs) -> ExitCode {
    use fairlane_demo::reserve::{self as reserve_demo, ReserveDemoOptions};
    let options = ReserveDemoOptions {
        workers: args.workers,
        interval: Duration::from_millis(args.interval_ms),
        intervals: args.intervals,
        ..ReserveDemoOptions::default()
    };
    finish(
        reserve_demo::run(&options),
        args.json,
        reserve_demo::ReserveReport::to_json,
        reserve_demo::ReserveReport::to_table,
    )
}

pub fn run(cmd: DemoCommand) -> ExitCode {
    let DemoCommand::Pool(args) = cmd;
    if args.reservations {
        return reservations(&args);
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0) {
        eprintln!(
            "error: --seconds must be a positive number, got {}",
            args.seconds
        );
        return ExitCode::from(2);
    }
    let mut options = DemoOptions {
        workers: args.workers,
        duration: Duration::from_secs_f64(args.seconds),
        quick: args.quick,
        seed: args.seed,
        ..DemoOptions::default()
    };
    if let Some(s) = args.schedulers {
        options.schedulers = s;
    }
    finish(
        demo::run(&options),
        args.json,
        demo::DemoReport::to_json,
        demo::DemoReport::to_table,
    )
}
