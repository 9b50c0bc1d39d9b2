//! Deficit Round Robin over n workers (Shreedhar & Varghese; a baseline in 2DFQ §6), with
//! estimated costs when they are unknown and the same retroactive and refresh charging as
//! the virtual-time schedulers.
//!
//! Backlogged tenants sit in a ring. When a tenant's turn starts its deficit grows by
//! `quantum · φ_f`; it is served while its head's charge fits in the deficit, then the turn
//! passes. Retroactive charging subtracts under-estimates from (or refunds over-estimates to)
//! the deficit. A tenant that empties keeps a negative deficit (a debt) but loses a positive
//! one, so idling banks no credit.
//!
//! The quantum defaults to the largest `charge/φ` seen so far, which lets the tenant at the
//! front serve at least one request per turn: a dequeue is O(1) amortised. With a smaller
//! fixed quantum (or a debt left by retroactive charging) a head may need many rounds; a
//! dequeue then never spins through them (one cost of 1e10 must not stall the caller). After
//! one full round in which nobody fits, it computes how many more rounds each tenant needs,
//! `⌈(l − deficit) / (quantum · φ)⌉`, grants the smallest number to every tenant at once and
//! serves the first tenant in ring order that then fits: the same choice the rounds would
//! make, in O(ring) work whatever the cost (`tests::jump_matches_spinning`). Deficits saturate
//! at ±1e300 so that f64::MAX costs cannot make them infinite.

use std::collections::VecDeque;

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::tags::Charging;
use crate::types::{saturate, Decision, Dispatch, Ticket};

pub(crate) struct Drr<T> {
    workers: usize,
    book: Book<T>,
    est: Box<dyn CostEstimator>,
    charging: Charging,
    fixed_quantum: Option<f64>,
    auto_quantum: f64,
    ring: VecDeque<u32>,
    /// Whether the tenant at the front has had this turn's quantum.
    turn: bool,
    /// Tests only: dequeue by the old round-by-round loop, the reference for `jump`.
    #[cfg(test)]
    spin: bool,
}

impl<T> Drr<T> {
    pub fn new(
        workers: usize,
        est: Box<dyn CostEstimator>,
        charging: Charging,
        default_weight: f64,
        quantum: Option<f64>,
    ) -> Self {
        Drr {
            workers,
            book: Book::new(default_weight),
            est,
            charging,
            fixed_quantum: quantum,
            auto_quantum: 0.0,
            ring: VecDeque::new(),
            turn: false,
            #[cfg(test)]
            spin: false,
        }
    }

    /// Take the head's charge (known or estimated) when it becomes head.
    fn price_head(&mut self, t: u32) {
        if let Some((class, known)) = self.book.head_info(t) {
            let ten = &mut self.book.tenants[t as usize];
            let l = known.unwrap_or_else(|| self.est.estimate(ten.id, class));
            ten.head_cost = l;
            self.auto_quantum = saturate(self.auto_quantum.max(l / ten.weight));
        }
    }

    fn quantum(&self) -> f64 {
        self.fixed_quantum.unwrap_or(self.auto_quantum)
    }

    /// Serve the front tenant's head, charging `l` against its deficit.
    fn serve_front(&mut self, t: u32) -> Decision<T> {
        let ten = &mut self.book.tenants[t as usize];
        let l = ten.head_cost;
        ten.deficit = saturate(ten.deficit - l);
        let (ticket, request) = self.book.start_head(t, l);
        if self.book.tenants[t as usize].queued == 0 {
            self.drop_from_ring(t);
        } else {
            self.price_head(t);
        }
        Decision::Run(Dispatch {
            ticket,
            request,
            charged: l,
        })
    }

