//! Faults and edge cases: every request gets exactly one answer from the documented list.

mod common;

use std::io::{Read, Write};

use common::*;
use fairlane_proxy_testkit::upstream::UpstreamServer;

const TENANTS: &str = concat!(
    "[[tenant]]\nname = \"alice\"\nkeys = [\"ka\"]\n",
    "[[tenant]]\nname = \"bob\"\nkeys = [\"kb\"]\n"
);

/// An upstream that answers at once, and a proxy in front of it with the config `rest`.
async fn served_proxy(rest: &str) -> (UpstreamServer, Running) {
    let up = start_upstream().await;
    let p = start_proxy(config(up.addr(), rest)).await;
    (up, p)
}

/// A held upstream (it answers only when the test says) and a proxy in front of it with
/// the config `rest` (everything after `[upstream] addr`).
async fn held_proxy(rest: &str) -> (HeldUpstream, Running) {
    let up = HeldUpstream::start().await;
    let p = start_proxy(config(up.addr(), rest)).await;
    (up, p)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_killed_mid_run_and_restarted() {
    let up = HeldUpstream::start().await;
    let up_addr = up.addr();
    let p = start_proxy(config(
        up_addr,
        &format!("[scheduler]\ndepth = 2\n{TENANTS}"),
    ))
    .await;
    // Two requests in flight (held at the upstream) and four queued when the upstream dies.
    let reqs = spawn_gets(p.addr, "/slow", 6, &["ka", "kb"]);
    let held = up.take(2, STEP, "two requests in flight").await;
    let admin = p.admin;
    eventually(STEP, "four queued behind the two held", || async move {
        let s = status(admin).await;
        s["queued"] == 4 && s["in_flight"] == 2
    })
    .await;
    assert_eq!(up.counts().0, 2, "D = 2: only two reached the upstream");
    up.stop();
    for r in reqs {
        let (code, _, _) = r.await.unwrap();
        assert_eq!(
            code, 502,
            "in-flight and queued requests get 502 when the upstream is gone"
        );
    }
    drop(held);
    let (code, _, _) = get(p.addr, "/", Some("ka")).await;
    assert_eq!(code, 502, "connect refused → 502");
    // Restarted on the same address: served again.
    let _up = UpstreamServer::start(up_addr).await.unwrap();
    let (code, _, body) = get(p.addr, "/", Some("ka")).await;
    assert_eq!(code, 200, "{body}");
    let s = status(p.admin).await;
    assert_eq!(s["queued"], 0);
    assert_eq!(s["in_flight"], 0);
    let a = tenant(&s, "alice");
    assert_eq!(
        a["received"].as_u64().unwrap(),
        a["completed"].as_u64().unwrap()
            + a["rejected"]["upstream_error"].as_u64().unwrap_or(0)
            + a["rejected"]["upstream_connect"].as_u64().unwrap_or(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_upstream_gets_504_and_queue_timeout_503() {
    let (up, p) = held_proxy(&format!("timeout_ms = 300\n[scheduler]\ndepth = 1\n[limits]\nqueue_timeout_ms = 150\nretry_after_s = 7\n{TENANTS}")).await;
    let first = tokio::spawn(get(p.addr, "/", Some("ka")));
    // Held at the upstream (never answered before the test ends): it holds the one slot.
    let _held = up.next(STEP, "alice's request in flight").await;
    // Queued behind it longer than the queue timeout.
    let (code, h, _) = get(p.addr, "/", Some("kb")).await;
    assert_eq!(code, 503);
    assert_eq!(h["retry-after"], "7");
    // 504: the upstream never answered, and the 300 ms upstream timeout fired.
    let (code, _, _) = first.await.unwrap();
    assert_eq!(code, 504);
    assert_eq!(up.counts().0, 1, "bob's request never reached the upstream");
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "alice")["rejected"]["upstream_timeout"], 1);
    assert_eq!(tenant(&s, "bob")["rejected"]["queue_timeout"], 1);
}

fn raw(addr: std::net::SocketAddr, bytes: &[u8]) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(STEP)).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    // Read until the peer closes or the first response is complete enough to judge.
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_oversized_requests() {
    // A chunked body streams (no length): `max_stream_bytes` bounds it.
    let (_up, p) = served_proxy(&format!(
        "[limits]\nmax_body_bytes = 1000\nmax_stream_bytes = 1000\n{TENANTS}"
    ))
    .await;
    let addr = p.addr;
    let answers = tokio::task::spawn_blocking(move || {
        vec![
            raw(addr, b"THIS IS NOT HTTP\r\n\r\n"),
            raw(addr, b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n"),
            raw(addr, b"GET http://other.example/ HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\n\r\n"),
            raw(addr, b"POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\nContent-Length: 5000\r\n\r\n"),
            {
                let mut chunked = b"POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                for _ in 0..5 {
                    chunked.extend_from_slice(b"3e8\r\n");
                    chunked.extend_from_slice(&[b'x'; 1000]);
                    chunked.extend_from_slice(b"\r\n");
                }
                chunked.extend_from_slice(b"0\r\n\r\n");
                raw(addr, &chunked)
            },
            raw(addr, b"POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\nContent-Length: 10\r\n\r\n0123456789"),
        ]
    })
    .await
    .unwrap();
    assert!(answers[0].starts_with("HTTP/1.1 400"), "{}", answers[0]);
    assert!(answers[1].starts_with("HTTP/1.1 400"), "{}", answers[1]);
    // An absolute-form target is forwarded to *our* upstream, never to the named host.
    assert!(answers[2].starts_with("HTTP/1.1 200"), "{}", answers[2]);
    assert!(answers[3].starts_with("HTTP/1.1 413"), "{}", answers[3]);
    assert!(answers[4].starts_with("HTTP/1.1 413"), "{}", answers[4]);
    assert!(answers[5].starts_with("HTTP/1.1 200"), "{}", answers[5]);
    assert!(answers[5].contains("x-body-bytes: 10"), "{}", answers[5]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_disconnecting_while_queued_is_removed() {
    let (up, p) = held_proxy(&format!("[scheduler]\ndepth = 1\n{TENANTS}")).await;
    let first = tokio::spawn(get(p.addr, "/", Some("ka")));
    let admin = p.admin;
    // Held at the upstream until the end: the one slot stays taken.
    let held = up.next(STEP, "first request in flight").await;
    // Three clients queue and hang up.
    let addr = p.addr;
    let socks: Vec<_> = (0..3)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /never HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer kb\r\n\r\n")
                .unwrap();
            s
        })
        .collect();
    eventually(STEP, "three queued", || async move {
        status(admin).await["queued"] == 3
    })
    .await;
    drop(socks);
    eventually(STEP, "queue emptied by the disconnects", || async move {
        let s = status(admin).await;
        s["queued"] == 0 && tenant(&s, "bob")["cancelled"] == 3
    })
    .await;
    held.release();
    assert_eq!(first.await.unwrap().0, 200);
    // The upstream never saw the abandoned requests.
    assert_eq!(up.counts().0, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_cannot_be_spoofed() {
    let up = start_upstream().await;
    let p = start_proxy(config(up.addr(), TENANTS)).await;
    let (code, h, _) = get(p.addr, "/", None).await;
    assert_eq!(
        (code, h["www-authenticate"].to_str().unwrap()),
        (401, "Bearer")
    );
    assert_eq!(get(p.addr, "/", Some("not-a-key")).await.0, 401);
    // A client naming another tenant in a header is still who its key says.
    let req = http::Request::get(format!("http://{}/", p.addr))
        .header("authorization", "Bearer kb")
        .header("x-fairlane-tenant", "alice")
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.headers()["x-saw-tenant"], "bob");
    // Default tenant mode.
    let p2 = start_proxy(config(
        up.addr(),
        &format!("[identity]\nunknown = \"default\"\ndefault_tenant = \"anon\"\n{TENANTS}"),
    ))
    .await;
    let (code, h, _) = get(p2.addr, "/", Some("not-a-key")).await;
    assert_eq!((code, h["x-saw-tenant"].to_str().unwrap()), (200, "anon"));
    // By address.
    let p3 = start_proxy(config(
        up.addr(),
        "[[tenant]]\nname = \"local\"\nips = [\"127.0.0.0/8\"]\n",
    ))
    .await;
    let (code, h, _) = get(p3.addr, "/", None).await;
    assert_eq!((code, h["x-saw-tenant"].to_str().unwrap()), (200, "local"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_caps_answer_429_with_retry_after() {
    let (up, p) = held_proxy(&format!("[scheduler]\ndepth = 1\n[limits]\nmax_queued = 3\nmax_queued_per_tenant = 2\nretry_after_s = 3\n{TENANTS}")).await;
    let admin = p.admin;
    let mut held = vec![tokio::spawn(get(p.addr, "/", Some("ka")))];
    // Held at the upstream until every cap was checked: the queue only grows meanwhile.
    let first = up.next(STEP, "alice's first request in flight").await;
    for _ in 0..2 {
        held.push(tokio::spawn(get(p.addr, "/", Some("ka"))));
    }
    eventually(STEP, "alice queued 2", || async move {
        status(admin).await["queued"] == 2
    })
    .await;
    let (code, h, _) = get(p.addr, "/", Some("ka")).await;
    assert_eq!(
        (code, h["retry-after"].to_str().unwrap()),
        (429, "3"),
        "tenant cap"
    );
    held.push(tokio::spawn(get(p.addr, "/", Some("kb"))));
    eventually(STEP, "3 queued", || async move {
        status(admin).await["queued"] == 3
    })
    .await;
    assert_eq!(get(p.addr, "/", Some("kb")).await.0, 429, "global cap");
    first.release();
    up.release_all();
    for h in held {
        assert_eq!(h.await.unwrap().0, 200);
    }
    let s = status(admin).await;
    assert_eq!(tenant(&s, "alice")["rejected"]["tenant_queue_full"], 1);
    assert_eq!(tenant(&s, "bob")["rejected"]["queue_full"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cost_header_http2_and_metrics() {
    let (_up, p) = served_proxy(&format!("cost_header = \"x-cost\"\n{TENANTS}")).await;
    for _ in 0..4 {
        assert_eq!(get(p.addr, "/?cost=250", Some("ka")).await.0, 200);
    }
    // HTTP/2 (prior knowledge) from the client, HTTP/1.1 to the upstream.
    let h2: hyper_util::client::legacy::Client<_, http_body_util::Empty<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .build_http();
    let req = http::Request::get(format!("http://{}/h2", p.addr))
        .header("authorization", "Bearer kb")
        .body(http_body_util::Empty::new())
        .unwrap();
    let resp = h2.request(req).await.unwrap();
    assert_eq!(
        (resp.status().as_u16(), resp.version()),
        (200, http::Version::HTTP_2)
    );
    let s = status(p.admin).await;
    let cost = tenant(&s, "alice")["cost_total"].as_f64().unwrap();
    assert!(
        (cost - 1.0).abs() < 1e-3,
        "4 × 250 ms reported = 1 s, got {cost}"
    );
    let (code, h, text) = get(p.admin, "/metrics", None).await;
    assert_eq!(code, 200);
    assert!(h["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    for needle in [
        "fairlane_proxy_depth 8",
        "fairlane_proxy_completed_total{tenant=\"alice\"} 4",
        "fairlane_proxy_completed_total{tenant=\"bob\"} 1",
        "fairlane_proxy_queued{tenant=\"alice\"} 0",
        "fairlane_proxy_in_flight{tenant=\"bob\"} 0",
        "fairlane_proxy_rejected_total{tenant=\"alice\",reason=\"queue_full\",code=\"429\"} 0",
        "fairlane_proxy_wait_seconds_count{tenant=\"alice\"} 4",
        "fairlane_proxy_upstream_seconds_bucket{tenant=\"bob\",le=\"+Inf\"} 1",
        "fairlane_proxy_virtual_time",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn depth_is_respected_upstream() {
    let (up, p) = held_proxy(&format!(
        "[scheduler]\nalgorithm = \"2dfqe\"\ndepth = 3\n{TENANTS}"
    ))
    .await;
    let reqs: Vec<_> = (0..30)
        .map(|i| tokio::spawn(get(p.addr, "/", Some(if i % 3 == 0 { "ka" } else { "kb" }))))
        .collect();
    let admin = p.admin;
    // Release one request at a time: each time, the upstream holds exactly D = 3 and the
    // rest wait in the proxy.
    let mut held: std::collections::VecDeque<_> = up.take(3, STEP, "the first three").await.into();
    for released in 0..27u64 {
        let waiting = 27 - released;
        eventually(
            STEP,
            &format!("{waiting} queued, 3 in flight"),
            || async move {
                let s = status(admin).await;
                s["queued"] == waiting && s["in_flight"] == 3
            },
        )
        .await;
        assert_eq!(
            (up.counts().1, up.untaken()),
            (3, 0),
            "after {released} released: the upstream holds exactly D = 3"
        );
        held.pop_front().unwrap().release();
        held.push_back(up.next(STEP, &format!("the next after {released}")).await);
    }
    held.into_iter().for_each(Held::release);
    up.release_all();
    for r in reqs {
        assert_eq!(r.await.unwrap().0, 200);
    }
    assert_eq!(up.counts().0, 30);
    assert_eq!(up.counts().2, 3, "never more than D = 3 at the upstream");
}

#[test]
fn config_errors_name_the_field() {
    let bad = [
        ("[upstream]\naddr = \"nowhere\"", "upstream.addr"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[scheduler]\ndepth = 0", "scheduler.depth"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[scheduler]\nalgorithm = \"magic\"", "scheduler.algorithm"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[[tenant]]\nname = \"a\"\nips = [\"10.0.0.0/40\"]", "tenant[0].ips"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[[tenant]]\nname = \"a\"\nkeys = [\"k\"]\n[[tenant]]\nname = \"b\"\nkeys = [\"k\"]", "tenant[1].keys"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[limits]\nmax_queued = 0", "limits.max_queued"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[[class]]\nname = \"c\"\npath = \"x\"", "class[0].path"),
        ("[upstream]\naddr = \"127.0.0.1:1\"\n[limits]\nbogus = 1", "bogus"),
    ];
    for (text, field) in bad {
        let e = fairlane_proxy::ProxyConfig::from_toml_str(text)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field), "{field} not named in {e:?}");
    }
}
