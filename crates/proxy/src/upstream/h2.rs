//! The HTTP/2 wire to the upstream (`[upstream] protocol = "h2c"`: cleartext with prior
//! knowledge; `"h2"`: over TLS, ALPN `h2`): hyper's HTTP/2 client on one multiplexed
//! connection per worker runtime, opened on first use and again once it has closed. Every
//! request is a stream of it; trailers pass both ways (a gRPC status arrives in the
//! response's).
//!
//! A request body that streams from a source of its own (an HTTP/2 client's, through
//! hyper's server) is handed to the connection, which reads it while the response flows:
//! client-streaming and bidirectional gRPC calls need both directions open at once. One that
//! borrows the client's connection (the own HTTP/1.1 adapter) is pumped on the request's
//! own task into the stream, to its end, while the response head is awaited. A request
//! that a connection found closed could not take is sent once more on a new connection.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::channel::{Channel, Sender};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use super::{BoxError, Connector, Failure, Outgoing, Reply, UpBody, Wire};
use crate::head::ResponseHead;
use crate::rewrite;
use crate::stream::{BodyFault, Limited, PollFrame, ReqBody};

/// Multiplexed HTTP/2 connections to the upstream, one per worker runtime.
pub(crate) struct Http2 {
    connector: Connector,
    /// The connection of each worker runtime ([`crate::workers::index`]), once opened.
    conns: Box<[Mutex<Option<SendRequest<OutBody>>>]>,
}

impl Wire for Arc<Http2> {
    async fn send(&self, req: &mut Outgoing<'_>) -> Result<Reply, Failure> {
        let https = self.connector.is_tls();
        let Some(parts) = rewrite::request_h2(&req.head, &req.fwd, https) else {
            return Err(Failure::Broken);
        };
        drop(req.head.take_buffer());
        match req.take_body() {
            ReqBody::Full(b) => {
                let body = OutBody::Full((!b.is_empty()).then_some(b));
                self.exchange(parts, body, None).await
            }
            ReqBody::Owned(body) => {
                let fault = Arc::new(AtomicU8::new(0));
                let body = OutBody::Owned {
                    body,
                    fault: fault.clone(),
                };
                self.exchange(parts, body, Some(&fault)).await
            }
            ReqBody::Stream(body) => {
                let (tx, rx) = Channel::new(1);
                let call = self.exchange(parts, OutBody::Fed(rx), None);
                let (pumped, reply) = tokio::join!(pump(body, tx), call);
                pumped.map_err(Failure::Body)?;
                reply
            }
            // Tunnels are refused on an HTTP/2 upstream before they queue.
            ReqBody::Upgrade(_) => Err(Failure::Broken),
        }
    }
}

impl Http2 {
    /// Connections `connector` opens, one per each of `stacks` worker runtimes.
    pub fn new(connector: Connector, stacks: usize) -> Http2 {
        Http2 {
            connector,
            conns: (0..stacks.max(1)).map(|_| Mutex::new(None)).collect(),
        }
    }

    fn slot(&self) -> &Mutex<Option<SendRequest<OutBody>>> {
        &self.conns[crate::workers::index() % self.conns.len()]
    }

    /// This runtime's connection, if open.
    fn cached(&self) -> Option<SendRequest<OutBody>> {
        let mut slot = self.slot().lock().unwrap_or_else(|e| e.into_inner());
        match &*slot {
            Some(s) if !s.is_closed() => Some(s.clone()),
            Some(_) => {
                *slot = None;
                None
            }
            None => None,
        }
    }

    /// Open a connection and keep it for this runtime.
    async fn open(&self) -> Result<SendRequest<OutBody>, Failure> {
        let io = self
            .connector
            .connect()
            .await
            .map_err(|_| Failure::Connect)?;
        let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
        builder.timer(TokioTimer::new()).adaptive_window(true);
        let (send, conn) = builder
            .handshake(TokioIo::new(io))
            .await
            .map_err(|_| Failure::Connect)?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        *self.slot().lock().unwrap_or_else(|e| e.into_inner()) = Some(send.clone());
        Ok(send)
    }

    /// Send the request and wait for the response head.
    async fn exchange(
        &self,
        parts: http::request::Parts,
        body: OutBody,
        fault: Option<&AtomicU8>,
    ) -> Result<Reply, Failure> {
        let mut req = http::Request::from_parts(parts, body);
        if let Some(mut send) = self.cached() {
            match send.try_send_request(req).await {
                Ok(resp) => return Ok(reply(resp)),
                Err(mut e) => match e.take_message() {
                    // Not taken: the connection had closed. Once more on a new one.
                    Some(r) => req = r,
                    None => return Err(failed(fault)),
                },
            }
        }
        let mut send = self.open().await?;
        match send.send_request(req).await {
            Ok(resp) => Ok(reply(resp)),
            Err(_) => Err(failed(fault)),
        }
    }
}

fn reply(resp: http::Response<hyper::body::Incoming>) -> Reply {
    let (parts, body) = resp.into_parts();
    Reply {
        head: ResponseHead::from_parts(parts.status, &parts.headers),
        body: UpBody::H2(body),
    }
}

/// Why an exchange failed: the request body's fault if it had one, else the connection.
fn failed(fault: Option<&AtomicU8>) -> Failure {
    match fault.map(|f| f.load(Relaxed)) {
        Some(code) if code != 0 => Failure::Body(fault_of(code)),
        _ => Failure::Broken,
    }
}

fn code_of(f: BodyFault) -> u8 {
    match f {
        BodyFault::TooLarge => 1,
        BodyFault::Timeout => 2,
        BodyFault::Broken => 3,
    }
}

fn fault_of(code: u8) -> BodyFault {
    match code {
        1 => BodyFault::TooLarge,
        2 => BodyFault::Timeout,
        _ => BodyFault::Broken,
    }
}

/// Pump a borrowed body into the stream's channel, to its end (with its trailers).
async fn pump(mut body: Limited<'_>, mut tx: Sender<Bytes, BoxError>) -> Result<(), BodyFault> {
    while let Some(frame) = body.next_frame().await {
        let frame = match frame {
            Ok(f) => f,
            Err(fault) => {
                tx.abort(fault.into());
                return Err(fault);
            }
        };
        if tx.send(frame).await.is_err() {
            // The stream is gone (the upstream reset it): its answer says what happened.
            return Ok(());
        }
    }
    Ok(())
}

/// A request body as the HTTP/2 connection reads it.
pub(crate) enum OutBody {
    /// Read in full before the request queued (`None`: empty).
    Full(Option<Bytes>),
    /// Streamed from the client by the connection itself; a fault is noted in `fault`.
    Owned {
        body: Limited<'static>,
        fault: Arc<AtomicU8>,
    },
    /// Fed by [`pump`] on the request's task.
    Fed(Channel<Bytes, BoxError>),
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> PollFrame {
        match self.get_mut() {
            OutBody::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            OutBody::Owned { body, fault } => {
                let r = std::pin::Pin::new(body).poll_frame(cx);
                if let Poll::Ready(Some(Err(e))) = &r {
                    fault.store(code_of(BodyFault::of(e)), Relaxed);
                }
                r
            }
            OutBody::Fed(c) => std::pin::Pin::new(c).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            OutBody::Full(b) => b.is_none(),
            OutBody::Owned { body, .. } => body.is_end_stream(),
            OutBody::Fed(c) => c.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            OutBody::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            OutBody::Owned { body, .. } => body.size_hint(),
            OutBody::Fed(c) => c.size_hint(),
        }
    }
}
