//! The configuration of priority levels: typed sections that check themselves and name the
//! field (`levels[2].lendable_percent`) when they refuse.

use super::sharing::{Borrowing, Sharing as Policy, Strict};
use crate::config::{check_workers, Config};
use crate::scheduler::Scheduler;
use crate::types::Error;

/// The largest `shares` a level may have: sums of many levels' shares stay far from
/// overflowing.
pub const MAX_SHARES: f64 = 1e9;

/// APF's adjustment period, 10 s, in seconds: [`LevelsConfig`]'s default. Executors whose
/// `now` is in another unit set [`LevelsConfig::adjust_period`] (1e10 for nanoseconds).
pub const APF_PERIOD_SECONDS: f64 = 10.0;

/// One priority level (APF's `PriorityLevelConfiguration`).
#[derive(Clone, Debug, PartialEq)]
pub struct LevelConfig {
    /// Its name, unique among the levels.
    pub name: String,
    /// Nominal concurrency shares (APF's `nominalConcurrencyShares`): ServerCL is split among
    /// the non-exempt levels in proportion to them. Finite, in (0, [`MAX_SHARES`]]; 0 for an
    /// exempt level.
    pub shares: f64,
    /// The part of its nominal seats other levels may borrow, in [0, 100] % (APF's
    /// `lendablePercent`; default 0).
    pub lendable_percent: f64,
    /// How many seats beyond its nominal ones it may borrow, in [0, 100] % of its nominal
    /// seats; `None` (the default) is unlimited (APF's nil `borrowingLimitPercent`). APF also
    /// accepts values above 100; fairlane does not: leave it unset for more.
    pub borrowing_limit_percent: Option<f64>,
    /// Exempt (APF's `Exempt` type): never queued behind other levels, outside ServerCL.
    pub exempt: bool,
    /// At most this many requests queued in the level (≥ 1; `None`: no limit). An enqueue
    /// beyond it is refused with [`Error::LevelFull`].
    pub queue_limit: Option<usize>,
    /// How long a request may wait in the level's queue, in the unit of `now` (finite, > 0;
    /// `None`: no limit). The scheduler has no clock: the executor enforces it, cancelling
    /// a request that waited this long (see [`LevelView::queue_timeout`]).
    ///
    /// [`LevelView::queue_timeout`]: super::LevelView::queue_timeout
    pub queue_timeout: Option<f64>,
    /// The fair scheduler sharing the level among its flows; `None`: the
    /// [`LevelsConfig::scheduler`]'s. Its `workers` is replaced by the level's seats.
    pub scheduler: Option<Config>,
}

impl LevelConfig {
    /// A level with `shares`, lending nothing, borrowing without limit, no queue limit or
    /// timeout, under the configuration's default fair scheduler.
    pub fn new(name: impl Into<String>, shares: f64) -> Self {
        LevelConfig {
            name: name.into(),
            shares,
            lendable_percent: 0.0,
            borrowing_limit_percent: None,
            exempt: false,
            queue_limit: None,
            queue_timeout: None,
            scheduler: None,
        }
    }

    /// An exempt level: no shares, never queued behind other levels.
    pub fn exempt(name: impl Into<String>) -> Self {
        LevelConfig {
            exempt: true,
            ..LevelConfig::new(name, 0.0)
        }
    }

    setters! {
        /// Set `lendable_percent`.
        lendable_percent(percent: f64) => lendable_percent = percent;
        /// Set `borrowing_limit_percent`.
        borrowing_limit_percent(percent: f64) => borrowing_limit_percent = Some(percent);
        /// Set `queue_limit`.
        queue_limit(limit: usize) => queue_limit = Some(limit);
        /// Set `queue_timeout`, in the unit of `now`.
        queue_timeout(timeout: f64) => queue_timeout = Some(timeout);
        /// Set the level's own fair scheduler.
        scheduler(config: Config) => scheduler = Some(config);
    }

    /// Check every field; the error names `levels[index].field`.
    pub fn check(&self, index: usize) -> Result<(), Error> {
        let bad = |field: &'static str, reason: String| {
            Err(Error::invalid_level(index, &self.name, field, reason))
        };
        let percent = |p: f64| p.is_finite() && (0.0..=100.0).contains(&p);
        if self.name.trim().is_empty() {
            return bad("name", "must not be empty".into());
        }
        if self.exempt && self.shares != 0.0 {
            return bad(
                "shares",
                format!(
                    "an exempt level takes no seats of ServerCL: leave shares at 0, got {}",
                    self.shares
                ),
            );
        }
        if !(self.exempt || self.shares.is_finite() && self.shares > 0.0) {
            return bad(
                "shares",
                format!("must be finite and > 0, got {}", self.shares),
            );
        }
        if self.shares > MAX_SHARES {
            return bad(
                "shares",
                format!("must be at most {MAX_SHARES:e}, got {}", self.shares),
            );
        }
        if !percent(self.lendable_percent) {
            return bad(
                "lendable_percent",
                format!("must be in [0, 100], got {}", self.lendable_percent),
            );
        }
        if let Some(p) = self.borrowing_limit_percent.filter(|&p| !percent(p)) {
            return bad(
                "borrowing_limit_percent",
                format!("must be in [0, 100] (unset: no limit), got {p}"),
            );
        }
        if self.exempt && (self.lendable_percent != 0.0 || self.borrowing_limit_percent.is_some()) {
            let field = if self.lendable_percent != 0.0 {
                "lendable_percent"
            } else {
                "borrowing_limit_percent"
            };
            return bad(
                field,
                "an exempt level neither lends nor borrows: leave it unset".into(),
            );
        }
        if self.queue_limit == Some(0) {
            return bad("queue_limit", "must be at least 1 (unset: no limit)".into());
        }
        if let Some(t) = self.queue_timeout.filter(|t| !(t.is_finite() && *t > 0.0)) {
            return bad("queue_timeout", format!("must be finite and > 0, got {t}"));
        }
        Ok(())
    }
}

