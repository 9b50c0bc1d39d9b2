//! One request's trip: identify → read the body (no slot held) → queue for a slot → send
//! upstream → buffer the response (or stream it, if larger than the buffer) → charge the slot
//! time (or the upstream-reported cost) when the slot is freed. Every request gets exactly one
//! response: the upstream's, or one of the proxy's own (401, 400, 408, 413, 429, 502, 503,
//! 504).

use std::collections::{HashMap, VecDeque};
use std::future::{poll_fn, Future};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::gate::{Permit, Reject};
use crate::metrics::{CostPolicy, Reason, Ticket};
use crate::pool::{Conn, Pool, UpstreamError};
use crate::server::{Inner, Settings};
use crate::tenant::Who;
use fairlane_core::TenantId;

/// Errors of bodies the proxy streams.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the proxy sends: a small one of its own, or the upstream's,
/// streamed and metered.
// Not boxed: nearly every response is `Upstream`, and a box would be one more allocation
// per request (issue 19).
#[allow(clippy::large_enum_variant)]
pub enum ProxyBody {
    /// The proxy's own answer.
    Full(Option<Bytes>),
    /// The upstream's response body; the slot is held until it ends.
    Upstream(MeteredBody),
}

impl ProxyBody {
    /// A body with these bytes.
    pub fn text(s: impl Into<Bytes>) -> Self {
        ProxyBody::Full(Some(s.into()))
    }
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            ProxyBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            ProxyBody::Upstream(m) => Pin::new(m).poll_frame(cx),
        }
    }
    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(b) => b.is_none(),
            ProxyBody::Upstream(m) => m.is_end_stream(),
        }
    }
    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ProxyBody::Full(None) => SizeHint::with_exact(0),
            ProxyBody::Upstream(m) => m.size_hint(),
        }
    }
}

/// An upstream response body: from hyper's client, or read off the socket by the own path.
// Not boxed: one of the two per response, and a box would be one more allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum UpBody {
    /// hyper's client (`listen.http1 = "hyper"`).
    Hyper(Incoming),
    /// The own path's upstream socket (`listen.http1 = "own"`).
    Raw(crate::rawpool::RawBody),
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            UpBody::Hyper(b) => Pin::new(b)
                .poll_frame(cx)
                .map(|o| o.map(|r| r.map_err(Into::into))),
            UpBody::Raw(b) => Pin::new(b).poll_frame(cx),
        }
    }
    fn is_end_stream(&self) -> bool {
        match self {
            UpBody::Hyper(b) => b.is_end_stream(),
            UpBody::Raw(b) => b.is_end_stream(),
        }
    }
    fn size_hint(&self) -> SizeHint {
        match self {
            UpBody::Hyper(b) => b.size_hint(),
            UpBody::Raw(b) => b.size_hint(),
        }
    }
}

/// The upstream's response body: what was buffered (all of it, when it fitted in
/// `limits.response_buffer_bytes`; the slot is then already free), then the rest streamed.
/// Holds the request's [`Permit`] until the upstream body ends (or the client goes away),
/// then charges the cost and frees the slot.
pub struct MeteredBody {
    /// The first buffered frame (most responses have one: no `VecDeque` allocated for it).
    first: Option<Frame<Bytes>>,
    prefix: VecDeque<Frame<Bytes>>,
    prefix_bytes: u64,
    /// The upstream body has ended (everything left is in `prefix`).
    inner_done: bool,
    inner: UpBody,
    done: Option<Done>,
    now: Option<crate::gate::Gate>,
    /// The upstream connection of a streamed response: back to the pool when the body has
    /// ended cleanly, closed if it is dropped part-way.
    upstream: Option<(Conn, Arc<Pool>)>,
    /// The upstream's head as it came, for an own-path client (its `Response` then carries
    /// only the status).
    raw_head: Option<crate::rawpool::RespHead>,
}

struct Done {
    permit: Permit,
    /// Held while the response streams past the buffer (a slot held for a slow reader).
    _streaming: Option<StreamGuard>,
    stats: Ticket,
    reported_cost: Option<f64>,
    /// For the adaptive depth controller: response time = arrival → end of response.
    depth: Option<(crate::depth::Controller, TenantId, Instant)>,
}

impl MeteredBody {
    /// The upstream's head as it came, if it was kept raw for an own-path client.
    pub(crate) fn take_raw_head(&mut self) -> Option<crate::rawpool::RespHead> {
        self.raw_head.take()
    }

