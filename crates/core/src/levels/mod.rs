//! Priority levels above tenants: Kubernetes API Priority and Fairness (APF, KEP-1040 and
//! KEP-3479) behind the ordinary [`Scheduler`] seam, so that one
//! [`BoxedScheduler`](crate::BoxedScheduler) runs on every executor.
//!
//! ServerCL is the scheduler's workers. Each non-exempt level gets a nominal part of it in
//! proportion to its `shares` (largest remainder: the parts sum to exactly ServerCL, and
//! every level gets a seat), lends up to `lendable_percent` of it and borrows up to
//! `borrowing_limit_percent` more ([`Sharing::Borrowing`], APF's rule, adjusted every period;
//! or [`Sharing::Strict`] bands with a starvation guard). Inside a level, any preset's fair
//! scheduler shares the level's seats among its *flows*: a flow is a tenant plus the request's
//! [`distinguisher`](crate::Request::distinguisher) (0: the tenant alone). The level's fair
//! scheduler sees its own seat numbers `0..current limit` as workers, so 2DFQ's staggering
//! is the level's; it sees a flow as a tenant, with the tenant's weight.
//!
//! A request names its level in [`Request::level`](crate::Request::level)
//! ([`LevelId::CATCH_ALL`] by default): level ids are indices into
//! [`LevelsConfig::levels`]; [`Inspect::levels`] lists them by name for an executor's
//! classifier, its metrics and its debug dumps.
//!
//! What an executor does beyond the seam:
//!
//! * **Exempt levels** are dispatched ahead of every other level, with no limit, and their
//!   seats do not count against ServerCL. A pool with a fixed set of threads enqueues exempt
//!   requests like any other: the next free thread takes them. A gate or proxy that admits
//!   exempt traffic outside ServerCL checks [`LevelView::exempt`] and does not enqueue it.
//! * **Queue limits** are the scheduler's: an enqueue beyond one is refused with
//!   [`Error::LevelFull`](crate::Error::LevelFull).
//! * **Queue timeouts** are the executor's (the core has no clock): a request queued longer
//!   than [`LevelView::queue_timeout`] is cancelled and refused by the executor.
//! * **Borrowing** only moves at an adjustment; a dispatch held back by a level's limit
//!   answers [`Decision::RetryAt`] the next adjustment time, as every executor already honours.

mod alloc;
mod config;
mod demand;
mod flows;
mod sharing;

use crate::config::check_worker;
use crate::scheduler::{check_target, Admin, Inspect, Scheduler, TenantView};
use crate::types::{
    check_cost, check_weight, Decision, Dispatch, Error, LevelId, Request, TenantId, Ticket,
};
use crate::util::FxHashMap;
use alloc::{apportion, Limits};
use flows::{Flow, Flows, Seats};
use sharing::{LevelState, Sharing as Policy};

pub use config::{LevelConfig, LevelsConfig, Sharing, APF_PERIOD_SECONDS, MAX_SHARES};
pub use demand::{DemandStats, SMOOTHING};

/// `cases` proptest cases, or `PROPTEST_CASES` when it is set.
#[cfg(test)]
fn proptest_cases(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}

/// One priority level as an executor's metrics and debug dumps see it (APF's
/// `/debug/api_priority_and_fairness/dump_priority_levels` and its seat metrics).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LevelView<'a> {
    /// Its id: what [`Request::level`](crate::Request::level) names it by.
    pub id: LevelId,
    /// Its name.
    pub name: &'a str,
    /// Exempt: not limited, never queued behind other levels.
    pub exempt: bool,
    /// The level [`LevelId::CATCH_ALL`] requests go to.
    pub catch_all: bool,
    /// Its fair scheduler's name (`"2dfqe"`, …).
    pub scheduler: &'static str,
    /// How the levels share ServerCL: `"borrowing"` or `"strict"`.
    pub sharing: &'static str,
    /// Its nominal concurrency shares.
    pub shares: f64,
    /// NominalCL: its part of ServerCL (0 for an exempt level).
    pub nominal: usize,
    /// LendableCL: how many of its nominal seats it may lend.
    pub lendable: usize,
    /// BorrowingCL: how many seats beyond its nominal ones it may borrow (ServerCL when
    /// unlimited).
    pub borrowing_limit: usize,
    /// `nominal − lendable`.
    pub min: usize,
    /// `nominal + borrowing limit`, at most ServerCL.
    pub max: usize,
    /// CurrentCL: the seats it may hold now (borrowing: the adjusted limit; strict bands:
    /// `max`; exempt: ServerCL).
    pub current: usize,
    /// Requests of the level running.
    pub seats_in_use: usize,
    /// Requests of the level queued.
    pub queued: usize,
    /// Flows the level knows.
    pub flows: usize,
    /// Its queue limit.
    pub queue_limit: Option<usize>,
    /// How long its requests may wait, in the unit of `now`: the executor enforces it.
    pub queue_timeout: Option<f64>,
    /// Its seat demand over the last adjustment period.
    pub demand: DemandStats,
}

