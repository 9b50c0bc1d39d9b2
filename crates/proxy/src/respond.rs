//! The end of the pipeline: the [`Answer`] a client adapter writes, whatever answered — the
//! upstream (its body buffered up to `limits.response_buffer_bytes`, or streamed beyond) or
//! the proxy itself (401, 400, 408, 413, 429, 502, 503, 504) — and the charge made when a
//! request's slot is freed.
//!
//! The charge is the seam for token costs (issue 38): a [`CostSource`] sees every data
//! frame of the response as it passes and names the cost when the body ends; without one,
//! the slot time is charged.

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use fairlane_core::TenantId;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};

use crate::cost::{CostSource, HeaderCost};
use crate::gate::{Gate, Permit};
use crate::head::ResponseHead;
use crate::metrics::{Reason, Ticket};
use crate::stream::{BoxError, PollFrame};
use crate::upstream::UpBody;

/// What a client adapter writes back for one request.
pub(crate) struct Answer {
    /// The status and header lines (the upstream's as it sent them, or the proxy's own).
    pub head: ResponseHead,
    /// The body.
    pub body: ProxyBody,
    /// Close the connection after this answer (an HTTP/1 client gets `Connection: close`).
    pub close: bool,
}

/// The body of every response the proxy sends: a small one of its own, or the upstream's,
/// streamed and metered.
// Not boxed: nearly every response is `Upstream`, and a box would be one more allocation
// per request (issue 19).
#[allow(clippy::large_enum_variant)]
pub enum ProxyBody {
    /// The proxy's own answer.
    Full(Option<Bytes>),
    /// The upstream's response body; the slot is held until it ends. Boxed: an [`Answer`]
    /// is returned through every step of the pipeline, and copied at each.
    Upstream(Box<MeteredBody>),
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> PollFrame {
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

impl ProxyBody {
    /// The tunnel of an upstream's `101` to a WebSocket upgrade (its slot already freed),
    /// once.
    pub(crate) fn tunnel(&mut self) -> Option<Box<crate::upstream::Upgraded>> {
        match self {
            ProxyBody::Upstream(m) => m.inner.tunnel(),
            ProxyBody::Full(_) => None,
        }
    }
}

/// The cost source for a response of `tenant` with this head: its token usage under
/// `openai-usage` (`tokens`: what was charged at admission), the cost header's value if
/// configured (an unreadable value is bounded when charged), else none (the slot time is
/// charged).
pub(crate) fn cost_source(
    header: Option<&http::HeaderName>,
    tokens: Option<(crate::tokens::Admission, &Arc<crate::tokens::TokenMetrics>)>,
    tenant: TenantId,
    head: &ResponseHead,
) -> Option<Box<dyn CostSource>> {
    if let Some((admission, metrics)) = tokens {
        let stream = head.header("content-type", |v| {
            let t = b"text/event-stream";
            v.is_some_and(|v| v.len() >= t.len() && v[..t.len()].eq_ignore_ascii_case(t))
        });
        let usage = crate::tokens::UsageCost::new(admission, stream, tenant, metrics);
        return Some(Box::new(usage));
    }
    let name = header?;
    let ms = head.header(name.as_str(), |v| {
        v.and_then(|v| std::str::from_utf8(v).ok())
            .filter(|s| s.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)))
            .and_then(|s| s.trim().parse::<f64>().ok())
    })?;
    Some(Box::new(HeaderCost(ms / 1000.0)))
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
    now: Option<Gate>,
}

/// What is settled when a request's slot is freed.
pub(crate) struct Done {
    pub permit: Permit,
    /// Held while the response streams past the buffer (a slot held for a slow reader).
    pub _streaming: Option<StreamGuard>,
    pub stats: Ticket,
    pub cost: Option<Box<dyn CostSource>>,
    /// The usage last reported as progress (0: none).
    pub progressed: f64,
    /// For the adaptive depth controller: response time = arrival → end of response.
    pub depth: Option<(crate::depth::Controller, TenantId, Instant)>,
}

impl MeteredBody {
    fn finish(&mut self) {
        if let Some(d) = self.done.take() {
            d.settle(self.now.as_ref());
        }
    }

    fn saw(&mut self, f: &Frame<Bytes>) {
        if let (Some(d), Some(data)) = (self.done.as_mut(), f.data_ref()) {
            d.saw(data);
        }
    }

    /// The upstream body ended (a clean end, or broken off by the upstream).
    fn ended(&mut self) {
        if let Some(c) = self.done.as_mut().and_then(|d| d.cost.as_mut()) {
            c.ended();
        }
        self.finish();
    }
}

impl Done {
    /// The body ended (or the client went away): charge the cost and free the slot. `now`:
    /// the gate, for the adaptive depth controller's clock.
    fn settle(mut self, now: Option<&Gate>) {
        let secs = self.permit.held().as_secs_f64();
        let reported = self.cost.as_mut().map(|c| c.cost());
        // Never below the usage reported as progress: the seam's usage never decreases.
        let cost = self.stats.charge(reported, secs).max(self.progressed);
        self.permit.set_cost(cost);
        self.stats.complete(secs, cost);
        if let Some((c, tenant, arrival)) = self.depth {
            let now = now.map_or(0.0, |g| g.now());
            crate::depth::observe(&c, tenant, arrival.elapsed().as_secs_f64(), now);
        }
        // The streaming count first: the freed slot's next holder may stream at once.
        self._streaming = None;
        drop(self.permit);
    }

