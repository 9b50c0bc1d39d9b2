//! Checking a worker-pool or black-box spec: each section checks itself and names its
//! fields relative to itself ([`FieldError`]); [`Spec::resolve`] puts the checked sections
//! together into a [`Scenario`], naming the file.

use std::collections::BTreeSet;
use std::path::Path;

use fairlane_core::depth::{DepthConfig, DepthController};
use fairlane_core::levels::LevelConfig;
use fairlane_core::LevelId;

use super::scenario::Scenario;
use super::spec::{
    AdaptiveDepthSpec, BlackBoxDef, Depth, MetricsSpec, PriorityLevelSpec, Routing, ServerSpec,
    Spec, TenantSpec,
};
use super::workload::{self, ClassTable, TenantDef, TraceCache};
use crate::error::{non_negative, positive, FieldError, SpecError};
use crate::sched::{self, Levels, SchedulerChoice};

pub use crate::doc::MAX_GROUP;

/// The most issue slots, components or workers of a server.
const MAX_SLOTS: i64 = 4096;

/// A checked `[server]`.
struct Server {
    /// Worker threads, or the black box's initial depth D.
    workers: usize,
    /// Units per second of one worker or component.
    rate: f64,
    /// Units per second of the whole server.
    capacity: f64,
    blackbox: Option<BlackBoxDef>,
}

impl Spec {
    /// Check every value and expand the tenants. `label` names the sweep point; `dir`
    /// anchors trace paths; errors name `file`.
    pub fn resolve(&self, file: &str, dir: &Path, label: String) -> Result<Scenario, SpecError> {
        self.checked(dir, label).map_err(|e| e.in_file(file))
    }

    fn checked(&self, dir: &Path, label: String) -> Result<Scenario, FieldError> {
        self.check_times()?;
        let server = self.server.resolve().map_err(|e| e.under("server"))?;
        self.metrics.check().map_err(|e| e.under("metrics"))?;
        let schedulers = self.schedulers(server.capacity)?;
        let (tenants, classes) = self.tenants(dir)?;
        self.check_quanta(&schedulers, &tenants)?;
        let levels = self.levels(&server)?;
        let m = &self.metrics;
        let track = m.tracked(&tenants, &self.tenant)?;
        Ok(Scenario {
            name: self.name.clone(),
            label,
            seed: self.seed,
            duration: self.duration,
            warmup: self.warmup,
            workers: server.workers,
            rate: server.rate,
            // The black box's requests make no visible progress: no refresh charging.
            refresh: if server.blackbox.is_some() {
                0.0
            } else {
                self.server.refresh
            },
            blackbox: server.blackbox,
            interval: m.interval,
            occupancy_interval: m.occupancy_interval,
            max_points: m.max_points,
            track,
            tenants,
            classes,
            schedulers,
            levels,
            max_events: crate::events::DEFAULT_MAX_EVENTS,
        })
    }

