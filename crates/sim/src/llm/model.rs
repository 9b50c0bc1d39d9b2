//! The continuous-batching server as an [`events::Model`](crate::events::Model): arrivals
//! into a core scheduler, admission rounds into the running batch, prefill and decode
//! iterations, token charging through the seam.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use fairlane_core::{BoxedScheduler, Decision, Request, Ticket, TokenCost};

use super::meter::Meter;
use super::policy::{Disclosure, Policy, Rpm};
use super::server::{peak_excess, Batching, Footprint, Server};
use super::workload::LlmRequest;
use super::{LlmOptions, Trace};
use crate::events::{EventQueue, Model};
use crate::SimError;

#[cfg(test)]
thread_local! {
    /// Tests: admission tests without the cache of sizes that do not fit.
    pub(crate) static NO_FIT_CACHE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The model's events.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ev {
    /// The next request of the workload arrives.
    Arrive,
    /// The iteration in flight ends.
    StepDone,
    /// A sampling instant.
    Sample,
    /// A scheduler's `RetryAt` time.
    Wake,
    /// The end of the arrival window.
    Window,
}

/// A request admitted to the batch (or held for it), with what the hot path reads of it.
#[derive(Clone, Copy, Debug)]
struct Run {
    ticket: Ticket,
    req: u32,
    slot: u32,
    client: u32,
    input: u64,
    output: u64,
    done: u64,
    /// `w_p · input`: the cost before any output.
    base: f64,
}

/// The server, its scheduler and its measurements.
pub(crate) struct LlmSim<'a> {
    /// The events to come; it counts the events handled (each decoded token counts as one).
    pub(crate) q: EventQueue<Ev>,
    server: Server,
    h: TokenCost,
    sched: BoxedScheduler,
    disclosure: Disclosure,
    rpm: Option<Rpm>,
    reqs: &'a [LlmRequest],
    next_arrival: usize,
    /// Per client, the requests queued in the scheduler, oldest first (every core scheduler
    /// keeps each tenant's requests in arrival order and dispatches a tenant's oldest).
    queued: Vec<VecDeque<u32>>,
    /// Dispatched by the scheduler, not admitted: it did not fit (see the module docs).
    held: Option<Run>,
    running: Vec<Run>,
    /// Admitted, in the iteration in flight's prefill.
    prefilling: Vec<Run>,
    /// Σ (input + output − 1) over `running` and Σ (input + output) over `prefilling`: the
    /// sum of their footprints, a bound of the peak.
    reserved: u64,
    free_slots: BinaryHeap<Reverse<u32>>,
    /// An iteration is in flight.
    busy: bool,
    /// The iteration in flight decodes the running batch.
    decoding: bool,
    since_admit: u32,
    scratch: Vec<Footprint>,
    /// Changes whenever the admission test's answer may grow: a request admitted,
    /// prefilled or completed.
    epoch: u64,
    /// Decode iterations so far. One lowers a candidate's peak by at most one token (each
    /// running request holds one more and may add one less; the candidate stays), so a
    /// size that missed by `e` tokens cannot fit for `e` more decode iterations.
    decodes: u64,
    /// `(epoch, input, output, decodes)`: a size that cannot fit in this epoch until the
    /// decode count passes the last value (found with nothing prefilled in the round).
    no_fit: Option<(u64, u64, u64, u64)>,
    pub meter: Meter,
    sample_every: f64,
    /// Counters for the result.
    pub iterations: u64,
    pub prefill_iterations: u64,
    pub holds: u64,
    pub max_batch_seen: usize,
    pub max_kv_used: u64,
    pub last_completion: f64,
}

