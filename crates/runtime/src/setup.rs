//! Choosing the scheduler of an executor: presets with an initial estimate in the executor's
//! unit, and what a configuration demands of requests.

use fairlane_core::{Config, EstimatorKind, VirtualClock};

/// Where the scheduler comes from.
#[derive(Clone, Debug)]
pub(crate) enum SchedulerChoice {
    /// A core preset by name; its estimator starts unseen (tenant, class) pairs at the
    /// executor's initial estimate instead of the preset's 1 cost unit.
    Preset(String),
    /// A configuration used as given (only its worker count is set by the executor).
    Config(Config),
}

impl SchedulerChoice {
    pub fn resolve(&self, workers: usize, initial: f64) -> Result<Config, fairlane_core::Error> {
        let config = match self {
            SchedulerChoice::Preset(name) => {
                let c = Config::preset(name)?;
                let estimator = match c.estimator {
                    EstimatorKind::Oracle => EstimatorKind::Oracle,
                    EstimatorKind::LastValue { .. } => EstimatorKind::LastValue { initial },
                    EstimatorKind::Ema { alpha, .. } => EstimatorKind::Ema { alpha, initial },
                    EstimatorKind::Pessimistic { alpha, .. } => {
                        EstimatorKind::Pessimistic { alpha, initial }
                    }
                };
                c.estimator(estimator)
            }
            SchedulerChoice::Config(c) => *c,
        };
        Ok(config.workers(workers))
    }
}

/// Whether every request must carry its cost under this configuration (an oracle estimator
/// or the exact GPS clock; FIFO never needs costs).
pub(crate) fn requires_cost(config: &Config) -> bool {
    config.algorithm != fairlane_core::Algorithm::Fifo
        && (config.estimator == EstimatorKind::Oracle
            || matches!(config.clock, Some(VirtualClock::Gps { .. })))
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
