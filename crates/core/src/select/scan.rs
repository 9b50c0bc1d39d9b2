//! WF²Q's choice (2DFQ on one worker) among a few tenants, by scanning them.
//!
//! Fig. 7 scans every tenant; for a few dozen that is cheaper than keeping any ordered
//! structure: a selection reads one small contiguous array with no data-dependent branches
//! beyond the comparisons, a tag change writes one entry, and the smallest start tag (the
//! approximate clock's lift) is kept up to date, rescanned only when its holder moves up.
//! [`super::Staggered`] uses it while at most [`FEW`] tenants are backlogged.

use super::{Selector, TagKey};
use crate::util::{HeapKey, Tag};

/// Above this many backlogged tenants the two heaps ([`super::Eligible`]) are cheaper.
pub(crate) const FEW: usize = 32;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// `(F, id)`, packed: the selection's order.
    order: Tag,
    start: f64,
    slot: u32,
}

/// The scanned tenants. See the module docs.
#[derive(Default)]
pub(crate) struct Scan {
    entries: Vec<Entry>,
    /// Each slot's tags, for handing them back (`tags`).
    keys: Vec<TagKey>,
    /// Slot → index in `entries`, or `NONE`.
    pos: Vec<u32>,
    /// The smallest start tag over `entries` (+∞ when empty).
    min: f64,
}

impl Scan {
    pub fn new() -> Self {
        Scan {
            min: f64::INFINITY,
            ..Scan::default()
        }
    }

    /// Every tenant and its tags, in slot order.
    pub fn tags(&self) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        (0..self.pos.len() as u32)
            .filter(|&t| self.pos[t as usize] != NONE)
            .map(|t| (t, self.keys[t as usize]))
    }

    fn rescan_min(&mut self) {
        self.min = self
            .entries
            .iter()
            .fold(f64::INFINITY, |m, e| if e.start < m { e.start } else { m });
    }
}

impl Selector for Scan {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        let i = t as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, NONE);
            self.keys.resize(i + 1, TagKey::default());
        }
        self.keys[i] = key;
        let e = Entry {
            order: Tag::new(key.finish, key.tie),
            start: key.start,
            slot: t,
        };
        let p = self.pos[i];
        let old = if p == NONE {
            self.pos[i] = self.entries.len() as u32;
            self.entries.push(e);
            f64::INFINITY
        } else {
            std::mem::replace(&mut self.entries[p as usize], e).start
        };
        if key.start <= self.min {
            self.min = key.start;
        } else if old == self.min {
            // The smallest start tag moved up: someone else may hold it now.
            self.rescan_min();
        }
    }

    fn remove(&mut self, t: u32) {
        let Some(&p) = self.pos.get(t as usize) else {
            return;
        };
        if p == NONE {
            return;
        }
        self.pos[t as usize] = NONE;
        let old = self.entries.swap_remove(p as usize);
        if let Some(moved) = self.entries.get(p as usize) {
            self.pos[moved.slot as usize] = p;
        }
        if old.start == self.min {
            self.rescan_min();
        }
    }

    #[inline]
    fn select(&mut self, _worker: usize, v: f64) -> Option<u32> {
        // Work conservation: if nothing is eligible yet, serve what becomes eligible first
        // (a NaN clock too, as in the treap).
        let v = if self.min <= v { v } else { self.min };
        let mut best: Option<&Entry> = None;
        for e in &self.entries {
            if e.start <= v && best.is_none_or(|b| e.order.before(&b.order)) {
                best = Some(e);
            }
        }
        best.map(|e| e.slot)
    }

    fn min_start(&self) -> Option<f64> {
        (!self.entries.is_empty()).then_some(self.min)
    }

    #[inline]
    fn lift(&self, v: f64) -> f64 {
        // `min` is +∞ when empty, and +∞ > v would lift: only a backlog lifts.
        if self.min > v && !self.entries.is_empty() {
            self.min
        } else {
            v
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn set_workers(&mut self, _: usize) {}
}
