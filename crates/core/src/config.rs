//! Building schedulers by name: the algorithms, their presets, and validation.

use std::fmt;
use std::str::FromStr;

use crate::clock::VirtualClock;
use crate::drr::Drr;
use crate::edf::Edf;
use crate::estimate::{CostEstimator, EstimatorKind};
use crate::fifo::Fifo;
use crate::interposed::{StartTag, Variant};
use crate::levels::Inner;
use crate::queued::Queued;
use crate::rw::Rw;
use crate::scheduler::Scheduler;
use crate::select::{Eligible, MinFinish, Staggered};
use crate::tags::{Charging, Clock, TagScheduler};
use crate::types::{Error, TenantId};
use crate::vtc::{Lift, Vtc};

/// The scheduling algorithms of the core.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// First come, first served.
    Fifo,
    /// Deficit Round Robin (Shreedhar & Varghese).
    Drr,
    /// Start-time Fair Queueing (Goyal et al.): smallest start tag; v = start tag of the last
    /// dispatched request, as SFQ(D) in Jin et al. §3.2.
    Sfq,
    /// WFQ over n workers (Blanquer & Özden's MSFQ; 2DFQ §2 calls it WFQ): smallest finish tag.
    Wfq,
    /// WF²Q over n workers, the work-conserving extension 2DFQ §2 compares against: smallest
    /// finish tag among requests with `S ≤ v`.
    Wf2q,
    /// Two-Dimensional Fair Queueing (2DFQ §4): smallest finish tag among requests eligible on
    /// worker `i` of `n`, i.e. with `S − (i/n)·l ≤ v`.
    TwoDfq,
    /// Min-SFQ(D) (Jin et al. §3.1): SFQ with v = the smallest start tag of any outstanding
    /// request. Unfair by design; kept to show why.
    MinSfq,
    /// FSFQ(D) (Jin et al. §3.3): SFQ(D) plus adjusted tags that favour a flow arriving after
    /// others took its share of the D slots.
    Fsfq,
    /// Request Windows RW(D) (Jin et al. §4): each flow may have `D·u·φ_f/Σφ` of cost
    /// outstanding. Not work-conserving.
    Rw,
    /// Earliest Deadline First on per-tenant response-time targets (Facade; Jin et al.'s
    /// baseline). Ignores weights.
    Edf,
    /// The Virtual Token Counter (Sheng et al., OSDI '24): the backlogged tenant with the
    /// smallest counter of service received; a tenant that becomes backlogged is lifted
    /// ([`Config::lift`]).
    Vtc,
}

impl Algorithm {
    /// Every algorithm, in a stable order.
    pub const ALL: [Algorithm; 11] = [
        Algorithm::Fifo,
        Algorithm::Drr,
        Algorithm::Sfq,
        Algorithm::Wfq,
        Algorithm::Wf2q,
        Algorithm::TwoDfq,
        Algorithm::MinSfq,
        Algorithm::Fsfq,
        Algorithm::Rw,
        Algorithm::Edf,
        Algorithm::Vtc,
    ];

