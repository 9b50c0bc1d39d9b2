//! The listeners, shared state, graceful shutdown and reload.
//!
//! Shutdown ([`ProxyHandle::shutdown`], SIGTERM in the binary): stop accepting, let every
//! connection finish its requests (queued ones are still dispatched) for up to
//! `limits.shutdown_grace_ms`; then answer whatever is still queued or in flight with 503 and
//! return. Reload ([`ProxyHandle::reload`], SIGHUP): tenants, keys, weights, caps, classes,
//! timeouts, the upstream address and a fixed depth change in place without dropping a
//! request; the scheduler and the listen addresses need a restart (reported as warnings).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use fairlane_core::TenantId;
use http::uri::Authority;
use http::HeaderName;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{parse_addr, ConfigError, ProxyConfig};
use crate::conn::{AcceptBackoff, ActiveGuard, ConnTable};
use crate::forward::{ProxyBody, StreamSlots};
use crate::gate::Gate;
use crate::metrics::{Metrics, Status};
use crate::tenant::{Identifier, Registry};

/// Why the proxy could not start.
#[derive(Debug)]
pub enum StartError {
    /// The configuration is invalid.
    Config(ConfigError),
    /// A listener could not be bound.
    Bind {
        /// `listen.addr` or `listen.admin`.
        field: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        error: std::io::Error,
    },
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::Bind { field, addr, error } => {
                write!(f, "{field}: cannot listen on {addr}: {error}")
            }
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

/// What a reload can swap at once.
pub(crate) struct Settings {
    pub config: ProxyConfig,
    pub identifier: Identifier,
    pub authority: Authority,
    pub names: Vec<String>,
    /// `names` as `X-Fairlane-Tenant` values (`None`: not a valid header value).
    pub name_values: Vec<Option<http::HeaderValue>>,
    pub cost_header: Option<HeaderName>,
    /// Keep-alive connections to the upstream.
    pub pool: Arc<crate::pool::Pool>,
    /// The own path's upstream sockets (`listen.http1 = "own"`), used instead of `pool`.
    pub raw_pool: Option<Arc<crate::rawpool::RawPool>>,
}

/// A connection's copy of the settings (issue 19): read per request with one load of a
/// rarely written counter instead of the lock and the shared reference count that
/// [`Inner::settings`] costs, which both worker threads would bounce between their caches.
pub(crate) struct CachedSettings {
    version: u64,
    settings: Arc<Settings>,
}

pub(crate) struct Inner {
    pub gate: Gate,
    /// The adaptive depth controller, if the depth is adaptive.
    pub depth: Option<crate::depth::Controller>,
    pub metrics: Metrics,
    /// `[cluster]` membership, if any.
    pub cluster: Option<Arc<crate::cluster::Cluster>>,
    settings: RwLock<Arc<Settings>>,
    /// Bumped after every swap of `settings`: connections keep a copy and look here.
    settings_version: std::sync::atomic::AtomicU64,
    registry: Mutex<Registry>,
    pub started: Instant,
    shutdown: watch::Sender<bool>,
    pub hard_stop: watch::Sender<bool>,
    /// Client connections and their caps.
    pub(crate) conns: ConnTable,
    /// Admin connections: a reserve of their own, outside the client cap.
    pub(crate) admin_conns: ConnTable,
    /// Slots held by responses streaming past the buffer, per tenant.
    pub(crate) streaming: StreamSlots,
    /// Connections per worker runtime (`listen.workers`; empty when shared).
    pub(crate) worker_loads: crate::workers::Loads,
}

impl Inner {
    pub fn settings(&self) -> Arc<Settings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// A copy of the settings for a connection to keep (see [`CachedSettings`]).
    pub fn cached_settings(&self) -> CachedSettings {
        let version = self
            .settings_version
            .load(std::sync::atomic::Ordering::Acquire);
        CachedSettings {
            version,
            settings: self.settings(),
        }
    }

    /// The settings now, through a connection's copy: replaced only after a reload.
    pub fn fresh<'c>(&self, c: &'c mut CachedSettings) -> &'c Arc<Settings> {
        if self
            .settings_version
            .load(std::sync::atomic::Ordering::Acquire)
            != c.version
        {
            *c = self.cached_settings();
        }
        &c.settings
    }

    pub fn status(&self) -> Status {
        let names = self.settings().names.clone();
        let mut status = self.metrics.status(
            &names,
            &crate::metrics::GateSnapshot::of(&self.gate, names.len()),
            self.started.elapsed().as_secs_f64(),
        );
        status.cluster = self.cluster.as_ref().map(|c| c.status(self.gate.depth()));
        if let Some(c) = &status.cluster {
            // φ as configured; the cluster's effective weight is in `cluster.tenants`.
            c.show_configured_weights(&mut status.tenants);
        }
        status
    }
}

