//! The simulation section of a Thread Architecture Model file (docs/tam.md, "Simulate it"):
//! hosts' capacities, stages' threads and schedulers, request types (paths through the
//! stages with per-visit costs) and clients. Every key is optional: a model file without a
//! `[simulation]` section simulates with the default workload ([`TamSpec::from_model`]).
//!
//! The section is walked by hand so every error names the file and the field.

use std::collections::BTreeMap;
use std::fmt;

use fairlane_core::{Config, EstimatorKind};
use fairlane_tam::{Model, Resource, Scheduling, Usage};
use toml::{Table, Value};

use crate::error::SpecError;

/// One shared resource of a host: `units` parallel servers of `rate` work units per second,
/// served in arrival order (a host's resources have no scheduler: hidden contention).
#[derive(Clone, Debug, PartialEq)]
pub struct ResourceDef {
    /// `host 1 cpu`, `host 1 disk`, `host 1 network`, `host 1 lock wal`.
    pub name: String,
    /// Parallel units (cores, disk channels, 1 for a link or a lock).
    pub units: u32,
}

/// How a stage's queue is ordered.
#[derive(Clone, Debug, PartialEq)]
pub enum Queue {
    /// Arrival order: general stages and ordered stages (whatever their scheduler).
    Fifo,
    /// Strict priority by the client's `priority` (lower first), arrival order within.
    Priority,
    /// A fairlane-core scheduler (pluggable stages).
    Core(Config),
}

/// A stage as the simulator runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct StageDef {
    /// Its name in the model.
    pub name: String,
    /// Threads; `None` = on demand (a thread per request, no queue).
    pub threads: Option<u32>,
    /// Its queue's order (set per run by [`TamSpec::stages_for`]).
    pub queue: Queue,
    /// The scheduler's name in reports (`fifo` for general stages, `none` for on-demand
    /// ones, which have no queue, `NAME (ordered)` for an ordered pluggable stage, which
    /// serves in arrival order whatever NAME says).
    pub scheduler: String,
    /// The model's scheduling type.
    pub scheduling: Scheduling,
    /// The model's ordering constraint `o`.
    pub ordered: bool,
    /// The stage's own `scheduler` from the simulation section.
    pub own: Option<String>,
}

/// One resource use of a visit: `resource` for `seconds`, or, when `unknown`, for
/// `hit` seconds with probability `hit_ratio` and `miss` seconds otherwise, drawn when the
/// thread runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// Index into [`TamSpec::resources`].
    pub resource: u32,
    /// Seconds of the resource (known cost).
    pub seconds: f64,
    /// `(hit_ratio, hit seconds, miss seconds)` of an unknown cost.
    pub unknown: Option<(f64, f64, f64)>,
}

/// One visit of a request type's path.
#[derive(Clone, Debug, PartialEq)]
pub struct Visit {
    /// Stage index.
    pub stage: u32,
    /// Resource uses in order.
    pub steps: Vec<Step>,
    /// The cost the stage's scheduler is told (seconds of known resource use, an unknown
    /// use counted at its hit cost).
    pub declared: f64,
    /// The visit after whose end this visit's thread is free: itself, or for a stage that
    /// `blocks_on` a stage later in the path, that stage's release point.
    pub release_after: u32,
}

/// A request type: a path through the stages.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestDef {
    /// Its name.
    pub name: String,
    /// The visits, in order.
    pub visits: Vec<Visit>,
}

/// How a client issues requests.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Loop {
    /// `threads` threads, each issuing, waiting for the reply, thinking `think` seconds.
    Closed {
        /// Client threads.
        threads: u32,
    },
    /// Poisson arrivals of the phase's `rate` per second.
    Open,
}

/// A client's workload from time `at` on.
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    /// Start (s).
    pub at: f64,
    /// `(request type, cumulative probability)`.
    pub mix: Vec<(u32, f64)>,
    /// Think time of a closed-loop thread (s).
    pub think: f64,
    /// Open arrival rate (per s).
    pub rate: f64,
}

/// A client (a tenant of every stage).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientDef {
    /// Its name.
    pub name: String,
    /// Closed or open.
    pub kind: Loop,
    /// Weight at every pluggable stage.
    pub weight: f64,
    /// Priority for `priority` stages (lower first).
    pub priority: i64,
    /// Response-time target for `edf` stages (s).
    pub deadline: Option<f64>,
    /// Workload phases, the first at 0.
    pub phases: Vec<Phase>,
}

