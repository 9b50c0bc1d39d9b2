//! The Virtual Token Counter against the paper (Sheng et al., OSDI '24):
//!
//! * `matches_the_naive_reference`: over random operation sequences (arrivals of known and
//!   unknown cost, dispatches, progress, completions, cancellations, weight changes, removed
//!   tenants), the scheduler makes the same choices and keeps the same counters as a
//!   reference written line by line from Algorithm 2 (a linear scan for the smallest
//!   counter, the lift on becoming backlogged), for each of the three lift rules. Costs are
//!   small integers and weights powers of two, so both compute exactly and are compared
//!   bit for bit.
//! * `backlogged_service_difference_stays_within_theorem_4_4`: a continuous-batching server
//!   (a KV budget of M tokens, each running request reserving its prompt plus its output,
//!   one token per running request per step) under random arrivals and lengths keeps the
//!   service of any two tenants that are backlogged over an interval within
//!   2·max(w_p·L_input, w_q·M) of each other (Theorem 4.4), and within 2·U/φ_min in
//!   service per unit weight with random weights (§4.3). The server admits as the
//!   artifact does: the scheduler's next request if it fits, else nobody until the next
//!   step, the scheduler's choice made again then. The seam has no peek, so the server
//!   learns the next choice from the reference (which makes the same choices, as the
//!   first test shows, and is checked against every dispatch here too).
//! * bad input: token weights and counts never panic.

use std::collections::{BTreeMap, VecDeque};

use fairlane_core::{Config, Decision, Error, Lift, Request, TenantId, Ticket, TokenCost};
use proptest::prelude::*;

mod support;
use support::Rng;

// ---------------------------------------------------------------------------------------
// The naive reference.

#[derive(Default)]
struct NaiveTenant {
    counter: f64,
    weight: f64,
    /// Queued requests: (payload, known cost).
    queue: VecDeque<(u32, Option<f64>)>,
    running: usize,
}

/// Algorithm 2, written for clarity.
struct Naive {
    lift: Lift,
    tenants: BTreeMap<u64, NaiveTenant>,
    /// The tenant that last left the backlogged set, and its counter if it was removed.
    last_left: Option<(u64, Option<f64>)>,
    /// Running requests by ticket: (tenant, charged at dispatch, last reported usage).
    running: BTreeMap<Ticket, (u64, f64, f64)>,
}

impl Naive {
    fn tenant(&mut self, id: u64) -> &mut NaiveTenant {
        self.tenants.entry(id).or_insert_with(|| NaiveTenant {
            weight: 1.0,
            ..NaiveTenant::default()
        })
    }

    /// The request the next dispatch would start: (payload, tenant), nothing changed.
    fn peek(&self) -> Option<(u32, u64)> {
        let (_, id) = self.backlogged_min()?;
        Some((self.tenants[&id].queue[0].0, id))
    }

    fn backlogged_min(&self) -> Option<(f64, u64)> {
        self.tenants
            .iter()
            .filter(|(_, t)| !t.queue.is_empty())
            .map(|(&id, t)| (t.counter, id))
            .min_by(|a, b| a.partial_cmp(b).unwrap())
    }

    fn enqueue(&mut self, id: u64, payload: u32, cost: Option<f64>) {
        self.tenant(id);
        if self.tenants[&id].queue.is_empty() {
            let floor = match (self.lift, self.backlogged_min()) {
                (Lift::Never, _) => None,
                (_, Some((min, _))) => Some(min),
                (Lift::Artifact, None) => None,
                (Lift::Paper, None) => self
                    .last_left
                    .map(|(l, removed)| removed.unwrap_or_else(|| self.tenants[&l].counter)),
            };
            if let Some(f) = floor {
                let t = self.tenant(id);
                t.counter = t.counter.max(f);
            }
        }
        self.tenant(id).queue.push_back((payload, cost));
    }

    fn charge(&mut self, id: u64, amount: f64) {
        let t = self.tenant(id);
        t.counter += amount / t.weight;
    }

    /// The next dispatch: (payload, tenant, charged).
    fn dequeue(&mut self) -> Option<(u32, u64, f64)> {
        let (_, id) = self.backlogged_min()?;
        let t = self.tenant(id);
        let (payload, cost) = t.queue.pop_front().unwrap();
        t.running += 1;
        if t.queue.is_empty() {
            self.last_left = Some((id, None));
        }
        let charged = cost.unwrap_or(0.0);
        self.charge(id, charged);
        Some((payload, id, charged))
    }

