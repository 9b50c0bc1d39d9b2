//! One request's trip: identify → queue for a slot → stream upstream → stream back, charging
//! the upstream time (or the upstream-reported cost) when the response ends. Every request
//! gets exactly one response: the upstream's, or one of the proxy's own (401, 400, 413, 429,
//! 502, 503, 504).

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri, Version};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use crate::gate::{Permit, Reject};
use crate::metrics::{CostPolicy, Reason, Ticket};
use crate::server::Inner;
use crate::tenant::Who;
use fairlane_core::TenantId;

/// Errors of bodies the proxy streams.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response the proxy sends: a small one of its own, or the upstream's,
/// streamed and metered.
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
            ProxyBody::Upstream(m) => m.inner.is_end_stream(),
        }
    }
    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(Some(b)) => SizeHint::with_exact(b.len() as u64),
            ProxyBody::Full(None) => SizeHint::with_exact(0),
            ProxyBody::Upstream(m) => m.inner.size_hint(),
        }
    }
}

/// The upstream's response body. Holds the request's [`Permit`] until the body ends (or the
/// client goes away), then charges the cost and frees the slot.
pub struct MeteredBody {
    inner: Incoming,
    done: Option<Done>,
    now: Option<crate::gate::Gate>,
}

struct Done {
    permit: Permit,
    stats: Ticket,
    reported_cost: Option<f64>,
    /// For the adaptive depth controller: response time = arrival → end of response.
    depth: Option<(crate::depth::Controller, TenantId, Instant)>,
}

impl MeteredBody {
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
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        match &r {
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => self.finish(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.finish(),
            _ => {}
        }
        r.map(|o| o.map(|r| r.map_err(Into::into)))
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The client's request body on its way upstream, cut off at `limits.max_body_bytes`.
pub struct LimitedBody {
    inner: Incoming,
    remaining: u64,
    exceeded: Arc<AtomicBool>,
}

#[derive(Debug)]
struct TooLarge;
impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("request body over the size limit")
    }
}
impl std::error::Error for TooLarge {}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    let n = d.len() as u64;
                    if n > self.remaining {
                        self.exceeded.store(true, Relaxed);
                        return Poll::Ready(Some(Err(Box::new(TooLarge))));
                    }
                    self.remaining -= n;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

/// Remove hop-by-hop headers, including those the `Connection` header names.
fn strip_hop_by_hop(h: &mut HeaderMap) {
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
        Reason::Shutdown | Reason::BodyTooLarge | Reason::BadRequest
    ) {
        r.headers_mut()
            .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    r
}

