//! A tiny discrete-event executor for tests: `n` workers of rate `r` pull from a scheduler,
//! requests consume their true cost, completions at time t are handled (in worker order)
//! before idle workers ask for work (in worker order).
#![allow(dead_code)]

pub mod naive;
#[path = "../../src/splitmix.rs"]
mod splitmix;

use splitmix::SplitMix;

use fairlane_core::{Decision, Request, Scheduler, TenantId, Ticket};

/// What a test request carries: a label for schedules and its true cost.
#[derive(Clone, Debug)]
pub struct Job {
    pub label: String,
    pub cost: f64,
}

/// One executed request.
#[derive(Clone, Debug)]
pub struct Record {
    pub worker: usize,
    pub tenant: TenantId,
    pub label: String,
    pub start: f64,
    pub end: f64,
    pub cost: f64,
}

struct Running {
    ticket: Ticket,
    record: Record,
}

pub struct Exec {
    pub sched: Box<dyn Scheduler<Job> + Send>,
    pub rate: f64,
    pub now: f64,
    workers: Vec<Option<Running>>,
    pub log: Vec<Record>,
    /// Completed work per tenant id.
    pub done: std::collections::BTreeMap<u64, f64>,
}

impl Exec {
    pub fn new(sched: Box<dyn Scheduler<Job> + Send>, rate: f64) -> Self {
        let n = sched.workers();
        Exec {
            sched,
            rate,
            now: 0.0,
            workers: (0..n).map(|_| None).collect(),
            log: Vec::new(),
            done: Default::default(),
        }
    }

    pub fn submit(&mut self, tenant: u64, label: impl Into<String>, cost: f64, known: bool) {
        let job = Job {
            label: label.into(),
            cost,
        };
        let mut req = Request::new(tenant, 0u32, job);
        if known {
            req = req.with_cost(cost);
        }
        self.sched.enqueue(req, self.now).unwrap();
    }

    /// Work tenant `t` has received up to `at` (≥ now of the last event), counting partial
    /// service of running requests.
    pub fn work(&self, tenant: u64, at: f64) -> f64 {
        let running: f64 = self
            .workers
            .iter()
            .flatten()
            .filter(|r| r.record.tenant.0 == tenant)
            .map(|r| ((at - r.record.start) * self.rate).min(r.record.cost))
            .sum();
        self.done.get(&tenant).copied().unwrap_or(0.0) + running
    }

    pub fn running_count(&self) -> usize {
        self.workers.iter().flatten().count()
    }

    fn dispatch(&mut self) {
        for w in 0..self.workers.len() {
            if self.workers[w].is_some() {
                continue;
            }
            if let Decision::Run(d) = self.sched.dequeue(w, self.now).unwrap() {
                let cost = d.request.payload.cost;
                self.workers[w] = Some(Running {
                    ticket: d.ticket,
                    record: Record {
                        worker: w,
                        tenant: d.request.tenant,
                        label: d.request.payload.label,
                        start: self.now,
                        end: self.now + cost / self.rate,
                        cost,
                    },
                });
            }
        }
    }

    /// Run until no event is left before `until`. `on_complete` may submit more work.
    pub fn run(&mut self, until: f64, mut on_complete: impl FnMut(&mut Exec, &Record)) {
        loop {
            self.dispatch();
            let next = self
                .workers
                .iter()
                .flatten()
                .map(|r| r.record.end)
                .fold(f64::INFINITY, f64::min);
            // Also stops on NaN (no worker busy: the fold stays infinite).
            if next.is_nan() || next > until {
                break;
            }
            self.now = next;
            for w in 0..self.workers.len() {
                if self.workers[w]
                    .as_ref()
                    .is_some_and(|r| r.record.end == next)
                {
                    let r = self.workers[w].take().unwrap();
                    self.sched
                        .complete(r.ticket, r.record.cost, self.now)
                        .unwrap();
                    *self.done.entry(r.record.tenant.0).or_default() += r.record.cost;
                    self.log.push(r.record.clone());
                    on_complete(self, &r.record);
                }
            }
        }
    }

    /// Render the log as one row per worker, one column per time unit in `[0, until)`, the
    /// way the paper draws Fig. 5 and 6 (requests of unit-multiple sizes).
    pub fn grid(&self, until: usize) -> String {
        let mut rows = vec![vec![String::from("."); until]; self.workers.len()];
        let all = self
            .log
            .iter()
            .chain(self.workers.iter().flatten().map(|r| &r.record));
        for r in all {
            let span = (r.start as usize)..(r.end as usize).min(until);
            for cell in rows[r.worker].iter_mut().take(span.end).skip(span.start) {
                *cell = r.label.clone();
            }
        }
        rows.iter()
            .enumerate()
            .map(|(w, row)| format!("W{w}: {}", row.join(" ")))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// SplitMix64, for reproducible random test cases: the core's own generator.
pub struct Rng(SplitMix);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(SplitMix::new(seed))
    }
    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}