/// A TAM simulation, ready to run.
#[derive(Clone, Debug, PartialEq)]
pub struct TamSpec {
    /// Model name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Seed.
    pub seed: u64,
    /// Simulated seconds.
    pub duration: f64,
    /// Excluded from statistics (s).
    pub warmup: f64,
    /// Sampling interval (s).
    pub interval: f64,
    /// Shared resources of every host.
    pub resources: Vec<ResourceDef>,
    /// Stages, in model order.
    pub stages: Vec<StageDef>,
    /// Request types.
    pub requests: Vec<RequestDef>,
    /// Clients.
    pub clients: Vec<ClientDef>,
    /// Runs: the scheduler name given to every pluggable stage that does not name its own.
    pub schedulers: Vec<String>,
    /// Event cap per run.
    pub max_events: u64,
}

const SIM_KEYS: &[&str] = &[
    "seed",
    "duration",
    "warmup",
    "interval",
    "schedulers",
    "host",
    "stage",
    "request",
    "client",
];
const HOST_KEYS: &[&str] = &[
    "cpu_cores",
    "cpu_ghz",
    "disk_mbps",
    "disk_parallelism",
    "net_gbps",
    "locks",
];
const STAGE_KEYS: &[&str] = &["threads", "scheduler"];
const VISIT_KEYS: &[&str] = &[
    "stage",
    "cpu_cycles",
    "cpu_us",
    "io_bytes",
    "io_us",
    "net_bytes",
    "lock",
    "lock_us",
    "unknown",
];
const UNKNOWN_KEYS: &[&str] = &["resource", "hit_ratio", "hit", "miss"];
const CLIENT_KEYS: &[&str] = &[
    "name",
    "threads",
    "rate",
    "think",
    "requests",
    "weight",
    "priority",
    "deadline_ms",
    "phases",
];
const PHASE_KEYS: &[&str] = &["at", "requests", "think", "rate"];

/// Default stage threads (bounded stages without `threads`).
pub const DEFAULT_THREADS: u32 = 10;

/// Threads of each default client (`C1` and `C2`, when the section has no clients).
pub const DEFAULT_CLIENT_THREADS: u32 = 8;

struct Ctx<'a> {
    file: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> SpecError {
        SpecError {
            file: self.file.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }
    fn num(&self, t: &Table, key: &str, at: &str, default: f64) -> Result<f64, SpecError> {
        match t.get(key) {
            None => Ok(default),
            Some(Value::Integer(i)) => Ok(*i as f64),
            Some(Value::Float(f)) if f.is_finite() => Ok(*f),
            Some(v) => Err(self.err(
                join(at, key),
                format!("expected a number, found {}", v.type_str()),
            )),
        }
    }
    fn pos(&self, t: &Table, key: &str, at: &str, default: f64) -> Result<f64, SpecError> {
        let x = self.num(t, key, at, default)?;
        if x > 0.0 {
            Ok(x)
        } else {
            Err(self.err(
                join(at, key),
                format!(
                    "must be positive (a zero-capacity resource or stage never serves), found {x}"
                ),
            ))
        }
    }
    fn nonneg(&self, t: &Table, key: &str, at: &str) -> Result<f64, SpecError> {
        let x = self.num(t, key, at, 0.0)?;
        if x >= 0.0 {
            Ok(x)
        } else {
            Err(self.err(join(at, key), format!("must be ≥ 0, found {x}")))
        }
    }
    fn count(&self, t: &Table, key: &str, at: &str, default: u32) -> Result<u32, SpecError> {
        match t.get(key) {
            None => Ok(default),
            Some(Value::Integer(i)) if *i >= 1 && *i <= 1_000_000 => Ok(*i as u32),
            Some(Value::Integer(i)) => Err(self.err(
                join(at, key),
                format!("must be between 1 and 1000000 (a zero-capacity resource or stage never serves), found {i}"),
            )),
            Some(v) => Err(self.err(
                join(at, key),
                format!("expected an integer, found {}", v.type_str()),
            )),
        }
    }
    fn keys(&self, t: &Table, allowed: &[&str], at: &str) -> Result<(), SpecError> {
        for k in t.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(self.err(
                    join(at, k),
                    format!("unknown field; allowed: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }
    fn table<'t>(&self, v: &'t Value, at: &str) -> Result<&'t Table, SpecError> {
        v.as_table()
            .ok_or_else(|| self.err(at, format!("expected a table, found {}", v.type_str())))
    }
    fn array<'t>(&self, t: &'t Table, key: &str, at: &str) -> Result<&'t [Value], SpecError> {
        match t.get(key) {
            None => Ok(&[]),
            Some(Value::Array(a)) => Ok(a),
            Some(v) => Err(self.err(
                join(at, key),
                format!("expected an array, found {}", v.type_str()),
            )),
        }
    }
}

fn join(at: &str, key: &str) -> String {
    if at.is_empty() {
        key.to_string()
    } else {
        format!("{at}.{key}")
    }
}

