//! A multi-tenant database server for CPU reservations (Das et al., VLDB '14 §6): `cores`
//! cores running non-preemptive quanta (a task runs at most one quantum, then re-enters the
//! scheduler), tenants whose connections issue queries of a given CPU demand with think time
//! (OLTP-like short quanta, DSS-like long ones), bursty tenants, and the aggregate
//! utilization cap. Scheduled by `fairlane_core::reserve` (LDF, DRR, EDF, no reservations)
//! and metered by its [`Meter`](fairlane_core::reserve::Meter).
//!
//! Its own TOML spec ([`DbSpec`], documented in `docs/reservations.md`). Deterministic: each
//! tenant draws from its own streams of the spec seed, and events at the same instant run in
//! the order they were scheduled, so the same spec and seed give the same results.
//!
//! ```
//! let spec = fairlane_sim::dbserver::DbSpec::parse(r#"
//!     name = "two tenants"
//!     duration = 5.0
//!     cores = 2
//!     schedulers = ["ldf"]
//!     [[tenant]]
//!     name = "gold"
//!     res = 60.0
//!     workload = { kind = "closed", connections = 4, demand = { kind = "constant", value = 0.02 } }
//!     [[tenant]]
//!     name = "bully"
//!     workload = { kind = "closed", connections = 8, demand = { kind = "constant", value = 0.02 } }
//! "#, "example.toml").unwrap();
//! let runs = fairlane_sim::dbserver::run_all(&spec, 1).unwrap();
//! let gold = &runs[0].tenants[0];
//! assert!(gold.cpu_mean >= 59.0); // its 60 % reservation is met
//! ```

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use fairlane_core::reserve::{
    jain_index, DeficitMode, LdfOptions, MeterRecord, Penalty, Policy, Reservation, ReserveConfig,
    ReserveScheduler,
};
use fairlane_core::{Decision, Request, Scheduler, TenantId, Ticket};
use serde::Deserialize;

use crate::rng::Rng;

/// A spec or run error, naming the file and field where it can.
#[derive(Clone, Debug, PartialEq)]
pub struct DbError(pub String);

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DbError {}

fn one() -> usize {
    1
}
fn default_seed() -> u64 {
    1
}
fn default_cores() -> usize {
    12
}
fn default_quantum() -> f64 {
    0.004
}
fn default_interval() -> f64 {
    1.0
}
fn hundred() -> f64 {
    100.0
}

/// A database-server spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbSpec {
    /// Short name.
    pub name: String,
    /// One paragraph for the report.
    #[serde(default)]
    pub description: String,
    /// Seed of every random stream.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Seconds excluded from the statistics (whole metering intervals after it count).
    #[serde(default)]
    pub warmup: f64,
    /// Cores (12 as the paper's server; default 12).
    #[serde(default = "default_cores")]
    pub cores: usize,
    /// The default metering interval (s).
    #[serde(default = "default_interval")]
    pub interval: f64,
    /// The aggregate utilization cap (%), 95 in the paper.
    #[serde(default = "hundred")]
    pub utilization_cap: f64,
    /// Scheduler names: `ldf`, `drr`, `edf`, `no-res`, or names defined in `[[scheduler]]`.
    #[serde(default)]
    pub schedulers: Vec<String>,
    /// Schedulers with options.
    #[serde(default)]
    pub scheduler: Vec<DbScheduler>,
    /// Tenants, or groups of identical tenants.
    pub tenant: Vec<DbTenant>,
    /// Points of a sweep (each runs under every scheduler).
    #[serde(default)]
    pub sweep: Vec<DbSweep>,
}

/// A scheduler with options.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbScheduler {
    /// Name in reports.
    pub name: String,
    /// `ldf`, `drr`, `edf` or `no-res`.
    pub policy: String,
    /// `fractional` (Eq. 4, default), `revenue` (Eq. 6) or `blend` (Eq. 7).
    #[serde(default)]
    pub deficit: Option<String>,
    /// α of `blend`.
    #[serde(default)]
    pub alpha: Option<f64>,
    /// Boost elastic reservations (default true).
    #[serde(default)]
    pub boost: Option<bool>,
}

