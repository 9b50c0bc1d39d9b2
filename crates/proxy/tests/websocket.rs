//! WebSocket through the proxy, between a real WebSocket client and a real echo server
//! (tokio-tungstenite on loopback): the echo works both ways, text and binary, with the
//! close handshake; a tenant's (cap+1)-th tunnel is refused while other tenants' open; an
//! upgrade holds one of D's slots until the upstream's `101`, an open tunnel none; malformed
//! upgrades and non-101 answers are handled; a client that vanishes, or a tunnel left idle,
//! frees its place; `wss://` works on the TLS listener. Nothing waits on a sleep: each step waits (with a deadline) for what the
//! other side shows.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::WebSocketStream;

/// What the upstream saw, in order: `open <path> <tenant>`, `closed <path>`, `slow start`,
/// `slow end`, `plain <path>`.
type Events = Arc<Mutex<Vec<String>>>;

/// The upstream: a WebSocket echo server (it greets each client with `welcome <tenant>`
/// first, and refuses `/deny` with a 403) that also answers plain HTTP/1.1 requests (`/slow`
/// after a pause).
async fn upstream() -> (SocketAddr, Events) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let events = Events::default();
    let ev = events.clone();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(connection(s, ev.clone()));
        }
    });
    (addr, events)
}

async fn connection(s: TcpStream, events: Events) {
    // The head, peeked (the WebSocket handshake reads it again).
    let mut peek = vec![0u8; 16 * 1024];
    let head = loop {
        match s.peek(&mut peek).await {
            Ok(0) | Err(_) => return,
            Ok(n) if peek[..n].windows(4).any(|w| w == b"\r\n\r\n") => {
                break String::from_utf8_lossy(&peek[..n]).to_ascii_lowercase();
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(2)).await,
        }
    };
    if head.contains("upgrade: websocket") {
        echo(s, events).await;
    } else {
        plain(s, events).await;
    }
}

// The handshake callback's `Err` is tungstenite's own response type.
#[allow(clippy::result_large_err)]
async fn echo(s: TcpStream, events: Events) {
    let seen = Arc::new(Mutex::new((String::new(), String::new())));
    let at = seen.clone();
    let callback = move |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let tenant = req
            .headers()
            .get("x-fairlane-tenant")
            .map_or("-", |v| v.to_str().unwrap_or("?"));
        *at.lock().unwrap() = (req.uri().path().to_string(), tenant.to_string());
        if req.uri().path() == "/deny" {
            let mut r = ErrorResponse::new(Some("denied".into()));
            *r.status_mut() = http::StatusCode::FORBIDDEN;
            return Err(r);
        }
        Ok(resp)
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(s, callback).await else {
        return;
    };
    let (path, tenant) = seen.lock().unwrap().clone();
    events.lock().unwrap().push(format!("open {path} {tenant}"));
    let _ = ws.send(Message::text(format!("welcome {tenant}"))).await;
    while let Some(Ok(m)) = ws.next().await {
        if (m.is_text() || m.is_binary()) && ws.send(m).await.is_err() {
            break;
        }
    }
    events.lock().unwrap().push(format!("closed {path}"));
}

async fn plain(mut s: TcpStream, events: Events) {
    let mut buf = Vec::new();
    loop {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut b = [0u8; 4096];
            match s.read(&mut b).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&b[..n]),
            }
        }
        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        buf.drain(..end);
        let path = head.split(' ').nth(1).unwrap_or("").to_string();
        if path == "/slow" {
            events.lock().unwrap().push("slow start".into());
            tokio::time::sleep(Duration::from_millis(500)).await;
            events.lock().unwrap().push("slow end".into());
        } else {
            events.lock().unwrap().push(format!("plain {path}"));
        }
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        if s.write_all(r).await.is_err() {
            return;
        }
    }
}

const TENANTS: &[(&str, &str)] = &[("alice", "ka"), ("bob", "kb")];

