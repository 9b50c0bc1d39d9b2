//! [`FairGate`]: fair admission for async code. At most n requests hold a *seat* at once;
//! when seats are taken, waiters queue per tenant and a fairlane-core scheduler decides who
//! gets the next free seat. Seats are the scheduler's workers: seat `i` asks `dequeue(i)`,
//! so 2DFQ's per-worker eligibility works unchanged.
//!
//! The gate is executor-agnostic (std `Waker`s only): it works under tokio, async-std, smol
//! or a hand-written poll loop. It is the one gate of the workspace: the proxy runs on it
//! too, so it also has what the proxy needs: seats changed at run time ([`FairGate::set_seats`]),
//! an adaptive depth it runs itself ([`GateBuilder::adaptive_depth`]: the interposed paper's
//! §5.4 controller, fed the response time of every released permit and run on the gate's
//! timer), per-tenant caps and response-time targets, a timer for schedulers that idle until
//! a time ([`Decision::RetryAt`], honoured as its documentation says), a drain, a time unit
//! of the caller's choosing and an injected [`Clock`](crate::Clock). With priority levels
//! ([`GateBuilder::levels`]) a request names its level ([`Acquire::at`]); an exempt level's
//! request is admitted at once without a seat (outside ServerCL, as APF's exempt level) and
//! counted apart ([`FairGate::exempt`], [`FairGate::levels`]).

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use fairlane_core::depth::{DepthConfig, DepthGovernor, FlowReport};
use fairlane_core::levels::LevelsConfig;
use fairlane_core::{
    BoxedScheduler, ClassId, Decision, Dispatch, LevelId, Request, TenantId, Ticket,
};

use crate::error::{config_error, BuildError, LevelRefusal};
use crate::levels::{self, Exempt, LevelSnapshot, Route};
use crate::setup::{self, common_setters, Common};
use crate::stats::Stats;
use crate::time::{self, nanos_f64, SharedClock};

/// Why a request could not get a seat.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AcquireError {
    /// [`FairGate::close`] or [`FairGate::drain`] was called.
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
    /// The request's priority level refused it (its queue is full, or there is no such
    /// level).
    Level(LevelRefusal),
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
            AcquireError::Level(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for AcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            AcquireError::Scheduler(e) => Some(e),
            AcquireError::Level(e) => Some(e),
            _ => None,
        }
    }
}

/// Builds a [`FairGate`].
///
/// Defaults: 1 seat per core, the `2dfqe` preset with unseen (tenant, class) pairs estimated at
/// 1 ms of holding time, at most 100,000 waiters of which 10,000 per tenant, time and cost
/// in nanoseconds on the [`SystemClock`](crate::SystemClock).
#[derive(Clone)]
pub struct GateBuilder {
    common: Common,
    initial_estimate: f64,
    unit: Duration,
    depth: Option<DepthConfig>,
}

impl fmt::Debug for GateBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateBuilder")
            .field("common", &self.common)
            .field("unit", &self.unit)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl Default for GateBuilder {
    fn default() -> Self {
        GateBuilder {
            common: Common::default(),
            initial_estimate: 1e6,
            unit: Duration::from_nanos(1),
            depth: None,
        }
    }
}

impl GateBuilder {
    common_setters!(
        GateBuilder,
        seats: "At most this many concurrent holders (≥ 1; default: one per core). Seats are \
                the scheduler's workers.",
        max_waiting: "At most this many waiters over all tenants (default 100,000).",
        max_waiting_per_tenant: "At most this many waiters per tenant (default 10,000).",
        units: "Time and cost are in the gate's [`time_unit`](GateBuilder::time_unit).",
        with_cost: "[`FairGate::acquire_with_cost`]",
        route: "[`Acquire::at`]; an exempt level's requests are admitted at once, without a \
                seat, and counted apart ([`FairGate::levels`])",
        clock: "With a [`ManualClock`](crate::ManualClock), waits, times held and `RetryAt` \
                timers follow the test's time.",
    );

    /// Estimate for unseen (tenant, class) pairs with a preset, in cost units (default
    /// 1,000,000 = 1 ms of holding time, the default cost unit being nanoseconds).
    pub fn initial_estimate(mut self, cost: f64) -> Self {
        self.initial_estimate = cost;
        self
    }

    /// The scheduler's unit of time and cost (default 1 ns). The proxy uses 1 s: its
    /// targets, estimates and the depth controller all speak seconds.
    pub fn time_unit(mut self, unit: Duration) -> Self {
        self.unit = unit;
        self
    }

    /// Adapt the number of seats to the tenants' response-time targets
    /// ([`FairGate::set_target`]) with the depth controller of the interposed paper's §5.4
    /// (`fairlane_core::depth`): the gate starts at `config.initial` seats (whatever
    /// [`seats`](GateBuilder::seats) said), observes each request's response time — from
    /// joining the queue to releasing the permit — and at the end of every
    /// `config.interval` (in the gate's [`time_unit`](GateBuilder::time_unit)) sets the seats
    /// to the controller's depth, on the gate's own timer. Nothing else to wire.
    pub fn adaptive_depth(mut self, config: DepthConfig) -> Self {
        self.depth = Some(config);
        self
    }

