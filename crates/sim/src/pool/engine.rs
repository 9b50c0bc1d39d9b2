//! The request engine: tenants' requests through a core scheduler (the seam: `enqueue` →
//! `dequeue(slot)` → `progress`* → `complete`) into a [`Service`] — a pool of `n` workers of
//! rate `r` ([`WorkerPool`]) or the black box ([`BlackBoxService`]). It is one
//! [`crate::events::Model`] on the shared event queue and run loop.
//!
//! A request's true cost is what the service consumes (`cost / r` seconds on a worker).
//! Schedulers with known costs get the cost with the request; the others estimate it and
//! learn from refresh charging (`progress` every `refresh` seconds for running requests, as
//! far as the service lets its progress be seen) and retroactive charging (`complete` with
//! the true cost). Every tenant draws from its own random streams (seeded by its name), so the
//! same scenario and seed give the same run under every scheduler and every time.
//!
//! Order-free by construction (docs/simulator.md "Same-instant events"): the run does not
//! depend on the order tenants are listed in the spec. The engine works on the tenants in
//! their *canonical order* — sorted by name — which is the order their first events are
//! scheduled in, the ids the scheduler sees ([`TenantId`] = rank by name, so a scheduler's
//! ties go to the tenant whose name sorts first) and the GPS reference's flow indices. Events
//! at one instant run in the order they were scheduled, and idle workers pick only once every
//! event of the instant is handled ([`Model::settle`]): all arrivals and completions at one
//! instant are in the scheduler before any worker chooses, lowest worker index first.

use std::num::NonZeroU32;
use std::time::Instant;

use fairlane_core::depth::DepthController;
use fairlane_core::{
    ClassId, Decision, EstimatorKind, GpsClock, LevelId, Request, Scheduler, TenantId, Ticket,
};
use serde::Serialize;

use super::blackbox::{BlackBoxResult, BlackBoxService, Measure};
use super::levels::{LevelSampler, LevelSeries};
use super::scenario::Scenario;
use super::spec::Depth;
use super::workload::{Arrival, SimpleCost, TenantDef};
use crate::error::{SimError, SimErrorKind};
use crate::events::{drive, EventQueue, Model, MAX_OUTSTANDING};
use crate::metrics::{gini, Latency, Moments, Occupancy, TenantResult, TenantSeries, Thinned};
use crate::rng::{purpose, Rng};
use crate::sched::SchedulerChoice;
use crate::service::{Outcome, Service, Work, WorkerPool};

fn core(e: fairlane_core::Error) -> SimError {
    SimError::scheduler(e)
}

/// Everything one run of one scheduler produced.
#[derive(Clone, Debug, Serialize)]
pub struct RunResult {
    /// Scheduler name.
    pub scheduler: String,
    /// Sweep or suite label.
    pub label: String,
    /// Events processed (arrivals, completions, refresh, samples, …).
    pub events: u64,
    /// Wall-clock seconds of the run (the only field that is not deterministic).
    pub wall_seconds: f64,
    /// Simulated seconds.
    pub sim_seconds: f64,
    /// Work done / (capacity × duration).
    pub utilization: f64,
    /// Mean Gini index over the sampling intervals.
    pub gini_mean: f64,
    /// Per tenant, in spec order.
    pub tenants: Vec<TenantResult>,
    /// `(t, Gini)` per interval (thinned).
    pub gini: Vec<(f64, f64)>,
    /// Tracked tenants' series.
    pub series: Vec<TenantSeries>,
    /// Thread occupancy (black box: issue-slot occupancy).
    pub occupancy: Occupancy,
    /// The black-box server's measurements (response times, depth), when it ran one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blackbox: Option<BlackBoxResult>,
    /// Each priority level's seats, limit and queue over time (`[[priority_level]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<LevelSeries>,
}

/// The payload of a request in the engine's scheduler (what
/// [`run_with_scheduler`]'s scheduler holds). Small on purpose: the scheduler keeps one per
/// queued request, and a run with thousands queued reads them all again and again, so every
/// byte here is cache the scheduler does not get (24 bytes, and no tag in an `Option`).
#[derive(Clone, Copy, Debug)]
pub struct Job {
    arrived: f64,
    /// The cost: what the service consumes.
    cost: f64,
    /// The tenant's spec index + 1: never zero, so `Option<Job>` needs no tag.
    tenant: NonZeroU32,
    /// What the service drew for the request at arrival ([`Service::arrival`]; the black
    /// box's service time and component, so a request's service is the same under every
    /// scheduler): index + 1 into the engine's table of draws, 0 for none.
    draw: u32,
}

