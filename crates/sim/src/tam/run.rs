//! The TAM service model: one [`Model`] over several stages and the hosts' shared
//! resources (crates/sim/src/service.rs describes the shape).
//!
//! A request walks its type's path. At each visit it waits for a thread of the stage (an
//! on-demand stage starts one; a bounded stage's queue orders the waiting requests by its
//! scheduler, or by arrival when the stage is general or ordered), then uses the host's
//! resources in order, each a FIFO of parallel units shared by every stage on the host.
//! When its resource uses are done the visit ends; the thread is freed at once, or, when the
//! stage `blocks_on` a stage later in the path, when that visit is released.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

use fairlane_core::{Decision, Request, Scheduler, TenantId, Ticket};

use super::result::{ClientResult, StageResult, TamRun};
use super::spec::{knows_costs, Loop, Queue, StageDef, TamSpec};
use crate::error::{SimError, SimErrorKind};
use crate::events::{drive, EventQueue, Model};
use crate::metrics::Latency;
use crate::rng::{stream_id, Rng};

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A closed-loop thread of client `c` issues a request.
    Issue(u32),
    /// The next open arrival of client `c`.
    Arrive(u32),
    /// Request `r`'s current resource use ends.
    StepDone(u32),
    /// The end of a sampling interval.
    Sample,
}

enum StageQueue {
    Fifo(VecDeque<u32>),
    Priority(BinaryHeap<Reverse<(i64, u64, u32)>>),
    Core(Box<dyn Scheduler<u32> + Send>, bool),
}

struct StageState {
    def: StageDef,
    free: Vec<u32>,
    queue: StageQueue,
    queued: u32,
    busy: u32,
    blocked: u32,
    seq: u64,
    // Measurements after the warm-up.
    visits: Vec<u64>,
    thread_seconds: Vec<f64>,
    series: Vec<(f64, u32, u32, u32)>,
    queue_sum: f64,
    blocked_sum: f64,
    samples: u64,
    queue_max: u32,
}

struct ResState {
    free: u32,
    waiting: VecDeque<(u32, f64)>,
    busy_seconds: f64,
}

#[derive(Clone, Debug, Default)]
struct Req {
    client: u32,
    rtype: u32,
    visit: u32,
    step: u32,
    issued: f64,
    visit_start: f64,
    thread: u32,
    ticket: Option<Ticket>,
    /// Threads held by blocked visits: (stage, thread, release point).
    held: Vec<(u32, u32, u32)>,
}

struct ClientState {
    rng: Rng,
    latency: Latency,
    interval: Latency,
    interval_done: u64,
    completed: u64,
    by_type: Vec<u64>,
    series: Vec<(f64, f64, f64, f64)>,
}

struct Sim<'a> {
    spec: &'a TamSpec,
    queue: EventQueue<Ev>,
    visits_done: u64,
    stages: Vec<StageState>,
    res: Vec<ResState>,
    reqs: Vec<Req>,
    free_reqs: Vec<u32>,
    clients: Vec<ClientState>,
    /// Scheduled events other than samples (a deadlock leaves none).
    pending: u64,
    outstanding: u64,
    /// Stages whose threads a visit's end freed (a buffer kept to avoid allocating).
    freed: Vec<usize>,
}

