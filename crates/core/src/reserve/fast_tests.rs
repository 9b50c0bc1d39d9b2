//! The fast LDF dispatch ([`ReserveScheduler::select_ldf`]) against the full scan it replaces
//! (`scan_only`): random operation sequences over reserved, limited, elastic, weighted and
//! best-effort tenants, some metered over their own interval; every decision, every retry
//! time, every meter reading and record must be identical, bit for bit.

use proptest::prelude::*;

use super::{Policy, Reservation, ReserveConfig, ReserveScheduler};
use crate::{Admin, Decision, Request, Scheduler, TenantId, Ticket};

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        tenant: u8,
        n: u8,
    },
    Dequeue {
        worker: u8,
    },
    Complete {
        pick: u16,
        used: u16,
    },
    Cancel {
        pick: u16,
    },
    Advance {
        dt: u32,
    },
    Terms {
        tenant: u8,
        kind: u8,
        res: u16,
        x: u16,
    },
    Weight {
        tenant: u8,
        w: u8,
    },
    Workers {
        n: u8,
    },
    Read {
        tenant: u8,
    },
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<u8>(), 1..4u8).prop_map(|(tenant, n)| Op::Enqueue { tenant, n }),
        8 => any::<u8>().prop_map(|worker| Op::Dequeue { worker }),
        6 => (any::<u16>(), any::<u16>()).prop_map(|(pick, used)| Op::Complete { pick, used }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        5 => any::<u32>().prop_map(|dt| Op::Advance { dt }),
        2 => (any::<u8>(), any::<u8>(), any::<u16>(), any::<u16>())
            .prop_map(|(tenant, kind, res, x)| Op::Terms { tenant, kind, res, x }),
        1 => (any::<u8>(), 1..8u8).prop_map(|(tenant, w)| Op::Weight { tenant, w }),
        1 => (1..6u8).prop_map(|n| Op::Workers { n }),
        1 => any::<u8>().prop_map(|tenant| Op::Read { tenant }),
        1 => Just(Op::Close),
    ]
}

fn terms(kind: u8, res: u16, x: u16) -> Reservation {
    // Few distinct values, so that equal reservations (and tied deficits) are common.
    let res = 0.5 + (res % 9) as f64 * 6.25; // [0.5, 50.5]
    let max = (res + (x % 64) as f64).min(100.0);
    match kind % 7 {
        0 => Reservation::new(res, 100.0),
        1 => Reservation::new(res, max),
        2 => Reservation::best_effort(1.0 + (x % 99) as f64),
        3 => Reservation::new(res, 100.0).elastic((x % 11) as f64 / 10.0, max),
        4 => Reservation::new(res, max).weight(0.5 + (x % 7) as f64),
        5 => Reservation::new(res, 100.0).interval(0.25 + (x % 3) as f64 * 0.5),
        _ => Reservation::new(res / 50.0, 100.0),
    }
}

struct Run {
    s: ReserveScheduler<u32>,
    queued: Vec<Ticket>,
    running: Vec<(Ticket, f64)>,
}

fn start(policy: Policy, scan_only: bool) -> Run {
    let mut s = ReserveConfig::new(policy)
        .cores(3)
        .interval(0.5)
        .build::<u32>()
        .unwrap();
    s.use_full_scan(scan_only);
    Run {
        s,
        queued: Vec::new(),
        running: Vec::new(),
    }
}

/// Apply `op` at `now`; returns a printable outcome to compare.
fn apply(r: &mut Run, op: &Op, now: f64, tenants: u8) -> String {
    let tenant = |t: u8| TenantId((t % tenants) as u64);
    match *op {
        Op::Enqueue { tenant: t, n } => {
            for i in 0..n {
                let tk =
                    r.s.enqueue(Request::new(tenant(t).0, 0u32, i as u32), now)
                        .unwrap();
                r.queued.push(tk);
            }
            String::new()
        }
        Op::Dequeue { worker } => {
            let w = worker as usize % r.s.cores;
            match r.s.dequeue(w, now).unwrap() {
                Decision::Run(d) => {
                    r.queued.retain(|&q| q != d.ticket);
                    r.running.push((d.ticket, now));
                    format!("run {:?} {:?}", d.request.tenant, d.ticket)
                }
                Decision::Empty => "empty".into(),
                Decision::RetryAt(at) => format!("retry {:x}", at.to_bits()),
            }
        }
        Op::Complete { pick, used } => {
            if r.running.is_empty() {
                return String::new();
            }
            let (tk, at) = r.running.remove(pick as usize % r.running.len());
            // Used core-time up to the wall time elapsed, sometimes a little less, or a fixed
            // quantum (equal usage, tied deficits).
            let used = if used % 6 == 5 {
                0.004
            } else {
                (now - at) * (used % 5 + 1) as f64 / 5.0
            };
            r.s.complete(tk, used, now).unwrap();
            String::new()
        }
        Op::Cancel { pick } => {
            if r.queued.is_empty() {
                return String::new();
            }
            let tk = r.queued.remove(pick as usize % r.queued.len());
            format!("{:?}", r.s.cancel(tk, now).map(|q| q.tenant))
        }
        Op::Advance { .. } => String::new(),
        Op::Terms {
            tenant: t,
            kind,
            res,
            x,
        } => format!(
            "{:?}",
            r.s.set_reservation(tenant(t), terms(kind, res, x), now)
        ),
        Op::Weight { tenant: t, w } => {
            format!("{:?}", r.s.set_weight(tenant(t), w as f64 / 2.0, now))
        }
        Op::Workers { n } => {
            // Only grow: running tasks keep their cores.
            let n = (n as usize).max(r.s.cores);
            format!("{:?}", r.s.set_workers(n))
        }
        Op::Read { tenant: t } => format!("{:?}", r.s.meter_reading(tenant(t), now)),
        Op::Close => {
            r.s.close_intervals(now).unwrap();
            format!("{:?}", r.s.take_records())
        }
    }
}

