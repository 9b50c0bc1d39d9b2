//! The client side of the pipeline: a connection's first bytes pick its adapter, and the
//! adapter turns what the client sends into [`RequestHead`](crate::head::RequestHead)s for
//! the pipeline and writes back its answers.
//!
//! * [`h1`] — the proxy's own HTTP/1.1 server (`listen.http1 = "own"`, the default), on
//!   any [`socket::Socket`]: a plaintext TCP stream, or [`tls::TlsSocket`];
//! * [`on_hyper`] — hyper's server: HTTP/2 (prior knowledge in cleartext, ALPN `h2` over
//!   TLS), and HTTP/1.1 with `listen.http1 = "hyper"`.
//!
//! On the TLS listener the handshake comes first (within the header timeout); ALPN then
//! picks the adapter, and a verified client certificate's names go with the [`Peer`].

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::conn::{ClientIo, ConnState};
use crate::state::{Inner, Peer};

pub(crate) mod h1;
pub(crate) mod on_hyper;
pub(crate) mod socket;
pub(crate) mod tls;
mod tunnel;

/// Serve an HTTP/1.1 connection on hyper's server until it ends, a graceful shutdown
/// (through the watcher) finishes it, or it is evicted. (A macro: hyper's connection types
/// are named by the service's, which is opaque here.)
macro_rules! serve_hyper_http1 {
    ($io:expr, $service:expr, $opts:expr, $watcher:expr, $state:expr) => {{
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            .header_read_timeout($opts.header_timeout)
            .serve_connection($io, $service);
        tokio::select! {
            biased;
            _ = $watcher.watch(conn) => {}
            _ = $state.evict.notified() => {}
        }
    }};
}

/// What a new client connection's first bytes (peeked, not consumed) say it speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstBytes {
    /// Not the start of the HTTP/2 preface (or HTTP/2 is off): HTTP/1.
    Http1,
    /// The HTTP/2 preface or a piece of it: left to hyper-util's version detection.
    Other,
    /// The client closed the connection without sending anything.
    Closed,
}

/// The connection preface every HTTP/2 client sends first (RFC 9113 §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

impl FirstBytes {
    /// Classify the first bytes a client sent (`http2`: whether the listener speaks it).
    fn of(bytes: &[u8], http2: bool) -> Self {
        if bytes.is_empty() {
            FirstBytes::Closed
        } else if !http2 || !H2_PREFACE.starts_with(bytes) {
            FirstBytes::Http1
        } else {
            FirstBytes::Other
        }
    }
}

/// How client connections are served (from `[limits]` and `[listen]`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ServeOptions {
    /// `limits.header_timeout_ms`: the first bytes, then each request head, within this.
    pub header_timeout: Duration,
    /// `limits.send_timeout_ms`, for [`ClientIo`].
    pub send_timeout: Duration,
    /// `listen.http2`.
    pub http2: bool,
    /// `listen.http1 = "own"`: HTTP/1 clients on the own adapter rather than hyper's.
    pub own_http1: bool,
}

/// An accepted client socket: still registered with the accepting runtime's reactor, or
/// taken off it to be registered by the worker runtime that serves it (`listen.workers`).
pub(crate) enum Accepted {
    /// Served on the runtime that accepted it.
    Tokio(TcpStream),
    /// Registered with the serving task's runtime when the task starts.
    Std(std::net::TcpStream),
}

