//! Every core scheduler drives the proxy's D slots (including RW(D), which idles on purpose,
//! and EDF with per-tenant targets), and the adaptive depth controller moves D.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_preset_serves_every_request_within_depth() {
    for preset in fairlane_core::PRESETS {
        let up = start_upstream().await;
        let p = start_proxy(config(
            up.addr(),
            &format!(
                r#"[scheduler]
algorithm = "{preset}"
depth = 3
initial_estimate_ms = 5
[[tenant]]
name = "a"
keys = ["ka"]
target_ms = 50
[[tenant]]
name = "b"
weight = 2
keys = ["kb"]
target_ms = 200
"#
            ),
        ))
        .await;
        let reqs: Vec<_> = (0..24)
            .map(|i| {
                tokio::spawn(get(
                    p.addr,
                    "/?delay_ms=5&jitter_ms=4",
                    Some(if i % 3 == 0 { "ka" } else { "kb" }),
                ))
            })
            .collect();
        for r in reqs {
            assert_eq!(r.await.unwrap().0, 200, "{preset}");
        }
        let max = up.counters.max_active.load(Relaxed);
        assert!(
            (1..=3).contains(&max),
            "{preset}: {max} outstanding upstream with D = 3"
        );
        let s = status(p.admin).await;
        assert_eq!(
            (s["queued"].as_u64(), s["in_flight"].as_u64()),
            (Some(0), Some(0)),
            "{preset}"
        );
        p.handle.shutdown();
        p.task.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_depth_reacts_to_missed_targets() {
    let up = start_upstream().await;
    let p = start_proxy(config(
        up.addr(),
        r#"[scheduler]
algorithm = "sfq"
depth = 16
[scheduler.adaptive]
min = 2
max = 32
interval_ms = 200
[[tenant]]
name = "a"
keys = ["ka"]
target_ms = 10
"#,
    ))
    .await;
    assert_eq!(status(p.admin).await["depth"], 16);
    // 30 ms requests against a 10 ms target: every period misses. The controller halves D;
    // halving cannot make a 30 ms request faster, so it goes back up and holds 16 as a floor
    // rather than starving the tenant at depth 2.
    let t = fairlane_proxy::loadgen::Target {
        addr: p.addr,
        path: "/?delay_ms=30".into(),
        key: Some("ka".into()),
    };
    let load = tokio::spawn(async move {
        fairlane_proxy::loadgen::closed(&t, 8, Duration::from_secs(4)).await
    });
    let admin = p.admin;
    eventually(
        Duration::from_secs(10),
        "depth halves on a miss",
        || async move { status(admin).await["depth"] == 8 },
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "depth goes back when halving did not help",
        || async move { status(admin).await["depth"] == 16 },
    )
    .await;
    let r = load.await.unwrap();
    assert_eq!(r.ok(), r.sent, "{}", r.summary());
}
