//! Priority levels on the gate and the pool, on a [`ManualClock`]: borrowing shows in the
//! levels' snapshot, lent seats come back, an exempt request never waits, a level's queue
//! limit refuses, and a reload with requests queued loses none. Time moves only when a test
//! says so.

mod common;
use common::{poll, ready};

use std::sync::{mpsc, Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use fairlane_core::depth::DepthConfig;
use fairlane_core::levels::{LevelConfig, LevelsConfig};
use fairlane_core::{Config, LevelId};
use fairlane_runtime::{
    Acquire, AcquireError, FairGate, FairPool, LevelRefusal, LevelSnapshot, ManualClock, Permit,
    Route, SubmitError,
};

/// The adjustment period: 1 s in the gate's and pool's nanoseconds.
const PERIOD: f64 = 1e9;
const HIGH: LevelId = LevelId(1);

/// An exempt level, a high level lending all of its seats, and the catch-all, 1:1.
fn apf_like() -> LevelsConfig {
    LevelsConfig::new(Config::for_executor("2dfqe", 1, 1e6, false).unwrap())
        .level(LevelConfig::exempt("exempt"))
        .level(LevelConfig::new("high", 1.0).lendable_percent(100.0))
        .level(LevelConfig::new("catch-all", 1.0))
        .adjust_period(PERIOD)
}

/// An exempt level over the catch-all, the catch-all's scheduler `preset`.
fn exempt_over_catch_all(preset: &str) -> LevelsConfig {
    LevelsConfig::new(Config::preset(preset).unwrap())
        .level(LevelConfig::exempt("exempt"))
        .level(LevelConfig::new("catch-all", 1.0))
        .adjust_period(PERIOD)
}

fn level<'a>(views: &'a [LevelSnapshot], name: &str) -> &'a LevelSnapshot {
    views.iter().find(|v| v.name == name).expect("level")
}

