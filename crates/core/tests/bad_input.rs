//! Bad input returns an error naming what was wrong — never a panic, never silent
//! corruption — for every scheduler.

use fairlane_core::{
    Config, Decision, Error, EstimatorKind, Request, Scheduler, TenantId, VirtualClock, PRESETS,
};

fn all() -> Vec<Box<dyn Scheduler<u32> + Send>> {
    let mut v: Vec<_> = PRESETS
        .iter()
        .map(|p| Config::preset(p).unwrap().workers(2).build().unwrap())
        .collect();
    v.push(
        Config::preset("2dfq")
            .unwrap()
            .workers(2)
            .clock(VirtualClock::Gps { capacity: 2.0 })
            .build()
            .unwrap(),
    );
    v
}

#[test]
fn bad_costs_weights_and_times_are_refused_and_change_nothing() {
    for mut s in all() {
        let name = s.name();
        for bad in [f64::NAN, -1.0, f64::INFINITY, f64::NEG_INFINITY] {
            let e = s
                .enqueue(Request::new(1u64, 0u32, 0).with_cost(bad), 0.0)
                .unwrap_err();
            assert!(matches!(e, Error::InvalidCost { .. }), "{name}: {e}");
            let e = s.set_weight(TenantId(1), bad, 0.0).unwrap_err();
            assert!(matches!(e, Error::InvalidWeight { .. }), "{name}: {e}");
        }
        assert!(matches!(
            s.set_weight(TenantId(1), 0.0, 0.0),
            Err(Error::InvalidWeight { .. })
        ));
        for bad in [f64::NAN, f64::INFINITY] {
            let e = s
                .enqueue(Request::new(1u64, 0u32, 0).with_cost(1.0), bad)
                .unwrap_err();
            assert!(matches!(e, Error::InvalidTime(_)), "{name}: {e}");
            assert!(
                matches!(s.dequeue(0, bad), Err(Error::InvalidTime(_))),
                "{name}"
            );
        }
        assert_eq!(
            (s.queued(), s.running()),
            (0, 0),
            "{name}: refused input left state behind"
        );
        assert!(matches!(
            s.dequeue(2, 0.0),
            Err(Error::InvalidWorker {
                worker: 2,
                workers: 2
            })
        ));

        // A healthy request goes through after all that.
        let t = s
            .enqueue(Request::new(1u64, 0u32, 7).with_cost(1.0), 0.0)
            .unwrap();
        assert!(
            matches!(s.progress(t, 0.5, 0.0), Err(Error::NotRunning(_))),
            "{name}"
        );
        assert!(
            matches!(s.complete(t, 0.5, 0.0), Err(Error::NotRunning(_))),
            "{name}"
        );
        assert!(
            matches!(s.remove_tenant(TenantId(1)), Err(Error::TenantBusy(_))),
            "{name}"
        );
        let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
        assert_eq!(d.request.payload, 7);
        assert!(
            matches!(s.cancel(d.ticket, 0.0), Err(Error::AlreadyRunning(_))),
            "{name}"
        );
        for bad in [f64::NAN, -0.5, f64::INFINITY] {
            assert!(
                matches!(
                    s.progress(d.ticket, bad, 0.1),
                    Err(Error::InvalidCost { .. })
                ),
                "{name}"
            );
            assert!(
                matches!(
                    s.complete(d.ticket, bad, 0.1),
                    Err(Error::InvalidCost { .. })
                ),
                "{name}"
            );
        }
        s.progress(d.ticket, 0.75, 0.1).unwrap();
        let e = s.complete(d.ticket, 0.5, 0.2).unwrap_err();
        assert!(matches!(e, Error::UsageDecreased { .. }), "{name}: {e}");
        s.complete(d.ticket, 1.0, 0.2).unwrap();
        // Completing twice, progress after completion, cancelling a finished request.
        assert_eq!(
            s.complete(d.ticket, 1.0, 0.3),
            Err(Error::UnknownTicket(d.ticket)),
            "{name}"
        );
        assert_eq!(
            s.progress(d.ticket, 1.0, 0.3),
            Err(Error::UnknownTicket(d.ticket)),
            "{name}"
        );
        assert!(
            matches!(s.cancel(d.ticket, 0.3), Err(Error::UnknownTicket(_))),
            "{name}"
        );
        assert_eq!((s.queued(), s.running()), (0, 0), "{name}");
        s.remove_tenant(TenantId(1)).unwrap();
        assert!(s.tenant(TenantId(1)).is_none());
        assert_eq!(
            s.remove_tenant(TenantId(1)),
            Err(Error::UnknownTenant(TenantId(1)))
        );
        assert!(
            matches!(s.dequeue(1, 0.3).unwrap(), Decision::Empty),
            "{name}"
        );
        assert!(matches!(
            s.set_workers(0),
            Err(Error::InvalidConfig {
                field: "workers",
                ..
            })
        ));
    }
}

