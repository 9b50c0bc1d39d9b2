//! A raw HTTP/1.1 forwarder (issue 19 prototype): keep-alive client connections served on
//! tokio `TcpStream`s with the proxy's own framing (`src/h1.rs`, httparse), no hyper and no
//! fairlane logic. One task per client connection; for each request it checks an upstream
//! connection out of a small pool, writes the request head and body in one write, reads the
//! response in full and writes it back in one write — about four system calls a request, as
//! nginx does. `scripts/bench-proxy.sh` runs it beside nginx, bare hyper and fairlane-proxy.
//!
//! ```text
//! raw_forward <listen addr> <upstream addr> [percore] [gate]
//! ```
//! `percore`: one single-threaded runtime per core, each with its own `SO_REUSEPORT`
//! listener and upstream pool (nginx's worker model), instead of one work-stealing runtime.
//! `gate`: add the per-request work of fairlane-proxy's own logic — a tenant from the
//! `Authorization` header, a metrics [`Ticket`], an SFQ(64) slot from the proxy's [`Gate`],
//! the upstream timeout, and the cost charged at completion — to estimate what the proxy
//! would cost on this HTTP path (issue 19).

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use std::time::{Duration, Instant};

use fairlane_core::{ClassId, TenantId};
use fairlane_proxy::gate::Gate;
use fairlane_proxy::metrics::{CostPolicy, Metrics, Ticket};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use fairlane_proxy::h1::{self, BodyLen, Chunked, FrameError, MAX_HEADERS};

