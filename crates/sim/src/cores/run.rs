//! One database-server run: connections and bursts in front of the reservation scheduler,
//! which feeds the [`Cores`] service, on the simulator's one event queue and run loop.

use fairlane_core::reserve::{jain_index, MeterRecord, Policy, ReserveConfig, ReserveScheduler};
use fairlane_core::{Decision, Inspect, Request, Scheduler, TenantId, Ticket};

use super::spec::{DbSpec, DbSweep, DbWorkload};
use crate::error::{SimError, SimErrorKind};
use crate::events::{drive, EventQueue, Model, MAX_OUTSTANDING};
use crate::rng::{stream_id, Rng};
use crate::sched;
use crate::service::{Cores, Outcome, Service, Work};

/// One tenant's results over the measured part of a run.
#[derive(Clone, Debug)]
pub struct DbTenantResult {
    /// Name.
    pub name: String,
    /// Group (the spec's tenant name).
    pub group: String,
    /// `ResCPU` (%).
    pub res: f64,
    /// Mean and standard deviation of CPU (%) over the measured metering intervals.
    pub cpu_mean: f64,
    /// See `cpu_mean`.
    pub cpu_std: f64,
    /// Mean `ResCPU − CPU_eff` in percentage points, floored at 0 (the paper's "% violation").
    pub viol_points: f64,
    /// Its standard deviation.
    pub viol_points_std: f64,
    /// Mean `ViolCPU`.
    pub viol_cpu: f64,
    /// Fraction of its measured intervals with the reservation violated.
    pub violated: f64,
    /// Fraction of its measured intervals with the elastic burst violated (elastic only).
    pub burst_violated: Option<f64>,
    /// Queries completed after the warm-up.
    pub queries: usize,
    /// Mean and 99th percentile query latency (s).
    pub latency_mean: f64,
    /// See `latency_mean`.
    pub latency_p99: f64,
    /// Standard deviation of query latency (s).
    pub latency_std: f64,
    /// Price over the measured intervals, and refunds (Σ PF(ViolCPU) × price).
    pub revenue_max: f64,
    /// See `revenue_max`.
    pub refund: f64,
}

/// One run: a sweep point under one scheduler.
#[derive(Clone, Debug)]
pub struct DbRun {
    /// The sweep label (empty without a sweep).
    pub label: String,
    /// The scheduler's name.
    pub scheduler: String,
    /// Per tenant, in spec order.
    pub tenants: Vec<DbTenantResult>,
    /// Every closed metering interval after the warm-up.
    pub records: Vec<MeterRecord>,
    /// Mean server utilization (%) after the warm-up.
    pub utilization: f64,
    /// Dispatches (quanta), and tenants examined by the policy (its work, §6.6).
    pub dispatches: u64,
    /// See `dispatches`.
    pub examined: u64,
    /// Jain's index over the reserved tenants' mean `ViolCPU`.
    pub jain: f64,
    /// Events processed.
    pub events: u64,
    /// Wall-clock seconds of the run (the only field that is not deterministic).
    pub wall_seconds: f64,
}

impl DbRun {
    /// A tenant by name.
    pub fn tenant(&self, name: &str) -> Option<&DbTenantResult> {
        self.tenants.iter().find(|t| t.name == name)
    }
}

/// Run every sweep point under every scheduler, `jobs` at a time; results sweep-major, then
/// scheduler order.
pub fn run_all(spec: &DbSpec, jobs: usize) -> Result<Vec<DbRun>, SimError> {
    run_all_with(spec, jobs, &mut |_| {})
}

/// [`run_all`] reporting the batch's progress.
pub fn run_all_with(
    spec: &DbSpec,
    jobs: usize,
    progress: &mut (dyn FnMut(crate::batch::BatchProgress) + Send),
) -> Result<Vec<DbRun>, SimError> {
    let mut tasks = Vec::new();
    for p in &spec.points() {
        let policies = spec
            .policies(p.and_then(|s| s.alpha))
            .map_err(|m| SimError::spec(format!("{}: schedulers: {m}", spec.name)))?;
        for (name, policy) in policies {
            tasks.push((*p, name, policy));
        }
    }
    crate::batch::parallel(tasks.len(), jobs, progress, |i, report| {
        let (point, name, policy) = &tasks[i];
        run_one(spec, *point, name, *policy, report)
    })
}

