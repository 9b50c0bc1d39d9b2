//! Cost estimators (2DFQ §3.2, §5, §6.2): what to charge for a request whose cost is not known
//! up front. Every estimator keeps its statistic per tenant *and* class (API), because costs
//! depend on both (2DFQ Fig. 3).
//!
//! A request that carries a known cost is always charged that cost; estimators fill in only
//! the unknown ones. Unseen (tenant, class) pairs are estimated at `initial`, in the
//! executor's cost unit: choose it high to treat newcomers pessimistically (2DFQᴱ's spirit),
//! low to let them in quickly.

use crate::types::{ClassId, Error, TenantId};
use crate::util::FxHashMap;

/// Estimates request costs and learns from measured ones.
pub trait CostEstimator: Send {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// The cost to charge for a request of this tenant and class whose cost is unknown.
    fn estimate(&self, tenant: TenantId, class: ClassId) -> f64;
    /// Learn the measured total cost of a completed request.
    fn observe(&mut self, tenant: TenantId, class: ClassId, cost: f64);
    /// Drop everything known about a tenant.
    fn forget(&mut self, tenant: TenantId);
    /// Whether requests must carry their cost (the oracle).
    fn requires_known_cost(&self) -> bool {
        false
    }
}

/// Which estimator a [`Config`](crate::Config) builds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EstimatorKind {
    /// Costs are known up front; a request without one is refused.
    Oracle,
    /// The cost of the tenant's last completed request of the class.
    LastValue {
        /// Estimate for unseen pairs.
        initial: f64,
    },
    /// Exponential moving average `e ← α·e + (1 − α)·c` (WFQᴱ, WF²Qᴱ in 2DFQ §6.2, α = 0.99).
    Ema {
        /// Weight of history, in [0, 1].
        alpha: f64,
        /// Estimate for unseen pairs.
        initial: f64,
    },
    /// Pessimistic `L_max ← max(α·L_max, c)` (2DFQᴱ, Fig. 7 line 30, α close to 1).
    Pessimistic {
        /// Decay, in [0, 1].
        alpha: f64,
        /// Estimate for unseen pairs.
        initial: f64,
    },
}

impl EstimatorKind {
    /// Build the estimator, checking its parameters.
    pub fn build(self) -> Result<Box<dyn CostEstimator>, Error> {
        let check_alpha = |alpha: f64| {
            if (0.0..=1.0).contains(&alpha) {
                Ok(alpha)
            } else {
                Err(Error::InvalidConfig {
                    field: "estimator.alpha",
                    reason: format!("must be in [0, 1], got {alpha}"),
                })
            }
        };
        let check_initial = |initial: f64| {
            if initial.is_finite() && initial >= 0.0 {
                Ok(initial)
            } else {
                Err(Error::InvalidConfig {
                    field: "estimator.initial",
                    reason: format!("must be finite and ≥ 0, got {initial}"),
                })
            }
        };
        let (rule, initial) = match self {
            EstimatorKind::Oracle => return Ok(Box::new(Oracle)),
            EstimatorKind::LastValue { initial } => (Rule::Last, initial),
            EstimatorKind::Ema { alpha, initial } => (
                Rule::Ema {
                    alpha: check_alpha(alpha)?,
                },
                initial,
            ),
            EstimatorKind::Pessimistic { alpha, initial } => (
                Rule::Pessimistic {
                    alpha: check_alpha(alpha)?,
                },
                initial,
            ),
        };
        Ok(Box::new(Learned {
            rule,
            table: Table::new(check_initial(initial)?),
            last: None,
        }))
    }
}

/// Per (tenant, class) values with a default for unseen pairs.
#[derive(Clone, Debug)]
struct Table {
    initial: f64,
    values: FxHashMap<(u64, u32), f64>,
}

impl Table {
    fn new(initial: f64) -> Self {
        Table {
            initial,
            values: FxHashMap::default(),
        }
    }
    fn get(&self, t: TenantId, c: ClassId) -> f64 {
        self.values
            .get(&(t.0, c.0))
            .copied()
            .unwrap_or(self.initial)
    }
    fn forget(&mut self, t: TenantId) {
        self.values.retain(|k, _| k.0 != t.0);
    }
}

/// Costs are known: requests must carry them (2DFQ §4).
#[derive(Clone, Copy, Debug, Default)]
pub struct Oracle;

impl CostEstimator for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn estimate(&self, _: TenantId, _: ClassId) -> f64 {
        0.0 // never asked: requires_known_cost makes enqueue refuse costless requests
    }
    fn observe(&mut self, _: TenantId, _: ClassId, _: f64) {}
    fn forget(&mut self, _: TenantId) {}
    fn requires_known_cost(&self) -> bool {
        true
    }
}

/// How a [`Learned`] estimator folds a measured cost into its per-pair statistic. The first
/// observation of a pair replaces `initial` outright under every rule.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rule {
    /// The last measured cost of the tenant's class (the estimator §5 shows to be exploitable
    /// without retroactive charging).
    Last,
    /// Per-tenant-per-class exponential moving average `e ← α·e + (1 − α)·c` (2DFQ §6.2's
    /// WFQᴱ and WF²Qᴱ).
    Ema {
        /// Weight of history.
        alpha: f64,
    },
    /// 2DFQᴱ's pessimistic estimator: the largest recent cost, decaying by α per completion
    /// (Fig. 7 line 30: `L_max ← max(α·L_max, T)`). The prose of §5 says "if c > L_max then
    /// L_max = c, otherwise L_max = α·L_max"; the two differ only when α·L_max < c ≤ L_max,
    /// where Fig. 7 keeps the estimate at c instead of below it. We follow Fig. 7.
    Pessimistic {
        /// Decay.
        alpha: f64,
    },
}

