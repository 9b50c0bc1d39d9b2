//! fairlane's side of the dmclock comparison: the workload of
//! `shared/anchors/dmclock_cycle.cc`, the Ceph dmclock `PullPriorityQueue` harness, run through
//! the public API as a user builds it: `Config::preset(alg).workers(1).build::<u64>()`, a
//! `Box<dyn Scheduler<u64> + Send>` (dynamic dispatch included, as every executor drives it).
//!
//! Workload: one worker, unit known costs, weight 1 for every tenant, every tenant keeps two
//! requests queued. One cycle = `complete` the running request + `enqueue` a new request for
//! its tenant + `dequeue` onto the freed worker (dmclock's cycle is `pull_request` +
//! `add_request` for the client just served). Time is synthetic, advancing 1 µs per cycle, so
//! no clock read is in the loop. Timing follows the C++ harness exactly: warm-up of at least
//! 0.3 s and 4 passes over all tenants, a batch sized to ~20 ms, 40 timed batches; the median
//! (and min, max) ns per cycle is printed in the harness's line format:
//!
//! `fairlane-<alg> n=<clients> median_ns=<x> min_ns=<x> max_ns=<x>`
//!
//! Run: `cargo bench -p fairlane-core --bench dmclock [-- [alg ...] [clients ...]]`, e.g.
//! `cargo bench -p fairlane-core --bench dmclock -- wfq 1000 10000`. Algorithms: `wfq`,
//! `sfq` (SFQ(D) with D = 1), `2dfq`, or any other preset; defaults: wfq sfq 2dfq at 10, 100,
//! 1,000 and 10,000 clients. `scripts/bench-dmclock.sh` alternates it with the dmclock harness.

use std::hint::black_box;
use std::time::{Duration, Instant};

use fairlane_core::{Config, Decision, Request, Scheduler, Ticket};

const SAMPLES: usize = 40;

struct Cycle {
    s: Box<dyn Scheduler<u64> + Send>,
    running: (Ticket, u64),
    now: f64,
    id: u64,
}

impl Cycle {
    fn new(alg: &str, clients: u64) -> Self {
        let mut s = Config::preset(alg)
            .unwrap_or_else(|e| panic!("{e}"))
            .workers(1)
            .build::<u64>()
            .unwrap_or_else(|e| panic!("{e}"));
        let now = 1.0;
        let mut id = 0;
        for _ in 0..2 {
            for c in 0..clients {
                s.enqueue(Request::new(c, 0u32, id).with_cost(1.0), now)
                    .unwrap();
                id += 1;
            }
        }
        let running = match s.dequeue(0, now).unwrap() {
            Decision::Run(d) => (d.ticket, d.request.tenant.0),
            other => panic!("dequeue returned no request: {other:?}"),
        };
        Cycle {
            s,
            running,
            now,
            id,
        }
    }

    #[inline]
    fn cycle(&mut self) {
        self.now += 1e-6;
        let (ticket, tenant) = self.running;
        self.s.complete(ticket, 1.0, self.now).unwrap();
        self.s
            .enqueue(Request::new(tenant, 0u32, self.id).with_cost(1.0), self.now)
            .unwrap();
        self.id += 1;
        match self.s.dequeue(0, self.now).unwrap() {
            Decision::Run(d) => {
                black_box(d.request.payload);
                self.running = (d.ticket, d.request.tenant.0);
            }
            other => panic!("dequeue returned no request: {other:?}"),
        }
    }
}

fn run(alg: &str, clients: u64) {
    let mut c = Cycle::new(alg, clients);
    // FAIRLANE_DMC_CYCLES=k: run exactly k cycles and print nothing, for instruction counts
    // under `valgrind --tool=callgrind` (a load-independent measure: difference two k's).
    if let Some(k) = std::env::var("FAIRLANE_DMC_CYCLES")
        .ok()
        .and_then(|k| k.parse::<u64>().ok())
    {
        for _ in 0..k {
            c.cycle();
        }
        return;
    }
    // Warm-up: at least 0.3 s and 4 passes over all clients.
    let t0 = Instant::now();
    let mut k = 0u64;
    while k < 4 * 2 * clients || t0.elapsed() < Duration::from_millis(300) {
        for _ in 0..1000 {
            c.cycle();
        }
        k += 1000;
    }
    // Batch size: ~20 ms per sample.
    let mut batch = 1000u32;
    loop {
        let t0 = Instant::now();
        for _ in 0..batch {
            c.cycle();
        }
        if t0.elapsed() > Duration::from_millis(20) {
            break;
        }
        batch *= 2;
    }
    let mut ns: Vec<f64> = (0..SAMPLES)
        .map(|_| {
            let t0 = Instant::now();
            for _ in 0..batch {
                c.cycle();
            }
            t0.elapsed().as_secs_f64() * 1e9 / f64::from(batch)
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "fairlane-{alg} n={clients} median_ns={:.1} min_ns={:.1} max_ns={:.1}",
        ns[SAMPLES / 2],
        ns[0],
        ns[SAMPLES - 1]
    );
}

fn main() {
    // `cargo bench` passes `--bench`; other flags (criterion's) are ignored too.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut algs: Vec<&str> = args
        .iter()
        .filter(|a| a.parse::<u64>().is_err())
        .map(String::as_str)
        .collect();
    let mut sizes: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    if algs.is_empty() {
        algs = vec!["wfq", "sfq", "2dfq"];
    }
    if sizes.is_empty() {
        sizes = vec![10, 100, 1_000, 10_000];
    }
    for n in sizes {
        for alg in &algs {
            run(alg, n);
        }
    }
}
