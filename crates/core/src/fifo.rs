//! First come, first served across all tenants: the baseline every fair scheduler is
//! measured against. Costs are only estimated for reporting (`Dispatch::charged`; 0 when
//! unknown and the estimator is the oracle).

use std::collections::VecDeque;

use crate::book::{Book, State};
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::types::{Decision, Dispatch, Ticket};

pub(crate) struct Fifo<T> {
    workers: usize,
    book: Book<T>,
    est: Box<dyn CostEstimator>,
    /// Arrival order; cancelled tickets stay as tombstones until they reach the front.
    order: VecDeque<Ticket>,
}

impl<T> Fifo<T> {
    pub fn new(workers: usize, est: Box<dyn CostEstimator>, default_weight: f64) -> Self {
        Fifo {
            workers,
            book: Book::new(default_weight),
            est,
            order: VecDeque::new(),
        }
    }
}

impl<T> Queue<T> for Fifo<T> {
    fn name(&self) -> &'static str {
        "fifo"
    }
    queue_parts!();
    fn requires_cost(&self) -> bool {
        false // costs only fill in `Dispatch::charged`
    }

    fn queued(&mut self, ticket: Ticket, _: u32, _: bool, _: f64) {
        self.order.push_back(ticket);
    }

    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        while let Some(ticket) = self.order.pop_front() {
            let slot = &self.book.slots[ticket.slot() as usize];
            if slot.generation != ticket.generation() || slot.state != State::Queued {
                continue; // cancelled
            }
            let t = slot.tenant;
            let l = slot.cost.unwrap_or_else(|| {
                self.est
                    .estimate(self.book.tenants[t as usize].id, slot.class)
            });
            let (ticket, request) = self.book.start(ticket, l);
            return Decision::Run(Dispatch {
                ticket,
                request,
                charged: l,
            });
        }
        Decision::Empty
    }

    fn view(&self, t: u32) -> (bool, f64) {
        (self.book.tenants[t as usize].queued > 0, 0.0)
    }
}
