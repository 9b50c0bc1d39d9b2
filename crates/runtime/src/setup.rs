//! Choosing the scheduler of an executor. The preset → configuration step is core's
//! ([`Config::for_executor`]); here only "which of the three ways did the user pick", and the
//! builder fields and setters the pool and the gate share ([`Common`], [`common_setters!`]).

use std::fmt;
use std::sync::{Arc, Mutex};

use fairlane_core::levels::LevelsConfig;
use fairlane_core::{BoxedScheduler, ClassId, Config, TenantId};

use crate::error::{config_error, BuildError};
use crate::time::{SharedClock, SystemClock};

/// Where the scheduler comes from.
#[derive(Clone)]
pub(crate) enum SchedulerChoice {
    /// A core preset by name, resolved by [`Config::for_executor`] with the executor's
    /// initial estimate.
    Preset(String),
    /// A configuration used as given (only its worker count is set by the executor).
    Config(Config),
    /// Priority levels above tenants, used as given except ServerCL: the executor's
    /// workers.
    Levels(Box<LevelsConfig>),
    /// A scheduler built by the caller (any policy, LDF reservations included), taken by the
    /// first `build`. Shared so the builder stays `Clone`.
    Built(Arc<Mutex<Option<BoxedScheduler>>>),
}

impl fmt::Debug for SchedulerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedulerChoice::Preset(p) => f.debug_tuple("Preset").field(p).finish(),
            SchedulerChoice::Config(c) => f.debug_tuple("Config").field(c).finish(),
            SchedulerChoice::Levels(c) => f.debug_tuple("Levels").field(c).finish(),
            SchedulerChoice::Built(_) => f.write_str("Built(..)"),
        }
    }
}

impl SchedulerChoice {
    pub fn built(s: BoxedScheduler) -> Self {
        SchedulerChoice::Built(Arc::new(Mutex::new(Some(s))))
    }

    /// Build (or take) the scheduler for `workers` workers; unseen pairs of a preset start
    /// at `initial` cost units.
    pub fn build(
        &self,
        workers: Option<usize>,
        initial: f64,
    ) -> Result<BoxedScheduler, fairlane_core::Error> {
        let default_workers = || std::thread::available_parallelism().map_or(1, |n| n.get());
        let config = match self {
            SchedulerChoice::Preset(name) => {
                Config::for_executor(name, workers.unwrap_or_else(default_workers), initial, true)?
            }
            SchedulerChoice::Config(c) => c.workers(workers.unwrap_or_else(default_workers)),
            SchedulerChoice::Levels(c) => {
                let mut c = (**c).clone();
                c.scheduler = c.scheduler.workers(workers.unwrap_or_else(default_workers));
                return c.build::<u64>();
            }
            SchedulerChoice::Built(cell) => {
                let mut s = cell
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .ok_or_else(|| fairlane_core::Error::InvalidConfig {
                        field: "scheduler",
                        reason: "a built scheduler serves one executor; it was taken by an \
                                 earlier build"
                            .into(),
                    })?;
                if let Some(w) = workers {
                    if w != s.workers() {
                        s.set_workers(w)?;
                    }
                }
                return Ok(s);
            }
        };
        if config.workers == 0 {
            return Err(fairlane_core::Error::InvalidConfig {
                field: "workers",
                reason: "must be at least 1, got 0".into(),
            });
        }
        config.build::<u64>()
    }
}

/// The `Debug` of a request waiting in either executor (the pool's [`PendingTask`],
/// the gate's [`Acquire`]): its type's name, tenant and class.
///
/// [`PendingTask`]: crate::PendingTask
/// [`Acquire`]: crate::Acquire
pub(crate) fn debug_request(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    tenant: TenantId,
    class: ClassId,
) -> fmt::Result {
    f.debug_struct(name)
        .field("tenant", &tenant)
        .field("class", &class)
        .finish_non_exhaustive()
}