/// Serve one client connection until it ends, it is shut down gracefully (`watcher`,
/// `shutdown`), the table evicts it (`state.evict`: dropping hyper's connection closes the
/// socket) or the caller drops this future; then call `closed` (not when dropped).
///
/// Issue 19 (memory per connection): nothing of hyper is allocated until the client has
/// sent its first bytes (a connection that never sends costs its socket and this small
/// future), and those bytes are only peeked to tell HTTP/1 from HTTP/2. hyper-util's own
/// detection reads the first 24 bytes and hands them back as a prefix, so hyper's first
/// read returns just those, the request head is incomplete, and the 8 KiB read buffer is
/// regrown (and copied) to 16 KiB that the connection then keeps for life. A plain HTTP/1
/// connection is served by hyper's HTTP/1 connection directly, whose task is also smaller
/// than the auto connection (which has room for an HTTP/2 connection). HTTP/2 (and a
/// client that so far sent only part of the preface) goes through hyper-util's detection
/// as before. The first bytes are awaited for at most `header_timeout`, as hyper's
/// `header_read_timeout` then bounds each request head.
///
/// This future is the connection's whole task (spawned as it is, with no wrapper): an async
/// block rather than an async fn, because an async fn keeps a second copy of every argument
/// it uses after an await, and a wrapper future would keep a third (rust-lang/rust#62958).
#[allow(clippy::manual_async_fn)] // see above: the async fn form is larger
#[allow(clippy::too_many_arguments)] // moved once into the task; a struct would be one more copy
pub(crate) fn serve(
    stream: Accepted,
    tls: Option<Arc<rustls::ServerConfig>>,
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    opts: ServeOptions,
    watcher: hyper_util::server::graceful::Watcher,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    state: Arc<ConnState>,
    closed: impl FnOnce(&ConnState) + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    async move {
        'serve: {
            let stream = match stream {
                Accepted::Tokio(s) => s,
                Accepted::Std(s) => match TcpStream::from_std(s) {
                    Ok(s) => s,
                    Err(_) => break 'serve,
                },
            };
            if let Some(config) = tls {
                // Boxed: a plaintext connection's task does not carry the handshake's state.
                let conn = Conn {
                    inner,
                    peer,
                    opts,
                    state: &state,
                };
                Box::pin(serve_tls(stream, config, conn, watcher, &mut shutdown)).await;
                break 'serve;
            }
            let peek = async {
                let mut first = [0u8; 24];
                let n = stream.peek(&mut first).await?;
                Ok::<_, io::Error>(FirstBytes::of(&first[..n], opts.http2))
            };
            let first = tokio::select! {
                biased;
                r = tokio::time::timeout(opts.header_timeout, peek) => r,
                _ = shutdown.wait_for(|&s| s) => break 'serve,
                _ = state.evict.notified() => break 'serve,
            };
            if matches!(first, Ok(Ok(FirstBytes::Http1))) && opts.own_http1 {
                // Held until the connection ends, so a graceful shutdown waits for it.
                let _watcher = watcher;
                h1::serve(stream, inner, peer, opts, &state, &mut shutdown).await;
                break 'serve;
            }
            let service = on_hyper::service(inner, peer, state.clone());
            let io = TokioIo::new(ClientIo::new(stream, opts.send_timeout));
            match first {
                Ok(Ok(FirstBytes::Http1)) => serve_hyper_http1!(io, service, opts, watcher, state),
                Ok(Ok(FirstBytes::Other)) => {
                    let mut builder =
                        hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    builder
                        .http1()
                        .timer(TokioTimer::new())
                        .header_read_timeout(opts.header_timeout);
                    let conn = builder.serve_connection(io, service).into_owned();
                    // Boxed: the rare path should not size every connection's task.
                    tokio::select! {
                        biased;
                        _ = Box::pin(watcher.watch(conn)) => {}
                        _ = state.evict.notified() => {}
                    }
                }
                // Closed, failed, or nothing sent within the header timeout: drop the socket.
                _ => {}
            }
        }
        closed(&state);
    }
}

/// What serving a connection needs beside its stream.
struct Conn<'s> {
    inner: Arc<Inner>,
    peer: Arc<Peer>,
    opts: ServeOptions,
    state: &'s Arc<ConnState>,
}

/// A TLS client connection: the handshake (within the header timeout; a failed one closes
/// the connection and is counted), then the adapter ALPN chose — HTTP/2 on hyper's server,
/// HTTP/1.1 on the own adapter (or hyper's with `listen.http1 = "hyper"`).
async fn serve_tls(
    stream: TcpStream,
    config: Arc<rustls::ServerConfig>,
    conn: Conn<'_>,
    watcher: hyper_util::server::graceful::Watcher,
    shutdown: &mut watch::Receiver<bool>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    let Conn {
        inner,
        peer,
        opts,
        state,
    } = conn;
    let accept = tokio_rustls::TlsAcceptor::from(config).accept(stream);
    let handshake = tokio::select! {
        biased;
        r = tokio::time::timeout(opts.header_timeout, accept) => r,
        _ = shutdown.wait_for(|&s| s) => return,
        _ = state.evict.notified() => return,
    };
    let Ok(Ok(stream)) = handshake else {
        inner
            .metrics
            .tls_handshake_failed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        return;
    };
    let (_, session) = stream.get_ref();
    let h2 = opts.http2 && session.alpn_protocol() == Some(b"h2");
    let names = session
        .peer_certificates()
        .and_then(|c| c.first())
        .map(crate::tls::peer_names)
        .unwrap_or_default();
    let peer = match names.is_empty() {
        true => peer,
        false => Arc::new(peer.with_cert_names(names)),
    };
    if !h2 && opts.own_http1 {
        // Held until the connection ends, so a graceful shutdown waits for it.
        let _watcher = watcher;
        let socket = tls::TlsSocket::new(stream.into_inner());
        h1::serve(socket, inner, peer, opts, state, shutdown).await;
        return;
    }
    let service = on_hyper::service(inner, peer, state.clone());
    let io = TokioIo::new(ClientIo::new(stream, opts.send_timeout));
    if h2 {
        let conn = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .serve_connection(io, service);
        tokio::select! {
            biased;
            _ = watcher.watch(conn) => {}
            _ = state.evict.notified() => {}
        }
    } else {
        serve_hyper_http1!(io, service, opts, watcher, state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_tell_http1_from_the_http2_preface() {
        assert_eq!(FirstBytes::of(b"", true), FirstBytes::Closed);
        assert_eq!(
            FirstBytes::of(b"GET / HTTP/1.1\r\n", true),
            FirstBytes::Http1
        );
        assert_eq!(FirstBytes::of(b"P", true), FirstBytes::Other, "maybe h2");
        assert_eq!(FirstBytes::of(b"POST /", true), FirstBytes::Http1);
        assert_eq!(FirstBytes::of(H2_PREFACE, true), FirstBytes::Other);
        assert_eq!(
            FirstBytes::of(H2_PREFACE, false),
            FirstBytes::Http1,
            "h2 off"
        );
    }
}
