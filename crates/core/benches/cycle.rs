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

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use fairlane_core::{Config, Decision, Request, Scheduler, Ticket, TokenCost, VirtualClock};

#[path = "../tests/support/naive.rs"]
mod naive;

#[path = "support/mixed.rs"]
mod mixed;
use mixed::{Driven, Mixed, Seam, WORKERS};

const SIZES: [usize; 4] = [10, 100, 1_000, 10_000];

/// The seam's scheduler of `config` over `tenants` tenants.
fn fast(config: Config, tenants: usize, known: bool) -> Mixed<Seam> {
    let s = config.workers(WORKERS).build::<()>().unwrap();
    Mixed::new(Seam { s, levels: 0 }, tenants as u64, known)
}

/// The naive Fig. 7 scan, driven as the seam is.
impl Driven for naive::Naive {
    type Ticket = u64;

    fn enqueue(&mut self, tenant: u64, cost: Option<f64>, now: f64) {
        naive::Naive::enqueue(self, tenant, 0, cost, now);
    }

    fn dequeue(&mut self, w: usize, now: f64) -> Option<(u64, u64, Option<f64>)> {
        naive::Naive::dequeue(self, w, now).map(|(ticket, t, _)| (ticket, t, None))
    }

    fn complete(&mut self, ticket: u64, cost: f64, _now: f64) {
        naive::Naive::complete(self, ticket, cost);
    }
}

/// The naive scan, 2DFQ with known costs or 2DFQᴱ, over `tenants` tenants.
fn slow(tenants: usize, known: bool) -> Mixed<naive::Naive> {
    let estimate = if known {
        naive::Estimate::Oracle
    } else {
        naive::Estimate::Pessimistic {
            alpha: 0.99,
            initial: 1.0,
        }
    };
    let s = naive::Naive::new(WORKERS, true, true, estimate, None);
    Mixed::new(s, tenants as u64, known)
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
    let mut group = mixed::group(c, "decode", 2);
    for preset in ["vtc", "fifo", "wfqe", "2dfqe"] {
        for n in [10, 1_000] {
            let mut d = Decode::new(Config::preset(preset).unwrap(), n);
            group.bench_function(BenchmarkId::new(preset, n), |b| b.iter(|| d.step()));
        }
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let mut group = mixed::group(c, "cycle", 2);
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
            let mut f = fast(config, n, known);
            group.bench_function(BenchmarkId::new(&name, n), |b| b.iter(|| f.cycle()));
        }
    }
    for (name, known) in [("naive-2dfq", true), ("naive-2dfqe", false)] {
        for &n in &SIZES {
            let mut s = slow(n, known);
            group.bench_function(BenchmarkId::new(name, n), |b| b.iter(|| s.cycle()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench, bench_decode);
criterion_main!(benches);