fn pool(config: &ProxyConfig, authority: &Authority) -> crate::pool::Pool {
    crate::pool::Pool::new(
        authority.clone(),
        Duration::from_millis(config.upstream.connect_timeout_ms),
        Duration::from_secs(30),
        config.scheduler.depth.max(64) * 2,
    )
}

fn settings(config: ProxyConfig, registry: &mut Registry) -> Result<Settings, ConfigError> {
    let identifier = Identifier::new(&config, registry);
    let authority = config.upstream_authority()?;
    let cost_header = config
        .upstream
        .cost_header
        .as_ref()
        .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok());
    Ok(Settings {
        pool: Arc::new(pool(&config, &authority)),
        raw_pool: (config.listen.http1 == "own").then(|| {
            Arc::new(crate::rawpool::RawPool::new(
                authority.clone(),
                Duration::from_millis(config.upstream.connect_timeout_ms),
                Duration::from_secs(30),
                config.scheduler.depth.max(64) * 2,
                // One idle stack per worker runtime: a socket stays with the reactor that
                // registered it.
                config.listen.workers.runtimes().unwrap_or(1),
            ))
        }),
        identifier,
        authority,
        names: registry.names().to_vec(),
        name_values: registry
            .names()
            .iter()
            .map(|n| http::HeaderValue::from_str(n).ok())
            .collect(),
        cost_header,
        config,
    })
}

/// Apply per-tenant weights, caps and targets to the gate.
fn apply_tenants(
    gate: &Gate,
    depth: Option<&crate::depth::Controller>,
    config: &ProxyConfig,
    registry: &mut Registry,
) -> Result<(), ConfigError> {
    for (i, t) in config.tenants.iter().enumerate() {
        let id = registry.intern(&t.name);
        gate.set_weight(id, t.weight).map_err(|e| ConfigError {
            file: None,
            field: format!("tenant[{i}].weight"),
            reason: e.to_string(),
        })?;
        gate.set_tenant_cap(id, t.max_queued);
        crate::depth::set_target(gate, depth, id, t.target_ms.map(|ms| ms / 1000.0)).map_err(
            |e| ConfigError {
                file: None,
                field: format!("tenant[{i}].target_ms"),
                reason: e,
            },
        )?;
    }
    gate.set_caps(
        config.limits.max_queued,
        config.limits.max_queued_per_tenant,
    );
    Ok(())
}

/// A bound proxy, ready to [`run`](Proxy::run).
pub struct Proxy {
    inner: Arc<Inner>,
    listener: TcpListener,
    admin: TcpListener,
}

/// Controls a running proxy from elsewhere (signal handlers, tests). Cloning is cheap.
#[derive(Clone)]
pub struct ProxyHandle {
    inner: Arc<Inner>,
}