#[test]
fn stale_tickets_are_not_confused_with_reused_slots() {
    for mut s in all() {
        let a = s
            .enqueue(Request::new(1u64, 0u32, 1).with_cost(1.0), 0.0)
            .unwrap();
        assert_eq!(s.cancel(a, 0.0).unwrap().payload, 1);
        // The slot is reused by b; the stale ticket a must not reach b.
        let b = s
            .enqueue(Request::new(2u64, 0u32, 2).with_cost(1.0), 0.0)
            .unwrap();
        assert_ne!(a, b);
        assert_eq!(
            s.cancel(a, 0.0),
            Err(Error::UnknownTicket(a)),
            "{}",
            s.name()
        );
        assert_eq!(
            s.dequeue(0, 0.0).unwrap().run().unwrap().request.payload,
            2,
            "{}",
            s.name()
        );
    }
}

#[test]
fn costs_are_required_where_the_scheduler_needs_them() {
    let mut oracle = Config::preset("wfq").unwrap().build::<()>().unwrap();
    let e = oracle
        .enqueue(Request::new(3u64, 4u32, ()), 0.0)
        .unwrap_err();
    assert_eq!(
        e,
        Error::CostRequired {
            tenant: TenantId(3),
            class: 4.into()
        }
    );
    assert!(e.to_string().contains("tenant 3"), "{e}");
    let mut gps = Config::preset("wfqe")
        .unwrap()
        .clock(VirtualClock::Gps { capacity: 1.0 })
        .build::<()>()
        .unwrap();
    assert!(matches!(
        gps.enqueue(Request::new(3u64, 4u32, ()), 0.0),
        Err(Error::CostRequired { .. })
    ));
    assert_eq!(gps.queued(), 0);
}

#[test]
fn bad_configs_name_the_field() {
    let field = |r: Result<Box<dyn Scheduler<()> + Send>, Error>| match r {
        Err(Error::InvalidConfig { field, .. }) => field,
        Err(e) => panic!("unexpected {e}"),
        Ok(_) => panic!("accepted"),
    };
    assert_eq!(
        field(Config::preset("wfq").unwrap().workers(0).build()),
        "workers"
    );
    assert_eq!(
        field(Config::preset("wfq").unwrap().default_weight(-1.0).build()),
        "default_weight"
    );
    assert_eq!(
        field(Config::preset("drr").unwrap().drr_quantum(f64::NAN).build()),
        "drr_quantum"
    );
    assert_eq!(
        field(
            Config::preset("wfq")
                .unwrap()
                .clock(VirtualClock::Gps { capacity: 0.0 })
                .build()
        ),
        "clock.capacity"
    );
    assert_eq!(
        field(
            Config::preset("wfq")
                .unwrap()
                .estimator(EstimatorKind::Ema {
                    alpha: 2.0,
                    initial: 1.0
                })
                .build()
        ),
        "estimator.alpha"
    );
    let e = Config::preset("wfq2").unwrap_err();
    assert!(
        e.to_string().contains("2dfqe"),
        "lists the known names: {e}"
    );
}

/// Weights outside [MIN_WEIGHT, MAX_WEIGHT] are refused with the value named, by
/// `set_weight` and by the configuration (a weight of 1e-320 used to panic 2DFQ).
#[test]
fn weights_outside_the_documented_range_are_refused() {
    use fairlane_core::{MAX_WEIGHT, MIN_WEIGHT};
    for mut s in all() {
        let name = s.name();
        for bad in [
            1e-320,
            5e-324,
            MIN_WEIGHT / 2.0,
            MAX_WEIGHT * 2.0,
            1e300,
            f64::MAX,
        ] {
            let e = s.set_weight(TenantId(1), bad, 0.0).unwrap_err();
            assert_eq!(
                e,
                Error::InvalidWeight {
                    tenant: TenantId(1),
                    value: bad
                },
                "{name}"
            );
            assert!(e.to_string().contains(&bad.to_string()), "{name}: {e}");
        }
        for good in [MIN_WEIGHT, MAX_WEIGHT, 1.0] {
            s.set_weight(TenantId(1), good, 0.0).unwrap();
        }
    }
    for bad in [1e-320, 1e300] {
        let r = Config::preset("2dfq")
            .unwrap()
            .default_weight(bad)
            .build::<()>();
        match r {
            Err(Error::InvalidConfig { field, reason }) => {
                assert_eq!(field, "default_weight");
                assert!(reason.contains(&bad.to_string()), "{reason}");
            }
            _ => panic!("default weight {bad} accepted"),
        }
    }
}

