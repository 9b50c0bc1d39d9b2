//! Metering (Das et al., VLDB '14 §2.2, §3.5): per tenant CPU, Delay, effective utilization
//! `CPU_eff = CPU·100 / (CPU + Delay)`, the fractional violation `ViolCPU` and whether the
//! reservation (or the elastic burst) was violated in each metering interval. Independent of
//! the scheduling policy: it only sees tasks becoming ready, starting and stopping.
//!
//! Units. `CPU_i` is core-time used by the tenant as a percentage of the server's core-time in
//! the interval (`cores × length`). `Delay_i` is in the same unit: while the tenant has `q`
//! ready tasks and `r` running ones and the server runs `R` tasks in all, it accrues
//! `min(q, R − r)` core-seconds per second — the cores held by *other* tenants on which one of
//! its ready tasks could have run. This is the global-queue form of §3.5's per-core delays
//! "accumulated across all cores", counted once per core and independent of how many tasks
//! wait (footnote 1). Time a core idles on purpose (a limit, the utilization cap) is not
//! delay caused by other tenants and is not counted. So a tenant that always has work gets
//! `CPU + Delay ≈` the server's busy share and `CPU_eff ≈ CPU / busy share`, and a tenant idle
//! half the time is judged on the half it was active.
//!
//! Cost. A tenant with `q` ready and `r` running tasks accrues `min(q, R − r)`, which is the
//! number of *levels* `k ∈ (r, r + q]` with `R ≥ k`. So the meter keeps, per level `k`, the
//! total time `T_k` during which at least `k` tasks ran ([`Levels`], O(1) per start or stop),
//! and a tenant's delay over any stretch in which its `q` and `r` stay put is the change of
//! `Σ_{k=r+1}^{r+q} T_k` — read when the tenant's own counts change, when its interval
//! closes (a heap of the waiting tenants' interval ends) or when it is read. An event costs
//! O(log tenants + min(q, cores)) instead of O(tenants with ready tasks). The
//! delays equal the per-event sums of the earlier meter up to rounding (the sums are
//! grouped differently; `meter_scan.rs`, the earlier meter, is the tests' reference), and a
//! tenant that waited only while nothing else ran accrues exactly 0.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::account::{Book, MeterReading, MeterRecord, Terms, Usage};
use crate::types::{saturate, Error, TenantId};

/// Jain's fairness index (§2.5, Eq. 3) over `values` (the tenants' `ViolCPU`):
/// `(Σx)² / (n Σx²)`, from `1/n` (one tenant takes all) to 1 (all equal). `None` for no
/// values; 1 when all are 0 (nobody violated: perfectly even).
///
/// ```
/// use fairlane_core::reserve::jain_index;
/// assert!((jain_index(&[0.3, 0.3, 0.3]).unwrap() - 1.0).abs() < 1e-12);
/// assert_eq!(jain_index(&[1.0, 0.0, 0.0, 0.0]), Some(0.25));
/// ```
pub fn jain_index(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let s: f64 = values.iter().sum();
    let s2: f64 = values.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        return Some(1.0);
    }
    Some(s * s / (values.len() as f64 * s2))
}

/// A tenant's delay bookkeeping in the lazy meter.
#[derive(Clone, Copy, Debug)]
struct Lazy {
    /// `Σ_{k=r+1}^{r+q} T_k` when the delay was last accrued (0 while `q = 0`).
    snap: f64,
    /// The interval end this tenant has an entry for in the meter's heap (NaN: none).
    queued_end: f64,
}

/// Per level `k ≥ 1`, the total time `T_k` during which at least `k` tasks ran on the server
/// (see the module docs): `closed[k−1]` for the stretches that ended, plus `now − since[k−1]`
/// while at least `k` run.
#[derive(Clone, Debug, Default)]
struct Levels {
    closed: Vec<f64>,
    since: Vec<f64>,
    /// Tasks running now (`R`).
    running: usize,
}

