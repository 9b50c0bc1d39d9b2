//! 2DFQ's choice on n ≥ 2 workers among a few tenants, by scanning them.
//!
//! Worker `i` serves the smallest `(F, id)` among tenants with `S − (i/n)·l ≤ v` (2DFQ §4,
//! Fig. 7's scan). For a backlog of a hundred or so the lane-minima treap costs more than the
//! scan it replaces: every tag change detaches and reinserts a node and recomputes n lane
//! minima along two root paths, and 2DFQᴱ changes a tenant's tags twice per request (at
//! dispatch, and at completion, when retroactive charging and the estimate move them). Here
//! a tag change writes one entry, whatever the number of workers, and a selection reads the
//! start tags, charges and finish tags, each a contiguous array, computing worker `i`'s
//! eligibility values `S − x_i·l` as it goes (exactly as the treap computes them).
//!
//! The smallest start tag (the approximate clock's lift) is lane 0's minimum (`x = 0`),
//! kept up to date and rescanned only when its holder moves up, as in [`super::super::scan`].

use super::super::{Selector, TagKey};
use super::eligible_at;

/// Above this many backlogged tenants (with two or more workers) the lane-minima treap is
/// used; below half of it, the scan again (hysteresis). Chosen, not tuned: at 100 tenants
/// the scan is 2.5–4× faster than the treap on 32 workers and cheaper on 2 (the pool), at
/// 1,000 a scan would read 1,000 entries per selection; the crossover was not measured
/// (docs/benchmarks.md, "third pass (branch pool3)").
pub(crate) const FEW_LANES: usize = 128;

const NONE: u32 = u32::MAX;

/// Independent running minima in [`LaneScan::first_eligible`]'s first pass: four SSE2
/// registers of two `f64` each. Eight rather than four: the second pass then reads an eighth
/// of the entries (a microbenchmark of the two passes at 100 entries: 69–85 ns against 75–94
/// with four and 114–175 for the single pass; equal at 60, slightly slower at 10).
const SCAN_WAYS: usize = 8;

/// From this many entries [`LaneScan::first_eligible`] takes two passes, below it one: at
/// 10 entries the core's cycle bench (32 workers) was 20–35 % slower with two passes, at 60
/// and 100 the microbenchmark was 35–40 % faster (docs/benchmarks.md, "fourth pass").
const TWO_PASSES_FROM: usize = 32;

/// The scanned tenants on n ≥ 2 lanes. See the module docs.
pub(crate) struct LaneScan {
    /// `i/n` for each lane, computed as the treap does (identical eligibility values).
    xs: Vec<f64>,
    /// Entry `k`'s start tag `S`.
    start: Vec<f64>,
    /// Entry `k`'s head charge `l`.
    cost: Vec<f64>,
    /// Entry `k`'s finish tag `F` (`-0.0` stored as `0.0`, as [`crate::util::Tag`] does).
    finish: Vec<f64>,
    /// Entry `k`'s tie-breaker (the tenant id).
    tie: Vec<u64>,
    /// Entry `k`'s tenant.
    slot: Vec<u32>,
    /// Each tenant's tags, to hand them back (`tags`).
    keys: Vec<TagKey>,
    /// Tenant → entry index, or `NONE`.
    pos: Vec<u32>,
    /// Lane 0's minimum, the smallest start tag (+∞ when empty).
    min: f64,
}

impl LaneScan {
    pub fn new(workers: usize) -> Self {
        let mut s = LaneScan {
            xs: Vec::new(),
            start: Vec::new(),
            cost: Vec::new(),
            finish: Vec::new(),
            tie: Vec::new(),
            slot: Vec::new(),
            keys: Vec::new(),
            pos: Vec::new(),
            min: f64::INFINITY,
        };
        s.set_lanes(workers);
        s
    }

    fn set_lanes(&mut self, workers: usize) {
        let lanes = workers.max(1);
        self.xs = (0..lanes).map(|i| i as f64 / lanes as f64).collect();
    }

    /// The number of lanes (workers).
    pub fn lanes(&self) -> usize {
        self.xs.len()
    }

