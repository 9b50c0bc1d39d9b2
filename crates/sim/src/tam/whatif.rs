//! What-if, quantified: apply `fairlane tam what-if`'s architectural changes
//! ([`fairlane_tam::Change`]) to a TAM simulation, then run the original and the changed
//! architecture on the same workload and seed (docs/tam.md, "What-if, simulated").
//!
//! The `[simulation]` section names stages, so it follows the changes:
//! - `combine A + B as N`: visits to A or B go to N, which takes the settings
//!   (`[simulation.stage.X]`) of the first listed part that has any;
//! - `split S`: a visit to S becomes one visit per part, each with the costs of its
//!   resource (`cpu_*` to `S (CPU)`, `io_*` to `S (I/O)`, `net_bytes` to `S (NET)`, `lock*` to
//!   `S (LOCK)`); the first part is always visited, the others only when the visit has their
//!   cost (a cached Get that never reads skips the I/O part); every part takes S's
//!   settings;
//! - `set S.scheduling = on_demand` drops S's `threads`, and leaving `pluggable` drops its
//!   `scheduler`; an on-demand stage that becomes bounded gets one thread per parallel unit
//!   of the resources it uses (cores, disk parallelism, 1 for a link or lock), unless the
//!   section gives it threads: more threads than units would only queue at the resource,
//!   in arrival order, where the new scheduler has no say;
//! - an `unknown` cost on a stage whose usage is no longer unknown (after a split or a
//!   `set`) becomes a known cost when its hit ratio is 0 (the miss) or 1 (the hit); other
//!   ratios are refused, since the changed stage's scheduler would have to know the draw.
//!
//! ```
//! use fairlane_sim::tam::{whatif, TamSpecFile};
//! let file = TamSpecFile::parse(r#"
//!     [model]
//!     name = "one handler"
//!     [[stage]]
//!     name = "Handle"
//!     scheduling = "pluggable"
//!     resources = { cpu = true, io = true }
//!     [simulation]
//!     duration = 2.0
//!     [simulation.stage.Handle]
//!     threads = 1
//!     [[simulation.request]]
//!     name = "r"
//!     path = [{ stage = "Handle", cpu_us = 100, io_bytes = 100_000 }]
//!     [[simulation.client]]
//!     name = "C1"
//!     threads = 4
//! "#, "one.toml").unwrap();
//! let changes = vec!["split Handle".parse().unwrap()];
//! let c = whatif::compare(&file, &changes).unwrap();
//! // One thread did 0.1 ms of CPU then 1 ms of disk; split, the two parts overlap and the
//! // disk alone sets the pace.
//! assert!((c.original[0].clients[0].throughput - 1.0 / 0.0011).abs() < 20.0);
//! assert!((c.changed[0].clients[0].throughput - 1000.0).abs() < 20.0);
//! ```

use std::fmt;
use std::path::{Path, PathBuf};

use fairlane_tam::whatif::ChangeError;
use fairlane_tam::{Change, Model, Resource, Scheduling, Usage};
use serde_json::{json, Value as Json};
use toml::{Table, Value};

use super::{run_all, TamRun, TamSpecFile};
use crate::doc::Doc;
use crate::error::{SimError, SpecError};

/// Why a what-if could not be simulated.
#[derive(Debug)]
#[non_exhaustive]
pub enum WhatIfError {
    /// The file or its changed simulation section is invalid.
    Spec(SpecError),
    /// A change does not apply to the model.
    Change(ChangeError),
    /// A run failed.
    Sim(SimError),
}

impl fmt::Display for WhatIfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhatIfError::Spec(e) => write!(f, "{e}"),
            WhatIfError::Change(e) => write!(f, "{e}"),
            WhatIfError::Sim(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for WhatIfError {}

/// The original and the changed architecture, run on the same workload and seed.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The changes, as written (`split RPC Handle`).
    pub changes: Vec<String>,
    /// The seed both ran with.
    pub seed: u64,
    /// The original's runs, one per scheduler of `schedulers`.
    pub original: Vec<TamRun>,
    /// The changed architecture's runs, in the same order.
    pub changed: Vec<TamRun>,
}

/// Read a TAM simulation file (a model file, or a spec naming one in
/// `[server] architecture`).
pub fn load(path: &Path) -> Result<TamSpecFile, SpecError> {
    TamSpecFile::load(path)
}

