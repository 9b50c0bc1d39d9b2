//! One request's trip, in one direction, whichever client adapter read it and whichever wire
//! carries it upstream:
//!
//! ```text
//! identify → classify → check → (the adapter reads the body, no slot held) → gate →
//! upstream wire → respond (buffer, or stream past the buffer) → charge when the slot frees
//! ```
//!
//! [`admit`] identifies the tenant, classifies the request ([`classify`]: the seam where
//! priority levels and flow schemas join, issue 36) and checks what needs no body and no
//! slot; [`dispatch`] queues it for a slot and forwards it; `respond` builds the answer and
//! charges the slot time, or what a cost source names (issue 38's seam). Every request gets
//! exactly one answer: the upstream's, or one of the proxy's own.

use std::future::poll_fn;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fairlane_core::{ClassId, TenantId};
use http::StatusCode;

use crate::bounds::{arm, poll_due, Bounds, Stop};
use crate::gate::{Permit, Reject};
use crate::head::RequestHead;
use crate::levels::Leveled;
use crate::metrics::{CostPolicy, Reason, Ticket};
use crate::respond::{self, own, rejected, Answer, Buffered, Done, MeteredBody};
use crate::rewrite::{Forwarding, LEVEL_HEADER, SCHEMA_HEADER};
use crate::state::{Inner, Peer, Settings};
use crate::stream::{BodyFault, Limited, ReqBody, Source};
use crate::tenant::Who;
use crate::tokens::{admission as token_admission, Told};
use crate::upstream::{Failure, Outgoing};

/// Where a request goes in the gate: decided once from its head by [`classify`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Route {
    /// Whose share it is served from.
    pub tenant: TenantId,
    /// Its class, for per-(tenant, class) cost estimation.
    pub class: ClassId,
    /// Its priority level, flow and flow schema (`None`: no priority levels).
    pub level: Option<Leveled>,
}

/// The classification step: the route of a request of `tenant` with this head. Priority
/// levels and flow schemas (a level and a flow from the tenant, method, path or a header)
/// are decided here, beside the class, from the same head.
pub(crate) fn classify(
    settings: &Settings,
    head: &RequestHead,
    tenant: TenantId,
    grpc: bool,
) -> Route {
    Route {
        tenant,
        class: settings
            .identifier
            .classify_with(head.method(), || head.path(), grpc),
        level: settings.levels.as_ref().map(|s| s.classify(head, tenant)),
    }
}

/// A request that passed the checks needing no body and no slot: its route and its
/// metrics ticket (counted received; answered, completed or cancelled later).
pub(crate) struct Admitted<'a> {
    settings: &'a Settings,
    head: RequestHead,
    route: Route,
    stats: Ticket,
    arrival: Instant,
    /// A gRPC call's deadline (its `grpc-timeout` from arrival).
    deadline: Option<Instant>,
}

impl Admitted<'_> {
    /// The most body bytes the request may send, and how long it has to send them
    /// (`limits.max_body_bytes`, `limits.body_timeout_ms`).
    pub fn body_limits(&self) -> (u64, Duration) {
        let l = &self.settings.config.limits;
        (l.max_body_bytes, Duration::from_millis(l.body_timeout_ms))
    }

    /// Whether the body streams upstream once the request holds its slot, rather than being
    /// read in full before it queues: a gRPC request, or a body without a declared length
    /// (`declared`: the `Content-Length`, or 0 for none at all).
    pub fn streams(&self, declared: Option<u64>) -> bool {
        declared.is_none() || self.stats.grpc
    }

    /// A WebSocket upgrade's place in its tenant's tunnel budget (`crate::tunnel`), taken
    /// before it queues for a slot; `Err`: the answer (503 at a tunnel cap, 501 when the
    /// upstream is not HTTP/1.1).
    // The `Err` is the answer itself, as `admit`'s.
    #[allow(clippy::result_large_err)]
    pub fn tunnel(&self, inner: &Inner) -> Result<crate::tunnel::Pass, Answer> {
        let l = &self.settings.config.limits;
        if !matches!(self.settings.upstream, crate::upstream::Upstream::Http1(_)) {
            self.stats.reject(Reason::BadRequest);
            let msg = "WebSocket needs [upstream] protocol = \"http1\"";
            return Err(own(StatusCode::NOT_IMPLEMENTED, msg, &[]));
        }
        let tenant = self.route.tenant;
        match inner
            .tunnels
            .take(tenant, l.max_tunnels_per_tenant, l.max_tunnels)
        {
            Ok(pass) => Ok(pass),
            Err(cap) => {
                let msg = match cap {
                    crate::tunnel::Cap::Tenant => "too many WebSocket tunnels open for this tenant",
                    crate::tunnel::Cap::Global => "too many WebSocket tunnels open",
                };
                Err(refuse(self.settings, &self.stats, Reason::TunnelCap, msg))
            }
        }
    }

    /// A body streamed from `source`, within `limits.stream_idle_timeout_ms` between pieces
    /// and `limits.max_stream_bytes` in all.
    pub fn limited<'b>(&self, source: Source<'b>) -> Limited<'b> {
        let l = &self.settings.config.limits;
        let idle = Duration::from_millis(l.stream_idle_timeout_ms);
        Limited::new(source, idle, l.max_stream_bytes)
    }
}

