//! Helpers of the `[cluster]` tests: a real `redis-server` on a free loopback port, an
//! upstream of fixed concurrency that keeps its own count of requests outstanding.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

use crate::common::need;
pub use fairlane_testkit::free_port;

/// A directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
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

/// A `redis-server` this test started (killed on drop).
pub struct Redis {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Redis {
    pub fn start(dir: &TempDir) -> Redis {
        let mut r = Redis {
            child: None,
            port: free_port(),
            dir: dir.0.clone(),
        };
        r.restart();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// (Re)start on the same port, no persistence; returns once it answers PING.
    pub fn restart(&mut self) {
        let child = Command::new(need("redis-server"))
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
    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().expect("running").id();
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// SIGKILL it (a crash, not a shutdown).
    pub fn kill(&mut self) {
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

/// An upstream with a fixed concurrency capacity: at most `capacity` requests served at
/// once, the rest wait in its own queue. Counts what it has outstanding (received, not yet
/// answered; its own count, not sampled: `max_outstanding` is its high-water mark) and
/// completions per tenant (by the `x-fairlane-tenant` header the proxy sets).
pub struct Capacity {
    pub addr: SocketAddr,
    pub outstanding: Arc<AtomicU64>,
    pub max_outstanding: Arc<AtomicU64>,
    completed: Arc<Vec<AtomicU64>>,
    task: tokio::task::JoinHandle<()>,
}

impl Capacity {
    /// Serve `capacity` requests at once, each for `service`; count completions of
    /// `tenants` (by name).
    pub async fn start(
        capacity: usize,
        service: Duration,
        tenants: &'static [&'static str],
    ) -> Capacity {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let sem = Arc::new(tokio::sync::Semaphore::new(capacity));
        let outstanding = Arc::new(AtomicU64::new(0));
        let max_outstanding = Arc::new(AtomicU64::new(0));
        let completed: Arc<Vec<AtomicU64>> =
            Arc::new(tenants.iter().map(|_| AtomicU64::new(0)).collect());
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
                                        .and_then(|t| tenants.iter().position(|x| *x == t));
                                    {
                                        let _permit = sem.acquire().await;
                                        tokio::time::sleep(service).await;
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

    /// Completions per tenant so far.
    pub fn counts(&self) -> Vec<u64> {
        self.completed.iter().map(|c| c.load(Relaxed)).collect()
    }

    /// Reset the high-water mark (after start-up, when the instances run on
    /// `scheduler.depth` until their first sync).
    pub fn reset_max(&self) {
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
