//! Priority levels and flow schemas in the proxy (APF's model; docs/priority-levels.md):
//! the `[[priority_level]]` and `[[flow_schema]]` sections and their checks ([`check`]), the
//! core `LevelsConfig` they build, the schema matcher the pipeline's `classify` runs
//! (`schema`), and what runs beside the gate — per-level counters, the queued requests, the
//! debug dumps, the metrics and the reload (`live`).
//!
//! Without levels nothing here runs per request: the gate is the flat one (one catch-all
//! level holding all of D), and `classify` checks one `Option`.

use fairlane_core::levels::{LevelConfig, LevelsConfig};
use fairlane_core::Config;
use serde::{Deserialize, Serialize};

use crate::config::{ConfigError, ProxyConfig};

mod live;
mod schema;

pub(crate) use live::Live;
pub use live::{prometheus, FlowQueue, LevelQueues, LevelStatus, QueuedRequest};
pub(crate) use schema::{LevelInfo, Leveled, Schemas};

/// The adjustment period of the levels' borrowing when `[levels]` does not say (APF's 10 s).
pub const DEFAULT_ADJUST_PERIOD_MS: u64 = 10_000;

/// The precedence of a flow schema that names none (APF's default `matchingPrecedence`).
pub const DEFAULT_PRECEDENCE: u32 = 1000;

/// The largest precedence (APF's bound).
pub const MAX_PRECEDENCE: u32 = 10_000;

/// `[[priority_level]]`: one priority level (APF's `PriorityLevelConfiguration`), listed
/// highest first.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PriorityLevel {
    /// Unique name (a metrics label and the `X-Fairlane-Priority-Level` value).
    pub name: String,
    /// Nominal concurrency shares: D is split among the non-exempt levels in proportion
    /// (required unless exempt; finite, > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shares: Option<f64>,
    /// The part of its nominal seats other levels may borrow, in [0, 100] (default 0).
    #[serde(default)]
    pub lendable_percent: f64,
    /// How many seats beyond its nominal ones it may borrow, in [0, 100] % of them
    /// (default: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borrowing_limit_percent: Option<f64>,
    /// Admitted at once, outside D, never queued (health checks, operators).
    #[serde(default)]
    pub exempt: bool,
    /// Requests queued in the level at most; beyond it a 429 names the level (default:
    /// none, `[limits]` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_limit: Option<usize>,
    /// How long a request may wait in the level (the smaller of this and
    /// `limits.queue_timeout_ms` applies); a 503 names the level.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_timeout_ms: Option<u64>,
    /// The fair scheduler sharing the level among its flows (a `[scheduler] algorithm`
    /// preset; default: `[scheduler] algorithm`). Changes at restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algorithm: Option<String>,
}

/// `[[flow_schema]]`: a classification rule (APF's `FlowSchema`). Schemas are evaluated by
/// `precedence` (lowest first), ties broken by name; the first that matches names the
/// request's level and flow. One schema with an empty `match` (the catch-all) is required.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSchema {
    /// Unique name (the `X-Fairlane-Flow-Schema` value).
    pub name: String,
    /// The level its requests go to.
    pub priority_level: String,
    /// Lower goes first, 1 to 10000 (default 1000).
    #[serde(default = "default_precedence")]
    pub precedence: u32,
    /// What a request must have; every field given must match (none: every request).
    #[serde(default, rename = "match")]
    pub matches: SchemaMatch,
    /// What splits a tenant's requests into flows inside the level: `"tenant"` (default:
    /// the tenant is the flow) or `"header:<name>"` (the tenant and that header's value,
    /// APF's `ByUser`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distinguisher: Option<String>,
}

/// A flow schema's `match` table.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchemaMatch {
    /// The tenant's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The HTTP method.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The path: exact (`/healthz`) or a prefix ending in `*` (`/admin/*`), as `[[class]]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A header's exact value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<HeaderMatch>,
}

impl SchemaMatch {
    /// Whether it matches every request (a catch-all).
    pub fn is_empty(&self) -> bool {
        self == &SchemaMatch::default()
    }
}

/// `match.header`: a header and the value it must have.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HeaderMatch {
    /// The header's name (any case).
    pub name: String,
    /// Its exact value.
    pub value: String,
}

/// `[levels]`: how the priority levels share D.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LevelsSection {
    /// APF's borrowing adjustment period (default 10000 ms).
    #[serde(default = "default_period")]
    pub adjust_period_ms: u64,
}

impl Default for LevelsSection {
    fn default() -> Self {
        LevelsSection {
            adjust_period_ms: DEFAULT_ADJUST_PERIOD_MS,
        }
    }
}

fn default_precedence() -> u32 {
    DEFAULT_PRECEDENCE
}
fn default_period() -> u64 {
    DEFAULT_ADJUST_PERIOD_MS
}

/// Whether `config` has priority levels.
pub fn enabled(config: &ProxyConfig) -> bool {
    !config.priority_levels.is_empty()
}

