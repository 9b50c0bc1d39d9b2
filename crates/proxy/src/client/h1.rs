//! The proxy's own HTTP/1.1 client adapter (issue 19, `listen.http1 = "own"`): a client
//! connection's requests are framed by [`crate::h1`] straight off the socket into a
//! [`RequestHead`] and go through the pipeline ([`pipeline::admit`], the body read before
//! queueing, [`pipeline::dispatch`]); the [`Answer`] is written back from its head's lines.
//!
//! Memory per connection (issue 19, target 3): an idle connection holds no buffer at all
//! (its read buffer is allocated when the client starts a request and freed when the
//! connection goes idle again with nothing pipelined), and the per-request state is boxed,
//! so the connection's task is small while it waits. Response bytes are gathered into one
//! buffer per response (head and body in one write when the response was buffered whole)
//! and freed with it.
//!
//! Behaviour matches the hyper path: the header timeout from the first byte of a head (the
//! first request's from the connection opening), 100-continue sent when the body is first
//! read, requests answered one at a time (pipelined ones wait in the buffer), a client that
//! closes its connection while its request waits or is in flight cancels it, the send
//! timeout on every write, `Connection: close` and a close after answering when shutting
//! down, after a 1.0 request without keep-alive, after the proxy's answers that say so, and
//! when a request body was left unread.

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use http_body::Body;
use http_body_util::BodyExt;
use tokio::sync::watch;

use super::socket::{write_all, Socket};
use super::tunnel;
use super::ServeOptions;
use crate::bounds::{Bounds, Stop};
use crate::conn::{ActiveGuard, ConnState};
use crate::h1::{self, BodyLen, FrameError, RequestInfo};
use crate::head::{RequestHead, ResponseHead};
use crate::pipeline;
use crate::respond::{own, Answer, ProxyBody};
use crate::rewrite;
use crate::state::{CachedSettings, Inner, Peer};
use crate::stream::{BodyFault, BoxError, ReqBody};
use crate::tunnel::{upgrade_of, Upgrade};
use crate::upstream::Upgraded;

/// Longest request head accepted (bytes): hyper's default buffer limit, so both paths
/// answer 431 at the same size.
const MAX_HEAD: usize = 8192 + 4096 * 100;

/// Gathered response bytes are written once they reach this size.
const WRITE_CHUNK: usize = 64 * 1024;

/// A deadline no connection reaches: the connection's timer's before its first request.
const FAR: Duration = Duration::from_secs(86_400 * 365);

/// What a connection does after a request.
enum Next {
    /// Wait for the next request.
    KeepAlive,
    /// Close the connection.
    Close,
}

