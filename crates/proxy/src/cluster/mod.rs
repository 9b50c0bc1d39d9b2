//! Fair sharing of one upstream across several proxy instances, coordinated through Redis
//! (`[cluster]`; the design, its bounds and the tests that check them are in docs/proxy.md,
//! "Running several instances").
//!
//! Every `sync_interval_ms` each instance makes **one** Redis round trip, a Lua script atomic
//! on the server ([`store`]): it writes its [`Report`] — per tenant φ, measured demand and
//! requests completed, plus its seats and credit — and its *claim* of seats under a lease,
//! and reads back every live instance's report. From that snapshot every instance computes
//! the same [`Allocation`] ([`alloc`]: global water-filling, parts, whole seats with
//! hysteresis and credit, effective weights) and applies its own part: the gate's seats and
//! each local tenant's weight. [`member`] is the instance's side as pure code: the demand
//! meter, the claim (growing only into seats no other instance claims, also after Redis
//! forgets), the credit. The request path never touches Redis.
//!
//! When Redis fails or is slow for longer than a lease, the instance keeps its last seats and
//! goes back to the configured weights (local fairness within its last share of D), shows it on
//! `/status`, `/metrics` and a rate-limited log line, and rejoins at the next successful sync.

pub mod alloc;
pub mod member;
pub mod status;
pub mod store;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use alloc::{
    allocate, water_fill, Allocation, InstanceShare, Part, Report, TenantReport, TenantShare,
};
pub use member::{settle, Local, Member, Outgoing, Peer, Plan, Reply};
pub use status::{ClusterStatus, ClusterTenant};

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
        let check_printable = |field: &str, v: &str, what: &str| {
            if printable(v) {
                Ok(())
            } else {
                Err(err(field, format!("must be {what}, got {v:?}")))
            }
        };
        check_printable(
            "instance",
            &self.instance,
            "non-empty printable ASCII without quotes or spaces",
        )?;
        let within = |field: &str, v: u64, max: u64| {
            if (1..=max).contains(&v) {
                Ok(())
            } else {
                Err(err(field, format!("must be in 1..={max}, got {v}")))
            }
        };
        within("depth", self.depth as u64, MAX_DEPTH as u64)?;
        within("sync_interval_ms", self.sync_interval_ms, 60_000)?;
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
        check_printable("key_prefix", &self.key_prefix, "non-empty printable ASCII")?;
        Ok(())
    }
}

/// Samples of the demand per sync interval.
const SAMPLES: u32 = 8;

#[derive(Debug, Default)]
struct State {
    last_ok: Option<Instant>,
    fallback: bool,
    syncs: u64,
    failures: u64,
    forgotten: u64,
    last_log: Option<Instant>,
    allocation: Allocation,
    credit: f64,
    /// Per local tenant: φ and the weight its scheduler runs with.
    weights: BTreeMap<String, (f64, f64)>,
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
            target_seats: me.map_or(seats, |m| m.seats),
            fair_seats: me.map_or(seats as f64, |m| m.fair),
            credit: st.credit,
            instances: a.instances.keys().cloned().collect(),
            sync_age_s: st.last_ok.map(|t| t.elapsed().as_secs_f64()),
            fallback: st.fallback,
            syncs: st.syncs,
            sync_failures: st.failures,
            forgotten: st.forgotten,
            tenants: a
                .tenants
                .iter()
                .map(|(name, t)| {
                    let part = me
                        .and_then(|m| m.tenants.get(name))
                        .map_or(0.0, |p| p.seats);
                    let (phi, effective) = st
                        .weights
                        .get(name)
                        .copied()
                        .unwrap_or((t.weight, t.weight));
                    ClusterTenant {
                        name: name.clone(),
                        weight: phi,
                        effective_weight: effective,
                        light: t.light,
                        global_demand: t.demand,
                        global_share: t.share / d,
                        local_share: part / d,
                        seats: part,
                        global_completed: t.completed,
                    }
                })
                .collect(),
        }
    }

    /// A successful sync: record it; true if it ended a fallback.
    fn synced(&self, plan: Plan, credit: f64) -> bool {
        let mut st = self.state();
        let was = std::mem::replace(&mut st.fallback, false);
        st.last_ok = Some(Instant::now());
        st.syncs += 1;
        st.forgotten += u64::from(plan.forgotten);
        st.allocation = plan.allocation;
        st.credit = credit;
        was
    }
}

/// The proxy's side: what the sync reads from the gate, the settings and the metrics, and
/// what it sets (the gate's seats and weights). Everything else in this module is the
/// cluster's own.
mod host {
    use super::*;
    use fairlane_core::TenantId;

    /// Every tenant's waiting + in-flight and in-flight counts now, and the seats.
    pub(super) fn sample(inner: &Inner, member: &mut Member) {
        let settings = inner.settings();
        let counts = settings.names.iter().enumerate().map(|(i, name)| {
            let v = inner.gate.0.tenant(TenantId(i as u64));
            let (queued, running) = v.map_or((0, 0), |v| (v.queued, v.running));
            (name.as_str(), (queued + running) as f64, running as f64)
        });
        member.sample(counts, inner.gate.depth());
    }

