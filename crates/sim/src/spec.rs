//! The TOML experiment spec: what a user writes. Parsing keeps the field path of every error
//! (`tenant[2].cost.std`), and [`Spec::resolve`] turns a spec into a [`Scenario`] the engine
//! runs, checking every value against what is allowed. `docs/simulator.md` documents each field.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use fairlane_core::depth::{DepthConfig, DepthController};
use fairlane_core::{Algorithm, Charging, Config, EstimatorKind, VirtualClock};
use serde::Deserialize;

use crate::workload::{self, Arrival, TenantDef};

/// A spec error: which file, which field, and what is allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecError {
    /// The spec file (or `<string>`).
    pub file: String,
    /// The field, as a path (`tenant[1].cost.std`), or empty for syntax errors.
    pub field: String,
    /// What was wrong and what is allowed.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(f, "{}: {}: {}", self.file, self.field, self.message)
        }
    }
}

impl std::error::Error for SpecError {}

fn default_seed() -> u64 {
    1
}
fn one() -> f64 {
    1.0
}
fn one_usize() -> usize {
    1
}
fn default_refresh() -> f64 {
    0.01
}
fn default_interval() -> f64 {
    0.1
}
fn default_occupancy_interval() -> f64 {
    0.01
}
fn default_max_points() -> usize {
    4096
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
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Seconds at the start excluded from the per-tenant statistics.
    #[serde(default)]
    pub warmup: f64,
    /// Multiplies every open arrival rate and replays traces this much faster.
    #[serde(default = "one")]
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
#[serde(deny_unknown_fields)]
pub struct MetricsSpec {
    /// Seconds between samples of service and lag (2DFQ §6: 100 ms).
    #[serde(default = "default_interval")]
    pub interval: f64,
    /// Seconds between thread-occupancy samples.
    #[serde(default = "default_occupancy_interval")]
    pub occupancy_interval: f64,
    /// Tenants (or groups: their first member) whose time series are kept.
    #[serde(default)]
    pub track: Vec<String>,
    /// Points kept per time series (older points are thinned to stay under it).
    #[serde(default = "default_max_points")]
    pub max_points: usize,
}

impl Default for MetricsSpec {
    fn default() -> Self {
        MetricsSpec {
            interval: default_interval(),
            occupancy_interval: default_occupancy_interval(),
            track: Vec::new(),
            max_points: default_max_points(),
        }
    }
}

/// `[[scheduler]]`: a preset with options.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSpec {
    /// `fifo`, `drr`, `drre`, `sfq`, `wfq`, `wf2q`, `2dfq`, `wfqe`, `wf2qe`, `2dfqe`.
    pub preset: String,
    /// Name in reports (default: the preset).
    pub name: Option<String>,
    /// `oracle`, `last-value`, `ema`, `pessimistic`.
    pub estimator: Option<String>,
    /// The estimator's α.
    pub alpha: Option<f64>,
    /// The estimate of an unseen (tenant, class).
    pub initial: Option<f64>,
    /// `gps`, `approximate`, `last-dispatched`.
    pub clock: Option<String>,
    /// Retroactive charging (default on).
    pub retroactive: Option<bool>,
    /// Refresh charging (default on).
    pub refresh: Option<bool>,
    /// DRR's quantum per unit weight.
    pub quantum: Option<f64>,
}

/// `[[tenant]]`: one tenant, or `count` identical ones named `NAME-0`, `NAME-1`, ….
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// Name (group name when `count > 1`).
    pub name: String,
    /// How many tenants (0 is allowed: a sweep may turn a group off).
    #[serde(default = "one_usize")]
    pub count: usize,
    /// Weight φ.
    #[serde(default = "one")]
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
        #[serde(default = "one_usize")]
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
    #[serde(default = "one")]
    pub share: f64,
    /// Its costs.
    pub cost: CostSpec,
}