    /// How many more quanta tenant `t` needs before its head fits: ≥ 1 (nobody fit in the
    /// round just done), ∞ when a quantum adds nothing (`q·φ` is 0 or underflows).
    fn quanta_needed(&self, t: u32, q: f64) -> f64 {
        let ten = &self.book.tenants[t as usize];
        let grant = q * ten.weight;
        if grant <= 0.0 {
            return f64::INFINITY;
        }
        let (l, d) = (ten.head_cost, ten.deficit);
        let mut k = ((l - d) / grant).ceil().max(1.0);
        // Division rounds; settle k so that k quanta fit and k − 1 do not, as adding them one
        // by one would find (a couple of steps at most).
        for _ in 0..4 {
            if k.is_finite() && d + k * grant < l {
                k += 1.0;
            } else if k > 1.0 && k.is_finite() && d + (k - 1.0) * grant >= l {
                k -= 1.0;
            } else {
                break;
            }
        }
        k
    }

    /// Nobody fit in a full round: grant every tenant the rounds the first one to fit needs,
    /// at once, and serve it. Ties go to the earlier tenant in ring order, as the rounds
    /// would. If no number of quanta helps (a zero quantum), the front is served: plain
    /// round robin, never an endless loop.
    fn jump(&mut self, q: f64) -> Decision<T> {
        let mut best = (f64::INFINITY, 0usize);
        for (p, &t) in self.ring.iter().enumerate() {
            let k = self.quanta_needed(t, q);
            if k < best.0 {
                best = (k, p);
            }
        }
        let (k, p) = best;
        if k.is_finite() {
            // Rounds 0..k−1 go to everyone; in round k the tenants before the winner get
            // their quantum and still do not fit, then the winner gets its own.
            let full = k - 1.0;
            for (i, &t) in self.ring.iter().enumerate() {
                let ten = &mut self.book.tenants[t as usize];
                let rounds = if i <= p { full + 1.0 } else { full };
                ten.deficit = saturate(ten.deficit + rounds * (q * ten.weight));
            }
            self.ring.rotate_left(p);
        }
        self.turn = true;
        let t = self.ring[0];
        self.serve_front(t)
    }

    fn drop_from_ring(&mut self, t: u32) {
        if let Some(pos) = self.ring.iter().position(|&x| x == t) {
            self.ring.remove(pos);
            if pos == 0 {
                self.turn = false;
            }
        }
        let d = &mut self.book.tenants[t as usize].deficit;
        *d = d.min(0.0);
    }
}

