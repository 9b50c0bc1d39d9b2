//! A real gRPC server and client (Python grpcio, installed by scripts/test-deps.sh into a
//! venv under target/) with the proxy between them, over HTTP/2 both ways (`[upstream]
//! protocol = "h2c"`): unary, server-, client- and bidirectional-streaming calls keep their
//! bodies, metadata, trailers and status; a server stream's messages arrive one by one. The
//! checks themselves are in tests/grpc/client.py (each prints `ok <case>`).

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo};

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/grpc")
        .join(name)
}

/// tests/grpc/upstream.py, serving until dropped, and its address.
fn grpc_upstream() -> (Reaped, SocketAddr) {
    let mut child = Command::new(test_dep("venv/bin/python"))
        .arg(script("upstream.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the gRPC upstream");
    let mut line = String::new();
    let stdout = child.stdout.take().unwrap();
    let child = Reaped(child);
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the gRPC upstream prints its port");
    let port: u16 = line
        .trim()
        .strip_prefix("port ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the gRPC upstream said {line:?}"));
    (child, SocketAddr::from(([127, 0, 0, 1], port)))
}

/// Run tests/grpc/client.py with `args`; its stdout (it failed if a check failed).
async fn grpc_client(args: Vec<String>) -> String {
    let mut cmd = Command::new(test_dep("venv/bin/python"));
    cmd.arg(script("client.py")).args(args);
    tokio::time::timeout(GET_LIMIT * 2, run_ok(cmd, "the gRPC client"))
        .await
        .expect("the gRPC client finished in time")
}

/// The proxy's config: HTTP/2 cleartext to the upstream, every caller the default tenant,
/// and `rest`.
fn grpc_config(up: SocketAddr, rest: &str) -> fairlane_proxy::ProxyConfig {
    config(
        up,
        &format!("protocol = \"h2c\"\n[identity]\nunknown = \"default\"\n{rest}"),
    )
}

fn assert_cases(stdout: &str, cases: &[&str]) {
    for c in cases {
        assert!(
            stdout.lines().any(|l| l == format!("ok {c}")),
            "case {c} not passed:\n{stdout}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_of_every_kind_pass_intact() {
    let (_up, up) = grpc_upstream();
    let p = start_proxy(grpc_config(up, "[scheduler]\ndepth = 4")).await;
    let out = grpc_client(vec!["calls".into(), p.addr.to_string(), up.to_string()]).await;
    assert_cases(
        &out,
        &["unary", "status", "server-stream", "client-stream", "bidi"],
    );
    let s = status(p.admin).await;
    let t = tenant(&s, "default");
    // unary ×2, server stream, client stream, bidi: each admitted and completed once.
    assert_eq!(t["completed"], 5, "{s}");
}

/// With D = 1 and a queue of 1, the real client sees RESOURCE_EXHAUSTED for a call past the
/// queue, and DEADLINE_EXCEEDED for a call whose deadline passes while queued; the upstream
/// receives neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_refusals_reach_the_real_client() {
    let (_up, up) = grpc_upstream();
    let rest = "[scheduler]\ndepth = 1\n[limits]\nmax_queued = 1";
    let p = start_proxy(grpc_config(up, rest)).await;
    let args = vec![
        "queue-full".into(),
        p.addr.to_string(),
        up.to_string(),
        p.admin.to_string(),
    ];
    let out = grpc_client(args).await;
    assert_cases(&out, &["deadline", "resource-exhausted", "upstream-count"]);
    let s = status(p.admin).await;
    let t = tenant(&s, "default");
    assert_eq!(t["rejected"]["queue_full"], 1, "{s}");
}

/// An HTTP/2 connection of the test's own to `addr` (h2c).
async fn h2(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
            .await
            .expect("h2c handshake");
    tokio::spawn(conn);
    send
}

/// A `fl.Echo` call with one empty message, and `grpc-timeout` if given.
fn call(addr: SocketAddr, method: &str, timeout: Option<&str>) -> http::Request<Full<Bytes>> {
    let mut b = http::Request::post(format!("http://{addr}/fl.Echo/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = timeout {
        b = b.header("grpc-timeout", t);
    }
    // One empty message: a 0 flag and a length of 0.
    b.body(Full::new(Bytes::from_static(&[0, 0, 0, 0, 0])))
        .unwrap()
}

/// How many `Hold` calls the upstream has received (asked straight, not through the proxy).
async fn held_calls(up: SocketAddr) -> String {
    let r = h2(up)
        .await
        .send_request(call(up, "Count", None))
        .await
        .unwrap();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(body.get(5..).unwrap_or_default()).into_owned()
}

/// A call's `grpc-timeout` bounds its wait in the queue: once it has passed, the proxy
/// answers DEADLINE_EXCEEDED itself (HTTP 200, `grpc-status: 4`) and never forwards it. A
/// client of the test's own, setting no deadline of its own, shows that the proxy answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_timeout_is_honoured_while_queued() {
    let (_up, up) = grpc_upstream();
    let p = start_proxy(grpc_config(up, "[scheduler]\ndepth = 1")).await;
    let mut send = h2(p.addr).await;
    // The first call holds the only slot (the upstream holds it until opened).
    let _first = tokio::spawn(send.send_request(call(p.addr, "Hold", None)));
    eventually(STEP, "the first call to hold the slot", || async {
        held_calls(up).await == "1"
    })
    .await;
    let answer = tokio::time::timeout(STEP, send.send_request(call(p.addr, "Hold", Some("200m"))))
        .await
        .expect("the proxy answers once the deadline passed")
        .expect("an HTTP/2 response");
    assert_eq!(answer.status(), 200);
    let h = answer.headers();
    assert_eq!(h["grpc-status"], "4", "{h:?}");
    assert!(h.contains_key("grpc-message"), "{h:?}");
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "default")["rejected"]["deadline"], 1, "{s}");
    assert_eq!(
        held_calls(up).await,
        "1",
        "the expired call reached the upstream"
    );
}
