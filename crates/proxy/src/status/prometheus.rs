//! `/metrics`: the [`Status`] document in Prometheus's text format, every part of the proxy
//! (the instance, its tenants, the cluster, priority levels and tokens) in one exposition.

use super::{Status, TenantStatus};
use crate::metrics::Reason;
use crate::prom::{family, histogram, label, labelled, plain, readers, sample, Reader};

/// The per-tenant families (the kind by [`kind`](crate::prom::kind)).
const PER_TENANT: [(&str, &str, Reader<TenantStatus>); 8] = readers![t: TenantStatus;
    "fairlane_proxy_queued" => t.queued, "Requests waiting for a slot.";
    "fairlane_proxy_in_flight" => t.in_flight, "Requests outstanding upstream.";
    "fairlane_proxy_weight" => t.weight, "Tenant weight.";
    "fairlane_proxy_received_total" => t.received, "Requests received.";
    "fairlane_proxy_completed_total" => t.completed, "Requests answered by the upstream.";
    "fairlane_proxy_cancelled_total" => t.cancelled, "Requests whose client left while queued or in flight.";
    "fairlane_proxy_cost_clamped_total" => t.cost_clamped, "Charged costs clamped by the [cost] bounds.";
    "fairlane_proxy_cost_total" => t.cost_total, "Cost charged.";
];

/// The instance's own gauges and counters (no labels).
const INSTANCE: [(&str, &str, Reader<Status>); 7] = readers![s: Status;
    "fairlane_proxy_depth" => s.depth, "Requests allowed outstanding upstream (D).";
    "fairlane_proxy_virtual_time" => s.virtual_time.unwrap_or(0.0), "The scheduler's virtual time.";
    "fairlane_proxy_connections" => s.connections, "Client connections open.";
    "fairlane_proxy_unauthorized_total" => s.unauthorized, "Requests answered 401.";
    "fairlane_proxy_ambiguous_identity_total" => s.ambiguous_identity, "Requests answered 400 for a duplicated key or Authorization header.";
    "fairlane_proxy_reloads_total" => s.reloads, "Configuration reloads applied.";
    "fairlane_proxy_tls_handshake_failures_total" => s.tls_handshake_failures, "TLS handshakes that failed or timed out on the TLS listener.";
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
        plain(
            o,
            INSTANCE.map(|(name, help, read)| (name, help, read(self))),
        );
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