impl LevelView<'_> {
    /// Seats of its nominal part it lends now: `nominal − current` when positive.
    pub fn lent(&self) -> usize {
        if self.exempt {
            0
        } else {
            self.nominal.saturating_sub(self.current)
        }
    }

    /// Seats it holds beyond its nominal part now: `seats_in_use − nominal` when positive.
    pub fn borrowed(&self) -> usize {
        if self.exempt {
            0
        } else {
            self.seats_in_use.saturating_sub(self.nominal)
        }
    }
}

/// What a level's fair scheduler carries for each request: the outer slot and the payload.
pub(crate) struct Routed<T> {
    slot: u32,
    payload: T,
}

struct Level<T> {
    name: String,
    sched: Box<dyn Scheduler<Routed<T>> + Send>,
    /// Its fair scheduler's workers: `max(1, current)` (ServerCL for an exempt level, whose
    /// seats are the executor's workers).
    seat_limit: usize,
    flows: Flows,
    seats: Seats,
    queue_limit: Option<usize>,
    queue_timeout: Option<f64>,
    requires_cost: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Free,
    Queued,
    Running,
}

/// One request, from enqueue to completion.
#[derive(Clone, Copy, Debug)]
struct Entry {
    generation: u32,
    state: State,
    level: u32,
    flow: u32,
    seat: u32,
    inner: Ticket,
}

/// A tenant's settings and its flows, `(level, flow)`.
#[derive(Debug, Default)]
struct TenantEntry {
    weight: Option<f64>,
    target: Option<f64>,
    flows: Vec<(u32, u32)>,
}

/// Priority levels above tenants, one fair scheduler per level (see the module docs).
/// Build it with [`LevelsConfig::build`].
pub struct LevelScheduler<T> {
    levels: Vec<Level<T>>,
    states: Vec<LevelState>,
    /// Exempt levels first, then the others in configuration order.
    order: Vec<usize>,
    catch_all: usize,
    non_exempt: usize,
    server: usize,
    sharing: Box<dyn Policy>,
    entries: Vec<Entry>,
    free_entries: Vec<u32>,
    tenants: FxHashMap<TenantId, TenantEntry>,
    /// The weight of a tenant never given one (the catch-all level's default).
    default_weight: f64,
    now: f64,
    queued: usize,
    running: usize,
}