/// Host capacities, and the indices of its resources in [`TamSpec::resources`].
struct Host {
    cpu: u32,
    ghz: f64,
    disk: u32,
    disk_rate: f64,
    net: u32,
    net_rate: f64,
    locks: BTreeMap<String, u32>,
}

/// The hosts of a model by id.
type Hosts = BTreeMap<u32, Host>;

impl TamSpec {
    /// Build the simulation of `model` from the `[simulation]` table of its file (`sim`,
    /// `None` for the default workload). `file` names the file in errors. Each section
    /// reads and checks itself and names its fields (`simulation.client[1].threads`).
    pub fn from_model(
        model: &Model,
        sim: Option<&Value>,
        file: &str,
    ) -> Result<TamSpec, SpecError> {
        let cx = Ctx { file };
        let empty = Table::new();
        let top = match sim {
            Some(v) => cx.table(v, "simulation")?,
            None => &empty,
        };
        cx.keys(top, SIM_KEYS, "simulation")?;
        let run = RunSection::read(&cx, top)?;
        let mut resources = Vec::new();
        let hosts = Host::read_all(&cx, model, top, &mut resources)?;
        check_blocking_cycles(model).map_err(|e| cx.err("stage.blocks_on", e.to_string()))?;
        let stages = StageDef::read_all(&cx, model, top)?;
        let requests = RequestDef::read_all(&cx, model, &hosts, top)?;
        let clients = ClientDef::read_all(&cx, top, &requests)?;
        Ok(TamSpec {
            name: model.name.clone(),
            description: model.description.clone().unwrap_or_default(),
            seed: run.seed,
            duration: run.duration,
            warmup: run.warmup,
            interval: run.interval,
            resources,
            stages,
            requests,
            clients,
            schedulers: run.schedulers,
            max_events: crate::events::DEFAULT_MAX_EVENTS,
        })
    }

    /// The stages of run `run`: pluggable stages without their own scheduler get
    /// `schedulers[run]`; an ordered stage keeps arrival order whatever its scheduler says.
    pub fn stages_for(&self, run: usize) -> Vec<StageDef> {
        let default = &self.schedulers[run.min(self.schedulers.len() - 1)];
        self.stages
            .iter()
            .map(|s| {
                let mut s = s.clone();
                if s.scheduling == Scheduling::Pluggable {
                    let name = s.own.clone().unwrap_or_else(|| default.clone());
                    if s.ordered {
                        s.queue = Queue::Fifo;
                        s.scheduler = format!("{name} (ordered)");
                    } else {
                        // Checked when the spec was read.
                        s.queue = parse_queue(&name).unwrap_or(Queue::Fifo);
                        s.scheduler = name;
                    }
                }
                s
            })
            .collect()
    }
}

/// The run settings at the top of `[simulation]`.
struct RunSection {
    seed: u64,
    duration: f64,
    warmup: f64,
    interval: f64,
    schedulers: Vec<String>,
}

impl RunSection {
    fn read(cx: &Ctx, top: &Table) -> Result<RunSection, SpecError> {
        let at = "simulation";
        let seed = cx.num(top, "seed", at, 1.0)?;
        if seed < 0.0 || seed.fract() != 0.0 {
            return Err(cx.err("simulation.seed", "must be a non-negative integer"));
        }
        let duration = cx.pos(top, "duration", at, 10.0)?;
        let warmup = cx.nonneg(top, "warmup", at)?;
        if warmup >= duration {
            return Err(cx.err("simulation.warmup", "must be shorter than the duration"));
        }
        let interval = cx.pos(top, "interval", at, (duration / 50.0).max(0.01))?;
        let mut schedulers = Vec::new();
        for (i, v) in cx.array(top, "schedulers", at)?.iter().enumerate() {
            let name = v.as_str().ok_or_else(|| {
                cx.err(
                    format!("simulation.schedulers[{i}]"),
                    "expected a scheduler name",
                )
            })?;
            parse_queue(name)
                .map_err(|e| cx.err(format!("simulation.schedulers[{i}]"), e.to_string()))?;
            schedulers.push(name.to_string());
        }
        if schedulers.is_empty() {
            schedulers.push("wfq".to_string());
        }
        Ok(RunSection {
            seed: seed as u64,
            duration,
            warmup,
            interval,
            schedulers,
        })
    }
}

