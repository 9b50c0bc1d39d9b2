//! The tower layer: concurrency bounded by the gate's seats, fair admission by tenant,
//! rejection surfaced as an error, and the same layer inside an axum router.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::error_handling::HandleErrorLayer;
use axum::http::{Request, StatusCode};
use axum::routing::get;
use axum::Router;
use fairlane_runtime::{
    header_tenant, AcquireError, ClassId, FairError, FairGate, FairLayer, TenantId,
};
use tower::{service_fn, Layer, ServiceBuilder, ServiceExt};

#[derive(Debug)]
struct Req {
    tenant: u64,
    id: usize,
}

fn classify(r: &Req) -> (TenantId, ClassId) {
    (TenantId(r.tenant), ClassId(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layer_bounds_concurrency_and_serves_tenants_fairly() {
    let gate = FairGate::builder().seats(2).build().unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(Mutex::new(Vec::new()));
    let (i2, m2, s2) = (inside.clone(), most.clone(), served.clone());
    let inner = service_fn(move |r: Req| {
        let (inside, most, served) = (i2.clone(), m2.clone(), s2.clone());
        async move {
            let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(2)).await;
            served.lock().unwrap().push(r.tenant);
            inside.fetch_sub(1, Ordering::SeqCst);
            Ok::<_, Infallible>(r.id * 10)
        }
    });
    let svc = FairLayer::new(gate.clone(), classify).layer(inner);
    // Hold both seats so every request below queues, then release: the gate orders them.
    let hold = (
        gate.acquire(9u64, 0u32).await.unwrap(),
        gate.acquire(9u64, 0u32).await.unwrap(),
    );
    let mut calls = Vec::new();
    // Tenant 1 floods with 30 requests before tenant 2 sends 6.
    for (id, tenant) in (0..30)
        .map(|_| 1u64)
        .chain((0..6).map(|_| 2u64))
        .enumerate()
    {
        let svc = svc.clone();
        calls.push(tokio::spawn(async move {
            svc.oneshot(Req { tenant, id }).await
        }));
    }
    until_waiting(&gate, 36).await;
    drop(hold);
    for (id, c) in calls.into_iter().enumerate() {
        assert_eq!(c.await.unwrap().unwrap(), id * 10);
    }
    assert!(most.load(Ordering::SeqCst) <= 2);
    // Tenant 2 arrived last but equal weights interleave it: all of its 6 requests are
    // served within the first 16, not after tenant 1's 30 (FIFO would serve them last).
    let order = served.lock().unwrap().clone();
    let last_of_2 = order.iter().rposition(|&t| t == 2).unwrap();
    assert!(last_of_2 < 16, "service order {order:?}");
    let m = gate.metrics();
    assert_eq!(m.tenant(1u64).unwrap().completed, 30);
    assert_eq!(m.tenant(2u64).unwrap().completed, 6);
}

/// Wait (30 s at most) until `n` requests queue at the gate.
async fn until_waiting(gate: &FairGate, n: usize) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while gate.waiting() < n {
        assert!(
            std::time::Instant::now() < end,
            "{} of {n} queued",
            gate.waiting()
        );
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_full_gate_rejects_through_the_service_error() {
    let gate = FairGate::builder()
        .seats(1)
        .max_waiting_per_tenant(1)
        .build()
        .unwrap();
    let inner = service_fn(|r: Req| async move { Ok::<_, Infallible>(r.id) });
    let svc = FairLayer::new(gate.clone(), classify).layer(inner);
    let held = gate.acquire(9u64, 0u32).await.unwrap();
    let waiting = tokio::spawn(svc.clone().oneshot(Req { tenant: 1, id: 1 }));
    until_waiting(&gate, 1).await;
    match svc.clone().oneshot(Req { tenant: 1, id: 2 }).await {
        Err(FairError::Rejected(AcquireError::TenantQueueFull { tenant, limit })) => {
            assert_eq!((tenant, limit), (TenantId(1), 1));
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    drop(held);
    assert_eq!(waiting.await.unwrap().unwrap(), 1);
}

fn app(gate: FairGate) -> Router {
    let fair = ServiceBuilder::new()
        .layer(HandleErrorLayer::new(
            |e: FairError<Infallible>| async move {
                match e {
                    FairError::Rejected(AcquireError::Closed) => {
                        (StatusCode::SERVICE_UNAVAILABLE, e.to_string())
                    }
                    _ => (StatusCode::TOO_MANY_REQUESTS, e.to_string()),
                }
            },
        ))
        .layer(FairLayer::new(gate, |req: &Request<Body>| {
            (header_tenant(req.headers().get("x-tenant")), ClassId(0))
        }));
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(fair)
}

#[tokio::test]
async fn the_layer_works_inside_an_axum_router() {
    let gate = FairGate::builder().seats(4).build().unwrap();
    let app = app(gate.clone());
    let req = Request::get("/")
        .header("x-tenant", "7")
        .body(Body::empty())
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let body = axum::body::to_bytes(res.into_body(), 1024).await.unwrap();
    assert_eq!(&body[..], b"hello");
    assert_eq!(gate.metrics().tenant(7u64).unwrap().completed, 1);

    gate.close();
    let req = Request::get("/")
        .header("x-tenant", "7")
        .body(Body::empty())
        .unwrap();
    let res = app.oneshot(req).await.unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
}
