//! Workloads: arrival processes and cost distributions, resolved from the spec, and the
//! sampling the engine does. Every tenant draws from its own random streams, so the k-th
//! request of a tenant has the same class and cost under every scheduler.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::production;
use crate::rng::Rng;
use crate::spec::{ArrivalSpec, ClassSpec, CostSpec, ServerSpec, TenantSpec};
use crate::trace::{self, TraceRow};

/// A cost distribution ready to sample.
#[derive(Clone, Debug, PartialEq)]
pub enum CostDist {
    /// Always this.
    Constant(f64),
    /// Normal, redrawn when not positive.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// exp(N(mu, sigma²)).
    LogNormal {
        /// Mean of the log.
        mu: f64,
        /// σ of the log.
        sigma: f64,
    },
    /// Exponential with this mean.
    Exponential(f64),
    /// Uniform on [min, max].
    Uniform(f64, f64),
    /// One of these values uniformly.
    Empirical(Arc<[f64]>),
    /// Bins `(low, high)` with cumulative weights.
    Histogram {
        /// The bins.
        bins: Arc<[(f64, f64)]>,
        /// Cumulative weights, last = 1.
        cum: Arc<[f64]>,
    },
    /// Draw from the pool of every other tenant's classes.
    Pooled,
}

/// Smallest cost a draw can return: costs must be > 0.
const MIN_COST: f64 = 1e-9;

/// A cost law that needs no table: the [`CostDist`] variants a few numbers describe. The
/// engine keeps a one-class tenant's law in the tenant's hot cache line
/// ([`TenantDef::simple_draw`]) instead of reading the spec's class list for every request;
/// [`CostDist::sample`] draws these variants through [`SimpleCost::sample`] too, so both
/// paths compute the same numbers from the same stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SimpleCost {
    /// [`CostDist::Constant`].
    Constant(f64),
    /// [`CostDist::Normal`].
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
    /// [`CostDist::LogNormal`].
    LogNormal {
        /// Mean of the log.
        mu: f64,
        /// σ of the log.
        sigma: f64,
    },
    /// [`CostDist::Exponential`].
    Exponential(f64),
    /// [`CostDist::Uniform`].
    Uniform(f64, f64),
}

impl SimpleCost {
    /// One draw (what [`CostDist::sample`] draws for the same law).
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        let x = match *self {
            SimpleCost::Constant(v) => v,
            SimpleCost::Normal { mean, std } => {
                // Redraw non-positive values (at most 16 times, then the mean): a cost is > 0.
                let mut x = mean;
                for _ in 0..16 {
                    let y = mean + std * rng.normal();
                    if y > 0.0 {
                        x = y;
                        break;
                    }
                }
                x
            }
            SimpleCost::LogNormal { mu, sigma } => (mu + sigma * rng.normal()).exp(),
            SimpleCost::Exponential(mean) => rng.exp(mean),
            SimpleCost::Uniform(a, b) => a + (b - a) * rng.uniform(),
        };
        x.max(MIN_COST)
    }
}

impl CostDist {
    /// The law as a [`SimpleCost`], when it needs no table.
    pub fn simple(&self) -> Option<SimpleCost> {
        Some(match *self {
            CostDist::Constant(v) => SimpleCost::Constant(v),
            CostDist::Normal { mean, std } => SimpleCost::Normal { mean, std },
            CostDist::LogNormal { mu, sigma } => SimpleCost::LogNormal { mu, sigma },
            CostDist::Exponential(mean) => SimpleCost::Exponential(mean),
            CostDist::Uniform(a, b) => SimpleCost::Uniform(a, b),
            CostDist::Empirical(_) | CostDist::Histogram { .. } | CostDist::Pooled => return None,
        })
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        if let Some(simple) = self.simple() {
            return simple.sample(rng);
        }
        let x = match self {
            CostDist::Empirical(v) => v[rng.below(v.len() as u64) as usize],
            CostDist::Histogram { bins, cum } => {
                let u = rng.uniform();
                let i = cum.partition_point(|&c| c <= u).min(bins.len() - 1);
                let (lo, hi) = bins[i];
                lo + (hi - lo) * rng.uniform()
            }
            CostDist::Pooled => unreachable!("pooled costs are drawn by the tenant"),
            _ => unreachable!("simple laws are drawn above"),
        };
        x.max(MIN_COST)
    }

    /// The distribution's mean (the normal's before redrawing).
    pub fn mean(&self) -> f64 {
        match self {
            CostDist::Constant(v) => *v,
            CostDist::Normal { mean, .. } => *mean,
            CostDist::LogNormal { mu, sigma } => (mu + sigma * sigma / 2.0).exp(),
            CostDist::Exponential(m) => *m,
            CostDist::Uniform(a, b) => (a + b) / 2.0,
            CostDist::Empirical(v) => v.iter().sum::<f64>() / v.len() as f64,
            CostDist::Histogram { bins, cum } => {
                let mut prev = 0.0;
                let mut m = 0.0;
                for (&(lo, hi), &c) in bins.iter().zip(cum.iter()) {
                    m += (c - prev) * (lo + hi) / 2.0;
                    prev = c;
                }
                m
            }
            CostDist::Pooled => f64::NAN,
        }
    }