impl Host {
    /// `[simulation.host.N]` for every host of the model (defaults: the paper's node, 1 GHz
    /// CPU, 100 MB/s disk, 1 Gbps network); each host's resources are appended to
    /// `resources`.
    fn read_all(
        cx: &Ctx,
        model: &Model,
        top: &Table,
        resources: &mut Vec<ResourceDef>,
    ) -> Result<Hosts, SpecError> {
        let tables = match top.get("host") {
            None => None,
            Some(v) => Some(cx.table(v, "simulation.host")?),
        };
        let mut hosts = Hosts::new();
        for id in model.host_ids() {
            let hat = format!("simulation.host.{id}");
            let t = match tables.and_then(|h| h.get(&id.to_string())) {
                Some(v) => cx.table(v, &hat)?.clone(),
                None => Table::new(),
            };
            hosts.insert(id, Host::read(cx, model, id, &t, &hat, resources)?);
        }
        for k in tables.into_iter().flat_map(|t| t.keys()) {
            if !k.parse::<u32>().is_ok_and(|id| hosts.contains_key(&id)) {
                return Err(cx.err(
                    format!("simulation.host.{k}"),
                    format!(
                        "no stage runs on host `{k}`; hosts of this model: {:?}",
                        model.host_ids()
                    ),
                ));
            }
        }
        Ok(hosts)
    }

    fn read(
        cx: &Ctx,
        model: &Model,
        id: u32,
        t: &Table,
        hat: &str,
        resources: &mut Vec<ResourceDef>,
    ) -> Result<Host, SpecError> {
        cx.keys(t, HOST_KEYS, hat)?;
        let cores = cx.count(t, "cpu_cores", hat, 1)?;
        let ghz = cx.pos(t, "cpu_ghz", hat, 1.0)?;
        let mbps = cx.pos(t, "disk_mbps", hat, 100.0)?;
        let par = cx.count(t, "disk_parallelism", hat, 1)?;
        let gbps = cx.pos(t, "net_gbps", hat, 1.0)?;
        let mut h = Host {
            cpu: push(resources, format!("host {id} cpu"), cores),
            ghz,
            disk: push(resources, format!("host {id} disk"), par),
            disk_rate: mbps * 1e6 / par as f64,
            net: push(resources, format!("host {id} network"), 1),
            net_rate: gbps * 1e9 / 8.0,
            locks: BTreeMap::new(),
        };
        for (i, v) in cx.array(t, "locks", hat)?.iter().enumerate() {
            let name = v
                .as_str()
                .ok_or_else(|| cx.err(format!("{hat}.locks[{i}]"), "expected a lock name"))?;
            let idx = push(resources, format!("host {id} lock {name}"), 1);
            h.locks.insert(name.to_string(), idx);
        }
        // A stage that uses a lock extensively gets the host's default lock.
        if model
            .stages
            .iter()
            .any(|s| s.host == id && s.resources.get(Resource::Lock).may_use())
            && !h.locks.contains_key("lock")
        {
            let idx = push(resources, format!("host {id} lock lock"), 1);
            h.locks.insert("lock".into(), idx);
        }
        Ok(h)
    }
}

impl StageDef {
    /// Every stage of the model with its `[simulation.stage.NAME]` settings.
    fn read_all(cx: &Ctx, model: &Model, top: &Table) -> Result<Vec<StageDef>, SpecError> {
        let tables = match top.get("stage") {
            None => None,
            Some(v) => Some(cx.table(v, "simulation.stage")?),
        };
        if let Some(k) = tables
            .into_iter()
            .flat_map(|t| t.keys())
            .find(|k| model.index_of(k).is_none())
        {
            return Err(cx.err(
                format!("simulation.stage.{k}"),
                format!("no stage named `{k}` in the model"),
            ));
        }
        let mut stages = Vec::new();
        for s in &model.stages {
            let sat = format!("simulation.stage.{}", quote_key(&s.name));
            let t = match tables.and_then(|st| st.get(&s.name)) {
                Some(v) => cx.table(v, &sat)?.clone(),
                None => Table::new(),
            };
            stages.push(StageDef::read(cx, s, &t, &sat)?);
        }
        Ok(stages)
    }

    fn read(
        cx: &Ctx,
        s: &fairlane_tam::Stage,
        t: &Table,
        sat: &str,
    ) -> Result<StageDef, SpecError> {
        cx.keys(t, STAGE_KEYS, sat)?;
        let threads = match s.scheduling {
            Scheduling::OnDemand => {
                if t.contains_key("threads") {
                    return Err(cx.err(
                        join(sat, "threads"),
                        "an on-demand stage starts a thread per request; it has no thread count",
                    ));
                }
                None
            }
            _ => Some(cx.count(t, "threads", sat, DEFAULT_THREADS)?),
        };
        let own = match t.get("scheduler") {
            None => None,
            Some(Value::String(name)) => {
                if s.scheduling != Scheduling::Pluggable {
                    return Err(cx.err(
                        join(sat, "scheduler"),
                        format!(
                            "only a pluggable stage takes a scheduler; `{}` is {}",
                            s.name, s.scheduling
                        ),
                    ));
                }
                parse_queue(name).map_err(|e| cx.err(join(sat, "scheduler"), e.to_string()))?;
                Some(name.clone())
            }
            Some(v) => {
                return Err(cx.err(
                    join(sat, "scheduler"),
                    format!("expected a scheduler name, found {}", v.type_str()),
                ))
            }
        };
        Ok(StageDef {
            name: s.name.clone(),
            threads,
            queue: Queue::Fifo,
            // An on-demand stage has no queue, so nothing to schedule.
            scheduler: if threads.is_none() { "none" } else { "fifo" }.into(),
            scheduling: s.scheduling,
            ordered: s.ordering,
            own,
        })
    }
}

