//! `/metrics`: the [`Status`] document in Prometheus's text format, every part of the proxy
//! (the instance, its tenants, the cluster, priority levels and tokens) in one exposition.

use super::{Status, TenantStatus};
use crate::metrics::Reason;
use crate::prom::{family, histogram, label, labelled, plain, sample};

/// A per-tenant value.
type Field = fn(&TenantStatus) -> f64;

/// The per-tenant families: name, help, value (the kind by [`kind`](crate::prom::kind)).
const PER_TENANT: [(&str, &str, Field); 8] = [
    (
        "fairlane_proxy_queued",
        "Requests waiting for a slot.",
        |t| t.queued as f64,
    ),
    (
        "fairlane_proxy_in_flight",
        "Requests outstanding upstream.",
        |t| t.in_flight as f64,
    ),
    ("fairlane_proxy_weight", "Tenant weight.", |t| t.weight),
    ("fairlane_proxy_received_total", "Requests received.", |t| {
        t.received as f64
    }),
    (
        "fairlane_proxy_completed_total",
        "Requests answered by the upstream.",
        |t| t.completed as f64,
    ),
    (
        "fairlane_proxy_cancelled_total",
        "Requests whose client left while queued or in flight.",
        |t| t.cancelled as f64,
    ),
    (
        "fairlane_proxy_cost_clamped_total",
        "Charged costs clamped by the [cost] bounds.",
        |t| t.cost_clamped as f64,
    ),
    ("fairlane_proxy_cost_total", "Cost charged.", |t| {
        t.cost_total
    }),
];

impl Status {
    /// Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let mut o = String::with_capacity(4096);
        self.instance(&mut o);
        for (name, help, f) in PER_TENANT {
            labelled(
                &mut o,
                (name, help),
                "tenant",
                &self.tenants,
                |t| &t.name,
                f,
            );
        }
        self.rejected(&mut o);
        self.histograms(&mut o);
        if let Some(c) = &self.cluster {
            o.push_str(&c.prometheus());
        }
        crate::levels::prometheus(&mut o, &self.levels);
        if let Some(t) = &self.tokens {
            o.push_str(&t.prometheus());
        }
        o
    }

    /// The instance's own gauges and counters (no labels).
    fn instance(&self, o: &mut String) {
        let rows: [(&str, &str, f64); 7] = [
            (
                "fairlane_proxy_depth",
                "Requests allowed outstanding upstream (D).",
                self.depth as f64,
            ),
            (
                "fairlane_proxy_virtual_time",
                "The scheduler's virtual time.",
                self.virtual_time.unwrap_or(0.0),
            ),
            (
                "fairlane_proxy_connections",
                "Client connections open.",
                self.connections as f64,
            ),
            (
                "fairlane_proxy_unauthorized_total",
                "Requests answered 401.",
                self.unauthorized as f64,
            ),
            (
                "fairlane_proxy_ambiguous_identity_total",
                "Requests answered 400 for a duplicated key or Authorization header.",
                self.ambiguous_identity as f64,
            ),
            (
                "fairlane_proxy_reloads_total",
                "Configuration reloads applied.",
                self.reloads as f64,
            ),
            (
                "fairlane_proxy_tls_handshake_failures_total",
                "TLS handshakes that failed or timed out on the TLS listener.",
                self.tls_handshake_failures as f64,
            ),
        ];
        plain(o, rows);
    }

    /// `fairlane_proxy_rejected_total`, by tenant, reason and status code.
    fn rejected(&self, o: &mut String) {
        let name = "fairlane_proxy_rejected_total";
        family(
            o,
            name,
            "Requests answered by the proxy, by reason.",
            "counter",
        );
        for t in &self.tenants {
            let tenant = label(&t.name);
            for r in Reason::ALL {
                let c = t.rejected.get(r.name()).copied().unwrap_or(0);
                let labels = format!(
                    "tenant=\"{tenant}\",reason=\"{}\",code=\"{}\"",
                    r.name(),
                    r.status()
                );
                sample(o, name, &labels, c);
            }
        }
    }

    /// The wait and upstream-time histograms, per tenant.
    fn histograms(&self, o: &mut String) {
        type Pick = fn(&TenantStatus) -> (&[u64], f64);
        let kinds: [(&str, &str, Pick); 2] = [
            (
                "fairlane_proxy_wait_seconds",
                "Time from arrival to an upstream slot.",
                |t| (&t.wait_buckets, t.wait_sum),
            ),
            (
                "fairlane_proxy_upstream_seconds",
                "Time from dispatch to the end of the upstream response.",
                |t| (&t.upstream_buckets, t.upstream_sum),
            ),
        ];
        for (name, help, pick) in kinds {
            family(o, name, help, "histogram");
            for t in &self.tenants {
                let (counts, sum) = pick(t);
                histogram(
                    o,
                    name,
                    &format!("tenant=\"{}\"", label(&t.name)),
                    counts,
                    sum,
                );
            }
        }
    }
}
