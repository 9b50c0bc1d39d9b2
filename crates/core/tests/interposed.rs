//! The interposed schedulers of Jin, Chase & Kaur (SIGMETRICS '04) in front of a black-box
//! server with D issue slots: Theorem 2 (SFQ(D)), Theorem 3 (RW(D) on a FIFO server), the
//! Min-SFQ(D) unfairness of §3.1, a case where FSFQ(D) serves a newly active flow ahead of
//! SFQ(D) (§3.3), RW(D)'s windows, and EDF's deadline order.

mod support;

use std::collections::BTreeMap;

use fairlane_core::{Config, Decision, Request, Scheduler, TenantId, Ticket};
use support::Rng;

/// How the black box serves what it is given.
#[derive(Clone, Copy)]
enum Server {
    /// Every dispatched request is served at once, for `cost × a random factor in
    /// [lo, hi)`: completions come in any order.
    Parallel { lo: f64, hi: f64 },
    /// One request at a time in dispatch order (Theorem 3's idealized FIFO server), for its
    /// cost.
    Fifo,
}

struct Done {
    tenant: u64,
    cost: f64,
    at: f64,
}

/// D issue slots in front of `server`. `refill(tenant, now)` is called at each completion
/// and may return requests (tenant, cost) to enqueue.
struct BlackBox {
    sched: Box<dyn Scheduler<f64> + Send>,
    server: Server,
    rng: Rng,
    now: f64,
    /// (completion time, slot, ticket, tenant, cost) of the outstanding requests.
    inside: Vec<(f64, usize, Ticket, u64, f64)>,
    free: Vec<usize>,
    fifo_busy_until: f64,
    done: Vec<Done>,
}

impl BlackBox {
    fn new(sched: Box<dyn Scheduler<f64> + Send>, server: Server, seed: u64) -> Self {
        let d = sched.workers();
        BlackBox {
            sched,
            server,
            rng: Rng::new(seed),
            now: 0.0,
            inside: Vec::new(),
            free: (0..d).rev().collect(),
            fifo_busy_until: 0.0,
            done: Vec::new(),
        }
    }

    fn submit(&mut self, tenant: u64, cost: f64) {
        self.sched
            .enqueue(Request::new(tenant, 0u32, cost).with_cost(cost), self.now)
            .unwrap();
    }

    fn dispatch(&mut self) {
        while let Some(&slot) = self.free.last() {
            match self.sched.dequeue(slot, self.now).unwrap() {
                Decision::Run(d) => {
                    self.free.pop();
                    let cost = d.request.payload;
                    let end = match self.server {
                        Server::Parallel { lo, hi } => {
                            self.now + cost * (lo + (hi - lo) * self.rng.unit())
                        }
                        Server::Fifo => {
                            self.fifo_busy_until = self.fifo_busy_until.max(self.now) + cost;
                            self.fifo_busy_until
                        }
                    };
                    self.inside
                        .push((end, slot, d.ticket, d.request.tenant.0, cost));
                }
                Decision::Empty | Decision::RetryAt(_) => break,
            }
        }
    }

    /// Run until `until`, or until no request is outstanding.
    fn run(&mut self, until: f64, mut refill: impl FnMut(u64, f64) -> Vec<(u64, f64)>) {
        loop {
            self.dispatch();
            let Some(i) = (0..self.inside.len())
                .min_by(|&a, &b| self.inside[a].0.total_cmp(&self.inside[b].0))
            else {
                return;
            };
            if self.inside[i].0 > until {
                return;
            }
            let (end, slot, ticket, tenant, cost) = self.inside.swap_remove(i);
            self.now = end;
            self.sched.complete(ticket, cost, end).unwrap();
            self.free.push(slot);
            self.done.push(Done {
                tenant,
                cost,
                at: end,
            });
            for (t, c) in refill(tenant, end) {
                self.submit(t, c);
            }
        }
    }
}

/// max over intervals of |W_f/φ_f − W_g/φ_g| for completed work: the range of the running
/// difference over completion instants.
/// A preset's scheduler for `workers` workers (the interposed schedulers' depth D).
fn scheduler<T: Send + 'static>(preset: &str, workers: usize) -> Box<dyn Scheduler<T> + Send> {
    Config::preset(preset)
        .unwrap()
        .workers(workers)
        .build()
        .unwrap()
}

