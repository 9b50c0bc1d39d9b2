//! The fixed-bucket latency histogram the proxy's tenants and priority levels record into,
//! and the quantile read from its counts.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::workers::PerWorker;

/// Histogram bucket upper bounds, in seconds (plus +Inf).
pub const BUCKETS: [f64; 18] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// A fixed-bucket histogram of seconds.
#[derive(Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Record one value (seconds).
    pub fn record(&self, secs: f64) {
        let i = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add((secs.max(0.0) * 1e9) as u64, Relaxed);
    }
    /// Per-bucket counts (not cumulative), the last one being +Inf.
    pub fn counts(&self) -> Vec<u64> {
        self.counts.iter().map(|c| c.load(Relaxed)).collect()
    }
    /// Sum of the recorded values (seconds).
    pub fn sum(&self) -> f64 {
        self.sum_ns.load(Relaxed) as f64 / 1e9
    }
}

/// A histogram kept per worker runtime ([`PerWorker`]): recorded into on the caller's
/// worker, read as the sum of every worker's counts.
pub type WorkerHistogram = PerWorker<Histogram>;

impl WorkerHistogram {
    /// Record one value (seconds) on this worker's copy.
    pub fn record(&self, secs: f64) {
        self.local().record(secs);
    }
    /// Per-bucket counts over every worker (not cumulative), the last one being +Inf.
    pub fn counts(&self) -> Vec<u64> {
        let mut out = vec![0; BUCKETS.len() + 1];
        for h in self.all() {
            for (o, c) in out.iter_mut().zip(&h.counts) {
                *o += c.load(Relaxed);
            }
        }
        out
    }
    /// Sum of the recorded values over every worker (seconds).
    pub fn sum(&self) -> f64 {
        let ns = self.all().map(|h| h.sum_ns.load(Relaxed)).sum::<u64>();
        ns as f64 / 1e9
    }
}

/// Estimate the `q` quantile from per-bucket counts (linear within a bucket).
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = (q * total as f64).max(1.0);
    let mut seen = 0.0;
    for (i, &c) in counts.iter().enumerate() {
        let next = seen + c as f64;
        if next >= rank && c > 0 {
            let lo = if i == 0 { 0.0 } else { BUCKETS[i - 1] };
            let hi = BUCKETS.get(i).copied().unwrap_or(lo * 2.0);
            return Some(lo + (hi - lo) * ((rank - seen) / c as f64));
        }
        seen = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_from_buckets() {
        let h = Histogram::default();
        for _ in 0..99 {
            h.record(0.003);
        }
        h.record(2.0);
        let c = h.counts();
        let p50 = quantile(&c, 0.5).unwrap();
        assert!((0.0025..=0.005).contains(&p50), "{p50}");
        let p999 = quantile(&c, 0.999).unwrap();
        assert!((1.0..=2.5).contains(&p999), "{p999}");
        assert!(quantile(&[0; 19], 0.5).is_none());
        assert!((h.sum() - (99.0 * 0.003 + 2.0)).abs() < 1e-6);
    }

    #[test]
    fn worker_histograms_read_as_one() {
        let w = WorkerHistogram::default();
        w.record(0.003);
        w.all().last().unwrap().record(2.0);
        let c = w.counts();
        assert_eq!(c.iter().sum::<u64>(), 2);
        assert_eq!(c[BUCKETS.iter().position(|&b| b >= 2.0).unwrap()], 1);
        assert!((w.sum() - 2.003).abs() < 1e-6);
    }
}