impl<'a> LlmSim<'a> {
    /// `policy` (its scheduler built as `sched`) on `trace` on `server`.
    pub fn new(
        trace: &'a Trace,
        server: Server,
        policy: &Policy,
        sched: BoxedScheduler,
        opts: &LlmOptions,
    ) -> Self {
        let clients = trace.weights.len();
        let reqs = &trace.requests[..];
        let mut m = LlmSim {
            q: EventQueue::default(),
            server,
            h: opts.cost,
            sched,
            disclosure: policy.disclosure,
            rpm: policy.rpm.map(|limit| Rpm::new(limit, clients)),
            reqs,
            next_arrival: 0,
            queued: vec![VecDeque::new(); clients],
            held: None,
            running: Vec::new(),
            prefilling: Vec::new(),
            reserved: 0,
            free_slots: (0..server.max_batch as u32).map(Reverse).collect(),
            busy: false,
            decoding: false,
            since_admit: 0,
            scratch: Vec::new(),
            epoch: 0,
            decodes: 0,
            no_fit: None,
            meter: Meter::new(opts.cost, &trace.weights, opts.max_points),
            sample_every: opts.sample_every,
            iterations: 0,
            prefill_iterations: 0,
            holds: 0,
            max_batch_seen: 0,
            max_kv_used: 0,
            last_completion: 0.0,
        };
        if let Some(r) = reqs.first() {
            m.q.push(r.time, Ev::Arrive);
        }
        m.q.push(trace.window, Ev::Window);
        m.q.push(opts.sample_every, Ev::Sample);
        m
    }

    fn req(&self, i: u32) -> LlmRequest {
        self.reqs[i as usize]
    }

    /// Nothing left to do: every request arrived and left.
    fn finished(&self) -> bool {
        self.next_arrival == self.reqs.len()
            && !self.busy
            && self.held.is_none()
            && self.queued.iter().all(VecDeque::is_empty)
    }

    fn arrive(&mut self, now: f64) -> Result<(), SimError> {
        let i = self.next_arrival as u32;
        self.next_arrival += 1;
        if let Some(next) = self.reqs.get(self.next_arrival) {
            self.q.push(next.time, Ev::Arrive);
        }
        let r = self.req(i);
        let c = r.client as usize;
        self.meter.arrived[c] += 1;
        if self.rpm.as_mut().is_some_and(|l| !l.accept(c, now)) {
            self.meter.rejected[c] += 1;
            return Ok(());
        }
        let mut request = Request::new(u64::from(r.client), 0u32, u64::from(i));
        match self.disclosure {
            Disclosure::Prompt => request = request.with_cost(self.h.charge(r.input, 0)),
            Disclosure::Total => request = request.with_cost(self.h.charge(r.input, r.output)),
            Disclosure::Nothing => {}
        }
        self.sched
            .enqueue(request, now)
            .map_err(SimError::scheduler)?;
        self.queued[c].push_back(i);
        self.meter.waiting[c] += 1;
        self.meter.observe();
        Ok(())
    }

    /// Whether a request of this size fits beside the running and admitted ones
    /// (`_can_add_new_req`) and in this round's prefill budget.
    fn fits(&mut self, r: LlmRequest, prefill: u64) -> bool {
        if prefill + r.input > self.server.max_prefill_tokens {
            return false;
        }
        if self.reserved + r.input + r.output < self.server.kv_tokens {
            return true;
        }
        #[cfg(test)]
        let cached = !NO_FIT_CACHE.with(std::cell::Cell::get);
        #[cfg(not(test))]
        let cached = true;
        if let Some((epoch, input, output, until)) = self.no_fit.filter(|_| cached) {
            if (epoch, input, output) == (self.epoch, r.input, r.output) && self.decodes <= until {
                return false;
            }
        }
        self.scratch.clear();
        for x in &self.running {
            self.scratch
                .push(Footprint::running(x.input, x.output, x.done));
        }
        for x in &self.prefilling {
            self.scratch.push(Footprint::new(x.input, x.output));
        }
        self.scratch.push(Footprint::new(r.input, r.output));
        match peak_excess(&mut self.scratch, self.server.kv_tokens) {
            None => true,
            Some(excess) => {
                if self.prefilling.is_empty() {
                    self.no_fit = Some((self.epoch, r.input, r.output, self.decodes + excess));
                }
                false
            }
        }
    }

