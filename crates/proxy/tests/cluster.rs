//! `[cluster]`: three proxy processes in front of one upstream of fixed concurrency share it
//! by the global weights, coordinated through a real `redis-server` (started on a free
//! loopback port and stopped by the test). The skew: tenant A reaches only instance 1, B all
//! three, C (weight 2) instances 2 and 3. Without `[cluster]` the same load is skewed (the
//! test can fail); with it every tenant's share of the completed upstream work is within
//! 10 % of its weight share. The fault test kills Redis mid-run, restarts it, then kills one
//! proxy instance.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The global depth D, which is also the upstream's capacity.
const D: usize = 24;
/// Upstream service time per request.
const SERVICE: Duration = Duration::from_millis(60);
/// Closed-loop clients per (tenant, instance) pair: more than any instance's seats.
const CLIENTS: usize = 24;
/// Tenants: name, key, weight.
const TENANTS: [(&str, &str, f64); 3] = [("A", "ka", 1.0), ("B", "kb", 1.0), ("C", "kc", 2.0)];
/// Which instances (0-based) each tenant reaches.
const ROUTES: [(usize, &[usize]); 3] = [(0, &[0]), (1, &[0, 1, 2]), (2, &[1, 2])];
/// The sync interval and lease the cluster runs with.
const SYNC_MS: u64 = 100;
const LEASE_MS: u64 = 500;

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!(
            "fairlane-cluster-{tag}-{}-{:?}",
            std::process::id(),
            Instant::now()
        ));
        let p = PathBuf::from(p.to_string_lossy().replace([' ', '{', '}', ':', ','], ""));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A `redis-server` this test started (killed on drop).
struct Redis {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Redis {
    fn start(dir: &TempDir) -> Redis {
        let mut r = Redis {
            child: None,
            port: free_port(),
            dir: dir.0.clone(),
        };
        r.restart();
        r
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// (Re)start on the same port, no persistence; returns once it answers PING.
    fn restart(&mut self) {
        let child = Command::new(require("redis-server"))
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let end = Instant::now() + Duration::from_secs(20);
        let client = redis::Client::open(self.url()).unwrap();
        loop {
            if let Ok(mut c) = client.get_connection() {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            assert!(Instant::now() < end, "redis-server did not answer PING");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGSTOP / SIGCONT it: a Redis that accepts but does not answer (slow, hung).
    fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGKILL it (a crash, not a shutdown).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

/// An upstream with a fixed concurrency capacity: at most `D` requests served at once, the
/// rest wait in its own queue. Counts what it has outstanding (received, not yet answered)
/// and completions per tenant (by the `x-fairlane-tenant` header the proxy sets).
struct Capacity {
    addr: SocketAddr,
    outstanding: Arc<AtomicU64>,
    max_outstanding: Arc<AtomicU64>,
    completed: Arc<[AtomicU64; 3]>,
    task: tokio::task::JoinHandle<()>,
}

impl Capacity {
    async fn start() -> Capacity {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sem = Arc::new(tokio::sync::Semaphore::new(D));
        let outstanding = Arc::new(AtomicU64::new(0));
        let max_outstanding = Arc::new(AtomicU64::new(0));
        let completed: Arc<[AtomicU64; 3]> = Arc::new(Default::default());
        let (o, m, c) = (
            outstanding.clone(),
            max_outstanding.clone(),
            completed.clone(),
        );
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                tokio::select! {
                    a = listener.accept() => {
                        let Ok((stream, _)) = a else { continue };
                        let _ = stream.set_nodelay(true);
                        let (sem, o, m, c) = (sem.clone(), o.clone(), m.clone(), c.clone());
                        conns.spawn(async move {
                            let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                                let (sem, o, m, c) = (sem.clone(), o.clone(), m.clone(), c.clone());
                                async move {
                                    let now = o.fetch_add(1, Relaxed) + 1;
                                    m.fetch_max(now, Relaxed);
                                    // Counted down even if the proxy's connection dies and
                                    // hyper drops this future.
                                    let _out = Outstanding(o.clone());
                                    let tenant = req
                                        .headers()
                                        .get("x-fairlane-tenant")
                                        .and_then(|v| v.to_str().ok())
                                        .and_then(|t| TENANTS.iter().position(|x| x.0 == t));
                                    {
                                        let _permit = sem.acquire().await;
                                        tokio::time::sleep(SERVICE).await;
                                    }
                                    if let Some(t) = tenant {
                                        c[t].fetch_add(1, Relaxed);
                                    }
                                    Ok::<_, std::convert::Infallible>(http::Response::new(
                                        Full::new(Bytes::from_static(b"ok\n")),
                                    ))
                                }
                            });
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(stream), service)
                                .await;
                        });
                    }
                    Some(_) = conns.join_next(), if !conns.is_empty() => {}
                }
            }
        });
        Capacity {
            addr,
            outstanding,
            max_outstanding,
            completed,
            task,
        }
    }

