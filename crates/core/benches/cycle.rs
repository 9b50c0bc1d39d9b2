//! One enqueue + dequeue + complete cycle with 32 workers and 10 … 10,000 backlogged tenants,
//! for every preset, plus the naive Fig. 7 scan for comparison.
//!
//! Workload: tenants alternate between small (cost ≈ 1) and large (cost ≈ 1000) requests,
//! every tenant keeps two requests queued, all 32 workers are busy. A cycle completes the
//! oldest running request, enqueues a new request for its tenant and dequeues onto the freed
//! worker. Known-cost presets get the cost up front; the E presets learn it.
//!
//! Run: `cargo bench -p fairlane-core --bench cycle`

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::VecDeque;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use fairlane_core::{Config, Decision, Request, Scheduler, Ticket, VirtualClock};

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

criterion_group!(benches, bench);
criterion_main!(benches);
