//! First come, first served across all tenants: the baseline every fair scheduler is
//! measured against. Costs are only estimated for reporting (`Dispatch::charged`; 0 when
//! unknown and the estimator is the oracle).

use std::collections::VecDeque;

use crate::book::{Book, State};
use crate::estimate::CostEstimator;
use crate::scheduler::{Scheduler, TenantView};
use crate::types::{Decision, Dispatch, Error, Request, TenantId, Ticket};

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

impl<T: Send> Scheduler<T> for Fifo<T> {
    fn name(&self) -> &'static str {
        "fifo"
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
        // FIFO never needs costs: they only fill in `Dispatch::charged`.
        let (ticket, _, _) = self.book.push(request, false)?;
        self.order.push_back(ticket);
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.workers)?;
        self.book.observe(now)?;
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
            // Keep the tenant's own queue in step (its front is this ticket or a tombstone).
            while let Some(front) = self.book.tenants[t as usize].queue.pop_front() {
                if front == ticket {
                    break;
                }
            }
            let (ticket, request) = self.book.start(ticket, l);
            return Ok(Decision::Run(Dispatch {
                ticket,
                request,
                charged: l,
            }));
        }
        Ok(Decision::Empty)
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.check_usage(ticket, used)?;
        self.book.refresh_charge(ticket, used);
        Ok(())
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.check_usage(ticket, used)?;
        let (t, class) = self.book.finish(ticket);
        let id = self.book.tenants[t as usize].id;
        self.est.observe(id, class, used);
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        self.book.observe(now)?;
        let (request, _, _) = self.book.cancel(ticket)?;
        Ok(request)
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.set_weight(tenant, weight).map(|_| ())
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
            tag: 0.0,
        })
    }

    fn queued(&self) -> usize {
        self.book.queued
    }

    fn running(&self) -> usize {
        self.book.running
    }
}