pub(crate) fn check_cost(cost: Option<f64>) -> Result<(), fairlane_core::Error> {
    match cost {
        Some(c) if !(c.is_finite() && c >= 0.0) => Err(fairlane_core::Error::InvalidCost {
            what: "request cost",
            value: c,
        }),
        _ => Ok(()),
    }
}

/// What both executors' builders collect the same way: how many workers (the pool's threads,
/// the gate's seats), where the scheduler comes from, the two queue limits and the clock.
/// [`PoolBuilder`](crate::PoolBuilder) and [`GateBuilder`](crate::GateBuilder) each hold one
/// and get their setters for it from [`common_setters!`].
#[derive(Clone)]
pub(crate) struct Common {
    pub workers: Option<usize>,
    pub scheduler: SchedulerChoice,
    pub max_queued: usize,
    pub max_queued_per_tenant: usize,
    pub clock: Option<SharedClock>,
}

impl Default for Common {
    /// The `2dfqe` preset, one worker per core, 100,000 queued of which 10,000 per tenant,
    /// the [`SystemClock`](crate::SystemClock).
    fn default() -> Self {
        Common {
            workers: None,
            scheduler: SchedulerChoice::Preset("2dfqe".into()),
            max_queued: 100_000,
            max_queued_per_tenant: 10_000,
            clock: None,
        }
    }
}

impl fmt::Debug for Common {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Common")
            .field("workers", &self.workers)
            .field("scheduler", &self.scheduler)
            .field("max_queued", &self.max_queued)
            .field("max_queued_per_tenant", &self.max_queued_per_tenant)
            .finish_non_exhaustive()
    }
}

impl Common {
    /// Check the shared fields (`workers` and `max_queued` name the executor's own setters)
    /// and build the scheduler (unseen pairs of a preset at `initial`) and the clock.
    pub fn build(
        self,
        workers: &'static str,
        max_queued: &'static str,
        initial: f64,
    ) -> Result<(BoxedScheduler, SharedClock), BuildError> {
        if self.workers == Some(0) {
            return Err(config_error(workers, "must be at least 1, got 0".into()));
        }
        if self.max_queued == 0 || self.max_queued_per_tenant == 0 {
            return Err(config_error(
                max_queued,
                "queue limits must be at least 1".into(),
            ));
        }
        let sched = self.scheduler.build(self.workers, initial)?;
        let clock = self
            .clock
            .unwrap_or_else(|| Arc::new(SystemClock::new()) as SharedClock);
        Ok((sched, clock))
    }
}