/// A tenant (or `count` identical ones named `name-0`, `name-1`, …).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbTenant {
    /// Name (group name when `count > 1`).
    pub name: String,
    /// How many.
    #[serde(default = "one")]
    pub count: usize,
    /// `ResCPU` (%), 0 or absent for none.
    #[serde(default)]
    pub res: f64,
    /// `MaxCPU` (%), default 100.
    #[serde(default = "hundred")]
    pub max: f64,
    /// Surplus weight (Eq. 5).
    #[serde(default)]
    pub weight: Option<f64>,
    /// Elastic reservation `{ f, b }`.
    #[serde(default)]
    pub elastic: Option<DbElastic>,
    /// Price per metering interval.
    #[serde(default)]
    pub price: f64,
    /// Penalty function.
    #[serde(default)]
    pub penalty: Option<DbPenalty>,
    /// The tenant's own metering interval (s).
    #[serde(default)]
    pub interval: Option<f64>,
    /// What it runs.
    pub workload: DbWorkload,
}

/// Elastic terms.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbElastic {
    /// f ∈ [0, 1].
    pub f: f64,
    /// b (%).
    pub b: f64,
}

/// A penalty function.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DbPenalty {
    /// `[[threshold, refund], …]`.
    Step {
        /// The steps.
        steps: Vec<(f64, f64)>,
    },
    /// `min(max, slope × ViolCPU)`.
    Linear {
        /// Slope.
        slope: f64,
        /// Cap.
        max: f64,
    },
}

/// A distribution of seconds.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DbDist {
    /// Always `value`.
    Constant {
        /// The value.
        value: f64,
    },
    /// Exponential with `mean`.
    Exponential {
        /// The mean.
        mean: f64,
    },
    /// Uniform in `[min, max]`.
    Uniform {
        /// Low end.
        min: f64,
        /// High end.
        max: f64,
    },
}

impl DbDist {
    fn sample(&self, rng: &mut Rng) -> f64 {
        match *self {
            DbDist::Constant { value } => value,
            DbDist::Exponential { mean } => rng.exp(mean),
            DbDist::Uniform { min, max } => min + (max - min) * rng.uniform(),
        }
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        let fine = match *self {
            DbDist::Constant { value } => ok(value),
            DbDist::Exponential { mean } => ok(mean),
            DbDist::Uniform { min, max } => ok(min) && ok(max) && min <= max,
        };
        if fine {
            Ok(())
        } else {
            Err(format!(
                "{what}: values must be finite, ≥ 0 (and min ≤ max)"
            ))
        }
    }
}

fn zero_dist() -> DbDist {
    DbDist::Constant { value: 0.0 }
}

/// A tenant's workload.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum DbWorkload {
    /// `connections` connections, each issuing a query of CPU demand `demand`, waiting for it,
    /// thinking `think`, and again.
    Closed {
        /// Connections.
        connections: usize,
        /// CPU seconds per query.
        demand: DbDist,
        /// Think time (s).
        #[serde(default = "zero_dist")]
        think: DbDist,
        /// The task's quantum (s): short for OLTP, long for DSS.
        #[serde(default = "default_quantum")]
        quantum: f64,
    },
    /// Bursts: one at least every `period` seconds (gaps uniform in `[period/2, period]`,
    /// the first uniform in `[0, period)`), each `queries` queries issued back to back over
    /// `connections` connections.
    Bursty {
        /// At most this long between bursts (s).
        period: f64,
        /// Queries per burst.
        queries: usize,
        /// Connections (the burst's parallelism).
        connections: usize,
        /// CPU seconds per query.
        demand: DbDist,
        /// The quantum (s).
        #[serde(default = "default_quantum")]
        quantum: f64,
    },
}

/// A sweep point.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbSweep {
    /// Label in reports.
    pub label: String,
    /// Group counts to override, by tenant name.
    #[serde(default)]
    pub counts: BTreeMap<String, usize>,
    /// α for every `blend` scheduler.
    #[serde(default)]
    pub alpha: Option<f64>,
}

