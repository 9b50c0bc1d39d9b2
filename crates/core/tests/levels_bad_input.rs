//! Bad priority-level configurations and bad calls on a level scheduler: an error naming the
//! level and the field (`levels[1] ("high").shares`), never a panic, and nothing changed.

use fairlane_core::levels::{LevelConfig, LevelsConfig, Sharing};
use fairlane_core::{Config, Decision, Error, LevelId, Request, TenantId};

fn base(workers: usize) -> LevelsConfig {
    LevelsConfig::new(Config::preset("wfq").unwrap().workers(workers))
        .level(LevelConfig::exempt("exempt"))
        .level(LevelConfig::new("high", 2.0).lendable_percent(50.0))
        .level(LevelConfig::new("catch-all", 1.0))
}

/// `config` is refused with `InvalidLevel` at `index`, `field`; the message names both.
fn refused_level(config: LevelsConfig, index: usize, field: &str) {
    let e = config.build::<u32>().map(|_| ()).unwrap_err();
    match &e {
        Error::InvalidLevel(l) => assert_eq!((l.index, l.field), (index, field), "{e}"),
        other => panic!("expected levels[{index}].{field}, got {other:?}"),
    }
    let text = e.to_string();
    assert!(
        text.contains(&format!("levels[{index}]")) && text.contains(field),
        "{text}"
    );
}

fn refused_config(config: LevelsConfig, field: &str) {
    match config.build::<u32>().map(|_| ()).unwrap_err() {
        Error::InvalidConfig { field: f, reason } => assert_eq!(f, field, "{reason}"),
        other => panic!("expected {field}, got {other:?}"),
    }
}

fn with_level(index: usize, f: impl FnOnce(&mut LevelConfig)) -> LevelsConfig {
    let mut c = base(4);
    f(&mut c.levels[index]);
    c
}

#[test]
fn shares_must_be_positive_and_finite() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e10] {
        refused_level(with_level(1, |l| l.shares = bad), 1, "shares");
    }
    refused_level(with_level(0, |l| l.shares = 1.0), 0, "shares"); // exempt takes no seats
}

#[test]
fn percents_must_be_within_0_and_100() {
    for bad in [-1.0, 100.5, 150.0, f64::NAN, f64::INFINITY] {
        refused_level(
            with_level(2, |l| l.lendable_percent = bad),
            2,
            "lendable_percent",
        );
        refused_level(
            with_level(2, |l| l.borrowing_limit_percent = Some(bad)),
            2,
            "borrowing_limit_percent",
        );
    }
    refused_level(
        with_level(0, |l| l.lendable_percent = 10.0),
        0,
        "lendable_percent",
    );
    refused_level(
        with_level(0, |l| l.borrowing_limit_percent = Some(10.0)),
        0,
        "borrowing_limit_percent",
    );
    for ok in [0.0, 100.0] {
        with_level(2, |l| l.lendable_percent = ok)
            .build::<u32>()
            .unwrap();
    }
}

#[test]
fn names_queue_limits_timeouts_and_schedulers_are_checked() {
    refused_level(with_level(1, |l| l.name = " ".into()), 1, "name");
    refused_level(with_level(1, |l| l.name = "exempt".into()), 1, "name");
    refused_level(with_level(1, |l| l.queue_limit = Some(0)), 1, "queue_limit");
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        refused_level(
            with_level(1, |l| l.queue_timeout = Some(bad)),
            1,
            "queue_timeout",
        );
    }
    let bad = Config::preset("wfq").unwrap().default_weight(0.0);
    refused_level(with_level(1, |l| l.scheduler = Some(bad)), 1, "scheduler");
}

#[test]
fn a_catch_all_is_required_and_limited() {
    refused_config(base(4).catch_all("default"), "catch_all");
    refused_level(base(4).catch_all("exempt"), 0, "exempt");
    let e = base(4)
        .catch_all("default")
        .build::<u32>()
        .map(|_| ())
        .unwrap_err();
    assert!(e.to_string().contains("exempt, high, catch-all"), "{e}");
}

