//! FairPool throughput against a plain FIFO pool (crossbeam channel), measured in one run.
//!
//! 2 workers run batches of 2,000 tasks of ~10 µs of CPU each, submitted round-robin by 100
//! tenants from the bench thread, which then waits for all of them. The FairPool waits on each
//! task's handle (its real API); the crossbeam pool runs boxed closures and signals the batch's
//! end with one counter (the least a pool can do).
//!
//! After criterion's groups, an interleaved A/B loop measures the ratio directly (alternating
//! batches, median of 21 each), since this 2-core VM is noisy. `POOL_ROUNDS=N` sets the
//! number of rounds, `POOL_PRESETS=2dfqe,fifo` the presets of that loop and `POOL_TASK_US`
//! the tasks' length (default 10). Beside each pool's throughput it prints the process CPU
//! time per task (all threads, the submitting one included; median batch): on this 2-core
//! machine the pools' extra CPU per task is what costs throughput when the machine is idle,
//! and it is far less disturbed than wall time when other processes load the machine.
//!
//! Run: `cargo bench -p fairlane-runtime --bench pool`; the loop alone, longer:
//! `POOL_ROUNDS=201 POOL_PRESETS=2dfqe cargo bench -p fairlane-runtime --bench pool -- nothing`

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, BenchmarkId, Criterion, Throughput};
use fairlane_runtime::FairPool;

const WORKERS: usize = 2;
const TENANTS: usize = 100;
const TASKS: usize = 2_000;
const ROUNDS: usize = 21;

/// Deterministic CPU work: `iters` rounds of xorshift.
fn work(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    black_box(x)
}

/// Rounds of `work` that take about 10 µs here (fastest of several trials, so a busy moment
/// during calibration does not inflate the tasks); `POOL_TASK_US` sets another length (0:
/// empty tasks, which shows the pools' own cost per task).
fn calibrate() -> u64 {
    let us: f64 = std::env::var("POOL_TASK_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    const PROBE: u64 = 20_000;
    let best = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..50 {
                work(PROBE);
            }
            t.elapsed() / 50
        })
        .min()
        .unwrap();
    (PROBE as f64 * us * 1_000.0 / best.as_nanos().max(1) as f64) as u64
}

type Job = Box<dyn FnOnce() + Send>;

/// The baseline: n threads taking boxed closures from one crossbeam channel.
struct CrossbeamPool {
    tx: Option<crossbeam_channel::Sender<Job>>,
    threads: Vec<JoinHandle<()>>,
}

impl CrossbeamPool {
    fn new(n: usize) -> Self {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let threads = (0..n)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    for job in rx {
                        job();
                    }
                })
            })
            .collect();
        CrossbeamPool {
            tx: Some(tx),
            threads,
        }
    }

    fn batch(&self, iters: u64) {
        let left = Arc::new(AtomicUsize::new(TASKS));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        let tx = self.tx.as_ref().unwrap();
        for _ in 0..TASKS {
            let (left, done) = (left.clone(), done.clone());
            tx.send(Box::new(move || {
                work(iters);
                if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                    *done.0.lock().unwrap() = true;
                    done.1.notify_all();
                }
            }))
            .unwrap();
        }
        let mut d = done.0.lock().unwrap();
        while !*d {
            d = done.1.wait(d).unwrap();
        }
    }
}

impl Drop for CrossbeamPool {
    fn drop(&mut self) {
        self.tx.take();
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

/// Submit the batch, wait until the pool is idle (one wake-up, like the baseline's counter),
/// then collect every result from its handle (all ready: no blocking).
fn fair_batch(pool: &FairPool, iters: u64) {
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            pool.submit((i % TENANTS) as u64, 0u32, move || work(iters))
                .unwrap()
        })
        .collect();
    pool.wait_idle();
    for h in handles {
        black_box(h.join().unwrap());
    }
}

/// The same batch, blocking on each handle in turn: the bench thread is woken for most
/// tasks, which costs the workers CPU on a 2-core machine.
fn fair_batch_join_each(pool: &FairPool, iters: u64) {
    let handles: Vec<_> = (0..TASKS)
        .map(|i| {
            pool.submit((i % TENANTS) as u64, 0u32, move || work(iters))
                .unwrap()
        })
        .collect();
    for h in handles {
        black_box(h.join().unwrap());
    }
}

fn fair_pool(preset: &str) -> FairPool {
    FairPool::builder()
        .workers(WORKERS)
        .preset(preset)
        .build()
        .unwrap()
}

