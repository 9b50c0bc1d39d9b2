//! What a run measures: per-tenant counts, work, latency histograms and service lag against
//! the exact GPS reference; the Gini index over time; thread occupancy. Everything is bounded
//! in memory: time series are thinned to at most `max_points` points, so memory grows with
//! tenants and outstanding requests, not with simulated duration.

use fairlane_core::histogram::{Histogram, LogLinear};
use serde::Serialize;

/// A time series that keeps at most `cap` points by dropping every other point (and sampling
/// half as often) whenever it fills up.
#[derive(Clone, Debug)]
pub struct Thinned<V> {
    stride: u64,
    count: u64,
    cap: usize,
    /// The kept points.
    pub points: Vec<(f64, V)>,
}

impl<V> Thinned<V> {
    /// An empty series of at most `cap` (≥ 2) points.
    pub fn new(cap: usize) -> Self {
        Thinned {
            stride: 1,
            count: 0,
            cap: cap.max(2),
            points: Vec::new(),
        }
    }

    /// Offer the next sample; kept when it falls on the current stride.
    pub fn push(&mut self, t: f64, v: V) {
        if self.count.is_multiple_of(self.stride) {
            self.points.push((t, v));
            if self.points.len() >= self.cap {
                let mut i = 0;
                self.points.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.stride *= 2;
            }
        }
        self.count += 1;
    }

    /// How many samples one kept point stands for.
    pub fn stride(&self) -> u64 {
        self.stride
    }
}

/// Mean and variance online (Welford), with extremes.
#[derive(Clone, Copy, Debug, Default)]
pub struct Moments {
    n: u64,
    mean: f64,
    m2: f64,
    min: f64,
    max: f64,
}

impl Moments {
    /// Add a sample.
    pub fn add(&mut self, x: f64) {
        if self.n == 0 {
            self.min = x;
            self.max = x;
        }
        self.n += 1;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
        self.min = self.min.min(x);
        self.max = self.max.max(x);
    }
    /// Samples seen.
    pub fn count(&self) -> u64 {
        self.n
    }
    /// Mean (0 with no samples).
    pub fn mean(&self) -> f64 {
        self.mean
    }
    /// Population standard deviation (0 with fewer than two samples).
    pub fn std(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.m2 / self.n as f64).sqrt()
        }
    }
    /// Smallest sample.
    pub fn min(&self) -> f64 {
        self.min
    }
    /// Largest sample.
    pub fn max(&self) -> f64 {
        self.max
    }
}

