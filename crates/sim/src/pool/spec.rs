//! The sections of a worker-pool or black-box spec, as a user writes them (serde, unknown
//! fields refused). Each checks itself and names its fields ([`super::resolve`] puts the
//! checked sections together into a [`super::Scenario`]); `docs/simulator.md` documents each
//! field.

use std::collections::BTreeMap;

use fairlane_core::depth::DepthConfig;
use serde::Deserialize;

pub use crate::doc::SweepPoint;
pub use crate::sched::SchedulerSpec;

fn default_refresh() -> f64 {
    0.01
}

/// A whole spec file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Short name, used in reports.
    pub name: String,
    /// One paragraph on what the experiment shows.
    #[serde(default)]
    pub description: String,
    /// Seed of every random stream.
    #[serde(default = "crate::doc::default::seed")]
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Seconds at the start excluded from the per-tenant statistics.
    #[serde(default)]
    pub warmup: f64,
    /// Multiplies every open arrival rate and replays traces this much faster.
    #[serde(default = "crate::doc::default::one")]
    pub speed: f64,
    /// The server.
    pub server: ServerSpec,
    /// What to measure.
    #[serde(default)]
    pub metrics: MetricsSpec,
    /// Scheduler presets to compare (`"wfq"`, `"2dfqe"`, …).
    #[serde(default)]
    pub schedulers: Vec<String>,
    /// Schedulers with options.
    #[serde(default)]
    pub scheduler: Vec<SchedulerSpec>,
    /// Tenants or groups of identical tenants.
    #[serde(default)]
    pub tenant: Vec<TenantSpec>,
    /// Priority levels above the tenants (APF's model, docs/priority-levels.md), highest
    /// first; none: one flat level.
    #[serde(default)]
    pub priority_level: Vec<PriorityLevelSpec>,
    /// Points of a sweep: each runs the spec with some fields set.
    #[serde(default)]
    pub sweep: Vec<SweepPoint>,
    /// A randomly varied suite of runs.
    #[serde(default)]
    pub suite: Option<SuiteSpec>,
}

/// `[server]`: one stage of identical workers (`model = "workers"`, the default), or a black
/// box with `components` internal service components fed through `depth` issue slots by an
/// interposed scheduler (`model = "blackbox"`, seeds/002 §5).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// `workers` (default) or `blackbox`.
    pub model: Option<String>,
    /// Worker threads (worker model).
    pub workers: Option<usize>,
    /// Cost units each worker (black box: each component) processes per second (default 1).
    pub rate: Option<f64>,
    /// Or the whole server's units per second, split evenly over the workers (components).
    pub capacity: Option<f64>,
    /// Refresh-charging interval in seconds (2DFQ §5: 10 ms); 0 turns it off. The black box
    /// does not refresh: its requests' progress is invisible to the scheduler.
    #[serde(default = "default_refresh")]
    pub refresh: f64,
    /// Black box: internal service components (disks), each FIFO with exponential service.
    pub components: Option<usize>,
    /// Black box: `random` (each request goes to a uniformly random component and queues
    /// there: a striped disk array; the default) or `shared` (one FIFO queue feeds all).
    pub routing: Option<String>,
    /// Black box: the depth D (issue slots), an integer, or a table
    /// `{ min, max, initial, interval }` for the adaptive depth controller (§5.4).
    pub depth: Option<toml::Value>,
}

impl ServerSpec {
    /// Whether this is the black-box model.
    pub fn is_blackbox(&self) -> bool {
        self.model.as_deref() == Some("blackbox")
    }

    /// A backlogged tenant's default outstanding requests: one more than the server's slots.
    pub(crate) fn default_outstanding(&self) -> usize {
        let slots = if self.is_blackbox() {
            match &self.depth {
                Some(toml::Value::Integer(d)) => (*d).clamp(0, 1 << 20) as usize,
                Some(toml::Value::Table(t)) => t
                    .get("max")
                    .and_then(toml::Value::as_integer)
                    .unwrap_or(0)
                    .clamp(0, 1 << 20) as usize,
                _ => 0,
            }
        } else {
            self.workers.unwrap_or(0)
        };
        slots + 1
    }
}

