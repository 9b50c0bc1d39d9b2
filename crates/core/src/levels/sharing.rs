//! How the levels share ServerCL: a small trait, one implementation per policy.
//!
//! * [`Borrowing`]: APF's. Each level has a current limit (CurrentCL) within
//!   `[nominal − lendable, nominal + borrowing limit]`; the limits always sum to ServerCL, and
//!   are recomputed from the levels' seat demand every adjustment period (and, with early
//!   reclaim, as soon as a level that lent seats has demand it cannot serve).
//! * [`Strict`]: strict bands. A level runs only when every level above it has nothing it
//!   may start, except that a level below its guaranteed part (`nominal − lendable`) always
//!   may: the starvation guard.

use super::alloc::{allocate, round_to, Item, Limits};
use super::demand::Demand;

/// The numbers of one level that sharing works on.
#[derive(Clone, Debug, Default)]
pub(crate) struct LevelState {
    pub exempt: bool,
    /// Gone from the configuration (it had nothing queued or running): no seats, no requests;
    /// its id stays taken, and a reload naming it again revives it.
    pub retired: bool,
    pub shares: f64,
    pub lendable_percent: f64,
    pub borrowing_limit_percent: Option<f64>,
    pub limits: Limits,
    /// The seats the level may hold now (APF's CurrentCL; the cap in strict bands; ServerCL
    /// for an exempt level).
    pub current: usize,
    /// For the dispatch being decided: the level may start a request while `running < open`
    /// (set by [`Sharing::prepare`]).
    pub open: usize,
    pub queued: usize,
    pub running: usize,
    pub demand: Demand,
}

impl LevelState {
    /// Whether the level takes part in sharing ServerCL: neither exempt nor retired.
    #[inline]
    pub fn shares_seats(&self) -> bool {
        !(self.exempt || self.retired)
    }
    /// Whether its seat demand is observed (the scheduler has seen a time).
    pub fn demand_started(&self) -> bool {
        self.demand.started()
    }

    /// A request arrived (+1) or left (−1) at `now`: its seat demand moved.
    #[inline]
    pub fn demand_moved(&mut self, delta: f64, now: f64) {
        self.demand.add(delta, now);
    }
}

/// A way for the levels to share ServerCL.
pub(crate) trait Sharing: Send {
    /// Set every non-exempt level's `current` after ServerCL or the levels changed (their
    /// `limits` are already set), at `now` (−∞ before the first call).
    fn reset(&mut self, levels: &mut [LevelState], server: usize, now: f64);

    /// Before a dispatch decision at `now`, `free` workers being free: set every
    /// non-exempt level's `open`. Returns whether any `current` changed.
    fn prepare(&mut self, levels: &mut [LevelState], server: usize, now: f64, free: usize) -> bool;

    /// From when on [`prepare`](Sharing::prepare) has work (−∞: before every decision); the
    /// scheduler skips the call until then. Asked after every `reset` and `prepare`.
    fn prepare_at(&self) -> f64;

    /// The earliest time a level held back by its `open` may start a request without a
    /// completion (∞: only after one).
    fn retry_at(&self) -> f64;

    /// `"borrowing"` or `"strict"`.
    fn name(&self) -> &'static str;
}

/// APF's borrowing between levels, adjusted every `period` (in the unit of `now`).
#[derive(Debug)]
pub(crate) struct Borrowing {
    pub period: f64,
    pub early_reclaim: bool,
    /// The next adjustment (`None` before the first call).
    next: Option<f64>,
    /// Whether some level lends seats (`current < nominal`): only then can one be short.
    lending: bool,
}

impl Borrowing {
    pub fn new(period: f64, early_reclaim: bool) -> Self {
        Borrowing {
            period,
            early_reclaim,
            next: None,
            lending: false,
        }
    }

