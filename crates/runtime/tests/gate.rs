//! FairGate: seats, fair order by weight, cancellation without ghosts, close, rejection,
//! metrics. Most tests poll futures by hand, so every interleaving is exact.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use fairlane_runtime::{Acquire, AcquireError, Clock, FairGate, Permit, SystemClock, TenantId};

/// A waker that counts its wake-ups.
struct Count(AtomicUsize);
impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn waker() -> (Waker, Arc<Count>) {
    let c = Arc::new(Count(AtomicUsize::new(0)));
    (Waker::from(c.clone()), c)
}

fn poll(a: &mut Acquire, w: &Waker) -> Poll<Result<Permit, AcquireError>> {
    Pin::new(a).poll(&mut Context::from_waker(w))
}

fn ready(a: &mut Acquire, w: &Waker) -> Permit {
    match poll(a, w) {
        Poll::Ready(Ok(p)) => p,
        Poll::Ready(Err(e)) => panic!("acquire failed: {e}"),
        Poll::Pending => panic!("acquire still pending"),
    }
}

fn gate(seats: usize, preset: &str) -> FairGate {
    FairGate::builder()
        .seats(seats)
        .preset(preset)
        .build()
        .unwrap()
}

#[test]
fn at_most_n_seats_are_held() {
    let g = gate(2, "2dfqe");
    let (w, count) = waker();
    let mut a = g.acquire(1u64, 0u32);
    let mut b = g.acquire(2u64, 0u32);
    let mut c = g.acquire(3u64, 0u32);
    let pa = ready(&mut a, &w);
    let pb = ready(&mut b, &w);
    assert_ne!(pa.seat(), pb.seat());
    assert!(poll(&mut c, &w).is_pending());
    assert_eq!((g.holding(), g.waiting()), (2, 1));
    drop(pa);
    assert_eq!(count.0.load(Ordering::SeqCst), 1, "the waiter is woken");
    let pc = ready(&mut c, &w);
    assert_eq!(pc.tenant(), TenantId(3));
    drop((pb, pc));
    assert_eq!((g.holding(), g.waiting()), (0, 0));
}

#[test]
fn seats_go_to_tenants_in_proportion_to_weight() {
    // One seat; tenants 1 (φ = 1) and 2 (φ = 3) each queue 12 requests of known cost 1 and
    // report cost 1. Over the first 12 grants tenant 2 gets 3 for each of tenant 1's (9:3),
    // give or take one.
    let g = gate(1, "2dfq");
    g.set_weight(1u64, 1.0).unwrap();
    g.set_weight(2u64, 3.0).unwrap();
    let (w, _) = waker();
    let mut holder = g.acquire_with_cost(9u64, 0u32, 1.0);
    let mut held = ready(&mut holder, &w);
    let mut waiters: Vec<(u64, Acquire)> = Vec::new();
    for _ in 0..12 {
        for t in [1u64, 2] {
            let mut a = g.acquire_with_cost(t, 0u32, 1.0);
            assert!(poll(&mut a, &w).is_pending());
            waiters.push((t, a));
        }
    }
    let mut order = Vec::new();
    for _ in 0..12 {
        held.set_cost(1.0);
        drop(held); // hands the seat to exactly one waiter
        let mut granted = None;
        for (i, (t, a)) in waiters.iter_mut().enumerate() {
            if let Poll::Ready(r) = poll(a, &w) {
                granted = Some((i, *t, r.unwrap()));
                break;
            }
        }
        let (i, t, p) = granted.expect("a waiter got the seat");
        drop(waiters.remove(i));
        order.push(t);
        held = p;
    }
    let heavy = order.iter().filter(|&&t| t == 2).count();
    assert!((8..=10).contains(&heavy), "grant order {order:?}");
    drop(held);
    drop(waiters);
    assert_eq!((g.holding(), g.waiting()), (0, 0));
}

