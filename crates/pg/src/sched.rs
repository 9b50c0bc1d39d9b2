//! Which tenant's transaction gets the next server connection: a thin adapter over
//! [`fairlane_runtime::FairGate`] (the workspace's one gate) with D seats, plus the tenants'
//! table and seeds/003's metering.
//!
//! * A core preset (`sfq`, `wfqe`, `2dfqe`, `drr`, `fifo`, …) runs as the gate builds it,
//!   with the tenants' weights.
//! * `ldf` and the §6 baselines (`drr-res`, `edf-res`, `no-res`) run a
//!   [`ReserveScheduler`](fairlane_core::reserve::ReserveScheduler) whose "cores" are the
//!   D seats. Reservations are percentages of the *server's* cores (`server.cores`), so
//!   each charged cost is the backend's CPU time × D / cores: then `CPU_i` as the scheduler
//!   computes it, cost over `D × time`, is the tenant's share of `cores × time`. It runs
//!   behind [`Prorated`](crate::prorate::Prorated): a transaction that crosses the end of
//!   a metering interval is charged to the interval it ends in by its CPU time's share of
//!   the wall time there (the pooler's meter takes the same charge).
//! * The [`Meter`] is the paper's metering logic (§2.2, §3.5) fed with the same events,
//!   independent of the policy: a transaction becomes ready when it asks for a connection,
//!   runs while it holds one, and is charged its backend's CPU time.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use fairlane_core::reserve::{Meter, MeterReading, Policy, Reservation, ReserveConfig};
use fairlane_core::TenantId;
use fairlane_runtime::{Acquire, AcquireError, Clock, FairGate, Permit, SystemClock};

use crate::config::{PgConfig, DEFAULT_TENANT};

/// A tenant as the pooler knows it.
#[derive(Clone, Debug)]
pub struct TenantInfo {
    /// Name (from `[[tenant]]`, or `default`).
    pub name: String,
    /// ResCPU (%).
    pub res: f64,
    /// MaxCPU (%).
    pub max: f64,
    /// Weight.
    pub weight: f64,
}

/// Per-tenant counters the pooler keeps beside the gate's.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Transactions (sessions, in session mode) that held a server connection.
    pub transactions: u64,
    /// Refused because a queue was full (SQLSTATE 53300).
    pub refused_full: u64,
    /// Refused after `limits.queue_timeout_ms` (SQLSTATE 57014).
    pub timed_out: u64,
    /// Backend CPU charged, seconds.
    pub cpu_seconds: f64,
    /// Server connection time held, seconds.
    pub held_seconds: f64,
    /// Metering intervals closed with work in them, and those that violated the
    /// reservation (`CPU_eff < ResCPU`).
    pub intervals: u64,
    /// See `intervals`.
    pub violations: u64,
    /// The last closed interval's reading.
    pub last: Option<MeterReading>,
}

#[derive(Debug)]
struct MeterState {
    meter: Meter,
    counters: Vec<Counters>,
}

/// Why a transaction got no server connection.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// A queue cap: SQLSTATE 53300.
    Full(String),
    /// Waited `limits.queue_timeout_ms`: SQLSTATE 57014.
    Timeout(Duration),
    /// The pooler is shutting down: SQLSTATE 57P01.
    Closed,
    /// The scheduler refused (a bug, logged by the gate): SQLSTATE XX000.
    Internal(String),
}

/// What [`Scheduling::join`] got.
#[derive(Debug)]
pub enum Joined<'a> {
    /// A free seat.
    Seat(Seat<'a>),
    /// A place in the queue: the request, whose grant wakes the waker given to `join`.
    Queued(Acquire),
}

/// The gate, the tenants and the meter.
#[derive(Debug)]
pub struct Scheduling {
    gate: FairGate,
    tenants: Vec<TenantInfo>,
    by_name: HashMap<String, usize>,
    meter: Mutex<MeterState>,
    /// Scheduler cost per CPU nanosecond (D / cores with a reservation policy, else 1).
    scale: f64,
    queue_timeout: Duration,
    /// The gate's clock too: the meter's times and the gate's are one reading.
    clock: SystemClock,
    cores: usize,
    /// The metering interval, seconds.
    interval: f64,
}

