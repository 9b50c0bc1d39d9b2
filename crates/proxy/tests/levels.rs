//! Priority levels and flow schemas in the proxy, with a real upstream on loopback:
//!
//! * a catch-all tenant offers 20× the server's capacity while a tenant classified into a
//!   high level keeps its p99 within 2× of its p99 alone, and the catch-all level's
//!   borrowing of the high level's lendable seats shows in `/debug/priority_levels`;
//! * a reload changes shares, depth and rules with requests queued and loses none; a
//!   reload that would retire a busy level, or names an unknown level, keeps the old config;
//! * bad levels are refused by `--check`, at start and at a SIGHUP reload, naming the file
//!   and the field.

mod common;

use std::time::Duration;

use common::*;
use fairlane_proxy_testkit::loadgen::{open, Report, Target};

/// D = 8 slots of 200 ms requests: capacity 40 req/s. The high level has 4 nominal seats
/// and lends 1 (25 %); the catch-all has 4 and borrows what is lent. Tenants api and flood.
const FLOOD_LEVELS: &str = concat!(
    "[scheduler]\ndepth = 8\n",
    "[limits]\nmax_queued_per_tenant = 5000\nqueue_timeout_ms = 30000\n",
    "[levels]\nadjust_period_ms = 200\n",
    include_str!("testdata/levels.toml")
);

const API_PATH: &str = "/api?delay_ms=200";
const FLOOD_PATH: &str = "/flood?delay_ms=200";

fn target(addr: std::net::SocketAddr, path: &str, key: &str) -> Target {
    Target {
        addr,
        path: path.into(),
        key: Some(key.into()),
    }
}

fn p99(r: &Report) -> f64 {
    r.quantile(0.99).expect("api requests succeeded")
}

fn level<'a>(levels: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    levels
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["name"] == name))
        .unwrap_or_else(|| panic!("level {name} in {levels}"))
}

async fn debug(admin: std::net::SocketAddr, what: &str) -> serde_json::Value {
    let (code, _, body) = get(admin, &format!("/debug/{what}"), None).await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("a JSON dump")
}

/// What the test checks while the flood runs: borrowing, the dumps, the refusals and the
/// headers naming the level, exempt admission.
async fn check_during_flood(p: &Running) {
    eventually(
        STEP,
        "the catch-all borrows the high level's lendable seat",
        || async {
            let ls = debug(p.admin, "priority_levels").await;
            let (c, h) = (level(&ls, "catch-all"), level(&ls, "high"));
            c["borrowed"] == 1 && c["current_cl"] == 5 && h["lent"] == 1 && c["nominal_cl"] == 4
        },
    )
    .await;
    let ls = debug(p.admin, "priority_levels").await;
    let c = level(&ls, "catch-all");
    assert!(c["queued"].as_u64().unwrap() > 0, "{c}");
    assert!(c["seats_in_use"].as_u64().unwrap() <= 5, "{c}");
    let reqs = debug(p.admin, "requests").await;
    let first = &reqs.as_array().unwrap()[0];
    assert_eq!(
        (&first["level"], &first["tenant"]),
        (&"catch-all".into(), &"flood".into())
    );
    assert_eq!(first["flow_schema"], "rest");
    assert!(first["waited_s"].as_f64().unwrap() > 0.0, "{first}");
    let queues = debug(p.admin, "queues").await;
    let cq = level_queues(&queues, "catch-all");
    assert_eq!(cq["queues"][0]["tenant"], "flood", "{cq}");
    // The flood meets its level's queue limit: 429 naming the level, with Retry-After.
    let mut refused = None;
    for _ in 0..50 {
        let (code, h, body) = get(p.addr, FLOOD_PATH, Some("kf")).await;
        if code == 429 {
            refused = Some((h, body));
            break;
        }
    }
    let (h, body) = refused.expect("a 429 from the full catch-all level");
    assert!(body.contains("priority level \"catch-all\""), "{body}");
    assert!(h.contains_key("retry-after"));
    assert_eq!(h["x-fairlane-priority-level"], "catch-all");
    // Exempt requests are admitted at once, outside D.
    let (code, h, _) = get(p.addr, "/healthz", Some("kf")).await;
    assert_eq!(code, 200);
    assert_eq!(
        (
            &h["x-fairlane-priority-level"],
            &h["x-fairlane-flow-schema"]
        ),
        (&"exempt".parse().unwrap(), &"health".parse().unwrap())
    );
    let ls = debug(p.admin, "priority_levels").await;
    assert!(level(&ls, "exempt")["exempt_admitted"].as_u64().unwrap() >= 1);
    let (_, _, metrics) = get(p.admin, "/metrics", None).await;
    for line in [
        "fairlane_proxy_level_borrowed{level=\"catch-all\"}",
        "fairlane_proxy_level_rejected_total{level=\"catch-all\",reason=\"queue_full\"}",
        "fairlane_proxy_level_wait_seconds_bucket{level=\"high\",le=\"+Inf\"}",
    ] {
        assert!(metrics.contains(line), "{line} in /metrics");
    }
}

