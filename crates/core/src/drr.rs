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
//! dequeue then never spins through them (issue 16: one cost of 1e10 stalled the proxy). After
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
