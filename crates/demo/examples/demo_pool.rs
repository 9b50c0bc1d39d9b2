//! `fairlane demo pool` as an example binary: tenants of different kinds on a real `FairPool`
//! under FIFO, WFQᴱ, WF²Qᴱ and 2DFQᴱ, per-tenant throughput and p50/p99 latency side by side.
//!
//! ```sh
//! cargo run --release -p fairlane-runtime --example demo_pool            # ~30 s
//! cargo run --release -p fairlane-runtime --example demo_pool -- --quick # ~10 s
//! cargo run --release -p fairlane-runtime --example demo_pool -- --json
//! ```

use fairlane_demo::pool::{run, DemoOptions};

fn main() {
    let mut options = DemoOptions::default();
    let mut json = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--json" => json = true,
            "--quick" => options.quick = true,
            "-h" | "--help" => {
                println!("usage: demo_pool [--quick] [--json]");
                return;
            }
            other => {
                eprintln!("unknown argument {other:?}; usage: demo_pool [--quick] [--json]");
                std::process::exit(2);
            }
        }
    }
    match run(&options) {
        Ok(report) if json => println!("{}", report.to_json()),
        Ok(report) => print!("{}", report.to_table()),
        Err(e) => {
            eprintln!("demo failed: {e}");
            std::process::exit(1);
        }
    }
}
