//! The admin listener: `/metrics` (Prometheus text), `/status` (JSON), `/dashboard` (a live
//! page, plain HTML + JS polling `/status` every second), `/healthz`, and the priority
//! levels' JSON dumps `/debug/priority_levels`, `/debug/queues`, `/debug/requests`.

use std::convert::Infallible;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use fairlane_runtime::admin::reply;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::conn::{ActiveGuard, ClientIo};
use crate::prom::{readers, Reader};
use crate::state::Inner;

pub(crate) async fn serve(inner: Arc<Inner>, listener: TcpListener) {
    // Its own connection table (`limits.admin_connections`), outside the client cap, and
    // descriptors the client cap leaves free: `/metrics` answers during a client flood.
    let mut backoff = crate::conn::AcceptBackoff::default();
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(a) => {
                backoff.reset();
                a
            }
            Err(e) => {
                let pause = inner
                    .admin_conns
                    .accept_failed(&mut backoff, "listen.admin", &e);
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let Some(state) = inner.admin_conns.admit(peer.ip()) else {
            continue;
        };
        let limits = inner.settings().config.limits.clone();
        let io = ClientIo::new(stream, Duration::from_millis(limits.send_timeout_ms));
        let inner = inner.clone();
        tokio::spawn(async move {
            let conn_inner = inner.clone();
            let conn_state = state.clone();
            let service = service_fn(move |req| {
                let inner = conn_inner.clone();
                let busy = ActiveGuard::new(conn_state.clone());
                async move {
                    let _busy = busy;
                    Ok::<_, Infallible>(route(&inner, &req))
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_millis(limits.header_timeout_ms))
                .serve_connection(TokioIo::new(io), service);
            tokio::select! {
                _ = conn => {}
                _ = state.evict.notified() => {}
            }
            inner.admin_conns.remove(&state);
        });
    }
}

/// Connection-level metrics, appended to the exposition.
const CONNECTION_METRICS: [(&str, &str, Reader<Inner>); 6] = readers![i: Inner;
    "fairlane_proxy_connections_max" => i.conns.max.load(Relaxed),
        "Client connections allowed open at once (limits.max_connections, capped by the open-files limit).";
    "fairlane_proxy_connections_refused_total" => i.conns.refused.load(Relaxed),
        "Client connections closed at once: a connection cap was reached and none was idle.";
    "fairlane_proxy_connections_evicted_total" => i.conns.evicted.load(Relaxed),
        "Idle client connections closed to make room for new ones.";
    "fairlane_proxy_connections_idle_closed_total" => i.conns.idle_closed.load(Relaxed),
        "Client connections closed by limits.idle_timeout_ms.";
    "fairlane_proxy_accept_errors_total" => i.conns.accept_errors.load(Relaxed),
        "Failed accepts on the client listener (EMFILE, ENFILE, ...).";
    "fairlane_proxy_streaming_refused_total" => i.streaming.refused.load(Relaxed),
        "Responses answered 503 because their tenant already held its share of slots streaming to slow readers.";
];

fn connection_metrics(inner: &Inner) -> String {
    let mut o = String::new();
    let rows = CONNECTION_METRICS.map(|(name, help, read)| (name, help, read(inner)));
    crate::prom::plain(&mut o, rows);
    o
}

fn route(inner: &Inner, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != http::Method::GET && req.method() != http::Method::HEAD {
        return reply(StatusCode::METHOD_NOT_ALLOWED, "text/plain", "GET only\n");
    }
    match req.uri().path() {
        "/metrics" => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            inner.status().prometheus()
                + &connection_metrics(inner)
                + &inner.tunnels.prometheus(&inner.settings().names),
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
        p if p.starts_with("/debug/") => match debug(inner, p) {
            Some(json) => reply(StatusCode::OK, "application/json", json),
            None => reply(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        },
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /dashboard, /metrics, /status, /healthz\n",
        ),
    }
}

/// The admin listener's JSON dumps (`None`: no such path): `/debug/priority_levels`
/// (APF's `dump_priority_levels`), `/debug/queues`, `/debug/requests`. Empty lists without
/// levels.
fn debug(inner: &Inner, path: &str) -> Option<String> {
    let json =
        |v: serde_json::Result<String>| v.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    let snapshots = inner.gate.0.levels();
    Some(match path {
        "/debug/priority_levels" => json(serde_json::to_string(&inner.levels.status(snapshots))),
        "/debug/queues" => {
            let names = inner.settings().names.clone();
            json(serde_json::to_string(
                &inner.levels.queues(&snapshots, &names),
            ))
        }
        "/debug/requests" => {
            let names = inner.settings().names.clone();
            json(serde_json::to_string(&inner.levels.requests(&names)))
        }
        _ => return None,
    })
}