/// How the levels share ServerCL.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sharing {
    /// APF's lending and borrowing: each level's current limit moves within
    /// `[nominal − lendable, nominal + borrowing limit]` by its seat demand, the limits
    /// summing to ServerCL, recomputed every `period` (in the unit of `now`; APF: 10 s).
    /// With `early_reclaim`, also as soon as a level that lent seats has requests it cannot
    /// start: its seats come back as the borrowers' requests finish, not a period later.
    Borrowing {
        /// The adjustment period, finite and > 0.
        period: f64,
        /// Adjust at once when a lender is short (default true).
        early_reclaim: bool,
    },
    /// Strict bands, in the order of [`LevelsConfig::levels`]: a level starts a request only
    /// when no level above it may, up to `nominal + borrowing limit` seats; the guard against
    /// starvation is that a level below its guaranteed part (`nominal − lendable`) may always
    /// start one, and other levels take a seat only when the free ones still cover every
    /// level's unmet guaranteed demand. With `lendable_percent = 100` everywhere the bands
    /// are purely strict, and a lower band can starve.
    Strict,
}

impl Default for Sharing {
    fn default() -> Self {
        Sharing::Borrowing {
            period: APF_PERIOD_SECONDS,
            early_reclaim: true,
        }
    }
}

impl Sharing {
    fn check(&self) -> Result<(), Error> {
        match *self {
            Sharing::Borrowing { period, .. } if !(period.is_finite() && period > 0.0) => {
                Err(Error::InvalidConfig {
                    field: "adjust_period",
                    reason: format!("must be finite and > 0 (in the unit of now), got {period}"),
                })
            }
            _ => Ok(()),
        }
    }

    pub(crate) fn policy(&self) -> Box<dyn Policy> {
        match *self {
            Sharing::Borrowing {
                period,
                early_reclaim,
            } => Box::new(Borrowing::new(period, early_reclaim)),
            Sharing::Strict => Box::new(Strict),
        }
    }
}

/// Priority levels above tenants: the levels, the default fair scheduler inside them, the
/// catch-all, and how they share ServerCL (the scheduler's workers).
///
/// ```
/// use fairlane_core::levels::{LevelConfig, LevelsConfig};
/// use fairlane_core::{Config, Decision, LevelId, Request, Scheduler};
///
/// // ServerCL = 4 workers; inside each level, 2DFQᴱ among flows.
/// let config = LevelsConfig::new(Config::preset("2dfqe").unwrap().workers(4))
///     .level(LevelConfig::exempt("exempt"))
///     .level(LevelConfig::new("high", 3.0))
///     .level(LevelConfig::new("catch-all", 1.0).lendable_percent(100.0))
///     .adjust_period(10.0); // APF's 10 s, `now` being in seconds
/// let mut s = config.build::<&str>().unwrap();
/// let high = LevelId(1);
/// s.enqueue(Request::new(7u64, 0u32, "batch"), 0.0).unwrap(); // the catch-all
/// s.enqueue(Request::new(9u64, 0u32, "api").at_level(high), 0.0).unwrap();
/// let views = s.levels();
/// assert_eq!((views[1].nominal, views[2].nominal), (3, 1)); // 3:1 of 4 seats
/// // Levels under their limits go in configuration order: the high level first.
/// let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
/// assert_eq!((d.request.payload, d.request.level), ("api", high));
/// let d = s.dequeue(1, 0.0).unwrap().run().unwrap();
/// assert_eq!((d.request.payload, d.request.level), ("batch", LevelId(2)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct LevelsConfig {
    /// The fair scheduler of levels that do not name their own; its `workers` is ServerCL.
    pub scheduler: Config,
    /// The levels, highest first (the order of strict bands and of ties).
    pub levels: Vec<LevelConfig>,
    /// The level a request of [`LevelId::CATCH_ALL`](crate::LevelId::CATCH_ALL) goes to (APF's
    /// `catch-all`): it must exist and not be exempt. Default `"catch-all"`.
    pub catch_all: String,
    /// How the levels share ServerCL.
    pub sharing: Sharing,
}

