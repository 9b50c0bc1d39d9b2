//! Absolute CPU reservations (Das, Narasayya, Li, Syamala: *CPU Sharing Techniques for
//! Performance Isolation in Multi-tenant Relational Database-as-a-Service*, VLDB 2014).
//!
//! Each tenant may hold a reservation `ResCPU` and a limit `MaxCPU` — percentages of the whole
//! server's CPU (all cores) over a *metering interval* — plus an elastic burst `(f, b)`, a
//! surplus weight `w`, a price and a penalty function ([`Reservation`]). A
//! [`ReserveScheduler`] serves them behind the ordinary [`Scheduler`] seam: workers are cores,
//! one dispatch is one non-preemptive quantum, and the executor calls `complete` at the end of
//! the quantum and enqueues the task again if it has CPU demand left. The policies
//! ([`Policy`]):
//!
//! * **LDF** — largest deficit first (Alg. 1, and Alg. 2 with its extensions: surplus shared
//!   by weight (Eq. 5), elastic boosting (§4), revenue (Eq. 6) and the fairness/revenue blend
//!   α (Eq. 7), [`DeficitMode`]);
//! * **DRR** — the paper's deficit round robin (§3.3) with its schedule-once heuristic;
//! * **EDF** — earliest deadline first as in Atropos: deadline = end of the interval minus the
//!   tenant's deficit `ResCPU − CPU`;
//! * **no reservations** — best effort, first come first served.
//!
//! The [`Meter`] (§2.2, §3.5) is independent of the policy: it records per tenant and interval
//! `CPU`, `Delay`, `CPU_eff`, `ViolCPU` and whether the reservation (or the burst) was
//! violated; [`jain_index`] is §2.5's fairness measure over `ViolCPU`.
//!
//! The scheduler never reads a clock: time comes in as `now` (seconds, or any unit as long as
//! intervals are in the same one). Costs are core-time in the same unit.
//!
//! ```
//! use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};
//! use fairlane_core::{Decision, Request, Scheduler, TenantId};
//!
//! // Two cores, 1 s metering intervals, LDF. Tenant 1 reserves 25 % of the server and may use
//! // up to 50 %; tenant 2 has no reservation (best effort).
//! let mut s = ReserveConfig::new(Policy::ldf()).cores(2).interval(1.0).build::<u32>().unwrap();
//! s.set_reservation(TenantId(1), Reservation::new(25.0, 50.0), 0.0).unwrap();
//! for i in 0..4 {
//!     s.enqueue(Request::new(1u64, 0u32, i), 0.0).unwrap();
//!     s.enqueue(Request::new(2u64, 0u32, i), 0.0).unwrap();
//! }
//! // At t = 0 tenant 1 has the largest deficit (1 − 0/25 = 1).
//! let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
//! assert_eq!(d.request.tenant, TenantId(1));
//! s.complete(d.ticket, 0.004, 0.004).unwrap(); // a 4 ms quantum
//! ```

/// `docs/reservations.md`'s example, compiled and run as a doctest.
#[doc = include_str!("../../../../docs/reservations.md")]
#[cfg(doctest)]
pub struct ReservationsDoctest;

mod account;
mod baselines;
#[cfg(test)]
mod fast_tests;
#[cfg(test)]
pub(crate) use crate::util::proptest_cases;
mod ldf;
mod ldf_fast;
mod meter;
/// The eager meter (delay accrued per waiting tenant at every event): the
/// reference of the lazy one's tests.
#[cfg(test)]
#[allow(dead_code)]
mod meter_scan;
#[cfg(test)]
mod meter_tests;
mod penalty;

use std::collections::{HashMap, VecDeque};

pub use account::{MeterReading, MeterRecord};
pub use meter::{jain_index, Meter};
pub use penalty::Penalty;

use crate::scheduler::{Admin, Inspect, Scheduler, TenantView};
use crate::types::{
    check_cost, check_weight, Decision, Dispatch, Error, Request, TenantId, Ticket,
};
use account::{check_interval, Usage};