impl Levels {
    /// `R` becomes `running` at `now`. `T_k(now)` keeps its exact value across the change:
    /// a closing level adds `now − since` to `closed` as [`Levels::t`] would, an opening
    /// one adds `now − now = 0`.
    fn set(&mut self, running: usize, now: f64) {
        while self.running < running {
            if self.closed.len() == self.running {
                self.closed.push(0.0);
                self.since.push(now);
            }
            self.since[self.running] = now;
            self.running += 1;
        }
        while self.running > running {
            self.running -= 1;
            let k = self.running;
            self.closed[k] = saturate(self.closed[k] + (now - self.since[k]));
        }
    }

    /// `T_k` at `at` (≥ the last change), `k` 1-based.
    fn t(&self, k: usize, at: f64) -> f64 {
        match self.closed.get(k - 1) {
            None => 0.0,
            Some(&c) if k <= self.running => c + (at - self.since[k - 1]),
            Some(&c) => c,
        }
    }

    /// `Σ_{k=r+1}^{r+q} T_k` at `at`: the levels above a tenant's own `r` running tasks that
    /// its `q` ready ones could fill. Levels never reached are 0.
    fn band(&self, r: usize, q: usize, at: f64) -> f64 {
        let top = (r + q).min(self.closed.len());
        let mut sum = 0.0;
        for k in r + 1..=top {
            sum += self.t(k, at);
        }
        sum
    }
}

/// An interval end in the meter's heap, earliest first (then by handle).
#[derive(Clone, Copy, Debug, PartialEq)]
struct End(f64, usize);

impl Eq for End {}

impl PartialOrd for End {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for End {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(self.1.cmp(&other.1))
    }
}

/// The metering logic of §2.2/§3.5 for a server of `cores` cores. Tenants are handles
/// (`usize`) returned by [`Meter::add_tenant`]. Feed it every task transition with a
/// non-decreasing `now` (an earlier one is taken as the latest seen); closed intervals are
/// collected with [`Meter::take_records`]. Handles it never issued are ignored.
///
/// ```
/// use fairlane_core::reserve::Meter;
/// use fairlane_core::TenantId;
/// // One core, 10 s intervals. A reserves 80 % but has work only for the first 5 s, and
/// // runs all of it: CPU = 50 % < 80 %, yet no delay, so CPU_eff = 100 % and no violation.
/// let mut m = Meter::new(1);
/// let a = m.add_tenant(TenantId(1), 80.0, None, 10.0, 0.0).unwrap();
/// m.enqueued(a, 0.0);
/// m.started(a, 0.0);
/// m.finished(a, 0.0, 5.0, 5.0);
/// m.close_through(10.0);
/// let r = &m.take_records()[0];
/// assert_eq!((r.cpu, r.delay, r.cpu_eff, r.violated), (50.0, 0.0, 100.0, false));
/// ```
#[derive(Clone, Debug)]
pub struct Meter {
    book: Book,
    lazy: Vec<Lazy>,
    /// `T_k` per level.
    levels: Levels,
    /// The current interval ends of tenants with ready tasks (stale entries are skipped).
    ends: BinaryHeap<Reverse<End>>,
}

impl Meter {
    /// A meter for a server of `cores` cores (≥ 1).
    pub fn new(cores: usize) -> Self {
        Meter {
            book: Book::new(cores),
            lazy: Vec::new(),
            levels: Levels::default(),
            ends: BinaryHeap::new(),
        }
    }

    /// Change the number of cores (takes effect for readings from now on).
    pub fn set_cores(&mut self, cores: usize) {
        self.book.set_cores(cores);
    }

    /// Start metering a tenant with reservation `res_cpu` (%; 0 for none), optional elastic
    /// burst `b` (%), metering interval `interval` (> 0, intervals aligned at multiples of it).
    pub fn add_tenant(
        &mut self,
        id: TenantId,
        res_cpu: f64,
        burst: Option<f64>,
        interval: f64,
        now: f64,
    ) -> Result<usize, Error> {
        let terms = Terms {
            res_cpu,
            burst,
            interval,
        };
        let t = self.book.add(id, terms, now)?;
        self.lazy.push(Lazy {
            snap: 0.0,
            queued_end: f64::NAN,
        });
        Ok(t)
    }

