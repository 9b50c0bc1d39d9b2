//! Fair sharing of one upstream across several proxy instances, coordinated through Redis
//! (`[cluster]`; the design and its error bound are in docs/proxy.md, "Running several
//! instances").
//!
//! Every `sync_interval_ms` each instance makes **one** Redis round trip (a Lua script, so
//! the exchange is atomic): it writes its [`Report`] — per tenant: weight, demand (waiting +
//! in flight) and requests completed — under a key that expires after `lease_ms`, and reads
//! back every live instance's report. From that snapshot every instance computes the same
//! [`Allocation`] ([`allocate`]):
//!
//! 1. the global depth D is water-filled across tenants by weight, each capped by its global
//!    demand (the fair share a single central SFQ(D) over all the demand would give);
//! 2. each tenant's global share is split across instances in proportion to its demand there;
//! 3. an instance's seats are the sum of its tenants' shares (plus an even part of any D left
//!    over when all demand is met), rounded by largest remainder so the seats sum to D.
//!
//! The instance then sets its gate's seats to its seats and each local tenant's weight to its
//! local share, so the local scheduler splits the seats as the global allocation says. The
//! hot path never touches Redis. When Redis fails or is slow for longer than a lease, the
//! instance keeps its last seats and goes back to the configured weights (local fairness
//! within its last share of D), reports it on `/status`, `/metrics` and a rate-limited log
//! line, and rejoins on the next successful sync.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, MAX_DEPTH};
use crate::server::Inner;

/// `[cluster]`: coordinate this instance with others in front of the same upstream.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The Redis server, `redis://host:port[/db]` (also `rediss://`, `redis+unix://`).
    pub redis: String,
    /// This instance's id, unique among the instances (printable ASCII, no spaces).
    pub instance: String,
    /// The global depth D: requests outstanding at the shared upstream over all instances.
    pub depth: usize,
    /// How often to exchange reports with the other instances (default 100 ms).
    #[serde(default = "default_interval")]
    pub sync_interval_ms: u64,
    /// How long a report stays live without renewal; a dead instance's share is reclaimed
    /// after this (default 5 × `sync_interval_ms`).
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// A Redis round trip slower than this counts as a failure (default `sync_interval_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Prefix of the Redis keys, to run several clusters on one Redis (default `fairlane`).
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
}

fn default_interval() -> u64 {
    100
}
fn default_prefix() -> String {
    "fairlane".into()
}

fn err(field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        file: None,
        field: format!("cluster.{field}"),
        reason: reason.into(),
    }
}

fn printable(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic()) && !s.contains('"')
}

impl ClusterConfig {
    /// The lease in effect.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.unwrap_or(5 * self.sync_interval_ms))
    }

    /// The Redis timeout in effect.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(self.sync_interval_ms))
    }

    /// Check every field; the error names it (`cluster.depth`, …).
    pub fn validate(&self) -> Result<(), ConfigError> {
        redis::Client::open(self.redis.as_str())
            .map_err(|e| err("redis", format!("not a Redis URL ({:?}): {e}", self.redis)))?;
        if !printable(&self.instance) {
            return Err(err(
                "instance",
                format!(
                    "must be non-empty printable ASCII without quotes or spaces, got {:?}",
                    self.instance
                ),
            ));
        }
        if self.depth == 0 || self.depth > MAX_DEPTH {
            return Err(err(
                "depth",
                format!("must be in 1..={MAX_DEPTH}, got {}", self.depth),
            ));
        }
        if self.sync_interval_ms == 0 || self.sync_interval_ms > 60_000 {
            return Err(err(
                "sync_interval_ms",
                format!("must be in 1..=60000, got {}", self.sync_interval_ms),
            ));
        }
        if let Some(l) = self.lease_ms {
            if l <= self.sync_interval_ms {
                return Err(err(
                    "lease_ms",
                    format!(
                        "must be longer than sync_interval_ms ({}), got {l}",
                        self.sync_interval_ms
                    ),
                ));
            }
        }
        if self.timeout_ms == Some(0) {
            return Err(err("timeout_ms", "must be ≥ 1"));
        }
        if !printable(&self.key_prefix) {
            return Err(err(
                "key_prefix",
                format!(
                    "must be non-empty printable ASCII, got {:?}",
                    self.key_prefix
                ),
            ));
        }
        Ok(())
    }
}

