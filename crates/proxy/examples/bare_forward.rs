//! A bare hyper forwarder: the HTTP stack the proxy is built on, with no fairlane logic (no
//! tenant lookup, gate, metrics, buffering or limits). `scripts/bench-proxy.sh` runs it
//! beside nginx and fairlane-proxy to split "HTTP stack" from "our logic" (issue 19).
//!
//! ```text
//! bare_forward <listen addr> <upstream addr> [legacy]
//! ```
//! By default it forwards through the proxy's own upstream pool (`src/pool.rs`, included here
//! as a module) and buffers each response, as the proxy does; `legacy` uses hyper-util's
//! pooled client instead (what the proxy did before issue 19).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;

type Legacy = Client<HttpConnector, Full<Bytes>>;

#[derive(Clone)]
#[allow(clippy::large_enum_variant)] // one per process, cloned per connection
enum Upstream {
    Legacy(Legacy),
    Pool(Arc<Pool>),
}

/// What `pool.rs` needs from the proxy's `forward` module.
mod forward {
    /// The request body type the pool sends.
    pub type UpstreamBody = http_body_util::Full<bytes::Bytes>;
}
/// The proxy's pool, included as a module (it is crate-private).
#[allow(dead_code)]
#[path = "../src/pool.rs"]
mod pool;
use pool::Pool;
use std::sync::Arc;

async fn forward(
    up: Upstream,
    authority: http::uri::Authority,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (mut parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let pq = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    parts.uri = Uri::builder()
        .scheme("http")
        .authority(authority)
        .path_and_query(pq)
        .build()
        .expect("valid uri");
    let req = Request::from_parts(parts, Full::new(body));
    let r = match up {
        Upstream::Legacy(c) => {
            let r = c
                .request(req)
                .await
                .unwrap_or_else(|e| panic!("upstream: {e}"));
            let (parts, body) = r.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Response::from_parts(parts, Full::new(body))
        }
        Upstream::Pool(p) => {
            let (r, conn) = p
                .send(req)
                .await
                .unwrap_or_else(|e| panic!("upstream: {e}"));
            // Read in full, then the connection goes back (what the proxy does).
            let (parts, body) = r.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            p.put(conn);
            Response::from_parts(parts, Full::new(body))
        }
    };
    Ok(r)
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!("usage: bare_forward <listen addr> <upstream addr> [legacy]");
        std::process::exit(2);
    }
    let listen: SocketAddr = a[0].parse().expect("listen addr as ip:port");
    let upstream: SocketAddr = a[1].parse().expect("upstream addr as ip:port");
    let authority: http::uri::Authority = upstream.to_string().parse().expect("authority");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let up = if a.get(2).map(String::as_str) == Some("legacy") {
            Upstream::Legacy(
                Client::builder(TokioExecutor::new())
                    .pool_idle_timeout(Duration::from_secs(30))
                    .pool_max_idle_per_host(128)
                    .pool_timer(TokioTimer::new())
                    .build(http),
            )
        } else {
            Upstream::Pool(Arc::new(Pool::new(
                authority.clone(),
                Duration::from_secs(5),
                Duration::from_secs(30),
                128,
            )))
        };
        let listener = TcpListener::bind(listen).await.expect("bind");
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            let up = up.clone();
            let authority = authority.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| forward(up.clone(), authority.clone(), req));
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
}
