//! Adaptive depth: the feedback controller of the interposed paper's §5.4, after Facade
//! (Lumb et al., FAST '03), that converges on the largest depth D meeting every flow's
//! response-time target.
//!
//! Every `interval` the controller compares each flow's mean response time over the period
//! with its target. A miss means the server is being fed more concurrency than the targets
//! allow: D shrinks multiplicatively (×`decrease`) and the missing depth becomes a ceiling.
//! When every judged flow is comfortably inside its target (mean ≤ (1 − `headroom`) ×
//! target), D grows by `increase`, but not to the ceiling; after `probe` such periods in a
//! row just below the ceiling, the ceiling is lifted by one, so the controller re-probes
//! when the load has changed. If a shrink did not improve the worst flow's mean/target ratio
//! by 5 %, the target is out of reach by concurrency alone (the server is too slow for it):
//! the controller goes back to the depth before the shrink and holds it as a floor for
//! `probe` periods, rather than starving every flow at depth 1. Flows with fewer than
//! `min_samples` completions in a period (idle, or OFF) are not judged, and a period with no
//! judged flow leaves D alone.
//!
//! Like the schedulers, the controller reads no clock: `now` and response times are in the
//! caller's unit. An executor owns it through a [`DepthGovernor`], which also gives targets
//! and new depths to the scheduler and says when the next period ends.
//!
//! ```
//! use fairlane_core::depth::{DepthConfig, DepthController};
//! use fairlane_core::TenantId;
//!
//! let mut c = DepthController::new(DepthConfig { initial: 16, interval: 1.0, ..DepthConfig::default() }).unwrap();
//! c.set_target(TenantId(2), Some(0.010)).unwrap();
//! for i in 0..20 {
//!     c.observe(TenantId(2), 0.030, 0.05 * i as f64); // 30 ms against a 10 ms target
//! }
//! assert_eq!(c.update(1.0), Some(8)); // missed: halve the depth
//! assert_eq!(c.depth(), 8);
//! ```

use std::collections::BTreeMap;

use crate::types::{Error, TenantId};

mod governor;
pub use governor::DepthGovernor;

/// The controller's settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DepthConfig {
    /// The smallest depth, ≥ 1.
    pub min: usize,
    /// The largest depth, ≥ `min`.
    pub max: usize,
    /// The depth to start at, in `[min, max]`.
    pub initial: usize,
    /// The control period, in the unit of `now`; > 0.
    pub interval: f64,
    /// Multiplicative decrease on a miss, in (0, 1).
    pub decrease: f64,
    /// Additive increase when every judged flow has headroom, ≥ 1.
    pub increase: usize,
    /// Grow only while every judged flow's mean ≤ (1 − headroom) × target; in [0, 1).
    pub headroom: f64,
    /// Completions a flow needs in a period to be judged, ≥ 1.
    pub min_samples: u64,
    /// Good periods in a row just below the ceiling before probing above it, ≥ 1.
    pub probe: u32,
}

impl Default for DepthConfig {
    fn default() -> Self {
        DepthConfig {
            min: 1,
            max: 64,
            initial: 8,
            interval: 1.0,
            decrease: 0.5,
            increase: 1,
            headroom: 0.1,
            min_samples: 5,
            probe: 10,
        }
    }
}

impl DepthConfig {
    fn check(&self) -> Result<(), Error> {
        let bad = |field: &'static str, reason: String| Err(Error::InvalidConfig { field, reason });
        if self.min == 0 {
            return bad("depth.min", "must be at least 1, got 0".into());
        }
        if self.max < self.min {
            return bad(
                "depth.max",
                format!("must be ≥ depth.min ({}), got {}", self.min, self.max),
            );
        }
        if self.initial < self.min || self.initial > self.max {
            return bad(
                "depth.initial",
                format!(
                    "must be within [{}, {}], got {}",
                    self.min, self.max, self.initial
                ),
            );
        }
        if !(self.interval.is_finite() && self.interval > 0.0) {
            return bad(
                "depth.interval",
                format!("must be finite and > 0, got {}", self.interval),
            );
        }
        if !(self.decrease > 0.0 && self.decrease < 1.0) {
            return bad(
                "depth.decrease",
                format!("must be in (0, 1), got {}", self.decrease),
            );
        }
        if self.increase == 0 {
            return bad("depth.increase", "must be at least 1, got 0".into());
        }
        if !(self.headroom >= 0.0 && self.headroom < 1.0) {
            return bad(
                "depth.headroom",
                format!("must be in [0, 1), got {}", self.headroom),
            );
        }
        if self.min_samples == 0 {
            return bad("depth.min_samples", "must be at least 1, got 0".into());
        }
        if self.probe == 0 {
            return bad("depth.probe", "must be at least 1, got 0".into());
        }
        Ok(())
    }
}

/// One flow's period: targets and the sums of response times observed.
#[derive(Clone, Copy, Debug, Default)]
struct Window {
    target: Option<f64>,
    sum: f64,
    count: u64,
}

