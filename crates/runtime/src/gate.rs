//! [`FairGate`]: fair admission for async code. At most n requests hold a *seat* at once;
//! when seats are taken, waiters queue per tenant and a fairlane-core scheduler decides who
//! gets the next free seat. Seats are the scheduler's workers: seat `i` asks `dequeue(i)`,
//! so 2DFQ's per-worker eligibility works unchanged.
//!
//! The gate is executor-agnostic (std `Waker`s only; no timer, no spawned task): it works
//! under tokio, async-std, smol or a hand-written poll loop.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fairlane_core::{ClassId, Config, Decision, Dispatch, Request, Scheduler, TenantId, Ticket};

use crate::pool::{config_error, BuildError};
use crate::setup::{self, SchedulerChoice};
use crate::stats::{MetricsSnapshot, Stats};

/// Why a request could not get a seat.
#[derive(Clone, Debug, PartialEq)]
pub enum AcquireError {
    /// [`FairGate::close`] was called.
    Closed,
    /// `limit` requests are waiting already.
    QueueFull {
        /// [`GateBuilder::max_waiting`].
        limit: usize,
    },
    /// The tenant has `limit` requests waiting already.
    TenantQueueFull {
        /// The tenant.
        tenant: TenantId,
        /// [`GateBuilder::max_waiting_per_tenant`].
        limit: usize,
    },
    /// The scheduler refused the request (an invalid cost, or a scheduler that needs costs
    /// up front and got none).
    Scheduler(fairlane_core::Error),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AcquireError::Closed => f.write_str("gate is closed"),
            AcquireError::QueueFull { limit } => {
                write!(f, "gate queue is full ({limit} requests waiting)")
            }
            AcquireError::TenantQueueFull { tenant, limit } => {
                write!(
                    f,
                    "gate queue of {tenant} is full ({limit} requests waiting)"
                )
            }
            AcquireError::Scheduler(e) => write!(f, "scheduler refused the request: {e}"),
        }
    }
}

impl std::error::Error for AcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AcquireError::Scheduler(e) => Some(e),
            _ => None,
        }
    }
}

/// Builds a [`FairGate`].
///
/// Defaults: 1 seat per core, the `2dfqe` preset with unseen (tenant, class) pairs estimated at
/// 1 ms of holding time, at most 100,000 waiters of which 10,000 per tenant.
#[derive(Clone, Debug)]
pub struct GateBuilder {
    seats: Option<usize>,
    scheduler: SchedulerChoice,
    initial_estimate: f64,
    max_waiting: usize,
    max_waiting_per_tenant: usize,
}

impl Default for GateBuilder {
    fn default() -> Self {
        GateBuilder {
            seats: None,
            scheduler: SchedulerChoice::Preset("2dfqe".into()),
            initial_estimate: 1e6,
            max_waiting: 100_000,
            max_waiting_per_tenant: 10_000,
        }
    }
}

impl GateBuilder {
    /// At most this many concurrent holders (≥ 1).
    pub fn seats(mut self, seats: usize) -> Self {
        self.seats = Some(seats);
        self
    }

    /// A core preset by name; its estimator starts unseen (tenant, class) pairs at
    /// [`initial_estimate`](GateBuilder::initial_estimate). Known-cost presets (`wfq`, `2dfq`,
    /// …) need [`FairGate::acquire_with_cost`].
    pub fn preset(mut self, name: &str) -> Self {
        self.scheduler = SchedulerChoice::Preset(name.to_string());
        self
    }

    /// A scheduler configuration, used as given except for its number of workers (= seats).
    pub fn scheduler(mut self, config: Config) -> Self {
        self.scheduler = SchedulerChoice::Config(config);
        self
    }

    /// Estimate for unseen (tenant, class) pairs with a preset, in cost units (default
    /// 1,000,000 = 1 ms of holding time, the default cost unit being nanoseconds).
    pub fn initial_estimate(mut self, cost: f64) -> Self {
        self.initial_estimate = cost;
        self
    }

    /// At most this many waiters over all tenants.
    pub fn max_waiting(mut self, limit: usize) -> Self {
        self.max_waiting = limit;
        self
    }

    /// At most this many waiters per tenant.
    pub fn max_waiting_per_tenant(mut self, limit: usize) -> Self {
        self.max_waiting_per_tenant = limit;
        self
    }

