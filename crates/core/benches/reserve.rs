//! §6.6 of Das et al. (VLDB '14): the cost of a dispatch as the number of active tenants
//! grows to 400. One cycle = complete the oldest running quantum, enqueue that task again,
//! dequeue onto the freed core; 24 cores; every tenant keeps two tasks ready, each with a 5 %
//! reservation scaled so the server is not overbooked (LDF, DRR, EDF) or none (no-res).
//!
//! Run: `cargo bench -p fairlane-core --bench reserve` (LDF only: `-- ldf`)

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::VecDeque;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use fairlane_core::reserve::{Policy, Reservation, ReserveConfig, ReserveScheduler};
use fairlane_core::{Decision, Request, Scheduler, TenantId, Ticket};

const CORES: usize = 24;
const SIZES: [usize; 4] = [10, 40, 100, 400];
/// LDF only, to show the slope of the scan against the sorted walk.
const MORE: [usize; 2] = [1_000, 4_000];
const QUANTUM: f64 = 0.004;

struct Bench {
    s: ReserveScheduler<u32>,
    running: VecDeque<(Ticket, u64, f64)>,
    now: f64,
}

impl Bench {
    fn new(policy: Policy, tenants: usize, full_scan: bool) -> Self {
        let mut s = ReserveConfig::new(policy)
            .cores(CORES)
            .interval(1.0)
            .build::<u32>()
            .unwrap();
        s.use_full_scan(full_scan);
        let res = 90.0 / tenants as f64;
        for t in 0..tenants {
            s.set_reservation(TenantId(t as u64), Reservation::new(res, 100.0), 0.0)
                .unwrap();
            for _ in 0..3 {
                s.enqueue(Request::new(t as u64, 0u32, 0), 0.0).unwrap();
            }
        }
        let mut running = VecDeque::new();
        for c in 0..CORES {
            if let Decision::Run(d) = s.dequeue(c, 0.0).unwrap() {
                running.push_back((d.ticket, d.request.tenant.0, QUANTUM));
            }
        }
        Bench {
            s,
            running,
            now: 0.0,
        }
    }

    fn cycle(&mut self) {
        // Quanta end one after another, QUANTUM / CORES apart.
        self.now += QUANTUM / CORES as f64;
        let (ticket, tenant, used) = self.running.pop_front().unwrap();
        self.s.complete(ticket, used, self.now).unwrap();
        self.s
            .enqueue(Request::new(tenant, 0u32, 0), self.now)
            .unwrap();
        match self.s.dequeue(0, self.now).unwrap() {
            Decision::Run(d) => self
                .running
                .push_back((d.ticket, d.request.tenant.0, QUANTUM)),
            other => panic!("{other:?}"),
        }
    }
}

fn dispatch(c: &mut Criterion) {
    let mut g = c.benchmark_group("reserve-cycle");
    g.warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    // `ldf-scan`: the same LDF decisions by the full scan (the fast path's reference), run
    // beside `ldf` at each size.
    for n in SIZES.into_iter().chain(MORE) {
        for (name, scan) in [("ldf", false), ("ldf-scan", true)] {
            let mut b = Bench::new(Policy::ldf(), n, scan);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |bench, _| {
                bench.iter(|| {
                    b.cycle();
                    black_box(&b.s);
                })
            });
        }
    }
    for (name, policy) in [
        ("drr-res", Policy::drr()),
        ("edf-res", Policy::Edf),
        ("no-res", Policy::BestEffort),
    ] {
        for n in SIZES {
            let mut b = Bench::new(policy, n, false);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |bench, _| {
                bench.iter(|| {
                    b.cycle();
                    black_box(&b.s);
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, dispatch);
criterion_main!(benches);
