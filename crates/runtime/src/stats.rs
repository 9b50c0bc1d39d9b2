//! Per-tenant metrics: live counters kept by the pool and the gate, and the snapshot they hand
//! out. With the `metrics` feature the same events are also exported through the `metrics`
//! facade.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use fairlane_core::TenantId;
use serde::Serialize;

use crate::histogram::Histogram;
use crate::id_hash::IdHasher;

/// One tenant's counters and histograms at the moment of a snapshot.
///
/// Times are nanoseconds; costs are in the executor's cost unit (CPU or wall nanoseconds for
/// [`FairPool`](crate::FairPool), holding nanoseconds or caller-set costs for
/// [`FairGate`](crate::FairGate)).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TenantMetrics {
    /// The tenant.
    pub tenant: u64,
    /// Requests waiting now.
    pub queued: usize,
    /// Requests running (tasks on a worker, permits held) now.
    pub running: usize,
    /// Requests that finished (including tasks that panicked).
    pub completed: u64,
    /// Tasks that panicked (pool only; counted in `completed` too).
    pub panicked: u64,
    /// Requests refused because a queue was full.
    pub rejected: u64,
    /// Requests removed while waiting (a cancelled task, a dropped waiter, a closed gate).
    pub cancelled: u64,
    /// Total cost of the finished requests.
    pub cost_total: f64,
    /// Time from submission to start, in nanoseconds.
    pub wait: Histogram,
    /// Cost of each finished request.
    pub cost: Histogram,
}

/// Every tenant's metrics, ordered by tenant id.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MetricsSnapshot {
    /// One entry per tenant seen so far.
    pub tenants: Vec<TenantMetrics>,
}

impl MetricsSnapshot {
    /// The metrics of one tenant, if it was ever seen.
    pub fn tenant(&self, tenant: impl Into<TenantId>) -> Option<&TenantMetrics> {
        let id = tenant.into().0;
        self.tenants
            .binary_search_by_key(&id, |t| t.tenant)
            .ok()
            .map(|i| &self.tenants[i])
    }

    /// All tenants added together (`tenant` is 0).
    pub fn total(&self) -> TenantMetrics {
        let mut all = TenantMetrics::default();
        for t in &self.tenants {
            all.queued += t.queued;
            all.running += t.running;
            all.completed += t.completed;
            all.panicked += t.panicked;
            all.rejected += t.rejected;
            all.cancelled += t.cancelled;
            all.cost_total += t.cost_total;
            all.wait.merge(&t.wait);
            all.cost.merge(&t.cost);
        }
        all
    }

    /// The snapshot as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// The live counters of one tenant.
pub(crate) struct TenantStats {
    pub m: TenantMetrics,
    #[cfg(feature = "metrics")]
    exported: export::Exported,
}

/// Tenant ids below this are indexed without hashing ([`Stats::slot`]).
const DENSE: u64 = 1024;

/// The live counters of every tenant of one executor: a dense table, so an executor that
/// looked a tenant up once (the pool, at submission) reaches its counters again by index
/// ([`Stats::at`]) without hashing, under its lock.
pub(crate) struct Stats {
    index: HashMap<TenantId, u32, BuildHasherDefault<IdHasher>>,
    /// The index of each tenant id below [`DENSE`] (`u32::MAX`: not seen), without
    /// hashing: executors that number their tenants (fairlane pg) find them here.
    dense: Vec<u32>,
    tenants: Vec<TenantStats>,
    #[cfg_attr(not(feature = "metrics"), allow(dead_code))]
    label: std::sync::Arc<str>,
}

impl Stats {
    /// `label` names the executor in exported metrics (the `executor` label).
    pub fn new(label: &str) -> Self {
        Stats {
            index: HashMap::default(),
            dense: Vec::new(),
            tenants: Vec::new(),
            label: label.into(),
        }
    }

    pub fn get(&mut self, tenant: TenantId) -> &mut TenantStats {
        let i = self.slot(tenant);
        self.at(i)
    }

    /// The tenant's index in the table, if it was seen.
    pub fn lookup(&self, tenant: TenantId) -> Option<u32> {
        match self.dense.get(tenant.0 as usize) {
            Some(&i) if i != u32::MAX => Some(i),
            _ => self.index.get(&tenant).copied(),
        }
    }

