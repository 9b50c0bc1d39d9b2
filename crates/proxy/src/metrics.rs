//! Per-tenant counters and histograms, kept with atomics (no lock on the request path once
//! a tenant's entry exists), rendered as Prometheus text and as the JSON of `/status`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, RwLock};

use fairlane_core::TenantId;
use serde::Serialize;

use crate::gate::Gate;

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

/// Why a request was answered without the upstream's response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// 429: the global queue cap.
    QueueFull,
    /// 429: the tenant's queue cap.
    TenantQueueFull,
    /// 503: waited longer than `limits.queue_timeout_ms`.
    QueueTimeout,
    /// 503: shutting down.
    Shutdown,
    /// 502: could not connect upstream.
    UpstreamConnect,
    /// 504: no response headers within `upstream.timeout_ms`.
    UpstreamTimeout,
    /// 502: the upstream connection failed otherwise.
    UpstreamError,
    /// 413: body over `limits.max_body_bytes`.
    BodyTooLarge,
    /// 400: a request the proxy cannot forward.
    BadRequest,
    /// 500: the scheduler refused the request.
    Internal,
    /// 408: the request body did not arrive within `limits.body_timeout_ms`.
    BodyTimeout,
    /// 503: the response would stream past `limits.response_buffer_bytes` while its tenant
    /// already holds its `limits.max_streaming_share` of the slots streaming.
    StreamingCap,
}

impl Reason {
    /// Every reason, in a stable order.
    pub const ALL: [Reason; 12] = [
        Reason::QueueFull,
        Reason::TenantQueueFull,
        Reason::QueueTimeout,
        Reason::Shutdown,
        Reason::UpstreamConnect,
        Reason::UpstreamTimeout,
        Reason::UpstreamError,
        Reason::BodyTooLarge,
        Reason::BadRequest,
        Reason::Internal,
        Reason::BodyTimeout,
        Reason::StreamingCap,
    ];
    /// The label.
    pub fn name(self) -> &'static str {
        match self {
            Reason::QueueFull => "queue_full",
            Reason::TenantQueueFull => "tenant_queue_full",
            Reason::QueueTimeout => "queue_timeout",
            Reason::Shutdown => "shutdown",
            Reason::UpstreamConnect => "upstream_connect",
            Reason::UpstreamTimeout => "upstream_timeout",
            Reason::UpstreamError => "upstream_error",
            Reason::BodyTooLarge => "body_too_large",
            Reason::BadRequest => "bad_request",
            Reason::Internal => "internal",
            Reason::BodyTimeout => "body_timeout",
            Reason::StreamingCap => "streaming_cap",
        }
    }
    /// The status code answered.
    pub fn status(self) -> u16 {
        match self {
            Reason::QueueFull | Reason::TenantQueueFull => 429,
            Reason::QueueTimeout | Reason::Shutdown | Reason::StreamingCap => 503,
            Reason::BodyTimeout => 408,
            Reason::UpstreamConnect | Reason::UpstreamError => 502,
            Reason::UpstreamTimeout => 504,
            Reason::BodyTooLarge => 413,
            Reason::BadRequest => 400,
            Reason::Internal => 500,
        }
    }
    fn index(self) -> usize {
        Reason::ALL.iter().position(|&r| r == self).unwrap_or(0)
    }
}

/// One tenant's counters.
#[derive(Default)]
pub struct TenantStats {
    /// Requests identified as this tenant.
    pub received: AtomicU64,
    /// Requests the upstream answered (any status).
    pub completed: AtomicU64,
    rejected: [AtomicU64; Reason::ALL.len()],
    /// Time from arrival to slot grant.
    pub wait: Histogram,
    /// Time from slot grant to the end of the upstream response.
    pub upstream: Histogram,
    /// Total cost charged (seconds, or the cost header's unit).
    cost_micro: AtomicU64,
}

impl TenantStats {
    /// Count a request answered by the proxy itself.
    pub fn reject(&self, reason: Reason) {
        self.rejected[reason.index()].fetch_add(1, Relaxed);
    }
    /// Requests answered by the proxy for `reason`.
    pub fn rejected(&self, reason: Reason) -> u64 {
        self.rejected[reason.index()].load(Relaxed)
    }
    /// Count a request the upstream answered, with its upstream time and cost.
    pub fn complete(&self, upstream_secs: f64, cost: f64) {
        self.completed.fetch_add(1, Relaxed);
        self.upstream.record(upstream_secs);
        self.cost_micro
            .fetch_add((cost.max(0.0) * 1e6) as u64, Relaxed);
    }
}

/// Every tenant's stats plus proxy-wide counters.
#[derive(Default)]
pub struct Metrics {
    tenants: RwLock<Vec<Arc<TenantStats>>>,
    /// Requests answered 401 (no tenant).
    pub unauthorized: AtomicU64,
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Client connections accepted so far.
    pub accepted: AtomicU64,
    /// Config reloads applied.
    pub reloads: AtomicU64,
}

impl Metrics {
    /// The stats of a tenant, created on first use.
    pub fn tenant(&self, id: TenantId) -> Arc<TenantStats> {
        let i = id.0 as usize;
        if let Some(t) = self
            .tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(i)
        {
            return t.clone();
        }
        let mut w = self.tenants.write().unwrap_or_else(|e| e.into_inner());
        while w.len() <= i {
            w.push(Arc::new(TenantStats::default()));
        }
        w[i].clone()
    }

