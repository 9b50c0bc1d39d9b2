//! `fairlane demo pool`: tenants of different kinds on a real [`FairPool`], under several
//! schedulers, with per-tenant throughput and latency side by side.
//!
//! The work is real: every request hashes a buffer (std's SipHash) — a few KiB for small
//! requests, MiBs for large ones — on the pool's worker threads, and the scheduler is charged
//! the thread CPU time each request used. The default tenants:
//!
//! * `small` — predictable: 4 KiB requests arriving at 400/s (open loop, Poisson);
//! * `large` — saturates the pool: 4 MiB requests, 32 always outstanding (closed loop);
//! * `mixed` — unpredictable: 4 KiB requests with 4 MiB ones mixed in (10 %), 32 outstanding.
//!
//! Latency is from submission to the end of the request; throughput counts requests finished
//! in the measurement window (after a warm-up that lets the estimators learn).
//!
//! ```no_run
//! use fairlane_demo::pool::{run, DemoOptions};
//! let report = run(&DemoOptions { quick: true, ..DemoOptions::default() }).unwrap();
//! println!("{}", report.to_table());
//! ```

use std::collections::hash_map::DefaultHasher;
use std::fmt::{self, Write as _};
use std::hash::Hasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairlane_runtime::{BuildError, CostClock, FairPool, Histogram};
use serde::Serialize;

/// The schedulers the demo compares by default (core preset names).
pub const DEFAULT_SCHEDULERS: [&str; 4] = ["fifo", "wfqe", "wf2qe", "2dfqe"];

/// What load a demo tenant offers.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TenantKind {
    /// Predictable small requests arriving on their own schedule (open loop, Poisson).
    Small {
        /// Bytes hashed per request.
        bytes: usize,
        /// Mean arrivals per second.
        rate: f64,
    },
    /// Large requests, `outstanding` always submitted and not finished (closed loop).
    Large {
        /// Bytes hashed per request.
        bytes: usize,
        /// Requests kept in flight.
        outstanding: usize,
    },
    /// Unpredictable: each request is large with probability `large_fraction`, else small;
    /// `outstanding` always in flight (closed loop).
    Mixed {
        /// Bytes hashed by a small request.
        small_bytes: usize,
        /// Bytes hashed by a large request.
        large_bytes: usize,
        /// Probability that a request is large, in [0, 1].
        large_fraction: f64,
        /// Requests kept in flight.
        outstanding: usize,
    },
}

impl TenantKind {
    fn describe(&self) -> String {
        match self {
            TenantKind::Small { bytes, rate } => format!("{} @ {rate}/s", size(*bytes)),
            TenantKind::Large { bytes, outstanding } => {
                format!("{} ×{outstanding} in flight", size(*bytes))
            }
            TenantKind::Mixed {
                small_bytes,
                large_bytes,
                large_fraction,
                outstanding,
            } => format!(
                "{}/{} ({:.0}% large) ×{outstanding}",
                size(*small_bytes),
                size(*large_bytes),
                large_fraction * 100.0
            ),
        }
    }
}

fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

/// One tenant of the demo.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemoTenant {
    /// Its name in the report.
    pub name: String,
    /// Its weight φ.
    pub weight: f64,
    /// Its load.
    pub kind: TenantKind,
}

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct DemoOptions {
    /// Worker threads of the pool (default 2).
    pub workers: usize,
    /// Measurement window per scheduler (default 6 s).
    pub duration: Duration,
    /// Warm-up per scheduler before the window, not measured (default 1 s).
    pub warmup: Duration,
    /// Use [`QUICK_DURATION`] and [`QUICK_WARMUP`] instead of `duration` and `warmup` (about
    /// 10 s in all for four schedulers).
    pub quick: bool,
    /// Core presets to compare, in order (default [`DEFAULT_SCHEDULERS`]).
    pub schedulers: Vec<String>,
    /// The tenants (default: `small`, `large`, `mixed` as in the module docs).
    pub tenants: Vec<DemoTenant>,
    /// Seed of the arrival and request-size randomness.
    pub seed: u64,
}

