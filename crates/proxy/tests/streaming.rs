//! Streaming where the protocol streams: a request body without a length goes upstream as
//! the client sends it (once the request holds its slot), with its gaps and size bounded; a
//! `text/event-stream` response reaches its client event by event, never held in the
//! response buffer; a tenant holds at most its streaming share of D that way. Nothing here
//! waits on a sleep: each step waits (with a deadline) for what the other side shows.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http_body_util::BodyExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response body the test feeds piece by piece (ends when the sender is dropped).
type Fed = http_body_util::channel::Channel<Bytes>;
type Feed = http_body_util::channel::Sender<Bytes>;

/// What the streaming upstream shows the test.
#[derive(Default)]
struct Seen {
    /// For each `/sse` request, the sender of its events.
    feeds: Vec<Feed>,
    /// The first piece of each request body, as it arrived.
    first_pieces: Vec<Bytes>,
    /// Each request body in full, or how it broke.
    bodies: Vec<Result<usize, String>>,
}

type Shared = Arc<Mutex<Seen>>;

/// `/sse`: an event stream the test feeds; anything else: the request body read piece by
/// piece (its first piece shown at once), answered with its length.
async fn streaming_upstream() -> (SocketAddr, tokio::task::JoinHandle<()>, Shared) {
    let seen = Shared::default();
    let s = seen.clone();
    let (addr, task) = serve_http1(move || {
        let s = s.clone();
        hyper::service::service_fn(move |req| answer(req, s.clone()))
    })
    .await;
    (addr, task, seen)
}

async fn answer(
    req: http::Request<hyper::body::Incoming>,
    seen: Shared,
) -> Result<http::Response<http_body_util::Either<Fed, String>>, Infallible> {
    if req.uri().path() == "/sse" {
        let (tx, rx) = Fed::new(4);
        seen.lock().unwrap().feeds.push(tx);
        let mut r = http::Response::new(http_body_util::Either::Left(rx));
        r.headers_mut()
            .insert("content-type", "text/event-stream".parse().unwrap());
        return Ok(r);
    }
    let mut body = req.into_body();
    let mut total = 0;
    let mut first = true;
    let outcome = loop {
        match body.frame().await {
            None => break Ok(total),
            Some(Err(e)) => break Err(e.to_string()),
            Some(Ok(f)) => {
                if let Ok(d) = f.into_data() {
                    total += d.len();
                    if first {
                        seen.lock().unwrap().first_pieces.push(d);
                        first = false;
                    }
                }
            }
        }
    };
    seen.lock().unwrap().bodies.push(outcome.clone());
    Ok(http::Response::new(http_body_util::Either::Right(format!(
        "{}\n",
        outcome.map_or(-1, |n| n as i64)
    ))))
}

const KEY: &str = "Authorization: Bearer ka\r\n";

