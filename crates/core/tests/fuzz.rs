//! A deterministic fuzzer over random operation sequences, for every preset: the
//! core never panics or hangs on finite input.
//!
//! Each case is one scheduler and one seed. A driver behaves like an executor (it dequeues only
//! for free workers, reports cumulative usage that never goes down) but draws every number from
//! a hostile distribution: subnormals, 0, 1e-320, 1e300, `f64::MAX`, out-of-range weights,
//! NaN and negative costs, time jumps forwards and backwards. After every operation it checks
//! the scheduler against a shadow model:
//!
//! * every call answers `Ok` or the error the contract names for that input, nothing else;
//! * `queued()`/`running()` and each tenant's `queued`/`running` match the model;
//! * every enqueued request comes back exactly once, by `dequeue` or `cancel`, with its payload;
//! * `Decision::Empty` only when nothing is queued; `RetryAt` never NaN;
//! * tags, weights, charges and the virtual time are finite.
//!
//! A panic is caught per case (`catch_unwind`) and reported with the scheduler, seed and
//! operation index; a watchdog thread reports a case that makes no progress for
//! `FUZZ_STALL_SECS` (default 20) as a hang. The short run is a normal test; the long one is
//!
//! ```text
//! FUZZ_OPS=100000000 cargo test -p fairlane-core --release --test fuzz -- --ignored --nocapture
//! ```
//!
//! (`FUZZ_SEED` picks the first seed; see docs/reliability.md.)

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use fairlane_core::reserve::{
    DeficitMode, LdfOptions, Penalty, Policy, Reservation, ReserveConfig, ReserveScheduler,
    MAX_TIME,
};
use fairlane_core::{
    Config, Decision, Error, Request, Scheduler, TenantId, Ticket, VirtualClock, MAX_WEIGHT,
    MIN_WEIGHT, PRESETS,
};

/// What an operation did: a dispatch, an empty answer, a retry, a completion, a
/// cancellation, or a call refused with the error the contract names.
#[derive(Clone, Copy)]
enum Seen {
    Run,
    Empty,
    Retry,
    Completed,
    Cancelled,
    Refused,
}

/// How often each [`Seen`] happened over the whole run, and its name in the summary.
static SEEN: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];
const SEEN_NAMES: [&str; 6] = [
    "dispatches",
    "Empty",
    "RetryAt",
    "completions",
    "cancels",
    "refused inputs",
];

fn seen(what: Seen) {
    SEEN[what as usize].fetch_add(1, Ordering::Relaxed);
}

/// SplitMix64: small, deterministic, good enough to drive a fuzzer.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// A finite, non-negative value from a hostile mix: half ordinary, half extreme.
    fn hostile(&mut self) -> f64 {
        const EXTREME: [f64; 14] = [
            0.0,
            5e-324, // the smallest subnormal
            1e-320,
            f64::MIN_POSITIVE,
            1e-300,
            1e-12,
            1e-6,
            1e6,
            1e10,
            1e15,
            1e300,
            1e307,
            f64::MAX / 2.0,
            f64::MAX,
        ];
        match self.below(4) {
            0 | 1 => self.unit() * 10.0,
            2 => EXTREME[self.below(EXTREME.len() as u64) as usize],
            _ => 10f64.powf(self.unit() * 616.0 - 308.0).min(f64::MAX),
        }
    }
    /// A weight: mostly the hostile mix (in or out of the supported range), sometimes invalid.
    fn weight(&mut self) -> f64 {
        match self.below(16) {
            0 => f64::NAN,
            1 => -1.0,
            2 => f64::INFINITY,
            3..=7 => 0.1 + self.unit() * 10.0,
            _ => self.hostile(),
        }
    }
}

/// The scheduler under test.
enum Subject {
    Plain(Box<dyn Scheduler<u64> + Send>),
    Reserve(Box<ReserveScheduler<u64>>),
}

impl Subject {
    fn s(&mut self) -> &mut dyn Scheduler<u64> {
        match self {
            Subject::Plain(s) => &mut **s,
            Subject::Reserve(s) => &mut **s,
        }
    }
}