    /// A data frame went by: the cost source sees it, and reports the cost so far.
    fn saw(&mut self, data: &[u8]) {
        if let Some(c) = self.cost.as_mut() {
            c.data(data);
            if let Some(used) = c.used() {
                self.progressed = used;
                self.permit.progress(used);
            }
        }
    }
}

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> PollFrame {
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
            Poll::Ready(Some(Ok(f))) => {
                self.saw(f);
                if self.inner.is_end_stream() {
                    self.ended()
                }
            }
            Poll::Ready(_) => self.ended(),
            Poll::Pending => {}
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

/// Slots held by responses streaming past the buffer, per tenant (issue 16: a tenant whose
/// clients do not read must not hold every slot).
#[derive(Debug, Default)]
pub(crate) struct StreamSlots {
    held: Arc<Mutex<HashMap<TenantId, usize>>>,
    /// Responses refused (503) because their tenant was at its share.
    pub refused: AtomicU64,
}

/// One slot counted in [`StreamSlots`] until dropped.
pub(crate) struct StreamGuard {
    held: Arc<Mutex<HashMap<TenantId, usize>>>,
    tenant: TenantId,
}

impl StreamSlots {
    /// Count a streaming slot for `tenant` unless it already holds `cap`.
    pub fn take(&self, tenant: TenantId, cap: usize) -> Option<StreamGuard> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(tenant).or_insert(0);
        if *n >= cap {
            drop(held);
            self.refused.fetch_add(1, Relaxed);
            return None;
        }
        *n += 1;
        Some(StreamGuard {
            held: self.held.clone(),
            tenant,
        })
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
    }
}

/// What [`buffer`] read of an upstream body before the client gets it.
pub(crate) struct Buffered {
    /// The first frame when it is data (most responses have one); a body whose first frame
    /// is trailers has them in `prefix`. Data only: a `Frame` is 96 bytes (a `HeaderMap`),
    /// and a `Buffered` over 128 bytes is moved by a `memcpy` call at every step.
    first: Option<Bytes>,
    prefix: VecDeque<Frame<Bytes>>,
    prefix_bytes: u64,
    /// The whole body was read.
    pub complete: bool,
}

/// Read `body` while it fits in `limit` bytes (all of it, if it does): the slot can then be
/// freed as soon as the upstream has sent it, however slowly the client reads. `Err`: the
/// upstream broke off before the end (the status line has not gone out: a clean 502).
/// A `streamed` body (gRPC, an event stream) is not read here at all.
pub(crate) async fn buffer(body: &mut UpBody, limit: u64, streamed: bool) -> Result<Buffered, ()> {
    let mut b = Buffered {
        first: None,
        prefix: VecDeque::new(),
        prefix_bytes: 0,
        complete: body.is_end_stream(),
    };
    if streamed || body.size_hint().lower() > limit {
        return Ok(b);
    }
    while !b.complete && b.prefix_bytes <= limit {
        match std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await {
            None => b.complete = true,
            Some(Ok(f)) => {
                if let Some(d) = f.data_ref() {
                    b.prefix_bytes += d.len() as u64;
                }
                match f.into_data() {
                    Ok(d) if b.first.is_none() && b.prefix.is_empty() => b.first = Some(d),
                    Ok(d) => b.prefix.push_back(Frame::data(d)),
                    Err(f) => b.prefix.push_back(f),
                }
                b.complete = body.is_end_stream();
            }
            Some(Err(_)) => return Err(()),
        }
    }
    Ok(b)
}

impl MeteredBody {
    /// The body of an upstream response: what was `buffered`, then the rest of `inner`;
    /// `done` is settled when it ends (at once if it was read whole).
    /// The client's body of an upstream answer. A body read whole that is one data frame
    /// or none (the usual small response) is settled now and answered as it is
    /// ([`ProxyBody::Full`]: the same frames, length and end as the metered body would give),
    /// with no metered body kept while it is written.
    pub(crate) fn answer(
        buffered: Buffered,
        inner: UpBody,
        mut done: Done,
        now: Option<Gate>,
    ) -> ProxyBody {
        let whole =
            buffered.complete && buffered.prefix.is_empty() && !matches!(inner, UpBody::Tunnel(_));
        if !whole {
            return ProxyBody::Upstream(Box::new(MeteredBody::new(buffered, inner, done, now)));
        }
        let data = buffered.first;
        if let Some(d) = &data {
            done.saw(d);
        }
        if let Some(c) = done.cost.as_mut() {
            c.ended();
        }
        done.settle(now.as_ref());
        ProxyBody::Full(data)
    }

