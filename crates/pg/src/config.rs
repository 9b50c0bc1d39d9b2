//! `pg.toml`: the pooler's configuration, read and checked at start-up. Each section is a
//! type that checks itself; every error names the file and the field
//! (`pool.size`, `tenant[1].res`, `auth.users[0].password`) and says what is allowed.
//!
//! ```
//! use fairlane_pg::PgConfig;
//! let c = PgConfig::from_toml_str(r#"
//!     [server]
//!     port = 5432
//!     [auth]
//!     users = [{ user = "alice", password = "secret" }]
//!     [[tenant]]
//!     name = "gold"
//!     users = ["alice"]
//!     res = 30
//! "#).unwrap();
//! assert_eq!(c.pool.size, 8);
//! let e = PgConfig::from_toml_str("[pool]\nsize = 0\n").unwrap_err();
//! assert!(e.to_string().contains("pool.size"), "{e}");
//! ```

use std::net::SocketAddr;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use fairlane_runtime::config_file::ConfigError;

type Check = Result<(), ConfigError>;

/// The whole configuration.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct PgConfig {
    /// Where clients and operators connect.
    pub listen: Listen,
    /// The PostgreSQL server behind the pooler.
    pub server: Server,
    /// Server connections.
    pub pool: Pool,
    /// Which scheduler hands out the server connections.
    pub scheduler: SchedulerSection,
    /// Queue caps, timeouts and sizes.
    pub limits: Limits,
    /// Who may log in, and how.
    pub auth: Auth,
    /// The tenants, matched in order; a connection no tenant matches is the `default`
    /// tenant (weight 1, no reservation).
    #[serde(rename = "tenant")]
    pub tenants: Vec<Tenant>,
}

/// `[listen]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Listen {
    /// The clients' address (default `127.0.0.1:6432`; port 0 picks one).
    pub addr: String,
    /// `/metrics`, `/status` and `/dashboard` (default `127.0.0.1:9187`; `""` for none).
    pub admin: String,
    /// Threads relaying clients (`fairlane pg` only; default 1: one event loop, as
    /// PgBouncer runs, the least CPU per transaction; more spread the relaying over cores).
    pub threads: usize,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            addr: "127.0.0.1:6432".into(),
            admin: "127.0.0.1:9187".into(),
            threads: 1,
        }
    }
}

impl Listen {
    fn check(&self) -> Check {
        parse_addr("listen.addr", &self.addr)?;
        if !self.admin.is_empty() {
            parse_addr("listen.admin", &self.admin)?;
        }
        if !(1..=1024).contains(&self.threads) {
            return Err(ConfigError::new(
                "listen.threads",
                format!("must be 1 to 1024, got {}", self.threads),
            ));
        }
        Ok(())
    }
}

/// How the CPU time of a transaction is measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metering {
    /// `schedstat` when the server's backends are visible in this host's `/proc`, else
    /// `elapsed`.
    #[default]
    Auto,
    /// The backend's CPU time, `/proc/<pid>/schedstat`'s counter, read through the backend's
    /// process CPU clock (the server on this host).
    Schedstat,
    /// The time the server connection was held (a server on another host).
    Elapsed,
}

/// `[server]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Server {
    /// Host name or address (default `127.0.0.1`).
    pub host: String,
    /// Port (default 5432).
    pub port: u16,
    /// The server's cores: reservations are percentages of `cores × time` (default: this
    /// host's count, right when the server runs here).
    pub cores: Option<usize>,
    /// How a transaction's CPU is measured (default `auto`).
    pub metering: Metering,
    /// Give up opening a server connection after this long (default 5000 ms).
    pub connect_timeout_ms: u64,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            host: "127.0.0.1".into(),
            port: 5432,
            cores: None,
            metering: Metering::Auto,
            connect_timeout_ms: 5000,
        }
    }
}

impl Server {
    fn check(&self) -> Check {
        if self.host.is_empty() {
            return Err(ConfigError::new("server.host", "must not be empty"));
        }
        if self.port == 0 {
            return Err(ConfigError::new("server.port", "must be 1 to 65535, got 0"));
        }
        if let Some(c) = self.cores {
            if !(1..=fairlane_core::MAX_WORKERS).contains(&c) {
                return Err(ConfigError::new(
                    "server.cores",
                    format!("must be 1 to {}, got {c}", fairlane_core::MAX_WORKERS),
                ));
            }
        }
        positive("server.connect_timeout_ms", self.connect_timeout_ms)
    }