/// One tenant in a [`Report`].
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct TenantReport {
    /// Weight φ in the instance's config.
    pub weight: f64,
    /// Requests waiting or in flight at the instance: the count now, or the last report's
    /// value × 0.8 if that is larger (a peak hold, so that a closed-loop client's brief gap
    /// between a response and its next request does not move seats between instances).
    pub demand: f64,
    /// Requests the upstream answered through the instance so far.
    pub completed: u64,
}

/// What one instance publishes each sync.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Report {
    /// The instance id.
    pub id: String,
    /// Upstream slots the instance holds now (requests in flight).
    #[serde(default)]
    pub holding: usize,
    /// Per tenant name.
    pub tenants: BTreeMap<String, TenantReport>,
}

/// One instance's part of an [`Allocation`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstanceShare {
    /// Whole seats (upstream slots) this instance may hold.
    pub seats: usize,
    /// Slots it held at its last report.
    pub holding: usize,
    /// Per tenant: the part of the tenant's global share served here (fractional seats).
    pub tenants: BTreeMap<String, f64>,
}

/// The global allocation every instance computes from the same snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Allocation {
    /// Per tenant: its fair share of D (fractional seats), water-filled by weight.
    pub global: BTreeMap<String, f64>,
    /// Per tenant: its demand over all instances.
    pub demand: BTreeMap<String, f64>,
    /// Per tenant: its weight (from the first instance, by id, that reports it).
    pub weight: BTreeMap<String, f64>,
    /// Per tenant: requests completed over all live instances.
    pub completed: BTreeMap<String, u64>,
    /// Per instance id.
    pub instances: BTreeMap<String, InstanceShare>,
}

/// Weighted water-filling (max-min fairness with weights): share `capacity` across
/// `(weight, demand)` pairs so nobody gets more than its demand and the rest is split in
/// proportion to weight. Returns the shares in input order.
pub fn water_fill(capacity: f64, tenants: &[(f64, f64)]) -> Vec<f64> {
    let mut share = vec![0.0; tenants.len()];
    let mut open: Vec<usize> = (0..tenants.len())
        .filter(|&i| tenants[i].1 > 0.0 && tenants[i].0 > 0.0)
        .collect();
    let mut left = capacity.max(0.0);
    // Each round either satisfies at least one tenant (and drops it) or ends: ≤ n rounds.
    while !open.is_empty() && left > 0.0 {
        let w: f64 = open.iter().map(|&i| tenants[i].0).sum();
        let level = left / w;
        let (done, rest): (Vec<usize>, Vec<usize>) = open
            .iter()
            .partition(|&&i| tenants[i].1 <= tenants[i].0 * level);
        if done.is_empty() {
            for &i in &rest {
                share[i] = tenants[i].0 * level;
            }
            break;
        }
        for &i in &done {
            share[i] = tenants[i].1;
            left -= tenants[i].1;
        }
        open = rest;
    }
    share
}

