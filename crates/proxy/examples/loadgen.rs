//! A small load generator.
//!
//! ```text
//! loadgen closed <addr> <path> <connections> <seconds> [key]
//! loadgen open   <addr> <path> <rate/s>      <seconds> [key]
//! ```
//! Prints one summary line: sent, answered, status counts, ok/s, p50, p99.
//!
//! It runs on `LOADGEN_THREADS` threads (default 1), each a single-threaded runtime with its
//! share of the connections (closed loop) or of the rate (open loop), as wrk and h2load do: a
//! request's wake-ups stay on one thread, so the load generator costs the machine little and
//! the same for every server it measures.

use std::time::Duration;

use fairlane_proxy_testkit::loadgen::{closed, open, Report, Target};

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
    let threads: usize = match std::env::var("LOADGEN_THREADS") {
        Ok(v) => v.parse().ok().filter(|&t| t >= 1).unwrap_or_else(|| {
            eprintln!("loadgen: LOADGEN_THREADS: expected a number ≥ 1, got {v:?}");
            std::process::exit(2)
        }),
        Err(_) => 1,
    };
    let is_closed = a[0] == "closed";
    fairlane_proxy::server::raise_fd_limit();
    let parts: Vec<Report> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let target = &target;
                s.spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    rt.block_on(async {
                        if is_closed {
                            // Connections dealt round-robin: thread i takes every threads-th.
                            let total = n as usize;
                            let mine = total / threads + usize::from(i < total % threads);
                            closed(target, mine, secs).await
                        } else {
                            open(target, n / threads as f64, secs).await
                        }
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("load generator thread"))
            .collect()
    });
    let r = Report::combine(parts);
    println!(
        "{}{}",
        r.summary(),
        if is_closed {
            format!(" connections {}", r.connections)
        } else {
            String::new()
        }
    );
}