/// Elastic reservation parameters (§4): while the tenant's utilization of the whole interval
/// stays below `f × ResCPU`, its reservation is boosted to `b` for computing its deficit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Elastic {
    /// `f ∈ [0, 1]`: 0 disables boosting, 1 boosts until the whole reservation is used.
    pub f: f64,
    /// `b` (%), the boosted reservation and the burst size: `ResCPU ≤ b ≤ MaxCPU`.
    pub b: f64,
}

/// A tenant's terms. Percentages are of the whole server (all cores) over the metering
/// interval.
#[derive(Clone, Debug, PartialEq)]
pub struct Reservation {
    /// `ResCPU` (%): in (0, 100], or 0 for a tenant without a reservation (best effort).
    pub res_cpu: f64,
    /// `MaxCPU` (%): in (0, 100], at least `res_cpu`.
    pub max_cpu: f64,
    /// `w`, the surplus weight of Eq. 5, in [`MIN_WEIGHT`](crate::MIN_WEIGHT),
    /// [`MAX_WEIGHT`](crate::MAX_WEIGHT)]. `None`: `ResCPU` (LDF's default sharing in
    /// proportion to reservations), or 1 for a tenant without a reservation.
    pub weight: Option<f64>,
    /// Elastic boosting `(f, b)`, §4.
    pub elastic: Option<Elastic>,
    /// `price_i` (≥ 0) paid per metering interval, §2.4.
    pub price: f64,
    /// `PF_i`, the penalty function of `ViolCPU`.
    pub penalty: Penalty,
    /// The tenant's metering interval; `None`: the scheduler's.
    pub interval: Option<f64>,
}

impl Reservation {
    /// `ResCPU = res_cpu`, `MaxCPU = max_cpu` (both %), nothing else.
    pub fn new(res_cpu: f64, max_cpu: f64) -> Self {
        Reservation {
            res_cpu,
            max_cpu,
            weight: None,
            elastic: None,
            price: 0.0,
            penalty: Penalty::None,
            interval: None,
        }
    }

    /// No reservation, limited to `max_cpu` %: the terms of a tenant the scheduler has not
    /// been told about are `best_effort(100.0)`.
    pub fn best_effort(max_cpu: f64) -> Self {
        Reservation::new(0.0, max_cpu)
    }

    /// The same terms with surplus weight `w` (Eq. 5).
    pub fn weight(mut self, w: f64) -> Self {
        self.weight = Some(w);
        self
    }

    /// The same terms as an elastic reservation with burst `b` % while below `f × ResCPU`.
    pub fn elastic(mut self, f: f64, b: f64) -> Self {
        self.elastic = Some(Elastic { f, b });
        self
    }

    /// The same terms with a price and a penalty function.
    pub fn priced(mut self, price: f64, penalty: Penalty) -> Self {
        self.price = price;
        self.penalty = penalty;
        self
    }

    /// The same terms metered over `interval` instead of the scheduler's interval.
    pub fn interval(mut self, interval: f64) -> Self {
        self.interval = Some(interval);
        self
    }

    /// The surplus weight in effect.
    pub fn effective_weight(&self) -> f64 {
        self.weight.unwrap_or(if self.res_cpu > 0.0 {
            self.res_cpu
        } else {
            1.0
        })
    }

    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field: &'static str, reason: String| Err(Error::InvalidConfig { field, reason });
        if !(self.res_cpu.is_finite() && (0.0..=100.0).contains(&self.res_cpu)) {
            return bad(
                "res_cpu",
                format!(
                    "ResCPU must be in (0, 100] % (or 0 for none), got {}",
                    self.res_cpu
                ),
            );
        }
        if !(self.max_cpu.is_finite() && self.max_cpu > 0.0 && self.max_cpu <= 100.0) {
            return bad(
                "max_cpu",
                format!("MaxCPU must be in (0, 100] %, got {}", self.max_cpu),
            );
        }
        if self.max_cpu < self.res_cpu {
            return bad(
                "max_cpu",
                format!(
                    "MaxCPU must be ≥ ResCPU = {}, got {}",
                    self.res_cpu, self.max_cpu
                ),
            );
        }
        if let Some(w) = self.weight {
            if !(crate::MIN_WEIGHT..=crate::MAX_WEIGHT).contains(&w) {
                return bad(
                    "weight",
                    format!(
                        "must be in [{:e}, {:e}] (MIN_WEIGHT, MAX_WEIGHT), got {w}",
                        crate::MIN_WEIGHT,
                        crate::MAX_WEIGHT
                    ),
                );
            }
        }
        if let Some(e) = self.elastic {
            if !(0.0..=1.0).contains(&e.f) {
                return bad("elastic.f", format!("must be in [0, 1], got {}", e.f));
            }
            if !(e.b.is_finite() && e.b > 0.0 && e.b >= self.res_cpu && e.b <= self.max_cpu) {
                return bad(
                    "elastic.b",
                    format!(
                        "the burst must be in [ResCPU, MaxCPU] = [{}, {}] and > 0, got {}",
                        self.res_cpu, self.max_cpu, e.b
                    ),
                );
            }
        }
        if !(self.price.is_finite() && self.price >= 0.0) {
            return bad(
                "price",
                format!("must be finite and ≥ 0, got {}", self.price),
            );
        }
        self.penalty.validate()?;
        if let Some(i) = self.interval {
            check_interval(i)?;
        }
        Ok(())
    }
}