impl RequestDef {
    /// `[[simulation.request]]`, or the default request.
    fn read_all(
        cx: &Ctx,
        model: &Model,
        hosts: &Hosts,
        top: &Table,
    ) -> Result<Vec<RequestDef>, SpecError> {
        let mut requests: Vec<RequestDef> = Vec::new();
        for (i, v) in cx.array(top, "request", "simulation")?.iter().enumerate() {
            let rat = format!("simulation.request[{i}]");
            let r = RequestDef::read(cx, model, hosts, cx.table(v, &rat)?, &rat, &requests)?;
            requests.push(r);
        }
        if requests.is_empty() {
            requests.push(default_request(model, hosts));
        }
        Ok(requests)
    }

    /// One request type, its name not among `before`'s.
    fn read(
        cx: &Ctx,
        model: &Model,
        hosts: &Hosts,
        t: &Table,
        rat: &str,
        before: &[RequestDef],
    ) -> Result<RequestDef, SpecError> {
        cx.keys(t, &["name", "path"], rat)?;
        let name = match t.get("name") {
            Some(Value::String(s)) => s.clone(),
            _ => return Err(cx.err(join(rat, "name"), "every request type needs a name")),
        };
        if before.iter().any(|x| x.name == name) {
            return Err(cx.err(
                join(rat, "name"),
                format!("duplicate request type `{name}`"),
            ));
        }
        let path = cx.array(t, "path", rat)?;
        if path.is_empty() {
            return Err(cx.err(join(rat, "path"), "a request type needs at least one visit"));
        }
        let mut visits = Vec::new();
        for (j, pv) in path.iter().enumerate() {
            let vat = format!("{rat}.path[{j}]");
            visits.push(Visit::read(cx, model, hosts, cx.table(pv, &vat)?, &vat)?);
        }
        Ok(RequestDef {
            name,
            visits: with_release(model, visits),
        })
    }
}

impl ClientDef {
    /// `[[simulation.client]]`, or the two default clients of 8 threads.
    fn read_all(
        cx: &Ctx,
        top: &Table,
        requests: &[RequestDef],
    ) -> Result<Vec<ClientDef>, SpecError> {
        let mut clients = Vec::new();
        for (i, v) in cx.array(top, "client", "simulation")?.iter().enumerate() {
            let cat = format!("simulation.client[{i}]");
            clients.push(client(cx, cx.table(v, &cat)?, &cat, requests)?);
        }
        if clients.is_empty() {
            for name in ["C1", "C2"] {
                clients.push(ClientDef {
                    name: name.into(),
                    kind: Loop::Closed {
                        threads: DEFAULT_CLIENT_THREADS,
                    },
                    weight: 1.0,
                    priority: 0,
                    deadline: None,
                    phases: vec![Phase {
                        at: 0.0,
                        mix: vec![(0, 1.0)],
                        think: 0.0,
                        rate: 0.0,
                    }],
                });
            }
        }
        Ok(clients)
    }
}

fn push(resources: &mut Vec<ResourceDef>, name: String, units: u32) -> u32 {
    resources.push(ResourceDef { name, units });
    (resources.len() - 1) as u32
}

fn quote_key(name: &str) -> String {
    if name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        name.to_string()
    } else {
        format!("\"{name}\"")
    }
}

/// A scheduler name that no stage queue knows (see [`parse_queue`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownScheduler {
    /// The name as written.
    pub name: String,
}

impl fmt::Display for UnknownScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let presets: Vec<&str> = fairlane_core::PRESETS
            .iter()
            .copied()
            .filter(|p| *p != "fifo")
            .collect();
        write!(
            f,
            "unknown scheduler `{}`; known: fifo, priority, {}",
            self.name,
            presets.join(", ")
        )
    }
}

impl std::error::Error for UnknownScheduler {}

/// A stage queue from a scheduler name: `fifo`, `priority`, or a fairlane-core preset.
pub fn parse_queue(name: &str) -> Result<Queue, UnknownScheduler> {
    match name {
        "fifo" => Ok(Queue::Fifo),
        "priority" => Ok(Queue::Priority),
        _ => Config::preset(name)
            .map(Queue::Core)
            .map_err(|_| UnknownScheduler {
                name: name.to_string(),
            }),
    }
}