/// Whether a head says gRPC (`content-type: application/grpc`, `+proto`, …).
pub(crate) fn is_grpc(head: &crate::head::Fields) -> bool {
    head.header("content-type", |v| {
        v.is_some_and(|v| media_is(v, "application/grpc"))
    })
}

/// A gRPC call's `grpc-timeout` (at most 8 digits and a unit: `H`, `M`, `S`, `m`, `u`,
/// `n`); `None` if absent or malformed (no deadline).
fn grpc_timeout(head: &crate::head::Fields) -> Option<Duration> {
    head.header("grpc-timeout", |v| {
        let v = v?;
        let (&unit, digits) = v.split_last()?;
        if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        Some(match unit {
            b'H' => Duration::from_secs(n * 3600),
            b'M' => Duration::from_secs(n * 60),
            b'S' => Duration::from_secs(n),
            b'm' => Duration::from_millis(n),
            b'u' => Duration::from_micros(n),
            b'n' => Duration::from_nanos(n),
            _ => return None,
        })
    })
}

/// Whether a `Content-Type` value starts with `prefix` (case-insensitive).
fn media_is(v: &[u8], prefix: &str) -> bool {
    v.get(..prefix.len())
        .is_some_and(|p| p.eq_ignore_ascii_case(prefix.as_bytes()))
}

/// Identify the tenant, classify the request, and check what needs no body and no slot
/// (method, target, declared length). `Err`: the proxy's own answer (401, 400, 413).
// The `Err` is the answer itself, returned as it is: boxing it would add an allocation.
#[allow(clippy::result_large_err)]
pub(crate) fn admit<'a>(
    inner: &Arc<Inner>,
    settings: &'a Settings,
    head: RequestHead,
    peer: &Peer,
    arrival: Instant,
) -> Result<Admitted<'a>, Answer> {
    let names = &peer.cert_names;
    let who = settings
        .identifier
        .identify_raw(head.iter(), peer.addr.ip(), names);
    let grpc = is_grpc(&head);
    let tenant = match who {
        Who::Tenant(t) => t,
        Who::Unauthorized if grpc => {
            inner.metrics.unauthorized.fetch_add(1, Relaxed);
            let msg = "unknown or missing API key";
            return Err(respond::grpc_answer(
                respond::grpc_status::UNAUTHENTICATED,
                msg,
                None,
            ));
        }
        Who::Unauthorized => {
            inner.metrics.unauthorized.fetch_add(1, Relaxed);
            return Err(own(
                StatusCode::UNAUTHORIZED,
                "unknown or missing API key",
                &[("www-authenticate", b"Bearer")],
            ));
        }
        Who::Ambiguous => {
            inner.metrics.ambiguous_identity.fetch_add(1, Relaxed);
            let mut a = own(
                StatusCode::BAD_REQUEST,
                "more than one API key header (or Authorization header): the tenant is ambiguous",
                &[],
            );
            a.close = true;
            return Err(a);
        }
    };
    // Counted received now; answered, completed or — if dropped unanswered — cancelled.
    let costs = CostPolicy::of(&settings.config);
    let mut stats = match settings.identifier.name_ref(tenant) {
        Some(name) => Ticket::new(inner.metrics.tenant_ref(tenant), name, costs),
        None => Ticket::new(inner.metrics.tenant_ref(tenant), &Arc::from("?"), costs),
    };
    stats.grpc = grpc;
    if let Err((reason, msg)) = check(settings, &head) {
        return Err(refuse(settings, &stats, reason, msg));
    }
    let route = classify(settings, &head, tenant, grpc);
    let deadline = match grpc {
        true => grpc_timeout(&head).map(|t| arrival + t),
        false => None,
    };
    Ok(Admitted {
        settings,
        head,
        route,
        stats,
        arrival,
        deadline,
    })
}