/// The setters of [`Common`]'s fields, written once for both builders (each has a
/// `common: Common` field). `$workers`, `$max` and `$max_per_tenant` are the setters' names
/// (`workers`/`seats`, `max_queued`/`max_waiting`, …); the string arguments finish their
/// documentation in the executor's words.
macro_rules! common_setters {
    (
        $builder:ident,
        $workers:ident: $workers_doc:literal,
        $max:ident: $max_doc:literal,
        $max_per_tenant:ident: $max_per_tenant_doc:literal,
        units: $units:literal,
        with_cost: $with_cost:literal,
        route: $route:literal,
        clock: $clock_doc:literal $(,)?
    ) => {
        #[doc = $workers_doc]
        pub fn $workers(mut self, n: usize) -> Self {
            self.common.workers = Some(n);
            self
        }

        /// A core preset by name (`fifo`, `drr`, `sfq`, `wfq`, `wf2q`, `2dfq`, `wfqe`,
        /// `wf2qe`, `2dfqe`; default `2dfqe`). Its estimator starts unseen (tenant, class)
        #[doc = concat!("pairs at [`initial_estimate`](", stringify!($builder), "::initial_estimate).")]
        /// The known-cost presets (`wfq`, `2dfq`, …) need every request submitted with
        #[doc = concat!($with_cost, ".")]
        pub fn preset(mut self, name: &str) -> Self {
            self.common.scheduler = $crate::setup::SchedulerChoice::Preset(name.to_string());
            self
        }

        /// A scheduler configuration, used as given except for its number of workers.
        #[doc = $units]
        pub fn scheduler(mut self, config: fairlane_core::Config) -> Self {
            self.common.scheduler = $crate::setup::SchedulerChoice::Config(config);
            self
        }

        /// A scheduler built by the caller (any core policy, an LDF
        /// [`ReserveScheduler`](fairlane_core::reserve::ReserveScheduler) with CPU
        /// reservations, the very box the simulator ran). Its worker count is set to
        #[doc = concat!("[`", stringify!($workers), "`](", stringify!($builder), "::", stringify!($workers), ")")]
        /// if given, else the executor has `scheduler.workers()` of them.
        #[doc = $units]
        pub fn with_scheduler(mut self, scheduler: fairlane_core::BoxedScheduler) -> Self {
            self.common.scheduler = $crate::setup::SchedulerChoice::built(scheduler);
            self
        }

        /// Priority levels above tenants (the core's `LevelScheduler`, APF's model: see
        /// docs/priority-levels.md): each request goes to a level
        #[doc = concat!("([`Route`](crate::Route), ", $route, "),")]
        /// the levels share the
        #[doc = concat!("[`", stringify!($workers), "`](", stringify!($builder), "::", stringify!($workers), ")")]
        /// (ServerCL) by their shares, lending and borrowing, and inside each level the
        /// `config.scheduler` (or the level's own) shares among flows. Used as given except
        /// its workers; the adjustment period (`LevelsConfig::adjust_period`) is in the
        /// executor's unit of time (1e10 for 10 s in nanoseconds).
        #[doc = $units]
        pub fn levels(mut self, config: fairlane_core::levels::LevelsConfig) -> Self {
            self.common.scheduler = $crate::setup::SchedulerChoice::Levels(Box::new(config));
            self
        }

        #[doc = $max_doc]
        pub fn $max(mut self, limit: usize) -> Self {
            self.common.max_queued = limit;
            self
        }

        #[doc = $max_per_tenant_doc]
        pub fn $max_per_tenant(mut self, limit: usize) -> Self {
            self.common.max_queued_per_tenant = limit;
            self
        }

        /// The clock the scheduler's `now` is read from (default
        #[doc = concat!("[`SystemClock`](crate::SystemClock)). ", $clock_doc)]
        pub fn clock(mut self, clock: impl $crate::Clock) -> Self {
            self.common.clock = Some(std::sync::Arc::new(clock));
            self
        }
    };
}
pub(crate) use common_setters;

/// The methods the pool and the gate share over their scheduler, written once (each has a
/// `shared` with `lock()` → `sched`, `stats`, `errors`, and `now()` and `name`); the strings
/// are their documentation in the executor's words.
macro_rules! scheduler_views {
    (
        set_weight: $weight:literal,
        tenant: $tenant:literal,
        metrics: $metrics:literal,
        errors: $errors:literal $(,)?
    ) => {
        #[doc = $weight]
        pub fn set_weight(
            &self,
            tenant: impl Into<$crate::TenantId>,
            weight: f64,
        ) -> Result<(), ::fairlane_core::Error> {
            let mut st = self.shared.lock();
            let now = self.shared.now();
            st.sched.set_weight(tenant.into(), weight, now)
        }

        #[doc = $tenant]
        pub fn tenant(&self, tenant: impl Into<$crate::TenantId>) -> Option<$crate::TenantView> {
            self.shared.lock().sched.tenant(tenant.into())
        }

        #[doc = $metrics]
        pub fn metrics(&self) -> $crate::MetricsSnapshot {
            self.shared.lock().stats.snapshot()
        }

        /// The scheduler's preset-style name (`"2dfqe"`, `"fifo"`, …).
        pub fn scheduler_name(&self) -> &'static str {
            self.shared.name
        }

        #[doc = $errors]
        pub fn scheduler_errors(&self) -> u64 {
            self.shared.lock().errors
        }
    };
}
pub(crate) use scheduler_views;
