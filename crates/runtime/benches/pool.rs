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
//!
//! ## The floor: lower-bound pools in the same loop
//!
//! To split FairPool's gap to crossbeam into "the price of any pool that makes 2DFQᴱ's
//! decisions" and "FairPool's own features", the loop also runs a ladder of minimal pools,
//! each a few dozen lines below ([`LockedPool`]), on the same batches of the same boxed
//! closures with the same counter-based batch end as the crossbeam baseline, alternated in
//! the same rounds (after the FairPool presets; `POOL_FLOOR=0` leaves them out,
//! `POOL_FLOOR='locked FIFO,locked 2dfqe'` runs only those):
//!
//! * `locked FIFO`: the textbook pool, `Mutex<VecDeque<Job>>` + `Condvar`, n workers. Its gap
//!   to crossbeam is the price of one lock-protected shared queue that the submitting thread
//!   and every worker take once per task. (A submit wakes a worker only while more are idle
//!   than already woken, FairPool's rule: an unconditional `notify_one` would add a futex
//!   system call per task and measure that instead.)
//! * `locked fifo seam`: the same pool around fairlane-core's `fifo` preset behind the seam
//!   (a `BoxedScheduler` whose payloads are keys into a slab of jobs, as in FairPool), tasks
//!   not charged (`complete` reports 0). Its gap to `locked FIFO` is the seam and the slab.
//! * `locked fifo metered`: the same, each task charged by FairPool's thread-CPU meter rules
//!   (`meter.rs`, crate-private, so its arithmetic is copied into [`Meter`]): one monotonic
//!   clock reading per task boundary, which also gives the scheduler's `now`, and the thread
//!   CPU clock (a system call) only for a task of ≥ 20 µs or once per 250 µs; the submitter
//!   reads the monotonic clock too. Its gap to `locked fifo seam` is the charging.
//! * `locked 2dfqe`: the same around 2DFQᴱ built exactly as FairPool's `2dfqe` preset builds
//!   it (`Config::for_executor("2dfqe", workers, 1 ms, true)`, `build::<u64>()`: same
//!   scheduler type, parameters and estimator; time and cost in nanoseconds), with FairPool's
//!   per-worker calls: `dequeue(w)` when idle, and `complete` + `dequeue(w)` in one critical
//!   section when a task returns; charged as the rung before. No handles, no stats, no caps,
//!   no cancel, no panic catching, no refresh thread. Its gap to `locked fifo metered` is
//!   2DFQᴱ's decisions; FairPool `2dfqe`'s gap to it is FairPool's own features.
//! * `locked 2dfqe stats`: `locked 2dfqe` plus FairPool's per-tenant statistics and caps, as
//!   FairPool keeps them under its lock (`stats.rs` is crate-private, so [`TenantTable`]
//!   redoes it on the public `TenantMetrics` and `Histogram`): at submission the two queue
//!   limits and a hash lookup of the tenant's index, `queued += 1`; at dispatch the wait
//!   histogram and counters; at completion the cost histogram and counters. Its gap to
//!   `locked 2dfqe` is the statistics; FairPool `2dfqe`'s gap to it is the rest of FairPool
//!   (task handles and their result cells, panic catching, `wait_idle`, the running-task
//!   table and the refresh thread).
//! * `locked 2dfqe cpu`: `locked 2dfqe`, but reading the thread CPU clock at every task boundary
//!   (what thread-CPU charging costs without the hybrid meter). Not on the ladder.
//!
//! The meter rules and the statistics here are copies of crate-private FairPool code
//! (`meter.rs`, `stats.rs`), named where they stand: when those change, change the copies too,
//! or the ladder stops describing FairPool. The slab, the tenant-id hash and the wake-up
//! accounting are FairPool's own (`src/slab.rs`, `src/id_hash.rs` and `src/wake.rs`, compiled
//! into the bench by `#[path]`).
//!
//! After the rows the loop prints the ladder: each rung's CPU per task and its increase over
//! the rung before it (crossbeam → `locked FIFO` → `locked fifo seam` → `locked fifo metered`
//! → `locked 2dfqe` → `locked 2dfqe stats` → FairPool `2dfqe`).
//!
//! `POOL_TASK_US=0` runs every rung with empty tasks: each pool's own cost per task.

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, BenchmarkId, Criterion, Throughput};
use fairlane_core::{BoxedScheduler, Config, Decision, Dispatch, Request, Ticket};
use fairlane_runtime::{FairPool, TenantMetrics};

