//! D upstream slots over a fairlane-core scheduler.
//!
//! A request [`acquire`](Gate::acquire)s a slot: it is enqueued in the scheduler (with a
//! one-shot channel as its payload) and waits. Whenever a slot is free and requests wait, the
//! scheduler's `dequeue(slot)` picks one, and its [`Permit`] is sent down its channel. Dropping
//! the permit reports the cost (`complete`, charged retroactively) and offers the slot again.
//! Dropping a [`Waiting`] future before it resolves cancels the request (`cancel`), so a client
//! that went away leaves nothing behind; a permit granted to a waiter that is gone releases its
//! slot at once.
//!
//! Why not `fairlane_runtime::FairGate`: the proxy needs the depth changed at run time
//! (adaptive D, reload), per-tenant caps, per-tenant targets and a timer for schedulers that
//! idle until a time (`Decision::RetryAt`); the runtime gate has fixed seats and one cap.
//!
//! Time (`now`) is seconds since the gate was built; costs are seconds of upstream time unless
//! the holder sets another cost.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use fairlane_core::{
    Algorithm, ClassId, Config, Decision, EstimatorKind, Request, Scheduler, TenantId, Ticket,
};
use serde::Serialize;
use tokio::sync::oneshot;

/// Build the core configuration for a preset name in the proxy: costs are never known up
/// front, so a known-cost preset gets an EMA estimator (α = 0.99); estimated presets start
/// unseen (tenant, class) pairs at `initial` instead of 1.
pub fn resolve_scheduler(name: &str, depth: usize, initial: f64) -> Result<Config, String> {
    let c = Config::preset(name).map_err(|e| match e {
        fairlane_core::Error::InvalidConfig { reason, .. } => reason,
        e => e.to_string(),
    })?;
    #[allow(unreachable_patterns)]
    let estimator = match c.estimator {
        EstimatorKind::Oracle => EstimatorKind::Ema {
            alpha: 0.99,
            initial,
        },
        EstimatorKind::LastValue { .. } => EstimatorKind::LastValue { initial },
        EstimatorKind::Ema { alpha, .. } => EstimatorKind::Ema { alpha, initial },
        EstimatorKind::Pessimistic { alpha, .. } => EstimatorKind::Pessimistic { alpha, initial },
        other => other,
    };
    let c = if c.algorithm == Algorithm::Fifo {
        c
    } else {
        c.estimator(estimator)
    };
    // RW(D): a window of one typical request per issue slot (the paper's n_f = D·φ_f/Σφ
    // requests), in the proxy's cost unit.
    let c = c.workers(depth).window_unit(initial);
    // Build once to surface any remaining problem now.
    c.build::<()>().map_err(|e| e.to_string())?;
    Ok(c)
}

/// Why a request got no slot.
#[derive(Clone, Debug, PartialEq)]
pub enum Reject {
    /// The proxy is shutting down (→ 503).
    Closed,
    /// `limit` requests wait over all tenants (→ 429).
    QueueFull {
        /// The cap.
        limit: usize,
    },
    /// The tenant has `limit` requests waiting (→ 429).
    TenantQueueFull {
        /// The cap.
        limit: usize,
    },
    /// The scheduler refused the request (→ 500; a bug or a bad cost).
    Scheduler(String),
}

type Payload = oneshot::Sender<Permit>;

#[derive(Clone, Debug, Default)]
struct TenantState {
    queued: usize,
    running: usize,
    cancelled: u64,
    cap: Option<usize>,
    weight: f64,
}

struct State {
    sched: Box<dyn Scheduler<Payload> + Send>,
    depth: usize,
    free: Vec<usize>,
    busy: Vec<bool>,
    queued: HashSet<Ticket>,
    tenants: Vec<TenantState>,
    max_queued: usize,
    max_queued_per_tenant: usize,
    closed: bool,
    /// A `RetryAt` timer is armed for this time.
    timer: Option<f64>,
}

