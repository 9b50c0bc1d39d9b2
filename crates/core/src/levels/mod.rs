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
//!   [`Error::LevelFull`].
//! * **Queue timeouts** are the executor's (the core has no clock): a request queued longer
//!   than [`LevelView::queue_timeout`] is cancelled and refused by the executor.
//! * **Borrowing** only moves at an adjustment; a dispatch held back by a level's limit
//!   answers [`Decision::RetryAt`] the next adjustment time, as every executor already honours.

/// `docs/priority-levels.md`'s example, compiled and run as a doctest.
#[doc = include_str!("../../../../docs/priority-levels.md")]
#[cfg(doctest)]
pub struct PriorityLevelsDoctest;

mod alloc;
mod config;
mod demand;
mod flows;
mod inner;
mod sharing;

use crate::config::{check_worker, Config};
use crate::scheduler::{check_target, Admin, Inspect, Scheduler, TenantView};
use crate::types::{check_weight, Decision, Dispatch, Error, LevelId, Request, TenantId, Ticket};
use crate::util::FxHashMap;
use alloc::{apportion, Limits};
use flows::{Flow, Flows, Seats};
pub(crate) use inner::Inner;
use sharing::{LevelState, Sharing as Policy};

pub use config::{LevelConfig, LevelsConfig, Sharing, APF_PERIOD_SECONDS, MAX_SHARES};
pub use demand::{DemandStats, SMOOTHING};

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

/// Bits of a ticket's slot number that are the level's fair scheduler's slot; the bits above
/// are the level. A ticket is the level's fair scheduler's ticket with the level in it: no
/// table between them, and the fair scheduler checks it as it checks its own.
const SLOT_BITS: u32 = 24;

/// The most levels a configuration may have (the top 8 bits of a ticket's slot number).
pub const MAX_LEVELS: usize = 1 << (32 - SLOT_BITS);

/// The most requests one level may hold queued and running at once.
pub const MAX_LEVEL_REQUESTS: usize = 1 << SLOT_BITS;

/// The caller's ticket for level `i`'s fair scheduler's ticket `inner`.
#[inline]
fn outer_ticket(i: usize, inner: Ticket) -> Ticket {
    Ticket::new(((i as u32) << SLOT_BITS) | inner.slot(), inner.generation())
}

/// The level and the level's fair scheduler's ticket behind a caller's ticket.
#[inline]
fn inner_ticket(ticket: Ticket) -> (usize, Ticket) {
    let slot = ticket.slot();
    let inner = Ticket::new(slot & (MAX_LEVEL_REQUESTS as u32 - 1), ticket.generation());
    ((slot >> SLOT_BITS) as usize, inner)
}

struct Level<T> {
    name: String,
    /// Its fair scheduler's configuration, workers aside.
    config: Config,
    sched: Inner<T>,
    /// Its fair scheduler's workers: `max(1, current)` (ServerCL for an exempt level, whose
    /// seats are the executor's workers).
    seat_limit: usize,
    flows: Flows,
    seats: Seats,
    /// The seat of each running request, by its fair scheduler's slot. Seats are below
    /// [`MAX_WORKERS`](crate::MAX_WORKERS) = 2¹⁶: two bytes each keep the table small
    /// enough to stay in cache, read once per completion.
    seat_of: Vec<u16>,
    queue_limit: Option<usize>,
    queue_timeout: Option<f64>,
    requires_cost: bool,
}