/// Serve an HTTP/1 client connection on the own path until it closes, is evicted while
/// idle, or the proxy shuts down. The caller has already seen the client's first bytes.
pub(crate) async fn serve<S: Socket>(
    mut stream: S,
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    opts: ServeOptions,
    state: &Arc<ConnState>,
    shutdown: &mut watch::Receiver<bool>,
) {
    let mut buf: Vec<u8> = Vec::new();
    let mut first = true;
    let mut settings = inner.cached_settings();
    // Registered once for the connection's lifetime rather than once per request (issue
    // 19: each registration locks a waiter list): resolves when the proxy shuts down or the
    // table evicts the connection. Eviction is `notify_one`, so this one waiter serves both
    // the idle wait and the head read (a slow-loris head is still evicted); while a request
    // is in progress the connection is not idle and the table does not pick it.
    let mut shutdown_rx = shutdown.clone();
    let stop = async {
        tokio::select! {
            biased;
            _ = shutdown_rx.wait_for(|&s| s) => {}
            _ = state.evict.notified() => {}
        }
    };
    tokio::pin!(stop);
    // Polled through a `Stop`: after the first poll, a poll reads the watch's version and
    // the eviction flag rather than locking both waiter lists.
    let stop_seen = shutdown.clone();
    let mut stop = Stop::new(&stop_seen, stop).or_flag(&state.evicted);
    // The queue and upstream timeouts' timer and the hard-stop watch, also kept for the
    // connection's lifetime (see `forward::Bounds`). The timer is not in the wheel until a
    // request first arms it.
    let bounds_timer = tokio::time::sleep_until(tokio::time::Instant::now() + FAR);
    tokio::pin!(bounds_timer);
    let hard_seen = inner.hard_stop.subscribe();
    let mut hard_rx = hard_seen.clone();
    let hard_wait = async move {
        let _ = hard_rx.wait_for(|&stop| stop).await;
    };
    tokio::pin!(hard_wait);
    let mut bounds = Bounds {
        timer: bounds_timer,
        hard_stop: Stop::new(&hard_seen, hard_wait),
    };
    loop {
        if buf.is_empty() {
            // Idle: no buffer held. The first request's bytes are known to be there.
            buf = Vec::new();
            if !first {
                tokio::select! {
                    biased;
                    _ = poll_fn(|cx| stop.poll_stopped(cx)) => break,
                    r = stream.readable() => if r.is_err() { break },
                }
            }
        }
        first = false;
        // Boxed: a request's state is allocated only while one is in progress.
        let next = crate::boxed(|| {
            request(
                &stream,
                &mut buf,
                &inner,
                &mut settings,
                &peer,
                opts,
                state,
                shutdown,
                &mut stop,
                &mut bounds,
            )
        })
        .await;
        match next {
            Next::KeepAlive if !*shutdown.borrow() => {}
            _ => break,
        }
    }
    // A FIN after the last response rather than a reset where possible.
    stream.shutdown().await;
}

/// Read, answer and account one request.
#[allow(clippy::too_many_arguments)] // the connection's state, borrowed for one request
async fn request<S: Socket>(
    stream: &S,
    buf: &mut Vec<u8>,
    inner: &Arc<Inner>,
    settings: &mut CachedSettings,
    peer: &Arc<Peer>,
    opts: ServeOptions,
    state: &Arc<ConnState>,
    shutdown: &watch::Receiver<bool>,
    stop: &mut Stop<'_>,
    bounds: &mut Bounds<'_>,
) -> Next {
    // The usual case, a whole head there at once, without entering the read's future.
    let parsed = match head_at_once(stream, buf) {
        Some(p) => Some(p),
        None => read_head(stream, buf, opts, stop).await,
    };
    let Some((head, info)) = parsed else {
        return Next::Close;
    };
    let guard = ActiveGuard::new(state.clone());
    let mut body_read = info.body == BodyLen::Length(0);
    // Only a request with an `Upgrade` header can be one (its lines read again only then).
    let upgrade = match info.upgrade {
        true => upgrade_of(&head, info.http10, body_read),
        false => Upgrade::No,
    };
    if let Upgrade::Invalid(msg) = upgrade {
        let answer = answer_bytes(own(StatusCode::BAD_REQUEST, msg, &[]));
        let _ = write_all(stream, &answer, opts.send_timeout).await;
        return Next::Close;
    }
    let settings = inner.fresh(settings);
    let resp = match pipeline::admit(inner, settings, head, peer, Instant::now()) {
        Err(r) => r,
        Ok(admitted) => {
            let io = Io { stream, opts };
            let websocket = matches!(upgrade, Upgrade::WebSocket);
            let exchanged = exchange(io, buf, &info, inner, admitted, peer, bounds, websocket);
            let Some((r, read)) = exchanged.await else {
                return Next::Close;
            };
            body_read |= read;
            r
        }
    };
    let mut keep_alive = info.keep_alive && !*shutdown.borrow();
    if !body_read {
        // An unread body: skip it if it is all here, else the connection cannot go on.
        match info.body {
            BodyLen::Length(n) if (buf.len() as u64) >= n => {
                buf.drain(..n as usize);
            }
            _ => keep_alive = false,
        }
    }
    // The head built here, not in a future: see `response_head`.
    let Answer {
        head,
        mut body,
        close,
    } = resp;
    if let Some(up) = body.tunnel() {
        let idle = Duration::from_millis(settings.config.limits.tunnel_idle_timeout_ms);
        let limits = tunnel::Limits {
            idle,
            send_timeout: opts.send_timeout,
        };
        Box::pin(run_tunnel(
            stream,
            &head,
            *up,
            std::mem::take(buf),
            limits,
            bounds,
        ))
        .await;
        drop(guard);
        return Next::Close;
    }
    let out = response_head(
        &head,
        &body,
        info.head_method,
        info.http10,
        keep_alive && !close,
    );
    drop(head);
    let written = write_response(stream, &mut body, out, opts.send_timeout).await;
    drop(guard);
    match written {
        Ok(true) => Next::KeepAlive,
        _ => Next::Close,
    }
}