/// What is refused before the body is read: `CONNECT`, a target that is not a path, a
/// declared length that is invalid or over `limits.max_body_bytes`.
fn check(settings: &Settings, head: &RequestHead) -> Result<(), (Reason, &'static str)> {
    if *head.method() == http::Method::CONNECT {
        return Err((Reason::BadRequest, "CONNECT is not supported"));
    }
    if !head.has_path() {
        return Err((Reason::BadRequest, "request target must be a path"));
    }
    let length = head.header("content-length", |v| {
        v.map(|v| {
            std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
        })
    });
    match length {
        Some(None) => Err((Reason::BadRequest, "invalid Content-Length")),
        Some(Some(n)) if n > settings.config.limits.max_body_bytes => {
            Err((Reason::BodyTooLarge, "request body too large"))
        }
        _ => Ok(()),
    }
}

/// The proxy's own answer for `reason` (see [`respond::rejected`]).
fn refuse(settings: &Settings, stats: &Ticket, reason: Reason, msg: &str) -> Answer {
    rejected(settings.config.limits.retry_after_s, stats, reason, msg)
}

/// The answer to a request whose body could not be read (413, 408, 400).
pub(crate) fn body_fault(a: Admitted<'_>, fault: BodyFault) -> Answer {
    let mut answer = fault_answer(a.settings, &a.stats, fault);
    name_level(a.settings, a.route.level, &mut answer);
    answer
}

/// With priority levels: name the request's level and flow schema on its answer
/// (`X-Fairlane-Priority-Level`, `X-Fairlane-Flow-Schema`).
fn name_level(settings: &Settings, leveled: Option<Leveled>, answer: &mut Answer) {
    let (Some(l), Some(s)) = (leveled, settings.levels.as_ref()) else {
        return;
    };
    if let Some(level) = s.level(l) {
        answer.head.append(LEVEL_HEADER, level.value.as_bytes());
    }
    if let Some((_, value)) = s.schema(l) {
        answer.head.append(SCHEMA_HEADER, value.as_bytes());
    }
}

fn fault_answer(settings: &Settings, stats: &Ticket, fault: BodyFault) -> Answer {
    let reason = match fault {
        BodyFault::TooLarge => Reason::BodyTooLarge,
        BodyFault::Timeout => Reason::BodyTimeout,
        BodyFault::Broken => Reason::BadRequest,
    };
    refuse(settings, stats, reason, &fault.to_string())
}

