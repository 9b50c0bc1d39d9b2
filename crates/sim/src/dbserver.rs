//! A multi-tenant database server for CPU reservations (Das et al., VLDB '14 §6): `cores`
//! cores running non-preemptive quanta (a task runs at most one quantum, then re-enters the
//! scheduler), tenants whose connections issue queries of a given CPU demand with think time
//! (OLTP-like short quanta, DSS-like long ones), bursty tenants, and the aggregate
//! utilization cap. Scheduled by `fairlane_core::reserve` (LDF, DRR, EDF, no reservations)
//! and metered by its [`Meter`](fairlane_core::reserve::Meter).
//!
//! Its spec ([`DbSpec`], documented in `docs/reservations.md`) is the `model = "cores"` kind
//! of the simulator's one spec format ([`crate::AnySpec`]). It runs on the shared engine: the
//! one event queue and run loop ([`crate::events`]), the [`Cores`] service, the one RNG stream
//! scheme ([`crate::rng::stream_id`]). Deterministic: each tenant draws from its own stream
//! of the spec seed, and events at the same instant run in the order they were scheduled, so
//! the same spec and seed give the same results.
//!
//! ```
//! let spec = fairlane_sim::dbserver::DbSpec::parse(r#"
//!     name = "two tenants"
//!     duration = 5.0
//!     server = { model = "cores", cores = 2 }
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

use std::collections::BTreeMap;

use fairlane_core::reserve::{
    jain_index, DeficitMode, LdfOptions, MeterRecord, Penalty, Policy, Reservation, ReserveConfig,
    ReserveScheduler,
};
use fairlane_core::{Decision, Inspect, Request, Scheduler, TenantId, Ticket};
use serde::Deserialize;

use crate::engine::{SimError, SimErrorKind};
use crate::events::{drive, EventQueue, Model, DEFAULT_MAX_EVENTS, MAX_OUTSTANDING};
use crate::rng::{stream_id, Rng};
use crate::service::{Cores, Outcome, Service, Work};
use crate::spec::SpecError;

/// Spec errors are the simulator's one [`SpecError`] (file, field, message); run errors its
/// one [`SimError`]. The old name stays for callers.
pub type DbError = SpecError;

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

/// The scheduler names a database-server spec knows without a `[[scheduler]]` entry.
pub const RESERVATION_SCHEDULERS: [&str; 11] = [
    "ldf",
    "drr",
    "edf",
    "no-res",
    "best-effort",
    "ldf-fractional",
    "drr-fractional",
    "ldf-revenue",
    "drr-revenue",
    "ldf-blend",
    "drr-blend",
];

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
    /// `[server]`: `model = "cores"` (what makes this a database-server spec) and its cores.
    pub server: DbServer,
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
    /// The cap on events per run (not a spec field: `--max-events`).
    #[serde(skip, default = "default_max_events")]
    pub max_events: u64,
}

fn default_max_events() -> u64 {
    DEFAULT_MAX_EVENTS
}