/// Run every scheduler of the spec (`schedulers`), one run each, `jobs` at a time.
pub fn run_all(
    spec: &TamSpec,
    jobs: usize,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Vec<TamRun>, SimError> {
    run_points(
        &[(String::new(), spec.clone())],
        jobs,
        &mut |p: crate::batch::BatchProgress| progress(p.fraction),
    )
}

/// Run every labelled point under each of its schedulers, `jobs` runs at a time; results
/// point-major, then scheduler order.
pub fn run_points(
    points: &[(String, TamSpec)],
    jobs: usize,
    progress: &mut (dyn FnMut(crate::batch::BatchProgress) + Send),
) -> Result<Vec<TamRun>, SimError> {
    let tasks: Vec<(&str, &TamSpec, usize)> = points
        .iter()
        .flat_map(|(label, spec)| {
            (0..spec.schedulers.len()).map(move |i| (label.as_str(), spec, i))
        })
        .collect();
    crate::batch::parallel(tasks.len(), jobs, progress, |i, report| {
        let (label, spec, k) = tasks[i];
        let mut r = run(spec, k, report)?;
        r.label = label.to_string();
        Ok(r)
    })
}

/// Run `spec` with `spec.schedulers[run]` at the pluggable stages without their own.
pub fn run(spec: &TamSpec, run: usize, progress: &mut dyn FnMut(f64)) -> Result<TamRun, SimError> {
    let started = Instant::now();
    let nc = spec.clients.len();
    let mut stages = Vec::new();
    for def in spec.stages_for(run) {
        let threads = def.threads.unwrap_or(0);
        let queue = match &def.queue {
            Queue::Fifo => StageQueue::Fifo(VecDeque::new()),
            Queue::Priority => StageQueue::Priority(BinaryHeap::new()),
            Queue::Core(c) => {
                let mut s = crate::sched::build::<u32>(c, threads.max(1) as usize)
                    .map_err(|e| sched_err(&def, e))?;
                for (i, c) in spec.clients.iter().enumerate() {
                    let t = TenantId(i as u64);
                    s.set_weight(t, c.weight, 0.0)
                        .and_then(|_| s.set_target(t, c.deadline, 0.0))
                        .map_err(|e| {
                            SimError::scheduler(e).context(format_args!("stage `{}`", def.name))
                        })?;
                }
                StageQueue::Core(s, knows_costs(c))
            }
        };
        stages.push(StageState {
            free: (0..threads).rev().collect(),
            queue,
            queued: 0,
            busy: 0,
            blocked: 0,
            seq: 0,
            visits: vec![0; nc],
            thread_seconds: vec![0.0; nc],
            series: Vec::new(),
            queue_sum: 0.0,
            blocked_sum: 0.0,
            samples: 0,
            queue_max: 0,
            def,
        });
    }
    let mut sim = Sim {
        spec,
        queue: EventQueue::default(),
        visits_done: 0,
        stages,
        res: spec
            .resources
            .iter()
            .map(|r| ResState {
                free: r.units,
                waiting: VecDeque::new(),
                busy_seconds: 0.0,
            })
            .collect(),
        reqs: Vec::new(),
        free_reqs: Vec::new(),
        clients: spec
            .clients
            .iter()
            .map(|c| ClientState {
                rng: Rng::new(spec.seed, stream_id(&c.name)),
                latency: Latency::default(),
                interval: Latency::default(),
                interval_done: 0,
                completed: 0,
                by_type: vec![0; spec.requests.len()],
                series: Vec::new(),
            })
            .collect(),
        pending: 0,
        outstanding: 0,
        freed: Vec::new(),
    };
    for (i, c) in spec.clients.iter().enumerate() {
        match c.kind {
            Loop::Closed { threads } => {
                for _ in 0..threads {
                    sim.at(0.0, Ev::Issue(i as u32));
                }
            }
            Loop::Open => {
                let gap = sim.clients[i].rng.exp(1.0 / c.phases[0].rate);
                sim.at(gap, Ev::Arrive(i as u32));
            }
        }
    }
    sim.queue.push(spec.interval, Ev::Sample);
    drive(&mut sim, spec.duration, spec.max_events, progress)?;
    Ok(sim.finish(run, started.elapsed().as_secs_f64()))
}

impl Model for Sim<'_> {
    type Event = Ev;
    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.queue
    }
    fn handle(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        match ev {
            Ev::Issue(c) => {
                self.pending -= 1;
                self.issue(c, now)
            }
            Ev::Arrive(c) => {
                self.pending -= 1;
                let ph = phase(self.spec, c, now);
                let gap = self.clients[c as usize].rng.exp(1.0 / ph.rate);
                self.at(now + gap, Ev::Arrive(c));
                self.issue(c, now)
            }
            Ev::StepDone(r) => {
                self.pending -= 1;
                self.step_done(r, now)
            }
            Ev::Sample => {
                self.sample(now);
                if self.pending == 0 && self.outstanding > 0 {
                    return Err(self.deadlock(now));
                }
                self.queue.push(now + self.spec.interval, Ev::Sample);
                Ok(())
            }
        }
    }
}