    /// Build the gate.
    pub fn build(self) -> Result<FairGate, BuildError> {
        let seats = match self.seats {
            Some(s) => s,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        if seats == 0 {
            return Err(config_error("seats", "must be at least 1, got 0".into()));
        }
        if self.max_waiting == 0 || self.max_waiting_per_tenant == 0 {
            return Err(config_error(
                "max_waiting",
                "queue limits must be at least 1".into(),
            ));
        }
        let config = self.scheduler.resolve(seats, self.initial_estimate)?;
        let sched = config.build::<u64>()?;
        Ok(FairGate {
            shared: Arc::new(GateShared {
                state: Mutex::new(GateState {
                    sched,
                    free: (0..seats).rev().collect(),
                    waiters: Vec::new(),
                    free_waiters: Vec::new(),
                    closed: false,
                    retry: false,
                    stats: Stats::new("gate"),
                }),
                epoch: Instant::now(),
                seats,
                max_waiting: self.max_waiting,
                max_waiting_per_tenant: self.max_waiting_per_tenant,
                requires_cost: setup::requires_cost(&config),
                name: config.name(),
            }),
        })
    }
}

enum Slot {
    Free,
    Waiting {
        ticket: Ticket,
        tenant: TenantId,
        since: Instant,
        waker: Option<Waker>,
    },
    Granted {
        ticket: Ticket,
        tenant: TenantId,
        seat: usize,
    },
    Closed,
}

struct Waiter {
    generation: u32,
    slot: Slot,
}

struct GateState {
    sched: Box<dyn Scheduler<u64> + Send>,
    /// Seats nobody holds. Non-empty only while nothing is queued (or the scheduler idles on
    /// purpose: `retry`).
    free: Vec<usize>,
    waiters: Vec<Waiter>,
    free_waiters: Vec<u32>,
    closed: bool,
    /// The scheduler answered `RetryAt`: free seats are offered again at the next event.
    retry: bool,
    stats: Stats,
}

struct GateShared {
    state: Mutex<GateState>,
    epoch: Instant,
    seats: usize,
    max_waiting: usize,
    max_waiting_per_tenant: usize,
    requires_cost: bool,
    name: &'static str,
}

impl GateShared {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_nanos() as f64
    }
}

fn key(index: u32, generation: u32) -> u64 {
    (u64::from(generation) << 32) | u64::from(index)
}

impl GateState {
    /// The waiter behind a key, if the key is current.
    fn waiter(&mut self, key: u64) -> Option<&mut Waiter> {
        let w = self.waiters.get_mut(key as u32 as usize)?;
        (w.generation == (key >> 32) as u32).then_some(w)
    }

    fn free_waiter(&mut self, key: u64) {
        if let Some(w) = self.waiter(key) {
            w.slot = Slot::Free;
            w.generation = w.generation.wrapping_add(1);
            self.free_waiters.push(key as u32);
        }
    }

    fn new_waiter(&mut self) -> (u32, u32) {
        match self.free_waiters.pop() {
            Some(i) => (i, self.waiters[i as usize].generation),
            None => {
                self.waiters.push(Waiter {
                    generation: 0,
                    slot: Slot::Free,
                });
                ((self.waiters.len() - 1) as u32, 0)
            }
        }
    }

    /// Offer `seat` to the scheduler: grant it to the chosen waiter (whose waker is pushed on
    /// `wake`), or keep it free.
    fn offer(&mut self, seat: usize, now: f64, wake: &mut Wakers) {
        loop {
            match self.sched.dequeue(seat, now) {
                Ok(Decision::Run(Dispatch {
                    ticket, request, ..
                })) => {
                    let tenant = request.tenant;
                    match self.waiter(request.payload) {
                        Some(w) => {
                            if let Slot::Waiting { since, waker, .. } = std::mem::replace(
                                &mut w.slot,
                                Slot::Granted {
                                    ticket,
                                    tenant,
                                    seat,
                                },
                            ) {
                                let waited = since.elapsed().as_nanos() as u64;
                                self.stats.get(tenant).started(waited);
                                if let Some(waker) = waker {
                                    wake.push(waker);
                                }
                                return;
                            }
                        }
                        None => {
                            // Cannot happen (a waiter leaves the queue before its slot is
                            // freed); settle it and offer the seat again.
                            let _ = self.sched.complete(ticket, 0.0, now);
                        }
                    }
                }
                Ok(Decision::RetryAt(_)) => {
                    self.retry = true;
                    self.free.push(seat);
                    return;
                }
                Ok(Decision::Empty) | Err(_) => {
                    self.free.push(seat);
                    return;
                }
            }
        }
    }