/// Which deficit formula LDF (and DRR) rank tenants by while below their reservation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum DeficitMode {
    /// `d = 1 − CPU/ResCPU` (Eq. 4): utilization fairness.
    #[default]
    Fractional,
    /// `d = PF(ViolCPU) × price` (Eq. 6): maximize revenue.
    Revenue,
    /// `d = α(1 − CPU/ResCPU) + (1 − α) PF(ViolCPU) × price / max price` (Eq. 7).
    Blend {
        /// α ∈ [0, 1]: 1 is utilization fair, 0 revenue only.
        alpha: f64,
    },
}

/// Options of the deficit computation (Alg. 2's `GetSchedulerOption`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LdfOptions {
    /// Boost elastic reservations (§4). Only tenants with [`Elastic`] terms are affected.
    pub boost: bool,
    /// The deficit formula below the reservation.
    pub deficit: DeficitMode,
}

impl Default for LdfOptions {
    fn default() -> Self {
        LdfOptions {
            boost: true,
            deficit: DeficitMode::Fractional,
        }
    }
}

/// A reservation-aware policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    /// Largest deficit first (Alg. 1 / Alg. 2).
    Ldf(LdfOptions),
    /// Deficit round robin (§3.3) over the same deficit measure.
    Drr(LdfOptions),
    /// Earliest deadline first, Atropos-style (§6.1): deadline = interval end − deficit.
    Edf,
    /// No reservations: first come, first served; only the utilization cap applies.
    BestEffort,
}

impl Policy {
    /// LDF with the default options (boosting on, fractional deficit).
    pub fn ldf() -> Self {
        Policy::Ldf(LdfOptions::default())
    }

    /// DRR with the default options.
    pub fn drr() -> Self {
        Policy::Drr(LdfOptions::default())
    }

    /// The short name: `ldf`, `drr-res`, `edf-res`, `no-res`.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Ldf(_) => "ldf",
            Policy::Drr(_) => "drr-res",
            Policy::Edf => "edf-res",
            Policy::BestEffort => "no-res",
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if let Policy::Ldf(o) | Policy::Drr(o) = self {
            if let DeficitMode::Blend { alpha } = o.deficit {
                if !(0.0..=1.0).contains(&alpha) {
                    return Err(Error::InvalidConfig {
                        field: "alpha",
                        reason: format!("the fairness index α must be in [0, 1], got {alpha}"),
                    });
                }
            }
        }
        Ok(())
    }
}

/// How to build a [`ReserveScheduler`].
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveConfig {
    /// Cores (workers), ≥ 1.
    pub cores: usize,
    /// The default metering interval (> 0); also the window of the utilization cap.
    pub interval: f64,
    /// The server-wide utilization cap (%), in (0, 100]: the paper keeps 5 % headroom (95).
    pub utilization_cap: f64,
    /// The policy.
    pub policy: Policy,
}

impl ReserveConfig {
    /// One core, 1-second intervals, no cap (100 %).
    pub fn new(policy: Policy) -> Self {
        ReserveConfig {
            cores: 1,
            interval: 1.0,
            utilization_cap: 100.0,
            policy,
        }
    }

