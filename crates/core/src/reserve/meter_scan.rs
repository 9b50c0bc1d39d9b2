//! The eager meter (delay accrued per waiting tenant at every event), kept as the lazy meter's test reference. Metering (Das et al., VLDB '14 §2.2, §3.5): per tenant CPU, Delay, effective utilization
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

use super::meter::{denoise, MeterReading, MeterRecord};
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

#[derive(Clone, Debug)]
struct Metered {
    id: TenantId,
    res: f64,
    burst: Option<f64>,
    usage: Usage,
    /// Delay core-seconds in the current interval.
    delay: f64,
    queued: usize,
    /// Had work at some time during the current interval.
    active: bool,
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
    /// Tenants with ready tasks, and each tenant's position in it.
    waiting: Vec<usize>,
    pos: Vec<usize>,
    last: f64,
    records: Vec<MeterRecord>,
}

const NOT_WAITING: usize = usize::MAX;

impl Meter {
    /// A meter for a server of `cores` cores (≥ 1).
    pub fn new(cores: usize) -> Self {
        Meter {
            cores: cores.max(1) as f64,
            tenants: Vec::new(),
            running_total: 0,
            waiting: Vec::new(),
            pos: Vec::new(),
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
            queued: 0,
            active: false,
        });
        self.pos.push(NOT_WAITING);
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
        }
    }

    /// The tenant got a ready task.
    pub fn enqueued(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        let m = &mut self.tenants[t];
        m.queued += 1;
        m.active = true;
        if m.queued == 1 {
            self.pos[t] = self.waiting.len();
            self.waiting.push(t);
        }
    }

    /// A ready task left without running (cancelled).
    pub fn cancelled(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.unqueue(t);
    }

    /// One of the tenant's ready tasks started on a core.
    pub fn started(&mut self, t: usize, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.unqueue(t);
        let m = &mut self.tenants[t];
        m.usage.started(self.last);
        m.active = true;
        self.running_total += 1;
    }

    /// A task of the tenant that started at `start` left its core at `now` having used `used`
    /// core-time.
    pub fn finished(&mut self, t: usize, start: f64, used: f64, now: f64) {
        if t >= self.tenants.len() {
            return;
        }
        self.advance(now);
        self.touch(t);
        self.tenants[t].usage.finished(start, used, self.last);
        self.running_total = self.running_total.saturating_sub(1);
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

    /// Closed intervals collected so far (in closing order), emptied.
    pub fn take_records(&mut self) -> Vec<MeterRecord> {
        std::mem::take(&mut self.records)
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
            m.delay,
            m.res,
            self.cores * m.usage.len,
        )
        .1
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
            let p = self.pos[t];
            self.waiting.swap_remove(p);
            if let Some(&moved) = self.waiting.get(p) {
                self.pos[moved] = p;
            }
            self.pos[t] = NOT_WAITING;
        }
    }

    /// Accrue the delay of every waiting tenant from the last event to `now` (rates are
    /// constant in between), closing intervals on the way.
    fn advance(&mut self, now: f64) {
        let now = if now > self.last { now } else { self.last };
        let from = self.last;
        if now > from {
            for k in 0..self.waiting.len() {
                let t = self.waiting[k];
                let m = &self.tenants[t];
                let others = self.running_total.saturating_sub(m.usage.running);
                let rate = m.queued.min(others) as f64;
                let mut at = from;
                let mut rolls = 0;
                while now >= self.tenants[t].usage.end() {
                    if !self.tenants[t].usage.may_roll(rolls) {
                        self.tenants[t].usage.jump(now);
                        at = self.tenants[t].usage.start.min(now);
                        self.tenants[t].delay = 0.0;
                        break;
                    }
                    let end = self.tenants[t].usage.end();
                    self.tenants[t].delay += rate * (end - at);
                    self.roll(t);
                    at = end;
                    rolls += 1;
                }
                self.tenants[t].delay += rate * (now - at);
            }
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
