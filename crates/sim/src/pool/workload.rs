//! Workloads: each tenant's arrivals and request classes, resolved from its `[[tenant]]`
//! section, and the sampling the engine does. Every tenant draws from its own random
//! streams, so the k-th request of a tenant has the same class and cost under every
//! scheduler.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use super::dist::{Arrival, CostDist, SimpleCost};
use super::production::{self, Template};
use super::spec::{ArrivalSpec, ClassSpec, ServerSpec, TenantSpec};
use super::trace::{self, TraceRow};
use crate::error::{non_negative, positive, FieldError};
use crate::rng::Rng;

/// One request class (API) of a tenant.
#[derive(Clone, Debug, PartialEq)]
pub struct ClassDef {
    /// Global class id (the scheduler's `ClassId`).
    pub id: u32,
    /// Cumulative share over the tenant's classes (last = 1).
    pub cum: f64,
    /// Costs.
    pub dist: CostDist,
}

/// A pool of every non-pooled tenant's classes, for unpredictable tenants: pick a source
/// tenant uniformly, then one of its classes by share.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pool {
    sources: Vec<Vec<ClassDef>>,
}

impl Pool {
    fn draw(&self, rng: &mut Rng) -> (u32, f64) {
        let src = &self.sources[rng.below(self.sources.len() as u64) as usize];
        let c = pick_class(src, rng);
        (c.id, c.dist.sample(rng))
    }

    fn mean(&self) -> f64 {
        let per: f64 = self.sources.iter().map(|s| classes_mean(s)).sum();
        per / self.sources.len() as f64
    }
}

fn pick_class<'a>(classes: &'a [ClassDef], rng: &mut Rng) -> &'a ClassDef {
    if classes.len() == 1 {
        return &classes[0];
    }
    let u = rng.uniform();
    let i = classes
        .partition_point(|c| c.cum <= u)
        .min(classes.len() - 1);
    &classes[i]
}

fn classes_mean(classes: &[ClassDef]) -> f64 {
    let mut prev = 0.0;
    let mut m = 0.0;
    for c in classes {
        m += (c.cum - prev) * c.dist.mean();
        prev = c.cum;
    }
    m
}

/// A tenant ready to simulate.
#[derive(Clone, Debug, PartialEq)]
pub struct TenantDef {
    /// Unique name.
    pub name: String,
    /// Its `[[tenant]]` group name.
    pub group: String,
    /// Weight φ.
    pub weight: f64,
    /// Response-time target in seconds, if any.
    pub target: Option<f64>,
    /// Arrivals.
    pub arrival: Arrival,
    /// Classes (empty for trace tenants).
    pub classes: Vec<ClassDef>,
    /// Set when the costs are pooled.
    pub pool: Option<Arc<Pool>>,
    /// Template-made pooled tenants keep their offered load: their rate is rescaled by
    /// own mean / pool mean.
    keep_load: bool,
    /// First arrival.
    pub start: f64,
    /// No arrivals after this.
    pub stop: f64,
    /// Seed of its streams.
    pub stream: u64,
}

impl TenantDef {
    /// Draw the next request's class and cost.
    pub fn draw(&self, rng: &mut Rng) -> (u32, f64) {
        if let Some(pool) = &self.pool {
            return pool.draw(rng);
        }
        let c = pick_class(&self.classes, rng);
        (c.id, c.dist.sample(rng))
    }

    /// The tenant's one class and its table-free law, when [`TenantDef::draw`] is just
    /// that law's draw (no pool, one class, no table): `draw` then equals
    /// `(class, law.sample(rng))`, drawing the same numbers from `rng`.
    pub fn simple_draw(&self) -> Option<(u32, SimpleCost)> {
        match (&self.pool, self.classes.as_slice()) {
            (None, [only]) => only.dist.simple().map(|law| (only.id, law)),
            _ => None,
        }
    }

    /// Mean cost of a request (NaN for traces and unlinked pools).
    pub fn mean_cost(&self) -> f64 {
        match &self.pool {
            Some(p) => p.mean(),
            None if self.classes.is_empty() => f64::NAN,
            None => classes_mean(&self.classes),
        }
    }
}

/// Class names → ids, in order of first appearance.
#[derive(Clone, Debug, Default)]
pub struct ClassTable {
    /// Names by id.
    pub names: Vec<String>,
    ids: BTreeMap<String, u32>,
}

