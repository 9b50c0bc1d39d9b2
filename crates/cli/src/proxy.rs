//! `fairlane proxy --config proxy.toml [--check]`: the interposed fair-scheduling HTTP proxy
//! (fairlane-proxy; docs/proxy.md).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use fairlane_proxy::program;

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