/// A request's head if it is all there already (in `buf`, or read from the socket without
/// waiting). `None`: anything else (a part, nothing yet, an error: [`read_head`] sees to it).
fn head_at_once<S: Socket>(stream: &S, buf: &mut Vec<u8>) -> Option<(RequestHead, RequestInfo)> {
    if buf.is_empty() {
        if buf.capacity() < 1024 {
            buf.reserve(4096);
        }
        match stream.try_read(buf) {
            Ok(n) if n > 0 => {}
            _ => return None,
        }
    }
    RequestHead::parse_h1(buf, MAX_HEAD).ok().flatten()
}

/// A request's head off the socket, within the header timeout of its first byte; `None`:
/// the connection is to be closed (it ended, timed out, was evicted, or sent a malformed
/// head, which is answered here).
async fn read_head<S: Socket>(
    stream: &S,
    buf: &mut Vec<u8>,
    opts: ServeOptions,
    stop: &mut Stop<'_>,
) -> Option<(RequestHead, RequestInfo)> {
    // The head, within the header timeout of its first byte (the clock read only when the
    // head is not all there at once).
    let mut deadline = None;
    loop {
        if !buf.is_empty() {
            match RequestHead::parse_h1(buf, MAX_HEAD) {
                Ok(Some(p)) => return Some(p),
                Ok(None) => {}
                Err(e) => {
                    let status =
                        StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST);
                    let answer = answer_bytes(own(status, &e.to_string(), &[]));
                    let _ = write_all(stream, &answer, opts.send_timeout).await;
                    return None;
                }
            }
        }
        if buf.is_empty() {
            // A keep-alive connection's next head is usually readable already (the idle wait
            // saw it): read it without arming the header timer and the eviction watch, which
            // cost a timer entry and a waiter registration per request (issue 19).
            if buf.capacity() < 1024 {
                buf.reserve(4096);
            }
            match stream.try_read(buf) {
                Ok(0) => return None,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return None,
            }
        }
        let read = tokio::select! {
            biased;
            _ = poll_fn(|cx| stop.poll_stopped(cx)) => return None,
            r = tokio::time::timeout_at(
                *deadline.get_or_insert_with(|| tokio::time::Instant::now() + opts.header_timeout),
                read_more(stream, buf, 0),
            ) => r,
        };
        match read {
            Ok(Ok(n)) if n > 0 => {}
            // Timed out, closed or failed part-way through a head: drop the connection.
            _ => return None,
        }
    }
}

/// A client connection's socket and how it is served.
struct Io<'c, S> {
    stream: &'c S,
    opts: ServeOptions,
}

impl<S> Clone for Io<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Io<'_, S> {}

