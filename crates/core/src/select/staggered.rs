//! 2DFQ's selection without scanning every tenant.
//!
//! Worker `i` of `n` may serve tenant `f` once `S_f − (i/n)·l_f ≤ v` (2DFQ §4), and among
//! those it serves the smallest finish tag.
//! The paper's pseudocode (Fig. 7) scans all tenants. Here tenants sit in a treap ordered by
//! `(F_f, id)`, and every node keeps, for each lane `i`, the smallest `S − (i/n)·l` in its
//! subtree. A worker's choice is then the leftmost node whose own eligibility value is at
//! most `v`, found in one descent: O(log T). A tag change costs O(n · log T) lane minima.
//! The eligibility values depend only on a tenant's own tags, never on `v`, so nothing
//! changes when virtual time advances.
//!
//! With one worker the only lane is `x = 0`, whose test `S ≤ v` is WF²Q's: [`Staggered`] then
//! holds the tenants as WF²Q would, which decides alike for less work (no rotations, no lane
//! minima): up to [`FEW`] tenants in a scanned array ([`Scan`]), more in WF²Q's two heaps
//! ([`Eligible`]). With two or more workers it scans up to [`FEW_LANES`] tenants
//! ([`LaneScan`]: precomputed eligibility values per lane) and keeps more in the treap. It
//! moves the tenants between representations as the backlog and the worker count change.

mod lanes;

use super::scan::{Scan, FEW};
use super::{Eligible, Selector, TagKey};
use crate::util::{HeapKey, SplitMix, Tag};
use lanes::{LaneScan, FEW_LANES};

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Node {
    start: f64,
    cost: f64,
    /// `(F, id)`, packed: the treap's order.
    order: Tag,
    /// The tie-breaker alone, to hand the tags back (`entries`).
    tie: u64,
    prio: u64,
    left: u32,
    right: u32,
    present: bool,
}

const EMPTY: Node = Node {
    start: 0.0,
    cost: 0.0,
    order: Tag::ZERO,
    tie: 0,
    prio: 0,
    left: NIL,
    right: NIL,
    present: false,
};

/// 2DFQ's eligibility structure: on one worker WF²Q's (a scan of a few tenants, two heaps for
/// more), on more a scan of a few tenants' lanes or the lane-minima treap.
pub(crate) enum Staggered {
    /// One worker, at most [`FEW`] tenants (after a drop below `FEW / 2` from more).
    Few(Scan),
    /// One worker: `S − 0·l ≤ v` is WF²Q's test.
    One(Eligible),
    /// Two or more workers, at most [`FEW_LANES`] tenants (after a drop below
    /// `FEW_LANES / 2` from more).
    Wide(LaneScan),
    /// Two or more workers, more tenants.
    Lanes(Treap),
}

impl Staggered {
    pub fn new(workers: usize) -> Self {
        if workers <= 1 {
            Staggered::Few(Scan::new())
        } else {
            Staggered::Wide(LaneScan::new(workers))
        }
    }

    /// The representation for `workers ≥ 2` and a backlog of `len` tenants, filled from `from`.
    fn many(workers: usize, len: usize, from: impl Iterator<Item = (u32, TagKey)>) -> Self {
        if len <= FEW_LANES {
            Staggered::Wide(Self::moved(from, LaneScan::new(workers)))
        } else {
            Staggered::Lanes(Self::moved(from, Treap::new(workers)))
        }
    }
}