struct Shared {
    state: Mutex<State>,
    epoch: Instant,
    name: &'static str,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// The D upstream slots and the scheduler that hands them out. Cloning shares it.
#[derive(Clone)]
pub struct Gate {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gate")
            .field("scheduler", &self.shared.name)
            .finish_non_exhaustive()
    }
}

/// A snapshot of the gate.
#[derive(Clone, Debug, Serialize)]
pub struct GateSnapshot {
    /// Scheduler name.
    pub scheduler: &'static str,
    /// Current depth D.
    pub depth: usize,
    /// Requests waiting.
    pub queued: usize,
    /// Requests holding a slot.
    pub running: usize,
    /// The scheduler's virtual time, if it keeps one.
    pub virtual_time: Option<f64>,
    /// Per tenant, by id: (queued, running, cancelled, weight).
    pub tenants: Vec<GateTenant>,
}

/// One tenant in a [`GateSnapshot`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct GateTenant {
    /// Waiting now.
    pub queued: usize,
    /// Holding a slot now.
    pub running: usize,
    /// Removed while waiting (client gone, queue timeout).
    pub cancelled: u64,
    /// Weight φ.
    pub weight: f64,
}

impl Gate {
    /// A gate of `depth` slots over the scheduler `config` builds.
    pub fn new(
        config: &Config,
        depth: usize,
        max_queued: usize,
        max_queued_per_tenant: usize,
    ) -> Result<Gate, String> {
        let sched = config
            .workers(depth)
            .build::<Payload>()
            .map_err(|e| e.to_string())?;
        Ok(Gate {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    sched,
                    depth,
                    free: (0..depth).rev().collect(),
                    busy: vec![false; depth],
                    queued: HashSet::new(),
                    tenants: Vec::new(),
                    max_queued,
                    max_queued_per_tenant,
                    closed: false,
                    timer: None,
                }),
                epoch: Instant::now(),
                name: config.name(),
            }),
        })
    }

    /// Seconds since the gate was built (the scheduler's `now`).
    pub fn now(&self) -> f64 {
        self.shared.now()
    }

    /// Join `tenant`'s queue. Fails at once if a cap is reached or the gate is closed;
    /// otherwise the returned future resolves when a slot is granted.
    pub fn acquire(&self, tenant: TenantId, class: ClassId) -> Result<Waiting, Reject> {
        let (tx, rx) = oneshot::channel();
        let shared = &self.shared;
        let mut st = shared.lock();
        if st.closed {
            return Err(Reject::Closed);
        }
        if st.queued.len() >= st.max_queued {
            return Err(Reject::QueueFull {
                limit: st.max_queued,
            });
        }
        let default_cap = st.max_queued_per_tenant;
        let ts = st.tenant(tenant);
        let cap = ts.cap.unwrap_or(default_cap);
        if ts.queued >= cap {
            return Err(Reject::TenantQueueFull { limit: cap });
        }
        let now = shared.now();
        let ticket = st
            .sched
            .enqueue(Request::new(tenant, class, tx), now)
            .map_err(|e| Reject::Scheduler(e.to_string()))?;
        st.queued.insert(ticket);
        st.tenant(tenant).queued += 1;
        if !st.free.is_empty() {
            st.offer_free(now, shared);
        }
        Ok(Waiting {
            shared: self.shared.clone(),
            ticket,
            tenant,
            rx,
            done: false,
        })
    }

    /// Change D. Running requests are unaffected; slots beyond the new depth are retired as
    /// their requests complete.
    pub fn set_depth(&self, depth: usize) -> Result<(), String> {
        let shared = &self.shared;
        let mut st = shared.lock();
        if depth == st.depth {
            return Ok(());
        }
        st.sched.set_workers(depth).map_err(|e| e.to_string())?;
        let old = st.depth;
        st.depth = depth;
        st.free.retain(|&s| s < depth);
        if st.busy.len() < depth {
            st.busy.resize(depth, false);
        }
        for s in (old..depth).rev() {
            if !st.busy[s] {
                st.free.push(s);
            }
        }
        let now = shared.now();
        st.offer_free(now, shared);
        Ok(())
    }

    /// Set a tenant's weight φ.
    pub fn set_weight(&self, tenant: TenantId, weight: f64) -> Result<(), String> {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        st.sched
            .set_weight(tenant, weight, now)
            .map_err(|e| e.to_string())?;
        st.tenant(tenant).weight = weight;
        Ok(())
    }

    /// Set a tenant's own waiting cap (`None`: the default per-tenant cap).
    pub fn set_tenant_cap(&self, tenant: TenantId, cap: Option<usize>) {
        self.shared.lock().tenant(tenant).cap = cap;
    }

    /// Set the global and default per-tenant waiting caps.
    pub fn set_caps(&self, max_queued: usize, max_queued_per_tenant: usize) {
        let mut st = self.shared.lock();
        st.max_queued = max_queued;
        st.max_queued_per_tenant = max_queued_per_tenant;
    }

    /// Refuse new requests and fail every waiting one with [`Reject::Closed`] (their futures
    /// resolve to an error). Requests holding a slot are unaffected.
    pub fn close(&self) {
        let mut st = self.shared.lock();
        st.closed = true;
        let now = self.shared.now();
        let tickets: Vec<Ticket> = st.queued.drain().collect();
        for t in tickets {
            if let Ok(req) = st.sched.cancel(t, now) {
                st.tenant(req.tenant).queued -= 1;
                drop(req); // drops the sender: the waiter sees Closed
            }
        }
    }

    /// Requests waiting and holding a slot.
    pub fn load(&self) -> (usize, usize) {
        let st = self.shared.lock();
        (st.queued.len(), st.sched.running())
    }

    /// The current depth D.
    pub fn depth(&self) -> usize {
        self.shared.lock().depth
    }

    /// A snapshot for metrics.
    pub fn snapshot(&self) -> GateSnapshot {
        let st = self.shared.lock();
        GateSnapshot {
            scheduler: self.shared.name,
            depth: st.depth,
            queued: st.queued.len(),
            running: st.sched.running(),
            virtual_time: st.sched.virtual_time(),
            tenants: st
                .tenants
                .iter()
                .map(|t| GateTenant {
                    queued: t.queued,
                    running: t.running,
                    cancelled: t.cancelled,
                    weight: t.weight,
                })
                .collect(),
        }
    }

    /// Run `f` on the scheduler under the gate's lock (for calls this gate does not wrap,
    /// such as per-tenant targets), with the gate's `now`.
    pub fn with_scheduler<R>(
        &self,
        f: impl FnOnce(&mut dyn Scheduler<oneshot::Sender<Permit>>, f64) -> R,
    ) -> R {
        let mut st = self.shared.lock();
        let now = self.shared.now();
        f(st.sched.as_mut(), now)
    }
}

