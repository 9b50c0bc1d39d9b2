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

use crate::types::{saturate, Error, TenantId};

/// The most metering intervals one event closes one at a time. A longer jump of time (a clock
/// that leapt, an absurd `now`) closes the first ones and skips the rest unrecorded, so that
/// no call loops for as many intervals as the jump spans (`now` = 1e300 with 1-second
/// intervals must return). 4096 intervals with a task running throughout is far
/// beyond any reservation experiment; a jump over idle intervals is skipped in one step anyway.
pub(crate) const MAX_ROLLS: usize = 4096;

/// Core-time used in the current window of a fixed-length, aligned interval sequence
/// (`[k·len, (k+1)·len)`), counting running tasks' elapsed time so far.
#[derive(Clone, Debug)]
pub(crate) struct Usage {
    pub len: f64,
    pub start: f64,
    /// Core-time of finished quanta attributed to this window.
    pub used: f64,
    /// Tasks running now.
    pub running: usize,
    /// Σ over running tasks of max(task start, window start).
    pub start_sum: f64,
}

impl Usage {
    pub fn new(len: f64, now: f64) -> Self {
        Usage {
            len,
            start: (now / len).floor() * len,
            used: 0.0,
            running: 0,
            start_sum: 0.0,
        }
    }

    pub fn end(&self) -> f64 {
        self.start + self.len
    }

    /// Core-time used in the window up to `now` (finished quanta plus running ones so far).
    pub fn consumed(&self, now: f64) -> f64 {
        self.used + (self.running as f64 * now - self.start_sum).max(0.0)
    }

    /// Utilization so far, percent of `cores × elapsed`; 0 at the window's first instant.
    pub fn cpu(&self, now: f64, cores: f64) -> f64 {
        let elapsed = now - self.start;
        if elapsed <= 0.0 {
            0.0
        } else {
            self.consumed(now) * 100.0 / (cores * elapsed)
        }
    }

    /// Share of the whole window's budget consumed so far, percent of `cores × len`.
    pub fn budget_cpu(&self, now: f64, cores: f64) -> f64 {
        self.consumed(now) * 100.0 / (cores * self.len)
    }

    /// Close the window at its end: returns the core-time it used, and opens the next one.
    pub fn roll(&mut self) -> f64 {
        let end = self.end();
        let total = self.consumed(end);
        self.start = end;
        self.used = 0.0;
        self.start_sum = self.running as f64 * end;
        total
    }

    /// Whether rolling the window one interval at a time reaches `now` within the budget:
    /// `rolls` done so far, and the window must still move (at times so large that
    /// `start + len == start` it cannot).
    pub fn may_roll(&self, rolls: usize) -> bool {
        rolls < MAX_ROLLS && self.end() > self.start
    }

    /// Skip to the window holding `now` without recording the windows in between (after
    /// [`MAX_ROLLS`]); running tasks count from the new window's start.
    pub fn jump(&mut self, now: f64) {
        let start = (now / self.len).floor() * self.len;
        if start > self.start {
            self.start = start;
        }
        self.used = 0.0;
        self.start_sum = self.running as f64 * self.start;
    }

    /// Jump over whole idle windows (nothing running) so that `now` is in the current one.
    pub fn skip_idle(&mut self, now: f64) {
        if self.running == 0 && now >= self.end() {
            self.start = (now / self.len).floor() * self.len;
            self.used = 0.0;
            self.start_sum = 0.0;
        }
    }

    pub fn started(&mut self, now: f64) {
        self.running += 1;
        self.start_sum += now.max(self.start);
    }

    /// A task started at `start` stopped at `now` having used `used` core-time. The part of
    /// its wall time before this window was already attributed to earlier windows.
    pub fn finished(&mut self, start: f64, used: f64, now: f64) {
        self.running = self.running.saturating_sub(1);
        self.start_sum -= start.max(self.start);
        if self.running == 0 {
            self.start_sum = 0.0;
        }
        let carried = (self.start - start).max(0.0);
        let _ = now;
        // Saturating: usage is any finite cost up to f64::MAX, and a sum of two of them, or
        // `used · 100` in the percentages, must stay finite.
        self.used = saturate(self.used + (used - carried).max(0.0));
    }