    /// Build the gate.
    pub fn build(self) -> Result<FairGate, BuildError> {
        let unit = self.unit.as_nanos() as f64;
        let (max_waiting, max_waiting_per_tenant) =
            (self.common.max_queued, self.common.max_queued_per_tenant);
        let (mut sched, clock) =
            self.common
                .build("seats", "max_waiting", self.initial_estimate)?;
        if unit == 0.0 {
            return Err(config_error("time_unit", "must be at least 1 ns".into()));
        }
        let mut exempt = Exempt::default();
        exempt.refresh(&sched);
        let depth = match self.depth {
            Some(cfg) => {
                let non_exempt = sched.levels().iter().filter(|v| !v.exempt).count();
                if cfg.min < non_exempt {
                    return Err(config_error(
                        "adaptive_depth.min",
                        format!(
                            "{non_exempt} non-exempt priority levels need at least \
                             {non_exempt} seats, got a minimum of {}",
                            cfg.min
                        ),
                    ));
                }
                let mut gov = DepthGovernor::new(cfg)?;
                gov.start(&mut *sched, nanos_f64(clock.now()) / unit)?;
                Some(gov)
            }
            None => None,
        };
        let adaptive = depth.is_some();
        let seats = sched.workers();
        let (requires_cost, name) = (sched.requires_cost(), sched.name());
        let shared = Arc::new(GateShared {
            state: Mutex::new(GateState {
                sched,
                seats,
                free: (0..seats).rev().collect(),
                busy: vec![false; seats],
                waiters: Vec::new(),
                free_waiters: Vec::new(),
                closed: false,
                draining: false,
                retry: false,
                timer: None,
                timer_thread: false,
                caps: HashMap::new(),
                max_waiting,
                max_waiting_per_tenant,
                errors: 0,
                stats: Stats::new("gate"),
                unit,
                depth,
                exempt,
            }),
            timer_cv: Condvar::new(),
            clock: clock.clone(),
            unit,
            requires_cost,
            name,
        });
        // A manual clock's jump fires a due `RetryAt` timer at once.
        time::on_advance(&clock, &shared, |s| FairGate { shared: s }.tick());
        if adaptive {
            start_timer(&shared); // the depth's control periods end on the gate's timer
        }
        Ok(FairGate { shared })
    }
}

enum Slot {
    Free,
    Waiting {
        ticket: Ticket,
        tenant: TenantId,
        /// The tenant's index in the gate's stats (looked up once, at joining).
        stat: u32,
        /// When it joined the queue, in the gate's unit.
        since: f64,
        waker: Option<Waker>,
    },
    Granted {
        ticket: Ticket,
        tenant: TenantId,
        stat: u32,
        seat: usize,
        /// When the seat was granted, on the gate's clock: the holder is charged from here,
        /// not from when its task got round to polling.
        at: Duration,
        /// When it joined the queue, in the gate's unit (its response time starts here).
        since: f64,
    },
    Closed,
}

struct Waiter {
    generation: u32,
    slot: Slot,
}

struct GateState {
    sched: BoxedScheduler,
    /// Seats now (the scheduler's workers); [`FairGate::set_seats`] changes it.
    seats: usize,
    /// Seats nobody holds, all `< seats`. Non-empty only while nothing is queued (or the
    /// scheduler idles on purpose: `retry`).
    free: Vec<usize>,
    /// Whether each seat is held (seats beyond `seats` retire when released).
    busy: Vec<bool>,
    waiters: Vec<Waiter>,
    free_waiters: Vec<u32>,
    closed: bool,
    /// [`FairGate::drain`]: no new requests; the queued ones are still served.
    draining: bool,
    /// The scheduler answered `RetryAt`: free seats are offered again at the next event.
    retry: bool,
    /// A `RetryAt` timer is armed for this time (gate unit).
    timer: Option<f64>,
    /// The timer thread runs.
    timer_thread: bool,
    /// Per-tenant waiting caps that differ from `max_waiting_per_tenant`.
    caps: HashMap<TenantId, usize>,
    max_waiting: usize,
    max_waiting_per_tenant: usize,
    /// Scheduler calls that failed (each also logged).
    errors: u64,
    stats: Stats,
    /// Nanoseconds per gate unit (a copy of [`GateShared::unit`]).
    unit: f64,
    /// The adaptive depth ([`GateBuilder::adaptive_depth`]).
    depth: Option<DepthGovernor>,
    /// Exempt priority levels, admitted without a seat (empty without levels).
    exempt: Exempt,
}

struct GateShared {
    state: Mutex<GateState>,
    /// The timer thread waits here for an armed `RetryAt` time.
    timer_cv: Condvar,
    clock: SharedClock,
    /// Nanoseconds per unit of the scheduler's time and cost.
    unit: f64,
    requires_cost: bool,
    name: &'static str,
}