fn worst_gap(done: &[Done], f: u64, g: u64, phi_f: f64, phi_g: f64) -> f64 {
    let (mut x, mut lo, mut hi) = (0.0f64, 0.0f64, 0.0f64);
    let mut i = 0;
    while i < done.len() {
        // Completions at the same instant are one step.
        let at = done[i].at;
        while i < done.len() && done[i].at == at {
            let d = &done[i];
            if d.tenant == f {
                x += d.cost / phi_f;
            } else if d.tenant == g {
                x -= d.cost / phi_g;
            }
            i += 1;
        }
        lo = lo.min(x);
        hi = hi.max(x);
    }
    hi - lo
}

/// Theorem 2: on random backlogged workloads with random costs, under SFQ(D) the completed
/// work of two backlogged flows differs by at most (D+1)(c_f^max/φ_f + c_g^max/φ_g), over
/// every interval, whatever order the server completes requests in.
///
/// Per case: D ∈ 1..=16, 2..=6 flows with weights in {0.5, 1, 2, 3}, per-flow maximum costs
/// in 1..=100 and costs uniform in [1, c^max]; service time = cost × a factor in [0.2, 5).
/// Every flow starts with enough requests to stay backlogged until the horizon.
#[test]
fn theorem2_sfq_d_completed_work_lag_bound() {
    let mut tightest: f64 = 0.0;
    for seed in 0..60u64 {
        let mut rng = Rng::new(seed);
        let d = 1 + (rng.next() % 16) as usize;
        let flows = 2 + rng.next() % 5;
        let mut s = Config::preset("sfq").unwrap().workers(d).build().unwrap();
        let mut phi = BTreeMap::new();
        let mut cmax = BTreeMap::new();
        for f in 0..flows {
            let w = [0.5, 1.0, 2.0, 3.0][(rng.next() % 4) as usize];
            s.set_weight(TenantId(f), w, 0.0).unwrap();
            phi.insert(f, w);
            cmax.insert(f, 1.0 + (rng.next() % 100) as f64);
        }
        let mut bb = BlackBox::new(s, Server::Parallel { lo: 0.2, hi: 5.0 }, seed);
        let mut queued_work = vec![0.0; flows as usize];
        for _ in 0..600 {
            for f in 0..flows {
                let c = 1.0 + (cmax[&f] - 1.0) * rng.unit();
                bb.submit(f, c);
                queued_work[f as usize] += c * (1.0 / phi[&f]);
            }
        }
        // Stop well before the first flow could run dry (its tags are ~ work/φ).
        let horizon = 0.25 * queued_work.iter().cloned().fold(f64::INFINITY, f64::min);
        bb.run(horizon, |_, _| Vec::new());
        assert!(bb.sched.queued() > 0);
        for f in 0..flows {
            assert!(
                bb.sched.tenant(TenantId(f)).unwrap().queued > 0,
                "seed {seed}: flow {f} ran dry"
            );
            for g in (f + 1)..flows {
                let bound = (d as f64 + 1.0) * (cmax[&f] / phi[&f] + cmax[&g] / phi[&g]);
                let gap = worst_gap(&bb.done, f, g, phi[&f], phi[&g]);
                assert!(
                    gap <= bound + 1e-9,
                    "seed {seed}: D = {d}, flows {f}/{g}: gap {gap} > bound {bound}"
                );
                tightest = tightest.max(gap / bound);
            }
        }
    }
    // The check has teeth: some case comes within a fair fraction of the bound.
    assert!(tightest > 0.2, "largest gap/bound {tightest}");
}

/// Theorem 3: RW(D) on an idealized FIFO server keeps |W_f/φ_f − W_g/φ_g| ≤ 2D for
/// backlogged flows (φ normalized to sum to one), i.e. |W_f/n_f − W_g/n_g| ≤ 2. Requests
/// cost one unit, as in the paper, and windows n_f = D·φ_f are whole numbers.
#[test]
fn theorem3_rw_d_on_a_fifo_server() {
    for seed in 0..40u64 {
        let mut rng = Rng::new(1000 + seed);
        let flows = 2 + rng.next() % 5;
        let n: Vec<f64> = (0..flows).map(|_| (1 + rng.next() % 4) as f64).collect();
        let d: f64 = n.iter().sum();
        let mut s = scheduler("rw", d as usize);
        for f in 0..flows {
            s.set_weight(TenantId(f), n[f as usize] / d, 0.0).unwrap();
        }
        let mut bb = BlackBox::new(s, Server::Fifo, seed);
        for _ in 0..8 {
            for f in 0..flows {
                bb.submit(f, 1.0);
            }
        }
        // Keep every flow backlogged: each completion brings a new request.
        bb.run(2000.0, |t, _| vec![(t, 1.0)]);
        for f in 0..flows {
            for g in (f + 1)..flows {
                let gap = worst_gap(&bb.done, f, g, n[f as usize], n[g as usize]);
                assert!(gap <= 2.0 + 1e-9, "seed {seed}: flows {f}/{g}: {gap} > 2");
            }
            // Each flow gets its window's share of the FIFO server: n_f/D of completions.
            let share =
                bb.done.iter().filter(|x| x.tenant == f).count() as f64 / bb.done.len() as f64;
            assert!(
                (share - n[f as usize] / d).abs() < 0.01,
                "seed {seed}: flow {f} share {share}, want {}",
                n[f as usize] / d
            );
        }
    }
}