    /// Cumulative usage `used`: everything beyond what was charged so far is charged now
    /// (at completion, down to `used` exactly).
    fn report(&mut self, ticket: Ticket, used: f64, done: bool) {
        let (id, charged, prev) = self.running[&ticket];
        let so_far = charged.max(prev);
        let now = if done { used } else { charged.max(used) };
        self.charge(id, now - so_far);
        if done {
            self.running.remove(&ticket);
            self.tenant(id).running -= 1;
        } else {
            self.running.insert(ticket, (id, charged, used));
        }
    }

    fn cancel(&mut self, id: u64, payload: u32) {
        let t = self.tenant(id);
        t.queue.retain(|&(p, _)| p != payload);
        if t.queue.is_empty() {
            self.last_left = Some((id, None));
        }
    }

    fn remove(&mut self, id: u64) -> bool {
        match self.tenants.get(&id) {
            Some(t) if t.queue.is_empty() && t.running == 0 => {
                let c = t.counter;
                if self.last_left.is_some_and(|(l, r)| l == id && r.is_none()) {
                    self.last_left = Some((id, Some(c)));
                }
                self.tenants.remove(&id);
                true
            }
            _ => false,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Enqueue(u64, Option<u32>),
    Dequeue,
    Progress(usize, u32),
    Complete(usize, u32),
    Cancel(usize),
    Weight(u64, u32),
    Remove(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u64..5, prop::option::weighted(0.8, 0u32..64)).prop_map(|(t, c)| Op::Enqueue(t, c)),
        4 => Just(Op::Dequeue),
        3 => (0usize..16, 0u32..40).prop_map(|(i, d)| Op::Progress(i, d)),
        3 => (0usize..16, 0u32..40).prop_map(|(i, d)| Op::Complete(i, d)),
        1 => (0usize..16).prop_map(Op::Cancel),
        1 => (0u64..5, 0u32..4).prop_map(|(t, w)| Op::Weight(t, w)),
        1 => (0u64..5).prop_map(Op::Remove),
    ]
}

/// One case: the scheduler and the reference, step by step.
fn run_against_naive(lift: Lift, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut s = Config::preset("vtc")
        .unwrap()
        .lift(lift)
        .workers(1 << 10)
        .build::<u32>()
        .unwrap();
    let mut naive = Naive {
        lift,
        tenants: BTreeMap::new(),
        last_left: None,
        running: BTreeMap::new(),
    };
    // Queued: (ticket, tenant, payload); running: (ticket, usage reported so far).
    let mut queued: Vec<(Ticket, u64, u32)> = Vec::new();
    let mut running: Vec<(Ticket, f64)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let now = step as f64;
        match *op {
            Op::Enqueue(t, cost) => {
                let payload = step as u32;
                let mut r = Request::new(t, 0u32, payload);
                if let Some(c) = cost {
                    r = r.with_cost(f64::from(c));
                }
                let ticket = s.enqueue(r, now).unwrap();
                naive.enqueue(t, payload, cost.map(f64::from));
                queued.push((ticket, t, payload));
            }
            Op::Dequeue => match (s.dequeue(0, now).unwrap(), naive.dequeue()) {
                (Decision::Run(d), Some((payload, t, charged))) => {
                    prop_assert_eq!(d.request.payload, payload, "step {}", step);
                    prop_assert_eq!(d.request.tenant, TenantId(t));
                    prop_assert_eq!(d.charged, charged);
                    naive.running.insert(d.ticket, (t, charged, 0.0));
                    queued.retain(|q| q.0 != d.ticket);
                    running.push((d.ticket, 0.0));
                }
                (Decision::Empty, None) => {}
                (a, b) => prop_assert!(false, "step {}: {:?} vs {:?}", step, a, b),
            },
            Op::Progress(i, d) | Op::Complete(i, d) => {
                if running.is_empty() {
                    continue;
                }
                let i = i % running.len();
                let (ticket, prev) = running[i];
                let used = prev + f64::from(d);
                if matches!(op, Op::Progress(..)) {
                    s.progress(ticket, used, now).unwrap();
                    naive.report(ticket, used, false);
                    running[i].1 = used;
                } else {
                    s.complete(ticket, used, now).unwrap();
                    naive.report(ticket, used, true);
                    running.swap_remove(i);
                }
            }
            Op::Cancel(i) => {
                if queued.is_empty() {
                    continue;
                }
                let (ticket, t, payload) = queued.remove(i % queued.len());
                prop_assert_eq!(s.cancel(ticket, now).unwrap().payload, payload);
                naive.cancel(t, payload);
            }
            Op::Weight(t, w) => {
                let w = f64::powi(2.0, w as i32 - 1);
                s.set_weight(TenantId(t), w, now).unwrap();
                naive.tenant(t).weight = w;
            }
            Op::Remove(t) => {
                let ok = s.remove_tenant(TenantId(t)).is_ok();
                prop_assert_eq!(ok, naive.remove(t), "step {}: remove {}", step, t);
            }
        }
        for t in 0..5u64 {
            let view = s.tenant(TenantId(t));
            let want = naive.tenants.get(&t);
            prop_assert_eq!(
                view.is_some(),
                want.is_some(),
                "step {}: tenant {}",
                step,
                t
            );
            if let (Some(v), Some(n)) = (view, want) {
                prop_assert_eq!(v.tag, n.counter, "step {}: tenant {} counter", step, t);
                prop_assert_eq!(v.active, !n.queue.is_empty(), "step {}: tenant {}", step, t);
                prop_assert_eq!(v.weight, n.weight);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn matches_the_naive_reference(
        lift in prop_oneof![Just(Lift::Paper), Just(Lift::Artifact), Just(Lift::Never)],
        ops in prop::collection::vec(op(), 1..300),
    ) {
        run_against_naive(lift, &ops)?;
    }
}

// ---------------------------------------------------------------------------------------
// Theorem 4.4 on a continuous-batching server.

/// A request in the test server: its tenant, prompt and output tokens, and the tokens
/// generated so far.
#[derive(Clone, Copy, Debug)]
struct Job {
    tenant: usize,
    input: u64,
    output: u64,
}

#[derive(Clone, Debug)]
struct Workload {
    /// KV budget M.
    m: u64,
    max_input: u64,
    max_output: u64,
    /// Per tenant: its weight and per-step arrival probability (in 1/16).
    tenants: Vec<(f64, u32)>,
    steps: usize,
    seed: u64,
}

fn workload(weighted: bool) -> impl Strategy<Value = Workload> {
    (
        16u64..400,
        1u64..48,
        1u64..64,
        prop::collection::vec((0u32..4, 1u32..17), 2..5),
        200usize..1500,
        any::<u64>(),
    )
        .prop_map(move |(m, li, lo, tenants, steps, seed)| {
            let m = m.max(li + lo);
            let tenants = tenants
                .into_iter()
                .map(|(w, p)| {
                    (
                        if weighted {
                            f64::powi(2.0, w as i32 - 1)
                        } else {
                            1.0
                        },
                        p,
                    )
                })
                .collect();
            Workload {
                m,
                max_input: li,
                max_output: lo,
                tenants,
                steps,
                seed,
            }
        })
}

/// A number in `1..=n`.
fn upto(rng: &mut Rng, n: u64) -> u64 {
    1 + rng.next() % n
}

/// The largest `max D − min D` over intervals in which both tenants of a pair were
/// backlogged, where `D = W_f/φ_f − W_g/φ_g`.
struct PairRanges {
    /// Per pair (f < g): the range of D since both became backlogged, if both are.
    ranges: BTreeMap<(usize, usize), (f64, f64)>,
    worst: f64,
}

impl PairRanges {
    fn observe(&mut self, service: &[f64], weights: &[f64], backlogged: &[bool]) {
        let n = service.len();
        for f in 0..n {
            for g in f + 1..n {
                if !(backlogged[f] && backlogged[g]) {
                    self.ranges.remove(&(f, g));
                    continue;
                }
                let d = service[f] / weights[f] - service[g] / weights[g];
                let r = self.ranges.entry((f, g)).or_insert((d, d));
                r.0 = r.0.min(d);
                r.1 = r.1.max(d);
                self.worst = self.worst.max(r.1 - r.0);
            }
        }
    }
}

/// Run the workload through `vtc` on the test server; returns the largest backlogged
/// service difference seen.
fn worst_difference(w: &Workload, h: TokenCost) -> f64 {
    let n = w.tenants.len();
    let mut s = Config::preset("vtc")
        .unwrap()
        .workers(w.m as usize)
        .build::<u32>()
        .unwrap();
    let mut naive = Naive {
        lift: Lift::Paper,
        tenants: BTreeMap::new(),
        last_left: None,
        running: BTreeMap::new(),
    };
    let weights: Vec<f64> = w.tenants.iter().map(|t| t.0).collect();
    for (i, &wt) in weights.iter().enumerate() {
        s.set_weight(TenantId(i as u64), wt, 0.0).unwrap();
        naive.tenant(i as u64).weight = wt;
    }
    let mut jobs: Vec<Job> = Vec::new();
    let mut rng = Rng::new(w.seed);
    let mut service = vec![0.0; n];
    let mut waiting = vec![0usize; n];
    let mut running: Vec<(Ticket, Job, u64)> = Vec::new();
    let mut reserved = 0u64;
    let mut ranges = PairRanges {
        ranges: BTreeMap::new(),
        worst: 0.0,
    };
    for step in 0..w.steps {
        let now = step as f64;
        for (f, &(_, p)) in w.tenants.iter().enumerate() {
            if rng.next() % 16 < u64::from(p) {
                for _ in 0..upto(&mut rng, 3) {
                    let job = Job {
                        tenant: f,
                        input: upto(&mut rng, w.max_input),
                        output: upto(&mut rng, w.max_output),
                    };
                    let cost = h.charge(job.input, 0);
                    let id = jobs.len() as u32;
                    jobs.push(job);
                    s.enqueue(Request::new(f as u64, 0u32, id).with_cost(cost), now)
                        .unwrap();
                    naive.enqueue(f as u64, id, Some(cost));
                    waiting[f] += 1;
                }
            }
        }
        let backlogged: Vec<bool> = waiting.iter().map(|&q| q > 0).collect();
        ranges.observe(&service, &weights, &backlogged);
        // Admission in the scheduler's order while the next request fits.
        while let Some((id, _)) = naive.peek() {
            let job = jobs[id as usize];
            if reserved + job.input + job.output > w.m {
                break;
            }
            let d = s.dequeue(0, now).unwrap().run().unwrap();
            let (payload, _, charged) = naive.dequeue().unwrap();
            assert_eq!((d.request.payload, d.charged), (payload, charged));
            naive
                .running
                .insert(d.ticket, (job.tenant as u64, charged, 0.0));
            let ticket = d.ticket;
            reserved += job.input + job.output;
            waiting[job.tenant] -= 1;
            service[job.tenant] += h.charge(job.input, 0);
            running.push((ticket, job, 0));
        }
        let backlogged: Vec<bool> = waiting.iter().map(|&q| q > 0).collect();
        ranges.observe(&service, &weights, &backlogged);
        // One decode step: every running request generates a token.
        let mut i = 0;
        while i < running.len() {
            let (ticket, job, done) = &mut running[i];
            *done += 1;
            service[job.tenant] += h.output_weight;
            let used = h.charge(job.input, *done);
            if *done == job.output {
                s.complete(*ticket, used, now + 0.5).unwrap();
                naive.report(*ticket, used, true);
                reserved -= job.input + job.output;
                running.swap_remove(i);
            } else {
                s.progress(*ticket, used, now + 0.5).unwrap();
                naive.report(*ticket, used, false);
                i += 1;
            }
        }
        ranges.observe(&service, &weights, &backlogged);
    }
    ranges.worst
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn backlogged_service_difference_stays_within_theorem_4_4(
        w in workload(false),
        paper_prices in any::<bool>(),
    ) {
        let h = if paper_prices { TokenCost::PAPER } else { TokenCost::new(1.0, 1.0).unwrap() };
        let bound = h.bound(w.max_input, w.m);
        let worst = worst_difference(&w, h);
        prop_assert!(worst <= bound, "worst {} > bound {} in {:?}", worst, bound, w);
    }

    #[test]
    fn weighted_service_difference_stays_within_the_bound_over_the_smallest_weight(
        w in workload(true),
    ) {
        let h = TokenCost::PAPER;
        let min_weight = w.tenants.iter().map(|t| t.0).fold(f64::INFINITY, f64::min);
        let bound = h.bound(w.max_input, w.m) / min_weight;
        let worst = worst_difference(&w, h);
        prop_assert!(worst <= bound, "worst {} > bound {} in {:?}", worst, bound, w);
    }
}

// ---------------------------------------------------------------------------------------
// Bad input.

#[test]
fn token_weights_outside_the_range_are_refused_by_name() {
    for bad in [f64::NAN, -1.0, f64::INFINITY, TokenCost::MAX_WEIGHT * 2.0] {
        match TokenCost::new(bad, 1.0) {
            Err(Error::InvalidConfig { field, reason }) => {
                assert_eq!(field, "input_token_weight");
                assert!(reason.contains(&bad.to_string()), "{reason}");
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert!(matches!(
            TokenCost::new(1.0, bad),
            Err(Error::InvalidConfig {
                field: "output_token_weight",
                ..
            })
        ));
    }
    assert!(TokenCost::new(0.0, TokenCost::MAX_WEIGHT).is_ok());
}

#[test]
fn huge_token_counts_give_finite_charges_and_counters() {
    let h = TokenCost::new(TokenCost::MAX_WEIGHT, TokenCost::MAX_WEIGHT).unwrap();
    let huge = h.charge(u64::MAX, u64::MAX);
    assert!(huge.is_finite() && huge > 0.0);
    assert!(h.bound(u64::MAX, u64::MAX).is_finite());
    for preset in ["vtc", "vtce", "lcf"] {
        let mut s = Config::preset(preset).unwrap().build::<u32>().unwrap();
        s.set_weight(TenantId(1), fairlane_core::MIN_WEIGHT, 0.0)
            .unwrap();
        for (i, cost) in [huge, f64::MAX, 0.0, 5e-324].into_iter().enumerate() {
            s.enqueue(Request::new(1u64, 0u32, i as u32).with_cost(cost), 0.0)
                .unwrap();
            s.enqueue(Request::new(2u64, 0u32, i as u32).with_cost(cost), 0.0)
                .unwrap();
        }
        let mut now = 0.0;
        while let Decision::Run(d) = s.dequeue(0, now).unwrap() {
            now += 1.0;
            s.progress(d.ticket, f64::MAX, now).unwrap();
            // A cumulative report below an earlier one is refused, the scheduler unharmed.
            assert!(matches!(
                s.complete(d.ticket, 1.0, now),
                Err(Error::UsageDecreased { .. })
            ));
            s.complete(d.ticket, f64::MAX, now).unwrap();
            for t in [1, 2] {
                let c = s.tenant(TenantId(t)).unwrap().tag;
                assert!(c.is_finite(), "{preset}: counter {c}");
            }
        }
        assert_eq!((s.queued(), s.running()), (0, 0), "{preset}");
    }
}

#[test]
fn bad_costs_and_usage_are_refused_and_leave_the_counters_alone() {
    let mut s = Config::preset("vtc").unwrap().build::<u32>().unwrap();
    for bad in [f64::NAN, -1.0, f64::INFINITY] {
        assert!(matches!(
            s.enqueue(Request::new(1u64, 0u32, 0).with_cost(bad), 0.0),
            Err(Error::InvalidCost { .. })
        ));
    }
    let t = s
        .enqueue(Request::new(1u64, 0u32, 0).with_cost(10.0), 0.0)
        .unwrap();
    assert_eq!(s.dequeue(0, 0.0).unwrap().run().unwrap().ticket, t);
    for bad in [f64::NAN, -0.5, f64::NEG_INFINITY] {
        assert!(matches!(
            s.progress(t, bad, 1.0),
            Err(Error::InvalidCost { .. })
        ));
        assert!(matches!(
            s.complete(t, bad, 1.0),
            Err(Error::InvalidCost { .. })
        ));
    }
    assert_eq!(s.tenant(TenantId(1)).unwrap().tag, 10.0);
    s.complete(t, 30.0, 1.0).unwrap();
    assert_eq!(s.tenant(TenantId(1)).unwrap().tag, 30.0);
    assert!(Config::preset("vtc")
        .unwrap()
        .clock(fairlane_core::VirtualClock::Approximate)
        .build::<u32>()
        .is_err());
}
