//! The dashboard loads in headless Chromium (Debian's `chromium`, installed by
//! scripts/test-deps.sh) and shows the tenants with their live numbers.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_the_tenants_in_headless_chromium() {
    need("chromium");
    let up = start_upstream().await;
    let p = start_proxy(config(
        up.addr(),
        "[[tenant]]\nname = \"alice\"\nkeys = [\"ka\"]\n[[tenant]]\nname = \"bob\"\nweight = 2\nkeys = [\"kb\"]\n",
    ))
    .await;
    // Some traffic while the page is open, so rates and latencies are live.
    let t = fairlane_proxy_testkit::loadgen::Target {
        addr: p.addr,
        path: "/?delay_ms=5".into(),
        key: Some("ka".into()),
    };
    let load = tokio::spawn(async move {
        fairlane_proxy_testkit::loadgen::open(&t, 50.0, Duration::from_secs(6)).await
    });
    assert_eq!(get(p.addr, "/", Some("kb")).await.0, 200);
    let url = format!("http://{}/dashboard", p.admin);
    let dom = chromium_dom(url).await;
    for needle in [
        "data-tenant=\"alice\"",
        "data-tenant=\"bob\"",
        "scheduler sfq",
        "depth D = 8",
    ] {
        assert!(
            dom.contains(needle),
            "{needle:?} not in the rendered dashboard:\n{dom}"
        );
    }
    assert!(
        dom.contains("<div id=\"error\"></div>"),
        "the page reached /status: {dom}"
    );
    load.await.unwrap();
}