/// Serve one client request.
pub(crate) async fn handle(
    inner: Arc<Inner>,
    req: Request<Incoming>,
    peer: SocketAddr,
) -> Response<ProxyBody> {
    let arrival = Instant::now();
    let settings = inner.settings();
    let tenant = match settings.identifier.identify(req.headers(), peer.ip()) {
        Who::Tenant(t) => t,
        Who::Unauthorized => {
            inner.metrics.unauthorized.fetch_add(1, Relaxed);
            let mut r = own(StatusCode::UNAUTHORIZED, "unknown or missing API key");
            r.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            return r;
        }
        Who::Ambiguous => {
            inner.metrics.ambiguous_identity.fetch_add(1, Relaxed);
            let mut r = own(
                StatusCode::BAD_REQUEST,
                "more than one API key header (or Authorization header): the tenant is ambiguous",
            );
            r.headers_mut()
                .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            return r;
        }
    };
    // Counted received now; answered, completed or — if dropped unanswered — cancelled.
    let stats = Ticket::new(
        inner.metrics.tenant(tenant),
        settings.identifier.name(tenant),
        CostPolicy::of(&settings.config),
    );
    let limits = &settings.config.limits;

    // Checks that need no slot.
    if req.method() == http::Method::CONNECT {
        return rejected(
            &inner,
            &stats,
            Reason::BadRequest,
            "CONNECT is not supported",
        );
    }
    let Some(pq) = req.uri().path_and_query().cloned() else {
        return rejected(
            &inner,
            &stats,
            Reason::BadRequest,
            "request target must be a path",
        );
    };
    if !pq.path().starts_with('/') && pq.path() != "*" {
        return rejected(
            &inner,
            &stats,
            Reason::BadRequest,
            "request target must be a path",
        );
    }
    let declared = req
        .headers()
        .get(http::header::CONTENT_LENGTH)
        .map(|v| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok()));
    match declared {
        Some(None) => {
            return rejected(&inner, &stats, Reason::BadRequest, "invalid Content-Length")
        }
        Some(Some(n)) if n > limits.max_body_bytes => {
            return rejected(
                &inner,
                &stats,
                Reason::BodyTooLarge,
                "request body too large",
            )
        }
        _ => {}
    }
    let class = settings.identifier.classify(req.method(), pq.path());

    // Queue for an upstream slot.
    let mut waiting = match inner.gate.acquire(tenant, class) {
        Ok(w) => w,
        Err(Reject::Closed) => return rejected(&inner, &stats, Reason::Shutdown, "shutting down"),
        Err(Reject::QueueFull { .. }) => {
            return rejected(
                &inner,
                &stats,
                Reason::QueueFull,
                "proxy queue full, retry later",
            )
        }
        Err(Reject::TenantQueueFull { .. }) => {
            return rejected(
                &inner,
                &stats,
                Reason::TenantQueueFull,
                "tenant queue full, retry later",
            )
        }
        Err(e) => return rejected(&inner, &stats, Reason::Internal, &e.to_string()),
    };
    let queue_timeout = std::time::Duration::from_millis(limits.queue_timeout_ms);
    let granted = waiting.granted();
    let permit = match granted {
        Some(p) => p,
        None => match tokio::time::timeout(queue_timeout, waiting).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return rejected(&inner, &stats, Reason::Shutdown, "shutting down"),
            Err(_) => {
                return rejected(
                    &inner,
                    &stats,
                    Reason::QueueTimeout,
                    "timed out waiting for the upstream",
                )
            }
        },
    };
    stats.wait.record(arrival.elapsed().as_secs_f64());
    stats.dispatched();

    // Forward.
    let (mut parts, body) = req.into_parts();
    let uri = Uri::builder()
        .scheme("http")
        .authority(settings.authority.clone())
        .path_and_query(pq)
        .build();
    let Ok(uri) = uri else {
        return rejected(&inner, &stats, Reason::BadRequest, "bad request target");
    };
    parts.uri = uri;
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    if parts.headers.get(http::header::HOST).is_none() {
        if let Ok(v) = HeaderValue::from_str(settings.authority.as_str()) {
            parts.headers.insert(http::header::HOST, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&peer.ip().to_string()) {
        parts
            .headers
            .append(HeaderName::from_static("x-forwarded-for"), v);
    }
    // Overwrite whatever the client sent: the upstream may trust this header.
    parts.headers.remove("x-fairlane-tenant");
    if let Some(v) = settings
        .names
        .get(tenant.0 as usize)
        .and_then(|n| HeaderValue::from_str(n).ok())
    {
        parts
            .headers
            .insert(HeaderName::from_static("x-fairlane-tenant"), v);
    }
    let exceeded = Arc::new(AtomicBool::new(false));
    let body = LimitedBody {
        inner: body,
        remaining: limits.max_body_bytes,
        exceeded: exceeded.clone(),
    };
    let upstream_req = Request::from_parts(parts, body);
    let call = tokio::time::timeout(
        settings.config.upstream_timeout(),
        settings.client.request(upstream_req),
    );
    let mut hard_stop = inner.hard_stop.subscribe();
    let result = tokio::select! {
        r = call => r,
        _ = hard_stop.wait_for(|&stop| stop) => {
            return rejected(&inner, &stats, Reason::Shutdown, "shutting down");
        }
    };
    let resp = match result {
        Err(_) => {
            return rejected(
                &inner,
                &stats,
                Reason::UpstreamTimeout,
                "upstream timed out",
            )
        }
        Ok(Err(e)) => {
            if exceeded.load(Relaxed) {
                return rejected(
                    &inner,
                    &stats,
                    Reason::BodyTooLarge,
                    "request body too large",
                );
            }
            if e.is_connect() {
                return rejected(
                    &inner,
                    &stats,
                    Reason::UpstreamConnect,
                    "cannot connect to the upstream",
                );
            }
            return rejected(
                &inner,
                &stats,
                Reason::UpstreamError,
                "upstream connection failed",
            );
        }
        Ok(Ok(r)) => r,
    };
    let (mut parts, body) = resp.into_parts();
    // Unreadable, negative, infinite and huge values are bounded when charged (`[cost]`).
    let reported_cost = settings.cost_header.as_ref().and_then(|h| {
        parts.headers.get(h).map(|v| {
            v.to_str()
                .ok()
                .and_then(|s| s.trim().parse::<f64>().ok())
                .map_or(f64::NAN, |ms| ms / 1000.0)
        })
    });
    strip_hop_by_hop(&mut parts.headers);
    let mut body = MeteredBody {
        inner: body,
        done: Some(Done {
            permit,
            stats,
            reported_cost,
            depth: inner.depth.clone().map(|c| (c, tenant, arrival)),
        }),
        now: inner.depth.as_ref().map(|_| inner.gate.clone()),
    };
    if body.inner.is_end_stream() {
        body.finish();
    }
    Response::from_parts(parts, ProxyBody::Upstream(body))
}