impl Job {
    /// The tenant's spec index.
    #[inline]
    fn tenant(&self) -> usize {
        self.tenant.get() as usize - 1
    }
}

#[derive(Clone, Copy, Debug)]
struct Running {
    ticket: Ticket,
    job: Job,
    start: f64,
}

const ARRIVAL: u8 = 0; // next open arrival of tenant idx
const ISSUE: u8 = 1; // a closed-loop client of tenant idx issues; a backlogged tenant starts
const SERVICE: u8 = 2; // the service's event idx (worker pool: worker idx finishes)
const REFRESH: u8 = 3;
const SAMPLE: u8 = 4;
const OCCUPANCY: u8 = 5;
const RETRY: u8 = 6;
const DEPTH: u8 = 7; // the depth controller's period ends

/// An engine event: its kind and index (tenant, service event).
#[derive(Clone, Copy, Debug)]
struct Ev {
    kind: u8,
    idx: u32,
}

/// The idle slots, one bit each, so the lowest is found with a trailing-zeros count.
#[derive(Debug)]
struct IdleSlots {
    words: Vec<u64>,
    count: usize,
}

impl IdleSlots {
    /// Slots `0..n`, all idle.
    fn all(n: usize) -> Self {
        let mut words = vec![u64::MAX; n.div_ceil(64)];
        if !n.is_multiple_of(64) {
            words[n / 64] = (1 << (n % 64)) - 1;
        }
        IdleSlots { words, count: n }
    }

    /// The lowest idle slot.
    #[inline]
    fn first(&self) -> Option<u32> {
        if self.count == 0 {
            return None;
        }
        let (i, w) = self.words.iter().enumerate().find(|(_, &w)| w != 0)?;
        Some(i as u32 * 64 + w.trailing_zeros())
    }

    #[inline]
    fn remove(&mut self, s: u32) {
        self.words[s as usize / 64] &= !(1 << (s % 64));
        self.count -= 1;
    }

    #[inline]
    fn insert(&mut self, s: u32) {
        self.words[s as usize / 64] |= 1 << (s % 64);
        self.count += 1;
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// What a tenant's arrival process asks of the engine when one of its requests completes
/// ([`Hot::mode`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Backlogged: the request is replaced at once (until `stop`).
    Backlogged,
    /// Closed loop: the client thinks, then issues the next.
    Closed,
    /// Open or trace arrivals: nothing.
    Open,
}

/// The part of a tenant's state that every completion and every request it issues touch,
/// in two adjacent cache lines of its own. A run keeps thousands of requests queued in the
/// scheduler, whose slots evict the engine's tables from the L1 and L2 caches between two
/// completions of one tenant; spread over the spec's `TenantDef` (its arrival, `stop`, its
/// class list on the heap), the cost stream and half a dozen per-tenant vectors, the
/// engine's part of a completion was a dozen cache misses, now it is the two lines here
/// (fetched together by the adjacent-line prefetcher) and the latency count.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
struct Hot {
    // The first line: what drawing the next request reads.
    /// Costs and classes ([`purpose::COSTS`]).
    costs: Rng,
    /// The tenant's one class and its table-free cost law ([`TenantDef::simple_draw`]), or
    /// `None`: draw through the spec's [`TenantDef::draw`].
    law: Option<SimpleCost>,
    class: u32,
    /// The tenant's rank in canonical order: its id in the scheduler, its GPS flow.
    rank: u32,
    // The second line: what a completion updates.
    /// Work completed, warm-up included (for the lag and utilization).
    done: f64,
    /// Work completed after the warm-up.
    work: f64,
    completed: u64,
    arrived: u64,
    /// No arrivals after this (the spec's `stop`).
    stop: f64,
    /// Closed loop: the mean think time.
    think: f64,
    mode: Mode,
    /// The tenant's flow in the GPS reference is continuously backlogged
    /// ([`GpsClock::backlog`]).
    gps_persistent: bool,
}

// Two cache lines, the first of them all the next draw reads.
const _: () = assert!(std::mem::size_of::<Hot>() == 128);

struct TenantState {
    arrivals: Rng,
    /// ON/OFF: the current or next ON period.
    on_from: f64,
    on_until: f64,
    /// Trace: next row.
    cursor: usize,
    /// Black box: service times and routing.
    service: Rng,
}

struct Sim<'a, S: Service + Measure> {
    sc: &'a Scenario,
    sched: Box<dyn Scheduler<Job> + Send>,
    known_costs: bool,
    queue: EventQueue<Ev>,
    svc: S,
    workers: Vec<Option<Running>>,
    /// What the service drew for queued requests at their arrival ([`Job::draw`]), and
    /// the free entries.
    draws: Vec<Work>,
    free_draws: Vec<u32>,
    idle: IdleSlots,
    retry_at: f64,
    tenants: Vec<TenantState>,
    /// Per spec index: what completions and issues touch.
    hot: Vec<Hot>,
    /// Spec indices in canonical order (by name): the order of the tenants' ids in the
    /// scheduler and of their flows in the GPS reference ([`Hot::rank`]).
    order: Vec<usize>,
    gps: GpsClock,
    // Metrics.
    partial: Vec<f64>,
    prev_actual: Vec<f64>,
    prev_gps: Vec<f64>,
    latency: Vec<Latency>,
    lag: Vec<Moments>,
    gini: Thinned<f64>,
    gini_moments: Moments,
    scratch: Vec<f64>,
    series: Vec<(Thinned<f64>, Thinned<f64>)>,
    track_slot: Vec<u32>,
    occupancy: Vec<Thinned<Option<f32>>>,
    depth_ctl: Option<DepthController>,
    /// An occupancy sample is due at the end of this instant (after the picks).
    occupancy_due: bool,
    /// Per tenant (spec index): its priority level; empty without levels.
    level_of: Vec<LevelId>,
    level_series: LevelSampler,
}

