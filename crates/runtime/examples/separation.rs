//! 2DFQᴱ's separation on real threads: the `experiments/2dfqe-mechanism.toml` workload on a `FairPool` of
//! 16 worker threads (more than the machine's cores) whose tasks *sleep* for their cost, so
//! that the pool's dispatch decisions, not the CPU, decide who waits. Costs are measured as
//! wall time ([`CostClock::Wall`]); 1 cost unit = 1 ms.
//!
//! * `probe`: Poisson 100 tasks/s of 1 ms (the simulation: 50/s) — the small predictable tenant
//!   whose p99 we compare;
//! * 8 `small` tenants, backlogged (17 tasks outstanding each), 1 ms tasks;
//! * 8 `large` tenants, backlogged, 100 ms tasks;
//! * 8 `unpredictable` tenants, backlogged, one API: 95 % 1 ms, 5 % 100 ms tasks.
//!
//! (The simulation's expensive requests cost 1000× the cheap ones; here 100×, to keep the run
//! short.) Prints the probe's p50/p99 under WFQᴱ, WF²Qᴱ and 2DFQᴱ, 2DFQᴱ's speedups, and the
//! share of the highest- and lowest-index threads' busy time spent on cheap tasks — 2DFQ's
//! separation.
//!
//! ```sh
//! cargo run --release -p fairlane-runtime --example separation            # ~45 s
//! cargo run --release -p fairlane-runtime --example separation -- --quick # ~15 s
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlane_runtime::{CostClock, FairPool};

const WORKERS: usize = 16;
const OUTSTANDING: usize = WORKERS + 1;
const CHEAP: Duration = Duration::from_millis(1);
const EXPENSIVE: Duration = Duration::from_millis(100);

/// xorshift64*: the example's only randomness, seeded per tenant so runs are comparable.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Small,
    Large,
    Unpredictable,
}

/// What a run shares with its tasks.
struct Run {
    pool: FairPool,
    stop: AtomicBool,
    start: Instant,
    warmup: Duration,
    /// Probe latencies (seconds) after the warm-up.
    probe: Mutex<Vec<f64>>,
    /// Per worker thread: milliseconds of (cheap, expensive) tasks started after the warm-up.
    by_thread: Vec<[AtomicU64; 2]>,
}

impl Run {
    /// Run one task of `cost` on the calling worker, counting which thread ran it.
    fn work(&self, cost: Duration) {
        if self.start.elapsed() >= self.warmup {
            if let Some(i) = worker_index() {
                let ms = cost.as_millis() as u64;
                self.by_thread[i][usize::from(cost > CHEAP)].fetch_add(ms, Ordering::Relaxed);
            }
        }
        std::thread::sleep(cost);
    }
}

/// The pool names its threads `NAME-INDEX`.
fn worker_index() -> Option<usize> {
    let t = std::thread::current();
    t.name()?.rsplit('-').next()?.parse().ok()
}

/// Keep a backlogged tenant's task chain going: each task, when done, submits the next.
fn submit_backlogged(run: Arc<Run>, tenant: u64, kind: Kind, rng: Arc<Mutex<Rng>>) {
    if run.stop.load(Ordering::Relaxed) {
        return;
    }
    let cost = match kind {
        Kind::Small => CHEAP,
        Kind::Large => EXPENSIVE,
        Kind::Unpredictable => {
            if rng.lock().unwrap().uniform() < 0.05 {
                EXPENSIVE
            } else {
                CHEAP
            }
        }
    };
    let r = Arc::clone(&run);
    // Refused only once the pool shuts down, which ends the chain.
    let _ = run.pool.submit(tenant, 0u32, move || {
        r.work(cost);
        submit_backlogged(Arc::clone(&r), tenant, kind, rng);
    });
}

/// One scheduler's measurements, pooled over rounds.
struct Outcome {
    scheduler: &'static str,
    /// Probe latencies, seconds.
    latencies: Vec<f64>,
    /// Milliseconds of (cheap, expensive) tasks started on the highest- and lowest-index thread.
    high: [u64; 2],
    low: [u64; 2],
}

impl Outcome {
    fn merge(&mut self, other: Outcome) {
        self.latencies.extend(other.latencies);
        for i in 0..2 {
            self.high[i] += other.high[i];
            self.low[i] += other.low[i];
        }
    }
    fn quantile(&mut self, q: f64) -> f64 {
        self.latencies.sort_by(f64::total_cmp);
        quantile(&self.latencies, q)
    }
}