/// Every scheduler the crate builds: the presets as named and as the proxy builds them
/// (`+proxy`: `Config::for_executor`, costs unknown, EMA estimates), the clocks, and LDF with
/// its baselines.
fn subjects() -> Vec<String> {
    let mut v: Vec<String> = PRESETS.iter().map(|p| p.to_string()).collect();
    v.extend(PRESETS.iter().map(|p| format!("{p}+proxy")));
    for extra in [
        "2dfq+gps",
        "wfq+gps",
        "wf2qe+gps",
        "2dfq+last",
        "drr+q1",
        "ldf",
        "ldf-revenue",
        "ldf-blend",
        "drr-res",
        "edf-res",
        "no-res",
    ] {
        v.push(extra.to_string());
    }
    v
}

fn build(name: &str, workers: usize) -> Subject {
    let reserve = |p: Policy| {
        Subject::Reserve(Box::new(
            ReserveConfig::new(p)
                .cores(workers)
                .interval(1.0)
                .utilization_cap(95.0)
                .build()
                .unwrap(),
        ))
    };
    let opts = |deficit| LdfOptions {
        boost: true,
        deficit,
    };
    match name {
        "ldf" => reserve(Policy::ldf()),
        "ldf-revenue" => reserve(Policy::Ldf(opts(DeficitMode::Revenue))),
        "ldf-blend" => reserve(Policy::Ldf(opts(DeficitMode::Blend { alpha: 0.5 }))),
        "drr-res" => reserve(Policy::drr()),
        "edf-res" => reserve(Policy::Edf),
        "no-res" => reserve(Policy::BestEffort),
        _ => {
            let (preset, variant) = name.split_once('+').unwrap_or((name, ""));
            let mut c = if variant == "proxy" {
                Config::for_executor(preset, workers, 0.001, false).unwrap()
            } else {
                Config::preset(preset).unwrap().workers(workers)
            };
            match variant {
                "gps" => c = c.clock(VirtualClock::Gps { capacity: 2.0 }),
                "last" => c = c.clock(VirtualClock::LastDispatched),
                "q1" => c = c.drr_quantum(1.0),
                _ => {}
            }
            Subject::Plain(c.build().unwrap())
        }
    }
}

const TENANTS: u64 = 6;

#[derive(Default, Clone, Copy)]
struct Shadow {
    queued: usize,
    running: usize,
}

struct Running {
    tenant: u64,
    payload: u64,
    worker: usize,
    used: f64,
}

/// One case's model of what the scheduler must hold.
struct Model {
    queued: HashMap<Ticket, (u64, u64)>,
    queued_list: Vec<Ticket>,
    running: HashMap<Ticket, Running>,
    running_list: Vec<Ticket>,
    tenants: [Shadow; TENANTS as usize],
    busy: Vec<bool>,
    now: f64,
    next_payload: u64,
    /// Requests handed back by `dequeue` or `cancel`.
    returned: u64,
    /// Requests the scheduler accepted.
    accepted: u64,
}

fn remove_from(list: &mut Vec<Ticket>, t: Ticket) {
    let i = list.iter().position(|&x| x == t).unwrap();
    list.swap_remove(i);
}

/// A failed check: where and why.
type Fail = String;

macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            return Err(format!($($arg)*));
        }
    };
}

fn in_range(w: f64) -> bool {
    (MIN_WEIGHT..=MAX_WEIGHT).contains(&w)
}