/// The extreme finite costs, usages and times the API allows (subnormals to
/// f64::MAX) never panic, never loop and never make a tag or the virtual time infinite,
/// with the extreme weights of the range. f64::MAX costs used to panic 2DFQ and 2DFQᴱ, and a
/// cost of 1e10 stalled DRR for seconds.
#[test]
fn extreme_costs_and_weights_keep_every_scheduler_sound() {
    use fairlane_core::{MAX_WEIGHT, MIN_WEIGHT};
    let mut subjects = all();
    for q in [1.0, 1e-300] {
        subjects.push(
            Config::preset("drr")
                .unwrap()
                .workers(2)
                .drr_quantum(q)
                .build()
                .unwrap(),
        );
    }
    for mut s in subjects {
        let name = s.name();
        s.set_weight(TenantId(1), MIN_WEIGHT, 0.0).unwrap();
        s.set_weight(TenantId(2), MAX_WEIGHT, 0.0).unwrap();
        let costs = [f64::MAX, 5e-324, 1e300, 0.0, 1e10, f64::MAX, 1.0];
        let mut payload = 0;
        for &c in &costs {
            for t in [1u64, 2, 3] {
                payload += 1;
                s.enqueue(Request::new(t, 0u32, payload).with_cost(c), 0.0)
                    .unwrap();
            }
        }
        let mut served = 0;
        let mut now = 0.0;
        while let Decision::Run(d) = s.dequeue(0, now).unwrap() {
            served += 1;
            now += 1.0;
            s.progress(d.ticket, f64::MAX / 2.0, now).unwrap();
            s.complete(d.ticket, f64::MAX, now).unwrap();
            for t in 1..=3 {
                let tag = s.tenant(TenantId(t)).unwrap().tag;
                assert!(!tag.is_nan(), "{name}: tag {tag}");
                assert!(tag.is_finite() || name == "edf", "{name}: tag {tag}");
            }
            if let Some(v) = s.virtual_time() {
                assert!(v.is_finite(), "{name}: virtual time {v}");
            }
            assert!(served <= costs.len() * 3, "{name}: served more than queued");
        }
        assert_eq!(served, costs.len() * 3, "{name}");
        assert_eq!((s.queued(), s.running()), (0, 0), "{name}");
    }
}

/// DRR with a quantum of 1 serves a head of cost 1e10 in one dequeue; the other
/// tenant is next, not 10^10 rounds later.
#[test]
fn drr_serves_a_huge_cost_without_spinning() {
    let mut s = Config::preset("drr")
        .unwrap()
        .drr_quantum(1.0)
        .build::<u32>()
        .unwrap();
    s.enqueue(Request::new(1u64, 0u32, 1).with_cost(1e10), 0.0)
        .unwrap();
    s.enqueue(Request::new(2u64, 0u32, 2).with_cost(1.0), 0.0)
        .unwrap();
    let first = s.dequeue(0, 0.0).unwrap().run().unwrap();
    assert_eq!(first.request.payload, 2, "the cheap head fits first");
    s.complete(first.ticket, 1.0, 1.0).unwrap();
    let second = s.dequeue(0, 1.0).unwrap().run().unwrap();
    assert_eq!(second.request.payload, 1);
    assert_eq!(second.charged, 1e10);
}

/// Found by the fuzzer: the reservation scheduler closed metering intervals one
/// by one, so a time jump of 1e15 intervals with a task running never returned, and at
/// 1e300 `start + interval == start` looped for ever. Long jumps now skip the intervals past
/// MAX_ROLLS, and times beyond MAX_TIME are refused.
#[test]
fn reservations_survive_huge_time_jumps() {
    use fairlane_core::reserve::{Policy, Reservation, ReserveConfig, MAX_TIME};
    for policy in [
        Policy::ldf(),
        Policy::drr(),
        Policy::Edf,
        Policy::BestEffort,
    ] {
        let mut s = ReserveConfig::new(policy)
            .cores(2)
            .utilization_cap(95.0)
            .build::<u32>()
            .unwrap();
        s.set_reservation(TenantId(1), Reservation::new(50.0, 100.0), 0.0)
            .unwrap();
        for p in 0..4 {
            s.enqueue(Request::new(1u64, 0u32, p), 0.0).unwrap();
        }
        let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
        for now in [1e15, 1e99, MAX_TIME] {
            assert!(matches!(
                s.dequeue(1, now).unwrap(),
                Decision::Run(_) | Decision::RetryAt(_)
            ));
            assert!(s.meter_reading(TenantId(1), now).is_some());
        }
        assert_eq!(
            s.dequeue(1, 1e300).unwrap_err(),
            Error::InvalidTime(1e300),
            "{}",
            policy.name()
        );
        s.complete(d.ticket, f64::MAX, MAX_TIME).unwrap();
        s.close_intervals(MAX_TIME).unwrap();
    }
}

/// A worker count beyond MAX_WORKERS is refused, not allocated (2DFQ keeps a lane
/// per worker in every node: `u32::MAX` workers aborted the process).
#[test]
fn absurd_worker_counts_are_refused() {
    use fairlane_core::MAX_WORKERS;
    for mut s in all() {
        let name = s.name();
        for bad in [0, MAX_WORKERS + 1, u32::MAX as usize, usize::MAX] {
            assert!(
                matches!(
                    s.set_workers(bad),
                    Err(Error::InvalidConfig {
                        field: "workers",
                        ..
                    })
                ),
                "{name}: {bad}"
            );
        }
        assert_eq!(s.workers(), 2, "{name}: a refused count changed nothing");
    }
    let e = Config::preset("2dfq")
        .unwrap()
        .workers(usize::MAX)
        .build::<()>()
        .err()
        .unwrap();
    assert!(e.to_string().contains(&usize::MAX.to_string()), "{e}");
}