    setters! {
        /// Set the number of cores.
        cores(cores: usize) => cores = cores;
        /// Set the default metering interval.
        interval(interval: f64) => interval = interval;
        /// Set the server-wide utilization cap (%).
        utilization_cap(cap: f64) => utilization_cap = cap;
    }

    /// Check every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), Error> {
        crate::config::check_workers(self.cores).map_err(|_| Error::InvalidConfig {
            field: "cores",
            reason: format!("must be in 1..={}, got {}", crate::MAX_WORKERS, self.cores),
        })?;
        check_interval(self.interval)?;
        let c = self.utilization_cap;
        if !(c.is_finite() && c > 0.0 && c <= 100.0) {
            return Err(Error::InvalidConfig {
                field: "utilization_cap",
                reason: format!("must be in (0, 100] %, got {c}"),
            });
        }
        self.policy.validate()
    }

    /// Build the scheduler.
    pub fn build<T>(&self) -> Result<ReserveScheduler<T>, Error> {
        self.validate()?;
        Ok(ReserveScheduler {
            cores: self.cores,
            interval: self.interval,
            cap: self.utilization_cap,
            policy: self.policy,
            tenants: Vec::new(),
            index: HashMap::new(),
            free_tenants: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            meter: Meter::new(self.cores),
            server: Usage::new(self.interval, 0.0),
            active: Vec::new(),
            pos: Vec::new(),
            fifo: VecDeque::new(),
            ring: baselines::Ring::default(),
            queued: 0,
            running: 0,
            now: 0.0,
            max_price: 0.0,
            examined: 0,
            ldf_index: ldf_fast::LdfIndex::default(),
            scan_only: false,
        })
    }
}

#[derive(Clone, Debug)]
struct Tenant {
    id: TenantId,
    terms: Reservation,
    /// Slots of its ready tasks, oldest first.
    queue: VecDeque<u32>,
    running: usize,
    live: bool,
    /// The deficit when LDF (or DRR) last evaluated this tenant (for [`TenantView::tag`]);
    /// the fast LDF does not evaluate every active tenant at every dispatch.
    deficit: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Free,
    Queued,
    Running,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    state: SlotState,
    tenant: usize,
    request: Option<Request<T>>,
    start: f64,
    reported: f64,
}

/// What a policy chose for a free core.
enum Pick {
    Tenant(usize),
    /// Nothing may run now; ask again at this time.
    Retry(f64),
}

const NOT_ACTIVE: usize = usize::MAX;

/// The largest `|now|` a [`ReserveScheduler`] accepts; a larger one is
/// [`Error::InvalidTime`]. Far beyond any clock (1e100 nanoseconds is 10⁸³ years), small
/// enough that the meter's sums of times stay finite.
pub const MAX_TIME: f64 = 1e100;

/// A reservation-aware CPU scheduler (LDF, DRR, EDF or best effort) behind the [`Scheduler`]
/// seam, with its [`Meter`]. Build it with [`ReserveConfig::build`].
///
/// Cost of a dispatch: EDF recomputes the deadline of every *active* tenant (one with a ready
/// task) at each dispatch, O(active tenants). LDF makes exactly the decisions of §3.4's full
/// scan but keeps the tenants that run nothing in a B-tree by a time-invariant key and
/// evaluates only those that can win, plus the running ones (at most one per core) and those
/// the key cannot rank (no reservation, a surplus weight other than the reservation, another
/// metering interval); the revenue and blended deficits (Eq. 6, 7) use the scan
/// (`ldf_fast.rs` has the proof; see `docs/reservations.md` and `docs/benchmarks.md`). DRR
/// inspects tenants round robin, usually one or two per dispatch. The meter's delay
/// accounting is O(log tenants + min(ready tasks, cores)) per event.
#[derive(Debug)]
pub struct ReserveScheduler<T> {
    cores: usize,
    interval: f64,
    cap: f64,
    policy: Policy,
    tenants: Vec<Tenant>,
    index: HashMap<TenantId, usize>,
    free_tenants: Vec<usize>,
    slots: Vec<Slot<T>>,
    free_slots: Vec<u32>,
    meter: Meter,
    /// Server-wide usage in the current default interval (for the utilization cap).
    server: Usage,
    /// Tenants with ready tasks, and each tenant's position there.
    active: Vec<usize>,
    pos: Vec<usize>,
    /// Best effort only: arrival order (cancelled tickets stay as tombstones).
    fifo: VecDeque<Ticket>,
    /// DRR only: the active list.
    ring: baselines::Ring,
    queued: usize,
    running: usize,
    now: f64,
    max_price: f64,
    examined: u64,
    /// LDF only: the sorted and scanned sets of the fast dispatch.
    ldf_index: ldf_fast::LdfIndex,
    /// Dispatch LDF by the full scan (the reference; see [`Self::use_full_scan`]).
    scan_only: bool,
}