    fn counts(&self) -> [u64; 3] {
        std::array::from_fn(|i| self.completed[i].load(Relaxed))
    }

    /// Reset the high-water mark (after start-up, when the instances run on
    /// `scheduler.depth` until their first sync).
    fn reset_max(&self) {
        self.max_outstanding
            .store(self.outstanding.load(Relaxed), Relaxed);
    }
}

struct Outstanding(Arc<AtomicU64>);

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

impl Drop for Capacity {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn config(up: SocketAddr, instance: usize, cluster: Option<&str>) -> String {
    let mut s = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{up}\"\n\
         [scheduler]\nalgorithm = \"sfq\"\ndepth = {}\n[limits]\nqueue_timeout_ms = 30000\n",
        D / 3
    );
    for (name, key, w) in TENANTS {
        s += &format!("[[tenant]]\nname = \"{name}\"\nweight = {w}\nkeys = [\"{key}\"]\n");
    }
    if let Some(url) = cluster {
        s += &format!(
            "[cluster]\nredis = \"{url}\"\ninstance = \"p{instance}\"\ndepth = {D}\n\
             sync_interval_ms = {SYNC_MS}\nlease_ms = {LEASE_MS}\n"
        );
    }
    s
}

/// Answers seen by the clients of one (tenant, instance) pair.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    /// Non-200 answers.
    bad: AtomicU64,
    /// No answer at all (connection refused or reset).
    failed: AtomicU64,
}

/// Closed-loop clients, `CLIENTS` per (tenant, instance) pair, until `stop`.
struct Load {
    stop: Arc<AtomicBool>,
    /// Per pair: (tenant, instance, its tally, its own stop flag).
    pairs: Vec<(usize, usize, Arc<Tally>, Arc<AtomicBool>)>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(proxies: &[SocketAddr]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut pairs = Vec::new();
        let mut tasks = Vec::new();
        for (t, instances) in ROUTES {
            for &i in instances {
                let tally = Arc::new(Tally::default());
                let own = Arc::new(AtomicBool::new(false));
                pairs.push((t, i, tally.clone(), own.clone()));
                for _ in 0..CLIENTS {
                    let (addr, key) = (proxies[i], TENANTS[t].1);
                    let (stop, own, tally) = (stop.clone(), own.clone(), tally.clone());
                    tasks.push(tokio::spawn(async move {
                        let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new())
                            .build(hyper_util::client::legacy::connect::HttpConnector::new());
                        while !stop.load(Relaxed) && !own.load(Relaxed) {
                            let req = http::Request::get(format!("http://{addr}/work"))
                                .header("authorization", format!("Bearer {key}"))
                                .body(Empty::new())
                                .unwrap();
                            let answer = tokio::time::timeout(GET_LIMIT, async {
                                let r = client.request(req).await.ok()?;
                                let code = r.status().as_u16();
                                r.into_body().collect().await.ok()?;
                                Some(code)
                            })
                            .await;
                            match answer {
                                Ok(Some(200)) => tally.ok.fetch_add(1, Relaxed),
                                Ok(Some(_)) => tally.bad.fetch_add(1, Relaxed),
                                _ => {
                                    tally.failed.fetch_add(1, Relaxed);
                                    // A dead instance: do not spin.
                                    tokio::time::sleep(Duration::from_millis(50)).await;
                                    0
                                }
                            };
                        }
                    }));
                }
            }
        }
        Load { stop, pairs, tasks }
    }

    /// Stop the clients of instance `i` (it died: they would only retry refused connects).
    fn stop_instance(&self, i: usize) {
        for (_, j, _, own) in &self.pairs {
            if *j == i {
                own.store(true, Relaxed);
            }
        }
    }

    /// Stop every client and wait for their last answers.
    async fn finish(self) -> Vec<(usize, usize, Arc<Tally>)> {
        self.stop.store(true, Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        self.pairs
            .into_iter()
            .map(|(t, i, tally, _)| (t, i, tally))
            .collect()
    }
}

/// Shares of the completions between two snapshots, and each tenant's relative error
/// against its weight share.
fn shares(before: [u64; 3], after: [u64; 3]) -> ([f64; 3], [f64; 3], u64) {
    let d: [u64; 3] = std::array::from_fn(|i| after[i] - before[i]);
    let total: u64 = d.iter().sum();
    let wsum: f64 = TENANTS.iter().map(|t| t.2).sum();
    let share: [f64; 3] = std::array::from_fn(|i| d[i] as f64 / total.max(1) as f64);
    let err: [f64; 3] = std::array::from_fn(|i| {
        let want = TENANTS[i].2 / wsum;
        (share[i] - want).abs() / want
    });
    (share, err, total)
}

