//! An axum service behind a fair gate, with its CPU-heavy work on a fair thread pool.
//!
//! * `FairLayer` admits at most 64 requests at once; waiting requests queue per tenant (from
//!   the `x-tenant` header) and 2DFQᴱ picks who goes next. A full queue answers 429.
//! * `/hash/{kib}` hashes `kib` KiB on a `FairPool` (2 threads): CPU work is scheduled fairly
//!   by tenant too, charged the CPU time it really used, and awaited without blocking tokio.
//! * `/metrics` shows per-tenant counters and histograms of both.
//!
//! ```sh
//! cargo run --release -p fairlane-runtime --example axum             # serves 127.0.0.1:3000
//! curl -H 'x-tenant: 7' localhost:3000/hash/512
//! cargo run --release -p fairlane-runtime --example axum -- --self-test
//! ```

use std::convert::Infallible;
use std::hash::{DefaultHasher, Hasher};
use std::sync::Arc;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::extract::{Path, State};
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::{Json, Router};
use fairlane_runtime::{
    header_tenant, AcquireError, ClassId, FairError, FairGate, FairLayer, FairPool, TenantId,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceBuilder;

#[derive(Clone)]
struct App {
    pool: Arc<FairPool>,
    gate: FairGate,
}

/// Tenant from the `x-tenant` header (0 when absent), class from the route.
fn classify(req: &Request<Body>) -> (TenantId, ClassId) {
    let class = if req.uri().path().starts_with("/hash") {
        1
    } else {
        0
    };
    (header_tenant(req.headers().get("x-tenant")), ClassId(class))
}

async fn hash(
    State(app): State<App>,
    Path(kib): Path<usize>,
    req: Request<Body>,
) -> Result<String, (StatusCode, String)> {
    let (tenant, class) = classify(&req);
    let kib = kib.min(64 * 1024);
    let task = app
        .pool
        .submit(tenant, class, move || {
            let buf = vec![7u8; kib * 1024];
            let mut h = DefaultHasher::new();
            h.write(&buf);
            h.finish()
        })
        .map_err(|e| (StatusCode::TOO_MANY_REQUESTS, e.to_string()))?;
    // A TaskHandle is a future: the tokio thread is free while the pool works.
    let digest = task
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok(format!("{digest:016x}\n"))
}

async fn metrics(State(app): State<App>) -> Json<serde_json::Value> {
    Json(serde_json::json!({
        "pool": app.pool.metrics(),
        "gate": app.gate.metrics(),
    }))
}

fn router(app: App) -> Router {
    let fair = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(
            |e: FairError<Infallible>| async move {
                let status = match &e {
                    FairError::Rejected(AcquireError::Closed) => StatusCode::SERVICE_UNAVAILABLE,
                    _ => StatusCode::TOO_MANY_REQUESTS,
                };
                (status, e.to_string())
            },
        ))
        .layer(FairLayer::new(app.gate.clone(), classify));
    Router::new()
        .route("/", get(|| async { "fairlane\n" }))
        .route("/hash/{kib}", get(hash))
        .route("/metrics", get(metrics))
        .with_state(app)
        .layer(fair)
}

async fn get_once(addr: std::net::SocketAddr, path: &str, tenant: u64) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nhost: localhost\r\nx-tenant: {tenant}\r\nconnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let self_test = std::env::args().any(|a| a == "--self-test");
    let app = App {
        pool: Arc::new(FairPool::builder().workers(2).build()?),
        gate: FairGate::builder()
            .seats(64)
            .max_waiting_per_tenant(1_000)
            .build()?,
    };
    let addr = if self_test {
        "127.0.0.1:0"
    } else {
        "127.0.0.1:3000"
    };
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let server = axum::serve(listener, router(app.clone()));
    if !self_test {
        println!("listening on http://{addr}  (try: curl -H 'x-tenant: 7' {addr}/hash/512)");
        server.await?;
        return Ok(());
    }
    // Self-test: serve in the background, send a few requests over loopback, print, exit.
    tokio::spawn(async move { server.await });
    for (path, tenant) in [
        ("/", 1),
        ("/hash/256", 7),
        ("/hash/4096", 8),
        ("/metrics", 1),
    ] {
        let res = get_once(addr, path, tenant).await?;
        let status = res.lines().next().unwrap_or("");
        let body = res.split("\r\n\r\n").nth(1).unwrap_or("").trim();
        let body: String = body.chars().take(160).collect();
        println!("GET {path} (tenant {tenant}) -> {status} {body}");
    }
    Ok(())
}