/// `[[sweep]]`: a labelled point setting some fields of the spec.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepPoint {
    /// Label in reports.
    pub label: String,
    /// Field path → value, e.g. `"tenant.small.count" = 50`.
    #[serde(default)]
    pub set: BTreeMap<String, toml::Value>,
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

/// A scheduler to run: how to build it and its name in reports.
#[derive(Clone, Debug)]
pub struct SchedulerChoice {
    /// Name in reports.
    pub name: String,
    /// The core config (workers are set by the engine).
    pub config: Config,
}

/// One point of a spec ready to run: tenants expanded, every value checked.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Spec name.
    pub name: String,
    /// Sweep or suite label (empty for a plain spec).
    pub label: String,
    /// Seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Excluded from statistics.
    pub warmup: f64,
    /// Workers.
    pub workers: usize,
    /// Units per second per worker (black box: per component).
    pub rate: f64,
    /// The black-box server, when `server.model = "blackbox"` (`workers` is then the initial
    /// depth D).
    pub blackbox: Option<BlackBoxDef>,
    /// Refresh interval (0 = off).
    pub refresh: f64,
    /// Sampling interval.
    pub interval: f64,
    /// Occupancy sampling interval.
    pub occupancy_interval: f64,
    /// Max points per series.
    pub max_points: usize,
    /// Indices of tracked tenants.
    pub track: Vec<usize>,
    /// Tenants.
    pub tenants: Vec<TenantDef>,
    /// Class names by class id.
    pub classes: Vec<String>,
    /// Schedulers.
    pub schedulers: Vec<SchedulerChoice>,
    /// The cap on events per run (`--max-events`; default
    /// [`DEFAULT_MAX_EVENTS`](crate::events::DEFAULT_MAX_EVENTS)).
    pub max_events: u64,
}

impl Scenario {
    /// An estimate of the events one run processes, from the offered rates, the server's
    /// capacity and the cheapest tenant's mean cost, and the periodic ticks. Runs whose
    /// estimate exceeds `max_events` are refused before they start. Infinite or NaN when a
    /// value is absurd (it is then refused too).
    pub fn estimated_events(&self) -> f64 {
        let d = self.duration;
        let units = self
            .blackbox
            .as_ref()
            .map_or(self.workers, |b| b.components) as f64;
        let capacity = units * self.rate;
        let mut open = 0.0;
        let mut cheapest = f64::INFINITY;
        let mut looped = false;
        for t in &self.tenants {
            let active = (t.stop.min(d) - t.start).max(0.0);
            match &t.arrival {
                Arrival::Trace(rows) => open += rows.len() as f64,
                Arrival::Poisson { .. } | Arrival::OnOff { .. } => {
                    open += t.arrival.mean_rate() * active
                }
                Arrival::Backlogged { .. } | Arrival::Closed { .. } => looped = true,
            }
            let m = t.mean_cost();
            if m.is_finite() && m > 0.0 {
                cheapest = cheapest.min(m);
            }
        }
        // Completions: at most the capacity over the cheapest mean cost; arrivals of
        // closed loops and backlogged tenants come with their completions.
        let completions = if cheapest.is_finite() {
            capacity * d / cheapest
        } else {
            0.0
        };
        let served = if looped {
            2.0 * completions
        } else {
            completions.min(open)
        };
        let ticks = |every: f64| if every > 0.0 { d / every } else { 0.0 };
        open + served
            + ticks(self.refresh)
            + ticks(self.interval)
            + ticks(self.occupancy_interval)
            + self.blackbox.as_ref().map_or(0.0, |b| match &b.depth {
                Depth::Adaptive(c) => ticks(c.interval),
                Depth::Fixed(_) => 0.0,
            })
    }
}

/// A parsed spec file with the directory its relative paths start from.
#[derive(Clone, Debug)]
pub struct SpecFile {
    /// Where it came from (for errors).
    pub file: String,
    /// The directory of trace paths.
    pub dir: PathBuf,
    /// The raw document (sweeps and suites edit it).
    pub doc: toml::Value,
    /// The parsed spec.
    pub spec: Spec,
}