    fn all(&self) -> Vec<Arc<TenantStats>> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The `/status` document.
    pub fn status(&self, names: &[String], gate: &GateSnapshot, uptime: f64) -> Status {
        let stats = self.all();
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
                    queued: g.queued,
                    in_flight: g.running,
                    received: s.received.load(Relaxed),
                    completed: s.completed.load(Relaxed),
                    cancelled: g.cancelled,
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
                    cost_total: s.cost_micro.load(Relaxed) as f64 / 1e6,
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
            connections: self.connections.load(Relaxed),
            unauthorized: self.unauthorized.load(Relaxed),
            reloads: self.reloads.load(Relaxed),
            buckets: BUCKETS.to_vec(),
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
    /// Reloads applied.
    pub reloads: u64,
    /// Histogram bucket bounds (seconds; a last +Inf bucket is implied).
    pub buckets: Vec<f64>,
    /// Per tenant.
    pub tenants: Vec<TenantStatus>,
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
    /// Requests whose client went away (or timed out) while queued.
    pub cancelled: u64,
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
    /// Prometheus text exposition.
    pub fn prometheus(&self) -> String {
        let mut o = String::with_capacity(4096);
        let g = |o: &mut String, name: &str, help: &str, kind: &str| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        };
        g(
            &mut o,
            "fairlane_proxy_depth",
            "Requests allowed outstanding upstream (D).",
            "gauge",
        );
        let _ = writeln!(o, "fairlane_proxy_depth {}", self.depth);
        g(
            &mut o,
            "fairlane_proxy_virtual_time",
            "The scheduler's virtual time.",
            "gauge",
        );
        let _ = writeln!(
            o,
            "fairlane_proxy_virtual_time {}",
            self.virtual_time.unwrap_or(0.0)
        );
        g(
            &mut o,
            "fairlane_proxy_connections",
            "Client connections open.",
            "gauge",
        );
        let _ = writeln!(o, "fairlane_proxy_connections {}", self.connections);
        g(
            &mut o,
            "fairlane_proxy_unauthorized_total",
            "Requests answered 401.",
            "counter",
        );
        let _ = writeln!(o, "fairlane_proxy_unauthorized_total {}", self.unauthorized);
        g(
            &mut o,
            "fairlane_proxy_reloads_total",
            "Configuration reloads applied.",
            "counter",
        );
        let _ = writeln!(o, "fairlane_proxy_reloads_total {}", self.reloads);
        type Field = fn(&TenantStatus) -> f64;
        let per: [(&str, &str, &str, Field); 7] = [
            (
                "fairlane_proxy_queued",
                "Requests waiting for a slot.",
                "gauge",
                |t| t.queued as f64,
            ),
            (
                "fairlane_proxy_in_flight",
                "Requests outstanding upstream.",
                "gauge",
                |t| t.in_flight as f64,
            ),
            ("fairlane_proxy_weight", "Tenant weight.", "gauge", |t| {
                t.weight
            }),
            (
                "fairlane_proxy_received_total",
                "Requests received.",
                "counter",
                |t| t.received as f64,
            ),
            (
                "fairlane_proxy_completed_total",
                "Requests answered by the upstream.",
                "counter",
                |t| t.completed as f64,
            ),
            (
                "fairlane_proxy_cancelled_total",
                "Requests whose client left while queued.",
                "counter",
                |t| t.cancelled as f64,
            ),
            (
                "fairlane_proxy_cost_total",
                "Cost charged.",
                "counter",
                |t| t.cost_total,
            ),
        ];
        for (name, help, kind, f) in per {
            g(&mut o, name, help, kind);
            for t in &self.tenants {
                let _ = writeln!(o, "{name}{{tenant=\"{}\"}} {}", t.name, f(t));
            }
        }
        g(
            &mut o,
            "fairlane_proxy_rejected_total",
            "Requests answered by the proxy, by reason.",
            "counter",
        );
        for t in &self.tenants {
            for r in Reason::ALL {
                let c = t.rejected.get(r.name()).copied().unwrap_or(0);
                let _ = writeln!(
                    o,
                    "fairlane_proxy_rejected_total{{tenant=\"{}\",reason=\"{}\",code=\"{}\"}} {c}",
                    t.name,
                    r.name(),
                    r.status()
                );
            }
        }
        for (name, help, pick) in [
            (
                "fairlane_proxy_wait_seconds",
                "Time from arrival to an upstream slot.",
                0,
            ),
            (
                "fairlane_proxy_upstream_seconds",
                "Time from dispatch to the end of the upstream response.",
                1,
            ),
        ] {
            g(&mut o, name, help, "histogram");
            for t in &self.tenants {
                let counts = if pick == 0 {
                    &t.wait_buckets
                } else {
                    &t.upstream_buckets
                };
                let mut cum = 0;
                for (i, c) in counts.iter().enumerate() {
                    cum += c;
                    let le = self
                        .buckets
                        .get(i)
                        .map_or("+Inf".to_string(), |b| b.to_string());
                    let _ = writeln!(
                        o,
                        "{name}_bucket{{tenant=\"{}\",le=\"{le}\"}} {cum}",
                        t.name
                    );
                }
                let _ = writeln!(o, "{name}_count{{tenant=\"{}\"}} {cum}", t.name);
                let _ = writeln!(
                    o,
                    "{name}_sum{{tenant=\"{}\"}} {}",
                    t.name,
                    if pick == 0 {
                        t.wait_sum
                    } else {
                        t.upstream_sum
                    }
                );
            }
        }
        o
    }
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
}