impl GateShared {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The scheduler's `now`, in the gate's unit.
    fn now(&self) -> f64 {
        self.in_units(self.clock.now())
    }
    /// A time on the gate's clock, in the gate's unit.
    fn in_units(&self, t: Duration) -> f64 {
        nanos_f64(t) / self.unit
    }
    /// The gate's clock at the real instant `at` if the clock can say, else now.
    fn at_instant(&self, at: Option<Instant>) -> Duration {
        at.and_then(|at| self.clock.at_instant(at))
            .unwrap_or_else(|| self.clock.now())
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
                    let unit = self.unit;
                    let waiting = self.waiter(request.payload).and_then(|w| match w.slot {
                        Slot::Waiting { since, stat, .. } => Some((w, since, stat)),
                        _ => None,
                    });
                    if let Some((w, since, stat)) = waiting {
                        if let Slot::Waiting { waker, .. } = std::mem::replace(
                            &mut w.slot,
                            Slot::Granted {
                                ticket,
                                tenant,
                                stat,
                                seat,
                                at: Duration::from_nanos((now * unit) as u64),
                                since,
                            },
                        ) {
                            let waited = ((now - since).max(0.0) * unit) as u64;
                            self.stats.at(stat).started(waited);
                            self.busy[seat] = true;
                            if let Some(waker) = waker {
                                wake.push(waker);
                            }
                            return;
                        }
                    }
                    // Cannot happen (a waiter leaves the queue before its slot is freed):
                    // count it, settle it and offer the seat again.
                    self.error("nothing (it granted a seat to a gone waiter)", None);
                    if let Err(e) = self.sched.complete(ticket, 0.0, now) {
                        self.error("a completion", Some(e));
                    }
                }
                Ok(Decision::RetryAt(t)) => {
                    self.retry = true;
                    self.free.push(seat);
                    // `Decision`'s contract: ∞, or a time not after now, means "at the
                    // next event" (no timer: it would fire at once, again and again).
                    if t.is_finite() && t > now && self.timer.is_none_or(|armed| t < armed) {
                        self.timer = Some(t);
                        wake.2 = true;
                    }
                    return;
                }
                Ok(Decision::Empty) => {
                    self.free.push(seat);
                    return;
                }
                Err(e) => {
                    self.error("a dequeue", Some(e));
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

    /// A holder gives its seat back after using `cost`. A seat beyond the current number
    /// (the gate shrank) retires instead of being offered.
    fn release(&mut self, ticket: Ticket, seat: usize, cost: f64, now: f64, wake: &mut Wakers) {
        if let Err(e) = self.sched.complete(ticket, cost, now) {
            self.error("a completion", Some(e));
        }
        if let Some(b) = self.busy.get_mut(seat) {
            *b = false;
        }
        if seat < self.seats {
            self.offer(seat, now, wake);
        }
        // `RetryAt`: a completion is one of the events to ask again at.
        if self.retry || (!self.free.is_empty() && self.sched.queued() > 0) {
            self.offer_free(now, wake);
        }
    }

    /// Change the seats to `seats`, the scheduler's workers being that already. Held seats
    /// are unaffected; seats beyond the new number retire as their holders release them, and
    /// new seats are offered to waiters at once.
    fn resize(&mut self, seats: usize, now: f64, wake: &mut Wakers) {
        let old = std::mem::replace(&mut self.seats, seats);
        self.free.retain(|&s| s < seats);
        if self.busy.len() < seats {
            self.busy.resize(seats, false);
        }
        for s in (old..seats).rev() {
            if !self.busy[s] {
                self.free.push(s);
            }
        }
        self.offer_free(now, wake);
    }

    /// When the gate's timer must next fire: an armed `RetryAt`, or the end of the adaptive
    /// depth's control period, whichever is first.
    fn next_due(&self) -> Option<f64> {
        let depth = self.depth.as_ref().and_then(DepthGovernor::due);
        match (self.timer, depth) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Do what is due at `now`: a `RetryAt` timer's offer of the free seats, the end of a
    /// depth control period.
    fn fire(&mut self, now: f64, wake: &mut Wakers) {
        if self.timer.is_some_and(|t| t <= now) {
            self.timer = None;
            self.offer_free(now, wake);
        }
        self.poll_depth(now, wake);
    }

    /// If a depth control period ended, give the seats the controller's new depth.
    #[inline]
    fn poll_depth(&mut self, now: f64, wake: &mut Wakers) {
        if self.depth.is_some() {
            self.poll_depth_now(now, wake);
        }
    }

    fn poll_depth_now(&mut self, now: f64, wake: &mut Wakers) {
        let Some(gov) = self.depth.as_mut() else {
            return;
        };
        match gov.poll(&mut *self.sched, now) {
            Ok(Some(d)) => self.resize(d, now, wake),
            Ok(None) => {}
            Err(e) => self.error("a depth change", Some(e)),
        }
    }

    /// Count and log a failed scheduler call: the gate carries on, but never silently.
    fn error(&mut self, what: &str, e: Option<fairlane_core::Error>) {
        self.errors += 1;
        match e {
            Some(e) => eprintln!("fairlane-runtime gate: scheduler refused {what}: {e}"),
            None => eprintln!("fairlane-runtime gate: scheduler dispatched {what}"),
        }
    }

    /// A tenant's waiting cap.
    fn cap(&self, tenant: TenantId) -> usize {
        if self.caps.is_empty() {
            return self.max_waiting_per_tenant; // the common case: no hashing per acquire
        }
        self.caps
            .get(&tenant)
            .copied()
            .unwrap_or(self.max_waiting_per_tenant)
    }
}

/// Wakers to wake once the gate's lock is released (usually at most one), and whether a
/// `RetryAt` timer was armed.
#[derive(Default)]
struct Wakers(Option<Waker>, Vec<Waker>, bool);

impl Wakers {
    fn push(&mut self, w: Waker) {
        if self.0.is_none() {
            self.0 = Some(w);
        } else {
            self.1.push(w);
        }
    }
    fn wake(self, shared: &Arc<GateShared>) {
        if self.2 {
            start_timer(shared);
        }
        if let Some(w) = self.0 {
            w.wake();
        }
        for w in self.1 {
            w.wake();
        }
    }
}

/// A `RetryAt(t)` was armed: make sure the timer thread runs and sees the new time.
fn start_timer(shared: &Arc<GateShared>) {
    let mut st = shared.lock();
    if st.timer_thread {
        shared.timer_cv.notify_all();
        return;
    }
    let weak = Arc::downgrade(shared);
    let spawned = std::thread::Builder::new()
        .name("fairlane-gate-timer".into())
        .spawn(move || timer_main(&weak));
    match spawned {
        Ok(_) => st.timer_thread = true,
        // No thread: the retry still happens at the next completion or arrival.
        Err(e) => eprintln!(
            "fairlane-runtime gate: no timer thread ({e}); RetryAt waits for the next event"
        ),
    }
}

/// The timer thread: fires the armed `RetryAt` time and the adaptive depth's period ends on
/// the gate's clock. It holds the gate only while waiting (at most a second without a
/// timer), so it ends soon after the gate.
fn timer_main(weak: &Weak<GateShared>) {
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let mut wake = Wakers::default();
        {
            let mut st = shared.lock();
            let now = shared.now();
            match st.next_due() {
                Some(t) if t <= now => st.fire(now, &mut wake),
                Some(t) if shared.clock.is_real() => {
                    let wait = ((t - now) * shared.unit).clamp(1e3, 1e9);
                    drop(time::wait(
                        &shared.timer_cv,
                        st,
                        Some(Duration::from_nanos(wait as u64)),
                    ));
                }
                // Another clock fires through its advance hook (`tick`); look once a second
                // whether the gate is still there.
                _ => drop(time::wait(
                    &shared.timer_cv,
                    st,
                    Some(Duration::from_secs(1)),
                )),
            }
        }
        wake.2 = false; // this thread is the timer
        wake.wake(&shared);
        if Arc::strong_count(&shared) == 1 {
            shared.lock().timer_thread = false;
            return; // nobody else holds the gate
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
            .field("seats", &self.seats())
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
            route: Route::default(),
            at: None,
            joined: None,
            state: AcquireState::Init,
        }
    }

    /// Join the tenant's queue now, not at the first poll: a full queue or a closed gate is
    /// refused at once, and a free seat is taken at once (the returned future is then ready).
    /// What a server wants that answers "429" before it starts waiting.
    pub fn join(
        &self,
        tenant: impl Into<TenantId>,
        class: impl Into<ClassId>,
    ) -> Result<Acquire, AcquireError> {
        self.acquire(tenant, class).join()
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
                    if let Err(e) = st.sched.cancel(*ticket, now) {
                        st.errors += 1;
                        eprintln!("fairlane-runtime gate: scheduler refused a cancellation: {e}");
                    }
                    st.stats.get(*tenant).cancelled();
                    if let Some(waker) = waker.take() {
                        wake.push(waker);
                    }
                    w.slot = Slot::Closed;
                }
            }
        }
        wake.wake(&self.shared);
    }

    /// Whether [`close`](FairGate::close) was called.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }

    /// Refuse new requests with [`AcquireError::Closed`] but keep serving the ones waiting
    /// (a graceful shutdown's first half). [`is_drained`](FairGate::is_drained) says when the
    /// last one has released its seat.
    pub fn drain(&self) {
        self.shared.lock().draining = true;
    }

    /// Whether [`drain`](FairGate::drain) (or [`close`](FairGate::close)) was called and no
    /// request waits or holds a seat any more (nor an exempt permit).
    pub fn is_drained(&self) -> bool {
        let st = self.shared.lock();
        (st.draining || st.closed)
            && st.sched.queued() + st.sched.running() + st.exempt.holding_total() == 0
    }

    /// Number of seats now.
    pub fn seats(&self) -> usize {
        self.shared.lock().seats
    }

    /// Change the number of seats. Held seats are unaffected; seats beyond the new number
    /// retire as their holders release them, and new seats are offered to waiters at once.
    /// With an [adaptive depth](GateBuilder::adaptive_depth), the controller's next change
    /// replaces this number.
    pub fn set_seats(&self, seats: usize) -> Result<(), fairlane_core::Error> {
        let mut wake = Wakers::default();
        {
            let mut st = self.shared.lock();
            if seats == st.seats {
                return Ok(());
            }
            st.sched.set_workers(seats)?;
            let now = self.shared.now();
            st.resize(seats, now, &mut wake);
        }
        wake.wake(&self.shared);
        Ok(())
    }

    /// Set a tenant's own waiting cap (`None`: the gate's
    /// [`max_waiting_per_tenant`](GateBuilder::max_waiting_per_tenant)).
    pub fn set_tenant_cap(&self, tenant: impl Into<TenantId>, cap: Option<usize>) {
        let mut st = self.shared.lock();
        match cap {
            Some(c) => st.caps.insert(tenant.into(), c),
            None => st.caps.remove(&tenant.into()),
        };
    }

    /// Set the global and the default per-tenant waiting caps.
    pub fn set_caps(&self, max_waiting: usize, max_waiting_per_tenant: usize) {
        let mut st = self.shared.lock();
        st.max_waiting = max_waiting;
        st.max_waiting_per_tenant = max_waiting_per_tenant;
    }

    /// Set a tenant's response-time target (EDF's deadline = arrival + target; the other
    /// schedulers ignore it). With an [adaptive depth](GateBuilder::adaptive_depth) the
    /// depth controller judges the tenant by it too.
    pub fn set_target(
        &self,
        tenant: impl Into<TenantId>,
        target: Option<Duration>,
    ) -> Result<(), fairlane_core::Error> {
        let mut guard = self.shared.lock();
        let st = &mut *guard;
        let now = self.shared.now();
        let target = target.map(|d| d.as_nanos() as f64 / self.shared.unit);
        match st.depth.as_mut() {
            Some(gov) => gov.set_target(&mut *st.sched, tenant.into(), target, now),
            None => st.sched.set_target(tenant.into(), target, now),
        }
    }

    /// With an [adaptive depth](GateBuilder::adaptive_depth): its settings and what the
    /// controller judged in its last period (each flow's mean response time against its
    /// target, in the gate's unit).
    pub fn depth_control(&self) -> Option<(DepthConfig, Vec<FlowReport>)> {
        let st = self.shared.lock();
        let gov = st.depth.as_ref()?;
        Some((*gov.config(), gov.last_period().to_vec()))
    }

    /// The priority levels ([`GateBuilder::levels`]) as a debug dump shows them: nominal and
    /// current seats, seats in use, lent, borrowed and queued per level, and the exempt
    /// levels' requests admitted without a seat. Empty without levels.
    pub fn levels(&self) -> Vec<LevelSnapshot> {
        let st = self.shared.lock();
        levels::snapshot(&st.sched, Some(&st.exempt))
    }

    /// Exempt requests admitted without a seat so far, and those holding now (not counted in
    /// [`holding`](FairGate::holding), nor in the tenants' [`metrics`](FairGate::metrics)).
    pub fn exempt(&self) -> (u64, usize) {
        let st = self.shared.lock();
        (st.exempt.admitted_total(), st.exempt.holding_total())
    }

    /// Reconfigure the priority levels (a reload): every waiting request keeps its place
    /// and every held seat stays held (levels are matched by name; see the core's
    /// `LevelScheduler::reconfigure` for what a reload may change). ServerCL stays the
    /// gate's seats. A gate without levels refuses.
    pub fn set_levels(&self, config: &LevelsConfig) -> Result<(), fairlane_core::Error> {
        let mut wake = Wakers::default();
        {
            let mut guard = self.shared.lock();
            let st = &mut *guard;
            st.sched.set_levels(config)?;
            st.exempt.refresh(&st.sched);
            let now = self.shared.now();
            st.offer_free(now, &mut wake); // a level's limit may have grown
        }
        wake.wake(&self.shared);
        Ok(())
    }

    /// Do what is due now on the gate's timer: offer free seats if the time the scheduler
    /// asked to be asked again at has come (`RetryAt`), and end the adaptive depth's control
    /// period if its time has come. The timer thread and a manual clock's `advance` call it;
    /// calling it early does nothing.
    pub fn tick(&self) {
        let mut wake = Wakers::default();
        {
            let mut st = self.shared.lock();
            let now = self.shared.now();
            st.fire(now, &mut wake);
        }
        wake.wake(&self.shared);
    }

    /// The time a `RetryAt` timer is armed for, in the gate's unit, if any.
    pub fn retry_at(&self) -> Option<f64> {
        self.shared.lock().timer
    }

    /// The scheduler's `now`: the gate's clock in the gate's unit.
    pub fn now(&self) -> f64 {
        self.shared.now()
    }

    /// The scheduler's virtual time, if it keeps one.
    pub fn virtual_time(&self) -> Option<f64> {
        self.shared.lock().sched.virtual_time()
    }

    /// Requests waiting for a seat.
    pub fn waiting(&self) -> usize {
        self.shared.lock().sched.queued()
    }

    /// Seats held (granted permits, including those not yet picked up by their waiter).
    pub fn holding(&self) -> usize {
        self.shared.lock().sched.running()
    }

    setup::scheduler_views!(
        set_weight: "Set a tenant's weight φ (default 1).",
        tenant: "The scheduler's view of a tenant (weight, waiting and holding counts, start tag).",
        metrics: "Per-tenant counters and histograms (wait in ns, cost in the gate's cost unit).",
        errors: "Scheduler calls that failed so far (each was logged to stderr).",
    );
}