/// Build the scheduler `choice` names for scenario `sc`'s server (through
/// [`crate::sched::build`], where every kind builds its schedulers). Returns it and whether it gets the true
/// costs with the requests (the oracle estimator).
pub fn build_scheduler(
    sc: &Scenario,
    choice: &SchedulerChoice,
) -> Result<(Box<dyn Scheduler<Job> + Send>, bool), SimError> {
    let sched = match &sc.levels {
        Some(levels) => crate::sched::build_levels::<Job>(&choice.config, levels, sc.workers),
        None => crate::sched::build::<Job>(&choice.config, sc.workers),
    }
    .map_err(core)?;
    Ok((sched, choice.config.estimator == EstimatorKind::Oracle))
}

/// Run one scheduler on a scenario. `progress` is called now and then with the fraction of
/// simulated time done.
pub fn run(
    sc: &Scenario,
    choice: &SchedulerChoice,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, SimError> {
    let (sched, known_costs) = build_scheduler(sc, choice)?;
    run_with_scheduler(sc, sched, known_costs, progress)
}

/// Run a caller-built scheduler on a scenario's server and tenants. `known_costs`: the
/// scheduler is told each request's cost at arrival. The result's `scheduler` name is empty.
pub fn run_with_scheduler(
    sc: &Scenario,
    sched: Box<dyn Scheduler<Job> + Send>,
    known_costs: bool,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, SimError> {
    match &sc.blackbox {
        None => run_on(
            sc,
            sched,
            known_costs,
            WorkerPool::new(sc.workers, sc.rate),
            progress,
        ),
        Some(def) => run_on(
            sc,
            sched,
            known_costs,
            BlackBoxService::new(
                def,
                sc.rate,
                sc.tenants.len(),
                sc.track.len(),
                sc.max_points,
            ),
            progress,
        ),
    }
}

/// Refuse, before simulating, a scenario whose events would run for hours or whose
/// requests would fill memory.
fn check_limits(sc: &Scenario) -> Result<(), SimError> {
    let estimate = sc.estimated_events();
    // NaN (an absurd value somewhere) is refused too.
    if estimate.is_nan() || estimate > sc.max_events as f64 {
        return Err(SimError::event_cap(format!(
            "{}{}: refused: about {estimate:.3e} events (arrivals, completions, refresh and \
             sampling ticks over {} s) exceed the cap of {} events; shorten the run, lower \
             the rates, or raise the cap with --max-events",
            sc.name,
            if sc.label.is_empty() {
                String::new()
            } else {
                format!(" [{}]", sc.label)
            },
            sc.duration,
            sc.max_events
        )));
    }
    Ok(())
}

impl Measure for WorkerPool {}

/// Run a caller-built scheduler on a scenario's tenants in front of a caller-supplied
/// [`Service`] (its slots replace the scenario's workers; the scheduler should be built for
/// that many). The scenario's `[server]` is ignored apart from `refresh`. The service's
/// [`Measure`] hooks all have defaults: a service that measures nothing beyond its requests
/// implements it with `impl Measure for MyService {}`.
pub fn run_on<S: Service + Measure>(
    sc: &Scenario,
    sched: Box<dyn Scheduler<Job> + Send>,
    known_costs: bool,
    svc: S,
    progress: &mut dyn FnMut(f64),
) -> Result<RunResult, SimError> {
    check_limits(sc)?;
    let wall = Instant::now();
    let n = sc.tenants.len();
    let slots = svc.slots();
    let capacity = svc.capacity();
    let order = canonical_order(sc);
    let level_series = LevelSampler::new(&*sched, sc.max_points);
    let mut rank = vec![0; n];
    for (r, &f) in order.iter().enumerate() {
        rank[f] = r;
    }
    let mut sim = Sim {
        sc,
        sched,
        known_costs,
        queue: EventQueue::default(),
        svc,
        workers: vec![None; slots],
        draws: Vec::new(),
        free_draws: Vec::new(),
        idle: IdleSlots::all(slots),
        retry_at: f64::INFINITY,
        hot: sc
            .tenants
            .iter()
            .enumerate()
            .map(|(f, t)| Hot::new(sc, t, rank[f]))
            .collect(),
        tenants: sc
            .tenants
            .iter()
            .map(|t| TenantState {
                arrivals: Rng::new(sc.seed, t.stream ^ purpose::ARRIVALS),
                on_from: 0.0,
                on_until: 0.0,
                cursor: 0,
                service: Rng::new(sc.seed, t.stream ^ purpose::SERVICE),
            })
            .collect(),
        order,
        gps: GpsClock::new(capacity).map_err(core)?,
        partial: vec![0.0; n],
        prev_actual: vec![0.0; n],
        prev_gps: vec![0.0; n],
        latency: vec![Latency::default(); n],
        lag: vec![Moments::default(); n],
        gini: Thinned::new(sc.max_points),
        gini_moments: Moments::default(),
        scratch: Vec::with_capacity(n),
        series: sc
            .track
            .iter()
            .map(|_| (Thinned::new(sc.max_points), Thinned::new(sc.max_points)))
            .collect(),
        track_slot: (0..n)
            .map(|f| {
                sc.track
                    .iter()
                    .position(|&x| x == f)
                    .map_or(u32::MAX, |i| i as u32)
            })
            .collect(),
        occupancy: (0..slots).map(|_| Thinned::new(sc.max_points)).collect(),
        depth_ctl: match sc.blackbox.as_ref().map(|b| &b.depth) {
            Some(Depth::Adaptive(cfg)) => Some(DepthController::new(*cfg).map_err(core)?),
            _ => None,
        },
        occupancy_due: false,
        level_of: sc
            .levels
            .as_ref()
            .map_or_else(Vec::new, |l| l.of_tenant.clone()),
        level_series,
    };
    sim.start()?;
    drive(&mut sim, sc.duration, sc.max_events, progress)?;
    Ok(sim.finish(capacity, wall.elapsed().as_secs_f64()))
}

impl Hot {
    fn new(sc: &Scenario, t: &TenantDef, rank: usize) -> Self {
        let (class, law) = match t.simple_draw() {
            Some((class, law)) => (class, Some(law)),
            None => (0, None),
        };
        let (mode, think) = match t.arrival {
            Arrival::Backlogged { .. } => (Mode::Backlogged, 0.0),
            Arrival::Closed { think, .. } => (Mode::Closed, think),
            _ => (Mode::Open, 0.0),
        };
        Hot {
            costs: Rng::new(sc.seed, t.stream ^ purpose::COSTS),
            law,
            class,
            rank: rank as u32,
            done: 0.0,
            work: 0.0,
            completed: 0,
            arrived: 0,
            stop: t.stop,
            think,
            mode,
            gps_persistent: false,
        }
    }
}

/// The tenants' spec indices sorted by name (then by index, should two names be equal): the
/// order-free order the engine schedules, identifies and samples them in.
pub fn canonical_order(sc: &Scenario) -> Vec<usize> {
    let mut order: Vec<usize> = (0..sc.tenants.len()).collect();
    order.sort_by(|&a, &b| sc.tenants[a].name.cmp(&sc.tenants[b].name).then(a.cmp(&b)));
    order
}

impl<S: Service + Measure> Model for Sim<'_, S> {
    type Event = Ev;
    const SETTLES: bool = true;

    #[inline]
    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.queue
    }

    #[inline]
    fn handle(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        self.on_event(now, ev)
    }

    /// Every event at `now` is handled: idle workers pick now, so requests that arrived at
    /// the same instant compete whatever order their events ran in.
    fn settle(&mut self, now: f64) -> Result<(), SimError> {
        if !self.idle.is_empty() && self.sched.queued() > 0 {
            self.dispatch(now)?;
        }
        if self.occupancy_due {
            self.occupancy_due = false;
            for (w, series) in self.workers.iter().zip(self.occupancy.iter_mut()) {
                series.push(now, w.map(|r| r.job.cost as f32));
            }
        }
        Ok(())
    }
}

