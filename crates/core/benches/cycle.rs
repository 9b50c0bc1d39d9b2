//! One enqueue + dequeue + complete cycle with 32 workers and 10 … 10,000 backlogged tenants,
//! for every preset, plus the naive Fig. 7 scan for comparison.
//!
//! Workload: tenants alternate between small (cost ≈ 1) and large (cost ≈ 1000) requests,
//! every tenant keeps two requests queued, all 32 workers are busy. A cycle completes the
//! oldest running request, enqueues a new request for its tenant and dequeues onto the freed
//! worker. Known-cost presets get the cost up front; the E presets learn it.
//!
//! The `decode` group is an LLM server's hot path (crates/sim/src/llm): one decode step of
//! a 32-request running batch, every request reporting its cumulative token cost by
//! `progress` (w_p = 1 per prompt token, w_q = 2 per generated token), a request that has
//! generated its 64 tokens completing and its slot taking the next dispatch, with 10 or
//! 1,000 backlogged tenants; VTC against FIFO, WFQᴱ and 2DFQᴱ on the same calls.
//!
//! Run: `cargo bench -p fairlane-core --bench cycle` (`-- decode` for that group alone)

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::VecDeque;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use fairlane_core::{Config, Decision, Request, Scheduler, Ticket, TokenCost, VirtualClock};

#[path = "../tests/support/naive.rs"]
mod naive;

#[path = "support/mixed.rs"]
mod mixed;
use mixed::{cost, WORKERS};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

struct Fast {
    s: Box<dyn Scheduler<()> + Send>,
    running: VecDeque<(Ticket, usize, u64, f64)>,
    known: bool,
    now: f64,
    i: u64,
}

impl Fast {
    fn new(config: Config, tenants: usize, known: bool) -> Self {
        let mut s = config.workers(WORKERS).build::<()>().unwrap();
        let mut i = 0;
        for _ in 0..2 {
            for t in 0..tenants {
                i += 1;
                let mut r = Request::new(t as u64, 0u32, ());
                if known {
                    r = r.with_cost(cost(t, i));
                }
                s.enqueue(r, 0.0).unwrap();
            }
        }
        let mut running = VecDeque::new();
        for w in 0..WORKERS {
            if let Decision::Run(d) = s.dequeue(w, 0.0).unwrap() {
                let c = d
                    .request
                    .cost
                    .unwrap_or_else(|| cost(d.request.tenant.0 as usize, 0));
                running.push_back((d.ticket, w, d.request.tenant.0, c));
            }
        }
        Fast {
            s,
            running,
            known,
            now: 0.0,
            i,
        }
    }

    fn cycle(&mut self) {
        self.now += 1.0;
        self.i += 1;
        let (ticket, w, tenant, c) = self.running.pop_front().unwrap();
        self.s.complete(ticket, c, self.now).unwrap();
        let c = cost(tenant as usize, self.i);
        let mut r = Request::new(tenant, 0u32, ());
        if self.known {
            r = r.with_cost(c);
        }
        self.s.enqueue(r, self.now).unwrap();
        if let Decision::Run(d) = self.s.dequeue(w, self.now).unwrap() {
            let c = d
                .request
                .cost
                .unwrap_or_else(|| cost(d.request.tenant.0 as usize, self.i));
            self.running.push_back((d.ticket, w, d.request.tenant.0, c));
        }
        black_box(&self.running);
    }
}

struct Slow {
    s: naive::Naive,
    running: VecDeque<(u64, usize, u64, f64)>,
    known: bool,
    now: f64,
    i: u64,
}

impl Slow {
    fn new(tenants: usize, known: bool) -> Self {
        let estimate = if known {
            naive::Estimate::Oracle
        } else {
            naive::Estimate::Pessimistic {
                alpha: 0.99,
                initial: 1.0,
            }
        };
        let mut s = naive::Naive::new(WORKERS, true, true, estimate, None);
        let mut i = 0;
        for _ in 0..2 {
            for t in 0..tenants {
                i += 1;
                s.enqueue(t as u64, 0, known.then(|| cost(t, i)), 0.0);
            }
        }
        let mut running = VecDeque::new();
        for w in 0..WORKERS {
            if let Some((ticket, t, _)) = s.dequeue(w, 0.0) {
                running.push_back((ticket, w, t, cost(t as usize, 0)));
            }
        }
        Slow {
            s,
            running,
            known,
            now: 0.0,
            i,
        }
    }