/// One operation. Returns Err with a description when the scheduler broke its contract.
fn step(sub: &mut Subject, m: &mut Model, r: &mut Rng) -> Result<(), Fail> {
    let op = r.below(100);
    // Time moves: mostly small steps, sometimes a hostile jump, sometimes backwards.
    if r.chance(0.3) {
        m.now = match r.below(10) {
            0 => m.now - r.unit() * 5.0,
            1 => r.hostile().min(1e15),
            2 if r.chance(0.05) => r.hostile(),
            _ => m.now + r.unit() * 0.01,
        };
        if !m.now.is_finite() {
            m.now = 0.0;
        }
        if let Subject::Reserve(s) = sub {
            if m.now.abs() > MAX_TIME {
                let e = s.dequeue(0, m.now);
                ensure!(
                    matches!(e, Err(Error::InvalidTime(_))),
                    "time {} beyond MAX_TIME gave {e:?}",
                    m.now
                );
                m.now = MAX_TIME;
            }
        }
    }
    let now = m.now;
    let workers = sub.s().workers();
    match op {
        // enqueue
        0..=29 => {
            let tenant = r.below(TENANTS);
            let cost = match r.below(12) {
                0 => Some(f64::NAN),
                1 => Some(-r.hostile() - 1e-300),
                2 => Some(f64::INFINITY),
                3..=5 => None,
                _ => Some(r.hostile()),
            };
            let payload = m.next_payload;
            m.next_payload += 1;
            let mut req = Request::new(tenant, r.below(3) as u32, payload);
            req.cost = cost;
            let requires = sub.s().requires_cost();
            match sub.s().enqueue(req, now) {
                Ok(ticket) => {
                    let valid = cost.map_or(!requires, |c| c.is_finite() && c >= 0.0);
                    ensure!(valid, "enqueue accepted cost {cost:?}");
                    ensure!(
                        m.queued.insert(ticket, (tenant, payload)).is_none()
                            && !m.running.contains_key(&ticket),
                        "ticket {ticket} reused while live"
                    );
                    m.queued_list.push(ticket);
                    m.tenants[tenant as usize].queued += 1;
                    m.accepted += 1;
                }
                Err(Error::InvalidCost { value, .. }) => {
                    seen(Seen::Refused);
                    ensure!(
                        cost.is_some_and(|c| !(c.is_finite() && c >= 0.0)),
                        "enqueue refused valid cost {value}"
                    );
                }
                Err(Error::CostRequired { .. }) => {
                    seen(Seen::Refused);
                    ensure!(
                        cost.is_none() && requires,
                        "CostRequired with cost {cost:?}"
                    );
                }
                Err(e) => return Err(format!("enqueue: unexpected error {e}")),
            }
        }
        // dequeue on a free worker (an executor's contract), sometimes on a bad one
        30..=54 => {
            let worker = if r.chance(0.02) {
                workers + r.below(3) as usize
            } else {
                let free: Vec<usize> = (0..workers).filter(|&w| !m.busy[w]).collect();
                if free.is_empty() {
                    return Ok(());
                }
                free[r.below(free.len() as u64) as usize]
            };
            match sub.s().dequeue(worker, now) {
                Err(Error::InvalidWorker { .. }) if worker >= workers => {}
                Err(e) => return Err(format!("dequeue({worker}): unexpected error {e}")),
                Ok(_) if worker >= workers => {
                    return Err(format!("dequeue accepted worker {worker} of {workers}"))
                }
                Ok(Decision::Run(d)) => {
                    let Some((tenant, payload)) = m.queued.remove(&d.ticket) else {
                        return Err(format!("dequeue ran {} which is not queued", d.ticket));
                    };
                    remove_from(&mut m.queued_list, d.ticket);
                    ensure!(
                        d.request.payload == payload && d.request.tenant == TenantId(tenant),
                        "dequeue returned the wrong request for {}",
                        d.ticket
                    );
                    ensure!(
                        d.charged.is_finite() && d.charged >= 0.0,
                        "charged {} for {}",
                        d.charged,
                        d.ticket
                    );
                    m.tenants[tenant as usize].queued -= 1;
                    m.tenants[tenant as usize].running += 1;
                    m.busy[worker] = true;
                    m.returned += 1;
                    seen(Seen::Run);
                    m.running_list.push(d.ticket);
                    m.running.insert(
                        d.ticket,
                        Running {
                            tenant,
                            payload,
                            worker,
                            used: 0.0,
                        },
                    );
                }
                Ok(Decision::Empty) => {
                    seen(Seen::Empty);
                    ensure!(m.queued.is_empty(), "Empty with {} queued", m.queued.len())
                }
                Ok(Decision::RetryAt(t)) => {
                    seen(Seen::Retry);
                    ensure!(!t.is_nan(), "RetryAt(NaN)");
                    ensure!(!m.queued.is_empty(), "RetryAt({t}) with nothing queued");
                }
            }
        }
        // progress / complete a running request
        55..=79 => {
            if m.running_list.is_empty() {
                return Ok(());
            }
            let ticket = m.running_list[r.below(m.running_list.len() as u64) as usize];
            let before = m.running[&ticket].used;
            let bad = r.chance(0.03);
            let used = if bad {
                [f64::NAN, -1.0, f64::INFINITY][r.below(3) as usize]
            } else {
                (before + r.hostile()).min(f64::MAX)
            };
            let finish = op >= 68;
            let res = if finish {
                sub.s().complete(ticket, used, now)
            } else {
                sub.s().progress(ticket, used, now)
            };
            match res {
                Ok(()) => {
                    ensure!(!bad, "accepted usage {used}");
                    if finish {
                        seen(Seen::Completed);
                        let run = m.running.remove(&ticket).unwrap();
                        remove_from(&mut m.running_list, ticket);
                        m.busy[run.worker] = false;
                        m.tenants[run.tenant as usize].running -= 1;
                        let _ = run.payload;
                    } else {
                        m.running.get_mut(&ticket).unwrap().used = used;
                    }
                }
                Err(Error::InvalidCost { .. }) if bad => seen(Seen::Refused),
                Err(e) => return Err(format!("progress/complete({used}): unexpected error {e}")),
            }
            // Reporting less than before is refused.
            if !finish && r.chance(0.02) && m.running[&ticket].used > 0.0 {
                let e = sub.s().complete(ticket, 0.0, now);
                ensure!(
                    matches!(e, Err(Error::UsageDecreased { .. })),
                    "decreasing usage gave {e:?}"
                );
            }
        }
        // cancel
        80..=85 => {
            if r.chance(0.2) && !m.running_list.is_empty() {
                let t = m.running_list[r.below(m.running_list.len() as u64) as usize];
                let e = sub.s().cancel(t, now);
                ensure!(
                    matches!(e, Err(Error::AlreadyRunning(_))),
                    "cancel of a running request gave {e:?}"
                );
                return Ok(());
            }
            if m.queued_list.is_empty() {
                return Ok(());
            }
            let ticket = m.queued_list[r.below(m.queued_list.len() as u64) as usize];
            match sub.s().cancel(ticket, now) {
                Ok(req) => {
                    let (tenant, payload) = m.queued.remove(&ticket).unwrap();
                    remove_from(&mut m.queued_list, ticket);
                    ensure!(req.payload == payload, "cancel returned the wrong payload");
                    m.tenants[tenant as usize].queued -= 1;
                    m.returned += 1;
                    seen(Seen::Cancelled);
                }
                Err(e) => return Err(format!("cancel of a queued request: {e}")),
            }
        }
        // set_weight
        86..=90 => {
            let tenant = TenantId(r.below(TENANTS));
            let w = r.weight();
            match sub.s().set_weight(tenant, w, now) {
                Ok(()) => ensure!(in_range(w), "set_weight accepted {w}"),
                Err(Error::InvalidWeight { value, .. }) => {
                    seen(Seen::Refused);
                    ensure!(!in_range(w), "set_weight refused {value}")
                }
                Err(e) => return Err(format!("set_weight({w}): unexpected error {e}")),
            }
        }
        // set_workers
        91..=92 => {
            let n = 1 + r.below(4) as usize;
            sub.s()
                .set_workers(n)
                .map_err(|e| format!("set_workers({n}): {e}"))?;
            // Workers beyond the new count finish what they run; none are added as busy.
            if m.busy.len() < n {
                m.busy.resize(n, false);
            }
        }
        // set_target
        93..=94 => {
            let tenant = TenantId(r.below(TENANTS));
            let target = match r.below(5) {
                0 => None,
                1 => Some(-1.0),
                _ => Some(r.hostile()),
            };
            let valid = target.is_none_or(|t| t.is_finite() && t > 0.0);
            match sub.s().set_target(tenant, target, now) {
                Ok(()) => ensure!(valid, "set_target accepted {target:?}"),
                Err(Error::InvalidConfig { .. }) if !valid => {}
                Err(e) => return Err(format!("set_target({target:?}): unexpected error {e}")),
            }
        }
        // remove_tenant
        95..=96 => {
            let tenant = r.below(TENANTS);
            let sh = m.tenants[tenant as usize];
            match sub.s().remove_tenant(TenantId(tenant)) {
                Ok(()) => {
                    ensure!(sh.queued + sh.running == 0, "removed a busy tenant");
                    ensure!(
                        sub.s().tenant(TenantId(tenant)).is_none(),
                        "removed, still seen"
                    );
                }
                Err(Error::TenantBusy(_)) => {
                    ensure!(sh.queued + sh.running > 0, "idle tenant called busy")
                }
                Err(Error::UnknownTenant(_)) => {
                    ensure!(sh.queued + sh.running == 0, "busy tenant called unknown")
                }
                Err(e) => return Err(format!("remove_tenant: unexpected error {e}")),
            }
        }
        // reservations (LDF and baselines only)
        _ => {
            if let Subject::Reserve(s) = sub {
                let res = r.unit() * 50.0;
                let mut terms = Reservation::new(res, (res + r.unit() * 50.0).min(100.0));
                if r.chance(0.5) {
                    terms = terms.weight(r.weight().clamp(1e-300, 1e300));
                }
                if r.chance(0.3) {
                    let b = terms.max_cpu;
                    terms = terms.elastic(r.unit(), b);
                }
                if r.chance(0.3) {
                    terms = terms.priced(
                        r.hostile().min(1e300),
                        Penalty::Linear {
                            slope: 1.0,
                            max: 1.0,
                        },
                    );
                }
                if r.chance(0.2) {
                    terms = terms.interval(0.001 + r.unit() * 5.0);
                }
                let tenant = TenantId(r.below(TENANTS));
                let _ = s.set_reservation(tenant, terms, now);
            }
        }
    }
    check(sub, m)
}