const PRESETS: [&str; 4] = ["fifo", "wfqe", "wf2qe", "2dfqe"];

fn throughput(c: &mut Criterion) {
    let iters = calibrate();
    let mut g = c.benchmark_group("pool_2x10us_100_tenants");
    g.throughput(Throughput::Elements(TASKS as u64));
    g.sample_size(20);
    g.measurement_time(Duration::from_secs(4));
    let base = CrossbeamPool::new(WORKERS);
    g.bench_function("crossbeam_fifo", |b| b.iter(|| base.batch(iters)));
    drop(base);
    for p in PRESETS {
        let pool = fair_pool(p);
        g.bench_with_input(BenchmarkId::new("fairpool", p), &pool, |b, pool| {
            b.iter(|| fair_batch(pool, iters))
        });
    }
    let pool = fair_pool("2dfqe");
    g.bench_function("fairpool_join_each/2dfqe", |b| {
        b.iter(|| fair_batch_join_each(&pool, iters))
    });
    g.finish();
}

/// CPU time of the whole process (every thread), so a batch's CPU cost can be told apart from
/// the wall time other processes on the machine take from it.
fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Alternate baseline and FairPool batches; print throughput ratios of medians.
fn interleaved() {
    let iters = calibrate();
    let task = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..100 {
                work(iters);
            }
            t.elapsed() / 100
        })
        .min()
        .unwrap();
    let base = CrossbeamPool::new(WORKERS);
    let rounds: usize = std::env::var("POOL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(ROUNDS);
    let presets: Vec<String> = match std::env::var("POOL_PRESETS") {
        Ok(list) => list.split(',').map(|p| p.trim().to_string()).collect(),
        Err(_) => PRESETS.iter().map(|p| p.to_string()).collect(),
    };
    let pools: Vec<(&str, FairPool)> = presets.iter().map(|p| (p.as_str(), fair_pool(p))).collect();
    let mut t_base = Vec::new();
    let mut t_fair: Vec<Vec<Duration>> = vec![Vec::new(); pools.len()];
    // Process CPU time per batch: every thread's, the submitting bench thread included.
    let mut c_base = Vec::new();
    let mut c_fair: Vec<Vec<Duration>> = vec![Vec::new(); pools.len()];
    // Warm up every pool (estimators learn the tasks).
    base.batch(iters);
    for (_, p) in &pools {
        fair_batch(p, iters);
    }
    for _ in 0..rounds {
        let (t, c) = (Instant::now(), process_cpu());
        base.batch(iters);
        t_base.push(t.elapsed());
        c_base.push(process_cpu().saturating_sub(c));
        for (i, (_, p)) in pools.iter().enumerate() {
            let (t, c) = (Instant::now(), process_cpu());
            fair_batch(p, iters);
            t_fair[i].push(t.elapsed());
            c_fair[i].push(process_cpu().saturating_sub(c));
        }
    }
    let b = median(t_base.clone());
    let per_task = |d: Duration| d.as_secs_f64() * 1e6 / TASKS as f64;
    println!(
        "\ninterleaved, median of {rounds} batches of {TASKS} tasks ({:.1} µs each alone) on {WORKERS} workers, {TENANTS} tenants:",
        task.as_secs_f64() * 1e6
    );
    let cb = median(c_base.clone());
    println!(
        "  crossbeam FIFO pool   {:>8.0} tasks/s   ({:.2} µs/task)   CPU {:.2} µs/task",
        TASKS as f64 / b.as_secs_f64(),
        per_task(b),
        per_task(cb)
    );
    for (i, (name, _)) in pools.iter().enumerate() {
        let f = median(t_fair[i].clone());
        // Each round's own ratio (its crossbeam batch against its FairPool batch, run
        // back to back): steadier than the ratio of medians when the load drifts.
        let mut ratios: Vec<f64> = t_base
            .iter()
            .zip(&t_fair[i])
            .map(|(b, f)| b.as_secs_f64() / f.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let cf = median(c_fair[i].clone());
        println!(
            "  FairPool {name:<6}       {:>8.0} tasks/s   ({:.2} µs/task)   {:.1} % of crossbeam   (median round: {:.1} %)   CPU {:.2} µs/task (+{:.2})",
            TASKS as f64 / f.as_secs_f64(),
            per_task(f),
            100.0 * b.as_secs_f64() / f.as_secs_f64(),
            100.0 * ratios[ratios.len() / 2],
            per_task(cf),
            per_task(cf) - per_task(cb)
        );
    }
}

criterion_group!(benches, throughput);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    interleaved();
}