// FairPool's crate-private slab, tenant-id hash and wake-up accounting, compiled from their
// own files here.
#[path = "../src/id_hash.rs"]
mod id_hash;
#[path = "../src/slab.rs"]
mod slab;
#[path = "../src/wake.rs"]
mod wake;

use id_hash::IdHasher;
use slab::Slab;
use wake::Wakeups;

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

/// The environment variable `name` parsed, or `default` when it is unset or does not parse.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The time of one `work(iters)`: the mean over `n` calls, the fastest of 7 trials.
fn fastest(n: u32, iters: u64) -> Duration {
    (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..n {
                work(iters);
            }
            t.elapsed() / n
        })
        .min()
        .unwrap()
}

/// Rounds of `work` that take about 10 µs here (fastest of several trials, so a busy moment
/// during calibration does not inflate the tasks); `POOL_TASK_US` sets another length (0:
/// empty tasks, which shows the pools' own cost per task).
fn calibrate() -> u64 {
    let us: f64 = env_or("POOL_TASK_US", 10.0);
    const PROBE: u64 = 20_000;
    let best = fastest(50, PROBE);
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

/// What the one lock of a [`LockedPool`] protects: its queue discipline.
trait Queue: Send + 'static {
    /// What a worker reports back when its task returns.
    type Token: Send + 'static;
    /// Whether the discipline uses time and charges: only then do the submitter and the
    /// workers read clocks (the textbook FIFO reads none).
    const TIMED: bool;
    /// Queue `job` of `tenant`, submitted at `now` (ns).
    fn push(&mut self, tenant: u64, job: Job, now: f64);
    /// The next job for worker `w` at `now`.
    fn pop(&mut self, w: usize, now: f64) -> Option<(Self::Token, Job)>;
    /// The job of `token` returned at `now`, having cost `cost` (ns).
    fn complete(&mut self, token: Self::Token, cost: f64, now: f64);
}

/// Rung 1: the textbook queue.
impl Queue for VecDeque<Job> {
    type Token = ();
    const TIMED: bool = false;
    fn push(&mut self, _tenant: u64, job: Job, _now: f64) {
        self.push_back(job);
    }
    fn pop(&mut self, _w: usize, _now: f64) -> Option<((), Job)> {
        self.pop_front().map(|j| ((), j))
    }
    fn complete(&mut self, _token: (), _cost: f64, _now: f64) {}
}

/// Rungs 2–5: a core scheduler behind the seam, built as FairPool builds a preset; its
/// payloads are keys into FairPool's own [`Slab`] of queued jobs (like FairPool's `Job`, an
/// entry carries its submission time and its tenant's stats index).
struct Seam {
    sched: BoxedScheduler,
    jobs: Slab<Queued>,
    /// The `stats` rung's per-tenant counters and histograms.
    stats: Option<TenantTable>,
}

struct Queued {
    job: Job,
    submitted: f64,
    stat: u32,
}

/// FairPool's default queue limits (`PoolBuilder`): checked, as FairPool checks them.
const MAX_QUEUED: usize = 100_000;
const MAX_QUEUED_PER_TENANT: usize = 10_000;

/// FairPool's per-tenant statistics (`stats.rs`, crate-private) on its public parts: a dense
/// table of [`TenantMetrics`] (the real [`Histogram`](fairlane_runtime::Histogram)s) reached
/// by a hash lookup at submission and by index afterwards, updated as `TenantStats`'
/// `enqueued`, `started` and `finished` update it, under the pool's lock.
#[derive(Default)]
struct TenantTable {
    index: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    tenants: Vec<TenantMetrics>,
}

