//! The proxy gate adapter over `FairGate`: slots, caps, cancellation, depth changes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use fairlane_core::{ClassId, Config, TenantId};

use super::*;
use crate::status::GateSnapshot;

fn gate(name: &str, depth: usize) -> Gate {
    let c = Config::for_executor(name, depth, 0.01, false).unwrap();
    Gate::new(&c, depth, 100, 10).unwrap()
}

fn poll_now(w: &mut Waiting) -> Option<Result<Permit, Reject>> {
    let waker = futures_noop_waker();
    let mut cx = Context::from_waker(&waker);
    match Pin::new(w).poll(&mut cx) {
        Poll::Ready(r) => Some(r),
        Poll::Pending => None,
    }
}

fn futures_noop_waker() -> std::task::Waker {
    std::task::Waker::noop().clone()
}

#[test]
fn slots_caps_cancel_and_depth() {
    let g = gate("sfq", 1);
    let mut a = g.acquire(TenantId(0), ClassId(0)).unwrap();
    let p = poll_now(&mut a).unwrap().unwrap();
    let mut b = g.acquire(TenantId(1), ClassId(0)).unwrap();
    let mut c = g.acquire(TenantId(1), ClassId(0)).unwrap();
    assert!(poll_now(&mut b).is_none());
    assert_eq!(g.load(), (2, 1));
    // b leaves while queued: nothing left behind.
    drop(b);
    assert_eq!(g.load(), (1, 1));
    assert_eq!(GateSnapshot::of(&g, 0).tenants[1].cancelled, 1);
    drop(p);
    let pc = poll_now(&mut c).unwrap().unwrap();
    assert_eq!(g.load(), (0, 1));
    // Depth 2: a second request starts at once.
    g.set_depth(2).unwrap();
    let mut d = g.acquire(TenantId(0), ClassId(0)).unwrap();
    let pd = poll_now(&mut d).unwrap().unwrap();
    assert_eq!(g.load(), (0, 2));
    // Shrink to 1: the retired slot is not reused. Which slot retires is known, not left to
    // a condition: c holds slot 0 (the only one at depth 1), so d got the added slot 1.
    assert_eq!((pc.seat(), pd.seat()), (0, 1));
    g.set_depth(1).unwrap();
    drop(pd);
    assert_eq!(g.load(), (0, 1));
    let mut e = g.acquire(TenantId(0), ClassId(0)).unwrap();
    assert!(poll_now(&mut e).is_none(), "slot 1 retired: e waits");
    assert_eq!(g.load(), (1, 1));
    drop(pc);
    let pe = poll_now(&mut e).unwrap().unwrap();
    assert_eq!((pe.seat(), g.load()), (0, (0, 1)));
}

#[test]
fn caps_and_close() {
    let g = gate("fifo", 1);
    let mut first = g.acquire(TenantId(0), ClassId(0)).unwrap();
    let _p = poll_now(&mut first).unwrap().unwrap();
    let mut waiting: Vec<_> = (0..10)
        .map(|_| g.acquire(TenantId(0), ClassId(0)).unwrap())
        .collect();
    assert_eq!(
        g.acquire(TenantId(0), ClassId(0)).err(),
        Some(Reject::TenantQueueFull {
            tenant: TenantId(0),
            limit: 10
        })
    );
    g.set_tenant_cap(TenantId(0), Some(11));
    waiting.push(g.acquire(TenantId(0), ClassId(0)).unwrap());
    g.close();
    for w in &mut waiting {
        assert_eq!(poll_now(w).unwrap().err(), Some(Reject::Closed));
    }
    assert_eq!(
        g.acquire(TenantId(1), ClassId(0)).err(),
        Some(Reject::Closed)
    );
    assert_eq!(g.load(), (0, 1));
}

#[test]
fn granted_permit_of_a_dropped_waiter_frees_the_slot() {
    let g = gate("2dfqe", 1);
    let mut a = g.acquire(TenantId(0), ClassId(0)).unwrap();
    let p = poll_now(&mut a).unwrap().unwrap();
    let b = g.acquire(TenantId(1), ClassId(0)).unwrap();
    drop(p); // b is granted, but never polled
    assert_eq!(g.load(), (0, 1));
    drop(b);
    assert_eq!(g.load(), (0, 0));
}

#[test]
fn every_preset_resolves_for_the_proxy() {
    for p in fairlane_core::PRESETS {
        let c = Config::for_executor(p, 4, 0.01, false).unwrap();
        assert!(
            !c.requires_cost(),
            "{p} would refuse the proxy's costless requests"
        );
        Gate::new(&c, 4, 10, 10).unwrap();
    }
    let e = Config::for_executor("nope", 4, 0.01, false).unwrap_err();
    assert!(e.to_string().contains("known"));
}

#[test]
fn refusals_are_typed_and_name_the_setting() {
    let g = gate("sfq", 2);
    match g.set_target(TenantId(0), Some(-1.0)) {
        Err(e @ GateError::Target { seconds }) => {
            assert_eq!(seconds, -1.0);
            assert!(e.to_string().contains("target -1 s"), "{e}");
        }
        other => panic!("expected a target error, got {other:?}"),
    }
    match g.set_weight(TenantId(0), f64::NAN) {
        Err(e @ GateError::Refused { what: "weight", .. }) => {
            assert!(e.to_string().starts_with("weight: "), "{e}");
            assert!(std::error::Error::source(&e).is_some());
        }
        other => panic!("expected a weight refusal, got {other:?}"),
    }
    assert!(g.set_weight(TenantId(0), 2.0).is_ok());
    let b = FairGate::builder()
        .scheduler(Config::for_executor("sfq", 1, 0.01, false).unwrap())
        .seats(0);
    assert!(matches!(Gate::from_builder(b), Err(GateError::Build(_))));
}
