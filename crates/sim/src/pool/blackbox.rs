//! The black-box server of seeds/002 §5 (Jin, Chase, Kaur, SIGMETRICS '04): an interposed
//! scheduler releases at most D requests into a server it cannot see inside. The server has
//! K service components (the prototype's six disks); a request joins one component's FIFO
//! queue (`random` routing: a striped array, each request's block on a uniformly random disk)
//! or one FIFO queue that feeds every component (`shared`), and is served in an exponential
//! time of mean `cost / rate`. The response time a client sees is completion − arrival at the
//! scheduler: time queued in the scheduler, then inside the server.
//!
//! With a backlogged client and D requests always outstanding, random routing is a closed
//! network of K identical exponential queues with D customers, so the throughput is exactly
//! `K·μ·D / (D + K − 1)` (μ = rate / cost): 267 IO/s at D = 4, 369 at D = 8, 519 at D = 32
//! for K = 6 disks of 100 IO/s. Shared routing is an M/M/K station fed by D customers: `μ·min(D, K)`.

use std::collections::VecDeque;

use serde::Serialize;

use super::scenario::Scenario;
use super::spec::{BlackBoxDef, Routing};
use crate::metrics::Thinned;
use crate::rng::Rng;
use crate::service::{Outcome, Service, Work};

/// What a black-box run measured, beside the usual per-tenant results.
#[derive(Clone, Debug, Serialize)]
pub struct BlackBoxResult {
    /// Internal components.
    pub components: usize,
    /// `(t, D)`: the depth at each sampling instant.
    pub depth: Vec<(f64, f64)>,
    /// Time-averaged depth.
    pub mean_depth: f64,
    /// Time-averaged requests inside the server (≤ D).
    pub mean_outstanding: f64,
    /// Most requests ever inside the server at once.
    pub max_outstanding: usize,
    /// Dispatches made while the server already held D or more (always 0: a check).
    pub over_depth: u64,
    /// Per tenant, in spec order.
    pub tenants: Vec<BlackBoxTenant>,
}

/// One tenant's black-box view.
#[derive(Clone, Debug, Serialize)]
pub struct BlackBoxTenant {
    /// Name.
    pub name: String,
    /// Its response-time target, seconds.
    pub target: Option<f64>,
    /// Sampling intervals (after warmup) with completions.
    pub intervals: u64,
    /// Of those, intervals whose mean response time met the target.
    pub intervals_met: u64,
    /// `(t, mean response time in s)` per sampling interval with completions (tracked
    /// tenants only).
    pub response: Vec<(f64, f64)>,
    /// `(t, completions per second)` per sampling interval (tracked tenants only).
    pub throughput: Vec<(f64, f64)>,
}

/// The server's state: components, the requests inside, and the measurements.
pub(crate) struct BlackBox {
    /// The depth D now.
    pub depth: usize,
    /// Requests dispatched and not yet complete.
    pub outstanding: usize,
    routing: Routing,
    /// The issue slot each component is serving.
    serving: Vec<Option<u32>>,
    /// FIFO queues: one per component (random) or one (shared).
    queues: Vec<VecDeque<u32>>,
    /// Components idle (shared routing), lowest first.
    free: VecDeque<u32>,
    // Measurements.
    max_outstanding: usize,
    over_depth: u64,
    last_t: f64,
    depth_area: f64,
    outstanding_area: f64,
    sum: Vec<f64>,
    count: Vec<u64>,
    intervals: Vec<u64>,
    met: Vec<u64>,
    response: Vec<Thinned<f64>>,
    throughput: Vec<Thinned<f64>>,
    depth_series: Thinned<f64>,
}