impl Selector for Staggered {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        match self {
            Staggered::Few(e) => {
                e.set(t, key);
                if e.len() > FEW {
                    *self = Staggered::One(Self::moved(e.tags(), Eligible::default()));
                }
            }
            Staggered::One(e) => e.set(t, key),
            Staggered::Wide(e) => {
                e.set(t, key);
                if e.len() > FEW_LANES {
                    *self = Staggered::Lanes(Self::moved(e.tags(), Treap::new(e.lanes())));
                }
            }
            Staggered::Lanes(l) => l.set(t, key),
        }
    }

    fn remove(&mut self, t: u32) {
        match self {
            Staggered::Few(e) => e.remove(t),
            Staggered::One(e) => {
                e.remove(t);
                // Hysteresis: a backlog hovering at FEW does not flip back and forth.
                if e.len() < FEW / 2 {
                    *self = Staggered::Few(Self::moved(e.entries(), Scan::new()));
                }
            }
            Staggered::Wide(e) => e.remove(t),
            Staggered::Lanes(l) => {
                l.remove(t);
                if l.len() < FEW_LANES / 2 {
                    *self = Staggered::Wide(Self::moved(l.entries(), LaneScan::new(l.lanes())));
                }
            }
        }
    }

    #[inline]
    fn select(&mut self, worker: usize, v: f64) -> Option<u32> {
        match self {
            Staggered::Few(e) => e.select(worker, v),
            Staggered::One(e) => e.select(worker, v),
            Staggered::Wide(e) => e.select(worker, v),
            Staggered::Lanes(l) => l.select(worker, v),
        }
    }

    fn min_start(&self) -> Option<f64> {
        match self {
            Staggered::Few(e) => e.min_start(),
            Staggered::One(e) => e.min_start(),
            Staggered::Wide(e) => e.min_start(),
            Staggered::Lanes(l) => l.min_start(),
        }
    }

    #[inline]
    fn lift(&self, v: f64) -> f64 {
        match self {
            Staggered::Few(e) => e.lift(v),
            Staggered::One(e) => e.lift(v),
            Staggered::Wide(e) => e.lift(v),
            Staggered::Lanes(l) => l.lift(v),
        }
    }

    fn len(&self) -> usize {
        match self {
            Staggered::Few(e) => e.len(),
            Staggered::One(e) => e.len(),
            Staggered::Wide(e) => e.len(),
            Staggered::Lanes(l) => l.len(),
        }
    }

    /// Switch representation when crossing one worker; the tenants and tags carry over, and
    /// no structure's decisions depend on its history.
    fn set_workers(&mut self, workers: usize) {
        match self {
            Staggered::Lanes(l) if workers <= 1 => *self = Self::one(l.len(), l.entries()),
            Staggered::Wide(e) if workers <= 1 => *self = Self::one(e.len(), e.tags()),
            Staggered::Lanes(l) => l.set_workers(workers),
            Staggered::Wide(e) => e.set_workers(workers),
            Staggered::Few(e) if workers > 1 => *self = Self::many(workers, e.len(), e.tags()),
            Staggered::One(e) if workers > 1 => {
                *self = Self::many(workers, e.len(), e.entries());
            }
            Staggered::Few(_) | Staggered::One(_) => {}
        }
    }
}

impl Staggered {
    /// The one-worker representation for a backlog of `len` tenants, filled from `from`.
    fn one(len: usize, from: impl Iterator<Item = (u32, TagKey)>) -> Self {
        if len <= FEW {
            Staggered::Few(Self::moved(from, Scan::new()))
        } else {
            Staggered::One(Self::moved(from, Eligible::default()))
        }
    }

    /// `to` with every tenant of `from` set in it.
    fn moved<S: Selector>(from: impl Iterator<Item = (u32, TagKey)>, mut to: S) -> S {
        for (t, key) in from {
            to.set(t, key);
        }
        to
    }
}

/// The lane-minima treap (module docs).
pub(crate) struct Treap {
    /// `i/n` for each lane.
    xs: Vec<f64>,
    nodes: Vec<Node>,
    /// Lane minima, `xs.len()` per node.
    aug: Vec<f64>,
    root: u32,
    len: usize,
    rng: SplitMix,
}

/// `S − (i/n)·l`: the virtual time at which a request becomes eligible on worker `i`.
#[inline]
pub(crate) fn eligible_at(start: f64, x: f64, cost: f64) -> f64 {
    start - x * cost
}