/// Read (or stream) an admitted request's body and run it through the pipeline: its answer,
/// and whether its body was read to its end (the connection may go on). `None`: the client
/// went away (dropping the request cancels it, queued or in flight, as hyper's path does).
/// A `websocket` upgrade first takes a place in its tenant's tunnel budget, then goes
/// through the gate and the upstream as any request (see [`crate::tunnel`]).
#[allow(clippy::too_many_arguments)] // the request's parts, borrowed for one exchange
async fn exchange<S: Socket>(
    io: Io<'_, S>,
    buf: &mut Vec<u8>,
    info: &RequestInfo,
    inner: &Arc<Inner>,
    admitted: pipeline::Admitted<'_>,
    peer: &Arc<Peer>,
    bounds: &mut Bounds<'_>,
    websocket: bool,
) -> Option<(Answer, bool)> {
    let Io { stream, opts } = io;
    let declared = match info.body {
        BodyLen::Length(n) => Some(n),
        _ => None,
    };
    // `admitted` stays where it is (240 bytes: each move is a `memcpy` call).
    let body = if websocket {
        match admitted.tunnel(inner) {
            Ok(pass) => ReqBody::Upgrade(pass),
            Err(answer) => return Some((answer, true)),
        }
    } else if declared != Some(0) && admitted.streams(declared) {
        // Boxed: only an ordinary request's state is kept in every request's future.
        let streamed = crate::boxed(|| stream_body(io, buf, info, inner, admitted, peer, bounds));
        return Some(streamed.await);
    } else {
        let body = if declared == Some(0) {
            Bytes::new()
        } else {
            let (max, limit) = admitted.body_limits();
            let read = tokio::time::timeout(limit, read_body(stream, buf, info, max, opts)).await;
            match read.unwrap_or(Err(BodyFault::Timeout)) {
                Err(f) => return Some((pipeline::body_fault(admitted, f), false)),
                Ok(body) => body,
            }
        };
        if buf.is_empty() {
            // Nothing buffered: a queued request holds no read buffer.
            *buf = Vec::new();
        }
        ReqBody::Full(body)
    };
    // Run it through the pipeline while watching its client: `None` if the client went away
    // first. Pinned where it is made: `select!` would move (copy) it.
    let pipelined = !buf.is_empty();
    let mut dispatch = std::pin::pin!(pipeline::dispatch(
        inner,
        admitted,
        body,
        peer,
        Some(bounds)
    ));
    tokio::select! {
        biased;
        r = dispatch.as_mut() => Some((r, true)),
        _ = client_gone(stream, pipelined) => None,
    }
}

/// A request whose body streams upstream once it holds its slot (a gRPC one, or one without
/// a length): its answer, and whether its body was read to its end. The client is seen gone
/// when the upstream wire reads the body.
async fn stream_body<S: Socket>(
    io: Io<'_, S>,
    buf: &mut Vec<u8>,
    info: &RequestInfo,
    inner: &Arc<Inner>,
    admitted: pipeline::Admitted<'_>,
    peer: &Arc<Peer>,
    bounds: &mut Bounds<'_>,
) -> (Answer, bool) {
    let Io { stream, opts } = io;
    if info.expect_continue && buf.is_empty() {
        let _ = write_all(stream, b"HTTP/1.1 100 Continue\r\n\r\n", opts.send_timeout).await;
    }
    let ended = AtomicBool::new(false);
    let framing = match info.body {
        BodyLen::Length(n) => Framing::Length(n),
        _ => Framing::Chunked(h1::Chunked::new(u64::MAX)),
    };
    let source = SocketBody {
        stream,
        buf,
        framing,
        ended: &ended,
    };
    let body = ReqBody::Stream(admitted.limited(Box::pin(source)));
    let r = pipeline::dispatch(inner, admitted, body, peer, Some(bounds)).await;
    (r, ended.load(Relaxed))
}

/// Answer the client's upgrade with the upstream's `101`, then splice the two connections
/// until the tunnel ends.
async fn run_tunnel<S: Socket>(
    stream: &S,
    head: &ResponseHead,
    up: Upgraded,
    pending: Vec<u8>,
    limits: tunnel::Limits,
    bounds: &mut Bounds<'_>,
) {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"HTTP/1.1 101 Switching Protocols\r\n");
    rewrite::switching_h1(&mut out, head);
    out.extend_from_slice(b"\r\n");
    if write_all(stream, &out, limits.send_timeout).await.is_ok() {
        tunnel::splice(stream, up, pending, limits, &mut bounds.hard_stop).await;
    }
}

