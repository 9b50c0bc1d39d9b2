//! The laws a workload draws from: cost distributions ([`CostDist`], and the table-free
//! [`SimpleCost`] the engine keeps in a tenant's hot cache line) and arrival processes
//! ([`Arrival`]), each built from its spec section and checked there.

use std::sync::Arc;

use super::spec::CostSpec;
use super::trace::TraceRow;
use crate::error::{non_negative, positive, FieldError};
use crate::rng::Rng;

/// A cost distribution ready to sample.
#[derive(Clone, Debug, PartialEq)]
pub enum CostDist {
    /// A law a few numbers describe (constant, normal, log-normal, exponential, uniform).
    Simple(SimpleCost),
    /// One of these values uniformly.
    Empirical(Arc<[f64]>),
    /// Bins `(low, high)` with cumulative weights.
    Histogram {
        /// The bins.
        bins: Arc<[(f64, f64)]>,
        /// Cumulative weights, last = 1.
        cum: Arc<[f64]>,
    },
    /// Draw from the pool of every other tenant's classes.
    Pooled,
}

/// Smallest cost a draw can return: costs must be > 0.
const MIN_COST: f64 = 1e-9;

/// A cost law that needs no table: the [`CostDist::Simple`] laws, which a few numbers
/// describe. The engine keeps a one-class tenant's law in the tenant's hot cache line
/// ([`TenantDef::simple_draw`]) instead of reading the spec's class list for every request;
/// [`CostDist::sample`] draws these laws through [`SimpleCost::sample`] too, so both paths
/// compute the same numbers from the same stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SimpleCost {
    /// Always this.
    Constant(f64),
    /// Normal, redrawn when not positive.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// exp(N(mu, sigma²)).
    LogNormal {
        /// Mean of the log.
        mu: f64,
        /// σ of the log.
        sigma: f64,
    },
    /// Exponential with this mean.
    Exponential(f64),
    /// Uniform on [min, max].
    Uniform(f64, f64),
}

impl SimpleCost {
    /// One draw (what [`CostDist::sample`] draws for the same law).
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let x = match *self {
            SimpleCost::Constant(v) => v,
            SimpleCost::Normal { mean, std } => {
                // Redraw non-positive values (at most 16 times, then the mean): a cost is > 0.
                let mut x = mean;
                for _ in 0..16 {
                    let y = mean + std * rng.normal();
                    if y > 0.0 {
                        x = y;
                        break;
                    }
                }
                x
            }
            SimpleCost::LogNormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
            SimpleCost::Exponential(mean) => rng.exp(mean),
            SimpleCost::Uniform(a, b) => a + (b - a) * rng.uniform(),
        };
        x.max(MIN_COST)
    }

    /// The law's mean (the normal's before redrawing).
    pub fn mean(&self) -> f64 {
        match *self {
            SimpleCost::Constant(v) => v,
            SimpleCost::Normal { mean, .. } => mean,
            SimpleCost::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            SimpleCost::Exponential(m) => m,
            SimpleCost::Uniform(a, b) => (a + b) / 2.0,
        }
    }
}

impl CostDist {
    /// The law as a [`SimpleCost`], when it needs no table.
    pub fn simple(&self) -> Option<SimpleCost> {
        match *self {
            CostDist::Simple(law) => Some(law),
            _ => None,
        }
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        if let Some(simple) = self.simple() {
            return simple.sample(rng);
        }
        let x = match self {
            CostDist::Empirical(v) => v[rng.below(v.len() as u64) as usize],
            CostDist::Histogram { bins, cum } => {
                let u = rng.uniform();
                let i = cum.partition_point(|&c| c <= u).min(bins.len() - 1);
                let (lo, hi) = bins[i];
                lo + (hi - lo) * rng.uniform()
            }
            CostDist::Pooled => unreachable!("pooled costs are drawn by the tenant"),
            CostDist::Simple(_) => unreachable!("simple laws are drawn above"),
        };
        x.max(MIN_COST)
    }

    /// The distribution's mean (the normal's before redrawing).
    pub fn mean(&self) -> f64 {
        match self {
            CostDist::Simple(law) => law.mean(),
            CostDist::Empirical(v) => v.iter().sum::<f64>() / v.len() as f64,
            CostDist::Histogram { bins, cum } => {
                let mut prev = 0.0;
                let mut m = 0.0;
                for (&(lo, hi), &c) in bins.iter().zip(cum.iter()) {
                    m += (c - prev) * (lo + hi) / 2.0;
                    prev = c;
                }
                m
            }
            CostDist::Pooled => f64::NAN,
        }
    }
}