    /// Change a tenant's terms: the reservation and burst at once, the interval length from
    /// its next interval on.
    pub fn set_terms(
        &mut self,
        t: usize,
        res_cpu: f64,
        burst: Option<f64>,
        interval: f64,
    ) -> Result<(), Error> {
        let terms = Terms {
            res_cpu,
            burst,
            interval,
        };
        if self.book.set_terms(t, terms)? {
            // The end moved: file the new one.
            self.schedule_end(t);
        }
        Ok(())
    }

    /// Rebind a handle to another tenant (the scheduler reuses handles of removed tenants).
    pub fn rebind(&mut self, t: usize, id: TenantId, now: f64) {
        if self.book.rebind(t, id, now) {
            self.resnap(t);
            self.schedule_end(t);
        }
    }

    /// The tenant got a ready task.
    pub fn enqueued(&mut self, t: usize, now: f64) {
        if let Some((r, q)) = self.enter_counts(t, now) {
            let band = self.levels.band(r, q, self.book.last);
            self.accrue_band(t, band);
            self.book.enqueue(t);
            // The band with `q + 1`: the same sum, in the same order, with one term more on
            // top (a level never reached adds nothing).
            let next = if r + q < self.levels.closed.len() {
                band + self.levels.t(r + q + 1, self.book.last)
            } else {
                band
            };
            self.set_snap(t, next);
            self.schedule_end(t);
        }
    }

    /// A ready task left without running (cancelled).
    pub fn cancelled(&mut self, t: usize, now: f64) {
        if self.enter(t, now) {
            self.unqueue(t);
            self.resnap(t);
        }
    }

    /// One of the tenant's ready tasks started on a core.
    pub fn started(&mut self, t: usize, now: f64) {
        if let Some((r, q)) = self.enter_counts(t, now) {
            let (band, next) = self.bands_started(r, q);
            self.accrue_band(t, band);
            self.unqueue(t);
            self.book.start(t);
            self.levels.set(self.book.running_total, self.book.last);
            self.set_snap(t, next);
        }
    }

    /// A ready task started at once: [`Meter::enqueued`] then [`Meter::started`] at the same
    /// `now`, with the same readings and records, in one pass (the interval end the first
    /// would file only to have the second drop it is not filed).
    pub fn admitted(&mut self, t: usize, now: f64) {
        if self.enter(t, now) {
            self.book.enqueue(t);
            self.unqueue(t);
            self.book.start(t);
            self.levels.set(self.book.running_total, self.book.last);
            self.resnap(t);
        }
    }

    /// A task of the tenant that started at `start` left its core at `now` having used `used`
    /// core-time.
    pub fn finished(&mut self, t: usize, start: f64, used: f64, now: f64) {
        if self.enter(t, now) {
            self.book.finish(t, start, used);
            self.levels.set(self.book.running_total, self.book.last);
            self.resnap(t);
        }
    }

    /// Bring every tenant up to `now`, closing the intervals that ended.
    pub fn close_through(&mut self, now: f64) {
        self.advance(now);
        self.book.touch_all();
    }

    /// The tenant's meter so far in its current interval (`None` for an unknown handle).
    pub fn reading(&mut self, t: usize, now: f64) -> Option<MeterReading> {
        self.enter(t, now).then(|| self.book.reading(t))
    }

