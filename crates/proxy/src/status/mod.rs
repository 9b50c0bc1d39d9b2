//! The JSON of `/status` ([`Status`], with the gate's view in [`GateSnapshot`]), read from the
//! per-tenant tables of [`crate::metrics`]; `prometheus` writes the same document as `/metrics`.

use std::sync::atomic::Ordering::Relaxed;

use serde::Serialize;

use crate::gate::Gate;
use crate::histogram::{quantile, BUCKETS};
use crate::metrics::{Metrics, Reason};

mod prometheus;

/// A snapshot of the gate for `/status` and `/metrics`.
#[derive(Clone, Debug, Serialize)]
pub struct GateSnapshot {
    /// Scheduler name.
    pub scheduler: &'static str,
    /// Current depth D.
    pub depth: usize,
    /// Requests waiting.
    pub queued: usize,
    /// Requests holding a slot.
    pub running: usize,
    /// The scheduler's virtual time, if it keeps one.
    pub virtual_time: Option<f64>,
    /// Per tenant, by id.
    pub tenants: Vec<GateTenant>,
}

/// One tenant in a [`GateSnapshot`].
#[derive(Clone, Debug, Default, Serialize)]
pub struct GateTenant {
    /// Waiting now.
    pub queued: usize,
    /// Holding a slot now.
    pub running: usize,
    /// Removed while waiting (client gone, queue timeout).
    pub cancelled: u64,
    /// Weight φ.
    pub weight: f64,
}

impl GateSnapshot {
    /// Read the gate for tenant ids `0..known` (and any the gate has seen beyond): counts and
    /// weights from the scheduler's own view (no second copy), cancellations from the gate's
    /// metrics.
    pub fn of(gate: &Gate, known: usize) -> GateSnapshot {
        let g = &gate.0;
        let m = g.metrics();
        let seen = m.tenants.iter().map(|t| t.tenant as usize + 1).max();
        let tenants = (0..seen.unwrap_or(0).max(known) as u64)
            .map(|id| {
                let view = g.tenant(id);
                GateTenant {
                    queued: view.map_or(0, |v| v.queued),
                    running: view.map_or(0, |v| v.running),
                    cancelled: m.tenant(id).map_or(0, |t| t.cancelled),
                    weight: view.map_or(1.0, |v| v.weight),
                }
            })
            .collect();
        let (queued, running) = gate.load();
        GateSnapshot {
            scheduler: g.scheduler_name(),
            depth: gate.depth(),
            queued,
            running,
            virtual_time: g.virtual_time(),
            tenants,
        }
    }
}

/// The JSON of `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    /// Seconds since start.
    pub uptime_s: f64,
    /// Scheduler name.
    pub scheduler: &'static str,
    /// Depth D.
    pub depth: usize,
    /// Requests waiting.
    pub queued: usize,
    /// Requests outstanding upstream.
    pub in_flight: usize,
    /// The scheduler's virtual time.
    pub virtual_time: Option<f64>,
    /// Client connections open.
    pub connections: u64,
    /// 401 answers.
    pub unauthorized: u64,
    /// 400 answers for a duplicated key header.
    pub ambiguous_identity: u64,
    /// Reloads applied.
    pub reloads: u64,
    /// TLS handshakes that failed (or timed out) on the TLS listener.
    pub tls_handshake_failures: u64,
    /// Histogram bucket bounds (seconds; a last +Inf bucket is implied).
    pub buckets: Vec<f64>,
    /// Per tenant.
    pub tenants: Vec<TenantStatus>,
    /// The global view with `[cluster]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster::ClusterStatus>,
    /// The priority levels (none without `[[priority_level]]`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub levels: Vec<crate::levels::LevelStatus>,
    /// Tokens charged under `upstream.cost = "openai-usage"` (after the first).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<crate::tokens::TokenStatus>,
}

/// One tenant in [`Status`].
#[derive(Clone, Debug, Serialize)]
pub struct TenantStatus {
    /// Name.
    pub name: String,
    /// Weight φ.
    pub weight: f64,
    /// Waiting now.
    pub queued: usize,
    /// Outstanding upstream now.
    pub in_flight: usize,
    /// Requests received.
    pub received: u64,
    /// Requests the upstream answered.
    pub completed: u64,
    /// Requests whose client went away while queued or in flight (before the response began).
    pub cancelled: u64,
    /// Charged costs clamped by the `[cost]` bounds.
    pub cost_clamped: u64,
    /// Requests answered by the proxy, by reason.
    pub rejected: std::collections::BTreeMap<&'static str, u64>,
    /// Wait quantiles (seconds, bucket-interpolated).
    pub wait_p50: Option<f64>,
    /// 99th percentile wait.
    pub wait_p99: Option<f64>,
    /// Upstream time quantiles (seconds).
    pub upstream_p50: Option<f64>,
    /// 99th percentile upstream time.
    pub upstream_p99: Option<f64>,
    /// Wait histogram (per-bucket counts).
    pub wait_buckets: Vec<u64>,
    /// Upstream time histogram (per-bucket counts).
    pub upstream_buckets: Vec<u64>,
    /// Sum of the waits (seconds).
    pub wait_sum: f64,
    /// Sum of the upstream times (seconds).
    pub upstream_sum: f64,
    /// Cost charged in total.
    pub cost_total: f64,
}