impl DbSpec {
    /// Parse and check a spec; errors name `file` and the field.
    pub fn parse(text: &str, file: &str) -> Result<DbSpec, DbError> {
        let de = toml::Deserializer::new(text);
        let spec: DbSpec = serde_path_to_error::deserialize(de)
            .map_err(|e| DbError(format!("{file}: {}: {}", e.path(), e.inner().message())))?;
        spec.check()
            .map_err(|(field, msg)| DbError(format!("{file}: {field}: {msg}")))?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), (String, String)> {
        let err = |f: &str, m: String| Err((f.to_string(), m));
        if !(self.duration.is_finite() && self.duration > 0.0) {
            return err("duration", format!("must be > 0, got {}", self.duration));
        }
        if !(self.warmup >= 0.0 && self.warmup < self.duration) {
            return err(
                "warmup",
                format!("must be in [0, duration), got {}", self.warmup),
            );
        }
        if self.tenant.is_empty() {
            return err("tenant", "at least one tenant is needed".into());
        }
        if self.schedulers.is_empty() && self.scheduler.is_empty() {
            return err("schedulers", "name at least one scheduler".into());
        }
        for (i, t) in self.tenant.iter().enumerate() {
            let f = |x: &str| format!("tenant[{i}].{x}");
            if let Err(e) = t.terms().validate() {
                return match e {
                    fairlane_core::Error::InvalidConfig { field, reason } => err(&f(field), reason),
                    other => err(&f("terms"), other.to_string()),
                };
            }
            let (q, conns) = match t.workload {
                DbWorkload::Closed {
                    connections,
                    demand,
                    think,
                    quantum,
                } => {
                    demand
                        .check("demand")
                        .map_err(|m| (f("workload.demand"), m))?;
                    think.check("think").map_err(|m| (f("workload.think"), m))?;
                    (quantum, connections)
                }
                DbWorkload::Bursty {
                    period,
                    connections,
                    demand,
                    quantum,
                    ..
                } => {
                    demand
                        .check("demand")
                        .map_err(|m| (f("workload.demand"), m))?;
                    if !(period.is_finite() && period > 0.0) {
                        return err(&f("workload.period"), format!("must be > 0, got {period}"));
                    }
                    (quantum, connections)
                }
            };
            if !(q.is_finite() && q > 0.0) {
                return err(&f("workload.quantum"), format!("must be > 0, got {q}"));
            }
            if conns == 0 {
                return err(&f("workload.connections"), "must be ≥ 1".into());
            }
        }
        for (i, s) in self.sweep.iter().enumerate() {
            for name in s.counts.keys() {
                if !self.tenant.iter().any(|t| &t.name == name) {
                    return err(
                        &format!("sweep[{i}].counts.{name}"),
                        "no tenant has this name".into(),
                    );
                }
            }
        }
        for (i, name) in self.schedulers.iter().enumerate() {
            if self.scheduler.iter().all(|s| &s.name != name) {
                self.policy_of(name, None, None, None, None)
                    .map_err(|m| (format!("schedulers[{i}]"), m))?;
            }
        }
        for (i, s) in self.scheduler.iter().enumerate() {
            self.policy_of(&s.policy, s.deficit.as_deref(), s.alpha, s.boost, None)
                .map_err(|m| (format!("scheduler[{i}]"), m))?;
        }
        let cfg = ReserveConfig::new(Policy::ldf())
            .cores(self.cores)
            .interval(self.interval)
            .utilization_cap(self.utilization_cap);
        if let Err(fairlane_core::Error::InvalidConfig { field, reason }) = cfg.validate() {
            return err(field, reason);
        }
        Ok(())
    }

