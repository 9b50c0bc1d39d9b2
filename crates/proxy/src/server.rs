//! The listeners, shared state, graceful shutdown and reload.
//!
//! Shutdown ([`ProxyHandle::shutdown`], SIGTERM in the binary): stop accepting, let every
//! connection finish its requests (queued ones are still dispatched) for up to
//! `limits.shutdown_grace_ms`; then answer whatever is still queued or in flight with 503 and
//! return. Reload ([`ProxyHandle::reload`], SIGHUP): tenants, keys, weights, caps, classes,
//! timeouts, the upstream address, a fixed depth and the priority levels' shares, limits and
//! flow schemas change in place without dropping a request; the scheduler (a level's
//! `algorithm` too) and the listen addresses need a restart (reported as warnings).

use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use fairlane_core::TenantId;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::config::{parse_addr, ConfigError, ProxyConfig};
use crate::conn::{AcceptBackoff, ConnTable};
use crate::gate::Gate;
use crate::metrics::Metrics;
use crate::respond::StreamSlots;
use crate::state::{settings, Peer};
use crate::status::Status;
use crate::tenant::Registry;

/// The proxy's shared state (defined in `state`; named here too for `cluster`).
pub(crate) use crate::state::Inner;

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
    /// The plaintext listener (`listen.addr`), if any.
    listener: Option<TcpListener>,
    /// The TLS listener (`[listen.tls]`), if any.
    tls_listener: Option<TcpListener>,
    admin: TcpListener,
}

/// Controls a running proxy from elsewhere (signal handlers, tests). Cloning is cheap.
#[derive(Clone)]
pub struct ProxyHandle {
    inner: Arc<Inner>,
}

/// Bind `addr` (named by `field` in errors).
async fn listen(field: &'static str, addr: SocketAddr) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|error| StartError::Bind { field, addr, error })
}

impl Proxy {
    /// Validate the config, read its TLS files, build the scheduler and bind the listeners.
    pub async fn bind(config: ProxyConfig) -> Result<Proxy, StartError> {
        config.validate()?;
        let addr = match config.listen.plain_addr() {
            Some(a) => Some(parse_addr("listen.addr", a)?),
            None => None,
        };
        let admin_addr = parse_addr("listen.admin", &config.listen.admin)?;
        let tls = match &config.listen.tls {
            Some(t) => Some((
                parse_addr("listen.tls.addr", &t.addr)?,
                crate::tls::Acceptor::new(t, config.listen.http2)?,
            )),
            None => None,
        };
        let gate = Gate::for_config(&config)?;
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
        let levels = Arc::new(crate::levels::Live::default());
        let settings = settings(config, &mut registry, &gate, &levels)?;
        let listener = match addr {
            Some(a) => Some(listen("listen.addr", a).await?),
            None => None,
        };
        let (tls_listener, tls) = match tls {
            Some((a, acceptor)) => (Some(listen("listen.tls.addr", a).await?), Some(acceptor)),
            None => (None, None),
        };
        let admin = listen("listen.admin", admin_addr).await?;
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
                tunnels: Default::default(),
                worker_loads,
                tls,
                levels,
            }),
            listener,
            tls_listener,
            admin,
        })
    }

    /// The proxy's address: the plaintext listener's, or the TLS listener's when there is
    /// no plaintext one.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .as_ref()
            .or(self.tls_listener.as_ref())
            .and_then(|l| l.local_addr().ok())
            .expect("a bound listener has an address")
    }

    /// The TLS listener's address (`[listen.tls]`), if there is one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_listener.as_ref().and_then(|l| l.local_addr().ok())
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
            tls_listener,
            admin,
        } = self;
        let background = Background::start(&inner, admin);
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
        let acceptor = Accept {
            inner: &inner,
            workers: workers.as_ref(),
            graceful: &graceful,
        };
        acceptor.run(listener, tls_listener).await;
        drain(&inner, graceful).await;
        inner.gate.close();
        drop(background);
        // What is still on the workers after the hard stop's deadline is dropped with them.
        if let Some(w) = workers {
            w.stop().await;
        }
    }
}

/// The tasks beside the listeners: the admin listener, the depth controller, the cluster
/// sync and the idle sweep; aborted when dropped.
struct Background {
    _tasks: Vec<AbortOnDrop>,
}