fn policy(name: &str) -> Option<Policy> {
    match name {
        "ldf" => Some(Policy::ldf()),
        "drr-res" => Some(Policy::drr()),
        "edf-res" => Some(Policy::Edf),
        "no-res" => Some(Policy::BestEffort),
        _ => None,
    }
}

impl Scheduling {
    /// Build from a checked configuration.
    pub fn new(config: &PgConfig) -> Result<Scheduling, String> {
        let mut tenants: Vec<TenantInfo> = config
            .tenants
            .iter()
            .map(|t| TenantInfo {
                name: t.name.clone(),
                res: t.res,
                max: t.max,
                weight: t.weight,
            })
            .collect();
        tenants.push(TenantInfo {
            name: DEFAULT_TENANT.into(),
            res: 0.0,
            max: 100.0,
            weight: 1.0,
        });
        let d = config.pool.size;
        let cores = config.server.cores();
        let interval_ns = config.scheduler.interval_ms as f64 * 1e6;
        let clock = SystemClock::new();
        let builder = FairGate::builder()
            .clock(clock)
            .seats(d)
            .max_waiting(config.limits.max_waiting)
            .max_waiting_per_tenant(config.limits.max_waiting_per_tenant)
            .initial_estimate(config.scheduler.initial_estimate_ms * 1e6);
        let (builder, scale) = match policy(&config.scheduler.algorithm) {
            Some(p) => {
                let mut s = ReserveConfig::new(p)
                    .cores(d)
                    .interval(interval_ns)
                    .build::<u64>()
                    .map_err(|e| format!("scheduler: {e}"))?;
                for (i, t) in tenants.iter().enumerate() {
                    let terms = Reservation::new(t.res, t.max).weight(t.weight);
                    s.set_reservation(TenantId(i as u64), terms, 0.0)
                        .map_err(|e| format!("tenant {:?}: {e}", t.name))?;
                }
                let s = crate::prorate::Prorated::new(s, interval_ns);
                (builder.with_scheduler(Box::new(s)), d as f64 / cores as f64)
            }
            None => {
                // Costs are measured after the fact: presets that know costs up front get
                // an estimator (as the proxy's).
                let c = fairlane_core::Config::for_executor(
                    &config.scheduler.algorithm,
                    d,
                    config.scheduler.initial_estimate_ms * 1e6,
                    false,
                )
                .map_err(|e| format!("scheduler: {e}"))?;
                (builder.scheduler(c), 1.0)
            }
        };
        let gate = builder.build().map_err(|e| format!("scheduler: {e}"))?;
        if policy(&config.scheduler.algorithm).is_none() {
            for (i, t) in tenants.iter().enumerate() {
                gate.set_weight(TenantId(i as u64), t.weight)
                    .map_err(|e| format!("tenant {:?}: weight: {e}", t.name))?;
            }
        }
        let mut meter = Meter::new(cores);
        for (i, t) in tenants.iter().enumerate() {
            meter
                .add_tenant(
                    TenantId(i as u64),
                    t.res,
                    None,
                    config.scheduler.interval_ms as f64 / 1e3,
                    0.0,
                )
                .map_err(|e| format!("meter: {e}"))?;
        }
        let by_name = tenants
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(Scheduling {
            gate,
            meter: Mutex::new(MeterState {
                meter,
                counters: vec![Counters::default(); tenants.len()],
            }),
            tenants,
            by_name,
            scale,
            queue_timeout: Duration::from_millis(config.limits.queue_timeout_ms),
            clock,
            cores,
            interval: config.scheduler.interval_ms as f64 / 1e3,
        })
    }