fn level_queues<'a>(queues: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    queues
        .as_array()
        .and_then(|ls| ls.iter().find(|l| l["level"] == name))
        .unwrap_or_else(|| panic!("level {name} in {queues}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_high_level_keeps_its_p99_under_a_20x_catch_all_flood() {
    raise_fds(4096); // ~1000 sockets
    let up = start_upstream().await;
    let p = proxy_with(up.addr(), FLOOD_LEVELS, &[]).await;
    let (code, h, _) = get(p.addr, API_PATH, Some("ka")).await;
    assert_eq!(code, 200);
    assert_eq!(h["x-fairlane-priority-level"], "high");
    assert_eq!(h["x-fairlane-flow-schema"], "api");

    let alone = open(
        &target(p.addr, API_PATH, "ka"),
        10.0,
        Duration::from_secs(4),
    )
    .await;
    let flood = tokio::spawn({
        let t = target(p.addr, FLOOD_PATH, "kf");
        async move { open(&t, 800.0, Duration::from_secs(8)).await }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let api = tokio::spawn({
        let t = target(p.addr, API_PATH, "ka");
        async move { open(&t, 10.0, Duration::from_secs(5)).await }
    });
    check_during_flood(&p).await;
    let (api, flood) = (api.await.unwrap(), flood.await.unwrap());
    eprintln!("api alone:   {}", alone.summary());
    eprintln!("api flooded: {}", api.summary());
    eprintln!("flood:       {}", flood.summary());
    for r in [&alone, &api] {
        assert_eq!(
            r.ok(),
            r.sent,
            "every api request succeeds: {}",
            r.summary()
        );
    }
    assert_eq!(flood.answered(), flood.sent, "{}", flood.summary());
    assert!(flood.count(429) > 0, "{}", flood.summary());
    let (a, f) = (p99(&alone), p99(&api));
    eprintln!(
        "api p99: alone {:.1} ms, flooded {:.1} ms ({:.2}×)",
        a * 1e3,
        f * 1e3,
        f / a
    );
    assert!(
        f <= 2.0 * a,
        "the high level keeps the api within 2× of alone: {f} vs {a}"
    );
    p.handle.shutdown();
}

/// Two levels over D = 2 (a seat each); alice goes to the high level, everyone else to the
/// catch-all.
const RELOAD_V1: &str = include_str!("testdata/reload_v1.toml");

/// D = 4, new shares, a new level for bob, and an algorithm change (kept for a restart).
const RELOAD_V2: &str = include_str!("testdata/reload_v2.toml");

fn reload_config(up: std::net::SocketAddr, levels: &str) -> fairlane_proxy::ProxyConfig {
    config(
        up,
        &format!("{levels}{}", tenants(&[("alice", "ka"), ("bob", "kb")])),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_rules_with_requests_queued_and_loses_none() {
    let up = HeldUpstream::start().await;
    let p = start_proxy(reload_config(up.addr(), RELOAD_V1)).await;
    let mut reqs: Vec<_> = (0..5)
        .map(|_| tokio::spawn(get(p.addr, "/b", Some("kb"))))
        .chain((0..3).map(|_| tokio::spawn(get(p.addr, "/a", Some("ka")))))
        .collect();
    let held = up.take(2, STEP, "a seat per level").await;
    let admin = p.admin;
    eventually(STEP, "6 requests queued", || async move {
        debug(admin, "requests").await.as_array().unwrap().len() == 6
    })
    .await;
    let queues = debug(admin, "queues").await;
    assert_eq!(level_queues(&queues, "catch-all")["queued"], 4, "{queues}");
    assert_eq!(
        level_queues(&queues, "high")["queues"][0]["queued"],
        2,
        "{queues}"
    );

    let warnings = p
        .handle
        .reload(reload_config(up.addr(), RELOAD_V2))
        .expect("reloads");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("priority_level[2].algorithm") && w.contains("restart")),
        "{warnings:?}"
    );
    let ls = debug(admin, "priority_levels").await;
    assert_eq!(
        (
            level(&ls, "high")["nominal_cl"].as_u64(),
            level(&ls, "mid")["nominal_cl"].as_u64()
        ),
        (Some(2), Some(1)),
        "{ls}"
    );
    // D grew first (a seat more for each old level), then the levels changed: 1 alice and 3
    // bob requests still queued, none lost.
    let reqs_now = debug(admin, "requests").await;
    assert_eq!(reqs_now.as_array().unwrap().len(), 4, "{reqs_now}");
    // The new rules classify new requests: bob goes to "mid" now.
    let bob = tokio::spawn(get(p.addr, "/b2", Some("kb")));
    let mut held: Vec<_> = held
        .into_iter()
        .chain(up.take(2, STEP, "D grew").await)
        .collect();
    // Every seat is held (the catch-all over its new limit of 1, not preempted): when one of
    // its requests ends, the seat goes to "mid", under its limit with bob's request queued.
    let i = held
        .iter()
        .position(|h| h.path == "/b")
        .expect("a catch-all request held");
    held.swap_remove(i).release();
    let b2 = up.next(STEP, "bob's request at the mid level").await;
    assert_eq!(b2.path, "/b2");
    let bad = RELOAD_V2.replace(
        "priority_level = \"mid\"\nprecedence",
        "priority_level = \"nope\"\nprecedence",
    );
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{}\"\n{bad}{}",
        up.addr(),
        tenants(&[("alice", "ka"), ("bob", "kb")])
    );
    let e = fairlane_proxy::ProxyConfig::from_toml_str(&text).unwrap_err();
    assert_eq!(e.field, "flow_schema[1].priority_level", "{e}");
    // Retiring "mid" while it holds a seat is refused, and changes nothing.
    let e = p
        .handle
        .reload(reload_config(up.addr(), RELOAD_V1))
        .unwrap_err();
    assert!(e.to_string().contains("mid"), "{e}");
    eprintln!("refused reload: {e}");
    let ls = debug(admin, "priority_levels").await;
    assert_eq!(
        level(&ls, "high")["nominal_cl"],
        2,
        "the old config stays: {ls}"
    );
    held.push(b2);
    for h in held {
        h.release();
    }
    up.release_all();
    reqs.push(bob);
    let mut n = 0;
    for r in reqs {
        let (code, h, _) = r.await.unwrap();
        assert_eq!(code, 200, "queued across the reload, not dropped");
        n += 1;
        if h["x-fairlane-flow-schema"] == "bob-mid" {
            assert_eq!(h["x-fairlane-priority-level"], "mid");
        }
    }
    assert_eq!(n, 9);
    let (_, h, _) = get(p.addr, "/b3", Some("kb")).await;
    assert_eq!(h["x-fairlane-flow-schema"], "bob-mid");
    p.handle.shutdown();
}

fn proxy_bin(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_fairlane-proxy"))
        .args(args)
        .output()
        .expect("run fairlane-proxy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_levels_name_the_file_and_field_at_check_start_and_reload() {
    let good = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"127.0.0.1:9\"\n{RELOAD_V1}{}",
        tenants(&[("alice", "ka")])
    );
    let bad = [
        (
            good.replace(
                "shares = 1.0\n[[flow_schema]]",
                "shares = 0.0\n[[flow_schema]]",
            ),
            "priority_level[1].shares",
        ),
        (
            good.replace("priority_level = \"high\"", "priority_level = \"nope\""),
            "flow_schema[0].priority_level",
        ),
        (
            good.replace(
                "name = \"high\"\nshares = 1.0",
                "name = \"high\"\nshares = 1.0\nlendable_percent = 150.0",
            ),
            "priority_level[0].lendable_percent",
        ),
        (
            good.replace(
                "precedence = 10000\n",
                "precedence = 10000\nmatch = { method = \"GET\" }\n",
            ),
            "flow_schema",
        ),
        (good.replace("depth = 2", "depth = 1"), "scheduler.depth"),
    ];
    for (i, (text, field)) in bad.iter().enumerate() {
        let path = temp_file(&format!("levels/bad{i}.toml"), text);
        let file = path.display().to_string();
        for args in [vec!["--config", &file, "--check"], vec!["--config", &file]] {
            let out = proxy_bin(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&file) && err.contains(&format!("{field}:")),
                "{args:?}: {err}"
            );
            assert!(!err.contains("panicked"), "{err}");
        }
    }
    // A SIGHUP with a bad file keeps the old config and says why.
    let up = start_upstream().await;
    let path = temp_file(
        "levels/reload.toml",
        &good.replace("127.0.0.1:9", &up.addr().to_string()),
    );
    let p = ProxyProcess::start(&path);
    // Served first (as process.rs does): the binary installs its SIGHUP handler just after
    // printing its addresses.
    let (code, _, _) = get(p.addr, "/x?delay_ms=1", Some("ka")).await;
    assert_eq!(code, 200);
    std::fs::write(
        &path,
        bad[0].0.replace("127.0.0.1:9", &up.addr().to_string()),
    )
    .unwrap();
    p.signal("HUP");
    let log = p.log.clone();
    let file = path.display().to_string();
    eventually(STEP, "the reload refused, naming file and field", || {
        let (log, file) = (log.clone(), file.clone());
        async move {
            log.lock().unwrap().iter().any(|l| {
                l.contains("reload refused")
                    && l.contains(&file)
                    && l.contains("priority_level[1].shares")
            })
        }
    })
    .await;
    let (code, h, _) = get(p.addr, "/x?delay_ms=1", Some("ka")).await;
    assert_eq!(
        (code, &h["x-fairlane-priority-level"]),
        (200, &"high".parse().unwrap())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_levels() {
    need("chromium");
    let up = start_upstream().await;
    let p = start_proxy(reload_config(up.addr(), RELOAD_V1)).await;
    assert_eq!(get(p.addr, "/?delay_ms=1", Some("ka")).await.0, 200);
    let dom = chromium_dom(format!("http://{}/dashboard", p.admin)).await;
    for needle in [
        "data-level=\"high\"",
        "data-level=\"catch-all\"",
        "data-tenant=\"alice\"",
    ] {
        assert!(
            dom.contains(needle),
            "{needle:?} not in the rendered dashboard:\n{dom}"
        );
    }
    assert!(
        !dom.contains("<table id=\"levels\" hidden"),
        "the levels table shows"
    );
    p.handle.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_queue_timeout_is_a_503_naming_the_level() {
    let up = HeldUpstream::start().await;
    let levels = RELOAD_V1.replace(
        "name = \"catch-all\"\nshares = 1.0\n",
        "name = \"catch-all\"\nshares = 1.0\nqueue_timeout_ms = 100\n",
    );
    let p = start_proxy(reload_config(up.addr(), &levels)).await;
    let first = tokio::spawn(get(p.addr, "/b", Some("kb")));
    let held = up.next(STEP, "the catch-all's one seat").await;
    let (code, h, body) = get(p.addr, "/b", Some("kb")).await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("priority level \"catch-all\" (its queue timeout)"),
        "{body}"
    );
    assert!(h.contains_key("retry-after"));
    assert_eq!(h["x-fairlane-flow-schema"], "rest");
    // The high level is not behind it.
    let alice = tokio::spawn(get(p.addr, "/a", Some("ka")));
    up.next(STEP, "alice at the high level").await.release();
    assert_eq!(alice.await.unwrap().0, 200);
    held.release();
    assert_eq!(first.await.unwrap().0, 200);
    let ls = debug(p.admin, "priority_levels").await;
    assert_eq!(
        level(&ls, "catch-all")["rejected"]["queue_timeout"],
        1,
        "{ls}"
    );
    p.handle.shutdown();
}