fn cheap_share([cheap, expensive]: [u64; 2]) -> f64 {
    cheap as f64 / (cheap + expensive).max(1) as f64
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn run_one(preset: &'static str, seconds: f64, warmup: f64) -> Outcome {
    let pool = FairPool::builder()
        .workers(WORKERS)
        .preset(preset)
        .cost_clock(CostClock::Wall)
        .thread_name("sep")
        .build()
        .expect("pool");
    let run = Arc::new(Run {
        pool,
        stop: AtomicBool::new(false),
        start: Instant::now(),
        warmup: Duration::from_secs_f64(warmup),
        probe: Mutex::new(Vec::new()),
        by_thread: (0..WORKERS)
            .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
            .collect(),
    });
    let groups = [
        (Kind::Small, 1u64),
        (Kind::Large, 101),
        (Kind::Unpredictable, 201),
    ];
    for (kind, first) in groups {
        for t in first..first + 8 {
            let rng = Arc::new(Mutex::new(Rng(0x9E37_79B9_7F4A_7C15 ^ t)));
            for _ in 0..OUTSTANDING {
                submit_backlogged(Arc::clone(&run), t, kind, Arc::clone(&rng));
            }
        }
    }
    // The probe: open Poisson arrivals at 100/s of 1 ms tasks, tenant 0 (a sixth of its share).
    let mut rng = Rng(0x005E_ED0F_9E0B);
    let end = Duration::from_secs_f64(seconds);
    let mut next = Duration::ZERO;
    while next < end {
        next += Duration::from_secs_f64(-(1.0 - rng.uniform()).ln() / 100.0);
        if let Some(wait) = next.checked_sub(run.start.elapsed()) {
            std::thread::sleep(wait);
        }
        let submitted = Instant::now();
        let r = Arc::clone(&run);
        let _ = run.pool.submit(0u64, 0u32, move || {
            r.work(CHEAP);
            if r.start.elapsed() >= r.warmup {
                let latency = submitted.elapsed().as_secs_f64();
                r.probe.lock().unwrap().push(latency);
            }
        });
    }
    run.stop.store(true, Ordering::Relaxed);
    drop(run.pool.shutdown_now()); // drop the backlog still queued
    let latencies = std::mem::take(&mut *run.probe.lock().unwrap());
    let ms = |i: usize| {
        run.by_thread[i]
            .each_ref()
            .map(|a| a.load(Ordering::Relaxed))
    };
    Outcome {
        scheduler: preset,
        latencies,
        high: ms(WORKERS - 1),
        low: ms(0),
    }
}

fn main() {
    let mut quick = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--quick" => quick = true,
            _ => {
                eprintln!("usage: separation [--quick]");
                std::process::exit(2);
            }
        }
    }
    // Rounds alternate the schedulers, so that a slow spell of the (shared) machine does not
    // land on one scheduler only.
    let (rounds, seconds, warmup) = if quick { (1, 5.0, 1.0) } else { (3, 5.0, 1.0) };
    println!(
        "{WORKERS} worker threads, sleeping tasks; {rounds} round(s) of {seconds} s per scheduler \
         ({warmup} s warm-up each), alternating"
    );
    let mut outcomes: Vec<Outcome> = Vec::new();
    for _ in 0..rounds {
        for (i, preset) in ["wfqe", "wf2qe", "2dfqe"].into_iter().enumerate() {
            let o = run_one(preset, seconds, warmup);
            match outcomes.get_mut(i) {
                Some(acc) => acc.merge(o),
                None => outcomes.push(o),
            }
        }
    }
    println!(
        "{:<7} {:>10} {:>10} {:>8} {:>22} {:>22}",
        "", "probe p50", "probe p99", "samples", "cheap share thread 15", "cheap share thread 0"
    );
    let mut p99s = Vec::new();
    for o in &mut outcomes {
        let (p50, p99) = (o.quantile(0.5), o.quantile(0.99));
        p99s.push(p99);
        println!(
            "{:<7} {:>8.2}ms {:>8.2}ms {:>8} {:>21.0}% {:>21.0}%",
            o.scheduler,
            p50 * 1e3,
            p99 * 1e3,
            o.latencies.len(),
            cheap_share(o.high) * 100.0,
            cheap_share(o.low) * 100.0
        );
    }
    println!(
        "2DFQᴱ p99 speedup for the probe: {:.2}× over WFQᴱ, {:.2}× over WF²Qᴱ",
        p99s[0] / p99s[2],
        p99s[1] / p99s[2]
    );
}