/// RW(D) is not work-conserving: a backlogged flow keeps to its window n_f = D·φ_f/Σφ even
/// when the other registered flow is idle, and the scheduler says "ask again" rather than
/// "empty".
#[test]
fn rw_d_holds_each_flow_to_its_window() {
    let mut s = scheduler("rw", 8);
    s.set_weight(TenantId(1), 1.0, 0.0).unwrap();
    s.set_weight(TenantId(2), 3.0, 0.0).unwrap();
    for _ in 0..10 {
        s.enqueue(Request::new(1u64, 0u32, ()).with_cost(1.0), 0.0)
            .unwrap();
    }
    let mut running = Vec::new();
    for slot in 0..8 {
        match s.dequeue(slot, 0.0).unwrap() {
            Decision::Run(d) => running.push(d.ticket),
            Decision::RetryAt(t) => {
                assert!(t.is_infinite());
                break;
            }
            Decision::Empty => panic!("requests are queued"),
        }
    }
    assert_eq!(running.len(), 2, "n_1 = 8 · 1/4 = 2");
    // A completion opens the window for exactly one more.
    s.complete(running[0], 1.0, 1.0).unwrap();
    assert!(matches!(s.dequeue(0, 1.0).unwrap(), Decision::Run(_)));
    assert!(matches!(s.dequeue(2, 1.0).unwrap(), Decision::RetryAt(_)));
    // Flow 2's weight drops: Σφ shrinks and flow 1's window grows to 8 · 1/2 = 4.
    s.set_weight(TenantId(2), 1.0, 1.0).unwrap();
    assert!(matches!(s.dequeue(2, 1.0).unwrap(), Decision::Run(_)));
    assert!(matches!(s.dequeue(3, 1.0).unwrap(), Decision::Run(_)));
    assert!(matches!(s.dequeue(4, 1.0).unwrap(), Decision::RetryAt(_)));
    // A request costlier than the whole window still goes when the flow has nothing out.
    let mut s = scheduler("rw", 2);
    s.enqueue(Request::new(1u64, 0u32, ()).with_cost(50.0), 0.0)
        .unwrap();
    s.enqueue(Request::new(1u64, 0u32, ()).with_cost(1.0), 0.0)
        .unwrap();
    assert!(matches!(s.dequeue(0, 0.0).unwrap(), Decision::Run(_)));
    assert!(matches!(s.dequeue(1, 0.0).unwrap(), Decision::RetryAt(_)));
}

/// Work completed by `tenant` in `[from, to)`.
fn completed(done: &[Done], tenant: u64, from: f64, to: f64) -> f64 {
    done.iter()
        .filter(|d| d.tenant == tenant && d.at >= from && d.at < to)
        .map(|d| d.cost)
        .sum()
}