impl Rule {
    fn update(self, old: f64, cost: f64) -> f64 {
        match self {
            Rule::Last => cost,
            // Both terms can round up to f64::MAX·(α + 1 − α) > f64::MAX: keep it finite.
            Rule::Ema { alpha } => (alpha * old + (1.0 - alpha) * cost).min(f64::MAX),
            Rule::Pessimistic { alpha } => (alpha * old).max(cost),
        }
    }
}

/// An estimator that learns from measured costs: one statistic per (tenant, class) pair,
/// updated by its rule (last value, EMA or pessimistic; see [`EstimatorKind`]).
#[derive(Clone, Debug)]
pub struct Learned {
    rule: Rule,
    table: Table,
    /// The pair last observed and its new value. A scheduler asks for the estimate of the
    /// pair it just observed (the completing tenant's next head is usually of the same
    /// class): answered from here, without a second hashed lookup.
    last: Option<((u64, u32), f64)>,
}

impl CostEstimator for Learned {
    fn name(&self) -> &'static str {
        match self.rule {
            Rule::Last => "last",
            Rule::Ema { .. } => "ema",
            Rule::Pessimistic { .. } => "pessimistic",
        }
    }
    fn estimate(&self, t: TenantId, c: ClassId) -> f64 {
        match self.last {
            Some((k, v)) if k == (t.0, c.0) => v,
            _ => self.table.get(t, c),
        }
    }
    fn observe(&mut self, t: TenantId, c: ClassId, cost: f64) {
        let rule = self.rule;
        let v = *self
            .table
            .values
            .entry((t.0, c.0))
            .and_modify(|e| *e = rule.update(*e, cost))
            .or_insert(cost);
        self.last = Some(((t.0, c.0), v));
    }
    fn forget(&mut self, t: TenantId) {
        if self.last.is_some_and(|(k, _)| k.0 == t.0) {
            self.last = None;
        }
        self.table.forget(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: TenantId = TenantId(1);
    const A: ClassId = ClassId(0);
    const B: ClassId = ClassId(1);

    fn ema(alpha: f64, initial: f64) -> Result<Box<dyn CostEstimator>, Error> {
        EstimatorKind::Ema { alpha, initial }.build()
    }

    fn pessimistic(alpha: f64, initial: f64) -> Result<Box<dyn CostEstimator>, Error> {
        EstimatorKind::Pessimistic { alpha, initial }.build()
    }

    /// For each `(observed, estimate)` step: after observing `observed` for `(T, A)` the
    /// estimator answers `estimate`.
    fn follows(e: Result<Box<dyn CostEstimator>, Error>, steps: &[(f64, f64)]) {
        let mut e = e.unwrap();
        for &(observed, estimate) in steps {
            e.observe(T, A, observed);
            assert_eq!(e.estimate(T, A), estimate, "after observing {observed}");
        }
    }

    #[test]
    fn last_value_remembers_per_class() {
        let mut e = EstimatorKind::LastValue { initial: 5.0 }.build().unwrap();
        assert_eq!(e.estimate(T, A), 5.0);
        e.observe(T, A, 2.0);
        e.observe(T, B, 9.0);
        assert_eq!(e.estimate(T, A), 2.0);
        assert_eq!(e.estimate(T, B), 9.0);
        assert_eq!(e.estimate(TenantId(2), A), 5.0);
        e.forget(T);
        assert_eq!(e.estimate(T, B), 5.0);
    }

    #[test]
    fn ema_moves_by_one_minus_alpha() {
        // The first observation replaces the initial value.
        follows(ema(0.75, 1.0), &[(8.0, 8.0), (0.0, 6.0)]);
    }

    #[test]
    fn pessimistic_jumps_up_and_decays_down() {
        // At 40, α·L = 25 < 40 ≤ 50: Fig. 7 keeps 40.
        let steps = [(100.0, 100.0), (1.0, 50.0), (40.0, 40.0), (1000.0, 1000.0)];
        follows(pessimistic(0.5, 1.0), &steps);
    }

    /// The last observed pair is answered from the one-entry cache: it must agree with the
    /// table through observations of other pairs, repeated ones and `forget`.
    #[test]
    fn the_last_observed_pair_agrees_with_the_table() {
        let mut e = pessimistic(0.5, 7.0).unwrap();
        e.observe(T, A, 100.0);
        e.observe(TenantId(2), A, 3.0);
        assert_eq!(e.estimate(T, A), 100.0);
        assert_eq!(e.estimate(TenantId(2), A), 3.0);
        e.observe(T, A, 1.0);
        assert_eq!(e.estimate(T, A), 50.0);
        assert_eq!(e.estimate(T, B), 7.0);
        e.forget(T);
        assert_eq!(e.estimate(T, A), 7.0);
        e.observe(T, B, 2.0);
        e.forget(TenantId(2));
        assert_eq!(e.estimate(T, B), 2.0);
        assert_eq!(e.estimate(TenantId(2), A), 7.0);
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(ema(1.5, 1.0).is_err());
        assert!(pessimistic(f64::NAN, 1.0).is_err());
        assert!(EstimatorKind::LastValue { initial: -1.0 }.build().is_err());
        assert!(EstimatorKind::LastValue {
            initial: f64::INFINITY
        }
        .build()
        .is_err());
    }
}
