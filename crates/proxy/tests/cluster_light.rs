//! `[cluster]` with a light weighted tenant and a Redis restart, against real proxy processes,
//! a real `redis-server` and an upstream that counts what it has outstanding itself.
//!
//! Two instances share one upstream of capacity D = 8 (as in issue 35's report): A (weight 1)
//! reaches instance 0 only, B (weight 1) both, both backlogged; L (weight 4) is light — a
//! few clients with think time, about half a seat — and reaches instance 0. The same load runs
//! first through one proxy without `[cluster]` (D = 8), then through the two instances:
//!
//! * L's p99 latency through the cluster is within 2× of its p99 through the single proxy;
//! * Redis is killed (SIGKILL) and restarted empty under load: no answer other than 200;
//! * the upstream's own high-water mark of requests outstanding never exceeds D, from the
//!   instances' start to the end;
//! * A's and B's shares of the upstream's completions are within ±10 % of equal, before the
//!   fault and over the 5 s that end 10 s after the restart.
//!
//! `tight_figures` (ignored; `scripts/bench-cluster.sh` runs it) is the same run with longer
//! windows: it prints the figures docs/benchmarks.md records against the tight targets
//! (p99 within 1.5×, shares within ±5 %) without asserting them.

mod cluster_util;
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster_util::{Capacity, Redis, TempDir};
use common::*;

/// The global depth D, which is also the upstream's capacity.
const D: usize = 8;
/// Upstream service time per request.
const SERVICE: Duration = Duration::from_millis(50);
/// Tenants: name, key, weight.
const TENANTS: [(&str, &str, f64); 3] = [("A", "ka", 1.0), ("B", "kb", 1.0), ("L", "kl", 4.0)];
const NAMES: [&str; 3] = ["A", "B", "L"];
/// Closed-loop clients: (tenant, instance, clients, think time between requests).
const CLIENTS: [(usize, usize, usize, Duration); 4] = [
    (0, 0, 16, Duration::ZERO),
    (1, 0, 8, Duration::ZERO),
    (1, 1, 8, Duration::ZERO),
    (2, 0, 3, Duration::from_millis(250)),
];

fn config(up: SocketAddr, depth: usize, cluster: Option<(&str, usize)>) -> String {
    let mut s = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{up}\"\n\
         [scheduler]\nalgorithm = \"sfq\"\ndepth = {depth}\n[limits]\nqueue_timeout_ms = 30000\n"
    );
    for (name, key, w) in TENANTS {
        s += &format!("[[tenant]]\nname = \"{name}\"\nweight = {w}\nkeys = [\"{key}\"]\n");
    }
    if let Some((url, i)) = cluster {
        s += &format!(
            "[cluster]\nredis = \"{url}\"\ninstance = \"p{i}\"\ndepth = {D}\n\
             sync_interval_ms = 100\nlease_ms = 500\n"
        );
    }
    s
}

/// What the clients saw: answers other than 200 (or none), and L's latencies by start time.
#[derive(Default)]
struct Seen {
    bad: AtomicU64,
    ok: AtomicU64,
    light: Mutex<Vec<(Instant, Duration)>>,
}

impl Seen {
    /// L's p99 latency over requests started within `from..to`, and their number.
    fn light_p99(&self, from: Instant, to: Instant) -> (Duration, usize) {
        let mut l: Vec<Duration> = self
            .light
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _)| (from..to).contains(t))
            .map(|(_, d)| *d)
            .collect();
        l.sort();
        let p99 = l
            .get((l.len() as f64 * 0.99).ceil() as usize - 1)
            .or(l.last());
        (p99.copied().unwrap_or_default(), l.len())
    }
}

/// The clients of `CLIENTS`, instance `i` at `addrs[i]` (one address: all to it), until
/// dropped.
struct Load {
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(addrs: &[SocketAddr]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let mut tasks = Vec::new();
        for (t, i, n, think) in CLIENTS {
            for _ in 0..n {
                let addr = addrs[i.min(addrs.len() - 1)];
                let (stop, seen) = (stop.clone(), seen.clone());
                tasks.push(tokio::spawn(client(addr, t, think, stop, seen)));
            }
        }
        Load { stop, seen, tasks }
    }

    async fn finish(self) -> Arc<Seen> {
        self.stop.store(true, Relaxed);
        for t in self.tasks {
            let _ = t.await;
        }
        self.seen
    }
}

