//! The upstream side of the pipeline: one trait, [`Wire`] — send a request that holds its
//! slot, get the response head and a body to read — with an implementation per wire
//! protocol (`[upstream] protocol`). The request path calls [`Upstream::send`] and never
//! learns which wire carried the request.
//!
//! * [`h1`] — HTTP/1.1 on the proxy's own keep-alive sockets (`"http1"`, the default).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::uri::Authority;
use tokio::net::TcpStream;

use crate::config::ProxyConfig;
use crate::head::{RequestHead, ResponseHead};
use crate::rewrite::Forwarding;

pub(crate) mod h1;

pub(crate) use crate::stream::BoxError;
use crate::stream::{BodyFault, ReqBody};

/// A request on its way upstream: admitted, holding its slot.
pub(crate) struct Outgoing<'a> {
    /// Its head as the client sent it (rewritten by the wire through `rewrite`).
    pub head: RequestHead,
    /// What the proxy adds to it.
    pub fwd: Forwarding<'a>,
    /// Its body: read in full before it queued, or streamed as the client sends it.
    pub body: ReqBody<'a>,
}

/// The upstream's answer: its head, and its body still to be read.
pub(crate) struct Reply {
    /// The response head as the upstream sent it.
    pub head: ResponseHead,
    /// The response body.
    pub body: UpBody,
}

/// Why an exchange with the upstream failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// No connection could be opened (→ 502 "cannot connect").
    Connect,
    /// The connection failed, or the upstream's answer was not valid (→ 502).
    Broken,
    /// A streamed request body failed (→ 408, 413 or 400): the upstream saw it cut off.
    Body(BodyFault),
}

/// One wire protocol to the upstream.
pub(crate) trait Wire {
    /// Send `req` and read the response head.
    fn send(&self, req: Outgoing<'_>) -> impl Future<Output = Result<Reply, Failure>> + Send;
}

/// The wire `[upstream]` configures.
#[derive(Clone)]
pub(crate) enum Upstream {
    /// `protocol = "http1"`.
    Http1(Arc<h1::Http1>),
}

impl Upstream {
    /// The wire for `config`'s `[upstream]` at `authority`.
    pub fn new(config: &ProxyConfig, authority: &Authority) -> Upstream {
        let connect = Duration::from_millis(config.upstream.connect_timeout_ms);
        let idle = Duration::from_secs(30);
        // Idle connections kept: what D in flight and a burst beyond it leave behind.
        let max_idle = config.scheduler.depth.max(64) * 2;
        // One idle stack per worker runtime: a socket stays with the reactor that
        // registered it.
        let stacks = config.listen.workers.runtimes().unwrap_or(1);
        Upstream::Http1(Arc::new(h1::Http1::new(
            authority.clone(),
            connect,
            idle,
            max_idle,
            stacks,
        )))
    }

    /// Send `req` on the configured wire.
    pub async fn send(&self, req: Outgoing<'_>) -> Result<Reply, Failure> {
        match self {
            Upstream::Http1(w) => w.send(req).await,
        }
    }
}

/// An upstream response body (the wires' bodies, one type while there is one wire).
pub(crate) type UpBody = h1::RawBody;

/// A TCP connection to the upstream at `authority` (port 80 if none; an IPv6 literal may be
/// bracketed) within `timeout`, with Nagle off.
pub(crate) async fn connect_tcp(
    authority: &Authority,
    timeout: Duration,
) -> std::io::Result<TcpStream> {
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let port = authority.port_u16().unwrap_or(80);
    let stream = tokio::time::timeout(timeout, TcpStream::connect((host, port)))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"))??;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