    /// The tenant of a connection (the first `[[tenant]]` that matches, else `default`).
    pub fn classify(&self, config: &PgConfig, user: &str, database: &str, app: &str) -> usize {
        config
            .tenants
            .iter()
            .position(|t| t.matches(user, database, app))
            .unwrap_or(self.tenants.len() - 1)
    }

    /// The tenants, by index.
    pub fn tenants(&self) -> &[TenantInfo] {
        &self.tenants
    }

    /// A tenant's index by name.
    pub fn tenant_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The gate.
    pub fn gate(&self) -> &FairGate {
        &self.gate
    }

    /// The server's cores (what reservations are percentages of).
    pub fn cores(&self) -> usize {
        self.cores
    }

    fn now(&self) -> f64 {
        self.secs(Instant::now())
    }

    /// Seconds from the clock's epoch to `t`.
    fn secs(&self, t: Instant) -> f64 {
        self.clock.at_instant(t).unwrap_or_default().as_secs_f64()
    }

    fn meter(&self) -> MutexGuard<'_, MeterState> {
        self.meter.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Join the queue for one of the D seats: a free seat at once, a refusal, or a place in
    /// the queue whose grant wakes `waker` (the wait is at most `limits.queue_timeout_ms`,
    /// on `timer`, which this arms; end it with [`Scheduling::waited`]).
    pub fn join(
        &self,
        tenant: usize,
        timer: &mut QueueTimer,
        waker: &Waker,
    ) -> Result<Joined<'_>, Refusal> {
        // One clock reading for the gate's join, the meter and the queue timer.
        let joined = Instant::now();
        let mut waiting = self
            .gate
            .acquire(TenantId(tenant as u64), 0u32)
            .joined_at(joined);
        // The first poll joins the queue: a refusal, a free seat, or a wait whose waker the
        // gate keeps from this same call.
        match Pin::new(&mut waiting).poll(&mut Context::from_waker(waker)) {
            Poll::Ready(Ok(permit)) => {
                // A free seat: no wait, so no timer. The meter's times are the gate's.
                let now = permit.granted_at().as_secs_f64();
                self.meter().meter.admitted(tenant, now);
                return Ok(Joined::Seat(self.seat(permit, tenant, now)));
            }
            Poll::Ready(Err(e)) => return Err(self.refused(tenant, e)),
            Poll::Pending => {}
        }
        let now = waiting.joined().unwrap_or_default().as_secs_f64();
        self.meter().meter.enqueued(tenant, now);
        timer.set(joined, self.queue_timeout);
        Ok(Joined::Queued(waiting))
    }

    /// Wait fairly for one of the D seats in this task, at most `limits.queue_timeout_ms`
    /// on `timer`.
    pub async fn acquire(
        &self,
        tenant: usize,
        timer: &mut QueueTimer,
    ) -> Result<Seat<'_>, Refusal> {
        let waker = std::future::poll_fn(|cx| Poll::Ready(cx.waker().clone())).await;
        let mut waiting = match self.join(tenant, timer, &waker)? {
            Joined::Seat(s) => return Ok(s),
            Joined::Queued(a) => a,
        };
        let result = std::future::poll_fn(|cx| {
            if let Poll::Ready(r) = Pin::new(&mut waiting).poll(cx) {
                return Poll::Ready(Some(r));
            }
            timer.poll_expired(cx, false).map(|()| None)
        })
        .await;
        drop(waiting);
        self.waited(tenant, result)
    }

    /// How a wait from [`Scheduling::join`] ended: the gate's answer, or `None` when the
    /// timer expired first (the request dropped, so it left the queue).
    pub fn waited(
        &self,
        tenant: usize,
        result: Option<Result<Permit, AcquireError>>,
    ) -> Result<Seat<'_>, Refusal> {
        match result {
            Some(Ok(permit)) => {
                // Started when the seat was handed over, on the gate's clock (the meter's).
                let start = permit.granted_at().as_secs_f64();
                self.meter().meter.started(tenant, start);
                Ok(self.seat(permit, tenant, start))
            }
            Some(Err(_)) => {
                let now = self.now();
                self.meter().meter.cancelled(tenant, now);
                Err(Refusal::Closed)
            }
            None => {
                let now = self.now();
                let mut m = self.meter();
                m.meter.cancelled(tenant, now);
                m.counters[tenant].timed_out += 1;
                Err(Refusal::Timeout(self.queue_timeout))
            }
        }
    }

    /// A request the gate refused at joining.
    fn refused(&self, tenant: usize, e: AcquireError) -> Refusal {
        match e {
            AcquireError::Closed => Refusal::Closed,
            AcquireError::Scheduler(e) => Refusal::Internal(e.to_string()),
            e => {
                self.meter().counters[tenant].refused_full += 1;
                Refusal::Full(e.to_string())
            }
        }
    }

    /// `start`: seconds on the clock.
    fn seat(&self, permit: Permit, tenant: usize, start: f64) -> Seat<'_> {
        Seat {
            sched: self,
            permit: Some(permit),
            tenant,
            start,
        }
    }

    /// `start` and `now`: seconds on the clock; `held = now − start`.
    fn release(&self, tenant: usize, start: f64, now: f64, held: f64, cpu_ns: Option<u64>) {
        let cpu = cpu_ns.map_or(held, |n| n as f64 * 1e-9);
        let mut m = self.meter();
        let charged = crate::prorate::charge(cpu, start, now, self.interval);
        m.meter.finished(tenant, start, charged, now);
        let c = &mut m.counters[tenant];
        c.transactions += 1;
        c.cpu_seconds += cpu;
        c.held_seconds += held;
        self.collect(&mut m);
    }

    /// Fold closed metering intervals into the counters.
    fn collect(&self, m: &mut MeterState) {
        if !m.meter.has_records() {
            return;
        }
        for r in m.meter.take_records() {
            let c = &mut m.counters[r.tenant.0 as usize];
            c.intervals += 1;
            c.violations += u64::from(r.violated && r.res_cpu > 0.0);
            c.last = Some(MeterReading {
                cpu: r.cpu,
                delay: r.delay,
                cpu_eff: r.cpu_eff,
                viol_cpu: r.viol_cpu,
            });
        }
    }

    /// Every tenant's counters and the meter's reading of its current interval so far.
    pub fn readings(&self) -> Vec<(Counters, Option<MeterReading>)> {
        let now = self.now();
        let mut m = self.meter();
        m.meter.close_through(now);
        self.collect(&mut m);
        (0..self.tenants.len())
            .map(|t| {
                let r = m.meter.reading(t, now);
                (m.counters[t].clone(), r)
            })
            .collect()
    }
}