    fn finish(&mut self) {
        if let Some(mut d) = self.done.take() {
            let secs = d.permit.held().as_secs_f64();
            let cost = d.stats.charge(d.reported_cost, secs);
            d.permit.set_cost(cost);
            d.stats.complete(secs, cost);
            if let Some((c, tenant, arrival)) = d.depth {
                let now = self.now.as_ref().map_or(0.0, |g| g.now());
                crate::depth::observe(&c, tenant, arrival.elapsed().as_secs_f64(), now);
            }
            drop(d.permit);
        }
    }
}

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(f) = self.first.take().or_else(|| self.prefix.pop_front()) {
            if let Some(d) = f.data_ref() {
                self.prefix_bytes -= d.len() as u64;
            }
            return Poll::Ready(Some(Ok(f)));
        }
        if self.inner_done {
            return Poll::Ready(None);
        }
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(None) => {
                if let Some((conn, pool)) = self.upstream.take() {
                    pool.put(conn);
                }
                self.finish()
            }
            Poll::Ready(Some(Err(_))) => {
                self.upstream = None;
                self.finish()
            }
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => {
                if let Some((conn, pool)) = self.upstream.take() {
                    pool.put(conn);
                }
                self.finish()
            }
            _ => {}
        }
        r
    }
    fn is_end_stream(&self) -> bool {
        self.first.is_none()
            && self.prefix.is_empty()
            && (self.inner_done || self.inner.is_end_stream())
    }
    fn size_hint(&self) -> SizeHint {
        if self.inner_done {
            return SizeHint::with_exact(self.prefix_bytes);
        }
        let h = self.inner.size_hint();
        let mut out = SizeHint::new();
        out.set_lower(h.lower() + self.prefix_bytes);
        if let Some(u) = h.upper() {
            out.set_upper(u + self.prefix_bytes);
        }
        out
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The request body as it goes upstream: read in full before the request queued.
pub type UpstreamBody = Full<Bytes>;

/// Slots held by responses streaming past the buffer, per tenant (issue 16: a tenant whose
/// clients do not read must not hold every slot).
#[derive(Debug, Default)]
pub(crate) struct StreamSlots {
    held: Mutex<HashMap<TenantId, usize>>,
    /// Responses refused (503) because their tenant was at its share.
    pub refused: AtomicU64,
}

/// One slot counted in [`StreamSlots`] until dropped.
pub(crate) struct StreamGuard {
    inner: Arc<Inner>,
    tenant: TenantId,
}

impl StreamSlots {
    /// Count a streaming slot for `tenant` unless it already holds `cap`.
    fn take(inner: &Arc<Inner>, tenant: TenantId, cap: usize) -> Option<StreamGuard> {
        let mut held = inner
            .streaming
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let n = held.entry(tenant).or_insert(0);
        if *n >= cap {
            drop(held);
            inner.streaming.refused.fetch_add(1, Relaxed);
            return None;
        }
        *n += 1;
        Some(StreamGuard {
            inner: inner.clone(),
            tenant,
        })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut held = self
            .inner
            .streaming
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

/// Why a request body could not be read.
pub(crate) enum BodyFault {
    /// Larger than `limits.max_body_bytes` (413).
    TooLarge,
    /// Not received within `limits.body_timeout_ms` (408).
    Timeout,
    /// Broken off or badly framed (400).
    Broken,
}

/// Read a request body in full (at most `max` bytes, within `limit`) before it queues: a
/// client that trickles its body holds no upstream slot meanwhile.
async fn read_body(mut body: Incoming, max: u64, limit: Duration) -> Result<Bytes, BodyFault> {
    if body.is_end_stream() {
        return Ok(Bytes::new());
    }
    let read = async {
        let mut parts: Vec<Bytes> = Vec::new();
        let mut total = 0u64;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|_| BodyFault::Broken)?;
            if let Ok(d) = frame.into_data() {
                total += d.len() as u64;
                if total > max {
                    return Err(BodyFault::TooLarge);
                }
                parts.push(d);
            }
        }
        Ok(match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().unwrap_or_default(),
            _ => {
                let mut all = Vec::with_capacity(total as usize);
                parts.iter().for_each(|p| all.extend_from_slice(p));
                Bytes::from(all)
            }
        })
    };
    tokio::time::timeout(limit, read)
        .await
        .map_err(|_| BodyFault::Timeout)?
}

const HOP_BY_HOP: [HeaderName; 8] = [
    http::header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    http::header::TE,
    http::header::TRAILER,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
    http::header::PROXY_AUTHORIZATION,
];

/// The header the upstream learns the tenant from (whatever the client sent is replaced).
const TENANT_HEADER: HeaderName = HeaderName::from_static("x-fairlane-tenant");
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");