/// Queue an admitted request (with its whole body, or the body to stream) for a slot, then
/// forward it. `bounds`:
/// the connection's timer and hard-stop watch (the own HTTP/1 path keeps one per
/// connection); `None` makes them for this request. With priority levels, the answer
/// names the request's level and flow schema.
pub(crate) async fn dispatch(
    inner: &Arc<Inner>,
    a: Admitted<'_>,
    body: ReqBody<'_>,
    peer: &Peer,
    mut bounds: Option<&mut Bounds<'_>>,
) -> Answer {
    // One level: every answer, the proxy's own or the upstream's, is named here.
    let (settings, leveled) = (a.settings, a.route.level);
    let named = move |mut answer: Answer| {
        name_level(settings, leveled, &mut answer);
        answer
    };
    let (route, stats, arrival) = (a.route, a.stats, a.arrival);
    let level = route
        .level
        .and_then(|l| Some((l, settings.levels.as_ref()?.level(l)?)));
    let level_timeout = level.and_then(|(_, info)| info.timeout);
    let Some((queue_timeout, by_deadline, by_level)) =
        queue_limit(settings, a.deadline, level_timeout)
    else {
        let msg = "the call's deadline passed before it was sent";
        return named(refuse(settings, &stats, Reason::Deadline, msg));
    };
    let tokens = token_admission(settings.tokens.as_ref(), route.tenant, &body);
    let told = tokens.told();
    let at = route.level.map(|l| l.route);
    // Looked at in place (the wait is over 128 bytes: a move is a `memcpy` call).
    let mut acquired = inner.gate.acquire_as(route.tenant, route.class, at, told);
    let waiting = match &mut acquired {
        Ok(w) => w,
        Err(e) => return named(gate_refusal(settings, &stats, level.map(|(_, i)| i), e)),
    };
    let mut head = a.head;
    // The grant's instant, for the wait and the upstream deadline: a request granted at once
    // waited no time, and its arrival's clock reading serves (issue 19: clock reads).
    let granted = waiting.granted();
    let (permit, now) = match granted {
        Some(p) => (p, arrival),
        None => {
            // A queued request holds its head, not the buffer it was read into.
            head.shrink();
            // Listed in `/debug/requests` while it waits (levels only).
            let _queued = level.and_then(|(l, info)| {
                let (schema, _) = settings.levels.as_ref()?.schema(l)?;
                Some(
                    inner
                        .levels
                        .queue(route.tenant, l, (&info.name, schema), arrival),
                )
            });
            match bounded(waiting, bounds.as_deref_mut(), queue_timeout).await {
                Ok(Ok(p)) => (p, Instant::now()),
                Ok(Err(_)) => {
                    return named(refuse(settings, &stats, Reason::Shutdown, "shutting down"))
                }
                Err(()) if by_deadline => {
                    let msg = "the call's deadline passed while it was queued";
                    return named(refuse(settings, &stats, Reason::Deadline, msg));
                }
                Err(()) => return named(queue_timed_out(settings, &stats, level, by_level)),
            }
        }
    };
    let waited = now.saturating_duration_since(arrival).as_secs_f64();
    stats.wait.record(waited);
    if let Some((_, info)) = level {
        info.stats.dispatched.fetch_add(1, Relaxed);
        info.stats.wait.record(waited);
    }
    stats.dispatched();
    // Boxed: only what a request needs while it waits for its slot is stored in the future
    // that a queued request keeps allocated; the upstream exchange's state is allocated once
    // the gate has admitted it (issue 19, memory per queued connection).
    let deadline = tokio::time::Instant::from_std(now) + settings.config.upstream_timeout();
    let sent = Sent {
        held: Held {
            inner,
            settings,
            tenant: route.tenant,
            stats,
            permit,
            arrival,
            tokens,
        },
        head,
        body,
        peer,
        granted: now,
    };
    named(match bounds {
        Some(b) => crate::boxed(|| forward(sent, deadline, b)).await,
        None => crate::boxed(|| forward_alone(sent, deadline)).await,
    })
}

/// How long a request may wait for its slot: `limits.queue_timeout_ms`, or less: a gRPC
/// call no longer than its `deadline` (then `.1`), a level's own queue timeout when shorter
/// (then `.2`). `None`: the deadline has passed (the call is never sent).
fn queue_limit(
    settings: &Settings,
    deadline: Option<Instant>,
    level_timeout: Option<Duration>,
) -> Option<(Duration, bool, bool)> {
    let mut queue_timeout = Duration::from_millis(settings.config.limits.queue_timeout_ms);
    let mut by_deadline = false;
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        if left < queue_timeout {
            (queue_timeout, by_deadline) = (left, true);
        }
    }
    let by_level = level_timeout.is_some_and(|t| t < queue_timeout);
    if let (true, Some(t)) = (by_level, level_timeout) {
        (queue_timeout, by_deadline) = (t, false);
    }
    Some((queue_timeout, by_deadline, by_level))
}

/// The answer to a request the gate refused to queue: its caps (429), a level's queue limit
/// (429 naming the level), a drain (503).
fn gate_refusal(
    settings: &Settings,
    stats: &Ticket,
    level: Option<&crate::levels::LevelInfo>,
    e: &Reject,
) -> Answer {
    use fairlane_runtime::LevelRefusal;
    match e {
        Reject::Closed => refuse(settings, stats, Reason::Shutdown, "shutting down"),
        Reject::QueueFull { .. } => {
            let msg = "proxy queue full, retry later";
            refuse(settings, stats, Reason::QueueFull, msg)
        }
        Reject::TenantQueueFull { .. } => {
            let msg = "tenant queue full, retry later";
            refuse(settings, stats, Reason::TenantQueueFull, msg)
        }
        Reject::Level(LevelRefusal::Full { name, .. }) => {
            if let Some(info) = level {
                info.stats.full.fetch_add(1, Relaxed);
            }
            let msg = format!("priority level {name:?} queue full, retry later");
            refuse(settings, stats, Reason::QueueFull, &msg)
        }
        Reject::Level(LevelRefusal::Unknown(_)) => {
            // Classified just before a reload retired the level.
            let msg = "priority level retired by a reload, retry";
            refuse(settings, stats, Reason::QueueTimeout, msg)
        }
        e => refuse(settings, stats, Reason::Internal, &e.to_string()),
    }
}