/// The invariants that hold between any two operations.
fn check(sub: &mut Subject, m: &Model) -> Result<(), Fail> {
    let s = sub.s();
    ensure!(
        s.queued() == m.queued.len() && s.running() == m.running.len(),
        "counts: scheduler {} queued {} running, model {} {}",
        s.queued(),
        s.running(),
        m.queued.len(),
        m.running.len()
    );
    for t in 0..TENANTS {
        let sh = m.tenants[t as usize];
        match s.tenant(TenantId(t)) {
            Some(v) => {
                ensure!(
                    v.queued == sh.queued && v.running == sh.running,
                    "tenant {t}: view {}/{} model {}/{}",
                    v.queued,
                    v.running,
                    sh.queued,
                    sh.running
                );
                // EDF's tag is the target, ∞ for "none".
                let edf = s.name() == "edf" && v.tag == f64::INFINITY;
                ensure!(v.tag.is_finite() || edf, "tenant {t}: tag {}", v.tag);
                ensure!(
                    v.weight.is_finite() && v.weight > 0.0,
                    "tenant {t}: weight {}",
                    v.weight
                );
            }
            None => ensure!(
                sh.queued + sh.running == 0,
                "tenant {t} with work is unknown"
            ),
        }
    }
    if let Some(v) = s.virtual_time() {
        ensure!(v.is_finite(), "virtual time {v}");
    }
    Ok(())
}