fn gate(seats: usize, levels: LevelsConfig, clock: &ManualClock) -> FairGate {
    FairGate::builder()
        .seats(seats)
        .levels(levels)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Poll each waiting request once: the permits of those granted; the others stay.
fn grant(pending: &mut Vec<Acquire>) -> Vec<Permit> {
    let mut held = Vec::new();
    pending.retain_mut(|a| match poll(a) {
        Poll::Ready(r) => {
            held.push(r.unwrap());
            false
        }
        Poll::Pending => true,
    });
    held
}

#[test]
fn gate_borrowing_shows_and_lent_seats_come_back() {
    let clock = ManualClock::new();
    let g = gate(4, apf_like(), &clock);
    // The catch-all floods while the high level is idle: the first adjustment (at the
    // first call) lends it the high level's 2 seats, and the rest wait.
    let mut low: Vec<Acquire> = (0..6).map(|_| g.acquire(7u64, 0u32)).collect();
    let mut held = grant(&mut low);
    assert_eq!((held.len(), low.len()), (4, 2));
    let v = g.levels();
    let (high, all) = (level(&v, "high"), level(&v, "catch-all"));
    assert_eq!((high.nominal_cl, all.nominal_cl), (2, 2));
    assert_eq!((all.current_cl, all.seats_in_use, all.borrowed), (4, 4, 2));
    assert_eq!((high.current_cl, high.lent, all.queued), (0, 2, 2));
    // A period on, nothing changed: the borrowing stays.
    clock.advance(Duration::from_secs(1));
    assert_eq!(grant(&mut low).len(), 0);
    assert_eq!(level(&g.levels(), "catch-all").borrowed, 2);
    // The high level's demand returns: a seat comes back as a borrower's request ends,
    // ahead of the catch-all's waiting requests.
    let mut hi = g.acquire(1u64, 0u32).at(HIGH);
    assert!(poll(&mut hi).is_pending());
    drop(held.pop());
    let p = ready(&mut hi);
    assert_eq!(p.exempt(), None);
    assert_eq!(grant(&mut low).len(), 0, "the seat went to the high level");
    let v = g.levels();
    assert_eq!(level(&v, "high").seats_in_use, 1);
    assert!(level(&v, "high").current_cl >= 1);
    assert_eq!(level(&v, "catch-all").queued, 2);
}

#[test]
fn gate_exempt_never_waits_and_is_counted_apart() {
    let clock = ManualClock::new();
    let levels = exempt_over_catch_all("2dfqe");
    let g = gate(1, levels, &clock);
    let mut a = g.acquire(1u64, 0u32);
    let held = ready(&mut a);
    let mut b = g.acquire(2u64, 0u32);
    assert!(poll(&mut b).is_pending());
    // Every seat taken and a queue behind it: exempt requests are admitted at once.
    let mut e1 = g.acquire(3u64, 0u32).at(LevelId(0)).join().unwrap();
    let p1 = e1.granted().expect("exempt admitted at join");
    let p2 = ready(&mut g.acquire(3u64, 0u32).at(LevelId(0)));
    assert_eq!((p1.exempt(), p1.seat()), (Some(LevelId(0)), usize::MAX));
    assert_eq!(g.exempt(), (2, 2));
    assert_eq!((g.holding(), g.waiting()), (1, 1), "outside ServerCL");
    let v = g.levels();
    let ex = level(&v, "exempt");
    assert_eq!((ex.seats_in_use, ex.exempt_admitted, ex.queued), (2, 2, 0));
    drop((p1, p2));
    assert_eq!(g.exempt(), (2, 0));
    assert!(
        g.metrics().tenant(3u64).is_none(),
        "counted apart from tenants"
    );
    drop(held);
    drop(ready(&mut b));
}

#[test]
fn gate_level_refusals_are_the_gates_errors() {
    let clock = ManualClock::new();
    let levels = LevelsConfig::new(Config::preset("2dfqe").unwrap())
        .level(LevelConfig::new("high", 1.0))
        .level(LevelConfig::new("catch-all", 1.0).queue_limit(1))
        .adjust_period(PERIOD);
    let g = gate(2, levels, &clock);
    let _held = ready(&mut g.acquire(1u64, 0u32));
    let _waiting = g.join(2u64, 0u32).unwrap();
    match g.join(3u64, 0u32) {
        Err(AcquireError::Level(LevelRefusal::Full { level, name, limit })) => {
            assert_eq!((level, name.as_str(), limit), (LevelId(1), "catch-all", 1));
        }
        other => panic!("expected the catch-all full, got {:?}", other.map(|_| ())),
    }
    let unknown = g.acquire(1u64, 0u32).at(LevelId(9)).join();
    assert_eq!(
        unknown.err(),
        Some(AcquireError::Level(LevelRefusal::Unknown(LevelId(9))))
    );
    assert_eq!(g.metrics().tenant(3u64).unwrap().rejected, 1);
}

#[test]
fn gate_reload_with_requests_queued_loses_none() {
    let clock = ManualClock::new();
    let g = gate(3, apf_like(), &clock);
    let mut all: Vec<Acquire> = (0..6u64).map(|t| g.acquire(t, 0u32)).collect();
    all.extend((0..3u64).map(|t| {
        g.acquire(100 + t, 0u32)
            .at(Route::level(HIGH).distinguished(t))
    }));
    let mut pending = all;
    let mut held = grant(&mut pending);
    assert_eq!((held.len(), pending.len()), (3, 6));
    // New shares, a new level in the middle, a queue limit: the queued requests stay.
    let reload = LevelsConfig::new(Config::for_executor("2dfqe", 1, 1e6, false).unwrap())
        .level(LevelConfig::exempt("exempt"))
        .level(LevelConfig::new("high", 3.0).lendable_percent(50.0))
        .level(LevelConfig::new("mid", 1.0))
        .level(LevelConfig::new("catch-all", 1.0).queue_limit(100))
        .adjust_period(PERIOD);
    g.set_levels(&reload).unwrap();
    assert_eq!(g.waiting(), 6);
    let v = g.levels();
    assert_eq!(v.len(), 4);
    assert_eq!(level(&v, "high").queued + level(&v, "catch-all").queued, 6);
    // Drain: every queued request gets a seat in the end.
    let mut served = held.len();
    while !pending.is_empty() {
        held.clear();
        clock.advance(Duration::from_secs(1));
        held = grant(&mut pending);
        assert!(!held.is_empty(), "no progress");
        served += held.len();
    }
    assert_eq!(served, 9);
    // A reload may not change a level's exemption or its fair scheduler.
    let bad = reload.clone().level(LevelConfig::exempt("high"));
    assert!(g.set_levels(&bad).is_err());
}

#[test]
fn gate_without_levels_is_flat() {
    let g = FairGate::builder().seats(1).build().unwrap();
    assert!(g.levels().is_empty());
    assert!(g.set_levels(&apf_like()).is_err());
    // A route means nothing without levels.
    let p = ready(&mut g.acquire(1u64, 0u32).at(LevelId(0)));
    assert_eq!((p.seat(), p.exempt()), (0, None));
}

#[test]
fn gate_adaptive_depth_keeps_a_seat_per_level() {
    let depth = DepthConfig {
        min: 1,
        ..DepthConfig::default()
    };
    let err = FairGate::builder()
        .levels(apf_like())
        .adaptive_depth(depth)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("adaptive_depth.min"), "{err}");
}

