//! The proxy's shared state: what every connection and request reads — the gate, the
//! metrics, the settings a reload swaps, the shutdown watches, the connection tables — and
//! the client [`Peer`] a connection came from.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use fairlane_core::TenantId;
use http::uri::Authority;
use http::{HeaderName, HeaderValue};
use tokio::sync::watch;

use crate::config::{ConfigError, ProxyConfig};
use crate::conn::ConnTable;
use crate::gate::Gate;
use crate::metrics::Metrics;
use crate::respond::StreamSlots;
use crate::status::{GateSnapshot, Status};
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
    /// Token costs (`upstream.cost = "openai-usage"`): the tenants' weights.
    pub tokens: Option<crate::tokens::TokenCosts>,
    /// The wire to the upstream (`[upstream] protocol`).
    pub upstream: Upstream,
    /// The flow schemas and their levels (`None`: no priority levels).
    pub levels: Option<crate::levels::Schemas>,
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
    /// The priority levels' counters and queued requests (unused without levels).
    pub(crate) levels: Arc<crate::levels::Live>,
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
        let mut status = Status::of(
            &self.metrics,
            &names,
            &GateSnapshot::of(&self.gate, names.len()),
            self.started.elapsed().as_secs_f64(),
        );
        status.cluster = self.cluster.as_ref().map(|c| c.status(self.gate.depth()));
        if let Some(c) = &status.cluster {
            // φ as configured; the cluster's effective weight is in `cluster.tenants`.
            for t in &mut status.tenants {
                if let Some(c) = c.tenants.iter().find(|c| c.name == t.name) {
                    t.weight = c.weight;
                }
            }
        }
        status.levels = self.levels.status(self.gate.0.levels());
        status
    }
}

/// The settings `config` asks for; the flow schemas name the levels `gate` has now.
pub(crate) fn settings(
    config: ProxyConfig,
    registry: &mut Registry,
    gate: &Gate,
    live: &crate::levels::Live,
) -> Result<Settings, ConfigError> {
    let identifier = Identifier::new(&config, registry);
    let levels = crate::levels::Schemas::new(&config, registry, &gate.0.levels(), live);
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
        levels,
        tokens: crate::tokens::TokenCosts::of(&config, registry),
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

/// The cluster sync's view of the proxy: the gate's seats and weights, the settings' tenants
/// and their completions.
impl crate::cluster::Host for Inner {
    fn sample(&self, member: &mut crate::cluster::Member) {
        let settings = self.settings();
        let counts = settings.names.iter().enumerate().map(|(i, name)| {
            let v = self.gate.0.tenant(TenantId(i as u64));
            let (queued, running) = v.map_or((0, 0), |v| (v.queued, v.running));
            (name.as_str(), (queued + running) as f64, running as f64)
        });
        member.sample(counts, self.gate.depth());
    }

    fn local(&self) -> crate::cluster::Local {
        let settings = self.settings();
        let tenants = settings
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let id = TenantId(i as u64);
                let completed = self
                    .metrics
                    .tenant(id)
                    .completed
                    .load(std::sync::atomic::Ordering::Relaxed);
                (name.clone(), configured(&settings.config, name), completed)
            })
            .collect();
        crate::cluster::Local {
            seats: self.gate.depth(),
            holding: self.gate.load().1,
            tenants,
        }
    }

    fn apply(
        &self,
        seats: Option<usize>,
        pick: &dyn Fn(&str) -> Option<f64>,
    ) -> BTreeMap<String, (f64, f64)> {
        if let Some(seats) = seats.filter(|&s| s != self.gate.depth()) {
            if let Err(e) = self.gate.set_depth(seats) {
                crate::cluster::refused(format_args!("{seats} seats"), &e);
            }
        }
        let settings = self.settings();
        let mut out = BTreeMap::new();
        for (i, name) in settings.names.iter().enumerate() {
            let id = TenantId(i as u64);
            let phi = configured(&settings.config, name);
            let w = pick(name)
                .filter(|w| w.is_finite() && *w > 0.0)
                .unwrap_or(phi);
            let now = self.gate.0.tenant(id).map(|v| v.weight);
            let mut set = now.unwrap_or(phi);
            if now.is_none_or(|n| (n - w).abs() > 0.01 * w) {
                match self.gate.set_weight(id, w) {
                    Ok(()) => set = w,
                    Err(e) => {
                        crate::cluster::refused(format_args!("weight {w} for tenant {name:?}"), &e)
                    }
                }
            }
            out.insert(name.clone(), (phi, set));
        }
        out
    }

    fn seats(&self) -> usize {
        self.gate.depth()
    }

    fn holding(&self) -> usize {
        self.gate.load().1
    }
}

/// A tenant's configured weight φ (1 for a tenant the file does not name).
fn configured(config: &ProxyConfig, name: &str) -> f64 {
    config
        .tenants
        .iter()
        .find(|t| t.name == name)
        .map_or(1.0, |t| t.weight)
}