    /// The scheduler's next request, if asking is worthwhile: when no client's oldest
    /// request fits, nothing the scheduler could choose would (the artifact stops there
    /// too), so it is not asked.
    fn next_choice(&mut self, now: f64, prefill: u64) -> Result<Option<Run>, SimError> {
        let mut any = false;
        for c in 0..self.queued.len() {
            if let Some(&i) = self.queued[c].front() {
                if self.fits(self.req(i), prefill) {
                    any = true;
                    break;
                }
            }
        }
        if !any {
            return Ok(None);
        }
        let slot = self.free_slots.peek().map_or(0, |s| s.0) as usize;
        match self.sched.dequeue(slot, now).map_err(SimError::scheduler)? {
            Decision::Run(d) => {
                let i = d.request.payload as u32;
                let c = self.req(i).client as usize;
                let q = &mut self.queued[c];
                match q.iter().position(|&x| x == i) {
                    Some(0) => {
                        q.pop_front();
                    }
                    Some(k) => {
                        q.remove(k);
                    }
                    None => {
                        return Err(SimError::new(
                            crate::SimErrorKind::Internal,
                            format!("the scheduler dispatched request {i}, which is not queued"),
                        ))
                    }
                }
                let r = self.req(i);
                Ok(Some(Run {
                    ticket: d.ticket,
                    req: i,
                    slot: 0,
                    client: r.client,
                    input: r.input,
                    output: r.output,
                    done: 0,
                    base: self.h.charge(r.input, 0),
                }))
            }
            Decision::Empty => Ok(None),
            Decision::RetryAt(t) => {
                if t.is_finite() && t > now {
                    self.q.push(t, Ev::Wake);
                }
                Ok(None)
            }
        }
    }

    /// One admission round: the scheduler's choices join the batch while they fit. A
    /// choice that does not fit is held, and admitted first in a later round.
    fn admit(&mut self, now: f64) -> Result<(), SimError> {
        let mut prefill = 0;
        while self.running.len() + self.prefilling.len() < self.server.max_batch {
            let (run, was_held) = match self.held.take() {
                Some(r) => (r, true),
                None => match self.next_choice(now, prefill)? {
                    Some(r) => (r, false),
                    None => break,
                },
            };
            let r = self.req(run.req);
            if !self.fits(r, prefill) {
                self.holds += u64::from(!was_held);
                self.held = Some(run);
                break;
            }
            prefill += r.input;
            self.reserved += r.input + r.output;
            self.epoch += 1;
            let slot = self
                .free_slots
                .pop()
                .expect("a free slot below max_batch")
                .0;
            self.prefilling.push(Run { slot, ..run });
            self.meter.waiting[r.client as usize] -= 1;
        }
        self.meter.observe();
        Ok(())
    }

    /// Start the next iteration, or go idle.
    fn start(&mut self, now: f64) -> Result<(), SimError> {
        let try_admit = match self.server.batching {
            Batching::Separate { max_wait_tokens } => {
                self.running.is_empty() || self.since_admit >= max_wait_tokens
            }
            Batching::Mixed => true,
        };
        if try_admit {
            self.admit(now)?;
        }
        let prefill: u64 = self.prefilling.iter().map(|x| x.input).sum();
        let decode = match self.server.batching {
            Batching::Separate { .. } if !self.prefilling.is_empty() => {
                self.since_admit = 0;
                0
            }
            Batching::Separate { max_wait_tokens } => {
                if self.since_admit < max_wait_tokens {
                    self.since_admit += 1;
                }
                self.running.len()
            }
            Batching::Mixed => self.running.len(),
        };
        if self.prefilling.is_empty() && decode == 0 {
            return Ok(()); // idle until an arrival
        }
        self.decoding = decode > 0;
        self.busy = true;
        self.iterations += 1;
        self.prefill_iterations += u64::from(!self.prefilling.is_empty());
        let batch = self.running.len() + self.prefilling.len();
        self.max_batch_seen = self.max_batch_seen.max(batch);
        self.track_kv();
        let dt = self.server.speed.iteration(prefill, decode as u64);
        self.q.push(now + dt, Ev::StepDone);
        Ok(())
    }