    /// Every tenant and its tags, in tenant order.
    pub fn tags(&self) -> impl Iterator<Item = (u32, TagKey)> + '_ {
        (0..self.pos.len() as u32)
            .filter(|&t| self.pos[t as usize] != NONE)
            .map(|t| (t, self.keys[t as usize]))
    }

    /// The smallest eligibility value on the lane with stagger `x` (+∞ when empty).
    fn lane_min(&self, x: f64) -> f64 {
        self.start
            .iter()
            .zip(&self.cost)
            .map(|(&s, &l)| eligible_at(s, x, l))
            .fold(f64::INFINITY, |m, e| if e < m { e } else { m })
    }

    fn rescan_min(&mut self) {
        self.min = self.lane_min(self.xs[0]);
    }

    /// The smallest `(F, id)` in `lane` among entries with eligibility value at most `v`:
    /// by [`two_passes`](LaneScan::two_passes) from [`TWO_PASSES_FROM`] entries, by one
    /// ordered pass below (the same answer; the single pass is quicker on a few entries).
    #[inline]
    fn first_eligible(&self, lane: usize, v: f64) -> Option<usize> {
        if self.finish.len() >= TWO_PASSES_FROM {
            self.two_passes(lane, v)
        } else {
            self.one_pass(lane, v)
        }
    }

    /// [`first_eligible`](LaneScan::first_eligible) in one ordered pass. Whether an entry is
    /// eligible follows no pattern a branch predictor could learn, so it only masks the
    /// entry's finish tag to +∞ (a conditional move, no branch); the branches left are taken
    /// when the running minimum improves (a few times per scan) or ties it (equal finish
    /// tags, broken by the smaller id as [`crate::util::Tag`] does).
    #[inline]
    fn one_pass(&self, lane: usize, v: f64) -> Option<usize> {
        let n = self.finish.len();
        let (start, cost) = (&self.start[..n], &self.cost[..n]);
        let (finish, ties) = (&self.finish[..n], &self.tie[..n]);
        let lx = self.xs[lane];
        let ok = |k: usize| eligible_at(start[k], lx, cost[k]) <= v;
        let mut best = f64::INFINITY;
        let mut at = usize::MAX;
        for k in 0..n {
            let x = std::hint::select_unpredictable(ok(k), finish[k], f64::INFINITY);
            if x < best {
                best = x;
                at = k;
            } else if x == best && x != f64::INFINITY && ties[k] < ties[at] {
                // A finite `best` was set (`at` is valid), and only an eligible entry has a
                // finite `x`.
                at = k;
            }
        }
        if at == usize::MAX {
            at = self.eligible_without_finite_tag(lane, v);
        }
        (at != usize::MAX).then_some(at)
    }

    /// Nothing eligible has a finite finish tag: +∞ tags are not the mask's, so the eligible
    /// entry with the smallest id, if any (tags are saturated finite; this is for any other
    /// caller). `usize::MAX` for none.
    #[cold]
    fn eligible_without_finite_tag(&self, lane: usize, v: f64) -> usize {
        let lx = self.xs[lane];
        (0..self.finish.len())
            .filter(|&k| eligible_at(self.start[k], lx, self.cost[k]) <= v)
            .min_by_key(|&k| self.tie[k])
            .unwrap_or(usize::MAX)
    }

    /// [`first_eligible`](LaneScan::first_eligible) in two passes. The first finds the
    /// smallest finish tag among eligible entries: an ineligible entry's tag is masked to +∞
    /// (whether an entry is eligible follows no pattern a branch predictor could learn, so
    /// no branch), and [`SCAN_WAYS`] running minima, one
    /// per entry index modulo `SCAN_WAYS`, have no dependency between them, so the compiler
    /// keeps them in vector registers (`minpd`) and the pass has no branch per entry. The
    /// second pass reads only the ways whose minimum is the smallest (usually one, an eighth
    /// of the entries) for the entries holding it, and breaks ties by the smaller id as
    /// [`crate::util::Tag`] does (then by position, as the ordered pass does).
    #[inline]
    fn two_passes(&self, lane: usize, v: f64) -> Option<usize> {
        let n = self.finish.len();
        let (start, cost) = (&self.start[..n], &self.cost[..n]);
        let (finish, ties) = (&self.finish[..n], &self.tie[..n]);
        let lx = self.xs[lane];
        let ok = |k: usize| eligible_at(start[k], lx, cost[k]) <= v;
        // `x < m` keeps `m` for a NaN `x`, so a NaN tag is never the minimum (as before).
        let masked = |s: f64, l: f64, f: f64| {
            std::hint::select_unpredictable(eligible_at(s, lx, l) <= v, f, f64::INFINITY)
        };
        let mut ways = [f64::INFINITY; SCAN_WAYS];
        let (sc, cc) = (start.chunks_exact(SCAN_WAYS), cost.chunks_exact(SCAN_WAYS));
        let fc = finish.chunks_exact(SCAN_WAYS);
        let (sr, cr, fr) = (sc.remainder(), cc.remainder(), fc.remainder());
        for ((s, c), f) in sc.zip(cc).zip(fc) {
            for j in 0..SCAN_WAYS {
                let x = masked(s[j], c[j], f[j]);
                ways[j] = if x < ways[j] { x } else { ways[j] };
            }
        }
        // The remainder starts at a multiple of `SCAN_WAYS`: entry `k` stays in way
        // `k % SCAN_WAYS`, which the second pass relies on.
        for (j, ((&s, &c), &f)) in sr.iter().zip(cr).zip(fr).enumerate() {
            let x = masked(s, c, f);
            ways[j] = if x < ways[j] { x } else { ways[j] };
        }
        let best = ways
            .iter()
            .fold(f64::INFINITY, |b, &x| if x < b { x } else { b });
        let mut at = usize::MAX;
        if best != f64::INFINITY {
            for (j, _) in ways.iter().enumerate().filter(|&(_, &m)| m == best) {
                for k in (j..n).step_by(SCAN_WAYS) {
                    // An entry holding `best` may be ineligible (masked): check it again.
                    if finish[k] == best
                        && ok(k)
                        && (at == usize::MAX
                            || ties[k] < ties[at]
                            || (ties[k] == ties[at] && k < at))
                    {
                        at = k;
                    }
                }
            }
        }
        if at == usize::MAX {
            at = self.eligible_without_finite_tag(lane, v);
        }
        (at != usize::MAX).then_some(at)
    }
}