/// A one-seat 2DFQᴱ gate, and its seat, held by tenant 9.
fn one_seat_held() -> (FairGate, Permit) {
    let g = gate(1, "2dfqe");
    let mut h = g.acquire(9u64, 0u32);
    let held = ready(&mut h, &waker().0);
    (g, held)
}

#[test]
fn a_dropped_waiter_leaves_no_ghost() {
    let (g, held) = one_seat_held();
    let (w, _) = waker();
    let mut a = g.acquire(1u64, 0u32);
    let mut b = g.acquire(2u64, 0u32);
    let mut c = g.acquire(3u64, 0u32);
    for x in [&mut a, &mut b, &mut c] {
        assert!(poll(x, &w).is_pending());
    }
    assert_eq!(g.waiting(), 3);
    drop(b); // cancelled while queued
    assert_eq!(g.waiting(), 2);
    drop(held);
    // The seat went to a live waiter, not to the dropped one.
    let (first, mut second) = match (poll(&mut a, &w), poll(&mut c, &w)) {
        (Poll::Ready(Ok(p)), Poll::Pending) => (p, c),
        (Poll::Pending, Poll::Ready(Ok(p))) => (p, a),
        (x, y) => panic!("exactly one live waiter should hold the seat: {x:?} {y:?}"),
    };
    drop(first);
    let last = ready(&mut second, &w);
    drop(last);
    assert_eq!((g.holding(), g.waiting()), (0, 0));
    let m = g.metrics();
    assert_eq!(m.tenant(2u64).unwrap().cancelled, 1);
    assert_eq!(m.tenant(2u64).unwrap().queued, 0);
    // And the gate is immediately usable.
    let mut d = g.acquire(4u64, 0u32);
    drop(ready(&mut d, &w));
}

#[test]
fn a_waiter_dropped_after_its_grant_hands_the_seat_on() {
    let (g, held) = one_seat_held();
    let (w, _) = waker();
    let (w2, woken) = waker();
    let mut a = g.acquire(1u64, 0u32);
    let mut b = g.acquire(2u64, 0u32);
    assert!(poll(&mut a, &w).is_pending());
    assert!(poll(&mut b, &w2).is_pending());
    drop(held); // grants a seat to `a` (first in fair order: equal tags, lower id)
    assert_eq!(g.holding(), 1);
    drop(a); // … which is dropped before it sees the grant
    assert_eq!(woken.load(), 1, "the seat was passed on to b");
    let pb = ready(&mut b, &w2);
    assert_eq!(pb.tenant(), TenantId(2));
    drop(pb);
    assert_eq!((g.holding(), g.waiting()), (0, 0));
    assert_eq!(g.metrics().tenant(1u64).unwrap().cancelled, 1);
}

