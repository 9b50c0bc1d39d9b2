//! A bare hyper forwarder: the HTTP stack the proxy is built on, with no fairlane logic (no
//! tenant lookup, gate, metrics, buffering or limits). `scripts/bench-proxy.sh` runs it
//! beside nginx and fairlane-proxy to split "HTTP stack" from "our logic" (issue 19).
//!
//! ```text
//! bare_forward <listen addr> <upstream addr>
//! ```
//! It forwards through hyper-util's pooled client and buffers each response, as the proxy
//! does.

use std::convert::Infallible;
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

type Upstream = Client<HttpConnector, Full<Bytes>>;

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
    let r = up
        .request(req)
        .await
        .unwrap_or_else(|e| panic!("upstream: {e}"));
    // Read in full before the client gets it (what the proxy does with small responses).
    let (parts, body) = r.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Ok(Response::from_parts(parts, Full::new(body)))
}

fn main() {
    let (listen, upstream, _) =
        fairlane_proxy_testkit::forward_args("bare_forward <listen addr> <upstream addr>");
    let authority: http::uri::Authority = upstream.to_string().parse().expect("authority");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        let up = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(128)
            .pool_timer(TokioTimer::new())
            .build(http);
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
