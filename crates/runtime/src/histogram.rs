//! A small log-bucketed histogram for latencies and costs.
//!
//! Values are whole units (nanoseconds, cost units). Below 16 every value has its own bucket;
//! above, each power of two is split into 16 buckets, so a bucket spans at most 1/16 of its
//! lower bound and a quantile (reported as the bucket's midpoint, clamped to the exact minimum
//! and maximum) is within 3.2 % of the true value. Memory grows with the largest value seen:
//! about 4 KiB for values up to one second in nanoseconds, which keeps one histogram per
//! tenant affordable with thousands of tenants.

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;

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
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

fn index(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // ≥ SUB_BITS
    let shift = e - SUB_BITS;
    let mantissa = (v >> shift) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + mantissa) as usize
}

/// The lowest value and width of bucket `i`.
fn bucket(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let mantissa = i % SUB;
    let shift = e - u64::from(SUB_BITS);
    ((SUB + mantissa) << shift, 1 << shift)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram::default()
    }

    /// Record one value.
    pub fn record(&mut self, v: u64) {
        let i = index(v);
        if i >= self.counts.len() {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.count += 1;
        self.sum += u128::from(v);
    }

    /// Record a non-negative float, rounded to a whole unit (NaN and negatives count as 0).
    pub fn record_f64(&mut self, v: f64) {
        let v = if v.is_finite() && v > 0.0 {
            v.round().min(u64::MAX as f64) as u64
        } else {
            0
        };
        self.record(v);
    }

    /// Add every value of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        if self.count == 0 || other.min < self.min {
            self.min = other.min;
        }
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// Smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        self.min
    }

    /// Largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean of the values recorded (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }

    /// The value at quantile `q` (0 ≤ q ≤ 1; out-of-range `q` is clamped), within 3.2 %.
    /// 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        let rank = ((q * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bucket(i);
                let mid = lo + (width - 1) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Clear every value.
    pub fn reset(&mut self) {
        *self = Histogram::default();
    }
}

/// Serialized as a summary: count, min, mean, p50, p90, p99, p999, max.
impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Histogram", 8)?;
        st.serialize_field("count", &self.count)?;
        st.serialize_field("min", &self.min)?;
        st.serialize_field("mean", &self.mean())?;
        st.serialize_field("p50", &self.quantile(0.5))?;
        st.serialize_field("p90", &self.quantile(0.9))?;
        st.serialize_field("p99", &self.quantile(0.99))?;
        st.serialize_field("p999", &self.quantile(0.999))?;
        st.serialize_field("max", &self.max)?;
        st.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_line() {
        // Every value falls in the bucket whose range contains it, and buckets are contiguous.
        let mut next = 0u64;
        for i in 0..700 {
            let (lo, w) = bucket(i);
            assert_eq!(lo, next, "bucket {i}");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo + w - 1), i);
            next = lo + w;
        }
        assert_eq!(index(u64::MAX), index(u64::MAX - 1));
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
