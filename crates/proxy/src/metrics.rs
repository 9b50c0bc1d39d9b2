//! Per-tenant counters and histograms, kept with atomics (no lock on the request path once
//! a tenant's entry exists); `status` reads them into the JSON of `/status` and its
//! Prometheus text.
//!
//! Every request identified as a tenant is followed by a [`Ticket`] from arrival to its
//! answer, so that at every moment, per tenant,
//! `received = completed + Σ rejected + cancelled + queued + in_flight`: the ticket moves the
//! request from one state to the next and, if the request is dropped unanswered (the client
//! went away while it was queued or in flight), counts it as cancelled.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use fairlane_core::TenantId;

pub use crate::histogram::{quantile, Histogram, WorkerHistogram, BUCKETS};
pub use crate::workers::{Counter, PerWorker};

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

/// One tenant's counters. Those every request writes are kept per worker runtime
/// ([`PerWorker`]) and summed when read, so that the workers do not pass their cache lines
/// back and forth on every request.
#[derive(Default)]
// Aligned so that an `Arc`'s reference counts, which every request's ticket takes and
// drops, sit on a cache line apart from the fields.
#[repr(align(128))]
pub struct TenantStats {
    /// Requests identified as this tenant.
    pub received: Counter,
    /// Requests the upstream answered (any status).
    pub completed: Counter,
    rejected: [AtomicU64; Reason::ALL.len()],
    /// Time from arrival to slot grant.
    pub wait: WorkerHistogram,
    /// Time from slot grant to the end of the upstream response.
    pub upstream: WorkerHistogram,
    /// Total cost charged (seconds, or the cost header's unit).
    cost_micro: Counter,
    /// Received and not yet holding an upstream slot (reading the body, or queued).
    pub queued: Counter,
    /// Holding an upstream slot, until the response ends.
    pub in_flight: Counter,
    /// Dropped unanswered: the client went away while queued or in flight.
    pub cancelled: AtomicU64,
    /// Costs clamped by the `[cost]` bounds.
    pub cost_clamped: AtomicU64,
    /// The tenant's current cost estimate (seconds, `f64` bits; 0 = none yet), one per
    /// worker: each worker's average of the costs it charged the tenant, written on every
    /// completion without passing a shared line between the workers.
    estimate_bits: PerWorker<AtomicU64>,
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
            return in_tokens(config);
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

/// The `[cost]` bounds in weighted tokens: `max_ratio` as configured, the floor
/// `FLOOR_TOKENS` input and output tokens at the largest weights, the cap `MAX_TOKENS`
/// of each, and `scheduler.initial_estimate_ms` read as weighted tokens.
fn in_tokens(config: &crate::config::ProxyConfig) -> CostPolicy {
    let c = &config.cost;
    let (mut wp, mut wq) = (c.input_token_weight, c.output_token_weight);
    for t in &config.tenants {
        wp = wp.max(t.input_token_weight.unwrap_or(0.0));
        wq = wq.max(t.output_token_weight.unwrap_or(0.0));
    }
    CostPolicy {
        max_ratio: c.max_ratio,
        floor: crate::tokens::FLOOR_TOKENS as f64 * (wp + wq),
        max: crate::tokens::MAX_TOKENS as f64 * (wp + wq),
        initial: config.scheduler.initial_estimate_ms,
        log_interval_ms: c.log_interval_ms,
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
    /// The tenant's current cost estimate as this worker sees it: an exponential moving
    /// average (gain 1/8) of the costs it charged, starting at `initial`.
    pub fn estimate(&self, initial: f64) -> f64 {
        match self.estimate_bits.local().load(Relaxed) {
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
            .local()
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

    /// The cost charged in total (seconds, or the cost's unit).
    pub fn cost_total(&self) -> f64 {
        self.cost_micro.load(Relaxed) as f64 / 1e6
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
    stats: TenantRef,
    state: AtomicU8,
    costs: CostPolicy,
    /// The request is a gRPC call: the proxy's own answers to it are gRPC statuses.
    pub grpc: bool,
}

impl Ticket {
    /// A request of tenant `name` has arrived; its cost will be bounded by `costs`.
    pub fn new(stats: impl Into<TenantRef>, name: &Arc<str>, costs: CostPolicy) -> Ticket {
        let stats = stats.into();
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

/// A reference to a tenant's stats held by one worker runtime ([`Metrics::tenant_ref`]):
/// the tickets of its requests share it, so that taking and dropping one counts on a
/// reference count the other workers do not write.
#[derive(Clone)]
pub struct TenantRef(Arc<Held>);

/// The allocation one worker's [`TenantRef`]s share, holding the tenant's one stats.
struct Held(Arc<TenantStats>);

impl From<Arc<TenantStats>> for TenantRef {
    fn from(stats: Arc<TenantStats>) -> TenantRef {
        TenantRef(Arc::new(Held(stats)))
    }
}

impl std::ops::Deref for TenantRef {
    type Target = TenantStats;
    fn deref(&self) -> &TenantStats {
        &self.0 .0
    }
}

/// Every tenant's stats plus proxy-wide counters.
#[derive(Default)]
pub struct Metrics {
    tenants: RwLock<Vec<Arc<TenantStats>>>,
    /// Each worker's references to the tenants' stats, by tenant id (see [`TenantRef`]).
    refs: PerWorker<std::sync::Mutex<Vec<Option<TenantRef>>>>,
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

    /// The stats of a tenant as this worker holds them: what a request's [`Ticket`] takes,
    /// touching only this worker's lock and reference count once the tenant has been seen.
    pub fn tenant_ref(&self, id: TenantId) -> TenantRef {
        let mut refs = self.refs.local().lock().unwrap_or_else(|e| e.into_inner());
        let i = id.0 as usize;
        if let Some(Some(r)) = refs.get(i) {
            return r.clone();
        }
        let r = TenantRef::from(self.tenant(id));
        if refs.len() <= i {
            refs.resize(i + 1, None);
        }
        refs[i] = Some(r.clone());
        r
    }

    /// Every tenant's stats, by id.
    pub(crate) fn all(&self) -> Vec<Arc<TenantStats>> {
        self.tenants
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_workers_references_count_on_the_tenants_one_stats() {
        let m = Metrics::default();
        let (a, b) = (m.tenant_ref(TenantId(3)), m.tenant_ref(TenantId(3)));
        assert!(Arc::ptr_eq(&a.0, &b.0), "one reference per worker, shared");
        let t = Ticket::new(a, &Arc::from("t"), policy());
        assert_eq!(m.tenant(TenantId(3)).received.load(Relaxed), 1);
        drop(t);
        assert_eq!(m.tenant(TenantId(3)).cancelled.load(Relaxed), 1);
        assert_eq!(m.tenant(TenantId(0)).received.load(Relaxed), 0);
    }

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
}