    fn cycle(&mut self) {
        self.now += 1.0;
        self.i += 1;
        let (ticket, w, tenant, c) = self.running.pop_front().unwrap();
        self.s.complete(ticket, c);
        let c = cost(tenant as usize, self.i);
        self.s.enqueue(tenant, 0, self.known.then_some(c), self.now);
        if let Some((ticket, t, _)) = self.s.dequeue(w, self.now) {
            self.running
                .push_back((ticket, w, t, cost(t as usize, self.i)));
        }
    }
}

/// A running request of the decode bench: ticket, slot, tenant, prompt and tokens so far.
type Generating = (Ticket, usize, u64, u64, u64);

/// The decode step of an LLM server's batch: see the file's documentation.
struct Decode {
    s: Box<dyn Scheduler<()> + Send>,
    running: Vec<Generating>,
    now: f64,
    i: u64,
}

impl Decode {
    const OUTPUT: u64 = 64;

    fn prompt(tenant: u64, i: u64) -> u64 {
        16 + (tenant.wrapping_mul(2654435761) ^ i.wrapping_mul(40503)) % 240
    }

    fn submit(s: &mut dyn Scheduler<()>, tenant: u64, i: u64, now: f64) {
        let input = Self::prompt(tenant, i);
        let r = Request::new(tenant, 0u32, ()).with_cost(TokenCost::PAPER.charge(input, 0));
        s.enqueue(r, now).unwrap();
    }

    fn start(&mut self, w: usize, done: u64) {
        if let Decision::Run(d) = self.s.dequeue(w, self.now).unwrap() {
            let input = d.request.cost.unwrap_or(0.0) as u64;
            self.running
                .push((d.ticket, w, d.request.tenant.0, input, done));
        }
    }

    fn new(config: Config, tenants: usize) -> Self {
        let s = config.workers(WORKERS).build::<()>().unwrap();
        let mut d = Decode {
            s,
            running: Vec::with_capacity(WORKERS),
            now: 0.0,
            i: 0,
        };
        for _ in 0..2 {
            for t in 0..tenants as u64 {
                d.i += 1;
                Self::submit(&mut *d.s, t, d.i, 0.0);
            }
        }
        // Staggered progress, so completions spread over the steps.
        for w in 0..WORKERS {
            d.start(w, w as u64 * Self::OUTPUT / WORKERS as u64);
        }
        d
    }

    fn step(&mut self) {
        self.now += 1.0;
        let mut k = 0;
        while k < self.running.len() {
            let (ticket, w, tenant, input, done) = &mut self.running[k];
            *done += 1;
            let used = TokenCost::PAPER.charge(*input, *done);
            if *done < Self::OUTPUT {
                self.s.progress(*ticket, used, self.now).unwrap();
                k += 1;
                continue;
            }
            self.s.complete(*ticket, used, self.now).unwrap();
            let (w, tenant) = (*w, *tenant);
            self.running.swap_remove(k);
            self.i += 1;
            Self::submit(&mut *self.s, tenant, self.i, self.now);
            self.start(w, 0);
        }
        black_box(&self.running);
    }
}

fn bench_decode(c: &mut Criterion) {
    let mut group = c.benchmark_group("decode");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    for preset in ["vtc", "fifo", "wfqe", "2dfqe"] {
        for n in [10, 1_000] {
            let mut d = Decode::new(Config::preset(preset).unwrap(), n);
            group.bench_function(BenchmarkId::new(preset, n), |b| b.iter(|| d.step()));
        }
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("cycle");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    let mut variants: Vec<(String, Config, bool)> = fairlane_core::PRESETS
        .iter()
        .map(|p| (p.to_string(), Config::preset(p).unwrap(), !p.ends_with('e')))
        .collect();
    for p in ["wfq", "wf2q", "2dfq"] {
        let gps = Config::preset(p).unwrap().clock(VirtualClock::Gps {
            capacity: WORKERS as f64,
        });
        variants.push((format!("{p}+gps"), gps, true));
    }
    for (name, config, known) in variants {
        for &n in &SIZES {
            let mut f = Fast::new(config, n, known);
            group.bench_function(BenchmarkId::new(&name, n), |b| b.iter(|| f.cycle()));
        }
    }
    for (name, known) in [("naive-2dfq", true), ("naive-2dfqe", false)] {
        for &n in &SIZES {
            let mut s = Slow::new(n, known);
            group.bench_function(BenchmarkId::new(name, n), |b| b.iter(|| s.cycle()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench, bench_decode);
criterion_main!(benches);