/// The simulation of the changed architecture: `changes` applied in order to the model,
/// and the `[simulation]` section carried over as the module documentation says.
pub fn changed(file: &TamSpecFile, changes: &[Change]) -> Result<TamSpecFile, WhatIfError> {
    let after = fairlane_tam::whatif::apply(&file.model, changes).map_err(WhatIfError::Change)?;
    let mut sim = file
        .doc
        .get("simulation")
        .cloned()
        .unwrap_or_else(|| Value::Table(Table::new()));
    let mut model = file.model.clone();
    for change in changes {
        carry(&model, &mut sim, change);
        change.apply_to(&mut model).map_err(|e| {
            WhatIfError::Change(ChangeError::new(e.kind, format!("{change}: {}", e.message)))
        })?;
    }
    resolve_unknown(&after, &mut sim, &file.doc.file)?;
    let mut top = Table::new();
    top.insert("simulation".into(), sim);
    let doc = Doc {
        file: file.doc.file.clone(),
        dir: PathBuf::from("."),
        value: Value::Table(top),
    };
    let mut out = TamSpecFile::with_model(doc, after).map_err(|mut e| {
        e.message = format!("after the changes: {}", e.message);
        WhatIfError::Spec(e)
    })?;
    out.spec.max_events = file.spec.max_events;
    Ok(out)
}

/// Run the original and the changed architecture with the same workload and seed.
pub fn compare(file: &TamSpecFile, changes: &[Change]) -> Result<Comparison, WhatIfError> {
    let after = changed(file, changes)?;
    let original = run_all(&file.spec, 1, &mut |_| {}).map_err(WhatIfError::Sim)?;
    let changed = run_all(&after.spec, 1, &mut |_| {}).map_err(WhatIfError::Sim)?;
    Ok(Comparison {
        changes: changes.iter().map(ToString::to_string).collect(),
        seed: file.spec.seed,
        original,
        changed,
    })
}

/// The cost keys of a visit that belong to each resource.
fn keys_of(r: Resource) -> &'static [&'static str] {
    match r {
        Resource::Cpu => &["cpu_cycles", "cpu_us"],
        Resource::Io => &["io_bytes", "io_us"],
        Resource::Network => &["net_bytes"],
        Resource::Lock => &["lock", "lock_us"],
    }
}

fn unknown_resource(visit: &Table) -> Option<Resource> {
    visit
        .get("unknown")?
        .get("resource")?
        .as_str()
        .and_then(Resource::from_key)
}

/// Every visit table of every request path.
fn visits_mut(sim: &mut Value) -> Vec<&mut Table> {
    let Some(reqs) = sim.get_mut("request").and_then(Value::as_array_mut) else {
        return Vec::new();
    };
    reqs.iter_mut()
        .filter_map(|r| r.get_mut("path").and_then(Value::as_array_mut))
        .flat_map(|p| p.iter_mut().filter_map(Value::as_table_mut))
        .collect()
}

fn stage_of(visit: &Table) -> Option<&str> {
    visit.get("stage").and_then(Value::as_str)
}

/// Carry the simulation section over one change, given the model before it.
fn carry(before: &Model, sim: &mut Value, change: &Change) {
    match change {
        Change::Combine { stages, name } => carry_combine(sim, stages, name),
        Change::Split { stage } => {
            if let Some(s) = before.stage(stage) {
                carry_split(sim, s);
            }
        }
        Change::SetScheduling { stage, scheduling } => {
            carry_scheduling(before, sim, stage, *scheduling)
        }
        Change::SetResource { .. }
        | Change::SetOrdering { .. }
        | Change::SetHost { .. }
        | Change::MakeAsync { .. } => {}
    }
}

/// `combine A + B as N`: N takes the settings of the first part that has any, and the
/// parts' visits.
fn carry_combine(sim: &mut Value, stages: &[String], name: &str) {
    if let Some(st) = sim.get_mut("stage").and_then(Value::as_table_mut) {
        let first = stages.iter().find_map(|s| st.get(s).cloned());
        for s in stages {
            st.remove(s);
        }
        if let Some(t) = first {
            st.insert(name.to_string(), t);
        }
    }
    for v in visits_mut(sim) {
        if stage_of(v).is_some_and(|s| stages.iter().any(|x| x == s)) {
            v.insert("stage".into(), Value::String(name.to_string()));
        }
    }
}

