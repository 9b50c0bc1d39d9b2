//! Issue 16, the connection half: slow readers, slow request bodies and idle floods must not
//! lock a well-behaved tenant out. Each test reproduces one attack from the issue and checks
//! that the light tenant still gets 200s, within a generous margin of its unloaded latency
//! (the margin only has to separate "served at once" from "waited for a held slot until a
//! timeout", so a loaded CI machine does not make it flaky), that `/metrics` answers and that
//! the process stays up. The 60 s soak (`#[ignore]`) runs all the attacks at once.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

const TENANTS: &str = concat!(
    "[[tenant]]\nname = \"light\"\nkeys = [\"kl\"]\n",
    "[[tenant]]\nname = \"bad\"\nkeys = [\"kx\"]\n",
    "[[tenant]]\nname = \"heavy\"\nkeys = [\"kh\"]\nmax_queued = 200\n"
);

/// A response body of `len` bytes, produced lazily in 64 KiB chunks (an "endless" download
/// costs the upstream no memory).
fn endless(len: u64) -> BoxBody<Bytes, Infallible> {
    let size = CHUNK.len() as u64;
    let chunks = (0..len.div_ceil(size)).map(move |i| {
        let n = (len - i * size).min(size) as usize;
        Ok(Frame::data(Bytes::from_static(&CHUNK[..n])))
    });
    StreamBody::new(futures_util::stream::iter(chunks)).boxed()
}

static CHUNK: [u8; 65536] = [b'x'; 65536];

/// An upstream: `/big?bytes=N` answers N bytes (chunked, lazily); anything else sleeps
/// `delay_ms` (default 20) and answers a short text.
async fn start_big_upstream() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    serve_http1(|| hyper::service::service_fn(big)).await
}

async fn big(
    req: http::Request<hyper::body::Incoming>,
) -> Result<http::Response<BoxBody<Bytes, Infallible>>, Infallible> {
    let q = req.uri().query().unwrap_or("").to_string();
    let num = |name: &str| {
        q.split('&').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == name).then(|| v.parse::<u64>().ok()).flatten()
        })
    };
    let body = if req.uri().path().starts_with("/big") {
        endless(num("bytes").unwrap_or(1 << 30))
    } else {
        let ms = num("delay_ms").unwrap_or(20);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Full::new(Bytes::from_static(b"ok\n")).boxed()
    };
    Ok(http::Response::new(body))
}

/// A new connection to `addr` while the soak runs (retrying every 100 ms); `None` once it
/// stops.
async fn reconnect(
    addr: SocketAddr,
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Option<TcpStream> {
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        match TcpStream::connect(addr).await {
            Ok(s) => return Some(s),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    None
}

/// The big upstream, a proxy in front of it with D = 4 and these `[limits]`, and the light
/// tenant's unloaded worst latency.
async fn with_depth_4(limits: &str) -> (tokio::task::JoinHandle<()>, Running, Duration) {
    let (up, up_task) = start_big_upstream().await;
    let text = format!("[scheduler]\ndepth = 4\n[limits]\n{limits}\n{TENANTS}");
    let p = start_proxy(config(up, &text)).await;
    let unloaded = max(&light_latencies(p.addr, "/", 10).await);
    (up_task, p, unloaded)
}

/// `n` sequential GETs of the light tenant; their latencies (panics on a non-200).
async fn light_latencies(addr: SocketAddr, path: &str, n: usize) -> Vec<Duration> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let (code, _, body) = get(addr, path, Some("kl")).await;
        assert_eq!(code, 200, "the light tenant is served: {body}");
        out.push(t.elapsed());
    }
    out
}

fn max(v: &[Duration]) -> Duration {
    v.iter().copied().max().unwrap_or_default()
}

/// The margin over the unloaded worst case the light tenant may see under attack.
fn margin(unloaded: Duration) -> Duration {
    unloaded * 3 + Duration::from_millis(1500)
}

/// A client socket with a tiny receive buffer (so a response that is not read backs up into
/// the proxy at once rather than into kernel buffers).
async fn small_window(addr: SocketAddr) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    s.connect(addr).await.unwrap()
}