    /// Build from the spec, checking parameters. Errors are `(field, message)`.
    pub fn from_spec(spec: &CostSpec) -> Result<CostDist, (String, String)> {
        let bad = |f: &str, m: String| Err((f.to_string(), m));
        let pos = |f: &str, x: f64| -> Result<f64, (String, String)> {
            if x.is_finite() && x > 0.0 {
                Ok(x)
            } else {
                Err((
                    f.to_string(),
                    format!("must be a finite number > 0, got {x}"),
                ))
            }
        };
        let nonneg = |f: &str, x: f64| -> Result<f64, (String, String)> {
            if x.is_finite() && x >= 0.0 {
                Ok(x)
            } else {
                Err((
                    f.to_string(),
                    format!("must be a finite number ≥ 0, got {x}"),
                ))
            }
        };
        Ok(match spec {
            CostSpec::Constant { value } => CostDist::Constant(pos("value", *value)?),
            CostSpec::Normal { mean, std } => CostDist::Normal {
                mean: pos("mean", *mean)?,
                std: nonneg("std", *std)?,
            },
            CostSpec::Lognormal {
                mean,
                cov,
                median,
                sigma,
            } => match (mean, cov, median, sigma) {
                (Some(m), Some(c), None, None) => {
                    let m = pos("mean", *m)?;
                    let c = nonneg("cov", *c)?;
                    let s2 = (1.0 + c * c).ln();
                    CostDist::LogNormal {
                        mu: m.ln() - s2 / 2.0,
                        sigma: s2.sqrt(),
                    }
                }
                (None, None, Some(md), Some(s)) => CostDist::LogNormal {
                    mu: pos("median", *md)?.ln(),
                    sigma: nonneg("sigma", *s)?,
                },
                _ => {
                    return bad(
                        "kind",
                        "lognormal takes either `mean` and `cov`, or `median` and `sigma`".into(),
                    )
                }
            },
            CostSpec::Exponential { mean } => CostDist::Exponential(pos("mean", *mean)?),
            CostSpec::Uniform { min, max } => {
                let a = pos("min", *min)?;
                let b = pos("max", *max)?;
                if b < a {
                    return bad("max", format!("must be ≥ min ({a}), got {b}"));
                }
                CostDist::Uniform(a, b)
            }
            CostSpec::Empirical { values } => {
                if values.is_empty() {
                    return bad("values", "needs at least one value".into());
                }
                for (i, &v) in values.iter().enumerate() {
                    pos(&format!("values[{i}]"), v)?;
                }
                CostDist::Empirical(values.clone().into())
            }
            CostSpec::Histogram { bins } => {
                if bins.is_empty() {
                    return bad("bins", "needs at least one [low, high, weight] bin".into());
                }
                let mut total = 0.0;
                for (i, &[lo, hi, w]) in bins.iter().enumerate() {
                    let f = format!("bins[{i}]");
                    if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && hi >= lo) {
                        return bad(&f, format!("needs 0 < low ≤ high, got [{lo}, {hi}]"));
                    }
                    nonneg(&f, w)?;
                    total += w;
                }
                if total <= 0.0 {
                    return bad("bins", "the weights sum to 0".into());
                }
                let mut acc = 0.0;
                let cum: Vec<f64> = bins
                    .iter()
                    .map(|b| {
                        acc += b[2];
                        acc / total
                    })
                    .collect();
                CostDist::Histogram {
                    bins: bins.iter().map(|b| (b[0], b[1])).collect(),
                    cum: cum.into(),
                }
            }
            CostSpec::Pooled => CostDist::Pooled,
        })
    }
}

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

/// How a tenant's requests arrive, resolved.
#[derive(Clone, Debug, PartialEq)]
pub enum Arrival {
    /// Always `outstanding` requests in the system; GPS sees infinite demand.
    Backlogged {
        /// Outstanding requests.
        outstanding: usize,
    },
    /// Poisson.
    Poisson {
        /// Requests per second.
        rate: f64,
    },
    /// Poisson while ON.
    OnOff {
        /// Requests per second while ON.
        rate: f64,
        /// Mean ON seconds.
        on: f64,
        /// Mean OFF seconds.
        off: f64,
        /// ON and OFF last exactly `on` and `off` seconds, starting ON.
        periodic: bool,
    },
    /// Closed loop.
    Closed {
        /// Clients.
        clients: usize,
        /// Mean think seconds.
        think: f64,
    },
    /// Trace rows (time-sorted, already sped up).
    Trace(Arc<[TraceRow]>),
}

