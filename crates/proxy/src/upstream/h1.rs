//! The HTTP/1.1 wire to the upstream (`[upstream] protocol = "http1"`, the proxy's own,
//! issue 19): a stack of idle keep-alive sockets to the one upstream, a request written in
//! one write (head and body), the response head parsed by [`crate::h1`], and the response
//! body read off the socket by [`RawBody`] on the request's own task — no connection task,
//! no channels, no oneshot per response (what hyper's client costs; docs/benchmarks.md).
//!
//! A socket goes back to the stack when its response body has been read to its end and the
//! upstream allowed keep-alive; a body dropped part-way closes it. A request on a pooled
//! socket that the upstream had closed meanwhile (nothing of a response came back) is
//! retried once on a new connection.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::StatusCode;
use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::{Connector, Failure, Outgoing, Reply, UpBody, UpIo, Wire};
use crate::h1::{self, BodyLen, Chunked};
use crate::head::{LineRoom, RequestHead, ResponseHead};
use crate::rewrite::{self, BodyFraming, Forwarding};
use crate::stream::{Limited, ReqBody};

/// Longest upstream response head accepted (bytes), as the hyper client's default.
const MAX_HEAD: usize = 8192 + 4096 * 100;

/// The largest spare buffer a response is read into; a larger one (a very long request
/// head's) is freed rather than held while the response lives.
const SPARE_MAX: usize = 16 * 1024;

/// Idle keep-alive sockets to one upstream, and the exchange on them.
pub(crate) struct Http1 {
    connector: Connector,
    idle_timeout: Duration,
    /// Idle sockets kept per stack.
    max_idle: usize,
    /// One stack per worker runtime (`listen.workers`; one when shared), picked by
    /// [`crate::workers::index`]: a socket is registered with the reactor of the runtime
    /// that opened it, and used from another one every readiness event would cross threads.
    idle: Box<[IdleStack]>,
}

/// Idle sockets, most recently returned last, with when each was returned.
type IdleStack = Mutex<Vec<(UpIo, Instant)>>;

impl Wire for Arc<Http1> {
    async fn send(&self, req: &mut Outgoing<'_>) -> Result<Reply, Failure> {
        let head_method = *req.head.method() == http::Method::HEAD;
        match req.take_body() {
            ReqBody::Full(body) => {
                // Head and body in one write (issue 19).
                let mut out = Vec::with_capacity(512 + body.len());
                let framing = BodyFraming::Length(body.len() as u64);
                rewrite::request_h1(&mut out, &req.head, &req.fwd, framing);
                out.extend_from_slice(&body);
                drop(body);
                let ex = Exchange::new(&out, head_method).reading_into(req.head.take_buffer());
                self.exchange(ex, self.checkout(req.granted)).await
            }
            // Boxed, as the upgrade below: only what an ordinary request needs is kept in
            // every request's future (which is copied whole where it is made).
            ReqBody::Stream(body) | ReqBody::Owned(body) => {
                Box::pin(self.send_streamed(&mut req.head, &req.fwd, body, req.granted)).await
            }
            ReqBody::Upgrade(pass) => {
                // On a connection of its own: if the upstream switches, it is the tunnel's.
                let mut out = Vec::with_capacity(512);
                rewrite::request_h1(&mut out, &req.head, &req.fwd, BodyFraming::Upgrade);
                drop(req.head.take_buffer());
                let mut ex = Exchange::new(&out, false);
                ex.upgrade = Some(pass);
                Box::pin(self.exchange(ex, None)).await
            }
        }
    }
}

impl Http1 {
    /// Send a request whose body streams: its head, then the body chunked as it comes.
    async fn send_streamed(
        self: &Arc<Self>,
        head: &mut RequestHead,
        fwd: &Forwarding<'_>,
        body: Limited<'_>,
        granted: Instant,
    ) -> Result<Reply, Failure> {
        let head_method = *head.method() == http::Method::HEAD;
        let mut out = Vec::with_capacity(512);
        rewrite::request_h1(&mut out, head, fwd, BodyFraming::Chunked);
        let mut ex = Exchange::new(&out, head_method).reading_into(head.take_buffer());
        ex.body = Some(body);
        self.exchange(ex, self.checkout(granted)).await
    }