impl Proxy {
    /// Validate the config, build the scheduler and bind both listeners.
    pub async fn bind(config: ProxyConfig) -> Result<Proxy, StartError> {
        config.validate()?;
        let addr = parse_addr("listen.addr", &config.listen.addr)?;
        let admin_addr = parse_addr("listen.admin", &config.listen.admin)?;
        let s = &config.scheduler;
        // Core owns the preset → scheduler step; the proxy never knows costs up front.
        let sched = fairlane_core::Config::for_executor(
            &s.algorithm,
            s.depth,
            s.initial_estimate_ms / 1000.0,
            false,
        )
        .map_err(|e| ConfigError {
            file: None,
            field: "scheduler.algorithm".into(),
            reason: crate::config::core_reason(e),
        })?;
        let gate = Gate::new(
            &sched,
            s.depth,
            config.limits.max_queued,
            config.limits.max_queued_per_tenant,
        )
        .map_err(|e| ConfigError {
            file: None,
            field: "scheduler".into(),
            reason: e.to_string(),
        })?;
        let depth = crate::depth::controller(&config).map_err(|e| ConfigError {
            file: None,
            field: "scheduler.adaptive".into(),
            reason: e,
        })?;
        if let Some(c) = &depth {
            let d = c.lock().unwrap_or_else(|e| e.into_inner()).depth();
            gate.set_depth(d).map_err(|e| ConfigError {
                file: None,
                field: "scheduler.depth".into(),
                reason: e.to_string(),
            })?;
        }
        let mut registry = Registry::default();
        apply_tenants(&gate, depth.as_ref(), &config, &mut registry)?;
        let cluster = config.cluster.clone().map(crate::cluster::Cluster::new);
        let max_conns = max_connections(&config);
        let conns = ConnTable::new(max_conns, config.limits.max_connections_per_ip);
        let admin_conns = ConnTable::new(config.limits.admin_connections, 0);
        let worker_loads: crate::workers::Loads =
            (0..config.listen.workers.runtimes().unwrap_or(0))
                .map(|_| crate::workers::Load::default())
                .collect();
        let settings = settings(config, &mut registry)?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|error| StartError::Bind {
                field: "listen.addr",
                addr,
                error,
            })?;
        let admin = TcpListener::bind(admin_addr)
            .await
            .map_err(|error| StartError::Bind {
                field: "listen.admin",
                addr: admin_addr,
                error,
            })?;
        Ok(Proxy {
            inner: Arc::new(Inner {
                gate,
                depth,
                metrics: Metrics::default(),
                cluster,
                settings: RwLock::new(Arc::new(settings)),
                settings_version: std::sync::atomic::AtomicU64::new(0),
                registry: Mutex::new(registry),
                started: Instant::now(),
                shutdown: watch::Sender::new(false),
                hard_stop: watch::Sender::new(false),
                conns,
                admin_conns,
                streaming: StreamSlots::default(),
                worker_loads,
            }),
            listener,
            admin,
        })
    }

    /// The proxy's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin
            .local_addr()
            .expect("bound listener has an address")
    }

    /// A handle for shutdown and reload.
    pub fn handle(&self) -> ProxyHandle {
        ProxyHandle {
            inner: self.inner.clone(),
        }
    }

    /// Serve until [`ProxyHandle::shutdown`] and the drain that follows complete.
    pub async fn run(self) {
        let Proxy {
            inner,
            listener,
            admin,
        } = self;
        let admin_task = tokio::spawn(crate::admin::serve(inner.clone(), admin));
        let depth_task = crate::depth::spawn(inner.clone());
        // Aborted when `run` returns or is dropped, so a stopped instance's lease lapses.
        let _cluster_task = inner
            .cluster
            .clone()
            .map(|c| AbortOnDrop(tokio::spawn(crate::cluster::run(inner.clone(), c))));
        // Idle connections (client and admin) are closed by a periodic sweep rather than a
        // timer per connection: nothing is paid per request.
        let sweep_task = {
            let inner = inner.clone();
            tokio::spawn(async move {
                let idle = || Duration::from_millis(inner.settings().config.limits.idle_timeout_ms);
                tokio::join!(
                    crate::conn::sweeper(&inner.conns, idle),
                    crate::conn::sweeper(&inner.admin_conns, idle)
                );
            })
        };
        // `listen.workers`: connections go to single-threaded runtimes of their own; if they
        // cannot be started, to the caller's runtime (said once).
        let workers = match inner.worker_loads.len() {
            0 => None,
            n => match crate::workers::Workers::start(n) {
                Ok(w) => Some(w),
                Err(e) => {
                    eprintln!("fairlane-proxy: listen.workers: cannot start {n} runtimes ({e}); serving on the caller's runtime");
                    None
                }
            },
        };
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = inner.shutdown.subscribe();
        let http2 = inner.settings().config.listen.http2;
        let own_http1 = inner.settings().config.listen.http1 == "own";
        let mut backoff = AcceptBackoff::default();
        loop {
            let accepted = tokio::select! {
                _ = shutdown.wait_for(|&s| s) => break,
                a = listener.accept() => a,
            };
            let (stream, peer) = match accepted {
                Ok(a) => {
                    backoff.reset();
                    a
                }
                Err(e) => {
                    // Out of file descriptors (or a connection reset before accept): close
                    // the connection idle the longest, back off, and say so once a second
                    // rather than once per attempt.
                    inner.conns.accept_errors.fetch_add(1, Relaxed);
                    if crate::conn::out_of_fds(&e) {
                        inner.conns.evict_idle();
                    }
                    let pause = backoff.failed("listen.addr", &e);
                    tokio::select! {
                        _ = shutdown.wait_for(|&s| s) => break,
                        _ = tokio::time::sleep(pause) => continue,
                    }
                }
            };
            // At the cap: the connection idle the longest was closed to make room, or this
            // one is closed at once (nothing idle to close).
            let Some(state) = inner.conns.admit(peer.ip()) else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            // Per-core: the socket leaves this runtime's reactor and is registered again
            // by the worker's (`conn::Accepted::Std`).
            let (stream, worker) = match &workers {
                None => (crate::conn::Accepted::Tokio(stream), None),
                Some(_) => match stream.into_std() {
                    Ok(s) => {
                        let i = crate::workers::least_loaded(&inner.worker_loads);
                        let load = &inner.worker_loads[i];
                        load.live.fetch_add(1, Relaxed);
                        load.accepted.fetch_add(1, Relaxed);
                        (crate::conn::Accepted::Std(s), Some(i))
                    }
                    Err(_) => {
                        inner.conns.remove(&state);
                        continue;
                    }
                },
            };
            inner.metrics.accepted.fetch_add(1, Relaxed);
            let settings = inner.settings();
            let limits = &settings.config.limits;
            let opts = crate::conn::ServeOptions {
                header_timeout: Duration::from_millis(limits.header_timeout_ms),
                send_timeout: Duration::from_millis(limits.send_timeout_ms),
                http2,
            };
            let conn_inner = inner.clone();
            let conn_state = state.clone();
            let peer = Arc::new(crate::forward::Peer::new(peer));
            let own = own_http1.then(|| crate::conn::Own {
                inner: inner.clone(),
                peer: peer.clone(),
            });
            let service = service_fn(move |req| {
                let inner = conn_inner.clone();
                let peer = peer.clone();
                // The connection is busy (not evictable, no idle timeout) from here until
                // the response body has been written or dropped.
                let guard = ActiveGuard::new(conn_state.clone());
                // Boxed: hyper keeps a `Box<Option<this future>>` per connection for its
                // whole life, idle or not; boxed, that is a pointer, and the request's
                // state is allocated only while a request is in progress (issue 19).
                let handle = Box::pin(crate::forward::handle(inner, req, peer));
                async move {
                    let resp = handle.await;
                    Ok::<_, Infallible>(resp.map(|body| Tracked {
                        body,
                        _guard: guard,
                    }))
                }
            });
            let (watcher, stop) = (graceful.watcher(), inner.shutdown.subscribe());
            inner.metrics.connections.fetch_add(1, Relaxed);
            let counted = inner.clone();
            // The connection's whole task is `conn::serve`'s future, made here and spawned
            // with no wrapper around it: a future moved into an async block is stored twice
            // in the task (rust-lang/rust#62958), and this one is most of a connection's
            // memory (issue 19). hyper is set up once the client has sent its first bytes.
            let task = crate::conn::serve(
                stream,
                service,
                opts,
                watcher,
                stop,
                state,
                own,
                move |state| {
                    counted.conns.remove(state);
                    counted.metrics.connections.fetch_sub(1, Relaxed);
                    if let Some(i) = worker {
                        counted.worker_loads[i].live.fetch_sub(1, Relaxed);
                    }
                },
            );
            match (&workers, worker) {
                (Some(w), Some(i)) => w.spawn(i, task),
                _ => drop(tokio::spawn(task)),
            }
        }
        drop(listener);
        let grace = Duration::from_millis(inner.settings().config.limits.shutdown_grace_ms);
        let drained = tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_ok();
        if !drained {
            // Deadline: whatever is queued or in flight is answered 503 now.
            inner.gate.close();
            inner.hard_stop.send_replace(true);
            let deadline = Instant::now() + Duration::from_secs(2);
            while inner.metrics.connections.load(Relaxed) > 0 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        inner.gate.close();
        depth_task.abort();
        sweep_task.abort();
        admin_task.abort();
        // What is still on the workers after the hard stop's deadline is dropped with them.
        if let Some(w) = workers {
            w.stop().await;
        }
    }
}