/// A client's queue timeout: one timer for all its waits. A wait's deadline is kept beside
/// the timer, which is moved to it only when it is due earlier than the timer or the timer
/// has fired: a client's deadlines only move later, so the timer is due at or before the
/// deadline, and when it fires first (an earlier wait's deadline) it is moved on, once per
/// timeout period instead of once per wait. A timer moved per wait costs a clock reading
/// and tokio's reset; armed and dropped per wait, also a wheel insertion and removal.
/// Between waits it stays armed: when it fires with no wait on it, the client's task is
/// woken once for nothing.
#[derive(Debug)]
pub struct QueueTimer {
    sleep: Pin<Box<Sleep>>,
    /// The current wait's deadline.
    due: Instant,
    /// The sleep holds the waker of the last [`QueueTimer::poll_expired`], which was the
    /// same as the one before it and returned pending, and has been neither reset nor
    /// fired since: polling it again with that waker changes nothing.
    registered: bool,
}

impl QueueTimer {
    /// A timer not yet armed.
    pub fn new() -> Self {
        let now = Instant::now();
        QueueTimer {
            sleep: Box::pin(tokio::time::sleep_until(now.into())),
            due: now,
            registered: false,
        }
    }

    /// Due `timeout` after `from` (a timeout too long for the clock: in 30 years).
    fn set(&mut self, from: Instant, timeout: Duration) {
        self.due = from
            .checked_add(timeout)
            .unwrap_or_else(|| from + Duration::from_secs(30 * 365 * 86_400));
        if self.sleep.is_elapsed() || self.due < self.sleep.deadline().into_std() {
            self.sleep.as_mut().reset(self.due.into());
            self.registered = false;
        }
    }