    /// The cores reservations are percentages of.
    pub fn cores(&self) -> usize {
        self.cores.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
    }
}

/// Pool mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A server connection per transaction, handed back at ReadyForQuery idle.
    #[default]
    Transaction,
    /// A server connection per client session, reset with `DISCARD ALL` afterwards.
    Session,
}

/// `[pool]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Pool {
    /// D: server connections open at once over all (database, role) pools, and so in use at
    /// once (default 8).
    pub size: usize,
    /// `transaction` (default) or `session`.
    pub mode: Mode,
    /// Server connections open at once, in use and idle, over all pools (default
    /// 4 × `size`, at least `size`): at this cap the longest-idle connection of another
    /// pool is closed to open one for a pool that has none idle.
    pub max_connections: Option<usize>,
}

impl Default for Pool {
    fn default() -> Self {
        Pool {
            size: 8,
            mode: Mode::Transaction,
            max_connections: None,
        }
    }
}

impl Pool {
    /// `max_connections` in effect.
    pub fn max_open(&self) -> usize {
        self.max_connections.unwrap_or(4 * self.size)
    }

    fn check(&self) -> Check {
        if let Some(m) = self.max_connections {
            if m < self.size {
                return Err(ConfigError::new(
                    "pool.max_connections",
                    format!("must be ≥ pool.size = {}, got {m}", self.size),
                ));
            }
        }
        if !(1..=fairlane_core::MAX_WORKERS).contains(&self.size) {
            return Err(ConfigError::new(
                "pool.size",
                format!(
                    "must be 1 to {}, got {}",
                    fairlane_core::MAX_WORKERS,
                    self.size
                ),
            ));
        }
        Ok(())
    }
}

/// The algorithms `[scheduler] algorithm` accepts besides the core presets: LDF and the
/// reservation baselines of seeds/003 §6 (`drr-res`, `edf-res`, `no-res`).
pub const RESERVATION_POLICIES: [&str; 4] = ["ldf", "drr-res", "edf-res", "no-res"];

/// `[scheduler]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSection {
    /// A core preset (`sfq`, `wfqe`, `2dfqe`, `drr`, `fifo`, …) or a reservation policy:
    /// `ldf` (default), `drr-res`, `edf-res`, `no-res`.
    pub algorithm: String,
    /// The metering interval of the reservations (default 1000 ms).
    pub interval_ms: u64,
    /// The estimate of a tenant's first transaction with a preset (default 1 ms of CPU).
    pub initial_estimate_ms: f64,
}

impl Default for SchedulerSection {
    fn default() -> Self {
        SchedulerSection {
            algorithm: "ldf".into(),
            interval_ms: 1000,
            initial_estimate_ms: 1.0,
        }
    }
}

impl SchedulerSection {
    /// Whether `algorithm` is a reservation policy (LDF or a baseline of §6).
    pub fn reserves(&self) -> bool {
        RESERVATION_POLICIES.contains(&self.algorithm.as_str())
    }

    fn check(&self) -> Check {
        if !self.reserves() {
            fairlane_core::Config::preset(&self.algorithm).map_err(|e| {
                ConfigError::new(
                    "scheduler.algorithm",
                    format!(
                        "{e}; expected one of {} or {}",
                        RESERVATION_POLICIES.join(", "),
                        fairlane_core::PRESETS.join(", ")
                    ),
                )
            })?;
        }
        positive("scheduler.interval_ms", self.interval_ms)?;
        let e = self.initial_estimate_ms;
        if !(e.is_finite() && e > 0.0) {
            return Err(ConfigError::new(
                "scheduler.initial_estimate_ms",
                format!("must be finite and > 0, got {e}"),
            ));
        }
        Ok(())
    }
}

/// `[limits]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Client connections open at once; more are refused with SQLSTATE 53300 (default 1000).
    pub max_clients: usize,
    /// Transactions waiting for a server connection over all tenants before new ones are
    /// refused with SQLSTATE 53300 (default 10000).
    pub max_waiting: usize,
    /// The same per tenant (default 1000).
    pub max_waiting_per_tenant: usize,
    /// A transaction that waited this long for a server connection is refused with SQLSTATE
    /// 57014 (default 30000 ms).
    pub queue_timeout_ms: u64,
    /// A client message longer than this closes the client (SQLSTATE 08P01; default 64 MiB).
    pub max_message_bytes: usize,
    /// A client must finish logging in within this long (default 15000 ms).
    pub login_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_clients: 1000,
            max_waiting: 10_000,
            max_waiting_per_tenant: 1000,
            queue_timeout_ms: 30_000,
            max_message_bytes: 64 << 20,
            login_timeout_ms: 15_000,
        }
    }
}

