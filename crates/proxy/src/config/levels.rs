//! `[[priority_level]]`, `[[flow_schema]]` and `[levels]` (APF's model;
//! docs/priority-levels.md): the sections, their checks with field paths ([`check`]), the
//! core `LevelsConfig` they build over D ([`build`]), and the schemas' patterns and
//! distinguishers as the matcher compiles them.

use std::collections::HashSet;

use fairlane_core::levels::{LevelConfig, LevelsConfig};
use fairlane_core::Config;
use http::{HeaderValue, Method};
use serde::{Deserialize, Serialize};

use super::{ConfigError, ProxyConfig};

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
        super::at_least_one("levels.adjust_period_ms", s.adjust_period_ms)?;
    }
    let catch_all = check_all(config)?;
    let levels = levels_config(config)?.catch_all(catch_all);
    check_depth(config, levels.non_exempt())?;
    check_core(&levels, config)
}

impl PriorityLevel {
    /// What the core does not check: names, presence of shares, the algorithm, the timeout.
    fn check(&self, i: usize, config: &ProxyConfig) -> Result<(), ConfigError> {
        let f = |field: &str| format!("priority_level[{i}].{field}");
        if !super::valid_tenant_name(&self.name) {
            return Err(super::name_error(f("name"), &self.name));
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
                .map_err(|e| ConfigError::new(f("algorithm"), super::core_reason(e)))?;
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
    let catch_all = catch_all(config).ok_or_else(|| {
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
            .map_err(|e| ConfigError::new(field, super::core_reason(e)))
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

/// The most flow schemas a configuration may have.
const MAX_SCHEMAS: usize = 10_000;

/// What a flow schema splits a tenant's requests by.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Distinguisher {
    /// The tenant is the flow.
    Tenant,
    /// The tenant and this header's value (lower-case name).
    Header(String),
}

impl Distinguisher {
    /// Read `distinguisher`: `tenant` (or none), or `header:<name>`.
    pub fn parse(text: Option<&str>) -> Result<Distinguisher, String> {
        match text {
            None | Some("tenant") => Ok(Distinguisher::Tenant),
            Some(t) => match t.strip_prefix("header:") {
                Some(h) if http::HeaderName::from_bytes(h.as_bytes()).is_ok() => {
                    Ok(Distinguisher::Header(h.to_ascii_lowercase()))
                }
                _ => Err(format!(
                    "{t:?} is not \"tenant\" or \"header:<a header name>\""
                )),
            },
        }
    }
}

/// A path pattern as `[[class]]` has it: exact, or a prefix ending in `*`.
#[derive(Clone, Debug)]
pub(crate) struct Pattern {
    text: String,
    prefix: bool,
}

impl Pattern {
    /// Read a pattern: exact, or a prefix ending in `*`.
    pub fn parse(p: &str) -> Result<Pattern, String> {
        if !p.starts_with('/') {
            return Err(format!("must start with '/', got {p:?}"));
        }
        let stem = p.strip_suffix('*');
        if stem.unwrap_or(p).contains('*') {
            return Err("'*' is allowed only at the end (a prefix match)".into());
        }
        Ok(Pattern {
            text: stem.unwrap_or(p).to_string(),
            prefix: stem.is_some(),
        })
    }

    /// Whether `path` matches.
    pub fn matches(&self, path: &str) -> bool {
        match self.prefix {
            true => path.starts_with(&self.text),
            false => path == self.text,
        }
    }
}

/// Check every flow schema; returns the catch-all's level name (of the first schema with
/// an empty match, in evaluation order).
fn check_all(config: &ProxyConfig) -> Result<String, ConfigError> {
    if config.flow_schemas.len() > MAX_SCHEMAS {
        return Err(ConfigError::new(
            "flow_schema",
            format!(
                "at most {MAX_SCHEMAS} flow schemas, got {}",
                config.flow_schemas.len()
            ),
        ));
    }
    let mut names = HashSet::new();
    for (i, s) in config.flow_schemas.iter().enumerate() {
        check_one(config, i, s)?;
        if !names.insert(s.name.as_str()) {
            return Err(ConfigError::new(
                format!("flow_schema[{i}].name"),
                format!("{:?} is listed twice", s.name),
            ));
        }
    }
    let Some(level) = catch_all(config) else {
        return Err(ConfigError::new(
            "flow_schema",
            "no catch-all: add a [[flow_schema]] with no match (every request needs a level)",
        ));
    };
    let i = order(config)[0..]
        .iter()
        .copied()
        .find(|&i| config.flow_schemas[i].matches.is_empty())
        .unwrap_or(0);
    if config
        .priority_levels
        .iter()
        .any(|l| l.name == level && l.exempt)
    {
        return Err(ConfigError::new(
            format!("flow_schema[{i}].priority_level"),
            format!("the catch-all schema's level {level:?} cannot be exempt"),
        ));
    }
    Ok(level)
}

fn check_one(config: &ProxyConfig, i: usize, s: &FlowSchema) -> Result<(), ConfigError> {
    let f = |field: &str| format!("flow_schema[{i}].{field}");
    if !super::valid_tenant_name(&s.name) {
        return Err(super::name_error(f("name"), &s.name));
    }
    if !config
        .priority_levels
        .iter()
        .any(|l| l.name == s.priority_level)
    {
        let names: Vec<&str> = config
            .priority_levels
            .iter()
            .map(|l| l.name.as_str())
            .collect();
        return Err(ConfigError::new(
            f("priority_level"),
            format!(
                "no priority level {:?} (levels: {})",
                s.priority_level,
                names.join(", ")
            ),
        ));
    }
    if !(1..=MAX_PRECEDENCE).contains(&s.precedence) {
        return Err(ConfigError::new(
            f("precedence"),
            format!("must be in 1..={MAX_PRECEDENCE}, got {}", s.precedence),
        ));
    }
    Distinguisher::parse(s.distinguisher.as_deref())
        .map_err(|e| ConfigError::new(f("distinguisher"), e))?;
    let m = &s.matches;
    if let Some(t) = &m.tenant {
        let id = &config.identity;
        let default = id.unknown == super::Unknown::Default && id.default_tenant == *t;
        if !(default || config.tenants.iter().any(|x| x.name == *t)) {
            return Err(ConfigError::new(
                f("match.tenant"),
                format!("no [[tenant]] named {t:?}"),
            ));
        }
    }
    if let Some(method) = &m.method {
        if Method::from_bytes(method.as_bytes()).is_err() {
            return Err(ConfigError::new(
                f("match.method"),
                format!("{method:?} is not an HTTP method"),
            ));
        }
    }
    if let Some(p) = &m.path {
        Pattern::parse(p).map_err(|e| ConfigError::new(f("match.path"), e))?;
    }
    if let Some(h) = &m.header {
        if http::HeaderName::from_bytes(h.name.as_bytes()).is_err() {
            return Err(ConfigError::new(
                f("match.header.name"),
                format!("{:?} is not a valid header name", h.name),
            ));
        }
        if HeaderValue::from_str(&h.value).is_err() {
            return Err(ConfigError::new(
                f("match.header.value"),
                "not a valid header value",
            ));
        }
    }
    Ok(())
}

/// The schemas' indexes in evaluation order: precedence, then name (APF's tie-break).
pub(crate) fn order(config: &ProxyConfig) -> Vec<usize> {
    let s = &config.flow_schemas;
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by(|&a, &b| (s[a].precedence, &s[a].name).cmp(&(s[b].precedence, &s[b].name)));
    order
}

/// The level of the first catch-all schema in evaluation order, if any.
pub(crate) fn catch_all(config: &ProxyConfig) -> Option<String> {
    order(config)
        .into_iter()
        .map(|i| &config.flow_schemas[i])
        .find(|s| s.matches.is_empty())
        .map(|s| s.priority_level.clone())
}