    /// APF's adjustment (`updateBorrowingLocked`): close each level's demand period; its
    /// lower bound is `max(min, min(nominal, high watermark))`, its upper bound `max`, its
    /// target `max(lower, smoothed demand)`; ServerCL is allocated as `p · target` clamped to
    /// the bounds, then rounded by largest remainder so that the limits sum to ServerCL.
    fn adjust(&mut self, levels: &mut [LevelState], server: usize, now: f64) -> bool {
        let open: Vec<usize> = (0..levels.len())
            .filter(|&i| levels[i].shares_seats())
            .collect();
        let mut items = Vec::with_capacity(open.len());
        let (mut lower, mut upper) = (Vec::new(), Vec::new());
        for &i in &open {
            let l = &mut levels[i];
            let stats = l.demand.close(now, self.period);
            let hwm = stats.high_watermark.min(usize::MAX as f64) as usize;
            let low = l.limits.min.max(l.limits.nominal.min(hwm));
            let high = l.limits.max.max(low);
            items.push(Item {
                lower: low as f64,
                upper: high as f64,
                target: stats.smoothed.max(low as f64),
            });
            lower.push(low);
            upper.push(high);
        }
        let allocs = allocate(server as f64, &items);
        let current = round_to(server, &allocs, &lower, &upper, |_, _| {
            std::cmp::Ordering::Equal
        });
        let mut changed = false;
        self.lending = false;
        for (k, &i) in open.iter().enumerate() {
            let l = &mut levels[i];
            changed |= l.current != current[k];
            (l.current, l.open) = (current[k], current[k]);
            self.lending |= l.current < l.limits.nominal;
        }
        if now.is_finite() {
            self.next = Some(now + self.period);
        }
        changed
    }
}

impl Sharing for Borrowing {
    fn reset(&mut self, levels: &mut [LevelState], server: usize, now: f64) {
        self.adjust(levels, server, now);
    }

    /// `open` is the current limit (set at each adjustment); adjust when the period is due,
    /// or, with early reclaim, when a lender has requests it may not start.
    #[inline]
    fn prepare(&mut self, levels: &mut [LevelState], server: usize, now: f64, _: usize) -> bool {
        let due = match self.next {
            None => {
                self.next = Some(now + self.period);
                false
            }
            Some(t) => now >= t,
        };
        let short = |l: &LevelState| {
            l.current < l.limits.nominal
                && l.queued > 0
                && l.running >= l.current
                && l.shares_seats()
        };
        if due || (self.early_reclaim && self.lending && levels.iter().any(short)) {
            return self.adjust(levels, server, now);
        }
        false
    }

    fn prepare_at(&self) -> f64 {
        match self.next {
            Some(t) if !(self.early_reclaim && self.lending) => t,
            _ => f64::NEG_INFINITY,
        }
    }

    fn retry_at(&self) -> f64 {
        self.next.unwrap_or(f64::INFINITY)
    }

    fn name(&self) -> &'static str {
        "borrowing"
    }
}

/// Strict bands with the starvation guard: a level's guaranteed part (`nominal − lendable`)
/// is held for it while it has demand for it.
#[derive(Debug)]
pub(crate) struct Strict;

/// Guaranteed seats level `l` has demand for and does not hold.
fn unmet(l: &LevelState) -> usize {
    if !l.shares_seats() {
        0
    } else {
        l.limits.min.saturating_sub(l.running).min(l.queued)
    }
}

impl Sharing for Strict {
    fn reset(&mut self, levels: &mut [LevelState], server: usize, _now: f64) {
        for l in levels.iter_mut().filter(|l| l.shares_seats()) {
            l.current = l.limits.max.min(server);
        }
    }

    /// A level is open up to its cap when it is below its guaranteed part, or when the free
    /// workers leave one for each guaranteed seat another level waits for; else closed.
    fn prepare(&mut self, levels: &mut [LevelState], _: usize, _: f64, free: usize) -> bool {
        let total: usize = levels.iter().map(unmet).sum();
        for l in levels.iter_mut() {
            let guarded = l.running < l.limits.min || free > total - unmet(l);
            l.open = if guarded { l.current } else { 0 };
        }
        false
    }

    fn prepare_at(&self) -> f64 {
        f64::NEG_INFINITY // `open` depends on the free workers
    }

    fn retry_at(&self) -> f64 {
        f64::INFINITY
    }

    fn name(&self) -> &'static str {
        "strict"
    }
}