impl Treap {
    pub fn new(workers: usize) -> Self {
        let mut s = Treap {
            xs: Vec::new(),
            nodes: Vec::new(),
            aug: Vec::new(),
            root: NIL,
            len: 0,
            rng: SplitMix::new(0x2DF0_5EED),
        };
        s.set_lanes(workers);
        s
    }

    fn lanes(&self) -> usize {
        self.xs.len()
    }

    fn set_lanes(&mut self, workers: usize) {
        let lanes = workers.max(1);
        self.xs = (0..lanes).map(|i| i as f64 / lanes as f64).collect();
        self.aug = vec![0.0; self.nodes.len() * lanes];
        let root = self.root;
        self.pull_all(root);
    }

    fn pull_all(&mut self, n: u32) {
        if n == NIL {
            return;
        }
        let (l, r) = (self.nodes[n as usize].left, self.nodes[n as usize].right);
        self.pull_all(l);
        self.pull_all(r);
        self.pull(n);
    }

    #[inline]
    fn less(&self, a: u32, b: u32) -> bool {
        let (a, b) = (&self.nodes[a as usize], &self.nodes[b as usize]);
        a.order.before(&b.order)
    }

    /// Recompute node `n`'s lane minima from its own tags and its children's minima.
    fn pull(&mut self, n: u32) {
        let lanes = self.lanes();
        let node = &self.nodes[n as usize];
        let (start, cost, left, right) = (node.start, node.cost, node.left, node.right);
        let base = n as usize * lanes;
        if lanes == 1 {
            // One worker (x = 0): the minimum start tag, without the lane loops.
            let mut m = start;
            for child in [left, right] {
                if child != NIL {
                    let y = self.aug[child as usize];
                    if y < m {
                        m = y;
                    }
                }
            }
            self.aug[base] = m;
            return;
        }
        for (out, &x) in self.aug[base..base + lanes].iter_mut().zip(&self.xs) {
            *out = eligible_at(start, x, cost);
        }
        for child in [left, right] {
            if child != NIL {
                min_into(&mut self.aug, base, child as usize * lanes, lanes);
            }
        }
    }

    fn rotate_right(&mut self, n: u32) -> u32 {
        let l = self.nodes[n as usize].left;
        self.nodes[n as usize].left = self.nodes[l as usize].right;
        self.nodes[l as usize].right = n;
        self.pull(n);
        self.pull(l);
        l
    }

    fn rotate_left(&mut self, n: u32) -> u32 {
        let r = self.nodes[n as usize].right;
        self.nodes[n as usize].right = self.nodes[r as usize].left;
        self.nodes[r as usize].left = n;
        self.pull(n);
        self.pull(r);
        r
    }

    /// Recompute node `n`'s lane minima; report whether any lane changed.
    fn pull_changed(&mut self, n: u32) -> bool {
        let lanes = self.lanes();
        if lanes == 1 {
            let old = self.aug[n as usize];
            self.pull(n);
            return self.aug[n as usize] != old;
        }
        let node = self.nodes[n as usize];
        let base = n as usize * lanes;
        let mut changed = false;
        for i in 0..lanes {
            let mut m = eligible_at(node.start, self.xs[i], node.cost);
            if node.left != NIL {
                let y = self.aug[node.left as usize * lanes + i];
                if y < m {
                    m = y;
                }
            }
            if node.right != NIL {
                let y = self.aug[node.right as usize * lanes + i];
                if y < m {
                    m = y;
                }
            }
            if m != self.aug[base + i] {
                self.aug[base + i] = m;
                changed = true;
            }
        }
        changed
    }