impl Background {
    fn start(inner: &Arc<Inner>, admin: TcpListener) -> Background {
        let mut tasks = vec![AbortOnDrop(tokio::spawn(crate::admin::serve(
            inner.clone(),
            admin,
        )))];
        if let Some(c) = inner.depth.clone() {
            tasks.push(AbortOnDrop(crate::depth::spawn(inner.gate.clone(), c)));
        }
        // Aborted when `run` returns or is dropped, so a stopped instance's lease lapses.
        if let Some(c) = inner.cluster.clone() {
            tasks.push(AbortOnDrop(tokio::spawn(crate::cluster::run(
                inner.clone(),
                c,
            ))));
        }
        // Idle connections (client and admin) are closed by a periodic sweep rather than a
        // timer per connection: nothing is paid per request.
        let sweep = inner.clone();
        tasks.push(AbortOnDrop(tokio::spawn(async move {
            let idle = || Duration::from_millis(sweep.settings().config.limits.idle_timeout_ms);
            tokio::join!(
                crate::conn::sweeper(&sweep.conns, idle),
                crate::conn::sweeper(&sweep.admin_conns, idle)
            );
        })));
        Background { _tasks: tasks }
    }
}

/// After the listeners closed: let connections finish within `limits.shutdown_grace_ms`,
/// then answer whatever is still queued or in flight with 503.
async fn drain(inner: &Arc<Inner>, graceful: hyper_util::server::graceful::GracefulShutdown) {
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
}

/// The accept loop of both client listeners.
struct Accept<'a> {
    inner: &'a Arc<Inner>,
    workers: Option<&'a crate::workers::Workers>,
    graceful: &'a hyper_util::server::graceful::GracefulShutdown,
}