    /// The next [`QueueTimer::poll_expired`] comes with another waker than the last one.
    pub(crate) fn new_waker(&mut self) {
        self.registered = false;
    }

    /// Ready once the deadline passed (the timer firing earlier is moved on to it).
    /// `same_waker`: `cx`'s waker is the one of the previous call (the sleep is then polled
    /// only if it fired or was reset since: otherwise it still holds that waker, and a poll
    /// would only say pending again). A caller that does not know passes `false`.
    pub(crate) fn poll_expired(
        &mut self,
        cx: &mut std::task::Context<'_>,
        same_waker: bool,
    ) -> Poll<()> {
        if same_waker && self.registered && !self.sleep.is_elapsed() {
            return Poll::Pending;
        }
        while self.sleep.as_mut().poll(cx).is_ready() {
            if Instant::now() >= self.due {
                self.registered = false;
                return Poll::Ready(());
            }
            self.sleep.as_mut().reset(self.due.into());
        }
        self.registered = same_waker;
        Poll::Pending
    }
}

impl Default for QueueTimer {
    fn default() -> Self {
        Self::new()
    }
}

/// A held seat: the right to use one server connection. Finish it with the backend's CPU
/// time ([`Seat::finish`]); dropped unfinished, it is charged the time held.
#[derive(Debug)]
pub struct Seat<'a> {
    sched: &'a Scheduling,
    permit: Option<Permit>,
    tenant: usize,
    /// When it started, seconds on the clock.
    start: f64,
}

impl Seat<'_> {
    /// Release at `end` (a clock reading the caller has anyway), charging `cpu_ns` of
    /// backend CPU (`None`: the time held).
    pub fn finish(mut self, cpu_ns: Option<u64>, end: Instant) {
        self.release(cpu_ns, end);
    }

    fn release(&mut self, cpu_ns: Option<u64>, end: Instant) {
        let Some(mut permit) = self.permit.take() else {
            return;
        };
        let scale = self.sched.scale;
        let now = match cpu_ns {
            Some(n) => {
                permit.set_cost(n as f64 * scale);
                // The gate's release and the meter's end are one reading of the clock.
                permit.release_at(end).as_secs_f64()
            }
            None => {
                let now = self.sched.secs(end);
                permit.set_cost((now - self.start).max(0.0) * 1e9 * scale);
                permit.release_at(end);
                now
            }
        };
        let held = (now - self.start).max(0.0);
        self.sched
            .release(self.tenant, self.start, now, held, cpu_ns);
    }
}

impl Drop for Seat<'_> {
    fn drop(&mut self) {
        if self.permit.is_some() {
            self.release(None, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the timer expires within `wait`.
    async fn fires(t: &mut QueueTimer, wait: Duration) -> bool {
        let expired = std::future::poll_fn(|cx| t.poll_expired(cx, false));
        tokio::time::timeout(wait, expired).await.is_ok()
    }

    #[test]
    fn a_queue_timer_moves_and_takes_any_timeout() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut t = QueueTimer::new();
            // Too long for the clock: due in 30 years, not a panic.
            t.set(Instant::now(), Duration::MAX);
            assert!(!fires(&mut t, Duration::from_millis(20)).await);
            // Moved later while armed: the earlier deadline fires the timer, which moves on
            // without expiring.
            t.set(Instant::now(), Duration::from_millis(30));
            t.set(Instant::now(), Duration::from_secs(3600));
            assert!(!fires(&mut t, Duration::from_millis(100)).await);
            // Moved earlier: fires.
            t.set(Instant::now(), Duration::from_millis(1));
            assert!(fires(&mut t, Duration::from_secs(10)).await);
        });
    }
}