/// Whether a core scheduler is told costs (the oracle estimator).
pub fn knows_costs(c: &Config) -> bool {
    c.estimator == EstimatorKind::Oracle
}

/// A cycle of `blocks_on` (see [`check_blocking_cycles`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockingCycle {
    /// The stages of the cycle in order, the first repeated at the end.
    pub stages: Vec<String>,
}

impl fmt::Display for BlockingCycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a cycle of blocks_on would deadlock: {}",
            self.stages.join(" → ")
        )
    }
}

impl std::error::Error for BlockingCycle {}

/// Refuse a cycle of `blocks_on`: every thread in it would wait for another in it.
pub fn check_blocking_cycles(model: &Model) -> Result<(), BlockingCycle> {
    let n = model.stages.len();
    let edges: Vec<Vec<usize>> = model
        .stages
        .iter()
        .map(|s| {
            s.blocks_on
                .iter()
                .filter_map(|b| model.index_of(b))
                .collect()
        })
        .collect();
    // 0 = unseen, 1 = on the stack, 2 = done.
    let mut state = vec![0u8; n];
    let mut stack: Vec<usize> = Vec::new();
    fn dfs(
        v: usize,
        edges: &[Vec<usize>],
        state: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        state[v] = 1;
        stack.push(v);
        for &w in &edges[v] {
            if state[w] == 1 {
                let from = stack.iter().position(|&x| x == w).unwrap_or(0);
                return Some(stack[from..].to_vec());
            }
            if state[w] == 0 {
                if let Some(c) = dfs(w, edges, state, stack) {
                    return Some(c);
                }
            }
        }
        stack.pop();
        state[v] = 2;
        None
    }
    for v in 0..n {
        if state[v] == 0 {
            if let Some(cycle) = dfs(v, &edges, &mut state, &mut stack) {
                let mut stages: Vec<String> = cycle
                    .iter()
                    .map(|&i| model.stages[i].name.clone())
                    .collect();
                stages.extend(stages.first().cloned());
                return Err(BlockingCycle { stages });
            }
        }
    }
    Ok(())
}