impl SpecFile {
    /// Read and parse a spec file.
    pub fn load(path: &Path) -> Result<SpecFile, SpecError> {
        let (file, text, dir) = read_spec(path)?;
        SpecFile::parse(&text, &file, dir)
    }

    /// Parse spec text; `file` names it in errors and `dir` anchors trace paths.
    pub fn parse(text: &str, file: &str, dir: PathBuf) -> Result<SpecFile, SpecError> {
        let doc = parse_toml(text, file)?;
        let spec = parse_value(&doc, file)?;
        Ok(SpecFile {
            file: file.to_string(),
            dir,
            doc,
            spec,
        })
    }

    /// Set a field (`seed`, `duration`, `tenant.small.count`, …) and re-check the spec.
    pub fn set(&mut self, path: &str, value: toml::Value) -> Result<(), SpecError> {
        set_path(&mut self.doc, path, value).map_err(|message| SpecError {
            file: self.file.clone(),
            field: path.to_string(),
            message,
        })?;
        self.spec = parse_value(&self.doc, &self.file)?;
        Ok(())
    }

    /// Every point the spec describes: one, each sweep point, or each suite run. Each is
    /// resolved and checked.
    pub fn scenarios(&self) -> Result<Vec<Scenario>, SpecError> {
        let spec = &self.spec;
        let mut points: Vec<Point> = Vec::new();
        for p in &spec.sweep {
            points.push((p.label.clone(), p.set.clone().into_iter().collect()));
        }
        if let Some(suite) = &spec.suite {
            points.extend(suite_points(suite, spec.seed, &self.file)?);
        }
        if points.is_empty() {
            return Ok(vec![self.spec.resolve(
                &self.file,
                &self.dir,
                String::new(),
            )?]);
        }
        let mut out = Vec::with_capacity(points.len());
        for (label, set) in points {
            let mut doc = self.doc.clone();
            if let Some(t) = doc.as_table_mut() {
                t.remove("sweep");
                t.remove("suite");
            }
            for (path, value) in &set {
                set_path(&mut doc, path, value.clone()).map_err(|message| SpecError {
                    file: self.file.clone(),
                    field: format!("set.{path:?} (point {label:?})"),
                    message,
                })?;
            }
            let spec = parse_value(&doc, &self.file)?;
            out.push(spec.resolve(&self.file, &self.dir, label)?);
        }
        Ok(out)
    }
}

fn parse_value(doc: &toml::Value, file: &str) -> Result<Spec, SpecError> {
    serde_path_to_error::deserialize::<_, Spec>(doc.clone()).map_err(|e| SpecError {
        file: file.to_string(),
        field: e.path().to_string(),
        message: e.inner().message().to_string(),
    })
}

/// Read a spec file of any kind: its name for errors, its text, and the directory its trace
/// paths are relative to.
pub(crate) fn read_spec(path: &Path) -> Result<(String, String, PathBuf), SpecError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SpecError {
        file: file.clone(),
        field: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((file, text, dir))
}

/// Parse spec text of any kind into a TOML document; errors name `file`.
pub(crate) fn parse_toml(text: &str, file: &str) -> Result<toml::Value, SpecError> {
    toml::from_str(text).map_err(|e| SpecError {
        file: file.to_string(),
        field: String::new(),
        message: format!("not valid TOML: {}", e.message().trim()),
    })
}