impl ClassTable {
    /// The id of a class name, creating it.
    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// Trace files parsed once per spec.
#[derive(Default)]
pub struct TraceCache {
    files: BTreeMap<std::path::PathBuf, Arc<trace::Rows>>,
}

fn class_defs(
    specs: &[(String, f64, CostDist)],
    classes: &mut ClassTable,
) -> Result<Vec<ClassDef>, FieldError> {
    let total: f64 = specs.iter().map(|c| c.1).sum();
    if !(total.is_finite() && total > 0.0) {
        return Err(FieldError::new(
            "class",
            "class shares must be ≥ 0 and sum to more than 0",
        ));
    }
    let mut acc = 0.0;
    Ok(specs
        .iter()
        .map(|(name, share, dist)| {
            acc += share;
            ClassDef {
                id: classes.id(name),
                cum: acc / total,
                dist: dist.clone(),
            }
        })
        .collect())
}

/// What resolving a tenant needs from the rest of its spec.
pub(crate) struct Context<'a> {
    /// The spec's seed (templates draw from it).
    pub seed: u64,
    /// The server (a backlogged tenant's default outstanding requests).
    pub server: &'a ServerSpec,
    /// Multiplies open arrival rates and trace speeds.
    pub speed: f64,
    /// Where trace paths start.
    pub dir: &'a Path,
}

/// Resolve one member (`index`, named `name`) of a `[[tenant]]` group. Errors name the
/// field within the group.
pub(crate) fn tenant_def(
    t: &TenantSpec,
    name: String,
    index: usize,
    cx: &Context,
    classes: &mut ClassTable,
    traces: &mut TraceCache,
) -> Result<TenantDef, FieldError> {
    let stream = crate::rng::stream_id(&name);
    let template = template_of(t, index, cx.seed)?;
    let (pooled, class_specs) = class_specs(t, template.as_ref())?;
    let arrival = match (&t.arrival, &template) {
        (Some(a), _) => a
            .resolve(&t.name, cx, classes, traces)
            .map_err(|e| e.under("arrival"))?,
        (None, Some(tp)) => tp.arrival.clone().scaled(cx.speed),
        (None, None) => {
            return Err(FieldError::new(
                "arrival",
                "missing: give `arrival = { kind = ... }` or a `template`",
            ))
        }
    };
    let is_trace = matches!(arrival, Arrival::Trace(_));
    if class_specs.is_empty() && !pooled && !is_trace {
        return Err(FieldError::new(
            "cost",
            "missing: give `cost`, [[tenant.class]] entries or a `template`",
        ));
    }
    if is_trace && (pooled || !t.class.is_empty() || t.cost.is_some()) {
        return Err(FieldError::new(
            "cost",
            "trace tenants take their costs from the trace; remove `cost`/`class`",
        ));
    }
    let class_list = if class_specs.is_empty() {
        Vec::new()
    } else {
        class_defs(&class_specs, classes)?
    };
    Ok(TenantDef {
        name,
        group: t.name.clone(),
        weight: t.weight,
        target: t.target,
        arrival,
        classes: class_list,
        pool: pooled.then(Default::default),
        keep_load: pooled && t.arrival.is_none() && template.is_some(),
        start: t.start,
        stop: t.stop.unwrap_or(f64::INFINITY),
        stream,
    })
}

/// The member's built-in profile, drawn from its own stream of the spec seed.
fn template_of(t: &TenantSpec, index: usize, seed: u64) -> Result<Option<Template>, FieldError> {
    let Some(tpl) = &t.template else {
        return Ok(None);
    };
    let mut rng = Rng::new(
        seed ^ 0x7E3A_11C0,
        crate::rng::stream_id(&t.name) ^ index as u64,
    );
    production::template(tpl, &mut rng)
        .map(Some)
        .map_err(|m| FieldError::new("template", m))
}

/// A class as written: its name, share and costs.
type ClassSpec3 = (String, f64, CostDist);