/// `[server.depth]` as a table: the adaptive depth controller (seeds/002 §5.4, after Facade).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdaptiveDepthSpec {
    /// Smallest depth.
    pub min: usize,
    /// Largest depth.
    pub max: usize,
    /// Depth at the start (default: `min`).
    pub initial: Option<usize>,
    /// Seconds between controller updates (default 1).
    pub interval: Option<f64>,
    /// Multiplicative decrease on a missed target, in (0, 1) (default 0.5).
    pub decrease: Option<f64>,
    /// Additive increase when every flow has headroom (default 1).
    pub increase: Option<usize>,
    /// Grow only while every flow's mean ≤ (1 − headroom) × target (default 0.1).
    pub headroom: Option<f64>,
    /// Completions a flow needs in a period to be judged (default 5).
    pub min_samples: Option<u64>,
    /// Good periods just below the last missing depth before probing it again (default 10).
    pub probe: Option<u32>,
}

/// How requests reach the components of a black-box server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// Each request to a uniformly random component, FIFO there (a striped array).
    Random,
    /// One FIFO queue feeding every component.
    Shared,
}

/// The depth D of a black-box server.
#[derive(Clone, Debug, PartialEq)]
pub enum Depth {
    /// Always D issue slots.
    Fixed(usize),
    /// Adjusted by the depth controller (`fairlane_core::depth`).
    Adaptive(DepthConfig),
}

impl Depth {
    /// The depth at the start.
    pub fn initial(&self) -> usize {
        match self {
            Depth::Fixed(d) => *d,
            Depth::Adaptive(c) => c.initial,
        }
    }
    /// The largest depth the run may reach (the issue slots to allocate).
    pub fn max(&self) -> usize {
        match self {
            Depth::Fixed(d) => *d,
            Depth::Adaptive(c) => c.max,
        }
    }
}

/// A black-box server, resolved (seeds/002 §5): `components` FIFO components of `rate` units
/// per second each (exponential service), fed through `depth` issue slots.
#[derive(Clone, Debug, PartialEq)]
pub struct BlackBoxDef {
    /// Internal service components.
    pub components: usize,
    /// How requests reach them.
    pub routing: Routing,
    /// The depth D.
    pub depth: Depth,
}

/// `[metrics]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsSpec {
    /// Seconds between samples of service and lag (2DFQ §6: 100 ms, the default).
    pub interval: f64,
    /// Seconds between thread-occupancy samples (default 10 ms).
    pub occupancy_interval: f64,
    /// Tenants (or groups: their first member) whose time series are kept.
    pub track: Vec<String>,
    /// Points kept per time series (older points are thinned to stay under it; default 4096).
    pub max_points: usize,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            interval: 0.1,
            occupancy_interval: 0.01,
            track: Vec::new(),
            max_points: 4096,
        }
    }
}

/// `[[tenant]]`: one tenant, or `count` identical ones named `NAME-0`, `NAME-1`, ….
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Name (group name when `count > 1`).
    pub name: String,
    /// How many tenants (0 is allowed: a sweep may turn a group off).
    #[serde(default = "crate::doc::default::one_count")]
    pub count: usize,
    /// Weight φ.
    #[serde(default = "crate::doc::default::one")]
    pub weight: f64,
    /// Response-time target in seconds (EDF's relative deadline; the adaptive depth
    /// controller keeps every tenant's mean response time under its target).
    pub target: Option<f64>,
    /// A built-in profile (`T1`…`T12`, `t1`…`t7`, `production`, `expensive`): its arrivals
    /// and classes, unless `arrival`, `cost` or `class` are given.
    pub template: Option<String>,
    /// How requests arrive.
    pub arrival: Option<ArrivalSpec>,
    /// The cost of every request (one class).
    pub cost: Option<CostSpec>,
    /// Several request classes (APIs), each with its share of requests and cost.
    #[serde(default)]
    pub class: Vec<ClassSpec>,
    /// Seconds before the tenant starts.
    #[serde(default)]
    pub start: f64,
    /// Seconds after which it issues nothing new.
    pub stop: Option<f64>,
    /// The `[[priority_level]]` its requests go to (default: the catch-all).
    pub level: Option<String>,
}