impl State {
    fn tenant(&mut self, t: TenantId) -> &mut TenantState {
        let i = t.0 as usize;
        if self.tenants.len() <= i {
            self.tenants.resize(
                i + 1,
                TenantState {
                    weight: 1.0,
                    ..TenantState::default()
                },
            );
        }
        &mut self.tenants[i]
    }

    /// Offer `slot`: hand it to the request the scheduler picks, or keep it free. Returns
    /// whether it was taken.
    fn offer(&mut self, slot: usize, now: f64, shared: &Arc<Shared>) -> bool {
        loop {
            match self.sched.dequeue(slot, now) {
                Ok(Decision::Run(d)) => {
                    self.queued.remove(&d.ticket);
                    let tenant = d.request.tenant;
                    self.tenant(tenant).queued -= 1;
                    let permit = Permit {
                        shared: Some(shared.clone()),
                        ticket: d.ticket,
                        slot,
                        tenant,
                        dispatched: Instant::now(),
                        cost: None,
                    };
                    match d.request.payload.send(permit) {
                        Ok(()) => {
                            self.tenant(tenant).running += 1;
                            self.busy[slot] = true;
                            return true;
                        }
                        Err(mut p) => {
                            // The waiter is gone (cannot normally happen: a dropped waiter
                            // cancels under this lock). Settle and offer the slot again.
                            p.shared = None;
                            let _ = self.sched.complete(d.ticket, 0.0, now);
                        }
                    }
                }
                Ok(Decision::RetryAt(t)) => {
                    self.free.push(slot);
                    self.arm_timer(t, now, shared);
                    return false;
                }
                Ok(Decision::Empty) | Err(_) => {
                    self.free.push(slot);
                    return false;
                }
            }
        }
    }