    /// The time at which utilization so far falls to `limit` percent if nothing starts or
    /// stops, capped at the window's end; `None` if it is below already.
    pub fn below_at(&self, limit: f64, now: f64, cores: f64) -> Option<f64> {
        if self.cpu(now, cores) < limit {
            return None;
        }
        // consumed(t) = U0 + r (t − now) = k (t − start), k = limit·cores/100.
        let k = limit * cores / 100.0;
        let r = self.running as f64;
        let u0 = self.consumed(now);
        let end = self.end();
        let t = if k > r {
            ((u0 - r * now + k * self.start) / (k - r)).min(end)
        } else {
            end
        };
        // A hair later, so that the utilization is strictly below the limit when asked.
        Some(t.max(now) + self.len * 1e-9)
    }
}

/// One tenant's meter over one metering interval (§2.2). Percentages are of the server's
/// core-time in the interval.
#[derive(Clone, Debug, PartialEq)]
pub struct MeterRecord {
    /// The tenant.
    pub tenant: TenantId,
    /// Interval start.
    pub start: f64,
    /// Interval end.
    pub end: f64,
    /// Its reservation `ResCPU_i` (%) when the interval closed.
    pub res_cpu: f64,
    /// `CPU_i` (%).
    pub cpu: f64,
    /// `Delay_i` (%), see the module docs.
    pub delay: f64,
    /// `CPU_eff = CPU·100 / (CPU + Delay)` (Eq. 1), 100 when the tenant had no work.
    pub cpu_eff: f64,
    /// `ViolCPU = (ResCPU − CPU_eff) / ResCPU`, floored at 0 (Eq. 2); 0 without a reservation.
    pub viol_cpu: f64,
    /// `CPU_eff < ResCPU` (§2.2).
    pub violated: bool,
    /// Elastic reservations only: the burst was not met — the tenant stayed below `ResCPU`
    /// for the interval and `CPU_eff < b` (§2.3).
    pub burst_violated: Option<bool>,
}

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

/// The meter's view of one tenant so far in its current interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeterReading {
    /// `CPU_i` so far (%), over the elapsed part of the interval.
    pub cpu: f64,
    /// `Delay_i` so far (%), same unit.
    pub delay: f64,
    /// `CPU_eff` so far (%).
    pub cpu_eff: f64,
    /// `ViolCPU` so far.
    pub viol_cpu: f64,
}

#[derive(Clone, Debug)]
struct Metered {
    id: TenantId,
    res: f64,
    burst: Option<f64>,
    usage: Usage,
    /// Delay core-seconds in the current interval, accrued up to the last time `snap` was
    /// taken.
    delay: f64,
    /// `Σ_{k=r+1}^{r+q} T_k` when the delay was last accrued (0 while `q = 0`).
    snap: f64,
    /// The interval end this tenant has an entry for in the meter's heap (NaN: none).
    queued_end: f64,
    queued: usize,
    /// Had work at some time during the current interval.
    active: bool,
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
    cores: f64,
    tenants: Vec<Metered>,
    /// Tasks running on the server.
    running_total: usize,
    /// `T_k` per level.
    levels: Levels,
    /// The current interval ends of tenants with ready tasks (stale entries are skipped).
    ends: BinaryHeap<Reverse<End>>,
    last: f64,
    records: Vec<MeterRecord>,
}

impl Meter {
    /// A meter for a server of `cores` cores (≥ 1).
    pub fn new(cores: usize) -> Self {
        Meter {
            cores: cores.max(1) as f64,
            tenants: Vec::new(),
            running_total: 0,
            levels: Levels::default(),
            ends: BinaryHeap::new(),
            last: 0.0,
            records: Vec::new(),
        }
    }