/// Remove hop-by-hop headers, including those the `Connection` header names.
fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Most messages carry none: one pass over the few names present is cheaper than eight
    // hashed removals (issue 19).
    if !h.keys().any(|k| HOP_BY_HOP.contains(k)) {
        return;
    }
    let named: Vec<HeaderName> = h
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in HOP_BY_HOP {
        h.remove(n);
    }
}

fn own(status: StatusCode, msg: &str) -> Response<ProxyBody> {
    let mut r = Response::new(ProxyBody::text(format!("{msg}\n")));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn rejected(inner: &Inner, stats: &Ticket, reason: Reason, msg: &str) -> Response<ProxyBody> {
    stats.reject(reason);
    let mut r = own(
        StatusCode::from_u16(reason.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        msg,
    );
    if matches!(reason.status(), 429 | 503) {
        let secs = inner.settings().config.limits.retry_after_s;
        r.headers_mut()
            .insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    if matches!(
        reason,
        Reason::Shutdown | Reason::BodyTooLarge | Reason::BadRequest | Reason::BodyTimeout
    ) {
        r.headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// The client a connection came from, as the proxy reports it upstream.
pub(crate) struct Peer {
    /// Its address.
    pub addr: SocketAddr,
    /// Its IP as an `X-Forwarded-For` value, formatted once per connection.
    pub forwarded_for: HeaderValue,
}

impl Peer {
    /// The peer of a connection from `addr`.
    pub fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            forwarded_for: HeaderValue::from_str(&addr.ip().to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
        }
    }
}

/// Serve one client request (the hyper path): [`admit`], read the body, [`dispatch`].
pub(crate) async fn handle(
    inner: Arc<Inner>,
    req: Request<Incoming>,
    peer: Arc<Peer>,
) -> Response<ProxyBody> {
    let arrival = Instant::now();
    let settings = inner.settings();
    // Split at once, and `req` never borrowed: a borrowed local keeps its place in this
    // future across every await, and a queued request keeps this future (issue 19).
    let (parts, body) = req.into_parts();
    let admitted = match admit(
        &inner,
        &settings,
        ReqHead::Parts(Box::new(parts)),
        &peer,
        arrival,
    ) {
        Ok(a) => a,
        Err(r) => return r,
    };
    // Boxed, and only when there is a body: its reader would otherwise size this future.
    let read = if body.is_end_stream() {
        Ok(Bytes::new())
    } else {
        let (max, limit) = admitted.body_limits();
        Box::pin(read_body(body, max, limit)).await
    };
    match read {
        Ok(body) => dispatch(&inner, admitted, body, &peer, None).await,
        Err(f) => body_fault(&inner, admitted, f),
    }
}

/// A request head as it reaches [`admit`].
pub(crate) enum ReqHead {
    /// As `http` parts: hyper's path, and own-path heads the `http` types must read. Boxed:
    /// every future that holds a head would otherwise be sized for this rarer form, and
    /// moved (copied) whole on the own path's every request (issue 19).
    Parts(Box<http::request::Parts>),
    /// As the own path's client sent it (issue 19: no `HeaderMap` built).
    Raw(crate::rawreq::RawRequest),
}

/// An admitted request's head.
enum Head {
    /// `http` parts, with the target checked to be a path.
    Parts {
        parts: Box<http::request::Parts>,
        pq: http::uri::PathAndQuery,
    },
    /// Raw (its target is a path by construction).
    Raw(crate::rawreq::RawRequest),
}

/// A response head from the upstream.
enum UpHead {
    /// Parsed by hyper's client (boxed, as `ReqHead::Parts`).
    Parts(Box<http::response::Parts>),
    /// As the upstream sent it (the own path's upstream side).
    Raw(crate::rawpool::RespHead),
}

/// Whether a header value reads as a string (`HeaderValue::to_str`: visible ASCII or tab).
fn visible(v: &[u8]) -> bool {
    v.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b))
}

/// A header value as `HeaderValue::to_str` and then `trim` would read it.
fn text(v: &[u8]) -> Option<&str> {
    std::str::from_utf8(v)
        .ok()
        .filter(|_| visible(v))
        .map(str::trim)
}

/// A request that passed the checks needing no body and no slot: who sent it, its class,
/// and its metrics ticket (counted received; answered, completed or cancelled later).
pub(crate) struct Admitted<'a> {
    settings: &'a Settings,
    head: Head,
    tenant: TenantId,
    class: fairlane_core::ClassId,
    stats: Ticket,
    arrival: Instant,
}

impl Admitted<'_> {
    /// The most body bytes the request may send, and how long it has to send them
    /// (`limits.max_body_bytes`, `limits.body_timeout_ms`).
    pub fn body_limits(&self) -> (u64, Duration) {
        let l = &self.settings.config.limits;
        (l.max_body_bytes, Duration::from_millis(l.body_timeout_ms))
    }
}

