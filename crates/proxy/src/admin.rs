//! The admin listener: `/metrics` (Prometheus text), `/status` (JSON), `/dashboard` (a live
//! page, plain HTML + JS polling `/status` every second) and `/healthz`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use crate::server::Inner;

pub(crate) async fn serve(inner: Arc<Inner>, listener: TcpListener) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        };
        let inner = inner.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let inner = inner.clone();
                async move { Ok::<_, Infallible>(route(&inner, &req)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

fn route(inner: &Inner, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            inner.status().prometheus(),
        ),
        "/status" => reply(
            StatusCode::OK,
            "application/json",
            serde_json::to_string(&inner.status())
                .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}")),
        ),
        "/dashboard" | "/" => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            crate::dashboard::HTML,
        ),
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n"),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /dashboard, /metrics, /status, /healthz\n",
        ),
    }
}
