//! Adaptive depth as one mechanism an executor owns: the [`DepthController`] with the
//! wiring every executor needs around it — a tenant's target goes to the controller and to
//! the scheduler, a completion's response time to the controller, and at the end of each
//! control period a new depth to the scheduler's workers. The executor tells it the time,
//! calls [`DepthGovernor::poll`] when [`DepthGovernor::due`] says, and gives the depth it
//! returns to its own slots (a gate's seats, a server's issue slots).
//!
//! ```
//! use fairlane_core::depth::{DepthConfig, DepthGovernor};
//! use fairlane_core::{Config, Scheduler, TenantId};
//!
//! let mut sched = Config::preset("sfq").unwrap().workers(16).build::<u64>().unwrap();
//! let cfg = DepthConfig { initial: 16, interval: 1.0, ..DepthConfig::default() };
//! let mut gov = DepthGovernor::new(cfg).unwrap();
//! gov.start(&mut *sched, 0.0).unwrap();
//! gov.set_target(&mut *sched, TenantId(2), Some(0.010), 0.0).unwrap(); // 10 ms
//! for i in 0..20 {
//!     gov.observe(TenantId(2), 0.030, 0.05 * i as f64); // completions 30 ms after arrival
//! }
//! assert_eq!(gov.due(), Some(1.0));
//! assert_eq!(gov.poll(&mut *sched, 1.0).unwrap(), Some(8)); // missed: halve the depth
//! assert_eq!(sched.workers(), 8); // the scheduler was told; the executor resizes its slots
//! assert_eq!(gov.due(), Some(2.0));
//! ```

use crate::scheduler::{Admin, Inspect};
use crate::types::{Error, TenantId};

use super::{DepthConfig, DepthController, FlowReport};

/// A depth controller and its wiring to a scheduler. See the module docs.
#[derive(Clone, Debug)]
pub struct DepthGovernor {
    ctl: DepthController,
    started: bool,
}

impl DepthGovernor {
    /// A governor at `cfg.initial`; errors name the bad field.
    pub fn new(cfg: DepthConfig) -> Result<Self, Error> {
        Ok(DepthGovernor {
            ctl: DepthController::new(cfg)?,
            started: false,
        })
    }

    /// Begin the first control period at `now` and give the scheduler the initial depth as
    /// its workers (if it has another number).
    pub fn start<S: Admin + Inspect + ?Sized>(
        &mut self,
        sched: &mut S,
        now: f64,
    ) -> Result<(), Error> {
        if sched.workers() != self.ctl.depth() {
            sched.set_workers(self.ctl.depth())?;
        }
        self.ctl.update(now);
        self.started = true;
        Ok(())
    }

    /// The current depth.
    pub fn depth(&self) -> usize {
        self.ctl.depth()
    }

    /// The settings.
    pub fn config(&self) -> &DepthConfig {
        self.ctl.config()
    }

    /// The flows judged in the last completed period.
    pub fn last_period(&self) -> &[FlowReport] {
        self.ctl.last_period()
    }

    /// Set or clear a tenant's response-time target (finite, > 0, in the unit of `now`): the
    /// controller judges the tenant by it, and the scheduler gets it too (EDF's deadlines;
    /// the other schedulers ignore targets).
    pub fn set_target<S: Admin + ?Sized>(
        &mut self,
        sched: &mut S,
        tenant: TenantId,
        target: Option<f64>,
        now: f64,
    ) -> Result<(), Error> {
        sched.set_target(tenant, target, now)?;
        self.ctl.set_target(tenant, target)
    }

    /// A request of `tenant` completed `response_time` after it arrived.
    pub fn observe(&mut self, tenant: TenantId, response_time: f64, now: f64) {
        self.ctl.observe(tenant, response_time, now);
    }

    /// When the current control period ends: call [`poll`](DepthGovernor::poll) then (`None`
    /// before [`start`](DepthGovernor::start)).
    pub fn due(&self) -> Option<f64> {
        self.started.then(|| self.ctl.period_end()).flatten()
    }

    /// Close the period if `now` reached its end. On a new depth the scheduler's workers are
    /// set to it and it is returned, for the executor's own slots: shrinking, what is inside
    /// finishes and nothing new enters until fewer than D are outstanding; growing, the new
    /// slots may dispatch at once.
    pub fn poll<S: Admin + ?Sized>(
        &mut self,
        sched: &mut S,
        now: f64,
    ) -> Result<Option<usize>, Error> {
        if !self.started || self.due().is_some_and(|end| now < end) || now.is_nan() {
            return Ok(None);
        }
        match self.ctl.update(now) {
            Some(d) => {
                sched.set_workers(d)?;
                Ok(Some(d))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Config};

    /// A server where the response time grows with the depth, 1 ms × D, against a 10 ms
    /// target: polled at every period's end, the governor keeps the scheduler's workers equal
    /// to its depth and settles at or below the largest depth meeting the target.
    #[test]
    fn the_scheduler_follows_the_governed_depth() {
        let mut sched = Config::new(Algorithm::Sfq).build::<u64>().unwrap();
        let cfg = DepthConfig {
            initial: 32,
            min_samples: 1,
            probe: 3,
            ..DepthConfig::default()
        };
        let mut gov = DepthGovernor::new(cfg).unwrap();
        assert_eq!(gov.due(), None);
        assert_eq!(gov.poll(&mut *sched, 5.0).unwrap(), None, "not started");
        gov.start(&mut *sched, 0.0).unwrap();
        assert_eq!(sched.workers(), 32, "started at the initial depth");
        gov.set_target(&mut *sched, TenantId(1), Some(0.010), 0.0)
            .unwrap();
        let mut changes = 0;
        for _ in 0..60 {
            let end = gov.due().unwrap();
            assert_eq!(gov.poll(&mut *sched, end - 0.5).unwrap(), None, "early");
            gov.observe(TenantId(1), 0.001 * gov.depth() as f64, end - 0.5);
            changes += usize::from(gov.poll(&mut *sched, end).unwrap().is_some());
            assert_eq!(sched.workers(), gov.depth());
        }
        assert!(changes >= 3, "it moved: {changes} changes");
        assert!(gov.depth() <= 10, "at most the depth meeting the target");
        assert!(gov
            .set_target(&mut *sched, TenantId(1), Some(-1.0), 0.0)
            .is_err());
    }
}