/// What the controller saw for one flow in the last completed period.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowReport {
    /// The flow.
    pub tenant: TenantId,
    /// Its target.
    pub target: f64,
    /// Its mean response time over the period (NaN without completions).
    pub mean: f64,
    /// Completions in the period.
    pub count: u64,
}

/// The depth controller. See the module docs.
#[derive(Clone, Debug)]
pub struct DepthController {
    cfg: DepthConfig,
    depth: usize,
    /// Ordered by tenant so reports are deterministic.
    flows: BTreeMap<TenantId, Window>,
    period_end: Option<f64>,
    ceiling: Option<usize>,
    good_below_ceiling: u32,
    /// The depth and worst mean/target ratio of the last period that missed.
    last_miss: Option<(usize, f64)>,
    /// A depth below which shrinking was seen not to help, and the periods spent at it.
    floor: Option<usize>,
    at_floor: u32,
    last: Vec<FlowReport>,
}

/// A shrink must cut the worst mean/target ratio by this fraction to count as helping.
const MIN_GAIN: f64 = 0.05;

impl DepthController {
    /// A controller at `cfg.initial`; errors name the bad field.
    pub fn new(cfg: DepthConfig) -> Result<Self, Error> {
        cfg.check()?;
        Ok(DepthController {
            cfg,
            depth: cfg.initial,
            flows: BTreeMap::new(),
            period_end: None,
            ceiling: None,
            good_below_ceiling: 0,
            last_miss: None,
            floor: None,
            at_floor: 0,
            last: Vec::new(),
        })
    }

    /// The current depth.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The settings.
    pub fn config(&self) -> &DepthConfig {
        &self.cfg
    }

    /// Set or clear a flow's response-time target (finite, > 0).
    pub fn set_target(&mut self, tenant: TenantId, target: Option<f64>) -> Result<(), Error> {
        crate::scheduler::check_target(target)?;
        self.flows.entry(tenant).or_default().target = target;
        Ok(())
    }

    /// Record one completed request's response time.
    pub fn observe(&mut self, tenant: TenantId, response_time: f64, now: f64) {
        if self.period_end.is_none() && now.is_finite() {
            self.period_end = Some(now + self.cfg.interval);
        }
        if response_time.is_finite() && response_time >= 0.0 {
            let w = self.flows.entry(tenant).or_default();
            w.sum = (w.sum + response_time).min(f64::MAX); // two f64::MAX stay finite
            w.count += 1;
        }
    }

    /// The flows judged in the last completed period.
    pub fn last_period(&self) -> &[FlowReport] {
        &self.last
    }

    /// When the current period ends (`None` before the first call that opens one).
    pub fn period_end(&self) -> Option<f64> {
        self.period_end
    }