/// The 503 of a request that waited its queue timeout (naming its level, with levels).
fn queue_timed_out(
    settings: &Settings,
    stats: &Ticket,
    level: Option<(Leveled, &crate::levels::LevelInfo)>,
    by_level: bool,
) -> Answer {
    let Some((_, info)) = level else {
        let msg = "timed out waiting for the upstream";
        return refuse(settings, stats, Reason::QueueTimeout, msg);
    };
    info.stats.timeout.fetch_add(1, Relaxed);
    let which = if by_level { "its" } else { "[limits]'" };
    let msg = format!(
        "timed out waiting in priority level {:?} ({which} queue timeout)",
        &*info.name
    );
    refuse(settings, stats, Reason::QueueTimeout, &msg)
}

/// Wait for the slot for at most `timeout`, on the connection's timer if it has one.
/// `Err(())`: the time ran out.
async fn bounded(
    waiting: &mut crate::gate::Waiting,
    bounds: Option<&mut Bounds<'_>>,
    timeout: Duration,
) -> Result<Result<Permit, Reject>, ()> {
    match bounds {
        Some(b) => {
            let due = tokio::time::Instant::now() + timeout;
            arm(b.timer.as_mut(), due);
            tokio::select! {
                biased;
                r = waiting => Ok(r),
                _ = poll_fn(|cx| poll_due(b.timer.as_mut(), due, cx)) => Err(()),
            }
        }
        None => tokio::time::timeout(timeout, waiting).await.map_err(|_| ()),
    }
}

/// What [`dispatch`] hands [`forward`]: an admitted request holding its slot.
struct Sent<'a> {
    held: Held<'a>,
    head: RequestHead,
    body: ReqBody<'a>,
    peer: &'a Peer,
    /// When the gate granted the slot.
    granted: Instant,
}

/// [`forward`] with a timer and a hard-stop watch of its own (hyper's server path).
async fn forward_alone(sent: Sent<'_>, deadline: tokio::time::Instant) -> Answer {
    let timer = tokio::time::sleep_until(deadline);
    tokio::pin!(timer);
    let seen = sent.held.inner.hard_stop.subscribe();
    let mut rx = seen.clone();
    let wait = async move {
        let _ = rx.wait_for(|&stop| stop).await;
    };
    tokio::pin!(wait);
    let mut bounds = Bounds {
        timer,
        hard_stop: Stop::new(&seen, wait),
    };
    forward(sent, deadline, &mut bounds).await
}

