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
    /// The reports of load generators run side by side (threads of one run) as one: counts
    /// and latencies pooled, the longest elapsed time, the connections summed.
    pub fn combine(parts: impl IntoIterator<Item = Report>) -> Report {
        let mut all = Report::default();
        for p in parts {
            all.elapsed = all.elapsed.max(p.elapsed);
            all.connections += p.connections;
            all.merge(p);
        }
        all.ok_latencies.sort_by(|a, b| a.total_cmp(b));
        all
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
/// are opened first (all held at once), then every client sends back to back (at least one
/// request each, so a short run on a busy machine still exercises every connection). Each client is
/// one task that drives its connection itself (no task between the request and the socket),
/// as wrk and h2load do: on a current-thread runtime the load generator then wakes no thread
/// of its own per request.
pub async fn closed(target: &Target, connections: usize, duration: Duration) -> Report {
    let mut clients = Vec::with_capacity(connections);
    let mut report = Report::default();
    for _ in 0..connections {
        let Ok(stream) = tokio::net::TcpStream::connect(target.addr).await else {
            report.errors += 1;
            continue;
        };
        let _ = stream.set_nodelay(true);
        match hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(TokioIo::new(stream)).await {
            Ok(client) => clients.push(client),
            Err(_) => report.errors += 1,
        }
    }
    report.connections = clients.len();
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = tokio::task::JoinSet::new();
    for (send, conn) in clients {
        let t = target.clone();
        tasks.spawn(async move {
            // The connection is dropped as soon as it ends, which ends the sender's waits.
            let mut conn = std::pin::pin!(async move {
                let _ = conn.await;
            });
            let mut work = std::pin::pin!(client_loop(send, &t, end));
            let mut conn_done = false;
            loop {
                tokio::select! {
                    r = &mut work => break r,
                    // The connection ended (closed or failed): the loop's request in flight
                    // then fails, and the loop counts it.
                    _ = &mut conn, if !conn_done => conn_done = true,
                }
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        if let Ok(r) = r {
            report.merge(r);
        }
    }
    report.finish(start)
}

/// One closed-loop client: the next request as soon as the previous answer is read, until
/// `end`. Every client sends at least one request, however late it starts.
async fn client_loop(
    mut send: hyper::client::conn::http1::SendRequest<Empty<Bytes>>,
    t: &Target,
    end: Instant,
) -> Report {
    let mut r = Report::default();
    loop {
        if r.sent > 0 && Instant::now() >= end {
            break;
        }
        if send.ready().await.is_err() {
            break;
        }
        let sent = Instant::now();
        r.sent += 1;
        match send.send_request(origin_request(t)).await {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::UpstreamServer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn target(addr: SocketAddr) -> Target {
        Target {
            addr,
            path: "/".into(),
            key: Some("k".into()),
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn closed_loop_answers_every_request_it_sends_on_one_thread() {
        let up = UpstreamServer::start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let r = closed(&target(up.addr()), 4, Duration::from_millis(300)).await;
        assert_eq!(r.connections, 4);
        // At least one request a client, whatever the machine's load.
        assert!(r.sent >= 4, "{}", r.summary());
        assert_eq!(r.errors, 0, "{}", r.summary());
        assert_eq!(r.answered(), r.sent, "{}", r.summary());
        assert_eq!(r.ok(), r.sent, "{}", r.summary());
        assert_eq!(r.ok_latencies.len() as u64, r.sent);
        assert!(r.ok_latencies.windows(2).all(|w| w[0] <= w[1]));
        up.stop();
    }

    /// A server that answers one request per connection and then closes it: each client
    /// stops at its connection's end (no hang, no retry loop), and a request sent on the
    /// closing connection counts as an error, never as an answer.
    #[tokio::test(flavor = "current_thread")]
    async fn closed_loop_stops_each_client_when_its_connection_closes() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await;
                });
            }
        });
        // An hour's run: only the closed connections can end it. The outer bound is a guard
        // against a hang, not a measurement.
        let r = tokio::time::timeout(
            Duration::from_secs(120),
            closed(&target(addr), 3, Duration::from_secs(3600)),
        )
        .await
        .expect("every client stops when its connection closes");
        assert_eq!(r.connections, 3);
        assert_eq!(r.ok(), 3, "{}", r.summary());
        assert!(r.errors <= 3, "{}", r.summary());
        assert_eq!(r.sent, r.ok() + r.errors, "{}", r.summary());
    }

    #[test]
    fn combined_reports_pool_counts_and_latencies_and_keep_the_longest_run() {
        let part = |lat: &[f64], ms: u64, conns: usize| Report {
            sent: lat.len() as u64 + 1,
            status: [(200, lat.len() as u64)].into_iter().collect(),
            errors: 1,
            ok_latencies: lat.to_vec(),
            elapsed: Duration::from_millis(ms),
            connections: conns,
        };
        let r = Report::combine([part(&[0.1, 0.3], 900, 2), part(&[0.2], 1000, 1)]);
        assert_eq!((r.sent, r.errors, r.ok(), r.connections), (5, 2, 3, 3));
        assert_eq!(r.ok_latencies, vec![0.1, 0.2, 0.3]);
        assert_eq!(r.elapsed, Duration::from_millis(1000));
        assert_eq!(r.quantile(0.5), Some(0.2));
    }
}
