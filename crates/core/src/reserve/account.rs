//! What the reservation meters share (Das et al., VLDB '14 §2.2): a tenant's usage window,
//! its account over a metering interval, the records of closed intervals and the formulas
//! for `CPU_eff` (Eq. 1) and `ViolCPU` (Eq. 2). How delay accrues is each meter's own part.

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

/// A tenant's terms: reservation `ResCPU` (%; 0 for none), elastic burst `b` (%) and
/// metering interval (> 0, intervals aligned at multiples of it).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Terms {
    pub res_cpu: f64,
    pub burst: Option<f64>,
    pub interval: f64,
}

/// One tenant's account in the current metering interval: its terms, its usage window, the
/// delay accrued so far (how it accrues is the meter's business) and its ready tasks.
#[derive(Clone, Debug)]
pub(crate) struct Account {
    pub id: TenantId,
    pub res: f64,
    pub burst: Option<f64>,
    pub usage: Usage,
    /// Delay core-seconds in the current interval, accrued up to the meter's last update.
    pub delay: f64,
    pub queued: usize,
    /// Had work at some time during the current interval.
    pub active: bool,
}

/// The record keeping both meters share: the tenants' accounts, the server's running count,
/// the latest time seen and the closed intervals. A meter adds how delay accrues on top.
#[derive(Clone, Debug)]
pub(crate) struct Book {
    pub cores: f64,
    pub tenants: Vec<Account>,
    /// Tasks running on the server.
    pub running_total: usize,
    pub last: f64,
    pub records: Vec<MeterRecord>,
}

impl Book {
    pub fn new(cores: usize) -> Self {
        Book {
            cores: cores.max(1) as f64,
            tenants: Vec::new(),
            running_total: 0,
            last: 0.0,
            records: Vec::new(),
        }
    }

    pub fn set_cores(&mut self, cores: usize) {
        self.cores = cores.max(1) as f64;
    }

    /// Open an account; returns its handle.
    pub fn add(&mut self, id: TenantId, terms: Terms, now: f64) -> Result<usize, Error> {
        check_interval(terms.interval)?;
        self.tenants.push(Account {
            id,
            res: terms.res_cpu,
            burst: terms.burst,
            usage: Usage::new(terms.interval, now.max(self.last)),
            delay: 0.0,
            queued: 0,
            active: false,
        });
        Ok(self.tenants.len() - 1)
    }

    /// New terms for a tenant; `Ok(false)` for an unknown handle.
    pub fn set_terms(&mut self, t: usize, terms: Terms) -> Result<bool, Error> {
        check_interval(terms.interval)?;
        let Some(m) = self.tenants.get_mut(t) else {
            return Ok(false);
        };
        m.res = terms.res_cpu;
        m.burst = terms.burst;
        m.usage.len = terms.interval;
        Ok(true)
    }

    /// Close every tenant's intervals that ended by now.
    pub fn touch_all(&mut self) {
        for t in 0..self.tenants.len() {
            self.touch(t);
        }
    }

    /// Give the handle to another tenant, with a fresh interval; `false` for an unknown one.
    pub fn rebind(&mut self, t: usize, id: TenantId, now: f64) -> bool {
        let last = self.last;
        let Some(m) = self.tenants.get_mut(t) else {
            return false;
        };
        m.id = id;
        m.usage = Usage::new(m.usage.len, now.max(last));
        m.delay = 0.0;
        m.active = false;
        true
    }

    /// The tenant got a ready task.
    pub fn enqueue(&mut self, t: usize) {
        let m = &mut self.tenants[t];
        m.queued += 1;
        m.active = true;
    }

    /// One ready task fewer; `true` when it was the tenant's last one.
    pub fn unqueue(&mut self, t: usize) -> bool {
        let m = &mut self.tenants[t];
        if m.queued == 0 {
            return false;
        }
        m.queued -= 1;
        m.queued == 0
    }

    /// One of the tenant's tasks started on a core at the latest time seen.
    pub fn start(&mut self, t: usize) {
        let m = &mut self.tenants[t];
        m.usage.started(self.last);
        m.active = true;
        self.running_total += 1;
    }

    /// A task of the tenant that started at `start` left its core having used `used`.
    pub fn finish(&mut self, t: usize, start: f64, used: f64) {
        self.tenants[t].usage.finished(start, used, self.last);
        self.running_total = self.running_total.saturating_sub(1);
    }

    /// Whether the tenant's interval ended by the latest time seen.
    pub fn ended(&self, t: usize) -> bool {
        self.last >= self.tenants[t].usage.end()
    }

    /// The tenant's meter so far, its delay accrued up to the latest time seen.
    pub fn reading(&self, t: usize) -> MeterReading {
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
        MeterReading {
            cpu,
            delay,
            cpu_eff,
            viol_cpu,
        }
    }

    /// `ViolCPU` so far with `delay` core-seconds of delay in the interval.
    pub fn viol_cpu(&self, t: usize, delay: f64) -> f64 {
        let m = &self.tenants[t];
        eff_viol(
            m.usage.consumed(self.last),
            delay,
            m.res,
            self.cores * m.usage.len,
        )
        .1
    }

    /// Close the tenant's intervals that ended by now (its delay is already accrued).
    #[inline]
    pub fn touch(&mut self, t: usize) {
        // Most events find the interval still open: that check stays at the caller.
        let open = self.last < self.tenants[t].usage.end();
        if !open {
            self.close_ended(t);
        }
    }

    /// [`Book::touch`]'s work when the interval may have ended.
    fn close_ended(&mut self, t: usize) {
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

    /// Close the tenant's current interval, recording it if the tenant was active.
    pub fn roll(&mut self, t: usize) {
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