/// Measurement window in quick mode.
pub const QUICK_DURATION: Duration = Duration::from_millis(1500);
/// Warm-up in quick mode.
pub const QUICK_WARMUP: Duration = Duration::from_millis(500);

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            workers: 2,
            duration: Duration::from_secs(6),
            warmup: Duration::from_secs(1),
            quick: false,
            schedulers: DEFAULT_SCHEDULERS.iter().map(|s| s.to_string()).collect(),
            tenants: default_tenants(),
            seed: 7,
        }
    }
}

/// The default tenants: `small`, `large`, `mixed`.
pub fn default_tenants() -> Vec<DemoTenant> {
    vec![
        DemoTenant {
            name: "small".into(),
            weight: 1.0,
            kind: TenantKind::Small {
                bytes: 4 << 10,
                rate: 400.0,
            },
        },
        DemoTenant {
            name: "large".into(),
            weight: 1.0,
            kind: TenantKind::Large {
                bytes: 4 << 20,
                outstanding: 32,
            },
        },
        DemoTenant {
            name: "mixed".into(),
            weight: 1.0,
            kind: TenantKind::Mixed {
                small_bytes: 4 << 10,
                large_bytes: 4 << 20,
                large_fraction: 0.1,
                outstanding: 32,
            },
        },
    ]
}

/// Why the demo could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum DemoError {
    /// An option is out of range.
    InvalidOption(String),
    /// The pool could not be built (an unknown scheduler name, …).
    Pool(BuildError),
    /// A load-generator thread could not be started.
    Spawn(std::io::Error),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::InvalidOption(s) => write!(f, "invalid demo option: {s}"),
            DemoError::Pool(e) => write!(f, "could not build the pool: {e}"),
            DemoError::Spawn(e) => write!(f, "could not start a load generator: {e}"),
        }
    }
}

impl std::error::Error for DemoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DemoError::InvalidOption(_) => None,
            DemoError::Pool(e) => Some(e),
            DemoError::Spawn(e) => Some(e),
        }
    }
}

/// One tenant's figures under one scheduler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TenantResult {
    /// The tenant's name.
    pub name: String,
    /// Its load, described.
    pub kind: String,
    /// Its weight.
    pub weight: f64,
    /// Requests submitted in the window.
    pub submitted: u64,
    /// Requests finished in the window.
    pub completed: u64,
    /// Requests refused by the pool's queue limits.
    pub rejected: u64,
    /// Requests finished per second of the window.
    pub throughput_rps: f64,
    /// MiB hashed per second of the window.
    pub mib_per_s: f64,
    /// Share of the pool's CPU time used by the tenant's requests finished in the window.
    pub cpu_share: f64,
    /// Median latency (submission to end), ms, of requests submitted in the window.
    pub p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub p99_ms: f64,
    /// Largest latency, ms.
    pub max_ms: f64,
}

/// Every tenant's figures under one scheduler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SchedulerRun {
    /// The preset name.
    pub scheduler: String,
    /// One entry per tenant, in the options' order.
    pub tenants: Vec<TenantResult>,
}

/// The demo's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemoReport {
    /// Worker threads.
    pub workers: usize,
    /// Measurement window per scheduler, seconds.
    pub duration_s: f64,
    /// Warm-up per scheduler, seconds.
    pub warmup_s: f64,
    /// How costs were measured.
    pub cost_clock: CostClock,
    /// The tenants as configured.
    pub tenants: Vec<DemoTenant>,
    /// One entry per scheduler, in the options' order.
    pub runs: Vec<SchedulerRun>,
    /// p99 latency of the first `Small` tenant under FIFO divided by its p99 under 2DFQᴱ
    /// (when both ran).
    pub small_p99_fifo_over_2dfqe: Option<f64>,
}

struct Rec {
    window: (Instant, Instant),
    inner: Mutex<RecInner>,
    rejected: AtomicU64,
}