impl ProxyHandle {
    /// Begin a graceful shutdown (idempotent); [`Proxy::run`] returns when it is done.
    pub fn shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Apply a new configuration without dropping requests. Returns warnings for the parts
    /// that need a restart (and were left as they are).
    pub fn reload(&self, config: ProxyConfig) -> Result<Vec<String>, ConfigError> {
        config.validate()?;
        let old = self.inner.settings();
        let mut warnings = Vec::new();
        let (o, n) = (&old.config, &config);
        if o.listen.addr != n.listen.addr
            || o.listen.admin != n.listen.admin
            || o.listen.http2 != n.listen.http2
            || o.listen.http1 != n.listen.http1
            || o.listen.workers != n.listen.workers
        {
            warnings.push("listen: changes need a restart; kept the old listeners".to_string());
        }
        if o.scheduler.algorithm != n.scheduler.algorithm
            || o.scheduler.initial_estimate_ms != n.scheduler.initial_estimate_ms
        {
            warnings.push("scheduler.algorithm / initial_estimate_ms: changes need a restart; kept the old scheduler".to_string());
        }
        if o.scheduler.adaptive.is_some() != n.scheduler.adaptive.is_some() {
            warnings.push(
                "scheduler.adaptive: switching between fixed and adaptive depth needs a restart"
                    .to_string(),
            );
        }
        let mut registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        apply_tenants(
            &self.inner.gate,
            self.inner.depth.as_ref(),
            &config,
            &mut registry,
        )?;
        if o.cluster != n.cluster {
            warnings.push("cluster: changes need a restart; kept the old [cluster]".to_string());
        }
        // With [cluster] the sync task owns the depth.
        if o.scheduler.adaptive.is_none() && n.scheduler.adaptive.is_none() && o.cluster.is_none() {
            self.inner
                .gate
                .set_depth(n.scheduler.depth)
                .map_err(|e| ConfigError {
                    file: None,
                    field: "scheduler.depth".into(),
                    reason: e.to_string(),
                })?;
        }
        let mut config = config;
        config.listen = o.listen.clone();
        config.scheduler.algorithm = o.scheduler.algorithm.clone();
        config.scheduler.initial_estimate_ms = o.scheduler.initial_estimate_ms;
        config.cluster = o.cluster.clone();
        if o.scheduler.adaptive.is_some() != config.scheduler.adaptive.is_some() {
            config.scheduler.adaptive = o.scheduler.adaptive.clone();
        }
        let new = settings(config, &mut registry)?;
        self.inner
            .conns
            .max
            .store(max_connections(&new.config).max(1), Relaxed);
        self.inner
            .conns
            .max_per_ip
            .store(new.config.limits.max_connections_per_ip, Relaxed);
        *self
            .inner
            .settings
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Arc::new(new);
        self.inner
            .settings_version
            .fetch_add(1, std::sync::atomic::Ordering::Release);
        self.inner.metrics.reloads.fetch_add(1, Relaxed);
        Ok(warnings)
    }