impl Seam {
    fn new(preset: &str, stats: bool) -> Self {
        // FairPool's default initial estimate (1 ms in ns), as `PoolBuilder::build` passes it.
        let config = Config::for_executor(preset, WORKERS, 1e6, true).unwrap();
        Seam {
            sched: config.build::<u64>().unwrap(),
            jobs: Slab::default(),
            stats: stats.then(TenantTable::default),
        }
    }
}

impl Queue for Seam {
    /// The ticket and the tenant's stats index.
    type Token = (Ticket, u32);
    const TIMED: bool = true;
    fn push(&mut self, tenant: u64, job: Job, now: f64) {
        // FairPool's submit: the caps, then the tenant's index (looked up once, by hash).
        let stat = match &mut self.stats {
            None => 0,
            Some(t) => {
                assert!(self.sched.queued() < MAX_QUEUED, "queue full");
                let i = match t.index.get(&tenant) {
                    Some(&i) => i,
                    None => {
                        t.tenants.push(TenantMetrics {
                            tenant,
                            ..TenantMetrics::default()
                        });
                        t.index.insert(tenant, t.tenants.len() as u32 - 1);
                        t.tenants.len() as u32 - 1
                    }
                };
                let m = &mut t.tenants[i as usize];
                assert!(m.queued < MAX_QUEUED_PER_TENANT, "tenant queue full");
                m.queued += 1;
                i
            }
        };
        let entry = Queued {
            job,
            submitted: now,
            stat,
        };
        let key = self.jobs.insert(entry);
        self.sched
            .enqueue(Request::new(tenant, 0u32, key), now)
            .unwrap();
    }
    fn pop(&mut self, w: usize, now: f64) -> Option<((Ticket, u32), Job)> {
        match self.sched.dequeue(w, now).unwrap() {
            Decision::Run(Dispatch {
                ticket, request, ..
            }) => {
                let q = self.jobs.take(request.payload).unwrap();
                if let Some(t) = &mut self.stats {
                    let m = &mut t.tenants[q.stat as usize];
                    m.queued = m.queued.saturating_sub(1);
                    m.running += 1;
                    m.wait.record((now - q.submitted).max(0.0) as u64);
                }
                Some(((ticket, q.stat), q.job))
            }
            Decision::Empty => None,
            // Only LDF reservations ask to retry; the presets here never do.
            Decision::RetryAt(t) => panic!("{} asked to retry at {t}", self.sched.name()),
        }
    }
    fn complete(&mut self, (ticket, stat): (Ticket, u32), cost: f64, now: f64) {
        self.sched.complete(ticket, cost, now).unwrap();
        if let Some(t) = &mut self.stats {
            let m = &mut t.tenants[stat as usize];
            m.running = m.running.saturating_sub(1);
            m.completed += 1;
            m.cost_total += cost;
            m.cost.record_f64(cost);
        }
    }
}

/// How a [`LockedPool`]'s workers charge each task.
#[derive(Clone, Copy, PartialEq)]
enum Charge {
    /// Not at all (the FIFO rung).
    None,
    /// FairPool's hybrid meter: wall time for short tasks, the thread CPU clock when needed.
    Hybrid,
    /// The thread CPU clock at every task boundary.
    CpuEach,
}

/// The calling thread's CPU time (ns) through `CLOCK_THREAD_CPUTIME_ID`, as FairPool's worker
/// reads its own clock (`cpu::this_thread_cpu_ns`, crate-private).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "no thread CPU clock");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A worker's meter: `meter.rs`'s `WorkerMeter`/`HybridCpu` arithmetic (same `SHORT` and
/// `PERIOD`), copied because the crate keeps it private.
struct Meter {
    charge: Charge,
    epoch: Instant,
    last_wall: u64,
    anchor_wall: u64,
    anchor_cpu: u64,
    charged: u64,
}

impl Meter {
    const SHORT: u64 = 20_000;
    const PERIOD: u64 = 250_000;

    fn new(charge: Charge, epoch: Instant) -> Self {
        let cpu = if charge == Charge::None {
            0
        } else {
            thread_cpu_ns()
        };
        let wall = epoch.elapsed().as_nanos() as u64;
        Meter {
            charge,
            epoch,
            last_wall: wall,
            anchor_wall: wall,
            anchor_cpu: cpu,
            charged: 0,
        }
    }