/// `[server]` of a database-server spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbServer {
    /// Must be `cores`: the kind of server (see [`crate::AnySpec`]).
    pub model: String,
    /// Cores (12 as the paper's server; default 12).
    #[serde(default = "default_cores")]
    pub cores: usize,
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

    /// The mean.
    pub fn mean(&self) -> f64 {
        match *self {
            DbDist::Constant { value } => value,
            DbDist::Exponential { mean } => mean,
            DbDist::Uniform { min, max } => (min + max) / 2.0,
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
    pub fn parse(text: &str, file: &str) -> Result<DbSpec, SpecError> {
        let doc = crate::spec::parse_toml(text, file)?;
        DbSpec::from_value(&doc, file)
    }

    /// Check a parsed TOML document as a database-server spec.
    pub fn from_value(doc: &toml::Value, file: &str) -> Result<DbSpec, SpecError> {
        let spec: DbSpec =
            serde_path_to_error::deserialize(doc.clone()).map_err(|e| SpecError {
                file: file.to_string(),
                field: e.path().to_string(),
                message: e.inner().message().to_string(),
            })?;
        spec.check().map_err(|(field, message)| SpecError {
            file: file.to_string(),
            field,
            message,
        })?;
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
        if self.server.model != "cores" {
            return err(
                "server.model",
                format!(
                    "a database-server spec has model = \"cores\", got {:?}",
                    self.server.model
                ),
            );
        }
        if self.server.cores == 0 || self.server.cores > 4096 {
            return err(
                "server.cores",
                format!("must be between 1 and 4096, got {}", self.server.cores),
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
            .cores(self.server.cores)
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
        // Built-in variants by name: `ldf-revenue`, `drr-blend` (α = 0.5 or the sweep's), …
        let (policy, deficit) = match (policy.split_once('-'), deficit) {
            (Some((p @ ("ldf" | "drr"), d @ ("revenue" | "blend" | "fractional"))), None) => {
                (p, Some(d))
            }
            _ => (policy, deficit),
        };
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
            "no-res" | "best-effort" => Ok(Policy::BestEffort),
            other => Err(format!(
                "unknown scheduler {other:?}: {} or a [[scheduler]] name",
                RESERVATION_SCHEDULERS.join(", ")
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
                None => self.policy_of(name, None, None, None, sweep_alpha),
            }
            .map_err(|message| SpecError {
                file: String::new(),
                field: "schedulers".into(),
                message,
            })?;
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
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds of the run (the only field that is not deterministic).
    pub wall_seconds: f64,
}

impl DbRun {
    /// A tenant by name.
    pub fn tenant(&self, name: &str) -> Option<&DbTenantResult> {
        self.tenants.iter().find(|t| t.name == name)
    }
}

/// Run every sweep point under every scheduler, `jobs` at a time; results sweep-major, then
/// scheduler order.
pub fn run_all(spec: &DbSpec, jobs: usize) -> Result<Vec<DbRun>, SimError> {
    run_all_with(spec, jobs, &mut |_| {})
}

/// [`run_all`] reporting the batch's progress.
pub fn run_all_with(
    spec: &DbSpec,
    jobs: usize,
    progress: &mut (dyn FnMut(crate::BatchProgress) + Send),
) -> Result<Vec<DbRun>, SimError> {
    let points: Vec<Option<&DbSweep>> = if spec.sweep.is_empty() {
        vec![None]
    } else {
        spec.sweep.iter().map(Some).collect()
    };
    let mut tasks = Vec::new();
    for p in &points {
        let policies = spec
            .policies(p.and_then(|s| s.alpha))
            .map_err(|e| SimError::spec(format!("{}: {}: {}", spec.name, e.field, e.message)))?;
        for (name, policy) in policies {
            tasks.push((*p, name, policy));
        }
    }
    crate::parallel(tasks.len(), jobs, progress, |i, report| {
        let (point, name, policy) = &tasks[i];
        run_one(spec, *point, name, *policy, report)
    })
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
    /// A core's quantum ends (the [`Cores`] service's event).
    Core(u32),
    /// The scheduler asked to be asked again.
    Retry,
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

/// One database-server run: connections and bursts in front of the reservation scheduler,
/// which feeds the [`Cores`] service.
struct DbSim<'a> {
    spec: &'a DbSpec,
    s: ReserveScheduler<Task>,
    queue: EventQueue<Ev>,
    cores: Cores,
    insts: Vec<Inst>,
    busy: Vec<Option<(Ticket, f64, Task)>>,
    idle: usize,
    retry_at: f64,
    dispatches: u64,
    busy_time: f64,
    events: u64,
    err: &'a dyn Fn(fairlane_core::Error) -> SimError,
}

impl DbSim<'_> {
    fn quantum_of(&self, tenant: usize) -> f64 {
        match self.spec.tenant[self.insts[tenant].spec].workload {
            DbWorkload::Closed { quantum, .. } | DbWorkload::Bursty { quantum, .. } => quantum,
        }
    }
}

impl Model for DbSim<'_> {
    type Event = Ev;
    // Same-instant events first, then the idle cores pick.
    const SETTLES: bool = true;

    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.queue
    }

    fn events(&self) -> u64 {
        self.events
    }

    fn handle(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        self.events += 1;
        let spec = self.spec;
        let e = self.err;
        match ev {
            Ev::Issue { tenant, conn } => {
                let inst = &mut self.insts[tenant];
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
                if self.s.queued() >= MAX_OUTSTANDING {
                    return Err(SimError::overload(format!(
                        "more than {MAX_OUTSTANDING} queries queued at t = {now:.6} s"
                    )));
                }
                self.s
                    .enqueue(Request::new(tenant as u64, 0u32, task), now)
                    .map_err(e)?;
            }
            Ev::Burst { tenant } => {
                let inst = &mut self.insts[tenant];
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
                    self.queue.push(now + gap, Ev::Burst { tenant });
                    for c in 0..start_conns.min(queries) {
                        self.insts[tenant].burst_left -= 1;
                        self.queue.push(now, Ev::Issue { tenant, conn: c });
                    }
                }
            }
            Ev::Core(core) => {
                let q = &mut self.queue;
                let outcome = self
                    .cores
                    .fire(core, now, &mut |t, i| q.push(t, Ev::Core(i)));
                let (slot, left) = match outcome {
                    Outcome::Done { slot } => (slot, 0.0),
                    Outcome::Yield { slot, left, .. } => (slot, left),
                    Outcome::Nothing => return Ok(()),
                };
                if let Some((ticket, start, mut task)) = self.busy[slot as usize].take() {
                    self.idle += 1;
                    let used = now - start;
                    if now > spec.warmup {
                        self.busy_time += now - start.max(spec.warmup);
                    }
                    self.s.complete(ticket, used, now).map_err(e)?;
                    if left > 0.0 {
                        task.left = left;
                        self.s
                            .enqueue(Request::new(task.tenant as u64, 0u32, task), now)
                            .map_err(e)?;
                    } else {
                        self.query_done(task, now);
                    }
                }
            }
            Ev::Retry => {
                if self.retry_at <= now {
                    self.retry_at = f64::INFINITY;
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self, now: f64) -> Result<(), SimError> {
        let e = self.err;
        for core in 0..self.busy.len() {
            if self.idle == 0 {
                break;
            }
            if self.busy[core].is_some() {
                continue;
            }
            match self.s.dequeue(core, now).map_err(e)? {
                Decision::Run(d) => {
                    let task = d.request.payload;
                    let work = Work {
                        cost: task.left,
                        quantum: self.quantum_of(task.tenant),
                        ..Work::default()
                    };
                    let q = &mut self.queue;
                    self.cores
                        .begin(core as u32, work, now, &mut |t, i| q.push(t, Ev::Core(i)));
                    self.busy[core] = Some((d.ticket, now, task));
                    self.idle -= 1;
                    self.dispatches += 1;
                }
                Decision::RetryAt(t) => {
                    if t < self.retry_at {
                        self.retry_at = t;
                        self.queue.push(t, Ev::Retry);
                    }
                    break;
                }
                Decision::Empty => break,
            }
        }
        Ok(())
    }
}

impl DbSim<'_> {
    /// A query finished: record it; its connection thinks and issues the next.
    fn query_done(&mut self, task: Task, now: f64) {
        let spec = self.spec;
        let inst = &mut self.insts[task.tenant];
        if task.issued >= spec.warmup {
            inst.latencies.push(now - task.issued);
        }
        match spec.tenant[inst.spec].workload {
            DbWorkload::Closed { think, .. } => {
                let at = now + think.sample(&mut inst.rng);
                self.queue.push(
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
                    self.queue.push(
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

/// Expected events of a run (an upper estimate for the up-front limit): every connection
/// issuing back to back, every query cut into quanta, bursts.
fn estimated_events(spec: &DbSpec) -> f64 {
    let cores = spec.server.cores as f64;
    let mut quanta_per_s = 0.0f64;
    let mut issues_per_s = 0.0f64;
    for t in &spec.tenant {
        let n = t.count as f64;
        let (q, d) = match t.workload {
            DbWorkload::Closed {
                quantum, demand, ..
            } => (quantum, demand.mean()),
            DbWorkload::Bursty {
                quantum,
                demand,
                period,
                queries,
                ..
            } => {
                issues_per_s += n * queries as f64 / period;
                (quantum, demand.mean())
            }
        };
        // The cores finish at most `cores / min(q, d)` quanta per second.
        quanta_per_s = quanta_per_s.max(cores / q.min(d.max(1e-6)));
    }
    let tenants: usize = spec.tenant.iter().map(|t| t.count).sum();
    let intervals = spec
        .tenant
        .iter()
        .filter_map(|t| t.interval)
        .fold(spec.interval, f64::min);
    // Metering closes every tenant's interval.
    spec.duration * (2.0 * quanta_per_s + issues_per_s + tenants as f64 / intervals)
}

fn run_one(
    spec: &DbSpec,
    point: Option<&DbSweep>,
    sched_name: &str,
    policy: Policy,
    progress: &mut dyn FnMut(f64),
) -> Result<DbRun, SimError> {
    let wall = std::time::Instant::now();
    let err = |x: fairlane_core::Error| {
        SimError::new(
            SimErrorKind::Scheduler,
            format!("{}: {sched_name}: {x}", spec.name),
        )
    };
    let estimate = estimated_events(spec);
    if estimate.is_nan() || estimate > spec.max_events as f64 {
        return Err(SimError::event_cap(format!(
            "{}: refused: about {estimate:.3e} events (quanta of the shortest quantum on {} \
             cores for {} s) exceed the cap of {} (raise it with --max-events)",
            spec.name, spec.server.cores, spec.duration, spec.max_events
        )));
    }
    let mut s: ReserveScheduler<Task> = ReserveConfig::new(policy)
        .cores(spec.server.cores)
        .interval(spec.interval)
        .utilization_cap(spec.utilization_cap)
        .build()
        .map_err(err)?;
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
            insts.push(Inst {
                rng: Rng::new(spec.seed, stream_id(&name)),
                name,
                group: t.name.clone(),
                spec: k,
                latencies: Vec::new(),
                burst_left: 0,
            });
        }
    }
    // The run works on the tenants sorted by name (their ids in the scheduler, the order
    // their first events are scheduled in), so it does not depend on the spec's order; the
    // results go back to spec order at the end.
    let mut spec_pos: Vec<usize> = (0..insts.len()).collect();
    spec_pos.sort_by(|&a, &b| insts[a].name.cmp(&insts[b].name).then(a.cmp(&b)));
    let mut slots: Vec<Option<Inst>> = insts.into_iter().map(Some).collect();
    let mut insts: Vec<Inst> = spec_pos
        .iter()
        .map(|&p| slots[p].take().expect("a permutation"))
        .collect();
    for (i, inst) in insts.iter().enumerate() {
        let terms = spec.tenant[inst.spec].terms();
        s.set_reservation(TenantId(i as u64), terms, 0.0)
            .map_err(err)?;
    }
    let mut queue = EventQueue::default();
    for (i, inst) in insts.iter_mut().enumerate() {
        match spec.tenant[inst.spec].workload {
            DbWorkload::Closed {
                connections, think, ..
            } => {
                for c in 0..connections {
                    let at = think.sample(&mut inst.rng);
                    queue.push(at, Ev::Issue { tenant: i, conn: c });
                }
            }
            DbWorkload::Bursty { period, .. } => {
                let at = period * inst.rng.uniform();
                queue.push(at, Ev::Burst { tenant: i });
            }
        }
    }
    let cores = spec.server.cores;
    let end = spec.duration;
    let mut sim = DbSim {
        spec,
        s,
        queue,
        cores: Cores::new(cores),
        insts,
        busy: vec![None; cores],
        idle: cores,
        retry_at: f64::INFINITY,
        dispatches: 0,
        busy_time: 0.0,
        events: 0,
        err: &err,
    };
    drive(&mut sim, end, spec.max_events, progress)?;
    let DbSim {
        mut s,
        mut insts,
        busy,
        mut busy_time,
        dispatches,
        events,
        ..
    } = sim;
    // Count the quanta still running at the end.
    for (_, start, _) in busy.iter().flatten() {
        busy_time += end - start.max(spec.warmup);
    }
    s.close_intervals(end).map_err(err)?;
    let mut records: Vec<MeterRecord> = s
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
    // Back to spec order: tenants by their spec position, records naming it.
    let mut by_pos: Vec<Option<DbTenantResult>> = (0..tenants.len()).map(|_| None).collect();
    for (i, t) in tenants.into_iter().enumerate() {
        by_pos[spec_pos[i]] = Some(t);
    }
    let tenants: Vec<DbTenantResult> = by_pos.into_iter().flatten().collect();
    for r in &mut records {
        r.tenant = TenantId(spec_pos[r.tenant.0 as usize] as u64);
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
        events,
        wall_seconds: wall.elapsed().as_secs_f64(),
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