/// Read from `s` until `want` has arrived (panics after `STEP`).
async fn read_until(s: &mut TcpStream, got: &mut Vec<u8>, want: &str) {
    tokio::time::timeout(STEP, async {
        while !String::from_utf8_lossy(got).contains(want) {
            let mut b = [0u8; 4096];
            let n = s.read(&mut b).await.expect("read");
            assert!(
                n > 0,
                "closed before {want:?}: {}",
                String::from_utf8_lossy(got)
            );
            got.extend_from_slice(&b[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{want:?} did not arrive: {}", String::from_utf8_lossy(got)));
}

/// The streaming upstream and a proxy in front of it with `rest` in its config.
async fn setup(rest: &str) -> (Running, Shared, tokio::task::JoinHandle<()>) {
    let (up, task, seen) = streaming_upstream().await;
    let p = proxy_with(up, rest, &[("a", "ka")]).await;
    (p, seen, task)
}

/// A `GET /sse` through the proxy, and the feed of its events at the upstream.
async fn open_sse(p: &Running, seen: &Shared) -> (TcpStream, Feed) {
    let s = send(
        p.addr,
        &format!("GET /sse HTTP/1.1\r\nHost: x\r\n{KEY}\r\n"),
    )
    .await;
    (s, wait_for(|| seen.lock().unwrap().feeds.pop()).await)
}

/// A connection to `addr` that has sent `text`.
async fn send(addr: SocketAddr, text: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(text.as_bytes()).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_arrive_event_by_event() {
    // A buffer far larger than the whole stream: only streaming gets event 1 out early.
    let (p, seen, _t) = setup("[limits]\nresponse_buffer_bytes = 1048576").await;
    let (mut s, mut feed) = open_sse(&p, &seen).await;
    let mut got = Vec::new();
    for i in 1..=3 {
        let event = Bytes::from(format!("data: event {i}\n\n"));
        feed.send_data(event).await.unwrap();
        // Event i arrives while the upstream still holds the stream open.
        read_until(&mut s, &mut got, &format!("data: event {i}\n\n")).await;
    }
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        text.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{text}"
    );
    drop(feed);
    read_until(&mut s, &mut got, "0\r\n\r\n").await;
}

/// Poll `f` until it yields something (panics after `STEP`).
async fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let end = tokio::time::Instant::now() + STEP;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(tokio::time::Instant::now() < end, "timed out");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A chunked request body reaches the upstream piece by piece: its first piece arrives
/// there before the client has sent the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_without_a_length_stream_upstream() {
    let (p, seen, _t) = setup("").await;
    let head = format!("POST /up HTTP/1.1\r\nHost: x\r\n{KEY}Transfer-Encoding: chunked\r\n\r\n");
    let mut s = send(p.addr, &format!("{head}5\r\nhello\r\n")).await;
    let first = wait_for(|| seen.lock().unwrap().first_pieces.pop()).await;
    assert_eq!(first, "hello");
    s.write_all(b"6\r\n world\r\n0\r\n\r\n").await.unwrap();
    let mut got = Vec::new();
    read_until(&mut s, &mut got, "11\n").await;
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"));
    assert_eq!(seen.lock().unwrap().bodies, vec![Ok(11)]);
    // The connection goes on: a second request on it is served.
    s.write_all(format!("GET /again HTTP/1.1\r\nHost: x\r\n{KEY}\r\n").as_bytes())
        .await
        .unwrap();
    let mut again = Vec::new();
    read_until(&mut s, &mut again, "0\n").await;
}

/// A streamed body that stalls past `stream_idle_timeout_ms` is answered 408, and one past
/// `max_stream_bytes` 413; the upstream sees each broken off, not complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_bodies_are_bounded() {
    let (p, seen, _t) = setup("[limits]\nstream_idle_timeout_ms = 300\nmax_stream_bytes = 8").await;
    let head = format!("POST /up HTTP/1.1\r\nHost: x\r\n{KEY}Transfer-Encoding: chunked\r\n\r\n");
    let answered = |sent: String, status: &'static str| async move {
        let mut sock = send(p.addr, &sent).await;
        let mut got = Vec::new();
        read_until(&mut sock, &mut got, "\r\n\r\n").await;
        let got = String::from_utf8_lossy(&got).into_owned();
        assert!(got.starts_with(status), "{got}");
    };
    answered(format!("{head}3\r\nabc\r\n"), "HTTP/1.1 408").await;
    answered(
        format!("{head}5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n"),
        "HTTP/1.1 413",
    )
    .await;
    wait_for(|| (seen.lock().unwrap().bodies.len() == 2).then_some(())).await;
    assert!(
        seen.lock().unwrap().bodies.iter().all(|b| b.is_err()),
        "the upstream saw both bodies broken off: {:?}",
        seen.lock().unwrap().bodies
    );
    let st = status(p.admin).await;
    let a = tenant(&st, "a");
    assert_eq!(a["rejected"]["body_timeout"], 1, "{a}");
    assert_eq!(a["rejected"]["body_too_large"], 1, "{a}");
}

/// Event streams hold their slot while they last, and count against the tenant's
/// streaming share: with D = 2 and a share of 0.5, a second stream gets 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_count_against_the_streaming_share() {
    let (p, seen, _t) = setup("[scheduler]\ndepth = 2\n[limits]\nmax_streaming_share = 0.5").await;
    let (mut first, mut feed) = open_sse(&p, &seen).await;
    feed.send_data(Bytes::from_static(b"data: 1\n\n"))
        .await
        .unwrap();
    let mut got = Vec::new();
    read_until(&mut first, &mut got, "data: 1").await;
    let (code, _, _) = get(p.addr, "/sse", Some("ka")).await;
    assert_eq!(code, 503, "over the streaming share");
    let st = status(p.admin).await;
    assert_eq!(st["in_flight"], 1, "the first stream holds its slot: {st}");
    drop(feed);
    read_until(&mut first, &mut got, "0\r\n\r\n").await;
    let (code, _, body) = get(p.addr, "/plain", Some("ka")).await;
    assert_eq!(code, 200, "{body}");
}