    /// A task starts after the worker idled (the idle time is nobody's).
    fn resume(&mut self) {
        if self.charge == Charge::Hybrid {
            self.last_wall = self.epoch.elapsed().as_nanos() as u64;
        }
    }

    /// A task returned: its charge and the scheduler's `now` (both ns; one monotonic clock
    /// reading gives both, as in FairPool's worker).
    fn boundary(&mut self) -> (f64, f64) {
        if self.charge == Charge::None {
            return (0.0, 0.0);
        }
        let wall = Instant::now()
            .saturating_duration_since(self.epoch)
            .as_nanos() as u64;
        let d = wall.saturating_sub(self.last_wall);
        self.last_wall = wall;
        if self.charge == Charge::CpuEach {
            let cpu = thread_cpu_ns();
            let used = cpu.saturating_sub(self.anchor_cpu);
            self.anchor_cpu = cpu;
            return (used as f64, wall as f64);
        }
        if d < Self::SHORT && wall.saturating_sub(self.anchor_wall) < Self::PERIOD {
            self.charged += d;
            return (d as f64, wall as f64);
        }
        let cpu = thread_cpu_ns();
        let used = cpu.saturating_sub(self.anchor_cpu);
        let charge = used.saturating_sub(self.charged);
        self.charged = self.charged.saturating_sub(used);
        self.anchor_cpu = cpu;
        self.anchor_wall = wall;
        (charge as f64, wall as f64)
    }
}

/// The lock's contents: the queue and the wake-up bookkeeping.
struct LockedState<Q> {
    q: Q,
    /// Workers waiting for work, and how many of them a submit already woke.
    wake: Wakeups,
    closed: bool,
}

struct LockedShared<Q> {
    state: Mutex<LockedState<Q>>,
    work: Condvar,
    /// The scheduler's time origin (FairPool's `SystemClock` epoch).
    epoch: Instant,
}

impl<Q> LockedShared<Q> {
    fn lock(&self) -> MutexGuard<'_, LockedState<Q>> {
        self.state.lock().unwrap()
    }
    /// Nanoseconds since the epoch, converted as FairPool's `time::nanos_f64` does.
    fn now(&self) -> f64 {
        let d = self.epoch.elapsed();
        d.as_secs() as f64 * 1e9 + f64::from(d.subsec_nanos())
    }
}

/// A minimal pool: one `Mutex` around one queue discipline, one `Condvar`, n workers.
/// Nothing else: the floor under any pool that makes `Q`'s decisions.
struct LockedPool<Q: Queue> {
    shared: Arc<LockedShared<Q>>,
    threads: Vec<JoinHandle<()>>,
}

impl<Q: Queue> LockedPool<Q> {
    fn new(n: usize, q: Q, charge: Charge) -> Self {
        let shared = Arc::new(LockedShared {
            state: Mutex::new(LockedState {
                q,
                wake: Wakeups::default(),
                closed: false,
            }),
            work: Condvar::new(),
            epoch: Instant::now(),
        });
        let threads = (0..n)
            .map(|w| {
                let s = shared.clone();
                std::thread::spawn(move || locked_worker(&s, w, charge))
            })
            .collect();
        LockedPool { shared, threads }
    }

    /// Queue a job; wake a worker only if one idles that no earlier submit woke.
    fn submit(&self, tenant: u64, job: Job) {
        let sh = &*self.shared;
        // Read before the lock, as FairPool's submit does.
        let now = if Q::TIMED { sh.now() } else { 0.0 };
        let mut st = sh.lock();
        st.q.push(tenant, job, now);
        let wake = st.wake.submit();
        drop(st);
        if wake {
            sh.work.notify_one();
        }
    }

