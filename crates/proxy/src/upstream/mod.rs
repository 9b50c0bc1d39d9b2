//! The upstream side of the pipeline: one trait, [`Wire`] — send a request that holds its
//! slot, get the response head and a body to read — with an implementation per wire
//! protocol (`[upstream] protocol`). The request path calls [`Upstream::send`] and never
//! learns which wire carried the request.
//!
//! * [`h1`] — HTTP/1.1 on the proxy's own keep-alive sockets (`"http1"`, the default);
//! * [`h2`] — HTTP/2 on hyper's client, multiplexed connections (`"h2c"` in cleartext,
//!   `"h2"` over TLS), trailers both ways.
//!
//! Both open their connections through one [`Connector`]: TCP, then TLS with
//! `[upstream.tls]` (its CA, server name and optional client certificate).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::uri::Authority;
use http_body::{Body, SizeHint};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::{ConfigError, ProxyConfig};
use crate::head::{RequestHead, ResponseHead};
use crate::rewrite::Forwarding;

pub(crate) mod h1;
pub(crate) mod h2;

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
    /// When it was granted its slot (a clock reading the wire may take for "now").
    pub granted: std::time::Instant,
}

impl<'a> Outgoing<'a> {
    /// Its body, taken out (an empty one left in its place).
    pub fn take_body(&mut self) -> ReqBody<'a> {
        std::mem::replace(&mut self.body, ReqBody::Full(Bytes::new()))
    }
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
    /// Send `req` and read the response head. `req` is lent, not moved (it is over 128
    /// bytes: every level it were moved through would copy it with a `memcpy` call); the
    /// wire takes its body and the head's buffer out of it.
    fn send(&self, req: &mut Outgoing<'_>) -> impl Future<Output = Result<Reply, Failure>> + Send;
}

/// The wire `[upstream]` configures.
#[derive(Clone)]
pub(crate) enum Upstream {
    /// `protocol = "http1"`.
    Http1(Arc<h1::Http1>),
    /// `protocol = "h2c"` or `"h2"`.
    Http2(Arc<h2::Http2>),
}

impl Upstream {
    /// The wire for `config`'s `[upstream]` at `authority` (its TLS files read now).
    pub fn new(config: &ProxyConfig, authority: &Authority) -> Result<Upstream, ConfigError> {
        let up = &config.upstream;
        let connect = Duration::from_millis(up.connect_timeout_ms);
        // One idle stack (h1) or connection (h2) per worker runtime: a socket stays with the
        // reactor that registered it.
        let stacks = config.listen.workers.runtimes().unwrap_or(1);
        let h2 = up.protocol != "http1";
        let tls = match &up.tls {
            None => None,
            Some(t) => {
                let alpn: &[&[u8]] = if h2 { &[b"h2"] } else { &[b"http/1.1"] };
                let client = crate::tls::client_config(t, alpn)?;
                let name = t.server_name.clone().unwrap_or_else(|| {
                    let h = authority.host();
                    h.trim_start_matches('[').trim_end_matches(']').to_string()
                });
                let name = ServerName::try_from(name.clone()).map_err(|_| {
                    ConfigError::new(
                        "upstream.tls.server_name",
                        format!("{name:?} is not a DNS name or an IP address"),
                    )
                })?;
                Some((tokio_rustls::TlsConnector::from(client), name))
            }
        };
        let connector = Connector {
            authority: authority.clone(),
            timeout: connect,
            tls,
        };
        if h2 {
            return Ok(Upstream::Http2(Arc::new(h2::Http2::new(connector, stacks))));
        }
        let idle = Duration::from_secs(30);
        // Idle connections kept: what D in flight and a burst beyond it leave behind.
        let max_idle = config.scheduler.depth.max(64) * 2;
        Ok(Upstream::Http1(Arc::new(h1::Http1::new(
            connector, idle, max_idle, stacks,
        ))))
    }

    /// Send `req` on the configured wire.
    pub async fn send(&self, req: &mut Outgoing<'_>) -> Result<Reply, Failure> {
        match self {
            Upstream::Http1(w) => w.send(req).await,
            // Boxed: hyper's HTTP/2 exchange is larger than the HTTP/1.1 one, and every
            // request's future would otherwise be as large (and be copied as such).
            Upstream::Http2(w) => Box::pin(w.send(req)).await,
        }
    }
}

