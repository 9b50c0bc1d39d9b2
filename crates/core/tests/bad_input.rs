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
