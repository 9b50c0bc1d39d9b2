//! `fairlane pg --config pg.toml [--check]`: the PostgreSQL pooler with fair queueing and
//! CPU reservations (fairlane-pg; docs/pg.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

#[derive(Args)]
pub struct PgArgs {
    /// The pooler's config file (TOML; see docs/pg.md).
    #[arg(long, short)]
    config: PathBuf,
    /// Only validate the config and exit (0 if valid, 2 naming the file and field if not).
    #[arg(long)]
    check: bool,
}

pub fn run(args: PgArgs) -> ExitCode {
    if args.check {
        return fairlane_pg::cli::check(&args.config);
    }
    fairlane_pg::cli::run(&args.config)
}