/// Round `parts` (summing to `total`) to whole numbers summing to `total` by largest
/// remainder (ties to the lower index), then make every part ≥ 1 by taking from the largest
/// (when there are at least as many whole units as parts).
fn apportion(total: usize, parts: &[f64]) -> Vec<usize> {
    let mut whole: Vec<usize> = parts.iter().map(|p| p.max(0.0).floor() as usize).collect();
    let given: usize = whole.iter().sum();
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by(|&a, &b| {
        let (ra, rb) = (parts[a] - parts[a].floor(), parts[b] - parts[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in order.iter().take(total.saturating_sub(given)) {
        whole[i] += 1;
    }
    if total >= parts.len() {
        for i in 0..whole.len() {
            if whole[i] == 0 {
                // Take from the largest (lowest index among equals).
                let j = (0..whole.len())
                    .max_by(|&a, &b| whole[a].cmp(&whole[b]).then(b.cmp(&a)))
                    .unwrap_or(i);
                if whole[j] > 1 {
                    whole[j] -= 1;
                    whole[i] = 1;
                }
            }
        }
    }
    whole
}

/// The global allocation of `depth` seats from the live instances' `reports`. Pure and
/// deterministic: the same snapshot gives every instance the same answer.
pub fn allocate(depth: usize, reports: &[Report]) -> Allocation {
    let mut reports: Vec<&Report> = reports.iter().collect();
    reports.sort_by(|a, b| a.id.cmp(&b.id));
    reports.dedup_by(|a, b| a.id == b.id);
    let mut a = Allocation::default();
    for r in &reports {
        for (name, t) in &r.tenants {
            let w = if t.weight.is_finite() && t.weight > 0.0 {
                t.weight
            } else {
                1.0
            };
            a.weight.entry(name.clone()).or_insert(w);
            *a.demand.entry(name.clone()).or_default() += t.demand;
            *a.completed.entry(name.clone()).or_default() += t.completed;
        }
    }
    let names: Vec<&String> = a.weight.keys().collect();
    let pairs: Vec<(f64, f64)> = names.iter().map(|n| (a.weight[*n], a.demand[*n])).collect();
    let shares = water_fill(depth as f64, &pairs);
    let global: BTreeMap<String, f64> = names
        .iter()
        .zip(&shares)
        .map(|(n, &s)| ((*n).clone(), s))
        .collect();
    if reports.is_empty() {
        a.global = global;
        return a;
    }
    let used: f64 = shares.iter().sum();
    // Work conservation: D the demand does not use is spread evenly, so a request arriving
    // anywhere before the next sync finds a seat.
    let spare = (depth as f64 - used).max(0.0) / reports.len() as f64;
    let mut parts = Vec::with_capacity(reports.len());
    for r in &reports {
        let mut share = InstanceShare {
            holding: r.holding,
            ..InstanceShare::default()
        };
        let mut sum = spare;
        for (name, t) in &r.tenants {
            let d = a.demand[name];
            if t.demand > 0.0 && d > 0.0 {
                let s = global[name] * t.demand / d;
                share.tenants.insert(name.clone(), s);
                sum += s;
            }
        }
        parts.push(sum);
        a.instances.insert(r.id.clone(), share);
    }
    let seats = apportion(depth, &parts);
    for (r, s) in reports.iter().zip(seats) {
        if let Some(i) = a.instances.get_mut(&r.id) {
            i.seats = s.max(1);
        }
    }
    a.global = global;
    a
}

/// The seats instance `id` sets now, holding `current`: its target from `a` at once when
/// that is a decrease; an increase only into slots the other instances did not hold at their
/// last reports (the rest at a later sync, once they have drained). A shrinking instance
/// keeps its surplus requests until they complete, so growing at once would overshoot D.
pub fn seats_now(depth: usize, a: &Allocation, id: &str, current: usize) -> Option<usize> {
    let me = a.instances.get(id)?;
    let target = me.seats.max(1);
    if target <= current {
        return Some(target);
    }
    let others: usize = a
        .instances
        .iter()
        .filter(|(k, _)| k.as_str() != id)
        .map(|(_, s)| s.holding)
        .sum();
    let free = depth.saturating_sub(others);
    Some(target.min(current.max(free)).max(1))
}

/// The exchange, atomic on the Redis server: renew this instance's report under a lease,
/// then return every live report (dropping ids whose lease expired from the index).
const EXCHANGE: &str = r"
local p = KEYS[1]
redis.call('SET', p .. ':report:' .. ARGV[1], ARGV[2], 'PX', ARGV[3])
redis.call('SADD', p .. ':instances', ARGV[1])
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', p .. ':instances')) do
  local v = redis.call('GET', p .. ':report:' .. id)
  if v then table.insert(out, v) else redis.call('SREM', p .. ':instances', id) end
end
return out
";

/// One tenant in [`ClusterStatus`].
#[derive(Clone, Debug, Serialize)]
pub struct ClusterTenant {
    /// Name.
    pub name: String,
    /// Weight φ used globally.
    pub weight: f64,
    /// Waiting + in flight over all instances (at the last sync, peak-held).
    pub global_demand: f64,
    /// Its fair share of the global D, as a fraction of D.
    pub global_share: f64,
    /// The part of that share served through this instance, as a fraction of D.
    pub local_share: f64,
    /// Requests completed over all live instances.
    pub global_completed: u64,
}

/// The cluster part of `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterStatus {
    /// This instance's id.
    pub instance: String,
    /// The global depth D.
    pub depth: usize,
    /// Seats this instance holds now (its share of D).
    pub seats: usize,
    /// Live instances at the last sync (ids).
    pub instances: Vec<String>,
    /// Seconds since the last successful sync (`null` before the first).
    pub sync_age_s: Option<f64>,
    /// True once Redis has been unreachable or slow for a lease: local fairness within the
    /// last share of D.
    pub fallback: bool,
    /// Successful syncs.
    pub syncs: u64,
    /// Failed or timed-out syncs.
    pub sync_failures: u64,
    /// Per tenant (global view).
    pub tenants: Vec<ClusterTenant>,
}

impl ClusterStatus {
    /// Prometheus text for the cluster gauges and counters.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut o = String::new();
        let mut g = |name: &str, help: &str, kind: &str, v: f64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        };
        g(
            "fairlane_cluster_fallback",
            "1 while Redis is unreachable or slow (local fairness within the last share of D).",
            "gauge",
            f64::from(u8::from(self.fallback)),
        );
        g(
            "fairlane_cluster_sync_age_seconds",
            "Seconds since the last successful sync (-1 before the first).",
            "gauge",
            self.sync_age_s.unwrap_or(-1.0),
        );
        g(
            "fairlane_cluster_syncs_total",
            "Successful syncs.",
            "counter",
            self.syncs as f64,
        );
        g(
            "fairlane_cluster_sync_failures_total",
            "Failed or timed-out syncs.",
            "counter",
            self.sync_failures as f64,
        );
        g(
            "fairlane_cluster_seats",
            "This instance's share of the global depth D.",
            "gauge",
            self.seats as f64,
        );
        g(
            "fairlane_cluster_instances",
            "Live instances at the last sync.",
            "gauge",
            self.instances.len() as f64,
        );
        for (name, help, pick) in [
            (
                "fairlane_cluster_global_share",
                "A tenant's fair share of the global D (fraction).",
                (|t: &ClusterTenant| t.global_share) as fn(&ClusterTenant) -> f64,
            ),
            (
                "fairlane_cluster_local_share",
                "The part of a tenant's share served through this instance (fraction of D).",
                |t: &ClusterTenant| t.local_share,
            ),
        ] {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
            for t in &self.tenants {
                let label = t.name.replace('\\', "\\\\");
                let _ = writeln!(o, "{name}{{tenant=\"{label}\"}} {}", pick(t));
            }
        }
        o
    }
}

#[derive(Debug, Default)]
struct State {
    last_ok: Option<Instant>,
    fallback: bool,
    syncs: u64,
    failures: u64,
    last_log: Option<Instant>,
    allocation: Allocation,
    /// The demand last reported, per tenant (for the peak hold).
    held: BTreeMap<String, f64>,
}

/// An instance's cluster membership: its config and the state of the last sync.
#[derive(Debug)]
pub struct Cluster {
    config: ClusterConfig,
    state: Mutex<State>,
}

impl Cluster {
    /// A member with `config` (not yet synced).
    pub fn new(config: ClusterConfig) -> Arc<Cluster> {
        Arc::new(Cluster {
            config,
            state: Mutex::new(State::default()),
        })
    }

    /// Its config.
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The `/status` section; `seats` is the gate's depth now.
    pub fn status(&self, seats: usize) -> ClusterStatus {
        let st = self.state();
        let a = &st.allocation;
        let d = self.config.depth as f64;
        let me = a.instances.get(&self.config.instance);
        ClusterStatus {
            instance: self.config.instance.clone(),
            depth: self.config.depth,
            seats,
            instances: a.instances.keys().cloned().collect(),
            sync_age_s: st.last_ok.map(|t| t.elapsed().as_secs_f64()),
            fallback: st.fallback,
            syncs: st.syncs,
            sync_failures: st.failures,
            tenants: a
                .global
                .iter()
                .map(|(name, g)| ClusterTenant {
                    name: name.clone(),
                    weight: a.weight.get(name).copied().unwrap_or(1.0),
                    global_demand: a.demand.get(name).copied().unwrap_or(0.0),
                    global_share: g / d,
                    local_share: me.and_then(|m| m.tenants.get(name)).map_or(0.0, |s| s / d),
                    global_completed: a.completed.get(name).copied().unwrap_or(0),
                })
                .collect(),
        }
    }
}

/// How much of the last reported demand is held when the count drops (per sync).
const HOLD: f64 = 0.8;

/// This instance's report, read from the gate and the metrics; `held` is the last report's
/// demand per tenant, updated.
fn report(inner: &Inner, id: &str, held: &mut BTreeMap<String, f64>) -> Report {
    let settings = inner.settings();
    let weights: BTreeMap<&str, f64> = settings
        .config
        .tenants
        .iter()
        .map(|t| (t.name.as_str(), t.weight))
        .collect();
    let tenants = settings
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = fairlane_core::TenantId(i as u64);
            let view = inner.gate.0.tenant(id);
            let now = view.map_or(0, |v| v.queued + v.running) as f64;
            let last = held.get(name).copied().unwrap_or(0.0) * HOLD;
            // Below half a request the hold has faded: the tenant left this instance.
            let demand = if now >= last || last < 0.5 { now } else { last };
            held.insert(name.clone(), demand);
            let t = TenantReport {
                weight: weights.get(name.as_str()).copied().unwrap_or(1.0),
                demand,
                completed: inner
                    .metrics
                    .tenant(id)
                    .completed
                    .load(std::sync::atomic::Ordering::Relaxed),
            };
            (name.clone(), t)
        })
        .collect();
    Report {
        id: id.to_string(),
        holding: inner.gate.load().1,
        tenants,
    }
}