impl<T> Queue<T> for Drr<T> {
    fn name(&self) -> &'static str {
        if self.est.requires_known_cost() {
            "drr"
        } else {
            "drre"
        }
    }
    queue_parts!();

    fn queued(&mut self, _: Ticket, t: u32, was_empty: bool, _: f64) {
        if was_empty {
            self.price_head(t);
            self.ring.push_back(t);
        }
    }

    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        #[cfg(test)]
        if self.spin {
            return self.pick_spinning();
        }
        let q = self.quantum();
        // One full round visited one tenant at a time, as DRR does; after it (the front
        // again, without its turn's quantum) `jump` finds the winner of the rounds to come.
        for _ in 0..self.ring.len() {
            let Some(&t) = self.ring.front() else {
                return Decision::Empty;
            };
            let ten = &mut self.book.tenants[t as usize];
            if !self.turn {
                ten.deficit = saturate(ten.deficit + q * ten.weight);
                self.turn = true;
            }
            if ten.head_cost <= ten.deficit {
                return self.serve_front(t);
            }
            self.ring.rotate_left(1);
            self.turn = false;
        }
        if self.ring.is_empty() {
            return Decision::Empty;
        }
        self.jump(q)
    }

    fn refresh(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.refresh {
            let excess = self.book.refresh_charge(ticket, used);
            let d = &mut self.book.tenants[t as usize].deficit;
            *d = saturate(*d - excess);
        }
    }

    fn settle(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.retroactive {
            let owed = self.book.settle(ticket, used);
            let d = &mut self.book.tenants[t as usize].deficit;
            *d = saturate(*d - owed);
        }
    }

    fn finished(&mut self, t: u32, _: f64) {
        if self.book.tenants[t as usize].queued > 0 {
            self.price_head(t);
        } else {
            let d = &mut self.book.tenants[t as usize].deficit;
            *d = d.min(0.0);
        }
    }

    fn cancelled(&mut self, t: u32, was_head: bool) {
        if self.book.tenants[t as usize].queued == 0 {
            self.drop_from_ring(t);
        } else if was_head {
            self.price_head(t);
        }
    }

    fn weight_changed(&mut self, t: u32, _: f64, _: f64) {
        let ten = &self.book.tenants[t as usize];
        if ten.queued > 0 {
            self.auto_quantum = saturate(self.auto_quantum.max(ten.head_cost / ten.weight));
        }
    }

    fn view(&self, t: u32) -> (bool, f64) {
        let ten = &self.book.tenants[t as usize];
        (ten.queued > 0, ten.deficit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::EstimatorKind;
    use crate::queued::Queued;
    use crate::scheduler::{Admin, Inspect, Scheduler};
    use crate::types::{Request, TenantId};
    use proptest::prelude::*;

    impl<T> Drr<T> {
        /// DRR round by round: visit the ring one tenant at a time, granting a
        /// quantum per turn, until a head fits. O(rounds) per dequeue.
        pub(super) fn pick_spinning(&mut self) -> Decision<T> {
            let q = self.quantum();
            loop {
                let Some(&t) = self.ring.front() else {
                    return Decision::Empty;
                };
                let ten = &mut self.book.tenants[t as usize];
                if !self.turn {
                    ten.deficit += q * ten.weight;
                    self.turn = true;
                }
                if ten.head_cost <= ten.deficit {
                    return self.serve_front(t);
                }
                self.ring.rotate_left(1);
                self.turn = false;
            }
        }
    }

    fn drr(quantum: Option<f64>, spin: bool, estimated: bool) -> Queued<Drr<u32>> {
        let est = if estimated {
            EstimatorKind::Ema {
                alpha: 0.5,
                initial: 4.0,
            }
        } else {
            EstimatorKind::Oracle
        };
        let mut d = Drr::new(2, est.build().unwrap(), Charging::default(), 1.0, quantum);
        d.spin = spin;
        Queued(d)
    }

    #[derive(Clone, Debug)]
    enum Op {
        Enqueue(u64, u32),
        Dequeue(usize),
        Complete(usize, u32),
        Cancel(usize),
        Weight(u64, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        // Costs are multiples of 1/4 up to 2^12 and weights powers of two, so a quantum
        // added k times and k quanta added at once are the same number exactly.
        let cost = prop_oneof![0u32..16, 0u32..(1 << 14)];
        prop_oneof![
            4 => (0u64..5, cost.clone()).prop_map(|(t, c)| Op::Enqueue(t, c)),
            4 => (0usize..2).prop_map(Op::Dequeue),
            3 => (0usize..8, cost).prop_map(|(i, c)| Op::Complete(i, c)),
            1 => (0usize..8).prop_map(Op::Cancel),
            1 => (0u64..5, 0u32..5).prop_map(|(t, w)| Op::Weight(t, w)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Computing the rounds a head needs gives the decisions of the old
        /// round-by-round loop, deficit for deficit.
        #[test]
        fn jump_matches_spinning(
            quantum in prop_oneof![Just(None), Just(Some(1.0)), Just(Some(0.25)), Just(Some(3.0))],
            estimated in any::<bool>(),
            ops in prop::collection::vec(op(), 1..200),
        ) {
            let mut fast = drr(quantum, false, estimated);
            let mut slow = drr(quantum, true, estimated);
            let mut running: Vec<(Ticket, usize)> = Vec::new();
            let mut queued: Vec<Ticket> = Vec::new();
            let mut busy = [false; 2];
            let mut payload = 0u32;
            for (i, op) in ops.iter().enumerate() {
                let now = i as f64;
                match *op {
                    Op::Enqueue(t, c) => {
                        payload += 1;
                        let mut r = Request::new(t, 0u32, payload);
                        if !estimated {
                            r = r.with_cost(f64::from(c) / 4.0);
                        }
                        let a = fast.enqueue(r.clone(), now).unwrap();
                        let b = slow.enqueue(r, now).unwrap();
                        prop_assert_eq!(a, b);
                        queued.push(a);
                    }
                    Op::Dequeue(w) => {
                        if busy[w] {
                            continue;
                        }
                        let a = fast.dequeue(w, now).unwrap();
                        let b = slow.dequeue(w, now).unwrap();
                        match (a, b) {
                            (Decision::Run(a), Decision::Run(b)) => {
                                prop_assert_eq!(a.ticket, b.ticket);
                                prop_assert_eq!(a.charged, b.charged);
                                queued.retain(|&t| t != a.ticket);
                                running.push((a.ticket, w));
                                busy[w] = true;
                            }
                            (Decision::Empty, Decision::Empty) => {}
                            (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
                        }
                    }
                    Op::Complete(i, c) => {
                        if running.is_empty() {
                            continue;
                        }
                        let (t, w) = running.remove(i % running.len());
                        let used = f64::from(c) / 4.0;
                        fast.complete(t, used, now).unwrap();
                        slow.complete(t, used, now).unwrap();
                        busy[w] = false;
                    }
                    Op::Cancel(i) => {
                        if queued.is_empty() {
                            continue;
                        }
                        let t = queued.remove(i % queued.len());
                        prop_assert_eq!(
                            fast.cancel(t, now).unwrap().payload,
                            slow.cancel(t, now).unwrap().payload
                        );
                    }
                    Op::Weight(t, w) => {
                        let w = f64::powi(2.0, w as i32 - 2);
                        fast.set_weight(TenantId(t), w, now).unwrap();
                        slow.set_weight(TenantId(t), w, now).unwrap();
                    }
                }
                for t in 0..5 {
                    let (a, b) = (fast.tenant(TenantId(t)), slow.tenant(TenantId(t)));
                    prop_assert_eq!(a, b, "tenant {} after op {}", t, i);
                }
            }
        }
    }

    /// One head of cost 1e10 (or f64::MAX) with a quantum of 1 is served in one
    /// dequeue, not after 10^10 rounds, and the other tenant's deficit grows by the same rounds.
    #[test]
    fn huge_cost_is_served_without_spinning() {
        for cost in [1e10, 1e300, f64::MAX] {
            let mut s = drr(Some(1.0), false, false);
            s.enqueue(Request::new(1u64, 0u32, 1).with_cost(cost), 0.0)
                .unwrap();
            s.enqueue(Request::new(2u64, 0u32, 2).with_cost(cost), 0.0)
                .unwrap();
            let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
            assert_eq!(d.request.payload, 1, "cost {cost}");
            assert!(d.charged == cost);
            let other = s.tenant(TenantId(2)).unwrap().tag;
            assert!(
                other.is_finite() && other > 0.0,
                "cost {cost}: deficit {other}"
            );
            let d = s.dequeue(1, 0.0).unwrap().run().unwrap();
            assert_eq!(d.request.payload, 2, "cost {cost}");
        }
    }

    /// A zero quantum (every cost seen so far was 0) with a debt must not loop: the ring is
    /// served round robin.
    #[test]
    fn zero_quantum_with_a_debt_does_not_loop() {
        let mut s = drr(None, false, false);
        let a = s
            .enqueue(Request::new(1u64, 0u32, 1).with_cost(0.0), 0.0)
            .unwrap();
        s.enqueue(Request::new(1u64, 0u32, 2).with_cost(0.0), 0.0)
            .unwrap();
        assert_eq!(s.dequeue(0, 0.0).unwrap().run().unwrap().ticket, a);
        s.complete(a, 5.0, 1.0).unwrap(); // a debt of 5 that no quantum repays
        let d = s.dequeue(0, 1.0).unwrap().run().unwrap();
        assert_eq!(d.request.payload, 2);
    }
}
