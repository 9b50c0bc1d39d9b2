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
use crate::scheduler::{Scheduler, TenantView};
use crate::tags::Charging;
use crate::types::{Decision, Dispatch, Error, Request, TenantId, Ticket};

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

impl<T: Send> Scheduler<T> for Drr<T> {
    fn requires_cost(&self) -> bool {
        self.est.requires_known_cost()
    }

    fn name(&self) -> &'static str {
        if self.est.requires_known_cost() {
            "drr"
        } else {
            "drre"
        }
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        self.workers = crate::config::check_workers(workers)?;
        Ok(())
    }

    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        self.book.observe(now)?;
        let (ticket, t, was_empty) = self.book.push(request, self.est.requires_known_cost())?;
        if was_empty {
            self.price_head(t);
            self.ring.push_back(t);
        }
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.workers)?;
        self.book.observe(now)?;
        let q = self.quantum();
        loop {
            let Some(&t) = self.ring.front() else {
                return Ok(Decision::Empty);
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
                return Ok(Decision::Run(Dispatch {
                    ticket,
                    request,
                    charged: l,
                }));
            }
            self.ring.rotate_left(1);
            self.turn = false;
        }
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        let t = self.book.check_usage(ticket, used)?;
        if self.charging.refresh {
            let excess = self.book.refresh_charge(ticket, used);
            self.book.tenants[t as usize].deficit -= excess;
        }
        Ok(())
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        let t = self.book.check_usage(ticket, used)?;
        if self.charging.retroactive {
            let owed = self.book.settle(ticket, used);
            self.book.tenants[t as usize].deficit -= owed;
        }
        let (t, class) = self.book.finish(ticket);
        let id = self.book.tenants[t as usize].id;
        self.est.observe(id, class, used);
        if self.book.tenants[t as usize].queued > 0 {
            self.price_head(t);
        } else {
            let d = &mut self.book.tenants[t as usize].deficit;
            *d = d.min(0.0);
        }
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        self.book.observe(now)?;
        let (request, t, was_head) = self.book.cancel(ticket)?;
        if self.book.tenants[t as usize].queued == 0 {
            self.drop_from_ring(t);
        } else if was_head {
            self.price_head(t);
        }
        Ok(request)
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        let (t, _) = self.book.set_weight(tenant, weight)?;
        let ten = &self.book.tenants[t as usize];
        if ten.queued > 0 {
            self.auto_quantum = self.auto_quantum.max(ten.head_cost / ten.weight);
        }
        Ok(())
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        self.book.remove_tenant(tenant)?;
        self.est.forget(tenant);
        Ok(())
    }

    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        let t = self.book.lookup(tenant)?;
        let ten = &self.book.tenants[t as usize];
        Some(TenantView {
            id: ten.id,
            weight: ten.weight,
            queued: ten.queued,
            running: ten.running,
            active: ten.queued > 0,
            tag: ten.deficit,
        })
    }

    fn queued(&self) -> usize {
        self.book.queued
    }

    fn running(&self) -> usize {
        self.book.running
    }
}
