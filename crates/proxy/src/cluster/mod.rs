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

pub use alloc::{
    allocate, water_fill, Allocation, InstanceShare, Part, Report, TenantReport, TenantShare,
};
pub use member::{settle, Local, Member, Outgoing, Peer, Plan, Reply};
pub use status::{ClusterStatus, ClusterTenant};

pub use crate::cluster_config::ClusterConfig;

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

/// The proxy's side of the sync: what it reads from the gate, the settings and the metrics,
/// and what it sets (the gate's seats and weights). The server's shared state implements
/// it; everything else in this module is the cluster's own.
pub(crate) trait Host: Send + Sync {
    /// Every tenant's waiting + in-flight and in-flight counts now, and the seats, into
    /// the member's demand meter.
    fn sample(&self, member: &mut Member);
    /// The instance's seats, load, tenants with φ and completions.
    fn local(&self) -> Local;
    /// Run with `seats`, and give each tenant `pick(name)` as its weight (φ where that is
    /// `None`). Weight changes under 1 % are skipped (no churn in the scheduler's tags).
    /// Returns each tenant's φ and the weight in force.
    fn apply(
        &self,
        seats: Option<usize>,
        pick: &dyn Fn(&str) -> Option<f64>,
    ) -> BTreeMap<String, (f64, f64)>;
    /// The seats this instance runs with now.
    fn seats(&self) -> usize;
    /// The seats held now (requests in flight).
    fn holding(&self) -> usize;
}

/// The gate refused a seat count or weight computed from the cluster's allocation: counted,
/// and logged the first time and every 1,000th time after (a refused change leaves the
/// previous value in force).
pub(crate) fn refused(what: std::fmt::Arguments, e: &dyn std::fmt::Display) {
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
fn failed(host: &dyn Host, cluster: &Cluster, why: &str) {
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
    let weights = host.apply(None, &|_| None);
    cluster.state().weights = weights;
    if let Some(n) = log {
        eprintln!(
            "fairlane proxy: cluster: Redis sync failed ({why}); local fairness within the last \
             share of D ({} seats of global D = {}) until Redis answers ({n} failures so far)",
            host.seats(),
            cluster.config.depth
        );
    }
}

/// One sync: report, exchange, apply (`regular`: the one per interval).
async fn sync(
    host: &dyn Host,
    cluster: &Cluster,
    member: &mut Member,
    link: &mut store::Link,
    regular: bool,
) {
    let c = &cluster.config;
    let local = host.local();
    let out = member.outgoing(&local, regular);
    let reply = match link.exchange(c, &out).await {
        Ok(reply) => reply,
        Err(why) => {
            member.failed();
            failed(host, cluster, &why);
            return;
        }
    };
    let plan = member.absorb(reply, local.seats, Instant::now(), regular);
    let weights = host.apply(Some(plan.seats), &|name| plan.weights.get(name).copied());
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
            host.seats(),
            c.depth
        );
    }
}

/// Run the sync loop until aborted: sample the demand `SAMPLES` times per interval, sync
/// once per interval, and early (at most every other sample) when [`Member::early`] says so.
pub(crate) async fn run(host: Arc<dyn Host>, cluster: Arc<Cluster>) {
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
        host.sample(&mut member);
        n += 1;
        since += 1;
        let regular = n >= SAMPLES;
        if regular || (since >= 2 && member.early(host.seats(), host.holding())) {
            if regular {
                n = 0;
            }
            since = 0;
            sync(&*host, &cluster, &mut member, &mut link, regular).await;
        }
    }
}
