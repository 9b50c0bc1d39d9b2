//! Priority levels in a pool or black-box run: each level's seats over time, sampled from
//! the scheduler's own view (`Inspect::levels`) at every metrics interval.

use fairlane_core::Scheduler;
use serde::Serialize;

use crate::metrics::Thinned;

/// One priority level over a run: its nominal seats and, per sample, the seats it held, its
/// current limit and its queue.
#[derive(Clone, Debug, Serialize)]
pub struct LevelSeries {
    /// Its name.
    pub name: String,
    /// Exempt: served ahead of every level, without limit.
    pub exempt: bool,
    /// NominalCL at the end of the run.
    pub nominal: usize,
    /// `(t, requests running)`.
    pub seats: Vec<(f64, f64)>,
    /// `(t, CurrentCL)`: the seats it may hold (borrowing moves it).
    pub current: Vec<(f64, f64)>,
    /// `(t, requests queued)`.
    pub queued: Vec<(f64, f64)>,
}

/// The series being sampled: one per level, empty when the run has no levels.
pub(crate) struct LevelSampler {
    series: Vec<[Thinned<f64>; 3]>,
}

impl LevelSampler {
    /// A sampler for the levels `sched` has (none for a flat scheduler).
    pub fn new<T>(sched: &dyn Scheduler<T>, max_points: usize) -> Self {
        let n = sched.levels().len();
        LevelSampler {
            series: (0..n)
                .map(|_| std::array::from_fn(|_| Thinned::new(max_points)))
                .collect(),
        }
    }

    /// Record every level's seats, limit and queue at `now`.
    pub fn sample<T>(&mut self, sched: &dyn Scheduler<T>, now: f64) {
        if self.series.is_empty() {
            return;
        }
        for (v, [seats, current, queued]) in sched.levels().iter().zip(&mut self.series) {
            seats.push(now, v.seats_in_use as f64);
            current.push(now, v.current as f64);
            queued.push(now, v.queued as f64);
        }
    }

    /// The series, named from the scheduler's levels.
    pub fn finish<T>(self, sched: &dyn Scheduler<T>) -> Vec<LevelSeries> {
        sched
            .levels()
            .iter()
            .zip(self.series)
            .map(|(v, [seats, current, queued])| LevelSeries {
                name: v.name.to_string(),
                exempt: v.exempt,
                nominal: v.nominal,
                seats: seats.points,
                current: current.points,
                queued: queued.points,
            })
            .collect()
    }
}