/// Whether the tenant's costs are pooled, and its classes: explicit [[tenant.class]]
/// entries, or one `cost`, or the template's. A pooled tenant keeps its template's classes
/// only to know its own offered load.
fn class_specs(
    t: &TenantSpec,
    template: Option<&Template>,
) -> Result<(bool, Vec<ClassSpec3>), FieldError> {
    if !t.class.is_empty() && t.cost.is_some() {
        return Err(FieldError::new(
            "cost",
            "give either `cost` or [[tenant.class]] entries, not both",
        ));
    }
    let cost = match &t.cost {
        Some(c) => Some(c.resolve().map_err(|e| e.under("cost"))?),
        None => None,
    };
    let pooled = cost == Some(CostDist::Pooled);
    let mut out: Vec<(String, f64, CostDist)> = Vec::new();
    for (i, c) in t.class.iter().enumerate() {
        out.push(
            c.resolve(&t.name, i)
                .map_err(|e| e.under(&format!("class[{i}]")))?,
        );
    }
    match (&cost, template) {
        (Some(d), _) if !pooled => out.push((t.name.clone(), 1.0, d.clone())),
        (_, Some(tp)) if out.is_empty() => out = tp.classes.clone(),
        _ => {}
    }
    Ok((pooled, out))
}

impl ClassSpec {
    /// The class's name (default `TENANT/i`), share and costs.
    fn resolve(&self, tenant: &str, i: usize) -> Result<(String, f64, CostDist), FieldError> {
        non_negative("share", self.share)?;
        let dist = self.cost.resolve().map_err(|e| e.under("cost"))?;
        if dist == CostDist::Pooled {
            return Err(FieldError::new(
                "cost.kind",
                "pooled is a whole-tenant cost: use `cost = { kind = \"pooled\" }`",
            ));
        }
        let name = self.name.clone().unwrap_or_else(|| format!("{tenant}/{i}"));
        Ok((name, self.share, dist))
    }
}

impl Arrival {
    /// The same process with its open rate multiplied by `k` (closed loops, backlogs and
    /// traces unchanged).
    pub(crate) fn scaled(self, k: f64) -> Arrival {
        match self {
            Arrival::Poisson { rate } => Arrival::Poisson { rate: rate * k },
            Arrival::OnOff {
                rate,
                on,
                off,
                periodic,
            } => Arrival::OnOff {
                rate: rate * k,
                on,
                off,
                periodic,
            },
            other => other,
        }
    }
}

impl ArrivalSpec {
    /// The arrival process of tenant group `tenant`; trace classes get their ids here.
    /// Errors name the field within `arrival`.
    fn resolve(
        &self,
        tenant: &str,
        cx: &Context,
        classes: &mut ClassTable,
        traces: &mut TraceCache,
    ) -> Result<Arrival, FieldError> {
        Ok(match self {
            ArrivalSpec::Backlogged { outstanding } => {
                let k = outstanding.unwrap_or(cx.server.default_outstanding());
                Arrival::Backlogged {
                    outstanding: within("outstanding", k)?,
                }
            }
            ArrivalSpec::Poisson { rate } => Arrival::Poisson {
                rate: positive("rate", *rate)? * cx.speed,
            },
            ArrivalSpec::OnOff {
                rate,
                on,
                off,
                periodic,
            } => Arrival::OnOff {
                rate: positive("rate", *rate)? * cx.speed,
                on: positive("on", *on)?,
                off: positive("off", *off)?,
                periodic: *periodic,
            },
            ArrivalSpec::Closed { clients, think } => Arrival::Closed {
                clients: within("clients", *clients)?,
                think: non_negative("think", *think)?,
            },
            ArrivalSpec::Trace { file, tenant: who } => {
                let who = who.as_deref().unwrap_or(tenant);
                traces.arrival(&cx.dir.join(file), who, cx.speed, classes)?
            }
        })
    }
}

/// A count of requests or clients in 1..=1000000.
fn within(field: &str, k: usize) -> Result<usize, FieldError> {
    if k == 0 || k > 1_000_000 {
        return Err(FieldError::new(
            field,
            format!("must be between 1 and 1000000, got {k}"),
        ));
    }
    Ok(k)
}

impl TraceCache {
    /// The rows of tenant `who` in the trace at `path` (read once per spec), sped up.
    fn arrival(
        &mut self,
        path: &Path,
        who: &str,
        speed: f64,
        classes: &mut ClassTable,
    ) -> Result<Arrival, FieldError> {
        let parsed = match self.files.get(path) {
            Some(p) => p.clone(),
            None => {
                let p = Arc::new(trace::load(path).map_err(|m| FieldError::new("file", m))?);
                self.files.insert(path.to_path_buf(), p.clone());
                p
            }
        };
        let rows = parsed.get(who).ok_or_else(|| {
            FieldError::new(
                "tenant",
                format!("trace {} has no rows for tenant {who:?}", path.display()),
            )
        })?;
        Ok(Arrival::Trace(
            rows.iter()
                .map(|(time, class, cost)| TraceRow {
                    time: time / speed,
                    class: classes.id(class),
                    cost: *cost,
                })
                .collect(),
        ))
    }
}