    fn policy_of(
        &self,
        policy: &str,
        deficit: Option<&str>,
        alpha: Option<f64>,
        boost: Option<bool>,
        sweep_alpha: Option<f64>,
    ) -> Result<Policy, String> {
        let deficit = match deficit.unwrap_or("fractional") {
            "fractional" => DeficitMode::Fractional,
            "revenue" => DeficitMode::Revenue,
            "blend" => {
                let alpha = sweep_alpha.or(alpha).unwrap_or(0.5);
                if !(0.0..=1.0).contains(&alpha) {
                    return Err(format!("alpha must be in [0, 1], got {alpha}"));
                }
                DeficitMode::Blend { alpha }
            }
            other => {
                return Err(format!(
                    "unknown deficit {other:?}: fractional, revenue or blend"
                ))
            }
        };
        let o = LdfOptions {
            boost: boost.unwrap_or(true),
            deficit,
        };
        match policy {
            "ldf" => Ok(Policy::Ldf(o)),
            "drr" => Ok(Policy::Drr(o)),
            "edf" => Ok(Policy::Edf),
            "no-res" => Ok(Policy::BestEffort),
            other => Err(format!(
                "unknown scheduler {other:?}: ldf, drr, edf, no-res or a [[scheduler]] name"
            )),
        }
    }

    /// The (name, policy) pairs to run at a sweep point.
    fn policies(&self, sweep_alpha: Option<f64>) -> Result<Vec<(String, Policy)>, DbError> {
        let mut out = Vec::new();
        let mut names: Vec<&str> = self.schedulers.iter().map(String::as_str).collect();
        for s in &self.scheduler {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
        for name in names {
            let p = match self.scheduler.iter().find(|s| s.name == name) {
                Some(s) => self.policy_of(
                    &s.policy,
                    s.deficit.as_deref(),
                    s.alpha,
                    s.boost,
                    sweep_alpha,
                ),
                None => self.policy_of(name, None, None, None, None),
            }
            .map_err(DbError)?;
            out.push((name.to_string(), p));
        }
        Ok(out)
    }
}

impl DbTenant {
    fn terms(&self) -> Reservation {
        let mut r = Reservation::new(self.res, self.max);
        r.weight = self.weight;
        if let Some(e) = self.elastic {
            r = r.elastic(e.f, e.b);
        }
        let pf = match &self.penalty {
            None => Penalty::None,
            Some(DbPenalty::Step { steps }) => Penalty::Step(steps.clone()),
            Some(DbPenalty::Linear { slope, max }) => Penalty::Linear {
                slope: *slope,
                max: *max,
            },
        };
        r = r.priced(self.price, pf);
        r.interval = self.interval;
        r
    }
}

/// One tenant's results over the measured part of a run.
#[derive(Clone, Debug)]
pub struct DbTenantResult {
    /// Name.
    pub name: String,
    /// Group (the spec's tenant name).
    pub group: String,
    /// `ResCPU` (%).
    pub res: f64,
    /// Mean and standard deviation of CPU (%) over the measured metering intervals.
    pub cpu_mean: f64,
    /// See `cpu_mean`.
    pub cpu_std: f64,
    /// Mean `ResCPU − CPU_eff` in percentage points, floored at 0 (the paper's "% violation").
    pub viol_points: f64,
    /// Its standard deviation.
    pub viol_points_std: f64,
    /// Mean `ViolCPU`.
    pub viol_cpu: f64,
    /// Fraction of its measured intervals with the reservation violated.
    pub violated: f64,
    /// Fraction of its measured intervals with the elastic burst violated (elastic only).
    pub burst_violated: Option<f64>,
    /// Queries completed after the warm-up.
    pub queries: usize,
    /// Mean and 99th percentile query latency (s).
    pub latency_mean: f64,
    /// See `latency_mean`.
    pub latency_p99: f64,
    /// Standard deviation of query latency (s).
    pub latency_std: f64,
    /// Price over the measured intervals, and refunds (Σ PF(ViolCPU) × price).
    pub revenue_max: f64,
    /// See `revenue_max`.
    pub refund: f64,
}

/// One run: a sweep point under one scheduler.
#[derive(Clone, Debug)]
pub struct DbRun {
    /// The sweep label (empty without a sweep).
    pub label: String,
    /// The scheduler's name.
    pub scheduler: String,
    /// Per tenant, in spec order.
    pub tenants: Vec<DbTenantResult>,
    /// Every closed metering interval after the warm-up.
    pub records: Vec<MeterRecord>,
    /// Mean server utilization (%) after the warm-up.
    pub utilization: f64,
    /// Dispatches (quanta), and tenants examined by the policy (its work, §6.6).
    pub dispatches: u64,
    /// See `dispatches`.
    pub examined: u64,
    /// Jain's index over the reserved tenants' mean `ViolCPU`.
    pub jain: f64,
}

impl DbRun {
    /// A tenant by name.
    pub fn tenant(&self, name: &str) -> Option<&DbTenantResult> {
        self.tenants.iter().find(|t| t.name == name)
    }
}

/// Run every sweep point under every scheduler, `jobs` at a time; results sweep-major, then
/// scheduler order.
pub fn run_all(spec: &DbSpec, jobs: usize) -> Result<Vec<DbRun>, DbError> {
    let points: Vec<Option<&DbSweep>> = if spec.sweep.is_empty() {
        vec![None]
    } else {
        spec.sweep.iter().map(Some).collect()
    };
    let mut tasks = Vec::new();
    for p in &points {
        for (name, policy) in spec.policies(p.and_then(|s| s.alpha))? {
            tasks.push((*p, name, policy));
        }
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: std::sync::Mutex<Vec<Option<Result<DbRun, DbError>>>> =
        std::sync::Mutex::new(vec![None; tasks.len()]);
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, tasks.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((point, name, policy)) = tasks.get(i) else {
                    break;
                };
                let r = run_one(spec, *point, name, *policy);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(DbError("a run did not finish".into()))))
        .collect()
}

