//! Selection structures: given each backlogged tenant's tags, which tenant does a worker
//! serve next. They hold only tags; bookkeeping and charging live in `tags.rs`.

mod eligible;
mod scan;
mod staggered;

pub(crate) use eligible::Eligible;
pub(crate) use scan::{Scan, FEW};
pub(crate) use staggered::Staggered;

use crate::util::{LazyMin, Tag, WinnerTree};

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
    /// `select` ignores `v` (WFQ): the caller may choose first and then let the chosen
    /// tenant's start tag witness that the clock's lift is a no-op.
    const CHOOSES_WITHOUT_V: bool = false;
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
    /// [`lift`](Selector::lift), letting the structure settle lazily kept state.
    #[inline]
    fn lift_mut(&mut self, v: f64) -> f64 {
        self.lift(v)
    }
    fn len(&self) -> usize;
    /// The number of workers changed (2DFQ's stagger depends on it).
    fn set_workers(&mut self, workers: usize);
}

/// WFQ (MSFQ): the smallest finish tag, eligible or not (2DFQ §2).
///
/// Up to [`FEW`] backlogged tenants it scans one array ([`Scan`], as 2DFQ does on one
/// worker): a tag change writes one entry, a selection reads a few cache lines with no
/// data-dependent branch, cheaper than moving an entry down a heap on every dispatch. Above
/// `FEW` a winner tree by `(F, id)` over the tenant slots ([`WinnerTree`]: the dispatched
/// tenant's finish tag grows, and only the nodes it was winning are replayed, one compare
/// each); back to the scan below `FEW / 2` (hysteresis). Both take the same strict order
/// (ties by tenant id), so the choice does not depend on the form.
pub(crate) struct MinFinish {
    /// Keep the smallest start tag for the approximate clock's lift.
    track_start: bool,
    rep: Rep,
}

enum Rep {
    Few(Scan),
    Many(Heaps),
}

/// WFQ's form for many tenants.
struct Heaps {
    /// `(F, id)` packed as a [`Tag`], by tenant slot.
    by_finish: WinnerTree,
    /// The smallest start tag, lazily (only if `track_start`): the lift is a no-op on almost
    /// every dispatch (the chosen tenant's own start tag is at most `v`), so the start tags
    /// are settled only when a lift really moves `v`.
    by_start: LazyMin,
    /// Each tenant's start tag when `by_start` does not keep it (untracked): the tags a
    /// move back to the scan needs are the heaps' own, not a copy of every key.
    starts: Vec<f64>,
}

impl Heaps {
    /// Every tenant and its tags (the cost is not kept: no WFQ choice reads it).
    fn entries(&self, track: bool) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        self.by_finish.iter().map(move |(t, wide)| {
            let order = Tag::from_wide(wide);
            let start = if track {
                self.by_start.value(t)
            } else {
                self.starts[t as usize]
            };
            let key = TagKey {
                start,
                cost: 0.0,
                finish: order.key(),
                tie: order.tie(),
            };
            (t, key)
        })
    }
}

impl MinFinish {
    /// `track_start`: the approximate clock will ask for the smallest start tag.
    pub fn new(track_start: bool) -> Self {
        MinFinish {
            track_start,
            rep: Rep::Few(Scan::untracked()),
        }
    }

    /// Whether the scan holds the tenants (for tests of the switch).
    #[cfg(test)]
    fn is_few(&self) -> bool {
        matches!(self.rep, Rep::Few(_))
    }

    #[cold]
    fn switch_to_heaps(&mut self) {
        let Rep::Few(scan) = &self.rep else { return };
        let mut heaps = Heaps {
            by_finish: WinnerTree::default(),
            by_start: LazyMin::default(),
            starts: Vec::new(),
        };
        let track = self.track_start;
        for (t, key) in scan.tags() {
            heaps.set(t, key, track);
        }
        self.rep = Rep::Many(heaps);
    }

    #[cold]
    fn switch_to_scan(&mut self) {
        let Rep::Many(heaps) = &self.rep else { return };
        let mut scan = Scan::untracked();
        for (t, key) in heaps.entries(self.track_start) {
            scan.set(t, key);
        }
        self.rep = Rep::Few(scan);
    }
}

impl Heaps {
    #[inline(never)] // inside `sync` it costs WFQ ~50 instructions a dispatch more (callgrind)
    fn set(&mut self, t: u32, key: TagKey, track: bool) {
        self.by_finish.set(t, Tag::new(key.finish, key.tie).wide());
        if track {
            self.by_start.set(t, key.start);
        } else {
            let i = t as usize;
            if i >= self.starts.len() {
                self.starts.resize(i + 1, 0.0);
            }
            self.starts[i] = key.start;
        }
    }

    /// The smallest start tag, by a scan (only a caller without `&mut`, or untracked).
    #[cold]
    fn scan_min_start(&self, track: bool) -> Option<f64> {
        self.entries(track).map(|(_, k)| k.start).reduce(f64::min)
    }
}