    /// The crossbeam baseline's batch (same closures, same counter), tenants round-robin.
    fn batch(&self, iters: u64) {
        let left = Arc::new(AtomicUsize::new(TASKS));
        let done = Arc::new((Mutex::new(false), Condvar::new()));
        for i in 0..TASKS {
            let (left, done) = (left.clone(), done.clone());
            self.submit(
                (i % TENANTS) as u64,
                Box::new(move || {
                    work(iters);
                    if left.fetch_sub(1, Ordering::AcqRel) == 1 {
                        *done.0.lock().unwrap() = true;
                        done.1.notify_all();
                    }
                }),
            );
        }
        let mut d = done.0.lock().unwrap();
        while !*d {
            d = done.1.wait(d).unwrap();
        }
    }
}

impl<Q: Queue> Drop for LockedPool<Q> {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
        for t in self.threads.drain(..) {
            t.join().unwrap();
        }
    }
}

/// FairPool's worker loop without its features: take a job when idle; when it returns,
/// settle it and take the next in one critical section.
fn locked_worker<Q: Queue>(sh: &LockedShared<Q>, w: usize, charge: Charge) {
    let mut meter = Meter::new(charge, sh.epoch);
    let mut next: Option<(Q::Token, Job)> = None;
    loop {
        let (token, job) = match next.take() {
            Some(t) => t,
            None => {
                let mut st = sh.lock();
                loop {
                    let now = if Q::TIMED { sh.now() } else { 0.0 };
                    if let Some(t) = st.q.pop(w, now) {
                        meter.resume();
                        break t;
                    }
                    if st.closed {
                        return;
                    }
                    st.wake.sleep();
                    st = sh.work.wait(st).unwrap();
                    st.wake.woke();
                }
            }
        };
        job();
        let (cost, now) = meter.boundary();
        let mut st = sh.lock();
        st.q.complete(token, cost, now);
        next = st.q.pop(w, now);
    }
}

/// The ladder's rungs, in order (see the header).
enum Rung {
    Fifo(LockedPool<VecDeque<Job>>),
    Seam(LockedPool<Seam>),
}

impl Rung {
    fn batch(&self, iters: u64) {
        match self {
            Rung::Fifo(p) => p.batch(iters),
            Rung::Seam(p) => p.batch(iters),
        }
    }
}

fn floor_rungs() -> Vec<(&'static str, Rung)> {
    let seam = |preset, charge, stats| {
        Rung::Seam(LockedPool::new(WORKERS, Seam::new(preset, stats), charge))
    };
    vec![
        (
            "locked FIFO",
            Rung::Fifo(LockedPool::new(WORKERS, VecDeque::new(), Charge::None)),
        ),
        ("locked fifo seam", seam("fifo", Charge::None, false)),
        ("locked fifo metered", seam("fifo", Charge::Hybrid, false)),
        ("locked 2dfqe", seam("2dfqe", Charge::Hybrid, false)),
        ("locked 2dfqe stats", seam("2dfqe", Charge::Hybrid, true)),
        ("locked 2dfqe cpu", seam("2dfqe", Charge::CpuEach, false)),
    ]
}

/// A batch of `TASKS` tasks of `iters` rounds, submitted round-robin by the tenants.
fn submit_batch(pool: &FairPool, iters: u64) -> Vec<fairlane_runtime::TaskHandle<u64>> {
    (0..TASKS)
        .map(|i| {
            pool.submit((i % TENANTS) as u64, 0u32, move || work(iters))
                .unwrap()
        })
        .collect()
}

/// Submit the batch, wait until the pool is idle (one wake-up, like the baseline's counter),
/// then collect every result from its handle (all ready: no blocking).
fn fair_batch(pool: &FairPool, iters: u64) {
    let handles = submit_batch(pool, iters);
    pool.wait_idle();
    for h in handles {
        black_box(h.join().unwrap());
    }
}

