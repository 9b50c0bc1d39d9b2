//! A small HTTP/1.1 server to stand behind the proxy in tests, benchmarks and the deployment
//! example. Query parameters shape each response:
//!
//! * `delay_ms=N` — sleep N ms before answering; `jitter_ms=J` — plus uniform noise in ±J ms;
//! * `cost=X` — echo X in the `x-cost` response header (for `upstream.cost_header`);
//! * `bytes=N` — answer N bytes of body (default: a short text).
//!
//! The request body is read and its size returned in `x-body-bytes`; the tenant header the
//! proxy sets is echoed in `x-saw-tenant`. [`UpstreamServer::stop`] kills the server and every
//! open connection at once (to test upstream faults).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// Counters of an [`UpstreamServer`].
#[derive(Debug, Default)]
pub struct UpstreamCounters {
    /// Requests received.
    pub requests: AtomicU64,
    /// Requests being served now.
    pub active: AtomicU64,
    /// Most requests served at once.
    pub max_active: AtomicU64,
}

/// A running test upstream.
pub struct UpstreamServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
    /// Its counters.
    pub counters: Arc<UpstreamCounters>,
}

impl UpstreamServer {
    /// Serve on `addr` (port 0 picks one).
    pub async fn start(addr: SocketAddr) -> std::io::Result<UpstreamServer> {
        Self::start_with(addr, Arc::new(UpstreamCounters::default())).await
    }

    /// Serve on `addr`, counting into `counters` (to keep counting across a restart).
    pub async fn start_with(
        addr: SocketAddr,
        counters: Arc<UpstreamCounters>,
    ) -> std::io::Result<UpstreamServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let c = counters.clone();
        let task = tokio::spawn(serve(listener, move |req| respond(req, c.clone())));
        Ok(UpstreamServer {
            addr,
            task,
            counters,
        })
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Kill it: the listener and every connection close at once.
    pub fn stop(self) {
        self.task.abort();
    }
}

/// Serve HTTP/1.1 on `listener` until aborted, each request answered by `answer`. The
/// connections live in this task: aborting it closes the listener and all of them at once.
pub(crate) async fn serve<F, Fut, B>(listener: TcpListener, answer: F)
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            a = listener.accept() => {
                let Ok((stream, _)) = a else { continue };
                let _ = stream.set_nodelay(true);
                let answer = answer.clone();
                conns.spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service_fn(answer))
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

impl Drop for UpstreamServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then_some(v)
    })
}

fn jitter(j: f64) -> f64 {
    use std::cell::Cell;
    thread_local!(static S: Cell<u64> = Cell::new(0x9E37_79B9_7F4A_7C15 ^ (std::process::id() as u64)));
    S.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * j
    })
}

async fn respond(
    req: Request<Incoming>,
    c: Arc<UpstreamCounters>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    c.requests.fetch_add(1, Relaxed);
    let active = c.active.fetch_add(1, Relaxed) + 1;
    c.max_active.fetch_max(active, Relaxed);
    let query = req.uri().query().unwrap_or("").to_string();
    let tenant = req.headers().get("x-fairlane-tenant").cloned();
    let body_len = match req.into_body().collect().await {
        Ok(b) => b.to_bytes().len(),
        Err(_) => 0,
    };
    let num = |n: &str| param(&query, n).and_then(|v| v.parse::<f64>().ok());
    let delay = num("delay_ms").unwrap_or(0.0) + num("jitter_ms").map_or(0.0, jitter);
    if delay > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(delay / 1000.0)).await;
    }
    let body = match num("bytes") {
        Some(n) => Bytes::from(vec![b'x'; n as usize]),
        None => Bytes::from_static(b"hello from upstream\n"),
    };
    let mut r = Response::new(Full::new(body));
    r.headers_mut().insert("x-body-bytes", body_len.into());
    if let Some(cost) = param(&query, "cost").and_then(|v| v.parse().ok()) {
        r.headers_mut().insert("x-cost", cost);
    }
    if let Some(t) = tenant {
        r.headers_mut().insert("x-saw-tenant", t);
    }
    c.active.fetch_sub(1, Relaxed);
    Ok(r)
}
