//! Every core scheduler drives the proxy's D slots (including RW(D), which idles on purpose,
//! and EDF with per-tenant targets), and the adaptive depth controller moves D.

mod common;

use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

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
        let reqs = spawn_gets(p.addr, "/?delay_ms=5&jitter_ms=4", 24, &["ka", "kb", "kb"]);
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

/// Send `n` requests, hold the first `depth` of them at the upstream for `hold` after they
/// all arrived (so each one's response time in the proxy is at least `hold`), then release
/// them together, and the rest as they arrive; returns the slowest response time the
/// client saw.
async fn held_batch(
    p: &Running,
    up: &HeldUpstream,
    n: usize,
    depth: usize,
    hold: Duration,
) -> Duration {
    let reqs: Vec<_> = (0..n)
        .map(|_| {
            let addr = p.addr;
            tokio::spawn(async move {
                let t = Instant::now();
                let (code, _, _) = get(addr, "/", Some("ka")).await;
                (code, t.elapsed())
            })
        })
        .collect();
    let first = up.take(depth.min(n), STEP, "a batch at the upstream").await;
    tokio::time::sleep(hold).await;
    first.into_iter().for_each(Held::release);
    for _ in depth.min(n)..n {
        up.next(STEP, "the rest of the batch").await.release();
    }
    let mut slowest = Duration::ZERO;
    for r in reqs {
        let (code, t) = r.await.unwrap();
        assert_eq!(code, 200);
        slowest = slowest.max(t);
    }
    slowest
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_depth_reacts_to_missed_targets() {
    // The controller judges a period only if the tenant completed at least 5 requests in it
    // (`DepthConfig::min_samples`). The test completes requests in batches of 9 released
    // together, so exactly one period judges each batch (9 < 2 × 5, and a batch's
    // completions cannot span three 1 s periods), and none judges anything between batches:
    // each decision holds until the test acts, however slowly the test runs.
    let up = HeldUpstream::start().await;
    let p = start_proxy(config(
        up.addr(),
        r#"[scheduler]
algorithm = "sfq"
depth = 16
[scheduler.adaptive]
min = 2
max = 32
interval_ms = 1000
[[tenant]]
name = "a"
keys = ["ka"]
target_ms = 10
"#,
    ))
    .await;
    let admin = p.admin;
    assert_eq!(status(admin).await["depth"], 16);
    // Every request misses the 10 ms target (held ≥ 30 ms): the controller halves D.
    let slowest = held_batch(&p, &up, 9, 16, Duration::from_millis(30)).await;
    eventually(STEP, "depth halves on a miss", || async move {
        status(admin).await["depth"] == 8
    })
    .await;
    // Halving cannot make a held request faster: the next batch is slower still (held at
    // least twice the first batch's slowest response), so the controller goes back to 16
    // and holds it as a floor rather than starving the tenant at depth 2.
    held_batch(&p, &up, 9, 8, 2 * slowest).await;
    eventually(
        STEP,
        "depth goes back when halving did not help",
        || async move { status(admin).await["depth"] == 16 },
    )
    .await;
    let s = status(admin).await;
    assert_eq!(
        (s["queued"].as_u64(), s["in_flight"].as_u64()),
        (Some(0), Some(0))
    );
}