impl<T: Send + 'static> LevelScheduler<T> {
    /// The scheduler a (non-empty) configuration describes.
    pub fn new(config: &LevelsConfig) -> Result<Self, Error> {
        let catch_all = config.check()?;
        if config.levels.is_empty() {
            return Err(Error::InvalidConfig {
                field: "levels",
                reason: "a level scheduler needs levels (LevelsConfig::build gives the plain \
                         scheduler without)"
                    .into(),
            });
        }
        let server = config.scheduler.workers;
        let mut states: Vec<LevelState> = config
            .levels
            .iter()
            .map(|l| LevelState {
                exempt: l.exempt,
                shares: l.shares,
                lendable_percent: l.lendable_percent,
                borrowing_limit_percent: l.borrowing_limit_percent,
                ..LevelState::default()
            })
            .collect();
        set_limits(&mut states, server);
        let mut sharing = config.sharing.policy();
        sharing.reset(&mut states, server, f64::NEG_INFINITY);
        let mut levels = Vec::with_capacity(states.len());
        for (index, (l, st)) in config.levels.iter().zip(&states).enumerate() {
            let seat_limit = st.current.max(1);
            let inner = l.scheduler.unwrap_or(config.scheduler).workers(seat_limit);
            let sched = inner.build().map_err(|e| Error::InvalidLevel {
                index,
                name: l.name.clone(),
                field: "scheduler",
                reason: e.to_string(),
            })?;
            levels.push(Level {
                name: l.name.clone(),
                requires_cost: sched.requires_cost(),
                sched,
                seat_limit,
                flows: Flows::default(),
                seats: Seats::default(),
                queue_limit: l.queue_limit,
                queue_timeout: l.queue_timeout,
            });
        }
        let mut order: Vec<usize> = (0..states.len()).filter(|&i| states[i].exempt).collect();
        order.extend((0..states.len()).filter(|&i| !states[i].exempt));
        Ok(LevelScheduler {
            levels,
            non_exempt: config.non_exempt(),
            states,
            order,
            catch_all,
            server,
            sharing,
            entries: Vec::new(),
            free_entries: Vec::new(),
            tenants: FxHashMap::default(),
            default_weight: config.levels[catch_all]
                .scheduler
                .unwrap_or(config.scheduler)
                .default_weight,
            now: f64::NEG_INFINITY,
            queued: 0,
            running: 0,
        })
    }

    #[inline]
    fn observe(&mut self, now: f64) -> Result<f64, Error> {
        if !now.is_finite() {
            return Err(Error::InvalidTime(now));
        }
        if now > self.now {
            self.now = now;
        }
        Ok(self.now)
    }

    #[inline]
    fn resolve(&self, level: LevelId) -> Result<usize, Error> {
        if level == LevelId::CATCH_ALL {
            return Ok(self.catch_all);
        }
        match level.0 as usize {
            i if i < self.levels.len() => Ok(i),
            _ => Err(Error::UnknownLevel(level)),
        }
    }

    /// Give each level's fair scheduler its seats after the limits moved.
    fn sync_workers(&mut self) -> Result<(), Error> {
        for (l, st) in self.levels.iter_mut().zip(&self.states) {
            let want = st.current.max(1);
            if want != l.seat_limit {
                l.sched.set_workers(want)?;
                l.seat_limit = want;
            }
        }
        Ok(())
    }

    /// The flow `(tenant, distinguisher)` of level `i`, created (with the tenant's weight
    /// and target) if new; whether it was created.
    fn flow(&mut self, i: usize, flow: Flow, now: f64) -> Result<(u32, bool), Error> {
        let level = &mut self.levels[i];
        if let Some(f) = level.flows.get(flow.tenant, flow.distinguisher) {
            return Ok((f, false));
        }
        let f = level.flows.insert(flow);
        let entry = self.tenants.entry(flow.tenant).or_default();
        entry.flows.push((i as u32, f));
        let inner = TenantId(u64::from(f));
        let set = match (entry.weight, entry.target) {
            (Some(w), _) => level.sched.set_weight(inner, w, now),
            _ => Ok(()),
        }
        .and_then(|()| match entry.target {
            Some(t) => level.sched.set_target(inner, Some(t), now),
            None => Ok(()),
        });
        if let Err(e) = set {
            self.drop_flow(i, f);
            return Err(outer_error(e, None, flow.tenant));
        }
        Ok((f, true))
    }

    /// Forget flow `f` of level `i` (it has nothing queued or running).
    fn drop_flow(&mut self, i: usize, f: u32) {
        let level = &mut self.levels[i];
        let Some(flow) = level.flows.flow(f) else {
            return;
        };
        let _ = level.sched.remove_tenant(TenantId(u64::from(f)));
        level.flows.remove(f);
        if let Some(entry) = self.tenants.get_mut(&flow.tenant) {
            entry.flows.retain(|&x| x != (i as u32, f));
            if entry.flows.is_empty() && entry.weight.is_none() && entry.target.is_none() {
                self.tenants.remove(&flow.tenant);
            }
        }
    }

    fn alloc_entry(&mut self, level: usize, flow: u32) -> u32 {
        let fresh = Entry {
            generation: 0,
            state: State::Queued,
            level: level as u32,
            flow,
            seat: u32::MAX,
            inner: Ticket(0),
        };
        match self.free_entries.pop() {
            Some(slot) => {
                let e = &mut self.entries[slot as usize];
                *e = Entry {
                    generation: e.generation,
                    ..fresh
                };
                slot
            }
            None => {
                self.entries.push(fresh);
                (self.entries.len() - 1) as u32
            }
        }
    }

    fn free_entry(&mut self, slot: u32) {
        let e = &mut self.entries[slot as usize];
        e.state = State::Free;
        e.generation = e.generation.wrapping_add(1);
        self.free_entries.push(slot);
    }

    /// The live entry behind an outer ticket.
    #[inline]
    fn entry(&self, ticket: Ticket) -> Result<Entry, Error> {
        self.entries
            .get(ticket.slot() as usize)
            .filter(|e| e.generation == ticket.generation() && e.state != State::Free)
            .copied()
            .ok_or(Error::UnknownTicket(ticket))
    }

    #[inline]
    fn running_entry(&self, ticket: Ticket) -> Result<Entry, Error> {
        let e = self.entry(ticket)?;
        if e.state != State::Running {
            return Err(Error::NotRunning(ticket));
        }
        Ok(e)
    }

    /// Try to start a request of level `i` on one of its seats (an exempt level's seat is
    /// the executor's `worker`): the dispatch, or the time to ask again (its fair scheduler's
    /// `RetryAt`; ∞ when it has no seat free).
    fn start(
        &mut self,
        i: usize,
        worker: usize,
        now: f64,
    ) -> Result<Result<Dispatch<T>, f64>, Error> {
        let exempt = self.states[i].exempt;
        let level = &mut self.levels[i];
        let seat = if exempt {
            worker
        } else {
            let Some(seat) = level.seats.take(level.seat_limit) else {
                return Ok(Err(f64::INFINITY));
            };
            seat
        };
        let d = match level.sched.dequeue(seat, now)? {
            Decision::Run(d) => d,
            other => {
                if !exempt {
                    level.seats.release(seat);
                }
                return Ok(Err(match other {
                    Decision::RetryAt(t) => t,
                    _ => f64::INFINITY,
                }));
            }
        };
        let Routed { slot, payload } = d.request.payload;
        let e = &mut self.entries[slot as usize];
        e.state = State::Running;
        e.seat = seat as u32;
        e.inner = d.ticket;
        let flow = level
            .flows
            .flow(e.flow)
            .expect("a flow with a queued request is known");
        let st = &mut self.states[i];
        st.queued -= 1;
        st.running += 1;
        self.queued -= 1;
        self.running += 1;
        Ok(Ok(Dispatch {
            ticket: Ticket::new(slot, e.generation),
            request: Request {
                tenant: flow.tenant,
                class: d.request.class,
                cost: d.request.cost,
                payload,
                level: LevelId(i as u32),
                distinguisher: flow.distinguisher,
            },
            charged: d.charged,
        }))
    }
}

