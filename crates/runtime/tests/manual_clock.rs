//! Timing behaviour of the pool and the gate on a [`ManualClock`]: queue waits, times held,
//! `RetryAt` timers, refresh charging, run-time seats, caps, targets and drain. Time moves
//! only when a test says so: no sleeps, exact numbers.

mod common;
use common::{on_manual_clock, poll, ready, spin_cpu};

use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};
use fairlane_core::{BoxedScheduler, Config, TenantId};
use fairlane_runtime::{
    Acquire, AcquireError, FairGate, FairPool, ManualClock, Permit, TaskHandle,
};

const MS: Duration = Duration::from_millis(1);

/// Submit for `tenant` a task that spins `cpu` of CPU time and then holds its worker until
/// told to go; returns once the spinning is done, with the task's handle and the go signal.
fn spin_and_hold(
    pool: &FairPool,
    tenant: u64,
    cpu: Duration,
) -> (TaskHandle<()>, mpsc::Sender<()>) {
    let (spun_tx, spun_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let h = pool
        .submit(tenant, 0u32, move || {
            spin_cpu(cpu);
            spun_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        })
        .unwrap();
    spun_rx.recv().unwrap();
    (h, go_tx)
}

/// LDF on `cores` cores, 100 ms metering intervals in nanoseconds; tenant 1 may use at most
/// `max_cpu` % of the server.
fn ldf_limited(cores: usize, max_cpu: f64) -> BoxedScheduler {
    let mut s = ReserveConfig::new(Policy::ldf())
        .cores(cores)
        .interval(100e6)
        .build::<u64>()
        .unwrap();
    s.set_reservation(TenantId(1), Reservation::new(0.0, max_cpu), 0.0)
        .unwrap();
    Box::new(s)
}

#[test]
fn gate_wait_and_hold_times_follow_the_clock() {
    let (clock, g) = on_manual_clock(FairGate::builder().seats(1).preset("2dfqe"));
    let mut a = g.acquire(1u64, 0u32);
    let pa = ready(&mut a);
    let mut b = g.acquire(2u64, 0u32);
    assert!(poll(&mut b).is_pending());
    clock.advance(5 * MS);
    assert_eq!(pa.held(), 5 * MS);
    drop(pa); // cost = 5 ms held
    let pb = ready(&mut b);
    clock.advance(2 * MS);
    drop(pb);
    let m = g.metrics();
    assert_eq!(m.tenant(1u64).unwrap().cost_total, 5e6);
    assert_eq!(m.tenant(2u64).unwrap().cost_total, 2e6);
    // Tenant 2 waited exactly the 5 ms tenant 1 held the seat.
    let wait = &m.tenant(2u64).unwrap().wait;
    assert_eq!(wait.count(), 1);
    assert!(
        (wait.max() as f64 - 5e6).abs() <= 5e6 * 0.01,
        "{}",
        wait.max()
    );
}

#[test]
fn gate_retry_at_fires_on_the_clock_not_before() {
    // One seat; tenant 1 may use 10 % of it per 100 ms interval, i.e. 10 ms.
    let (clock, g) = on_manual_clock(FairGate::builder().with_scheduler(ldf_limited(1, 10.0)));
    assert_eq!(g.seats(), 1);
    let mut a = g.acquire(1u64, 0u32);
    let pa = ready(&mut a);
    clock.advance(10 * MS);
    drop(pa); // used its 10 ms
    let mut b = g.acquire(1u64, 0u32);
    assert!(poll(&mut b).is_pending(), "over its limit: held back");
    let at = g.retry_at().expect("a RetryAt timer is armed");
    // At the interval's end (100 ms), give or take the scheduler's rounding guard.
    assert!(at > g.now() && (at - 100e6).abs() < 1.0, "retry at {at}");
    clock.advance(50 * MS);
    assert!(poll(&mut b).is_pending(), "still inside the interval");
    clock.advance(50 * MS); // the interval ends: the timer fires on advance
    let pb = ready(&mut b);
    drop(pb);
    assert_eq!(g.scheduler_errors(), 0);
}

#[test]
fn gate_retry_at_infinity_waits_for_the_next_completion() {
    // RW(D) with D = 1: a tenant's window is one request; the second waits for the first's
    // completion (RetryAt(∞)), not for a time.
    let (clock, g) = on_manual_clock(
        FairGate::builder()
            .seats(2)
            .scheduler(Config::for_executor("rw", 2, 1e6, false).unwrap()),
    );
    g.set_weight(2u64, 1.0).unwrap();
    let mut a = g.acquire(1u64, 0u32);
    let pa = ready(&mut a);
    let mut other = g.acquire(2u64, 0u32); // Σφ = 2: windows of one request each
    let po = ready(&mut other);
    let mut b = g.acquire(1u64, 0u32);
    assert!(poll(&mut b).is_pending());
    assert_eq!(g.retry_at(), None, "RetryAt(∞) arms no timer");
    clock.advance(Duration::from_secs(10));
    assert!(poll(&mut b).is_pending(), "time does not open a window");
    drop(po); // a seat is free, but it is tenant 2's window that opened
    assert!(poll(&mut b).is_pending());
    drop(pa); // tenant 1's completion opens its window
    drop(ready(&mut b));
}

#[test]
fn gate_seats_caps_targets_and_drain_at_run_time() {
    let (_, g) = on_manual_clock(
        FairGate::builder()
            .seats(1)
            .scheduler(Config::for_executor("edf", 1, 1e6, false).unwrap())
            .max_waiting_per_tenant(2),
    );
    // Targets: tenant 2's 1 ms deadline goes before tenant 1's 100 ms, whatever the order.
    g.set_target(1u64, Some(100 * MS)).unwrap();
    g.set_target(2u64, Some(MS)).unwrap();
    let mut first = g.acquire(9u64, 0u32);
    let p = ready(&mut first);
    let mut slow = g.acquire(1u64, 0u32);
    let mut urgent = g.acquire(2u64, 0u32);
    assert!(poll(&mut slow).is_pending() && poll(&mut urgent).is_pending());
    // Caps: tenant 1 may have 2 waiting, then its own cap of 1 is below that.
    let mut again = g.acquire(1u64, 0u32);
    assert!(poll(&mut again).is_pending());
    let mut over = g.acquire(1u64, 0u32);
    assert!(matches!(
        poll(&mut over),
        Poll::Ready(Err(AcquireError::TenantQueueFull { limit: 2, .. }))
    ));
    g.set_tenant_cap(1u64, Some(3));
    let mut third = g.acquire(1u64, 0u32);
    assert!(poll(&mut third).is_pending());
    // Seats: a second seat goes to the earliest deadline at once.
    g.set_seats(2).unwrap();
    let pu = ready(&mut urgent);
    assert!(poll(&mut slow).is_pending());
    // Shrink to 1: the released second seat retires, the first is reused.
    g.set_seats(1).unwrap();
    // `first` holds seat 0, so the urgent request got the new seat 1: the one that retires.
    assert_eq!(pu.seat(), 1, "the second seat went to the urgent request");
    drop(pu);
    assert!(
        poll(&mut slow).is_pending(),
        "a retired seat is not handed on"
    );
    // Drain: new requests refused, queued ones still served.
    g.drain();
    let mut late = g.acquire(3u64, 0u32);
    assert!(matches!(
        poll(&mut late),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    drop(p);
    drop(ready(&mut slow));
    drop(ready(&mut again));
    assert!(!g.is_drained());
    drop(ready(&mut third));
    assert!(g.is_drained());
    assert_eq!(g.scheduler_errors(), 0);
}

/// A task spins 40 ms of CPU, then blocks (still running) until released; the clock moves
/// `advance` meanwhile. Returns the tenant's start tag seen while it blocks.
fn tag_while_running(refresh: Option<Duration>, advance: Duration) -> f64 {
    let clock = ManualClock::new();
    let pool = FairPool::builder()
        .workers(1)
        .preset("2dfqe")
        .initial_estimate(Duration::from_micros(1)) // charged 1 µs up front
        .refresh_interval(refresh)
        .clock(clock.clone())
        .build()
        .unwrap();
    let (h, release_tx) = spin_and_hold(&pool, 9, Duration::from_millis(40));
    // A due refresh runs on the advancing thread: done when `advance` returns.
    clock.advance(advance);
    let seen = pool.tenant(9u64).unwrap().tag;
    release_tx.send(()).unwrap();
    h.join().unwrap();
    // At completion retroactive charging brings the tag to the full cost either way.
    assert!(pool.tenant(9u64).unwrap().tag >= 39e6);
    assert_eq!(pool.scheduler_errors(), 0);
    seen
}

#[test]
fn pool_refresh_charging_follows_the_clock() {
    let every = Some(10 * MS);
    let before = tag_while_running(every, 9 * MS);
    assert!(
        before < 1e6,
        "no refresh before 10 ms on the clock: {before}"
    );
    let due = tag_while_running(every, 10 * MS);
    assert!(
        due >= 39e6,
        "the refresh at 10 ms reports the 40 ms spun: {due}"
    );
    let off = tag_while_running(None, Duration::from_secs(1));
    assert!(
        off < 1e6,
        "without refresh only the 1 µs estimate is charged: {off}"
    );
}

#[test]
fn pool_retry_at_waits_for_the_clock() {
    let clock = ManualClock::new();
    let pool = FairPool::builder()
        .with_scheduler(ldf_limited(1, 10.0))
        .refresh_interval(None)
        .clock(clock.clone())
        .build()
        .unwrap();
    assert_eq!(pool.workers(), 1);
    // 12 ms of CPU over 12 ms on the clock: over the 10 ms (10 % of 100 ms) tenant 1 may
    // use in an interval.
    let (first, go_tx) = spin_and_hold(&pool, 1, Duration::from_millis(12));
    clock.advance(Duration::from_millis(12));
    go_tx.send(()).unwrap();
    first.join().unwrap();
    let (ran_tx, ran_rx) = mpsc::channel();
    let h = pool
        .submit(1u64, 0u32, move || ran_tx.send(()).unwrap())
        .unwrap();
    // Held back: the clock does not move, so the interval never ends.
    assert!(ran_rx.recv_timeout(Duration::from_millis(50)).is_err());
    assert_eq!(pool.queued(), 1);
    clock.advance(Duration::from_millis(90)); // next interval: the worker is woken
    ran_rx.recv().unwrap();
    h.join().unwrap();
    assert_eq!(pool.scheduler_errors(), 0);
}

/// The gate runs the adaptive depth itself: it observes each released permit's response
/// time (queue + hold) and, when a control period ends on its clock, sets the seats to the
/// controller's depth — halved after a period that missed the target, one more after a
/// period with headroom (below the depth that missed).
#[test]
fn gate_adaptive_depth_follows_response_times_on_its_own_timer() {
    use fairlane_core::depth::DepthConfig;
    let clock = ManualClock::new();
    let g = FairGate::builder()
        .seats(2) // replaced by the depth's initial value
        .clock(clock.clone())
        .adaptive_depth(DepthConfig {
            min: 1,
            max: 16,
            initial: 8,
            interval: 1e9, // 1 s in the gate's unit, ns
            min_samples: 1,
            ..DepthConfig::default()
        })
        .build()
        .unwrap();
    assert_eq!(g.seats(), 8);
    g.set_target(1u64, Some(10 * MS)).unwrap();

    // Period 1: eight requests held 30 ms against a 10 ms target.
    let mut held: Vec<Permit> = (0..8).map(|_| ready(&mut g.acquire(1u64, 0u32))).collect();
    clock.advance(30 * MS);
    held.clear();
    assert_eq!(g.seats(), 8, "nothing changes before the period ends");
    clock.advance(970 * MS);
    assert_eq!(g.seats(), 4, "missed: halved when the period ended");
    let (_, judged) = g.depth_control().unwrap();
    assert_eq!((judged[0].tenant, judged[0].count), (TenantId(1), 8));
    assert!((judged[0].mean - 30e6).abs() < 1.0, "{}", judged[0].mean);

    // Period 2: six requests on four seats, each done within 2 ms.
    let mut acquires: Vec<Acquire> = (0..6).map(|_| g.acquire(1u64, 0u32)).collect();
    let first: Vec<Permit> = acquires[..4].iter_mut().map(ready).collect();
    assert!(poll(&mut acquires[4]).is_pending() && poll(&mut acquires[5]).is_pending());
    clock.advance(MS);
    drop(first);
    let second: Vec<Permit> = acquires[4..].iter_mut().map(ready).collect();
    clock.advance(MS);
    drop(second);
    clock.advance(998 * MS);
    assert_eq!(g.seats(), 5, "headroom: one more seat");
    let m = g.metrics();
    assert_eq!(m.tenant(1u64).unwrap().completed, 14);
}