async fn setup(rest: &str) -> (Running, Events) {
    let (up, events) = upstream().await;
    let text = format!("{rest}\n{}", tenants(TENANTS));
    (start_proxy(config(up, &text)).await, events)
}

type Ws = WebSocketStream<TcpStream>;

/// A WebSocket to `path` through the proxy with API key `key`.
async fn open(p: &Running, path: &str, key: &str) -> Result<Ws, WsError> {
    let mut req = format!("ws://{}{path}", p.addr).into_client_request()?;
    let auth = format!("Bearer {key}").parse().unwrap();
    req.headers_mut().insert("authorization", auth);
    let tcp = TcpStream::connect(p.addr).await?;
    let opened = tokio_tungstenite::client_async(req, tcp);
    let r = tokio::time::timeout(STEP, opened).await;
    r.expect("the handshake is answered").map(|(ws, _)| ws)
}

/// The next data message (text or binary) from `ws`.
async fn next(ws: &mut Ws) -> Message {
    loop {
        let m = tokio::time::timeout(STEP, ws.next()).await;
        match m.expect("a message in time") {
            Some(Ok(m)) if m.is_text() || m.is_binary() => return m,
            Some(Ok(_)) => continue,
            other => panic!("the tunnel ended: {other:?}"),
        }
    }
}

/// The proxy's `fairlane_proxy_tunnels_open{tenant}` gauge.
async fn open_tunnels(p: &Running, tenant: &str) -> u64 {
    let (_, _, text) = get(p.admin, "/metrics", None).await;
    let prefix = format!("fairlane_proxy_tunnels_open{{tenant=\"{tenant}\"}} ");
    let line = text.lines().find_map(|l| l.strip_prefix(prefix.as_str()));
    line.and_then(|v| v.trim().parse().ok()).unwrap_or(u64::MAX)
}

async fn wait_open(p: &Running, tenant: &str, n: u64) {
    let what = format!("{n} tunnels open for {tenant}");
    eventually(STEP, &what, || async { open_tunnels(p, tenant).await == n }).await;
}