async fn client(
    addr: SocketAddr,
    t: usize,
    think: Duration,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
) {
    let http = load_client();
    while !stop.load(Relaxed) {
        let start = Instant::now();
        if get_work(&http, addr, TENANTS[t].1).await == Some(200) {
            seen.ok.fetch_add(1, Relaxed);
            if t == 2 {
                seen.light.lock().unwrap().push((start, start.elapsed()));
            }
        } else {
            seen.bad.fetch_add(1, Relaxed);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(think).await;
    }
}

/// A's and B's shares of the completions between two snapshots, and the larger relative
/// error against equal shares.
fn split(before: &[u64], after: &[u64]) -> ([f64; 2], f64) {
    let a = (after[0] - before[0]) as f64;
    let b = (after[1] - before[1]) as f64;
    let s = [a / (a + b).max(1.0), b / (a + b).max(1.0)];
    (
        s,
        s.iter().map(|x| (x - 0.5).abs() / 0.5).fold(0.0, f64::max),
    )
}

/// How long each part runs.
struct Windows {
    warmup: Duration,
    light: Duration,
    down: Duration,
    after: Duration,
}

/// What one run measured.
#[derive(Debug)]
struct Figures {
    single_p99: Duration,
    cluster_p99: Duration,
    light_requests: (usize, usize),
    shares_before: [f64; 2],
    err_before: f64,
    shares_after: [f64; 2],
    err_after: f64,
    max_outstanding: u64,
    bad: u64,
    ok: u64,
    startup_line: String,
    status: serde_json::Value,
    metrics: String,
}

async fn single(dir: &TempDir, up: &Capacity, w: &Windows) -> (Duration, usize) {
    let path = dir.0.join("single.toml");
    std::fs::write(&path, config(up.addr, D, None)).unwrap();
    let proxy = ProxyProcess::start(&path);
    let load = Load::start(&[proxy.addr]);
    tokio::time::sleep(w.warmup).await;
    let from = Instant::now();
    tokio::time::sleep(w.light).await;
    let seen = load.finish().await;
    let (p99, n) = seen.light_p99(from, Instant::now());
    assert!(n > 10, "L answered {n} times");
    assert_eq!(
        seen.bad.load(Relaxed),
        0,
        "single proxy: every request answered 200"
    );
    (p99, n)
}

async fn run(w: Windows) -> Figures {
    let dir = TempDir::new("light");
    let up = Capacity::start(D, SERVICE, &NAMES).await;
    let (single_p99, single_n) = single(&dir, &up, &w).await;

    let mut redis = Redis::start(&dir);
    up.reset_max();
    let proxies: Vec<ProxyProcess> = (0..2)
        .map(|i| {
            let path = dir.0.join(format!("p{i}.toml"));
            std::fs::write(&path, config(up.addr, D / 2, Some((&redis.url(), i)))).unwrap();
            ProxyProcess::start(&path)
        })
        .collect();
    let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
    let load = Load::start(&addrs);
    tokio::time::sleep(w.warmup).await;
    let (from, before) = (Instant::now(), up.counts());
    tokio::time::sleep(w.light).await;
    let (to, mid) = (Instant::now(), up.counts());
    let (shares_before, err_before) = split(&before, &mid);
    let status = status(proxies[0].admin).await;
    let (_, _, metrics) = get(proxies[0].admin, "/metrics", None).await;

    redis.kill();
    tokio::time::sleep(w.down).await;
    redis.restart();
    tokio::time::sleep(Duration::from_secs(10) - w.after.min(Duration::from_secs(5))).await;
    let c0 = up.counts();
    tokio::time::sleep(w.after).await;
    let (shares_after, err_after) = split(&c0, &up.counts());
    let seen = load.finish().await;
    let (cluster_p99, n) = seen.light_p99(from, to);
    let startup_line = proxies[0]
        .log
        .lock()
        .unwrap()
        .iter()
        .find(|l| l.contains("listening on"))
        .cloned()
        .unwrap_or_default();
    Figures {
        single_p99,
        cluster_p99,
        light_requests: (single_n, n),
        shares_before,
        err_before,
        shares_after,
        err_after,
        max_outstanding: up.max_outstanding.load(Relaxed),
        bad: seen.bad.load(Relaxed),
        ok: seen.ok.load(Relaxed),
        startup_line,
        status,
        metrics,
    }
}

fn print(f: &Figures) {
    eprintln!(
        "L p99: single proxy {:.1} ms ({} requests), cluster {:.1} ms ({} requests), ratio {:.2}; \
         A/B shares before the fault {:.3?} (error {:.1} %), over the 5 s ending 10 s after the \
         restart {:.3?} (error {:.1} %); upstream max outstanding {} (D = {D}); \
         {} answered 200, {} not",
        f.single_p99.as_secs_f64() * 1e3,
        f.light_requests.0,
        f.cluster_p99.as_secs_f64() * 1e3,
        f.light_requests.1,
        f.cluster_p99.as_secs_f64() / f.single_p99.as_secs_f64(),
        f.shares_before,
        f.err_before * 100.0,
        f.shares_after,
        f.err_after * 100.0,
        f.max_outstanding,
        f.ok,
        f.bad,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_light_tenant_and_a_redis_restart() {
    let f = run(Windows {
        warmup: Duration::from_secs(3),
        light: Duration::from_secs(8),
        down: Duration::from_secs(2),
        after: Duration::from_secs(5),
    })
    .await;
    print(&f);
    assert!(
        f.cluster_p99 <= 2 * f.single_p99,
        "L's p99 through the cluster within 2× of one proxy's: {f:?}"
    );
    assert_eq!(
        f.bad, 0,
        "every request answered 200, through the Redis restart"
    );
    assert!(
        f.max_outstanding as usize <= D,
        "the upstream saw {} outstanding",
        f.max_outstanding
    );
    assert!(
        f.err_before <= 0.10,
        "A and B equal within 10 %: {:?}",
        f.shares_before
    );
    assert!(
        f.err_after <= 0.10,
        "back within 10 % after the restart: {:?}",
        f.shares_after
    );
    // Both depths on the start-up line and /status; φ as configured, the effective weight
    // and the seats apart.
    assert!(
        f.startup_line
            .contains("local D = 4 until the first sync, global D = 8"),
        "{}",
        f.startup_line
    );
    let c = &f.status["cluster"];
    assert_eq!(
        (f.status["depth"].as_u64(), c["depth"].as_u64()),
        (c["seats"].as_u64(), Some(8))
    );
    let l = tenant(&f.status, "L");
    assert_eq!(l["weight"], 4.0, "{l}");
    let member = |name: &str| {
        c["tenants"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == name))
            .unwrap_or_else(|| panic!("{name} in {c}"))
    };
    let cl = member("L");
    assert_eq!(
        (&cl["weight"], &cl["light"]),
        (&4.0.into(), &true.into()),
        "{cl}"
    );
    assert_eq!(cl["effective_weight"], 4.0, "a light tenant keeps φ: {cl}");
    let b = member("B");
    assert!(
        b["effective_weight"].as_f64().is_some_and(|w| w < 1.0),
        "{b}"
    );
    assert!(
        f.metrics.contains("fairlane_proxy_weight{tenant=\"L\"} 4"),
        "{}",
        f.metrics
    );
    assert!(
        f.metrics
            .contains("fairlane_cluster_effective_weight{tenant=\"L\"} 4"),
        "{}",
        f.metrics
    );
    assert!(
        f.metrics
            .contains("fairlane_cluster_tenant_seats{tenant=\"B\"}"),
        "{}",
        f.metrics
    );
}

/// The tight figures: `scripts/bench-cluster.sh` runs this and prints the targets next to
/// the figures (p99 within 1.5×, shares within ±5 %).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn tight_figures() {
    let secs = |name: &str, default: u64| {
        Duration::from_secs(
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default),
        )
    };
    let f = run(Windows {
        warmup: secs("CLUSTER_WARMUP", 5),
        light: secs("CLUSTER_SECS", 30),
        down: secs("CLUSTER_DOWN", 2),
        after: Duration::from_secs(5),
    })
    .await;
    print(&f);
    let ratio = f.cluster_p99.as_secs_f64() / f.single_p99.as_secs_f64();
    eprintln!(
        "targets: p99 ratio {ratio:.2} ≤ 1.5 {}; shares {:.1} % and {:.1} % ≤ 5 % {}; max outstanding {} ≤ {D} {}; non-200 {} {}",
        if ratio <= 1.5 { "met" } else { "NOT met" },
        f.err_before * 100.0,
        f.err_after * 100.0,
        if f.err_before.max(f.err_after) <= 0.05 { "met" } else { "NOT met" },
        f.max_outstanding,
        if f.max_outstanding as usize <= D { "met" } else { "NOT met" },
        f.bad,
        if f.bad == 0 { "met" } else { "NOT met" },
    );
}