/// Set a dotted field path in a TOML document. A segment after an array of tables picks the
/// element whose `name` is that segment (`tenant.small.count`).
pub(crate) fn set_path(
    doc: &mut toml::Value,
    path: &str,
    value: toml::Value,
) -> Result<(), String> {
    let segs: Vec<&str> = path.split('.').collect();
    let mut cur = doc;
    let mut i = 0;
    while i < segs.len() {
        let seg = segs[i];
        let last = i + 1 == segs.len();
        let table = cur
            .as_table_mut()
            .ok_or_else(|| format!("`{}` is not a table", segs[..i].join(".")))?;
        if last {
            table.insert(seg.to_string(), value);
            return Ok(());
        }
        let next = table
            .entry(seg.to_string())
            .or_insert_with(|| toml::Value::Table(Default::default()));
        if let toml::Value::Array(items) = next {
            let name = segs[i + 1];
            let found = items
                .iter_mut()
                .find(|v| v.get("name").and_then(toml::Value::as_str) == Some(name));
            match found {
                Some(item) => {
                    cur = item;
                    i += 2;
                    if i == segs.len() {
                        return Err(format!("`{path}` names a whole {seg} entry, not a field"));
                    }
                    continue;
                }
                None => return Err(format!("no `{seg}` entry is named {name:?}")),
            }
        }
        cur = next;
        i += 1;
    }
    Err("empty path".into())
}

/// A labelled point: field paths and the values they take.
type Point = (String, Vec<(String, toml::Value)>);

fn suite_points(suite: &SuiteSpec, seed: u64, file: &str) -> Result<Vec<Point>, SpecError> {
    let err = |field: String, message: String| SpecError {
        file: file.to_string(),
        field,
        message,
    };
    if suite.runs == 0 {
        return Err(err("suite.runs".into(), "must be at least 1".into()));
    }
    for (path, r) in &suite.vary {
        if !(r.min.is_finite() && r.max.is_finite() && r.min <= r.max) || (r.log && r.min <= 0.0) {
            return Err(err(
                format!("suite.vary.{path:?}"),
                format!(
                    "needs finite min ≤ max (and min > 0 when log), got [{}, {}]",
                    r.min, r.max
                ),
            ));
        }
    }
    let mut rng = crate::rng::Rng::new(seed, 0x5017E);
    let width = suite.runs.to_string().len();
    Ok((0..suite.runs)
        .map(|k| {
            let set = suite
                .vary
                .iter()
                .map(|(path, r)| {
                    let u = rng.uniform();
                    let x = if r.log {
                        (r.min.ln() + u * (r.max.ln() - r.min.ln())).exp()
                    } else {
                        r.min + u * (r.max - r.min)
                    };
                    let v = if r.int {
                        toml::Value::Integer(x.round().clamp(r.min.ceil(), r.max.floor()) as i64)
                    } else {
                        toml::Value::Float(x)
                    };
                    (path.clone(), v)
                })
                .collect();
            (format!("run-{k:0width$}"), set)
        })
        .collect())
}

