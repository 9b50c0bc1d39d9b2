//! Selection structures: given each backlogged tenant's tags, which tenant does a worker
//! serve next. They hold only tags; bookkeeping and charging live in `tags.rs`.

mod staggered;

pub(crate) use staggered::Staggered;

use crate::util::IndexedHeap;

/// A backlogged tenant's tags: start tag S_f, the head request's charge l, finish tag
/// F = S_f + l/φ_f, and the tie-breaker (the tenant id).
#[derive(Clone, Copy, Debug, PartialEq)]
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

/// WF²Q over n workers (2DFQ §2): the smallest finish tag among tenants with `S ≤ v`.
///
/// Two heaps: tenants not yet eligible by start tag, eligible ones by finish tag. Virtual time
/// never decreases, so a tenant moves from `waiting` to `eligible` at most once per tag change:
/// O(log T) per operation.
#[derive(Default)]
pub(crate) struct Eligible {
    waiting: IndexedHeap,
    eligible: IndexedHeap,
    /// Virtual time of the last selection; everything in `eligible` has `S ≤ v`.
    v: f64,
    finishes: Vec<f64>,
    ties: Vec<u64>,
}

impl Selector for Eligible {
    fn set(&mut self, t: u32, key: TagKey) {
        let i = t as usize;
        if i >= self.finishes.len() {
            self.finishes.resize(i + 1, 0.0);
            self.ties.resize(i + 1, 0);
        }
        self.finishes[i] = key.finish;
        self.ties[i] = key.tie;
        if key.start <= self.v {
            self.waiting.remove(t);
            self.eligible.set(t, key.finish, key.tie);
        } else {
            self.eligible.remove(t);
            self.waiting.set(t, key.start, key.tie);
        }
    }
    fn remove(&mut self, t: u32) {
        self.waiting.remove(t);
        self.eligible.remove(t);
    }
    fn select(&mut self, _worker: usize, v: f64) -> Option<u32> {
        self.v = self.v.max(v);
        while let Some((t, s)) = self.waiting.peek() {
            if s > self.v {
                break;
            }
            self.waiting.remove(t);
            let tie = self.ties[t as usize];
            self.eligible.set(t, self.finishes[t as usize], tie);
        }
        if let Some((t, _)) = self.eligible.peek() {
            return Some(t);
        }
        // Nobody eligible: serve what becomes eligible first (the smallest start tag), the
        // smallest finish tag among equal start tags. Nothing moves: v has not really advanced.
        let (first, s) = self.waiting.peek()?;
        let mut best = first;
        let mut tied = Vec::new();
        while let Some((t, st)) = self.waiting.peek() {
            if st != s {
                break;
            }
            self.waiting.remove(t);
            tied.push(t);
            let (ft, fb) = (self.finishes[t as usize], self.finishes[best as usize]);
            if ft < fb || (ft == fb && self.ties[t as usize] < self.ties[best as usize]) {
                best = t;
            }
        }
        for t in tied {
            let tie = self.ties[t as usize];
            self.waiting.set(t, s, tie);
        }
        Some(best)
    }
    fn min_start(&self) -> Option<f64> {
        if !self.eligible.is_empty() {
            // Some start tag is ≤ self.v, and the clock is already ≥ self.v.
            return Some(self.v);
        }
        self.waiting.peek().map(|(_, s)| s)
    }
    fn len(&self) -> usize {
        self.waiting.len() + self.eligible.len()
    }
    fn set_workers(&mut self, _: usize) {}
}