async fn measure(up: &Capacity, window: Duration) -> ([f64; 3], [f64; 3], u64) {
    let before = up.counts();
    tokio::time::sleep(window).await;
    shares(before, up.counts())
}

fn start_proxies(dir: &TempDir, up: SocketAddr, redis: Option<&str>) -> Vec<ProxyProcess> {
    (0..3)
        .map(|i| {
            let p = dir.0.join(format!("p{i}.toml"));
            std::fs::write(&p, config(up, i, redis)).unwrap();
            ProxyProcess::start(&p)
        })
        .collect()
}

/// The two tests run one at a time: each saturates the machine on purpose.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const WARMUP: Duration = Duration::from_secs(3);
const WINDOW: Duration = Duration::from_secs(10);

/// The skew without `[cluster]`, then the same load with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_instances_share_the_upstream_by_global_weight() {
    let _serial = SERIAL.lock().await;
    let dir = TempDir::new("fair");
    let up = Capacity::start().await;

    // Without [cluster]: every instance is fair only locally, with D/3 each.
    let proxies = start_proxies(&dir, up.addr, None);
    let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
    let load = Load::start(&addrs);
    tokio::time::sleep(WARMUP).await;
    let (local, local_err, n) = measure(&up, WINDOW).await;
    let _ = load.finish().await;
    drop(proxies);
    eprintln!("without [cluster]: shares A/B/C {local:.3?}, relative error {local_err:.3?} ({n} requests)");
    assert!(
        local_err.iter().any(|&e| e > 0.10),
        "without [cluster] the skew should show: {local:?}"
    );

    // With [cluster]: one global D.
    let redis = Redis::start(&dir);
    let proxies = start_proxies(&dir, up.addr, Some(&redis.url()));
    let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
    let load = Load::start(&addrs);
    tokio::time::sleep(WARMUP).await;
    up.reset_max();
    let (global, err, n) = measure(&up, WINDOW).await;
    let max = up.max_outstanding.load(Relaxed);
    let st = status(proxies[0].admin).await;
    let tallies = load.finish().await;
    eprintln!(
        "with [cluster]: shares A/B/C {global:.3?}, relative error {err:.3?} ({n} requests); \
         upstream max outstanding {max} (D = {D})"
    );
    assert!(
        err.iter().all(|&e| e <= 0.10),
        "with [cluster] each share within 10 % of its weight share: {global:?} ({err:?})"
    );
    // Steady load: seats move only by rounding, at most one per instance per reallocation
    // (docs/proxy.md, "Running several instances").
    assert!(
        max as usize <= D + 3,
        "upstream saw {max} outstanding, D = {D}"
    );
    for (t, i, tally) in &tallies {
        assert_eq!(
            (tally.bad.load(Relaxed), tally.failed.load(Relaxed)),
            (0, 0),
            "tenant {} via instance {i}: every request answered 200",
            TENANTS[*t].0
        );
    }
    // /status shows the global view.
    let c = &st["cluster"];
    assert_eq!(c["instances"].as_array().map(Vec::len), Some(3), "{c}");
    assert_eq!(c["fallback"], false);
    assert!(c["sync_age_s"].as_f64().is_some_and(|a| a < 5.0), "{c}");
    let a = c["tenants"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == "A"))
        .unwrap_or_else(|| panic!("A in {c}"));
    assert!(
        (a["global_share"].as_f64().unwrap() - 0.25).abs() < 0.05,
        "{a}"
    );
    // A is served only here, so all of its share is this instance's.
    assert!(
        (a["local_share"].as_f64().unwrap() - 0.25).abs() < 0.05,
        "{a}"
    );
    drop(proxies);
}

async fn cluster_status(admin: SocketAddr) -> serde_json::Value {
    status(admin).await["cluster"].clone()
}