impl Sim<'_> {
    #[inline]
    fn at(&mut self, t: f64, ev: Ev) {
        self.pending += 1;
        self.queue.push(t, ev);
    }

    fn issue(&mut self, c: u32, now: f64) -> Result<(), SimError> {
        let u = self.clients[c as usize].rng.uniform();
        let mix = &phase(self.spec, c, now).mix;
        let rtype = mix
            .iter()
            .find(|(_, cum)| u < *cum)
            .unwrap_or(&mix[mix.len() - 1])
            .0;
        let id = match self.free_reqs.pop() {
            Some(id) => id,
            None => {
                self.reqs.push(Req::default());
                (self.reqs.len() - 1) as u32
            }
        };
        let r = &mut self.reqs[id as usize];
        r.client = c;
        r.rtype = rtype;
        r.visit = 0;
        r.issued = now;
        r.held.clear();
        self.outstanding += 1;
        if self.outstanding > crate::events::MAX_OUTSTANDING as u64 {
            return Err(SimError::overload(format!(
                "{}: more than {} requests outstanding at t = {now:.6} s: the offered load far \
                 exceeds what the architecture serves; lower the open clients' rates",
                self.spec.name,
                crate::events::MAX_OUTSTANDING
            )));
        }
        self.arrive_at_stage(id, now)
    }

    /// Request `id` reaches the stage of its current visit.
    fn arrive_at_stage(&mut self, id: u32, now: f64) -> Result<(), SimError> {
        let r = &self.reqs[id as usize];
        let visit = &self.spec.requests[r.rtype as usize].visits[r.visit as usize];
        let client = r.client;
        let si = visit.stage as usize;
        let st = &mut self.stages[si];
        if st.def.threads.is_none() {
            // On demand: a new thread, no queue.
            st.busy += 1;
            return self.start_visit(id, u32::MAX, now);
        }
        st.queued += 1;
        st.queue_max = st.queue_max.max(st.queued);
        match &mut st.queue {
            StageQueue::Fifo(q) => q.push_back(id),
            StageQueue::Priority(q) => {
                st.seq += 1;
                let p = self.spec.clients[client as usize].priority;
                q.push(Reverse((p, st.seq, id)));
            }
            StageQueue::Core(s, known) => {
                let mut req = Request::new(TenantId(client as u64), 0u32, id);
                if *known {
                    req = req.with_cost(visit.declared.max(1e-9));
                }
                let t = s.enqueue(req, now).map_err(|e| sched_err(&st.def, e))?;
                self.reqs[id as usize].ticket = Some(t);
            }
        }
        self.dispatch(si, now)
    }

    /// Give the stage's free threads queued requests.
    fn dispatch(&mut self, si: usize, now: f64) -> Result<(), SimError> {
        loop {
            let st = &mut self.stages[si];
            if st.queued == 0 {
                return Ok(());
            }
            let Some(&thread) = st.free.last() else {
                return Ok(());
            };
            let id = match &mut st.queue {
                StageQueue::Fifo(q) => q.pop_front(),
                StageQueue::Priority(q) => q.pop().map(|Reverse((_, _, id))| id),
                StageQueue::Core(s, _) => {
                    match s
                        .dequeue(thread as usize, now)
                        .map_err(|e| sched_err(&st.def, e))?
                    {
                        Decision::Run(d) => Some(d.request.payload),
                        // Schedulers here never idle on purpose (no limits are configured).
                        Decision::Empty | Decision::RetryAt(_) => None,
                    }
                }
            };
            let Some(id) = id else { return Ok(()) };
            st.free.pop();
            st.queued -= 1;
            st.busy += 1;
            self.start_visit(id, thread, now)?;
        }
    }

    fn start_visit(&mut self, id: u32, thread: u32, now: f64) -> Result<(), SimError> {
        let r = &mut self.reqs[id as usize];
        r.thread = thread;
        r.step = 0;
        r.visit_start = now;
        self.start_step(id, now)
    }

    /// Start the current resource use of request `id`, or end its visit.
    fn start_step(&mut self, id: u32, now: f64) -> Result<(), SimError> {
        let r = &self.reqs[id as usize];
        let visit = &self.spec.requests[r.rtype as usize].visits[r.visit as usize];
        let Some(step) = visit.steps.get(r.step as usize) else {
            return self.end_visit(id, now);
        };
        let seconds = match step.unknown {
            None => step.seconds,
            // Revealed only now that the thread runs: a cache hit or a miss.
            Some((ratio, hit, miss)) => {
                if self.clients[r.client as usize].rng.uniform() < ratio {
                    hit
                } else {
                    miss
                }
            }
        };
        let res = &mut self.res[step.resource as usize];
        if res.free > 0 {
            res.free -= 1;
            res.busy_seconds += seconds;
            self.at(now + seconds, Ev::StepDone(id));
        } else {
            res.waiting.push_back((id, seconds));
        }
        Ok(())
    }

    fn step_done(&mut self, id: u32, now: f64) -> Result<(), SimError> {
        let r = &mut self.reqs[id as usize];
        let visit = &self.spec.requests[r.rtype as usize].visits[r.visit as usize];
        let resource = visit.steps[r.step as usize].resource;
        r.step += 1;
        let res = &mut self.res[resource as usize];
        match res.waiting.pop_front() {
            Some((next, seconds)) => {
                res.busy_seconds += seconds;
                self.at(now + seconds, Ev::StepDone(next));
            }
            None => res.free += 1,
        }
        self.start_step(id, now)
    }

    fn end_visit(&mut self, id: u32, now: f64) -> Result<(), SimError> {
        self.visits_done += 1;
        let measured = now >= self.spec.warmup;
        let r = &mut self.reqs[id as usize];
        let (client, vi, thread) = (r.client, r.visit, r.thread);
        let path = &self.spec.requests[r.rtype as usize].visits;
        let visit = &path[vi as usize];
        let si = visit.stage as usize;
        let st = &mut self.stages[si];
        if measured {
            st.visits[client as usize] += 1;
            st.thread_seconds[client as usize] += now - r.visit_start;
        }
        if let (StageQueue::Core(s, known), Some(t)) = (&mut st.queue, r.ticket.take()) {
            // The scheduler learns what the request declared (oracle) or, estimating, the
            // thread time it took: a stage sees its threads, not the host's resources.
            let used = if *known {
                visit.declared.max(1e-9)
            } else {
                (now - r.visit_start).max(1e-9)
            };
            s.complete(t, used, now)
                .map_err(|e| sched_err(&st.def, e))?;
        }
        let mut freed = std::mem::take(&mut self.freed);
        freed.clear();
        if visit.release_after == vi {
            if thread != u32::MAX {
                st.free.push(thread);
            }
            st.busy -= 1;
            freed.push(si);
        } else {
            st.blocked += 1;
            r.held.push((si as u32, thread, visit.release_after));
        }
        // Threads of earlier visits blocked until this one.
        let mut k = 0;
        while k < r.held.len() {
            let (hs, ht, rel) = r.held[k];
            if rel == vi {
                r.held.swap_remove(k);
                let hst = &mut self.stages[hs as usize];
                if ht != u32::MAX {
                    hst.free.push(ht);
                }
                hst.busy -= 1;
                hst.blocked -= 1;
                freed.push(hs as usize);
            } else {
                k += 1;
            }
        }
        let last = vi as usize + 1 == path.len();
        if last {
            self.finish_request(id, now);
        } else {
            self.reqs[id as usize].visit += 1;
        }
        for &s in &freed {
            self.dispatch(s, now)?;
        }
        self.freed = freed;
        if !last {
            self.arrive_at_stage(id, now)?;
        }
        Ok(())
    }

    fn finish_request(&mut self, id: u32, now: f64) {
        let r = &self.reqs[id as usize];
        let c = r.client;
        let issued = r.issued;
        let rtype = r.rtype as usize;
        self.outstanding -= 1;
        self.free_reqs.push(id);
        let cs = &mut self.clients[c as usize];
        if now >= self.spec.warmup {
            cs.completed += 1;
            cs.by_type[rtype] += 1;
            cs.latency.record(now - issued);
        }
        cs.interval.record(now - issued);
        cs.interval_done += 1;
        if let Loop::Closed { .. } = self.spec.clients[c as usize].kind {
            let think = phase(self.spec, c, now).think;
            self.at(now + think, Ev::Issue(c));
        }
    }

    fn sample(&mut self, now: f64) {
        let dt = self.spec.interval;
        for cs in &mut self.clients {
            let lat = std::mem::take(&mut cs.interval);
            cs.series.push((
                now,
                cs.interval_done as f64 / dt,
                if lat.is_empty() { f64::NAN } else { lat.mean() },
                lat.quantile(0.99),
            ));
            cs.interval_done = 0;
        }
        let measured = now >= self.spec.warmup;
        for st in &mut self.stages {
            st.series.push((now, st.queued, st.blocked, st.busy));
            if measured {
                st.queue_sum += st.queued as f64;
                st.blocked_sum += st.blocked as f64;
                st.samples += 1;
            }
        }
    }

    fn deadlock(&self, now: f64) -> SimError {
        let stuck: Vec<String> = self
            .stages
            .iter()
            .filter(|s| s.queued > 0)
            .map(|s| {
                format!(
                    "`{}` ({} queued, {} of {} threads blocked)",
                    s.def.name,
                    s.queued,
                    s.blocked,
                    s.def.threads.unwrap_or(0)
                )
            })
            .collect();
        SimError::new(
            SimErrorKind::Deadlock,
            format!(
                "{}: deadlock at t = {now:.6} s: {} requests wait and nothing runs; stages: {}",
                self.spec.name,
                self.outstanding,
                stuck.join(", ")
            ),
        )
    }

    fn finish(self, run: usize, wall: f64) -> TamRun {
        let spec = self.spec;
        let span = spec.duration - spec.warmup;
        let samples_sched = &spec.schedulers[run.min(spec.schedulers.len() - 1)];
        TamRun {
            label: String::new(),
            scheduler: samples_sched.clone(),
            events: self.queue.events(),
            visits: self.visits_done,
            wall_seconds: wall,
            sim_seconds: spec.duration,
            clients: spec
                .clients
                .iter()
                .zip(self.clients)
                .map(|(c, s)| ClientResult {
                    name: c.name.clone(),
                    completed: s.completed,
                    completed_by_type: s.by_type,
                    throughput: s.completed as f64 / span,
                    latency_mean: s.latency.mean(),
                    latency_p50: s.latency.quantile(0.5),
                    latency_p99: s.latency.quantile(0.99),
                    latency_p999: s.latency.quantile(0.999),
                    series: s.series,
                })
                .collect(),
            stages: self
                .stages
                .into_iter()
                .map(|s| {
                    let n = s.samples.max(1) as f64;
                    StageResult {
                        name: s.def.name.clone(),
                        scheduler: s.def.scheduler.clone(),
                        threads: s.def.threads,
                        visits: s.visits,
                        thread_seconds: s.thread_seconds,
                        queue_mean: s.queue_sum / n,
                        queue_max: s.queue_max,
                        blocked_mean: s.blocked_sum / n,
                        series: s.series,
                    }
                })
                .collect(),
            resources: spec
                .resources
                .iter()
                .zip(&self.res)
                .map(|(d, r)| {
                    (
                        d.name.clone(),
                        r.busy_seconds / (d.units as f64 * spec.duration),
                    )
                })
                .collect(),
        }
    }
}

/// Client `c`'s workload phase at `now`.
fn phase(spec: &TamSpec, c: u32, now: f64) -> &super::spec::Phase {
    let ph = &spec.clients[c as usize].phases;
    let i = ph.partition_point(|p| p.at <= now).max(1) - 1;
    &ph[i]
}

fn sched_err(def: &StageDef, e: fairlane_core::Error) -> SimError {
    SimError::scheduler(e).context(format_args!("stage `{}`", def.name))
}