/// Identify the tenant and check what needs no body and no slot (method, target, declared
/// length). `Err`: the proxy's own answer (401, 400, 413).
// The `Err` is the response itself, returned as it is: boxing it would add an allocation.
#[allow(clippy::result_large_err)]
pub(crate) fn admit<'a>(
    inner: &Arc<Inner>,
    settings: &'a Settings,
    head: ReqHead,
    peer: &Peer,
    arrival: Instant,
) -> Result<Admitted<'a>, Response<ProxyBody>> {
    let who = match &head {
        ReqHead::Parts(p) => settings.identifier.identify(&p.headers, peer.addr.ip()),
        ReqHead::Raw(r) => {
            r.with_headers(|hs| settings.identifier.identify_raw(hs, peer.addr.ip()))
        }
    };
    let tenant = match who {
        Who::Tenant(t) => t,
        Who::Unauthorized => {
            inner.metrics.unauthorized.fetch_add(1, Relaxed);
            let mut r = own(StatusCode::UNAUTHORIZED, "unknown or missing API key");
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            return Err(r);
        }
        Who::Ambiguous => {
            inner.metrics.ambiguous_identity.fetch_add(1, Relaxed);
            let mut r = own(
                StatusCode::BAD_REQUEST,
                "more than one API key header (or Authorization header): the tenant is ambiguous",
            );
            r.headers_mut()
                .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            return Err(r);
        }
    };
    // Counted received now; answered, completed or — if dropped unanswered — cancelled.
    let costs = CostPolicy::of(&settings.config);
    let stats = match settings.identifier.name_ref(tenant) {
        Some(name) => Ticket::new(inner.metrics.tenant(tenant), name, costs),
        None => Ticket::new(inner.metrics.tenant(tenant), &Arc::from("?"), costs),
    };
    let limits = &settings.config.limits;

    let method = match &head {
        ReqHead::Parts(p) => &p.method,
        ReqHead::Raw(r) => r.method(),
    };
    if *method == http::Method::CONNECT {
        return Err(rejected(
            inner,
            &stats,
            Reason::BadRequest,
            "CONNECT is not supported",
        ));
    }
    let head = match head {
        ReqHead::Raw(r) => Head::Raw(r),
        ReqHead::Parts(parts) => {
            let Some(pq) = parts.uri.path_and_query().cloned() else {
                return Err(rejected(
                    inner,
                    &stats,
                    Reason::BadRequest,
                    "request target must be a path",
                ));
            };
            if !pq.path().starts_with('/') && pq.path() != "*" {
                return Err(rejected(
                    inner,
                    &stats,
                    Reason::BadRequest,
                    "request target must be a path",
                ));
            }
            Head::Parts { parts, pq }
        }
    };
    let length = match &head {
        Head::Parts { parts, .. } => parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .map(|v| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok())),
        Head::Raw(r) => r.header("content-length", |v| {
            v.map(|v| text(v).and_then(|s| s.parse::<u64>().ok()))
        }),
    };
    match length {
        Some(None) => {
            return Err(rejected(
                inner,
                &stats,
                Reason::BadRequest,
                "invalid Content-Length",
            ))
        }
        Some(Some(n)) if n > limits.max_body_bytes => {
            return Err(rejected(
                inner,
                &stats,
                Reason::BodyTooLarge,
                "request body too large",
            ))
        }
        _ => {}
    }
    let class = match &head {
        Head::Parts { parts, pq } => settings.identifier.classify(&parts.method, pq.path()),
        Head::Raw(r) => settings.identifier.classify(r.method(), r.path()),
    };
    Ok(Admitted {
        settings,
        head,
        tenant,
        class,
        stats,
        arrival,
    })
}

/// The answer to a request whose body could not be read (413, 408, 400).
pub(crate) fn body_fault(inner: &Inner, a: Admitted<'_>, fault: BodyFault) -> Response<ProxyBody> {
    let (reason, msg) = match fault {
        BodyFault::TooLarge => (Reason::BodyTooLarge, "request body too large"),
        BodyFault::Timeout => (Reason::BodyTimeout, "request body not received in time"),
        BodyFault::Broken => (Reason::BadRequest, "request body broken off"),
    };
    rejected(inner, &a.stats, reason, msg)
}

