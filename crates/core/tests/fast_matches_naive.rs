//! The fast WFQ / WF²Q / 2DFQ / 2DFQᴱ make exactly the decisions of the naive Fig. 7 scan
//! (`support/naive.rs`) on random operation sequences: same request, same charge, same
//! tags, same virtual time, after every operation.
//!
//! Weights are drawn from {0.5, 1, 2, 3, 4} and costs are multiples of 1/4 so that sums of
//! weights are exact in floating point; the two implementations then compute bit-identical
//! tags and any difference is a difference in decisions.

mod support;

use fairlane_core::{
    Algorithm, Config, Decision, EstimatorKind, Request, Scheduler, TenantId, Ticket, VirtualClock,
};
use proptest::prelude::*;
use support::naive::{Estimate, Naive};

#[derive(Clone, Debug)]
enum Op {
    Enqueue {
        tenant: u8,
        class: u8,
        cost: u16,
        known: bool,
    },
    Dequeue {
        worker: u8,
    },
    Progress {
        pick: u16,
        add: u16,
    },
    Complete {
        pick: u16,
        add: u16,
    },
    Cancel {
        pick: u16,
    },
    Weight {
        tenant: u8,
        w: u8,
    },
    Advance {
        dt: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6, 0u8..3, 0u16..400, any::<bool>())
            .prop_map(|(tenant, class, cost, known)| Op::Enqueue { tenant, class, cost, known }),
        4 => (0u8..16).prop_map(|worker| Op::Dequeue { worker }),
        1 => (any::<u16>(), 0u16..300).prop_map(|(pick, add)| Op::Progress { pick, add }),
        3 => (any::<u16>(), 0u16..400).prop_map(|(pick, add)| Op::Complete { pick, add }),
        1 => any::<u16>().prop_map(|pick| Op::Cancel { pick }),
        1 => (0u8..6, 0u8..5).prop_map(|(tenant, w)| Op::Weight { tenant, w }),
        2 => (0u16..40).prop_map(|dt| Op::Advance { dt }),
    ]
}

const WEIGHTS: [f64; 5] = [0.5, 1.0, 2.0, 3.0, 4.0];

struct Case {
    algorithm: Algorithm,
    workers: usize,
    estimated: bool,
    gps: bool,
}