    fn new(buffered: Buffered, inner: UpBody, done: Done, now: Option<Gate>) -> Self {
        let mut body = MeteredBody {
            first: buffered.first.map(Frame::data),
            prefix: buffered.prefix,
            prefix_bytes: buffered.prefix_bytes,
            inner_done: buffered.complete,
            inner,
            done: Some(done),
            now,
        };
        for f in body.first.iter().chain(body.prefix.iter()) {
            if let (Some(d), Some(data)) = (body.done.as_mut(), f.data_ref()) {
                d.saw(data);
            }
        }
        if body.inner_done || body.inner.is_end_stream() {
            body.ended();
        }
        body
    }
}

/// A small answer of the proxy's own, as text.
pub(crate) fn own(status: StatusCode, msg: &str, headers: &[(&str, &[u8])]) -> Answer {
    let mut lines: Vec<(&str, &[u8])> = vec![("content-type", b"text/plain; charset=utf-8")];
    lines.extend_from_slice(headers);
    Answer {
        head: ResponseHead::own(status, &lines),
        body: ProxyBody::Full(Some(Bytes::from(format!("{msg}\n")))),
        close: false,
    }
}

/// The proxy's answer for `reason`, counted on the request's ticket: `Retry-After` (of
/// `retry_after_s`) on 429s and 503s, and the connection closed where the request left it
/// unusable.
pub(crate) fn rejected(retry_after_s: u64, stats: &Ticket, reason: Reason, msg: &str) -> Answer {
    stats.reject(reason);
    if stats.grpc {
        return grpc_rejected(retry_after_s, reason, msg);
    }
    let status = StatusCode::from_u16(reason.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let retry = retry_after_s.to_string();
    let mut a = if matches!(reason.status(), 429 | 503) {
        own(status, msg, &[("retry-after", retry.as_bytes())])
    } else {
        own(status, msg, &[])
    };
    a.close = matches!(
        reason,
        Reason::Shutdown | Reason::BodyTooLarge | Reason::BadRequest | Reason::BodyTimeout
    );
    a
}

/// gRPC status codes the proxy answers with.
pub(crate) mod grpc_status {
    /// The call's deadline passed (`grpc-timeout`), or the upstream did not answer in time.
    pub const DEADLINE_EXCEEDED: u8 = 4;
    /// A queue is full, or the call is larger than the proxy takes.
    pub const RESOURCE_EXHAUSTED: u8 = 8;
    /// The proxy could not forward the call.
    pub const INTERNAL: u8 = 13;
    /// Try again later: a queue timeout, a drain, an upstream that cannot be reached.
    pub const UNAVAILABLE: u8 = 14;
    /// No tenant for the call's credentials.
    pub const UNAUTHENTICATED: u8 = 16;
}

/// The proxy's refusal of a gRPC call, the gRPC way: HTTP 200 with no body and the status
/// in its header block (a "trailers-only" response), `grpc-message` saying why, and the
/// standard `grpc-retry-pushback-ms` (from `limits.retry_after_s`) where a retry later may
/// succeed (a full queue, a queue timeout, a drain, a tenant at its streaming share).
fn grpc_rejected(retry_after_s: u64, reason: Reason, msg: &str) -> Answer {
    use grpc_status::*;
    let (code, pushback) = match reason {
        Reason::QueueFull | Reason::TenantQueueFull | Reason::StreamingCap | Reason::TunnelCap => {
            (RESOURCE_EXHAUSTED, true)
        }
        Reason::BodyTooLarge => (RESOURCE_EXHAUSTED, false),
        Reason::QueueTimeout | Reason::Shutdown => (UNAVAILABLE, true),
        Reason::UpstreamConnect | Reason::UpstreamError => (UNAVAILABLE, false),
        Reason::UpstreamTimeout | Reason::Deadline | Reason::BodyTimeout => {
            (DEADLINE_EXCEEDED, false)
        }
        Reason::BadRequest | Reason::Internal => (INTERNAL, false),
    };
    let mut a = grpc_answer(
        code,
        msg,
        pushback.then(|| retry_after_s.saturating_mul(1000)),
    );
    a.close = reason == Reason::Shutdown;
    a
}

/// A trailers-only gRPC answer: HTTP 200, `grpc-status` `code`, `grpc-message` `msg`
/// (percent-encoded as the protocol asks), and `grpc-retry-pushback-ms` if given.
pub(crate) fn grpc_answer(code: u8, msg: &str, pushback_ms: Option<u64>) -> Answer {
    let code = code.to_string();
    let mut message = String::with_capacity(msg.len());
    for b in msg.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            message.push(b as char);
        } else {
            message.push_str(&format!("%{b:02X}"));
        }
    }
    let pushback = pushback_ms.map(|ms| ms.to_string());
    let mut lines: Vec<(&str, &[u8])> = vec![
        ("content-type", b"application/grpc"),
        ("grpc-status", code.as_bytes()),
        ("grpc-message", message.as_bytes()),
    ];
    if let Some(ms) = &pushback {
        lines.push(("grpc-retry-pushback-ms", ms.as_bytes()));
    }
    Answer {
        head: ResponseHead::own(StatusCode::OK, &lines),
        body: ProxyBody::Full(None),
        close: false,
    }
}
