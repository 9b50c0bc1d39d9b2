//! The upstream connection pool: keep-alive HTTP/1.1 connections to the one upstream, each a
//! [`hyper::client::conn::http1`] sender whose connection task runs on its own.
//!
//! Why not hyper-util's pooled client (issue 19): it is general (any host, HTTP/2, a pool
//! keyed by scheme and authority behind a hashed map, a task spawned per request to return
//! the connection when its response ends), and that generality cost ~15 % of the proxy's
//! throughput on the closed-loop benchmark. The proxy has one upstream, so the pool here is
//! one stack of idle senders behind a mutex held for a push or a pop: a request checks one
//! out (most recently used first, so few connections stay warm), and `forward` gives it back
//! as soon as the response has been read in full — before the client has read it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::uri::Authority;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::forward::UpstreamBody;

/// Why an upstream request failed.
#[derive(Debug)]
pub(crate) enum UpstreamError {
    /// No connection could be opened (refused, unreachable, DNS, connect timeout).
    Connect(std::io::Error),
    /// The connection failed while the request was being sent or answered.
    Http(hyper::Error),
}

impl std::fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UpstreamError::Connect(e) => write!(f, "cannot connect to the upstream: {e}"),
            UpstreamError::Http(e) => write!(f, "upstream connection failed: {e}"),
        }
    }
}

impl std::error::Error for UpstreamError {}

/// A checked-out connection. Give it back with [`Pool::put`] once its response has been read
/// in full; dropping it instead closes the connection.
pub(crate) struct Conn(SendRequest<UpstreamBody>);

/// Idle keep-alive connections to one upstream.
pub(crate) struct Pool {
    authority: Authority,
    connect_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    idle: Mutex<Vec<(SendRequest<UpstreamBody>, Instant)>>,
}

impl Pool {
    /// A pool for `authority` (host:port; port 80 if none).
    pub fn new(
        authority: Authority,
        connect_timeout: Duration,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Pool {
        Pool {
            authority,
            connect_timeout,
            idle_timeout,
            max_idle,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Send `req` (origin-form target, Host set) on an idle connection, or a new one. A
    /// request that a pooled connection refused before sending any of it (the upstream had
    /// closed it meanwhile) is retried once on a new connection.
    pub async fn send(
        &self,
        req: Request<UpstreamBody>,
    ) -> Result<(Response<Incoming>, Conn), UpstreamError> {
        let (mut conn, pooled) = match self.checkout().await {
            Some(c) => (c, true),
            None => (self.connect().await?, false),
        };
        match conn.0.try_send_request(req).await {
            Ok(r) => Ok((r, conn)),
            Err(mut e) => match (pooled, e.take_message()) {
                (true, Some(req)) => {
                    let mut conn = self.connect().await?;
                    let r = conn
                        .0
                        .send_request(req)
                        .await
                        .map_err(UpstreamError::Http)?;
                    Ok((r, conn))
                }
                _ => Err(UpstreamError::Http(e.into_error())),
            },
        }
    }

    /// Return a connection whose response has been read in full.
    pub fn put(&self, conn: Conn) {
        if conn.0.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.max_idle {
            idle.push((conn.0, Instant::now()));
        }
    }

    /// The most recently returned live connection, ready for a request.
    async fn checkout(&self) -> Option<Conn> {
        loop {
            let (mut s, since) = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()?;
            if s.is_closed() || since.elapsed() > self.idle_timeout {
                continue;
            }
            // Ready at once unless its connection task has not yet seen the end of the last
            // response (it is then a few polls away), or the connection has just failed.
            if s.ready().await.is_ok() {
                return Some(Conn(s));
            }
        }
    }

    async fn connect(&self) -> Result<Conn, UpstreamError> {
        let stream = connect_tcp(&self.authority, self.connect_timeout)
            .await
            .map_err(UpstreamError::Connect)?;
        let (sender, conn) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(UpstreamError::Http)?;
        // The connection task ends when the connection closes or its sender is dropped.
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn(sender))
    }
}

/// A TCP connection to the upstream at `authority` (port 80 if none; an IPv6 literal may be
/// bracketed) within `timeout`, with Nagle off. One copy for both upstream pools: hyper's
/// (`Pool`) and the own path's (`rawpool`).
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

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}
