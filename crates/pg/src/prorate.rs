//! Charging a transaction that spans the end of a metering interval.
//!
//! seeds/003's scheduler and meter count a running quantum by its elapsed time, and when it
//! finishes they charge the interval it finishes in with its cost minus the elapsed time
//! already counted in earlier intervals ([`fairlane_core::reserve::Meter::finished`]). On a
//! core, cost and elapsed time are the same thing and the split is exact. A pooled
//! transaction's cost is its backend's CPU time, which is less than the time it held the
//! connection whenever the backend waits: for locks, I/O, the client, or a CPU shared with
//! other work. Its elapsed time before the boundary then covers the whole CPU time, and the
//! interval it finishes in is charged nothing for it. A tenant whose transactions often
//! cross a boundary gets that CPU free, beyond its `MaxCPU`.
//!
//! [`charge`] gives the core a cost from which its subtraction leaves the part of the CPU
//! time that fell in the interval where it finished, in proportion to the wall time.
//! [`Prorated`] applies it to a [`ReserveScheduler`] behind the gate, and the pooler's
//! meter takes the same charge.

use std::collections::HashMap;

use fairlane_core::levels::{LevelView, LevelsConfig};
use fairlane_core::reserve::ReserveScheduler;
use fairlane_core::{
    Admin, Decision, Error, Inspect, Request, Scheduler, TenantId, TenantView, Ticket,
};

/// What to report as the cost of a transaction that started at `start`, ended at `now` and
/// used `used` CPU, with metering intervals of length `interval` from time 0. The core
/// charges the interval holding `now` with this minus `window start − start` (the elapsed
/// time it counted before): the result makes that charge `used × (now − window start) /
/// (now − start)`, the CPU time's share of the wall time inside the interval. A
/// transaction within one interval is charged `used`.
pub fn charge(used: f64, start: f64, now: f64, interval: f64) -> f64 {
    if !(interval > 0.0 && now > start) {
        return used;
    }
    let window = (now / interval).floor() * interval;
    if start >= window {
        return used;
    }
    (window - start) + used * (now - window) / (now - start)
}

/// A [`ReserveScheduler`] whose completions are charged by [`charge`].
pub struct Prorated {
    inner: ReserveScheduler<u64>,
    interval: f64,
    /// Dispatch time of each running request.
    started: HashMap<Ticket, f64>,
    /// The latest time seen (the core treats times as monotone too).
    now: f64,
}

impl Prorated {
    /// Wrap `inner`, whose metering interval is `interval` (in the gate's unit).
    pub fn new(inner: ReserveScheduler<u64>, interval: f64) -> Self {
        Prorated {
            inner,
            interval,
            started: HashMap::new(),
            now: f64::NEG_INFINITY,
        }
    }

    fn observe(&mut self, now: f64) -> f64 {
        self.now = self.now.max(now);
        self.now
    }
}

impl Scheduler<u64> for Prorated {
    fn enqueue(&mut self, request: Request<u64>, now: f64) -> Result<Ticket, Error> {
        self.inner.enqueue(request, now)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<u64>, Error> {
        let d = self.inner.dequeue(worker, now)?;
        if let Decision::Run(run) = &d {
            let at = self.observe(now);
            self.started.insert(run.ticket, at);
        }
        Ok(d)
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.inner.progress(ticket, used, now)
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        let at = self.observe(now);
        let cost = match self.started.remove(&ticket) {
            Some(start) => charge(used, start, at, self.interval),
            None => used,
        };
        self.inner.complete(ticket, cost, now)
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<u64>, Error> {
        self.inner.cancel(ticket, now)
    }
}

impl Admin for Prorated {
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        self.inner.set_workers(workers)
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        self.inner.set_weight(tenant, weight, now)
    }

    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        self.inner.set_target(tenant, target, now)
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        self.inner.remove_tenant(tenant)
    }

    fn set_levels(&mut self, levels: &LevelsConfig) -> Result<(), Error> {
        self.inner.set_levels(levels)
    }
}

impl Inspect for Prorated {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn workers(&self) -> usize {
        self.inner.workers()
    }

    fn requires_cost(&self) -> bool {
        self.inner.requires_cost()
    }

    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        self.inner.tenant(tenant)
    }

    fn queued(&self) -> usize {
        self.inner.queued()
    }

    fn running(&self) -> usize {
        self.inner.running()
    }

    fn virtual_time(&self) -> Option<f64> {
        self.inner.virtual_time()
    }

    fn levels(&self) -> Vec<LevelView<'_>> {
        self.inner.levels()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};

    #[test]
    fn the_charge_splits_cpu_by_wall_time() {
        // Within one interval: the CPU time as it is.
        assert_eq!(charge(0.03, 0.2, 0.5, 1.0), 0.03);
        // 0.9 → 1.1, 30 ms of CPU: 15 ms fall after the boundary. The core subtracts the
        // 0.1 s it counted before it, so it must be told 0.1 + 0.015.
        let c = charge(0.03, 0.9, 1.1, 1.0);
        assert!((c - 0.115).abs() < 1e-12, "{c}");
        // Degenerate input is passed through.
        assert_eq!(charge(0.5, 1.0, 1.0, 1.0), 0.5);
        assert_eq!(charge(0.5, 0.9, 1.1, 0.0), 0.5);
    }

    fn ldf() -> ReserveScheduler<u64> {
        let mut s = ReserveConfig::new(Policy::ldf())
            .cores(2)
            .interval(1.0)
            .build::<u64>()
            .unwrap();
        s.set_reservation(TenantId(1), Reservation::new(20.0, 20.0), 0.0)
            .unwrap();
        s
    }

    /// A transaction dispatched at 0.9 s that used 30 ms of CPU by 1.1 s: the interval it
    /// ends in holds the CPU share of its wall time after 1 s.
    fn crossing(s: &mut dyn Scheduler<u64>) {
        s.enqueue(Request::new(1u64, 0u32, 7), 0.9).unwrap();
        let d = s.dequeue(0, 0.9).unwrap().run().unwrap();
        assert_eq!((s.running(), s.workers(), s.name()), (1, 2, "ldf"));
        s.complete(d.ticket, 0.03, 1.1).unwrap();
        assert_eq!(s.running(), 0);
        assert!(
            s.complete(d.ticket, 0.03, 1.2).is_err(),
            "a ticket completes once"
        );
    }

    #[test]
    fn the_interval_a_transaction_ends_in_is_charged_its_share() {
        // % of 2 cores over the interval's first 0.999 s.
        let pct = |cpu: f64| cpu * 100.0 / (2.0 * 0.999);
        let mut s = Prorated::new(ldf(), 1.0);
        crossing(&mut s);
        assert!(s.started.is_empty());
        let r = s.inner.meter_reading(TenantId(1), 1.999).unwrap();
        assert!((r.cpu - pct(0.015)).abs() < 1e-6, "prorated: {r:?}");
        // The core alone subtracts the 100 ms of wall time before 1 s from 30 ms of CPU:
        // nothing is left for the interval, and the tenant's next transactions there run
        // as if it had used nothing.
        let mut raw = ldf();
        crossing(&mut raw);
        let r = raw.meter_reading(TenantId(1), 1.999).unwrap();
        assert_eq!(r.cpu, 0.0, "unprorated: {r:?}");
    }
}