/// Send a request the gate has admitted upstream (within `deadline`, the upstream timeout)
/// and turn the reply into the answer.
async fn forward(
    sent: Sent<'_>,
    deadline: tokio::time::Instant,
    bounds: &mut Bounds<'_>,
) -> Answer {
    let Sent {
        mut held,
        head,
        body,
        peer,
        granted,
    } = sent;
    // Under token costs a failed exchange is charged the input estimate.
    if let Some(a) = &held.tokens {
        held.permit.set_cost(a.cost());
    }
    let (settings, tenant) = (held.settings, held.tenant);
    arm(bounds.timer.as_mut(), deadline);
    let tenant_value = settings
        .name_values
        .get(tenant.0 as usize)
        .and_then(Option::as_ref);
    let mut out = Outgoing {
        head,
        fwd: Forwarding {
            authority: settings.authority.as_str(),
            forwarded_for: &peer.forwarded_for,
            tenant: tenant_value,
        },
        body,
        granted,
    };
    // Pinned where it is made: `select!` would move (copy) it into its own tuple.
    let mut call = std::pin::pin!(settings.upstream.send(&mut out));
    let hard_stop = &mut bounds.hard_stop;
    let result = tokio::select! {
        biased; // no random branch order: one fewer RNG draw per request
        r = call.as_mut() => Ok(r),
        // The order `tokio::time::timeout` polls in: the call first, then the timer.
        _ = poll_fn(|cx| poll_due(bounds.timer.as_mut(), deadline, cx)) => Err(()),
        _ = poll_fn(|cx| hard_stop.poll_stopped(cx)) => {
            return refuse(settings, &held.stats, Reason::Shutdown, "shutting down");
        }
    };
    let mut reply = match result {
        Err(()) => {
            return refuse(
                settings,
                &held.stats,
                Reason::UpstreamTimeout,
                "upstream timed out",
            )
        }
        Ok(Err(Failure::Connect)) => {
            let msg = "cannot connect to the upstream";
            return refuse(settings, &held.stats, Reason::UpstreamConnect, msg);
        }
        Ok(Err(Failure::Broken)) => {
            let msg = "upstream connection failed";
            return refuse(settings, &held.stats, Reason::UpstreamError, msg);
        }
        Ok(Err(Failure::Body(fault))) => return fault_answer(settings, &held.stats, fault),
        Ok(Ok(r)) => r,
    };
    // The body buffered up to `limits.response_buffer_bytes` (gRPC and event streams not
    // at all: they go out as they arrive).
    let streamed = reply.head.header("content-type", |v| {
        v.is_some_and(|v| media_is(v, "application/grpc") || media_is(v, "text/event-stream"))
    });
    let room = match streamed {
        true => 0,
        false => settings.config.limits.response_buffer_bytes,
    };
    let hard_stop = &mut bounds.hard_stop;
    let buffered = tokio::select! {
        biased;
        b = respond::buffer(&mut reply.body, room, streamed) => b,
        _ = poll_fn(|cx| hard_stop.poll_stopped(cx)) => {
            return refuse(settings, &held.stats, Reason::Shutdown, "shutting down");
        }
    };
    answer(held, reply, buffered)
}

/// A request holding its slot, as [`answer`] settles it.
struct Held<'a> {
    inner: &'a Arc<Inner>,
    settings: &'a Settings,
    tenant: TenantId,
    stats: Ticket,
    permit: Permit,
    arrival: Instant,
    /// What was charged at admission under token costs.
    tokens: Option<crate::tokens::Admission>,
}

/// The answer to an upstream reply whose body was `buffered` (up to
/// `limits.response_buffer_bytes`; `Err`: the upstream broke off before the end): the slot
/// freed at once if it fitted, else held while it streams within the tenant's streaming
/// share of D.
fn answer(held: Held<'_>, reply: crate::upstream::Reply, buffered: Result<Buffered, ()>) -> Answer {
    let Held {
        inner,
        settings,
        tenant,
        stats,
        permit,
        arrival,
        tokens,
    } = held;
    let limits = &settings.config.limits;
    let Ok(buffered) = buffered else {
        return refuse(
            settings,
            &stats,
            Reason::UpstreamError,
            "upstream connection failed",
        );
    };
    let tokens = tokens.map(|a| (a, &inner.metrics.tokens));
    let cost = respond::cost_source(settings.cost_header.as_ref(), tokens, tenant, &reply.head);
    // Streams past the buffer hold the slot for as long as the client takes to read; a
    // tenant may hold only its share of D that way.
    let streaming = if buffered.complete {
        None
    } else {
        let share = limits.max_streaming_share;
        let cap = ((inner.gate.depth() as f64 * share).ceil() as usize).max(1);
        match inner.streaming.take(tenant, cap) {
            Some(g) => Some(g),
            None => {
                // Charge the slot time spent so far, then free the slot.
                let mut permit = permit;
                let secs = permit.held().as_secs_f64();
                let reported = cost.map(|mut c| c.cost()).filter(|c| c.is_finite());
                permit.set_cost(reported.unwrap_or(secs));
                drop(permit);
                let msg =
                    "too many responses streaming to slow readers for this tenant, retry later";
                return refuse(settings, &stats, Reason::StreamingCap, msg);
            }
        }
    };
    let done = Done {
        permit,
        _streaming: streaming,
        stats,
        cost,
        progressed: 0.0,
        depth: inner.depth.clone().map(|c| (c, tenant, arrival)),
    };
    let now = inner.depth.as_ref().map(|_| inner.gate.clone());
    Answer {
        head: reply.head,
        body: MeteredBody::answer(buffered, reply.body, done, now),
        close: false,
    }
}
