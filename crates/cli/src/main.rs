//! `fairlane`: the command line. Each subcommand lives in its own module and is thin glue
//! over the library crates.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// jemalloc, as in the `fairlane-proxy` binary: `fairlane proxy` runs the same code and
/// should hold the same memory per client connection (jemalloc keeps the untouched part of
/// hyper's 8 KiB connection buffers out of memory).
#[cfg(all(unix, not(target_env = "musl")))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod demo;
mod out;
mod pg;
mod proxy;
mod reproduce;
mod simulate;
mod tam;

#[derive(Parser)]
#[command(
    name = "fairlane",
    version,
    about = "Keep the tenants of a shared service out of each other's way"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Demonstrations on real work.
    #[command(subcommand)]
    Demo(demo::DemoCommand),
    /// PostgreSQL pooler with fair queueing and CPU reservations (docs/pg.md).
    Pg(pg::PgArgs),
    /// Fair-scheduling HTTP proxy in front of a black-box server (docs/proxy.md).
    Proxy(proxy::ProxyArgs),
    /// Run the shipped reproductions and write an HTML report beside the papers' numbers.
    Reproduce(reproduce::ReproduceArgs),
    /// Run a TOML experiment spec under each of its schedulers.
    Simulate(simulate::SimulateArgs),
    // Thread Architecture Models: the help lists the subcommands (`tam::about`).
    #[command(subcommand, about = tam::about())]
    Tam(tam::TamCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Demo(cmd) => demo::run(cmd),
        Command::Pg(args) => pg::run(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Reproduce(args) => reproduce::run(args),
        Command::Simulate(args) => simulate::run(args),
        Command::Tam(cmd) => tam::run(cmd),
    }
}
