//! The runtime's histogram of latencies and costs: the core's one
//! [`Histogram`](fairlane_core::histogram::Histogram) in the log-linear layout with 16
//! buckets per power of two, and the runtime's quantile rule.
//!
//! Values are whole units (nanoseconds, cost units). Below 32 every value has its own bucket;
//! above, each power of two is split into 16 buckets, so a bucket spans at most 1/16 of its
//! lower bound and a quantile (reported as the bucket's midpoint, clamped to the exact minimum
//! and maximum) is within 3.2 % of the true value. The counts of all values fit in one page
//! of 1,024 one-byte counts (1 KiB, and 4 KiB of carries once a count passes 255), which
//! keeps one histogram per tenant affordable with thousands of tenants.

use fairlane_core::histogram::{self, LogLinear};
use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// `v.round().min(u64::MAX as f64) as u64` for a finite `v > 0`, without the call to libm's
/// `round`: below 2^53 the truncation and the fraction are exact (half rounds away from
/// zero, as `round`); from 2^53 on every value is whole.
#[inline]
fn round_u64(v: f64) -> u64 {
    if v >= u64::MAX as f64 {
        return u64::MAX;
    }
    let whole = v as u64;
    if v - whole as f64 >= 0.5 {
        whole + 1
    } else {
        whole
    }
}

/// A log-bucketed histogram of `u64` values with exact count, sum, minimum and maximum.
///
/// ```
/// use fairlane_runtime::Histogram;
/// let mut h = Histogram::new();
/// for v in 1..=1000u64 {
///     h.record(v);
/// }
/// assert_eq!(h.count(), 1000);
/// assert_eq!(h.max(), 1000);
/// let p50 = h.quantile(0.5);
/// assert!((p50 as f64 - 500.0).abs() <= 500.0 * 0.032);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram(histogram::Histogram<LogLinear<16, 1024>>);

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram::default()
    }

    /// Record one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.0.record(v);
    }

    /// Record a non-negative float, rounded to a whole unit (NaN and negatives count as 0).
    pub fn record_f64(&mut self, v: f64) {
        let v = if v.is_finite() && v > 0.0 {
            round_u64(v)
        } else {
            0
        };
        self.record(v);
    }

    /// Add every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        self.0.merge(&other.0);
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.0.sum()
    }

    /// Smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        self.0.min()
    }

    /// Largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.0.max()
    }

    /// Mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        let n = self.0.count();
        if n == 0 {
            0.0
        } else {
            self.0.sum() as f64 / n as f64
        }
    }

    /// The value at quantile `q` (0 ≤ q ≤ 1; out-of-range `q` is clamped), within 3.2 %:
    /// the midpoint of the bucket where the count reaches ⌈q·n⌉, clamped to the exact
    /// minimum and maximum. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        let n = self.0.count();
        if n == 0 {
            return 0;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        match self.0.index_at_rank(rank) {
            Some(i) => {
                let (lo, width) = self.0.range(i);
                let mid = lo + (width - 1) / 2;
                mid.clamp(self.0.min(), self.0.max())
            }
            None => self.0.max(),
        }
    }

    /// Clear every value.
    pub fn reset(&mut self) {
        self.0.reset();
    }
}

/// Serialized as a summary: count, min, mean, p50, p90, p99, p999, max.
impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Histogram", 8)?;
        st.serialize_field("count", &self.count())?;
        st.serialize_field("min", &self.min())?;
        st.serialize_field("mean", &self.mean())?;
        st.serialize_field("p50", &self.quantile(0.5))?;
        st.serialize_field("p90", &self.quantile(0.9))?;
        st.serialize_field("p99", &self.quantile(0.99))?;
        st.serialize_field("p999", &self.quantile(0.999))?;
        st.serialize_field("max", &self.max())?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_u64_is_round() {
        let mut vs = vec![
            0.1,
            0.5,
            0.49999999999999994,
            1.5,
            2.5,
            1e-300,
            (1u64 << 52) as f64 + 0.5,
            (1u64 << 53) as f64,
            (1u64 << 63) as f64,
            u64::MAX as f64,
            1e300,
            f64::MAX,
        ];
        let mut x = 0.37_f64;
        for _ in 0..2000 {
            x = x * 1.037 + 0.25;
            vs.push(x);
            vs.push(x.floor() + 0.5);
        }
        for v in vs {
            assert_eq!(round_u64(v), v.round().min(u64::MAX as f64) as u64, "{v}");
        }
    }

    /// The layout the module documents: below 32 a bucket per value, above, 16 buckets per
    /// power of two (each value in a bucket `2^(⌊log2 v⌋ − 4)` wide, aligned to its width).
    #[test]
    fn quantiles_report_the_documented_buckets_midpoint() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x >> (x % 64);
            let width = if v < 32 {
                1
            } else {
                1u64 << (63 - v.leading_zeros() - 4)
            };
            let lo = v / width * width;
            // Two values of one bucket: the median is that bucket's midpoint (clamped).
            let mut h = Histogram::new();
            h.record(lo);
            h.record(lo + (width - 1));
            assert_eq!(h.quantile(0.5), lo + (width - 1) / 2, "{v}");
        }
    }

    #[test]
    fn quantiles_are_within_the_stated_error() {
        // Deterministic spread over six orders of magnitude, checked against exact quantiles.
        let mut values = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let exp = (x % 20) as u32;
            values.push((1u64 << exp) + (x >> 40) % (1u64 << exp));
        }
        let mut h = Histogram::new();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for q in [0.01, 0.1, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
            let exact = values[rank - 1] as f64;
            let got = h.quantile(q) as f64;
            assert!(
                (got - exact).abs() <= exact * 0.032 + 0.5,
                "q={q}: exact {exact}, got {got}"
            );
        }
        assert_eq!(h.min(), values[0]);
        assert_eq!(h.max(), *values.last().unwrap());
        assert_eq!(h.sum(), values.iter().map(|&v| u128::from(v)).sum::<u128>());
    }

    #[test]
    fn merge_equals_recording_both() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        let mut both = Histogram::new();
        for v in 0..500u64 {
            a.record(v * 3);
            both.record(v * 3);
        }
        for v in 0..50u64 {
            b.record(v * 10_007);
            both.record(v * 10_007);
        }
        a.merge(&b);
        assert_eq!(a, both);
        assert_eq!(Histogram::new().quantile(0.5), 0);
    }

    #[test]
    fn floats_are_rounded_and_bad_values_count_as_zero() {
        let mut h = Histogram::new();
        h.record_f64(2.6);
        h.record_f64(f64::NAN);
        h.record_f64(-5.0);
        assert_eq!(h.count(), 3);
        assert_eq!(h.max(), 3);
        assert_eq!(h.min(), 0);
    }
}