async fn metrics_answer(admin: SocketAddr) -> String {
    let (code, _, body) = get(admin, "/metrics", None).await;
    assert_eq!(code, 200);
    body
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in /metrics"))
}

/// Defect 1: D+2 connections ask for a large response and never read it. Responses that fit
/// the buffer free their slot at once; larger ones stream, and the tenant may hold only its
/// share of D that way (the rest get 503); the send timeout finally frees those too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_do_not_hold_every_slot() {
    let (_up_task, p, unloaded) = with_depth_4("send_timeout_ms = 3000").await;
    let mut readers = Vec::new();
    // D+2 responses that fit the 1 MiB buffer, and D+2 that are far larger (1 GiB).
    for bytes in [512 << 10, 1u64 << 30] {
        for _ in 0..6 {
            let mut s = small_window(p.addr).await;
            let req = format!(
                "GET /big?bytes={bytes} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer kx\r\n\r\n"
            );
            s.write_all(req.as_bytes()).await.unwrap();
            readers.push(s); // never read
        }
    }
    let admin = p.admin;
    // The large ones are answered (200 streaming, or 503 over the tenant's share): 6
    // streams past the buffer, ⌈D/2⌉ = 2 allowed.
    eventually(STEP, "all slow-reader requests answered", || async move {
        let s = status(admin).await;
        let bad = tenant(&s, "bad");
        // A 512 KiB response may still be in the buffer when the last refusal is counted
        // (seen under load, with the soak running beside): wait until those are done too.
        bad["received"] == 12
            && s["queued"] == 0
            && bad["rejected"]["streaming_cap"] == 4
            && bad["completed"] == 6
    })
    .await;
    let s = status(p.admin).await;
    assert_eq!(s["in_flight"], 2, "only the tenant's share is held: {s}");
    let m = metrics_answer(p.admin).await;
    assert_eq!(metric(&m, "fairlane_proxy_streaming_refused_total"), 4.0);
    // The light tenant is served promptly while the slow readers sit there.
    let loaded = max(&light_latencies(p.addr, "/", 20).await);
    assert!(
        loaded <= margin(unloaded),
        "light tenant: worst {loaded:?} under attack, {unloaded:?} alone"
    );
    // The send timeout frees the two streaming slots although nobody read.
    eventually(STEP, "slots freed by the send timeout", || async move {
        status(admin).await["in_flight"] == 0
    })
    .await;
    drop(readers);
    assert_eq!(get(p.addr, "/", Some("kl")).await.0, 200);
}

/// Defect 2: D+2 POSTs trickle their body at 1 byte/s. Bodies are read before a request
/// queues, so they hold no slot; the body timeout answers them 408.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_request_bodies_hold_no_slot() {
    let (_up_task, p, unloaded) = with_depth_4("body_timeout_ms = 4000").await;
    let trickles: Vec<_> = (0..6)
        .map(|_| {
            let addr = p.addr;
            tokio::spawn(async move {
                let mut s = TcpStream::connect(addr).await.unwrap();
                s.write_all(
                    b"POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer kx\r\nContent-Length: 100\r\n\r\n",
                )
                .await
                .unwrap();
                // One byte a second until the proxy answers (it must within ~4 s).
                let mut answer = Vec::new();
                let mut buf = [0u8; 1024];
                let end = Instant::now() + STEP;
                while Instant::now() < end {
                    if s.write_all(b"x").await.is_err() {
                        break;
                    }
                    match tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf)).await {
                        Ok(Ok(0)) | Ok(Err(_)) => break,
                        Ok(Ok(n)) => {
                            answer.extend_from_slice(&buf[..n]);
                            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                                break;
                            }
                        }
                        Err(_) => {}
                    }
                }
                String::from_utf8_lossy(&answer).into_owned()
            })
        })
        .collect();
    let admin = p.admin;
    eventually(STEP, "six trickling bodies received", || async move {
        tenant(&status(admin).await, "bad")["received"] == 6
    })
    .await;
    // Meanwhile: no slot held, and the light tenant served promptly.
    let s = status(p.admin).await;
    assert_eq!(s["in_flight"], 0, "{s}");
    assert_eq!(s["queued"], 0, "{s}");
    let loaded = max(&light_latencies(p.addr, "/", 20).await);
    assert!(
        loaded <= margin(unloaded),
        "light tenant: worst {loaded:?} under attack, {unloaded:?} alone"
    );
    for t in trickles {
        let answer = t.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer:?}");
    }
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "bad")["rejected"]["body_timeout"], 6, "{s}");
    metrics_answer(p.admin).await;
}