    /// `[[priority_level]]` and each tenant's `level`, checked by the core's own check of
    /// the levels against ServerCL (the workers, or the black box's smallest depth).
    fn levels(&self, server: &Server) -> Result<Option<Levels>, FieldError> {
        if self.priority_level.is_empty() {
            if let Some(i) = self.tenant.iter().position(|t| t.level.is_some()) {
                return Err(FieldError::new(
                    format!("tenant[{i}].level"),
                    "names a priority level, but the spec has no [[priority_level]]",
                ));
            }
            return Ok(None);
        }
        let levels = self
            .priority_level
            .iter()
            .enumerate()
            .map(|(i, l)| {
                l.resolve()
                    .map_err(|e| e.under(&format!("priority_level[{i}]")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let (server_cl, field) = match &server.blackbox {
            Some(bb) => match &bb.depth {
                Depth::Fixed(d) => (*d, "server.depth"),
                Depth::Adaptive(c) => (c.min, "server.depth.min"),
            },
            None => (server.workers, "server.workers"),
        };
        let config = fairlane_core::Config::preset("fifo")
            .map_err(|e| FieldError::new("priority_level", e.to_string()))?;
        let mut levels = Levels {
            levels,
            of_tenant: Vec::new(),
        };
        levels
            .config(&config, server_cl)
            .check()
            .map_err(|e| level_error(e, field))?;
        levels.of_tenant = self.tenant_levels(&levels.levels)?;
        Ok(Some(levels))
    }

    /// Each tenant's level, by the name its group gives (none: the catch-all).
    fn tenant_levels(&self, levels: &[LevelConfig]) -> Result<Vec<LevelId>, FieldError> {
        let mut of_tenant = Vec::new();
        for (i, t) in self.tenant.iter().enumerate() {
            let level = match &t.level {
                None => LevelId::CATCH_ALL,
                Some(name) => match levels.iter().position(|l| &l.name == name) {
                    Some(k) => LevelId(k as u32),
                    None => {
                        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
                        return Err(FieldError::new(
                            format!("tenant[{i}].level"),
                            format!(
                                "no [[priority_level]] is named {name:?} (levels: {})",
                                names.join(", ")
                            ),
                        ));
                    }
                },
            };
            of_tenant.extend(std::iter::repeat_n(level, t.count));
        }
        Ok(of_tenant)
    }

    fn check_times(&self) -> Result<(), FieldError> {
        positive("duration", self.duration)?;
        non_negative("warmup", self.warmup)?;
        if self.warmup >= self.duration {
            return Err(FieldError::new(
                "warmup",
                format!(
                    "must be shorter than duration ({}), got {}",
                    self.duration, self.warmup
                ),
            ));
        }
        positive("speed", self.speed)?;
        Ok(())
    }

    /// `schedulers = [...]` then each `[[scheduler]]`, names unique.
    fn schedulers(&self, capacity: f64) -> Result<Vec<SchedulerChoice>, FieldError> {
        let mut schedulers = sched::presets(&self.schedulers, capacity)?;
        for (i, sc) in self.scheduler.iter().enumerate() {
            schedulers.push(
                sc.resolve(capacity)
                    .map_err(|e| e.under(&format!("scheduler[{i}]")))?,
            );
        }
        if schedulers.is_empty() {
            return Err(FieldError::new(
                "schedulers",
                format!(
                    "name at least one scheduler, e.g. schedulers = [\"wfq\", \"2dfq\"]; known: {}",
                    fairlane_core::PRESETS.join(", ")
                ),
            ));
        }
        let mut seen = BTreeSet::new();
        for sc in &schedulers {
            if !seen.insert(sc.name.clone()) {
                return Err(FieldError::new(
                    "scheduler",
                    format!("two schedulers are named {:?}; give one a `name`", sc.name),
                ));
            }
        }
        Ok(schedulers)
    }

    /// Every tenant of every group, checked, with the class names by id.
    fn tenants(&self, dir: &Path) -> Result<(Vec<TenantDef>, Vec<String>), FieldError> {
        if self.tenant.is_empty() {
            return Err(FieldError::new("tenant", "define at least one [[tenant]]"));
        }
        let mut classes = ClassTable::default();
        let mut traces = TraceCache::default();
        let mut tenants = Vec::new();
        let mut names = BTreeSet::new();
        for (i, t) in self.tenant.iter().enumerate() {
            let at = format!("tenant[{i}]");
            t.check().map_err(|e| e.under(&at))?;
            for k in 0..t.count {
                let name = if t.count == 1 {
                    t.name.clone()
                } else {
                    format!("{}-{k}", t.name)
                };
                if !names.insert(name.clone()) {
                    return Err(FieldError::new(
                        "name",
                        format!("tenant name {name:?} is used twice"),
                    )
                    .under(&at));
                }
                let cx = workload::Context {
                    seed: self.seed,
                    server: &self.server,
                    speed: self.speed,
                    dir,
                };
                let def = workload::tenant_def(t, name, k, &cx, &mut classes, &mut traces)
                    .map_err(|e| e.under(&at))?;
                tenants.push(def);
            }
        }
        if tenants.is_empty() {
            return Err(FieldError::new(
                "tenant",
                "every group has count = 0: no tenants",
            ));
        }
        workload::link_pooled(&mut tenants).map_err(|m| FieldError::new("tenant", m))?;
        Ok((tenants, classes.names))
    }

    /// DRR serves a tenant once its deficit covers the head's cost, adding one quantum per
    /// round: a quantum far below the costs means millions of rounds per dequeue.
    fn check_quanta(
        &self,
        schedulers: &[SchedulerChoice],
        tenants: &[TenantDef],
    ) -> Result<(), FieldError> {
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
                    return Err(FieldError::new(
                        format!("scheduler[{i}].quantum"),
                        format!(
                            "{q:e} is too small: a mean request costs up to {costliest:.3e} \
                             units per unit weight, {rounds:.3e} DRR rounds per dequeue \
                             (at most 1e6 allowed)"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl TenantSpec {
    /// The group's own fields; its members' arrivals and costs are checked as they are
    /// expanded.
    fn check(&self) -> Result<(), FieldError> {
        if self.name.is_empty() || self.name.contains(['.', ',', '"']) {
            return Err(FieldError::new(
                "name",
                format!(
                    "must be non-empty without '.', ',' or '\"', got {:?}",
                    self.name
                ),
            ));
        }
        positive("weight", self.weight)?;
        if let Some(target) = self.target {
            positive("target", target)?;
        }
        non_negative("start", self.start)?;
        if let Some(stop) = self.stop {
            non_negative("stop", stop)?;
        }
        if self.count > MAX_GROUP {
            return Err(FieldError::new(
                "count",
                format!("must be at most {MAX_GROUP}, got {}", self.count),
            ));
        }
        Ok(())
    }
}

impl MetricsSpec {
    fn check(&self) -> Result<(), FieldError> {
        positive("interval", self.interval)?;
        positive("occupancy_interval", self.occupancy_interval)?;
        if self.max_points < 16 {
            return Err(FieldError::new(
                "max_points",
                format!("must be at least 16, got {}", self.max_points),
            ));
        }
        Ok(())
    }

    /// The tenants to keep series of, by index: each tracked name is a tenant or a group
    /// (its first member). A sweep may remove a tracked group (count = 0): not an error.
    fn tracked(
        &self,
        tenants: &[TenantDef],
        groups: &[TenantSpec],
    ) -> Result<Vec<usize>, FieldError> {
        let mut track = Vec::new();
        for (i, name) in self.track.iter().enumerate() {
            let idx = tenants
                .iter()
                .position(|t| &t.name == name)
                .or_else(|| tenants.iter().position(|t| &t.group == name));
            match idx {
                Some(x) if !track.contains(&x) => track.push(x),
                Some(_) => {}
                None if groups.iter().any(|g| &g.name == name) => {}
                None => {
                    return Err(FieldError::new(
                        format!("metrics.track[{i}]"),
                        format!("no tenant or group is named {name:?}"),
                    ))
                }
            }
        }
        Ok(track)
    }
}

impl ServerSpec {
    /// The server: its workers (or the black box's depth), rates and capacity.
    fn resolve(&self) -> Result<Server, FieldError> {
        let blackbox = match self.model.as_deref() {
            None | Some("workers") => {
                for (k, set) in [
                    ("components", self.components.is_some()),
                    ("routing", self.routing.is_some()),
                    ("depth", self.depth.is_some()),
                ] {
                    if set {
                        return Err(FieldError::new(
                            k,
                            "only the black-box server has it; set model = \"blackbox\"",
                        ));
                    }
                }
                None
            }
            Some("blackbox") => Some(self.blackbox()?),
            Some(other) => {
                return Err(FieldError::new(
                    "model",
                    format!("unknown server model {other:?}; allowed: workers, blackbox"),
                ))
            }
        };
        let workers = self.workers(blackbox.as_ref())?;
        // Units per second of one worker or one component, and of the whole server.
        let units = blackbox.as_ref().map_or(workers, |bb| bb.components);
        let rate = match (self.rate, self.capacity) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "capacity",
                    "give `rate` or `capacity`, not both",
                ))
            }
            (Some(r), None) => positive("rate", r)?,
            (None, Some(c)) => positive("capacity", c)? / units as f64,
            (None, None) => 1.0,
        };
        non_negative("refresh", self.refresh)?;
        Ok(Server {
            workers,
            rate,
            capacity: units as f64 * rate,
            blackbox,
        })
    }

    /// The worker model's threads, or the black box's initial depth D.
    fn workers(&self, blackbox: Option<&BlackBoxDef>) -> Result<usize, FieldError> {
        let workers = match (blackbox, self.workers) {
            (Some(_), Some(_)) => {
                return Err(FieldError::new(
                    "workers",
                    "the black-box server has `depth` (issue slots), not `workers`",
                ))
            }
            (Some(bb), None) => bb.depth.initial(),
            (None, Some(w)) => w,
            (None, None) => {
                return Err(FieldError::new(
                    "workers",
                    "missing: give the number of worker threads",
                ))
            }
        };
        if workers == 0 || workers > MAX_SLOTS as usize {
            return Err(FieldError::new(
                "workers",
                format!("must be between 1 and {MAX_SLOTS}, got {workers}"),
            ));
        }
        Ok(workers)
    }

    /// The black-box model's components, routing and depth.
    fn blackbox(&self) -> Result<BlackBoxDef, FieldError> {
        let components = self.components.ok_or_else(|| {
            FieldError::new(
                "components",
                "missing: the black box needs its number of service components",
            )
        })?;
        if components == 0 || components > MAX_SLOTS as usize {
            return Err(FieldError::new(
                "components",
                format!("must be between 1 and {MAX_SLOTS}, got {components}"),
            ));
        }
        let routing = match self.routing.as_deref() {
            None | Some("random") => Routing::Random,
            Some("shared") => Routing::Shared,
            Some(other) => {
                return Err(FieldError::new(
                    "routing",
                    format!("unknown routing {other:?}; allowed: random, shared"),
                ))
            }
        };
        let depth = match &self.depth {
            None => {
                return Err(FieldError::new(
                    "depth",
                    "missing: give the depth D (issue slots), e.g. depth = 8, or an adaptive \
                     table depth = { min = 1, max = 64 }",
                ))
            }
            Some(toml::Value::Integer(d)) => Depth::Fixed(slots("depth", *d)?),
            Some(v @ toml::Value::Table(_)) => Depth::Adaptive(adaptive(v)?),
            Some(other) => {
                return Err(FieldError::new(
                    "depth",
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
}

/// A number of issue slots in 1..=4096.
fn slots(field: &str, d: i64) -> Result<usize, FieldError> {
    if (1..=MAX_SLOTS).contains(&d) {
        Ok(d as usize)
    } else {
        Err(FieldError::new(
            field,
            format!("must be between 1 and {MAX_SLOTS}, got {d}"),
        ))
    }
}

/// `depth = { min, max, … }`: the adaptive depth controller's configuration. Fields are
/// named from the server (`depth.min`).
fn adaptive(v: &toml::Value) -> Result<DepthConfig, FieldError> {
    let a: AdaptiveDepthSpec = serde_path_to_error::deserialize(v.clone()).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        FieldError::new(path, e.inner().message().to_string()).under("depth")
    })?;
    let min = slots("depth.min", a.min as i64)?;
    let max = slots("depth.max", a.max as i64)?;
    if max < min {
        return Err(FieldError::new(
            "depth.max",
            format!("must be ≥ min ({min}), got {max}"),
        ));
    }
    let initial = a.initial.unwrap_or(min);
    if !(min..=max).contains(&initial) {
        return Err(FieldError::new(
            "depth.initial",
            format!("must be between min ({min}) and max ({max}), got {initial}"),
        ));
    }
    let interval = a.interval.unwrap_or(1.0);
    if !(interval.is_finite() && interval > 0.0) {
        return Err(FieldError::new(
            "depth.interval",
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
    DepthController::new(cfg).map_err(|e| match e {
        fairlane_core::Error::InvalidConfig { field, reason } => FieldError::new(field, reason),
        other => FieldError::new("depth", other.to_string()),
    })?;
    Ok(cfg)
}

/// The core's refusal of the levels, named in the spec's terms: `priority_level[i].field`,
/// the server's field for ServerCL.
fn level_error(e: fairlane_core::Error, server_field: &str) -> FieldError {
    match e {
        fairlane_core::Error::InvalidLevel(l) => {
            FieldError::new(format!("priority_level[{}].{}", l.index, l.field), l.reason)
        }
        fairlane_core::Error::InvalidConfig {
            field: "workers",
            reason,
        } => FieldError::new(server_field, reason),
        fairlane_core::Error::InvalidConfig { reason, .. } => {
            FieldError::new("priority_level", reason)
        }
        other => FieldError::new("priority_level", other.to_string()),
    }
}

impl PriorityLevelSpec {
    /// The level, its own fields checked by the core with the others (`shares` is required
    /// unless the level is exempt).
    fn resolve(&self) -> Result<LevelConfig, FieldError> {
        let mut level = match (self.exempt, self.shares) {
            (true, shares) => LevelConfig {
                shares: shares.unwrap_or(0.0),
                ..LevelConfig::exempt(self.name.clone())
            },
            (false, Some(shares)) => LevelConfig::new(self.name.clone(), shares),
            (false, None) => {
                return Err(FieldError::new(
                    "shares",
                    "missing: a level that is not exempt needs its nominal concurrency shares",
                ))
            }
        };
        level.lendable_percent = self.lendable_percent;
        level.borrowing_limit_percent = self.borrowing_limit_percent;
        Ok(level)
    }
}