    /// The same document as `/status`.
    pub fn status(&self) -> Status {
        self.inner.status()
    }

    /// Client connections on each worker runtime (`listen.workers`), in worker order;
    /// empty when connections run on the caller's runtime (`"shared"`).
    pub fn worker_connections(&self) -> Vec<WorkerConnections> {
        self.inner
            .worker_loads
            .iter()
            .map(|l| WorkerConnections {
                open: l.live.load(Relaxed),
                accepted: l.accepted.load(Relaxed),
            })
            .collect()
    }

    /// The id a tenant name has (for tests and tools).
    pub fn tenant_id(&self, name: &str) -> Option<TenantId> {
        let reg = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        reg.names()
            .iter()
            .position(|n| n == name)
            .map(|i| TenantId(i as u64))
    }
}

/// One worker runtime's client connections ([`ProxyHandle::worker_connections`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerConnections {
    /// Open now.
    pub open: usize,
    /// Handed to it since the start.
    pub accepted: u64,
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body that keeps its connection marked busy until it is written or dropped.
struct Tracked {
    body: ProxyBody,
    _guard: ActiveGuard,
}

impl http_body::Body for Tracked {
    type Data = bytes::Bytes;
    type Error = crate::forward::BoxError;
    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        std::pin::Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }
    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The client connection cap in force: `limits.max_connections` (0 = no cap of its own),
/// always kept below the open-files limit minus a reserve for the admin listener, the
/// upstream connections (in flight and pooled) and the process's own files, so a flood of
/// clients can never take the descriptors `/metrics` and the upstream need.
pub(crate) fn max_connections(config: &ProxyConfig) -> usize {
    let d = config
        .scheduler
        .adaptive
        .as_ref()
        .map_or(config.scheduler.depth, |a| {
            a.max.max(config.scheduler.depth)
        });
    let reserve = config.limits.admin_connections + 2 * d.max(64) + d + 64;
    let by_fds = fd_limit()
        .map(|n| (n as usize).saturating_sub(reserve).max(1))
        .unwrap_or(usize::MAX);
    match config.limits.max_connections {
        0 => by_fds,
        n => n.min(by_fds),
    }
}

/// The soft open-files limit, if it can be read.
#[allow(unsafe_code)]
pub fn fd_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid pointer to a local struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
    Some(r.rlim_cur as u64)
}

/// Raise the soft open-files limit to the hard limit (a proxy holding 10,000 client
/// connections needs more than the common default of 1024). Returns the new soft limit.
#[allow(unsafe_code)]
pub fn raise_fd_limit() -> Option<u64> {
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return None;
        }
        if r.rlim_cur < r.rlim_max {
            let want = libc::rlimit {
                rlim_cur: r.rlim_max,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &want) == 0 {
                r.rlim_cur = r.rlim_max;
            }
        }
        #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 everywhere
        Some(r.rlim_cur as u64)
    }
}