enum AcquireState {
    Init,
    /// [`FairGate::join`] got a seat at once (boxed: the rare case keeps every request,
    /// which its callers move about, small).
    Granted(Box<Permit>),
    Waiting(u64),
    Done,
}

/// A granted seat as its waiter picks it up.
struct Grant {
    ticket: Ticket,
    stat: u32,
    seat: usize,
    /// When it was granted, on the gate's clock.
    at: Duration,
    /// When the request joined the queue, in the gate's unit.
    since: f64,
}

/// The future of [`FairGate::acquire`]: resolves to a [`Permit`] once a seat is granted.
/// Cancellation-safe: dropping it leaves nothing behind in the gate.
#[must_use = "a request joins the queue only when the future is polled"]
pub struct Acquire {
    gate: FairGate,
    tenant: TenantId,
    class: ClassId,
    cost: Option<f64>,
    route: Route,
    /// [`Acquire::joined_at`].
    at: Option<Instant>,
    /// [`Acquire::joined`].
    joined: Option<Duration>,
    state: AcquireState,
}

impl fmt::Debug for Acquire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        setup::debug_request(f, "Acquire", self.tenant, self.class)
    }
}

impl Acquire {
    /// Go to priority level `route.level`, as flow (tenant, `route.distinguisher`) (a
    /// [`LevelId`] alone: the tenant is the flow). Without [levels](GateBuilder::levels) it
    /// changes nothing. An exempt level's request is admitted at once without a seat.
    /// Before the first poll (or [`join`](Acquire::join)) only.
    pub fn at(mut self, route: impl Into<Route>) -> Self {
        self.route = route.into();
        self
    }