/// Defect 3: ~1,000 connections that send nothing, against a proxy whose open-files limit
/// is 512. The client cap stays below the limit (the admin listener and the upstream keep
/// their descriptors), new connections push out the ones idle the longest, the idle
/// timeout closes the rest, and the accept error is never logged in a flood.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_flood_locks_nobody_out() {
    fairlane_proxy::server::raise_fd_limit().expect("getrlimit(RLIMIT_NOFILE)");
    let prlimit = need("prlimit");
    let (up, _up_task) = start_big_upstream().await;
    let cfg = temp_file(
        "idle-flood.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{up}\"\n\
             [scheduler]\ndepth = 4\n[limits]\nidle_timeout_ms = 3000\nheader_timeout_ms = 3000\n{TENANTS}"
        ),
    );
    let mut cmd = std::process::Command::new(prlimit);
    cmd.arg("--nofile=512:512")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_fairlane-proxy"))
        .arg("--config")
        .arg(&cfg);
    let proc = ProxyProcess::start_command(cmd);
    let unloaded = max(&light_latencies(proc.addr, "/", 10).await);
    let max_conns = metric(
        &metrics_answer(proc.admin).await,
        "fairlane_proxy_connections_max",
    );
    assert!(
        (1.0..512.0).contains(&max_conns),
        "the client cap stays below the open-files limit: {max_conns}"
    );
    let mut flood = Vec::new();
    for _ in 0..1000 {
        flood.push(TcpStream::connect(proc.addr).await.unwrap());
    }
    // Served at once, /metrics answers, the process is up.
    let loaded = max(&light_latencies(proc.addr, "/", 20).await);
    assert!(
        loaded <= margin(unloaded),
        "light tenant: worst {loaded:?} under attack, {unloaded:?} alone"
    );
    let m = metrics_answer(proc.admin).await;
    assert!(
        metric(&m, "fairlane_proxy_connections_evicted_total") >= 1000.0 - max_conns,
        "{m}"
    );
    // The idle timeout closes every flood connection the cap did not already close.
    let end = Instant::now() + STEP;
    for s in &mut flood {
        let mut b = [0u8; 1];
        let left = end.saturating_duration_since(Instant::now());
        let r = tokio::time::timeout(left, s.read(&mut b)).await;
        assert!(
            matches!(r, Ok(Ok(0)) | Ok(Err(_))),
            "an idle connection still open after the idle timeout"
        );
    }
    let admin = proc.admin;
    eventually(STEP, "connections gauge back to ~0", || async move {
        let m = metrics_answer(admin).await;
        metric(&m, "fairlane_proxy_connections") <= 1.0
    })
    .await;
    let log = proc.log.lock().unwrap().clone();
    let accept_lines = log.iter().filter(|l| l.contains("accept failed")).count();
    assert!(
        accept_lines <= 5,
        "accept errors logged in a flood: {log:?}"
    );
    assert_eq!(get(proc.addr, "/", Some("kl")).await.0, 200);
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