impl<T> Level<T> {
    /// What a reload may not change, as it is.
    fn describe(&self, exempt: bool) -> String {
        let exempt = if exempt { "exempt, " } else { "" };
        format!("{exempt}under {}", self.config.name())
    }
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
    sharing_config: Sharing,
    /// `sharing.prepare_at()`, cached: the hot path skips the call before it.
    prepare_at: f64,
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
        let mut s = LevelScheduler {
            levels: Vec::new(),
            states: Vec::new(),
            order: Vec::new(),
            catch_all: 0,
            non_exempt: 0,
            server: config.scheduler.workers,
            sharing: config.sharing.policy(),
            sharing_config: config.sharing,
            prepare_at: f64::NEG_INFINITY,
            tenants: FxHashMap::default(),
            default_weight: 1.0,
            now: f64::NEG_INFINITY,
            queued: 0,
            running: 0,
        };
        s.configure(config)?;
        Ok(s)
    }

    /// Take a new configuration, keeping every queued and running request (a reload).
    /// Levels are matched by name: a level keeps its id, its queue and its flows while its
    /// shares, percentages, queue limit and timeout change; a new name is a new level; a
    /// level left out must have nothing queued or running, and is retired (its id stays
    /// taken; naming it again revives it). ServerCL stays the scheduler's workers. Refused,
    /// changing nothing: a level whose fair scheduler or exemption changes (they change at
    /// restart, as APF's do), and everything [`LevelsConfig::check`] refuses.
    pub fn reconfigure(&mut self, config: &LevelsConfig) -> Result<(), Error> {
        self.configure(config)
    }

    fn configure(&mut self, config: &LevelsConfig) -> Result<(), Error> {
        let catch_all = config.check_levels()?;
        config::check_server(self.server, config.non_exempt())?;
        let plan = self.plan(config)?;
        let mut built = Vec::new();
        for (k, l) in config.levels.iter().enumerate() {
            if plan[k].1 {
                let c = config.scheduler_of(l);
                let sched = (c.estimator.build())
                    .and_then(|est| c.build_inner(est))
                    .map_err(|e| Error::invalid_level(k, &l.name, "scheduler", e.to_string()))?;
                built.push(Some(sched));
            } else {
                built.push(None);
            }
        }
        let kept: Vec<usize> = plan.iter().map(|p| p.0).collect();
        for (i, st) in self.states.iter_mut().enumerate() {
            st.retired |= !kept.contains(&i);
        }
        for ((l, &(i, _)), sched) in config.levels.iter().zip(&plan).zip(built) {
            self.apply(config, l, i, sched);
        }
        let exempt = |k: &usize| config.levels[*k].exempt;
        let mut order: Vec<usize> = (0..kept.len()).filter(exempt).map(|k| kept[k]).collect();
        order.extend((0..kept.len()).filter(|k| !exempt(k)).map(|k| kept[k]));
        self.order = order;
        self.catch_all = kept[catch_all];
        self.non_exempt = config.non_exempt();
        self.default_weight = config
            .scheduler_of(&config.levels[catch_all])
            .default_weight;
        if config.sharing != self.sharing_config {
            (self.sharing, self.sharing_config) = (config.sharing.policy(), config.sharing);
        }
        set_limits(&mut self.states, self.server);
        self.sharing.reset(&mut self.states, self.server, self.now);
        self.prepare_at = self.sharing.prepare_at();
        self.sync_workers()
    }

    /// For each level of `config`: its id, and whether its fair scheduler is to be built (a
    /// new or revived level). Refuses what a reload may not change.
    fn plan(&self, config: &LevelsConfig) -> Result<Vec<(usize, bool)>, Error> {
        let mut plan = Vec::with_capacity(config.levels.len());
        let mut next = self.levels.len();
        for (k, l) in config.levels.iter().enumerate() {
            let Some(i) = self.levels.iter().position(|x| x.name == l.name) else {
                plan.push((next, true));
                next += 1;
                continue;
            };
            let (st, old) = (&self.states[i], &self.levels[i]);
            let idle = st.queued + st.running == 0;
            let same = old.config == config.scheduler_of(l) && st.exempt == l.exempt;
            if !(same || st.retired && idle) {
                let field = if st.exempt == l.exempt {
                    "scheduler"
                } else {
                    "exempt"
                };
                let reason = format!("changes at restart (it is {})", old.describe(st.exempt));
                return Err(Error::invalid_level(k, &l.name, field, reason));
            }
            plan.push((i, !same));
        }
        if next > MAX_LEVELS {
            return Err(Error::InvalidConfig {
                field: "levels",
                reason: format!("at most {MAX_LEVELS} levels, retired ones included"),
            });
        }
        let gone = (0..self.levels.len()).filter(|i| !plan.iter().any(|p| p.0 == *i));
        for i in gone {
            let st = &self.states[i];
            if st.queued + st.running > 0 {
                return Err(Error::InvalidConfig {
                    field: "levels",
                    reason: format!(
                        "level {:?} still has {} requests queued and {} running: keep it \
                         until they are done",
                        self.levels[i].name, st.queued, st.running
                    ),
                });
            }
        }
        Ok(plan)
    }

    /// Give level `i` (new at the end, or existing) the settings of `l`, with a freshly built
    /// fair scheduler when it is new or revived.
    fn apply(&mut self, config: &LevelsConfig, l: &LevelConfig, i: usize, sched: Option<Inner<T>>) {
        if i == self.levels.len() {
            self.states.push(LevelState::default());
            let sched = sched.expect("a new level's scheduler is built");
            let mut seats = Seats::default();
            seats.reserve(1);
            self.levels.push(Level {
                name: l.name.clone(),
                config: config.scheduler_of(l),
                requires_cost: sched.requires_cost(),
                sched,
                seat_limit: 1,
                flows: Flows::default(),
                seats,
                seat_of: Vec::new(),
                queue_limit: None,
                queue_timeout: None,
            });
        } else if let Some(sched) = sched {
            let level = &mut self.levels[i];
            (level.config, level.requires_cost) = (config.scheduler_of(l), sched.requires_cost());
            (level.sched, level.seat_limit, level.flows) = (sched, 1, Flows::default());
            for (_, entry) in self.tenants.iter_mut() {
                entry.flows.retain(|&(lv, _)| lv as usize != i);
            }
        }
        let level = &mut self.levels[i];
        (level.queue_limit, level.queue_timeout) = (l.queue_limit, l.queue_timeout);
        let st = &mut self.states[i];
        st.exempt = l.exempt;
        st.retired = false;
        st.shares = l.shares;
        st.lendable_percent = l.lendable_percent;
        st.borrowing_limit_percent = l.borrowing_limit_percent;
        if self.now.is_finite() && !st.demand_started() {
            st.demand.start(self.now);
        }
    }

    #[inline]
    fn observe(&mut self, now: f64) -> Result<f64, Error> {
        if now == self.now && now != f64::NEG_INFINITY {
            return Ok(now); // the time of the last call, checked then
        }
        if !now.is_finite() {
            return Err(Error::InvalidTime(now));
        }
        if now > self.now {
            if self.now == f64::NEG_INFINITY {
                for st in &mut self.states {
                    st.demand.start(now); // the first call: demand is observed from here
                }
            }
            self.now = now;
        }
        Ok(self.now)
    }

    /// The checked time, and the level and its fair scheduler's ticket behind a caller's
    /// ticket.
    #[inline]
    fn locate(&mut self, ticket: Ticket, now: f64) -> Result<(f64, usize, Ticket), Error> {
        let now = self.observe(now)?;
        let (i, inner) = inner_ticket(ticket);
        if i >= self.levels.len() {
            return Err(Error::UnknownTicket(ticket));
        }
        Ok((now, i, inner))
    }

    #[inline]
    fn resolve(&self, level: LevelId) -> Result<usize, Error> {
        if level == LevelId::CATCH_ALL {
            return Ok(self.catch_all);
        }
        match level.0 as usize {
            i if i < self.levels.len() && !self.states[i].retired => Ok(i),
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
                l.seats.reserve(want);
            }
        }
        Ok(())
    }

    /// Create the flow `(tenant, distinguisher)` of level `i`, with the tenant's weight and
    /// target.
    #[cold]
    fn new_flow(&mut self, i: usize, flow: Flow, now: f64) -> Result<u32, Error> {
        let level = &mut self.levels[i];
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
            return Err(tenant_error(e, flow.tenant));
        }
        Ok(f)
    }

    /// `f(its level's fair scheduler, the flow)` for every flow of `tenant`.
    fn each_flow(
        &mut self,
        tenant: TenantId,
        mut f: impl FnMut(&mut dyn Scheduler<T>, TenantId) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let Some(entry) = self.tenants.get(&tenant) else {
            return Ok(());
        };
        for &(i, flow) in &entry.flows {
            let sched = &mut self.levels[i as usize].sched;
            f(sched, TenantId(u64::from(flow))).map_err(|e| tenant_error(e, tenant))?;
        }
        Ok(())
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

    /// Try to start a request of level `i` on one of its seats (an exempt level's seat is
    /// the executor's `worker`): the dispatch, or `None` with `retry` lowered to when to ask
    /// again (its fair scheduler's `RetryAt`; ∞ when it has no seat free).
    #[inline]
    fn start(
        &mut self,
        i: usize,
        worker: usize,
        now: f64,
        retry: &mut f64,
    ) -> Result<Option<Dispatch<T>>, Error> {
        let (level, st) = (&mut self.levels[i], &mut self.states[i]);
        let exempt = st.exempt;
        let seat = if exempt {
            worker
        } else {
            let Some(seat) = level.seats.take(level.seat_limit) else {
                return Ok(None);
            };
            seat
        };
        let d = match level.sched.dequeue(seat, now)? {
            Decision::Run(d) => d,
            other => {
                if !exempt {
                    level.seats.release(seat);
                }
                if let Decision::RetryAt(t) = other {
                    *retry = retry.min(t);
                }
                return Ok(None);
            }
        };
        let (flow, payload) = (level.flows.of_request(d.request.tenant), d.request.payload);
        let slot = d.ticket.slot() as usize;
        if level.seat_of.len() <= slot {
            level.seat_of.resize(slot + 1, 0);
        }
        level.seat_of[slot] = seat as u16;
        st.queued -= 1;
        st.running += 1;
        self.queued -= 1;
        self.running += 1;
        Ok(Some(Dispatch {
            ticket: outer_ticket(i, d.ticket),
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
        .filter(|s| s.shares_seats())
        .map(|s| s.shares)
        .collect();
    let mut nominal = apportion(server, &shares).into_iter();
    for st in states.iter_mut() {
        if st.retired {
            (st.limits, st.current, st.open) = (Limits::default(), 0, 0);
        } else if st.exempt {
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

/// What a level's fair scheduler answered about a ticket, an error in the caller's ticket.
#[inline]
fn on_ticket<R>(answer: Result<R, Error>, ticket: Ticket) -> Result<R, Error> {
    answer.map_err(|e| ticket_error(e, ticket))
}

/// An error of a level's fair scheduler about a ticket, in the caller's ticket.
fn ticket_error(e: Error, ticket: Ticket) -> Error {
    match e {
        Error::UnknownTicket(_) => Error::UnknownTicket(ticket),
        Error::NotRunning(_) => Error::NotRunning(ticket),
        Error::AlreadyRunning(_) => Error::AlreadyRunning(ticket),
        Error::UsageDecreased { before, now, .. } => Error::UsageDecreased {
            ticket,
            before,
            now,
        },
        e => e,
    }
}

/// An error of a level's fair scheduler about a flow, in the caller's tenant.
fn tenant_error(e: Error, tenant: TenantId) -> Error {
    match e {
        Error::InvalidWeight { value, .. } => Error::InvalidWeight { tenant, value },
        Error::CostRequired { class, .. } => Error::CostRequired { tenant, class },
        Error::TenantBusy(_) => Error::TenantBusy(tenant),
        Error::UnknownTenant(_) => Error::UnknownTenant(tenant),
        e => e,
    }
}

impl<T: Send + 'static> Scheduler<T> for LevelScheduler<T> {
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.observe(now)?;
        let i = self.resolve(request.level)?;
        let (tenant, class) = (request.tenant, request.class);
        let (level, st) = (&self.levels[i], &self.states[i]);
        if request.cost.is_none() && level.requires_cost {
            return Err(Error::CostRequired { tenant, class });
        }
        if let Some(limit) = level.queue_limit.filter(|&l| st.queued >= l) {
            return Err(Error::LevelFull {
                level: LevelId(i as u32),
                limit,
            });
        }
        let flow = Flow {
            tenant,
            distinguisher: request.distinguisher,
        };
        let (f, created) = match level.flows.get(tenant, flow.distinguisher) {
            Some(f) => (f, false),
            None => (self.new_flow(i, flow, now)?, true),
        };
        let inner = Request {
            tenant: TenantId(u64::from(f)),
            class,
            cost: request.cost,
            payload: request.payload,
            level: LevelId::CATCH_ALL,
            distinguisher: 0,
        };
        let (level, st) = (&mut self.levels[i], &mut self.states[i]);
        let t = match level.sched.enqueue(inner, now) {
            Ok(t) if (t.slot() as usize) < MAX_LEVEL_REQUESTS => t,
            Ok(t) => {
                let _ = level.sched.cancel(t, now);
                return Err(Error::LevelFull {
                    level: LevelId(i as u32),
                    limit: MAX_LEVEL_REQUESTS,
                });
            }
            Err(e) => {
                if created {
                    self.drop_flow(i, f);
                }
                return Err(tenant_error(e, tenant));
            }
        };
        st.queued += 1;
        st.demand_moved(1.0, now);
        self.queued += 1;
        Ok(outer_ticket(i, t))
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        let now = self.observe(now)?;
        check_worker(worker, self.server)?;
        if self.queued == 0 {
            return Ok(Decision::Empty);
        }
        let free = self.server.saturating_sub(self.running);
        if now >= self.prepare_at {
            let changed = self
                .sharing
                .prepare(&mut self.states, self.server, now, free);
            self.prepare_at = self.sharing.prepare_at();
            if changed {
                self.sync_workers()?;
            }
        }
        let (mut retry, mut held) = (f64::INFINITY, false);
        for k in 0..self.order.len() {
            let i = self.order[k];
            let st = &self.states[i];
            if st.queued == 0 {
                continue;
            }
            if !st.exempt && (free == 0 || st.running >= st.open) {
                held = true;
                continue;
            }
            if let Some(d) = self.start(i, worker, now, &mut retry)? {
                return Ok(Decision::Run(d));
            }
        }
        if held {
            retry = retry.min(self.sharing.retry_at());
        }
        Ok(Decision::RetryAt(retry))
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let (now, i, inner) = self.locate(ticket, now)?;
        let level = &mut self.levels[i];
        on_ticket(level.sched.progress(inner, used, now), ticket)
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let (now, i, inner) = self.locate(ticket, now)?;
        let (level, st) = (&mut self.levels[i], &mut self.states[i]);
        on_ticket(level.sched.complete(inner, used, now), ticket)?;
        if !st.exempt {
            level
                .seats
                .release(level.seat_of[inner.slot() as usize] as usize);
        }
        st.running -= 1;
        st.demand_moved(-1.0, now);
        self.running -= 1;
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        let (now, i, inner) = self.locate(ticket, now)?;
        let level = &mut self.levels[i];
        let r = on_ticket(level.sched.cancel(inner, now), ticket)?;
        let (flow, payload) = (level.flows.of_request(r.tenant), r.payload);
        let st = &mut self.states[i];
        st.queued -= 1;
        st.demand_moved(-1.0, now);
        self.queued -= 1;
        Ok(Request {
            tenant: flow.tenant,
            class: r.class,
            cost: r.cost,
            payload,
            level: LevelId(i as u32),
            distinguisher: flow.distinguisher,
        })
    }
}

impl<T: Send + 'static> Admin for LevelScheduler<T> {
    /// [`LevelScheduler::reconfigure`].
    fn set_levels(&mut self, levels: &LevelsConfig) -> Result<(), Error> {
        self.reconfigure(levels)
    }

    /// Change ServerCL: the nominal parts and limits are recomputed (and, with borrowing,
    /// the current limits adjusted at once). It must stay at least the number of non-exempt
    /// levels.
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        let server = config::check_server(workers, self.non_exempt)?;
        self.server = server;
        set_limits(&mut self.states, server);
        self.sharing.reset(&mut self.states, server, self.now);
        self.prepare_at = self.sharing.prepare_at();
        self.sync_workers()
    }

    /// The weight of every flow of the tenant, in every level (and of its flows to come).
    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_weight(tenant, weight)?;
        self.tenants.entry(tenant).or_default().weight = Some(weight);
        self.each_flow(tenant, |s, flow| s.set_weight(flow, weight, now))
    }

    /// The target of every flow of the tenant, in every level (and of its flows to come).
    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_target(target)?;
        self.tenants.entry(tenant).or_default().target = target;
        self.each_flow(tenant, |s, flow| s.set_target(flow, target, now))
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
            .filter(|(_, (_, st))| !st.retired)
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