    /// Join at the real instant `at`, a reading of the monotonic clock the caller has
    /// anyway, instead of reading the gate's clock again (with a clock that is a fixed offset
    /// of the monotonic clock, as [`SystemClock`](crate::SystemClock) is; another clock is
    /// read as usual). Before the first poll (or [`join`](Acquire::join)) only.
    pub fn joined_at(mut self, at: Instant) -> Self {
        self.at = Some(at);
        self
    }

    /// When the request joined the queue, on the gate's clock (`None` before it joined, or
    /// if it was refused or admitted without a seat).
    pub fn joined(&self) -> Option<Duration> {
        self.joined
    }

    /// Join the queue now, not at the first poll ([`FairGate::join`] for a request built
    /// with [`at`](Acquire::at) or a cost).
    pub fn join(mut self) -> Result<Acquire, AcquireError> {
        if let AcquireState::Init = self.state {
            match self.start(None) {
                Poll::Ready(Ok(p)) => self.state = AcquireState::Granted(Box::new(p)),
                Poll::Ready(Err(e)) => return Err(e),
                Poll::Pending => {}
            }
        }
        Ok(self)
    }

    /// The permit of an exempt level's request, admitted now without a seat.
    fn exempt_permit(&mut self) -> Permit {
        let at = self.gate.shared.clock.now();
        self.state = AcquireState::Done;
        Permit {
            gate: self.gate.clone(),
            hold: Hold::Exempt(self.route.level),
            tenant: self.tenant,
            stat: u32::MAX,
            granted: at,
            joined: self.gate.shared.in_units(at),
            cost: f64::NAN,
            released: None,
        }
    }