/// A query (or one of its remaining quanta) in the scheduler.
#[derive(Clone, Copy, Debug)]
struct Task {
    tenant: usize,
    conn: usize,
    left: f64,
    issued: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ev {
    /// A connection issues its next query.
    Issue { tenant: usize, conn: usize },
    /// A bursty tenant's burst starts.
    Burst { tenant: usize },
    /// A core's quantum ends.
    QuantumEnd { core: usize },
    /// The scheduler asked to be asked again.
    Retry,
}

struct Event {
    at: f64,
    seq: u64,
    ev: Ev,
}
impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    fn cmp(&self, o: &Self) -> Ordering {
        // Min-heap on (time, seq).
        o.at.total_cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

struct Inst {
    name: String,
    group: String,
    spec: usize,
    rng: Rng,
    latencies: Vec<f64>,
    /// Bursty: queries of the current burst not yet issued.
    burst_left: usize,
}

fn stream_of(name: &str) -> u64 {
    // FNV-1a: a stable stream per tenant name.
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

fn run_one(
    spec: &DbSpec,
    point: Option<&DbSweep>,
    sched_name: &str,
    policy: Policy,
) -> Result<DbRun, DbError> {
    let e = |x: fairlane_core::Error| DbError(format!("{}: {sched_name}: {x}", spec.name));
    let mut s: ReserveScheduler<Task> = ReserveConfig::new(policy)
        .cores(spec.cores)
        .interval(spec.interval)
        .utilization_cap(spec.utilization_cap)
        .build()
        .map_err(e)?;
    let mut insts: Vec<Inst> = Vec::new();
    for (k, t) in spec.tenant.iter().enumerate() {
        let count = point
            .and_then(|p| p.counts.get(&t.name).copied())
            .unwrap_or(t.count);
        for j in 0..count {
            let name = if t.count == 1 && count == 1 {
                t.name.clone()
            } else {
                format!("{}-{j}", t.name)
            };
            let id = TenantId(insts.len() as u64);
            s.set_reservation(id, t.terms(), 0.0).map_err(e)?;
            insts.push(Inst {
                rng: Rng::new(spec.seed, stream_of(&name)),
                name,
                group: t.name.clone(),
                spec: k,
                latencies: Vec::new(),
                burst_left: 0,
            });
        }
    }
    let mut heap = BinaryHeap::new();
    let mut seq = 0u64;
    let mut push = |heap: &mut BinaryHeap<Event>, at: f64, ev: Ev| {
        seq += 1;
        heap.push(Event { at, seq, ev });
    };
    for (i, inst) in insts.iter_mut().enumerate() {
        match spec.tenant[inst.spec].workload {
            DbWorkload::Closed {
                connections, think, ..
            } => {
                for c in 0..connections {
                    let at = think.sample(&mut inst.rng);
                    push(&mut heap, at, Ev::Issue { tenant: i, conn: c });
                }
            }
            DbWorkload::Bursty { period, .. } => {
                let at = period * inst.rng.uniform();
                push(&mut heap, at, Ev::Burst { tenant: i });
            }
        }
    }
    let cores = spec.cores;
    let mut busy: Vec<Option<(Ticket, f64, Task)>> = vec![None; cores];
    let mut idle = cores;
    let mut retry_at = f64::INFINITY;
    let (mut dispatches, mut busy_time) = (0u64, 0.0f64);
    let end = spec.duration;
    while let Some(Event { at: now, ev, .. }) = heap.pop() {
        if now > end {
            break;
        }
        match ev {
            Ev::Issue { tenant, conn } => {
                let inst = &mut insts[tenant];
                let demand = match spec.tenant[inst.spec].workload {
                    DbWorkload::Closed { demand, .. } | DbWorkload::Bursty { demand, .. } => {
                        demand.sample(&mut inst.rng)
                    }
                };
                let task = Task {
                    tenant,
                    conn,
                    left: demand.max(1e-6),
                    issued: now,
                };
                s.enqueue(Request::new(tenant as u64, 0u32, task), now)
                    .map_err(e)?;
            }
            Ev::Burst { tenant } => {
                let inst = &mut insts[tenant];
                if let DbWorkload::Bursty {
                    period,
                    queries,
                    connections,
                    ..
                } = spec.tenant[inst.spec].workload
                {
                    // A burst still running absorbs the next one's queries.
                    let start_conns = if inst.burst_left == 0 { connections } else { 0 };
                    inst.burst_left += queries;
                    let gap = period * (0.5 + 0.5 * inst.rng.uniform());
                    push(&mut heap, now + gap, Ev::Burst { tenant });
                    for c in 0..start_conns.min(queries) {
                        insts[tenant].burst_left -= 1;
                        push(&mut heap, now, Ev::Issue { tenant, conn: c });
                    }
                }
            }
            Ev::QuantumEnd { core } => {
                if let Some((ticket, start, task)) = busy[core].take() {
                    idle += 1;
                    let used = now - start;
                    if now > spec.warmup {
                        busy_time += now - start.max(spec.warmup);
                    }
                    s.complete(ticket, used, now).map_err(e)?;
                    if task.left > 1e-12 {
                        s.enqueue(Request::new(task.tenant as u64, 0u32, task), now)
                            .map_err(e)?;
                    } else {
                        let inst = &mut insts[task.tenant];
                        if task.issued >= spec.warmup {
                            inst.latencies.push(now - task.issued);
                        }
                        match spec.tenant[inst.spec].workload {
                            DbWorkload::Closed { think, .. } => {
                                let at = now + think.sample(&mut inst.rng);
                                push(
                                    &mut heap,
                                    at,
                                    Ev::Issue {
                                        tenant: task.tenant,
                                        conn: task.conn,
                                    },
                                );
                            }
                            DbWorkload::Bursty { .. } => {
                                if inst.burst_left > 0 {
                                    inst.burst_left -= 1;
                                    push(
                                        &mut heap,
                                        now,
                                        Ev::Issue {
                                            tenant: task.tenant,
                                            conn: task.conn,
                                        },
                                    );
                                }
                            }
                        }
                    }
                }
            }
            Ev::Retry => {
                if retry_at <= now {
                    retry_at = f64::INFINITY;
                }
            }
        }
        // Same-instant events first, then fill the idle cores.
        if idle == 0 || heap.peek().is_some_and(|n| n.at == now) {
            continue;
        }
        for (core, slot) in busy.iter_mut().enumerate() {
            if idle == 0 {
                break;
            }
            if slot.is_some() {
                continue;
            }
            match s.dequeue(core, now).map_err(e)? {
                Decision::Run(d) => {
                    let mut task = d.request.payload;
                    let q = match spec.tenant[insts[task.tenant].spec].workload {
                        DbWorkload::Closed { quantum, .. } | DbWorkload::Bursty { quantum, .. } => {
                            quantum
                        }
                    };
                    let run = q.min(task.left);
                    task.left -= run;
                    *slot = Some((d.ticket, now, task));
                    idle -= 1;
                    dispatches += 1;
                    push(&mut heap, now + run, Ev::QuantumEnd { core });
                }
                Decision::RetryAt(t) => {
                    if t < retry_at {
                        retry_at = t;
                        push(&mut heap, t, Ev::Retry);
                    }
                    break;
                }
                Decision::Empty => break,
            }
        }
    }
    // Count the quanta still running at the end.
    for (_, start, _) in busy.iter().flatten() {
        busy_time += end - start.max(spec.warmup);
    }
    s.close_intervals(end).map_err(e)?;
    let records: Vec<MeterRecord> = s
        .take_records()
        .into_iter()
        .filter(|r| r.start >= spec.warmup - 1e-9)
        .collect();
    let mut tenants = Vec::new();
    let mut viols = Vec::new();
    for (i, inst) in insts.iter_mut().enumerate() {
        let t = &spec.tenant[inst.spec];
        let terms = t.terms();
        let recs: Vec<&MeterRecord> = records
            .iter()
            .filter(|r| r.tenant == TenantId(i as u64))
            .collect();
        let (cpu_mean, cpu_std) = mean_std(recs.iter().map(|r| r.cpu));
        let (viol_points, viol_points_std) =
            mean_std(recs.iter().map(|r| (r.res_cpu - r.cpu_eff).max(0.0)));
        let (viol_cpu, _) = mean_std(recs.iter().map(|r| r.viol_cpu));
        let n = recs.len().max(1) as f64;
        let violated = recs.iter().filter(|r| r.violated).count() as f64 / n;
        let burst_violated = terms.elastic.map(|_| {
            recs.iter()
                .filter(|r| r.burst_violated == Some(true))
                .count() as f64
                / n
        });
        let refund: f64 = recs
            .iter()
            .map(|r| terms.penalty.refund(r.viol_cpu) * terms.price)
            .sum();
        // Price is due for every measured interval of the tenant's length.
        let len = terms.interval.unwrap_or(spec.interval);
        let intervals = ((end - spec.warmup) / len).floor();
        let revenue_max = terms.price * intervals;
        if terms.res_cpu > 0.0 {
            viols.push(viol_cpu);
        }
        let lat = &mut inst.latencies;
        let (latency_mean, latency_std) = mean_std(lat.iter().copied());
        lat.sort_by(f64::total_cmp);
        let latency_p99 = if lat.is_empty() {
            f64::NAN
        } else {
            lat[((lat.len() - 1) as f64 * 0.99).round() as usize]
        };
        tenants.push(DbTenantResult {
            name: inst.name.clone(),
            group: inst.group.clone(),
            res: terms.res_cpu,
            cpu_mean,
            cpu_std,
            viol_points,
            viol_points_std,
            viol_cpu,
            violated,
            burst_violated,
            queries: lat.len(),
            latency_mean,
            latency_p99,
            latency_std,
            revenue_max,
            refund,
        });
    }
    Ok(DbRun {
        label: point.map(|p| p.label.clone()).unwrap_or_default(),
        scheduler: sched_name.to_string(),
        tenants,
        records,
        utilization: busy_time * 100.0 / (cores as f64 * (end - spec.warmup)),
        dispatches,
        examined: s.examined(),
        jain: jain_index(&viols).unwrap_or(f64::NAN),
    })
}

fn mean_std(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = xs.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, var.sqrt())
}