/// The 60 s soak, every attack at once (see docs/proxy.md "Hostile clients"):
/// `cargo test --release -p fairlane-proxy --test slow_clients -- --ignored --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "60 s soak; run with --ignored"]
async fn soak_all_attacks_at_once() {
    let soak = Duration::from_secs(
        std::env::var("SOAK_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    fairlane_proxy::server::raise_fd_limit().expect("getrlimit(RLIMIT_NOFILE)");
    let (up, _up_task) = start_big_upstream().await;
    let depth = 8;
    let cfg = temp_file(
        "soak.toml",
        &format!(
            "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{up}\"\n\
             [scheduler]\ndepth = {depth}\n{TENANTS}"
        ),
    );
    let proc = ProxyProcess::start(&cfg);
    let (addr, admin) = (proc.addr, proc.admin);
    // The light tenant: two clients, one request at a time each, 500 ms of upstream work.
    const LIGHT: &str = "/light?delay_ms=500";
    let light = |n: usize| async move {
        let (a, b) = tokio::join!(
            light_latencies(addr, LIGHT, n),
            light_latencies(addr, LIGHT, n)
        );
        [a, b].concat()
    };
    let mut alone = light(20).await;
    let rss_alone = proc.rss_kb();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let running = move |s: &std::sync::Arc<std::sync::atomic::AtomicBool>| {
        !s.load(std::sync::atomic::Ordering::Relaxed)
    };
    let mut tasks = tokio::task::JoinSet::new();
    // 10× overload from one tenant: D slots of 100 ms = 80 req/s; offered 800 req/s.
    let heavy_codes = std::sync::Arc::new(std::sync::Mutex::new(std::collections::BTreeMap::<
        u16,
        u64,
    >::new()));
    {
        let (stop, codes) = (stop.clone(), heavy_codes.clone());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_micros(1250));
            let mut inflight = tokio::task::JoinSet::new();
            // One pooled client: keep-alive connections, no port churn.
            let c = client();
            while running(&stop) {
                tick.tick().await;
                let codes = codes.clone();
                let req = http::Request::get(format!("http://{addr}/heavy?delay_ms=100"))
                    .header("authorization", "Bearer kh")
                    .body(http_body_util::Empty::new())
                    .unwrap();
                let fut = c.request(req);
                inflight.spawn(async move {
                    let code = match tokio::time::timeout(GET_LIMIT, fut).await {
                        Ok(Ok(r)) => {
                            let code = r.status().as_u16();
                            let _ = http_body_util::BodyExt::collect(r.into_body()).await;
                            code
                        }
                        _ => 0, // no answer (counted as 0)
                    };
                    *codes.lock().unwrap().entry(code).or_default() += 1;
                });
                while inflight.try_join_next().is_some() {}
            }
            while inflight.join_next().await.is_some() {}
        });
    }
    // 1,000 slow-loris connections: a header line every 5 s, reconnecting when closed.
    for i in 0..1000u64 {
        let stop = stop.clone();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(i)).await;
            while let Some(mut s) = reconnect(addr, &stop).await {
                if s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").await.is_err() {
                    continue;
                }
                while running(&stop) {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    if s.write_all(b"X-Slow: 1\r\n").await.is_err() {
                        break;
                    }
                }
            }
        });
    }
    // 1,000 idle connections, reconnecting when closed.
    for i in 0..1000u64 {
        let stop = stop.clone();
        tasks.spawn(async move {
            tokio::time::sleep(Duration::from_millis(i)).await;
            while let Some(mut s) = reconnect(addr, &stop).await {
                let mut b = [0u8; 1];
                while running(&stop) {
                    match tokio::time::timeout(Duration::from_secs(1), s.read(&mut b)).await {
                        Ok(_) => break, // closed by the proxy: reconnect
                        Err(_) => continue,
                    }
                }
            }
        });
    }
    // D+2 clients that never read a large response, reconnecting when cut off.
    for _ in 0..depth + 2 {
        let stop = stop.clone();
        tasks.spawn(async move {
            while running(&stop) {
                let mut s = small_window(addr).await;
                let _ = s
                    .write_all(b"GET /big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer kx\r\n\r\n")
                    .await;
                // Never read; hold the connection for the whole soak.
                while running(&stop) {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                drop(s);
            }
        });
    }
    // /metrics throughout, and the RSS.
    let (metrics_ok, metrics_failed, rss_max) = {
        let watch = stop.clone();
        let pid = proc.child.id();
        let h = tokio::spawn(async move {
            let (mut ok, mut failed, mut rss) = (0u64, 0u64, 0u64);
            while running(&watch) {
                let r = tokio::time::timeout(Duration::from_secs(5), async {
                    let resp = client()
                        .request(
                            http::Request::get(format!("http://{admin}/metrics"))
                                .body(http_body_util::Empty::new())
                                .unwrap(),
                        )
                        .await
                        .ok()?;
                    Some(resp.status().as_u16())
                })
                .await;
                if matches!(r, Ok(Some(200))) {
                    ok += 1;
                } else {
                    failed += 1;
                }
                let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
                let kb = s
                    .lines()
                    .find(|l| l.starts_with("VmRSS:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                rss = rss.max(kb);
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            (ok, failed, rss)
        });
        // Let the attacks build up, then measure the light tenant for the rest of the soak.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let end = Instant::now() + soak.saturating_sub(Duration::from_secs(5));
        let mut loaded = Vec::new();
        while Instant::now() < end {
            loaded.extend(light(2).await);
        }
        let st = status(admin).await;
        let m = metrics_answer(admin).await;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let r = h.await.unwrap();
        let p99_alone = percentile(&mut alone, 0.99);
        let p99_loaded = percentile(&mut loaded, 0.99);
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "soak {soak:?}: light p99 alone {p99_alone:?}, under attack {p99_loaded:?} ({:.2}×), \
             {} light requests all 200; heavy answers {:?}; connections {} \
             evicted {} refused {} streaming_refused {}; /metrics ok {} failed {}; \
             RSS alone {rss_alone} kB, max {} kB; loadavg {}",
            p99_loaded.as_secs_f64() / p99_alone.as_secs_f64(),
            loaded.len(),
            heavy_codes.lock().unwrap(),
            st["connections"],
            metric(&m, "fairlane_proxy_connections_evicted_total"),
            metric(&m, "fairlane_proxy_connections_refused_total"),
            metric(&m, "fairlane_proxy_streaming_refused_total"),
            r.0,
            r.1,
            r.2,
            load.trim()
        );
        assert!(
            p99_loaded <= p99_alone * 2,
            "light p99 {p99_loaded:?} vs alone {p99_alone:?}"
        );
        r
    };
    assert_eq!(metrics_failed, 0, "/metrics failed to answer");
    assert!(metrics_ok >= soak.as_secs() / 2);
    assert!(rss_max < 256 * 1024, "RSS {rss_max} kB");
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

#[test]
fn connection_limits_are_validated_naming_the_field() {
    for (bad, field) in [
        ("max_streaming_share = 0.0", "limits.max_streaming_share"),
        ("max_streaming_share = 1.5", "limits.max_streaming_share"),
        ("body_timeout_ms = 0", "limits.body_timeout_ms"),
        ("header_timeout_ms = 0", "limits.header_timeout_ms"),
        ("idle_timeout_ms = 0", "limits.idle_timeout_ms"),
        ("send_timeout_ms = 0", "limits.send_timeout_ms"),
        ("admin_connections = 0", "limits.admin_connections"),
    ] {
        let text = format!("[upstream]\naddr = \"127.0.0.1:1\"\n[limits]\n{bad}\n");
        let e = fairlane_proxy::ProxyConfig::from_toml_str(&text).unwrap_err();
        assert_eq!(e.field, field, "{bad}: {e}");
    }
    let c =
        fairlane_proxy::ProxyConfig::from_toml_str("[upstream]\naddr = \"127.0.0.1:1\"\n").unwrap();
    assert_eq!(c.limits.max_body_bytes, 1 << 20);
    assert_eq!(c.limits.response_buffer_bytes, 1 << 20);
    assert_eq!(c.limits.max_connections, 0);
}

/// A client that hangs up halfway through its body never reaches the gate, and its request
/// is still accounted for (answered 400, `bad_request`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_up_mid_body_is_accounted() {
    let (up, _up_task) = start_big_upstream().await;
    let p = start_proxy(config(up, TENANTS)).await;
    for _ in 0..3 {
        let mut s = TcpStream::connect(p.addr).await.unwrap();
        s.write_all(
            b"POST /up HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer kx\r\nContent-Length: 100\r\n\r\nhalf",
        )
        .await
        .unwrap();
        drop(s);
    }
    let admin = p.admin;
    eventually(STEP, "three hang-ups accounted", || async move {
        let s = status(admin).await;
        let bad = tenant(&s, "bad");
        bad["received"] == 3 && bad["rejected"]["bad_request"] == 3
    })
    .await;
    let s = status(p.admin).await;
    assert_eq!(s["in_flight"], 0);
    assert_eq!(s["queued"], 0);
}