    /// Lower node `n`'s minima by child `c`'s (its subtree just gained a node); report
    /// whether any lane changed.
    fn lower_by(&mut self, n: u32, c: u32) -> bool {
        let lanes = self.lanes();
        if lanes == 1 {
            let y = self.aug[c as usize];
            if y < self.aug[n as usize] {
                self.aug[n as usize] = y;
                return true;
            }
            return false;
        }
        let (base, cb) = (n as usize * lanes, c as usize * lanes);
        let mut changed = false;
        for i in 0..lanes {
            let y = self.aug[cb + i];
            if y < self.aug[base + i] {
                self.aug[base + i] = y;
                changed = true;
            }
        }
        changed
    }

    /// Insert `t` under `root`. Returns the new subtree root and whether its minima changed:
    /// a new node can only lower minima, and once an ancestor is unchanged so are all above.
    fn insert_at(&mut self, root: u32, t: u32) -> (u32, bool) {
        if root == NIL {
            self.pull(t);
            return (t, true);
        }
        if self.less(t, root) {
            let (l, changed) = self.insert_at(self.nodes[root as usize].left, t);
            self.nodes[root as usize].left = l;
            if self.nodes[l as usize].prio > self.nodes[root as usize].prio {
                return (self.rotate_right(root), true);
            }
            (root, changed && self.lower_by(root, l))
        } else {
            let (r, changed) = self.insert_at(self.nodes[root as usize].right, t);
            self.nodes[root as usize].right = r;
            if self.nodes[r as usize].prio > self.nodes[root as usize].prio {
                return (self.rotate_left(root), true);
            }
            (root, changed && self.lower_by(root, r))
        }
    }

    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.nodes[a as usize].prio > self.nodes[b as usize].prio {
            let r = self.merge(self.nodes[a as usize].right, b);
            self.nodes[a as usize].right = r;
            self.pull(a);
            a
        } else {
            let l = self.merge(a, self.nodes[b as usize].left);
            self.nodes[b as usize].left = l;
            self.pull(b);
            b
        }
    }

    /// Remove `t` from under `root`. Returns the new subtree root and whether its minima
    /// changed; ancestors of an unchanged subtree are not recomputed.
    fn remove_at(&mut self, root: u32, t: u32) -> (u32, bool) {
        if root == t {
            let n = self.nodes[t as usize];
            return (self.merge(n.left, n.right), true);
        }
        let changed = if self.less(t, root) {
            let (l, changed) = self.remove_at(self.nodes[root as usize].left, t);
            self.nodes[root as usize].left = l;
            changed
        } else {
            let (r, changed) = self.remove_at(self.nodes[root as usize].right, t);
            self.nodes[root as usize].right = r;
            changed
        };
        (root, changed && self.pull_changed(root))
    }

    fn detach(&mut self, t: u32) {
        if self.nodes.get(t as usize).is_some_and(|n| n.present) {
            let root = self.root;
            self.root = self.remove_at(root, t).0;
            self.nodes[t as usize].present = false;
            self.len -= 1;
        }
    }
}

/// `aug[dst..dst+lanes] = min(aug[dst..], aug[src..])`, lane by lane.
#[inline]
fn min_into(aug: &mut [f64], dst: usize, src: usize, lanes: usize) {
    let (d, s) = if dst < src {
        let (a, b) = aug.split_at_mut(src);
        (&mut a[dst..dst + lanes], &b[..lanes])
    } else {
        let (a, b) = aug.split_at_mut(dst);
        (&mut b[..lanes], &a[src..src + lanes])
    };
    for (x, &y) in d.iter_mut().zip(s) {
        if y < *x {
            *x = y;
        }
    }
}

impl Treap {
    /// Every tenant in the treap and its tags, in tenant order.
    pub fn entries(&self) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.present)
            .map(|(t, n)| {
                (
                    t as u32,
                    TagKey {
                        start: n.start,
                        cost: n.cost,
                        finish: n.order.key(),
                        tie: n.tie,
                    },
                )
            })
    }
}