impl<T> ReserveScheduler<T> {
    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Set a tenant's terms at `now` (creating the tenant if it is new). Takes effect at the
    /// next dispatch; a changed interval length from the tenant's next interval.
    pub fn set_reservation(
        &mut self,
        tenant: TenantId,
        terms: Reservation,
        now: f64,
    ) -> Result<(), Error> {
        let now = self.observe(now)?;
        terms.validate()?;
        let t = self.tenant_index(tenant, now)?;
        let interval = terms.interval.unwrap_or(self.interval);
        self.meter
            .set_terms(t, terms.res_cpu, terms.elastic.map(|e| e.b), interval)?;
        self.tenants[t].terms = terms;
        self.refresh_max_price();
        self.ldf_index.mark(t);
        Ok(())
    }

    /// A tenant's terms, if the scheduler knows the tenant.
    pub fn reservation(&self, tenant: TenantId) -> Option<&Reservation> {
        self.index.get(&tenant).map(|&t| &self.tenants[t].terms)
    }

    /// The meter's reading of a tenant so far in its current interval.
    pub fn meter_reading(&mut self, tenant: TenantId, now: f64) -> Option<MeterReading> {
        let now = self.observe(now).ok()?;
        let t = *self.index.get(&tenant)?;
        self.meter.reading(t, now)
    }

    /// Close every metering interval that ended by `now`.
    pub fn close_intervals(&mut self, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        self.meter.close_through(now);
        Ok(())
    }

    /// The meter's closed intervals so far, emptied (see [`MeterRecord`]), ordered by interval
    /// end and then tenant. Intervals in which a tenant had no work at all are not reported:
    /// they cannot be violations. The meter closes an interval lazily, when the tenant is next
    /// touched; call [`Self::close_intervals`] first to collect every interval ended by then.
    pub fn take_records(&mut self) -> Vec<MeterRecord> {
        self.meter.take_records()
    }

    /// Dispatch LDF by evaluating every active tenant's deficit, instead
    /// of the sorted walk: the same decisions, O(active tenants) per dispatch. For benchmarks
    /// and tests that compare the two; no other effect.
    #[doc(hidden)]
    pub fn use_full_scan(&mut self, on: bool) {
        self.scan_only = on;
    }

    /// How many tenant deficits (or deadlines) the policy has evaluated so far: the work of
    /// `dequeue`, for cost measurements (§6.6).
    pub fn examined(&self) -> u64 {
        self.examined
    }

    fn observe(&mut self, now: f64) -> Result<f64, Error> {
        // The meter multiplies times by task counts and sums them: beyond ±MAX_TIME that
        // could overflow, so such times are refused.
        if !(now.is_finite() && now.abs() <= MAX_TIME) {
            return Err(Error::InvalidTime(now));
        }
        if now > self.now {
            self.now = now;
        }
        Ok(self.now)
    }

    fn refresh_max_price(&mut self) {
        self.max_price = self
            .tenants
            .iter()
            .filter(|t| t.live)
            .map(|t| t.terms.price)
            .fold(0.0, f64::max);
    }

