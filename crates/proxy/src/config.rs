//! The proxy's configuration file (TOML), validated at start-up and on reload: every error
//! names the field (`tenant[2].weight`, `scheduler.depth`, …) and what is allowed.
//!
//! ```
//! use fairlane_proxy::ProxyConfig;
//! let c = ProxyConfig::from_toml_str(r#"
//!     [upstream]
//!     addr = "127.0.0.1:8000"
//!     [[tenant]]
//!     name = "alice"
//!     weight = 2.0
//!     keys = ["k-alice"]
//! "#).unwrap();
//! assert_eq!(c.scheduler.algorithm, "sfq");
//! let e = ProxyConfig::from_toml_str(r#"
//!     [upstream]
//!     addr = "127.0.0.1:8000"
//!     [[tenant]]
//!     name = "alice"
//!     weight = -1.0
//! "#).unwrap_err();
//! assert!(e.to_string().contains("tenant[0].weight"), "{e}");
//! ```

use std::collections::HashSet;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cidr::Cidr;

pub mod levels;
pub(crate) mod tokens;

pub use crate::section::{ConfigError, MAX_DEPTH};

/// The whole configuration.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ProxyConfig {
    /// Where clients and operators connect.
    #[serde(default)]
    pub listen: Listen,
    /// The one server behind the proxy.
    pub upstream: Upstream,
    /// Bounds on the cost charged per request (reported or measured).
    #[serde(default)]
    pub cost: CostSection,
    /// Which scheduler, and how many requests may be outstanding upstream.
    #[serde(default)]
    pub scheduler: SchedulerSection,
    /// Queue caps, timeouts and size limits.
    #[serde(default)]
    pub limits: Limits,
    /// How a request's tenant is found.
    #[serde(default)]
    pub identity: Identity,
    /// The tenants.
    #[serde(default, rename = "tenant")]
    pub tenants: Vec<TenantConfig>,
    /// Request classes (for cost estimation), matched in order; unmatched requests are
    /// class 0.
    #[serde(default, rename = "class")]
    pub classes: Vec<ClassConfig>,
    /// Share the upstream fairly with other instances through Redis (absent: this instance
    /// is fair on its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<crate::cluster_config::ClusterConfig>,
    /// Priority levels (APF's), highest first; absent: one level holding all of D.
    #[serde(
        default,
        rename = "priority_level",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub priority_levels: Vec<levels::PriorityLevel>,
    /// Flow schemas: which level a request goes to.
    #[serde(default, rename = "flow_schema", skip_serializing_if = "Vec::is_empty")]
    pub flow_schemas: Vec<levels::FlowSchema>,
    /// `[levels]`: how the priority levels share D.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<levels::LevelsSection>,
}

/// `[listen]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// The proxy's plaintext address (HTTP/1.1 and HTTP/2 cleartext; port 0 picks one).
    /// Default `127.0.0.1:8080`, unless `[listen.tls]` is given: then there is no plaintext
    /// listener unless one is named here. See [`Listen::plain_addr`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// The admin listener: `/metrics`, `/status`, `/dashboard` (default `127.0.0.1:9090`).
    #[serde(default = "default_admin")]
    pub admin: String,
    /// Also accept HTTP/2 over cleartext (prior knowledge) on `addr` (default true).
    #[serde(default = "yes")]
    pub http2: bool,
    /// Which HTTP/1.1 path the proxy takes (issue 19): `"own"`, the proxy's own framing on
    /// `httparse` for client connections and raw keep-alive upstream sockets, or `"hyper"`
    /// (hyper's server and client); default `"own"`. HTTP/2 clients are served by hyper
    /// either way.
    #[serde(default = "default_http1")]
    pub http1: String,
    /// How client connections are spread over threads (issue 19): `"per-core"`, one
    /// single-threaded runtime per core (nginx's workers); a number, that many such runtimes;
    /// or `"shared"`, every connection on the runtime that calls [`crate::Proxy::run`]
    /// (tokio's work-stealing pool in the binary). Default `"per-core"`.
    #[serde(default)]
    pub workers: Workers,
    /// `[listen.tls]`: HTTPS on an address of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<ListenTls>,
}

impl Listen {
    /// The plaintext listener's address: `addr`, or the default when there is no
    /// `[listen.tls]` (`None`: TLS only).
    pub fn plain_addr(&self) -> Option<&str> {
        match (&self.addr, &self.tls) {
            (Some(a), _) => Some(a),
            (None, None) => Some(DEFAULT_ADDR),
            (None, Some(_)) => None,
        }
    }
}

/// `[listen.tls]`: the TLS listener (rustls: TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`).
/// The certificate and key are read again on reload (SIGHUP); a file that cannot be read or
/// holds an expired certificate leaves the old one in place.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ListenTls {
    /// The HTTPS address (`ip:port`; port 0 picks one).
    pub addr: String,
    /// The certificate chain, PEM, the proxy's own certificate first.
    pub cert: String,
    /// Its private key, PEM (PKCS #8, PKCS #1 or SEC1).
    pub key: String,
    /// CA certificates (PEM) that client certificates must chain to. When set, clients are
    /// asked for a certificate; a verified one's subject CN and SAN names identify the
    /// tenant whose `cert_names` list one (after an API key, before the address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<String>,
    /// With `client_ca`: refuse the handshake of a client that presents no certificate
    /// (default false: such a client is identified by its key or address).
    #[serde(default)]
    pub require_client_cert: bool,
}