/// `split S`: every part takes S's settings; a visit to S becomes one visit per part with
/// the costs of its resource (see the module documentation).
fn carry_split(sim: &mut Value, s: &fairlane_tam::Stage) {
    let used = s.resources.used();
    let part = |r: Resource| format!("{} ({})", s.name, r.label());
    if let Some(st) = sim.get_mut("stage").and_then(Value::as_table_mut) {
        if let Some(t) = st.remove(&s.name) {
            for &r in &used {
                st.insert(part(r), t.clone());
            }
        }
    }
    let Some(reqs) = sim.get_mut("request").and_then(Value::as_array_mut) else {
        return;
    };
    for path in reqs
        .iter_mut()
        .filter_map(|r| r.get_mut("path").and_then(Value::as_array_mut))
    {
        let mut out = Vec::new();
        for v in path.drain(..) {
            match v
                .as_table()
                .filter(|t| stage_of(t) == Some(s.name.as_str()))
            {
                Some(t) => out.extend(split_visit(t, &used, &part)),
                None => out.push(v),
            }
        }
        *path = out;
    }
}

/// One visit to a split stage as visits to its parts: each part gets the keys of its
/// resource; costs of a resource no part has stay on the first, which is always visited;
/// another part only when it costs something.
fn split_visit(t: &Table, used: &[Resource], part: &dyn Fn(Resource) -> String) -> Vec<Value> {
    let unknown = unknown_resource(t);
    let mut out = Vec::new();
    for (i, &r) in used.iter().enumerate() {
        let mut p = Table::new();
        p.insert("stage".into(), Value::String(part(r)));
        for (k, x) in t {
            let mine = keys_of(r).contains(&k.as_str())
                || (k == "unknown" && unknown == Some(r))
                // Costs of a resource no part has stay on the first.
                || (i == 0
                    && k != "stage"
                    && !used.iter().any(|&u| {
                        keys_of(u).contains(&k.as_str()) || (k == "unknown" && unknown == Some(u))
                    }));
            if mine {
                p.insert(k.clone(), x.clone());
            }
        }
        if i == 0 || p.iter().any(|(k, x)| costs(k, x)) {
            out.push(Value::Table(p));
        }
    }
    out
}