    /// A pool of connections `connector` opens, with `stacks` idle stacks.
    pub fn new(
        connector: Connector,
        idle_timeout: Duration,
        max_idle: usize,
        stacks: usize,
    ) -> Http1 {
        let stacks = stacks.max(1);
        Http1 {
            connector,
            idle_timeout,
            max_idle: max_idle.div_ceil(stacks),
            idle: (0..stacks).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// This runtime's stack of idle sockets (off the workers: the first).
    fn stack(&self) -> &IdleStack {
        &self.idle[crate::workers::index() % self.idle.len()]
    }

    /// An idle socket returned no longer than the idle timeout before `now`.
    fn checkout(&self, now: Instant) -> Option<UpIo> {
        let mut idle = self.stack().lock().unwrap_or_else(|e| e.into_inner());
        while let Some((s, since)) = idle.pop() {
            if now.saturating_duration_since(since) <= self.idle_timeout {
                return Some(s);
            }
        }
        None
    }

    /// Give a socket back at its response body's end if it can carry another request: the
    /// upstream allowed keep-alive and sent nothing past the body (bytes past the end mean
    /// it is out of step).
    fn put_after_body(&self, s: UpIo, keep_alive: bool, nothing_past_end: bool) {
        if keep_alive && nothing_past_end {
            self.put(s);
        }
    }

    fn put(&self, s: UpIo) {
        let mut idle = self.stack().lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push((s, Instant::now()));
        }
    }

    /// Send `ex`'s request (a serialized request, whole or up to its blank line with a body
    /// to stream after it) and read the response head: on `pooled`, an idle socket, and once
    /// more on a new one if that had been closed meanwhile (nothing of the request taken,
    /// nothing of a response back; a streamed body: only if none of it was taken yet); on a
    /// new one if there is none. One future for the whole exchange (no level per socket).
    async fn exchange(
        self: &Arc<Self>,
        mut ex: Exchange<'_, '_>,
        mut pooled: Option<UpIo>,
    ) -> Result<Reply, Failure> {
        let mut buf = std::mem::take(&mut ex.buf);
        'socket: loop {
            let retry = pooled.is_some();
            let mut s = match pooled.take() {
                Some(s) => s,
                // Boxed: connecting (TCP, or TLS too) takes more room than an exchange on a
                // pooled socket, the common case, whose future would otherwise be as large.
                None => Box::pin(self.connector.connect())
                    .await
                    .map_err(|_| Failure::Connect)?,
            };
            if s.write_all(ex.request).await.is_err() {
                match retry {
                    true => continue 'socket,
                    false => return Err(Failure::Broken),
                }
            }
            if let Some(body) = &mut ex.body {
                write_chunked(&mut s, body).await?;
            }
            // TLS: what is encrypted but not yet sent (a no-op on TCP).
            if s.flush().await.is_err() {
                return Err(Failure::Broken);
            }
            loop {
                if !buf.is_empty() {
                    let parsed = ResponseHead::parse_h1_into(
                        &mut buf,
                        &mut ex.lines,
                        MAX_HEAD,
                        ex.head_method,
                    );
                    match parsed {
                        // 1xx interim answers are skipped; a 101 only answers an upgrade.
                        Ok(Some((head, _)))
                            if head.status.is_informational()
                                && head.status != StatusCode::SWITCHING_PROTOCOLS =>
                        {
                            continue
                        }
                        Ok(Some((head, info))) => return self.reply(head, info, s, buf, &mut ex),
                        Ok(None) => {}
                        Err(_) => return Err(Failure::Broken),
                    }
                }
                let fresh = buf.is_empty();
                if buf.capacity() - buf.len() < 1024 {
                    buf.reserve(4096);
                }
                match s.read_buf(&mut buf).await {
                    Ok(0) | Err(_) if fresh && retry => continue 'socket,
                    Ok(0) | Err(_) => return Err(Failure::Broken),
                    Ok(_) => {}
                }
            }
        }
    }

