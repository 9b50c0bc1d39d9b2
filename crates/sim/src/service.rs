//! Service models: what a server does with the requests its scheduler hands it.
//!
//! The engine owns the scheduler, the event queue and the tenants; a [`Service`] owns what
//! differs between servers: how many places a request can run ([`Service::slots`]), whether
//! one more may start ([`Service::has_room`]), what starting one does and which events that
//! schedules ([`Service::begin`]), and what each of its events means — a request done, or a
//! request giving its place back with work left ([`Service::fire`]).
//!
//! Three models implement it:
//! - [`WorkerPool`]: `n` worker threads of `rate` units per second (2DFQ's server);
//! - [`crate::pool::blackbox::BlackBoxService`]: D issue slots in front of K hidden FIFO
//!   components (the interposed schedulers' server, seeds/002 §5);
//! - [`Cores`]: CPU cores running non-preemptive quanta (the database server of the CPU
//!   reservations paper, seeds/003 §6): a task runs at most one quantum, then re-enters the
//!   scheduler with its remaining demand ([`Outcome::Yield`]).
//!
//! A multi-stage model (a Thread Architecture Model, seeds/004 §3; [`crate::tam`]) is not a
//! `Service` but one [`crate::events::Model`] over its stages and its hosts' resources: a
//! request holds its stage thread while it waits at a host's CPU, disk, network or lock, and
//! a `Service` frees a slot only when its request is done, so the TAM model keeps stages and
//! resources inside itself (docs/architecture.md, "Inside fairlane-sim").

use crate::rng::Rng;

/// What a request brings to its service: its cost (units of work) and what was drawn for it
/// at arrival (so a request is served the same under every scheduler).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Work {
    /// Cost in work units (database server: CPU seconds left).
    pub cost: f64,
    /// Black box: the exponential service time drawn at arrival (s).
    pub service: f64,
    /// Black box: the component drawn at arrival (random routing).
    pub component: u32,
    /// Database server: the task's quantum (s).
    pub quantum: f64,
}

/// What one of a service's events did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// Nothing visible to the engine (an internal step).
    Nothing,
    /// The request in `slot` is done; the slot is free.
    Done {
        /// The freed slot.
        slot: u32,
    },
    /// The request in `slot` used `used` units and gives its place back with `left` units
    /// still to do: the engine charges the scheduler and enqueues it again.
    Yield {
        /// The freed slot.
        slot: u32,
        /// Units used by this turn.
        used: f64,
        /// Units left.
        left: f64,
    },
}

/// A server model behind the engine's scheduler. `at(t, idx)` schedules the service's event
/// `idx` at time `t` on the engine's one queue; it comes back through [`Service::fire`].
/// What a model measures of its service beside the requests is the model's own business
/// (the request engine's [`crate::pool::engine::Measure`]).
pub trait Service {
    /// Places a request can run at once: threads, issue slots, cores. Slots are numbered
    /// `0..slots()`; the engine gives a free slot to each dispatched request.
    fn slots(&self) -> usize;

    /// Work units per second of the whole server (the GPS reference's capacity).
    fn capacity(&self) -> f64;

    /// Whether one more request may start now, beside having a free slot (default: yes).
    fn has_room(&self) -> bool {
        true
    }

    /// `work` starts in `slot` at `now`: schedule what it needs.
    fn begin(&mut self, slot: u32, work: Work, now: f64, at: &mut impl FnMut(f64, u32));

    /// Service event `idx` fired at `now`.
    fn fire(&mut self, idx: u32, now: f64, at: &mut impl FnMut(f64, u32)) -> Outcome;

    /// Units of a running request (started at `start`, costing `cost`) done by `now` as the
    /// scheduler and the metrics may see them (default: none, a black box's inside).
    fn visible(&self, _start: f64, _cost: f64, _now: f64) -> f64 {
        0.0
    }

    /// The engine's depth controller set a new depth (default: ignored).
    fn set_depth(&mut self, _depth: usize, _now: f64) {}

    /// What a request of `cost` units needs beyond its cost, drawn at its arrival from the
    /// tenant's service stream (the black box: its service time and component), or `None`
    /// when the cost is all (the default). The engine keeps it beside the queued request and
    /// hands it to [`Service::begin`]; with `None`, `begin` gets just the cost.
    fn arrival(&self, _cost: f64, _rng: &mut Rng) -> Option<Work> {
        None
    }
}

