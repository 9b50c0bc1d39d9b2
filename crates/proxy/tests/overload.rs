//! Overload: 10× the upstream's capacity for 30 s against the proxy binary.
//!
//! Setup: the delay server answers in 50 ms; D = 4 → capacity 80 req/s. Three tenants send
//! 400, 300 and 100 req/s (800 req/s in all, 10×) for 30 s, open loop. Queue caps: 100 per
//! tenant, 200 overall; queue timeout 1 s. Every request must get a response from the list
//! (200, 429, 503), none may be lost, the proxy's counters must add up to what was sent, and
//! its memory must stay bounded.

mod common;

use std::time::Duration;

use common::*;
use fairlane_proxy_testkit::loadgen::{open, Target};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_times_capacity_for_30_seconds() {
    raise_fds(4096);
    let up = start_upstream().await;
    let text = format!(
        r#"[listen]
addr = "127.0.0.1:0"
admin = "127.0.0.1:0"
[upstream]
addr = "{}"
[scheduler]
algorithm = "sfq"
depth = 4
[limits]
max_queued = 200
max_queued_per_tenant = 100
queue_timeout_ms = 1000
{}"#,
        up.addr(),
        tenants(&[("a", "ka"), ("b", "kb"), ("c", "kc")])
    );
    let path = temp_file("overload.toml", &text);
    let p = ProxyProcess::start(&path);
    let rss_start = p.rss_kb();
    let run = |key: &'static str, rate: f64| {
        let t = Target {
            addr: p.addr,
            path: "/work?delay_ms=50".into(),
            key: Some(key.into()),
        };
        tokio::spawn(async move { open(&t, rate, Duration::from_secs(30)).await })
    };
    let loads = [run("ka", 400.0), run("kb", 300.0), run("kc", 100.0)];
    let mut rss = Vec::new();
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss.push(p.rss_kb());
    }
    let mut sent = 0;
    let mut answered = 0;
    let mut ok = 0;
    for (l, name) in loads.into_iter().zip(["a", "b", "c"]) {
        let r = l.await.unwrap();
        eprintln!("tenant {name}: {}", r.summary());
        assert_eq!(r.errors, 0, "no request lost: {}", r.summary());
        assert_eq!(r.answered(), r.sent);
        for code in r.status.keys() {
            assert!(
                [200, 429, 503].contains(code),
                "unexpected status {code}: {}",
                r.summary()
            );
        }
        assert!(r.ok() > 0, "tenant {name} got service: {}", r.summary());
        sent += r.sent;
        answered += r.answered();
        ok += r.ok();
    }
    assert_eq!(sent, answered);
    let admin = p.admin;
    eventually(Duration::from_secs(20), "queues empty", || async move {
        let s = status(admin).await;
        s["queued"] == 0 && s["in_flight"] == 0
    })
    .await;
    let s = status(admin).await;
    let mut received = 0;
    let mut accounted = 0;
    for t in s["tenants"].as_array().unwrap() {
        let rejected: u64 = t["rejected"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        received += t["received"].as_u64().unwrap();
        accounted += t["completed"].as_u64().unwrap() + rejected;
    }
    assert_eq!(received, sent, "the proxy saw every request");
    assert_eq!(accounted, sent, "completed + rejected = sent");
    let max_rss = *rss.iter().max().unwrap();
    let late = rss[25..].iter().max().unwrap();
    let early = rss[5..10].iter().max().unwrap();
    eprintln!("sent {sent}, ok {ok}; proxy RSS start {rss_start} kB, max {max_rss} kB, 5–10 s {early} kB, 25–30 s {late} kB");
    assert!(max_rss < 200 * 1024, "proxy memory bounded: {max_rss} kB");
    assert!(
        *late < early + 32 * 1024,
        "proxy memory not growing: {early} → {late} kB"
    );
}