/// What ends a request's wait and its upstream exchange early: the queue and upstream
/// timeouts (one timer, re-armed) and the proxy's hard stop.
///
/// The own HTTP/1 path keeps one for each connection (issue 19): its timer stays in the
/// wheel across requests and is moved on only when it fires early ([`arm`], [`poll_due`]),
/// and its hard-stop waiter stays registered, so a request makes no timer entry and
/// registers no waiter. hyper's path makes one per request ([`dispatch`] with `None`).
pub(crate) struct Bounds<'a> {
    /// The queue timeout while the request waits for a slot, then the upstream timeout.
    pub timer: Pin<&'a mut Sleep>,
    /// Resolves once the proxy hard-stops.
    pub hard_stop: HardStop<'a>,
}

/// The proxy's hard stop (`Inner::hard_stop`) as one task watches it. Its waiter is
/// registered by the first poll and stays registered while this lives; later polls from the
/// same task read the watch's version (one atomic load) rather than lock the waiter list, as
/// polling a registered `Notified` does. Ready for good once the stop has come.
pub(crate) struct HardStop<'a> {
    /// A receiver that never marks a value seen: its version changes only with a send.
    seen: &'a watch::Receiver<bool>,
    /// The waiter: `wait_for(true)` on another receiver of the same watch.
    wait: Pin<&'a mut (dyn Future<Output = ()> + Send + 'a)>,
    /// The waker `wait` was registered with, once it was polled.
    waker: Option<Waker>,
    stopped: bool,
}

impl<'a> HardStop<'a> {
    /// Watch for the hard stop: `seen` a receiver of `Inner::hard_stop`, `wait` a future
    /// over another one that resolves when its value is (or becomes) true.
    pub fn new(
        seen: &'a watch::Receiver<bool>,
        wait: Pin<&'a mut (dyn Future<Output = ()> + Send + 'a)>,
    ) -> Self {
        HardStop {
            seen,
            wait,
            waker: None,
            stopped: false,
        }
    }

    /// Ready once the proxy has hard-stopped (and on every poll after).
    pub fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopped {
            return Poll::Ready(());
        }
        // Registered with this task's waker and nothing sent since: nothing to do.
        if let Some(w) = &self.waker {
            if w.will_wake(cx.waker()) && matches!(self.seen.has_changed(), Ok(false)) {
                return Poll::Pending;
            }
        }
        match self.wait.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stopped = true;
                self.waker = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    self.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Queue an admitted request (with its whole body) for a slot, then forward it. `bounds`:
/// the connection's timer and hard-stop watch (own path); `None` makes them for this
/// request.
pub(crate) async fn dispatch(
    inner: &Arc<Inner>,
    a: Admitted<'_>,
    body: Bytes,
    peer: &Peer,
    mut bounds: Option<&mut Bounds<'_>>,
) -> Response<ProxyBody> {
    let Admitted {
        settings,
        head,
        tenant,
        class,
        stats,
        arrival,
    } = a;
    let limits = &settings.config.limits;
    // Queue for an upstream slot.
    let waiting = match inner.gate.acquire(tenant, class) {
        Ok(w) => w,
        Err(Reject::Closed) => return rejected(inner, &stats, Reason::Shutdown, "shutting down"),
        Err(Reject::QueueFull { .. }) => {
            return rejected(
                inner,
                &stats,
                Reason::QueueFull,
                "proxy queue full, retry later",
            )
        }
        Err(Reject::TenantQueueFull { .. }) => {
            return rejected(
                inner,
                &stats,
                Reason::TenantQueueFull,
                "tenant queue full, retry later",
            )
        }
        Err(e) => return rejected(inner, &stats, Reason::Internal, &e.to_string()),
    };
    let queue_timeout = std::time::Duration::from_millis(limits.queue_timeout_ms);
    let permit = match granted_or_wait(waiting) {
        Ok(p) => p,
        Err(waiting) => match match bounds.as_mut() {
            Some(b) => {
                let due = tokio::time::Instant::now() + queue_timeout;
                arm(b.timer.as_mut(), due);
                tokio::select! {
                    biased;
                    r = waiting => Ok(r),
                    _ = poll_fn(|cx| poll_due(b.timer.as_mut(), due, cx)) => Err(()),
                }
            }
            None => tokio::time::timeout(queue_timeout, waiting)
                .await
                .map_err(|_| ()),
        } {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return rejected(inner, &stats, Reason::Shutdown, "shutting down"),
            Err(()) => {
                return rejected(
                    inner,
                    &stats,
                    Reason::QueueTimeout,
                    "timed out waiting for the upstream",
                )
            }
        },
    };
    // One clock reading for the wait and the upstream deadline (issue 19: ≈ 8 a request).
    let now = Instant::now();
    stats
        .wait
        .record(now.saturating_duration_since(arrival).as_secs_f64());
    stats.dispatched();
    // Boxed: only what a request needs while it waits for its slot is stored in the future
    // that a queued request keeps allocated; the upstream exchange's state is allocated once
    // the gate has admitted it (issue 19, memory per queued connection).
    let deadline = tokio::time::Instant::from_std(now) + settings.config.upstream_timeout();
    let sent = Sent {
        inner,
        settings,
        head,
        body,
        peer,
        tenant,
        stats,
        permit,
        arrival,
    };
    match bounds {
        Some(b) => Box::pin(forward(sent, deadline, b)).await,
        None => Box::pin(forward_alone(sent, deadline)).await,
    }
}