/// `[upstream.tls]`: TLS to the upstream (`protocol = "h2"` needs it; `"http1"` may use it).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTls {
    /// CA certificates (PEM) the upstream's certificate must chain to.
    pub ca: String,
    /// The name the upstream's certificate must carry, sent as SNI (default: the host of
    /// `upstream.addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// A client certificate chain (PEM) to present to the upstream, with `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert: Option<String>,
    /// The client certificate's private key (PEM).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// `listen.workers`: the threads client connections run on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Workers {
    /// One single-threaded runtime per core (`std::thread::available_parallelism`).
    #[default]
    PerCore,
    /// This many single-threaded runtimes (at least 1).
    Count(usize),
    /// No runtimes of the proxy's own: connections run on the caller's runtime.
    Shared,
}

impl Workers {
    /// How many single-threaded runtimes this asks for (`None`: shared).
    pub fn runtimes(self) -> Option<usize> {
        match self {
            Workers::PerCore => Some(
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1),
            ),
            Workers::Count(n) => Some(n),
            Workers::Shared => None,
        }
    }
}

impl Serialize for Workers {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Workers::PerCore => s.serialize_str("per-core"),
            Workers::Shared => s.serialize_str("shared"),
            Workers::Count(n) => s.serialize_u64(*n as u64),
        }
    }
}

impl<'de> Deserialize<'de> for Workers {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Workers;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("listen.workers: \"per-core\", \"shared\" or a number of runtimes ≥ 1")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Workers, E> {
                match v {
                    "per-core" => Ok(Workers::PerCore),
                    "shared" => Ok(Workers::Shared),
                    _ => Err(E::custom(format!(
                        "listen.workers: {v:?} is not \"per-core\", \"shared\" or a number of runtimes"
                    ))),
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Workers, E> {
                match usize::try_from(v) {
                    Ok(n) if (1..=MAX_WORKERS).contains(&n) => Ok(Workers::Count(n)),
                    _ => Err(E::custom(format!(
                        "listen.workers: {v} runtimes; expected 1 to {MAX_WORKERS}"
                    ))),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Workers, E> {
                self.visit_i64(i64::try_from(v).unwrap_or(i64::MAX))
            }
        }
        d.deserialize_any(V)
    }
}

/// The most runtimes `listen.workers` may ask for (a typo guard: each is a thread).
pub const MAX_WORKERS: usize = 1024;

fn default_http1() -> String {
    "own".to_string()
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            addr: None,
            admin: default_admin(),
            http2: true,
            http1: default_http1(),
            workers: Workers::default(),
            tls: None,
        }
    }
}

/// `[upstream]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Upstream {
    /// `host:port` (or `http://host:port`) of the server.
    pub addr: String,
    /// The wire to it: `"http1"` (HTTP/1.1, default), `"h2c"` (HTTP/2 in cleartext, prior
    /// knowledge) or `"h2"` (HTTP/2 over TLS: needs `[upstream.tls]`).
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// Give up connecting after this long → 502 (default 1000 ms).
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout_ms: u64,
    /// Give up waiting for the response headers after this long → 504 (default 30000 ms).
    #[serde(default = "default_upstream_timeout")]
    pub timeout_ms: u64,
    /// Take each request's cost from this response header (a non-negative number) instead
    /// of measuring its upstream time.
    #[serde(default)]
    pub cost_header: Option<String>,
    /// Take each request's cost from the response's token usage: `"openai-usage"` (an
    /// OpenAI-compatible server; see `fairlane_proxy::tokens`). Not with `cost_header`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// `[upstream.tls]`: connect with TLS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<UpstreamTls>,
}

/// `[cost]`: every charged cost (from `upstream.cost_header` or the measured upstream time)
/// is checked before the scheduler sees it. A cost that is not a finite non-negative number
/// is replaced by the measured upstream time; one above
/// `min(max_ms, max(floor_ms, max_ratio × the tenant's current estimate))` is cut to that cap.
/// Each clamp is counted (`fairlane_proxy_cost_clamped_total`) and logged at most once per
/// tenant per `log_interval_ms`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CostSection {
    /// How many times its current estimate one request may cost (default 1000).
    #[serde(default = "default_max_ratio")]
    pub max_ratio: f64,
    /// The cap is never below this, in cost units (ms by default; default 60000), so a
    /// tenant's first, not yet estimated requests are charged in full.
    #[serde(default = "default_cost_floor")]
    pub floor_ms: f64,
    /// No request is charged more than this, in cost units (default 3600000: an hour).
    #[serde(default = "default_cost_max")]
    pub max_ms: f64,
    /// At most one log line per tenant per this interval (default 10000 ms).
    #[serde(default = "default_clamp_log_interval")]
    pub log_interval_ms: u64,
    /// `w_p`, the cost of an input token under `upstream.cost = "openai-usage"` (default 1).
    #[serde(default = "one_f64")]
    pub input_token_weight: f64,
    /// `w_q`, the cost of an output token under `upstream.cost = "openai-usage"` (default 1).
    #[serde(default = "one_f64")]
    pub output_token_weight: f64,
}

impl Default for CostSection {
    fn default() -> Self {
        CostSection {
            max_ratio: default_max_ratio(),
            floor_ms: default_cost_floor(),
            max_ms: default_cost_max(),
            log_interval_ms: default_clamp_log_interval(),
            input_token_weight: 1.0,
            output_token_weight: 1.0,
        }
    }
}