/// §3.1: flow f (weight 1) sends one request per time unit, just before its previous one
/// completes, so it always has one outstanding and uses a quarter of a D = 4 server; flow g
/// (weight 1) is backlogged. Under Min-SFQ(D) v is held at f's slowly advancing tags while
/// g's race ahead; when f then bursts 200 requests, g is shut out for about 50 time units.
/// SFQ(D) and FSFQ(D) advance v with the dispatched tags, so g keeps about half the server.
#[test]
fn min_sfq_d_lets_a_lagging_flow_shut_out_a_backlogged_one() {
    let mut g_during_burst = BTreeMap::new();
    for preset in ["minsfq", "sfq", "fsfq"] {
        let s = Config::preset(preset).unwrap().workers(4).build().unwrap();
        let mut bb = BlackBox::new(s, Server::Parallel { lo: 1.0, hi: 1.0 }, 1);
        let (f, g) = (1u64, 0u64);
        for _ in 0..8 {
            bb.submit(g, 1.0);
        }
        // g is refilled at each of its completions; f sends at t = k + 0.5.
        let mut next_f = 0.5;
        while next_f < 100.0 {
            bb.run(
                next_f,
                |t, _| if t == g { vec![(g, 1.0)] } else { Vec::new() },
            );
            bb.now = next_f;
            bb.submit(f, 1.0);
            next_f += 1.0;
        }
        bb.run(
            100.0,
            |t, _| if t == g { vec![(g, 1.0)] } else { Vec::new() },
        );
        let f_share = completed(&bb.done, f, 50.0, 100.0) / 50.0;
        assert!(
            (f_share - 1.0).abs() < 0.05,
            "{preset}: f lags at 1 of 4 slots, got {f_share}"
        );
        bb.now = 100.0;
        for _ in 0..200 {
            bb.submit(f, 1.0);
        }
        bb.run(
            140.0,
            |t, _| if t == g { vec![(g, 1.0)] } else { Vec::new() },
        );
        g_during_burst.insert(preset, completed(&bb.done, g, 101.0, 140.0));
    }
    assert!(
        g_during_burst["minsfq"] <= 4.0,
        "Min-SFQ(D) should shut g out: {g_during_burst:?}"
    );
    for fair in ["sfq", "fsfq"] {
        assert!(
            g_during_burst[fair] >= 0.8 * 39.0 * 2.0,
            "{fair} should give g about half of 4 slots: {g_during_burst:?}"
        );
    }
}

/// §3.3: a newly active flow f arrives while g holds both slots of a D = 2 server. Its first
/// request gets S = v; its second ties with g's queued head under SFQ(D) (and loses the tie
/// to the lower tenant id), while FSFQ(D)'s adjusted tags give f the credit v − S̄ and serve
/// both of f's requests first.
#[test]
fn fsfq_d_serves_a_newly_active_flow_ahead_of_sfq_d() {
    let mut order = BTreeMap::new();
    for preset in ["sfq", "fsfq"] {
        let mut s = Config::preset(preset)
            .unwrap()
            .workers(2)
            .build::<&str>()
            .unwrap();
        let (g, f) = (0u64, 1u64);
        for _ in 0..10 {
            s.enqueue(Request::new(g, 0u32, "g").with_cost(1.0), 0.0)
                .unwrap();
        }
        let a = s.dequeue(0, 0.0).unwrap().run().unwrap();
        let b = s.dequeue(1, 0.0).unwrap().run().unwrap();
        assert_eq!(s.virtual_time(), Some(1.0), "{preset}: v = S of g's second");
        for _ in 0..2 {
            s.enqueue(Request::new(f, 0u32, "f").with_cost(1.0), 0.5)
                .unwrap();
        }
        s.complete(a.ticket, 1.0, 1.0).unwrap();
        s.complete(b.ticket, 1.0, 1.0).unwrap();
        let first = s.dequeue(0, 1.0).unwrap().run().unwrap().request.payload;
        let second = s.dequeue(1, 1.0).unwrap().run().unwrap().request.payload;
        order.insert(preset, [first, second]);
    }
    assert_eq!(order["sfq"], ["f", "g"]);
    assert_eq!(order["fsfq"], ["f", "f"]);
}

/// FSFQ(D)'s tags against Eq. 23–27 computed by hand for the case above, through
/// `TenantView::tag` (the head's start tag) and the virtual time.
#[test]
fn fsfq_d_tags_follow_equations_23_to_27() {
    let mut s = scheduler("fsfq", 2);
    s.set_weight(TenantId(1), 2.0, 0.0).unwrap();
    for _ in 0..4 {
        s.enqueue(Request::new(0u64, 0u32, ()).with_cost(1.0), 0.0)
            .unwrap();
    }
    let _ = s.dequeue(0, 0.0).unwrap(); // S = 0
    let _ = s.dequeue(1, 0.0).unwrap(); // S = 1: v = 1
    assert_eq!(s.tenant(TenantId(0)).unwrap().tag, 2.0);
    // f (φ = 2) arrives with F_prev = 0 < v = 1: S̄ = max(v̄ = 0, 0) = 0, S = max(1, 0) = 1.
    s.enqueue(Request::new(1u64, 0u32, ()).with_cost(1.0), 0.5)
        .unwrap();
    assert_eq!(s.tenant(TenantId(1)).unwrap().tag, 1.0);
    // Its second (after the first is dispatched: F = 1.5, F̄ = 0.5): F_prev ≥ v, so
    // S̄ = max(v̄, F̄_prev) = 0.5 and S = max(v = 1, 0.5) = 1 — unchanged while credit lasts.
    s.enqueue(Request::new(1u64, 0u32, ()).with_cost(1.0), 0.5)
        .unwrap();
    // Third: F_prev = 1.5 ≥ v, S̄ = F̄_prev = 1.0, S = max(1, 1.0) = 1.
    s.enqueue(Request::new(1u64, 0u32, ()).with_cost(1.0), 0.5)
        .unwrap();
    let mut tags = Vec::new();
    for _ in 0..3 {
        tags.push(s.tenant(TenantId(1)).unwrap().tag);
        // Free a slot by completing whatever runs first, then dispatch (f has the lowest S).
        let d = s.dequeue(0, 0.6);
        assert!(matches!(d, Ok(Decision::Run(_))));
    }
    assert_eq!(tags, vec![1.0, 1.0, 1.0]);
}