/// Make `timer` fire no later than `due`. A timer still armed for an earlier deadline (the
/// connection's previous request) is left as it is, and [`poll_due`] moves it on when it
/// fires: `Sleep::reset` clones the runtime handle (an atomic increment and decrement on a
/// count every worker thread shares), so a reset per request costs about what a new
/// `Sleep` does (issue 19). A connection's timer is then reset about once per timeout,
/// not once per request.
fn arm(timer: Pin<&mut Sleep>, due: tokio::time::Instant) {
    if timer.is_elapsed() || timer.deadline() > due {
        timer.reset(due);
    }
}

/// Ready once `due` has passed, with `timer` [`arm`]ed for it: when it fires for an earlier
/// deadline, it is reset to `due`.
fn poll_due(
    mut timer: Pin<&mut Sleep>,
    due: tokio::time::Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        std::task::ready!(timer.as_mut().poll(cx));
        if timer.deadline() >= due {
            return Poll::Ready(());
        }
        timer.as_mut().reset(due);
    }
}

/// What [`dispatch`] hands [`forward`]: an admitted request holding its slot.
struct Sent<'a> {
    inner: &'a Arc<Inner>,
    settings: &'a Settings,
    head: Head,
    body: Bytes,
    peer: &'a Peer,
    tenant: TenantId,
    stats: Ticket,
    permit: Permit,
    arrival: Instant,
}

/// [`forward`] with a timer and a hard-stop watch of its own (hyper's path).
async fn forward_alone(sent: Sent<'_>, deadline: tokio::time::Instant) -> Response<ProxyBody> {
    let timer = tokio::time::sleep_until(deadline);
    tokio::pin!(timer);
    let seen = sent.inner.hard_stop.subscribe();
    let mut rx = seen.clone();
    let wait = async move {
        let _ = rx.wait_for(|&stop| stop).await;
    };
    tokio::pin!(wait);
    let mut bounds = Bounds {
        timer,
        hard_stop: HardStop::new(&seen, wait),
    };
    forward(sent, deadline, &mut bounds).await
}

/// The permit if the gate granted the slot at once, or the wait for it. Apart from `handle`
/// so that the wait is never borrowed there (see the split at its top).
fn granted_or_wait(mut waiting: crate::gate::Waiting) -> Result<Permit, crate::gate::Waiting> {
    waiting.granted().ok_or(waiting)
}