/// Apply this instance's part of `a`: seats, and local weights = local shares (configured
/// weights for tenants with no demand here).
fn apply(inner: &Inner, depth: usize, id: &str, a: &Allocation) {
    let Some(me) = a.instances.get(id) else {
        return;
    };
    if let Some(seats) = seats_now(depth, a, id, inner.gate.depth()) {
        if let Err(e) = inner.gate.set_depth(seats) {
            refused(format_args!("{seats} seats"), &e);
        }
    }
    set_weights(inner, |name| me.tenants.get(name).copied());
}

/// Set every known tenant's weight: `pick(name)` if it gives a positive value, else the
/// configured weight. Skips changes under 1 % (no churn in the scheduler's tags).
fn set_weights(inner: &Inner, pick: impl Fn(&str) -> Option<f64>) {
    let settings = inner.settings();
    let configured: BTreeMap<&str, f64> = settings
        .config
        .tenants
        .iter()
        .map(|t| (t.name.as_str(), t.weight))
        .collect();
    for (i, name) in settings.names.iter().enumerate() {
        let id = fairlane_core::TenantId(i as u64);
        let configured = configured.get(name.as_str()).copied().unwrap_or(1.0);
        let w = pick(name)
            .filter(|w| w.is_finite() && *w > 0.0)
            .unwrap_or(configured);
        let now = inner.gate.0.tenant(id).map(|v| v.weight);
        if now.is_none_or(|n| (n - w).abs() > 0.01 * w) {
            if let Err(e) = inner.gate.set_weight(id, w) {
                refused(format_args!("weight {w} for tenant {name:?}"), &e);
            }
        }
    }
}