impl Selector for Treap {
    fn set(&mut self, t: u32, key: TagKey) {
        self.detach(t);
        let idx = t as usize;
        if idx >= self.nodes.len() {
            self.nodes.resize(idx + 1, EMPTY);
            self.aug.resize(self.nodes.len() * self.lanes(), 0.0);
        }
        let prio = self.rng.next_u64();
        self.nodes[idx] = Node {
            start: key.start,
            cost: key.cost,
            order: Tag::new(key.finish, key.tie),
            tie: key.tie,
            prio,
            left: NIL,
            right: NIL,
            present: true,
        };
        let root = self.root;
        self.root = self.insert_at(root, t).0;
        self.len += 1;
    }

    fn remove(&mut self, t: u32) {
        self.detach(t);
    }

    fn select(&mut self, worker: usize, v: f64) -> Option<u32> {
        if self.root == NIL {
            return None;
        }
        let lanes = self.lanes();
        let lane = worker.min(lanes - 1);
        let x = self.xs[lane];
        let at = |n: u32| n as usize * lanes + lane;
        let earliest = self.aug[at(self.root)];
        // Work conservation: if nothing is eligible yet, serve what becomes eligible first.
        let v = if earliest <= v { v } else { earliest };
        let mut n = self.root;
        loop {
            let node = &self.nodes[n as usize];
            if node.left != NIL && self.aug[at(node.left)] <= v {
                n = node.left;
            } else if eligible_at(node.start, x, node.cost) <= v {
                return Some(n);
            } else {
                n = node.right;
                debug_assert!(n != NIL, "lane minimum promised an eligible tenant");
            }
        }
    }

    fn min_start(&self) -> Option<f64> {
        // Lane 0 has x = 0: its minimum is the smallest start tag.
        (self.root != NIL).then(|| self.aug[self.root as usize * self.lanes()])
    }

    fn len(&self) -> usize {
        self.len
    }

    fn set_workers(&mut self, workers: usize) {
        self.set_lanes(workers);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Set { t: u8, start: i8, cost: u8, w: u8 },
        Remove { t: u8 },
        Select { v: i8 },
        Workers { n: u8 },
    }

    /// Set tenant `t`'s tags in both from an op's small numbers: halves, so that equal start
    /// and finish tags are frequent.
    fn set_both(fast: &mut Staggered, treap: &mut Treap, t: u16, start: i8, cost: u8, w: u8) {
        let (start, cost) = (f64::from(start) / 2.0, f64::from(cost) / 2.0);
        let key = TagKey {
            start,
            cost,
            finish: start + cost / f64::from(w),
            tie: u64::from(t % 7) * 1000 + u64::from(t),
        };
        fast.set(u32::from(t), key);
        treap.set(u32::from(t), key);
    }