    /// Offer every free seat while requests wait.
    fn offer_free(&mut self, now: f64, wake: &mut Wakers) {
        self.retry = false;
        while self.sched.queued() > 0 {
            let Some(seat) = self.free.pop() else { break };
            self.offer(seat, now, wake);
            if self.retry {
                break;
            }
        }
    }

    /// A holder gives its seat back after using `cost`.
    fn release(&mut self, ticket: Ticket, seat: usize, cost: f64, now: f64, wake: &mut Wakers) {
        let _ = self.sched.complete(ticket, cost, now);
        self.offer(seat, now, wake);
        if self.retry {
            self.offer_free(now, wake);
        }
    }
}

/// Wakers to wake once the gate's lock is released (usually at most one).
#[derive(Default)]
struct Wakers(Option<Waker>, Vec<Waker>);

impl Wakers {
    fn push(&mut self, w: Waker) {
        if self.0.is_none() {
            self.0 = Some(w);
        } else {
            self.1.push(w);
        }
    }
    fn wake(self) {
        if let Some(w) = self.0 {
            w.wake();
        }
        for w in self.1 {
            w.wake();
        }
    }
}

/// A fair admission gate for async code: at most `seats` concurrent holders, and a fairlane-core
/// scheduler choosing which waiting tenant gets the next free seat.
///
/// ```
/// use fairlane_runtime::FairGate;
///
/// # async fn handle(gate: FairGate) {
/// let gate = FairGate::builder().seats(4).preset("2dfqe").build().unwrap();
/// let permit = gate.acquire(7u64, 0u32).await.unwrap(); // waits fairly for a seat
/// // … do the work …
/// drop(permit); // reports the time held as the cost and hands the seat on
/// # }
/// ```
///
/// Cloning is cheap and shares the gate. Costs are nanoseconds of holding time unless the
/// holder sets them ([`Permit::set_cost`]); if you set costs in your own unit, set them on
/// every permit.
#[derive(Clone)]
pub struct FairGate {
    shared: Arc<GateShared>,
}

impl fmt::Debug for FairGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FairGate")
            .field("scheduler", &self.shared.name)
            .field("seats", &self.shared.seats)
            .finish_non_exhaustive()
    }
}

impl FairGate {
    /// Start building a gate.
    pub fn builder() -> GateBuilder {
        GateBuilder::default()
    }

    /// Wait for a seat. The request joins its tenant's queue when first polled; dropping the
    /// future before it completes removes it (or hands back a seat granted meanwhile).
    pub fn acquire(&self, tenant: impl Into<TenantId>, class: impl Into<ClassId>) -> Acquire {
        Acquire {
            gate: self.clone(),
            tenant: tenant.into(),
            class: class.into(),
            cost: None,
            state: AcquireState::Init,
        }
    }

    /// Wait for a seat for a request whose cost is known up front (in the gate's cost unit).
    pub fn acquire_with_cost(
        &self,
        tenant: impl Into<TenantId>,
        class: impl Into<ClassId>,
        cost: f64,
    ) -> Acquire {
        let mut a = self.acquire(tenant, class);
        a.cost = Some(cost);
        a
    }

    /// Set a tenant's weight φ (default 1).
    pub fn set_weight(
        &self,
        tenant: impl Into<TenantId>,
        weight: f64,
    ) -> Result<(), fairlane_core::Error> {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        st.sched.set_weight(tenant.into(), weight, now)
    }

    /// Refuse new requests and fail every waiter with [`AcquireError::Closed`]. Permits
    /// already held stay valid.
    pub fn close(&self) {
        let mut wake = Wakers::default();
        {
            let mut guard = self.shared.lock();
            let st = &mut *guard;
            st.closed = true;
            let now = self.shared.now();
            for w in st.waiters.iter_mut() {
                if let Slot::Waiting {
                    ticket,
                    tenant,
                    waker,
                    ..
                } = &mut w.slot
                {
                    let _ = st.sched.cancel(*ticket, now);
                    st.stats.get(*tenant).cancelled();
                    if let Some(waker) = waker.take() {
                        wake.push(waker);
                    }
                    w.slot = Slot::Closed;
                }
            }
        }
        wake.wake();
    }