/// Nominal seats by shares (largest remainder over the non-exempt levels) and each level's
/// limits at ServerCL `server`. Exempt levels have no nominal part and no limit.
fn set_limits(states: &mut [LevelState], server: usize) {
    let shares: Vec<f64> = states
        .iter()
        .filter(|s| !s.exempt)
        .map(|s| s.shares)
        .collect();
    let mut nominal = apportion(server, &shares).into_iter();
    for st in states.iter_mut() {
        if st.exempt {
            st.limits = Limits {
                borrowing: server,
                max: server,
                ..Limits::default()
            };
            st.current = server;
        } else {
            let n = nominal.next().unwrap_or(0);
            st.limits = Limits::new(n, st.lendable_percent, st.borrowing_limit_percent, server);
        }
    }
}

/// An error of a level's fair scheduler in the caller's terms: the outer ticket, the tenant
/// rather than the flow id.
fn outer_error(e: Error, ticket: Option<Ticket>, tenant: TenantId) -> Error {
    match (e, ticket) {
        (Error::UnknownTicket(_), Some(t)) => Error::UnknownTicket(t),
        (Error::NotRunning(_), Some(t)) => Error::NotRunning(t),
        (Error::AlreadyRunning(_), Some(t)) => Error::AlreadyRunning(t),
        (Error::UsageDecreased { before, now, .. }, Some(ticket)) => Error::UsageDecreased {
            ticket,
            before,
            now,
        },
        (Error::InvalidWeight { value, .. }, _) => Error::InvalidWeight { tenant, value },
        (Error::CostRequired { class, .. }, _) => Error::CostRequired { tenant, class },
        (Error::TenantBusy(_), _) => Error::TenantBusy(tenant),
        (Error::UnknownTenant(_), _) => Error::UnknownTenant(tenant),
        (e, _) => e,
    }
}