/// Read what the socket has into `buf` (room for at least `want` more bytes, 4 KiB if 0);
/// 0 at end of stream.
async fn read_more(stream: &impl Socket, buf: &mut Vec<u8>, want: usize) -> io::Result<usize> {
    let room = if want == 0 {
        4096
    } else {
        want.min(WRITE_CHUNK)
    };
    if buf.capacity() - buf.len() < room.min(1024) {
        buf.reserve(room);
    }
    loop {
        stream.readable().await?;
        match stream.try_read(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            r => return r,
        }
    }
}

/// Read the request body described by `info` (at most `max` bytes), taking what is already
/// in `buf` first and leaving anything after it (a pipelined request) there.
async fn read_body(
    stream: &impl Socket,
    buf: &mut Vec<u8>,
    info: &RequestInfo,
    max: u64,
    opts: ServeOptions,
) -> Result<Bytes, BodyFault> {
    if info.expect_continue && buf.is_empty() {
        write_all(stream, b"HTTP/1.1 100 Continue\r\n\r\n", opts.send_timeout)
            .await
            .map_err(|_| BodyFault::Broken)?;
    }
    match info.body {
        BodyLen::Length(n) => {
            if n > max {
                return Err(BodyFault::TooLarge);
            }
            let n = n as usize;
            while buf.len() < n {
                let more = read_more(stream, buf, n - buf.len()).await;
                if !matches!(more, Ok(k) if k > 0) {
                    return Err(BodyFault::Broken);
                }
            }
            let rest = buf.split_off(n);
            Ok(Bytes::from(std::mem::replace(buf, rest)))
        }
        BodyLen::Chunked => {
            let mut decoder = h1::Chunked::new(max);
            let mut out = Vec::new();
            loop {
                let used = decoder.feed(buf, Some(&mut out)).map_err(|e| match e {
                    FrameError::BodyTooLarge => BodyFault::TooLarge,
                    _ => BodyFault::Broken,
                })?;
                buf.drain(..used);
                if decoder.done() {
                    return Ok(Bytes::from(out));
                }
                let more = read_more(stream, buf, 0).await;
                if !matches!(more, Ok(k) if k > 0) {
                    return Err(BodyFault::Broken);
                }
            }
        }
        BodyLen::ToEof => Ok(Bytes::new()),
    }
}

/// A request body streamed straight off the client's socket (a body without a length, or a
/// gRPC one): what the head's read left in `buf` first, then the socket, decoded by its
/// framing as it comes. Any bytes past its end (a pipelined request) stay in `buf`.
struct SocketBody<'c, S> {
    stream: &'c S,
    buf: &'c mut Vec<u8>,
    framing: Framing,
    /// Set once the body has been read to its end (the connection may go on).
    ended: &'c AtomicBool,
}

/// How a streamed request body ends.
enum Framing {
    /// After this many more bytes.
    Length(u64),
    /// At the last chunk.
    Chunked(h1::Chunked),
}

impl<S> SocketBody<'_, S> {
    /// Decode what is buffered into at most one piece of data.
    fn decode(&mut self) -> Result<Option<Bytes>, BodyFault> {
        let out = match &mut self.framing {
            Framing::Length(n) => {
                let take = (*n).min(self.buf.len() as u64) as usize;
                *n -= take as u64;
                let rest = self.buf.split_off(take);
                std::mem::replace(self.buf, rest)
            }
            Framing::Chunked(c) => {
                let mut out = Vec::new();
                let used = c.feed(self.buf, Some(&mut out)).map_err(|e| match e {
                    FrameError::BodyTooLarge => BodyFault::TooLarge,
                    _ => BodyFault::Broken,
                })?;
                self.buf.drain(..used);
                out
            }
        };
        if match &self.framing {
            Framing::Length(n) => *n == 0,
            Framing::Chunked(c) => c.done(),
        } {
            self.ended.store(true, Relaxed);
        }
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }
}

