//! Shared helpers: an in-process proxy over an in-process upstream, the proxy binary as a
//! child process, and a small HTTP client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use fairlane_proxy::{Proxy, ProxyConfig, ProxyHandle};
use fairlane_proxy_testkit::upstream::UpstreamServer;
pub use fairlane_testkit::need;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

pub struct Running {
    pub addr: SocketAddr,
    /// The TLS listener's address (`[listen.tls]`), if any.
    pub tls: Option<SocketAddr>,
    pub admin: SocketAddr,
    pub handle: ProxyHandle,
    pub task: tokio::task::JoinHandle<()>,
}

/// How long any one step may take before the test fails with a message (generous: the
/// machine may be loaded; nothing waits for it unless something is wrong).
pub const STEP: Duration = Duration::from_secs(20);

/// `[[tenant]]` blocks: each `(name, key)` a tenant of weight 1 identified by that one key.
pub fn tenants(list: &[(&str, &str)]) -> String {
    list.iter()
        .map(|(name, key)| format!("[[tenant]]\nname = \"{name}\"\nkeys = [\"{key}\"]\n"))
        .collect()
}

/// Config text with `upstream` filled in and both listeners on port 0.
pub fn config(upstream: SocketAddr, rest: &str) -> ProxyConfig {
    let text = format!(
        "[listen]\naddr = \"127.0.0.1:0\"\nadmin = \"127.0.0.1:0\"\n[upstream]\naddr = \"{upstream}\"\n{rest}"
    );
    ProxyConfig::from_toml_str(&text).unwrap_or_else(|e| panic!("test config: {e}\n{text}"))
}

pub async fn start_proxy(config: ProxyConfig) -> Running {
    let proxy = Proxy::bind(config).await.expect("proxy binds");
    let (addr, admin, handle) = (proxy.local_addr(), proxy.admin_addr(), proxy.handle());
    let tls = proxy.tls_addr();
    let task = tokio::spawn(proxy.run());
    Running {
        addr,
        tls,
        admin,
        handle,
        task,
    }
}

/// A proxy in front of `upstream` with the config `rest` followed by the tenants `list`
/// (name, key).
pub async fn proxy_with(upstream: SocketAddr, rest: &str, list: &[(&str, &str)]) -> Running {
    start_proxy(config(upstream, &format!("{rest}\n{}", tenants(list)))).await
}

pub async fn start_upstream() -> UpstreamServer {
    UpstreamServer::start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("upstream starts")
}

pub fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// The longest a test waits for one HTTP answer.
pub const GET_LIMIT: Duration = Duration::from_secs(60);

/// GET `path` with an optional API key; (status, headers, body).
pub async fn get(
    addr: SocketAddr,
    path: &str,
    key: Option<&str>,
) -> (u16, http::HeaderMap, String) {
    let mut b = http::Request::get(format!("http://{addr}{path}"));
    if let Some(k) = key {
        b = b.header("authorization", format!("Bearer {k}"));
    }
    let answer = async {
        let resp = client()
            .request(b.body(Empty::new()).unwrap())
            .await
            .expect("an HTTP answer");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    };
    // Every answer the tests wait for comes from the proxy's own timers or a released
    // upstream well before this: hitting it means a request was lost.
    tokio::time::timeout(GET_LIMIT, answer)
        .await
        .unwrap_or_else(|_| panic!("no answer to GET {path} from {addr} within {GET_LIMIT:?}"))
}

/// `n` GETs of `path` at once, the `i`-th with the key `keys[i % keys.len()]`.
pub fn spawn_gets(
    addr: SocketAddr,
    path: &'static str,
    n: usize,
    keys: &'static [&'static str],
) -> Vec<tokio::task::JoinHandle<(u16, http::HeaderMap, String)>> {
    (0..n)
        .map(|i| tokio::spawn(get(addr, path, Some(keys[i % keys.len()]))))
        .collect()
}

/// Raise the open-files limit as far as allowed (the load generators hold hundreds of
/// sockets; the proxy binary raises its own), and fail unless it is at least `need`.
pub fn raise_fds(need: u64) {
    let fds = fairlane_proxy::server::raise_fd_limit().expect("getrlimit(RLIMIT_NOFILE)");
    assert!(
        fds >= need,
        "open-files limit {fds} after raising it to the hard limit: this test needs at least \
         {need}; raise the hard limit (ulimit -Hn)"
    );
}

/// The admin `/status` JSON.
pub async fn status(admin: SocketAddr) -> serde_json::Value {
    let (code, _, body) = get(admin, "/status", None).await;
    assert_eq!(code, 200);
    serde_json::from_str(&body).expect("status is JSON")
}

pub fn tenant<'a>(status: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    status["tenants"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("tenant {name} in {status}"))
}