impl Arrival {
    /// Mean requests per second offered (closed loops and backlogged: unknown, NaN).
    pub fn mean_rate(&self) -> f64 {
        match self {
            Arrival::Poisson { rate } => *rate,
            Arrival::OnOff { rate, on, off, .. } => rate * on / (on + off),
            Arrival::Trace(rows) => match (rows.first(), rows.last()) {
                (Some(a), Some(b)) if b.time > a.time => rows.len() as f64 / (b.time - a.time),
                _ => f64::NAN,
            },
            _ => f64::NAN,
        }
    }
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
) -> Result<Vec<ClassDef>, (String, String)> {
    let total: f64 = specs.iter().map(|c| c.1).sum();
    if !(total.is_finite() && total > 0.0) {
        return Err((
            "class".into(),
            "class shares must be ≥ 0 and sum to more than 0".into(),
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

/// Resolve one member (`index`) of a `[[tenant]]` group. Errors are `(field, message)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tenant_def(
    t: &TenantSpec,
    name: String,
    index: usize,
    seed: u64,
    server: &ServerSpec,
    speed: f64,
    classes: &mut ClassTable,
    traces: &mut TraceCache,
    dir: &Path,
) -> Result<TenantDef, (String, String)> {
    let stream = crate::rng::stream_id(&name);
    let template = match &t.template {
        None => None,
        Some(tpl) => {
            let mut rng = Rng::new(
                seed ^ 0x7E3A_11C0,
                crate::rng::stream_id(&t.name) ^ index as u64,
            );
            Some(production::template(tpl, &mut rng).map_err(|m| ("template".to_string(), m))?)
        }
    };
    // Classes: explicit [[tenant.class]] entries, or one `cost`, or the template's. A pooled
    // tenant keeps its template's classes only to know its own offered load.
    if !t.class.is_empty() && t.cost.is_some() {
        return Err((
            "cost".into(),
            "give either `cost` or [[tenant.class]] entries, not both".into(),
        ));
    }
    let cost = match &t.cost {
        Some(c) => Some(CostDist::from_spec(c).map_err(|(f, m)| (format!("cost.{f}"), m))?),
        None => None,
    };
    let pooled = cost == Some(CostDist::Pooled);
    let mut class_specs: Vec<(String, f64, CostDist)> = Vec::new();
    for (
        i,
        ClassSpec {
            name: cname,
            share,
            cost,
        },
    ) in t.class.iter().enumerate()
    {
        if !(share.is_finite() && *share >= 0.0) {
            return Err((
                format!("class[{i}].share"),
                format!("must be a finite number ≥ 0, got {share}"),
            ));
        }
        let dist =
            CostDist::from_spec(cost).map_err(|(f, m)| (format!("class[{i}].cost.{f}"), m))?;
        if dist == CostDist::Pooled {
            return Err((
                format!("class[{i}].cost.kind"),
                "pooled is a whole-tenant cost: use `cost = { kind = \"pooled\" }`".into(),
            ));
        }
        let cname = cname.clone().unwrap_or_else(|| format!("{}/{i}", t.name));
        class_specs.push((cname, *share, dist));
    }
    match (&cost, &template) {
        (Some(d), _) if !pooled => class_specs.push((t.name.clone(), 1.0, d.clone())),
        (_, Some(tp)) if class_specs.is_empty() => class_specs = tp.classes.clone(),
        _ => {}
    }

    let arrival = match (&t.arrival, &template) {
        (Some(a), _) => arrival_def(a, t, server, speed, classes, traces, dir)?,
        (None, Some(tp)) => scale(tp.arrival.clone(), speed),
        (None, None) => {
            return Err((
                "arrival".into(),
                "missing: give `arrival = { kind = ... }` or a `template`".into(),
            ))
        }
    };
    let is_trace = matches!(arrival, Arrival::Trace(_));
    if class_specs.is_empty() && !pooled && !is_trace {
        return Err((
            "cost".into(),
            "missing: give `cost`, [[tenant.class]] entries or a `template`".into(),
        ));
    }
    if is_trace && (pooled || !t.class.is_empty() || t.cost.is_some()) {
        return Err((
            "cost".into(),
            "trace tenants take their costs from the trace; remove `cost`/`class`".into(),
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

fn scale(a: Arrival, speed: f64) -> Arrival {
    match a {
        Arrival::Poisson { rate } => Arrival::Poisson { rate: rate * speed },
        Arrival::OnOff {
            rate,
            on,
            off,
            periodic,
        } => Arrival::OnOff {
            rate: rate * speed,
            on,
            off,
            periodic,
        },
        other => other,
    }
}

fn arrival_def(
    a: &ArrivalSpec,
    t: &TenantSpec,
    server: &ServerSpec,
    speed: f64,
    classes: &mut ClassTable,
    traces: &mut TraceCache,
    dir: &Path,
) -> Result<Arrival, (String, String)> {
    let pos = |f: &str, x: f64| -> Result<f64, (String, String)> {
        if x.is_finite() && x > 0.0 {
            Ok(x)
        } else {
            Err((
                format!("arrival.{f}"),
                format!("must be a finite number > 0, got {x}"),
            ))
        }
    };
    Ok(match a {
        ArrivalSpec::Backlogged { outstanding } => {
            let k = outstanding.unwrap_or(server.default_outstanding());
            if k == 0 || k > 1_000_000 {
                return Err((
                    "arrival.outstanding".into(),
                    format!("must be between 1 and 1000000, got {k}"),
                ));
            }
            Arrival::Backlogged { outstanding: k }
        }
        ArrivalSpec::Poisson { rate } => Arrival::Poisson {
            rate: pos("rate", *rate)? * speed,
        },
        ArrivalSpec::OnOff {
            rate,
            on,
            off,
            periodic,
        } => Arrival::OnOff {
            rate: pos("rate", *rate)? * speed,
            on: pos("on", *on)?,
            off: pos("off", *off)?,
            periodic: *periodic,
        },
        ArrivalSpec::Closed { clients, think } => {
            if *clients == 0 || *clients > 1_000_000 {
                return Err((
                    "arrival.clients".into(),
                    format!("must be between 1 and 1000000, got {clients}"),
                ));
            }
            if !(think.is_finite() && *think >= 0.0) {
                return Err((
                    "arrival.think".into(),
                    format!("must be a finite number ≥ 0, got {think}"),
                ));
            }
            Arrival::Closed {
                clients: *clients,
                think: *think,
            }
        }
        ArrivalSpec::Trace { file, tenant } => {
            let path = dir.join(file);
            let parsed = match traces.files.get(&path) {
                Some(p) => p.clone(),
                None => {
                    let p =
                        Arc::new(trace::load(&path).map_err(|m| ("arrival.file".to_string(), m))?);
                    traces.files.insert(path.clone(), p.clone());
                    p
                }
            };
            let who = tenant.clone().unwrap_or_else(|| t.name.clone());
            let rows = parsed.get(&who).ok_or_else(|| {
                (
                    "arrival.tenant".to_string(),
                    format!("trace {} has no rows for tenant {who:?}", path.display()),
                )
            })?;
            Arrival::Trace(
                rows.iter()
                    .map(|(time, class, cost)| TraceRow {
                        time: time / speed,
                        class: classes.id(class),
                        cost: *cost,
                    })
                    .collect(),
            )
        }
    })
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
            t.arrival = match t.arrival.clone() {
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
            };
        }
        t.pool = Some(pool.clone());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::rng::Rng;
    use crate::SpecFile;

    /// The engine draws a one-class tenant's requests through `simple_draw` (its law kept in
    /// the tenant's hot cache line); every other tenant through `TenantDef::draw`. Both must
    /// give the same classes and the same cost bits from the same stream.
    #[test]
    fn the_simple_draw_is_the_tenant_draw_bit_for_bit() {
        let spec = SpecFile::parse(
            r#"
            name = "laws"
            duration = 1.0
            schedulers = ["wfq"]
            [server]
            workers = 2
            rate = 1000.0
            [[tenant]]
            name = "constant"
            arrival = { kind = "backlogged" }
            cost = { kind = "constant", value = 3.0 }
            [[tenant]]
            name = "normal"
            arrival = { kind = "backlogged" }
            cost = { kind = "normal", mean = 1.0, std = 0.9 }
            [[tenant]]
            name = "lognormal"
            arrival = { kind = "poisson", rate = 5.0 }
            cost = { kind = "lognormal", mean = 10.0, cov = 2.0 }
            [[tenant]]
            name = "exponential"
            arrival = { kind = "poisson", rate = 5.0 }
            cost = { kind = "exponential", mean = 4.0 }
            [[tenant]]
            name = "uniform"
            arrival = { kind = "poisson", rate = 5.0 }
            cost = { kind = "uniform", min = 1.0, max = 9.0 }
            [[tenant]]
            name = "empirical"
            arrival = { kind = "poisson", rate = 5.0 }
            cost = { kind = "empirical", values = [1.0, 2.0, 7.0] }
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
            "laws.toml",
            ".".into(),
        )
        .unwrap();
        let scenarios = spec.scenarios().unwrap();
        let tenants = &scenarios[0].tenants;
        let simple: Vec<bool> = tenants.iter().map(|t| t.simple_draw().is_some()).collect();
        assert_eq!(simple, [true, true, true, true, true, false, false]);
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