    /// The short name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Fifo => "fifo",
            Algorithm::Drr => "drr",
            Algorithm::Sfq => "sfq",
            Algorithm::Wfq => "wfq",
            Algorithm::Wf2q => "wf2q",
            Algorithm::TwoDfq => "2dfq",
            Algorithm::MinSfq => "minsfq",
            Algorithm::Fsfq => "fsfq",
            Algorithm::Rw => "rw",
            Algorithm::Edf => "edf",
            Algorithm::Vtc => "vtc",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The presets [`Config::preset`] accepts.
pub const PRESETS: [&str; 17] = [
    "fifo", "drr", "sfq", "wfq", "wf2q", "2dfq", "wfqe", "wf2qe", "2dfqe", "drre", "minsfq",
    "fsfq", "rw", "edf", "vtc", "vtce", "lcf",
];

/// The most workers (threads, issue slots, cores) a scheduler serves. 2DFQ keeps one
/// eligibility lane per worker in every tenant's node, so `set_workers(u32::MAX)` used to ask
/// for gigabytes per tenant and abort the process; 65,536 is far beyond any pool
/// or upstream depth.
pub const MAX_WORKERS: usize = 1 << 16;

pub(crate) fn check_workers(workers: usize) -> Result<usize, Error> {
    if workers == 0 || workers > MAX_WORKERS {
        return Err(Error::InvalidConfig {
            field: "workers",
            reason: format!("must be in 1..={MAX_WORKERS}, got {workers}"),
        });
    }
    Ok(workers)
}

/// A `dequeue` for a worker the scheduler does not have.
pub(crate) fn check_worker(worker: usize, workers: usize) -> Result<(), Error> {
    if worker >= workers {
        return Err(Error::InvalidWorker { worker, workers });
    }
    Ok(())
}

/// How to build a scheduler.
///
/// ```
/// use fairlane_core::{Config, EstimatorKind, VirtualClock};
/// // 2DFQᴱ as evaluated in the paper (§6.2): pessimistic estimation with α = 0.99,
/// // retroactive and refresh charging, on 32 worker threads.
/// let s = Config::preset("2dfqe").unwrap().workers(32).build::<u64>().unwrap();
/// assert_eq!(s.name(), "2dfqe");
/// // WFQ with known costs and the exact GPS virtual time of 16 workers × 1000 units/s.
/// let s = Config::preset("wfq").unwrap().workers(16)
///     .clock(VirtualClock::Gps { capacity: 16_000.0 }).build::<()>().unwrap();
/// assert_eq!(s.name(), "wfq");
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Number of workers, in 1..=[`MAX_WORKERS`].
    pub workers: usize,
    /// How unknown costs are estimated.
    pub estimator: EstimatorKind,
    /// Virtual time for the tag-based algorithms; `None` picks the algorithm's default
    /// (`LastDispatched` for SFQ, `Approximate` otherwise).
    pub clock: Option<VirtualClock>,
    /// Retroactive and refresh charging.
    pub charging: Charging,
    /// Weight of tenants not given one, in [`MIN_WEIGHT`](crate::MIN_WEIGHT),
    /// [`MAX_WEIGHT`](crate::MAX_WEIGHT)] like every weight.
    pub default_weight: f64,
    /// DRR's quantum per unit weight; `None` = the largest charge/weight seen.
    pub drr_quantum: Option<f64>,
    /// RW(D)'s window per issue slot, in cost units: flow f may have
    /// `workers · window_unit · φ_f/Σφ` of cost outstanding. 1 when requests cost one unit.
    pub window_unit: f64,
    /// VTC's counter lift (the paper's rule unless set).
    pub lift: Lift,
}

impl Config {
    /// An algorithm with known costs (oracle), one worker, both chargings, weight 1.
    pub fn new(algorithm: Algorithm) -> Self {
        Config {
            algorithm,
            workers: 1,
            estimator: EstimatorKind::Oracle,
            clock: None,
            charging: Charging::default(),
            default_weight: 1.0,
            drr_quantum: None,
            window_unit: 1.0,
            lift: Lift::Paper,
        }
    }