fn check(policy: Policy, tenants: u8, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut fast = start(policy, false);
    let mut scan = start(policy, true);
    let mut now = 0.0;
    for (i, op) in ops.iter().enumerate() {
        if let Op::Advance { dt } = op {
            // Mostly small steps (many dispatches per window), sometimes past a window.
            now += (*dt % 4096) as f64 * 1e-4 * if dt >> 30 == 3 { 10.0 } else { 1.0 };
        }
        let a = apply(&mut fast, op, now, tenants);
        let b = apply(&mut scan, op, now, tenants);
        prop_assert_eq!(&a, &b, "op {} {:?} at {}", i, op, now);
    }
    fast.s.close_intervals(now + 10.0).unwrap();
    scan.s.close_intervals(now + 10.0).unwrap();
    prop_assert_eq!(fast.s.take_records(), scan.s.take_records());
    prop_assert!(fast.s.examined() <= scan.s.examined() + ops.len() as u64 * 64);
    Ok(())
}

proptest! {
    #![proptest_config(crate::util::proptest_cases(512))]

    #[test]
    fn fast_ldf_decides_as_the_scan(tenants in 1..24u8, ops in prop::collection::vec(op(), 1..400)) {
        check(Policy::ldf(), tenants, &ops)?;
    }

    #[test]
    fn fast_ldf_without_boost_decides_as_the_scan(
        tenants in 1..24u8,
        ops in prop::collection::vec(op(), 1..400),
    ) {
        let o = super::LdfOptions { boost: false, ..Default::default() };
        check(Policy::Ldf(o), tenants, &ops)?;
    }
}

/// Many tenants, always busy: the fast path must actually prune (evaluate far fewer
/// deficits than the scan) while deciding the same.
#[test]
fn fast_ldf_prunes_with_many_active_tenants() {
    let mut fast = start(Policy::ldf(), false);
    let mut scan = start(Policy::ldf(), true);
    for r in [&mut fast, &mut scan] {
        r.s.set_workers(8).unwrap();
        for t in 0..200u64 {
            let res = 0.2 + (t % 7) as f64 * 0.05;
            r.s.set_reservation(TenantId(t), Reservation::new(res, 100.0), 0.0)
                .unwrap();
            for _ in 0..2 {
                r.queued
                    .push(r.s.enqueue(Request::new(t, 0u32, 0), 0.0).unwrap());
            }
        }
    }
    let mut now = 0.0;
    let ops: Vec<Op> = (0..6000)
        .flat_map(|i| {
            [
                Op::Advance { dt: 5 },
                Op::Complete { pick: 0, used: 4 },
                Op::Enqueue {
                    tenant: (i % 200) as u8,
                    n: 1,
                },
                Op::Dequeue { worker: 0 },
            ]
        })
        .collect();
    for r in [&mut fast, &mut scan] {
        for w in 0..8 {
            apply(r, &Op::Dequeue { worker: w }, 0.0, 200);
        }
    }
    let (e0, s0) = (fast.s.examined(), scan.s.examined());
    for op in &ops {
        if let Op::Advance { dt } = op {
            now += *dt as f64 * 1e-4;
        }
        assert_eq!(
            apply(&mut fast, op, now, 200),
            apply(&mut scan, op, now, 200)
        );
    }
    let (e, s) = (fast.s.examined() - e0, scan.s.examined() - s0);
    assert!(e * 5 < s, "fast examined {e}, scan {s}");
}

/// The case CI's proptest found (stop 27): two tenants' windows end at the same instant as
/// a dispatch, and the walk and the scan touch them in opposite orders. Records are the same
/// set either way; `take_records` must hand them out in one order.
#[test]
fn windows_closing_at_one_instant_come_out_in_one_order() {
    let e = |tenant, n| Op::Enqueue { tenant, n };
    let ops = vec![
        Op::Advance { dt: 366626508 },
        e(9, 2),
        Op::Advance { dt: 1030280545 },
        Op::Advance { dt: 150945792 },
        e(25, 1),
        Op::Advance { dt: 22913882 },
        e(4, 1),
        e(39, 1),
        e(0, 1),
        Op::Advance { dt: 43628342 },
        e(0, 1),
        e(0, 1),
        Op::Advance { dt: 369222805 },
        e(0, 1),
        e(0, 1),
        e(0, 1),
        e(0, 1),
        e(0, 1),
        Op::Advance { dt: 1563136506 },
        Op::Dequeue { worker: 0 },
        Op::Terms {
            tenant: 228,
            kind: 187,
            res: 0,
            x: 35829,
        },
        Op::Terms {
            tenant: 55,
            kind: 40,
            res: 0,
            x: 27195,
        },
        Op::Dequeue { worker: 0 },
    ];
    check(Policy::ldf(), 8, &ops).unwrap();
}
