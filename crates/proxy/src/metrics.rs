//! Per-tenant counters and histograms, kept with atomics (no lock on the request path once
//! a tenant's entry exists), rendered as Prometheus text and as the JSON of `/status`.
//!
//! Every request identified as a tenant is followed by a [`Ticket`] from arrival to its
//! answer, so that at every moment, per tenant,
//! `received = completed + Σ rejected + cancelled + queued + in_flight`: the ticket moves the
//! request from one state to the next and, if the request is dropped unanswered (the client
//! went away while it was queued or in flight), counts it as cancelled.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

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
    /// 504 (gRPC: status 4): a gRPC call's `grpc-timeout` passed while it was queued; it
    /// was never forwarded.
    Deadline,
    /// 503: a WebSocket upgrade while its tenant holds `limits.max_tunnels_per_tenant`
    /// tunnels, or `limits.max_tunnels` are open.
    TunnelCap,
}

impl Reason {
    /// Every reason, in a stable order.
    pub const ALL: [Reason; 14] = [
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
        Reason::Deadline,
        Reason::TunnelCap,
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
            Reason::Deadline => "deadline",
            Reason::TunnelCap => "tunnel_cap",
        }
    }
    /// The status code answered.
    pub fn status(self) -> u16 {
        match self {
            Reason::QueueFull | Reason::TenantQueueFull => 429,
            Reason::QueueTimeout | Reason::Shutdown | Reason::StreamingCap | Reason::TunnelCap => {
                503
            }
            Reason::BodyTimeout => 408,
            Reason::UpstreamConnect | Reason::UpstreamError => 502,
            Reason::UpstreamTimeout | Reason::Deadline => 504,
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
    /// Received and not yet holding an upstream slot (reading the body, or queued).
    pub queued: AtomicU64,
    /// Holding an upstream slot, until the response ends.
    pub in_flight: AtomicU64,
    /// Dropped unanswered: the client went away while queued or in flight.
    pub cancelled: AtomicU64,
    /// Costs clamped by the `[cost]` bounds.
    pub cost_clamped: AtomicU64,
    /// The tenant's current cost estimate (seconds, `f64` bits; 0 = none yet).
    estimate_bits: AtomicU64,
    /// When a clamp was last logged (ms since [`epoch`], plus one; 0 = never).
    clamp_logged_ms: AtomicU64,
    /// The tenant's name, for the clamp log: set by its first [`Ticket`], so that a ticket
    /// does not take a reference on a shared name per request (issue 19).
    name: std::sync::OnceLock<Arc<str>>,
}

/// The `[cost]` bounds, in seconds (the unit the gate charges in).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostPolicy {
    /// A cost above `max_ratio` × the tenant's estimate is clamped…
    pub max_ratio: f64,
    /// …to no less than this…
    pub floor: f64,
    /// …and no cost is charged more than this.
    pub max: f64,
    /// The estimate of a tenant never charged.
    pub initial: f64,
    /// At most one log line per tenant per this many milliseconds.
    pub log_interval_ms: u64,
}

impl CostPolicy {
    /// The bounds a config sets.
    pub fn of(config: &crate::config::ProxyConfig) -> CostPolicy {
        if config.upstream.cost.is_some() {
            return crate::tokens::policy(config);
        }
        let c = &config.cost;
        CostPolicy {
            max_ratio: c.max_ratio,
            floor: c.floor_ms / 1000.0,
            max: c.max_ms / 1000.0,
            initial: config.scheduler.initial_estimate_ms / 1000.0,
            log_interval_ms: c.log_interval_ms,
        }
    }
}

/// What [`TenantStats::bound_cost`] decided.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bounded {
    /// The cost was within bounds.
    Kept(f64),
    /// The cost was replaced by this one.
    Clamped(f64),
}