    /// Change the number of cores (takes effect for readings from now on).
    pub fn set_cores(&mut self, cores: usize) {
        self.cores = cores.max(1) as f64;
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
        check_interval(interval)?;
        self.tenants.push(Metered {
            id,
            res: res_cpu,
            burst,
            usage: Usage::new(interval, now.max(self.last)),
            delay: 0.0,
            snap: 0.0,
            queued_end: f64::NAN,
            queued: 0,
            active: false,
        });
        Ok(self.tenants.len() - 1)
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
        check_interval(interval)?;
        if let Some(m) = self.tenants.get_mut(t) {
            m.res = res_cpu;
            m.burst = burst;
            m.usage.len = interval;
            // The end moved: file the new one.
            self.schedule_end(t);
        }
        Ok(())
    }

    /// Rebind a handle to another tenant (the scheduler reuses handles of removed tenants).
    pub fn rebind(&mut self, t: usize, id: TenantId, now: f64) {
        if let Some(m) = self.tenants.get_mut(t) {
            m.id = id;
            m.usage = Usage::new(m.usage.len, now.max(self.last));
            m.delay = 0.0;
            m.active = false;
            self.resnap(t);
            self.schedule_end(t);
        }
    }

    /// The tenant got a ready task.
    pub fn enqueued(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.accrue(t);
        let m = &mut self.tenants[t];
        m.queued += 1;
        m.active = true;
        self.resnap(t);
        self.schedule_end(t);
    }

    /// A ready task left without running (cancelled).
    pub fn cancelled(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.accrue(t);
        self.unqueue(t);
        self.resnap(t);
    }

    /// One of the tenant's ready tasks started on a core.
    pub fn started(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.accrue(t);
        self.unqueue(t);
        let m = &mut self.tenants[t];
        m.usage.started(self.last);
        m.active = true;
        self.running_total += 1;
        self.levels.set(self.running_total, self.last);
        self.resnap(t);
    }

    /// A task of the tenant that started at `start` left its core at `now` having used `used`
    /// core-time.
    pub fn finished(&mut self, t: usize, start: f64, used: f64, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.accrue(t);
        self.tenants[t].usage.finished(start, used, self.last);
        self.running_total = self.running_total.saturating_sub(1);
        self.levels.set(self.running_total, self.last);
        self.resnap(t);
    }

    /// Bring every tenant up to `now`, closing the intervals that ended.
    pub fn close_through(&mut self, now: f64) {
        self.advance(now);
        for t in 0..self.tenants.len() {
            self.touch(t);
        }
    }

    /// The tenant's meter so far in its current interval (`None` for an unknown handle).
    pub fn reading(&mut self, t: usize, now: f64) -> Option<MeterReading> {
        if t >= self.tenants.len() {
            return None;
        }
        self.advance(now);
        self.touch(t);
        self.accrue(t);
        let now = self.last;
        let m = &self.tenants[t];
        let cpu = m.usage.cpu(now, self.cores);
        let elapsed = now - m.usage.start;
        let span = self.cores * m.usage.len;
        // A delay below the noise of the interval's core-time reads as none, as in the
        // records: a reading a few ulps into an interval would otherwise divide rounding by
        // nearly nothing.
        let delay = if elapsed > 0.0 {
            denoise(m.delay, span) * 100.0 / (self.cores * elapsed)
        } else {
            0.0
        };
        let (cpu_eff, viol_cpu) = eff_viol(m.usage.consumed(now), m.delay, m.res, span);
        Some(MeterReading {
            cpu,
            delay,
            cpu_eff,
            viol_cpu,
        })
    }