/// Poll until `f` holds (or panic after `limit`).
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// The proxy binary as a child process, with its listening addresses read from stderr.
pub struct ProxyProcess {
    pub child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ProxyProcess {
    pub fn start(config_path: &std::path::Path) -> ProxyProcess {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_fairlane-proxy"));
        cmd.arg("--config").arg(config_path);
        Self::start_command(cmd)
    }

    /// Start the proxy with a command line of the caller's (e.g. under `prlimit`).
    pub fn start_command(mut cmd: Command) -> ProxyProcess {
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start fairlane-proxy");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let log2 = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(line.clone());
                }
                log2.lock().unwrap().push(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("proxy prints its addresses");
        let grab = |after: &str| -> SocketAddr {
            let i = line.find(after).expect("address in banner") + after.len();
            line[i..]
                .split([' ', '/', ';'])
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        ProxyProcess {
            addr: grab("listening on http://"),
            admin: grab("admin http://"),
            child,
            log,
        }
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(ok.success());
    }

    /// Resident set size in kB, from /proc.
    pub fn rss_kb(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        s.lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub fn wait_exit(&mut self, limit: Duration) -> std::process::ExitStatus {
        fairlane_testkit::wait_exit(&mut self.child, limit)
            .unwrap_or_else(|| panic!("proxy did not exit; log: {:?}", self.log.lock().unwrap()))
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A file written into a fresh directory of its own; the directory is removed when this
/// is dropped (also when the test panics), so tests leave nothing behind in `/tmp`.
pub struct TempFile {
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl std::ops::Deref for TempFile {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::path::Path> for TempFile {
    fn as_ref(&self) -> &std::path::Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for TempFile {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// Write `text` to `name` (which may have directories) under a fresh temporary directory.
pub fn temp_file(name: &str, text: &str) -> TempFile {
    let dir = tempfile::Builder::new()
        .prefix("fairlane-proxy-test-")
        .tempdir()
        .unwrap();
    let path = dir.path().join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    TempFile { path, _dir: dir }
}

/// A request the [`HeldUpstream`] is holding: it is answered (200, `x-saw-tenant` echoed)
/// when the test calls [`Held::release`] or drops it.
pub struct Held {
    /// Path and query as the upstream saw them.
    pub path: String,
    /// The `x-fairlane-tenant` header the proxy set, if any.
    pub tenant: Option<String>,
    release: tokio::sync::oneshot::Sender<()>,
}

impl Held {
    /// Answer it now.
    pub fn release(self) {
        let _ = self.release.send(());
    }
}

#[derive(Default)]
struct HoldState {
    /// Arrivals not yet taken by the test.
    waiting: std::collections::VecDeque<Held>,
    /// Answer every new arrival at once (after [`HeldUpstream::release_all`]).
    open: bool,
    /// Requests received, being served now, and most served at once.
    received: u64,
    active: u64,
    max_active: u64,
}

/// Serve HTTP/1.1 on a free loopback port, each connection with the service `make` builds.
/// Connections live in the returned task: aborting it closes the listener and all of them.
pub async fn serve_http1<F, S, B>(make: F) -> (SocketAddr, tokio::task::JoinHandle<()>)
where
    F: Fn() -> S + Send + 'static,
    S: hyper::service::Service<
            http::Request<hyper::body::Incoming>,
            Response = http::Response<B>,
            Error = std::convert::Infallible,
        > + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a test server binds");
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        while let Ok((stream, _)) = listener.accept().await {
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(io, make());
            conns.spawn(async move {
                let _ = conn.await;
            });
            // Finished connections leave the set as new ones come.
            while conns.try_join_next().is_some() {}
        }
    });
    (addr, task)
}

/// A controllable upstream: every request is held until the test releases it, so what is
/// in flight is known rather than guessed from sleeps. [`HeldUpstream::stop`] kills the
/// listener and every connection at once.
pub struct HeldUpstream {
    addr: SocketAddr,
    state: std::sync::Arc<std::sync::Mutex<HoldState>>,
    task: tokio::task::JoinHandle<()>,
}

impl HeldUpstream {
    /// Serve on a free loopback port.
    pub async fn start() -> HeldUpstream {
        let state = std::sync::Arc::new(std::sync::Mutex::new(HoldState::default()));
        let st = state.clone();
        let (addr, task) = serve_http1(move || {
            let st = st.clone();
            hyper::service::service_fn(move |req| hold(req, st.clone()))
        })
        .await;
        HeldUpstream { addr, state, task }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The next request to arrive (in arrival order); panics naming `what` if none arrives
    /// within `limit`.
    pub async fn next(&self, limit: Duration, what: &str) -> Held {
        let end = Instant::now() + limit;
        loop {
            if let Some(h) = self.state.lock().unwrap().waiting.pop_front() {
                return h;
            }
            assert!(
                Instant::now() < end,
                "timed out after {limit:?} waiting for a request at the upstream: {what}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The next `n` requests to arrive.
    pub async fn take(&self, n: usize, limit: Duration, what: &str) -> Vec<Held> {
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            out.push(
                self.next(limit, &format!("{what} ({i} of {n} arrived)"))
                    .await,
            );
        }
        out
    }

    /// Answer every request not yet taken with [`HeldUpstream::next`] and, from now on,
    /// every new one at once (taken ones are the test's to release).
    pub fn release_all(&self) {
        let held: Vec<_> = {
            let mut st = self.state.lock().unwrap();
            st.open = true;
            st.waiting.drain(..).collect()
        };
        held.into_iter().for_each(Held::release);
    }

    /// (received, being served now, most served at once).
    pub fn counts(&self) -> (u64, u64, u64) {
        let st = self.state.lock().unwrap();
        (st.received, st.active, st.max_active)
    }

    /// Requests arrived and not yet taken by [`HeldUpstream::next`].
    pub fn untaken(&self) -> usize {
        self.state.lock().unwrap().waiting.len()
    }

    /// Kill it: the listener and every connection close at once.
    pub fn stop(self) {
        self.task.abort();
    }
}

impl Drop for HeldUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn hold(
    req: http::Request<hyper::body::Incoming>,
    st: std::sync::Arc<std::sync::Mutex<HoldState>>,
) -> Result<http::Response<http_body_util::Full<Bytes>>, std::convert::Infallible> {
    let path = req
        .uri()
        .path_and_query()
        .map_or_else(|| "/".to_string(), |p| p.to_string());
    let tenant = req
        .headers()
        .get("x-fairlane-tenant")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let _ = req.into_body().collect().await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    {
        // Decided under the lock, so `release_all` cannot miss a request that arrives
        // while it runs.
        let mut s = st.lock().unwrap();
        s.received += 1;
        s.active += 1;
        s.max_active = s.max_active.max(s.active);
        if s.open {
            drop(tx); // answered at once below
        } else {
            s.waiting.push_back(Held {
                path,
                tenant: tenant.clone(),
                release: tx,
            });
        }
    }
    // Released, dropped by the test, or open: answer.
    let _ = rx.await;
    st.lock().unwrap().active -= 1;
    let mut r = http::Response::new(http_body_util::Full::new(Bytes::from_static(b"released\n")));
    if let Some(t) = tenant.and_then(|t| http::HeaderValue::from_str(&t).ok()) {
        r.headers_mut().insert("x-saw-tenant", t);
    }
    Ok(r)
}

/// A program `scripts/test-deps.sh` installed under the workspace's `target/test-deps`
/// (`bin/h2spec`, `venv/bin/python`): fail loudly if absent. `FAIRLANE_TEST_DEPS` names
/// another directory.
pub fn test_dep(rel: &str) -> std::path::PathBuf {
    let dir = std::env::var_os("FAIRLANE_TEST_DEPS")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-deps")
        });
    let p = dir.join(rel);
    assert!(
        p.is_file(),
        "{} is not installed: run scripts/test-deps.sh (scripts/test.sh does) before the tests",
        p.display()
    );
    p
}

/// A child process killed (and reaped) when dropped, also when the test panics.
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A keep-alive HTTP/1.1 client for load loops ([`get_work`]).
pub type LoadClient = Client<HttpConnector, Empty<Bytes>>;

/// A new [`LoadClient`].
pub fn load_client() -> LoadClient {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// One `GET /work` through `addr` as the tenant of `key`, body read to the end: its status,
/// or `None` if it failed or took longer than [`GET_LIMIT`].
pub async fn get_work(client: &LoadClient, addr: SocketAddr, key: &str) -> Option<u16> {
    let req = http::Request::get(format!("http://{addr}/work"))
        .header("authorization", format!("Bearer {key}"))
        .body(Empty::new())
        .ok()?;
    tokio::time::timeout(GET_LIMIT, async {
        let r = client.request(req).await.ok()?;
        let code = r.status().as_u16();
        r.into_body().collect().await.ok()?;
        Some(code)
    })
    .await
    .ok()
    .flatten()
}

/// The DOM of the page at `url` after headless Chromium ran its scripts for 4 s of virtual
/// time (Debian's `chromium`, installed by scripts/test-deps.sh).
pub async fn chromium_dom(url: String) -> String {
    let chromium = need("chromium");
    let profile = temp_file("chromium/.keep", "");
    let mut cmd = Command::new(chromium);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--virtual-time-budget=4000",
        "--timeout=20000",
    ])
    .arg(format!(
        "--user-data-dir={}",
        profile.parent().unwrap().display()
    ))
    .arg("--dump-dom")
    .arg(url);
    run_ok(cmd, "chromium").await
}

/// Run `cmd` to its end off the runtime's threads; its stdout, once it exited with status
/// 0 (else the test fails, showing its output as `what`'s).
pub async fn run_ok(mut cmd: Command, what: &str) -> String {
    let out = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .unwrap()
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
