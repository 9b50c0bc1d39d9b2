//! Choosing the scheduler of an executor. The preset → configuration step is core's
//! ([`Config::for_executor`]); here only "which of the three ways did the user pick".

use std::fmt;
use std::sync::{Arc, Mutex};

use fairlane_core::{BoxedScheduler, Config};

/// Where the scheduler comes from.
#[derive(Clone)]
pub(crate) enum SchedulerChoice {
    /// A core preset by name, resolved by [`Config::for_executor`] with the executor's
    /// initial estimate.
    Preset(String),
    /// A configuration used as given (only its worker count is set by the executor).
    Config(Config),
    /// A scheduler built by the caller (any policy, LDF reservations included), taken by the
    /// first `build`. Shared so the builder stays `Clone`.
    Built(Arc<Mutex<Option<BoxedScheduler>>>),
}

impl fmt::Debug for SchedulerChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchedulerChoice::Preset(p) => f.debug_tuple("Preset").field(p).finish(),
            SchedulerChoice::Config(c) => f.debug_tuple("Config").field(c).finish(),
            SchedulerChoice::Built(_) => f.write_str("Built(..)"),
        }
    }
}

impl SchedulerChoice {
    pub fn built(s: BoxedScheduler) -> Self {
        SchedulerChoice::Built(Arc::new(Mutex::new(Some(s))))
    }

    /// Build (or take) the scheduler for `workers` workers; unseen pairs of a preset start
    /// at `initial` cost units.
    pub fn build(
        &self,
        workers: Option<usize>,
        initial: f64,
    ) -> Result<BoxedScheduler, fairlane_core::Error> {
        let default_workers = || std::thread::available_parallelism().map_or(1, |n| n.get());
        let config = match self {
            SchedulerChoice::Preset(name) => {
                Config::for_executor(name, workers.unwrap_or_else(default_workers), initial, true)?
            }
            SchedulerChoice::Config(c) => c.workers(workers.unwrap_or_else(default_workers)),
            SchedulerChoice::Built(cell) => {
                let mut s = cell
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    .ok_or_else(|| fairlane_core::Error::InvalidConfig {
                        field: "scheduler",
                        reason: "a built scheduler serves one executor; it was taken by an \
                                 earlier build"
                            .into(),
                    })?;
                if let Some(w) = workers {
                    if w != s.workers() {
                        s.set_workers(w)?;
                    }
                }
                return Ok(s);
            }
        };
        if config.workers == 0 {
            return Err(fairlane_core::Error::InvalidConfig {
                field: "workers",
                reason: "must be at least 1, got 0".into(),
            });
        }
        config.build::<u64>()
    }
}

pub(crate) fn check_cost(cost: Option<f64>) -> Result<(), fairlane_core::Error> {
    match cost {
        Some(c) if !(c.is_finite() && c >= 0.0) => Err(fairlane_core::Error::InvalidCost {
            what: "request cost",
            value: c,
        }),
        _ => Ok(()),
    }
}