    /// Closed intervals collected so far, emptied, ordered by interval end and then tenant.
    ///
    /// The meter is lazy: it closes a tenant's interval when something next touches that
    /// tenant, so the order in which intervals were *noticed* depends on which tenants a
    /// dispatch happened to evaluate. Sorting makes the batch independent of that (the CI
    /// proptest `fast_ldf_decides_as_the_scan` found the two LDF walks noticing two windows
    /// that ended at the same instant in opposite orders).
    pub fn take_records(&mut self) -> Vec<MeterRecord> {
        let mut records = std::mem::take(&mut self.records);
        // A tenant's intervals never overlap, so (end, tenant) is a total order; the sort is
        // stable and a tenant's own records keep their time order.
        records.sort_by(|a, b| a.end.total_cmp(&b.end).then(a.tenant.0.cmp(&b.tenant.0)));
        records
    }

    /// The latest `now` seen.
    pub fn now(&self) -> f64 {
        self.last
    }

    /// Bring the meter to `now` and the tenant's interval up to date (cheap when already).
    pub(crate) fn sync(&mut self, t: usize, now: f64) {
        if now > self.last {
            self.advance(now);
        }
        let m = &self.tenants[t];
        if self.last >= m.usage.end() {
            self.touch(t);
        }
    }

    /// `ViolCPU` so far (after [`Meter::sync`]).
    pub(crate) fn viol_cpu(&self, t: usize) -> f64 {
        let m = &self.tenants[t];
        eff_viol(
            m.usage.consumed(self.last),
            self.delay_now(t),
            m.res,
            self.cores * m.usage.len,
        )
        .1
    }

    /// The tenant's delay so far in its interval (its accrued delay plus what its band of
    /// levels gained since).
    fn delay_now(&self, t: usize) -> f64 {
        let m = &self.tenants[t];
        if m.queued == 0 {
            return m.delay;
        }
        let band = self.levels.band(m.usage.running, m.queued, self.last);
        m.delay + (band - m.snap)
    }

    /// Bring the tenant's delay up to the meter's time (before its `q` or `r` change).
    fn accrue(&mut self, t: usize) {
        self.accrue_to(t, self.last);
    }

    /// Bring the tenant's delay up to `at` ∈ [last change of `R`, now].
    fn accrue_to(&mut self, t: usize, at: f64) {
        let m = &self.tenants[t];
        if m.queued == 0 {
            return;
        }
        let band = self.levels.band(m.usage.running, m.queued, at);
        let m = &mut self.tenants[t];
        m.delay += band - m.snap;
        m.snap = band;
    }

    /// Take the tenant's band anew (after its `q` or `r` changed).
    fn resnap(&mut self, t: usize) {
        self.resnap_at(t, self.last);
    }

    fn resnap_at(&mut self, t: usize, at: f64) {
        let m = &self.tenants[t];
        let band = if m.queued == 0 {
            0.0
        } else {
            self.levels.band(m.usage.running, m.queued, at)
        };
        self.tenants[t].snap = band;
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
        let m = &mut self.tenants[t];
        let end = m.usage.end();
        if m.queued > 0 && m.queued_end != end && end > after {
            m.queued_end = end;
            self.ends.push(Reverse(End(end, t)));
        }
    }

    /// The tenant's usage window (call [`Meter::sync`] first to bring it up to date).
    pub(crate) fn usage(&self, t: usize) -> &Usage {
        &self.tenants[t].usage
    }

    fn unqueue(&mut self, t: usize) {
        let m = &mut self.tenants[t];
        if m.queued == 0 {
            return;
        }
        m.queued -= 1;
        if m.queued == 0 {
            // Its heap entry goes stale and is skipped.
            m.queued_end = f64::NAN;
        }
    }

