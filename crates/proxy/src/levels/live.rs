//! What runs beside the gate when levels are on: per-level counters (waits, dispatches,
//! refusals by reason), the table of queued requests (for `/debug/requests` and
//! `/debug/queues`), the level part of `/status` and `/metrics`, and the admin dumps.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use fairlane_core::TenantId;
use fairlane_runtime::LevelSnapshot;
use serde::Serialize;

use super::schema::Leveled;
use crate::histogram::{quantile, Histogram};
use crate::prom::{family, histogram, label, labelled, readers, sample, Reader};

/// One level's counters, kept across reloads (by name).
#[derive(Default)]
pub(crate) struct LevelStats {
    /// Time queued before a seat (seconds), of the requests that got one.
    pub wait: Histogram,
    /// Requests that got a seat (or, at an exempt level, were admitted).
    pub dispatched: AtomicU64,
    /// Refused: the level's queue was at its `queue_limit` (429).
    pub full: AtomicU64,
    /// Refused: waited the level's (or `[limits]`') queue timeout (503).
    pub timeout: AtomicU64,
}

impl std::fmt::Debug for LevelStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelStats")
            .field("dispatched", &self.dispatched.load(Relaxed))
            .finish_non_exhaustive()
    }
}

/// A queued request, as `/debug/requests` shows it.
#[derive(Clone, Debug)]
struct Entry {
    tenant: TenantId,
    leveled: Leveled,
    level: Arc<str>,
    schema: Arc<str>,
    since: Instant,
}

/// The levels' state beside the gate (empty and untouched without levels).
#[derive(Debug, Default)]
pub(crate) struct Live {
    stats: Mutex<HashMap<Arc<str>, Arc<LevelStats>>>,
    queued: Mutex<Slab>,
}

/// Queued requests: a slab, so that registering and removing one costs no search.
#[derive(Debug, Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
}

/// A request registered as queued until dropped.
pub(crate) struct Queued<'a> {
    live: &'a Live,
    at: usize,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        let mut s = self.live.queued.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = s.entries.get_mut(self.at) {
            *e = None;
            s.free.push(self.at);
        }
    }
}

impl Live {
    /// The counters of level `name` (made at its first use, kept across reloads).
    pub fn stats(&self, name: &str) -> Arc<LevelStats> {
        let mut m = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(Arc::from(name)).or_default().clone()
    }

    /// Register a request of `tenant` queued at `leveled`'s level (named `level`, by
    /// `schema`) since `since`, until the guard is dropped.
    pub fn queue(
        &self,
        tenant: TenantId,
        leveled: Leveled,
        names: (&Arc<str>, &Arc<str>),
        since: Instant,
    ) -> Queued<'_> {
        let e = Entry {
            tenant,
            leveled,
            level: names.0.clone(),
            schema: names.1.clone(),
            since,
        };
        let mut s = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        let at = match s.free.pop() {
            Some(i) => {
                s.entries[i] = Some(e);
                i
            }
            None => {
                s.entries.push(Some(e));
                s.entries.len() - 1
            }
        };
        Queued { live: self, at }
    }

    fn entries(&self) -> Vec<Entry> {
        let s = self.queued.lock().unwrap_or_else(|e| e.into_inner());
        s.entries.iter().flatten().cloned().collect()
    }

    /// `/status`'s levels: the gate's snapshots with this proxy's counters.
    pub fn status(&self, snapshots: Vec<LevelSnapshot>) -> Vec<LevelStatus> {
        snapshots
            .into_iter()
            .map(|gate| {
                let s = self.stats(&gate.name);
                let counts = s.wait.counts();
                LevelStatus {
                    wait_p50: quantile(&counts, 0.5),
                    wait_p99: quantile(&counts, 0.99),
                    wait_sum: s.wait.sum(),
                    wait_buckets: counts,
                    dispatched: s.dispatched.load(Relaxed),
                    rejected: BTreeMap::from([
                        ("queue_full", s.full.load(Relaxed)),
                        ("queue_timeout", s.timeout.load(Relaxed)),
                    ]),
                    gate,
                }
            })
            .collect()
    }

    /// `/debug/requests`: every queued request, with its level, flow, tenant and the time
    /// it has waited so far (longest first).
    pub fn requests(&self, names: &[String]) -> Vec<QueuedRequest> {
        let now = Instant::now();
        let mut out: Vec<QueuedRequest> = self
            .entries()
            .into_iter()
            .map(|e| QueuedRequest {
                level: e.level.to_string(),
                flow_schema: e.schema.to_string(),
                tenant: tenant_name(names, e.tenant),
                distinguisher: e.leveled.route.distinguisher,
                waited_s: now.saturating_duration_since(e.since).as_secs_f64(),
            })
            .collect();
        out.sort_by(|a, b| b.waited_s.total_cmp(&a.waited_s));
        out
    }

    /// `/debug/queues`: per level, its queued count and its flows' queues (tenant,
    /// distinguisher, requests, the oldest one's wait).
    pub fn queues(&self, snapshots: &[LevelSnapshot], names: &[String]) -> Vec<LevelQueues> {
        let mut flows: BTreeMap<(u32, u64, u64), FlowQueue> = BTreeMap::new();
        let now = Instant::now();
        for e in self.entries() {
            let waited = now.saturating_duration_since(e.since).as_secs_f64();
            let key = (
                e.leveled.route.level.0,
                e.tenant.0,
                e.leveled.route.distinguisher,
            );
            let q = flows.entry(key).or_insert_with(|| FlowQueue {
                tenant: tenant_name(names, e.tenant),
                distinguisher: key.2,
                queued: 0,
                oldest_waited_s: 0.0,
            });
            q.queued += 1;
            q.oldest_waited_s = q.oldest_waited_s.max(waited);
        }
        snapshots
            .iter()
            .map(|s| LevelQueues {
                level: s.name.clone(),
                queued: s.queued,
                flows: s.flows,
                queues: flows
                    .range((s.id, 0, 0)..=(s.id, u64::MAX, u64::MAX))
                    .map(|(_, q)| q.clone())
                    .collect(),
            })
            .collect()
    }
}