/// An upstream response body, whichever wire read it.
pub(crate) enum UpBody {
    /// A body with a length that came whole with its head on an own HTTP/1.1 socket (the
    /// usual small response), its data if it has any: the socket is back in its pool.
    Whole(Option<Bytes>),
    /// Read off an own HTTP/1.1 socket. Boxed: a [`Reply`] is moved through the wire's
    /// levels, and one over 128 bytes costs a `memcpy` call at each.
    H1(Box<h1::RawBody>),
    /// A stream of a multiplexed HTTP/2 connection (trailers included).
    H2(hyper::body::Incoming),
    /// None: the connection became a tunnel on a `101` (taken by [`UpBody::tunnel`]).
    Tunnel(Option<Box<Upgraded>>),
}

impl UpBody {
    /// The tunnel of a `101` answer, once.
    pub fn tunnel(&mut self) -> Option<Box<Upgraded>> {
        match self {
            UpBody::Tunnel(t) => t.take(),
            _ => None,
        }
    }
}

impl Body for UpBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> crate::stream::PollFrame {
        match self.get_mut() {
            UpBody::Whole(b) => Poll::Ready(b.take().map(|d| Ok(http_body::Frame::data(d)))),
            UpBody::H1(b) => Pin::new(&mut **b).poll_frame(cx),
            UpBody::H2(b) => Pin::new(b).poll_frame(cx).map_err(BoxError::from),
            UpBody::Tunnel(_) => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpBody::Whole(b) => b.is_none(),
            UpBody::H1(b) => b.is_end_stream(),
            UpBody::H2(b) => b.is_end_stream(),
            UpBody::Tunnel(_) => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpBody::Whole(b) => SizeHint::with_exact(b.as_ref().map_or(0, |d| d.len() as u64)),
            UpBody::H1(b) => b.size_hint(),
            UpBody::H2(b) => b.size_hint(),
            UpBody::Tunnel(_) => SizeHint::with_exact(0),
        }
    }
}

/// Opens connections to the upstream: TCP to `authority` (port 80 if none; an IPv6 literal
/// may be bracketed) within the connect timeout, with Nagle off, then TLS if configured.
pub(crate) struct Connector {
    authority: Authority,
    timeout: Duration,
    /// `[upstream.tls]`: the client configuration (with its ALPN) and the server name.
    tls: Option<(tokio_rustls::TlsConnector, ServerName<'static>)>,
}

impl Connector {
    /// Whether connections are TLS (the request's scheme is `https`).
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A new connection, TCP and TLS handshake both within the connect timeout.
    pub async fn connect(&self) -> io::Result<UpIo> {
        let open = async {
            let host = self.authority.host();
            let host = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            let port = self.authority.port_u16().unwrap_or(80);
            let stream = TcpStream::connect((host, port)).await?;
            let _ = stream.set_nodelay(true);
            match &self.tls {
                None => Ok(UpIo::Plain(stream)),
                Some((tls, name)) => {
                    let s = tls.connect(name.clone(), stream).await?;
                    Ok(UpIo::Tls(Box::new(s)))
                }
            }
        };
        tokio::time::timeout(self.timeout, open)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))?
    }
}

/// A connection to the upstream: plain TCP, or TLS over it.
pub(crate) enum UpIo {
    /// Cleartext.
    Plain(TcpStream),
    /// `[upstream.tls]`.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for UpIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpIo::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpIo::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpIo::Plain(s) => Pin::new(s).poll_write(cx, buf),
            UpIo::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpIo::Plain(s) => Pin::new(s).poll_flush(cx),
            UpIo::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpIo::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpIo::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// An upstream connection switched to a tunnel by its `101`.
pub(crate) struct Upgraded {
    /// The connection.
    pub io: UpIo,
    /// What the upstream sent after its `101` head (the first frames, if any).
    pub early: Vec<u8>,
    /// The tunnel's place in its tenant's budget.
    pub pass: crate::tunnel::Pass,
}