impl BlackBox {
    pub(crate) fn new(def: &BlackBoxDef, tenants: usize, tracked: usize, cap: usize) -> Self {
        let k = def.components;
        BlackBox {
            depth: def.depth.initial(),
            outstanding: 0,
            routing: def.routing,
            serving: vec![None; k],
            queues: match def.routing {
                Routing::Random => vec![VecDeque::new(); k],
                Routing::Shared => vec![VecDeque::new()],
            },
            free: (0..k as u32).collect(),
            max_outstanding: 0,
            over_depth: 0,
            last_t: 0.0,
            depth_area: 0.0,
            outstanding_area: 0.0,
            sum: vec![0.0; tenants],
            count: vec![0; tenants],
            intervals: vec![0; tenants],
            met: vec![0; tenants],
            response: (0..tracked).map(|_| Thinned::new(cap)).collect(),
            throughput: (0..tracked).map(|_| Thinned::new(cap)).collect(),
            depth_series: Thinned::new(cap),
        }
    }

    /// Whether the scheduler may release another request now.
    pub(crate) fn has_room(&self) -> bool {
        self.outstanding < self.depth
    }

    fn advance(&mut self, now: f64) {
        let dt = now - self.last_t;
        if dt > 0.0 {
            self.depth_area += dt * self.depth as f64;
            self.outstanding_area += dt * self.outstanding as f64;
            self.last_t = now;
        }
    }

    /// Change D (the controller did). Requests already inside stay; no new dispatch until
    /// fewer than D are outstanding.
    pub(crate) fn set_depth(&mut self, depth: usize, now: f64) {
        self.advance(now);
        self.depth = depth;
    }

    /// A request on issue slot `slot` enters the server, bound for component `hint` (random
    /// routing). Returns the component that starts serving it now, if one does.
    pub(crate) fn admit(&mut self, slot: u32, hint: u32, now: f64) -> Option<u32> {
        self.advance(now);
        if self.outstanding >= self.depth {
            self.over_depth += 1;
        }
        self.outstanding += 1;
        self.max_outstanding = self.max_outstanding.max(self.outstanding);
        match self.routing {
            Routing::Random => {
                let c = hint as usize;
                if self.serving[c].is_none() {
                    self.serving[c] = Some(slot);
                    Some(hint)
                } else {
                    self.queues[c].push_back(slot);
                    None
                }
            }
            Routing::Shared => match self.free.pop_front() {
                Some(c) => {
                    self.serving[c as usize] = Some(slot);
                    Some(c)
                }
                None => {
                    self.queues[0].push_back(slot);
                    None
                }
            },
        }
    }

    /// Component `c` finished its request: returns its slot and the slot it serves next.
    pub(crate) fn finish(&mut self, c: u32, now: f64) -> (u32, Option<u32>) {
        self.advance(now);
        let done = self.serving[c as usize]
            .take()
            .expect("a completion belongs to a busy component");
        self.outstanding -= 1;
        let q = match self.routing {
            Routing::Random => c as usize,
            Routing::Shared => 0,
        };
        let next = self.queues[q].pop_front();
        match next {
            Some(s) => self.serving[c as usize] = Some(s),
            None if self.routing == Routing::Shared => {
                // Keep the free list ordered so the lowest idle component serves first.
                let at = self.free.partition_point(|&x| x < c);
                self.free.insert(at, c);
            }
            None => {}
        }
        (done, next)
    }

    /// A request of tenant `f` completed after `response` seconds.
    pub(crate) fn record(&mut self, f: usize, response: f64) {
        self.sum[f] += response;
        self.count[f] += 1;
    }

    /// End of a sampling interval: per-tenant means and throughput, the depth.
    pub(crate) fn sample(
        &mut self,
        now: f64,
        interval: f64,
        measured: bool,
        targets: impl Iterator<Item = Option<f64>>,
        track_slot: &[u32],
    ) {
        self.advance(now);
        for (f, target) in targets.enumerate() {
            let n = self.count[f];
            let mean = if n > 0 {
                self.sum[f] / n as f64
            } else {
                f64::NAN
            };
            if measured && n > 0 {
                self.intervals[f] += 1;
                if target.is_none_or(|t| mean <= t) {
                    self.met[f] += 1;
                }
            }
            let slot = track_slot[f];
            if slot != u32::MAX {
                let s = slot as usize;
                if n > 0 {
                    self.response[s].push(now, mean);
                }
                self.throughput[s].push(now, n as f64 / interval);
            }
            self.sum[f] = 0.0;
            self.count[f] = 0;
        }
        self.depth_series.push(now, self.depth as f64);
    }