/// Send a request the gate has admitted upstream (within `deadline`, the upstream timeout)
/// and turn the answer into the response.
async fn forward(
    sent: Sent<'_>,
    deadline: tokio::time::Instant,
    bounds: &mut Bounds<'_>,
) -> Response<ProxyBody> {
    let Sent {
        inner,
        settings,
        head,
        body,
        peer,
        tenant,
        stats,
        permit,
        arrival,
    } = sent;
    let limits = &settings.config.limits;
    // An own-path client's request came raw: its response head goes back raw too.
    let raw_client = matches!(head, Head::Raw(_));

    arm(bounds.timer.as_mut(), deadline);
    // Not boxed: this future is allocated only once the request is admitted (`dispatch`).
    // Pinned where it is made: `select!` would move (copy) it into its own tuple.
    let mut call = std::pin::pin!(send_upstream(settings, head, body, peer, tenant));
    let hard_stop = &mut bounds.hard_stop;
    let result = tokio::select! {
        biased; // no random branch order: one fewer RNG draw per request
        r = call.as_mut() => Ok(r),
        // The order `tokio::time::timeout` polls in: the call first, then the timer.
        _ = poll_fn(|cx| poll_due(bounds.timer.as_mut(), deadline, cx)) => Err(()),
        _ = poll_fn(|cx| hard_stop.poll_stopped(cx)) => {
            return rejected(inner, &stats, Reason::Shutdown, "shutting down");
        }
    };
    let (head, body, conn) = match result {
        Err(()) => return rejected(inner, &stats, Reason::UpstreamTimeout, "upstream timed out"),
        Ok(Err(Reason::UpstreamConnect)) => {
            return rejected(
                inner,
                &stats,
                Reason::UpstreamConnect,
                "cannot connect to the upstream",
            );
        }
        Ok(Err(_)) => {
            return rejected(
                inner,
                &stats,
                Reason::UpstreamError,
                "upstream connection failed",
            );
        }
        Ok(Ok(r)) => r,
    };
    // Unreadable, negative, infinite and huge values are bounded when charged (`[cost]`).
    let cost = |v: &[u8]| {
        text(v)
            .and_then(|s| s.parse::<f64>().ok())
            .map_or(f64::NAN, |ms| ms / 1000.0)
    };
    let reported_cost = settings.cost_header.as_ref().and_then(|h| match &head {
        UpHead::Parts(p) => p.headers.get(h).map(|v| cost(v.as_bytes())),
        UpHead::Raw(r) => r.with_headers(|hs| {
            hs.iter()
                .find(|x| x.name.eq_ignore_ascii_case(h.as_str()))
                .map(|x| cost(x.value))
        }),
    });
    let (parts, raw_head) = match head {
        UpHead::Parts(mut p) => {
            strip_hop_by_hop(&mut p.headers);
            (*p, None)
        }
        // Written to the client from the upstream's own lines (`h1conn`).
        UpHead::Raw(r) if raw_client => {
            let mut p = Response::new(()).into_parts().0;
            p.status = r.status;
            (p, Some(r))
        }
        UpHead::Raw(r) => {
            let mut p = r.to_parts();
            strip_hop_by_hop(&mut p.headers);
            (p, None)
        }
    };
    // Buffer up to `response_buffer_bytes`: if the whole response fits, the slot is freed as
    // soon as the upstream has sent it, however slowly the client then reads.
    let mut body = body;
    let buffer = limits.response_buffer_bytes;
    let mut first = None;
    let mut prefix = VecDeque::new();
    let mut prefix_bytes = 0u64;
    let mut inner_done = body.is_end_stream();
    if body.size_hint().lower() <= buffer {
        while !inner_done && prefix_bytes <= buffer {
            let next = tokio::select! {
                biased;
                f = body.frame() => f,
                _ = poll_fn(|cx| bounds.hard_stop.poll_stopped(cx)) => {
                    return rejected(inner, &stats, Reason::Shutdown, "shutting down");
                }
            };
            match next {
                None => inner_done = true,
                Some(Ok(f)) => {
                    if let Some(d) = f.data_ref() {
                        prefix_bytes += d.len() as u64;
                    }
                    if first.is_none() && prefix.is_empty() {
                        first = Some(f);
                    } else {
                        prefix.push_back(f);
                    }
                    inner_done = body.is_end_stream();
                }
                Some(Err(_)) => {
                    // The status line has not gone out yet: a clean 502, not a cut stream.
                    return rejected(
                        inner,
                        &stats,
                        Reason::UpstreamError,
                        "upstream connection failed",
                    );
                }
            }
        }
    }
    // Read in full: the connection can take the next request now.
    let mut conn = conn;
    if inner_done {
        if let Some(c) = conn.take() {
            settings.pool.put(c);
        }
    }
    // Streams past the buffer hold the slot for as long as the client takes to read; a
    // tenant may hold only its share of D that way.
    let streaming = if inner_done {
        None
    } else {
        let share = limits.max_streaming_share;
        let cap = ((inner.gate.depth() as f64 * share).ceil() as usize).max(1);
        match StreamSlots::take(inner, tenant, cap) {
            Some(g) => Some(g),
            None => {
                // Charge the slot time spent so far, then free the slot.
                let mut permit = permit;
                let secs = permit.held().as_secs_f64();
                permit.set_cost(reported_cost.unwrap_or(secs));
                drop(permit);
                return rejected(
                    inner,
                    &stats,
                    Reason::StreamingCap,
                    "too many responses streaming to slow readers for this tenant, retry later",
                );
            }
        }
    };
    let mut body = MeteredBody {
        first,
        prefix,
        prefix_bytes,
        inner_done,
        inner: body,
        done: Some(Done {
            permit,
            _streaming: streaming,
            stats,
            reported_cost,
            depth: inner.depth.clone().map(|c| (c, tenant, arrival)),
        }),
        now: inner.depth.as_ref().map(|_| inner.gate.clone()),
        upstream: conn.map(|c| (c, settings.pool.clone())),
        raw_head,
    };
    if body.inner_done || body.inner.is_end_stream() {
        body.finish();
    }
    Response::from_parts(parts, ProxyBody::Upstream(body))
}