trait Load {
    fn load(&self) -> usize;
}
impl Load for Arc<Count> {
    fn load(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

#[test]
fn close_fails_waiters_and_new_requests_but_not_holders() {
    let (g, held) = one_seat_held();
    let (w, woken) = waker();
    let mut a = g.acquire(1u64, 0u32);
    assert!(poll(&mut a, &w).is_pending());
    g.close();
    assert!(g.is_closed());
    assert_eq!(woken.load(), 1);
    assert!(matches!(
        poll(&mut a, &w),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    let mut b = g.acquire(2u64, 0u32);
    assert!(matches!(
        poll(&mut b, &w),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    assert_eq!(g.waiting(), 0);
    drop(held);
    assert_eq!(g.holding(), 0);
}

#[test]
fn full_queues_reject() {
    let g = FairGate::builder()
        .seats(1)
        .max_waiting(2)
        .max_waiting_per_tenant(1)
        .build()
        .unwrap();
    let (w, _) = waker();
    let mut h = g.acquire(9u64, 0u32);
    let _held = ready(&mut h, &w);
    let mut a = g.acquire(1u64, 0u32);
    assert!(poll(&mut a, &w).is_pending());
    let mut a2 = g.acquire(1u64, 0u32);
    assert_eq!(
        poll(&mut a2, &w).map(|r| r.unwrap_err()),
        Poll::Ready(AcquireError::TenantQueueFull {
            tenant: TenantId(1),
            limit: 1
        })
    );
    let mut b = g.acquire(2u64, 0u32);
    assert!(poll(&mut b, &w).is_pending());
    let mut c = g.acquire(3u64, 0u32);
    assert_eq!(
        poll(&mut c, &w).map(|r| r.unwrap_err()),
        Poll::Ready(AcquireError::QueueFull { limit: 2 })
    );
    assert_eq!(g.metrics().total().rejected, 2);
}

#[test]
fn permits_report_the_cost_they_are_given_or_the_time_held() {
    let (clock, g) = common::on_manual_clock(FairGate::builder().seats(2).preset("2dfqe"));
    let (w, _) = waker();
    let mut a = g.acquire(1u64, 0u32);
    let mut p = ready(&mut a, &w);
    p.set_cost(1234.0);
    drop(p);
    let mut b = g.acquire(2u64, 0u32);
    let p = ready(&mut b, &w);
    clock.advance(Duration::from_millis(2));
    assert_eq!(p.held(), Duration::from_millis(2));
    drop(p);
    let m = g.metrics();
    assert_eq!(m.tenant(1u64).unwrap().cost_total, 1234.0);
    assert_eq!(m.tenant(2u64).unwrap().cost_total, 2e6);
    assert_eq!(m.tenant(1u64).unwrap().wait.count(), 1);
    assert_eq!(m.total().completed, 2);
}

#[test]
fn joins_and_releases_at_the_callers_instants() {
    // The caller's readings of the monotonic clock stand for the gate's: waits, grants and
    // times held follow them exactly (instants in the future make that checkable).
    let clock = SystemClock::new();
    let g = FairGate::builder()
        .clock(clock)
        .seats(1)
        .preset("2dfqe")
        .build()
        .unwrap();
    let ms = Duration::from_millis(1);
    let t0 = Instant::now() + 1000 * ms;
    let on_clock = |t: Instant| clock.at_instant(t).unwrap();
    let (w, woken) = waker();
    let mut a = g.acquire(1u64, 0u32).joined_at(t0);
    let pa = ready(&mut a, &w);
    assert_eq!(pa.granted_at(), on_clock(t0));
    let mut b = g.acquire(2u64, 0u32).joined_at(t0 + ms);
    assert_eq!(b.joined(), None);
    assert!(poll(&mut b, &w).is_pending());
    assert_eq!(b.joined(), Some(on_clock(t0 + ms)));
    assert_eq!(pa.release_at(t0 + 5 * ms), on_clock(t0 + 5 * ms));
    assert_eq!(woken.0.load(Ordering::SeqCst), 1);
    let pb = ready(&mut b, &w);
    // Granted when the release handed the seat over.
    assert_eq!(pb.granted_at(), on_clock(t0 + 5 * ms));
    pb.release_at(t0 + 8 * ms);
    let m = g.metrics();
    let (ta, tb) = (m.tenant(1u64).unwrap(), m.tenant(2u64).unwrap());
    assert_eq!((ta.cost_total, tb.cost_total), (5e6, 3e6));
    assert_eq!((ta.wait.max(), tb.wait.max()), (0, 4_000_000));
    assert_eq!(m.total().completed, 2);
    assert_eq!((g.holding(), g.waiting()), (0, 0));
}

#[test]
fn bad_input_is_an_error() {
    let (w, _) = waker();
    assert!(FairGate::builder().seats(0).build().is_err());
    assert!(FairGate::builder().preset("nope").build().is_err());
    let g = gate(1, "2dfq"); // known costs
    let mut a = g.acquire(1u64, 0u32);
    assert!(matches!(
        poll(&mut a, &w),
        Poll::Ready(Err(AcquireError::Scheduler(_)))
    ));
    let mut b = g.acquire_with_cost(1u64, 0u32, f64::NAN);
    assert!(matches!(
        poll(&mut b, &w),
        Poll::Ready(Err(AcquireError::Scheduler(_)))
    ));
    assert!(g.set_weight(1u64, 0.0).is_err());
    assert_eq!((g.holding(), g.waiting()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_tokio_a_timed_out_waiter_leaves_no_ghost() {
    let g = gate(2, "2dfqe");
    let p1 = g.acquire(1u64, 0u32).await.unwrap();
    let p2 = g.acquire(2u64, 0u32).await.unwrap();
    // A waiter that gives up (select!/timeout drops its future).
    let r = tokio::time::timeout(Duration::from_millis(20), g.acquire(3u64, 0u32)).await;
    assert!(r.is_err());
    assert_eq!(g.waiting(), 0);
    // Many tasks contend for two seats; never more than two hold one.
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..40u64 {
        let (g, inside, most) = (g.clone(), inside.clone(), most.clone());
        tasks.push(tokio::spawn(async move {
            let _p = g.acquire(i % 4, 0u32).await.unwrap();
            let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(n, Ordering::SeqCst);
            tokio::task::yield_now().await;
            inside.fetch_sub(1, Ordering::SeqCst);
        }));
    }
    drop((p1, p2));
    for t in tasks {
        t.await.unwrap();
    }
    assert!(most.load(Ordering::SeqCst) <= 2);
    assert_eq!((g.holding(), g.waiting()), (0, 0));
    assert_eq!(g.metrics().total().completed, 42);
}

/// On the system clock the gate's own timer thread ends the adaptive depth's control
/// periods: after requests that missed their target, the seats shrink with no further
/// call into the gate (the 20 ms period passes while the test yields).
#[test]
fn adaptive_depth_runs_on_the_gates_timer_thread() {
    use fairlane_core::depth::DepthConfig;
    let g = FairGate::builder()
        .adaptive_depth(DepthConfig {
            min: 1,
            max: 8,
            initial: 8,
            interval: 20e6, // 20 ms
            min_samples: 1,
            ..DepthConfig::default()
        })
        .build()
        .unwrap();
    assert_eq!(g.seats(), 8);
    g.set_target(1u64, Some(Duration::from_nanos(1))).unwrap(); // out of reach
    for _ in 0..3 {
        let mut a = g.join(1u64, 0u32).unwrap();
        drop(a.granted().expect("a free seat is taken at once"));
    }
    // Nothing calls into the gate now: only its timer can end the period. Yield until it
    // has (a liveness guard, not a timing assertion).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while g.seats() == 8 && std::time::Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(
        g.seats(),
        4,
        "the timer ended the period and halved the depth"
    );
}

/// `Permit::progress` reaches the scheduler while the seat is held: under VTC a tenant
/// whose running request reported 1,000 units has the larger counter, so the next seat goes
/// to the other tenant although the first one's request has the lower id (the tie-break
/// that decides without the report).
#[test]
fn progress_is_charged_while_the_seat_is_held() {
    for report in [false, true] {
        let g = gate(2, "vtc");
        let (w, _) = waker();
        let mut a = g.acquire(1u64, 0u32);
        let pa = ready(&mut a, &w);
        let mut b = g.acquire(2u64, 0u32);
        let mut pb = ready(&mut b, &w);
        if report {
            pa.progress(1000.0);
            pa.progress(f64::NAN); // ignored
        }
        // Tenant 2 queues first, then tenant 1 (lifted to at least tenant 2's counter).
        let mut b2 = g.acquire(2u64, 0u32);
        assert!(poll(&mut b2, &w).is_pending());
        let mut a2 = g.acquire(1u64, 0u32);
        assert!(poll(&mut a2, &w).is_pending());
        pb.set_cost(0.0);
        drop(pb);
        let next = if report { &mut b2 } else { &mut a2 };
        let p = ready(next, &w);
        assert_eq!(
            p.tenant(),
            TenantId(if report { 2 } else { 1 }),
            "report {report}"
        );
        drop((p, pa, a2, b2));
        assert_eq!((g.holding(), g.waiting()), (0, 0));
    }
}