#[derive(Default)]
struct RecInner {
    latency: Histogram,
    submitted: u64,
    completed: u64,
    bytes: u64,
    cpu_ns: u64,
}

impl Rec {
    fn in_window(&self, t: Instant) -> bool {
        t >= self.window.0 && t < self.window.1
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, RecInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Deterministic xorshift64* randomness for arrivals and request sizes.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The request body: hash `bytes` of `buf`, salted so nothing can be cached.
fn hash_work(buf: &[u8], salt: u64) -> u64 {
    let mut h = DefaultHasher::new();
    h.write_u64(salt);
    h.write(buf);
    h.finish()
}

fn validate(o: &DemoOptions) -> Result<(), DemoError> {
    let bad = |s: String| Err(DemoError::InvalidOption(s));
    if o.workers == 0 {
        return bad("workers must be at least 1".into());
    }
    if o.schedulers.is_empty() {
        return bad("schedulers must name at least one preset".into());
    }
    if o.tenants.is_empty() {
        return bad("tenants must not be empty".into());
    }
    if !o.quick && o.duration.is_zero() {
        return bad("duration must be > 0".into());
    }
    for t in &o.tenants {
        if !(t.weight.is_finite() && t.weight > 0.0) {
            return bad(format!("tenant {}: weight must be > 0", t.name));
        }
        let ok = match &t.kind {
            TenantKind::Small { bytes, rate } => {
                *bytes > 0 && *bytes <= 1 << 30 && rate.is_finite() && *rate > 0.0
            }
            TenantKind::Large { bytes, outstanding } => {
                *bytes > 0 && *bytes <= 1 << 30 && *outstanding > 0
            }
            TenantKind::Mixed {
                small_bytes,
                large_bytes,
                large_fraction,
                outstanding,
            } => {
                *small_bytes > 0
                    && *large_bytes > 0
                    && *small_bytes <= 1 << 30
                    && *large_bytes <= 1 << 30
                    && (0.0..=1.0).contains(large_fraction)
                    && *outstanding > 0
            }
        };
        if !ok {
            return bad(format!(
                "tenant {}: sizes must be 1 B … 1 GiB, rates and outstanding > 0, \
                 large_fraction in [0, 1]",
                t.name
            ));
        }
    }
    Ok(())
}

/// Run the demo: one fresh [`FairPool`] per scheduler, the same tenants and seed each time.
pub fn run(options: &DemoOptions) -> Result<DemoReport, DemoError> {
    validate(options)?;
    let (duration, warmup) = if options.quick {
        (QUICK_DURATION, QUICK_WARMUP)
    } else {
        (options.duration, options.warmup)
    };
    // One buffer, as large as the largest request, shared by every request.
    let largest = options
        .tenants
        .iter()
        .map(|t| match &t.kind {
            TenantKind::Small { bytes, .. } | TenantKind::Large { bytes, .. } => *bytes,
            TenantKind::Mixed {
                small_bytes,
                large_bytes,
                ..
            } => (*small_bytes).max(*large_bytes),
        })
        .max()
        .unwrap_or(1);
    let mut rng = Rng::new(options.seed);
    let buf: Arc<Vec<u8>> = Arc::new((0..largest).map(|_| rng.next() as u8).collect());
    let mut runs = Vec::new();
    let mut cost_clock = CostClock::best();
    for name in &options.schedulers {
        let pool = FairPool::builder()
            .workers(options.workers)
            .preset(name)
            .max_queued_per_tenant(100_000)
            .max_queued(1_000_000)
            .build()
            .map_err(DemoError::Pool)?;
        cost_clock = pool.cost_clock();
        runs.push(run_one(&pool, options, &buf, duration, warmup)?);
    }
    let small = options
        .tenants
        .iter()
        .position(|t| matches!(t.kind, TenantKind::Small { .. }));
    let p99 = |sched: &str| -> Option<f64> {
        let i = small?;
        runs.iter()
            .find(|r| r.scheduler == sched)
            .map(|r| r.tenants[i].p99_ms)
    };
    let ratio = match (p99("fifo"), p99("2dfqe")) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    };
    Ok(DemoReport {
        workers: options.workers,
        duration_s: duration.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        cost_clock,
        tenants: options.tenants.clone(),
        runs,
        small_p99_fifo_over_2dfqe: ratio,
    })
}

/// Submit one request of `bytes` for tenant `t`; on completion, record it and (closed loop)
/// signal `done`.
#[allow(clippy::too_many_arguments)]
fn submit(
    pool: &FairPool,
    t: u64,
    class: u32,
    bytes: usize,
    salt: u64,
    buf: &Arc<Vec<u8>>,
    rec: &Arc<Rec>,
    done: Option<mpsc::Sender<()>>,
) {
    let submitted = Instant::now();
    let (buf, rec2) = (buf.clone(), rec.clone());
    let task = move || {
        let cpu0 = fairlane_runtime::cpu::thread_cpu_time();
        std::hint::black_box(hash_work(&buf[..bytes], salt));
        let cpu = match (cpu0, fairlane_runtime::cpu::thread_cpu_time()) {
            (Some(a), Some(b)) => b.saturating_sub(a).as_nanos() as u64,
            _ => 0,
        };
        let end = Instant::now();
        {
            let mut r = rec2.lock();
            if rec2.in_window(submitted) {
                r.latency
                    .record(end.duration_since(submitted).as_nanos() as u64);
            }
            if rec2.in_window(end) {
                r.completed += 1;
                r.bytes += bytes as u64;
                r.cpu_ns += cpu;
            }
        }
        if let Some(d) = done {
            let _ = d.send(());
        }
    };
    match pool.submit(t, class, task) {
        Ok(_) => {
            if rec.in_window(submitted) {
                rec.lock().submitted += 1;
            }
        }
        Err(_) => {
            rec.rejected.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn run_one(
    pool: &FairPool,
    options: &DemoOptions,
    buf: &Arc<Vec<u8>>,
    duration: Duration,
    warmup: Duration,
) -> Result<SchedulerRun, DemoError> {
    let start = Instant::now();
    let window = (start + warmup, start + warmup + duration);
    let recs: Vec<Arc<Rec>> = options
        .tenants
        .iter()
        .map(|_| {
            Arc::new(Rec {
                window,
                inner: Mutex::new(RecInner::default()),
                rejected: AtomicU64::new(0),
            })
        })
        .collect();
    for (i, t) in options.tenants.iter().enumerate() {
        pool.set_weight(i as u64, t.weight)
            .map_err(|e| DemoError::InvalidOption(format!("tenant {}: {e}", t.name)))?;
    }
    std::thread::scope(|scope| -> Result<(), DemoError> {
        for (i, t) in options.tenants.iter().enumerate() {
            let rec = &recs[i];
            let seed = options.seed.wrapping_add(1 + i as u64);
            let kind = t.kind.clone();
            let end = window.1;
            std::thread::Builder::new()
                .name(format!("demo-load-{i}"))
                .spawn_scoped(scope, move || {
                    generate(pool, i as u64, kind, seed, buf, rec, end)
                })
                .map_err(DemoError::Spawn)?;
        }
        Ok(())
    })?;
    // Every generator has stopped: let the pool finish what they submitted, so requests
    // submitted in the window count with their real latency.
    pool.wait_idle();
    let secs = duration.as_secs_f64();
    let total_cpu: u64 = recs.iter().map(|r| r.lock().cpu_ns).sum();
    let tenants = options
        .tenants
        .iter()
        .zip(&recs)
        .map(|(t, rec)| {
            let r = rec.lock();
            let ms = |ns: u64| ns as f64 / 1e6;
            TenantResult {
                name: t.name.clone(),
                kind: t.kind.describe(),
                weight: t.weight,
                submitted: r.submitted,
                completed: r.completed,
                rejected: rec.rejected.load(Ordering::Relaxed),
                throughput_rps: r.completed as f64 / secs,
                mib_per_s: r.bytes as f64 / secs / (1 << 20) as f64,
                cpu_share: if total_cpu > 0 {
                    r.cpu_ns as f64 / total_cpu as f64
                } else {
                    0.0
                },
                p50_ms: ms(r.latency.quantile(0.5)),
                p99_ms: ms(r.latency.quantile(0.99)),
                max_ms: ms(r.latency.max()),
            }
        })
        .collect();
    Ok(SchedulerRun {
        scheduler: pool.scheduler_name().to_string(),
        tenants,
    })
}

/// One tenant's load generator, until `end`.
fn generate(
    pool: &FairPool,
    t: u64,
    kind: TenantKind,
    seed: u64,
    buf: &Arc<Vec<u8>>,
    rec: &Arc<Rec>,
    end: Instant,
) {
    let mut rng = Rng::new(seed);
    let mut salt = seed << 32;
    match kind {
        TenantKind::Small { bytes, rate } => {
            let mut next = Instant::now();
            loop {
                // Poisson arrivals: exponential gaps with mean 1/rate.
                let gap = -(1.0 - rng.unit()).ln() / rate;
                next += Duration::from_secs_f64(gap.min(3600.0));
                if next >= end {
                    return;
                }
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                }
                salt += 1;
                submit(pool, t, 0, bytes, salt, buf, rec, None);
            }
        }
        TenantKind::Large { .. } | TenantKind::Mixed { .. } => {
            let (small, large, fraction, outstanding) = match kind {
                TenantKind::Large { bytes, outstanding } => (bytes, bytes, 1.0, outstanding),
                TenantKind::Mixed {
                    small_bytes,
                    large_bytes,
                    large_fraction,
                    outstanding,
                } => (small_bytes, large_bytes, large_fraction, outstanding),
                TenantKind::Small { .. } => return,
            };
            let (tx, rx) = mpsc::channel();
            let one = |rng: &mut Rng, salt: u64| {
                let large_one = rng.unit() < fraction;
                let (bytes, class) = if large_one { (large, 1) } else { (small, 0) };
                // One class for the mixed tenant: its callers cannot tell sizes apart up front.
                let class = if fraction < 1.0 && fraction > 0.0 {
                    0
                } else {
                    class
                };
                submit(pool, t, class, bytes, salt, buf, rec, Some(tx.clone()));
            };
            for _ in 0..outstanding {
                salt += 1;
                one(&mut rng, salt);
            }
            loop {
                let now = Instant::now();
                if now >= end {
                    return;
                }
                match rx.recv_timeout(end - now) {
                    Ok(()) => {
                        salt += 1;
                        one(&mut rng, salt);
                    }
                    Err(_) => return,
                }
            }
        }
    }
}

impl DemoReport {
    /// The report as two side-by-side tables (throughput, latency) and the headline ratio.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let clock = match self.cost_clock {
            CostClock::ThreadCpu => "thread CPU time",
            CostClock::Wall => "wall time",
        };
        let _ = writeln!(
            s,
            "FairPool demo: {} workers, {:.1} s measured per scheduler after {:.1} s warm-up; cost = {clock}",
            self.workers, self.duration_s, self.warmup_s
        );
        let names: Vec<&str> = self.runs.iter().map(|r| r.scheduler.as_str()).collect();
        let kind_w = self
            .tenants
            .iter()
            .map(|t| t.kind.describe().chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        let name_w = self
            .tenants
            .iter()
            .map(|t| t.name.chars().count())
            .max()
            .unwrap_or(6)
            .max(6);
        // One table: a column pair per scheduler, `cell` filling a tenant's pair in one run.
        let table =
            |s: &mut String, title: &str, cols: &str, cell: &dyn Fn(&TenantResult) -> String| {
                let _ = writeln!(s, "\n{title}");
                let _ = write!(s, "{:<name_w$}  {:<kind_w$}", "tenant", "load");
                for n in &names {
                    let _ = write!(s, " | {n:^19}");
                }
                let _ = writeln!(s);
                let _ = write!(s, "{:<name_w$}  {:<kind_w$}", "", "");
                for _ in &names {
                    let _ = write!(s, " | {cols}");
                }
                let _ = writeln!(s);
                for (i, t) in self.tenants.iter().enumerate() {
                    let _ = write!(s, "{:<name_w$}  {:<kind_w$}", t.name, t.kind.describe());
                    for r in &self.runs {
                        let _ = write!(s, " | {}", cell(&r.tenants[i]));
                    }
                    let _ = writeln!(s);
                }
            };
        table(&mut s, "Throughput", "  req/s      MiB/s ", &|x| {
            format!("{:>7.0}  {:>9.1} ", x.throughput_rps, x.mib_per_s)
        });
        table(
            &mut s,
            "Latency (submission to end)",
            "   p50       p99   ",
            &|x| format!("{:>9} {:>9}", ms(x.p50_ms), ms(x.p99_ms)),
        );
        table(
            &mut s,
            "CPU share of the window",
            "  share   rejected ",
            &|x| format!("{:>6.2} %  {:>8} ", x.cpu_share * 100.0, x.rejected),
        );
        if let Some(r) = self.small_p99_fifo_over_2dfqe {
            let _ = writeln!(
                s,
                "\nsmall tenant p99: fifo / 2dfqe = {r:.1}× (target ≥ 10×: {})",
                if r >= 10.0 { "met" } else { "not met" }
            );
        }
        s
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .unwrap_or_else(|e| format!("{{\"error\": \"cannot serialize the report: {e}\"}}"))
    }
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{:.0} µs", v * 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_errors() {
        let bad = [
            DemoOptions {
                workers: 0,
                ..DemoOptions::default()
            },
            DemoOptions {
                schedulers: vec![],
                ..DemoOptions::default()
            },
            DemoOptions {
                tenants: vec![],
                ..DemoOptions::default()
            },
            DemoOptions {
                tenants: vec![DemoTenant {
                    name: "x".into(),
                    weight: f64::NAN,
                    kind: TenantKind::Small {
                        bytes: 10,
                        rate: 1.0,
                    },
                }],
                ..DemoOptions::default()
            },
        ];
        for o in &bad {
            assert!(matches!(run(o), Err(DemoError::InvalidOption(_))), "{o:?}");
        }
        let unknown = DemoOptions {
            schedulers: vec!["nope".into()],
            duration: Duration::from_millis(10),
            warmup: Duration::ZERO,
            ..DemoOptions::default()
        };
        assert!(matches!(run(&unknown), Err(DemoError::Pool(_))));
    }

    #[test]
    fn a_short_run_reports_every_tenant_and_scheduler() {
        let o = DemoOptions {
            duration: Duration::from_millis(300),
            warmup: Duration::from_millis(100),
            schedulers: vec!["fifo".into(), "2dfqe".into()],
            tenants: vec![
                DemoTenant {
                    name: "s".into(),
                    weight: 1.0,
                    kind: TenantKind::Small {
                        bytes: 1024,
                        rate: 200.0,
                    },
                },
                DemoTenant {
                    name: "l".into(),
                    weight: 2.0,
                    kind: TenantKind::Large {
                        bytes: 64 << 10,
                        outstanding: 4,
                    },
                },
            ],
            ..DemoOptions::default()
        };
        let r = run(&o).unwrap();
        assert_eq!(r.runs.len(), 2);
        assert_eq!(r.runs[1].scheduler, "2dfqe");
        for run in &r.runs {
            assert_eq!(run.tenants.len(), 2);
            assert!(run.tenants[1].completed > 0, "{run:?}");
            assert!(run.tenants[0].p99_ms >= run.tenants[0].p50_ms);
        }
        assert!(r.small_p99_fifo_over_2dfqe.is_some());
        let table = r.to_table();
        assert!(
            table.contains("2dfqe") && table.contains("64 KiB"),
            "{table}"
        );
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["runs"][0]["scheduler"], "fifo");
        assert_eq!(json["tenants"][1]["kind"]["kind"], "large");
    }
}