/// A fixed instant the clamp-log times are measured from.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl TenantStats {
    /// The tenant's current cost estimate: an exponential moving average (gain 1/8) of the
    /// costs charged, starting at `initial`.
    pub fn estimate(&self, initial: f64) -> f64 {
        match self.estimate_bits.load(Relaxed) {
            0 => initial,
            b => f64::from_bits(b),
        }
    }

    /// The cost to charge for a request that `reported` (the cost header's value, in seconds,
    /// NaN if unreadable) or, without a header, took `measured` seconds upstream. A cost that
    /// is not finite and non-negative becomes the measured time; one above the cap becomes
    /// the cap. Updates the estimate; counts a clamp (the caller logs it).
    pub fn bound_cost(&self, reported: Option<f64>, measured: f64, p: &CostPolicy) -> Bounded {
        let measured = if measured.is_finite() {
            measured.max(0.0)
        } else {
            0.0
        };
        let raw = reported.unwrap_or(measured);
        let est = self.estimate(p.initial);
        // `max_ratio × est` may overflow to +inf; `min(max)` brings it back.
        let cap = (p.max_ratio * est).max(p.floor).min(p.max);
        let out = if raw.is_nan() || raw < 0.0 {
            Bounded::Clamped(measured.min(cap))
        } else if raw > cap {
            Bounded::Clamped(cap)
        } else {
            Bounded::Kept(raw)
        };
        let c = match out {
            Bounded::Kept(c) => c,
            Bounded::Clamped(c) => {
                self.cost_clamped.fetch_add(1, Relaxed);
                c
            }
        };
        // A racy read-modify-write: two completions at once may lose one sample, which an
        // average does not miss; a lock here would serialise the tenant's completions.
        let next = est + (c - est) / 8.0;
        self.estimate_bits
            .store(if next > 0.0 { next.to_bits() } else { 0 }, Relaxed);
        out
    }

    /// Whether a clamp now should be logged: at most once per `interval_ms` per tenant,
    /// decided with one compare-and-swap (no lock).
    pub fn clamp_log_due(&self, interval_ms: u64) -> bool {
        let now = epoch().elapsed().as_millis() as u64 + 1;
        let last = self.clamp_logged_ms.load(Relaxed);
        (last == 0 || now.saturating_sub(last) >= interval_ms)
            && self
                .clamp_logged_ms
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
    }

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

const ARRIVED: u8 = 0;
const RUNNING: u8 = 1;
const DONE: u8 = 2;

/// One request of a tenant, from arrival to its answer: counted received and queued when
/// made, moved to in flight by [`Ticket::dispatched`], and ended by exactly one of
/// [`Ticket::reject`], [`Ticket::complete`] or — dropped unanswered — cancelled. It derefs to
/// the tenant's [`TenantStats`] for the histograms.
pub struct Ticket {
    stats: Arc<TenantStats>,
    state: AtomicU8,
    costs: CostPolicy,
    /// The request is a gRPC call: the proxy's own answers to it are gRPC statuses.
    pub grpc: bool,
}

impl Ticket {
    /// A request of tenant `name` has arrived; its cost will be bounded by `costs`.
    pub fn new(stats: Arc<TenantStats>, name: &Arc<str>, costs: CostPolicy) -> Ticket {
        if stats.name.get().is_none() {
            let _ = stats.name.set(name.clone());
        }
        stats.received.fetch_add(1, Relaxed);
        stats.queued.fetch_add(1, Relaxed);
        Ticket {
            stats,
            state: AtomicU8::new(ARRIVED),
            costs,
            grpc: false,
        }
    }

    /// The cost to charge, within the `[cost]` bounds (see [`TenantStats::bound_cost`]);
    /// a clamp is logged at most once per tenant per interval.
    pub fn charge(&self, reported: Option<f64>, measured: f64) -> f64 {
        match self.stats.bound_cost(reported, measured, &self.costs) {
            Bounded::Kept(c) => c,
            Bounded::Clamped(c) => {
                if self.stats.clamp_log_due(self.costs.log_interval_ms) {
                    eprintln!(
                        "fairlane-proxy: tenant {}: cost {} clamped to {c:.3e} s ({} clamps so far; \
                         logged at most every {} ms)",
                        self.stats.name.get().map_or("?", |n| n),
                        reported.map_or_else(
                            || format!("{measured:.3e} s (measured)"),
                            |r| format!("{r:.3e} s (reported)")
                        ),
                        self.stats.cost_clamped.load(Relaxed),
                        self.costs.log_interval_ms,
                    );
                }
                c
            }
        }
    }

    /// It was granted an upstream slot.
    pub fn dispatched(&self) {
        if self
            .state
            .compare_exchange(ARRIVED, RUNNING, Relaxed, Relaxed)
            .is_ok()
        {
            // Into the new state before out of the old: a reader never sees it nowhere.
            self.stats.in_flight.fetch_add(1, Relaxed);
            self.stats.queued.fetch_sub(1, Relaxed);
        }
    }