impl LevelsConfig {
    /// No levels yet (building it gives `scheduler` itself), catch-all `"catch-all"`, APF's
    /// borrowing every 10 units of `now`.
    pub fn new(scheduler: Config) -> Self {
        LevelsConfig {
            scheduler,
            levels: Vec::new(),
            catch_all: "catch-all".into(),
            sharing: Sharing::default(),
        }
    }

    /// Add a level below the others.
    pub fn level(mut self, level: LevelConfig) -> Self {
        self.levels.push(level);
        self
    }

    /// Name the catch-all level.
    pub fn catch_all(mut self, name: impl Into<String>) -> Self {
        self.catch_all = name.into();
        self
    }

    /// APF's borrowing, adjusted every `period` (in the unit of `now`).
    pub fn adjust_period(mut self, period: f64) -> Self {
        let early_reclaim = match self.sharing {
            Sharing::Borrowing { early_reclaim, .. } => early_reclaim,
            Sharing::Strict => true,
        };
        self.sharing = Sharing::Borrowing {
            period,
            early_reclaim,
        };
        self
    }

    /// Set how the levels share ServerCL.
    pub fn sharing(mut self, sharing: Sharing) -> Self {
        self.sharing = sharing;
        self
    }

    /// ServerCL: the scheduler's workers.
    pub fn workers(&self) -> usize {
        self.scheduler.workers
    }

    /// Check everything but the fair schedulers (checked as they are built): each level,
    /// unique names, the catch-all, the sharing, and ServerCL against the levels. Returns the
    /// catch-all's index.
    pub fn check(&self) -> Result<usize, Error> {
        let catch_all = self.check_levels()?;
        check_server(self.scheduler.workers, self.non_exempt())?;
        Ok(catch_all)
    }

    /// [`check`](LevelsConfig::check) without ServerCL (a reload keeps the executor's).
    pub(crate) fn check_levels(&self) -> Result<usize, Error> {
        if self.levels.len() > super::MAX_LEVELS {
            return Err(Error::InvalidConfig {
                field: "levels",
                reason: format!(
                    "at most {} levels, got {}",
                    super::MAX_LEVELS,
                    self.levels.len()
                ),
            });
        }
        for (i, l) in self.levels.iter().enumerate() {
            l.check(i)?;
            if let Some(j) = self.levels[..i].iter().position(|o| o.name == l.name) {
                return Err(Error::invalid_level(
                    i,
                    &l.name,
                    "name",
                    format!("levels[{j}] has the same name"),
                ));
            }
        }
        let catch_all = self.catch_all_index()?;
        self.sharing.check()?;
        Ok(catch_all)
    }

    /// The fair scheduler of level `l` (its own or the default), workers aside.
    pub(crate) fn scheduler_of(&self, l: &LevelConfig) -> Config {
        l.scheduler.unwrap_or(self.scheduler).workers(1)
    }

    fn catch_all_index(&self) -> Result<usize, Error> {
        let Some(i) = self.levels.iter().position(|l| l.name == self.catch_all) else {
            let names: Vec<&str> = self.levels.iter().map(|l| l.name.as_str()).collect();
            return Err(Error::InvalidConfig {
                field: "catch_all",
                reason: format!(
                    "no level is named {:?} (levels: {}): every request needs a level to fall \
                     into; add one or name the catch-all",
                    self.catch_all,
                    names.join(", ")
                ),
            });
        };
        if self.levels[i].exempt {
            return Err(Error::invalid_level(
                i,
                &self.levels[i].name,
                "exempt",
                "the catch-all level cannot be exempt".into(),
            ));
        }
        Ok(i)
    }

    /// How many levels take seats of ServerCL.
    pub fn non_exempt(&self) -> usize {
        self.levels.iter().filter(|l| !l.exempt).count()
    }

    /// The scheduler: [`LevelScheduler`](super::LevelScheduler) over the levels, or with no
    /// levels the [`scheduler`](LevelsConfig::scheduler) itself, unchanged.
    pub fn build<T: Send + 'static>(&self) -> Result<Box<dyn Scheduler<T> + Send>, Error> {
        if self.levels.is_empty() {
            return self.scheduler.build();
        }
        Ok(Box::new(super::LevelScheduler::new(self)?))
    }
}

/// ServerCL must be a valid worker count and give every non-exempt level a seat.
pub(crate) fn check_server(workers: usize, non_exempt: usize) -> Result<usize, Error> {
    let workers = check_workers(workers)?;
    if workers < non_exempt {
        return Err(Error::InvalidConfig {
            field: "workers",
            reason: format!(
                "{non_exempt} non-exempt priority levels need ServerCL ≥ {non_exempt} workers \
                 (a seat each; exempt levels need none), got {workers}"
            ),
        });
    }
    Ok(workers)
}