    fn offer_free(&mut self, now: f64, shared: &Arc<Shared>) {
        while !self.queued.is_empty() {
            let Some(slot) = self.free.pop() else { return };
            if !self.offer(slot, now, shared) {
                return;
            }
        }
    }

    /// A scheduler that idles on purpose asked to be asked again at `t` (∞: at the next
    /// completion or arrival, which happen anyway).
    fn arm_timer(&mut self, t: f64, now: f64, shared: &Arc<Shared>) {
        if !t.is_finite() || self.timer.is_some_and(|armed| armed <= t) {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.timer = Some(t);
        let weak = Arc::downgrade(shared);
        let delay = Duration::from_secs_f64((t - now).clamp(0.0, 3600.0));
        rt.spawn(async move {
            tokio::time::sleep(delay).await;
            if let Some(shared) = weak.upgrade() {
                let mut st = shared.lock();
                st.timer = None;
                let now = shared.now();
                st.offer_free(now, &shared);
            }
        });
    }
}

/// Waiting for a slot. Dropping it before it resolves cancels the request.
#[must_use = "dropping it cancels the request"]
pub struct Waiting {
    shared: Arc<Shared>,
    ticket: Ticket,
    tenant: TenantId,
    rx: oneshot::Receiver<Permit>,
    done: bool,
}

impl Waiting {
    /// The permit, if it was granted already (no timer needed then).
    pub fn try_granted(&mut self) -> Option<Permit> {
        let p = self.rx.try_recv().ok()?;
        self.done = true;
        Some(p)
    }
}

impl Future for Waiting {
    type Output = Result<Permit, Reject>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match Pin::new(&mut self.rx).poll(cx) {
            Poll::Ready(r) => {
                self.done = true;
                Poll::Ready(r.map_err(|_| Reject::Closed))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.shared.lock();
        if st.queued.remove(&self.ticket) {
            let now = self.shared.now();
            if st.sched.cancel(self.ticket, now).is_ok() {
                let t = st.tenant(self.tenant);
                t.queued -= 1;
                t.cancelled += 1;
            }
        }
        // A permit already sent is dropped with `rx`, after the lock is released, and
        // releases its slot.
    }
}

/// A held upstream slot. Dropping it completes the request in the scheduler (charging the
/// cost retroactively) and offers the slot to the next waiter.
pub struct Permit {
    shared: Option<Arc<Shared>>,
    ticket: Ticket,
    slot: usize,
    tenant: TenantId,
    dispatched: Instant,
    cost: Option<f64>,
}

impl std::fmt::Debug for Permit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Permit")
            .field("tenant", &self.tenant)
            .field("slot", &self.slot)
            .finish_non_exhaustive()
    }
}