    /// Both lift the same clocks alike, decreasing and NaN ones included.
    fn same_lifts(fast: &Staggered, treap: &Treap) -> Result<(), TestCaseError> {
        for v in [-11.0, -0.5, 0.0, 3.25, 25.0, f64::NAN] {
            let (a, b) = (fast.lift(v), treap.lift(v));
            prop_assert!(
                a == b || (a.is_nan() && b.is_nan()),
                "lift({}) {} vs {}",
                v,
                a,
                b
            );
        }
        Ok(())
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            5 => (0u8..48, -20i8..40, 0u8..8, 1u8..4)
                .prop_map(|(t, start, cost, w)| Op::Set { t, start, cost, w }),
            1 => (0u8..48).prop_map(|t| Op::Remove { t }),
            4 => (-20i8..40).prop_map(|v| Op::Select { v }),
            1 => (1u8..4).prop_map(|n| Op::Workers { n }),
        ]
    }

    /// The one-worker representation follows the backlog: a scan up to `FEW`, heaps above,
    /// back to the scan below `FEW / 2`; the choice survives each move.
    #[test]
    fn one_worker_representation_follows_the_backlog() {
        let key = |t: u32| TagKey {
            start: f64::from(t % 5),
            cost: 1.0,
            finish: f64::from(t % 5) + 1.0 + f64::from(t) / 64.0,
            tie: u64::from(t),
        };
        let mut s = Staggered::new(1);
        let mut treap = Treap::new(1);
        for t in 0..=FEW as u32 {
            assert!(matches!(s, Staggered::Few(_)), "{t} tenants");
            s.set(t, key(t));
            treap.set(t, key(t));
            assert_eq!(s.select(0, 2.0), treap.select(0, 2.0));
        }
        assert!(matches!(s, Staggered::One(_)));
        for t in (FEW / 2 - 1)..=FEW {
            assert!(matches!(s, Staggered::One(_)), "{} tenants", s.len());
            s.remove(t as u32);
            treap.remove(t as u32);
            assert_eq!(s.select(0, 3.0), treap.select(0, 3.0));
        }
        assert!(matches!(s, Staggered::Few(_)));
        assert_eq!(s.len(), FEW / 2 - 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        /// On one worker `Staggered` holds the tenants as WF²Q would (a scan or two heaps);
        /// it must decide exactly as the lane-minima treap does (selection, smallest start
        /// tag, the clock's lift), for any sequence of tag changes and clocks, decreasing ones
        /// and NaN included, and across changes of the worker count in both directions.
        #[test]
        fn one_worker_decides_like_the_treap(
            slots in prop_oneof![Just(12u8), Just(48u8)],
            ops in prop::collection::vec(op(), 1..400),
        ) {
            let mut fast = Staggered::new(1);
            let mut treap = Treap::new(1);
            let mut workers = 1usize;
            for op in ops {
                match op {
                    Op::Set { t, start, cost, w } => {
                        // 12 slots: always scanned; 48: the backlog crosses FEW both ways.
                        set_both(&mut fast, &mut treap, u16::from(t % slots), start, cost, w);
                    }
                    Op::Remove { t } => {
                        let t = t % slots;
                        fast.remove(u32::from(t));
                        treap.remove(u32::from(t));
                    }
                    Op::Select { v } => {
                        let v = if v == 39 { f64::NAN } else { f64::from(v) / 2.0 };
                        for worker in 0..workers {
                            prop_assert_eq!(fast.select(worker, v), treap.select(worker, v));
                        }
                    }
                    Op::Workers { n } => {
                        workers = usize::from(n);
                        fast.set_workers(workers);
                        treap.set_workers(workers);
                        prop_assert_eq!(
                            matches!(fast, Staggered::Few(_) | Staggered::One(_)),
                            workers == 1,
                            "representation follows the worker count"
                        );
                    }
                }
                prop_assert_eq!(fast.len(), treap.len());
                prop_assert_eq!(fast.min_start(), treap.min_start());
                same_lifts(&fast, &treap)?;
            }
        }
    }

    /// With two or more workers the representation follows the backlog: the lane scan up to
    /// `FEW_LANES`, the treap above, the scan again below `FEW_LANES / 2`; every choice, on
    /// every lane, is the treap's.
    #[test]
    fn many_workers_representation_follows_the_backlog() {
        let key = |t: u32| TagKey {
            start: f64::from(t % 7),
            cost: f64::from(t % 3) + 0.5,
            finish: f64::from(t % 7) + 1.0 + f64::from(t) / 512.0,
            tie: u64::from(t),
        };
        let mut s = Staggered::new(3);
        let mut treap = Treap::new(3);
        let same = |s: &mut Staggered, treap: &mut Treap, v: f64| {
            for w in 0..3 {
                assert_eq!(s.select(w, v), treap.select(w, v), "worker {w} at {v}");
            }
            assert_eq!(s.min_start(), treap.min_start());
        };
        for t in 0..=FEW_LANES as u32 {
            assert!(matches!(s, Staggered::Wide(_)), "{t} tenants");
            s.set(t, key(t));
            treap.set(t, key(t));
            same(&mut s, &mut treap, 2.0);
        }
        assert!(matches!(s, Staggered::Lanes(_)));
        for t in (FEW_LANES / 2 - 1)..=FEW_LANES {
            assert!(matches!(s, Staggered::Lanes(_)), "{} tenants", s.len());
            s.remove(t as u32);
            treap.remove(t as u32);
            same(&mut s, &mut treap, 3.0);
        }
        assert!(matches!(s, Staggered::Wide(_)));
        assert_eq!(s.len(), FEW_LANES / 2 - 1);
        s.set_workers(1);
        treap.set_workers(1);
        assert!(matches!(s, Staggered::One(_)));
        assert_eq!(s.select(0, 4.0), treap.select(0, 4.0));
        s.set_workers(4);
        treap.set_workers(4);
        assert!(matches!(s, Staggered::Wide(_)));
        for w in 0..4 {
            assert_eq!(s.select(w, 1.5), treap.select(w, 1.5));
        }
    }

    #[derive(Clone, Debug)]
    enum WideOp {
        Set { t: u16, start: i8, cost: u8, w: u8 },
        Remove { t: u16 },
        Select { v: i8 },
        Workers { n: u8 },
    }

    fn wide_op() -> impl Strategy<Value = WideOp> {
        prop_oneof![
            6 => (0u16..400, -20i8..40, 0u8..8, 1u8..4)
                .prop_map(|(t, start, cost, w)| WideOp::Set { t, start, cost, w }),
            1 => (0u16..400).prop_map(|t| WideOp::Remove { t }),
            3 => (-20i8..40).prop_map(|v| WideOp::Select { v }),
            1 => (1u8..6).prop_map(|n| WideOp::Workers { n }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// With two or more workers `Staggered` scans a few tenants' lanes (`LaneScan`) and
        /// keeps more in the treap; it must decide exactly as the treap does on every lane
        /// (selection, smallest start tag, lift), for any sequence of tag changes, clocks
        /// (decreasing and NaN included), backlogs crossing `FEW_LANES` both ways, and worker
        /// counts, one included.
        #[test]
        fn many_workers_decide_like_the_treap(
            slots in prop_oneof![Just(10u16), Just(60u16), Just(400u16)],
            first in 1u8..5,
            ops in prop::collection::vec(wide_op(), 1..900),
        ) {
            let mut workers = usize::from(first);
            let mut fast = Staggered::new(workers);
            let mut treap = Treap::new(workers);
            for op in ops {
                match op {
                    WideOp::Set { t, start, cost, w } => {
                        set_both(&mut fast, &mut treap, t % slots, start, cost, w);
                    }
                    WideOp::Remove { t } => {
                        let t = t % slots;
                        fast.remove(u32::from(t));
                        treap.remove(u32::from(t));
                    }
                    WideOp::Select { v } => {
                        let v = if v == 39 { f64::NAN } else { f64::from(v) / 2.0 };
                        for worker in 0..workers + 1 {
                            // worker = workers: out of range, clamped to the last lane by both
                            prop_assert_eq!(fast.select(worker, v), treap.select(worker, v));
                        }
                    }
                    WideOp::Workers { n } => {
                        workers = usize::from(n);
                        fast.set_workers(workers);
                        treap.set_workers(workers);
                    }
                }
                prop_assert_eq!(fast.len(), treap.len());
                prop_assert_eq!(fast.min_start(), treap.min_start());
                prop_assert_eq!(
                    matches!(fast, Staggered::Few(_) | Staggered::One(_)),
                    workers == 1,
                    "representation follows the worker count"
                );
                if workers > 1 && fast.len() > FEW_LANES {
                    prop_assert!(matches!(fast, Staggered::Lanes(_)));
                }
                if workers > 1 && fast.len() < FEW_LANES / 2 {
                    prop_assert!(matches!(fast, Staggered::Wide(_)));
                }
                same_lifts(&fast, &treap)?;
            }
        }
    }
}