impl Selector for LaneScan {
    #[inline]
    fn set(&mut self, t: u32, key: TagKey) {
        let i = t as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, NONE);
            self.keys.resize(i + 1, TagKey::default());
        }
        self.keys[i] = key;
        let finish = key.finish + 0.0; // -0.0 as 0.0
        let lane0 = eligible_at(key.start, self.xs[0], key.cost);
        let p = self.pos[i];
        let old = if p == NONE {
            self.pos[i] = self.finish.len() as u32;
            self.finish.push(finish);
            self.tie.push(key.tie);
            self.slot.push(t);
            self.start.push(key.start);
            self.cost.push(key.cost);
            f64::INFINITY
        } else {
            let k = p as usize;
            self.finish[k] = finish;
            self.tie[k] = key.tie;
            let old = eligible_at(self.start[k], self.xs[0], self.cost[k]);
            self.start[k] = key.start;
            self.cost[k] = key.cost;
            old
        };
        if lane0 <= self.min {
            self.min = lane0;
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
        let k = p as usize;
        let old = eligible_at(self.start[k], self.xs[0], self.cost[k]);
        self.finish.swap_remove(k);
        self.tie.swap_remove(k);
        self.slot.swap_remove(k);
        self.start.swap_remove(k);
        self.cost.swap_remove(k);
        if let Some(&moved) = self.slot.get(k) {
            self.pos[moved as usize] = p;
        }
        if old == self.min {
            self.rescan_min();
        }
    }

    #[inline]
    fn select(&mut self, worker: usize, v: f64) -> Option<u32> {
        if self.finish.is_empty() {
            return None;
        }
        let lane = worker.min(self.xs.len() - 1);
        let k = match self.first_eligible(lane, v) {
            Some(k) => k,
            None => {
                // Work conservation (as the treap): nothing eligible at `v` (or `v` is NaN),
                // so serve at the earliest time any tenant becomes eligible on this lane.
                let earliest = self.lane_min(self.xs[lane]);
                self.first_eligible(lane, earliest)?
            }
        };
        Some(self.slot[k])
    }

    fn min_start(&self) -> Option<f64> {
        (!self.finish.is_empty()).then_some(self.min)
    }

    #[inline]
    fn lift(&self, v: f64) -> f64 {
        // `min` is +∞ when empty, and +∞ > v would lift: only a backlog lifts.
        if self.min > v && !self.finish.is_empty() {
            self.min
        } else {
            v
        }
    }

    fn len(&self) -> usize {
        self.finish.len()
    }

    fn set_workers(&mut self, workers: usize) {
        self.set_lanes(workers);
    }
}