    /// Close the period if `now` reached its end; returns the new depth if it changed.
    pub fn update(&mut self, now: f64) -> Option<usize> {
        let end = *self.period_end.get_or_insert(now + self.cfg.interval);
        if now.is_nan() || now < end {
            return None;
        }
        // The next period starts now; skipped periods (no calls) are not replayed.
        self.period_end = Some(now + self.cfg.interval);
        self.last.clear();
        let (mut judged, mut missed, mut comfortable) = (0, false, true);
        let mut worst: f64 = 0.0;
        for (&tenant, w) in self.flows.iter_mut() {
            if let Some(target) = w.target {
                let mean = if w.count > 0 {
                    w.sum / w.count as f64
                } else {
                    f64::NAN
                };
                self.last.push(FlowReport {
                    tenant,
                    target,
                    mean,
                    count: w.count,
                });
                if w.count >= self.cfg.min_samples {
                    judged += 1;
                    missed |= mean > target;
                    worst = worst.max(mean / target);
                    comfortable &= mean <= (1.0 - self.cfg.headroom) * target;
                }
            }
            w.sum = 0.0;
            w.count = 0;
        }
        let old = self.depth;
        if judged == 0 {
            return None;
        }
        if missed {
            let previous = self.last_miss.replace((old, worst));
            match previous {
                // We shrank since the last miss and the worst flow did not get better: its
                // target is out of reach by concurrency alone (the server is too slow for
                // it). Go back up and stay there instead of starving everyone.
                Some((d, r)) if d > old && worst >= r * (1.0 - MIN_GAIN) => {
                    self.floor = Some(d);
                    self.at_floor = 0;
                    self.last_miss = Some((d, r));
                    self.depth = d;
                }
                _ if self.floor.is_some_and(|f| old <= f) => {
                    self.at_floor += 1;
                    if self.at_floor >= self.cfg.probe {
                        self.floor = None; // try shrinking again: the load may have changed
                    }
                }
                _ => {
                    self.ceiling = Some(old);
                    self.good_below_ceiling = 0;
                    let shrunk = (old as f64 * self.cfg.decrease).floor() as usize;
                    self.depth = shrunk.min(old - 1).max(self.cfg.min);
                }
            }
        } else if comfortable {
            self.last_miss = None;
            self.floor = None;
            let mut limit = self.cfg.max;
            if let Some(c) = self.ceiling {
                if old + 1 >= c {
                    self.good_below_ceiling += 1;
                    if self.good_below_ceiling >= self.cfg.probe {
                        self.ceiling = None; // probe again: the load may have changed
                        self.good_below_ceiling = 0;
                    }
                }
                if let Some(c) = self.ceiling {
                    limit = limit.min(c.saturating_sub(1).max(self.cfg.min));
                }
            }
            self.depth = (old + self.cfg.increase).min(limit.max(old));
        }
        if !missed && !comfortable {
            self.last_miss = None;
        }
        (self.depth != old).then_some(self.depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controller(initial: usize) -> DepthController {
        DepthController::new(DepthConfig {
            min: 1,
            max: 64,
            initial,
            interval: 1.0,
            min_samples: 1,
            probe: 3,
            ..DepthConfig::default()
        })
        .unwrap()
    }

    /// The depth after each of `periods` 1-second periods, from 32, of a flow with a 10 ms
    /// target on a server whose response time at depth `d` is `rt(d)` (one completion per
    /// period).
    fn depths_over(periods: u32, rt: impl Fn(usize) -> f64) -> Vec<usize> {
        let mut c = controller(32);
        c.set_target(TenantId(1), Some(0.010)).unwrap();
        let mut depths = Vec::new();
        for period in 1..=periods {
            c.observe(TenantId(1), rt(c.depth()), f64::from(period) - 0.5);
            c.update(f64::from(period));
            depths.push(c.depth());
        }
        depths
    }

    /// A server model where the response time grows with depth: rt = 1 ms × D. With a
    /// 10 ms target the largest depth meeting it is 10; headroom 10 % → 9 is "comfortable".
    #[test]
    fn converges_below_the_largest_depth_that_meets_the_target() {
        let depths = depths_over(60, |d| 0.001 * d as f64);
        let tail = &depths[40..];
        assert!(
            tail.iter().all(|&d| d <= 10),
            "never above the target depth: {tail:?}"
        );
        let mean = tail.iter().sum::<usize>() as f64 / tail.len() as f64;
        assert!(
            mean >= 7.5,
            "stays near the largest depth meeting the target: {tail:?}"
        );
    }

    /// A server too slow for the target: the response time is 12 ms at any depth up to 12,
    /// then 1 ms × D. Shrinking below 12 does not help, so the controller must not collapse
    /// to depth 1 (which would starve the flows without a tight target); it holds the
    /// smallest depth whose shrink still helped.
    #[test]
    fn an_unreachable_target_does_not_collapse_the_depth() {
        let depths = depths_over(80, |d| 0.001 * (d as f64).max(12.0));
        let tail = &depths[20..];
        let mean = tail.iter().sum::<usize>() as f64 / tail.len() as f64;
        // 32 → 16 → 8 each cut the ratio (3.2, 1.6, 1.2); 4 did not (1.2): floor at 8, with
        // a probe of 4 every `probe` periods.
        assert!(tail.iter().all(|&d| d >= 4), "never collapses: {tail:?}");
        assert!(mean >= 7.0, "mostly at the floor of 8: {tail:?}");
    }

    #[test]
    fn unjudged_flows_and_early_calls_leave_the_depth_alone() {
        let mut c = controller(8);
        c.set_target(TenantId(1), Some(0.010)).unwrap();
        assert_eq!(c.update(0.0), None); // opens the first period
        assert_eq!(c.update(0.5), None); // period not over
        assert_eq!(c.update(1.0), None); // no completions: nothing judged
        c.observe(TenantId(7), 5.0, 1.2); // a flow without target is never judged
        assert_eq!(c.update(2.0), None);
        assert_eq!(c.depth(), 8);
    }

    #[test]
    fn bad_settings_name_the_field() {
        // Each case: what to break in the default settings, and the field the error names.
        type Case = (fn(&mut DepthConfig), &'static str);
        let cases: [Case; 6] = [
            (|c| c.min = 0, "depth.min"),
            (
                |c| {
                    c.max = 0;
                    c.min = 1;
                },
                "depth.max",
            ),
            (|c| c.initial = 100, "depth.initial"),
            (|c| c.interval = 0.0, "depth.interval"),
            (|c| c.decrease = 1.0, "depth.decrease"),
            (|c| c.headroom = 1.0, "depth.headroom"),
        ];
        for (set, field) in cases {
            let mut cfg = DepthConfig::default();
            set(&mut cfg);
            match DepthController::new(cfg) {
                Err(Error::InvalidConfig { field: f, .. }) => assert_eq!(f, field),
                other => panic!("{field}: {other:?}"),
            }
        }
        let mut c = controller(4);
        assert!(c.set_target(TenantId(1), Some(-1.0)).is_err());
    }
}