/// The gate refused a seat count or weight computed from the cluster's allocation: counted,
/// and logged the first time and every 1,000th time after (scheduler errors are never dropped
/// silently, issue 15; a refused change leaves the previous value in force).
fn refused(what: std::fmt::Arguments, e: &dyn std::fmt::Display) {
    static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    if n == 1 || n.is_multiple_of(1000) {
        eprintln!("fairlane proxy: cluster: the gate refused {what}: {e} ({n} refusals so far)");
    }
}

/// A failure: count it; fall back (configured weights, seats kept), log at most every 10 s.
///
/// A failure within one lease of the last success keeps the whole last allocation (the other
/// instances still count this one's report, so the global allocation still holds); only
/// when the last success is a lease old — or there was none — does the instance fall back.
fn failed(inner: &Inner, cluster: &Cluster, why: &str) {
    let log = {
        let mut st = cluster.state();
        st.failures += 1;
        if st
            .last_ok
            .is_some_and(|t| t.elapsed() < cluster.config.lease())
        {
            return;
        }
        let entering = !st.fallback;
        st.fallback = true;
        let due = st
            .last_log
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(10));
        if entering || due {
            st.last_log = Some(Instant::now());
        }
        (entering || due).then_some(st.failures)
    };
    set_weights(inner, |_| None);
    if let Some(n) = log {
        eprintln!(
            "fairlane proxy: cluster: Redis sync failed ({why}); local fairness within the last \
             share of D ({} seats) until Redis answers ({n} failures so far)",
            inner.gate.depth()
        );
    }
}

async fn exchange(
    conn: &mut redis::aio::MultiplexedConnection,
    script: &redis::Script,
    c: &ClusterConfig,
    body: &str,
) -> redis::RedisResult<Vec<String>> {
    script
        .key(&c.key_prefix)
        .arg(&c.instance)
        .arg(body)
        .arg(c.lease().as_millis() as u64)
        .invoke_async(conn)
        .await
}

