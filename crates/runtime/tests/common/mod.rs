//! Helpers shared by the runtime's test files.

#![allow(dead_code)] // each test file uses some of these

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use fairlane_runtime::cpu::thread_cpu_time;
use fairlane_runtime::{Acquire, AcquireError, FairGate, GateBuilder, ManualClock, Permit};

/// Poll an acquire once, with a waker that does nothing.
pub fn poll(a: &mut Acquire) -> Poll<Result<Permit, AcquireError>> {
    Pin::new(a).poll(&mut Context::from_waker(Waker::noop()))
}

/// The permit of an acquire that must be granted now.
pub fn ready(a: &mut Acquire) -> Permit {
    match poll(a) {
        Poll::Ready(Ok(p)) => p,
        Poll::Ready(Err(e)) => panic!("acquire failed: {e}"),
        Poll::Pending => panic!("acquire still pending"),
    }
}

/// The gate `builder` builds on a fresh [`ManualClock`], and the clock.
pub fn on_manual_clock(builder: GateBuilder) -> (ManualClock, FairGate) {
    let clock = ManualClock::new();
    let gate = builder.clock(clock.clone()).build().unwrap();
    (clock, gate)
}

/// Burn `d` of this thread's CPU time (so a task's cost is what we say, whatever the VM does).
pub fn spin_cpu(d: Duration) {
    let start = thread_cpu_time().expect("per-thread CPU clock");
    let mut x = 1u64;
    while thread_cpu_time().unwrap() - start < d {
        for _ in 0..200 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