/// Send a request upstream on the path `listen.http1` picks: hyper's client, or the own
/// path's raw sockets (one write: head and body). On the way: origin form, HTTP/1.1, no
/// hop-by-hop headers, `Host` if missing, `X-Forwarded-For`, and the tenant header in place
/// of whatever the client sent. `Err`: `UpstreamConnect` or `UpstreamError`.
async fn send_upstream(
    settings: &Settings,
    head: Head,
    body: Bytes,
    peer: &Peer,
    tenant: TenantId,
) -> Result<(UpHead, UpBody, Option<Conn>), Reason> {
    let tenant_value = match settings.name_values.get(tenant.0 as usize) {
        Some(Some(v)) => Some(v),
        _ => None,
    };
    match (head, &settings.raw_pool) {
        (Head::Raw(r), Some(raw)) => {
            // Straight from the client's lines (issue 19).
            let mut out = Vec::with_capacity(512 + body.len());
            r.write_upstream(
                &mut out,
                settings.authority.as_str(),
                &peer.forwarded_for,
                tenant_value,
                body.len(),
            );
            out.extend_from_slice(&body);
            let head_method = *r.method() == http::Method::HEAD;
            drop((r, body));
            send_raw(raw, &out, head_method).await
        }
        // Boxed: hyper's client future is most of this one's size, and the own path's
        // futures (moved whole at every call) would otherwise be sized for it (issue 19).
        (head, _) => Box::pin(send_generic(settings, head, body, peer, tenant_value)).await,
    }
}

/// [`send_upstream`] from `http` parts, or on hyper's client.
async fn send_generic(
    settings: &Settings,
    head: Head,
    body: Bytes,
    peer: &Peer,
    tenant_value: Option<&HeaderValue>,
) -> Result<(UpHead, UpBody, Option<Conn>), Reason> {
    let (mut parts, pq) = match head {
        // A reload switched `listen.http1`: the generic way.
        Head::Raw(r) => {
            let parts = r.to_parts();
            let pq = parts
                .uri
                .path_and_query()
                .cloned()
                .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
            (parts, pq)
        }
        Head::Parts { parts, pq } => (*parts, pq),
    };
    // Origin form (the pool's connections all go to the one upstream).
    parts.uri = Uri::from(pq);
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    if parts.headers.get(http::header::HOST).is_none() {
        if let Ok(v) = HeaderValue::from_str(settings.authority.as_str()) {
            parts.headers.insert(http::header::HOST, v);
        }
    }
    parts
        .headers
        .append(X_FORWARDED_FOR, peer.forwarded_for.clone());
    // Overwrite whatever the client sent: the upstream may trust this header.
    match tenant_value {
        Some(v) => {
            parts.headers.insert(TENANT_HEADER, v.clone());
        }
        None => {
            parts.headers.remove(TENANT_HEADER);
        }
    }
    let Some(raw) = &settings.raw_pool else {
        let req = Request::from_parts(parts, Full::new(body));
        return match settings.pool.send(req).await {
            Ok((resp, conn)) => {
                let (p, b) = resp.into_parts();
                Ok((UpHead::Parts(Box::new(p)), UpBody::Hyper(b), Some(conn)))
            }
            Err(UpstreamError::Connect(_)) => Err(Reason::UpstreamConnect),
            Err(UpstreamError::Http(_)) => Err(Reason::UpstreamError),
        };
    };
    let mut out = Vec::with_capacity(512 + body.len());
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(
        parts
            .uri
            .path_and_query()
            .map_or("/", |pq| pq.as_str())
            .as_bytes(),
    );
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in parts.headers.iter() {
        if name == http::header::CONTENT_LENGTH {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // The body's own length, never the client's framing.
    if !body.is_empty() || parts.headers.contains_key(http::header::CONTENT_LENGTH) {
        crate::h1::write_content_length(&mut out, body.len() as u64);
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    send_raw(raw, &out, parts.method == http::Method::HEAD).await
}

/// One exchange on the own path's upstream sockets.
async fn send_raw(
    raw: &Arc<crate::rawpool::RawPool>,
    request: &[u8],
    head_method: bool,
) -> Result<(UpHead, UpBody, Option<Conn>), Reason> {
    match raw.send(request, head_method).await {
        Ok((h, b)) => Ok((UpHead::Raw(h), UpBody::Raw(b), None)),
        Err(crate::rawpool::RawError::Connect) => Err(Reason::UpstreamConnect),
        Err(crate::rawpool::RawError::Broken) => Err(Reason::UpstreamError),
    }
}
