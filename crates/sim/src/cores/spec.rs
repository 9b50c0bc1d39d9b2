//! The sections of a database-server spec (`[server] model = "cores"`, documented in
//! `docs/reservations.md`): serde types that check themselves and name their fields.

use std::collections::BTreeMap;

use fairlane_core::reserve::{Penalty, Policy, Reservation, ReserveConfig};
use serde::Deserialize;

use crate::doc::Doc;
use crate::error::{FieldError, SpecError};
use crate::events::DEFAULT_MAX_EVENTS;
use crate::rng::Rng;
use crate::sched;

pub use crate::sched::RESERVATION_SCHEDULERS;

pub use crate::doc::MAX_GROUP;

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
    #[serde(default = "crate::doc::default::seed")]
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

impl DbScheduler {
    /// Its policy; a sweep point's `alpha` overrides the entry's.
    fn policy(&self, sweep_alpha: Option<f64>) -> Result<Policy, String> {
        sched::reserve_policy(
            &self.policy,
            self.deficit.as_deref(),
            self.alpha,
            self.boost,
            sweep_alpha,
        )
    }
}

/// A tenant (or `count` identical ones named `name-0`, `name-1`, …).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DbTenant {
    /// Name (group name when `count > 1`).
    pub name: String,
    /// How many.
    #[serde(default = "crate::doc::default::one_count")]
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
    pub(crate) fn sample(&self, rng: &mut Rng) -> f64 {
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

    fn check(&self, what: &str) -> Result<(), FieldError> {
        let ok = |x: f64| x.is_finite() && x >= 0.0;
        let fine = match *self {
            DbDist::Constant { value } => ok(value),
            DbDist::Exponential { mean } => ok(mean),
            DbDist::Uniform { min, max } => ok(min) && ok(max) && min <= max,
        };
        if fine {
            Ok(())
        } else {
            Err(FieldError::new(
                what,
                format!("{what}: values must be finite, ≥ 0 (and min ≤ max)"),
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
        DbSpec::from_doc(&Doc::parse(text, file, ".".into())?)
    }

    /// Check a parsed document as a database-server spec.
    pub fn from_doc(doc: &Doc) -> Result<DbSpec, SpecError> {
        let spec: DbSpec = doc.typed()?;
        spec.check().map_err(|e| e.in_file(&doc.file))?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), FieldError> {
        if !(self.duration.is_finite() && self.duration > 0.0) {
            return Err(FieldError::new(
                "duration",
                format!("must be > 0, got {}", self.duration),
            ));
        }
        if !(self.warmup >= 0.0 && self.warmup < self.duration) {
            return Err(FieldError::new(
                "warmup",
                format!("must be in [0, duration), got {}", self.warmup),
            ));
        }
        self.server.check().map_err(|e| e.under("server"))?;
        if self.tenant.is_empty() {
            return Err(FieldError::new("tenant", "at least one tenant is needed"));
        }
        if self.schedulers.is_empty() && self.scheduler.is_empty() {
            return Err(FieldError::new("schedulers", "name at least one scheduler"));
        }
        for (i, t) in self.tenant.iter().enumerate() {
            t.check().map_err(|e| e.under(&format!("tenant[{i}]")))?;
        }
        for (i, s) in self.sweep.iter().enumerate() {
            if let Some(name) = s
                .counts
                .keys()
                .find(|n| self.tenant.iter().all(|t| &t.name != *n))
            {
                return Err(FieldError::new(
                    format!("sweep[{i}].counts.{name}"),
                    "no tenant has this name",
                ));
            }
        }
        self.check_schedulers()?;
        let cfg = ReserveConfig::new(Policy::ldf())
            .cores(self.server.cores)
            .interval(self.interval)
            .utilization_cap(self.utilization_cap);
        if let Err(fairlane_core::Error::InvalidConfig { field, reason }) = cfg.validate() {
            return Err(FieldError::new(field, reason));
        }
        Ok(())
    }

    fn check_schedulers(&self) -> Result<(), FieldError> {
        for (i, name) in self.schedulers.iter().enumerate() {
            if self.scheduler.iter().all(|s| &s.name != name) {
                sched::reserve_policy(name, None, None, None, None)
                    .map_err(|m| FieldError::new(format!("schedulers[{i}]"), m))?;
            }
        }
        for (i, s) in self.scheduler.iter().enumerate() {
            s.policy(None)
                .map_err(|m| FieldError::new(format!("scheduler[{i}]"), m))?;
        }
        Ok(())
    }

    /// The (name, policy) pairs to run at a sweep point: `schedulers`, then the
    /// `[[scheduler]]` entries they do not name.
    pub(crate) fn policies(
        &self,
        sweep_alpha: Option<f64>,
    ) -> Result<Vec<(String, Policy)>, String> {
        let mut out = Vec::new();
        let mut names: Vec<&str> = self.schedulers.iter().map(String::as_str).collect();
        for s in &self.scheduler {
            if !names.contains(&s.name.as_str()) {
                names.push(&s.name);
            }
        }
        for name in names {
            let p = match self.scheduler.iter().find(|s| s.name == name) {
                Some(s) => s.policy(sweep_alpha),
                None => sched::reserve_policy(name, None, None, None, sweep_alpha),
            }?;
            out.push((name.to_string(), p));
        }
        Ok(out)
    }

    /// The points to run: each sweep point, or the spec alone.
    pub(crate) fn points(&self) -> Vec<Option<&DbSweep>> {
        if self.sweep.is_empty() {
            vec![None]
        } else {
            self.sweep.iter().map(Some).collect()
        }
    }
}

impl DbServer {
    fn check(&self) -> Result<(), FieldError> {
        crate::error::server_model("a database-server", "cores", &self.model)?;
        if self.cores == 0 || self.cores > 4096 {
            return Err(FieldError::new(
                "cores",
                format!("must be between 1 and 4096, got {}", self.cores),
            ));
        }
        Ok(())
    }
}

impl DbTenant {
    /// Its reservation terms.
    pub(crate) fn terms(&self) -> Reservation {
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

    fn check(&self) -> Result<(), FieldError> {
        if self.count > MAX_GROUP {
            return Err(FieldError::new(
                "count",
                format!("must be at most {MAX_GROUP}, got {}", self.count),
            ));
        }
        if let Err(e) = self.terms().validate() {
            return Err(match e {
                fairlane_core::Error::InvalidConfig { field, reason } => {
                    FieldError::new(field, reason)
                }
                other => FieldError::new("terms", other.to_string()),
            });
        }
        self.workload.check().map_err(|e| e.under("workload"))
    }
}

impl DbWorkload {
    fn check(&self) -> Result<(), FieldError> {
        let (q, conns) = match *self {
            DbWorkload::Closed {
                connections,
                demand,
                think,
                quantum,
            } => {
                demand.check("demand")?;
                think.check("think")?;
                (quantum, connections)
            }
            DbWorkload::Bursty {
                period,
                connections,
                demand,
                quantum,
                ..
            } => {
                demand.check("demand")?;
                if !(period.is_finite() && period > 0.0) {
                    return Err(FieldError::new(
                        "period",
                        format!("must be > 0, got {period}"),
                    ));
                }
                (quantum, connections)
            }
        };
        if !(q.is_finite() && q > 0.0) {
            return Err(FieldError::new("quantum", format!("must be > 0, got {q}")));
        }
        if conns == 0 {
            return Err(FieldError::new("connections", "must be ≥ 1"));
        }
        Ok(())
    }

    /// The task's quantum.
    pub(crate) fn quantum(&self) -> f64 {
        match *self {
            DbWorkload::Closed { quantum, .. } | DbWorkload::Bursty { quantum, .. } => quantum,
        }
    }

    /// The CPU demand of each query.
    pub(crate) fn demand(&self) -> DbDist {
        match *self {
            DbWorkload::Closed { demand, .. } | DbWorkload::Bursty { demand, .. } => demand,
        }
    }
}