    fn tenant_index(&mut self, id: TenantId, now: f64) -> Result<usize, Error> {
        if let Some(&t) = self.index.get(&id) {
            return Ok(t);
        }
        let fresh = Tenant {
            id,
            terms: Reservation::best_effort(100.0),
            queue: VecDeque::new(),
            running: 0,
            live: true,
            deficit: 0.0,
        };
        let t = if let Some(t) = self.free_tenants.pop() {
            self.tenants[t] = fresh;
            self.meter.rebind(t, id, now);
            self.meter.set_terms(t, 0.0, None, self.interval)?;
            t
        } else {
            self.tenants.push(fresh);
            self.pos.push(NOT_ACTIVE);
            self.ring.grow();
            self.meter.add_tenant(id, 0.0, None, self.interval, now)?
        };
        self.index.insert(id, t);
        Ok(t)
    }

    fn activate(&mut self, t: usize) {
        self.ldf_index.mark(t);
        self.pos[t] = self.active.len();
        self.active.push(t);
        if matches!(self.policy, Policy::Drr(_)) {
            self.ring.insert(t);
        }
    }

    fn deactivate(&mut self, t: usize) {
        self.ldf_index.mark(t);
        let p = self.pos[t];
        self.active.swap_remove(p);
        if let Some(&moved) = self.active.get(p) {
            self.pos[moved] = p;
        }
        self.pos[t] = NOT_ACTIVE;
        if matches!(self.policy, Policy::Drr(_)) {
            self.ring.remove(t);
        }
    }

    /// Start the tenant's oldest ready task.
    fn dispatch(&mut self, t: usize, now: f64) -> Option<Dispatch<T>> {
        let slot = self.tenants[t].queue.pop_front()?;
        if self.tenants[t].queue.is_empty() {
            self.deactivate(t);
        }
        self.tenants[t].running += 1;
        self.ldf_index.mark(t);
        self.queued -= 1;
        self.running += 1;
        self.meter.started(t, now);
        self.server.started(now);
        let s = &mut self.slots[slot as usize];
        s.state = SlotState::Running;
        s.start = now;
        s.reported = 0.0;
        let request = s.request.take()?;
        let charged = request.cost.unwrap_or(0.0);
        Some(Dispatch {
            ticket: Ticket::new(slot, s.generation),
            request,
            charged,
        })
    }

    fn slot_of(&self, ticket: Ticket) -> Result<usize, Error> {
        let i = ticket.slot() as usize;
        match self.slots.get(i) {
            Some(s) if s.generation == ticket.generation() && s.state != SlotState::Free => Ok(i),
            _ => Err(Error::UnknownTicket(ticket)),
        }
    }

    fn free_slot(&mut self, i: usize) {
        let s = &mut self.slots[i];
        s.state = SlotState::Free;
        s.generation = s.generation.wrapping_add(1);
        s.request = None;
        self.free_slots.push(i as u32);
    }

    fn roll_server(&mut self, now: f64) {
        self.server.skip_idle(now);
        let mut rolls = 0;
        while now >= self.server.end() {
            if !self.server.may_roll(rolls) {
                self.server.jump(now); // see MAX_ROLLS
                break;
            }
            self.server.roll();
            rolls += 1;
        }
    }
}

