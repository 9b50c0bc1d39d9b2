//! WF²Q's choice (2DFQ on one worker) among a few tenants, by scanning them.
//!
//! Fig. 7 scans every tenant; for a few dozen that is cheaper than keeping any ordered
//! structure: a selection reads one small contiguous array with no data-dependent branches
//! beyond the comparisons, a tag change writes one entry, and the smallest start tag (the
//! approximate clock's lift) is kept up to date, rescanned only when its holder moves up.
//! [`super::Staggered`] uses it while at most [`FEW`] tenants are backlogged.
//!
//! The same array is the few-tenant form of the plain minimum: WFQ's smallest finish tag
//! ([`super::MinFinish`]) and SFQ(D)'s smallest start tag ([`first`](Scan::first), no
//! eligibility). Those keep no eager smallest start tag ([`Scan::untracked`]): they ask for
//! it rarely, and a scan then is cheaper than a rescan on nearly every dispatch.

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

/// A slot's row: where it is in `entries`, and its tags (to hand them back).
#[derive(Clone, Copy, Debug)]
struct Row {
    /// Index in `entries`, or `NONE`.
    pos: u32,
    key: TagKey,
}

const ABSENT: Row = Row {
    pos: NONE,
    key: TagKey {
        start: 0.0,
        cost: 0.0,
        finish: 0.0,
        tie: 0,
    },
};

/// The scanned tenants. See the module docs.
#[derive(Default)]
pub(crate) struct Scan {
    entries: Vec<Entry>,
    /// By slot: one table, so a tag change checks one bound.
    rows: Vec<Row>,
    /// The smallest start tag over `entries` (+∞ when empty), while `track` is on.
    min: f64,
    /// Keep `min` up to date on every change (WF²Q's selection reads it every time).
    track: bool,
}

impl Scan {
    /// A scan that keeps the smallest start tag up to date (WF²Q, 2DFQ on one worker).
    pub fn new() -> Self {
        Scan {
            min: f64::INFINITY,
            track: true,
            ..Scan::default()
        }
    }

    /// A scan that finds the smallest start tag only when asked (WFQ, SFQ(D)).
    pub fn untracked() -> Self {
        Scan {
            min: f64::INFINITY,
            track: false,
            ..Scan::default()
        }
    }

    /// The tenant with the smallest `(F, id)`, eligible or not.
    #[inline]
    pub fn first(&self) -> Option<u32> {
        self.first_order().map(|(t, _)| t)
    }

    /// The tenant with the smallest `(F, id)`, and that order.
    #[inline]
    pub fn first_order(&self) -> Option<(u32, Tag)> {
        let (head, rest) = self.entries.split_first()?;
        // The best so far in registers: one wide compare and two conditional moves per entry.
        let (mut best, mut slot) = (head.order.wide(), head.slot);
        for e in rest {
            let w = e.order.wide();
            if w < best {
                best = w;
                slot = e.slot;
            }
        }
        Some((slot, Tag::from_wide(best)))
    }

    /// The smallest start tag (+∞ when empty), kept or scanned.
    #[inline]
    fn min(&self) -> f64 {
        if self.track {
            self.min
        } else {
            self.scan_min()
        }
    }

    fn scan_min(&self) -> f64 {
        self.entries
            .iter()
            .fold(f64::INFINITY, |m, e| if e.start < m { e.start } else { m })
    }

    /// Every tenant and its tags, in slot order.
    pub fn tags(&self) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        (0..self.rows.len() as u32)
            .filter(|&t| self.rows[t as usize].pos != NONE)
            .map(|t| (t, self.rows[t as usize].key))
    }

    fn rescan_min(&mut self) {
        self.min = self.scan_min();
    }

    /// A slot not in the scan joins it.
    #[inline(never)]
    fn insert(&mut self, t: u32, key: TagKey) {
        let i = t as usize;
        if i >= self.rows.len() {
            self.rows.resize(i + 1, ABSENT);
        }
        self.rows[i] = Row {
            pos: self.entries.len() as u32,
            key,
        };
        self.entries.push(Entry {
            order: Tag::new(key.finish, key.tie),
            start: key.start,
            slot: t,
        });
        self.track_min(key.start, f64::INFINITY);
    }

    /// Keep `min` (if tracked) after a start tag went from `old` to `new`.
    #[inline]
    fn track_min(&mut self, new: f64, old: f64) {
        if !self.track {
            return;
        }
        if new <= self.min {
            self.min = new;
        } else if old == self.min {
            // The smallest start tag moved up: someone else may hold it now.
            self.rescan_min();
        }
    }
}

impl Selector for Scan {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        let Some(row) = self.rows.get_mut(t as usize).filter(|r| r.pos != NONE) else {
            return self.insert(t, key);
        };
        row.key = key;
        let e = Entry {
            order: Tag::new(key.finish, key.tie),
            start: key.start,
            slot: t,
        };
        let old = std::mem::replace(&mut self.entries[row.pos as usize], e).start;
        self.track_min(key.start, old);
    }

    fn remove(&mut self, t: u32) {
        let Some(row) = self.rows.get_mut(t as usize).filter(|r| r.pos != NONE) else {
            return;
        };
        let p = std::mem::replace(&mut row.pos, NONE);
        let old = self.entries.swap_remove(p as usize);
        if let Some(moved) = self.entries.get(p as usize) {
            self.rows[moved.slot as usize].pos = p;
        }
        if self.track && old.start == self.min {
            self.rescan_min();
        }
    }

    #[inline]
    fn select(&mut self, _worker: usize, v: f64) -> Option<u32> {
        // Work conservation: if nothing is eligible yet, serve what becomes eligible first
        // (a NaN clock too, as in the treap).
        let min = self.min();
        let v = if min <= v { v } else { min };
        let mut best: Option<&Entry> = None;
        for e in &self.entries {
            if e.start <= v && best.is_none_or(|b| e.order.before(&b.order)) {
                best = Some(e);
            }
        }
        best.map(|e| e.slot)
    }

    fn min_start(&self) -> Option<f64> {
        (!self.entries.is_empty()).then(|| self.min())
    }

    #[inline]
    fn lift(&self, v: f64) -> f64 {
        // `min` is +∞ when empty, and +∞ > v would lift: only a backlog lifts.
        let min = self.min();
        if min > v && !self.entries.is_empty() {
            min
        } else {
            v
        }
    }

    fn len(&self) -> usize {
        self.entries.len()
    }

    fn set_workers(&mut self, _: usize) {}
}