impl<T: Send + 'static> Scheduler<T> for LevelScheduler<T> {
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.observe(now)?;
        let i = self.resolve(request.level)?;
        if let Some(c) = request.cost {
            check_cost("cost", c)?;
        }
        let (tenant, class) = (request.tenant, request.class);
        let level = &self.levels[i];
        if request.cost.is_none() && level.requires_cost {
            return Err(Error::CostRequired { tenant, class });
        }
        if let Some(limit) = level.queue_limit.filter(|&l| self.states[i].queued >= l) {
            return Err(Error::LevelFull {
                level: LevelId(i as u32),
                name: level.name.clone(),
                limit,
            });
        }
        let flow = Flow {
            tenant,
            distinguisher: request.distinguisher,
        };
        let (f, created) = self.flow(i, flow, now)?;
        let slot = self.alloc_entry(i, f);
        let inner = Request {
            tenant: TenantId(u64::from(f)),
            class,
            cost: request.cost,
            payload: Routed {
                slot,
                payload: request.payload,
            },
            level: LevelId::CATCH_ALL,
            distinguisher: 0,
        };
        match self.levels[i].sched.enqueue(inner, now) {
            Ok(t) => {
                let e = &mut self.entries[slot as usize];
                e.inner = t;
                let ticket = Ticket::new(slot, e.generation);
                let st = &mut self.states[i];
                st.queued += 1;
                st.demand_changed(now);
                self.queued += 1;
                Ok(ticket)
            }
            Err(e) => {
                self.free_entry(slot);
                if created {
                    self.drop_flow(i, f);
                }
                Err(outer_error(e, None, tenant))
            }
        }
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        let now = self.observe(now)?;
        check_worker(worker, self.server)?;
        if self.queued == 0 {
            return Ok(Decision::Empty);
        }
        if self.sharing.prepare(&mut self.states, self.server, now) {
            self.sync_workers()?;
        }
        let free = self.server.saturating_sub(self.running);
        let (mut retry, mut held) = (f64::INFINITY, false);
        for k in 0..self.order.len() {
            let i = self.order[k];
            let st = &self.states[i];
            if st.queued == 0 {
                continue;
            }
            if !st.exempt && (free == 0 || !self.sharing.admits(&self.states, i, free)) {
                held = true;
                continue;
            }
            match self.start(i, worker, now)? {
                Ok(d) => return Ok(Decision::Run(d)),
                Err(t) => retry = retry.min(t),
            }
        }
        if held {
            retry = retry.min(self.sharing.retry_at());
        }
        Ok(Decision::RetryAt(retry))
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        let e = self.running_entry(ticket)?;
        let level = &mut self.levels[e.level as usize];
        level.sched.progress(e.inner, used, now).map_err(|err| {
            let tenant = level.flows.flow(e.flow).map_or(TenantId(0), |f| f.tenant);
            outer_error(err, Some(ticket), tenant)
        })
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        let e = self.running_entry(ticket)?;
        let i = e.level as usize;
        let level = &mut self.levels[i];
        level.sched.complete(e.inner, used, now).map_err(|err| {
            let tenant = level.flows.flow(e.flow).map_or(TenantId(0), |f| f.tenant);
            outer_error(err, Some(ticket), tenant)
        })?;
        let st = &mut self.states[i];
        if !st.exempt {
            level.seats.release(e.seat as usize);
        }
        st.running -= 1;
        st.demand_changed(now);
        self.running -= 1;
        self.free_entry(ticket.slot());
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        let now = self.observe(now)?;
        let e = self.entry(ticket)?;
        if e.state == State::Running {
            return Err(Error::AlreadyRunning(ticket));
        }
        let i = e.level as usize;
        let level = &mut self.levels[i];
        let flow = level
            .flows
            .flow(e.flow)
            .expect("a flow with a queued request is known");
        let r = level
            .sched
            .cancel(e.inner, now)
            .map_err(|err| outer_error(err, Some(ticket), flow.tenant))?;
        let st = &mut self.states[i];
        st.queued -= 1;
        st.demand_changed(now);
        self.queued -= 1;
        self.free_entry(ticket.slot());
        Ok(Request {
            tenant: flow.tenant,
            class: r.class,
            cost: r.cost,
            payload: r.payload.payload,
            level: LevelId(i as u32),
            distinguisher: flow.distinguisher,
        })
    }
}

