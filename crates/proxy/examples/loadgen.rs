//! A small load generator.
//!
//! ```text
//! loadgen closed <addr> <path> <connections> <seconds> [key]
//! loadgen open   <addr> <path> <rate/s>      <seconds> [key]
//! ```
//! Prints one summary line: sent, answered, status counts, ok/s, p50, p99.

use std::time::Duration;

use fairlane_proxy_testkit::loadgen::{closed, open, Target};

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 5 {
        eprintln!("usage: loadgen closed|open <addr> <path> <connections|rate> <seconds> [key]");
        std::process::exit(2);
    }
    let target = Target {
        addr: a[1].parse().expect("addr as ip:port"),
        path: a[2].clone(),
        key: a.get(5).cloned(),
    };
    let n: f64 = a[3].parse().expect("a number");
    let secs = Duration::from_secs_f64(a[4].parse().expect("seconds"));
    fairlane_proxy::server::raise_fd_limit();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let r = rt.block_on(async {
        match a[0].as_str() {
            "closed" => closed(&target, n as usize, secs).await,
            _ => open(&target, n, secs).await,
        }
    });
    println!(
        "{}{}",
        r.summary(),
        if a[0] == "closed" {
            format!(" connections {}", r.connections)
        } else {
            String::new()
        }
    );
}