    /// Closed intervals collected so far, emptied, ordered by interval end and then tenant.
    ///
    /// The meter is lazy: it closes a tenant's interval when something next touches that
    /// tenant, so the order in which intervals were *noticed* depends on which tenants a
    /// dispatch happened to evaluate. Sorting makes the batch independent of that (the CI
    /// proptest `fast_ldf_decides_as_the_scan` found the two LDF walks noticing two windows
    /// that ended at the same instant in opposite orders).
    pub fn take_records(&mut self) -> Vec<MeterRecord> {
        let mut records = std::mem::take(&mut self.book.records);
        // A tenant's intervals never overlap, so (end, tenant) is a total order; the sort is
        // stable and a tenant's own records keep their time order.
        records.sort_by(|a, b| a.end.total_cmp(&b.end).then(a.tenant.0.cmp(&b.tenant.0)));
        records
    }

    /// Whether closed intervals wait for [`Meter::take_records`].
    pub fn has_records(&self) -> bool {
        !self.book.records.is_empty()
    }

    /// The latest `now` seen.
    pub fn now(&self) -> f64 {
        self.book.last
    }

    /// Bring the meter to `now` and the tenant's interval up to date (cheap when already).
    pub(crate) fn sync(&mut self, t: usize, now: f64) {
        if now > self.book.last {
            self.advance(now);
        }
        if self.book.ended(t) {
            self.book.touch(t);
        }
    }

    /// `ViolCPU` so far (after [`Meter::sync`]).
    pub(crate) fn viol_cpu(&self, t: usize) -> f64 {
        self.book.viol_cpu(t, self.delay_now(t))
    }

    /// The tenant's usage window (call [`Meter::sync`] first to bring it up to date).
    pub(crate) fn usage(&self, t: usize) -> &Usage {
        &self.book.tenants[t].usage
    }

    /// Before an event of tenant `t` at `now`: bring the meter to `now`, the tenant's
    /// intervals and delay up to date. `false` for a handle never issued.
    fn enter(&mut self, t: usize, now: f64) -> bool {
        let known = self.enter_counts(t, now).is_some();
        if known {
            self.accrue(t);
        }
        known
    }

    /// The tenant's delay so far in its interval (its accrued delay plus what its band of
    /// levels gained since).
    fn delay_now(&self, t: usize) -> f64 {
        let m = &self.book.tenants[t];
        if m.queued == 0 {
            return m.delay;
        }
        let band = self.levels.band(m.usage.running, m.queued, self.book.last);
        m.delay + (band - self.lazy[t].snap)
    }

    /// Bring the tenant's delay up to the meter's time (before its `q` or `r` change).
    fn accrue(&mut self, t: usize) {
        self.accrue_to(t, self.book.last);
    }

    /// Bring the tenant's delay up to `at` ∈ [last change of `R`, now].
    fn accrue_to(&mut self, t: usize, at: f64) {
        let m = &self.book.tenants[t];
        if m.queued == 0 {
            return;
        }
        let band = self.levels.band(m.usage.running, m.queued, at);
        self.accrue_band(t, band);
    }

    /// Before an event of tenant `t` at `now` (as [`Meter::enter`], the delay not yet
    /// accrued): the tenant's running and ready counts, `None` for a handle never issued.
    fn enter_counts(&mut self, t: usize, now: f64) -> Option<(usize, usize)> {
        if t >= self.book.tenants.len() {
            return None;
        }
        self.advance(now);
        self.book.touch(t);
        let m = &self.book.tenants[t];
        Some((m.usage.running, m.queued))
    }

    /// [`Meter::accrue`] to `band`, the tenant's band now (read by the caller).
    fn accrue_band(&mut self, t: usize, band: f64) {
        if self.book.tenants[t].queued > 0 {
            self.book.tenants[t].delay += band - self.lazy[t].snap;
            self.lazy[t].snap = band;
        }
    }

