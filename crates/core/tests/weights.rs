//! Every fair scheduler shares in proportion to weights, including after a weight change at
//! run time, with known and with estimated costs; FIFO serves in arrival order.
//!
//! Set-up: 4 workers of rate 1, tenants A (weight 1) and B (weight 3), both backlogged with
//! requests of mixed cost (1 and 10, alternating). Over [0, 2000) the work ratio B/A is 3
//! within 5%; then A's weight becomes 2 and over the next 2000 time units the ratio of the
//! work done in that window is 1.5 within 5%.

mod support;

use fairlane_core::{Config, Decision, Request, TenantId, PRESETS};
use support::Exec;

#[test]
fn shares_follow_weights_and_weight_changes() {
    // EDF ignores weights; RW(D) bounds each flow's outstanding cost rather than sharing a
    // pool, and has its own tests (tests/interposed.rs).
    for preset in PRESETS
        .iter()
        .filter(|p| !["fifo", "edf", "rw"].contains(p))
    {
        let mut e = Exec::new(
            Config::preset(preset).unwrap().workers(4).build().unwrap(),
            1.0,
        );
        e.sched.set_weight(TenantId(0), 1.0, 0.0).unwrap();
        e.sched.set_weight(TenantId(1), 3.0, 0.0).unwrap();
        let known = !preset.ends_with('e');
        for f in 0..2 {
            for i in 0..8 {
                e.submit(f, "r", if i % 2 == 0 { 1.0 } else { 10.0 }, known);
            }
        }
        let mut refill = |e: &mut Exec, r: &support::Record| {
            let cost = if r.cost == 1.0 { 10.0 } else { 1.0 };
            e.submit(r.tenant.0, "r", cost, known);
        };
        e.run(2000.0, &mut refill);
        let ratio = e.work(1, 2000.0) / e.work(0, 2000.0);
        assert!(
            (ratio / 3.0 - 1.0).abs() < 0.05,
            "{preset}: B/A = {ratio}, want 3"
        );
        let (a0, b0) = (e.work(0, 2000.0), e.work(1, 2000.0));
        e.sched.set_weight(TenantId(0), 2.0, e.now).unwrap();
        e.run(4000.0, &mut refill);
        let ratio = (e.work(1, 4000.0) - b0) / (e.work(0, 4000.0) - a0);
        assert!(
            (ratio / 1.5 - 1.0).abs() < 0.05,
            "{preset}: after the change B/A = {ratio}, want 1.5"
        );
    }
}

#[test]
fn fifo_serves_in_arrival_order_across_tenants() {
    let mut s = Config::preset("fifo")
        .unwrap()
        .workers(1)
        .build::<u32>()
        .unwrap();
    let order = [(2u64, 0u32), (1, 1), (2, 2), (3, 3), (1, 4)];
    let mut tickets = Vec::new();
    for (t, p) in order {
        tickets.push(s.enqueue(Request::new(t, 0u32, p), 0.0).unwrap());
    }
    s.cancel(tickets[2], 0.0).unwrap();
    let mut got = Vec::new();
    while let Decision::Run(d) = s.dequeue(0, 1.0).unwrap() {
        got.push(d.request.payload);
        s.complete(d.ticket, 1.0, 1.0).unwrap();
    }
    assert_eq!(got, vec![0, 1, 3, 4]);
}