impl Status {
    /// The `/status` document: `metrics`' counters, `names` by tenant id, the gate's view.
    pub fn of(metrics: &Metrics, names: &[String], gate: &GateSnapshot, uptime: f64) -> Status {
        let stats = metrics.all();
        let n = names.len().max(stats.len()).max(gate.tenants.len());
        let tenants = (0..n)
            .map(|i| {
                let s = stats.get(i).cloned().unwrap_or_default();
                let g = gate.tenants.get(i).cloned().unwrap_or_default();
                let wait = s.wait.counts();
                let up = s.upstream.counts();
                TenantStatus {
                    name: names
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("tenant{i}")),
                    weight: if g.weight > 0.0 { g.weight } else { 1.0 },
                    // The proxy's own counts (not the gate's), so that the accounting
                    // identity holds: a request is queued from arrival to its slot.
                    queued: s.queued.load(Relaxed) as usize,
                    in_flight: s.in_flight.load(Relaxed) as usize,
                    received: s.received.load(Relaxed),
                    completed: s.completed.load(Relaxed),
                    cancelled: s.cancelled.load(Relaxed),
                    cost_clamped: s.cost_clamped.load(Relaxed),
                    rejected: Reason::ALL
                        .iter()
                        .map(|&r| (r.name(), s.rejected(r)))
                        .filter(|&(_, c)| c > 0)
                        .collect(),
                    wait_p50: quantile(&wait, 0.5),
                    wait_p99: quantile(&wait, 0.99),
                    upstream_p50: quantile(&up, 0.5),
                    upstream_p99: quantile(&up, 0.99),
                    wait_buckets: wait,
                    upstream_buckets: up,
                    wait_sum: s.wait.sum(),
                    upstream_sum: s.upstream.sum(),
                    cost_total: s.cost_total(),
                }
            })
            .collect();
        Status {
            uptime_s: uptime,
            scheduler: gate.scheduler,
            depth: gate.depth,
            queued: gate.queued,
            in_flight: gate.running,
            virtual_time: gate.virtual_time,
            connections: metrics.connections.load(Relaxed),
            unauthorized: metrics.unauthorized.load(Relaxed),
            ambiguous_identity: metrics.ambiguous_identity.load(Relaxed),
            reloads: metrics.reloads.load(Relaxed),
            tls_handshake_failures: metrics.tls_handshake_failed.load(Relaxed),
            buckets: BUCKETS.to_vec(),
            tenants,
            cluster: None,
            levels: Vec::new(),
            tokens: metrics.tokens.status(names),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering::Relaxed;

    use fairlane_core::TenantId;

    use super::*;

    /// (metric name, labels, value).
    type Sample = (String, Vec<(String, String)>, f64);

    /// A strict reader of the Prometheus text format: every sample line is
    /// `name{label="value",…} number`, label values using only the `\\`, `\"`, `\n` escapes.
    /// Returns the label values of each sample, unescaped.
    fn parse_exposition(text: &str) -> Vec<Sample> {
        let mut out = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') {
                assert!(
                    line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                    "{line:?}"
                );
                continue;
            }
            let mut cs = line.chars().peekable();
            let mut name = String::new();
            while let Some(&c) = cs.peek() {
                if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                    name.push(c);
                    cs.next();
                } else {
                    break;
                }
            }
            assert!(!name.is_empty(), "no metric name in {line:?}");
            let mut labels = Vec::new();
            if cs.peek() == Some(&'{') {
                cs.next();
                loop {
                    let mut k = String::new();
                    for c in cs.by_ref() {
                        if c == '=' {
                            break;
                        }
                        assert!(
                            c.is_ascii_alphanumeric() || c == '_',
                            "label name in {line:?}"
                        );
                        k.push(c);
                    }
                    assert_eq!(cs.next(), Some('"'), "{line:?}");
                    let mut v = String::new();
                    loop {
                        match cs
                            .next()
                            .unwrap_or_else(|| panic!("unclosed value: {line:?}"))
                        {
                            '"' => break,
                            '\\' => match cs.next() {
                                Some('\\') => v.push('\\'),
                                Some('"') => v.push('"'),
                                Some('n') => v.push('\n'),
                                e => panic!("bad escape {e:?} in {line:?}"),
                            },
                            '\n' => panic!("raw newline in {line:?}"),
                            c => v.push(c),
                        }
                    }
                    labels.push((k, v));
                    match cs.next() {
                        Some(',') => continue,
                        Some('}') => break,
                        e => panic!("expected , or }} not {e:?} in {line:?}"),
                    }
                }
            }
            assert_eq!(cs.next(), Some(' '), "{line:?}");
            let value: String = cs.collect();
            let value: f64 = value
                .parse()
                .unwrap_or_else(|_| panic!("value {value:?} in {line:?}"));
            out.push((name, labels, value));
        }
        out
    }

    #[test]
    fn tenant_names_render_well_formed() {
        // Names the config would refuse still render as well-formed, round-tripping text.
        let names: Vec<String> = ["t0\\", "a\"b", "x\ny} 1\nfake_metric 9", "ok"]
            .map(String::from)
            .to_vec();
        let m = Metrics::default();
        for i in 0..names.len() {
            m.tenant(TenantId(i as u64)).received.fetch_add(1, Relaxed);
        }
        let gate = GateSnapshot {
            scheduler: "sfq",
            depth: 1,
            queued: 0,
            running: 0,
            virtual_time: None,
            tenants: Vec::new(),
        };
        let text = Status::of(&m, &names, &gate, 0.0).prometheus();
        let samples = parse_exposition(&text);
        assert!(samples
            .iter()
            .all(|(n, _, _)| n.starts_with("fairlane_proxy_")));
        for n in &names {
            let received: Vec<_> = samples
                .iter()
                .filter(|(m, l, _)| m == "fairlane_proxy_received_total" && l[0].1 == *n)
                .collect();
            assert_eq!(received.len(), 1, "{n:?}");
            assert_eq!(received[0].2, 1.0);
        }
    }
}