/// A query (or one of its remaining quanta) in the scheduler.
#[derive(Clone, Copy, Debug)]
struct Task {
    tenant: usize,
    conn: usize,
    left: f64,
    issued: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Ev {
    /// A connection issues its next query.
    Issue { tenant: usize, conn: usize },
    /// A bursty tenant's burst starts.
    Burst { tenant: usize },
    /// A core's quantum ends (the [`Cores`] service's event).
    Core(u32),
    /// The scheduler asked to be asked again.
    Retry,
}

struct Inst {
    name: String,
    group: String,
    spec: usize,
    rng: Rng,
    latencies: Vec<f64>,
    /// Bursty: queries of the current burst not yet issued.
    burst_left: usize,
}

/// One database-server run: connections and bursts in front of the reservation scheduler,
/// which feeds the [`Cores`] service.
struct DbSim<'a> {
    spec: &'a DbSpec,
    s: ReserveScheduler<Task>,
    queue: EventQueue<Ev>,
    cores: Cores,
    insts: Vec<Inst>,
    busy: Vec<Option<(Ticket, f64, Task)>>,
    idle: usize,
    retry_at: f64,
    dispatches: u64,
    busy_time: f64,
    err: &'a dyn Fn(fairlane_core::Error) -> SimError,
}

impl DbSim<'_> {
    fn quantum_of(&self, tenant: usize) -> f64 {
        self.spec.tenant[self.insts[tenant].spec].workload.quantum()
    }
}