/// Bring a case to rest: complete what runs, drain or cancel what is queued; every request
/// must come back exactly once.
fn drain(sub: &mut Subject, m: &mut Model) -> Result<(), Fail> {
    let now = m.now + 1.0;
    for ticket in std::mem::take(&mut m.running_list) {
        let run = m.running.remove(&ticket).unwrap();
        sub.s()
            .complete(ticket, run.used, now)
            .map_err(|e| format!("drain: complete: {e}"))?;
        m.busy[run.worker] = false;
        m.tenants[run.tenant as usize].running -= 1;
    }
    // A few dequeues on worker 0, completing each at once.
    for _ in 0..50 {
        if sub.s().workers() == 0 {
            break;
        }
        match sub.s().dequeue(0, now) {
            Ok(Decision::Run(d)) => {
                let (tenant, payload) = m
                    .queued
                    .remove(&d.ticket)
                    .ok_or_else(|| format!("drain: ran unknown {}", d.ticket))?;
                ensure!(d.request.payload == payload, "drain: wrong payload");
                remove_from(&mut m.queued_list, d.ticket);
                m.tenants[tenant as usize].queued -= 1;
                m.returned += 1;
                sub.s()
                    .complete(d.ticket, 0.0, now)
                    .map_err(|e| format!("drain: complete: {e}"))?;
            }
            Ok(_) => break,
            Err(e) => return Err(format!("drain: dequeue: {e}")),
        }
    }
    for ticket in std::mem::take(&mut m.queued_list) {
        let (tenant, payload) = m.queued.remove(&ticket).unwrap();
        let req = sub
            .s()
            .cancel(ticket, now)
            .map_err(|e| format!("drain: cancel: {e}"))?;
        ensure!(
            req.payload == payload,
            "drain: cancel returned the wrong payload"
        );
        m.tenants[tenant as usize].queued -= 1;
        m.returned += 1;
    }
    ensure!(
        sub.s().queued() == 0 && sub.s().running() == 0,
        "drain left {} queued {} running",
        sub.s().queued(),
        sub.s().running()
    );
    ensure!(
        m.returned == m.accepted,
        "returned {} of {} requests",
        m.returned,
        m.accepted
    );
    check(sub, m)
}