impl Spec {
    /// Check every value and expand the tenants. `label` names the sweep point.
    pub fn resolve(&self, file: &str, dir: &Path, label: String) -> Result<Scenario, SpecError> {
        let err = |field: &str, message: String| SpecError {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        let pos = |field: &str, x: f64| -> Result<f64, SpecError> {
            if x.is_finite() && x > 0.0 {
                Ok(x)
            } else {
                Err(err(field, format!("must be a finite number > 0, got {x}")))
            }
        };
        let nonneg = |field: &str, x: f64| -> Result<f64, SpecError> {
            if x.is_finite() && x >= 0.0 {
                Ok(x)
            } else {
                Err(err(field, format!("must be a finite number ≥ 0, got {x}")))
            }
        };
        pos("duration", self.duration)?;
        nonneg("warmup", self.warmup)?;
        if self.warmup >= self.duration {
            return Err(err(
                "warmup",
                format!(
                    "must be shorter than duration ({}), got {}",
                    self.duration, self.warmup
                ),
            ));
        }
        pos("speed", self.speed)?;
        let s = &self.server;
        let blackbox = match s.model.as_deref() {
            None | Some("workers") => {
                for (k, set) in [
                    ("components", s.components.is_some()),
                    ("routing", s.routing.is_some()),
                    ("depth", s.depth.is_some()),
                ] {
                    if set {
                        return Err(err(
                            &format!("server.{k}"),
                            "only the black-box server has it; set model = \"blackbox\"".into(),
                        ));
                    }
                }
                None
            }
            Some("blackbox") => Some(blackbox_def(s).map_err(|(k, m)| err(&k, m))?),
            Some(other) => {
                return Err(err(
                    "server.model",
                    format!("unknown server model {other:?}; allowed: workers, blackbox"),
                ))
            }
        };
        // Workers: the worker model's threads, or the black box's initial depth D.
        let workers = match (&blackbox, s.workers) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "server.workers",
                    "the black-box server has `depth` (issue slots), not `workers`".into(),
                ))
            }
            (Some(bb), None) => bb.depth.initial(),
            (None, Some(w)) => w,
            (None, None) => {
                return Err(err(
                    "server.workers",
                    "missing: give the number of worker threads".into(),
                ))
            }
        };
        if workers == 0 || workers > 4096 {
            return Err(err(
                "server.workers",
                format!("must be between 1 and 4096, got {workers}"),
            ));
        }
        // Units per second of one worker or one component, and of the whole server.
        let units = blackbox.as_ref().map_or(workers, |bb| bb.components);
        let rate = match (s.rate, s.capacity) {
            (Some(_), Some(_)) => {
                return Err(err(
                    "server.capacity",
                    "give `rate` or `capacity`, not both".into(),
                ))
            }
            (Some(r), None) => pos("server.rate", r)?,
            (None, Some(c)) => pos("server.capacity", c)? / units as f64,
            (None, None) => 1.0,
        };
        let capacity = units as f64 * rate;
        nonneg("server.refresh", s.refresh)?;
        let m = &self.metrics;
        pos("metrics.interval", m.interval)?;
        pos("metrics.occupancy_interval", m.occupancy_interval)?;
        if m.max_points < 16 {
            return Err(err(
                "metrics.max_points",
                format!("must be at least 16, got {}", m.max_points),
            ));
        }

        // Schedulers.
        let mut schedulers = Vec::new();
        for (i, name) in self.schedulers.iter().enumerate() {
            let config = Config::preset(name).map_err(|e| {
                let mut why = core_reason(e);
                if crate::dbserver::RESERVATION_SCHEDULERS.contains(&name.as_str()) {
                    why = format!(
                        "{why} ({name:?} is a CPU-reservation scheduler: it runs on a database \
                         server, [server] model = \"cores\")"
                    );
                }
                err(&format!("schedulers[{i}]"), why)
            })?;
            schedulers.push(SchedulerChoice {
                name: config.name().to_string(),
                config: default_clock(config, capacity),
            });
        }
        for (i, sc) in self.scheduler.iter().enumerate() {
            let f = |k: &str| format!("scheduler[{i}].{k}");
            schedulers.push(scheduler_choice(sc, capacity).map_err(|(k, m)| err(&f(k), m))?);
        }
        if schedulers.is_empty() {
            return Err(err(
                "schedulers",
                format!(
                    "name at least one scheduler, e.g. schedulers = [\"wfq\", \"2dfq\"]; known: {}",
                    fairlane_core::PRESETS.join(", ")
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for sc in &schedulers {
            if !seen.insert(sc.name.clone()) {
                return Err(err(
                    "scheduler",
                    format!("two schedulers are named {:?}; give one a `name`", sc.name),
                ));
            }
        }

        // Tenants.
        if self.tenant.is_empty() {
            return Err(err("tenant", "define at least one [[tenant]]".into()));
        }
        let mut classes = workload::ClassTable::default();
        let mut tenants = Vec::new();
        let mut names = std::collections::BTreeSet::new();
        let mut traces = workload::TraceCache::default();
        for (i, t) in self.tenant.iter().enumerate() {
            let f = |k: &str| format!("tenant[{i}].{k}");
            if t.name.is_empty() || t.name.contains(['.', ',', '"']) {
                return Err(err(
                    &f("name"),
                    format!(
                        "must be non-empty without '.', ',' or '\"', got {:?}",
                        t.name
                    ),
                ));
            }
            pos(&f("weight"), t.weight)?;
            if let Some(target) = t.target {
                pos(&f("target"), target)?;
            }
            nonneg(&f("start"), t.start)?;
            if let Some(stop) = t.stop {
                nonneg(&f("stop"), stop)?;
            }
            if t.count > 100_000 {
                return Err(err(
                    &f("count"),
                    format!("must be at most 100000, got {}", t.count),
                ));
            }
            for k in 0..t.count {
                let name = if t.count == 1 {
                    t.name.clone()
                } else {
                    format!("{}-{k}", t.name)
                };
                if !names.insert(name.clone()) {
                    return Err(err(
                        &f("name"),
                        format!("tenant name {name:?} is used twice"),
                    ));
                }
                let def = workload::tenant_def(
                    t,
                    name,
                    k,
                    self.seed,
                    s,
                    self.speed,
                    &mut classes,
                    &mut traces,
                    dir,
                )
                .map_err(|(k, m)| err(&f(&k), m))?;
                tenants.push(def);
            }
        }
        if tenants.is_empty() {
            return Err(err(
                "tenant",
                "every group has count = 0: no tenants".into(),
            ));
        }
        workload::link_pooled(&mut tenants).map_err(|m| err("tenant", m))?;
        // DRR serves a tenant once its deficit covers the head's cost, adding one quantum
        // per round: a quantum far below the costs means millions of rounds per dequeue.
        let costliest = tenants
            .iter()
            .map(|t| t.mean_cost() / t.weight)
            .filter(|x| x.is_finite())
            .fold(0.0f64, f64::max);
        let first = self.schedulers.len();
        for (i, choice) in schedulers[first..].iter().enumerate() {
            if let Some(q) = choice.config.drr_quantum {
                let rounds = costliest / q;
                if rounds.is_nan() || rounds > 1e6 {
                    return Err(err(
                        &format!("scheduler[{i}].quantum"),
                        format!(
                            "{q:e} is too small: a mean request costs up to {costliest:.3e} \
                             units per unit weight, {rounds:.3e} DRR rounds per dequeue \
                             (at most 1e6 allowed)"
                        ),
                    ));
                }
            }
        }

        let mut track = Vec::new();
        for (i, name) in m.track.iter().enumerate() {
            let idx = tenants
                .iter()
                .position(|t| &t.name == name)
                .or_else(|| tenants.iter().position(|t| &t.group == name));
            match idx {
                Some(x) => {
                    if !track.contains(&x) {
                        track.push(x)
                    }
                }
                // A sweep may remove a tracked group (count = 0): not an error then.
                None if self.tenant.iter().any(|g| &g.name == name) => {}
                None => {
                    return Err(err(
                        &format!("metrics.track[{i}]"),
                        format!("no tenant or group is named {name:?}"),
                    ))
                }
            }
        }
        Ok(Scenario {
            name: self.name.clone(),
            label,
            seed: self.seed,
            duration: self.duration,
            warmup: self.warmup,
            workers,
            rate,
            blackbox,
            // The black box's requests make no visible progress: no refresh charging.
            refresh: if s.is_blackbox() { 0.0 } else { s.refresh },
            interval: m.interval,
            occupancy_interval: m.occupancy_interval,
            max_points: m.max_points,
            track,
            tenants,
            classes: classes.names,
            schedulers,
            max_events: crate::events::DEFAULT_MAX_EVENTS,
        })
    }
}

/// Resolve `[server]` of the black-box model. Errors are `(field, message)`.
fn blackbox_def(s: &ServerSpec) -> Result<BlackBoxDef, (String, String)> {
    let components = s.components.ok_or_else(|| {
        (
            "server.components".to_string(),
            "missing: the black box needs its number of service components".to_string(),
        )
    })?;
    if components == 0 || components > 4096 {
        return Err((
            "server.components".into(),
            format!("must be between 1 and 4096, got {components}"),
        ));
    }
    let routing = match s.routing.as_deref() {
        None | Some("random") => Routing::Random,
        Some("shared") => Routing::Shared,
        Some(other) => {
            return Err((
                "server.routing".into(),
                format!("unknown routing {other:?}; allowed: random, shared"),
            ))
        }
    };
    let slots = |field: &str, d: i64| -> Result<usize, (String, String)> {
        if (1..=4096).contains(&d) {
            Ok(d as usize)
        } else {
            Err((
                field.to_string(),
                format!("must be between 1 and 4096, got {d}"),
            ))
        }
    };
    let depth = match &s.depth {
        None => {
            return Err((
                "server.depth".into(),
                "missing: give the depth D (issue slots), e.g. depth = 8, or an adaptive \
                 table depth = { min = 1, max = 64 }"
                    .into(),
            ))
        }
        Some(toml::Value::Integer(d)) => Depth::Fixed(slots("server.depth", *d)?),
        Some(v @ toml::Value::Table(_)) => {
            let a: AdaptiveDepthSpec =
                serde_path_to_error::deserialize(v.clone()).map_err(|e| {
                    let path = e.path().to_string();
                    let field = if path == "." || path.is_empty() {
                        "server.depth".to_string()
                    } else {
                        format!("server.depth.{path}")
                    };
                    (field, e.inner().message().to_string())
                })?;
            let min = slots("server.depth.min", a.min as i64)?;
            let max = slots("server.depth.max", a.max as i64)?;
            if max < min {
                return Err((
                    "server.depth.max".into(),
                    format!("must be ≥ min ({min}), got {max}"),
                ));
            }
            let initial = a.initial.unwrap_or(min);
            if !(min..=max).contains(&initial) {
                return Err((
                    "server.depth.initial".into(),
                    format!("must be between min ({min}) and max ({max}), got {initial}"),
                ));
            }
            let interval = a.interval.unwrap_or(1.0);
            if !(interval.is_finite() && interval > 0.0) {
                return Err((
                    "server.depth.interval".into(),
                    format!("must be a finite number > 0, got {interval}"),
                ));
            }
            let d = DepthConfig::default();
            let cfg = DepthConfig {
                min,
                max,
                initial,
                interval,
                decrease: a.decrease.unwrap_or(d.decrease),
                increase: a.increase.unwrap_or(d.increase),
                headroom: a.headroom.unwrap_or(d.headroom),
                min_samples: a.min_samples.unwrap_or(d.min_samples),
                probe: a.probe.unwrap_or(d.probe),
            };
            // The controller checks the rest and names the field.
            if let Err(e) = DepthController::new(cfg) {
                return Err(match e {
                    fairlane_core::Error::InvalidConfig { field, reason } => {
                        (format!("server.{field}"), reason)
                    }
                    other => ("server.depth".into(), other.to_string()),
                });
            }
            Depth::Adaptive(cfg)
        }
        Some(other) => {
            return Err((
                "server.depth".into(),
                format!(
                    "must be an integer D or a table {{ min, max, initial, interval }}, got {}",
                    other.type_str()
                ),
            ))
        }
    };
    Ok(BlackBoxDef {
        components,
        routing,
        depth,
    })
}

fn core_reason(e: fairlane_core::Error) -> String {
    match e {
        fairlane_core::Error::InvalidConfig { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// Known costs and a simulator that knows its capacity: the exact GPS virtual time (2DFQ §6
/// evaluates WFQ, WF²Q and 2DFQ that way). SFQ keeps its own clock; estimators keep the
/// approximation, since GPS needs costs at arrival.
fn default_clock(config: Config, capacity: f64) -> Config {
    let tagged = matches!(
        config.algorithm,
        Algorithm::Wfq | Algorithm::Wf2q | Algorithm::TwoDfq
    );
    if tagged && config.estimator == EstimatorKind::Oracle && config.clock.is_none() {
        config.clock(VirtualClock::Gps { capacity })
    } else {
        config
    }
}

fn scheduler_choice(
    sc: &SchedulerSpec,
    capacity: f64,
) -> Result<SchedulerChoice, (&'static str, String)> {
    // Core owns "preset + the executor's initial estimate" (the simulator knows costs up
    // front, so oracle presets stay oracle); the engine sets the workers.
    let given = sc.initial.filter(|i| i.is_finite() && *i > 0.0); // a bad one is named below
    let mut config = Config::for_executor(&sc.preset, 1, given.unwrap_or(1.0), true)
        .map_err(|e| ("preset", core_reason(e)))?;
    let (d_alpha, d_initial) = match config.estimator {
        EstimatorKind::Ema { alpha, initial } | EstimatorKind::Pessimistic { alpha, initial } => {
            (alpha, initial)
        }
        EstimatorKind::LastValue { initial } => (0.99, initial),
        EstimatorKind::Oracle => (0.99, 1.0),
    };
    let alpha = sc.alpha.unwrap_or(d_alpha);
    let initial = sc.initial.unwrap_or(d_initial);
    if !(alpha.is_finite() && (0.0..1.0).contains(&alpha)) {
        return Err(("alpha", format!("must be in [0, 1), got {alpha}")));
    }
    if !(initial.is_finite() && initial > 0.0) {
        return Err((
            "initial",
            format!("must be a finite number > 0, got {initial}"),
        ));
    }
    let kind = match sc.estimator.as_deref() {
        None => match config.estimator {
            EstimatorKind::Oracle => EstimatorKind::Oracle,
            EstimatorKind::LastValue { .. } => EstimatorKind::LastValue { initial },
            EstimatorKind::Ema { .. } => EstimatorKind::Ema { alpha, initial },
            EstimatorKind::Pessimistic { .. } => EstimatorKind::Pessimistic { alpha, initial },
        },
        Some("oracle") => EstimatorKind::Oracle,
        Some("last-value") => EstimatorKind::LastValue { initial },
        Some("ema") => EstimatorKind::Ema { alpha, initial },
        Some("pessimistic") => EstimatorKind::Pessimistic { alpha, initial },
        Some(other) => {
            return Err((
                "estimator",
                format!(
                    "unknown estimator {other:?}; allowed: oracle, last-value, ema, pessimistic"
                ),
            ))
        }
    };
    config = config.estimator(kind);
    match sc.clock.as_deref() {
        None => {}
        Some("gps") => config = config.clock(VirtualClock::Gps { capacity }),
        Some("approximate") => config = config.clock(VirtualClock::Approximate),
        Some("last-dispatched") => config = config.clock(VirtualClock::LastDispatched),
        Some(other) => {
            return Err((
                "clock",
                format!("unknown clock {other:?}; allowed: gps, approximate, last-dispatched"),
            ))
        }
    }
    if matches!(config.clock, Some(VirtualClock::Gps { .. })) && kind != EstimatorKind::Oracle {
        return Err((
            "clock",
            "gps needs known costs (estimator = \"oracle\"); use approximate".into(),
        ));
    }
    config = config.charging(Charging {
        retroactive: sc.retroactive.unwrap_or(true),
        refresh: sc.refresh.unwrap_or(true),
    });
    if let Some(q) = sc.quantum {
        if !(q.is_finite() && q > 0.0) {
            return Err(("quantum", format!("must be a finite number > 0, got {q}")));
        }
        config = config.drr_quantum(q);
    }
    let config = default_clock(config, capacity);
    let name = sc.name.clone().unwrap_or_else(|| config.name().to_string());
    if name.is_empty() || name.contains([',', '"', '/']) {
        return Err((
            "name",
            format!("must be non-empty without ',', '\"' or '/', got {name:?}"),
        ));
    }
    Ok(SchedulerChoice { name, config })
}
