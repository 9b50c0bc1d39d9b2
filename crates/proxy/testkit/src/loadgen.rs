//! A small HTTP/1.1 load generator (tests and benchmarks; `cargo run --release -p
//! fairlane-proxy --example loadgen`).
//!
//! * [`closed`]: `connections` clients, each on its own keep-alive connection, sending the
//!   next request as soon as the previous answer arrives (throughput, held connections).
//! * [`open`]: requests at a fixed rate regardless of answers (latency at a given load,
//!   overload), over a pool of keep-alive connections that grows as needed.
//!
//! Every request ends in a status code or a connection error; [`Report`] counts both.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

/// What to send.
#[derive(Clone, Debug)]
pub struct Target {
    /// Server address.
    pub addr: SocketAddr,
    /// Path and query (`/work?delay_ms=5`).
    pub path: String,
    /// API key sent as `Authorization: Bearer <key>`.
    pub key: Option<String>,
}

/// The outcome of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Requests sent.
    pub sent: u64,
    /// Answers by status code.
    pub status: BTreeMap<u16, u64>,
    /// Requests that got no HTTP answer (connection refused, reset, …).
    pub errors: u64,
    /// Latencies of 2xx answers, seconds, sorted.
    pub ok_latencies: Vec<f64>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Connections that were open at once (closed loop).
    pub connections: usize,
}

impl Report {
    /// Answers of any status.
    pub fn answered(&self) -> u64 {
        self.status.values().sum()
    }
    /// 2xx answers.
    pub fn ok(&self) -> u64 {
        self.status
            .iter()
            .filter(|(s, _)| (200..300).contains(*s))
            .map(|(_, c)| c)
            .sum()
    }
    /// Answers with this status.
    pub fn count(&self, status: u16) -> u64 {
        self.status.get(&status).copied().unwrap_or(0)
    }
    /// A quantile of the 2xx latencies (seconds).
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let n = self.ok_latencies.len();
        if n == 0 {
            return None;
        }
        let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        Some(self.ok_latencies[i])
    }
    /// 2xx answers per second.
    pub fn throughput(&self) -> f64 {
        self.ok() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn merge(&mut self, o: Report) {
        self.sent += o.sent;
        for (s, c) in o.status {
            *self.status.entry(s).or_default() += c;
        }
        self.errors += o.errors;
        self.ok_latencies.extend(o.ok_latencies);
    }
    fn finish(mut self, start: Instant) -> Report {
        self.elapsed = start.elapsed();
        self.ok_latencies.sort_by(|a, b| a.total_cmp(b));
        self
    }
    /// One line: sent, answered, status counts, throughput, p50/p99.
    pub fn summary(&self) -> String {
        let ms = |q| {
            self.quantile(q)
                .map_or("-".into(), |s| format!("{:.3} ms", s * 1e3))
        };
        format!(
            "sent {} answered {} errors {} status {:?} ok/s {:.0} p50 {} p99 {}",
            self.sent,
            self.answered(),
            self.errors,
            self.status,
            self.throughput(),
            ms(0.5),
            ms(0.99)
        )
    }
}

fn request(t: &Target) -> Request<Empty<Bytes>> {
    request_to(t, format!("http://{}{}", t.addr, t.path))
}

/// Origin-form target and a Host header, for a raw connection (what a browser sends).
fn origin_request(t: &Target) -> Request<Empty<Bytes>> {
    let mut r = request_to(t, t.path.clone());
    if let Ok(h) = http::HeaderValue::from_str(&t.addr.to_string()) {
        r.headers_mut().insert(http::header::HOST, h);
    }
    r
}

fn request_to(t: &Target, uri: String) -> Request<Empty<Bytes>> {
    let mut b = Request::get(uri);
    if let Some(k) = &t.key {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    b.body(Empty::new()).expect("valid request")
}

/// Closed loop: `connections` clients on their own connections for `duration`. Connections
/// are opened first (all held at once), then every client sends back to back.
pub async fn closed(target: &Target, connections: usize, duration: Duration) -> Report {
    let mut senders = Vec::with_capacity(connections);
    let mut report = Report::default();
    for _ in 0..connections {
        let Ok(stream) = tokio::net::TcpStream::connect(target.addr).await else {
            report.errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        match hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await {
            Ok((send, conn)) => {
                tokio::spawn(conn);
                senders.push(send);
            }
            Err(_) => report.errors += 1,
        }
    }
    report.connections = senders.len();
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for mut send in senders {
        let t = target.clone();
        tasks.spawn(async move {
            let mut r = Report::default();
            while Instant::now() < end {
                if send.ready().await.is_err() {
                    break;
                }
                let sent = Instant::now();
                r.sent += 1;
                match send.send_request(origin_request(&t)).await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let ok = resp.into_body().collect().await.is_ok();
                        *r.status.entry(status).or_default() += 1;
                        if ok && (200..300).contains(&status) {
                            r.ok_latencies.push(sent.elapsed().as_secs_f64());
                        }
                    }
                    Err(_) => {
                        r.errors += 1;
                        break;
                    }
                }
            }
            r
        });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(r) = r {
            report.merge(r);
        }
    }
    report.finish(start)
}

/// Open loop: `rate` requests per second for `duration`, each on a pooled keep-alive
/// connection (the pool grows while answers are outstanding). Waits for every answer.
pub async fn open(target: &Target, rate: f64, duration: Duration) -> Report {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client: Client<HttpConnector, Empty<Bytes>> = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(4096)
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(Duration::from_secs(5))
        .build(http);
    let shared = Arc::new(Mutex::new(Report::default()));
    let start = Instant::now();
    let interval = Duration::from_secs_f64(1.0 / rate.max(1e-3));
    let mut tasks = tokio::task::JoinSet::new();
    let mut n: u32 = 0;
    loop {
        let at = start + interval * n;
        if at >= start + duration {
            break;
        }
        tokio::time::sleep_until(at.into()).await;
        n += 1;
        let (client, t, shared) = (client.clone(), target.clone(), shared.clone());
        tasks.spawn(async move {
            let sent = Instant::now();
            let outcome = match client.request(request(&t)).await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let ok = resp.into_body().collect().await.is_ok();
                    Some((status, ok))
                }
                Err(_) => None,
            };
            let mut r = shared.lock().unwrap_or_else(|e| e.into_inner());
            r.sent += 1;
            match outcome {
                Some((status, ok)) => {
                    *r.status.entry(status).or_default() += 1;
                    if ok && (200..300).contains(&status) {
                        r.ok_latencies.push(sent.elapsed().as_secs_f64());
                    }
                }
                None => r.errors += 1,
            }
        });
        // Reap finished tasks so the set stays small.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let r = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    r.finish(start)
}