#[test]
fn more_levels_than_server_cl_need_exempt_ones_to_absorb_them() {
    // Two non-exempt levels need two workers; the exempt level needs none.
    refused_config(base(1), "workers");
    base(2).build::<u32>().unwrap();
    let e = base(1).build::<u32>().map(|_| ()).unwrap_err();
    assert!(
        e.to_string().contains("2 non-exempt priority levels"),
        "{e}"
    );
    // Shrinking ServerCL below them is refused and changes nothing.
    let mut s = base(2).build::<u32>().unwrap();
    let e = s.set_workers(1).unwrap_err();
    assert!(
        matches!(
            e,
            Error::InvalidConfig {
                field: "workers",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(s.workers(), 2);
    assert!(s.set_workers(0).is_err() && s.set_workers(usize::MAX).is_err());
    assert_eq!(s.levels()[1].nominal + s.levels()[2].nominal, 2);
}

#[test]
fn at_most_256_levels() {
    let mut c = LevelsConfig::new(Config::preset("fifo").unwrap().workers(300));
    for i in 0..256 {
        c = c.level(LevelConfig::new(format!("l{i}"), 1.0));
    }
    c = c.catch_all("l0");
    c.build::<u32>().unwrap();
    refused_config(c.level(LevelConfig::new("one too many", 1.0)), "levels");
}

#[test]
fn the_adjustment_period_must_be_a_positive_time() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        refused_config(base(4).adjust_period(bad), "adjust_period");
    }
    base(4).sharing(Sharing::Strict).build::<u32>().unwrap();
}

#[test]
fn bad_calls_are_refused_and_change_nothing() {
    let mut s = base(4)
        .level(LevelConfig::new("small", 1.0).queue_limit(1))
        .build::<u32>()
        .unwrap();
    let r = |l: u32| {
        Request::new(1u64, 0u32, 0)
            .with_cost(1.0)
            .at_level(LevelId(l))
    };
    let e = s.enqueue(r(9), 0.0).unwrap_err();
    assert_eq!(e, Error::UnknownLevel(LevelId(9)));
    assert!(e.to_string().contains("level 9"), "{e}");
    let small = s.enqueue(r(3), 0.0).unwrap();
    let e = s.enqueue(r(3), 0.0).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::LevelFull {
                level: LevelId(3),
                limit: 1
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("level 3"), "{e}");
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        let e = s.enqueue(r(1).with_cost(bad), 0.0).unwrap_err();
        assert!(matches!(e, Error::InvalidCost { .. }), "{e}");
    }
    let e = s.enqueue(Request::new(5u64, 0u32, 0), 0.0).unwrap_err(); // wfq needs costs
    assert!(
        matches!(
            e,
            Error::CostRequired {
                tenant: TenantId(5),
                ..
            }
        ),
        "{e}"
    );
    assert!(matches!(
        s.enqueue(r(1), f64::NAN),
        Err(Error::InvalidTime(_))
    ));
    assert!(matches!(
        s.dequeue(4, 0.0),
        Err(Error::InvalidWorker {
            worker: 4,
            workers: 4
        })
    ));
    assert!(matches!(s.dequeue(0, f64::NAN), Err(Error::InvalidTime(_))));
    assert!(matches!(
        s.set_weight(TenantId(1), 0.0, 0.0),
        Err(Error::InvalidWeight { .. })
    ));
    assert_eq!((s.queued(), s.running()), (1, 0));
    assert!(
        s.tenant(TenantId(5)).is_none(),
        "a refused request left a flow behind"
    );

    s.enqueue(r(1), 0.0).unwrap();
    let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
    assert_eq!(d.request.level, LevelId(1));
    assert_eq!(
        s.cancel(d.ticket, 0.0).unwrap_err(),
        Error::AlreadyRunning(d.ticket)
    );
    assert_eq!(s.complete(small, 1.0, 0.0), Err(Error::NotRunning(small)));
    s.progress(d.ticket, 2.0, 1.0).unwrap();
    let e = s.complete(d.ticket, 1.0, 1.0).unwrap_err();
    assert!(
        matches!(e, Error::UsageDecreased { ticket, .. } if ticket == d.ticket),
        "{e}"
    );
    assert!(matches!(
        s.remove_tenant(TenantId(1)),
        Err(Error::TenantBusy(TenantId(1)))
    ));
    assert!(matches!(
        s.remove_tenant(TenantId(77)),
        Err(Error::UnknownTenant(TenantId(77)))
    ));
    s.complete(d.ticket, 2.0, 1.0).unwrap();
    assert_eq!(
        s.complete(d.ticket, 2.0, 1.0),
        Err(Error::UnknownTicket(d.ticket))
    );
    let left = s.dequeue(0, 1.0).unwrap().run().unwrap();
    s.complete(left.ticket, 1.0, 2.0).unwrap();
    s.remove_tenant(TenantId(1)).unwrap();
    assert!(s.tenant(TenantId(1)).is_none());
    assert!(matches!(s.dequeue(0, 2.0).unwrap(), Decision::Empty));
}