fn run(case: &Case, ops: &[Op]) -> Result<(), TestCaseError> {
    let n = case.workers;
    let capacity = if case.gps { Some(n as f64) } else { None };
    let (stagger, eligibility) = match case.algorithm {
        Algorithm::Wfq => (false, false),
        Algorithm::Wf2q => (false, true),
        Algorithm::TwoDfq => (true, true),
        _ => unreachable!(),
    };
    let (estimate, kind) = if case.estimated {
        (
            Estimate::Pessimistic {
                alpha: 0.75,
                initial: 10.0,
            },
            EstimatorKind::Pessimistic {
                alpha: 0.75,
                initial: 10.0,
            },
        )
    } else {
        (Estimate::Oracle, EstimatorKind::Oracle)
    };
    let mut naive = Naive::new(n, stagger, eligibility, estimate, capacity);
    let mut config = Config::new(case.algorithm).workers(n).estimator(kind);
    if let Some(capacity) = capacity {
        config = config.clock(VirtualClock::Gps { capacity });
    }
    let mut fast: Box<dyn Scheduler<u64> + Send> = config.build().unwrap();

    let mut now = 0.0;
    let mut queued: Vec<(u64, Ticket)> = Vec::new();
    let mut running: Vec<(u64, Ticket, f64)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Enqueue {
                tenant,
                class,
                cost,
                known,
            } => {
                let cost = f64::from(cost) * 0.25;
                let known = !case.estimated || known;
                let c = known.then_some(cost);
                let nt = naive.enqueue(u64::from(tenant), u32::from(class), c, now);
                let mut req = Request::new(u64::from(tenant), u32::from(class), nt);
                req.cost = c;
                let ft = fast.enqueue(req, now).unwrap();
                queued.push((nt, ft));
            }
            Op::Dequeue { worker } => {
                let w = usize::from(worker) % n;
                match (naive.dequeue(w, now), fast.dequeue(w, now).unwrap()) {
                    (None, Decision::Empty) => {}
                    (Some((nt, _, l)), Decision::Run(d)) => {
                        prop_assert_eq!(d.request.payload, nt, "step {}: different request", step);
                        prop_assert_eq!(d.charged, l, "step {}: different charge", step);
                        queued.retain(|q| q.0 != nt);
                        running.push((nt, d.ticket, 0.0));
                    }
                    (a, b) => prop_assert!(false, "step {}: naive {:?} fast {:?}", step, a, b),
                }
            }
            Op::Progress { pick, add } if !running.is_empty() => {
                let i = usize::from(pick) % running.len();
                running[i].2 += f64::from(add) * 0.25;
                let (nt, ft, used) = running[i];
                naive.progress(nt, used);
                fast.progress(ft, used, now).unwrap();
            }
            Op::Complete { pick, add } if !running.is_empty() => {
                let i = usize::from(pick) % running.len();
                let (nt, ft, used) = running.swap_remove(i);
                let used = used + f64::from(add) * 0.25;
                naive.complete(nt, used);
                fast.complete(ft, used, now).unwrap();
            }
            Op::Cancel { pick } if !queued.is_empty() => {
                let i = usize::from(pick) % queued.len();
                let (nt, ft) = queued.swap_remove(i);
                naive.cancel(nt, now);
                prop_assert_eq!(fast.cancel(ft, now).unwrap().payload, nt);
            }
            Op::Weight { tenant, w } => {
                naive.set_weight(u64::from(tenant), WEIGHTS[usize::from(w)], now);
                fast.set_weight(TenantId(u64::from(tenant)), WEIGHTS[usize::from(w)], now)
                    .unwrap();
            }
            Op::Advance { dt } => now += f64::from(dt) * 0.25,
            _ => {}
        }
        for (&id, t) in &naive.tenants {
            let view = fast.tenant(TenantId(id)).unwrap();
            prop_assert_eq!(view.tag, t.s, "step {}: start tag of tenant {}", step, id);
            prop_assert_eq!(
                view.active,
                t.active,
                "step {}: active flag of tenant {}",
                step,
                id
            );
            prop_assert_eq!(view.queued, t.queue.len());
        }
        let v = match &naive.gps {
            Some((g, _)) => g.virtual_time(),
            None => naive.v,
        };
        prop_assert_eq!(fast.virtual_time(), Some(v), "step {}: virtual time", step);
    }
    Ok(())
}

fn check(algorithm: Algorithm, estimated: bool, gps: bool) {
    let config = ProptestConfig {
        cases: 150,
        ..ProptestConfig::default()
    };
    proptest!(config, |(workers in 1usize..9, ops in prop::collection::vec(op(), 1..400))| {
        run(&Case { algorithm, workers, estimated, gps }, &ops)?;
    });
}

/// One `#[test]` per entry, checking each (algorithm, estimated costs, GPS clock) case of it.
macro_rules! naive_tests {
    ($($name:ident: $(($alg:ident, $estimated:literal, $gps:literal)),+;)+) => {
        $(
            #[test]
            fn $name() {
                $(check(Algorithm::$alg, $estimated, $gps);)+
            }
        )+
    };
}

naive_tests! {
    twodfq_known_costs_approximate_clock: (TwoDfq, false, false);
    twodfq_known_costs_gps_clock: (TwoDfq, false, true);
    twodfq_e_pessimistic_estimation: (TwoDfq, true, false);
    wf2q_known_and_estimated: (Wf2q, false, true), (Wf2q, true, false);
    wfq_known_and_estimated: (Wfq, false, true), (Wfq, true, false);
}