    /// The reply on socket `s` with this final response head (`buf`: what followed it).
    fn reply(
        self: &Arc<Self>,
        head: ResponseHead,
        info: h1::ResponseInfo,
        s: UpIo,
        buf: Vec<u8>,
        ex: &mut Exchange<'_, '_>,
    ) -> Result<Reply, Failure> {
        if head.status == StatusCode::SWITCHING_PROTOCOLS {
            let pass = ex.upgrade.take().ok_or(Failure::Broken)?;
            let up = super::Upgraded {
                io: s,
                early: buf,
                pass,
            };
            let body = UpBody::Tunnel(Some(Box::new(up)));
            return Ok(Reply { head, body });
        }
        let framing = match info.body {
            BodyLen::Length(n) if buf.len() as u64 >= n => {
                let body = self.whole(s, buf, n, info.keep_alive);
                return Ok(Reply { head, body });
            }
            BodyLen::Length(n) => Framing::Length(n),
            BodyLen::Chunked => Framing::Chunked(Chunked::new(u64::MAX)),
            BodyLen::ToEof => Framing::ToEof,
        };
        let mut body = RawBody {
            conn: Some(s),
            buf,
            framing,
            keep_alive: info.keep_alive,
            done: false,
            pool: self.clone(),
        };
        body.check_done();
        Ok(Reply {
            head,
            body: UpBody::H1(Box::new(body)),
        })
    }

    /// A body of `n` bytes that came whole with its head (`buf` holds at least `n` bytes):
    /// the socket goes back now, as a [`RawBody`] would give it back at the body's end.
    fn whole(&self, s: UpIo, mut buf: Vec<u8>, n: u64, keep_alive: bool) -> UpBody {
        let rest = buf.split_off(n as usize);
        self.put_after_body(s, keep_alive, rest.is_empty());
        UpBody::Whole((n > 0).then(|| Bytes::from(buf)))
    }
}

/// One request's exchange on a socket: its bytes (whole, or up to its blank line with
/// `body` to stream after it), and what the answer is read as.
struct Exchange<'r, 'b> {
    request: &'r [u8],
    body: Option<Limited<'b>>,
    /// A `HEAD`: the answer has no body.
    head_method: bool,
    /// A WebSocket upgrade: a `101` makes the socket its tunnel.
    upgrade: Option<crate::tunnel::Pass>,
    /// What the response is read into (empty).
    buf: Vec<u8>,
    /// Where its head's line places go.
    lines: LineRoom,
}

impl<'r> Exchange<'r, '_> {
    fn new(request: &'r [u8], head_method: bool) -> Self {
        Exchange {
            request,
            body: None,
            head_method,
            upgrade: None,
            buf: Vec::new(),
            lines: LineRoom::default(),
        }
    }

    /// Read the response into `spare` (the request head's buffer: the client's read buffer,
    /// free once the request is written) if it is not oversized, and its head's line places
    /// into the request head's, so that an exchange allocates neither of its own.
    fn reading_into(mut self, (spare, lines): (Vec<u8>, LineRoom)) -> Self {
        if spare.capacity() <= SPARE_MAX {
            self.buf = spare;
        }
        self.lines = lines;
        self
    }
}

/// Write `body` as it comes, chunked, and its last chunk with the body's trailers.
async fn write_chunked(s: &mut UpIo, body: &mut Limited<'_>) -> Result<(), Failure> {
    let mut out = Vec::new();
    let mut trailers = None;
    while let Some(frame) = body.next_frame().await {
        let frame = match frame.map_err(Failure::Body)?.into_data() {
            Ok(d) if d.is_empty() => continue,
            Ok(d) => d,
            Err(f) => {
                trailers = f.into_trailers().ok();
                continue;
            }
        };
        out.clear();
        out.extend_from_slice(format!("{:x}\r\n", frame.len()).as_bytes());
        out.extend_from_slice(&frame);
        out.extend_from_slice(b"\r\n");
        s.write_all(&out).await.map_err(|_| Failure::Broken)?;
    }
    out.clear();
    out.extend_from_slice(b"0\r\n");
    for (name, value) in trailers.iter().flatten() {
        rewrite::trailer_h1(&mut out, name, value);
    }
    out.extend_from_slice(b"\r\n");
    s.write_all(&out).await.map_err(|_| Failure::Broken)
}

/// Where a response body stands.
enum Framing {
    /// This many bytes left.
    Length(u64),
    /// Chunked, decoded as it comes.
    Chunked(Chunked),
    /// Until the upstream closes.
    ToEof,
}

/// An upstream response body read off its socket; the socket goes back to the pool at the
/// body's end (if the upstream allows keep-alive) and is closed if the body is dropped
/// before.
pub(crate) struct RawBody {
    conn: Option<UpIo>,
    /// Read but not yet decoded.
    buf: Vec<u8>,
    framing: Framing,
    keep_alive: bool,
    done: bool,
    pool: Arc<Http1>,
}

