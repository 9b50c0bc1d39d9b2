//! `listen.workers` (issue 19): connections spread evenly over the proxy's single-threaded
//! runtimes, every one of them is served, and the runtimes' threads are gone once
//! `Proxy::run` has returned.

mod common;

use std::net::SocketAddr;

use common::*;
use fairlane_proxy::config::Workers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const KEY: &str = "kw";

/// The tests here start worker threads and count them: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Threads of this process named after the proxy's workers (`comm` keeps 15 bytes).
/// A config with `listen.workers = workers` over `upstream`.
fn with_workers(upstream: SocketAddr, workers: Workers) -> fairlane_proxy::ProxyConfig {
    let mut c = config(upstream, &tenants(&[("w", KEY)]));
    c.listen.workers = workers;
    c
}

fn worker_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|c| c.starts_with("fairlane-worker"))
                .count()
        })
        .unwrap_or(0)
}

/// One keep-alive GET on `s`; the status code.
async fn get_on(s: &mut TcpStream) -> u16 {
    let req = format!("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {KEY}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    // The upstream's `/` answers with a short body and Content-Length.
    loop {
        let n = tokio::time::timeout(STEP, s.read(&mut chunk))
            .await
            .expect("an answer within STEP")
            .unwrap();
        assert!(n > 0, "connection closed before the answer");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .expect("Content-Length");
            if buf.len() >= end + 4 + len {
                return text[9..12].parse().unwrap();
            }
        }
    }
}

/// Every connection reads end-of-stream (or an error: reset) within `STEP`.
async fn expect_closed(conns: &mut [TcpStream], why: &str) {
    for s in conns {
        let mut b = [0u8; 1];
        let n = tokio::time::timeout(STEP, s.read(&mut b))
            .await
            .expect("closed within STEP")
            .unwrap_or(0);
        assert_eq!(n, 0, "{why}");
    }
}

async fn open(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut conns = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        assert_eq!(get_on(&mut s).await, 200);
        conns.push(s);
    }
    conns
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_spread_evenly_and_the_workers_stop_with_run() {
    let _serial = SERIAL.lock().await;
    let up = start_upstream().await;
    let before = worker_threads();
    let p = start_proxy(with_workers(up.addr(), Workers::Count(3))).await;
    let mut conns = open(p.addr, 64).await;
    let admin = p.admin;
    eventually(STEP, "64 connections open", || async move {
        status(admin).await["connections"] == 64
    })
    .await;
    // Least-loaded hand-off: 64 over 3 runtimes is 22 + 21 + 21, unlike SO_REUSEPORT's hash.
    let open_now = |h: &fairlane_proxy::ProxyHandle| -> Vec<usize> {
        h.worker_connections().iter().map(|w| w.open).collect()
    };
    let mut spread = open_now(&p.handle);
    spread.sort();
    assert_eq!(spread, vec![21, 21, 22]);
    assert_eq!(worker_threads(), before + 3);
    // Every connection keeps working on its runtime (its upstream sockets are there too).
    for s in &mut conns {
        assert_eq!(get_on(s).await, 200);
    }
    // Closing some frees their places: the next ones go where there is room.
    let closed: Vec<_> = conns.drain(..10).collect();
    drop(closed);
    let handle = p.handle.clone();
    eventually(STEP, "54 connections left", || {
        let h = handle.clone();
        async move { h.worker_connections().iter().map(|w| w.open).sum::<usize>() == 54 }
    })
    .await;
    conns.extend(open(p.addr, 10).await);
    let spread = open_now(&p.handle);
    assert_eq!(spread.iter().sum::<usize>(), 64);
    let accepted: u64 = p
        .handle
        .worker_connections()
        .iter()
        .map(|w| w.accepted)
        .sum();
    assert_eq!(accepted, 74, "64 + the 10 that replaced the closed ones");
    let (lo, hi) = (spread.iter().min().unwrap(), spread.iter().max().unwrap());
    assert!(hi - lo <= 10, "refilled where there was room: {spread:?}");
    // A graceful shutdown closes the idle keep-alive connections on every runtime, `run`
    // returns, and the runtimes' threads have ended.
    p.handle.shutdown();
    tokio::time::timeout(STEP, p.task)
        .await
        .expect("run returns")
        .unwrap();
    assert_eq!(worker_threads(), before, "worker threads left behind");
    expect_closed(&mut conns, "connection closed by the drain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_runs_on_the_callers_runtime() {
    let _serial = SERIAL.lock().await;
    let up = start_upstream().await;
    let p = start_proxy(with_workers(up.addr(), Workers::Shared)).await;
    let _conns = open(p.addr, 4).await;
    assert!(p.handle.worker_connections().is_empty());
    p.handle.shutdown();
    tokio::time::timeout(STEP, p.task)
        .await
        .expect("run returns")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_run_stops_the_workers() {
    let _serial = SERIAL.lock().await;
    let up = start_upstream().await;
    let p = start_proxy(with_workers(up.addr(), Workers::Count(2))).await;
    let mut conns = open(p.addr, 2).await;
    p.task.abort();
    let _ = p.task.await;
    // The runtimes were told to end: their connections are dropped, so the sockets close.
    expect_closed(&mut conns, "connection dropped with its runtime").await;
    // Dropped, `run` cannot join them: they end on their own.
    eventually(STEP, "no worker threads left", || async {
        worker_threads() == 0
    })
    .await;
}