/// `n` identical workers of `rate` units per second; a request of cost `c` holds its worker
/// for `c / rate` seconds. Its event index is the worker.
#[derive(Clone, Debug)]
pub struct WorkerPool {
    workers: usize,
    rate: f64,
}

impl WorkerPool {
    /// `workers` workers of `rate` units per second each.
    pub fn new(workers: usize, rate: f64) -> Self {
        WorkerPool { workers, rate }
    }
}

impl Service for WorkerPool {
    fn slots(&self) -> usize {
        self.workers
    }
    fn capacity(&self) -> f64 {
        self.workers as f64 * self.rate
    }
    #[inline]
    fn begin(&mut self, slot: u32, work: Work, now: f64, at: &mut impl FnMut(f64, u32)) {
        at(now + work.cost / self.rate, slot);
    }
    #[inline]
    fn fire(&mut self, idx: u32, _now: f64, _at: &mut impl FnMut(f64, u32)) -> Outcome {
        Outcome::Done { slot: idx }
    }
    #[inline]
    fn visible(&self, start: f64, cost: f64, now: f64) -> f64 {
        ((now - start) * self.rate).min(cost)
    }
}

/// `cores` CPU cores running non-preemptive quanta: a task of `left` CPU seconds runs
/// `min(quantum, left)` and then yields its core (seeds/003 §6). Its event index is the core.
#[derive(Clone, Debug)]
pub struct Cores {
    running: Vec<(f64, f64)>,
}

impl Cores {
    /// `cores` cores of one CPU second per second each.
    pub fn new(cores: usize) -> Self {
        Cores {
            running: vec![(0.0, 0.0); cores],
        }
    }
}

impl Service for Cores {
    fn slots(&self) -> usize {
        self.running.len()
    }
    fn capacity(&self) -> f64 {
        self.running.len() as f64
    }
    fn begin(&mut self, slot: u32, work: Work, now: f64, at: &mut impl FnMut(f64, u32)) {
        let run = work.quantum.min(work.cost);
        self.running[slot as usize] = (now, work.cost - run);
        at(now + run, slot);
    }
    fn fire(&mut self, idx: u32, now: f64, _at: &mut impl FnMut(f64, u32)) -> Outcome {
        let (start, left) = self.running[idx as usize];
        // A task with (almost) nothing left is done; the rest re-enters the scheduler.
        if left > 1e-12 {
            Outcome::Yield {
                slot: idx,
                used: now - start,
                left,
            }
        } else {
            Outcome::Done { slot: idx }
        }
    }
    fn visible(&self, start: f64, cost: f64, now: f64) -> f64 {
        (now - start).min(cost)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_holds_its_request_cost_over_rate() {
        let mut p = WorkerPool::new(2, 100.0);
        let mut ev = Vec::new();
        p.begin(
            1,
            Work {
                cost: 50.0,
                ..Work::default()
            },
            2.0,
            &mut |t, i| ev.push((t, i)),
        );
        assert_eq!(ev, vec![(2.5, 1)]);
        assert_eq!(p.fire(1, 2.5, &mut |_, _| {}), Outcome::Done { slot: 1 });
        assert_eq!(p.capacity(), 200.0);
    }

    #[test]
    fn a_core_runs_one_quantum_then_yields_the_rest() {
        let mut c = Cores::new(4);
        let mut ev = Vec::new();
        let w = Work {
            cost: 0.01,
            quantum: 0.004,
            ..Work::default()
        };
        c.begin(3, w, 1.0, &mut |t, i| ev.push((t, i)));
        assert_eq!(ev, vec![(1.004, 3)]);
        match c.fire(3, 1.004, &mut |_, _| {}) {
            Outcome::Yield { slot, used, left } => {
                assert_eq!(slot, 3);
                assert!((used - 0.004).abs() < 1e-12 && (left - 0.006).abs() < 1e-12);
            }
            other => panic!("{other:?}"),
        }
        c.begin(
            0,
            Work {
                cost: 0.002,
                quantum: 0.004,
                ..Work::default()
            },
            2.0,
            &mut |_, _| {},
        );
        assert_eq!(c.fire(0, 2.002, &mut |_, _| {}), Outcome::Done { slot: 0 });
    }
}
