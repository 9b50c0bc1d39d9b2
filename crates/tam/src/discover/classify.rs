//! The rules that turn measured totals into a stage's type and resource vector.
//!
//! - **Type.** A stage is `on_demand` when its thread count changed during the run (counting
//!   only counts held for two consecutive samples or more) or more distinct threads passed
//!   through it than were ever alive at once (threads created per connection or request);
//!   otherwise it is bounded (`general`: from outside we cannot
//!   tell whether its queue takes a pluggable scheduler).
//! - **Extensive.** A resource is extensive for a stage whose share of the tree's total is
//!   at least the threshold (5% by default, as the paper's tracer), provided the total is
//!   above a noise floor ([`NOISE_FLOOR`]).
//! - **Unknown.** An extensive disk or network resource is `unknown` when fewer than half
//!   of the stage's active thread-intervals used it: the stage does it for some work and
//!   not for other work (the paper's "depends on the request").

use super::accumulate::StageStats;
use crate::model::{Resource, Scheduling, Usage};

/// Totals below which no stage is extensive for a resource: CPU ticks, disk bytes,
/// network bytes over the whole run (0.1 s of CPU, 1 MiB, 64 KiB).
pub const NOISE_FLOOR: [u64; 3] = [10, 1 << 20, 64 << 10];

/// Share of active intervals below which an extensive resource is `unknown`.
pub const UNKNOWN_BELOW: f64 = 0.5;

/// A stage's measured type and resource use.
#[derive(Debug, Clone)]
pub struct Classified {
    /// Bounded (`general`) or `on_demand`.
    pub scheduling: Scheduling,
    /// Shares of the tree's CPU, disk and network, 0..=1.
    pub shares: [f64; 3],
    /// Usage of CPU, I/O and network.
    pub usage: [Usage; 3],
    /// Fraction of active thread-intervals with disk I/O and with network traffic.
    pub hit: [f64; 2],
    /// Pearson correlation of the stage's thread count with the tree's connection count
    /// (`None` when either is constant).
    pub follows_connections: Option<f64>,
}

/// The three measured resources, in the order of [`Classified::usage`].
pub const MEASURED: [Resource; 3] = [Resource::Cpu, Resource::Io, Resource::Network];

/// Classifies one stage given the tree's totals (CPU ticks, disk bytes, network bytes).
pub fn classify(
    s: &StageStats,
    totals: [u64; 3],
    connections: &[usize],
    threshold: f64,
) -> Classified {
    // Counts held for at least two consecutive samples: a one-sample blip is a fork
    // caught before it renamed itself, not a stage that grows.
    let held: Vec<usize> = s
        .counts
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    let min = held.iter().copied().min().unwrap_or(0);
    let max = held.iter().copied().max().unwrap_or(0);
    let peak = s.counts.iter().copied().max().unwrap_or(0);
    let on_demand = min != max || s.distinct_threads > peak;
    let mine = [s.cpu_ticks, s.read_bytes + s.write_bytes, s.net_bytes];
    let mut shares = [0.0; 3];
    let mut usage = [Usage::False; 3];
    let frac = |n: u64| {
        if s.active_intervals == 0 {
            0.0
        } else {
            n as f64 / s.active_intervals as f64
        }
    };
    let hit = [frac(s.io_intervals), frac(s.net_intervals)];
    for i in 0..3 {
        shares[i] = if totals[i] == 0 {
            0.0
        } else {
            mine[i] as f64 / totals[i] as f64
        };
        if totals[i] >= NOISE_FLOOR[i] && shares[i] >= threshold {
            usage[i] = if i > 0 && hit[i - 1] < UNKNOWN_BELOW {
                Usage::Unknown
            } else {
                Usage::True
            };
        }
    }
    let counts: Vec<f64> = s.counts.iter().map(|&c| c as f64).collect();
    let conns: Vec<f64> = connections.iter().map(|&c| c as f64).collect();
    Classified {
        scheduling: if on_demand {
            Scheduling::OnDemand
        } else {
            Scheduling::General
        },
        shares,
        usage,
        hit,
        follows_connections: pearson(&counts, &conns),
    }
}

fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len().min(b.len());
    if n < 2 {
        return None;
    }
    let (a, b) = (&a[..n], &b[..n]);
    let ma = a.iter().sum::<f64>() / n as f64;
    let mb = b.iter().sum::<f64>() / n as f64;
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    if va == 0.0 || vb == 0.0 {
        return None;
    }
    Some(cov / (va * vb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(
        counts: &[usize],
        distinct: usize,
        mine: [u64; 3],
        active: u64,
        io: u64,
    ) -> StageStats {
        StageStats {
            name: "s".into(),
            counts: counts.to_vec(),
            distinct_threads: distinct,
            cpu_ticks: mine[0],
            write_bytes: mine[1],
            net_bytes: mine[2],
            active_intervals: active,
            io_intervals: io,
            net_intervals: active,
            ..StageStats::default()
        }
    }

    /// A CPU-only stage with these thread counts per sample, distinct threads and CPU ticks,
    /// classified against these connection counts.
    fn threads(counts: &[usize], distinct: usize, cpu: u64, connections: &[usize]) -> Classified {
        let stage = stats(counts, distinct, [cpu, 0, 0], 10, 0);
        classify(&stage, [1000, 10 << 20, 1 << 20], connections, 0.05)
    }

    #[test]
    fn fixed_counts_are_bounded_and_changing_counts_on_demand() {
        let fixed = threads(&[4, 4, 4], 4, 500, &[1, 5, 2]);
        assert_eq!(fixed.scheduling, Scheduling::General);
        assert_eq!(fixed.follows_connections, None);
        let follows = threads(&[1, 5, 2], 6, 10, &[1, 5, 2]);
        assert_eq!(follows.scheduling, Scheduling::OnDemand);
        assert!((follows.follows_connections.unwrap() - 1.0).abs() < 1e-9);
        // Same count throughout, but threads came and went: created on demand.
        // A single-sample blip (a fork caught before it renamed itself) is not growth.
        let blip = threads(&[1, 1, 2, 1, 1], 2, 10, &[0; 5]);
        assert_eq!(blip.scheduling, Scheduling::General);
        let churn = threads(&[2, 2, 2], 7, 10, &[0, 0, 0]);
        assert_eq!(churn.scheduling, Scheduling::OnDemand);
    }

    #[test]
    fn shares_above_the_threshold_are_extensive_and_rare_use_is_unknown() {
        let totals = [1000, 10 << 20, 1 << 20];
        let steady = classify(&stats(&[1], 1, [40, 5 << 20, 0], 10, 9), totals, &[0], 0.05);
        assert_eq!(steady.usage, [Usage::False, Usage::True, Usage::False]);
        let bursty = classify(&stats(&[1], 1, [60, 5 << 20, 0], 10, 2), totals, &[0], 0.05);
        assert_eq!(bursty.usage, [Usage::True, Usage::Unknown, Usage::False]);
        // Below the noise floor nothing is extensive, whatever the share.
        let quiet = classify(&stats(&[1], 1, [5, 0, 0], 10, 0), [5, 0, 0], &[0], 0.05);
        assert_eq!(quiet.usage, [Usage::False; 3]);
        // A higher threshold drops the smaller share.
        let strict = classify(&stats(&[1], 1, [60, 5 << 20, 0], 10, 9), totals, &[0], 0.10);
        assert_eq!(strict.usage, [Usage::False, Usage::True, Usage::False]);
    }
}
