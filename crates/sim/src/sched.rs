//! The one place the simulator names, configures and builds schedulers: the fair-queueing
//! presets of `fairlane-core` (its [`Config`], with the simulator's defaults: known costs, the
//! exact GPS clock where the algorithm uses one) for the worker pool, the black box and the
//! TAM stages, and the CPU-reservation policies ([`ReserveConfig`]) for the database server.
//! Each kind of server builds its scheduler here ([`build`], [`build_reserve`]) and sets its
//! tenants' weights and targets itself. Priority levels ([`Levels`], a spec's
//! `[[priority_level]]`) put each compared scheduler inside every level ([`build_levels`]).

use fairlane_core::levels::{LevelConfig, LevelsConfig, APF_PERIOD_SECONDS};
use fairlane_core::reserve::{DeficitMode, LdfOptions, Policy, ReserveConfig, ReserveScheduler};
use fairlane_core::{Algorithm, Charging, Config, EstimatorKind, LevelId, Scheduler, VirtualClock};
use serde::Deserialize;

use crate::error::FieldError;

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

/// `[[scheduler]]`: a preset with options.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    /// `fifo`, `drr`, `drre`, `sfq`, `wfq`, `wf2q`, `2dfq`, `wfqe`, `wf2qe`, `2dfqe`.
    pub preset: String,
    /// Name in reports (default: the preset).
    pub name: Option<String>,
    /// `oracle`, `last-value`, `ema`, `pessimistic`.
    pub estimator: Option<String>,
    /// The estimator's α.
    pub alpha: Option<f64>,
    /// The estimate of an unseen (tenant, class).
    pub initial: Option<f64>,
    /// `gps`, `approximate`, `last-dispatched`.
    pub clock: Option<String>,
    /// Retroactive charging (default on).
    pub retroactive: Option<bool>,
    /// Refresh charging (default on).
    pub refresh: Option<bool>,
    /// DRR's quantum per unit weight.
    pub quantum: Option<f64>,
}

/// A scheduler to run: how to build it and its name in reports.
#[derive(Clone, Debug)]
pub struct SchedulerChoice {
    /// Name in reports.
    pub name: String,
    /// The core config (workers are set by the engine).
    pub config: Config,
}

/// Build a core scheduler for `workers` workers (threads, issue slots).
pub fn build<T: Send + 'static>(
    config: &Config,
    workers: usize,
) -> Result<Box<dyn Scheduler<T> + Send>, fairlane_core::Error> {
    config.workers(workers).build::<T>()
}

/// Priority levels above a spec's tenants (`[[priority_level]]`, checked): the levels,
/// highest first, and each tenant's level.
#[derive(Clone, Debug, PartialEq)]
pub struct Levels {
    /// The levels (their fair scheduler is the compared one: `scheduler` is unset).
    pub levels: Vec<LevelConfig>,
    /// Per tenant, in the scenario's order: its level.
    pub of_tenant: Vec<LevelId>,
}

impl Levels {
    /// The levels over `config` (each compared scheduler shares every level among its
    /// tenants) on ServerCL = `workers`, APF's borrowing every 10 simulated seconds.
    pub fn config(&self, config: &Config, workers: usize) -> LevelsConfig {
        let mut c = LevelsConfig::new(config.workers(workers)).adjust_period(APF_PERIOD_SECONDS);
        c.levels = self.levels.clone();
        c
    }

    /// How many levels take seats of ServerCL.
    pub fn non_exempt(&self) -> usize {
        self.levels.iter().filter(|l| !l.exempt).count()
    }
}

/// Build a core scheduler for `workers` workers with priority levels above the tenants, the
/// scheduler `config` describes running inside each level.
pub fn build_levels<T: Send + 'static>(
    config: &Config,
    levels: &Levels,
    workers: usize,
) -> Result<Box<dyn Scheduler<T> + Send>, fairlane_core::Error> {
    levels.config(config, workers).build::<T>()
}

/// Build a CPU-reservation scheduler.
pub fn build_reserve<T>(
    config: ReserveConfig,
) -> Result<ReserveScheduler<T>, fairlane_core::Error> {
    config.build()
}

/// The presets named in a spec's `schedulers = [...]`, each with the simulator's default
/// clock for a server of `capacity` units per second. Errors name the entry
/// (`schedulers[1]`); a CPU-reservation scheduler's name gets a hint.
pub fn presets(names: &[String], capacity: f64) -> Result<Vec<SchedulerChoice>, FieldError> {
    let mut out = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let config = Config::preset(name).map_err(|e| {
            let mut why = core_reason(e);
            if RESERVATION_SCHEDULERS.contains(&name.as_str()) {
                why = format!(
                    "{why} ({name:?} is a CPU-reservation scheduler: it runs on a database \
                     server, [server] model = \"cores\")"
                );
            }
            FieldError::new(format!("schedulers[{i}]"), why)
        })?;
        out.push(SchedulerChoice {
            name: config.name().to_string(),
            config: default_clock(config, capacity),
        });
    }
    Ok(out)
}

