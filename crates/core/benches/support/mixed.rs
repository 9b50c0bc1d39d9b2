//! The mixed workload of the cycle benches (`cycle.rs`, `levels.rs`): 32 workers, even
//! tenants sending small requests (cost ≈ 1), odd ones large (≈ 1000), with a little
//! deterministic jitter; every tenant keeps two requests queued and every worker is busy. A
//! cycle completes the oldest running request, enqueues a new request for its tenant and
//! dequeues onto the freed worker. Known-cost runs give the cost up front; the others let
//! the scheduler learn it.

#![allow(dead_code)] // each bench uses its part

use std::collections::VecDeque;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{black_box, BenchmarkGroup, Criterion};
use fairlane_core::{Decision, LevelId, Request, Scheduler, Ticket};

/// Workers of the cycle benches.
pub const WORKERS: usize = 32;

/// The cost of tenant `tenant`'s `i`-th request.
pub fn cost(tenant: usize, i: u64) -> f64 {
    let jitter = ((tenant as u64).wrapping_mul(2654435761) ^ i.wrapping_mul(40503)) % 100;
    if tenant.is_multiple_of(2) {
        1.0 + jitter as f64 / 1000.0
    } else {
        1000.0 + jitter as f64
    }
}

/// A criterion group with the settings of the cycle benches: half a second of warm-up, 20
/// samples over `seconds`.
pub fn group<'a>(c: &'a mut Criterion, name: &str, seconds: u64) -> BenchmarkGroup<'a, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(seconds))
        .sample_size(20);
    group
}

/// What the workload drives: a scheduler behind the seam, or a reference implementation.
pub trait Driven {
    /// How it names a request.
    type Ticket;
    /// Queue a request of `tenant`, with its cost when known.
    fn enqueue(&mut self, tenant: u64, cost: Option<f64>, now: f64);
    /// The request worker `w` starts, if any: its ticket, tenant and known cost.
    fn dequeue(&mut self, w: usize, now: f64) -> Option<(Self::Ticket, u64, Option<f64>)>;
    /// A request finished, having cost `cost`.
    fn complete(&mut self, ticket: Self::Ticket, cost: f64, now: f64);
}

/// A scheduler behind the seam; with `levels > 0` (a power of two, so that the harness
/// spends a mask and not a division on it), tenant `t` at level `t mod levels`.
pub struct Seam {
    pub s: Box<dyn Scheduler<()> + Send>,
    pub levels: u64,
}

impl Driven for Seam {
    type Ticket = Ticket;

    fn enqueue(&mut self, tenant: u64, cost: Option<f64>, now: f64) {
        let mut r = Request::new(tenant, 0u32, ());
        if let Some(c) = cost {
            r = r.with_cost(c);
        }
        if self.levels > 0 {
            debug_assert!(self.levels.is_power_of_two());
            r = r.at_level(LevelId((tenant & (self.levels - 1)) as u32));
        }
        self.s.enqueue(r, now).unwrap();
    }

    fn dequeue(&mut self, w: usize, now: f64) -> Option<(Ticket, u64, Option<f64>)> {
        match self.s.dequeue(w, now).unwrap() {
            Decision::Run(d) => Some((d.ticket, d.request.tenant.0, d.request.cost)),
            _ => None,
        }
    }

    fn complete(&mut self, ticket: Ticket, cost: f64, now: f64) {
        self.s.complete(ticket, cost, now).unwrap();
    }
}

/// The workload over `tenants` backlogged tenants, driving `S`.
pub struct Mixed<S: Driven> {
    pub s: S,
    /// Ticket, worker, tenant and cost of each running request, oldest first.
    pub running: VecDeque<(S::Ticket, usize, u64, f64)>,
    known: bool,
    now: f64,
    i: u64,
}

impl<S: Driven> Mixed<S> {
    /// Two requests queued for each tenant, then every worker given one (while any is left).
    pub fn new(s: S, tenants: u64, known: bool) -> Self {
        let mut me = Mixed {
            s,
            running: VecDeque::new(),
            known,
            now: 0.0,
            i: 0,
        };
        for _ in 0..2 {
            for t in 0..tenants {
                me.enqueue(t);
            }
        }
        for w in 0..WORKERS {
            me.start(w);
        }
        me
    }

    fn enqueue(&mut self, tenant: u64) {
        self.i += 1;
        let c = cost(tenant as usize, self.i);
        self.s.enqueue(tenant, self.known.then_some(c), self.now);
    }

    fn start(&mut self, w: usize) {
        if let Some((ticket, t, c)) = self.s.dequeue(w, self.now) {
            let c = c.unwrap_or_else(|| cost(t as usize, self.i));
            self.running.push_back((ticket, w, t, c));
        }
    }

    /// One cycle: complete the oldest running request, enqueue its tenant's next, start one
    /// on the freed worker.
    pub fn cycle(&mut self) {
        self.now += 1.0;
        let (ticket, w, tenant, c) = self.running.pop_front().unwrap();
        self.s.complete(ticket, c, self.now);
        self.enqueue(tenant);
        self.start(w);
        black_box(&self.running);
    }
}