    fn end(&self) -> bool {
        match self.state.swap(DONE, Relaxed) {
            ARRIVED => {
                self.stats.queued.fetch_sub(1, Relaxed);
                true
            }
            RUNNING => {
                self.stats.in_flight.fetch_sub(1, Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The proxy answered it itself.
    pub fn reject(&self, reason: Reason) {
        if self.state.load(Relaxed) != DONE {
            self.stats.reject(reason);
            self.end();
        }
    }

    /// The upstream answered it (the response has ended or been abandoned by the client).
    pub fn complete(&self, upstream_secs: f64, cost: f64) {
        if self.state.load(Relaxed) != DONE {
            self.stats.complete(upstream_secs, cost);
            self.end();
        }
    }
}

impl std::ops::Deref for Ticket {
    type Target = TenantStats;
    fn deref(&self) -> &TenantStats {
        &self.stats
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.state.load(Relaxed) != DONE {
            self.stats.cancelled.fetch_add(1, Relaxed);
            self.end();
        }
    }
}

/// Escape a Prometheus label value (text format 0.0.4): backslash, double quote and line
/// feed. Tenant names are validated at load and never need it; this keeps the exposition
/// well-formed whatever a name holds.
pub fn label(s: &str) -> Cow<'_, str> {
    if !s.contains(['\\', '"', '\n']) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '"' => o.push_str("\\\""),
            '\n' => o.push_str("\\n"),
            c => o.push(c),
        }
    }
    Cow::Owned(o)
}

/// Every tenant's stats plus proxy-wide counters.
#[derive(Default)]
pub struct Metrics {
    tenants: RwLock<Vec<Arc<TenantStats>>>,
    /// Requests answered 401 (no tenant).
    pub unauthorized: AtomicU64,
    /// Requests answered 400 for carrying the key header (or `Authorization`) twice.
    pub ambiguous_identity: AtomicU64,
    /// Client connections open now.
    pub connections: AtomicU64,
    /// Client connections accepted so far.
    pub accepted: AtomicU64,
    /// Config reloads applied.
    pub reloads: AtomicU64,
    /// TLS handshakes that failed or did not finish within the header timeout.
    pub tls_handshake_failed: AtomicU64,
    /// Tokens charged under `upstream.cost = "openai-usage"`.
    pub tokens: Arc<crate::tokens::TokenMetrics>,
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
            ambiguous_identity: self.ambiguous_identity.load(Relaxed),
            reloads: self.reloads.load(Relaxed),
            tls_handshake_failures: self.tls_handshake_failed.load(Relaxed),
            buckets: BUCKETS.to_vec(),
            tenants,
            cluster: None,
            levels: Vec::new(),
            tokens: self.tokens.status(names),
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
            "fairlane_proxy_ambiguous_identity_total",
            "Requests answered 400 for a duplicated key or Authorization header.",
            "counter",
        );
        let _ = writeln!(
            o,
            "fairlane_proxy_ambiguous_identity_total {}",
            self.ambiguous_identity
        );
        g(
            &mut o,
            "fairlane_proxy_reloads_total",
            "Configuration reloads applied.",
            "counter",
        );
        let _ = writeln!(o, "fairlane_proxy_reloads_total {}", self.reloads);
        g(
            &mut o,
            "fairlane_proxy_tls_handshake_failures_total",
            "TLS handshakes that failed or timed out on the TLS listener.",
            "counter",
        );
        let _ = writeln!(
            o,
            "fairlane_proxy_tls_handshake_failures_total {}",
            self.tls_handshake_failures
        );
        type Field = fn(&TenantStatus) -> f64;
        let per: [(&str, &str, &str, Field); 8] = [
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
                "Requests whose client left while queued or in flight.",
                "counter",
                |t| t.cancelled as f64,
            ),
            (
                "fairlane_proxy_cost_clamped_total",
                "Charged costs clamped by the [cost] bounds.",
                "counter",
                |t| t.cost_clamped as f64,
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
                let _ = writeln!(o, "{name}{{tenant=\"{}\"}} {}", label(&t.name), f(t));
            }
        }
        g(
            &mut o,
            "fairlane_proxy_rejected_total",
            "Requests answered by the proxy, by reason.",
            "counter",
        );
        for t in &self.tenants {
            let tenant = label(&t.name);
            for r in Reason::ALL {
                let c = t.rejected.get(r.name()).copied().unwrap_or(0);
                let _ = writeln!(
                    o,
                    "fairlane_proxy_rejected_total{{tenant=\"{tenant}\",reason=\"{}\",code=\"{}\"}} {c}",
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
                let tenant = label(&t.name);
                let mut cum = 0;
                for (i, c) in counts.iter().enumerate() {
                    cum += c;
                    let le = self
                        .buckets
                        .get(i)
                        .map_or("+Inf".to_string(), |b| b.to_string());
                    let _ = writeln!(o, "{name}_bucket{{tenant=\"{tenant}\",le=\"{le}\"}} {cum}");
                }
                let _ = writeln!(o, "{name}_count{{tenant=\"{tenant}\"}} {cum}");
                let _ = writeln!(
                    o,
                    "{name}_sum{{tenant=\"{tenant}\"}} {}",
                    if pick == 0 {
                        t.wait_sum
                    } else {
                        t.upstream_sum
                    }
                );
            }
        }
        if let Some(c) = &self.cluster {
            o.push_str(&c.prometheus());
        }
        crate::levels::prometheus(&mut o, &self.levels);
        if let Some(t) = &self.tokens {
            o.push_str(&t.prometheus());
        }
        o
    }
}