impl<S: Service + Measure> Sim<'_, S> {
    #[inline]
    fn push(&mut self, t: f64, kind: u8, idx: u32) {
        self.queue.push(t, Ev { kind, idx });
    }

    fn start(&mut self) -> Result<(), SimError> {
        let sc = self.sc;
        for r in 0..sc.tenants.len() {
            let f = self.order[r];
            let t = &sc.tenants[f];
            let id = TenantId(r as u64);
            if t.weight != 1.0 {
                self.sched.set_weight(id, t.weight, 0.0).map_err(core)?;
                self.gps.set_weight(r, t.weight, 0.0);
            }
            if t.target.is_some() {
                // EDF's deadlines; the other schedulers ignore targets.
                self.sched.set_target(id, t.target, 0.0).map_err(core)?;
                if let Some(ctl) = &mut self.depth_ctl {
                    ctl.set_target(id, t.target).map_err(core)?;
                }
            }
            match &t.arrival {
                Arrival::Backlogged { .. } => self.push(t.start, ISSUE, f as u32),
                Arrival::Closed { clients, .. } => {
                    for _ in 0..*clients {
                        self.push(t.start, ISSUE, f as u32);
                    }
                }
                Arrival::Poisson { .. } | Arrival::OnOff { .. } => {
                    if let Arrival::OnOff {
                        on, off, periodic, ..
                    } = t.arrival
                    {
                        let st = &mut self.tenants[f];
                        if periodic {
                            st.on_from = t.start;
                            st.on_until = t.start + on;
                        } else {
                            // Start ON with the stationary probability on / (on + off).
                            st.on_from = if st.arrivals.uniform() < on / (on + off) {
                                t.start
                            } else {
                                t.start + st.arrivals.exp(off)
                            };
                            st.on_until = st.on_from + st.arrivals.exp(on);
                        }
                    }
                    let at = self.next_open_arrival(f, t.start);
                    self.push(at, ARRIVAL, f as u32);
                }
                Arrival::Trace(rows) => {
                    if let Some(r) = rows.first() {
                        self.push(t.start + r.time, ARRIVAL, f as u32);
                    }
                }
            }
        }
        if sc.refresh > 0.0 {
            self.push(sc.refresh, REFRESH, 0);
        }
        self.push(sc.interval, SAMPLE, 0);
        self.push(0.0, OCCUPANCY, 0);
        if let Some(ctl) = &mut self.depth_ctl {
            // Align the controller's periods with t = 0.
            ctl.update(0.0);
            let every = ctl.config().interval;
            self.push(every, DEPTH, 0);
        }
        Ok(())
    }

    /// The next Poisson or ON/OFF arrival after `now` (memorylessness makes skipping OFF
    /// periods exact).
    fn next_open_arrival(&mut self, f: usize, now: f64) -> f64 {
        let st = &mut self.tenants[f];
        match self.sc.tenants[f].arrival {
            Arrival::Poisson { rate } => now + st.arrivals.exp(1.0 / rate),
            Arrival::OnOff {
                rate,
                on,
                off,
                periodic,
            } => {
                let mut now = now.max(st.on_from);
                loop {
                    let t = now + st.arrivals.exp(1.0 / rate);
                    if t <= st.on_until {
                        return t;
                    }
                    // The ON period ended first: an OFF period, then a new ON period.
                    if periodic {
                        st.on_from = st.on_until + off;
                        st.on_until = st.on_from + on;
                    } else {
                        st.on_from = st.on_until + st.arrivals.exp(off);
                        st.on_until = st.on_from + st.arrivals.exp(on);
                    }
                    now = st.on_from;
                }
            }
            _ => f64::INFINITY,
        }
    }

    fn on_event(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        match ev.kind {
            ARRIVAL => {
                let f = ev.idx as usize;
                let t = &self.sc.tenants[f];
                if now > t.stop {
                    return Ok(());
                }
                if let Arrival::Trace(rows) = &t.arrival {
                    let st = &mut self.tenants[f];
                    let row = rows[st.cursor];
                    st.cursor += 1;
                    if let Some(next) = rows.get(st.cursor) {
                        self.push(t.start + next.time, ARRIVAL, ev.idx);
                    }
                    self.enqueue(f, row.class, row.cost, now)?;
                } else {
                    let next = self.next_open_arrival(f, now);
                    self.push(next, ARRIVAL, ev.idx);
                    let (class, cost) = self.draw(f);
                    self.enqueue(f, class, cost, now)?;
                }
            }
            ISSUE => self.on_issue(ev.idx as usize, now)?,
            SERVICE => {
                let q = &mut self.queue;
                let outcome = self.svc.fire(ev.idx, now, &mut |t, i| {
                    q.push(
                        t,
                        Ev {
                            kind: SERVICE,
                            idx: i,
                        },
                    )
                });
                match outcome {
                    Outcome::Done { slot } => self.complete(slot as usize, now)?,
                    Outcome::Nothing => {}
                    Outcome::Yield { .. } => {
                        return Err(SimError::new(
                            SimErrorKind::Unsupported,
                            "this engine's services run requests to completion",
                        ))
                    }
                }
            }
            REFRESH => self.refresh(now)?,
            SAMPLE => {
                self.sample(now);
                self.push(now + self.sc.interval, SAMPLE, 0);
            }
            OCCUPANCY => {
                // Sampled in `settle`, so it sees what the workers run once the instant's
                // picks are made.
                self.occupancy_due = true;
                self.push(now + self.sc.occupancy_interval, OCCUPANCY, 0);
            }
            RETRY => {
                // Idle workers pick in `settle`.
                self.retry_at = f64::INFINITY;
            }
            DEPTH => self.adjust_depth(now)?,
            _ => unreachable!(),
        }
        Ok(())
    }

    /// Tenant `f`'s `ISSUE` event: a backlogged tenant starts, or a closed-loop client
    /// issues its next request.
    fn on_issue(&mut self, f: usize, now: f64) -> Result<(), SimError> {
        let t = &self.sc.tenants[f];
        if now > t.stop {
            return Ok(());
        }
        match t.arrival {
            Arrival::Backlogged { outstanding } => {
                // The tenant starts: infinite demand in the GPS reference, and
                // `outstanding` requests at once.
                self.gps.backlog(self.hot[f].rank as usize, now);
                self.hot[f].gps_persistent = true;
                for _ in 0..outstanding {
                    self.issue(f, now)?;
                }
            }
            Arrival::Closed { .. } => self.issue(f, now)?,
            _ => {}
        }
        Ok(())
    }

    /// Refresh charging: the scheduler hears of its running requests' visible progress.
    #[inline]
    fn refresh(&mut self, now: f64) -> Result<(), SimError> {
        for w in self.workers.iter().flatten() {
            let used = self.svc.visible(w.start, w.job.cost, now);
            if used > 0.0 {
                self.sched.progress(w.ticket, used, now).map_err(core)?;
            }
        }
        self.push(now + self.sc.refresh, REFRESH, 0);
        Ok(())
    }

    /// The depth controller's period ends: it may set a new depth D.
    fn adjust_depth(&mut self, now: f64) -> Result<(), SimError> {
        let ctl = self.depth_ctl.as_mut().expect("adaptive depth");
        let every = ctl.config().interval;
        if let Some(d) = ctl.update(now) {
            // Shrinking: what is inside finishes, nothing new enters until fewer than D are
            // outstanding. Growing: the new slots dispatch at once.
            self.sched.set_workers(d).map_err(core)?;
            self.svc.set_depth(d, now);
        }
        self.push(now + every, DEPTH, 0);
        Ok(())
    }

    /// A closed-loop or backlogged tenant issues its next request.
    fn issue(&mut self, f: usize, now: f64) -> Result<(), SimError> {
        let (class, cost) = self.draw(f);
        self.enqueue(f, class, cost, now)
    }

    /// Tenant `f`'s next request: its class and cost.
    #[inline]
    fn draw(&mut self, f: usize) -> (u32, f64) {
        let h = &mut self.hot[f];
        match h.law {
            Some(law) => (h.class, law.sample(&mut h.costs)),
            None => self.sc.tenants[f].draw(&mut h.costs),
        }
    }

    /// Queue a request (idle workers pick it up in `settle`, after every event of the
    /// instant).
    fn enqueue(&mut self, f: usize, class: u32, cost: f64, now: f64) -> Result<(), SimError> {
        let h = &mut self.hot[f];
        let r = h.rank as usize;
        if now >= self.sc.warmup {
            h.arrived += 1;
        }
        if h.gps_persistent {
            // What `arrive` does for a flow of infinite demand: run the fluid server to now.
            self.gps.advance(now);
        } else {
            self.gps.arrive(r, cost, now);
        }
        let draw = match self.svc.arrival(cost, &mut self.tenants[f].service) {
            None => 0,
            Some(work) => match self.free_draws.pop() {
                Some(i) => {
                    self.draws[i as usize] = work;
                    i + 1
                }
                None => {
                    self.draws.push(work);
                    self.draws.len() as u32
                }
            },
        };
        let job = Job {
            arrived: now,
            cost,
            tenant: NonZeroU32::MIN.saturating_add(f as u32),
            draw,
        };
        let mut req = Request::new(TenantId(r as u64), ClassId(class), job);
        if let Some(&level) = self.level_of.get(f) {
            req.level = level;
        }
        if self.known_costs {
            req = req.with_cost(cost);
        }
        self.sched.enqueue(req, now).map_err(core)?;
        if self.sched.queued() > MAX_OUTSTANDING {
            return Err(SimError::overload(format!(
                "{}: more than {MAX_OUTSTANDING} requests queued at t = {now:.6} s: the \
                 offered load far exceeds the server's capacity; lower the arrival rates or \
                 shorten the run",
                self.sc.name
            )));
        }
        Ok(())
    }

    /// Give idle workers work, lowest index first.
    fn dispatch(&mut self, now: f64) -> Result<(), SimError> {
        while let Some(w) = self.idle.first() {
            if self.sched.queued() == 0 || !self.svc.has_room() {
                break;
            }
            match self.sched.dequeue(w as usize, now).map_err(core)? {
                Decision::Run(d) => {
                    self.idle.remove(w);
                    self.begin(w as usize, d.ticket, d.request.payload, now);
                }
                Decision::Empty => break,
                Decision::RetryAt(t) => {
                    // An infinite time means "after the next completion", which dispatches
                    // anyway: no event.
                    if t.is_finite() && t < self.retry_at {
                        self.retry_at = t;
                        self.push(t.max(now), RETRY, 0);
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    fn begin(&mut self, w: usize, ticket: Ticket, job: Job, now: f64) {
        self.workers[w] = Some(Running {
            ticket,
            job,
            start: now,
        });
        let work = match job.draw.checked_sub(1) {
            None => Work {
                cost: job.cost,
                ..Work::default()
            },
            Some(i) => {
                self.free_draws.push(i);
                self.draws[i as usize]
            }
        };
        let q = &mut self.queue;
        self.svc.begin(w as u32, work, now, &mut |t, i| {
            q.push(
                t,
                Ev {
                    kind: SERVICE,
                    idx: i,
                },
            )
        });
    }

    fn complete(&mut self, w: usize, now: f64) -> Result<(), SimError> {
        let r = self.workers[w]
            .take()
            .expect("a completion belongs to a busy worker");
        let f = r.job.tenant();
        let cost = r.job.cost;
        let measured = now >= self.sc.warmup;
        self.sched.complete(r.ticket, cost, now).map_err(core)?;
        let h = &mut self.hot[f];
        h.done += cost;
        if measured {
            h.completed += 1;
            h.work += cost;
            self.latency[f].record(now - r.job.arrived);
            self.svc.record(f, now - r.job.arrived);
        }
        let (mode, stop, think, rank) = (h.mode, h.stop, h.think, h.rank);
        if let Some(ctl) = &mut self.depth_ctl {
            ctl.observe(TenantId(rank as u64), now - r.job.arrived, now);
        }
        match mode {
            // Replaced at once: the tenant stays backlogged.
            Mode::Backlogged if now <= stop => {
                self.queue.count(1);
                let (class, cost) = self.draw(f);
                self.enqueue(f, class, cost, now)?;
            }
            Mode::Closed => {
                let at = now + self.tenants[f].arrivals.exp(think);
                if at <= stop {
                    self.push(at, ISSUE, f as u32);
                }
            }
            _ => {}
        }
        // Idle workers, this one included, pick in `settle`, lowest index first.
        self.idle.insert(w as u32);
        Ok(())
    }

    fn sample(&mut self, now: f64) {
        let sc = self.sc;
        self.gps.advance(now);
        let measured = now >= sc.warmup;
        self.svc.sample(now, sc, measured, &self.track_slot);
        // Work in progress as far as it is visible (none inside a black box: its work
        // counts when it completes).
        for w in self.workers.iter().flatten() {
            self.partial[w.job.tenant()] += self.svc.visible(w.start, w.job.cost, now);
        }
        self.scratch.clear();
        // Canonical order, so the Gini index's sums add up the same whatever the spec order.
        for r in 0..sc.tenants.len() {
            let f = self.order[r];
            let actual = self.hot[f].done + self.partial[f];
            self.partial[f] = 0.0;
            let gps = self.gps.work(r);
            if measured {
                self.lag[f].add((gps - actual) / sc.rate);
            }
            let (da, dg) = (actual - self.prev_actual[f], gps - self.prev_gps[f]);
            // Gini over the tenants GPS served this interval, of service over entitlement.
            if dg > 1e-9 * sc.rate {
                self.scratch.push(da / dg);
            }
            let slot = self.track_slot[f];
            if slot != u32::MAX {
                let (service, lag) = &mut self.series[slot as usize];
                service.push(now, da / sc.interval);
                lag.push(now, (gps - actual) / sc.rate);
            }
            self.prev_actual[f] = actual;
            self.prev_gps[f] = gps;
        }
        self.level_series.sample(&*self.sched, now);
        let g = gini(&mut self.scratch);
        self.gini.push(now, g);
        if measured {
            self.gini_moments.add(g);
        }
    }

    fn finish(self, capacity: f64, wall: f64) -> RunResult {
        let sc = self.sc;
        let running: f64 = self
            .workers
            .iter()
            .flatten()
            .map(|w| self.svc.visible(w.start, w.job.cost, sc.duration))
            .sum::<f64>();
        // Summed in canonical order: the same bits whatever the spec order.
        let done: f64 = self.order.iter().map(|&f| self.hot[f].done).sum::<f64>() + running;
        let tenants = sc
            .tenants
            .iter()
            .enumerate()
            .map(|(f, t)| {
                let lat = &self.latency[f];
                let lag = &self.lag[f];
                let h = &self.hot[f];
                TenantResult {
                    name: t.name.clone(),
                    group: t.group.clone(),
                    weight: t.weight,
                    arrived: h.arrived,
                    completed: h.completed,
                    work: h.work,
                    mean_cost: if h.completed > 0 {
                        h.work / h.completed as f64
                    } else {
                        0.0
                    },
                    lag_std: lag.std(),
                    lag_std_units: lag.std() * sc.rate,
                    lag_mean: lag.mean(),
                    lag_min: lag.min(),
                    lag_max: lag.max(),
                    latency_p50: lat.quantile(0.5),
                    latency_p99: lat.quantile(0.99),
                    latency_p999: lat.quantile(0.999),
                    latency_mean: if lat.is_empty() { f64::NAN } else { lat.mean() },
                }
            })
            .collect();
        let stride = self.occupancy.first().map_or(1, |s| s.stride());
        RunResult {
            scheduler: String::new(),
            label: sc.label.clone(),
            events: self.queue.events(),
            wall_seconds: wall,
            sim_seconds: sc.duration,
            utilization: done / (capacity * sc.duration),
            gini_mean: self.gini_moments.mean(),
            tenants,
            gini: self.gini.points,
            series: sc
                .track
                .iter()
                .zip(self.series)
                .map(|(&f, (service, lag))| TenantSeries {
                    name: sc.tenants[f].name.clone(),
                    service: service.points,
                    lag: lag.points,
                })
                .collect(),
            occupancy: Occupancy {
                t0: 0.0,
                dt: sc.occupancy_interval * stride as f64,
                cells: self
                    .occupancy
                    .into_iter()
                    .map(|s| s.points.into_iter().map(|p| p.1).collect())
                    .collect(),
            },
            blackbox: self.svc.report(sc),
            levels: self.level_series.finish(&*self.sched),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdleSlots;

    #[test]
    fn idle_slots_give_the_lowest_first_across_words() {
        for n in [1, 16, 64, 65, 130] {
            let mut idle = IdleSlots::all(n);
            // Take them all, lowest first.
            for s in 0..n as u32 {
                assert_eq!(idle.first(), Some(s), "n = {n}");
                idle.remove(s);
            }
            assert!(idle.is_empty() && idle.first().is_none());
            // Give back in a scrambled order; the lowest given back comes first.
            let back: Vec<u32> = (0..n as u32).rev().step_by(3).collect();
            for &s in &back {
                idle.insert(s);
                assert_eq!(idle.first(), back.iter().copied().filter(|&b| b >= s).min());
            }
            assert_eq!(idle.first(), back.iter().copied().min());
        }
    }
}