    fn permit(&self, g: Grant) -> Permit {
        Permit {
            gate: self.gate.clone(),
            hold: Hold::Seat {
                ticket: g.ticket,
                seat: g.seat,
            },
            tenant: self.tenant,
            stat: g.stat,
            granted: g.at,
            joined: g.since,
            cost: f64::NAN,
            released: None,
        }
    }

    /// First poll: join the queue, and take a free seat if the scheduler gives it to us.
    fn start(&mut self, cx: Option<&mut Context<'_>>) -> Poll<Result<Permit, AcquireError>> {
        let shared = &self.gate.shared;
        let mut wake = Wakers::default();
        let result = {
            let mut st = shared.lock();
            if st.closed || st.draining {
                return Poll::Ready(Err(AcquireError::Closed));
            }
            if st.exempt.is_exempt(self.route.level) {
                st.exempt.admit(self.route.level);
                drop(st);
                return Poll::Ready(Ok(self.exempt_permit()));
            }
            // After the exempt admission: an exempt request never meets the scheduler.
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
            let queued = st.sched.queued();
            if queued >= st.max_waiting {
                st.stats.get(self.tenant).rejected();
                return Poll::Ready(Err(AcquireError::QueueFull {
                    limit: st.max_waiting,
                }));
            }
            // The scheduler's own count: the gate keeps no second copy. A tenant has at most
            // all the queued requests, so below the cap in total no tenant can be at it and
            // the per-tenant lookup is skipped (the common case).
            let cap = st.cap(self.tenant);
            if queued >= cap && st.sched.tenant(self.tenant).map_or(0, |v| v.queued) >= cap {
                st.stats.get(self.tenant).rejected();
                return Poll::Ready(Err(AcquireError::TenantQueueFull {
                    tenant: self.tenant,
                    limit: cap,
                }));
            }
            let joined = shared.at_instant(self.at);
            let now = shared.in_units(joined);
            let (index, generation) = st.new_waiter();
            let k = key(index, generation);
            let mut req = Request::new(self.tenant, self.class, k);
            (req.level, req.distinguisher) = (self.route.level, self.route.distinguisher);
            if let Some(c) = self.cost {
                req = req.with_cost(c);
            }
            match st.sched.enqueue(req, now) {
                Ok(ticket) => {
                    self.joined = Some(joined);
                    let stat = st.stats.slot(self.tenant);
                    st.waiters[index as usize].slot = Slot::Waiting {
                        ticket,
                        tenant: self.tenant,
                        stat,
                        since: now,
                        waker: None,
                    };
                    st.stats.at(stat).enqueued();
                }
                Err(e) => {
                    st.free_waiters.push(index);
                    let e = match LevelRefusal::from_scheduler(e, &st.sched) {
                        Ok(refusal) => {
                            st.stats.get(self.tenant).rejected();
                            AcquireError::Level(refusal)
                        }
                        Err(e) => AcquireError::Scheduler(e),
                    };
                    return Poll::Ready(Err(e));
                }
            }
            self.state = AcquireState::Waiting(k);
            if !st.free.is_empty() {
                st.offer_free(now, &mut wake);
            }
            Self::check(&mut st, k, cx)
        };
        wake.wake(shared);
        match result {
            Poll::Ready(Ok(granted)) => {
                self.state = AcquireState::Done;
                Poll::Ready(Ok(self.permit(granted)))
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
        cx: Option<&mut Context<'_>>,
    ) -> Poll<Result<Grant, AcquireError>> {
        let Some(w) = st.waiter(k) else {
            return Poll::Ready(Err(AcquireError::Closed));
        };
        match &mut w.slot {
            Slot::Granted {
                ticket,
                stat,
                seat,
                at,
                since,
                ..
            } => {
                let r = Grant {
                    ticket: *ticket,
                    stat: *stat,
                    seat: *seat,
                    at: *at,
                    since: *since,
                };
                st.free_waiter(k);
                Poll::Ready(Ok(r))
            }
            Slot::Closed => {
                st.free_waiter(k);
                Poll::Ready(Err(AcquireError::Closed))
            }
            Slot::Waiting { waker, .. } => {
                if let Some(cx) = cx {
                    match waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => *waker = Some(cx.waker().clone()),
                    }
                }
                Poll::Pending
            }
            Slot::Free => Poll::Ready(Err(AcquireError::Closed)),
        }
    }
}

impl Acquire {
    /// The permit, if the seat was granted already (without registering a waker: use it
    /// after [`FairGate::join`] to skip a wait that is not needed).
    pub fn granted(&mut self) -> Option<Permit> {
        match std::mem::replace(&mut self.state, AcquireState::Done) {
            AcquireState::Granted(p) => Some(*p),
            AcquireState::Waiting(k) => {
                let r = Self::check(&mut self.gate.shared.lock(), k, None);
                match r {
                    Poll::Ready(Ok(granted)) => Some(self.permit(granted)),
                    // A waiting request can only end closed, and awaiting the future after
                    // this (state `Done`) reports exactly that: nothing is lost.
                    Poll::Ready(Err(_)) => None,
                    Poll::Pending => {
                        self.state = AcquireState::Waiting(k);
                        None
                    }
                }
            }
            other => {
                self.state = other;
                None
            }
        }
    }
}

impl Future for Acquire {
    type Output = Result<Permit, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match this.state {
            AcquireState::Init => this.start(Some(cx)),
            AcquireState::Granted(_) => {
                match std::mem::replace(&mut this.state, AcquireState::Done) {
                    AcquireState::Granted(p) => Poll::Ready(Ok(*p)),
                    _ => Poll::Ready(Err(AcquireError::Closed)),
                }
            }
            AcquireState::Waiting(k) => {
                let result = {
                    let mut st = this.gate.shared.lock();
                    Self::check(&mut st, k, Some(cx))
                };
                match result {
                    Poll::Ready(r) => {
                        this.state = AcquireState::Done;
                        Poll::Ready(r.map(|granted| this.permit(granted)))
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
                    if let Err(e) = st.sched.cancel(ticket, now) {
                        st.error("a cancellation", Some(e));
                    }
                    st.stats.get(tenant).cancelled();
                    // Leaving may open a window or end a tenant's turn.
                    if st.retry {
                        st.offer_free(now, &mut wake);
                    }
                }
                Slot::Granted {
                    ticket,
                    tenant,
                    seat,
                    ..
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
        wake.wake(shared);
    }
}

/// A held seat. Dropping it reports the cost (the time held, or what
/// [`set_cost`](Permit::set_cost) said) and hands the seat to the next waiter.
#[must_use = "dropping the permit releases the seat at once"]
pub struct Permit {
    gate: FairGate,
    hold: Hold,
    tenant: TenantId,
    /// The tenant's index in the gate's stats.
    stat: u32,
    /// When the seat was granted, on the gate's clock.
    granted: Duration,
    /// When the request joined the queue, in the gate's unit.
    joined: f64,
    /// [`Permit::set_cost`]'s cost (NaN: none, which it ignores as well).
    cost: f64,
    /// [`Permit::release_at`]'s time, on the gate's clock.
    released: Option<Duration>,
}

/// What a permit holds: a seat, or (an exempt priority level's request) none.
enum Hold {
    Seat { ticket: Ticket, seat: usize },
    Exempt(LevelId),
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("tenant", &self.tenant)
            .field("seat", &self.seat())
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// Report this cost at release instead of the time held. NaN, infinite or negative
    /// values are ignored (the time held is reported).
    pub fn set_cost(&mut self, cost: f64) {
        self.cost = cost;
    }

    /// Report the request's cumulative cost so far, in the gate's cost unit, while it runs
    /// (the scheduler's `progress`: VTC charges each generated token as it is reported,
    /// 2DFQ refreshes its charge). NaN, infinite or negative values, and an exempt level's
    /// permit, report nothing.
    pub fn progress(&self, used: f64) {
        let Hold::Seat { ticket, .. } = self.hold else {
            return;
        };
        if !(used.is_finite() && used >= 0.0) {
            return;
        }
        let shared = &self.gate.shared;
        let mut st = shared.lock();
        let now = shared.now();
        if let Err(e) = st.sched.progress(ticket, used, now) {
            st.error("a progress report", Some(e));
        }
    }

    /// The seat held (0-based; the scheduler's worker index). An exempt level's permit holds
    /// no seat: `usize::MAX` ([`exempt`](Permit::exempt) says so).
    pub fn seat(&self) -> usize {
        match self.hold {
            Hold::Seat { seat, .. } => seat,
            Hold::Exempt(_) => usize::MAX,
        }
    }

    /// The exempt priority level it was admitted at without a seat, if it was.
    pub fn exempt(&self) -> Option<LevelId> {
        match self.hold {
            Hold::Exempt(level) => Some(level),
            Hold::Seat { .. } => None,
        }
    }

    /// The tenant holding it.
    pub fn tenant(&self) -> TenantId {
        self.tenant
    }

    /// How long the seat has been held, on the gate's clock.
    pub fn held(&self) -> Duration {
        self.gate.shared.clock.now().saturating_sub(self.granted)
    }

    /// When the seat was granted, on the gate's clock (for a waiter: when another holder's
    /// release handed it over, not when its task got round to picking it up).
    pub fn granted_at(&self) -> Duration {
        self.granted
    }

    /// Release now, at the real instant `at`: a reading of the monotonic clock the caller
    /// has anyway, used instead of reading the gate's clock again (as
    /// [`Acquire::joined_at`]). The same as dropping the permit otherwise. Returns the
    /// release time on the gate's clock.
    pub fn release_at(mut self, at: Instant) -> Duration {
        let on_clock = self.gate.shared.at_instant(Some(at));
        self.released = Some(on_clock);
        on_clock
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let shared = &self.gate.shared;
        let (ticket, seat) = match self.hold {
            Hold::Seat { ticket, seat } => (ticket, seat),
            Hold::Exempt(level) => {
                shared.lock().exempt.release(level);
                return;
            }
        };
        let mut wake = Wakers::default();
        {
            let mut st = shared.lock();
            // One clock reading, under the lock (so the scheduler's `now` never goes back),
            // is the release time and, by default, the cost; or the caller's
            // (`release_at`), which the scheduler takes as monotone as its contract says.
            let at = self.released.unwrap_or_else(|| shared.clock.now());
            let now = shared.in_units(at);
            let cost = match self.cost {
                c if c.is_finite() && c >= 0.0 => c,
                _ => shared.in_units(at.saturating_sub(self.granted)),
            };
            st.stats.at(self.stat).finished(cost, false);
            if let Some(gov) = st.depth.as_mut() {
                gov.observe(self.tenant, (now - self.joined).max(0.0), now);
            }
            st.release(ticket, seat, cost, now, &mut wake);
            st.poll_depth(now, &mut wake);
        }
        wake.wake(shared);
    }
}
