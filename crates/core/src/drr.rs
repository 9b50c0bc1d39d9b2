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
//! front serve at least one request per turn: a dequeue is O(1) amortised. A smaller fixed
//! quantum makes a dequeue cost O(charge / quantum) rounds.

use std::collections::VecDeque;

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::tags::Charging;
use crate::types::{Decision, Dispatch, Ticket};

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
            self.auto_quantum = self.auto_quantum.max(l / ten.weight);
        }
    }

    fn quantum(&self) -> f64 {
        self.fixed_quantum.unwrap_or(self.auto_quantum)
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
        loop {
            let Some(&t) = self.ring.front() else {
                return Decision::Empty;
            };
            let ten = &mut self.book.tenants[t as usize];
            if !self.turn {
                ten.deficit += q * ten.weight;
                self.turn = true;
            }
            let l = ten.head_cost;
            if l <= ten.deficit {
                ten.deficit -= l;
                let (ticket, request) = self.book.start_head(t, l);
                if self.book.tenants[t as usize].queued == 0 {
                    self.drop_from_ring(t);
                } else {
                    self.price_head(t);
                }
                return Decision::Run(Dispatch {
                    ticket,
                    request,
                    charged: l,
                });
            }
            self.ring.rotate_left(1);
            self.turn = false;
        }
    }

    fn refresh(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.refresh {
            let excess = self.book.refresh_charge(ticket, used);
            self.book.tenants[t as usize].deficit -= excess;
        }
    }

    fn settle(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.retroactive {
            let owed = self.book.settle(ticket, used);
            self.book.tenants[t as usize].deficit -= owed;
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
            self.auto_quantum = self.auto_quantum.max(ten.head_cost / ten.weight);
        }
    }

    fn view(&self, t: u32) -> (bool, f64) {
        let ten = &self.book.tenants[t as usize];
        (ten.queued > 0, ten.deficit)
    }
}