    /// Move the meter to `now`, closing the intervals of waiting tenants that ended on the
    /// way (their delay accrued up to each end: `R` is constant since the last event). Other
    /// tenants accrue no delay and close theirs when next touched.
    fn advance(&mut self, now: f64) {
        let now = if now > self.last { now } else { self.last };
        while let Some(&Reverse(End(end, t))) = self.ends.peek() {
            if end > now {
                break;
            }
            self.ends.pop();
            let m = &self.tenants[t];
            if m.queued == 0 || m.queued_end != end {
                continue; // stale
            }
            self.tenants[t].queued_end = f64::NAN;
            let mut rolls = 0;
            while now >= self.tenants[t].usage.end() {
                if !self.tenants[t].usage.may_roll(rolls) {
                    // See MAX_ROLLS: skip unrecorded, delay counted from here.
                    self.tenants[t].usage.jump(now);
                    self.tenants[t].delay = 0.0;
                    self.resnap_at(t, now);
                    break;
                }
                // Not before the last change of `R` (an interval shortened by `set_terms`).
                let end = self.tenants[t].usage.end().max(self.last);
                self.accrue_to(t, end);
                self.roll(t);
                rolls += 1;
            }
            self.schedule_end_after(t, now);
        }
        self.last = now;
    }

    /// Close the tenant's intervals that ended by now (its delay is already accrued).
    fn touch(&mut self, t: usize) {
        let now = self.last;
        let mut rolls = 0;
        loop {
            let m = &mut self.tenants[t];
            if now < m.usage.end() {
                break;
            }
            if m.usage.running == 0 && m.queued == 0 && !m.active {
                m.usage.skip_idle(now);
                m.delay = 0.0;
                break;
            }
            if !m.usage.may_roll(rolls) {
                m.usage.jump(now);
                m.delay = 0.0;
                break;
            }
            self.roll(t);
            rolls += 1;
        }
    }

    fn roll(&mut self, t: usize) {
        let cores = self.cores;
        let m = &mut self.tenants[t];
        let (start, end) = (m.usage.start, m.usage.end());
        let used = m.usage.roll();
        let delay = std::mem::take(&mut m.delay);
        if m.active {
            let span = cores * (end - start);
            let delay = denoise(delay, span);
            let cpu = used * 100.0 / span;
            let (cpu_eff, viol_cpu) = eff_viol(used, delay, m.res, span);
            let violated = m.res > 0.0 && cpu_eff < m.res;
            let burst_violated = m.burst.map(|b| cpu < m.res && cpu_eff < b);
            self.records.push(MeterRecord {
                tenant: m.id,
                start,
                end,
                res_cpu: m.res,
                cpu,
                delay: delay * 100.0 / span,
                cpu_eff,
                viol_cpu,
                violated,
                burst_violated,
            });
        }
        m.active = m.queued > 0 || m.usage.running > 0;
    }
}

/// `CPU_eff` (Eq. 1) and `ViolCPU` (Eq. 2) from core-time used and delayed.
///
/// `span` is the interval's core-time (cores × length): a delay below `DELAY_NOISE` of it
/// counts as none (see [`denoise`]).
fn eff_viol(used: f64, delay: f64, res: f64, span: f64) -> (f64, f64) {
    let delay = denoise(delay, span);
    let eff = if used + delay > 0.0 {
        used * 100.0 / (used + delay)
    } else {
        100.0
    };
    let viol = if res > 0.0 {
        ((res - eff) / res).max(0.0)
    } else {
        0.0
    };
    (eff, viol)
}

pub(crate) fn check_interval(interval: f64) -> Result<(), Error> {
    if interval.is_finite() && interval > 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig {
            field: "interval",
            reason: format!("the metering interval must be finite and > 0, got {interval}"),
        })
    }
}

/// Delays are sums and differences of instants; at large times their rounding leaves
/// residues of many ulps (1.4e-12 core-seconds at t ≈ 96 s, found by the meter proptest)
/// where the exact delay is 0. With nothing used, such a residue would turn `CPU_eff` from
/// 100 % into 0 % and flag a reserved tenant as violated, so a delay below this fraction of
/// the interval's core-time (a nanosecond per second) counts as none.
pub(crate) const DELAY_NOISE: f64 = 1e-9;

/// `delay`, or 0 when it is below [`DELAY_NOISE`] of `span` (rounding, not waiting).
pub(crate) fn denoise(delay: f64, span: f64) -> f64 {
    if delay.abs() <= DELAY_NOISE * span {
        0.0
    } else {
        delay
    }
}