/// `[scheduler]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSection {
    /// A fairlane-core preset: `sfq` (SFQ(D), default), `fifo`, `wfq`, `wf2q`, `drr`,
    /// `2dfq` / `2dfqe` (2DFQ over D slots), and, when the core has them, `minsfq`, `fsfq`,
    /// `rw`, `edf`. Costs are unknown up front, so presets with known costs are built with
    /// an EMA estimator (α = 0.99) starting at `initial_estimate_ms`.
    #[serde(default = "default_algorithm")]
    pub algorithm: String,
    /// D: requests outstanding upstream at most (default 8). With `[scheduler.adaptive]`,
    /// the starting depth.
    #[serde(default = "default_depth")]
    pub depth: usize,
    /// Estimated cost of a (tenant, class) never seen, in cost units (milliseconds of upstream
    /// time by default; the header's unit with `upstream.cost_header`). Default 10.
    #[serde(default = "default_initial_estimate")]
    pub initial_estimate_ms: f64,
    /// Adapt D toward the tenants' response-time targets (§5.4); absent = fixed depth.
    #[serde(default)]
    pub adaptive: Option<Adaptive>,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            algorithm: default_algorithm(),
            depth: default_depth(),
            initial_estimate_ms: default_initial_estimate(),
            adaptive: None,
        }
    }
}

/// `[scheduler.adaptive]`: the depth controller's bounds.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Adaptive {
    /// Smallest depth (≥ 1).
    #[serde(default = "one")]
    pub min: usize,
    /// Largest depth.
    #[serde(default = "default_max_depth")]
    pub max: usize,
    /// How often the controller runs (default 1000 ms).
    #[serde(default = "default_interval")]
    pub interval_ms: u64,
}

/// `[limits]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests waiting over all tenants before new ones get 429 (default 10000).
    #[serde(default = "default_max_queued")]
    pub max_queued: usize,
    /// Requests waiting per tenant before that tenant's new ones get 429 (default 1000;
    /// a tenant may override it).
    #[serde(default = "default_max_queued_per_tenant")]
    pub max_queued_per_tenant: usize,
    /// A request that waited this long for a slot gets 503 (default 10000 ms).
    #[serde(default = "default_queue_timeout")]
    pub queue_timeout_ms: u64,
    /// The `Retry-After` of a 429, in seconds (default 1).
    #[serde(default = "one_u64")]
    pub retry_after_s: u64,
    /// Request bodies larger than this get 413 (default 1 MiB). A body is read in full
    /// *before* its request queues for an upstream slot, so a slow sender holds no slot.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u64,
    /// On SIGTERM, serve queued and in-flight requests for at most this long, then answer
    /// the rest with 503 (default 10000 ms).
    #[serde(default = "default_shutdown")]
    pub shutdown_grace_ms: u64,
    // --- Client connections: buffering, timeouts and connection caps (issue 16). ---
    /// The whole request body must arrive within this long of the request head, else 408
    /// (default 30000 ms). No slot is held meanwhile.
    #[serde(default = "default_client_timeout")]
    pub body_timeout_ms: u64,
    /// Responses up to this size are read from the upstream in full before the client gets
    /// them, so the slot is freed when the upstream finishes rather than when the client has
    /// read (default 1 MiB). Larger ones stream and hold their slot until the client has
    /// read them; that time is charged to the tenant.
    #[serde(default = "default_response_buffer")]
    pub response_buffer_bytes: u64,
    /// A tenant may hold at most this share of D (rounded up, ≥ 1) with responses streaming
    /// past `response_buffer_bytes`; a further response that would stream gets 503
    /// (default 0.5). Keeps one slow-reading tenant from holding every slot.
    #[serde(default = "default_streaming_share")]
    pub max_streaming_share: f64,
    /// A streamed request body (gRPC, or one without a length, which goes upstream as it
    /// comes once the request holds its slot) may pause at most this long between two
    /// pieces, else 408 (default 60000 ms).
    #[serde(default = "default_idle_timeout")]
    pub stream_idle_timeout_ms: u64,
    /// A streamed request body may carry at most this many bytes, else 413 (default 1 GiB).
    #[serde(default = "default_max_stream")]
    pub max_stream_bytes: u64,
    /// A client must send a complete request head within this long of starting it (or of
    /// the connection opening), else the connection is closed (default 30000 ms).
    #[serde(default = "default_client_timeout")]
    pub header_timeout_ms: u64,
    /// A client connection with no request in progress for this long (since it opened or
    /// its last request ended) is closed, whatever it is sending (default 60000 ms).
    #[serde(default = "default_idle_timeout")]
    pub idle_timeout_ms: u64,
    /// A client that accepts no response bytes for this long is disconnected; its slot is
    /// freed (default 60000 ms).
    #[serde(default = "default_idle_timeout")]
    pub send_timeout_ms: u64,
    /// Client connections open at once; 0 (default) = as many as the open-files limit
    /// allows after a reserve for the admin listener and the upstream connections. At the
    /// cap the connection idle the longest is closed to make room; if none is idle, the new
    /// one is closed.
    #[serde(default)]
    pub max_connections: usize,
    /// Client connections open at once from one client address; 0 (default) = no cap.
    #[serde(default)]
    pub max_connections_per_ip: usize,
    /// Connections the admin listener (`/metrics`, `/healthz`) keeps for itself, outside
    /// `max_connections` (default 32).
    #[serde(default = "default_admin_connections")]
    pub admin_connections: usize,
    // --- WebSocket tunnels (docs/proxy.md "WebSocket"). ---
    /// WebSocket tunnels a tenant may hold open (or opening) at once; one more is answered
    /// 503 (default 256; 0: none).
    #[serde(default = "default_max_tunnels_per_tenant")]
    pub max_tunnels_per_tenant: usize,
    /// WebSocket tunnels open at once over all tenants (default 4096; 0: none).
    #[serde(default = "default_max_tunnels")]
    pub max_tunnels: usize,
    /// A tunnel with no byte either way for this long is closed (default 300000 ms).
    #[serde(default = "default_tunnel_idle_timeout")]
    pub tunnel_idle_timeout_ms: u64,
}

fn default_max_tunnels_per_tenant() -> usize {
    256
}

fn default_max_tunnels() -> usize {
    4096
}