    /// The tenant's index in the table, added if new. Indices are never reused.
    pub fn slot(&mut self, tenant: TenantId) -> u32 {
        if let Some(i) = self.lookup(tenant) {
            return i;
        }
        let i = self.tenants.len() as u32;
        self.tenants.push(TenantStats {
            m: TenantMetrics {
                tenant: tenant.0,
                ..TenantMetrics::default()
            },
            #[cfg(feature = "metrics")]
            exported: export::Exported::new(&self.label, tenant),
        });
        self.index.insert(tenant, i);
        if tenant.0 < DENSE {
            let id = tenant.0 as usize;
            if self.dense.len() <= id {
                self.dense.resize(id + 1, u32::MAX);
            }
            self.dense[id] = i;
        }
        i
    }

    /// The counters at an index from [`slot`](Stats::slot).
    pub fn at(&mut self, i: u32) -> &mut TenantStats {
        &mut self.tenants[i as usize]
    }

    pub fn snapshot(&self) -> MetricsSnapshot {
        let mut tenants: Vec<TenantMetrics> = self.tenants.iter().map(|t| t.m.clone()).collect();
        tenants.sort_by_key(|t| t.tenant);
        MetricsSnapshot { tenants }
    }
}

impl TenantStats {
    pub fn enqueued(&mut self) {
        self.m.queued += 1;
        #[cfg(feature = "metrics")]
        self.exported.queued.increment(1.0);
    }

    pub fn rejected(&mut self) {
        self.m.rejected += 1;
        #[cfg(feature = "metrics")]
        self.exported.rejected.increment(1);
    }

    /// A waiting request left the queue unserved.
    pub fn cancelled(&mut self) {
        self.gave_up(false);
    }

    /// A request started after waiting `wait_ns`.
    pub fn started(&mut self, wait_ns: u64) {
        self.m.queued = self.m.queued.saturating_sub(1);
        self.m.running += 1;
        self.m.wait.record(wait_ns);
        #[cfg(feature = "metrics")]
        {
            self.exported.queued.decrement(1.0);
            self.exported.running.increment(1.0);
            self.exported.wait.record(wait_ns as f64 * 1e-9);
        }
    }

    /// A running request finished having cost `cost`.
    pub fn finished(&mut self, cost: f64, panicked: bool) {
        self.m.running = self.m.running.saturating_sub(1);
        self.m.completed += 1;
        self.m.cost_total += cost;
        self.m.cost.record_f64(cost);
        if panicked {
            self.m.panicked += 1;
        }
        #[cfg(feature = "metrics")]
        {
            self.exported.running.decrement(1.0);
            self.exported.completed.increment(1);
            self.exported.cost.record(cost);
            if panicked {
                self.exported.panicked.increment(1);
            }
        }
    }

    /// A request that had started was given up without running (a granted permit dropped
    /// before its holder saw it).
    pub fn abandoned(&mut self) {
        self.gave_up(true);
    }

    /// A request given up, while it waited or (`started`) after it was given its turn.
    fn gave_up(&mut self, started: bool) {
        let count = if started {
            &mut self.m.running
        } else {
            &mut self.m.queued
        };
        *count = count.saturating_sub(1);
        self.m.cancelled += 1;
        #[cfg(feature = "metrics")]
        {
            let gauge = if started {
                &self.exported.running
            } else {
                &self.exported.queued
            };
            gauge.decrement(1.0);
            self.exported.cancelled.increment(1);
        }
    }
}

#[cfg(feature = "metrics")]
mod export {
    //! Handles registered once per tenant, so recording is as cheap as the recorder allows.
    use fairlane_core::TenantId;
    use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

    pub(super) struct Exported {
        pub queued: Gauge,
        pub running: Gauge,
        pub completed: Counter,
        pub panicked: Counter,
        pub rejected: Counter,
        pub cancelled: Counter,
        pub wait: Histogram,
        pub cost: Histogram,
    }

    impl Exported {
        pub fn new(executor: &std::sync::Arc<str>, tenant: TenantId) -> Self {
            let labels = [
                ("executor", executor.to_string()),
                ("tenant", tenant.0.to_string()),
            ];
            Exported {
                queued: gauge!("fairlane_queued", &labels),
                running: gauge!("fairlane_running", &labels),
                completed: counter!("fairlane_completed_total", &labels),
                panicked: counter!("fairlane_panicked_total", &labels),
                rejected: counter!("fairlane_rejected_total", &labels),
                cancelled: counter!("fairlane_cancelled_total", &labels),
                wait: histogram!("fairlane_wait_seconds", &labels),
                cost: histogram!("fairlane_cost", &labels),
            }
        }
    }
}
