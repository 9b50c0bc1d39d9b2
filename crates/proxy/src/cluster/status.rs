//! The cluster part of `/status` and `/metrics`: the global view and this instance's part,
//! with φ (the configured weight) and the effective weight kept apart.

use serde::Serialize;

/// One tenant in [`ClusterStatus`].
#[derive(Clone, Debug, Serialize)]
pub struct ClusterTenant {
    /// Name.
    pub name: String,
    /// φ, the configured weight (the one the allocation shares D by).
    pub weight: f64,
    /// The weight this instance's scheduler gives it now: φ for a light tenant, in fallback
    /// and where it has no part here; φ × its part here / its global share otherwise.
    pub effective_weight: f64,
    /// Light: its demand is below its fair share, so it is reserved its demand.
    pub light: bool,
    /// Waiting + in flight over all instances (measured, smoothed).
    pub global_demand: f64,
    /// Its fair share of the global D, as a fraction of D.
    pub global_share: f64,
    /// The part of that share served through this instance, as a fraction of D.
    pub local_share: f64,
    /// The same part in seats.
    pub seats: f64,
    /// Requests completed over all live instances.
    pub global_completed: u64,
}

/// The cluster part of `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    /// This instance's id.
    pub instance: String,
    /// The global depth D over all instances (`[cluster] depth`).
    pub depth: usize,
    /// The local depth: seats this instance runs with now (its share of D).
    pub seats: usize,
    /// The seats its last allocation gave it (it grows to them once they are free).
    pub target_seats: usize,
    /// Its fair seats, fractional: what its seats average to.
    pub fair_seats: f64,
    /// Seat-syncs owed to it (negative: it had more than its fair seats).
    pub credit: f64,
    /// Live instances at the last sync (ids).
    pub instances: Vec<String>,
    /// Seconds since the last successful sync (`null` before the first).
    pub sync_age_s: Option<f64>,
    /// True once Redis has been unreachable or slow for a lease: local fairness within the
    /// last share of D.
    pub fallback: bool,
    /// Successful syncs.
    pub syncs: u64,
    /// Failed or timed-out syncs.
    pub sync_failures: u64,
    /// Syncs that found Redis without this instance's last report (a Redis restart, a
    /// failover, a lease lapsed): each time it rejoined with the seats it held.
    pub forgotten: u64,
    /// Per tenant (global view).
    pub tenants: Vec<ClusterTenant>,
}

impl ClusterStatus {
    /// The instance's gauges and counters: (name, help, value).
    fn instance_samples(&self) -> [(&'static str, &'static str, f64); 10] {
        [
            (
                "fairlane_cluster_fallback",
                "1 while Redis is unreachable or slow (local fairness within the last share of D).",
                f64::from(u8::from(self.fallback)),
            ),
            (
                "fairlane_cluster_sync_age_seconds",
                "Seconds since the last successful sync (-1 before the first).",
                self.sync_age_s.unwrap_or(-1.0),
            ),
            (
                "fairlane_cluster_syncs_total",
                "Successful syncs.",
                self.syncs as f64,
            ),
            (
                "fairlane_cluster_sync_failures_total",
                "Failed or timed-out syncs.",
                self.sync_failures as f64,
            ),
            (
                "fairlane_cluster_forgotten_total",
                "Syncs that found Redis without this instance's last report (restart, failover).",
                self.forgotten as f64,
            ),
            (
                "fairlane_cluster_depth",
                "The global depth D over all instances.",
                self.depth as f64,
            ),
            (
                "fairlane_cluster_seats",
                "This instance's seats now (its local depth, its share of D).",
                self.seats as f64,
            ),
            (
                "fairlane_cluster_target_seats",
                "The seats this instance's last allocation gave it.",
                self.target_seats as f64,
            ),
            (
                "fairlane_cluster_fair_seats",
                "This instance's fair seats (fractional; what its seats average to).",
                self.fair_seats,
            ),
            (
                "fairlane_cluster_instances",
                "Live instances at the last sync.",
                self.instances.len() as f64,
            ),
        ]
    }

    /// Prometheus text for the cluster gauges and counters.
    pub fn prometheus(&self) -> String {
        let mut o = String::new();
        crate::prom::plain(&mut o, self.instance_samples());
        type Pick = fn(&ClusterTenant) -> f64;
        let per: [(&str, &str, Pick); 4] = [
            (
                "fairlane_cluster_global_share",
                "A tenant's fair share of the global D (fraction).",
                |t| t.global_share,
            ),
            (
                "fairlane_cluster_local_share",
                "The part of a tenant's share served through this instance (fraction of D).",
                |t| t.local_share,
            ),
            (
                "fairlane_cluster_tenant_seats",
                "The part of a tenant's share served through this instance (seats).",
                |t| t.seats,
            ),
            (
                "fairlane_cluster_effective_weight",
                "The weight this instance's scheduler gives a tenant (fairlane_proxy_weight is φ).",
                |t| t.effective_weight,
            ),
        ];
        for (name, help, pick) in per {
            crate::prom::labelled(
                &mut o,
                (name, help),
                "tenant",
                &self.tenants,
                |t| &t.name,
                pick,
            );
        }
        o
    }
}
