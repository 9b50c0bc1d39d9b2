//! `[cluster]`: three proxy processes in front of one upstream of fixed concurrency share it
//! by the global weights, coordinated through a real `redis-server` (started on a free
//! loopback port and stopped by the test). The skew: tenant A reaches only instance 1, B all
//! three, C (weight 2) instances 2 and 3. Without `[cluster]` the same load is skewed (the
//! test can fail); with it every tenant's share of the completed upstream work is within
//! 10 % of its weight share. The fault test kills Redis mid-run, restarts it, then kills one
//! proxy instance.

mod cluster_util;
mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cluster_util::{Capacity, Redis, TempDir};
use common::*;

/// The global depth D, which is also the upstream's capacity.
const D: usize = 24;
/// Upstream service time per request.
const SERVICE: Duration = Duration::from_millis(60);
/// Closed-loop clients per (tenant, instance) pair: more than any instance's seats.
const CLIENTS: usize = 24;
/// Tenants: name, key, weight.
const TENANTS: [(&str, &str, f64); 3] = [("A", "ka", 1.0), ("B", "kb", 1.0), ("C", "kc", 2.0)];
const NAMES: [&str; 3] = ["A", "B", "C"];
/// Which instances (0-based) each tenant reaches.
const ROUTES: [(usize, &[usize]); 3] = [(0, &[0]), (1, &[0, 1, 2]), (2, &[1, 2])];
/// The sync interval and lease the cluster runs with.
const SYNC_MS: u64 = 100;
const LEASE_MS: u64 = 500;

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
                        let client = load_client();
                        while !stop.load(Relaxed) && !own.load(Relaxed) {
                            match get_work(&client, addr, key).await {
                                Some(200) => tally.ok.fetch_add(1, Relaxed),
                                Some(_) => tally.bad.fetch_add(1, Relaxed),
                                None => {
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
fn shares(before: Vec<u64>, after: Vec<u64>) -> ([f64; 3], [f64; 3], u64) {
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
    let up = Capacity::start(D, SERVICE, &NAMES).await;

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

    // With [cluster]: one global D. The upstream's high-water mark counts from the start.
    let redis = Redis::start(&dir);
    up.reset_max();
    let proxies = start_proxies(&dir, up.addr, Some(&redis.url()));
    let addrs: Vec<SocketAddr> = proxies.iter().map(|p| p.addr).collect();
    let load = Load::start(&addrs);
    tokio::time::sleep(WARMUP).await;
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
    // Seats are claimed atomically in Redis: never more than D outstanding, start-up
    // included (`scheduler.depth` = D / instances; docs/proxy.md, "Running several instances").
    assert!(max as usize <= D, "upstream saw {max} outstanding, D = {D}");
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

/// Wait until every instance's `/status` says it is in fallback.
async fn all_fall_back(admins: &[SocketAddr], what: &str) {
    for &a in admins {
        eventually(Duration::from_secs(20), what, || async move {
            cluster_status(a).await["fallback"] == true
        })
        .await;
    }
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
    let up = Capacity::start(D, SERVICE, &NAMES).await;
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
    all_fall_back(&admins, "fallback on /status").await;
    let (_, _, m) = get(admins[0], "/metrics", None).await;
    assert!(m.contains("fairlane_cluster_fallback 1"), "{m}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let max_down = up.max_outstanding.load(Relaxed);
    eprintln!("Redis down: every instance in fallback; max outstanding so far: {max_down}");

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
    all_fall_back(&admins, "fallback on a hung Redis").await;
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
    // The survivors grow into its seats at their next syncs (a claim is granted only once
    // the allocation that frees it has been computed).
    eventually(
        Duration::from_secs(20),
        "the survivors hold all of D",
        || async {
            let mut seats = 0;
            for &a in &admins[..2] {
                seats += cluster_status(a).await["seats"].as_u64().unwrap();
            }
            seats as usize == D
        },
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s2, e2, _) = measure(&up, Duration::from_secs(5)).await;
    let max = up.max_outstanding.load(Relaxed);
    eprintln!(
        "instance p2 killed: lease reclaimed after {reclaimed:?}; shares {s2:.3?}, error {e2:.3?}; \
         max outstanding over the whole run {max}"
    );
    // Through Redis dying, coming back empty, hanging, and an instance dying.
    assert!(
        max as usize <= D,
        "the upstream saw {max} outstanding, D = {D}"
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

/// The exchange's Lua script, run by a real `redis-server`, grants what `settle` (its
/// specification, which the simulation test runs) says, for a sequence of exchanges that
/// grow, shrink, find Redis without their report and replay a stale exchange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exchange_script_grants_what_settle_says() {
    use fairlane_proxy::cluster::{settle, store, ClusterConfig, Outgoing, Report};
    let dir = TempDir::new("script");
    let mut redis = Redis::start(&dir);
    let url = redis.url();
    let config = |id: &str| ClusterConfig {
        redis: url.clone(),
        instance: id.into(),
        depth: 10,
        sync_interval_ms: 100,
        lease_ms: Some(5_000),
        timeout_ms: Some(2_000),
        key_prefix: "t".into(),
    };
    let out = |id: &str, seq: u64, held: usize, want: usize, expect: Option<u64>| Outgoing {
        report: Report {
            id: id.into(),
            seq,
            ..Report::default()
        },
        held,
        want,
        expect,
    };
    // The model of what Redis keeps: id → (seq, claim).
    let mut model: std::collections::BTreeMap<String, (u64, usize)> = Default::default();
    let steps: [(&str, u64, usize, usize, Option<u64>); 7] = [
        ("a", 1, 2, 8, None),    // alone: grows to 8
        ("b", 1, 1, 6, None),    // a claims 8: b gets 2
        ("a", 2, 8, 8, Some(1)), // a holds
        ("a", 3, 4, 4, Some(2)), // a shrinks to 4
        ("b", 2, 2, 6, Some(1)), // now b grows to 6
        ("b", 3, 6, 9, Some(2)), // a claims 4: b may not pass 6
        ("a", 4, 4, 9, Some(9)), // Redis has another seq for a: no growth
    ];
    for (id, seq, held, want, expect) in steps {
        let o = out(id, seq, held, want, expect);
        let present: Vec<(String, usize)> = model.iter().map(|(k, v)| (k.clone(), v.1)).collect();
        let previous = model.get(id).map(|v| v.0);
        let grant = settle(id, 10, &o, previous, &present);
        model.insert(id.into(), (seq, grant));
        let reply = store::exchange(&config(id), &o).await.expect("exchange");
        assert_eq!(
            reply.grant, grant,
            "{id} seq {seq}: held {held} want {want}"
        );
        assert_eq!(reply.previous, previous, "{id} seq {seq}");
        let mut ids: Vec<String> = reply.peers.iter().map(|p| p.report.id.clone()).collect();
        ids.sort();
        assert_eq!(ids, model.keys().cloned().collect::<Vec<_>>());
    }
    // A stale exchange (an older seq than Redis has) is refused without a write.
    let e = store::exchange(&config("b"), &out("b", 1, 1, 9, Some(3)))
        .await
        .unwrap_err();
    assert!(e.contains("newer report"), "{e}");
    // After a restart Redis is empty: no growth for an instance that expects its report.
    redis.kill();
    redis.restart();
    let reply = store::exchange(&config("a"), &out("a", 5, 4, 9, Some(4)))
        .await
        .expect("exchange");
    assert_eq!((reply.grant, reply.previous), (4, None));
}
