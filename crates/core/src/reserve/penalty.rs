//! Penalty functions (Das et al., VLDB '14 §2.4, Fig. 1): the fraction of a tenant's price the
//! provider refunds when its reservation is violated by a fractional violation `ViolCPU`.

use crate::types::Error;

/// `PF_i`: maps the fractional CPU violation `ViolCPU ∈ [0, 1]` (Eq. 2) to the fraction of the
/// price refunded, in `[0, 1]`.
///
/// ```
/// use fairlane_core::reserve::Penalty;
/// let step = Penalty::Step(vec![(0.1, 0.25), (0.4, 1.0)]);
/// assert_eq!(step.refund(0.05), 0.0); // a violation up to 10 % is free
/// assert_eq!(step.refund(0.2), 0.25);
/// assert_eq!(step.refund(0.5), 1.0);
/// let linear = Penalty::Linear { slope: 2.0, max: 0.5 };
/// assert_eq!(linear.refund(0.1), 0.2);
/// assert_eq!(linear.refund(0.9), 0.5);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Penalty {
    /// Nothing is ever refunded.
    #[default]
    None,
    /// `min(max, slope × ViolCPU)`.
    Linear {
        /// Refund per unit of fractional violation (≥ 0).
        slope: f64,
        /// The largest refund, in `[0, 1]`.
        max: f64,
    },
    /// Steps `(threshold, refund)`: a violation strictly above `threshold` refunds `refund`
    /// (the last step passed wins). Thresholds strictly increase in `[0, 1)`, refunds
    /// do not decrease and lie in `[0, 1]`.
    Step(Vec<(f64, f64)>),
}

impl Penalty {
    /// The fraction of the price refunded at fractional violation `viol` (clamped to [0, 1]).
    pub fn refund(&self, viol: f64) -> f64 {
        let v = if viol.is_nan() {
            0.0
        } else {
            viol.clamp(0.0, 1.0)
        };
        match self {
            Penalty::None => 0.0,
            Penalty::Linear { slope, max } => (slope * v).min(*max),
            Penalty::Step(steps) => steps
                .iter()
                .take_while(|(t, _)| v > *t)
                .last()
                .map_or(0.0, |s| s.1),
        }
    }

    /// Check the shape; the error names the field.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: String| {
            Err(Error::InvalidConfig {
                field: "penalty",
                reason,
            })
        };
        match self {
            Penalty::None => Ok(()),
            Penalty::Linear { slope, max } => {
                if !(slope.is_finite() && *slope >= 0.0) {
                    return bad(format!("linear slope must be finite and ≥ 0, got {slope}"));
                }
                if !(0.0..=1.0).contains(max) {
                    return bad(format!("linear max must be in [0, 1], got {max}"));
                }
                Ok(())
            }
            Penalty::Step(steps) => {
                let mut prev: Option<(f64, f64)> = None;
                for &(t, r) in steps {
                    if !(0.0..1.0).contains(&t) {
                        return bad(format!("step threshold must be in [0, 1), got {t}"));
                    }
                    if !(0.0..=1.0).contains(&r) {
                        return bad(format!("step refund must be in [0, 1], got {r}"));
                    }
                    if let Some((pt, pr)) = prev {
                        if t <= pt || r < pr {
                            return bad(format!(
                                "steps must have increasing thresholds and non-decreasing \
                                 refunds, got ({pt}, {pr}) then ({t}, {r})"
                            ));
                        }
                    }
                    prev = Some((t, r));
                }
                Ok(())
            }
        }
    }
}