fn default_tunnel_idle_timeout() -> u64 {
    300_000
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_queued: default_max_queued(),
            max_queued_per_tenant: default_max_queued_per_tenant(),
            queue_timeout_ms: default_queue_timeout(),
            retry_after_s: 1,
            max_body_bytes: default_max_body(),
            shutdown_grace_ms: default_shutdown(),
            body_timeout_ms: default_client_timeout(),
            response_buffer_bytes: default_response_buffer(),
            max_streaming_share: default_streaming_share(),
            stream_idle_timeout_ms: default_idle_timeout(),
            max_stream_bytes: default_max_stream(),
            header_timeout_ms: default_client_timeout(),
            idle_timeout_ms: default_idle_timeout(),
            send_timeout_ms: default_idle_timeout(),
            max_connections: 0,
            max_connections_per_ip: 0,
            admin_connections: default_admin_connections(),
            max_tunnels_per_tenant: default_max_tunnels_per_tenant(),
            max_tunnels: default_max_tunnels(),
            tunnel_idle_timeout_ms: default_tunnel_idle_timeout(),
        }
    }
}

/// What happens to a request whose key is missing or unknown and whose address matches no
/// tenant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Unknown {
    /// Answer 401.
    Reject,
    /// Serve it as `identity.default_tenant`.
    Default,
}

/// `[identity]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Identity {
    /// The header carrying the API key (default `authorization`).
    #[serde(default = "default_key_header")]
    pub header: String,
    /// A scheme the value starts with, stripped before lookup (default `Bearer`; `""` for a
    /// bare key such as `X-Api-Key: …`).
    #[serde(default = "default_scheme")]
    pub scheme: String,
    /// `reject` (401, default) or `default`.
    #[serde(default = "default_unknown")]
    pub unknown: Unknown,
    /// The tenant unknown requests are served as with `unknown = "default"` (created with
    /// weight 1 if not listed; default `default`).
    #[serde(default = "default_tenant_name")]
    pub default_tenant: String,
}

impl Default for Identity {
    fn default() -> Self {
        Identity {
            header: default_key_header(),
            scheme: default_scheme(),
            unknown: Unknown::Reject,
            default_tenant: default_tenant_name(),
        }
    }
}

/// `[[tenant]]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    /// Unique name (metrics label).
    pub name: String,
    /// Weight φ (default 1).
    #[serde(default = "one_f64")]
    pub weight: f64,
    /// API keys that identify the tenant.
    #[serde(default)]
    pub keys: Vec<String>,
    /// Client addresses or CIDR blocks (`10.0.0.0/8`, `::1`) that identify the tenant when
    /// the request carries no key.
    #[serde(default)]
    pub ips: Vec<String>,
    /// Names a verified client certificate may carry (its subject CN, a DNS or URI SAN)
    /// that identify the tenant on the TLS listener with `client_ca` (exact match).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cert_names: Vec<String>,
    /// This tenant's own waiting cap (default `limits.max_queued_per_tenant`).
    #[serde(default)]
    pub max_queued: Option<usize>,
    /// Response-time target in ms, for `edf` and the adaptive depth controller.
    #[serde(default)]
    pub target_ms: Option<f64>,
    /// This tenant's `w_p` (default `cost.input_token_weight`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_token_weight: Option<f64>,
    /// This tenant's `w_q` (default `cost.output_token_weight`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_token_weight: Option<f64>,
}

/// `[[class]]`: a request class, for per-(tenant, class) cost estimation.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Name (for the docs and `/status`).
    pub name: String,
    /// HTTP method to match (any if absent).
    #[serde(default)]
    pub method: Option<String>,
    /// Path pattern: exact (`/login`) or a prefix ending in `*` (`/search/*`). Matches
    /// requests other than gRPC calls. A class has a `path` or a `grpc_method`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// gRPC method: exact (`/pkg.Service/Method`) or a prefix ending in `*`
    /// (`/pkg.Service/*`). Matches gRPC calls only (`content-type: application/grpc…`);
    /// a call matching no class is in the default class, so the classes (and metric labels)
    /// are the configured ones whatever methods clients call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc_method: Option<String>,
}

impl ClassConfig {
    /// The pattern this class matches (`grpc_method` or `path`).
    pub fn pattern(&self) -> &str {
        self.grpc_method.as_deref().unwrap_or(&self.path)
    }
}

/// The plaintext listener's address when `listen.addr` is not given (and there is no
/// `[listen.tls]`).
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";

fn default_protocol() -> String {
    "http1".into()
}
fn default_admin() -> String {
    "127.0.0.1:9090".into()
}
fn yes() -> bool {
    true
}
fn one() -> usize {
    1
}
fn one_u64() -> u64 {
    1
}
fn one_f64() -> f64 {
    1.0
}
fn default_connect_timeout() -> u64 {
    1000
}
fn default_upstream_timeout() -> u64 {
    30_000
}
fn default_max_ratio() -> f64 {
    1000.0
}
fn default_cost_floor() -> f64 {
    60_000.0
}
fn default_cost_max() -> f64 {
    3_600_000.0
}
fn default_clamp_log_interval() -> u64 {
    10_000
}
fn default_algorithm() -> String {
    "sfq".into()
}
fn default_depth() -> usize {
    8
}
fn default_initial_estimate() -> f64 {
    10.0
}
fn default_max_depth() -> usize {
    64
}
fn default_interval() -> u64 {
    1000
}
fn default_max_queued() -> usize {
    10_000
}
fn default_max_queued_per_tenant() -> usize {
    1000
}
fn default_queue_timeout() -> u64 {
    10_000
}
fn default_max_body() -> u64 {
    1 << 20
}
fn default_client_timeout() -> u64 {
    30_000
}
fn default_response_buffer() -> u64 {
    1 << 20
}
fn default_streaming_share() -> f64 {
    0.5
}
fn default_max_stream() -> u64 {
    1 << 30
}