/// The Gini index of non-negative values: 0 when all equal, towards 1 when one has all.
/// `G = Σ_i (2i − n − 1)·x_(i) / (n·Σx)` over the sorted values (i from 1).
pub fn gini(values: &mut [f64]) -> f64 {
    let n = values.len();
    let total: f64 = values.iter().sum();
    if n < 2 || total <= 0.0 {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let s: f64 = values
        .iter()
        .enumerate()
        .map(|(i, x)| (2.0 * (i as f64 + 1.0) - n as f64 - 1.0) * x)
        .sum();
    s / (n as f64 * total)
}

/// Per-tenant latency histogram (nanoseconds, 3 significant digits): the core's one
/// [`Histogram`] in HdrHistogram's layout with 1,024 buckets per power of two
/// ([`LogLinear<1024>`]: 2,048 sub-buckets, values below 2,048 ns exact), so the quantiles and
/// means reported are those of `hdrhistogram::Histogram::<u32>::new(3)` to the bit (a test
/// checks it against the crate). Recording is an index computation and one increment into
/// pages of one-byte counts allocated where the tenant's latencies fall (see
/// `fairlane_core::histogram`).
///
/// The simulator's rules, kept here: a latency in seconds is counted as whole nanoseconds
/// (rounded, at least 1, at most 2⁶³ − 1); a quantile is the highest value of its bucket
/// (the lowest for q = 0); the mean counts each value at the middle of its bucket.
#[derive(Clone, Debug, Default)]
pub struct Latency(Histogram<LogLinear<1024>>);

/// The largest value recorded: larger ones are clamped to it (about 146 years in ns).
const MAX_VALUE: u64 = u64::MAX >> 1;

impl Latency {
    /// `seconds` in whole nanoseconds as `(seconds · 1e9).round().max(1.0) as u64`, clamped to
    /// `MAX_VALUE`, without the `round` call (a libm call on baseline x86-64).
    #[inline]
    fn nanos(seconds: f64) -> u64 {
        let x = seconds * 1e9;
        if x.is_nan() || x < 1.0 {
            return 1; // below one nanosecond, negative or NaN
        }
        if x >= MAX_VALUE as f64 {
            return MAX_VALUE;
        }
        // Truncation, exact here; through i64 (x < 2^63), which x86-64 converts in one
        // instruction each way where u64 takes a dozen.
        let i = x as i64;
        // `x − i` is exact (the fractional bits of x); halves round away from zero.
        if x - i as f64 >= 0.5 {
            i as u64 + 1
        } else {
            i as u64
        }
    }

    /// Record one latency in seconds.
    #[inline]
    pub fn record(&mut self, seconds: f64) {
        self.0.record(Self::nanos(seconds));
    }

    /// The `q` quantile in seconds (NaN when empty: `null` in JSON): the highest value
    /// equivalent to the count at which the running total first reaches ⌈q·n⌉ (at least 1).
    pub fn quantile(&self, q: f64) -> f64 {
        let n = self.0.count();
        if n == 0 {
            return f64::NAN;
        }
        let q = q.min(1.0);
        let target = ((q * n as f64).ceil() as u64).max(1);
        match self.0.index_at_rank(target) {
            Some(i) => {
                let (low, width) = self.0.range(i);
                let v = if q == 0.0 { low } else { low + width - 1 };
                v as f64 / 1e9
            }
            None => 0.0,
        }
    }

    /// Mean in seconds: each count at the middle of its range (rounded up), summed in index
    /// order as `Σ mid·count / n`.
    pub fn mean(&self) -> f64 {
        let n = self.0.count();
        if n == 0 {
            return 0.0;
        }
        let n = n as f64;
        let mut total = 0.0f64;
        self.0.for_each(|i, c| {
            let (low, width) = self.0.range(i);
            total += (low + (width >> 1)) as f64 * c as f64 / n;
        });
        total / 1e9
    }

    /// Samples.
    pub fn len(&self) -> u64 {
        self.0.count()
    }

    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One tenant's results.
#[derive(Clone, Debug, Serialize)]
pub struct TenantResult {
    /// Name.
    pub name: String,
    /// Group.
    pub group: String,
    /// Weight.
    pub weight: f64,
    /// Requests that arrived (after warmup).
    pub arrived: u64,
    /// Requests completed (after warmup).
    pub completed: u64,
    /// Cost units completed (after warmup).
    pub work: f64,
    /// Mean request cost of completed requests.
    pub mean_cost: f64,
    /// Standard deviation of service lag in seconds (lag units / per-worker rate, 2DFQ §6).
    pub lag_std: f64,
    /// The same in cost units.
    pub lag_std_units: f64,
    /// Mean service lag in seconds (positive: behind GPS).
    pub lag_mean: f64,
    /// Least and largest lag seen, seconds.
    pub lag_min: f64,
    /// Largest lag, seconds.
    pub lag_max: f64,
    /// Latency percentiles in seconds (arrival to completion).
    pub latency_p50: f64,
    /// p99.
    pub latency_p99: f64,
    /// p99.9.
    pub latency_p999: f64,
    /// Mean latency.
    pub latency_mean: f64,
}

/// A tracked tenant's time series.
#[derive(Clone, Debug, Serialize)]
pub struct TenantSeries {
    /// Tenant name.
    pub name: String,
    /// `(t, units per second)` received in each sampling interval.
    pub service: Vec<(f64, f64)>,
    /// `(t, seconds)` of service lag (GPS − actual, in seconds of one worker).
    pub lag: Vec<(f64, f64)>,
}

/// Thread occupancy: the cost of the request each worker ran at each sampled instant.
#[derive(Clone, Debug, Serialize)]
pub struct Occupancy {
    /// Time of the first column.
    pub t0: f64,
    /// Seconds between columns.
    pub dt: f64,
    /// `cells[worker][column]`: cost running, or `None` when idle.
    pub cells: Vec<Vec<Option<f32>>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use hdrhistogram::Histogram;

    /// The same figures from the hdrhistogram crate, the reference `Latency` reproduces.
    fn reference(samples: &[f64]) -> Histogram<u32> {
        let mut h = Histogram::<u32>::new(3).unwrap();
        for &s in samples {
            let ns = (s * 1e9).round().max(1.0) as u64;
            if h.record(ns).is_err() {
                h.saturating_record(ns);
            }
        }
        h
    }

    #[test]
    fn latency_matches_hdrhistogram_to_the_bit() {
        let mut rng = Rng::new(3, 14);
        let qs = [0.0, 1e-6, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0, 1.5];
        for case in 0..40 {
            // Magnitudes from ns to hours, narrow and wide spreads, exact bucket edges.
            let n = 1 + rng.below(3000) as usize;
            let scale = 10f64.powi(rng.below(13) as i32 - 9);
            let mut samples: Vec<f64> = (0..n)
                .map(|_| match rng.below(4) {
                    0 => scale * rng.uniform(),
                    1 => scale * (1.0 + 0.1 * rng.normal()).abs(),
                    2 => scale * rng.exp(1.0) * 1e3,
                    _ => (1u64 << rng.below(40)) as f64 / 1e9,
                })
                .collect();
            if case == 0 {
                samples.extend([0.0, -1.0, 2047e-9, 2048e-9, 2049e-9, 4095e-9, 4096e-9]);
                // Halves and near-halves (rounding), and the very large.
                samples.extend([0.5e-9, 1.5e-9, 2.5e-9, 0.5f64.next_down() * 1e-9, 1e-300]);
                samples.extend([1e7, 4_503_599.627_370_495, 9_007_199.254_740_993]);
            }
            let h = reference(&samples);
            let mut l = Latency::default();
            for &s in &samples {
                l.record(s);
            }
            assert_eq!(l.len(), h.len());
            assert_eq!(
                l.mean().to_bits(),
                (h.mean() / 1e9).to_bits(),
                "case {case}: mean"
            );
            for q in qs {
                assert_eq!(
                    l.quantile(q).to_bits(),
                    (h.value_at_quantile(q) as f64 / 1e9).to_bits(),
                    "case {case}: quantile {q}"
                );
            }
        }
        let empty = Latency::default();
        assert!(empty.is_empty() && empty.quantile(0.5).is_nan());
    }

    #[test]
    fn counts_past_a_byte_carry_into_their_high_part() {
        // Values repeated past 255 and 65,535 times (one count's low byte wraps many times),
        // beside rarer ones in the same page and in others: the same quantiles and mean.
        let mut rng = Rng::new(3, 15);
        let mut samples = Vec::new();
        for (value, times) in [
            (1.5e-3, 70_000),
            (1.5007e-3, 256),
            (1.5011e-3, 255),
            (7e-2, 300),
        ] {
            samples.extend(std::iter::repeat_n(value, times));
        }
        samples.extend((0..5_000).map(|_| 1e-3 + 1e-3 * rng.uniform()));
        let h = reference(&samples);
        let mut l = Latency::default();
        // In a scrambled order, so carries happen between other counts.
        for k in 0..samples.len() {
            let j = k + rng.below((samples.len() - k) as u64) as usize;
            samples.swap(k, j);
            l.record(samples[k]);
        }
        assert_eq!(l.len(), h.len());
        assert_eq!(l.mean().to_bits(), (h.mean() / 1e9).to_bits());
        for q in [0.0, 0.01, 0.5, 0.9, 0.93, 0.99, 0.999, 1.0] {
            assert_eq!(
                l.quantile(q).to_bits(),
                (h.value_at_quantile(q) as f64 / 1e9).to_bits(),
                "quantile {q}"
            );
        }
    }
}
