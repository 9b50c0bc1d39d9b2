//! The proxy's shared state: what every connection and request reads — the gate, the
//! metrics, the settings a reload swaps, the shutdown watches, the connection tables — and
//! the client [`Peer`] a connection came from.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use http::uri::Authority;
use http::{HeaderName, HeaderValue};
use tokio::sync::watch;

use crate::config::{ConfigError, ProxyConfig};
use crate::conn::ConnTable;
use crate::gate::Gate;
use crate::metrics::{Metrics, Status};
use crate::respond::StreamSlots;
use crate::tenant::{Identifier, Registry};
use crate::upstream::Upstream;

/// What a reload can swap at once.
pub(crate) struct Settings {
    pub config: ProxyConfig,
    pub identifier: Identifier,
    pub authority: Authority,
    pub names: Vec<String>,
    /// `names` as `X-Fairlane-Tenant` values (`None`: not a valid header value).
    pub name_values: Vec<Option<http::HeaderValue>>,
    pub cost_header: Option<HeaderName>,
    /// The wire to the upstream (`[upstream] protocol`).
    pub upstream: Upstream,
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
    pub(crate) settings: RwLock<Arc<Settings>>,
    /// Bumped after every swap of `settings`: connections keep a copy and look here.
    pub(crate) settings_version: std::sync::atomic::AtomicU64,
    pub(crate) registry: Mutex<Registry>,
    pub started: Instant,
    pub(crate) shutdown: watch::Sender<bool>,
    pub hard_stop: watch::Sender<bool>,
    /// Client connections and their caps.
    pub(crate) conns: ConnTable,
    /// Admin connections: a reserve of their own, outside the client cap.
    pub(crate) admin_conns: ConnTable,
    /// Slots held by responses streaming past the buffer, per tenant.
    pub(crate) streaming: StreamSlots,
    /// WebSocket tunnels open per tenant.
    pub(crate) tunnels: crate::tunnel::Tunnels,
    /// Connections per worker runtime (`listen.workers`; empty when shared).
    pub(crate) worker_loads: crate::workers::Loads,
    /// The TLS listener's configuration (`[listen.tls]`), swapped by a reload.
    pub(crate) tls: Option<crate::tls::Acceptor>,
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

pub(crate) fn settings(
    config: ProxyConfig,
    registry: &mut Registry,
) -> Result<Settings, ConfigError> {
    let identifier = Identifier::new(&config, registry);
    let authority = config.upstream_authority()?;
    let cost_header = config
        .upstream
        .cost_header
        .as_ref()
        .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok());
    Ok(Settings {
        upstream: Upstream::new(&config, &authority)?,
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

/// The client a connection came from, as the proxy reports it upstream.
pub(crate) struct Peer {
    /// Its address.
    pub addr: SocketAddr,
    /// Its IP as an `X-Forwarded-For` value, formatted once per connection.
    pub forwarded_for: HeaderValue,
    /// The names of its verified TLS client certificate (none: no certificate).
    pub cert_names: Box<[Box<str>]>,
}

impl Peer {
    /// The peer of a connection from `addr`.
    pub fn new(addr: SocketAddr) -> Peer {
        Peer {
            addr,
            forwarded_for: HeaderValue::from_str(&addr.ip().to_string())
                .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
            cert_names: Box::new([]),
        }
    }

    /// The same client, with the names of the certificate it presented.
    pub fn with_cert_names(&self, names: Vec<Box<str>>) -> Peer {
        Peer {
            addr: self.addr,
            forwarded_for: self.forwarded_for.clone(),
            cert_names: names.into(),
        }
    }
}
