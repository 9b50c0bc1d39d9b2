//! # fairlane-pg
//!
//! `fairlane pg`: seeds/003 (Das et al., VLDB '14) on a real database. A PostgreSQL
//! connection pooler (protocol v3, transaction or session pooling, like PgBouncer) whose
//! server connections are handed out by a fairlane scheduler: largest deficit first with
//! CPU reservations, or any core preset (SFQ(D), WFQᴱ, 2DFQᴱ, DRR, FIFO). Each
//! transaction's cost is its backend's CPU time (`/proc/<pid>/schedstat`'s counter, read
//! through the backend's CPU clock) when the server runs on this host, and §3's metering (CPU, Delay, CPU_eff, violations) is served
//! on `/metrics`, `/status` and `/dashboard`. docs/pg.md has the deployment.
//!
//! Modules: `config` (pg.toml), `wire` (the protocol's server side), `scram` (checking
//! client passwords), `server` (a logged-in server connection), `pool` (idle connections
//! per (database, role), D open at most), `sched` (the gate, tenants and meter), `login`,
//! `session` and `relay` (a client's life), `admin` (metrics, status, dashboard).

#![deny(unsafe_code)]

mod admin;
pub mod config;
mod handoff;
mod login;
mod pool;
mod prorate;
mod relay;
pub mod sched;
pub mod scram;
mod server;
mod session;
pub mod wire;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

pub use config::{ConfigError, PgConfig};

use config::Metering;
use handoff::Handoffs;
use login::CancelSlot;
use pool::Pools;
use sched::Scheduling;
use scram::Verifier;
use server::{ServerConn, Target};

/// What every connection task shares.
pub(crate) struct Shared {
    config: PgConfig,
    sched: Arc<Scheduling>,
    pools: Arc<Pools>,
    verifiers: HashMap<String, Verifier>,
    cancels: Mutex<HashMap<(i32, i32), CancelSlot>>,
    clients: AtomicUsize,
    /// Waiters granted a seat, for the releasing transaction to start (transaction mode).
    handoffs: Arc<Handoffs>,
}

impl Shared {
    fn register_cancel(&self, key: (i32, i32)) -> CancelSlot {
        let slot = CancelSlot::default();
        self.cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, slot.clone());
        slot
    }

    fn unregister_cancel(&self, key: (i32, i32)) {
        self.cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
    }

    /// A client's cancel request: forwarded to the backend its session holds now, if any.
    async fn cancel(&self, pid: i32, secret: i32) {
        let slot = self
            .cancels
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(pid, secret))
            .cloned();
        let target = slot.and_then(|s| s.get());
        if let Some((spid, ssecret)) = target {
            let _ = ServerConn::cancel(&self.pools.target().addr, spid, ssecret).await;
        }
    }
}