/// The next connection on `listener` (never, if there is none).
async fn accept_on(listener: Option<&TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match listener {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

impl Accept<'_> {
    /// Accept on the plaintext and TLS listeners until the shutdown.
    async fn run(&self, plain: Option<TcpListener>, tls: Option<TcpListener>) {
        let inner = self.inner;
        let mut shutdown = inner.shutdown.subscribe();
        let mut backoff = AcceptBackoff::default();
        loop {
            let (accepted, on_tls) = tokio::select! {
                _ = shutdown.wait_for(|&s| s) => break,
                a = accept_on(plain.as_ref()) => (a, false),
                a = accept_on(tls.as_ref()) => (a, true),
            };
            match accepted {
                Ok((stream, peer)) => {
                    backoff.reset();
                    self.connection(stream, peer, on_tls);
                }
                Err(e) => {
                    // Out of file descriptors (or a connection reset before accept): close
                    // the connection idle the longest, back off, and say so once a second
                    // rather than once per attempt.
                    let field = if on_tls {
                        "listen.tls.addr"
                    } else {
                        "listen.addr"
                    };
                    let pause = inner.conns.accept_failed(&mut backoff, field, &e);
                    tokio::select! {
                        _ = shutdown.wait_for(|&s| s) => break,
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
            }
        }
    }

    /// Serve an accepted connection (`on_tls`: from the TLS listener) on a worker runtime.
    fn connection(&self, stream: TcpStream, peer: SocketAddr, on_tls: bool) {
        let inner = self.inner;
        // At the cap: the connection idle the longest was closed to make room, or this
        // one is closed at once (nothing idle to close).
        let Some(state) = inner.conns.admit(peer.ip()) else {
            return;
        };
        let _ = stream.set_nodelay(true);
        // Per-core: the socket leaves this runtime's reactor and is registered again by
        // the worker's (`client::Accepted::Std`).
        let (stream, worker) = match self.workers {
            None => (crate::client::Accepted::Tokio(stream), None),
            Some(_) => match stream.into_std() {
                Ok(s) => {
                    let i = crate::workers::least_loaded(&inner.worker_loads);
                    let load = &inner.worker_loads[i];
                    load.live.fetch_add(1, Relaxed);
                    load.accepted.fetch_add(1, Relaxed);
                    (crate::client::Accepted::Std(s), Some(i))
                }
                Err(_) => {
                    inner.conns.remove(&state);
                    return;
                }
            },
        };
        inner.metrics.accepted.fetch_add(1, Relaxed);
        let settings = inner.settings();
        let listen = &settings.config.listen;
        let limits = &settings.config.limits;
        let opts = crate::client::ServeOptions {
            header_timeout: Duration::from_millis(limits.header_timeout_ms),
            send_timeout: Duration::from_millis(limits.send_timeout_ms),
            http2: listen.http2,
            own_http1: listen.http1 == "own",
        };
        let tls = match on_tls {
            true => inner.tls.as_ref().map(|t| t.current()),
            false => None,
        };
        let peer = Arc::new(Peer::new(peer));
        let (watcher, stop) = (self.graceful.watcher(), inner.shutdown.subscribe());
        inner.metrics.connections.fetch_add(1, Relaxed);
        let counted = inner.clone();
        // The connection's whole task is `client::serve`'s future, made here and spawned
        // with no wrapper around it: a future moved into an async block is stored twice
        // in the task (rust-lang/rust#62958), and this one is most of a connection's
        // memory (issue 19). hyper is set up once the client has sent its first bytes.
        let task = crate::client::serve(
            stream,
            tls,
            inner.clone(),
            peer,
            opts,
            watcher,
            stop,
            state,
            move |state| {
                counted.conns.remove(state);
                counted.metrics.connections.fetch_sub(1, Relaxed);
                if let Some(i) = worker {
                    counted.worker_loads[i].live.fetch_sub(1, Relaxed);
                }
            },
        );
        match (self.workers, worker) {
            (Some(w), Some(i)) => w.spawn(i, task),
            _ => drop(tokio::spawn(task)),
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
        let (o, mut config) = (&old.config, config);
        let mut warnings = restart_warnings(o, &config);
        config.scheduler.algorithm = o.scheduler.algorithm.clone();
        config.scheduler.initial_estimate_ms = o.scheduler.initial_estimate_ms;
        warnings.extend(crate::levels::keep_for_restart(o, &mut config));
        let new_tls = config.listen.tls.clone();
        let mut registry = self
            .inner
            .registry
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // The levels first when D shrinks (the new levels fit it), after when it grows.
        let gate = &self.inner.gate;
        let levels_first = config.scheduler.depth < gate.depth();
        if levels_first {
            crate::levels::reload(gate, &config)?;
        }
        apply_tenants(gate, self.inner.depth.as_ref(), &config, &mut registry)?;
        let n = &config;
        // With [cluster] the sync task owns the depth.
        if o.scheduler.adaptive.is_none() && n.scheduler.adaptive.is_none() && o.cluster.is_none() {
            gate.set_depth(n.scheduler.depth).map_err(|e| ConfigError {
                file: None,
                field: "scheduler.depth".into(),
                reason: e.to_string(),
            })?;
        }
        if !levels_first {
            crate::levels::reload(gate, &config)?;
        }
        config.listen = o.listen.clone();
        config.cluster = o.cluster.clone();
        if o.scheduler.adaptive.is_some() != config.scheduler.adaptive.is_some() {
            config.scheduler.adaptive = o.scheduler.adaptive.clone();
        }
        let new = settings(config, &mut registry, gate, &self.inner.levels)?;
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
        // The certificate and key are read again (a renewal keeps their file names); a
        // file that cannot be used leaves the old certificate serving.
        if let (Some(acceptor), Some(tls)) = (&self.inner.tls, &new_tls) {
            if let Err(e) = acceptor.reload(tls, o.listen.http2) {
                warnings.push(format!("{e}; kept the old certificate"));
            }
        }
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

/// What a reload from `o` to `n` leaves as it was, for a restart to change.
fn restart_warnings(o: &ProxyConfig, n: &ProxyConfig) -> Vec<String> {
    let mut warnings = Vec::new();
    let tls_addr = |l: &crate::config::Listen| l.tls.as_ref().map(|t| t.addr.clone());
    if o.listen.addr != n.listen.addr
        || o.listen.admin != n.listen.admin
        || o.listen.http2 != n.listen.http2
        || o.listen.http1 != n.listen.http1
        || o.listen.workers != n.listen.workers
        || tls_addr(&o.listen) != tls_addr(&n.listen)
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
    if o.cluster != n.cluster {
        warnings.push("cluster: changes need a restart; kept the old [cluster]".to_string());
    }
    warnings
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