/// `set S.scheduling = …`: an on-demand stage made bounded gets one thread per parallel
/// unit of its resources (unless it has threads); on demand drops `threads`, leaving
/// pluggable drops `scheduler`.
fn carry_scheduling(before: &Model, sim: &mut Value, stage: &str, scheduling: Scheduling) {
    let Some(top) = sim.as_table_mut() else {
        return;
    };
    let was = before.stage(stage);
    if was.is_some_and(|s| s.scheduling == Scheduling::OnDemand)
        && scheduling != Scheduling::OnDemand
    {
        let units = was.map_or(1, |s| units_of(top, s));
        let st = top
            .entry("stage")
            .or_insert_with(|| Value::Table(Table::new()));
        if let Some(st) = st.as_table_mut() {
            let t = st
                .entry(stage.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            if let Some(t) = t.as_table_mut() {
                t.entry("threads").or_insert(Value::Integer(units));
            }
        }
    }
    if let Some(t) = top
        .get_mut("stage")
        .and_then(|st| st.get_mut(stage))
        .and_then(Value::as_table_mut)
    {
        if scheduling == Scheduling::OnDemand {
            t.remove("threads");
        }
        if scheduling != Scheduling::Pluggable {
            t.remove("scheduler");
        }
    }
}

/// Whether a visit key costs anything (a part of a split stage is visited only then; an
/// `unknown` cost counts at what it can draw).
fn costs(key: &str, v: &Value) -> bool {
    let n = |v: Option<&Value>| match v {
        Some(Value::Integer(i)) => *i as f64,
        Some(Value::Float(f)) => *f,
        _ => 0.0,
    };
    match key {
        "stage" => false,
        "lock" => true,
        "unknown" => {
            let ratio = n(v.get("hit_ratio"));
            (ratio > 0.0 && n(v.get("hit")) > 0.0) || (ratio < 1.0 && n(v.get("miss")) > 0.0)
        }
        _ => n(Some(v)) > 0.0,
    }
}

/// The most parallel units among the resources `stage` uses on its host.
fn units_of(top: &Table, stage: &fairlane_tam::Stage) -> i64 {
    let host = top
        .get("host")
        .and_then(|h| h.get(stage.host.to_string()))
        .and_then(Value::as_table);
    let get = |k: &str| {
        host.and_then(|h| h.get(k))
            .and_then(Value::as_integer)
            .unwrap_or(1)
    };
    let mut units = 1;
    for r in stage.resources.used() {
        units = units.max(match r {
            Resource::Cpu => get("cpu_cores"),
            Resource::Io => get("disk_parallelism"),
            _ => 1,
        });
    }
    units
}

/// Turn `unknown` costs on stages that no longer mark the resource unknown into known
/// costs (hit ratio 0 or 1 only).
fn resolve_unknown(after: &Model, sim: &mut Value, file: &str) -> Result<(), WhatIfError> {
    for v in visits_mut(sim) {
        let (Some(stage), Some(r)) = (stage_of(v).map(str::to_string), unknown_resource(v)) else {
            continue;
        };
        if after
            .stage(&stage)
            .is_none_or(|s| s.resources.get(r) == Usage::Unknown)
        {
            continue;
        }
        let u = v.get("unknown").cloned().unwrap_or(Value::Boolean(false));
        let num = |k: &str| match u.get(k) {
            Some(Value::Integer(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            _ => 0.0,
        };
        let ratio = num("hit_ratio");
        let cost = if ratio == 1.0 {
            num("hit")
        } else if ratio == 0.0 {
            num("miss")
        } else {
            return Err(WhatIfError::Spec(SpecError {
                file: file.to_string(),
                field: "simulation.request.path.unknown".into(),
                message: format!(
                    "after the changes `{stage}` uses {} knowingly, but a visit draws its cost \
                     with hit ratio {ratio}; give hits and misses their own request types",
                    r.key()
                ),
            }));
        };
        let key = match r {
            Resource::Cpu => "cpu_cycles",
            Resource::Io => "io_bytes",
            _ => "net_bytes",
        };
        let old = match v.get(key) {
            Some(Value::Integer(i)) => *i as f64,
            Some(Value::Float(f)) => *f,
            _ => 0.0,
        };
        v.remove("unknown");
        v.insert(key.into(), Value::Float(old + cost));
    }
    Ok(())
}

fn pct(before: f64, after: f64) -> f64 {
    if before == 0.0 {
        f64::NAN
    } else {
        (after - before) / before * 100.0
    }
}

fn num(x: f64) -> Json {
    if x.is_finite() {
        json!(x)
    } else {
        Json::Null
    }
}

impl Comparison {
    /// Side by side, per run and client: throughput, p50 and p99, original against
    /// changed, and the difference.
    pub fn to_text(&self) -> String {
        let mut out = format!(
            "simulated on the same workload and seed ({}): {}\n",
            self.seed,
            self.changes.join("; ")
        );
        for (o, c) in self.original.iter().zip(&self.changed) {
            out += &format!("== pluggable stages: {}\n", o.scheduler);
            out += &format!(
                "{:<12} {:>10} {:>10} {:>8}  {:>9} {:>9} {:>8}  {:>9} {:>9} {:>8}\n",
                "client",
                "req/s",
                "changed",
                "Δ%",
                "p50 ms",
                "changed",
                "Δ%",
                "p99 ms",
                "changed",
                "Δ%"
            );
            for (a, b) in o.clients.iter().zip(&c.clients) {
                out += &format!(
                    "{:<12} {:>10.1} {:>10.1} {:>+8.1}  {:>9.3} {:>9.3} {:>+8.1}  {:>9.3} {:>9.3} {:>+8.1}\n",
                    a.name,
                    a.throughput,
                    b.throughput,
                    pct(a.throughput, b.throughput),
                    a.latency_p50 * 1e3,
                    b.latency_p50 * 1e3,
                    pct(a.latency_p50, b.latency_p50),
                    a.latency_p99 * 1e3,
                    b.latency_p99 * 1e3,
                    pct(a.latency_p99, b.latency_p99),
                );
            }
        }
        out
    }

    /// `{"changes", "seed", "runs": [{"scheduler", "clients": [{"name", "original",
    /// "changed", "difference"}]}]}`; each side has `throughput` (req/s), `p50_ms` and
    /// `p99_ms`, the difference is changed minus original.
    pub fn to_json(&self) -> Json {
        let side = |t: f64, p50: f64, p99: f64| json!({"throughput": num(t), "p50_ms": num(p50 * 1e3), "p99_ms": num(p99 * 1e3)});
        let runs: Vec<Json> = self
            .original
            .iter()
            .zip(&self.changed)
            .map(|(o, c)| {
                let clients: Vec<Json> = o
                    .clients
                    .iter()
                    .zip(&c.clients)
                    .map(|(a, b)| {
                        json!({
                            "name": a.name,
                            "original": side(a.throughput, a.latency_p50, a.latency_p99),
                            "changed": side(b.throughput, b.latency_p50, b.latency_p99),
                            "difference": side(
                                b.throughput - a.throughput,
                                b.latency_p50 - a.latency_p50,
                                b.latency_p99 - a.latency_p99
                            ),
                        })
                    })
                    .collect();
                json!({"scheduler": o.scheduler, "clients": clients})
            })
            .collect();
        json!({"changes": self.changes, "seed": self.seed, "runs": runs})
    }
}