impl Permit {
    /// Charge this cost at release instead of the time held (seconds). Ignored unless finite
    /// and ≥ 0.
    pub fn set_cost(&mut self, cost: f64) {
        if cost.is_finite() && cost >= 0.0 {
            self.cost = Some(cost);
        }
    }
    /// When the slot was granted.
    pub fn dispatched(&self) -> Instant {
        self.dispatched
    }
    /// The slot (the scheduler's worker index).
    pub fn slot(&self) -> usize {
        self.slot
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let Some(shared) = self.shared.take() else {
            return;
        };
        let cost = self
            .cost
            .unwrap_or_else(|| self.dispatched.elapsed().as_secs_f64());
        let mut st = shared.lock();
        let now = shared.now();
        let _ = st.sched.complete(self.ticket, cost, now);
        let t = st.tenant(self.tenant);
        t.running = t.running.saturating_sub(1);
        if let Some(b) = st.busy.get_mut(self.slot) {
            *b = false;
        }
        if self.slot < st.depth {
            st.offer(self.slot, now, &shared);
        }
        if !st.free.is_empty() {
            st.offer_free(now, &shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(name: &str, depth: usize) -> Gate {
        let c = resolve_scheduler(name, depth, 0.01).unwrap();
        Gate::new(&c, depth, 100, 10).unwrap()
    }

    fn poll_now(w: &mut Waiting) -> Option<Result<Permit, Reject>> {
        let waker = futures_noop_waker();
        let mut cx = Context::from_waker(&waker);
        match Pin::new(w).poll(&mut cx) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => None,
        }
    }

    fn futures_noop_waker() -> std::task::Waker {
        std::task::Waker::noop().clone()
    }

    #[test]
    fn slots_caps_cancel_and_depth() {
        let g = gate("sfq", 1);
        let mut a = g.acquire(TenantId(0), ClassId(0)).unwrap();
        let p = poll_now(&mut a).unwrap().unwrap();
        let mut b = g.acquire(TenantId(1), ClassId(0)).unwrap();
        let mut c = g.acquire(TenantId(1), ClassId(0)).unwrap();
        assert!(poll_now(&mut b).is_none());
        assert_eq!(g.load(), (2, 1));
        // b leaves while queued: nothing left behind.
        drop(b);
        assert_eq!(g.load(), (1, 1));
        assert_eq!(g.snapshot().tenants[1].cancelled, 1);
        drop(p);
        let pc = poll_now(&mut c).unwrap().unwrap();
        assert_eq!(g.load(), (0, 1));
        // Depth 2: a second request starts at once.
        g.set_depth(2).unwrap();
        let mut d = g.acquire(TenantId(0), ClassId(0)).unwrap();
        let pd = poll_now(&mut d).unwrap().unwrap();
        assert_eq!(g.load(), (0, 2));
        // Shrink to 1: the retired slot is not reused.
        g.set_depth(1).unwrap();
        let slot_d = pd.slot();
        drop(pd);
        let mut e = g.acquire(TenantId(0), ClassId(0)).unwrap();
        if slot_d >= 1 {
            assert!(poll_now(&mut e).is_none());
        }
        drop(pc);
        assert!(poll_now(&mut e).unwrap().is_ok());
    }

    #[test]
    fn caps_and_close() {
        let g = gate("fifo", 1);
        let mut first = g.acquire(TenantId(0), ClassId(0)).unwrap();
        let _p = poll_now(&mut first).unwrap().unwrap();
        let mut waiting: Vec<_> = (0..10)
            .map(|_| g.acquire(TenantId(0), ClassId(0)).unwrap())
            .collect();
        assert_eq!(
            g.acquire(TenantId(0), ClassId(0)).err(),
            Some(Reject::TenantQueueFull { limit: 10 })
        );
        g.set_tenant_cap(TenantId(0), Some(11));
        waiting.push(g.acquire(TenantId(0), ClassId(0)).unwrap());
        g.close();
        for w in &mut waiting {
            assert_eq!(poll_now(w).unwrap().err(), Some(Reject::Closed));
        }
        assert_eq!(
            g.acquire(TenantId(1), ClassId(0)).err(),
            Some(Reject::Closed)
        );
        assert_eq!(g.load(), (0, 1));
    }

    #[test]
    fn granted_permit_of_a_dropped_waiter_frees_the_slot() {
        let g = gate("2dfqe", 1);
        let mut a = g.acquire(TenantId(0), ClassId(0)).unwrap();
        let p = poll_now(&mut a).unwrap().unwrap();
        let b = g.acquire(TenantId(1), ClassId(0)).unwrap();
        drop(p); // b is granted, but never polled
        assert_eq!(g.load(), (0, 1));
        drop(b);
        assert_eq!(g.load(), (0, 0));
    }

    #[test]
    fn every_preset_resolves() {
        for p in fairlane_core::PRESETS {
            resolve_scheduler(p, 4, 0.01).unwrap();
        }
        assert!(resolve_scheduler("nope", 4, 0.01)
            .unwrap_err()
            .contains("known"));
    }
}
