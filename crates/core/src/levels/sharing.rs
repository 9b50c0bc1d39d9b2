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
    pub shares: f64,
    pub lendable_percent: f64,
    pub borrowing_limit_percent: Option<f64>,
    pub limits: Limits,
    /// The seats the level may hold now (APF's CurrentCL; the cap in strict bands; ServerCL
    /// for an exempt level).
    pub current: usize,
    pub queued: usize,
    pub running: usize,
    pub demand: Demand,
}

impl LevelState {
    /// Queued or running changed at `now`.
    #[inline]
    pub fn demand_changed(&mut self, now: f64) {
        self.demand.set(self.queued + self.running, now);
    }
}

/// A way for the levels to share ServerCL.
pub(crate) trait Sharing: Send {
    /// Set every non-exempt level's `current` after ServerCL or the levels changed (their
    /// `limits` are already set), at `now` (−∞ before the first call).
    fn reset(&mut self, levels: &mut [LevelState], server: usize, now: f64);

    /// Before a dispatch decision at `now`. Returns whether any `current` changed.
    fn prepare(&mut self, levels: &mut [LevelState], server: usize, now: f64) -> bool;

    /// Whether non-exempt level `i` may start one more request, `free` workers being free
    /// (at least one). Called after [`prepare`](Sharing::prepare).
    fn admits(&self, levels: &[LevelState], i: usize, free: usize) -> bool;

    /// The earliest time a level refused by [`admits`](Sharing::admits) may be admitted
    /// without a completion (∞: only after one).
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
}

impl Borrowing {
    pub fn new(period: f64, early_reclaim: bool) -> Self {
        Borrowing {
            period,
            early_reclaim,
            next: None,
        }
    }

    /// APF's adjustment (`updateBorrowingLocked`): close each level's demand period; its
    /// lower bound is `max(min, min(nominal, high watermark))`, its upper bound `max`, its
    /// target `max(lower, smoothed demand)`; ServerCL is allocated as `p · target` clamped to
    /// the bounds, then rounded by largest remainder so that the limits sum to ServerCL.
    fn adjust(&mut self, levels: &mut [LevelState], server: usize, now: f64) -> bool {
        let open: Vec<usize> = (0..levels.len()).filter(|&i| !levels[i].exempt).collect();
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
        for (k, &i) in open.iter().enumerate() {
            changed |= levels[i].current != current[k];
            levels[i].current = current[k];
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

    fn prepare(&mut self, levels: &mut [LevelState], server: usize, now: f64) -> bool {
        let due = match self.next {
            None => {
                self.next = Some(now + self.period);
                false
            }
            Some(t) => now >= t,
        };
        let starved = || {
            levels.iter().any(|l| {
                !l.exempt && l.queued > 0 && l.running >= l.current && l.current < l.limits.nominal
            })
        };
        if due || (self.early_reclaim && starved()) {
            return self.adjust(levels, server, now);
        }
        false
    }

    #[inline]
    fn admits(&self, levels: &[LevelState], i: usize, _free: usize) -> bool {
        levels[i].running < levels[i].current
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
#[derive(Debug, Default)]
pub(crate) struct Strict {
    /// Per level: guaranteed seats it has demand for and does not hold.
    unmet: Vec<usize>,
    unmet_total: usize,
}

impl Sharing for Strict {
    fn reset(&mut self, levels: &mut [LevelState], server: usize, _now: f64) {
        for l in levels.iter_mut().filter(|l| !l.exempt) {
            l.current = l.limits.max.min(server);
        }
    }

    fn prepare(&mut self, levels: &mut [LevelState], _server: usize, _now: f64) -> bool {
        self.unmet.clear();
        self.unmet.extend(levels.iter().map(|l| {
            let short = l.limits.min.saturating_sub(l.running);
            if l.exempt {
                0
            } else {
                short.min(l.queued)
            }
        }));
        self.unmet_total = self.unmet.iter().sum();
        false
    }

    /// Below its cap, and either below its guaranteed part or leaving every other level's
    /// unmet guaranteed demand a free worker each.
    #[inline]
    fn admits(&self, levels: &[LevelState], i: usize, free: usize) -> bool {
        let l = &levels[i];
        l.running < l.current
            && (l.running < l.limits.min || free > self.unmet_total - self.unmet[i])
    }

    fn retry_at(&self) -> f64 {
        f64::INFINITY
    }

    fn name(&self) -> &'static str {
        "strict"
    }
}