impl<T: Send + 'static> Admin for LevelScheduler<T> {
    /// Change ServerCL: the nominal parts and limits are recomputed (and, with borrowing,
    /// the current limits adjusted at once). It must stay at least the number of non-exempt
    /// levels.
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        let server = config::check_server(workers, self.non_exempt)?;
        self.server = server;
        set_limits(&mut self.states, server);
        self.sharing.reset(&mut self.states, server, self.now);
        self.sync_workers()
    }

    /// The weight of every flow of the tenant, in every level (and of its flows to come).
    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_weight(tenant, weight)?;
        let entry = self.tenants.entry(tenant).or_default();
        entry.weight = Some(weight);
        for &(i, f) in &entry.flows {
            let inner = TenantId(u64::from(f));
            self.levels[i as usize]
                .sched
                .set_weight(inner, weight, now)
                .map_err(|e| outer_error(e, None, tenant))?;
        }
        Ok(())
    }

    /// The target of every flow of the tenant, in every level (and of its flows to come).
    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_target(target)?;
        let entry = self.tenants.entry(tenant).or_default();
        entry.target = target;
        for &(i, f) in &entry.flows {
            let inner = TenantId(u64::from(f));
            self.levels[i as usize]
                .sched
                .set_target(inner, target, now)
                .map_err(|e| outer_error(e, None, tenant))?;
        }
        Ok(())
    }

    /// Forget a tenant and all its flows; refused while any of them has a request.
    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        let entry = self
            .tenants
            .get(&tenant)
            .ok_or(Error::UnknownTenant(tenant))?;
        let busy = entry.flows.iter().any(|&(i, f)| {
            self.levels[i as usize]
                .sched
                .tenant(TenantId(u64::from(f)))
                .is_some_and(|v| v.queued + v.running > 0)
        });
        if busy {
            return Err(Error::TenantBusy(tenant));
        }
        let flows = entry.flows.clone();
        for (i, f) in flows {
            self.drop_flow(i as usize, f);
        }
        self.tenants.remove(&tenant);
        Ok(())
    }
}

impl<T: Send + 'static> Inspect for LevelScheduler<T> {
    fn name(&self) -> &'static str {
        "levels"
    }

    fn workers(&self) -> usize {
        self.server
    }

    fn requires_cost(&self) -> bool {
        self.levels.iter().any(|l| l.requires_cost)
    }

    /// The tenant over all its flows: requests summed, active if any flow is, the weight
    /// and tag of its first flow (or the weight it was given, before it has one).
    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        let entry = self.tenants.get(&tenant)?;
        let mut view = TenantView {
            id: tenant,
            weight: entry.weight.unwrap_or(f64::NAN),
            queued: 0,
            running: 0,
            active: false,
            tag: 0.0,
        };
        for (k, &(i, f)) in entry.flows.iter().enumerate() {
            let Some(v) = self.levels[i as usize].sched.tenant(TenantId(u64::from(f))) else {
                continue;
            };
            if k == 0 {
                (view.weight, view.tag) = (v.weight, v.tag);
            }
            view.queued += v.queued;
            view.running += v.running;
            view.active |= v.active;
        }
        if view.weight.is_nan() {
            view.weight = self.default_weight;
        }
        Some(view)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn running(&self) -> usize {
        self.running
    }

    fn levels(&self) -> Vec<LevelView<'_>> {
        let sharing = self.sharing.name();
        (self.levels.iter().zip(&self.states).enumerate())
            .map(|(i, (l, st))| LevelView {
                id: LevelId(i as u32),
                name: &l.name,
                exempt: st.exempt,
                catch_all: i == self.catch_all,
                scheduler: l.sched.name(),
                sharing,
                shares: st.shares,
                nominal: st.limits.nominal,
                lendable: st.limits.lendable,
                borrowing_limit: st.limits.borrowing,
                min: st.limits.min,
                max: st.limits.max,
                current: st.current,
                seats_in_use: st.running,
                queued: st.queued,
                flows: l.flows.len(),
                queue_limit: l.queue_limit,
                queue_timeout: l.queue_timeout,
                demand: st.demand.last,
            })
            .collect()
    }
}
