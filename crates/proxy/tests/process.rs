//! The proxy binary as operators run it: SIGTERM drains, SIGHUP reloads, and an unmodified
//! upstream (Python's `http.server`).

mod common;

use std::time::{Duration, Instant};

use common::*;

fn config_text(upstream: std::net::SocketAddr, rest: &str) -> String {
    format!("[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{upstream}\"\n{rest}")
}

/// What [`get`] returns: status, headers and body.
type Reply = (u16, http::HeaderMap, String);

const TENANTS: &str = "[[tenant]]\nname = \"alice\"\nkeys = [\"ka\"]\n";

/// Wait until the proxy's stderr has a line containing `needle`.
async fn logged(p: &ProxyProcess, needle: &'static str) {
    let log = p.log.clone();
    eventually(STEP, needle, || {
        let log = log.clone();
        async move { log.lock().unwrap().iter().any(|l| l.contains(needle)) }
    })
    .await;
}

/// A proxy at depth 1 with `shutdown_grace_ms = grace_ms`, and `n` requests of alice: the
/// first held at the upstream (returned), the others queued behind it.
async fn one_held_rest_queued(
    name: &str,
    grace_ms: u64,
    n: usize,
) -> (
    HeldUpstream,
    ProxyProcess,
    TempFile,
    Vec<tokio::task::JoinHandle<Reply>>,
    Held,
) {
    let up = HeldUpstream::start().await;
    let path = temp_file(
        name,
        &config_text(
            up.addr(),
            &format!("[scheduler]\ndepth = 1\n[limits]\nshutdown_grace_ms = {grace_ms}\n{TENANTS}"),
        ),
    );
    let p = ProxyProcess::start(&path);
    let admin = p.admin;
    let reqs: Vec<_> = (0..n)
        .map(|_| tokio::spawn(get(p.addr, "/", Some("ka"))))
        .collect();
    let first = up.next(STEP, "the first request in flight").await;
    eventually(STEP, "1 in flight, the rest queued", || async move {
        let s = status(admin).await;
        s["in_flight"] == 1 && s["queued"] == n - 1
    })
    .await;
    (up, p, path, reqs, first)
}

/// The process exits with success within 10 s.
async fn exits_cleanly(mut p: ProxyProcess) {
    let code = tokio::task::spawn_blocking(move || p.wait_exit(Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(code.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_queued_and_in_flight_requests() {
    let (up, p, _path, reqs, first) = one_held_rest_queued("drain.toml", 10_000, 4).await;
    p.signal("TERM");
    logged(&p, "SIGTERM, draining").await;
    first.release();
    up.release_all();
    for r in reqs {
        assert_eq!(r.await.unwrap().0, 200, "drained, not dropped");
    }
    exits_cleanly(p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_deadline_answers_the_rest_with_503() {
    // The first is held at the upstream and never released: only the shutdown deadline can
    // answer it.
    let (_up, p, _path, reqs, _first) = one_held_rest_queued("deadline.toml", 300, 3).await;
    p.signal("TERM");
    // All three get 503, the in-flight one too: answered at the deadline (its upstream
    // never answers).
    for r in reqs {
        let (code, h, _) = r.await.unwrap();
        assert_eq!(code, 503);
        assert!(h.contains_key("retry-after"));
    }
    exits_cleanly(p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_without_dropping_requests() {
    let up = HeldUpstream::start().await;
    let path = temp_file(
        "reload.toml",
        &config_text(up.addr(), &format!("[scheduler]\ndepth = 2\n{TENANTS}")),
    );
    let p = ProxyProcess::start(&path);
    let admin = p.admin;
    assert_eq!(get(p.addr, "/", Some("kb")).await.0, 401);
    let long: Vec<_> = (0..4)
        .map(|_| tokio::spawn(get(p.addr, "/", Some("ka"))))
        .collect();
    // Two held at the upstream (D = 2) and two queued across the reload.
    let mut held = up.take(2, STEP, "two in flight before the reload").await;
    eventually(STEP, "2 in flight, 2 queued", || async move {
        let s = status(admin).await;
        s["in_flight"] == 2 && s["queued"] == 2
    })
    .await;
    std::fs::write(
        &path,
        config_text(
            up.addr(),
            &format!("[scheduler]\ndepth = 4\n{TENANTS}[[tenant]]\nname = \"bob\"\nweight = 3\nkeys = [\"kb\"]\n"),
        ),
    )
    .unwrap();
    p.signal("HUP");
    eventually(STEP, "reload applied", || async move {
        status(admin).await["reloads"] == 1
    })
    .await;
    let s = status(admin).await;
    assert_eq!(s["depth"], 4);
    assert_eq!(tenant(&s, "bob")["weight"], 3.0);
    // D = 4 applies to the running gate: the two queued requests are dispatched while the
    // first two are still held.
    held.extend(
        up.take(2, STEP, "the queued two, dispatched by D = 4")
            .await,
    );
    assert_eq!(up.counts().1, 4);
    held.into_iter().for_each(Held::release);
    up.release_all();
    assert_eq!(get(p.addr, "/", Some("kb")).await.0, 200);
    for r in long {
        assert_eq!(
            r.await.unwrap().0,
            200,
            "requests across the reload are served"
        );
    }
    // A broken file is refused and the old config kept.
    std::fs::write(&path, config_text(up.addr(), "[scheduler]\ndepth = 0\n")).unwrap();
    p.signal("HUP");
    let log = p.log.clone();
    eventually(STEP, "reload refused", || {
        let log = log.clone();
        async move {
            log.lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("reload refused") && l.contains("scheduler.depth"))
        }
    })
    .await;
    assert_eq!(get(p.addr, "/", Some("kb")).await.0, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_config_exits_2_naming_the_field() {
    let path = temp_file(
        "bad.toml",
        "[upstream]\naddr = \"127.0.0.1:1\"\n[[tenant]]\nname = \"a\"\nweight = 0\n",
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fairlane-proxy"))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("tenant[0].weight") && err.contains("bad.toml"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_an_unmodified_python_http_server() {
    let python = need("python3");
    let dir = temp_file("www/hello.txt", "hello, black box\n");
    let root = dir.parent().unwrap().to_path_buf();
    // Port 0: Python picks a free port and says which, so no other test can take it between
    // our choosing it and Python binding it.
    let mut server = std::process::Command::new(python)
        .args([
            "-u",
            "-m",
            "http.server",
            "--bind",
            "127.0.0.1",
            "0",
            "--directory",
        ])
        .arg(&root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("python3 -m http.server");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .expect("http.server's banner");
    // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    let port: u16 = line
        .split("port ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in http.server's banner {line:?}"));
    let upstream: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let end = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(upstream).is_err() {
        assert!(Instant::now() < end, "python http.server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let p = start_proxy(config(
        upstream,
        &format!("[scheduler]\nalgorithm = \"wfq\"\ndepth = 2\n{TENANTS}"),
    ))
    .await;
    let reqs: Vec<_> = (0..20)
        .map(|_| tokio::spawn(get(p.addr, "/hello.txt", Some("ka"))))
        .collect();
    for r in reqs {
        let (code, _, body) = r.await.unwrap();
        assert_eq!((code, body.as_str()), (200, "hello, black box\n"));
    }
    assert_eq!(
        get(p.addr, "/missing", Some("ka")).await.0,
        404,
        "the upstream's own answers pass through"
    );
    let _ = server.kill();
    let _ = server.wait();
}