/// One case: `ops` operations on a fresh scheduler. `progress` is bumped every operation
/// (the watchdog reads it).
fn run_case(name: &str, seed: u64, ops: u64, progress: &AtomicU64) -> Result<(), (u64, Fail)> {
    let mut r = Rng(seed);
    let workers = 1 + r.below(4) as usize;
    let mut sub = build(name, workers);
    let mut m = Model {
        queued: HashMap::new(),
        queued_list: Vec::new(),
        running: HashMap::new(),
        running_list: Vec::new(),
        tenants: Default::default(),
        busy: vec![false; workers],
        now: 0.0,
        next_payload: 0,
        returned: 0,
        accepted: 0,
    };
    for i in 0..ops {
        step(&mut sub, &mut m, &mut r).map_err(|e| (i, e))?;
        progress.fetch_add(1, Ordering::Relaxed);
    }
    drain(&mut sub, &mut m).map_err(|e| (ops, e))
}

/// What a run found.
#[derive(Default)]
struct Report {
    ops: u64,
    cases: u64,
    failures: Vec<String>,
}

/// Run `total` operations spread over every subject, `per_case` operations per seed, on
/// `threads` threads. A case that panics or breaks an invariant is reported with its seed;
/// a run that stalls for `stall` is reported as a hang and ends the run.
fn fuzz(total: u64, per_case: u64, first_seed: u64, threads: usize, stall: Duration) -> Report {
    // FUZZ_ONLY=2dfq,ldf narrows the run to subjects with those names.
    let only = std::env::var("FUZZ_ONLY").unwrap_or_default();
    let names: Vec<String> = subjects()
        .into_iter()
        .filter(|n| only.is_empty() || only.split(',').any(|o| o == n))
        .collect();
    // Rounded up: a run does at least `total` operations.
    let cases_per_subject = total.div_ceil(per_case * names.len() as u64).max(1);
    let jobs: Vec<(String, u64)> = (0..cases_per_subject)
        .flat_map(|k| names.iter().map(move |n| (n.clone(), first_seed + k)))
        .collect();
    let jobs = Arc::new(jobs);
    let next = Arc::new(AtomicU64::new(0));
    let progress = Arc::new(AtomicU64::new(0));
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let current: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    // The default hook would print every caught panic; the report names them instead.
    std::panic::set_hook(Box::new(|_| {}));
    for th in 0..threads {
        let (jobs, next, progress, tx, current) = (
            jobs.clone(),
            next.clone(),
            progress.clone(),
            tx.clone(),
            current.clone(),
        );
        std::thread::spawn(move || loop {
            let j = next.fetch_add(1, Ordering::Relaxed) as usize;
            let Some((name, seed)) = jobs.get(j) else {
                break;
            };
            current[th].store(j as u64, Ordering::Relaxed);
            let out = catch_unwind(AssertUnwindSafe(|| {
                run_case(name, *seed, per_case, &progress)
            }));
            let msg = match out {
                Ok(Ok(())) => Ok(()),
                Ok(Err((op, e))) => Err(format!("{name} seed {seed} op {op}: {e}")),
                Err(p) => {
                    let what = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Err(format!("{name} seed {seed}: PANIC {what}"))
                }
            };
            if tx.send(msg).is_err() {
                break;
            }
        });
    }
    drop(tx);
    let mut report = Report::default();
    let started = Instant::now();
    let mut last = (0, Instant::now());
    let mut printed = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(r) => {
                report.cases += 1;
                if let Err(e) = r {
                    report.failures.push(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        let p = progress.load(Ordering::Relaxed);
        if p != last.0 {
            last = (p, Instant::now());
        } else if last.1.elapsed() > stall {
            for (th, c) in current.iter().enumerate() {
                let (name, seed) = &jobs[c.load(Ordering::Relaxed) as usize];
                report
                    .failures
                    .push(format!("HANG? thread {th} on {name} seed {seed}"));
            }
            break;
        }
        if printed.elapsed() > Duration::from_secs(30) {
            printed = Instant::now();
            eprintln!(
                "fuzz: {p} ops, {} cases, {} failures, {:.0} s",
                report.cases,
                report.failures.len(),
                started.elapsed().as_secs_f64()
            );
        }
    }
    std::panic::set_hook(Box::new(|i| eprintln!("{i}")));
    report.ops = progress.load(Ordering::Relaxed);
    report
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn assert_clean(r: &Report) {
    assert!(
        r.failures.is_empty(),
        "{} of {} cases failed:\n{}",
        r.failures.len(),
        r.cases,
        r.failures
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The CI run: a few thousand operations per subject.
#[test]
fn fuzz_short() {
    let r = fuzz(
        env("FUZZ_OPS", 200_000),
        2_000,
        env("FUZZ_SEED", 1),
        1,
        Duration::from_secs(env("FUZZ_STALL_SECS", 60)),
    );
    assert_clean(&r);
}

/// The long run (≥ 10⁸ operations for the issue): prints its figures.
#[test]
#[ignore]
fn fuzz_long() {
    let total = env("FUZZ_OPS", 100_000_000);
    let threads = env("FUZZ_THREADS", 2) as usize;
    let t = Instant::now();
    let r = fuzz(
        total,
        env("FUZZ_CASE_OPS", 20_000),
        env("FUZZ_SEED", 1_000),
        threads,
        Duration::from_secs(env("FUZZ_STALL_SECS", 20)),
    );
    eprintln!(
        "fuzz: {} ops in {} cases over {} subjects, {:.1} s, {} threads, {} failures",
        r.ops,
        r.cases,
        subjects().len(),
        t.elapsed().as_secs_f64(),
        threads,
        r.failures.len()
    );
    let counts: Vec<String> = SEEN
        .iter()
        .zip(SEEN_NAMES)
        .map(|(n, name)| format!("{} {name}", n.load(Ordering::Relaxed)))
        .collect();
    eprintln!("fuzz: {}", counts.join(", "));
    assert_clean(&r);
}