impl<S: Socket> Body for SocketBody<'_, S> {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let me = &mut *self;
        loop {
            match me.decode() {
                Err(f) => return Poll::Ready(Some(Err(f.into()))),
                Ok(Some(d)) => return Poll::Ready(Some(Ok(http_body::Frame::data(d)))),
                Ok(None) if me.ended.load(Relaxed) => return Poll::Ready(None),
                Ok(None) => {}
            }
            std::task::ready!(me.stream.poll_read_ready(cx))
                .map_err(|_| BoxError::from(BodyFault::Broken))?;
            if me.buf.capacity() - me.buf.len() < 1024 {
                me.buf.reserve(16 * 1024);
            }
            match me.stream.try_read(me.buf) {
                Ok(0) => return Poll::Ready(Some(Err(BodyFault::Broken.into()))),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return Poll::Ready(Some(Err(BodyFault::Broken.into()))),
            }
        }
    }
    fn is_end_stream(&self) -> bool {
        self.ended.load(Relaxed)
    }
}

/// Resolves when the client has closed its connection (or it failed). Pending for ever
/// once the client sends more (a pipelined request: it is read after this one is answered).
///
/// No timer (issue 19): the request's bytes were read with [`try_read`], which leaves the
/// socket's read readiness cleared when they drained it, so the peek waits for the client's
/// next bytes or its FIN rather than failing with `EAGAIN` at once. Only when the last read
/// filled the buffer is the readiness stale, and then one peek finds out.
async fn client_gone(stream: &impl Socket, pipelined: bool) {
    if pipelined {
        return std::future::pending().await;
    }
    stream.closed().await
}

/// Append `n` in hexadecimal (a chunk size).
fn hex(out: &mut Vec<u8>, n: usize) {
    let s = format!("{n:x}");
    out.extend_from_slice(s.as_bytes());
}

/// A response's head as it goes out, and how its body is framed.
struct OutHead {
    /// The head's bytes; the body's are gathered after them.
    out: Vec<u8>,
    /// No body goes out (HEAD, 1xx, 204, 304).
    bodiless: bool,
    /// The body goes out chunked.
    chunked: bool,
    /// The connection may carry another request.
    keep_alive: bool,
}