/// Check the levels, the flow schemas and how they fit D and `[cluster]`; the error names
/// the field (`priority_level[1].shares`, `flow_schema[0].priority_level`).
pub fn check(config: &ProxyConfig) -> Result<(), ConfigError> {
    if !enabled(config) {
        return match (config.flow_schemas.is_empty(), &config.levels) {
            (false, _) => Err(ConfigError::new(
                "flow_schema",
                "flow schemas need [[priority_level]] sections to name",
            )),
            (true, Some(_)) => Err(ConfigError::new(
                "levels",
                "[levels] needs [[priority_level]] sections",
            )),
            (true, None) => Ok(()),
        };
    }
    if config.cluster.is_some() {
        return Err(ConfigError::new(
            "cluster",
            "cannot be combined with [[priority_level]] in this version: the cluster's global \
             D is not yet the levels' ServerCL (run levels on a single instance)",
        ));
    }
    for (i, l) in config.priority_levels.iter().enumerate() {
        l.check(i, config)?;
    }
    if let Some(s) = &config.levels {
        crate::config::at_least_one("levels.adjust_period_ms", s.adjust_period_ms)?;
    }
    let catch_all = schema::check_all(config)?;
    let levels = levels_config(config)?.catch_all(catch_all);
    check_depth(config, levels.non_exempt())?;
    check_core(&levels, config)
}

impl PriorityLevel {
    /// What the core does not check: names, presence of shares, the algorithm, the timeout.
    fn check(&self, i: usize, config: &ProxyConfig) -> Result<(), ConfigError> {
        let f = |field: &str| format!("priority_level[{i}].{field}");
        if !crate::config::valid_tenant_name(&self.name) {
            return Err(crate::config::name_error(f("name"), &self.name));
        }
        if !self.exempt && self.shares.is_none() {
            return Err(ConfigError::new(
                f("shares"),
                "required (nominal concurrency shares, finite and > 0) unless exempt",
            ));
        }
        if let Some(a) = &self.algorithm {
            let s = &config.scheduler;
            Config::for_executor(a, 1, s.initial_estimate_ms / 1000.0, false)
                .and_then(|c| c.build::<()>().map(|_| ()))
                .map_err(|e| ConfigError::new(f("algorithm"), crate::config::core_reason(e)))?;
        }
        if self.queue_timeout_ms == Some(0) {
            return Err(ConfigError::new(f("queue_timeout_ms"), "must be ≥ 1"));
        }
        Ok(())
    }

    /// The fair scheduler it runs (its own, or `[scheduler] algorithm`).
    pub fn algorithm<'a>(&'a self, config: &'a ProxyConfig) -> &'a str {
        self.algorithm
            .as_deref()
            .unwrap_or(&config.scheduler.algorithm)
    }
}

/// The core's checks of the levels, their errors named as the proxy's fields.
fn check_core(levels: &LevelsConfig, config: &ProxyConfig) -> Result<(), ConfigError> {
    levels
        .check()
        .map(|_| ())
        .map_err(|e| core_error(e, config))
}

/// A core error about the levels, as a proxy configuration error.
pub(crate) fn core_error(e: fairlane_core::Error, config: &ProxyConfig) -> ConfigError {
    match e {
        fairlane_core::Error::InvalidLevel(e) => {
            let field = match e.field {
                "queue_timeout" => "queue_timeout_ms",
                f => f,
            };
            ConfigError::new(format!("priority_level[{}].{field}", e.index), e.reason)
        }
        fairlane_core::Error::InvalidConfig {
            field: "workers",
            reason,
        } => ConfigError::new(depth_field(config), reason),
        fairlane_core::Error::InvalidConfig { field, reason } => {
            let field = match field {
                "catch_all" => "flow_schema",
                "adjust_period" => "levels.adjust_period_ms",
                _ => "priority_level",
            };
            ConfigError::new(field, reason)
        }
        e => ConfigError::new("priority_level", e.to_string()),
    }
}

/// The field that bounds D from below: the adaptive minimum, or the fixed depth.
fn depth_field(config: &ProxyConfig) -> &'static str {
    match config.scheduler.adaptive {
        Some(_) => "scheduler.adaptive.min",
        None => "scheduler.depth",
    }
}

/// Every non-exempt level needs a seat of D (exempt levels take none): D, or an adaptive
/// depth's minimum, must be at least their number.
fn check_depth(config: &ProxyConfig, non_exempt: usize) -> Result<(), ConfigError> {
    let s = &config.scheduler;
    let least = s.adaptive.as_ref().map_or(s.depth, |a| a.min);
    if least < non_exempt {
        return Err(ConfigError::new(
            depth_field(config),
            format!(
                "{non_exempt} non-exempt priority levels need a seat each: D must be at least \
                 {non_exempt}, got {least} (make a level exempt, or merge levels)"
            ),
        ));
    }
    Ok(())
}

