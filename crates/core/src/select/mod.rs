//! Selection structures: given each backlogged tenant's tags, which tenant does a worker
//! serve next. They hold only tags; bookkeeping and charging live in `tags.rs`.

mod eligible;
mod scan;
mod staggered;

pub(crate) use eligible::Eligible;
pub(crate) use staggered::Staggered;

use crate::util::IndexedHeap;

/// A backlogged tenant's tags: start tag S_f, the head request's charge l, finish tag
/// F = S_f + l/φ_f, and the tie-breaker (the tenant id). The default (all zero) fills table
/// rows of tenants not yet set.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct TagKey {
    pub start: f64,
    pub cost: f64,
    pub finish: f64,
    pub tie: u64,
}

/// Chooses among backlogged tenants by their tags.
pub(crate) trait Selector: Send {
    /// Insert a tenant or move it to new tags.
    fn set(&mut self, t: u32, key: TagKey);
    fn remove(&mut self, t: u32);
    /// The tenant worker `worker` serves at virtual time `v`. Work-conserving: when no tenant
    /// is eligible, `v` is taken as the earliest time one becomes eligible.
    fn select(&mut self, worker: usize, v: f64) -> Option<u32>;
    /// The smallest start tag over backlogged tenants (for the approximate clock).
    fn min_start(&self) -> Option<f64>;
    /// The approximate clock's lift: `v`, or the smallest start tag if that is larger
    /// (exactly `max(v, min_start)`; a NaN `v` stays). Structures that know without finding
    /// the smallest start tag override it.
    #[inline]
    fn lift(&self, v: f64) -> f64 {
        match self.min_start() {
            Some(m) if m > v => m,
            _ => v,
        }
    }
    fn len(&self) -> usize;
    /// The number of workers changed (2DFQ's stagger depends on it).
    fn set_workers(&mut self, workers: usize);
}

/// WFQ (MSFQ): the smallest finish tag, eligible or not (2DFQ §2).
#[derive(Default)]
pub(crate) struct MinFinish {
    by_finish: IndexedHeap,
    /// Kept only when the approximate clock needs the smallest start tag.
    by_start: Option<IndexedHeap>,
}

impl MinFinish {
    pub fn new(track_start: bool) -> Self {
        MinFinish {
            by_finish: IndexedHeap::default(),
            by_start: track_start.then(IndexedHeap::default),
        }
    }
}

impl Selector for MinFinish {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        self.by_finish.set(t, key.finish, key.tie);
        if let Some(h) = &mut self.by_start {
            h.set(t, key.start, key.tie);
        }
    }
    fn remove(&mut self, t: u32) {
        self.by_finish.remove(t);
        if let Some(h) = &mut self.by_start {
            h.remove(t);
        }
    }
    fn select(&mut self, _worker: usize, _v: f64) -> Option<u32> {
        self.by_finish.peek().map(|(t, _)| t)
    }
    fn min_start(&self) -> Option<f64> {
        self.by_start
            .as_ref()
            .and_then(|h| h.peek())
            .map(|(_, k)| k)
    }
    fn len(&self) -> usize {
        self.by_finish.len()
    }
    fn set_workers(&mut self, _: usize) {}
}