#[cfg(test)]
mod tests {
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
    fn label_values_are_escaped() {
        assert_eq!(label("plain"), "plain");
        assert_eq!(label("t0\\"), "t0\\\\");
        assert_eq!(label("a\"b"), "a\\\"b");
        assert_eq!(label("x\ny"), "x\\ny");
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
        let text = m.status(&names, &gate, 0.0).prometheus();
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

    fn policy() -> CostPolicy {
        CostPolicy {
            max_ratio: 1000.0,
            floor: 60.0,
            max: 3600.0,
            initial: 0.01,
            log_interval_ms: 10_000,
        }
    }

    #[test]
    fn costs_are_bounded() {
        let p = policy();
        let s = TenantStats::default();
        for (reported, measured, want) in [
            (Some(0.02), 0.5, Bounded::Kept(0.02)),
            (None, 0.5, Bounded::Kept(0.5)),
            (Some(1e305), 0.5, Bounded::Clamped(60.0)),
            (Some(f64::INFINITY), 0.5, Bounded::Clamped(60.0)),
            (Some(f64::NAN), 0.5, Bounded::Clamped(0.5)),
            (Some(-3.0), 0.25, Bounded::Clamped(0.25)),
            (Some(f64::MAX), f64::INFINITY, Bounded::Clamped(60.0)),
        ] {
            let s2 = TenantStats::default();
            assert_eq!(s2.bound_cost(reported, measured, &p), want, "{reported:?}");
            s.bound_cost(reported, measured, &p);
        }
        assert_eq!(s.cost_clamped.load(Relaxed), 5);
        assert!(s.estimate(p.initial).is_finite());
        // A tenant whose costs are large has a cap of max_ratio × its estimate, up to max.
        let big = TenantStats::default();
        for _ in 0..100 {
            assert_eq!(big.bound_cost(Some(3.0), 3.0, &p), Bounded::Kept(3.0));
        }
        assert_eq!(big.bound_cost(Some(2999.0), 0.0, &p), Bounded::Kept(2999.0));
        assert_eq!(big.bound_cost(Some(1e9), 0.0, &p), Bounded::Clamped(3600.0));
        // Climbing by the largest accepted step still ends at `max`, never at infinity.
        let climb = TenantStats::default();
        for _ in 0..1000 {
            let cap = (climb.estimate(p.initial) * 1000.0).clamp(60.0, 3600.0);
            climb.bound_cost(Some(cap), 0.0, &p);
        }
        assert!(climb.estimate(p.initial) <= 3600.0);
    }

    #[test]
    fn clamp_logs_are_rate_limited() {
        let s = TenantStats::default();
        assert!(s.clamp_log_due(60_000));
        assert!(!s.clamp_log_due(60_000));
        assert!(!s.clamp_log_due(60_000));
    }

    /// received = completed + rejected + cancelled + queued + in_flight after every step.
    #[test]
    fn tickets_keep_the_identity() {
        let stats = Arc::new(TenantStats::default());
        let check = |what: &str| {
            let rejected: u64 = Reason::ALL.iter().map(|&r| stats.rejected(r)).sum();
            let sum = stats.completed.load(Relaxed)
                + rejected
                + stats.cancelled.load(Relaxed)
                + stats.queued.load(Relaxed)
                + stats.in_flight.load(Relaxed);
            assert_eq!(stats.received.load(Relaxed), sum, "{what}");
        };
        let t = |_: ()| Ticket::new(stats.clone(), &Arc::from("a"), policy());
        let a = t(());
        let b = t(());
        let c = t(());
        let d = t(());
        let e = t(());
        check("five arrived");
        assert_eq!(stats.queued.load(Relaxed), 5);
        a.reject(Reason::QueueFull);
        a.reject(Reason::QueueFull); // once only
        drop(a);
        b.dispatched();
        c.dispatched();
        d.dispatched();
        check("three dispatched");
        assert_eq!(stats.in_flight.load(Relaxed), 3);
        b.complete(0.1, 0.1);
        drop(b);
        c.reject(Reason::UpstreamError);
        drop(c);
        drop(d); // client gone while in flight
        drop(e); // client gone while queued
        check("all answered");
        assert_eq!(stats.received.load(Relaxed), 5);
        assert_eq!(stats.completed.load(Relaxed), 1);
        assert_eq!(stats.cancelled.load(Relaxed), 2);
        assert_eq!(
            stats.queued.load(Relaxed) + stats.in_flight.load(Relaxed),
            0
        );
    }

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