/// `[[priority_level]]`: one priority level (APF's `PriorityLevelConfiguration`). ServerCL is
/// the server's workers (black box: its depth D); inside the level, each compared scheduler
/// shares it among the level's tenants. One level must be named `catch-all`. The levels
/// borrow by APF's rule, adjusted every 10 simulated seconds (APF's period). Queue limits
/// and timeouts are not modelled (every arrival is queued).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityLevelSpec {
    /// Its name, unique; `catch-all` takes the tenants that name no level.
    pub name: String,
    /// Nominal concurrency shares, finite and > 0 (exempt levels: none).
    pub shares: Option<f64>,
    /// The part of its nominal seats others may borrow, in [0, 100] % (default 0).
    #[serde(default)]
    pub lendable_percent: f64,
    /// The seats it may borrow beyond its nominal ones, in [0, 100] % of them (default: no
    /// limit).
    pub borrowing_limit_percent: Option<f64>,
    /// Exempt: served ahead of every level, without limit (default false).
    #[serde(default)]
    pub exempt: bool,
}

/// How a tenant's requests arrive.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ArrivalSpec {
    /// Always `outstanding` requests queued or running (default: workers + 1).
    Backlogged {
        /// Requests kept outstanding.
        outstanding: Option<usize>,
    },
    /// Open Poisson arrivals.
    Poisson {
        /// Requests per second.
        rate: f64,
    },
    /// Poisson at `rate` while ON; ON and OFF periods exponential with these means, or,
    /// with `periodic = true`, exactly `on` then `off` seconds from the tenant's start.
    OnOff {
        /// Requests per second while ON.
        rate: f64,
        /// Mean ON seconds.
        on: f64,
        /// Mean OFF seconds.
        off: f64,
        /// Fixed ON and OFF periods, starting ON (default false: exponential periods).
        #[serde(default)]
        periodic: bool,
    },
    /// `clients` clients, each issuing a request, waiting for it, then thinking.
    Closed {
        /// Clients.
        #[serde(default = "crate::doc::default::one_count")]
        clients: usize,
        /// Mean think time in seconds (exponential; 0 = none).
        #[serde(default)]
        think: f64,
    },
    /// Replay the rows of a CSV trace (`time,tenant,class,cost`).
    Trace {
        /// The file, relative to the spec.
        file: String,
        /// Which rows: the trace's tenant column (default: this tenant's name).
        tenant: Option<String>,
    },
}

/// A cost distribution, in cost units.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CostSpec {
    /// Always `value`.
    Constant {
        /// The cost.
        value: f64,
    },
    /// Normal, redrawn when not positive.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// Log-normal given by `mean` and `cov` (σ/mean), or by `median` and `sigma` (of ln).
    Lognormal {
        /// Mean.
        mean: Option<f64>,
        /// Coefficient of variation.
        cov: Option<f64>,
        /// Median.
        median: Option<f64>,
        /// σ of the log.
        sigma: Option<f64>,
    },
    /// Exponential.
    Exponential {
        /// Mean.
        mean: f64,
    },
    /// Uniform on [min, max].
    Uniform {
        /// Low.
        min: f64,
        /// High.
        max: f64,
    },
    /// One of `values`, uniformly.
    Empirical {
        /// The values.
        values: Vec<f64>,
    },
    /// A histogram: bins `[low, high, weight]`, uniform inside a bin.
    Histogram {
        /// The bins.
        bins: Vec<[f64; 3]>,
    },
    /// Each request drawn from the pooled distribution of all other tenants (2DFQ §6.2.1's
    /// unpredictable tenants), class included.
    Pooled,
}

/// `[[tenant.class]]`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassSpec {
    /// The class (API) name; the same name is the same class across tenants.
    pub name: Option<String>,
    /// Relative share of the tenant's requests.
    #[serde(default = "crate::doc::default::one")]
    pub share: f64,
    /// Its costs.
    pub cost: CostSpec,
}

/// `[suite]`: `runs` points, each drawing the `vary` fields at random (seeded).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    /// How many runs.
    pub runs: usize,
    /// Field path → range.
    pub vary: BTreeMap<String, Range>,
}

/// A range to draw from.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Range {
    /// Low end.
    pub min: f64,
    /// High end.
    pub max: f64,
    /// Draw an integer.
    #[serde(default)]
    pub int: bool,
    /// Draw log-uniformly.
    #[serde(default)]
    pub log: bool,
}