impl Model for DbSim<'_> {
    type Event = Ev;
    // Same-instant events first, then the idle cores pick.
    const SETTLES: bool = true;

    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.queue
    }

    fn handle(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        let spec = self.spec;
        let e = self.err;
        match ev {
            Ev::Issue { tenant, conn } => {
                let inst = &mut self.insts[tenant];
                let demand = spec.tenant[inst.spec]
                    .workload
                    .demand()
                    .sample(&mut inst.rng);
                let task = Task {
                    tenant,
                    conn,
                    left: demand.max(1e-6),
                    issued: now,
                };
                if self.s.queued() >= MAX_OUTSTANDING {
                    return Err(SimError::overload(format!(
                        "more than {MAX_OUTSTANDING} queries queued at t = {now:.6} s"
                    )));
                }
                self.s
                    .enqueue(Request::new(tenant as u64, 0u32, task), now)
                    .map_err(e)?;
            }
            Ev::Burst { tenant } => {
                let inst = &mut self.insts[tenant];
                if let DbWorkload::Bursty {
                    period,
                    queries,
                    connections,
                    ..
                } = spec.tenant[inst.spec].workload
                {
                    // A burst still running absorbs the next one's queries.
                    let start_conns = if inst.burst_left == 0 { connections } else { 0 };
                    inst.burst_left += queries;
                    let gap = period * (0.5 + 0.5 * inst.rng.uniform());
                    self.queue.push(now + gap, Ev::Burst { tenant });
                    for c in 0..start_conns.min(queries) {
                        self.insts[tenant].burst_left -= 1;
                        self.queue.push(now, Ev::Issue { tenant, conn: c });
                    }
                }
            }
            Ev::Core(core) => {
                let q = &mut self.queue;
                let outcome = self
                    .cores
                    .fire(core, now, &mut |t, i| q.push(t, Ev::Core(i)));
                let (slot, left) = match outcome {
                    Outcome::Done { slot } => (slot, 0.0),
                    Outcome::Yield { slot, left, .. } => (slot, left),
                    Outcome::Nothing => return Ok(()),
                };
                if let Some((ticket, start, mut task)) = self.busy[slot as usize].take() {
                    self.idle += 1;
                    let used = now - start;
                    if now > spec.warmup {
                        self.busy_time += now - start.max(spec.warmup);
                    }
                    self.s.complete(ticket, used, now).map_err(e)?;
                    if left > 0.0 {
                        task.left = left;
                        self.s
                            .enqueue(Request::new(task.tenant as u64, 0u32, task), now)
                            .map_err(e)?;
                    } else {
                        self.query_done(task, now);
                    }
                }
            }
            Ev::Retry => {
                if self.retry_at <= now {
                    self.retry_at = f64::INFINITY;
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self, now: f64) -> Result<(), SimError> {
        let e = self.err;
        for core in 0..self.busy.len() {
            if self.idle == 0 {
                break;
            }
            if self.busy[core].is_some() {
                continue;
            }
            match self.s.dequeue(core, now).map_err(e)? {
                Decision::Run(d) => {
                    let task = d.request.payload;
                    let work = Work {
                        cost: task.left,
                        quantum: self.quantum_of(task.tenant),
                        ..Work::default()
                    };
                    let q = &mut self.queue;
                    self.cores
                        .begin(core as u32, work, now, &mut |t, i| q.push(t, Ev::Core(i)));
                    self.busy[core] = Some((d.ticket, now, task));
                    self.idle -= 1;
                    self.dispatches += 1;
                }
                Decision::RetryAt(t) => {
                    if t < self.retry_at {
                        self.retry_at = t;
                        self.queue.push(t, Ev::Retry);
                    }
                    break;
                }
                Decision::Empty => break,
            }
        }
        Ok(())
    }
}

impl DbSim<'_> {
    /// A query finished: record it; its connection thinks and issues the next.
    fn query_done(&mut self, task: Task, now: f64) {
        let spec = self.spec;
        let inst = &mut self.insts[task.tenant];
        if task.issued >= spec.warmup {
            inst.latencies.push(now - task.issued);
        }
        match spec.tenant[inst.spec].workload {
            DbWorkload::Closed { think, .. } => {
                let at = now + think.sample(&mut inst.rng);
                self.queue.push(
                    at,
                    Ev::Issue {
                        tenant: task.tenant,
                        conn: task.conn,
                    },
                );
            }
            DbWorkload::Bursty { .. } => {
                if inst.burst_left > 0 {
                    inst.burst_left -= 1;
                    self.queue.push(
                        now,
                        Ev::Issue {
                            tenant: task.tenant,
                            conn: task.conn,
                        },
                    );
                }
            }
        }
    }
}

/// Expected events of a run (an upper estimate for the up-front limit): every connection
/// issuing back to back, every query cut into quanta, bursts.
fn estimated_events(spec: &DbSpec) -> f64 {
    let cores = spec.server.cores as f64;
    let mut quanta_per_s = 0.0f64;
    let mut issues_per_s = 0.0f64;
    for t in &spec.tenant {
        let n = t.count as f64;
        let (q, d) = match t.workload {
            DbWorkload::Closed {
                quantum, demand, ..
            } => (quantum, demand.mean()),
            DbWorkload::Bursty {
                quantum,
                demand,
                period,
                queries,
                ..
            } => {
                issues_per_s += n * queries as f64 / period;
                (quantum, demand.mean())
            }
        };
        // The cores finish at most `cores / min(q, d)` quanta per second.
        quanta_per_s = quanta_per_s.max(cores / q.min(d.max(1e-6)));
    }
    let tenants: usize = spec.tenant.iter().map(|t| t.count).sum();
    let intervals = spec
        .tenant
        .iter()
        .filter_map(|t| t.interval)
        .fold(spec.interval, f64::min);
    // Metering closes every tenant's interval.
    spec.duration * (2.0 * quanta_per_s + issues_per_s + tenants as f64 / intervals)
}

fn run_one(
    spec: &DbSpec,
    point: Option<&DbSweep>,
    sched_name: &str,
    policy: Policy,
    progress: &mut dyn FnMut(f64),
) -> Result<DbRun, SimError> {
    let wall = std::time::Instant::now();
    let err = |x: fairlane_core::Error| {
        SimError::new(
            SimErrorKind::Scheduler,
            format!("{}: {sched_name}: {x}", spec.name),
        )
    };
    check_estimate(spec)?;
    let config = ReserveConfig::new(policy)
        .cores(spec.server.cores)
        .interval(spec.interval)
        .utilization_cap(spec.utilization_cap);
    let mut s: ReserveScheduler<Task> = sched::build_reserve(config).map_err(err)?;
    let (mut insts, spec_pos) = instances(spec, point);
    for (i, inst) in insts.iter().enumerate() {
        let terms = spec.tenant[inst.spec].terms();
        s.set_reservation(TenantId(i as u64), terms, 0.0)
            .map_err(err)?;
    }
    let queue = first_events(spec, &mut insts);
    let cores = spec.server.cores;
    let mut sim = DbSim {
        spec,
        s,
        queue,
        cores: Cores::new(cores),
        insts,
        busy: vec![None; cores],
        idle: cores,
        retry_at: f64::INFINITY,
        dispatches: 0,
        busy_time: 0.0,
        err: &err,
    };
    drive(&mut sim, spec.duration, spec.max_events, progress)?;
    let mut run = sim.finish()?;
    run.reorder_to_spec(&spec_pos);
    run.label = point.map(|p| p.label.clone()).unwrap_or_default();
    run.scheduler = sched_name.to_string();
    run.wall_seconds = wall.elapsed().as_secs_f64();
    Ok(run)
}

/// Refuse a run whose estimated events exceed its cap.
fn check_estimate(spec: &DbSpec) -> Result<(), SimError> {
    let estimate = estimated_events(spec);
    if estimate.is_nan() || estimate > spec.max_events as f64 {
        return Err(SimError::event_cap(format!(
            "{}: refused: about {estimate:.3e} events (quanta of the shortest quantum on {} \
             cores for {} s) exceed the cap of {} (raise it with --max-events)",
            spec.name, spec.server.cores, spec.duration, spec.max_events
        )));
    }
    Ok(())
}

/// The tenants of a point, sorted by name, and each one's position in spec order. The run
/// works on the tenants sorted by name (their ids in the scheduler, the order their first
/// events are scheduled in), so it does not depend on the spec's order; the results go back
/// to spec order at the end.
fn instances(spec: &DbSpec, point: Option<&DbSweep>) -> (Vec<Inst>, Vec<usize>) {
    let mut insts: Vec<Inst> = Vec::new();
    for (k, t) in spec.tenant.iter().enumerate() {
        let count = point
            .and_then(|p| p.counts.get(&t.name).copied())
            .unwrap_or(t.count);
        for j in 0..count {
            let name = if t.count == 1 && count == 1 {
                t.name.clone()
            } else {
                format!("{}-{j}", t.name)
            };
            insts.push(Inst {
                rng: Rng::new(spec.seed, stream_id(&name)),
                name,
                group: t.name.clone(),
                spec: k,
                latencies: Vec::new(),
                burst_left: 0,
            });
        }
    }
    let mut spec_pos: Vec<usize> = (0..insts.len()).collect();
    spec_pos.sort_by(|&a, &b| insts[a].name.cmp(&insts[b].name).then(a.cmp(&b)));
    let mut slots: Vec<Option<Inst>> = insts.into_iter().map(Some).collect();
    let insts = spec_pos
        .iter()
        .map(|&p| slots[p].take().expect("a permutation"))
        .collect();
    (insts, spec_pos)
}

/// Each connection's first query, each bursty tenant's first burst.
fn first_events(spec: &DbSpec, insts: &mut [Inst]) -> EventQueue<Ev> {
    let mut queue = EventQueue::default();
    for (i, inst) in insts.iter_mut().enumerate() {
        match spec.tenant[inst.spec].workload {
            DbWorkload::Closed {
                connections, think, ..
            } => {
                for c in 0..connections {
                    let at = think.sample(&mut inst.rng);
                    queue.push(at, Ev::Issue { tenant: i, conn: c });
                }
            }
            DbWorkload::Bursty { period, .. } => {
                let at = period * inst.rng.uniform();
                queue.push(at, Ev::Burst { tenant: i });
            }
        }
    }
    queue
}

impl DbSim<'_> {
    /// Close the metering and measure each tenant (in name order; label, scheduler and wall
    /// time are the caller's).
    fn finish(self) -> Result<DbRun, SimError> {
        let spec = self.spec;
        let end = spec.duration;
        let DbSim {
            mut s,
            mut insts,
            busy,
            mut busy_time,
            dispatches,
            queue,
            err,
            ..
        } = self;
        // Count the quanta still running at the end.
        for (_, start, _) in busy.iter().flatten() {
            busy_time += end - start.max(spec.warmup);
        }
        s.close_intervals(end).map_err(err)?;
        let records: Vec<MeterRecord> = s
            .take_records()
            .into_iter()
            .filter(|r| r.start >= spec.warmup - 1e-9)
            .collect();
        let mut viols = Vec::new();
        let tenants: Vec<DbTenantResult> = insts
            .iter_mut()
            .enumerate()
            .map(|(i, inst)| {
                let t = tenant_result(spec, inst, i, &records);
                if t.res > 0.0 {
                    viols.push(t.viol_cpu);
                }
                t
            })
            .collect();
        Ok(DbRun {
            label: String::new(),
            scheduler: String::new(),
            tenants,
            records,
            utilization: busy_time * 100.0 / (spec.server.cores as f64 * (end - spec.warmup)),
            dispatches,
            examined: s.examined(),
            jain: jain_index(&viols).unwrap_or(f64::NAN),
            events: queue.events(),
            wall_seconds: 0.0,
        })
    }
}