fn saw(events: &Events, what: &str) -> bool {
    events.lock().unwrap().iter().any(|e| e == what)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_works_both_ways_with_the_close_handshake() {
    let (p, events) = setup("").await;
    let mut ws = open(&p, "/echo", "ka").await.expect("the upgrade succeeds");
    // The upstream speaks first, and learnt the tenant as on any request.
    assert_eq!(next(&mut ws).await, Message::text("welcome alice"));
    assert_eq!(open_tunnels(&p, "alice").await, 1);
    ws.send(Message::text("héllo")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("héllo"));
    let binary: Vec<u8> = (0..=255u8).cycle().take(300_000).collect();
    ws.send(Message::binary(binary.clone())).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::binary(binary));
    // The close handshake: the client's Close is answered by the server's, then the end.
    ws.close(None).await.unwrap();
    let mut closed = false;
    while let Some(m) = tokio::time::timeout(STEP, ws.next()).await.unwrap() {
        closed |= matches!(m, Ok(Message::Close(_)));
    }
    assert!(
        closed,
        "the server's Close frame came back through the tunnel"
    );
    eventually(STEP, "the upstream saw the close", || async {
        saw(&events, "closed /echo")
    })
    .await;
    wait_open(&p, "alice", 0).await;
    // The upgrade was one request, completed (its slot freed at the 101).
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "alice")["completed"], 1, "{s}");
    assert_eq!(s["in_flight"], 0, "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_tunnel_over_its_cap_is_refused_while_others_open() {
    let (p, _events) = setup("[limits]\nmax_tunnels_per_tenant = 2").await;
    let mut a1 = open(&p, "/echo", "ka").await.unwrap();
    let mut a2 = open(&p, "/echo", "ka").await.unwrap();
    let refused = open(&p, "/echo", "ka").await;
    let Err(WsError::Http(resp)) = refused else {
        panic!("the third tunnel of alice is refused: {refused:?}");
    };
    assert_eq!(resp.status(), 503);
    assert!(resp.headers().contains_key("retry-after"));
    let body = String::from_utf8_lossy(resp.body().as_deref().unwrap_or_default()).to_string();
    assert!(body.contains("too many WebSocket tunnels"), "{body}");
    // Bob's tunnel opens, and alice's two still work.
    let mut b1 = open(&p, "/echo", "kb").await.expect("bob is under his cap");
    assert_eq!(next(&mut b1).await, Message::text("welcome bob"));
    for ws in [&mut a1, &mut a2] {
        assert_eq!(next(ws).await, Message::text("welcome alice"));
        ws.send(Message::text("still here")).await.unwrap();
        assert_eq!(next(ws).await, Message::text("still here"));
    }
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "alice")["rejected"]["tunnel_cap"], 1, "{s}");
    // One closed, one more opens.
    a1.close(None).await.unwrap();
    wait_open(&p, "alice", 1).await;
    let mut a3 = open(&p, "/echo", "ka").await.expect("room again");
    assert_eq!(next(&mut a3).await, Message::text("welcome alice"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_holds_a_slot_until_its_101_and_a_tunnel_none() {
    let cfg = "[scheduler]\ndepth = 1\n[limits]\nqueue_timeout_ms = 15000";
    let (p, events) = setup(cfg).await;
    // D = 1, held by a slow request: the upgrade waits for the slot like any request.
    let addr = p.addr;
    let slow = tokio::spawn(async move { get(addr, "/slow", Some("kb")).await.0 });
    eventually(STEP, "the slow request holds the slot", || async {
        saw(&events, "slow start")
    })
    .await;
    let mut ws = open(&p, "/echo", "ka").await.expect("the upgrade succeeds");
    assert_eq!(next(&mut ws).await, Message::text("welcome alice"));
    {
        let ev = events.lock().unwrap();
        let at = |what: &str| ev.iter().position(|e| e == what).unwrap();
        assert!(at("slow end") < at("open /echo alice"), "{ev:?}");
    }
    assert_eq!(slow.await.unwrap(), 200);
    // The tunnel is open and holds no slot: with D = 1, requests go through beside it.
    let s = status(p.admin).await;
    assert_eq!(s["in_flight"], 0, "{s}");
    for key in ["ka", "kb"] {
        assert_eq!(get(p.addr, "/plain", Some(key)).await.0, 200);
    }
    ws.send(Message::text("after")).await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("after"));
}

/// Send `raw` on a new connection and read the answer's head (and what came with it).
async fn raw_exchange(s: &mut TcpStream, raw: &str) -> String {
    s.write_all(raw.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let read = async {
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let mut b = [0u8; 4096];
            match s.read(&mut b).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&b[..n]),
            }
        }
    };
    tokio::time::timeout(STEP, read).await.expect("an answer");
    String::from_utf8_lossy(&got).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_upgrades_and_refused_ones_are_answered() {
    let (p, events) = setup("").await;
    let ws = "Connection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer ka\r\n";
    let key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n";
    for bad in [
        format!("POST /echo HTTP/1.1\r\nHost: x\r\n{ws}{key}Content-Length: 0\r\n\r\n"),
        format!("GET /echo HTTP/1.1\r\nHost: x\r\n{ws}\r\n"),
        format!("GET /echo HTTP/1.1\r\nHost: x\r\n{ws}{key}Content-Length: 2\r\n\r\nab"),
    ] {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        let answer = raw_exchange(&mut s, &bad).await;
        assert!(answer.starts_with("HTTP/1.1 400 "), "{bad:?} → {answer}");
        assert!(answer.contains("WebSocket upgrade"), "{answer}");
        // And the connection is closed.
        let mut b = [0u8; 64];
        let end = tokio::time::timeout(STEP, s.read(&mut b)).await.unwrap();
        assert!(matches!(end, Ok(0) | Err(_)), "{end:?}");
    }
    assert!(events.lock().unwrap().is_empty(), "nothing was forwarded");
    // A non-101 answer is relayed as an ordinary response, and the connection goes on.
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let deny = format!("GET /deny HTTP/1.1\r\nHost: x\r\n{ws}{key}\r\n");
    let answer = raw_exchange(&mut s, &deny).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    let next = "GET /after HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\n\r\n";
    let answer = raw_exchange(&mut s, next).await;
    // The rest of the 403's body may precede the next answer on the connection.
    assert!(answer.contains("HTTP/1.1 200 "), "{answer}");
    wait_open(&p, "alice", 0).await;
    // Refused by the tungstenite client as a failed handshake, with the upstream's status.
    let denied = open(&p, "/deny", "ka").await;
    assert!(
        matches!(&denied, Err(WsError::Http(r)) if r.status() == 403),
        "{denied:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_an_http2_upstream_is_answered_501() {
    // `protocol` lands in `[upstream]`, the section `setup`'s text continues.
    let (p, events) = setup("protocol = \"h2c\"").await;
    let mut s = TcpStream::connect(p.addr).await.unwrap();
    let raw = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
        Authorization: Bearer ka\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
        Sec-WebSocket-Version: 13\r\n\r\n";
    let answer = raw_exchange(&mut s, raw).await;
    assert!(answer.starts_with("HTTP/1.1 501 "), "{answer}");
    assert!(events.lock().unwrap().is_empty(), "nothing was forwarded");
    wait_open(&p, "alice", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_client_or_an_idle_tunnel_frees_its_place() {
    // A client that goes away without a close handshake (no idle timeout in reach).
    let (p, events) = setup("[limits]\nmax_tunnels_per_tenant = 1").await;
    let mut ws = open(&p, "/gone", "ka").await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("welcome alice"));
    drop(ws);
    eventually(STEP, "the upstream saw the tunnel end", || async {
        saw(&events, "closed /gone")
    })
    .await;
    wait_open(&p, "alice", 0).await;
    let ws = open(&p, "/again", "ka").await.expect("the place was freed");
    drop(ws);
    // A tunnel with nothing going either way is closed after the idle timeout.
    let (p, events) = setup("[limits]\ntunnel_idle_timeout_ms = 400").await;
    let mut ws = open(&p, "/idle", "ka").await.unwrap();
    assert_eq!(next(&mut ws).await, Message::text("welcome alice"));
    let end = tokio::time::timeout(STEP, ws.next())
        .await
        .expect("closed in time");
    assert!(
        !matches!(end, Some(Ok(Message::Text(_) | Message::Binary(_)))),
        "{end:?}"
    );
    eventually(STEP, "the upstream saw the idle tunnel end", || async {
        saw(&events, "closed /idle")
    })
    .await;
    wait_open(&p, "alice", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn echo_works_over_the_tls_listener() {
    use rustls_pki_types::ServerName;
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
    let tls = format!(
        "[listen.tls]\naddr = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    );
    let (p, _events) = setup(&tls).await;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(certified.cert.der().clone()).unwrap();
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = TcpStream::connect(p.tls.expect("a TLS listener"))
        .await
        .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let stream = connector.connect(name, tcp).await.unwrap();
    let mut req = "wss://localhost/echo".into_client_request().unwrap();
    req.headers_mut()
        .insert("authorization", "Bearer kb".parse().unwrap());
    let opened = tokio_tungstenite::client_async(req, stream);
    let (mut ws, _) = tokio::time::timeout(STEP, opened).await.unwrap().unwrap();
    assert_eq!(
        tokio::time::timeout(STEP, ws.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        Message::text("welcome bob")
    );
    ws.send(Message::binary(vec![7u8; 70_000])).await.unwrap();
    let back = tokio::time::timeout(STEP, ws.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(back, Message::binary(vec![7u8; 70_000]));
    ws.close(None).await.unwrap();
}