    /// A named preset: `fifo`, `drr`, `sfq`, `wfq`, `wf2q`, `2dfq` (known costs), or `wfqe`,
    /// `wf2qe` (per-tenant-per-class EMA, α = 0.99) and `2dfqe` (pessimistic L_max,
    /// α = 0.99), the 2DFQ paper's §6.2 configurations; `drre` (DRR with the EMA); and the
    /// interposed schedulers `minsfq`, `sfq` (SFQ(D)), `fsfq`, `rw` and `edf` with known
    /// costs (workers = the depth D). Estimated presets start unseen pairs at
    /// an estimate of 1 cost unit; set [`Config::estimator`] to change it. `vtc` is the
    /// Virtual Token Counter (Sheng et al., OSDI '24), `vtce` VTC with the artifact's
    /// length predictor (an EMA of 1/5 starting at 0, §4.4) and `lcf` the paper's Least
    /// Counter First baseline (VTC without the lift); see the `vtc` module's unit convention.
    pub fn preset(name: &str) -> Result<Self, Error> {
        let ema = EstimatorKind::Ema {
            alpha: 0.99,
            initial: 1.0,
        };
        let pessimistic = EstimatorKind::Pessimistic {
            alpha: 0.99,
            initial: 1.0,
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "fifo" => Config::new(Algorithm::Fifo),
            "drr" => Config::new(Algorithm::Drr),
            "sfq" => Config::new(Algorithm::Sfq),
            "wfq" => Config::new(Algorithm::Wfq),
            "wf2q" => Config::new(Algorithm::Wf2q),
            "2dfq" => Config::new(Algorithm::TwoDfq),
            "wfqe" => Config::new(Algorithm::Wfq).estimator(ema),
            "wf2qe" => Config::new(Algorithm::Wf2q).estimator(ema),
            "2dfqe" => Config::new(Algorithm::TwoDfq).estimator(pessimistic),
            "drre" => Config::new(Algorithm::Drr).estimator(ema),
            "minsfq" => Config::new(Algorithm::MinSfq),
            "fsfq" => Config::new(Algorithm::Fsfq),
            "rw" => Config::new(Algorithm::Rw),
            "edf" => Config::new(Algorithm::Edf),
            "vtc" => Config::new(Algorithm::Vtc),
            "vtce" => Config::new(Algorithm::Vtc).estimator(EstimatorKind::Ema {
                alpha: 0.8,
                initial: 0.0,
            }),
            "lcf" => Config::new(Algorithm::Vtc).lift(Lift::Never),
            _ => {
                return Err(Error::InvalidConfig {
                    field: "scheduler",
                    reason: format!("unknown scheduler {name:?}; known: {}", PRESETS.join(", ")),
                })
            }
        })
    }

    setters! {
        /// Set the number of workers.
        workers(workers: usize) => workers = workers;
        /// Set the estimator.
        estimator(estimator: EstimatorKind) => estimator = estimator;
        /// Set the virtual clock.
        clock(clock: VirtualClock) => clock = Some(clock);
        /// Set retroactive and refresh charging.
        charging(charging: Charging) => charging = charging;
        /// Set the weight of tenants not given one.
        default_weight(weight: f64) => default_weight = weight;
        /// Set DRR's quantum per unit weight.
        drr_quantum(quantum: f64) => drr_quantum = Some(quantum);
        /// Set RW(D)'s window per issue slot, in cost units.
        window_unit(unit: f64) => window_unit = unit;
        /// Set VTC's counter lift.
        lift(lift: Lift) => lift = lift;
    }

    /// The one place an executor turns a preset name into a configuration (the pool, the
    /// gate, the proxy and the simulator all come here).
    ///
    /// * `workers`: the executor's workers (threads, seats, issue slots).
    /// * `initial`: the estimate of one typical request in the executor's cost unit (1 ms of
    ///   CPU = 1e6 for the pool, 1 ms of upstream time = 0.001 for the proxy). Estimated
    ///   presets start unseen (tenant, class) pairs at it, and RW(D)'s window is one typical
    ///   request per issue slot (the paper's `n_f = D·φ_f/Σφ` requests).
    /// * `costs_known`: whether the executor can give costs up front. When it cannot (the
    ///   proxy), a known-cost preset gets an EMA estimator (α = 0.99) instead of refusing
    ///   every request; FIFO, EDF and the VTC family never need costs and are left as they
    ///   are.
    ///
    /// Whether the result needs costs up front is [`Config::requires_cost`] (or, once built,
    /// [`Scheduler::requires_cost`]).
    ///
    /// ```
    /// use fairlane_core::Config;
    /// let proxy = Config::for_executor("2dfq", 8, 0.001, false).unwrap();
    /// assert_eq!(proxy.name(), "2dfqe"); // 2DFQ with an EMA estimator
    /// assert!(!proxy.requires_cost());
    /// let pool = Config::for_executor("2dfq", 2, 1e6, true).unwrap();
    /// assert!(pool.requires_cost());
    /// ```
    pub fn for_executor(
        name: &str,
        workers: usize,
        initial: f64,
        costs_known: bool,
    ) -> Result<Self, Error> {
        if !(initial.is_finite() && initial > 0.0) {
            return Err(Error::InvalidConfig {
                field: "initial_estimate",
                reason: format!("must be finite and > 0, got {initial}"),
            });
        }
        let c = Config::preset(name)?;
        let estimator = match c.estimator {
            EstimatorKind::Oracle if costs_known => EstimatorKind::Oracle,
            EstimatorKind::Oracle => EstimatorKind::Ema {
                alpha: 0.99,
                initial,
            },
            EstimatorKind::LastValue { .. } => EstimatorKind::LastValue { initial },
            EstimatorKind::Ema { alpha, .. } => EstimatorKind::Ema { alpha, initial },
            EstimatorKind::Pessimistic { alpha, .. } => {
                EstimatorKind::Pessimistic { alpha, initial }
            }
        };
        let c = match c.algorithm {
            Algorithm::Fifo | Algorithm::Edf | Algorithm::Vtc => c,
            _ => c.estimator(estimator),
        };
        Ok(c.workers(workers).window_unit(initial))
    }

    /// Whether every request must carry its cost under this configuration: an oracle
    /// estimator or the exact GPS clock, for an algorithm that charges by cost (FIFO, EDF and
    /// VTC never need costs).
    pub fn requires_cost(&self) -> bool {
        !matches!(
            self.algorithm,
            Algorithm::Fifo | Algorithm::Edf | Algorithm::Vtc
        ) && (self.estimator == EstimatorKind::Oracle
            || matches!(self.clock, Some(VirtualClock::Gps { .. })))
    }

    /// The preset-style name of what this config builds (`"2dfqe"`, `"wfq"`, …).
    pub fn name(&self) -> &'static str {
        let estimated = self.estimator != EstimatorKind::Oracle;
        match (self.algorithm, estimated) {
            (Algorithm::Fifo, _) => "fifo",
            (Algorithm::Drr, false) => "drr",
            (Algorithm::Drr, true) => "drre",
            (Algorithm::Sfq, false) => "sfq",
            (Algorithm::Sfq, true) => "sfqe",
            (Algorithm::Wfq, false) => "wfq",
            (Algorithm::Wfq, true) => "wfqe",
            (Algorithm::Wf2q, false) => "wf2q",
            (Algorithm::Wf2q, true) => "wf2qe",
            (Algorithm::TwoDfq, false) => "2dfq",
            (Algorithm::TwoDfq, true) => "2dfqe",
            (Algorithm::MinSfq, false) => "minsfq",
            (Algorithm::MinSfq, true) => "minsfqe",
            (Algorithm::Fsfq, false) => "fsfq",
            (Algorithm::Fsfq, true) => "fsfqe",
            (Algorithm::Rw, false) => "rw",
            (Algorithm::Rw, true) => "rwe",
            (Algorithm::Edf, _) => "edf",
            (Algorithm::Vtc, false) if self.lift == Lift::Never => "lcf",
            (Algorithm::Vtc, true) if self.lift == Lift::Never => "lcfe",
            (Algorithm::Vtc, false) => "vtc",
            (Algorithm::Vtc, true) => "vtce",
        }
    }

    /// Check the settings against each other; the worker count to build with.
    fn check(&self) -> Result<usize, Error> {
        let workers = check_workers(self.workers)?;
        crate::types::check_weight(TenantId(0), self.default_weight).map_err(|_| {
            Error::InvalidConfig {
                field: "default_weight",
                reason: format!(
                    "must be in [{:e}, {:e}] (MIN_WEIGHT, MAX_WEIGHT), got {}",
                    crate::types::MIN_WEIGHT,
                    crate::types::MAX_WEIGHT,
                    self.default_weight
                ),
            }
        })?;
        if let Some(q) = self.drr_quantum {
            if !(q.is_finite() && q > 0.0) {
                return Err(Error::InvalidConfig {
                    field: "drr_quantum",
                    reason: format!("must be finite and > 0, got {q}"),
                });
            }
        }
        if !(self.window_unit.is_finite() && self.window_unit > 0.0) {
            return Err(Error::InvalidConfig {
                field: "window_unit",
                reason: format!("must be finite and > 0, got {}", self.window_unit),
            });
        }
        let interposed = matches!(
            self.algorithm,
            Algorithm::Sfq | Algorithm::MinSfq | Algorithm::Fsfq | Algorithm::Rw | Algorithm::Edf
        );
        if interposed && !matches!(self.clock, None | Some(VirtualClock::LastDispatched)) {
            return Err(Error::InvalidConfig {
                field: "clock",
                reason: format!(
                    "{} keeps its own virtual time (Jin et al. §3); leave the clock unset",
                    self.algorithm
                ),
            });
        }
        if self.algorithm == Algorithm::Vtc && self.clock.is_some() {
            return Err(Error::InvalidConfig {
                field: "clock",
                reason: "vtc keeps counters, not a virtual time; leave the clock unset".into(),
            });
        }
        Ok(workers)
    }

    /// Build the scheduler with a custom estimator instead of [`Config::estimator`].
    pub fn build_with<T: Send + 'static>(
        &self,
        est: Box<dyn CostEstimator>,
    ) -> Result<Box<dyn Scheduler<T> + Send>, Error> {
        Ok(self.build_inner(est)?.boxed())
    }

    /// The scheduler, the virtual-time ones by value (what a priority level holds).
    pub(crate) fn build_inner<T: Send + 'static>(
        &self,
        est: Box<dyn CostEstimator>,
    ) -> Result<Inner<T>, Error> {
        let workers = self.check()?;
        let name = self.name();
        let clock = |default| Clock::new(self.clock.unwrap_or(default));
        let (c, w) = (self.charging, self.default_weight);
        let boxed: Box<dyn Scheduler<T> + Send> = match self.algorithm {
            Algorithm::Fifo => Box::new(Queued(Fifo::new(workers, est, w))),
            Algorithm::Drr => Box::new(Queued(Drr::new(workers, est, c, w, self.drr_quantum))),
            Algorithm::Sfq => Box::new(Queued(StartTag::new(
                name,
                Variant::Sfq,
                workers,
                est,
                c,
                w,
            ))),
            Algorithm::MinSfq => Box::new(Queued(StartTag::new(
                name,
                Variant::MinSfq,
                workers,
                est,
                c,
                w,
            ))),
            Algorithm::Fsfq => Box::new(Queued(StartTag::new(
                name,
                Variant::Fsfq,
                workers,
                est,
                c,
                w,
            ))),
            Algorithm::Rw => Box::new(Queued(Rw::new(name, workers, self.window_unit, est, w))),
            Algorithm::Edf => Box::new(Queued(Edf::new(name, workers, est, w))),
            Algorithm::Vtc => Box::new(Queued(Vtc::new(workers, est, w, self.lift))),
            Algorithm::Wfq => {
                // Only the approximate clock asks for the smallest start tag.
                let clock = clock(VirtualClock::Approximate)?;
                let sel = MinFinish::new(matches!(clock, Clock::Approximate { .. }));
                return Ok(Inner::Wfq(TagScheduler::new(
                    name, workers, sel, clock, est, c, w,
                )));
            }
            Algorithm::Wf2q => {
                let clock = clock(VirtualClock::Approximate)?;
                let sel = Eligible::default();
                return Ok(Inner::Wf2q(TagScheduler::new(
                    name, workers, sel, clock, est, c, w,
                )));
            }
            Algorithm::TwoDfq => {
                let clock = clock(VirtualClock::Approximate)?;
                let sel = Staggered::new(workers);
                return Ok(Inner::TwoDfq(TagScheduler::new(
                    name, workers, sel, clock, est, c, w,
                )));
            }
        };
        Ok(Inner::Boxed(boxed))
    }

    /// Build the scheduler.
    pub fn build<T: Send + 'static>(&self) -> Result<Box<dyn Scheduler<T> + Send>, Error> {
        self.build_with(self.estimator.build()?)
    }
}

impl FromStr for Config {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Config::preset(s)
    }
}