/// Append the header lines a forwarder passes on: all but the framing and connection ones
/// (this prototype's peers send no others that are hop-by-hop).
fn write_headers(out: &mut Vec<u8>, headers: &[httparse::Header<'_>]) {
    for h in headers {
        if [
            "connection",
            "keep-alive",
            "transfer-encoding",
            "content-length",
            "expect",
        ]
        .iter()
        .any(|n| h.name.eq_ignore_ascii_case(n))
        {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: u64 = 16 << 20;
const MAX_RESPONSE: u64 = 64 << 20;

/// Idle keep-alive upstream connections, most recently used first.
struct Pool {
    addr: SocketAddr,
    idle: Mutex<Vec<TcpStream>>,
    /// `gate` mode: the proxy's per-request logic.
    logic: Option<Arc<Logic>>,
}

/// What fairlane-proxy does per request besides HTTP (the `gate` mode).
struct Logic {
    gate: Gate,
    metrics: Metrics,
    costs: CostPolicy,
    name: Arc<str>,
    upstream_timeout: Duration,
}

impl Logic {
    fn new() -> Logic {
        let config = fairlane_proxy::ProxyConfig::from_toml_str(
            "[listen]\naddr = \"127.0.0.1:1\"\nadmin = \"127.0.0.1:2\"\n[upstream]\naddr = \"127.0.0.1:3\"\n\
             [scheduler]\nalgorithm = \"sfq\"\ndepth = 64\n[limits]\nmax_queued = 20000\nmax_queued_per_tenant = 20000\n[[tenant]]\nname = \"bench\"\nkeys = [\"kb\"]\n",
        )
        .expect("config");
        Logic {
            gate: Gate::for_config(&config).expect("gate"),
            metrics: Metrics::default(),
            costs: CostPolicy::of(&config),
            name: "bench".into(),
            upstream_timeout: config.upstream_timeout(),
        }
    }
}

impl Pool {
    fn take(&self) -> Option<TcpStream> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }
    fn put(&self, s: TcpStream) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < 256 {
            idle.push(s);
        }
    }
    async fn connect(&self) -> io::Result<TcpStream> {
        let s = TcpStream::connect(self.addr).await?;
        s.set_nodelay(true)?;
        Ok(s)
    }
}

/// Why a request got no upstream answer.
enum Fail {
    /// The client sent something unframeable (status, message); the connection closes.
    Client(u16, String),
    /// The client went away.
    Gone,
    /// The upstream failed.
    Upstream,
}

impl From<FrameError> for Fail {
    fn from(e: FrameError) -> Self {
        Fail::Client(e.status(), e.to_string())
    }
}

/// Whether a request asked for `100 Continue`, and whether it was sent.
struct Continue {
    wanted: bool,
    sent: bool,
}

/// Read more of a request body, answering `100 Continue` first if the client asked and it
/// has not been sent.
async fn body_more(
    client: &mut TcpStream,
    input: &mut Vec<u8>,
    cont: &mut Continue,
) -> Result<(), Fail> {
    if cont.wanted && !cont.sent {
        cont.sent = true;
        client
            .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
            .await
            .map_err(|_| Fail::Gone)?;
    }
    match read_more(client, input).await {
        Ok(n) if n > 0 => Ok(()),
        _ => Err(Fail::Gone),
    }
}

/// Per-connection buffers, reused for every request on it.
struct Bufs {
    /// Bytes read from the client not yet consumed (pipelined requests stay here).
    input: Vec<u8>,
    /// The upstream request, then the client response.
    out: Vec<u8>,
    /// A decoded request body, or the response body.
    body: Vec<u8>,
    /// Bytes read from the upstream.
    up: Vec<u8>,
    /// The last request carried the known API key (`gate` mode).
    tenant_known: bool,
}

async fn read_more(s: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.capacity() - buf.len() < 4096 {
        buf.reserve(8192);
    }
    s.read_buf(buf).await
}

async fn serve(mut client: TcpStream, pool: Arc<Pool>, xff: Vec<u8>) {
    let mut b = Bufs {
        input: Vec::new(),
        out: Vec::new(),
        body: Vec::new(),
        up: Vec::new(),
        tenant_known: false,
    };
    loop {
        match one(&mut client, &pool, &xff, &mut b).await {
            Ok(true) => continue,
            Ok(false) | Err(Fail::Gone) => return,
            Err(Fail::Client(status, msg)) => {
                let body = format!("{msg}\n");
                let r = format!(
                    "HTTP/1.1 {status} {}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    reason(status),
                    body.len()
                );
                let _ = client.write_all(r.as_bytes()).await;
                return;
            }
            Err(Fail::Upstream) => {
                let r =
                    b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                let _ = client.write_all(r).await;
                return;
            }
        }
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    }
}

/// Serve one request; `Ok(true)`: the connection stays open for the next.
async fn one(client: &mut TcpStream, pool: &Pool, xff: &[u8], b: &mut Bufs) -> Result<bool, Fail> {
    // Read the head.
    let (info, sent_continue) = loop {
        if !b.input.is_empty() {
            let mut h = h1::headers::<MAX_HEADERS>();
            if let Some((req, info)) = h1::parse_request(&b.input, &mut h, MAX_HEAD)? {
                b.out.clear();
                let method = req.method.unwrap_or("GET");
                b.out.extend_from_slice(method.as_bytes());
                b.out.push(b' ');
                b.out.extend_from_slice(req.path.unwrap_or("/").as_bytes());
                b.out.extend_from_slice(b" HTTP/1.1\r\n");
                write_headers(&mut b.out, req.headers);
                b.tenant_known = req.headers.iter().any(|h| {
                    h.name.eq_ignore_ascii_case("authorization") && h.value == b"Bearer kb"
                });
                b.out.extend_from_slice(b"x-forwarded-for: ");
                b.out.extend_from_slice(xff);
                b.out.extend_from_slice(b"\r\n");
                break (info, false);
            }
        }
        if read_more(client, &mut b.input)
            .await
            .map_err(|_| Fail::Gone)?
            == 0
        {
            return Err(Fail::Gone);
        }
    };
    b.input.drain(..info.head_len);
    let mut cont = Continue {
        wanted: info.expect_continue,
        sent: sent_continue,
    };
    // Read the body in full (it goes upstream with a Content-Length of its own).
    b.body.clear();
    let body_len = match info.body {
        BodyLen::Length(n) => {
            if n > MAX_BODY {
                return Err(Fail::Client(413, "request body too large".into()));
            }
            while (b.input.len() as u64) < n {
                body_more(client, &mut b.input, &mut cont).await?;
            }
            n as usize
        }
        BodyLen::Chunked => {
            let mut d = Chunked::new(MAX_BODY);
            loop {
                let used = d.feed(&b.input, Some(&mut b.body))?;
                b.input.drain(..used);
                if d.done() {
                    break;
                }
                body_more(client, &mut b.input, &mut cont).await?;
            }
            b.body.len()
        }
        // `parse_request` never frames a request by EOF.
        BodyLen::ToEof => return Err(Fail::Client(400, "unframed request body".into())),
    };
    if body_len > 0 || info.body != BodyLen::Length(0) {
        h1::write_content_length(&mut b.out, body_len as u64);
    }
    b.out.extend_from_slice(b"\r\n");
    if info.body == BodyLen::Chunked {
        b.out.extend_from_slice(&b.body);
    } else {
        b.out.extend_from_slice(&b.input[..body_len]);
        b.input.drain(..body_len);
    }

    // `gate` mode: identify, count, queue for a slot (as `forward::handle` does).
    let arrival = Instant::now();
    let admitted = match &pool.logic {
        None => None,
        Some(l) => {
            let tenant = if b.tenant_known {
                TenantId(0)
            } else {
                TenantId(1)
            };
            let ticket = Ticket::new(l.metrics.tenant(tenant), &l.name, l.costs);
            let mut waiting = l
                .gate
                .acquire(tenant, ClassId(0))
                .map_err(|_| Fail::Client(503, "queue full".into()))?;
            let permit = match waiting.granted() {
                Some(p) => p,
                None => waiting.await.map_err(|_| Fail::Upstream)?,
            };
            ticket.wait.record(arrival.elapsed().as_secs_f64());
            ticket.dispatched();
            Some((l, ticket, permit))
        }
    };
    // Upstream exchange: a pooled connection that fails before any answer is retried once
    // on a new one (the upstream may have closed it while idle).
    let mut pooled = pool.take();
    let (up, resp) = loop {
        let retry = pooled.is_some();
        let mut up = match pooled.take() {
            Some(s) => s,
            None => pool.connect().await.map_err(|_| Fail::Upstream)?,
        };
        let r = match admitted.as_ref().map(|a| a.0.upstream_timeout) {
            Some(t) => tokio::time::timeout(t, exchange(&mut up, b, info.head_method))
                .await
                .unwrap_or(Err(None)),
            None => exchange(&mut up, b, info.head_method).await,
        };
        match r {
            Ok(r) => break (up, r),
            Err(Some(_)) if retry => continue,
            Err(_) => return Err(Fail::Upstream),
        }
    };
    if resp.keep_alive {
        pool.put(up);
    }
    if let Some((_, ticket, mut permit)) = admitted {
        let secs = permit.held().as_secs_f64();
        let cost = ticket.charge(None, secs);
        permit.set_cost(cost);
        ticket.complete(secs, cost);
    }
    client.write_all(&b.out).await.map_err(|_| Fail::Gone)?;
    Ok(info.keep_alive)
}

struct Answer {
    keep_alive: bool,
}

/// Send `b.out` on `up` and read the answer in full into `b.out` (head for the client, then
/// the body). `Err(Some(_))`: failed before any response byte (retryable).
async fn exchange(
    up: &mut TcpStream,
    b: &mut Bufs,
    head_method: bool,
) -> Result<Answer, Option<()>> {
    up.write_all(&b.out).await.map_err(|_| Some(()))?;
    b.up.clear();
    // Skip 1xx interim responses; read the final head.
    let (info, mut head_end) = loop {
        let mut h = h1::headers::<MAX_HEADERS>();
        if !b.up.is_empty() {
            match h1::parse_response(&b.up, &mut h, MAX_HEAD, head_method) {
                Ok(Some((resp, info))) if (100..200).contains(&info.status) => {
                    if info.status == 101 {
                        return Err(None);
                    }
                    let _ = resp;
                    b.up.drain(..info.head_len);
                    continue;
                }
                Ok(Some((resp, info))) => {
                    b.out.clear();
                    b.out.extend_from_slice(b"HTTP/1.1 ");
                    b.out.extend_from_slice(info.status.to_string().as_bytes());
                    b.out.push(b' ');
                    b.out
                        .extend_from_slice(resp.reason.unwrap_or("").as_bytes());
                    b.out.extend_from_slice(b"\r\n");
                    write_headers(&mut b.out, resp.headers);
                    // A HEAD answer keeps the length the GET would have had.
                    if head_method {
                        for h in resp.headers.iter() {
                            if h.name.eq_ignore_ascii_case("content-length") {
                                b.out.extend_from_slice(b"content-length: ");
                                b.out.extend_from_slice(h.value);
                                b.out.extend_from_slice(b"\r\n");
                                break;
                            }
                        }
                    }
                    break (info, info.head_len);
                }
                Ok(None) => {}
                Err(_) => return Err(None),
            }
        }
        let fresh = b.up.is_empty();
        match read_more(up, &mut b.up).await {
            Ok(0) | Err(_) => return Err(fresh.then_some(())),
            Ok(_) => {}
        }
    };
    // The body, in full.
    b.body.clear();
    match info.body {
        BodyLen::Length(n) => {
            if n > MAX_RESPONSE {
                return Err(None);
            }
            while ((b.up.len() - head_end) as u64) < n {
                if read_more(up, &mut b.up).await.map_err(|_| None)? == 0 {
                    return Err(None);
                }
            }
            b.body
                .extend_from_slice(&b.up[head_end..head_end + n as usize]);
        }
        BodyLen::Chunked => {
            let mut d = Chunked::new(MAX_RESPONSE);
            loop {
                let used = d
                    .feed(&b.up[head_end..], Some(&mut b.body))
                    .map_err(|_| None)?;
                head_end += used;
                if d.done() {
                    break;
                }
                b.up.truncate(head_end);
                if read_more(up, &mut b.up).await.map_err(|_| None)? == 0 {
                    return Err(None);
                }
            }
        }
        BodyLen::ToEof => {
            b.body.extend_from_slice(&b.up[head_end..]);
            loop {
                if b.body.len() as u64 > MAX_RESPONSE {
                    return Err(None);
                }
                if read_more(up, &mut b.body).await.map_err(|_| None)? == 0 {
                    break;
                }
            }
        }
    }
    // No Content-Length after HEAD, 204 or 304 (RFC 9110 §8.6).
    if !head_method && info.status != 204 && info.status != 304 {
        h1::write_content_length(&mut b.out, b.body.len() as u64);
    }
    b.out.extend_from_slice(b"\r\n");
    b.out.extend_from_slice(&b.body);
    Ok(Answer {
        keep_alive: info.keep_alive,
    })
}

async fn accept_loop(listener: TcpListener, upstream: SocketAddr, logic: Option<Arc<Logic>>) {
    let pool = Arc::new(Pool {
        addr: upstream,
        idle: Mutex::new(Vec::new()),
        logic,
    });
    loop {
        let Ok((stream, peer)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let xff = peer.ip().to_string().into_bytes();
        tokio::spawn(serve(stream, pool.clone(), xff));
    }
}

fn main() {
    let (listen, upstream, modes) = fairlane_proxy_testkit::forward_args(
        "raw_forward <listen addr> <upstream addr> [percore] [gate]",
    );
    // One gate for the process, shared by every runtime (as the proxy's is).
    let logic = modes
        .iter()
        .any(|m| m == "gate")
        .then(|| Arc::new(Logic::new()));
    if modes.iter().any(|m| m == "percore") {
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let logic = logic.clone();
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .expect("runtime");
                    rt.block_on(async move {
                        let s = tokio::net::TcpSocket::new_v4().expect("socket");
                        s.set_reuseport(true).expect("SO_REUSEPORT");
                        s.set_reuseaddr(true).expect("SO_REUSEADDR");
                        s.bind(listen).expect("bind");
                        accept_loop(s.listen(1024).expect("listen"), upstream, logic).await
                    })
                })
            })
            .collect();
        for t in threads {
            let _ = t.join();
        }
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async move {
        let listener = TcpListener::bind(listen).await.expect("bind");
        accept_loop(listener, upstream, logic).await
    });
}
