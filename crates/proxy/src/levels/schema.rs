//! The flow schemas' matcher `classify` runs: schemas in evaluation order (precedence, then
//! name), each compiled to the tenant id, method, path pattern and header it needs, naming a
//! level id and a distinguisher (their checks are the configuration's).

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use fairlane_core::{LevelId, TenantId};
use fairlane_runtime::{LevelSnapshot, Route};
use http::{HeaderValue, Method};

use super::live::{LevelStats, Live};
use crate::config::levels::{enabled, order, Distinguisher, Pattern};
use crate::config::ProxyConfig;
use crate::head::RequestHead;
use crate::tenant::Registry;

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
        if !enabled(config) {
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
                route: Route::level(rule.level).distinguished(flow(&rule.distinguisher, head)),
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

/// The flow distinguisher of a request (0: the tenant alone, also when the header is
/// absent).
fn flow(d: &Distinguisher, head: &RequestHead) -> u64 {
    match d {
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
