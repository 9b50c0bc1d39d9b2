//! One point of a worker-pool or black-box spec, ready to run: the engine's input.

use super::spec::{BlackBoxDef, Depth};
use super::workload::{Arrival, TenantDef};
use crate::sched::{Levels, SchedulerChoice};

/// One point of a spec ready to run: tenants expanded, every value checked.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Spec name.
    pub name: String,
    /// Sweep or suite label (empty for a plain spec).
    pub label: String,
    /// Seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Excluded from statistics.
    pub warmup: f64,
    /// Workers.
    pub workers: usize,
    /// Units per second per worker (black box: per component).
    pub rate: f64,
    /// The black-box server, when `server.model = "blackbox"` (`workers` is then the initial
    /// depth D).
    pub blackbox: Option<BlackBoxDef>,
    /// Refresh interval (0 = off).
    pub refresh: f64,
    /// Sampling interval.
    pub interval: f64,
    /// Occupancy sampling interval.
    pub occupancy_interval: f64,
    /// Max points per series.
    pub max_points: usize,
    /// Indices of tracked tenants.
    pub track: Vec<usize>,
    /// Tenants.
    pub tenants: Vec<TenantDef>,
    /// Class names by class id.
    pub classes: Vec<String>,
    /// Schedulers.
    pub schedulers: Vec<SchedulerChoice>,
    /// Priority levels above the tenants (`[[priority_level]]`): each scheduler runs inside
    /// every level. `None`: one flat level.
    pub levels: Option<Levels>,
    /// The cap on events per run (`--max-events`; default
    /// [`DEFAULT_MAX_EVENTS`](crate::events::DEFAULT_MAX_EVENTS)).
    pub max_events: u64,
}

impl Scenario {
    /// An estimate of the events one run processes, from the offered rates, the server's
    /// capacity and the cheapest tenant's mean cost, and the periodic ticks. Runs whose
    /// estimate exceeds `max_events` are refused before they start. Infinite or NaN when a
    /// value is absurd (it is then refused too).
    pub fn estimated_events(&self) -> f64 {
        let d = self.duration;
        let units = self
            .blackbox
            .as_ref()
            .map_or(self.workers, |b| b.components) as f64;
        let capacity = units * self.rate;
        let mut open = 0.0;
        let mut cheapest = f64::INFINITY;
        let mut looped = false;
        for t in &self.tenants {
            let active = (t.stop.min(d) - t.start).max(0.0);
            match &t.arrival {
                Arrival::Trace(rows) => open += rows.len() as f64,
                Arrival::Poisson { .. } | Arrival::OnOff { .. } => {
                    open += t.arrival.mean_rate() * active
                }
                Arrival::Backlogged { .. } | Arrival::Closed { .. } => looped = true,
            }
            let m = t.mean_cost();
            if m.is_finite() && m > 0.0 {
                cheapest = cheapest.min(m);
            }
        }
        // Completions: at most the capacity over the cheapest mean cost; arrivals of
        // closed loops and backlogged tenants come with their completions.
        let completions = if cheapest.is_finite() {
            capacity * d / cheapest
        } else {
            0.0
        };
        let served = if looped {
            2.0 * completions
        } else {
            completions.min(open)
        };
        let ticks = |every: f64| if every > 0.0 { d / every } else { 0.0 };
        open + served
            + ticks(self.refresh)
            + ticks(self.interval)
            + ticks(self.occupancy_interval)
            + self.blackbox.as_ref().map_or(0.0, |b| match &b.depth {
                Depth::Adaptive(c) => ticks(c.interval),
                Depth::Fixed(_) => 0.0,
            })
    }
}