impl Limits {
    fn check(&self) -> Check {
        positive("limits.max_clients", self.max_clients as u64)?;
        positive("limits.max_waiting", self.max_waiting as u64)?;
        positive(
            "limits.max_waiting_per_tenant",
            self.max_waiting_per_tenant as u64,
        )?;
        positive("limits.queue_timeout_ms", self.queue_timeout_ms)?;
        positive("limits.login_timeout_ms", self.login_timeout_ms)?;
        if !(1024..=1 << 30).contains(&self.max_message_bytes) {
            return Err(ConfigError::new(
                "limits.max_message_bytes",
                format!("must be 1024 to 2^30, got {}", self.max_message_bytes),
            ));
        }
        Ok(())
    }
}

/// How clients prove who they are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
pub enum AuthMethod {
    /// SCRAM-SHA-256 (RFC 5802/7677), PostgreSQL's default.
    #[default]
    #[serde(rename = "scram-sha-256")]
    Scram,
    /// PostgreSQL's md5 challenge.
    #[serde(rename = "md5")]
    Md5,
}

/// `[auth]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Auth {
    /// `scram-sha-256` (default) or `md5`.
    pub method: AuthMethod,
    /// Let clients connecting from a loopback address in without a password (default false).
    /// They still must be in `users`: the pooler logs in to the server with that password.
    pub trust_loopback: bool,
    /// The users and their passwords, used both to check clients and to log in to the
    /// server as the client's role.
    pub users: Vec<User>,
}

/// One `[auth] users` entry.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct User {
    /// The role name.
    pub user: String,
    /// Its password (on the server too).
    pub password: String,
}

impl Auth {
    fn check(&self) -> Check {
        let mut seen = std::collections::HashSet::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.user.is_empty() || u.user.contains('\0') {
                return Err(ConfigError::new(
                    format!("auth.users[{i}].user"),
                    "must be a non-empty name without NUL",
                ));
            }
            if u.password.contains('\0') {
                return Err(ConfigError::new(
                    format!("auth.users[{i}].password"),
                    "must not contain NUL",
                ));
            }
            if !seen.insert(u.user.as_str()) {
                return Err(ConfigError::new(
                    format!("auth.users[{i}].user"),
                    format!("{:?} is listed twice", u.user),
                ));
            }
        }
        Ok(())
    }

    /// The password of `user`, if listed.
    pub fn password(&self, user: &str) -> Option<&str> {
        self.users
            .iter()
            .find(|u| u.user == user)
            .map(|u| u.password.as_str())
    }
}

/// `[[tenant]]`: a connection belongs to the first tenant whose non-empty lists all match
/// (AND across lists, OR within one).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tenant {
    /// Unique name (metrics label).
    pub name: String,
    /// Roles that belong to it (empty: any).
    #[serde(default)]
    pub users: Vec<String>,
    /// Databases that belong to it (empty: any).
    #[serde(default)]
    pub databases: Vec<String>,
    /// `application_name`s that belong to it (empty: any).
    #[serde(default)]
    pub application_names: Vec<String>,
    /// Weight φ (default 1): its share with the fair-queueing presets, and of the surplus
    /// under LDF (Eq. 5).
    #[serde(default = "one")]
    pub weight: f64,
    /// ResCPU, % of the server's CPU (`server.cores × time`; default 0: none). LDF and the
    /// reservation baselines only.
    #[serde(default)]
    pub res: f64,
    /// MaxCPU, % of the server's CPU (default 100).
    #[serde(default = "hundred")]
    pub max: f64,
}

impl Tenant {
    /// Whether a connection of `user` on `database` named `app` belongs here.
    pub fn matches(&self, user: &str, database: &str, app: &str) -> bool {
        let ok = |list: &[String], v: &str| list.is_empty() || list.iter().any(|x| x == v);
        ok(&self.users, user) && ok(&self.databases, database) && ok(&self.application_names, app)
    }