    /// The tenant's band now (`Σ_{k=r+1}^{r+q} T_k`) and the one it has once one of its
    /// ready tasks started (`r + 1` running, `q − 1` ready), in one pass, each summed in
    /// [`Levels::band`]'s order. Starting opens a level at the meter's time, which leaves
    /// every `T_k` as it was (a new level is 0): the second is bit for bit the band read
    /// after the start.
    fn bands_started(&self, r: usize, q: usize) -> (f64, f64) {
        let top = (r + q).min(self.levels.closed.len());
        let (mut band, mut next) = (0.0, 0.0);
        for k in r + 1..=top {
            let x = self.levels.t(k, self.book.last);
            band += x;
            if k > r + 1 {
                next += x;
            }
        }
        (band, next)
    }

    /// Set the tenant's snap (checked against a fresh [`Meter::resnap`] in the unit tests).
    fn set_snap(&mut self, t: usize, snap: f64) {
        self.lazy[t].snap = snap;
        #[cfg(test)]
        {
            self.resnap(t);
            assert_eq!(self.lazy[t].snap.to_bits(), snap.to_bits(), "derived snap");
        }
    }

    /// Take the tenant's band anew (after its `q` or `r` changed).
    fn resnap(&mut self, t: usize) {
        self.resnap_at(t, self.book.last);
    }

    fn resnap_at(&mut self, t: usize, at: f64) {
        let m = &self.book.tenants[t];
        let band = if m.queued == 0 {
            0.0
        } else {
            self.levels.band(m.usage.running, m.queued, at)
        };
        self.lazy[t].snap = band;
    }

    /// File the end of the tenant's interval in the heap if it has ready tasks and that end
    /// is not filed yet.
    fn schedule_end(&mut self, t: usize) {
        self.schedule_end_after(t, f64::NEG_INFINITY);
    }

    /// [`Meter::schedule_end`] only for an end later than `after`: at times so large that
    /// `start + len == start` the interval cannot move, and the heap must not return the
    /// same end for ever.
    fn schedule_end_after(&mut self, t: usize, after: f64) {
        let m = &self.book.tenants[t];
        let end = m.usage.end();
        let lazy = &mut self.lazy[t];
        if m.queued > 0 && lazy.queued_end != end && end > after {
            lazy.queued_end = end;
            self.ends.push(Reverse(End(end, t)));
        }
    }

    fn unqueue(&mut self, t: usize) {
        if self.book.unqueue(t) {
            // Its heap entry goes stale and is skipped.
            self.lazy[t].queued_end = f64::NAN;
        }
    }

    /// Move the meter to `now`, closing the intervals of waiting tenants that ended on the
    /// way (their delay accrued up to each end: `R` is constant since the last event). Other
    /// tenants accrue no delay and close theirs when next touched.
    #[inline]
    fn advance(&mut self, now: f64) {
        let now = if now > self.book.last {
            now
        } else {
            self.book.last
        };
        // Most events close nothing: that check stays at the caller.
        if self.ends.peek().is_none_or(|e| e.0 .0 > now) {
            self.book.last = now;
            return;
        }
        self.close_ends(now);
    }

    /// [`Meter::advance`]'s work when an interval end is due by `now` (≥ the last seen).
    fn close_ends(&mut self, now: f64) {
        while let Some(&Reverse(End(end, t))) = self.ends.peek() {
            if end > now {
                break;
            }
            self.ends.pop();
            if self.book.tenants[t].queued == 0 || self.lazy[t].queued_end != end {
                continue; // stale
            }
            self.lazy[t].queued_end = f64::NAN;
            let mut rolls = 0;
            while now >= self.book.tenants[t].usage.end() {
                if !self.book.tenants[t].usage.may_roll(rolls) {
                    // See MAX_ROLLS: skip unrecorded, delay counted from here.
                    self.book.tenants[t].usage.jump(now);
                    self.book.tenants[t].delay = 0.0;
                    self.resnap_at(t, now);
                    break;
                }
                // Not before the last change of `R` (an interval shortened by `set_terms`).
                let end = self.book.tenants[t].usage.end().max(self.book.last);
                self.accrue_to(t, end);
                self.book.roll(t);
                rolls += 1;
            }
            self.schedule_end_after(t, now);
        }
        self.book.last = now;
    }
}