/// A pool of one thread on a manual clock, blocked by a task until the returned sender says.
fn blocked_pool(levels: LevelsConfig) -> (FairPool, mpsc::Sender<()>) {
    let pool = FairPool::builder()
        .workers(1)
        .levels(levels)
        .clock(ManualClock::new())
        .build()
        .unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let (started, is_started) = mpsc::channel::<()>();
    pool.submit(0u64, 0u32, move || {
        started.send(()).unwrap();
        wait.recv().unwrap();
    })
    .unwrap();
    is_started.recv().unwrap();
    (pool, go)
}

#[test]
fn pool_exempt_task_takes_the_next_free_thread() {
    let levels = exempt_over_catch_all("2dfqe");
    let (pool, go) = blocked_pool(levels);
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut handles = Vec::new();
    for (t, level) in [
        (1u64, LevelId::CATCH_ALL),
        (2, LevelId::CATCH_ALL),
        (9, LevelId(0)),
    ] {
        let order = order.clone();
        let task = move || order.lock().unwrap().push(t);
        handles.push(pool.submit_at(t, 0u32, level, None, task).unwrap());
    }
    let v = pool.levels();
    assert_eq!((v[0].queued, v[1].queued, v[1].seats_in_use), (1, 2, 1));
    go.send(()).unwrap();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), [9, 1, 2]);
}

#[test]
fn pool_reload_with_tasks_queued_loses_none_and_full_levels_refuse() {
    let levels = LevelsConfig::new(Config::preset("2dfqe").unwrap())
        .level(LevelConfig::new("catch-all", 1.0).queue_limit(4))
        .adjust_period(PERIOD);
    let (pool, go) = blocked_pool(levels);
    let handles: Vec<_> = (0..4u64)
        .map(|t| pool.submit(t, 0u32, move || t).unwrap())
        .collect();
    match pool.submit(5u64, 0u32, || 5) {
        Err(SubmitError::Level(LevelRefusal::Full { limit: 4, .. })) => {}
        other => panic!("expected the level full, got {:?}", other.err()),
    }
    let reload = LevelsConfig::new(Config::preset("2dfqe").unwrap())
        .level(LevelConfig::new("high", 2.0))
        .level(LevelConfig::new("catch-all", 1.0).queue_limit(10));
    let refused = pool.set_levels(&reload);
    assert!(refused.is_err(), "two levels need two threads");
    let reload = LevelsConfig::new(Config::preset("2dfqe").unwrap())
        .level(LevelConfig::new("catch-all", 2.0).queue_limit(10));
    pool.set_levels(&reload).unwrap();
    let extra = pool.submit(5u64, 0u32, || 5).unwrap();
    assert_eq!(pool.levels()[0].queued, 5);
    go.send(()).unwrap();
    let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum + extra.join().unwrap(), 11);
}

#[test]
fn gate_exempt_needs_no_cost_and_holds_a_drain() {
    // WFQ needs costs up front; an exempt request never meets the scheduler.
    let levels = exempt_over_catch_all("wfq");
    let g = gate(1, levels, &ManualClock::new());
    let p = ready(&mut g.acquire(1u64, 0u32).at(LevelId(0)));
    assert!(matches!(
        g.acquire(2u64, 0u32).join(),
        Err(AcquireError::Scheduler(
            fairlane_core::Error::CostRequired { .. }
        ))
    ));
    g.drain();
    assert!(!g.is_drained(), "an exempt permit is still held");
    drop(p);
    assert!(g.is_drained());
}