impl Visit {
    /// One visit of a path: its stage and, on the stage's host, its resource uses in
    /// order — CPU, disk, network, a lock, then an unknown use.
    fn read(
        cx: &Ctx,
        model: &Model,
        hosts: &Hosts,
        t: &Table,
        at: &str,
    ) -> Result<Visit, SpecError> {
        cx.keys(t, VISIT_KEYS, at)?;
        let name = match t.get("stage") {
            Some(Value::String(s)) => s,
            _ => return Err(cx.err(join(at, "stage"), "every visit names its stage")),
        };
        let si = model.index_of(name).ok_or_else(|| {
            cx.err(
                join(at, "stage"),
                format!(
                    "the path goes through `{name}`, which is not a stage of the model; stages: {}",
                    model
                        .stages
                        .iter()
                        .map(|s| format!("`{}`", s.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        let stage = &model.stages[si];
        let h = &hosts[&stage.host];
        let mut steps = known_steps(cx, h, t, at)?;
        steps.extend(lock_step(cx, stage, h, t, at)?);
        if let Some(u) = t.get("unknown") {
            steps.push(unknown_step(cx, stage, h, u, &join(at, "unknown"))?);
        }
        let declared = steps.iter().map(|s| s.seconds).sum();
        Ok(Visit {
            stage: si as u32,
            steps,
            declared,
            release_after: 0,
        })
    }
}

/// A visit's known uses of the CPU, the disk and the network.
fn known_steps(cx: &Ctx, h: &Host, t: &Table, at: &str) -> Result<Vec<Step>, SpecError> {
    let known = |resource, seconds| Step {
        resource,
        seconds,
        unknown: None,
    };
    let mut steps = Vec::new();
    let cpu = cx.nonneg(t, "cpu_cycles", at)? / (h.ghz * 1e9) + cx.nonneg(t, "cpu_us", at)? * 1e-6;
    if cpu > 0.0 {
        steps.push(known(h.cpu, cpu));
    }
    // `io_us` is disk time that does not scale with bytes: a seek or a sync (fsync).
    let io = cx.nonneg(t, "io_bytes", at)? / h.disk_rate + cx.nonneg(t, "io_us", at)? * 1e-6;
    if io > 0.0 {
        steps.push(known(h.disk, io));
    }
    let net = cx.nonneg(t, "net_bytes", at)?;
    if net > 0.0 {
        steps.push(known(h.net, net / h.net_rate));
    }
    Ok(steps)
}

/// A visit's hold of one of its host's locks (`lock` for `lock_us`).
fn lock_step(
    cx: &Ctx,
    stage: &fairlane_tam::Stage,
    h: &Host,
    t: &Table,
    at: &str,
) -> Result<Option<Step>, SpecError> {
    let lock_us = cx.nonneg(t, "lock_us", at)?;
    let Some(v) = t.get("lock") else {
        if lock_us > 0.0 {
            return Err(cx.err(join(at, "lock"), "lock_us is given without the lock's name"));
        }
        return Ok(None);
    };
    let lname = v
        .as_str()
        .ok_or_else(|| cx.err(join(at, "lock"), "expected a lock name"))?;
    let idx = *h.locks.get(lname).ok_or_else(|| {
        cx.err(
            join(at, "lock"),
            format!(
                "host {} has no lock `{lname}`; declare it in [simulation.host.{}] locks",
                stage.host, stage.host
            ),
        )
    })?;
    if lock_us <= 0.0 {
        return Err(cx.err(join(at, "lock_us"), "a lock visit needs its hold time > 0"));
    }
    Ok(Some(Step {
        resource: idx,
        seconds: lock_us * 1e-6,
        unknown: None,
    }))
}

/// A visit's `unknown` use: `hit` with probability `hit_ratio`, else `miss` (cycles or
/// bytes), of a resource the stage marks unknown.
fn unknown_step(
    cx: &Ctx,
    stage: &fairlane_tam::Stage,
    h: &Host,
    u: &Value,
    uat: &str,
) -> Result<Step, SpecError> {
    let u = cx.table(u, uat)?;
    cx.keys(u, UNKNOWN_KEYS, uat)?;
    let res = match u.get("resource").and_then(Value::as_str) {
        Some(r) => Resource::from_key(r)
            .filter(|r| *r != Resource::Lock)
            .ok_or_else(|| cx.err(join(uat, "resource"), "expected cpu, io or network"))?,
        None => {
            return Err(cx.err(
                join(uat, "resource"),
                "name the resource: cpu, io or network",
            ))
        }
    };
    if stage.resources.get(res) != Usage::Unknown {
        return Err(cx.err(
            join(uat, "resource"),
            format!(
                "stage `{}` does not mark {} as \"unknown\" in its resources",
                stage.name,
                res.key()
            ),
        ));
    }
    let ratio = cx.num(u, "hit_ratio", uat, 0.0)?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(cx.err(join(uat, "hit_ratio"), "must be in [0, 1]"));
    }
    let (resource, rate) = match res {
        Resource::Cpu => (h.cpu, h.ghz * 1e9),
        Resource::Io => (h.disk, h.disk_rate),
        _ => (h.net, h.net_rate),
    };
    let hit = cx.nonneg(u, "hit", uat)? / rate;
    let miss = cx.nonneg(u, "miss", uat)? / rate;
    Ok(Step {
        resource,
        seconds: hit,
        unknown: Some((ratio, hit, miss)),
    })
}

/// Set each visit's release point: a stage that blocks on a stage later in the path holds
/// its thread until that visit is released (its own blocking included).
fn with_release(model: &Model, mut visits: Vec<Visit>) -> Vec<Visit> {
    for i in (0..visits.len()).rev() {
        let s = &model.stages[visits[i].stage as usize];
        let mut release = i as u32;
        for b in &s.blocks_on {
            let Some(bi) = model.index_of(b) else {
                continue;
            };
            if let Some(k) = (i + 1..visits.len()).find(|&k| visits[k].stage as usize == bi) {
                release = release.max(visits[k].release_after);
            }
        }
        visits[i].release_after = release;
    }
    visits
}

/// The default request: the stages reachable downstream from the first stage nobody
/// issues to, in depth-first order, each visited once; a stage's extensive resources cost
/// 100 µs of CPU, 64 KB of I/O, 16 KB of network and 50 µs of its lock, and an unknown one
/// misses half the time.
fn default_request(model: &Model, hosts: &Hosts) -> RequestDef {
    let n = model.stages.len();
    let fed: Vec<bool> = (0..n)
        .map(|i| {
            model
                .stages
                .iter()
                .any(|s| s.downstream.contains(&model.stages[i].name))
        })
        .collect();
    let entry = (0..n).find(|&i| !fed[i]).unwrap_or(0);
    let mut order = Vec::new();
    let mut seen = vec![false; n];
    fn walk(m: &Model, i: usize, seen: &mut [bool], order: &mut Vec<usize>) {
        if seen[i] {
            return;
        }
        seen[i] = true;
        order.push(i);
        for d in &m.stages[i].downstream {
            if let Some(j) = m.index_of(d) {
                walk(m, j, seen, order);
            }
        }
    }
    walk(model, entry, &mut seen, &mut order);
    let visits = order
        .into_iter()
        .map(|i| {
            let s = &model.stages[i];
            let h = &hosts[&s.host];
            let mut steps = Vec::new();
            let mut add = |res: Resource, resource: u32, seconds: f64| match s.resources.get(res) {
                Usage::False => {}
                Usage::True => steps.push(Step {
                    resource,
                    seconds,
                    unknown: None,
                }),
                Usage::Unknown => steps.push(Step {
                    resource,
                    seconds: 0.0,
                    unknown: Some((0.5, 0.0, seconds)),
                }),
            };
            add(Resource::Cpu, h.cpu, 100e-6);
            add(Resource::Io, h.disk, 65536.0 / h.disk_rate);
            add(Resource::Network, h.net, 16384.0 / h.net_rate);
            if let Some(&l) = h.locks.get("lock") {
                add(Resource::Lock, l, 50e-6);
            }
            let declared = steps.iter().map(|s| s.seconds).sum();
            Visit {
                stage: i as u32,
                steps,
                declared,
                release_after: 0,
            }
        })
        .collect();
    RequestDef {
        name: "default".into(),
        visits: with_release(model, visits),
    }
}

fn mix(
    cx: &Ctx,
    v: &Value,
    at: &str,
    requests: &[RequestDef],
) -> Result<Vec<(u32, f64)>, SpecError> {
    let t = cx.table(v, at)?;
    let mut out = Vec::new();
    let mut total = 0.0;
    for (k, w) in t {
        let ri = requests.iter().position(|r| &r.name == k).ok_or_else(|| {
            cx.err(
                join(at, k),
                format!(
                    "no request type `{k}`; known: {}",
                    requests
                        .iter()
                        .map(|r| r.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
        let w = match w {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => *f,
            _ => return Err(cx.err(join(at, k), "expected a share (a number)")),
        };
        if !(w >= 0.0 && w.is_finite()) {
            return Err(cx.err(join(at, k), "a share must be ≥ 0"));
        }
        total += w;
        out.push((ri as u32, total));
    }
    if total <= 0.0 {
        return Err(cx.err(at, "give at least one request type a positive share"));
    }
    for x in &mut out {
        x.1 /= total;
    }
    Ok(out)
}

fn client(cx: &Ctx, t: &Table, at: &str, requests: &[RequestDef]) -> Result<ClientDef, SpecError> {
    cx.keys(t, CLIENT_KEYS, at)?;
    let name = match t.get("name") {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(cx.err(join(at, "name"), "every client needs a name")),
    };
    let kind = match (t.contains_key("threads"), t.contains_key("rate")) {
        (true, true) => {
            return Err(cx.err(
                join(at, "rate"),
                "a client is closed-loop (threads) or open (rate), not both",
            ))
        }
        (false, true) => Loop::Open,
        _ => Loop::Closed {
            threads: cx.count(t, "threads", at, 1)?,
        },
    };
    let default_mix = vec![(0u32, 1.0)];
    let first_mix = match t.get("requests") {
        Some(v) => mix(cx, v, &join(at, "requests"), requests)?,
        None => default_mix,
    };
    let rate = if kind == Loop::Open {
        cx.pos(t, "rate", at, 1.0)?
    } else {
        0.0
    };
    let mut phases = vec![Phase {
        at: 0.0,
        mix: first_mix,
        think: cx.nonneg(t, "think", at)?,
        rate,
    }];
    for (i, v) in cx.array(t, "phases", at)?.iter().enumerate() {
        let pat = format!("{at}.phases[{i}]");
        let p = cx.table(v, &pat)?;
        cx.keys(p, PHASE_KEYS, &pat)?;
        let prev = phases.last().cloned().expect("the first phase exists");
        let start = cx.pos(p, "at", &pat, f64::NAN)?;
        if start <= prev.at {
            return Err(cx.err(join(&pat, "at"), "phases start in increasing order after 0"));
        }
        phases.push(Phase {
            at: start,
            mix: match p.get("requests") {
                Some(v) => mix(cx, v, &join(&pat, "requests"), requests)?,
                None => prev.mix,
            },
            think: if p.contains_key("think") {
                cx.nonneg(p, "think", &pat)?
            } else {
                prev.think
            },
            rate: if p.contains_key("rate") {
                if kind != Loop::Open {
                    return Err(cx.err(join(&pat, "rate"), "only an open client has a rate"));
                }
                cx.pos(p, "rate", &pat, 1.0)?
            } else {
                prev.rate
            },
        });
    }
    let priority = match t.get("priority") {
        None => 0,
        Some(Value::Integer(i)) => *i,
        Some(_) => return Err(cx.err(join(at, "priority"), "expected an integer (lower first)")),
    };
    let deadline = if t.contains_key("deadline_ms") {
        Some(cx.pos(t, "deadline_ms", at, 1.0)? / 1e3)
    } else {
        None
    };
    Ok(ClientDef {
        name,
        kind,
        weight: cx.pos(t, "weight", at, 1.0)?,
        priority,
        deadline,
        phases,
    })
}
