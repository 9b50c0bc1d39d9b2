//! WF²Q's selection (2DFQ §2), and 2DFQ's on one worker: the smallest finish tag among
//! tenants whose start tag is at most `v`.
//!
//! With one worker, 2DFQ's only thread has index 0, its stagger `(0/1)·l` is zero, and its
//! eligibility test `S − 0·l ≤ v` is WF²Q's `S ≤ v` (§4): the two select alike, so 2DFQ on one
//! worker uses this structure instead of the lane-minima treap (`staggered.rs`).
//!
//! Two heaps split the backlogged tenants at a threshold `th`: `eligible` holds exactly those
//! with `S ≤ th`, by `(F, id)`; `waiting` the rest, by `(S, id)`. A selection at `v` moves
//! the threshold to `v`; virtual time does not decrease, so tenants only move from `waiting`
//! to `eligible`, at most once per tag change: O(log T) per operation. (A smaller `v` is
//! still answered exactly, by moving tenants back: O(T), and no clock does it.) When nothing
//! is eligible, work conservation serves what becomes eligible first: the smallest start
//! tag, and among equal ones the smallest `(F, id)` (the approximate clock never gets here:
//! it is lifted to the smallest start tag before every selection).

use super::{Selector, TagKey};
use crate::util::{HeapKey, IndexedHeap, Tag};

/// The two-heap eligibility structure. See the module docs.
pub(crate) struct Eligible {
    /// Tenants with `S ≤ th`, by `(F, id)`.
    eligible: IndexedHeap,
    /// Tenants with `S > th`, by `(S, F, id)`.
    waiting: IndexedHeap,
    /// The split; `−∞` until the first selection.
    th: f64,
    /// Each tenant's tags, to move it between the heaps.
    keys: Vec<TagKey>,
    /// Scratch for `earliest`.
    ties: Vec<u32>,
}

impl Default for Eligible {
    fn default() -> Self {
        Eligible {
            eligible: IndexedHeap::default(),
            waiting: IndexedHeap::default(),
            th: f64::NEG_INFINITY,
            keys: Vec::new(),
            ties: Vec::new(),
        }
    }
}

impl Eligible {
    /// Every backlogged tenant and its tags, in tenant order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        (0..self.keys.len() as u32)
            .filter(|&t| self.eligible.contains(t) || self.waiting.contains(t))
            .map(|t| (t, self.keys[t as usize]))
    }

    #[inline]
    fn wait(&mut self, t: u32, k: &TagKey) {
        self.waiting.set(t, k.start, k.tie);
    }

    /// The smallest start tag among eligible tenants, by a scan: only when the threshold is
    /// above the clock, which no clock does.
    #[cold]
    fn eligible_min_start(&self) -> Option<f64> {
        self.entries()
            .filter(|&(t, _)| self.eligible.contains(t))
            .map(|(_, k)| k.start)
            .reduce(f64::min)
    }

    /// Nobody eligible: the smallest start tag, the smallest `(F, id)` among equal ones,
    /// found by taking the ties off `waiting` and putting them back. The threshold stays:
    /// v has not really advanced.
    #[cold]
    fn earliest(&mut self) -> Option<u32> {
        let (mut best, s0) = self.waiting.peek()?;
        let mut tied = std::mem::take(&mut self.ties);
        while let Some((t, s)) = self.waiting.peek() {
            if s != s0 {
                break;
            }
            self.waiting.remove(t);
            tied.push(t);
            let (k, b) = (&self.keys[t as usize], &self.keys[best as usize]);
            if Tag::new(k.finish, k.tie).before(&Tag::new(b.finish, b.tie)) {
                best = t;
            }
        }
        for t in tied.drain(..) {
            let k = self.keys[t as usize];
            self.wait(t, &k);
        }
        self.ties = tied;
        Some(best)
    }

    /// Move the threshold down to `v`: tenants with `S > v` go back to `waiting`.
    #[cold]
    fn lower(&mut self, v: f64) {
        for t in 0..self.keys.len() as u32 {
            let k = self.keys[t as usize];
            if k.start > v && self.eligible.contains(t) {
                self.eligible.remove(t);
                self.wait(t, &k);
            }
        }
        self.th = v;
    }
}

impl Selector for Eligible {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        let i = t as usize;
        if i >= self.keys.len() {
            self.keys.resize(i + 1, TagKey::default());
        }
        self.keys[i] = key;
        if key.start <= self.th {
            self.waiting.remove(t);
            self.eligible.set(t, key.finish, key.tie);
        } else {
            self.eligible.remove(t);
            self.wait(t, &key);
        }
    }

    fn remove(&mut self, t: u32) {
        self.waiting.remove(t);
        self.eligible.remove(t);
    }

    #[inline]
    fn select(&mut self, _worker: usize, v: f64) -> Option<u32> {
        // A NaN clock makes nothing eligible, like −∞ (the treap's reading too).
        let v = if v.is_nan() { f64::NEG_INFINITY } else { v };
        if v < self.th {
            self.lower(v);
        }
        self.th = v;
        while let Some((t, s)) = self.waiting.peek() {
            if s > v {
                break;
            }
            let key = self.keys[t as usize];
            self.waiting.remove(t);
            self.eligible.set(t, key.finish, key.tie);
        }
        if let Some((t, _)) = self.eligible.peek() {
            return Some(t);
        }
        self.earliest()
    }

    fn min_start(&self) -> Option<f64> {
        let w = self.waiting.peek().map(|(_, s)| s);
        if self.eligible.is_empty() {
            return w;
        }
        // Every eligible start tag is ≤ th < every waiting one.
        self.eligible_min_start()
    }

    #[inline]
    fn lift(&self, v: f64) -> f64 {
        if !self.eligible.is_empty() {
            if self.th <= v {
                // Some start tag is ≤ th ≤ v: the smallest one does not lift v.
                return v;
            }
            return match self.eligible_min_start() {
                Some(m) if m > v => m,
                _ => v,
            };
        }
        match self.waiting.peek() {
            Some((_, s)) if s > v => s,
            _ => v,
        }
    }

    fn len(&self) -> usize {
        self.waiting.len() + self.eligible.len()
    }

    fn set_workers(&mut self, _: usize) {}
}