fn tenant_name(names: &[String], t: TenantId) -> String {
    names
        .get(t.0 as usize)
        .cloned()
        .unwrap_or_else(|| t.0.to_string())
}

/// One level in `/status` and `/debug/priority_levels`: the gate's view (nominal and
/// current concurrency limits, seats in use, lent, borrowed, queued) and the proxy's counters.
#[derive(Clone, Debug, Serialize)]
pub struct LevelStatus {
    /// The gate's view of the level.
    #[serde(flatten)]
    pub gate: LevelSnapshot,
    /// Requests that got a seat (or were admitted, at an exempt level).
    pub dispatched: u64,
    /// Requests the level refused, by reason (`queue_full`: 429, `queue_timeout`: 503).
    pub rejected: BTreeMap<&'static str, u64>,
    /// Median wait for a seat (seconds, bucket-interpolated).
    pub wait_p50: Option<f64>,
    /// 99th percentile wait.
    pub wait_p99: Option<f64>,
    /// Wait histogram (per-bucket counts, `/status`'s buckets).
    pub wait_buckets: Vec<u64>,
    /// Sum of the waits (seconds).
    pub wait_sum: f64,
}

/// One queued request in `/debug/requests`.
#[derive(Clone, Debug, Serialize)]
pub struct QueuedRequest {
    /// Its priority level.
    pub level: String,
    /// The flow schema that classified it.
    pub flow_schema: String,
    /// Its tenant.
    pub tenant: String,
    /// Its flow distinguisher (0: the tenant is the flow).
    pub distinguisher: u64,
    /// Seconds it has waited so far.
    pub waited_s: f64,
}

/// One flow's queue in `/debug/queues`.
#[derive(Clone, Debug, Serialize)]
pub struct FlowQueue {
    /// Its tenant.
    pub tenant: String,
    /// Its distinguisher (0: the tenant alone).
    pub distinguisher: u64,
    /// Requests queued.
    pub queued: usize,
    /// How long its oldest request has waited (seconds).
    pub oldest_waited_s: f64,
}

/// One level in `/debug/queues`.
#[derive(Clone, Debug, Serialize)]
pub struct LevelQueues {
    /// The level.
    pub level: String,
    /// Requests queued in it (the gate's count).
    pub queued: usize,
    /// Flows the level knows.
    pub flows: usize,
    /// The flows with requests queued.
    pub queues: Vec<FlowQueue>,
}

/// The levels' part of `/metrics` (nothing without levels).
pub fn prometheus(o: &mut String, levels: &[LevelStatus]) {
    if levels.is_empty() {
        return;
    }
    let gauges: [(&str, &str, Reader<LevelStatus>); 8] = readers![l: LevelStatus;
        "nominal_cl" => l.gate.nominal_cl, "The level's nominal concurrency limit (its part of D).";
        "current_cl" => l.gate.current_cl, "The level's current concurrency limit (after lending and borrowing).";
        "seats_in_use" => l.gate.seats_in_use, "Seats the level's requests hold (an exempt level's: admitted outside D).";
        "lent" => l.gate.lent, "Seats of the level's nominal part lent to other levels.";
        "borrowed" => l.gate.borrowed, "Seats the level holds beyond its nominal part.";
        "queued" => l.gate.queued, "Requests queued in the level.";
        "dispatched_total" => l.dispatched, "Requests of the level that got a seat (or were admitted exempt).";
        "exempt_admitted_total" => l.gate.exempt_admitted, "Requests admitted at an exempt level without a seat.";
    ];
    for (name, help, f) in gauges {
        let name = format!("fairlane_proxy_level_{name}");
        labelled(o, (&name, help), "level", levels, |l| &l.gate.name, f);
    }
    let name = "fairlane_proxy_level_rejected_total";
    family(o, name, "Requests a level refused, by reason.", "counter");
    for l in levels {
        for (reason, n) in &l.rejected {
            let labels = format!("level=\"{}\",reason=\"{reason}\"", label(&l.gate.name));
            sample(o, name, &labels, n);
        }
    }
    let name = "fairlane_proxy_level_wait_seconds";
    family(
        o,
        name,
        "Time queued in the level before a seat.",
        "histogram",
    );
    for l in levels {
        let labels = format!("level=\"{}\"", label(&l.gate.name));
        histogram(o, name, &labels, &l.wait_buckets, l.wait_sum);
    }
}
