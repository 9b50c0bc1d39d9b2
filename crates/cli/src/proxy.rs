//! `fairlane proxy --config proxy.toml [--check]`: the interposed fair-scheduling HTTP proxy
//! (fairlane-proxy; docs/proxy.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// The program the `fairlane-proxy` binary runs, compiled here as well (a binary cannot be
/// a dependency; the proxy's library holds no program).
#[path = "../../proxy/src/bin/fairlane-proxy/program.rs"]
mod program;

#[derive(Args)]
pub struct ProxyArgs {
    /// The proxy's config file (TOML; see docs/proxy.md).
    #[arg(long, short)]
    config: PathBuf,
    /// Only validate the config and exit (0 if valid, 2 naming the bad field if not).
    #[arg(long)]
    check: bool,
}

pub fn run(args: ProxyArgs) -> ExitCode {
    if args.check {
        return program::check(&args.config);
    }
    program::run(&args.config)
}