/// The same batch, blocking on each handle in turn: the bench thread is woken for most
/// tasks, which costs the workers CPU on a 2-core machine.
fn fair_batch_join_each(pool: &FairPool, iters: u64) {
    let handles = submit_batch(pool, iters);
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
    let task = fastest(100, iters);
    let base = CrossbeamPool::new(WORKERS);
    let rounds: usize = env_or("POOL_ROUNDS", ROUNDS);
    let presets: Vec<String> = match std::env::var("POOL_PRESETS") {
        Ok(list) => list.split(',').map(|p| p.trim().to_string()).collect(),
        Err(_) => PRESETS.iter().map(|p| p.to_string()).collect(),
    };
    // An empty `POOL_PRESETS=` runs no FairPool (the floor rungs alone, e.g. for a profile).
    let pools: Vec<(&str, FairPool)> = presets
        .iter()
        .filter(|p| !p.is_empty())
        .map(|p| (p.as_str(), fair_pool(p)))
        .collect();
    // `POOL_FLOOR`: unset or `1` every rung, `0` none, else a comma-separated list of rungs.
    let rungs: Vec<(&str, Rung)> = match std::env::var("POOL_FLOOR") {
        Ok(v) if v == "0" => Vec::new(),
        Ok(v) if v != "1" => {
            let keep: Vec<&str> = v.split(',').map(str::trim).collect();
            floor_rungs()
                .into_iter()
                .filter(|(name, _)| keep.contains(name))
                .collect()
        }
        _ => floor_rungs(),
    };
    let mut t_rung: Vec<Vec<Duration>> = vec![Vec::new(); rungs.len()];
    let mut c_rung: Vec<Vec<Duration>> = vec![Vec::new(); rungs.len()];
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
    for (_, r) in &rungs {
        r.batch(iters);
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
        for (i, (_, r)) in rungs.iter().enumerate() {
            let (t, c) = (Instant::now(), process_cpu());
            r.batch(iters);
            t_rung[i].push(t.elapsed());
            c_rung[i].push(process_cpu().saturating_sub(c));
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
    // One row per pool: throughput, its share of crossbeam's, CPU per task and its excess.
    let row = |label: &str, t: &[Duration], c: &[Duration]| {
        let f = median(t.to_vec());
        // Each round's own ratio (its crossbeam batch against this pool's batch of the same
        // round): steadier than the ratio of medians when the load drifts.
        let mut ratios: Vec<f64> = t_base
            .iter()
            .zip(t)
            .map(|(b, f)| b.as_secs_f64() / f.as_secs_f64())
            .collect();
        ratios.sort_by(f64::total_cmp);
        let cf = median(c.to_vec());
        println!(
            "  {label:<22}{:>8.0} tasks/s   ({:.2} µs/task)   {:.1} % of crossbeam   (median round: {:.1} %)   CPU {:.2} µs/task ({:+.2})",
            TASKS as f64 / f.as_secs_f64(),
            per_task(f),
            100.0 * b.as_secs_f64() / f.as_secs_f64(),
            100.0 * ratios[ratios.len() / 2],
            per_task(cf),
            per_task(cf) - per_task(cb)
        );
        per_task(cf)
    };
    let mut cpu_of: Vec<(String, f64)> = vec![("crossbeam".to_string(), per_task(cb))];
    for (i, (name, _)) in pools.iter().enumerate() {
        let label = format!("FairPool {name:<6}");
        let cpu = row(&label, &t_fair[i], &c_fair[i]);
        cpu_of.push((format!("FairPool {name}"), cpu));
    }
    for (i, (name, _)) in rungs.iter().enumerate() {
        let cpu = row(name, &t_rung[i], &c_rung[i]);
        cpu_of.push((name.to_string(), cpu));
    }
    // The ladder: each rung adds one thing to the one below it (see the header).
    let ladder = [
        "crossbeam",
        "locked FIFO",
        "locked fifo seam",
        "locked fifo metered",
        "locked 2dfqe",
        "locked 2dfqe stats",
        "FairPool 2dfqe",
    ];
    let steps: Vec<(&str, f64)> = ladder
        .iter()
        .filter_map(|l| cpu_of.iter().find(|(n, _)| n == l).map(|(_, c)| (*l, *c)))
        .collect();
    if steps.len() > 2 {
        println!("  ladder, CPU µs/task (each step's increase over the rung before it):");
        let mut below = steps[0].1;
        for (name, cpu) in steps {
            println!("    {name:<20}{cpu:>6.2}   ({:+.2})", cpu - below);
            below = cpu;
        }
    }
}

criterion_group!(benches, throughput);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    interleaved();
}