    fn check(&self, i: usize) -> Check {
        let field = |f: &str| format!("tenant[{i}].{f}");
        if self.name.is_empty() {
            return Err(ConfigError::new(field("name"), "must not be empty"));
        }
        let w = self.weight;
        if !(fairlane_core::MIN_WEIGHT..=fairlane_core::MAX_WEIGHT).contains(&w) {
            return Err(ConfigError::new(
                field("weight"),
                format!("must be in [1e-6, 1e6], got {w}"),
            ));
        }
        if !(self.res.is_finite() && (0.0..=100.0).contains(&self.res)) {
            return Err(ConfigError::new(
                field("res"),
                format!("must be in [0, 100] %, got {}", self.res),
            ));
        }
        if !(self.max.is_finite() && self.max > 0.0 && self.max <= 100.0) {
            return Err(ConfigError::new(
                field("max"),
                format!("must be in (0, 100] %, got {}", self.max),
            ));
        }
        if self.max < self.res {
            return Err(ConfigError::new(
                field("max"),
                format!("must be ≥ res = {}, got {}", self.res, self.max),
            ));
        }
        Ok(())
    }
}

impl PgConfig {
    /// Read, parse and check a file; errors name it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        fairlane_runtime::config_file::read(path, Self::from_toml_str)
    }

    /// Parse and check TOML text.
    pub fn from_toml_str(text: &str) -> Result<Self, ConfigError> {
        let config: PgConfig = toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map(|s| key_at(text, s.start))
                .unwrap_or_else(|| "toml".into());
            ConfigError::new(field, e.message().trim().to_string())
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Check every section; the first problem is returned, naming its field.
    pub fn validate(&self) -> Check {
        self.listen.check()?;
        self.server.check()?;
        self.pool.check()?;
        self.scheduler.check()?;
        self.limits.check()?;
        self.auth.check()?;
        let mut names = std::collections::HashSet::new();
        let mut reserved = 0.0;
        for (i, t) in self.tenants.iter().enumerate() {
            t.check(i)?;
            if !names.insert(t.name.as_str()) || t.name == DEFAULT_TENANT {
                return Err(ConfigError::new(
                    format!("tenant[{i}].name"),
                    format!(
                        "{:?} is taken (names are unique; `default` is built in)",
                        t.name
                    ),
                ));
            }
            if t.res > 0.0 && !self.scheduler.reserves() {
                return Err(ConfigError::new(
                    format!("tenant[{i}].res"),
                    format!(
                        "reservations need a reservation policy ({}), not scheduler.algorithm = {:?}",
                        RESERVATION_POLICIES.join(", "),
                        self.scheduler.algorithm
                    ),
                ));
            }
            reserved += t.res;
        }
        if reserved > 100.0 {
            eprintln!(
                "fairlane pg: the reservations add up to {reserved} % of the server: overbooked \
                 (seeds/003 §6.3); violations are metered"
            );
        }
        Ok(())
    }
}

/// The tenant of connections no `[[tenant]]` matches.
pub const DEFAULT_TENANT: &str = "default";

/// `section.key` for the key on the line holding byte `at` (a TOML error's span).
fn key_at(text: &str, at: usize) -> String {
    let at = at.min(text.len());
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line = text[line_start..].lines().next().unwrap_or("");
    let key = line.split('=').next().unwrap_or("").trim();
    let section = text[..line_start]
        .lines()
        .rev()
        .find_map(|l| {
            let l = l.trim();
            l.starts_with('[')
                .then(|| l.trim_matches(|c| c == '[' || c == ']').to_string())
        })
        .unwrap_or_default();
    match (section.is_empty(), key.is_empty() || key.starts_with('[')) {
        (_, true) if !key.is_empty() => key.trim_matches(|c| c == '[' || c == ']').to_string(),
        (true, _) => key.to_string(),
        (false, true) => section,
        (false, false) => format!("{section}.{key}"),
    }
}

fn parse_addr(field: &str, addr: &str) -> Result<SocketAddr, ConfigError> {
    addr.parse()
        .map_err(|_| ConfigError::new(field, format!("{addr:?} is not an ip:port address")))
}

fn positive(field: &str, v: u64) -> Check {
    if v == 0 {
        return Err(ConfigError::new(field, "must be at least 1, got 0"));
    }
    Ok(())
}

fn one() -> f64 {
    1.0
}
fn hundred() -> f64 {
    100.0
}