    pub(crate) fn finish_run(
        mut self,
        now: f64,
        components: usize,
        tenants: &[super::workload::TenantDef],
        track: &[usize],
    ) -> BlackBoxResult {
        self.advance(now);
        let span = now.max(1e-12);
        let mut response: Vec<Option<Vec<(f64, f64)>>> =
            self.response.into_iter().map(|s| Some(s.points)).collect();
        let mut throughput: Vec<Option<Vec<(f64, f64)>>> = self
            .throughput
            .into_iter()
            .map(|s| Some(s.points))
            .collect();
        BlackBoxResult {
            components,
            depth: self.depth_series.points,
            mean_depth: self.depth_area / span,
            mean_outstanding: self.outstanding_area / span,
            max_outstanding: self.max_outstanding,
            over_depth: self.over_depth,
            tenants: tenants
                .iter()
                .enumerate()
                .map(|(f, t)| {
                    let slot = track.iter().position(|&x| x == f);
                    BlackBoxTenant {
                        name: t.name.clone(),
                        target: t.target,
                        intervals: self.intervals[f],
                        intervals_met: self.met[f],
                        response: slot.and_then(|s| response[s].take()).unwrap_or_default(),
                        throughput: slot.and_then(|s| throughput[s].take()).unwrap_or_default(),
                    }
                })
                .collect(),
        }
    }
}

/// What the request engine measures of its service beside the requests, at the points it
/// calls these hooks; by default nothing (the black box records response times and its
/// depth).
pub trait Measure {
    /// A request of tenant `tenant` completed after `response` seconds (after the warm-up).
    fn record(&mut self, _tenant: usize, _response: f64) {}

    /// The end of a sampling interval.
    fn sample(&mut self, _now: f64, _sc: &Scenario, _measured: bool, _track_slot: &[u32]) {}

    /// The service's own measurements at the end of a run.
    fn report(self, _sc: &Scenario) -> Option<BlackBoxResult>
    where
        Self: Sized,
    {
        None
    }
}

/// The black box as a [`Service`]: D issue slots (the largest depth), the K components
/// behind them. A request's service time and component are drawn at arrival
/// ([`Service::arrival`]); its event index is the component that serves it.
pub struct BlackBoxService {
    bb: BlackBox,
    components: usize,
    rate: f64,
    slots: usize,
    /// Service time of the request holding each issue slot.
    service: Vec<f64>,
}

impl BlackBoxService {
    /// A black box of `def` whose components serve `rate` units per second, measuring
    /// `tenants` tenants (`tracked` of them with series of at most `cap` points).
    pub fn new(def: &BlackBoxDef, rate: f64, tenants: usize, tracked: usize, cap: usize) -> Self {
        let slots = def.depth.max();
        BlackBoxService {
            bb: BlackBox::new(def, tenants, tracked, cap),
            components: def.components,
            rate,
            slots,
            service: vec![0.0; slots],
        }
    }
}