    /// Whether [`close`](FairGate::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Number of seats.
    pub fn seats(&self) -> usize {
        self.shared.seats
    }

    /// Requests waiting for a seat.
    pub fn waiting(&self) -> usize {
        self.shared.lock().sched.queued()
    }

    /// Seats held (granted permits, including those not yet picked up by their waiter).
    pub fn holding(&self) -> usize {
        self.shared.lock().sched.running()
    }

    /// The scheduler's preset-style name.
    pub fn scheduler_name(&self) -> &'static str {
        self.shared.name
    }

    /// The scheduler's view of a tenant (weight, waiting and holding counts, start tag).
    pub fn tenant(&self, tenant: impl Into<TenantId>) -> Option<fairlane_core::TenantView> {
        self.shared.lock().sched.tenant(tenant.into())
    }

    /// Per-tenant counters and histograms (wait in ns, cost in the gate's cost unit).
    pub fn metrics(&self) -> MetricsSnapshot {
        self.shared.lock().stats.snapshot()
    }
}

enum AcquireState {
    Init,
    Waiting(u64),
    Done,
}

/// The future of [`FairGate::acquire`]: resolves to a [`Permit`] once a seat is granted.
/// Cancellation-safe: dropping it leaves nothing behind in the gate.
#[must_use = "a request joins the queue only when the future is polled"]
pub struct Acquire {
    gate: FairGate,
    tenant: TenantId,
    class: ClassId,
    cost: Option<f64>,
    state: AcquireState,
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("tenant", &self.tenant)
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

impl Acquire {
    fn permit(&self, ticket: Ticket, seat: usize) -> Permit {
        Permit {
            gate: self.gate.clone(),
            ticket,
            seat,
            tenant: self.tenant,
            granted: Instant::now(),
            cost: None,
        }
    }

