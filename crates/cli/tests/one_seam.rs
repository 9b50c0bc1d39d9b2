//! The seam's promise, end to end: one construction of a scheduler — LDF with a reservation,
//! and 2DFQᴱ from `Config::for_executor` — handed as a `Box<dyn Scheduler<_> + Send>` to
//! every executor: the simulator, `FairPool`, `FairGate` and the proxy's gate adapter. Each
//! executor runs work through it; the simulator's run also checks that the policy did its
//! job (the reservation met, shares by weight).
//!
//! This lives in the CLI crate only because it is the one crate that depends on all four
//! executors. It replaces the per-crate versions that were in crates/runtime/tests/
//! manual_clock.rs and crates/proxy/src/gate_tests.rs.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};
use fairlane_core::{ClassId, Config, Scheduler, TenantId};
use fairlane_runtime::{Acquire, AcquireError, FairGate, FairPool, Permit};
use fairlane_sim::pool::engine::Job;
use fairlane_sim::SpecFile;

/// A scheduler for any executor: its payload type and its time unit (`unit` = one second in
/// the executor's unit: 1 for the simulator and the proxy, 1e9 for the pool and `FairGate`).
type Build<T> = fn(f64) -> Box<dyn Scheduler<T> + Send>;

/// LDF on 2 cores, 100 ms intervals; tenant 1 reserves 60 % of the server and may use 70 %.
fn ldf<T: Send + 'static>(unit: f64) -> Box<dyn Scheduler<T> + Send> {
    let mut s = ReserveConfig::new(Policy::ldf())
        .cores(2)
        .interval(0.1 * unit)
        .build::<T>()
        .unwrap();
    s.set_reservation(TenantId(1), Reservation::new(60.0, 70.0), 0.0)
        .unwrap();
    Box::new(s)
}

/// 2DFQᴱ on 2 workers, costs unknown up front, 10 ms initial estimate.
fn tdfqe<T: Send + 'static>(unit: f64) -> Box<dyn Scheduler<T> + Send> {
    Config::for_executor("2dfqe", 2, 0.01 * unit, false)
        .unwrap()
        .build::<T>()
        .unwrap()
}

/// Two backlogged tenants, `a` (id 0) and `b` (id 1, weight `wb`), on 2 workers of rate 1.
fn scenario(wb: f64) -> fairlane_sim::Scenario {
    let text = format!(
        r#"
name = "one-seam"
duration = 20.0
warmup = 2.0
schedulers = ["fifo"]
[server]
workers = 2
rate = 1.0
[[tenant]]
name = "a"
arrival = {{ kind = "backlogged" }}
cost = {{ kind = "exponential", mean = 0.01 }}
[[tenant]]
name = "b"
weight = {wb}
arrival = {{ kind = "backlogged" }}
cost = {{ kind = "exponential", mean = 0.01 }}
"#
    );
    let p = SpecFile::parse(&text, "one-seam.toml", ".".into()).unwrap();
    p.scenarios().unwrap().remove(0)
}

/// Tenant b's share of the work done in the simulator.
fn sim_share_b(sched: Box<dyn Scheduler<Job> + Send>, wb: f64) -> f64 {
    let sc = scenario(wb);
    let r = fairlane_sim::run_with_scheduler(&sc, sched, false, &mut |_| {}).unwrap();
    let (a, b) = (r.tenants[0].work, r.tenants[1].work);
    assert_eq!(r.tenants[1].name, "b");
    assert!(a > 0.0 && b > 0.0, "both tenants served: {a} {b}");
    assert!(r.utilization > 0.99, "work-conserving: {}", r.utilization);
    b / (a + b)
}

fn poll(a: &mut Acquire) -> Poll<Result<Permit, AcquireError>> {
    Pin::new(a).poll(&mut Context::from_waker(Waker::noop()))
}

/// The pool, `FairGate` and the proxy's gate each run work through a box from `build`.
fn on_the_runtime(name: &str, build: Build<u64>) {
    // The pool: 20 tasks of three tenants all run, none refused by the scheduler.
    let s = build(1e9);
    assert_eq!(s.workers(), 2);
    let pool = FairPool::builder().with_scheduler(s).build().unwrap();
    assert_eq!(pool.workers(), 2, "{name}");
    let hs: Vec<_> = (0..20u64)
        .map(|i| pool.submit(i % 3, 0u32, move || i).unwrap())
        .collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, 190, "{name} on the pool");
    assert_eq!(pool.scheduler_errors(), 0, "{name} on the pool");

    // FairGate: two seats held, two waiting, then handed on.
    let gate = FairGate::builder()
        .with_scheduler(build(1e9))
        .build()
        .unwrap();
    assert_eq!(gate.seats(), 2, "{name}");
    let (mut held, mut waiting) = (Vec::new(), Vec::new());
    for t in 0..4u64 {
        let mut a = gate.acquire(t, 0u32);
        match poll(&mut a) {
            Poll::Ready(Ok(p)) => held.push(p),
            Poll::Pending => waiting.push(a),
            Poll::Ready(Err(e)) => panic!("{name}: {e}"),
        }
    }
    assert_eq!((held.len(), waiting.len()), (2, 2), "{name} on the gate");
    drop(held);
    for mut a in waiting {
        assert!(matches!(poll(&mut a), Poll::Ready(Ok(_))), "{name}");
    }
    assert_eq!(gate.scheduler_errors(), 0, "{name} on the gate");

    // The proxy's adapter, in seconds.
    let g =
        fairlane_proxy::gate::Gate::from_builder(FairGate::builder().with_scheduler(build(1.0)))
            .unwrap();
    assert_eq!(g.depth(), 2, "{name}");
    let mut w: Vec<_> = (0..4u64)
        .map(|t| g.acquire(TenantId(t), ClassId(0)).unwrap())
        .collect();
    let held: Vec<_> = w.iter_mut().filter_map(|w| w.granted()).collect();
    assert_eq!(held.len(), 2, "{name}: two upstream slots");
    assert_eq!(g.load(), (2, 2), "{name}");
    drop(held);
    for mut x in w.drain(2..) {
        assert!(matches!(poll(&mut x), Poll::Ready(Ok(_))), "{name}");
    }
    assert_eq!(g.load(), (0, 0), "{name}");
    assert_eq!(g.0.scheduler_errors(), 0, "{name} in the proxy");
}

#[test]
fn ldf_built_once_runs_on_every_executor() {
    // Weights do not matter to LDF: b's terms do. Reserved first, b would take nearly all
    // of the server; its 70 % cap leaves the rest to best-effort a.
    let share = sim_share_b(ldf::<Job>(1.0), 1.0);
    assert!(
        (0.6..=0.71).contains(&share),
        "b reserved 60 % of the server and may use 70 %, got {share:.3}"
    );
    on_the_runtime("ldf", ldf::<u64>);
}

#[test]
fn tdfqe_built_once_runs_on_every_executor() {
    // Shares by weight: b has weight 3, so 3/4 of the work.
    let share = sim_share_b(tdfqe::<Job>(1.0), 3.0);
    assert!(
        (share - 0.75).abs() < 0.02,
        "b has weight 3 of 4, got {share:.3}"
    );
    on_the_runtime("2dfqe", tdfqe::<u64>);
}