/// Kill Redis mid-run and restart it, then kill one instance: every request through a live
/// instance is answered 200, the fallback shows and clears, shares recover, and the dead
/// instance's share of D is reclaimed once its lease expires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_and_instance_failures_lose_nothing() {
    let _serial = SERIAL.lock().await;
    let dir = TempDir::new("fault");
    let up = Capacity::start().await;
    let mut redis = Redis::start(&dir);
    let mut proxies = start_proxies(&dir, up.addr, Some(&redis.url()));
    let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
    let admins: Vec<SocketAddr> = proxies.iter().map(|p| p.admin).collect();
    let load = Load::start(&addrs);
    tokio::time::sleep(WARMUP).await;
    let (s0, e0, _) = measure(&up, Duration::from_secs(5)).await;
    eprintln!("before the faults: shares {s0:.3?}, error {e0:.3?}");

    // Redis dies: every instance falls back, keeps serving within its last share of D.
    redis.kill();
    for &a in &admins {
        eventually(
            Duration::from_secs(20),
            "fallback on /status",
            || async move { cluster_status(a).await["fallback"] == true },
        )
        .await;
    }
    let (_, _, m) = get(admins[0], "/metrics", None).await;
    assert!(m.contains("fairlane_cluster_fallback 1"), "{m}");
    up.reset_max();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let max_down = up.max_outstanding.load(Relaxed);
    eprintln!("Redis down: every instance in fallback; max outstanding over 2 s: {max_down}");
    assert!(
        max_down as usize <= D + 3,
        "during the outage the upstream saw {max_down} outstanding, D = {D}"
    );

    // Redis returns (empty: no persistence): the instances rejoin.
    redis.restart();
    let back = Instant::now();
    for &a in &admins {
        eventually(Duration::from_secs(20), "rejoined", || async move {
            let c = cluster_status(a).await;
            c["fallback"] == false && c["instances"].as_array().map(Vec::len) == Some(3)
        })
        .await;
    }
    let rejoin = back.elapsed();
    // Shares recover: a window starting 1 s after Redis returned.
    tokio::time::sleep(Duration::from_secs(1).saturating_sub(rejoin)).await;
    let (s1, e1, _) = measure(&up, Duration::from_secs(5)).await;
    eprintln!("Redis back: all rejoined in {rejoin:?}; shares over the 5 s from 1 s after: {s1:.3?}, error {e1:.3?}");
    assert!(
        e1.iter().all(|&e| e <= 0.10),
        "shares recover after Redis returns: {s1:?} ({e1:?})"
    );

    // Redis hangs (SIGSTOP): answers time out, the instances fall back; SIGCONT: they rejoin.
    redis.signal("STOP");
    for &a in &admins {
        eventually(
            Duration::from_secs(20),
            "fallback on a hung Redis",
            || async move { cluster_status(a).await["fallback"] == true },
        )
        .await;
    }
    redis.signal("CONT");
    let resumed = Instant::now();
    for &a in &admins {
        eventually(
            Duration::from_secs(20),
            "rejoined after the hang",
            || async move { cluster_status(a).await["fallback"] == false },
        )
        .await;
    }
    eprintln!(
        "Redis hung then resumed: all rejoined in {:?}",
        resumed.elapsed()
    );

    // Instance 3 dies (SIGKILL) while its clients are busy: its lease lapses and the two
    // survivors take its share of D.
    let dead = Instant::now();
    let _ = proxies[2].child.kill();
    let _ = proxies[2].child.wait();
    load.stop_instance(2);
    for &a in &admins[..2] {
        eventually(Duration::from_secs(20), "lease reclaimed", || async move {
            let c = cluster_status(a).await;
            c["instances"].as_array().map(Vec::len) == Some(2)
        })
        .await;
    }
    let reclaimed = dead.elapsed();
    let seats: u64 = {
        let mut s = 0;
        for &a in &admins[..2] {
            s += cluster_status(a).await["seats"].as_u64().unwrap();
        }
        s
    };
    assert_eq!(seats as usize, D, "the survivors hold all of D");
    tokio::time::sleep(Duration::from_millis(500)).await;
    up.reset_max();
    let (s2, e2, _) = measure(&up, Duration::from_secs(5)).await;
    let max_after = up.max_outstanding.load(Relaxed);
    eprintln!(
        "instance p2 killed: lease reclaimed after {reclaimed:?}; shares {s2:.3?}, error {e2:.3?}; \
         max outstanding {max_after}"
    );
    assert!(
        e2.iter().all(|&e| e <= 0.10),
        "shares with two instances: {s2:?} ({e2:?})"
    );
    let tallies = load.finish().await;
    let mut lost_at_dead = 0;
    for (t, i, tally) in &tallies {
        let (ok, bad, failed) = (
            tally.ok.load(Relaxed),
            tally.bad.load(Relaxed),
            tally.failed.load(Relaxed),
        );
        if *i == 2 {
            // Clients of the killed process lose their connections: the instance died,
            // not the coordination.
            lost_at_dead += failed;
            assert_eq!(bad, 0);
            continue;
        }
        eprintln!("tenant {} via p{i}: {ok} answered 200", TENANTS[*t].0);
        assert!(ok > 0);
        assert_eq!(
            (bad, failed),
            (0, 0),
            "tenant {} via live instance p{i}: every request answered 200 through the faults",
            TENANTS[*t].0
        );
    }
    eprintln!("requests cut by the kill of p2 (its own clients, in flight there): {lost_at_dead}");
    drop(proxies);
    drop(redis);
}