impl Selector for MinFinish {
    const CHOOSES_WITHOUT_V: bool = true;

    #[inline(always)] // from `sync` on every dispatch: no second frame around the scan or heap
    fn set(&mut self, t: u32, key: TagKey) {
        match &mut self.rep {
            Rep::Few(scan) => {
                scan.set(t, key);
                if scan.len() > FEW {
                    self.switch_to_heaps();
                }
            }
            Rep::Many(h) => h.set(t, key, self.track_start),
        }
    }

    fn remove(&mut self, t: u32) {
        match &mut self.rep {
            Rep::Few(scan) => scan.remove(t),
            Rep::Many(h) => {
                h.by_finish.remove(t);
                h.by_start.remove(t);
                if h.by_finish.len() < FEW / 2 {
                    self.switch_to_scan();
                }
            }
        }
    }

    #[inline]
    fn select(&mut self, _worker: usize, _v: f64) -> Option<u32> {
        match &self.rep {
            Rep::Few(scan) => scan.first(),
            Rep::Many(h) => h.by_finish.peek().map(|(t, _)| t),
        }
    }

    fn min_start(&self) -> Option<f64> {
        match &self.rep {
            Rep::Few(scan) => scan.min_start(),
            Rep::Many(h) => h.scan_min_start(self.track_start),
        }
    }

    fn lift_mut(&mut self, v: f64) -> f64 {
        match &mut self.rep {
            Rep::Few(scan) => scan.lift(v),
            Rep::Many(h) if self.track_start => h.by_start.lift(v, None),
            Rep::Many(h) => match h.scan_min_start(false) {
                Some(m) if m > v => m,
                _ => v,
            },
        }
    }

    fn len(&self) -> usize {
        match &self.rep {
            Rep::Few(scan) => scan.len(),
            Rep::Many(h) => h.by_finish.len(),
        }
    }

    fn set_workers(&mut self, _: usize) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::Tag;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Set { t: u8, start: i8, cost: u8 },
        Remove { t: u8 },
        Select { v: i8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u8..48, -20i8..40, 0u8..8).prop_map(|(t, start, cost)| Op::Set { t, start, cost }),
            2 => (0u8..48).prop_map(|t| Op::Remove { t }),
            3 => (-20i8..40).prop_map(|v| Op::Select { v }),
        ]
    }

    proptest! {
        #![proptest_config(crate::util::proptest_cases(1000))]

        /// WFQ's selector, a scan while few tenants are backlogged and a heap (with the lazy
        /// smallest start tag) above, decides as the plain definition does: the smallest
        /// `(F, id)` over every backlogged tenant, and the lift `max(v, min S)`, through
        /// switches in both directions, tracked or not.
        #[test]
        fn min_finish_decides_like_the_definition(
            slots in prop_oneof![Just(12u8), Just(48u8)],
            track in any::<bool>(),
            ops in prop::collection::vec(op(), 1..500),
        ) {
            let mut fast = MinFinish::new(track);
            let mut reference: Vec<Option<TagKey>> = vec![None; 48];
            for op in ops {
                match op {
                    Op::Set { t, start, cost } => {
                        let t = t % slots;
                        // Small halves: equal tags are frequent.
                        let start = f64::from(start) / 2.0;
                        let key = TagKey {
                            start,
                            cost: f64::from(cost) / 2.0,
                            finish: start + f64::from(cost) / 2.0,
                            tie: u64::from(t % 7) * 1000 + u64::from(t),
                        };
                        fast.set(u32::from(t), key);
                        reference[t as usize] = Some(key);
                    }
                    Op::Remove { t } => {
                        let t = t % slots;
                        fast.remove(u32::from(t));
                        reference[t as usize] = None;
                    }
                    Op::Select { v } => {
                        let expect = reference
                            .iter()
                            .enumerate()
                            .filter_map(|(t, k)| k.map(|k| (Tag::new(k.finish, k.tie), t as u32)))
                            .min_by(|a, b| a.0.wide().cmp(&b.0.wide()))
                            .map(|(_, t)| t);
                        prop_assert_eq!(fast.select(0, f64::NAN), expect);
                        let v = f64::from(v) / 2.0;
                        let lift = match reference.iter().flatten().map(|k| k.start).reduce(f64::min) {
                            Some(m) if m > v => m,
                            _ => v,
                        };
                        prop_assert_eq!(fast.lift_mut(v), lift);
                    }
                }
                let n = reference.iter().flatten().count();
                prop_assert_eq!(fast.len(), n);
                if n > FEW {
                    prop_assert!(!fast.is_few());
                } else if n < FEW / 2 {
                    prop_assert!(fast.is_few());
                }
                let min = reference.iter().flatten().map(|k| k.start).reduce(f64::min);
                prop_assert_eq!(fast.min_start(), min);
            }
        }
    }
}