    /// The instance's seats, load, tenants with φ and completions.
    pub(super) fn local(inner: &Inner) -> Local {
        let settings = inner.settings();
        let tenants = settings
            .names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let id = TenantId(i as u64);
                let completed = inner
                    .metrics
                    .tenant(id)
                    .completed
                    .load(std::sync::atomic::Ordering::Relaxed);
                (name.clone(), configured(&settings.config, name), completed)
            })
            .collect();
        Local {
            seats: inner.gate.depth(),
            holding: inner.gate.load().1,
            tenants,
        }
    }

    fn configured(config: &crate::ProxyConfig, name: &str) -> f64 {
        config
            .tenants
            .iter()
            .find(|t| t.name == name)
            .map_or(1.0, |t| t.weight)
    }

    /// Run with `seats`, and give each tenant `pick(name)` as its weight (φ where that is
    /// `None`). Weight changes under 1 % are skipped (no churn in the scheduler's tags).
    /// Returns each tenant's φ and the weight in force.
    pub(super) fn apply(
        inner: &Inner,
        seats: Option<usize>,
        pick: impl Fn(&str) -> Option<f64>,
    ) -> BTreeMap<String, (f64, f64)> {
        if let Some(seats) = seats.filter(|&s| s != inner.gate.depth()) {
            if let Err(e) = inner.gate.set_depth(seats) {
                refused(format_args!("{seats} seats"), &e);
            }
        }
        let settings = inner.settings();
        let mut out = BTreeMap::new();
        for (i, name) in settings.names.iter().enumerate() {
            let id = TenantId(i as u64);
            let phi = configured(&settings.config, name);
            let w = pick(name)
                .filter(|w| w.is_finite() && *w > 0.0)
                .unwrap_or(phi);
            let now = inner.gate.0.tenant(id).map(|v| v.weight);
            let mut set = now.unwrap_or(phi);
            if now.is_none_or(|n| (n - w).abs() > 0.01 * w) {
                match inner.gate.set_weight(id, w) {
                    Ok(()) => set = w,
                    Err(e) => refused(format_args!("weight {w} for tenant {name:?}"), &e),
                }
            }
            out.insert(name.clone(), (phi, set));
        }
        out
    }
}

/// The gate refused a seat count or weight computed from the cluster's allocation: counted,
/// and logged the first time and every 1,000th time after (a refused change leaves the
/// previous value in force).
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
    let weights = host::apply(inner, None, |_| None);
    cluster.state().weights = weights;
    if let Some(n) = log {
        eprintln!(
            "fairlane proxy: cluster: Redis sync failed ({why}); local fairness within the last \
             share of D ({} seats of global D = {}) until Redis answers ({n} failures so far)",
            inner.gate.depth(),
            cluster.config.depth
        );
    }
}

/// One sync: report, exchange, apply (`regular`: the one per interval).
async fn sync(
    inner: &Inner,
    cluster: &Cluster,
    member: &mut Member,
    link: &mut store::Link,
    regular: bool,
) {
    let c = &cluster.config;
    let local = host::local(inner);
    let out = member.outgoing(&local, regular);
    let reply = match link.exchange(c, &out).await {
        Ok(reply) => reply,
        Err(why) => {
            member.failed();
            failed(inner, cluster, &why);
            return;
        }
    };
    let plan = member.absorb(reply, local.seats, Instant::now(), regular);
    let weights = host::apply(inner, Some(plan.seats), |name| {
        plan.weights.get(name).copied()
    });
    let forgotten = plan.forgotten;
    let rejoined = cluster.synced(plan, member.credit());
    cluster.state().weights = weights;
    if forgotten {
        eprintln!(
            "fairlane proxy: cluster: Redis had lost this instance's last report (a restart, a \
             failover or a lapsed lease); rejoined with the {} seats held, growing only into \
             seats the other instances give up (global D = {})",
            out.held, c.depth
        );
    } else if rejoined {
        eprintln!(
            "fairlane proxy: cluster: Redis sync restored; {} seats here of global D = {}",
            inner.gate.depth(),
            c.depth
        );
    }
}

/// Run the sync loop until aborted: sample the demand `SAMPLES` times per interval, sync
/// once per interval, and early (at most every other sample) when [`Member::early`] says so.
pub(crate) async fn run(inner: Arc<Inner>, cluster: Arc<Cluster>) {
    let c = cluster.config().clone();
    let Some(mut link) = store::Link::new(&c) else {
        return; // validated at start-up
    };
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let mut member =
        Member::new(&c.instance, c.depth, c.lease()).with_seq(since_epoch.as_micros() as u64);
    let every = Duration::from_millis(c.sync_interval_ms) / SAMPLES;
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut n, mut since) = (0, 0);
    loop {
        tick.tick().await;
        host::sample(&inner, &mut member);
        n += 1;
        since += 1;
        let regular = n >= SAMPLES;
        if regular || (since >= 2 && member.early(inner.gate.depth(), inner.gate.load().1)) {
            if regular {
                n = 0;
            }
            since = 0;
            sync(&inner, &cluster, &mut member, &mut link, regular).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