fn default_idle_timeout() -> u64 {
    60_000
}
fn default_admin_connections() -> usize {
    32
}
fn default_shutdown() -> u64 {
    10_000
}
fn default_key_header() -> String {
    "authorization".into()
}
fn default_scheme() -> String {
    "Bearer".into()
}
fn default_unknown() -> Unknown {
    Unknown::Reject
}
fn default_tenant_name() -> String {
    "default".into()
}

/// The tenant weight range is the core's ([`fairlane_core::MIN_WEIGHT`],
/// [`fairlane_core::MAX_WEIGHT`]): checked here so a bad file fails at load, naming the
/// file and the tenant, rather than at the first `set_weight`.
pub use fairlane_core::{MAX_WEIGHT, MIN_WEIGHT};
/// Longest tenant name, in bytes.
pub const MAX_NAME_LEN: usize = 128;

/// Whether `name` is an allowed tenant name: 1 to [`MAX_NAME_LEN`] characters from
/// `A–Z a–z 0–9 _ - . : @ / +`. Names are Prometheus label values, `/status` keys and the
/// `X-Fairlane-Tenant` header sent upstream, so nothing that needs escaping is allowed.
pub fn valid_tenant_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:@/+".contains(&b))
}

pub(crate) fn name_error(field: String, name: &str) -> ConfigError {
    ConfigError::new(
        field,
        format!(
            "must be 1 to {MAX_NAME_LEN} characters from A-Z a-z 0-9 _ - . : @ / +, got {name:?}"
        ),
    )
}

impl ProxyConfig {
    /// Read and validate a file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        fairlane_runtime::config_file::read(path, Self::from_toml_str)
    }

    /// Parse and validate TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: ProxyConfig = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            ConfigError::new("toml", msg.trim().to_string())
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Check every value; the first problem is returned, naming its field. (The TLS files
    /// are read when the proxy starts or reloads, and by `--check`.)
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.listen.check()?;
        self.upstream.check()?;
        self.upstream_authority()?;
        self.scheduler.check()?;
        self.limits.check()?;
        self.identity.check()?;
        self.cost.check()?;
        tokens::check(self)?;
        check_tenants(&self.tenants)?;
        for (i, c) in self.classes.iter().enumerate() {
            c.check(&format!("class[{i}]"))?;
        }
        if self.classes.len() >= u32::MAX as usize {
            return Err(ConfigError::new("class", "too many classes"));
        }
        levels::check(self)?;
        if let Some(c) = &self.cluster {
            c.validate()?;
            if self.scheduler.adaptive.is_some() {
                return Err(ConfigError::new(
                    "cluster",
                    "cannot be combined with scheduler.adaptive (the cluster sets the depth)",
                ));
            }
        }
        Ok(())
    }

    /// The upstream's `host:port`.
    pub fn upstream_authority(&self) -> Result<http::uri::Authority, ConfigError> {
        let raw = self.upstream.addr.trim();
        let raw = raw
            .strip_prefix("http://")
            .unwrap_or(raw)
            .trim_end_matches('/');
        if raw.starts_with("https://") || raw.contains('/') {
            return Err(ConfigError::new(
                "upstream.addr",
                format!(
                    "expected host:port or http://host:port, got {:?}",
                    self.upstream.addr
                ),
            ));
        }
        let a: http::uri::Authority = raw.parse().map_err(|_| {
            ConfigError::new(
                "upstream.addr",
                format!("expected host:port, got {:?}", self.upstream.addr),
            )
        })?;
        if a.port_u16().is_none() {
            return Err(ConfigError::new(
                "upstream.addr",
                format!("needs a port, got {:?}", self.upstream.addr),
            ));
        }
        Ok(a)
    }

    /// The upstream header timeout.
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_millis(self.upstream.timeout_ms)
    }
}

/// `Err` naming `field` unless `v` ≥ 1.
pub(crate) fn at_least_one(field: &str, v: u64) -> Result<(), ConfigError> {
    if v == 0 {
        return Err(ConfigError::new(field, "must be ≥ 1"));
    }
    Ok(())
}

/// `Err` naming `field` unless `v` is a valid header name.
fn header_name(field: &str, v: &str) -> Result<(), ConfigError> {
    if http::HeaderName::from_bytes(v.as_bytes()).is_err() {
        return Err(ConfigError::new(
            field,
            format!("{v:?} is not a valid header name"),
        ));
    }
    Ok(())
}

/// `Err` naming `field` if the path `v` is empty.
fn file_name(field: &str, v: &str) -> Result<(), ConfigError> {
    if v.trim().is_empty() {
        return Err(ConfigError::new(field, "an empty file name"));
    }
    Ok(())
}

impl Listen {
    fn check(&self) -> Result<(), ConfigError> {
        if let Some(a) = &self.addr {
            parse_addr("listen.addr", a)?;
        }
        parse_addr("listen.admin", &self.admin)?;
        if !matches!(self.http1.as_str(), "own" | "hyper") {
            return Err(ConfigError::new(
                "listen.http1",
                format!("{:?} is not \"own\" or \"hyper\"", self.http1),
            ));
        }
        if let Workers::Count(n) = self.workers {
            if !(1..=MAX_WORKERS).contains(&n) {
                return Err(ConfigError::new(
                    "listen.workers",
                    format!(
                        "{n} runtimes; expected 1 to {MAX_WORKERS}, \"per-core\" or \"shared\""
                    ),
                ));
            }
        }
        if let Some(t) = &self.tls {
            parse_addr("listen.tls.addr", &t.addr)?;
            file_name("listen.tls.cert", &t.cert)?;
            file_name("listen.tls.key", &t.key)?;
            if let Some(ca) = &t.client_ca {
                file_name("listen.tls.client_ca", ca)?;
            } else if t.require_client_cert {
                return Err(ConfigError::new(
                    "listen.tls.require_client_cert",
                    "needs listen.tls.client_ca (the CA client certificates are checked against)",
                ));
            }
            // Port 0 picks a free port for each: the same text is two addresses then.
            let fixed = parse_addr("listen.tls.addr", &t.addr)?.port() != 0;
            if fixed && self.addr.as_deref() == Some(t.addr.as_str()) {
                return Err(ConfigError::new(
                    "listen.tls.addr",
                    "must differ from listen.addr",
                ));
            }
        }
        Ok(())
    }
}