/// What tenant `i` (in name order) got over the measured metering intervals.
fn tenant_result(
    spec: &DbSpec,
    inst: &mut Inst,
    i: usize,
    records: &[MeterRecord],
) -> DbTenantResult {
    let terms = spec.tenant[inst.spec].terms();
    let recs: Vec<&MeterRecord> = records
        .iter()
        .filter(|r| r.tenant == TenantId(i as u64))
        .collect();
    let (cpu_mean, cpu_std) = mean_std(recs.iter().map(|r| r.cpu));
    let (viol_points, viol_points_std) =
        mean_std(recs.iter().map(|r| (r.res_cpu - r.cpu_eff).max(0.0)));
    let (viol_cpu, _) = mean_std(recs.iter().map(|r| r.viol_cpu));
    let n = recs.len().max(1) as f64;
    let violated = recs.iter().filter(|r| r.violated).count() as f64 / n;
    let burst_violated = terms.elastic.map(|_| {
        recs.iter()
            .filter(|r| r.burst_violated == Some(true))
            .count() as f64
            / n
    });
    let refund: f64 = recs
        .iter()
        .map(|r| terms.penalty.refund(r.viol_cpu) * terms.price)
        .sum();
    // Price is due for every measured interval of the tenant's length.
    let len = terms.interval.unwrap_or(spec.interval);
    let intervals = ((spec.duration - spec.warmup) / len).floor();
    let lat = &mut inst.latencies;
    let (latency_mean, latency_std) = mean_std(lat.iter().copied());
    lat.sort_by(f64::total_cmp);
    let latency_p99 = if lat.is_empty() {
        f64::NAN
    } else {
        lat[((lat.len() - 1) as f64 * 0.99).round() as usize]
    };
    DbTenantResult {
        name: inst.name.clone(),
        group: inst.group.clone(),
        res: terms.res_cpu,
        cpu_mean,
        cpu_std,
        viol_points,
        viol_points_std,
        viol_cpu,
        violated,
        burst_violated,
        queries: lat.len(),
        latency_mean,
        latency_p99,
        latency_std,
        revenue_max: terms.price * intervals,
        refund,
    }
}

impl DbRun {
    /// Back to spec order: tenants by their spec position (`spec_pos[i]` of the `i`-th in
    /// name order), records naming it.
    fn reorder_to_spec(&mut self, spec_pos: &[usize]) {
        let mut by_pos: Vec<Option<DbTenantResult>> =
            (0..self.tenants.len()).map(|_| None).collect();
        for (i, t) in std::mem::take(&mut self.tenants).into_iter().enumerate() {
            by_pos[spec_pos[i]] = Some(t);
        }
        self.tenants = by_pos.into_iter().flatten().collect();
        for r in &mut self.records {
            r.tenant = TenantId(spec_pos[r.tenant.0 as usize] as u64);
        }
    }
}

fn mean_std(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = xs.filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n;
    (m, var.sqrt())
}