fn core_reason(e: fairlane_core::Error) -> String {
    match e {
        fairlane_core::Error::InvalidConfig { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// Known costs and a simulator that knows its capacity: the exact GPS virtual time (2DFQ §6
/// evaluates WFQ, WF²Q and 2DFQ that way). SFQ keeps its own clock; estimators keep the
/// approximation, since GPS needs costs at arrival.
fn default_clock(config: Config, capacity: f64) -> Config {
    let tagged = matches!(
        config.algorithm,
        Algorithm::Wfq | Algorithm::Wf2q | Algorithm::TwoDfq
    );
    if tagged && config.estimator == EstimatorKind::Oracle && config.clock.is_none() {
        config.clock(VirtualClock::Gps { capacity })
    } else {
        config
    }
}

impl SchedulerSpec {
    /// The scheduler this entry describes, on a server of `capacity` units per second.
    /// Errors name the entry's field (`alpha`).
    pub fn resolve(&self, capacity: f64) -> Result<SchedulerChoice, FieldError> {
        let sc = self;
        // Core owns "preset + the executor's initial estimate" (the simulator knows costs up
        // front, so oracle presets stay oracle); the engine sets the workers.
        let given = sc.initial.filter(|i| i.is_finite() && *i > 0.0); // a bad one is named below
        let mut config = Config::for_executor(&sc.preset, 1, given.unwrap_or(1.0), true)
            .map_err(|e| FieldError::new("preset", core_reason(e)))?;
        let (d_alpha, d_initial) = match config.estimator {
            EstimatorKind::Ema { alpha, initial }
            | EstimatorKind::Pessimistic { alpha, initial } => (alpha, initial),
            EstimatorKind::LastValue { initial } => (0.99, initial),
            EstimatorKind::Oracle => (0.99, 1.0),
        };
        let alpha = sc.alpha.unwrap_or(d_alpha);
        let initial = sc.initial.unwrap_or(d_initial);
        if !(alpha.is_finite() && (0.0..1.0).contains(&alpha)) {
            return Err(FieldError::new(
                "alpha",
                format!("must be in [0, 1), got {alpha}"),
            ));
        }
        if !(initial.is_finite() && initial > 0.0) {
            return Err(FieldError::new(
                "initial",
                format!("must be a finite number > 0, got {initial}"),
            ));
        }
        let kind = match sc.estimator.as_deref() {
            None => match config.estimator {
                EstimatorKind::Oracle => EstimatorKind::Oracle,
                EstimatorKind::LastValue { .. } => EstimatorKind::LastValue { initial },
                EstimatorKind::Ema { .. } => EstimatorKind::Ema { alpha, initial },
                EstimatorKind::Pessimistic { .. } => EstimatorKind::Pessimistic { alpha, initial },
            },
            Some("oracle") => EstimatorKind::Oracle,
            Some("last-value") => EstimatorKind::LastValue { initial },
            Some("ema") => EstimatorKind::Ema { alpha, initial },
            Some("pessimistic") => EstimatorKind::Pessimistic { alpha, initial },
            Some(other) => {
                return Err(FieldError::new(
                    "estimator",
                    format!(
                    "unknown estimator {other:?}; allowed: oracle, last-value, ema, pessimistic"
                ),
                ))
            }
        };
        config = config.estimator(kind);
        match sc.clock.as_deref() {
            None => {}
            Some("gps") => config = config.clock(VirtualClock::Gps { capacity }),
            Some("approximate") => config = config.clock(VirtualClock::Approximate),
            Some("last-dispatched") => config = config.clock(VirtualClock::LastDispatched),
            Some(other) => {
                return Err(FieldError::new(
                    "clock",
                    format!("unknown clock {other:?}; allowed: gps, approximate, last-dispatched"),
                ))
            }
        }
        if matches!(config.clock, Some(VirtualClock::Gps { .. })) && kind != EstimatorKind::Oracle {
            return Err(FieldError::new(
                "clock",
                "gps needs known costs (estimator = \"oracle\"); use approximate",
            ));
        }
        config = config.charging(Charging {
            retroactive: sc.retroactive.unwrap_or(true),
            refresh: sc.refresh.unwrap_or(true),
        });
        if let Some(q) = sc.quantum {
            if !(q.is_finite() && q > 0.0) {
                return Err(FieldError::new(
                    "quantum",
                    format!("must be a finite number > 0, got {q}"),
                ));
            }
            config = config.drr_quantum(q);
        }
        let config = default_clock(config, capacity);
        let name = sc.name.clone().unwrap_or_else(|| config.name().to_string());
        if name.is_empty() || name.contains([',', '"', '/']) {
            return Err(FieldError::new(
                "name",
                format!("must be non-empty without ',', '\"' or '/', got {name:?}"),
            ));
        }
        Ok(SchedulerChoice { name, config })
    }
}

/// A CPU-reservation policy by name (`ldf`, `drr`, `edf`, `no-res`, or a built-in variant
/// such as `ldf-revenue` or `drr-blend`) with a `[[scheduler]]` entry's options; a sweep
/// point's `alpha` overrides the entry's for `blend`.
pub fn reserve_policy(
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