impl Upstream {
    fn check(&self) -> Result<(), ConfigError> {
        at_least_one("upstream.connect_timeout_ms", self.connect_timeout_ms)?;
        at_least_one("upstream.timeout_ms", self.timeout_ms)?;
        if let Some(h) = &self.cost_header {
            header_name("upstream.cost_header", h)?;
        }
        match (self.protocol.as_str(), &self.tls) {
            ("http1", _) | ("h2", Some(_)) | ("h2c", None) => {}
            ("h2", None) => {
                return Err(ConfigError::new(
                    "upstream.protocol",
                    "\"h2\" is HTTP/2 over TLS: it needs [upstream.tls] (\"h2c\" is cleartext)",
                ))
            }
            ("h2c", Some(_)) => {
                return Err(ConfigError::new(
                    "upstream.protocol",
                    "\"h2c\" is HTTP/2 in cleartext: with [upstream.tls] use \"h2\"",
                ))
            }
            (p, _) => {
                return Err(ConfigError::new(
                    "upstream.protocol",
                    format!("{p:?} is not \"http1\", \"h2c\" or \"h2\""),
                ))
            }
        }
        if let Some(t) = &self.tls {
            file_name("upstream.tls.ca", &t.ca)?;
            if t.cert.is_some() != t.key.is_some() {
                return Err(ConfigError::new(
                    "upstream.tls.cert",
                    "a client certificate needs both cert and key",
                ));
            }
            if let Some(n) = &t.server_name {
                if rustls_pki_types::ServerName::try_from(n.as_str()).is_err() {
                    return Err(ConfigError::new(
                        "upstream.tls.server_name",
                        format!("{n:?} is not a DNS name or an IP address"),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl SchedulerSection {
    fn check(&self) -> Result<(), ConfigError> {
        fairlane_core::Config::for_executor(&self.algorithm, 1, 1.0, false)
            .and_then(|c| c.build::<()>().map(|_| ()))
            .map_err(|e| ConfigError::new("scheduler.algorithm", core_reason(e)))?;
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(ConfigError::new(
                "scheduler.depth",
                format!("must be in 1..={MAX_DEPTH}, got {}", self.depth),
            ));
        }
        if !(self.initial_estimate_ms.is_finite() && self.initial_estimate_ms > 0.0) {
            return Err(ConfigError::new(
                "scheduler.initial_estimate_ms",
                format!("must be finite and > 0, got {}", self.initial_estimate_ms),
            ));
        }
        if let Some(a) = &self.adaptive {
            if a.min == 0 || a.min > a.max || a.max > MAX_DEPTH {
                return Err(ConfigError::new(
                    "scheduler.adaptive",
                    format!(
                        "need 1 ≤ min ≤ max ≤ {MAX_DEPTH}, got min = {}, max = {}",
                        a.min, a.max
                    ),
                ));
            }
            if self.depth < a.min || self.depth > a.max {
                return Err(ConfigError::new(
                    "scheduler.depth",
                    format!(
                        "the starting depth must be within adaptive [{}, {}], got {}",
                        a.min, a.max, self.depth
                    ),
                ));
            }
            at_least_one("scheduler.adaptive.interval_ms", a.interval_ms)?;
        }
        Ok(())
    }
}

impl Limits {
    fn check(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("limits.max_queued", self.max_queued as u64),
            (
                "limits.max_queued_per_tenant",
                self.max_queued_per_tenant as u64,
            ),
            ("limits.queue_timeout_ms", self.queue_timeout_ms),
            ("limits.body_timeout_ms", self.body_timeout_ms),
            ("limits.header_timeout_ms", self.header_timeout_ms),
            ("limits.idle_timeout_ms", self.idle_timeout_ms),
            ("limits.send_timeout_ms", self.send_timeout_ms),
            ("limits.stream_idle_timeout_ms", self.stream_idle_timeout_ms),
            ("limits.max_stream_bytes", self.max_stream_bytes),
            ("limits.admin_connections", self.admin_connections as u64),
            ("limits.tunnel_idle_timeout_ms", self.tunnel_idle_timeout_ms),
        ] {
            at_least_one(field, v)?;
        }
        if !(self.max_streaming_share > 0.0 && self.max_streaming_share <= 1.0) {
            return Err(ConfigError::new(
                "limits.max_streaming_share",
                format!("must be in (0, 1], got {}", self.max_streaming_share),
            ));
        }
        Ok(())
    }
}

impl Identity {
    fn check(&self) -> Result<(), ConfigError> {
        header_name("identity.header", &self.header)?;
        if !valid_tenant_name(&self.default_tenant) {
            return Err(name_error(
                "identity.default_tenant".into(),
                &self.default_tenant,
            ));
        }
        Ok(())
    }
}

impl CostSection {
    fn check(&self) -> Result<(), ConfigError> {
        for (field, v) in [
            ("cost.max_ratio", self.max_ratio),
            ("cost.floor_ms", self.floor_ms),
            ("cost.max_ms", self.max_ms),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(ConfigError::new(
                    field,
                    format!("must be finite and > 0, got {v}"),
                ));
            }
        }
        if self.max_ratio < 1.0 {
            return Err(ConfigError::new(
                "cost.max_ratio",
                format!("must be ≥ 1, got {}", self.max_ratio),
            ));
        }
        if self.floor_ms > self.max_ms {
            return Err(ConfigError::new(
                "cost.floor_ms",
                format!(
                    "must be ≤ cost.max_ms ({}), got {}",
                    self.max_ms, self.floor_ms
                ),
            ));
        }
        at_least_one("cost.log_interval_ms", self.log_interval_ms)
    }
}

/// Every `[[tenant]]`, and what must be unique across them (names, keys, certificate names).
fn check_tenants(tenants: &[TenantConfig]) -> Result<(), ConfigError> {
    let mut names = HashSet::new();
    let mut keys = HashSet::new();
    let mut cert_names = HashSet::new();
    for (i, t) in tenants.iter().enumerate() {
        let f = |name: &str| format!("tenant[{i}].{name}");
        t.check(&f)?;
        if !names.insert(t.name.as_str()) {
            return Err(ConfigError::new(
                f("name"),
                format!("{:?} is listed twice", t.name),
            ));
        }
        for k in &t.keys {
            if !keys.insert(k.as_str()) {
                return Err(ConfigError::new(
                    f("keys"),
                    "a key already given to another tenant (keys must be unique)",
                ));
            }
        }
        for n in &t.cert_names {
            if !cert_names.insert(n.as_str()) {
                return Err(ConfigError::new(
                    f("cert_names"),
                    format!("{n:?} is already given to another tenant (names must be unique)"),
                ));
            }
        }
    }
    Ok(())
}

impl TenantConfig {
    /// This tenant alone (`f` names a field of it).
    fn check(&self, f: &impl Fn(&str) -> String) -> Result<(), ConfigError> {
        if !valid_tenant_name(&self.name) {
            return Err(name_error(f("name"), &self.name));
        }
        if !(MIN_WEIGHT..=MAX_WEIGHT).contains(&self.weight) {
            return Err(ConfigError::new(
                f("weight"),
                format!(
                    "must be within [{MIN_WEIGHT:e}, {MAX_WEIGHT:e}], got {:e}",
                    self.weight
                ),
            ));
        }
        if self.keys.iter().any(String::is_empty) {
            return Err(ConfigError::new(f("keys"), "an empty key"));
        }
        if self.cert_names.iter().any(|n| n.trim().is_empty()) {
            return Err(ConfigError::new(f("cert_names"), "an empty name"));
        }
        for ip in &self.ips {
            Cidr::parse(ip).map_err(|e| ConfigError::new(f("ips"), e.to_string()))?;
        }
        if self.max_queued == Some(0) {
            return Err(ConfigError::new(f("max_queued"), "must be ≥ 1"));
        }
        if let Some(ms) = self.target_ms {
            if !(ms.is_finite() && ms > 0.0) {
                return Err(ConfigError::new(
                    f("target_ms"),
                    format!("must be finite and > 0, got {ms}"),
                ));
            }
        }
        Ok(())
    }
}

impl ClassConfig {
    /// This class (`at`: `class[i]`).
    fn check(&self, at: &str) -> Result<(), ConfigError> {
        if let Some(m) = &self.method {
            if http::Method::from_bytes(m.as_bytes()).is_err() {
                return Err(ConfigError::new(
                    format!("{at}.method"),
                    format!("{m:?} is not an HTTP method"),
                ));
            }
        }
        let field = match (&self.grpc_method, self.path.is_empty()) {
            (None, false) => "path",
            (Some(_), true) => "grpc_method",
            (None, true) => {
                return Err(ConfigError::new(
                    format!("{at}.path"),
                    "a class needs a path or a grpc_method",
                ))
            }
            (Some(_), false) => {
                return Err(ConfigError::new(
                    format!("{at}.grpc_method"),
                    "a class has a path or a grpc_method, not both",
                ))
            }
        };
        let pattern = self.pattern();
        if !pattern.starts_with('/') {
            return Err(ConfigError::new(
                format!("{at}.{field}"),
                format!("must start with '/', got {pattern:?}"),
            ));
        }
        if pattern.trim_end_matches('*').contains('*') {
            return Err(ConfigError::new(
                format!("{at}.{field}"),
                "'*' is allowed only at the end (a prefix match)",
            ));
        }
        if self.grpc_method.is_some() && self.method.is_some() {
            return Err(ConfigError::new(
                format!("{at}.method"),
                "a grpc_method class matches gRPC calls (always POST): no method",
            ));
        }
        Ok(())
    }
}

pub(crate) fn parse_addr(field: &str, s: &str) -> Result<SocketAddr, ConfigError> {
    s.parse()
        .map_err(|_| ConfigError::new(field, format!("expected ip:port, got {s:?}")))
}

/// A core configuration error as the proxy's config messages say it: the reason alone (the
/// field is named by the caller).
pub(crate) fn core_reason(e: fairlane_core::Error) -> String {
    match e {
        fairlane_core::Error::InvalidConfig { reason, .. } => reason,
        e => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(rest: &str) -> Result<ProxyConfig, ConfigError> {
        ProxyConfig::from_toml_str(&format!("[upstream]\naddr = \"127.0.0.1:1\"\n{rest}"))
    }

    #[test]
    fn listen_workers_is_a_name_or_a_count() {
        assert_eq!(with("").unwrap().listen.workers, Workers::PerCore);
        for (text, want) in [
            ("\"per-core\"", Workers::PerCore),
            ("\"shared\"", Workers::Shared),
            ("3", Workers::Count(3)),
        ] {
            let c = with(&format!("[listen]\nworkers = {text}")).unwrap();
            assert_eq!(c.listen.workers, want, "{text}");
            // It survives a round trip through TOML.
            let again = toml::to_string(&c).unwrap();
            assert_eq!(
                ProxyConfig::from_toml_str(&again).unwrap().listen.workers,
                want
            );
        }
        assert!(Workers::PerCore.runtimes().unwrap() >= 1);
        assert_eq!(Workers::Count(3).runtimes(), Some(3));
        assert_eq!(Workers::Shared.runtimes(), None);
        for bad in ["0", "-2", "100000", "\"percore\"", "true", "1.5"] {
            let e = with(&format!("[listen]\nworkers = {bad}")).unwrap_err();
            assert!(e.to_string().contains("listen.workers"), "{bad}: {e}");
        }
        let mut c = with("").unwrap();
        c.listen.workers = Workers::Count(0);
        assert_eq!(c.validate().unwrap_err().field, "listen.workers");
    }

    #[test]
    fn tls_protocol_and_grpc_classes_are_checked_with_their_field() {
        let tls = "[listen.tls]\naddr = \"127.0.0.1:8443\"\ncert = \"c.pem\"\nkey = \"k.pem\"\n";
        let c = with(tls).unwrap();
        assert_eq!(
            c.listen.plain_addr(),
            None,
            "TLS only unless listen.addr is given"
        );
        assert_eq!(with("").unwrap().listen.plain_addr(), Some(DEFAULT_ADDR));
        for (rest, field) in [
            ("protocol = \"h3\"", "upstream.protocol"),
            ("protocol = \"h2\"", "upstream.protocol"),
            (
                "protocol = \"h2c\"\n[upstream.tls]\nca = \"ca.pem\"",
                "upstream.protocol",
            ),
            ("[upstream.tls]\nca = \"ca.pem\"\ncert = \"c.pem\"", "upstream.tls.cert"),
            (
                "[upstream.tls]\nca = \"ca.pem\"\nserver_name = \"not a name\"",
                "upstream.tls.server_name",
            ),
            (
                "[listen]\naddr = \"127.0.0.1:8443\"\n[listen.tls]\naddr = \"127.0.0.1:8443\"\ncert = \"c\"\nkey = \"k\"",
                "listen.tls.addr",
            ),
            (
                "[listen.tls]\naddr = \"127.0.0.1:0\"\ncert = \"c\"\nkey = \"\"",
                "listen.tls.key",
            ),
            (
                "[listen.tls]\naddr = \"127.0.0.1:0\"\ncert = \"c\"\nkey = \"k\"\nrequire_client_cert = true",
                "listen.tls.require_client_cert",
            ),
            ("[[class]]\nname = \"x\"", "class[0].path"),
            (
                "[[class]]\nname = \"x\"\npath = \"/a\"\ngrpc_method = \"/p.S/M\"",
                "class[0].grpc_method",
            ),
            ("[[class]]\nname = \"x\"\ngrpc_method = \"p.S/M\"", "class[0].grpc_method"),
            ("[[class]]\nname = \"x\"\ngrpc_method = \"/p.*/M\"", "class[0].grpc_method"),
            (
                "[[class]]\nname = \"x\"\nmethod = \"GET\"\ngrpc_method = \"/p.S/*\"",
                "class[0].method",
            ),
            (
                "[[tenant]]\nname = \"a\"\ncert_names = [\"n\"]\n[[tenant]]\nname = \"b\"\ncert_names = [\"n\"]",
                "tenant[1].cert_names",
            ),
        ] {
            let e = with(rest).unwrap_err();
            assert_eq!(e.field, field, "{rest}: {e}");
        }
        with("protocol = \"h2c\"\n[[class]]\nname = \"g\"\ngrpc_method = \"/p.S/*\"").unwrap();
    }

    #[test]
    fn weights_outside_the_range_are_refused() {
        for w in [
            "1e-320", "0.0", "-1.0", "1e-7", "1e300", "2e6", "nan", "inf",
        ] {
            let e = with(&format!("[[tenant]]\nname = \"a\"\nweight = {w}")).unwrap_err();
            assert_eq!(e.field, "tenant[0].weight", "{w}: {e}");
            assert!(e.reason.contains("[1e-6, 1e6]"), "{w}: {e}");
        }
        for w in ["1e-6", "0.5", "1e6"] {
            with(&format!("[[tenant]]\nname = \"a\"\nweight = {w}")).unwrap();
        }
    }

    #[test]
    fn names_are_label_safe() {
        for bad in [
            "t0\\\\",
            "a\\\"b",
            "x\\ny",
            "",
            "has space",
            "é",
            &"n".repeat(129),
        ] {
            let e = with(&format!("[[tenant]]\nname = \"{bad}\"")).unwrap_err();
            assert_eq!(e.field, "tenant[0].name", "{bad:?}: {e}");
            let e = with(&format!(
                "[identity]\nunknown = \"default\"\ndefault_tenant = \"{bad}\""
            ))
            .unwrap_err();
            assert_eq!(e.field, "identity.default_tenant", "{bad:?}: {e}");
        }
        with("[[tenant]]\nname = \"team-a.prod:eu/1+x@y_z\"").unwrap();
    }

    #[test]
    fn cost_bounds_are_checked() {
        assert_eq!(with("").unwrap().cost.max_ratio, 1000.0);
        for (text, field) in [
            ("max_ratio = 0.5", "cost.max_ratio"),
            ("max_ratio = inf", "cost.max_ratio"),
            ("floor_ms = -1.0", "cost.floor_ms"),
            ("floor_ms = 10.0\nmax_ms = 5.0", "cost.floor_ms"),
            ("max_ms = nan", "cost.max_ms"),
            ("log_interval_ms = 0", "cost.log_interval_ms"),
        ] {
            let e = with(&format!("[cost]\n{text}")).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
        }
    }
}
