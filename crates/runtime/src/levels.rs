//! Priority levels on the pool and the gate: where a request goes ([`Route`]), why a level
//! refused it ([`LevelRefusal`]), the gate's exempt bookkeeping, and the debug snapshot of
//! the levels ([`LevelSnapshot`]) both executors serve. The scheduling itself is the core's
//! `LevelScheduler` (docs/priority-levels.md); nothing here runs unless levels are configured.

use fairlane_core::{BoxedScheduler, LevelId};
use serde::Serialize;

use crate::error::LevelRefusal;

/// Where a request goes among priority levels: its level (an index into the levels'
/// configuration, or [`LevelId::CATCH_ALL`]) and its flow distinguisher (0: the tenant alone;
/// otherwise the level's fair scheduler shares among (tenant, distinguisher) pairs, APF's
/// `ByUser`). Executors without levels ignore it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Route {
    /// The level.
    pub level: LevelId,
    /// The flow distinguisher.
    pub distinguisher: u64,
}

impl Route {
    /// Level `level`, the tenant alone as the flow.
    pub fn level(level: LevelId) -> Self {
        Route {
            level,
            distinguisher: 0,
        }
    }

    /// The same level, the flow being (tenant, `distinguisher`).
    pub fn distinguished(mut self, distinguisher: u64) -> Self {
        self.distinguisher = distinguisher;
        self
    }
}

impl From<LevelId> for Route {
    fn from(level: LevelId) -> Self {
        Route::level(level)
    }
}

impl LevelRefusal {
    /// The scheduler's refusal as a level's, if it is one (the level's name read from the
    /// scheduler: the refusal is the cold path).
    pub(crate) fn from_scheduler(
        e: fairlane_core::Error,
        sched: &BoxedScheduler,
    ) -> Result<Self, fairlane_core::Error> {
        match e {
            fairlane_core::Error::LevelFull { level, limit } => {
                let name = sched
                    .levels()
                    .iter()
                    .find(|v| v.id == level)
                    .map_or_else(|| level.to_string(), |v| v.name.to_string());
                Ok(LevelRefusal::Full { level, name, limit })
            }
            fairlane_core::Error::UnknownLevel(level) => Ok(LevelRefusal::Unknown(level)),
            e => Err(e),
        }
    }
}

/// One priority level as an executor's debug dump shows it (APF's `dump_priority_levels`;
/// the proxy's `/debug/priority_levels` serves a list of these as JSON).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LevelSnapshot {
    /// Its id (what [`Route::level`] names it by).
    pub id: u32,
    /// Its name.
    pub name: String,
    /// Exempt: admitted ahead of every level (by the gate, without a seat).
    pub exempt: bool,
    /// The level catch-all requests go to.
    pub catch_all: bool,
    /// Its nominal concurrency shares.
    pub shares: f64,
    /// NominalCL: its part of ServerCL (0 for an exempt level).
    pub nominal_cl: usize,
    /// CurrentCL: the seats it may hold now.
    pub current_cl: usize,
    /// `nominal − lendable`: the seats it never lends.
    pub min_cl: usize,
    /// `nominal + borrowing limit`, at most ServerCL.
    pub max_cl: usize,
    /// Requests of the level holding a seat or a thread now (an exempt level's, on the gate:
    /// those admitted without a seat and not yet released).
    pub seats_in_use: usize,
    /// Seats of its nominal part lent to other levels now.
    pub lent: usize,
    /// Seats held beyond its nominal part now.
    pub borrowed: usize,
    /// Requests of the level queued.
    pub queued: usize,
    /// Flows the level knows.
    pub flows: usize,
    /// Its queue limit, if any.
    pub queue_limit: Option<usize>,
    /// Requests the gate admitted at this exempt level without a seat, so far (0 otherwise).
    pub exempt_admitted: u64,
}

/// The scheduler's levels as snapshots; the gate's exempt counts fill the exempt levels in.
pub(crate) fn snapshot(sched: &BoxedScheduler, exempt: Option<&Exempt>) -> Vec<LevelSnapshot> {
    sched
        .levels()
        .iter()
        .map(|v| {
            let i = v.id.0 as usize;
            let (admitted, holding) = match exempt {
                Some(e) if v.exempt => (
                    e.admitted.get(i).copied().unwrap_or(0),
                    e.holding.get(i).copied().unwrap_or(0),
                ),
                _ => (0, 0),
            };
            LevelSnapshot {
                id: v.id.0,
                name: v.name.to_string(),
                exempt: v.exempt,
                catch_all: v.catch_all,
                shares: v.shares,
                nominal_cl: v.nominal,
                current_cl: v.current,
                min_cl: v.min,
                max_cl: v.max,
                seats_in_use: v.seats_in_use + holding,
                lent: v.lent(),
                borrowed: v.borrowed(),
                queued: v.queued,
                flows: v.flows,
                queue_limit: v.queue_limit,
                exempt_admitted: admitted,
            }
        })
        .collect()
}

/// The gate's exempt levels: which level ids are exempt (re-read at every reload), and per
/// level the requests admitted without a seat and those holding one now. Empty without
/// levels, and a catch-all request is never exempt: the flat path checks one comparison.
#[derive(Debug, Default)]
pub(crate) struct Exempt {
    is: Vec<bool>,
    admitted: Vec<u64>,
    holding: Vec<usize>,
}

impl Exempt {
    /// Re-read which levels are exempt (at build and after a reload); the counts stay.
    pub fn refresh(&mut self, sched: &BoxedScheduler) {
        let views = sched.levels();
        let n = views.iter().map(|v| v.id.0 as usize + 1).max().unwrap_or(0);
        self.is = vec![false; n];
        for v in &views {
            self.is[v.id.0 as usize] = v.exempt;
        }
        self.admitted.resize(n.max(self.admitted.len()), 0);
        self.holding.resize(n.max(self.holding.len()), 0);
    }

    /// Whether requests of `level` are admitted without a seat.
    #[inline]
    pub fn is_exempt(&self, level: LevelId) -> bool {
        level != LevelId::CATCH_ALL && self.is.get(level.0 as usize).copied().unwrap_or(false)
    }

    /// An exempt request of `level` was admitted.
    pub fn admit(&mut self, level: LevelId) {
        let i = level.0 as usize;
        self.admitted[i] += 1;
        self.holding[i] += 1;
    }

    /// An exempt request of `level` was released.
    pub fn release(&mut self, level: LevelId) {
        if let Some(h) = self.holding.get_mut(level.0 as usize) {
            *h = h.saturating_sub(1);
        }
    }

    /// Exempt requests admitted so far, over all levels.
    pub fn admitted_total(&self) -> u64 {
        self.admitted.iter().sum()
    }

    /// Exempt requests holding now, over all levels.
    pub fn holding_total(&self) -> usize {
        self.holding.iter().sum()
    }
}