impl RawBody {
    /// Mark the end, and give the socket back if it can carry another request.
    fn check_done(&mut self) {
        let ended = match &self.framing {
            Framing::Length(n) => *n == 0,
            Framing::Chunked(c) => c.done(),
            Framing::ToEof => false,
        };
        if ended && !self.done {
            self.done = true;
            if let Some(s) = self.conn.take() {
                self.pool
                    .put_after_body(s, self.keep_alive, self.buf.is_empty());
            }
            self.buf = Vec::new();
        }
    }

    /// Decode what is buffered into at most one data frame.
    fn decode(&mut self) -> Result<Option<Bytes>, h1::FrameError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let out = match &mut self.framing {
            Framing::Length(n) => {
                let take = (*n).min(self.buf.len() as u64) as usize;
                *n -= take as u64;
                let rest = self.buf.split_off(take);
                std::mem::replace(&mut self.buf, rest)
            }
            Framing::Chunked(c) => {
                let mut out = Vec::new();
                let used = c.feed(&self.buf, Some(&mut out))?;
                self.buf.drain(..used);
                out
            }
            Framing::ToEof => std::mem::take(&mut self.buf),
        };
        self.check_done();
        Ok((!out.is_empty()).then(|| Bytes::from(out)))
    }
}

impl Body for RawBody {
    type Data = Bytes;
    type Error = super::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let me = &mut *self;
        loop {
            if me.done {
                return Poll::Ready(None);
            }
            match me.decode() {
                Ok(Some(d)) => return Poll::Ready(Some(Ok(Frame::data(d)))),
                Ok(None) if me.done => return Poll::Ready(None),
                Ok(None) => {}
                Err(e) => {
                    me.conn = None;
                    return Poll::Ready(Some(Err(e.into())));
                }
            }
            let Some(conn) = me.conn.as_mut() else {
                return Poll::Ready(Some(Err("upstream connection lost".into())));
            };
            let old = me.buf.len();
            me.buf.resize(old + 16 * 1024, 0);
            let mut rb = ReadBuf::new(&mut me.buf[old..]);
            let r = Pin::new(conn).poll_read(cx, &mut rb);
            let n = rb.filled().len();
            me.buf.truncate(old + n);
            match r {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => {
                    me.conn = None;
                    return Poll::Ready(Some(Err(e.into())));
                }
                Poll::Ready(Ok(())) if n == 0 => {
                    me.conn = None;
                    if matches!(me.framing, Framing::ToEof) {
                        me.done = true;
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Err("upstream closed mid-body".into())));
                }
                Poll::Ready(Ok(())) => {}
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        match &self.framing {
            Framing::Length(n) => SizeHint::with_exact(*n),
            _ if self.done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A body that came whole with its head gives its socket back at once when the head
    /// allowed keep-alive and nothing followed the body, as a `RawBody` would at its end.
    #[tokio::test]
    async fn a_body_whole_with_its_head_frees_its_socket_at_once() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connector = Connector {
            authority: listener.local_addr().unwrap().to_string().parse().unwrap(),
            timeout: Duration::from_secs(5),
            tls: None,
        };
        let pool = Http1::new(connector, Duration::from_secs(30), 8, 1);
        let idle = || pool.stack().lock().unwrap().len();
        // (what followed the head, the body's length, keep-alive, socket reused, data)
        type Case = (&'static [u8], u64, bool, bool, Option<&'static [u8]>);
        let cases: [Case; 5] = [
            (b"hello", 5, true, true, Some(b"hello")),
            (b"hello!", 5, true, false, Some(b"hello")),
            (b"", 0, true, true, None),
            (b"x", 0, true, false, None),
            (b"hello", 5, false, false, Some(b"hello")),
        ];
        for (buf, n, keep_alive, reused, data) in cases {
            let s = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
                .await
                .unwrap();
            let before = idle();
            let mut body = pool.whole(UpIo::Plain(s), buf.to_vec(), n, keep_alive);
            assert_eq!(idle() - before, usize::from(reused), "{buf:?} {n}");
            assert_eq!(body.size_hint().exact(), Some(n));
            let got = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
            let got = got.map(|f| f.unwrap().into_data().unwrap());
            assert_eq!(got.as_deref(), data);
            assert!(body.is_end_stream());
            assert_eq!(body.size_hint().exact(), Some(0));
        }
    }
}