/// How a tenant's requests arrive, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    /// Always `outstanding` requests in the system; GPS sees infinite demand.
    Backlogged {
        /// Outstanding requests.
        outstanding: usize,
    },
    /// Poisson.
    Poisson {
        /// Requests per second.
        rate: f64,
    },
    /// Poisson while ON.
    OnOff {
        /// Requests per second while ON.
        rate: f64,
        /// Mean ON seconds.
        on: f64,
        /// Mean OFF seconds.
        off: f64,
        /// ON and OFF last exactly `on` and `off` seconds, starting ON.
        periodic: bool,
    },
    /// Closed loop.
    Closed {
        /// Clients.
        clients: usize,
        /// Mean think seconds.
        think: f64,
    },
    /// Trace rows (time-sorted, already sped up).
    Trace(Arc<[TraceRow]>),
}

impl Arrival {
    /// Mean requests per second offered (closed loops and backlogged: unknown, NaN).
    pub fn mean_rate(&self) -> f64 {
        match self {
            Arrival::Poisson { rate } => *rate,
            Arrival::OnOff { rate, on, off, .. } => rate * on / (on + off),
            Arrival::Trace(rows) => match (rows.first(), rows.last()) {
                (Some(a), Some(b)) if b.time > a.time => rows.len() as f64 / (b.time - a.time),
                _ => f64::NAN,
            },
            _ => f64::NAN,
        }
    }
}

impl CostSpec {
    /// The distribution, its parameters checked. Errors name the field (`std`).
    pub fn resolve(&self) -> Result<CostDist, FieldError> {
        Ok(match self {
            CostSpec::Constant { value } => {
                CostDist::Simple(SimpleCost::Constant(positive("value", *value)?))
            }
            CostSpec::Normal { mean, std } => CostDist::Simple(SimpleCost::Normal {
                mean: positive("mean", *mean)?,
                std: non_negative("std", *std)?,
            }),
            CostSpec::Lognormal {
                mean,
                cov,
                median,
                sigma,
            } => lognormal(*mean, *cov, *median, *sigma)?,
            CostSpec::Exponential { mean } => {
                CostDist::Simple(SimpleCost::Exponential(positive("mean", *mean)?))
            }
            CostSpec::Uniform { min, max } => {
                let a = positive("min", *min)?;
                let b = positive("max", *max)?;
                if b < a {
                    return Err(FieldError::new(
                        "max",
                        format!("must be ≥ min ({a}), got {b}"),
                    ));
                }
                CostDist::Simple(SimpleCost::Uniform(a, b))
            }
            CostSpec::Empirical { values } => {
                if values.is_empty() {
                    return Err(FieldError::new("values", "needs at least one value"));
                }
                for (i, &v) in values.iter().enumerate() {
                    positive(&format!("values[{i}]"), v)?;
                }
                CostDist::Empirical(values.clone().into())
            }
            CostSpec::Histogram { bins } => histogram(bins)?,
            CostSpec::Pooled => CostDist::Pooled,
        })
    }
}

/// A log-normal law from `mean` and `cov`, or from `median` and `sigma`.
fn lognormal(
    mean: Option<f64>,
    cov: Option<f64>,
    median: Option<f64>,
    sigma: Option<f64>,
) -> Result<CostDist, FieldError> {
    match (mean, cov, median, sigma) {
        (Some(m), Some(c), None, None) => {
            let m = positive("mean", m)?;
            let c = non_negative("cov", c)?;
            let s2 = (1.0 + c * c).ln();
            Ok(CostDist::Simple(SimpleCost::LogNormal {
                mu: m.ln() - s2 / 2.0,
                sigma: s2.sqrt(),
            }))
        }
        (None, None, Some(md), Some(s)) => Ok(CostDist::Simple(SimpleCost::LogNormal {
            mu: positive("median", md)?.ln(),
            sigma: non_negative("sigma", s)?,
        })),
        _ => Err(FieldError::new(
            "kind",
            "lognormal takes either `mean` and `cov`, or `median` and `sigma`",
        )),
    }
}

/// Bins `[low, high, weight]`, uniform inside a bin.
fn histogram(bins: &[[f64; 3]]) -> Result<CostDist, FieldError> {
    if bins.is_empty() {
        return Err(FieldError::new(
            "bins",
            "needs at least one [low, high, weight] bin",
        ));
    }
    let mut total = 0.0;
    for (i, &[lo, hi, w]) in bins.iter().enumerate() {
        let f = format!("bins[{i}]");
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && hi >= lo) {
            return Err(FieldError::new(
                f,
                format!("needs 0 < low ≤ high, got [{lo}, {hi}]"),
            ));
        }
        non_negative(&f, w)?;
        total += w;
    }
    if total <= 0.0 {
        return Err(FieldError::new("bins", "the weights sum to 0"));
    }
    let mut acc = 0.0;
    let cum: Vec<f64> = bins
        .iter()
        .map(|b| {
            acc += b[2];
            acc / total
        })
        .collect();
    Ok(CostDist::Histogram {
        bins: bins.iter().map(|b| (b[0], b[1])).collect(),
        cum: cum.into(),
    })
}