/// EDF (Facade): earliest deadline = arrival + target first; ties in arrival order; tenants
/// without a target after every deadline; weights play no part.
#[test]
fn edf_orders_by_arrival_plus_target() {
    let mut s = scheduler("edf", 1);
    s.set_target(TenantId(1), Some(1.0), 0.0).unwrap();
    s.set_target(TenantId(2), Some(0.010), 0.0).unwrap();
    s.set_weight(TenantId(1), 100.0, 0.0).unwrap();
    s.enqueue(Request::new(3u64, 0u32, "none"), 0.0).unwrap();
    s.enqueue(Request::new(1u64, 0u32, "loose-0"), 0.0).unwrap();
    s.enqueue(Request::new(1u64, 0u32, "loose-1"), 0.0).unwrap();
    s.enqueue(Request::new(2u64, 0u32, "tight-late"), 0.5)
        .unwrap(); // 0.51
    s.enqueue(Request::new(2u64, 0u32, "tight-later"), 2.0)
        .unwrap(); // 2.01
    let mut order = Vec::new();
    while let Decision::Run(d) = s.dequeue(0, 2.0).unwrap() {
        order.push(d.request.payload);
        s.complete(d.ticket, 0.0, 2.0).unwrap();
    }
    assert_eq!(
        order,
        ["tight-late", "loose-0", "loose-1", "tight-later", "none"]
    );
    assert!(s.set_target(TenantId(1), Some(0.0), 2.0).is_err());
    assert!(s.set_target(TenantId(1), Some(f64::NAN), 2.0).is_err());
}

/// The interposed schedulers refuse a clock they do not use, and a bad window unit.
#[test]
fn interposed_configs_are_validated() {
    use fairlane_core::{Error, VirtualClock};
    for p in ["minsfq", "sfq", "fsfq", "rw", "edf"] {
        let e = Config::preset(p)
            .unwrap()
            .clock(VirtualClock::Approximate)
            .build::<()>()
            .err();
        assert!(
            matches!(e, Some(Error::InvalidConfig { field: "clock", .. })),
            "{p}"
        );
    }
    let e = Config::preset("rw")
        .unwrap()
        .window_unit(0.0)
        .build::<()>()
        .err();
    assert!(matches!(
        e,
        Some(Error::InvalidConfig {
            field: "window_unit",
            ..
        })
    ));
}

