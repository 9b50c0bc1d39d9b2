//! Flow schemas: their checks, and the matcher `classify` runs — schemas in evaluation
//! order (precedence, then name), each compiled to the tenant id, method, path pattern and
//! header it needs, naming a level id and a distinguisher.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use fairlane_core::{LevelId, TenantId};
use fairlane_runtime::{LevelSnapshot, Route};
use http::{HeaderValue, Method};

use super::live::{LevelStats, Live};
use super::{FlowSchema, MAX_PRECEDENCE};
use crate::config::{ConfigError, ProxyConfig};
use crate::head::RequestHead;
use crate::tenant::Registry;

/// The most flow schemas a configuration may have.
const MAX_SCHEMAS: usize = 10_000;

/// What a flow schema splits a tenant's requests by.
#[derive(Clone, Debug, PartialEq)]
enum Distinguisher {
    /// The tenant is the flow.
    Tenant,
    /// The tenant and this header's value (lower-case name).
    Header(String),
}

impl Distinguisher {
    fn parse(text: Option<&str>) -> Result<Distinguisher, String> {
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

    /// The flow distinguisher of a request (0: the tenant alone, also when the header is
    /// absent).
    fn of(&self, head: &RequestHead) -> u64 {
        match self {
            Distinguisher::Tenant => 0,
            Distinguisher::Header(name) => head.header(name, |v| {
                v.map_or(0, |v| {
                    // SipHash with fixed keys: the same value is the same flow across
                    // restarts and instances; never 0 (the tenant alone).
                    #[allow(deprecated)]
                    let mut h = std::hash::SipHasher::new();
                    v.hash(&mut h);
                    h.finish() | 1
                })
            }),
        }
    }
}

/// A path pattern as `[[class]]` has it: exact, or a prefix ending in `*`.
#[derive(Clone, Debug)]
struct Pattern {
    text: String,
    prefix: bool,
}

impl Pattern {
    fn parse(p: &str) -> Result<Pattern, String> {
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

    fn matches(&self, path: &str) -> bool {
        match self.prefix {
            true => path.starts_with(&self.text),
            false => path == self.text,
        }
    }
}

/// Check every flow schema; returns the catch-all's level name (of the first schema with
/// an empty match, in evaluation order).
pub(super) fn check_all(config: &ProxyConfig) -> Result<String, ConfigError> {
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
    if !crate::config::valid_tenant_name(&s.name) {
        return Err(crate::config::name_error(f("name"), &s.name));
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
        let default = id.unknown == crate::config::Unknown::Default && id.default_tenant == *t;
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
fn order(config: &ProxyConfig) -> Vec<usize> {
    let s = &config.flow_schemas;
    let mut order: Vec<usize> = (0..s.len()).collect();
    order.sort_by(|&a, &b| (s[a].precedence, &s[a].name).cmp(&(s[b].precedence, &s[b].name)));
    order
}

/// The level of the first catch-all schema in evaluation order, if any.
pub(super) fn catch_all(config: &ProxyConfig) -> Option<String> {
    order(config)
        .into_iter()
        .map(|i| &config.flow_schemas[i])
        .find(|s| s.matches.is_empty())
        .map(|s| s.priority_level.clone())
}

/// One compiled flow schema.
#[derive(Debug)]
struct Rule {
    /// Its name as an `X-Fairlane-Flow-Schema` value.
    value: HeaderValue,
    name: Arc<str>,
    level: LevelId,
    tenant: Option<TenantId>,
    method: Option<Method>,
    path: Option<Pattern>,
    header: Option<(String, Vec<u8>)>,
    distinguisher: Distinguisher,
}

impl Rule {
    fn matches(&self, head: &RequestHead, tenant: TenantId) -> bool {
        self.tenant.is_none_or(|t| t == tenant)
            && self.method.as_ref().is_none_or(|m| m == head.method())
            && self.path.as_ref().is_none_or(|p| p.matches(head.path()))
            && self
                .header
                .as_ref()
                .is_none_or(|(n, v)| head.header(n, |got| got == Some(v.as_slice())))
    }
}

/// What a request's level needs in the pipeline, by level id.
#[derive(Debug)]
pub(crate) struct LevelInfo {
    /// Its name.
    pub name: Arc<str>,
    /// Its name as an `X-Fairlane-Priority-Level` value.
    pub value: HeaderValue,
    /// Its queue timeout, if it has one.
    pub timeout: Option<Duration>,
    /// Its counters.
    pub stats: Arc<LevelStats>,
}

/// Where [`Schemas::classify`] put a request: its level and flow, and the schema that
/// matched (an index into the schemas of the settings it was classified with).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Leveled {
    /// The gate's route.
    pub route: Route,
    /// The schema.
    pub schema: u16,
}

/// The compiled flow schemas and the levels they name.
#[derive(Debug)]
pub(crate) struct Schemas {
    rules: Vec<Rule>,
    levels: Vec<Option<LevelInfo>>,
}

impl Schemas {
    /// Compile `config`'s schemas (`None` without levels) against the gate's levels now
    /// (`snapshots`: a level's id is the gate's, which a reload keeps by name).
    pub fn new(
        config: &ProxyConfig,
        registry: &mut Registry,
        snapshots: &[LevelSnapshot],
        live: &Live,
    ) -> Option<Schemas> {
        if !super::enabled(config) {
            return None;
        }
        let id_of = |name: &str| {
            snapshots
                .iter()
                .find(|s| s.name == name)
                .map_or(LevelId::CATCH_ALL, |s| LevelId(s.id))
        };
        let rules = order(config)
            .into_iter()
            .map(|i| {
                let s = &config.flow_schemas[i];
                let m = &s.matches;
                Rule {
                    value: HeaderValue::from_str(&s.name).unwrap_or(HeaderValue::from_static("?")),
                    name: Arc::from(s.name.as_str()),
                    level: id_of(&s.priority_level),
                    tenant: m.tenant.as_deref().map(|t| registry.intern(t)),
                    method: m.method.as_deref().and_then(|x| x.parse().ok()),
                    path: m.path.as_deref().and_then(|p| Pattern::parse(p).ok()),
                    header: m
                        .header
                        .as_ref()
                        .map(|h| (h.name.to_ascii_lowercase(), h.value.as_bytes().to_vec())),
                    distinguisher: Distinguisher::parse(s.distinguisher.as_deref())
                        .unwrap_or(Distinguisher::Tenant),
                }
            })
            .collect();
        let n = snapshots
            .iter()
            .map(|s| s.id as usize + 1)
            .max()
            .unwrap_or(0);
        let mut levels: Vec<Option<LevelInfo>> = (0..n).map(|_| None).collect();
        for s in snapshots {
            let Some(l) = config.priority_levels.iter().find(|l| l.name == s.name) else {
                continue; // retired
            };
            levels[s.id as usize] = Some(LevelInfo {
                name: Arc::from(s.name.as_str()),
                value: HeaderValue::from_str(&s.name).unwrap_or(HeaderValue::from_static("?")),
                timeout: l.queue_timeout_ms.map(Duration::from_millis),
                stats: live.stats(&s.name),
            });
        }
        Some(Schemas { rules, levels })
    }

    /// The first schema that matches a request of `tenant` with this head: its level and
    /// flow. The catch-all matches everything (the last rule, if none before it did).
    pub fn classify(&self, head: &RequestHead, tenant: TenantId) -> Leveled {
        match self
            .rules
            .iter()
            .enumerate()
            .find(|(_, r)| r.matches(head, tenant))
        {
            Some((i, rule)) => Leveled {
                route: Route::level(rule.level).distinguished(rule.distinguisher.of(head)),
                schema: i as u16,
            },
            // A checked configuration always has a catch-all; the core's is the fallback.
            None => Leveled {
                route: Route::default(),
                schema: u16::MAX,
            },
        }
    }

    /// The level a request was classified into.
    pub fn level(&self, l: Leveled) -> Option<&LevelInfo> {
        self.levels.get(l.route.level.0 as usize)?.as_ref()
    }

    /// The name of the schema that classified it, and its header value.
    pub fn schema(&self, l: Leveled) -> Option<(&Arc<str>, &HeaderValue)> {
        self.rules
            .get(l.schema as usize)
            .map(|r| (&r.name, &r.value))
    }
}
