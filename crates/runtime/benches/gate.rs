//! FairGate acquire + release: uncontended, and with 1,000 tenants waiting.
//!
//! Futures are polled by hand (no executor) so the figures are the gate's own cost.
//! * uncontended: 4 seats, nothing waiting; one iteration = acquire (ready at first poll) +
//!   release.
//! * 1,000 waiting: 4 seats all held, one waiter queued for each of 1,000 tenants; one
//!   iteration = release a held seat (the scheduler grants it to a waiter, whose waker fires) +
//!   the granted waiter's poll (its permit) + a new acquire for that tenant (queued, pending).
//!   The queue stays at 1,000 waiting tenants throughout.
//!
//! Run: `cargo bench -p fairlane-runtime --bench gate`

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use fairlane_runtime::{Acquire, FairGate, Permit};

const SEATS: usize = 4;
const WAITING: usize = 1_000;
const PRESETS: [&str; 4] = ["fifo", "wfqe", "wf2qe", "2dfqe"];

struct Noop;
impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Records which waiter was woken.
struct Tell {
    idx: usize,
    woken: Arc<Mutex<Vec<usize>>>,
}
impl Wake for Tell {
    fn wake(self: Arc<Self>) {
        self.woken.lock().unwrap().push(self.idx);
    }
}

fn poll(a: &mut Acquire, w: &Waker) -> Option<Permit> {
    match Pin::new(a).poll(&mut Context::from_waker(w)) {
        Poll::Ready(r) => Some(r.unwrap()),
        Poll::Pending => None,
    }
}

fn gate(preset: &str) -> FairGate {
    FairGate::builder()
        .seats(SEATS)
        .preset(preset)
        .build()
        .unwrap()
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("gate_uncontended");
    g.measurement_time(Duration::from_secs(3));
    let noop = Waker::from(Arc::new(Noop));
    for p in PRESETS {
        let gate = gate(p);
        g.bench_function(BenchmarkId::new("acquire_release", p), |b| {
            b.iter(|| {
                let mut a = gate.acquire(1u64, 0u32);
                let permit = poll(&mut a, &noop).expect("a free seat");
                drop(permit);
            })
        });
    }
    g.finish();
}

struct Contended {
    gate: FairGate,
    held: VecDeque<Permit>,
    waiters: Vec<Option<Acquire>>,
    wakers: Vec<Waker>,
    woken: Arc<Mutex<Vec<usize>>>,
}

impl Contended {
    fn new(preset: &str) -> Self {
        let gate = gate(preset);
        let noop = Waker::from(Arc::new(Noop));
        let held = (0..SEATS)
            .map(|i| poll(&mut gate.acquire(1_000_000 + i as u64, 0u32), &noop).unwrap())
            .collect();
        let woken = Arc::new(Mutex::new(Vec::new()));
        let wakers: Vec<Waker> = (0..WAITING)
            .map(|idx| {
                Waker::from(Arc::new(Tell {
                    idx,
                    woken: woken.clone(),
                }))
            })
            .collect();
        let mut waiters = Vec::new();
        for (t, w) in wakers.iter().enumerate() {
            let mut a = gate.acquire(t as u64, 0u32);
            assert!(poll(&mut a, w).is_none());
            waiters.push(Some(a));
        }
        assert_eq!(gate.waiting(), WAITING);
        Contended {
            gate,
            held,
            waiters,
            wakers,
            woken,
        }
    }

    fn cycle(&mut self) {
        let mut p = self.held.pop_front().unwrap();
        p.set_cost(1_000.0); // every holder used 1 µs: a steady mix for the estimators
        drop(p); // grants the seat to one waiter
        let idx = self
            .woken
            .lock()
            .unwrap()
            .pop()
            .expect("a waiter was woken");
        let mut a = self.waiters[idx].take().unwrap();
        let permit = poll(&mut a, &self.wakers[idx]).expect("granted");
        self.held.push_back(permit);
        let mut again = self.gate.acquire(idx as u64, 0u32);
        assert!(poll(&mut again, &self.wakers[idx]).is_none());
        self.waiters[idx] = Some(again);
    }
}

fn contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("gate_1000_waiting");
    g.measurement_time(Duration::from_secs(3));
    for p in PRESETS {
        let mut s = Contended::new(p);
        g.bench_function(BenchmarkId::new("acquire_release", p), |b| {
            b.iter(|| s.cycle())
        });
        assert_eq!(s.gate.waiting(), WAITING);
    }
    g.finish();
}

criterion_group!(benches, uncontended, contended);
criterion_main!(benches);