    /// The KV tokens the iteration starting now holds: a running request has processed
    /// its prompt and all but its newest token, which a decode iteration processes; a
    /// prefill processes the prompt.
    fn track_kv(&mut self) {
        let d = u64::from(self.decoding);
        let running: u64 = self.running.iter().map(|x| x.input + x.done - 1 + d).sum();
        let new: u64 = self.prefilling.iter().map(|x| x.input).sum();
        self.max_kv_used = self.max_kv_used.max(running + new);
    }

    /// A request produced its `done`-th token: report it, or complete it.
    #[inline]
    fn token(&mut self, run: &Run, now: f64) -> Result<bool, SimError> {
        self.meter.generated(run.client as usize, 1);
        // `h.charge(input, done)`, without converting an unsigned integer (slow on x86-64
        // before AVX-512): `done` is below 2^40, the KV budget's limit.
        let used = run.base + self.h.output_weight * (run.done as i64 as f64);
        if run.done < run.output {
            self.sched
                .progress(run.ticket, used, now)
                .map_err(SimError::scheduler)?;
            return Ok(false);
        }
        self.complete(run, used, now)
    }

    /// A request's last token: complete it and free its slot and memory.
    fn complete(&mut self, run: &Run, used: f64, now: f64) -> Result<bool, SimError> {
        self.sched
            .complete(run.ticket, used, now)
            .map_err(SimError::scheduler)?;
        let arrival = self.req(run.req).time;
        self.meter.completed(run.client as usize, arrival, now);
        self.free_slots.push(Reverse(run.slot));
        self.reserved -= run.input + run.output - 1;
        self.epoch += 1;
        self.last_completion = now;
        Ok(true)
    }

    /// The iteration in flight ends at `now`.
    fn step_done(&mut self, now: f64) -> Result<(), SimError> {
        self.busy = false;
        if self.decoding {
            self.decodes += 1;
            // Each decoded token counts as an event: the cap bounds the work.
            self.q.count(self.running.len() as u64);
            let mut k = 0;
            while k < self.running.len() {
                // Read, then write back: a store to `done` read back at once as part of the
                // whole `Run` stalls store forwarding (most of this loop's time, measured).
                let mut run = self.running[k];
                run.done += 1;
                if self.token(&run, now)? {
                    self.running.swap_remove(k);
                } else {
                    self.running[k].done = run.done;
                    k += 1;
                }
            }
        }
        let mut fresh = std::mem::take(&mut self.prefilling);
        if !fresh.is_empty() {
            self.epoch += 1;
        }
        for run in fresh.drain(..) {
            let c = run.client as usize;
            self.meter.prefilled(c, run.input);
            self.meter.first_token(c, self.req(run.req).time, now);
            // From here on it holds one token less than it reserved (`Footprint::running`).
            self.reserved -= 1;
            let run = Run { done: 1, ..run };
            if !self.token(&run, now)? {
                self.running.push(run);
            }
        }
        self.prefilling = fresh;
        self.meter.observe();
        self.start(now)
    }
}

impl Model for LlmSim<'_> {
    type Event = Ev;
    const SETTLES: bool = true;

    fn queue(&mut self) -> &mut EventQueue<Ev> {
        &mut self.q
    }

    fn handle(&mut self, now: f64, ev: Ev) -> Result<(), SimError> {
        match ev {
            Ev::Arrive => self.arrive(now),
            Ev::StepDone => self.step_done(now),
            Ev::Wake => Ok(()), // settle asks again
            Ev::Window => {
                self.meter.close_window();
                Ok(())
            }
            Ev::Sample => {
                self.meter.sample(now);
                if !self.finished() {
                    self.q.push(now + self.sample_every, Ev::Sample);
                }
                Ok(())
            }
        }
    }

    fn settle(&mut self, now: f64) -> Result<(), SimError> {
        if !self.busy {
            self.start(now)?;
        }
        Ok(())
    }
}
