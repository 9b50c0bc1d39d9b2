//! Request Windows RW(D) (Jin, Chase & Kaur, SIGMETRICS '04 §4): each flow f may have at
//! most `n_f = D·u·φ_f/Σφ` of estimated cost outstanding, where `u` is the window per issue
//! slot in cost units (1 when requests cost one unit, as in the paper) and Σφ runs over every
//! tenant the scheduler knows, busy or not: RW throttles each flow without knowing whether
//! the others are active. That gives Theorem 3's bound (2D on a FIFO server) but is not
//! work-conserving, so with requests queued and no window open the answer is
//! `RetryAt(f64::INFINITY)`: ask again after the next completion (or enqueue, or weight
//! change).
//!
//! A flow with nothing outstanding may always send its head, even one costlier than its
//! window, so no flow starves. Among flows with an open window, dispatch is round robin in
//! the order their windows opened: O(1) per dispatch. Windows are recomputed (O(tenants))
//! only when Σφ or D changes.

use std::collections::VecDeque;

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::scheduler::{Scheduler, TenantView};
use crate::types::{Decision, Dispatch, Error, Request, TenantId, Ticket};

pub(crate) struct Rw<T> {
    name: &'static str,
    workers: usize,
    /// Window per issue slot, in cost units.
    unit: f64,
    book: Book<T>,
    est: Box<dyn CostEstimator>,
    /// Charged cost outstanding per tenant index.
    outstanding: Vec<f64>,
    /// Whether the tenant is in `ready`.
    listed: Vec<bool>,
    /// Tenants whose window may be open, oldest first; entries are re-checked when popped.
    ready: VecDeque<u32>,
    /// Σφ over known tenants, and their number.
    total_weight: f64,
    tenants: usize,
}

impl<T> Rw<T> {
    pub fn new(
        name: &'static str,
        workers: usize,
        unit: f64,
        est: Box<dyn CostEstimator>,
        default_weight: f64,
    ) -> Self {
        Rw {
            name,
            workers,
            unit,
            book: Book::new(default_weight),
            est,
            outstanding: Vec::new(),
            listed: Vec::new(),
            ready: VecDeque::new(),
            total_weight: 0.0,
            tenants: 0,
        }
    }

    /// The tenant index, creating the tenant (and growing Σφ) if new.
    fn tenant_index(&mut self, id: TenantId) -> u32 {
        if let Some(t) = self.book.lookup(id) {
            return t;
        }
        let t = self.book.tenant_index(id);
        if t as usize >= self.outstanding.len() {
            self.outstanding.resize(t as usize + 1, 0.0);
            self.listed.resize(t as usize + 1, false);
        }
        self.outstanding[t as usize] = 0.0;
        self.listed[t as usize] = false;
        // Σφ grows: other windows only shrink, nobody new may send.
        self.total_weight += self.book.tenants[t as usize].weight;
        self.tenants += 1;
        t
    }

    /// n_f.
    fn window(&self, t: u32) -> f64 {
        self.workers as f64 * self.unit * self.book.tenants[t as usize].weight / self.total_weight
    }

    /// Whether tenant `t` may send its head now (computing the head's charge).
    fn open(&mut self, t: u32) -> bool {
        let Some(h) = self.book.head(t) else {
            return false;
        };
        let slot = &self.book.slots[h.slot() as usize];
        let (class, known) = (slot.class, slot.cost);
        let ten = &mut self.book.tenants[t as usize];
        let l = known.unwrap_or_else(|| self.est.estimate(ten.id, class));
        ten.head_cost = l;
        let out = self.outstanding[t as usize];
        // A relative tolerance so that n_f = 3 admits three unit requests despite rounding.
        out == 0.0 || out + l <= self.window(t) * (1.0 + 1e-9)
    }

    fn list(&mut self, t: u32) {
        if !self.listed[t as usize] && self.open(t) {
            self.listed[t as usize] = true;
            self.ready.push_back(t);
        }
    }

    /// Σφ shrank or D grew: windows opened.
    fn relist_all(&mut self) {
        for t in 0..self.book.tenants.len() as u32 {
            if self.book.lookup(self.book.tenants[t as usize].id) == Some(t) {
                self.list(t);
            }
        }
    }
}

impl<T: Send> Scheduler<T> for Rw<T> {
    fn requires_cost(&self) -> bool {
        self.est.requires_known_cost()
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        let grew = crate::config::check_workers(workers)? > self.workers;
        self.workers = workers;
        if grew {
            self.relist_all();
        }
        Ok(())
    }

    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        self.book.observe(now)?;
        // Validate before creating the tenant, so a refused request leaves no trace.
        match request.cost {
            Some(c) => {
                crate::types::check_cost("request cost", c)?;
            }
            None if self.est.requires_known_cost() => {
                return Err(Error::CostRequired {
                    tenant: request.tenant,
                    class: request.class,
                })
            }
            None => {}
        }
        let t = self.tenant_index(request.tenant);
        let (ticket, _, was_empty) = self.book.push(request, self.est.requires_known_cost())?;
        if was_empty {
            self.list(t);
        }
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.workers)?;
        self.book.observe(now)?;
        while let Some(t) = self.ready.pop_front() {
            self.listed[t as usize] = false;
            if !self.open(t) {
                continue; // re-listed by its next completion
            }
            let l = self.book.tenants[t as usize].head_cost;
            self.outstanding[t as usize] += l;
            let (ticket, request) = self.book.start_head(t, l);
            self.list(t); // round robin: back of the line if still open
            return Ok(Decision::Run(Dispatch {
                ticket,
                request,
                charged: l,
            }));
        }
        Ok(if self.book.queued > 0 {
            Decision::RetryAt(f64::INFINITY)
        } else {
            Decision::Empty
        })
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        // Windows count the cost charged at dispatch; usage only feeds the estimator.
        self.book.observe(now)?;
        self.book.check_usage(ticket, used)?;
        self.book.refresh_charge(ticket, used); // records usage: reports must not go down
        Ok(())
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.check_usage(ticket, used)?;
        let charged = self.book.slots[ticket.slot() as usize].charged;
        let (t, class) = self.book.finish(ticket);
        let ti = t as usize;
        self.outstanding[ti] = if self.book.tenants[ti].running == 0 {
            0.0 // no rounding residue
        } else {
            (self.outstanding[ti] - charged).max(0.0)
        };
        let id = self.book.tenants[ti].id;
        self.est.observe(id, class, used);
        self.list(t);
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        self.book.observe(now)?;
        let (request, t, was_head) = self.book.cancel(ticket)?;
        if was_head {
            self.list(t);
        }
        Ok(request)
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        crate::types::check_weight(tenant, weight)?;
        let t = self.tenant_index(tenant);
        let (_, old) = self.book.set_weight(tenant, weight)?;
        self.total_weight += weight - old;
        if weight < old {
            self.relist_all();
        } else {
            self.list(t);
        }
        Ok(())
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        let t = self.book.remove_tenant(tenant)?;
        self.tenants -= 1;
        self.total_weight = if self.tenants == 0 {
            0.0 // no rounding residue
        } else {
            self.total_weight - self.book.tenants[t as usize].weight
        };
        self.est.forget(tenant);
        self.relist_all();
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
            active: ten.queued + ten.running > 0,
            tag: self.outstanding[t as usize],
        })
    }

    fn queued(&self) -> usize {
        self.book.queued
    }

    fn running(&self) -> usize {
        self.book.running
    }
}