    /// First poll: join the queue, and take a free seat if the scheduler gives it to us.
    fn start(&mut self, cx: &mut Context<'_>) -> Poll<Result<Permit, AcquireError>> {
        let shared = &self.gate.shared;
        if self.cost.is_none() && shared.requires_cost {
            return Poll::Ready(Err(AcquireError::Scheduler(
                fairlane_core::Error::CostRequired {
                    tenant: self.tenant,
                    class: self.class,
                },
            )));
        }
        if let Err(e) = setup::check_cost(self.cost) {
            return Poll::Ready(Err(AcquireError::Scheduler(e)));
        }
        let mut wake = Wakers::default();
        let result = {
            let mut st = shared.lock();
            if st.closed {
                return Poll::Ready(Err(AcquireError::Closed));
            }
            if st.sched.queued() >= shared.max_waiting {
                st.stats.get(self.tenant).rejected();
                return Poll::Ready(Err(AcquireError::QueueFull {
                    limit: shared.max_waiting,
                }));
            }
            if st.stats.queued(self.tenant) >= shared.max_waiting_per_tenant {
                st.stats.get(self.tenant).rejected();
                return Poll::Ready(Err(AcquireError::TenantQueueFull {
                    tenant: self.tenant,
                    limit: shared.max_waiting_per_tenant,
                }));
            }
            let now = shared.now();
            let (index, generation) = st.new_waiter();
            let k = key(index, generation);
            let mut req = Request::new(self.tenant, self.class, k);
            if let Some(c) = self.cost {
                req = req.with_cost(c);
            }
            match st.sched.enqueue(req, now) {
                Ok(ticket) => {
                    st.waiters[index as usize].slot = Slot::Waiting {
                        ticket,
                        tenant: self.tenant,
                        since: Instant::now(),
                        waker: None,
                    };
                    st.stats.get(self.tenant).enqueued();
                }
                Err(e) => {
                    st.free_waiters.push(index);
                    return Poll::Ready(Err(AcquireError::Scheduler(e)));
                }
            }
            self.state = AcquireState::Waiting(k);
            if !st.free.is_empty() {
                st.offer_free(now, &mut wake);
            }
            Self::check(&mut st, k, cx)
        };
        wake.wake();
        match result {
            Poll::Ready(Ok((ticket, seat))) => {
                self.state = AcquireState::Done;
                Poll::Ready(Ok(self.permit(ticket, seat)))
            }
            Poll::Ready(Err(e)) => {
                self.state = AcquireState::Done;
                Poll::Ready(Err(e))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Whether waiter `k` was granted (freeing its slot) or closed; else remember the waker.
    fn check(
        st: &mut GateState,
        k: u64,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(Ticket, usize), AcquireError>> {
        let Some(w) = st.waiter(k) else {
            return Poll::Ready(Err(AcquireError::Closed));
        };
        match &mut w.slot {
            Slot::Granted { ticket, seat, .. } => {
                let r = (*ticket, *seat);
                st.free_waiter(k);
                Poll::Ready(Ok(r))
            }
            Slot::Closed => {
                st.free_waiter(k);
                Poll::Ready(Err(AcquireError::Closed))
            }
            Slot::Waiting { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            Slot::Free => Poll::Ready(Err(AcquireError::Closed)),
        }
    }
}

impl Future for Acquire {
    type Output = Result<Permit, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.state {
            AcquireState::Init => this.start(cx),
            AcquireState::Waiting(k) => {
                let result = {
                    let mut st = this.gate.shared.lock();
                    Self::check(&mut st, k, cx)
                };
                match result {
                    Poll::Ready(r) => {
                        this.state = AcquireState::Done;
                        Poll::Ready(r.map(|(ticket, seat)| this.permit(ticket, seat)))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            AcquireState::Done => Poll::Ready(Err(AcquireError::Closed)),
        }
    }
}

impl Drop for Acquire {
    fn drop(&mut self) {
        let AcquireState::Waiting(k) = self.state else {
            return;
        };
        let shared = &self.gate.shared;
        let mut wake = Wakers::default();
        {
            let mut st = shared.lock();
            let now = shared.now();
            let slot = match st.waiter(k) {
                Some(w) => std::mem::replace(&mut w.slot, Slot::Free),
                None => return,
            };
            match slot {
                Slot::Waiting { ticket, tenant, .. } => {
                    // Still queued: leave the queue, no ghost left behind.
                    let _ = st.sched.cancel(ticket, now);
                    st.stats.get(tenant).cancelled();
                }
                Slot::Granted {
                    ticket,
                    tenant,
                    seat,
                } => {
                    // Granted but never picked up: the seat goes to the next waiter, and the
                    // tenant is charged nothing for it.
                    st.stats.get(tenant).abandoned();
                    st.release(ticket, seat, 0.0, now, &mut wake);
                }
                Slot::Closed | Slot::Free => {}
            }
            // Recycle the slot under a new generation.
            st.free_waiter(k);
        }
        wake.wake();
    }
}

/// A held seat. Dropping it reports the cost (the time held, or what
/// [`set_cost`](Permit::set_cost) said) and hands the seat to the next waiter.
#[must_use = "dropping the permit releases the seat at once"]
pub struct Permit {
    gate: FairGate,
    ticket: Ticket,
    seat: usize,
    tenant: TenantId,
    granted: Instant,
    cost: Option<f64>,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("tenant", &self.tenant)
            .field("seat", &self.seat)
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// Report this cost at release instead of the time held. NaN, infinite or negative
    /// values are ignored (the time held is reported).
    pub fn set_cost(&mut self, cost: f64) {
        self.cost = Some(cost);
    }

    /// The seat held (0-based; the scheduler's worker index).
    pub fn seat(&self) -> usize {
        self.seat
    }

    /// The tenant holding it.
    pub fn tenant(&self) -> TenantId {
        self.tenant
    }

    /// How long the seat has been held.
    pub fn held(&self) -> Duration {
        self.granted.elapsed()
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let cost = match self.cost {
            Some(c) if c.is_finite() && c >= 0.0 => c,
            _ => self.granted.elapsed().as_nanos() as f64,
        };
        let shared = &self.gate.shared;
        let mut wake = Wakers::default();
        {
            let mut st = shared.lock();
            let now = shared.now();
            st.stats.get(self.tenant).finished(cost, false);
            st.release(self.ticket, self.seat, cost, now, &mut wake);
        }
        wake.wake();
    }
}