/// Why the pooler did not start.
#[derive(Debug)]
pub enum StartError {
    /// The configuration (or the scheduler built from it) is invalid.
    Config(ConfigError),
    /// A listener could not be bound.
    Bind(String, std::io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => e.fmt(f),
            StartError::Bind(what, e) => write!(f, "cannot listen on {what}: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

/// A running pooler (on the caller's tokio runtime). Dropping it stops accepting.
#[derive(Debug)]
pub struct Pooler {
    addr: SocketAddr,
    admin: Option<SocketAddr>,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").finish_non_exhaustive()
    }
}

fn schedstat_visible() -> bool {
    std::path::Path::new("/proc/self/schedstat").exists()
}

impl Pooler {
    /// Bind the listeners and start serving. Must be called inside a tokio runtime.
    pub async fn start(config: PgConfig) -> Result<Pooler, StartError> {
        config.validate().map_err(StartError::Config)?;
        let sched = Scheduling::new(&config)
            .map_err(|e| StartError::Config(ConfigError::new("scheduler", e)))?;
        let local = matches!(
            config.server.host.as_str(),
            "127.0.0.1" | "localhost" | "::1"
        );
        let schedstat = match config.server.metering {
            Metering::Schedstat => true,
            Metering::Elapsed => false,
            Metering::Auto => local && schedstat_visible(),
        };
        let target = Target {
            addr: format!("{}:{}", config.server.host, config.server.port),
            timeout: Duration::from_millis(config.server.connect_timeout_ms),
            schedstat,
        };
        let listener = TcpListener::bind(&config.listen.addr)
            .await
            .map_err(|e| StartError::Bind(config.listen.addr.clone(), e))?;
        let admin = if config.listen.admin.is_empty() {
            None
        } else {
            Some(
                TcpListener::bind(&config.listen.admin)
                    .await
                    .map_err(|e| StartError::Bind(config.listen.admin.clone(), e))?,
            )
        };
        let verifiers = config
            .auth
            .users
            .iter()
            .map(|u| (u.user.clone(), Verifier::new(&u.password)))
            .collect();
        let shared = Arc::new(Shared {
            pools: Pools::new(config.pool.max_open(), target),
            sched: Arc::new(sched),
            verifiers,
            cancels: Mutex::new(HashMap::new()),
            clients: AtomicUsize::new(0),
            handoffs: Arc::default(),
            config,
        });
        let (stop, stopped) = watch::channel(false);
        let addr = listener
            .local_addr()
            .map_err(|e| StartError::Bind("listen.addr".into(), e))?;
        let admin_addr = admin.as_ref().and_then(|l| l.local_addr().ok());
        if let Some(l) = admin {
            tokio::spawn(admin::serve(shared.clone(), l, stopped.clone()));
        }
        tokio::spawn(keep_a_timer(
            Duration::from_millis(shared.config.limits.queue_timeout_ms),
            stopped.clone(),
        ));
        tokio::spawn(accept(shared.clone(), listener, stopped));
        Ok(Pooler {
            addr,
            admin: admin_addr,
            shared,
            stop,
        })
    }

    /// The clients' address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The admin address (`/metrics`, `/status`, `/dashboard`), if any.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin
    }

    /// `/status` as JSON.
    pub fn status(&self) -> serde_json::Value {
        admin::status(&self.shared)
    }

    /// `/metrics` as Prometheus text.
    pub fn metrics(&self) -> String {
        admin::metrics(&self.shared)
    }

    /// Server connections (open, idle) now.
    pub fn server_connections(&self) -> (usize, usize) {
        self.shared.pools.counts()
    }

    /// Stop accepting clients and close every waiting transaction's wait (SQLSTATE 57P01).
    pub fn stop(&self) {
        let _ = self.stop.send(true);
        self.shared.sched.gate().close();
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Keep one timer armed sooner than any transaction's queue timeout. Tokio wakes its
/// driver (an eventfd write, then an extra `epoll_wait`) whenever a new timer is due before
/// every armed one; with this one always due first, a waiting transaction's timeout is
/// only put in the timer wheel.
async fn keep_a_timer(queue_timeout: Duration, mut stopped: watch::Receiver<bool>) {
    let period = queue_timeout.clamp(Duration::from_millis(1), Duration::from_secs(1)) / 2;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = stopped.changed() => return,
        }
    }
}

/// Accept clients until stopped; then every client's task is aborted (its server
/// connection's open transaction rolls back on the server as the connection closes). The
/// client tasks are held in a [`JoinSet`] rather than each watching the stop signal, so a
/// client's wake-ups poll nothing but its own sockets.
async fn accept(shared: Arc<Shared>, listener: TcpListener, mut stopped: watch::Receiver<bool>) {
    let mut clients = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("fairlane pg: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = clients.join_next(), if !clients.is_empty() => continue,
            _ = stopped.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        clients.spawn(client(shared.clone(), stream, peer));
    }
}

/// A connected client, counted while its task lives (aborted too).
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Relaxed);
        Counted(n)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

/// One connected client's task: its login, then its session. The task's future itself, so
/// that each wake-up resumes one state machine less.
async fn client(shared: Arc<Shared>, stream: tokio::net::TcpStream, peer: SocketAddr) {
    let _counted = Counted::new(&shared.clients);
    let shared = &shared;
    let timeout = Duration::from_millis(shared.config.limits.login_timeout_ms);
    let c = match tokio::time::timeout(timeout, login::login(shared, stream, peer)).await {
        Ok(Ok(c)) => c,
        Ok(Err(_)) | Err(_) => return,
    };
    let key = c.cancel_key;
    session::run(shared, c).await;
    shared.unregister_cancel(key);
}

pub mod cli;