/// Run the sync loop until aborted.
pub(crate) async fn run(inner: Arc<Inner>, cluster: Arc<Cluster>) {
    let c = cluster.config().clone();
    let script = redis::Script::new(EXCHANGE);
    let Ok(client) = redis::Client::open(c.redis.as_str()) else {
        return; // validated at start-up
    };
    let mut conn: Option<redis::aio::MultiplexedConnection> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(c.sync_interval_ms));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let timeout = c.timeout();
        if conn.is_none() {
            match tokio::time::timeout(timeout, client.get_multiplexed_async_connection()).await {
                Ok(Ok(k)) => conn = Some(k),
                Ok(Err(e)) => {
                    failed(&inner, &cluster, &e.to_string());
                    continue;
                }
                Err(_) => {
                    failed(&inner, &cluster, "connect timed out");
                    continue;
                }
            }
        }
        let Some(k) = conn.as_mut() else { continue };
        let report = {
            let mut st = cluster.state();
            report(&inner, &c.instance, &mut st.held)
        };
        let body = serde_json::to_string(&report).unwrap_or_default();
        let got = tokio::time::timeout(timeout, exchange(k, &script, &c, &body)).await;
        let raw = match got {
            Ok(Ok(raw)) => raw,
            Ok(Err(e)) => {
                conn = None;
                failed(&inner, &cluster, &e.to_string());
                continue;
            }
            Err(_) => {
                conn = None;
                failed(&inner, &cluster, "timed out");
                continue;
            }
        };
        // A report that does not parse (another version, a stray key) is skipped.
        let reports: Vec<Report> = raw
            .iter()
            .filter_map(|s| serde_json::from_str(s).ok())
            .collect();
        let a = allocate(c.depth, &reports);
        apply(&inner, c.depth, &c.instance, &a);
        let rejoined = {
            let mut st = cluster.state();
            let was = std::mem::replace(&mut st.fallback, false);
            st.last_ok = Some(Instant::now());
            st.syncs += 1;
            st.allocation = a;
            was
        };
        if rejoined {
            eprintln!(
                "fairlane proxy: cluster: Redis sync restored; {} seats of D = {}",
                inner.gate.depth(),
                c.depth
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(id: &str, t: &[(&str, f64, f64)]) -> Report {
        Report {
            id: id.into(),
            holding: 0,
            tenants: t
                .iter()
                .map(|&(n, w, d)| {
                    (
                        n.to_string(),
                        TenantReport {
                            weight: w,
                            demand: d,
                            completed: 0,
                        },
                    )
                })
                .collect(),
        }
    }

    #[test]
    fn water_fill_caps_by_demand_and_splits_by_weight() {
        let s = water_fill(24.0, &[(1.0, 100.0), (1.0, 2.0), (2.0, 100.0)]);
        assert_eq!(s[1], 2.0);
        assert!((s[0] - 22.0 / 3.0).abs() < 1e-9 && (s[2] - 44.0 / 3.0).abs() < 1e-9);
        let s = water_fill(10.0, &[(1.0, 3.0), (1.0, 0.0)]);
        assert_eq!(s, vec![3.0, 0.0]);
    }

    #[test]
    fn skewed_tenants_get_their_weight_share_globally() {
        // The issue's example: A via 1; B via 1, 2, 3; C (weight 2) via 2, 3.
        let r = [
            rep("i1", &[("A", 1.0, 16.0), ("B", 1.0, 16.0), ("C", 2.0, 0.0)]),
            rep("i2", &[("A", 1.0, 0.0), ("B", 1.0, 16.0), ("C", 2.0, 16.0)]),
            rep("i3", &[("B", 1.0, 16.0), ("C", 2.0, 16.0)]),
        ];
        let a = allocate(24, &r);
        assert_eq!(a.global["A"], 6.0);
        assert_eq!(a.global["B"], 6.0);
        assert_eq!(a.global["C"], 12.0);
        for i in ["i1", "i2", "i3"] {
            assert_eq!(a.instances[i].seats, 8, "{i}");
        }
        assert_eq!(a.instances["i1"].tenants["A"], 6.0);
        assert_eq!(a.instances["i1"].tenants["B"], 2.0);
        assert_eq!(a.instances["i2"].tenants["C"], 6.0);
        // The order reports arrive in does not matter.
        let mut rev = r.to_vec();
        rev.reverse();
        assert_eq!(allocate(24, &rev), a);
    }

    #[test]
    fn seats_sum_to_depth_and_idle_instances_keep_one() {
        let r = [
            rep("a", &[("x", 1.0, 5.0)]),
            rep("b", &[("x", 1.0, 0.0)]),
            rep("c", &[("y", 3.0, 7.0)]),
        ];
        for d in [3, 4, 7, 10, 13] {
            let a = allocate(d, &r);
            let seats: Vec<usize> = a.instances.values().map(|i| i.seats).collect();
            assert_eq!(seats.iter().sum::<usize>(), d, "D = {d}: {seats:?}");
            assert!(seats.iter().all(|&s| s >= 1), "D = {d}: {seats:?}");
        }
        // Spare depth (demand 12 < D 20) is spread so every instance can take new work.
        let a = allocate(20, &r);
        assert!(a.instances["b"].seats >= 2, "{:?}", a.instances);
    }

    #[test]
    fn growth_waits_for_the_slots_others_still_hold() {
        let mut r = vec![
            rep("i1", &[("A", 1.0, 16.0)]),
            rep("i2", &[("B", 1.0, 16.0)]),
        ];
        r[1].holding = 10; // i2 was at 10 seats and still holds 10
        let a = allocate(12, &r);
        assert_eq!(a.instances["i1"].seats, 6);
        // i1 at 2 seats may grow only into the 2 slots nobody holds.
        assert_eq!(seats_now(12, &a, "i1", 2), Some(2));
        assert_eq!(seats_now(12, &a, "i1", 1), Some(2));
        // i2 shrinks at once; once it has drained, i1 takes its full share.
        assert_eq!(seats_now(12, &a, "i2", 10), Some(6));
        r[1].holding = 6;
        let a = allocate(12, &r);
        assert_eq!(seats_now(12, &a, "i1", 2), Some(6));
        assert_eq!(seats_now(12, &a, "nobody", 2), None);
    }

    #[test]
    fn config_errors_name_the_field() {
        let ok = ClusterConfig {
            redis: "redis://127.0.0.1:6379".into(),
            instance: "p1".into(),
            depth: 8,
            sync_interval_ms: 100,
            lease_ms: None,
            timeout_ms: None,
            key_prefix: "fairlane".into(),
        };
        assert!(ok.validate().is_ok());
        let bad = |f: fn(&mut ClusterConfig), field: &str| {
            let mut c = ok.clone();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
        };
        bad(|c| c.redis = "http://x".into(), "cluster.redis");
        bad(|c| c.instance = "a b".into(), "cluster.instance");
        bad(|c| c.depth = 0, "cluster.depth");
        bad(|c| c.sync_interval_ms = 0, "cluster.sync_interval_ms");
        bad(|c| c.lease_ms = Some(50), "cluster.lease_ms");
        bad(|c| c.timeout_ms = Some(0), "cluster.timeout_ms");
        bad(|c| c.key_prefix = String::new(), "cluster.key_prefix");
    }

    #[test]
    fn the_config_file_names_the_cluster_field() {
        let text =
            |cluster: &str| format!("[upstream]\naddr = \"127.0.0.1:8000\"\n[cluster]\n{cluster}");
        let c = crate::ProxyConfig::from_toml_str(&text(
            "redis = \"redis://127.0.0.1:6379/\"\ninstance = \"a\"\ndepth = 16",
        ))
        .unwrap();
        let c = c.cluster.unwrap();
        assert_eq!((c.depth, c.sync_interval_ms), (16, 100));
        assert_eq!(c.lease(), Duration::from_millis(500));
        let e = crate::ProxyConfig::from_toml_str(&text(
            "redis = \"redis://127.0.0.1:6379/\"\ninstance = \"a\"\ndepth = 0",
        ))
        .unwrap_err();
        assert_eq!(e.field, "cluster.depth", "{e}");
        let e = crate::ProxyConfig::from_toml_str(&text("redis = \"x\"\ninstance = \"a\""))
            .unwrap_err();
        assert!(e.to_string().contains("depth"), "{e}");
        let adaptive = "[scheduler.adaptive]\n[upstream]\naddr = \"127.0.0.1:8000\"\n[cluster]\n\
                        redis = \"redis://h:1\"\ninstance = \"a\"\ndepth = 8";
        let e = crate::ProxyConfig::from_toml_str(adaptive).unwrap_err();
        assert_eq!(e.field, "cluster", "{e}");
    }
}