impl<T: Send> Scheduler<T> for ReserveScheduler<T> {
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.observe(now)?;
        if let Some(c) = request.cost {
            check_cost("request cost", c)?;
        }
        let t = self.tenant_index(request.tenant, now)?;
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                if self.slots.len() >= u32::MAX as usize {
                    return Err(Error::InvalidConfig {
                        field: "requests",
                        reason: "too many requests outstanding".into(),
                    });
                }
                self.slots.push(Slot {
                    generation: 0,
                    state: SlotState::Free,
                    tenant: 0,
                    request: None,
                    start: 0.0,
                    reported: 0.0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[slot as usize];
        s.state = SlotState::Queued;
        s.tenant = t;
        s.request = Some(request);
        let ticket = Ticket::new(slot, s.generation);
        self.tenants[t].queue.push_back(slot);
        if self.tenants[t].queue.len() == 1 {
            self.activate(t);
        }
        if matches!(self.policy, Policy::BestEffort) {
            self.fifo.push_back(ticket);
        }
        self.queued += 1;
        self.meter.enqueued(t, now);
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        if worker >= self.cores {
            return Err(Error::InvalidWorker {
                worker,
                workers: self.cores,
            });
        }
        let now = self.observe(now)?;
        if self.queued == 0 {
            return Ok(Decision::Empty);
        }
        self.roll_server(now);
        let cores = self.cores as f64;
        if self.cap < 100.0 {
            if let Some(at) = self.server.below_at(self.cap, now, cores) {
                return Ok(Decision::RetryAt(at));
            }
        }
        let pick = match self.policy {
            Policy::Ldf(o) if self.scan_only => self.select_ldf_scan(o, now),
            Policy::Ldf(o) => self.select_ldf(o, now),
            Policy::Drr(o) => self.select_drr(o, now),
            Policy::Edf => self.select_edf(now),
            Policy::BestEffort => self.select_fifo(),
        };
        match pick {
            Pick::Tenant(t) => Ok(self.dispatch(t, now).map_or(Decision::Empty, Decision::Run)),
            Pick::Retry(at) => Ok(Decision::RetryAt(at)),
        }
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.observe(now)?;
        check_cost("used", used)?;
        let i = self.slot_of(ticket)?;
        let s = &mut self.slots[i];
        if s.state != SlotState::Running {
            return Err(Error::NotRunning(ticket));
        }
        if used < s.reported {
            return Err(Error::UsageDecreased {
                ticket,
                before: s.reported,
                now: used,
            });
        }
        s.reported = used;
        Ok(())
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_cost("used", used)?;
        let i = self.slot_of(ticket)?;
        let (state, start, reported, t) = {
            let s = &self.slots[i];
            (s.state, s.start, s.reported, s.tenant)
        };
        if state != SlotState::Running {
            return Err(Error::NotRunning(ticket));
        }
        if used < reported {
            return Err(Error::UsageDecreased {
                ticket,
                before: reported,
                now: used,
            });
        }
        self.meter.finished(t, start, used, now);
        self.roll_server(now);
        self.server.finished(start, used, now);
        self.tenants[t].running -= 1;
        self.ldf_index.mark(t);
        self.running -= 1;
        self.free_slot(i);
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        let now = self.observe(now)?;
        let i = self.slot_of(ticket)?;
        if self.slots[i].state == SlotState::Running {
            return Err(Error::AlreadyRunning(ticket));
        }
        let t = self.slots[i].tenant;
        let q = &mut self.tenants[t].queue;
        if let Some(p) = q.iter().position(|&s| s as usize == i) {
            q.remove(p);
        }
        if self.tenants[t].queue.is_empty() {
            self.deactivate(t);
        }
        self.queued -= 1;
        self.ldf_index.mark(t);
        self.meter.cancelled(t, now);
        let request = self.slots[i].request.take();
        self.free_slot(i);
        request.ok_or(Error::UnknownTicket(ticket))
    }
}

impl<T> Admin for ReserveScheduler<T> {
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        self.cores = crate::config::check_workers(workers)?;
        self.meter.set_cores(self.cores);
        self.ldf_index.invalidate();
        Ok(())
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        let now = self.observe(now)?;
        check_weight(tenant, weight)?;
        let t = self.tenant_index(tenant, now)?;
        self.tenants[t].terms.weight = Some(weight);
        self.ldf_index.mark(t);
        Ok(())
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        let &t = self
            .index
            .get(&tenant)
            .ok_or(Error::UnknownTenant(tenant))?;
        if !self.tenants[t].queue.is_empty() || self.tenants[t].running > 0 {
            return Err(Error::TenantBusy(tenant));
        }
        self.index.remove(&tenant);
        self.tenants[t].live = false;
        self.free_tenants.push(t);
        self.refresh_max_price();
        Ok(())
    }
}

impl<T> Inspect for ReserveScheduler<T> {
    fn name(&self) -> &'static str {
        self.policy.name()
    }

    fn workers(&self) -> usize {
        self.cores
    }

    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        let &t = self.index.get(&tenant)?;
        let x = &self.tenants[t];
        Some(TenantView {
            id: x.id,
            weight: x.terms.effective_weight(),
            queued: x.queue.len(),
            running: x.running,
            active: !x.queue.is_empty(),
            tag: x.deficit,
        })
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn running(&self) -> usize {
        self.running
    }

    fn virtual_time(&self) -> Option<f64> {
        None
    }
}