impl Service for BlackBoxService {
    fn slots(&self) -> usize {
        self.slots
    }
    fn capacity(&self) -> f64 {
        self.components as f64 * self.rate
    }
    fn has_room(&self) -> bool {
        self.bb.has_room()
    }
    fn arrival(&self, cost: f64, rng: &mut Rng) -> Option<Work> {
        let service = rng.exp(cost / self.rate);
        Some(Work {
            cost,
            service,
            component: rng.below(self.components as u64) as u32,
            quantum: 0.0,
        })
    }
    fn begin(&mut self, slot: u32, work: Work, now: f64, at: &mut impl FnMut(f64, u32)) {
        self.service[slot as usize] = work.service;
        if let Some(c) = self.bb.admit(slot, work.component, now) {
            at(now + work.service, c);
        }
    }
    /// Component `idx` finished: it starts its next queued request, and the finished
    /// request's issue slot is done.
    fn fire(&mut self, idx: u32, now: f64, at: &mut impl FnMut(f64, u32)) -> Outcome {
        let (slot, next) = self.bb.finish(idx, now);
        if let Some(s) = next {
            at(now + self.service[s as usize], idx);
        }
        Outcome::Done { slot }
    }
    fn set_depth(&mut self, depth: usize, now: f64) {
        self.bb.set_depth(depth, now);
    }
}

impl Measure for BlackBoxService {
    fn record(&mut self, tenant: usize, response: f64) {
        self.bb.record(tenant, response);
    }
    fn sample(&mut self, now: f64, sc: &Scenario, measured: bool, track_slot: &[u32]) {
        // Inside the black box progress is invisible: work counts when it completes.
        self.bb.sample(
            now,
            sc.interval,
            measured,
            sc.tenants.iter().map(|t| t.target),
            track_slot,
        );
    }
    fn report(self, sc: &Scenario) -> Option<BlackBoxResult> {
        Some(
            self.bb
                .finish_run(sc.duration, self.components, &sc.tenants, &sc.track),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::spec::Depth;

    fn bb(routing: Routing, k: usize, d: usize) -> BlackBox {
        let def = BlackBoxDef {
            components: k,
            routing,
            depth: Depth::Fixed(d),
        };
        BlackBox::new(&def, 1, 0, 16)
    }

    #[test]
    fn a_component_serves_in_arrival_order() {
        let mut b = bb(Routing::Random, 2, 8);
        assert_eq!(b.admit(5, 1, 0.0), Some(1));
        assert_eq!(b.admit(3, 1, 0.1), None);
        assert_eq!(b.admit(7, 0, 0.2), Some(0));
        assert_eq!(b.admit(1, 1, 0.3), None);
        assert_eq!(b.finish(1, 1.0), (5, Some(3)));
        assert_eq!(b.finish(1, 2.0), (3, Some(1)));
        assert_eq!(b.finish(0, 2.5), (7, None));
        assert_eq!(b.finish(1, 3.0), (1, None));
        assert_eq!(b.outstanding, 0);
    }

    #[test]
    fn shared_routing_uses_the_lowest_idle_component_then_queues() {
        let mut b = bb(Routing::Shared, 2, 8);
        assert_eq!(b.admit(0, 9, 0.0), Some(0));
        assert_eq!(b.admit(1, 9, 0.0), Some(1));
        assert_eq!(b.admit(2, 9, 0.0), None);
        assert_eq!(b.finish(1, 1.0), (1, Some(2)));
        assert_eq!(b.finish(0, 2.0), (0, None));
        assert_eq!(b.admit(3, 9, 2.0), Some(0));
    }

    #[test]
    fn depth_bounds_room_and_time_averages() {
        let mut b = bb(Routing::Random, 1, 2);
        assert!(b.has_room());
        b.admit(0, 0, 0.0);
        b.admit(1, 0, 0.0);
        assert!(!b.has_room());
        b.set_depth(1, 1.0);
        b.finish(0, 2.0);
        assert!(!b.has_room(), "one outstanding, D = 1");
        b.finish(0, 4.0);
        assert!(b.has_room());
        let r = b.finish_run(4.0, 1, &[], &[]);
        // Depth 2 for 1 s then 1 for 3 s; outstanding 2 for 2 s, 1 for 2 s.
        assert!((r.mean_depth - 1.25).abs() < 1e-12);
        assert!((r.mean_outstanding - 1.5).abs() < 1e-12);
        assert_eq!(r.over_depth, 0);
    }
}
