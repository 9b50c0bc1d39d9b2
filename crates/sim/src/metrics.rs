//! What a run measures: per-tenant counts, work, latency histograms and service lag against
//! the exact GPS reference; the Gini index over time; thread occupancy. Everything is bounded
//! in memory: time series are thinned to at most `max_points` points, so memory grows with
//! tenants and outstanding requests, not with simulated duration.

use hdrhistogram::Histogram;
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

/// Per-tenant latency histogram (nanoseconds, 3 significant digits).
#[derive(Clone, Debug)]
pub struct Latency(Histogram<u32>);

impl Default for Latency {
    fn default() -> Self {
        Latency(Histogram::new(3).expect("3 significant digits is valid"))
    }
}

impl Latency {
    /// Record one latency in seconds.
    pub fn record(&mut self, seconds: f64) {
        let ns = (seconds * 1e9).round().max(1.0) as u64;
        // `record` grows the auto-resizing histogram; `saturating_record` would clamp.
        if self.0.record(ns).is_err() {
            self.0.saturating_record(ns);
        }
    }
    /// The `q` quantile in seconds (NaN when empty: `null` in JSON).
    pub fn quantile(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            f64::NAN
        } else {
            self.0.value_at_quantile(q) as f64 / 1e9
        }
    }
    /// Mean in seconds.
    pub fn mean(&self) -> f64 {
        self.0.mean() / 1e9
    }
    /// Samples.
    pub fn len(&self) -> u64 {
        self.0.len()
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