/// Give pooled tenants the pool of every other tenant's classes; rescale template-made
/// pooled tenants' rates so their offered load stays their own.
pub(crate) fn link_pooled(tenants: &mut [TenantDef]) -> Result<(), String> {
    if !tenants.iter().any(|t| t.pool.is_some()) {
        return Ok(());
    }
    let sources: Vec<Vec<ClassDef>> = tenants
        .iter()
        .filter(|t| t.pool.is_none() && !t.classes.is_empty())
        .map(|t| t.classes.clone())
        .collect();
    if sources.is_empty() {
        return Err("pooled costs need at least one tenant with its own cost model to pool".into());
    }
    let pool = Arc::new(Pool { sources });
    let pool_mean = pool.mean();
    for t in tenants.iter_mut().filter(|t| t.pool.is_some()) {
        if t.keep_load && !t.classes.is_empty() {
            let k = classes_mean(&t.classes) / pool_mean;
            t.arrival = t.arrival.clone().scaled(k);
        }
        t.pool = Some(pool.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::pool::SpecFile;
    use crate::rng::Rng;

    /// The engine draws a one-class tenant's requests through `simple_draw` (its law kept in
    /// the tenant's hot cache line); every other tenant through `TenantDef::draw`. Both must
    /// give the same classes and the same cost bits from the same stream.
    #[test]
    fn the_simple_draw_is_the_tenant_draw_bit_for_bit() {
        // One tenant per law: name, arrival, cost.
        let backlogged = r#"{ kind = "backlogged" }"#;
        let poisson = r#"{ kind = "poisson", rate = 5.0 }"#;
        let laws = [
            (
                "constant",
                backlogged,
                r#"{ kind = "constant", value = 3.0 }"#,
            ),
            (
                "normal",
                backlogged,
                r#"{ kind = "normal", mean = 1.0, std = 0.9 }"#,
            ),
            (
                "lognormal",
                poisson,
                r#"{ kind = "lognormal", mean = 10.0, cov = 2.0 }"#,
            ),
            (
                "exponential",
                poisson,
                r#"{ kind = "exponential", mean = 4.0 }"#,
            ),
            (
                "uniform",
                poisson,
                r#"{ kind = "uniform", min = 1.0, max = 9.0 }"#,
            ),
            (
                "empirical",
                poisson,
                r#"{ kind = "empirical", values = [1.0, 2.0, 7.0] }"#,
            ),
        ];
        let mut text = String::from(
            r#"
            name = "laws"
            duration = 1.0
            schedulers = ["wfq"]
            [server]
            workers = 2
            rate = 1000.0
            [[tenant]]
            name = "two-classes"
            arrival = { kind = "poisson", rate = 5.0 }
            [[tenant.class]]
            name = "get"
            share = 3.0
            cost = { kind = "normal", mean = 1.0, std = 0.5 }
            [[tenant.class]]
            name = "put"
            cost = { kind = "exponential", mean = 50.0 }
            "#,
        );
        for (name, arrival, cost) in laws {
            text += &format!("[[tenant]]\nname = {name:?}\narrival = {arrival}\ncost = {cost}\n");
        }
        let spec = SpecFile::parse(&text, "laws.toml", ".".into()).unwrap();
        let scenarios = spec.scenarios().unwrap();
        let tenants = &scenarios[0].tenants;
        let simple: Vec<bool> = tenants.iter().map(|t| t.simple_draw().is_some()).collect();
        assert_eq!(simple, [false, true, true, true, true, true, false]);
        for t in tenants {
            let Some((class, law)) = t.simple_draw() else {
                continue;
            };
            let (mut a, mut b) = (Rng::new(9, t.stream), Rng::new(9, t.stream));
            for _ in 0..2_000 {
                let (c, x) = t.draw(&mut a);
                let y = law.sample(&mut b);
                assert_eq!((c, x.to_bits()), (class, y.to_bits()), "{}", t.name);
                assert!(x > 0.0, "{}", t.name);
            }
        }
    }
}