/// The three start-tag schedulers tag each request when it reaches the head of its flow; the
/// paper tags at arrival. With known costs the two must agree: a naive reference that tags at
/// arrival by Eq. 2–3 / 23–27 and scans every outstanding request makes the same dispatch
/// decisions on random enqueue / dequeue / complete sequences with random weights.
#[test]
fn start_tags_match_a_naive_arrival_time_reference() {
    #[derive(Clone, Copy)]
    struct Req {
        id: u64,
        flow: u64,
        s: f64,
        sbar: f64,
        dispatched: bool,
    }
    struct Naive {
        variant: &'static str,
        reqs: Vec<Req>,
        prev: BTreeMap<u64, (f64, f64)>, // last *assigned* F, F̄ per flow
        v: f64,
        max_f: f64,
    }
    impl Naive {
        fn vs(&self) -> (f64, f64) {
            if self.reqs.is_empty() {
                let idle = self.v.max(self.max_f);
                return (idle, idle);
            }
            let min_s = self.reqs.iter().map(|r| r.s).fold(f64::INFINITY, f64::min);
            let min_sbar = self
                .reqs
                .iter()
                .map(|r| r.sbar)
                .fold(f64::INFINITY, f64::min);
            match self.variant {
                "minsfq" => (min_s, min_s),
                "sfq" => (self.v, self.v),
                _ => (self.v, min_sbar),
            }
        }
        fn arrive(&mut self, id: u64, flow: u64, c: f64, phi: f64) {
            let (v, vbar) = self.vs();
            let (pf, pfbar) = self.prev.get(&flow).copied().unwrap_or((0.0, 0.0));
            let (s, sbar, f, fbar) = if self.variant == "fsfq" {
                let sbar = vbar.max(if pf < v { pf } else { pfbar });
                let s = v.max(sbar);
                (s, sbar, s + c / phi, sbar + c / phi)
            } else {
                let s = v.max(pf);
                (s, 0.0, s + c / phi, 0.0)
            };
            self.prev.insert(flow, (f, fbar));
            self.reqs.push(Req {
                id,
                flow,
                s,
                sbar,
                dispatched: false,
            });
        }
        fn pick(&mut self) -> Option<u64> {
            let i = (0..self.reqs.len())
                .filter(|&i| !self.reqs[i].dispatched)
                .min_by(|&a, &b| {
                    let (x, y) = (&self.reqs[a], &self.reqs[b]);
                    x.s.total_cmp(&y.s)
                        .then(x.sbar.total_cmp(&y.sbar))
                        .then(x.flow.cmp(&y.flow))
                        .then(x.id.cmp(&y.id))
                })?;
            self.reqs[i].dispatched = true;
            if self.variant != "minsfq" {
                self.v = self.v.max(self.reqs[i].s);
            }
            Some(self.reqs[i].id)
        }
        fn complete(&mut self, id: u64, finish: f64) {
            self.reqs.retain(|r| r.id != id);
            self.max_f = self.max_f.max(finish);
            if self.reqs.is_empty() {
                self.v = self.v.max(self.max_f);
            }
        }
    }
    for variant in ["minsfq", "sfq", "fsfq"] {
        for seed in 0..40u64 {
            let mut rng = Rng::new(seed * 7 + 3);
            let mut s = Config::preset(variant)
                .unwrap()
                .workers(4)
                .build::<u64>()
                .unwrap();
            let mut naive = Naive {
                variant,
                reqs: Vec::new(),
                prev: BTreeMap::new(),
                v: 0.0,
                max_f: 0.0,
            };
            let phi: Vec<f64> = (0..4)
                .map(|_| [0.5, 1.0, 2.0][(rng.next() % 3) as usize])
                .collect();
            for (f, &w) in phi.iter().enumerate() {
                s.set_weight(TenantId(f as u64), w, 0.0).unwrap();
            }
            // Finish tags of dispatched requests, for the reference's max F (its own
            // bookkeeping: the finish tag assigned at arrival).
            let mut finish: BTreeMap<u64, f64> = BTreeMap::new();
            let mut cost: BTreeMap<u64, f64> = BTreeMap::new();
            let mut running: Vec<(Ticket, u64)> = Vec::new();
            let mut next_id = 0u64;
            let mut now = 0.0;
            for step in 0..400 {
                now += 0.01;
                match rng.next() % 3 {
                    0 => {
                        let flow = rng.next() % 4;
                        let c = (1 + rng.next() % 5) as f64;
                        naive.arrive(next_id, flow, c, phi[flow as usize]);
                        finish.insert(next_id, naive.prev[&flow].0);
                        cost.insert(next_id, c);
                        s.enqueue(Request::new(flow, 0u32, next_id).with_cost(c), now)
                            .unwrap();
                        next_id += 1;
                    }
                    1 if running.len() < 4 => {
                        let want = naive.pick();
                        let got = s.dequeue(running.len(), now).unwrap().run();
                        assert_eq!(
                            got.as_ref().map(|d| d.request.payload),
                            want,
                            "{variant} seed {seed} step {step}"
                        );
                        if let Some(d) = got {
                            running.push((d.ticket, d.request.payload));
                        }
                    }
                    _ if !running.is_empty() => {
                        let (ticket, id) =
                            running.remove((rng.next() % running.len() as u64) as usize);
                        naive.complete(id, finish[&id]);
                        // Completing with the known cost: no correction.
                        s.complete(ticket, cost[&id], now).unwrap();
                    }
                    _ => {}
                }
            }
        }
    }
}