/// The head of `resp` for this client, its body framed by its `Content-Length`, its exact
/// size, chunked (HTTP/1.1) or by closing (HTTP/1.0). Apart from [`write_response`] so that
/// no future holds the whole `Response` (issue 19: futures are copied whole when made).
fn response_head(
    head: &ResponseHead,
    body: &ProxyBody,
    head_method: bool,
    http10: bool,
    mut keep_alive: bool,
) -> OutHead {
    let status = head.status.as_u16();
    let bodiless = head_method || status < 200 || status == 204 || status == 304;
    let mut out = Vec::with_capacity(512);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(head.status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    // The upstream's lines as it sent them (issue 19), less what `rewrite` drops.
    let (has_length, has_date) = rewrite::response_h1(&mut out, head);
    let mut chunked = false;
    if !bodiless && !has_length {
        if let Some(n) = body.size_hint().exact() {
            h1::write_content_length(&mut out, n);
        } else if !http10 {
            out.extend_from_slice(b"transfer-encoding: chunked\r\n");
            chunked = true;
        } else {
            // Framed by the close.
            keep_alive = false;
        }
    }
    if !has_date {
        // As hyper's server does: the proxy's own answers carry a Date too (RFC 9110 §6.6.1).
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(&date_now());
        out.extend_from_slice(b"\r\n");
    }
    if !keep_alive {
        out.extend_from_slice(b"connection: close\r\n");
    } else if http10 {
        out.extend_from_slice(b"connection: keep-alive\r\n");
    }
    out.extend_from_slice(b"\r\n");
    OutHead {
        out,
        bodiless,
        chunked,
        keep_alive,
    }
}

/// Write a response: `head` (from [`response_head`]), then `body`, which is left empty
/// (dropped: its slot freed) before the last write. `Ok(keep_alive)`: whether the
/// connection may carry another request.
async fn write_response(
    stream: &impl Socket,
    body: &mut ProxyBody,
    head: OutHead,
    send_timeout: Duration,
) -> io::Result<bool> {
    let OutHead {
        mut out,
        bodiless,
        chunked,
        keep_alive,
    } = head;
    if !bodiless {
        loop {
            // What is ready goes out in one write with the head; when the body has nothing
            // ready (a streamed response), what is gathered is written first.
            let ready = poll_fn(|cx| Poll::Ready(Pin::new(&mut *body).poll_frame(cx))).await;
            let frame = match ready {
                Poll::Ready(f) => f,
                Poll::Pending => {
                    write_all(stream, &out, send_timeout).await?;
                    out.clear();
                    body.frame().await
                }
            };
            match frame {
                None => break,
                // The upstream broke off mid-body: the client sees a cut response.
                Some(Err(e)) => {
                    write_all(stream, &out, send_timeout).await?;
                    return Err(io::Error::other(e));
                }
                Some(Ok(f)) => {
                    let Ok(d) = f.into_data() else { continue };
                    if d.is_empty() {
                        continue;
                    }
                    if chunked {
                        hex(&mut out, d.len());
                        out.extend_from_slice(b"\r\n");
                    }
                    out.extend_from_slice(&d);
                    if chunked {
                        out.extend_from_slice(b"\r\n");
                    }
                    if out.len() >= WRITE_CHUNK {
                        write_all(stream, &out, send_timeout).await?;
                        out.clear();
                    }
                }
            }
        }
        if chunked {
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    *body = ProxyBody::Full(None);
    write_all(stream, &out, send_timeout).await?;
    Ok(keep_alive)
}

/// The bytes of one of the own path's small answers (its body is whole), closing the
/// connection: written with one `write_all`, so no future holds an [`Answer`].
fn answer_bytes(a: Answer) -> Vec<u8> {
    let mut out = response_head(&a.head, &a.body, false, false, false).out;
    if let ProxyBody::Full(Some(b)) = a.body {
        out.extend_from_slice(&b);
    }
    out
}

/// Now as an HTTP date, formatted once a second per thread.
fn date_now() -> [u8; 29] {
    use std::cell::Cell;
    thread_local!(static CACHE: Cell<(u64, [u8; 29])> = const { Cell::new((u64::MAX, [0; 29])) });
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    CACHE.with(|c| {
        let (at, text) = c.get();
        if at == secs {
            return text;
        }
        let text = imf_fixdate(secs);
        c.set((secs, text));
        text
    })
}

/// `secs` since the Unix epoch as an IMF-fixdate (RFC 9110 §5.6.7), e.g.
/// `Tue, 14 Nov 2023 22:13:20 GMT`.
fn imf_fixdate(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Sun", b"Mon", b"Tue", b"Wed", b"Thu", b"Fri", b"Sat"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov",
        b"Dec",
    ];
    let days = secs / 86_400;
    let sod = secs % 86_400;
    let (year, month, day) = crate::civil::from_days(days as i64);
    let (year, month, day) = (year.clamp(0, 9999) as u64, u64::from(month), u64::from(day));
    let mut o = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    o[..3].copy_from_slice(DAYS[((days + 4) % 7) as usize]);
    let two = |o: &mut [u8; 29], at: usize, v: u64| {
        o[at] = b'0' + (v / 10) as u8;
        o[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut o, 5, day);
    o[8..11].copy_from_slice(MONTHS[(month - 1) as usize]);
    two(&mut o, 12, year / 100);
    two(&mut o, 14, year % 100);
    two(&mut o, 17, sod / 3600);
    two(&mut o, 20, sod / 60 % 60);
    two(&mut o, 23, sod % 60);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_match_rfc_9110() {
        // Expected values from Python's email.utils.formatdate(t, usegmt=True).
        for (t, want) in [
            (0, "Thu, 01 Jan 1970 00:00:00 GMT"),
            (1_700_000_000, "Tue, 14 Nov 2023 22:13:20 GMT"),
            (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
            (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        ] {
            assert_eq!(std::str::from_utf8(&imf_fixdate(t)).unwrap(), want, "{t}");
        }
    }
}