/// The core configuration of `config`'s levels over D (`scheduler.depth`) in the gate's
/// seconds, the catch-all being the level the catch-all schema names; `None` without levels.
pub(crate) fn build(config: &ProxyConfig) -> Result<Option<LevelsConfig>, ConfigError> {
    if !enabled(config) {
        return Ok(None);
    }
    let catch_all = schema::catch_all(config).ok_or_else(|| {
        ConfigError::new(
            "flow_schema",
            "no catch-all flow schema (one with no match)",
        )
    })?;
    Ok(Some(levels_config(config)?.catch_all(catch_all)))
}

/// The levels without the catch-all set.
fn levels_config(config: &ProxyConfig) -> Result<LevelsConfig, ConfigError> {
    let s = &config.scheduler;
    let estimate = s.initial_estimate_ms / 1000.0;
    let preset = |field: String, name: &str| {
        Config::for_executor(name, s.depth, estimate, false)
            .map_err(|e| ConfigError::new(field, crate::config::core_reason(e)))
    };
    let period = config.levels.clone().unwrap_or_default().adjust_period_ms;
    let mut out = LevelsConfig::new(preset("scheduler.algorithm".into(), &s.algorithm)?)
        .adjust_period(period as f64 / 1000.0);
    for (i, l) in config.priority_levels.iter().enumerate() {
        let mut c = match l.exempt {
            true => LevelConfig::exempt(&l.name),
            false => LevelConfig::new(&l.name, l.shares.unwrap_or(0.0)),
        };
        c.lendable_percent = l.lendable_percent;
        c.borrowing_limit_percent = l.borrowing_limit_percent;
        c.queue_limit = l.queue_limit;
        c.queue_timeout = l.queue_timeout_ms.map(|ms| ms as f64 / 1000.0);
        if let Some(a) = &l.algorithm {
            c.scheduler = Some(preset(format!("priority_level[{i}].algorithm"), a)?);
        }
        out = out.level(c);
    }
    Ok(out)
}

/// What a reload may not change in place, put back as it runs now (warnings say so): a
/// level's algorithm and exemption change at restart, and so does turning levels on or off.
pub(crate) fn keep_for_restart(old: &ProxyConfig, new: &mut ProxyConfig) -> Vec<String> {
    if enabled(old) != enabled(new) {
        new.priority_levels = old.priority_levels.clone();
        new.flow_schemas = old.flow_schemas.clone();
        new.levels = old.levels.clone();
        return vec![
            "priority_level: turning priority levels on or off needs a restart; kept \
                     the old levels and flow schemas"
                .to_string(),
        ];
    }
    let mut warnings = Vec::new();
    let new_default = new.scheduler.algorithm.clone();
    for (i, l) in new.priority_levels.iter_mut().enumerate() {
        let Some(o) = old.priority_levels.iter().find(|o| o.name == l.name) else {
            continue;
        };
        let was = o.algorithm(old);
        if l.algorithm.as_deref().unwrap_or(&new_default) != was {
            warnings.push(format!(
                "priority_level[{i}].algorithm: changes at restart; level {:?} keeps {was:?}",
                l.name
            ));
            l.algorithm = Some(was.to_string());
        }
        if l.exempt != o.exempt {
            warnings.push(format!(
                "priority_level[{i}].exempt: changes at restart; level {:?} stays {}",
                l.name,
                if o.exempt { "exempt" } else { "not exempt" }
            ));
            l.exempt = o.exempt;
            l.shares = o.shares;
            if o.exempt {
                (l.lendable_percent, l.borrowing_limit_percent) = (0.0, None);
            }
        }
    }
    warnings
}

/// Apply `config`'s levels to the gate (a reload; [`keep_for_restart`] has put back what
/// changes at restart): shares, percentages, queue limits and timeouts change in place,
/// levels come and go by name, and every queued request keeps its place.
pub(crate) fn reload(gate: &crate::gate::Gate, config: &ProxyConfig) -> Result<(), ConfigError> {
    let Some(levels) = build(config)? else {
        return Ok(());
    };
    gate.0
        .set_levels(&levels)
        .map_err(|e| core_error(e, config))
}

/// The admin listener's JSON dumps (`None`: no such path): `/debug/priority_levels`
/// (APF's `dump_priority_levels`), `/debug/queues`, `/debug/requests`. Empty lists without
/// levels.
pub(crate) fn debug(inner: &crate::state::Inner, path: &str) -> Option<String> {
    let json =
        |v: serde_json::Result<String>| v.unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
    let snapshots = inner.gate.0.levels();
    Some(match path {
        "/debug/priority_levels" => json(serde_json::to_string(&inner.levels.status(snapshots))),
        "/debug/queues" => {
            let names = inner.settings().names.clone();
            json(serde_json::to_string(
                &inner.levels.queues(&snapshots, &names),
            ))
        }
        "/debug/requests" => {
            let names = inner.settings().names.clone();
            json(serde_json::to_string(&inner.levels.requests(&names)))
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
