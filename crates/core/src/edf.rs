//! Earliest Deadline First with per-flow response-time targets, as in Facade (Lumb et al.,
//! FAST '03): the interposed paper's baseline (§2.4, §5.1). A request's deadline is its
//! arrival time plus its tenant's target ([`Scheduler::set_target`]); the earliest deadline
//! goes first, equal deadlines in arrival order, tenants without a target after every
//! deadline, in arrival order. EDF ignores weights: that is why it does not isolate a flow
//! that overloads the server (Fig. 3).

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::scheduler::{check_target, Scheduler, TenantView};
use crate::types::{Decision, Dispatch, Error, Request, TenantId, Ticket};
use crate::util::IndexedHeap;

pub(crate) struct Edf<T> {
    name: &'static str,
    workers: usize,
    book: Book<T>,
    est: Box<dyn CostEstimator>,
    /// Target per tenant index (`INFINITY` = none).
    targets: Vec<f64>,
    /// `(deadline, arrival sequence)` per ticket slot.
    deadline: Vec<(f64, u64)>,
    seq: u64,
    /// Tenants with queued requests, by their head's `(deadline, sequence)`.
    heads: IndexedHeap,
}

impl<T> Edf<T> {
    pub fn new(
        name: &'static str,
        workers: usize,
        est: Box<dyn CostEstimator>,
        default_weight: f64,
    ) -> Self {
        Edf {
            name,
            workers,
            book: Book::new(default_weight),
            est,
            targets: Vec::new(),
            deadline: Vec::new(),
            seq: 0,
            heads: IndexedHeap::default(),
        }
    }

    fn sync(&mut self, t: u32) {
        match self.book.head(t) {
            Some(h) => {
                let (d, seq) = self.deadline[h.slot() as usize];
                self.heads.set(t, d, seq);
            }
            None => self.heads.remove(t),
        }
    }

    fn target_of(&mut self, t: u32) -> f64 {
        let ti = t as usize;
        if ti >= self.targets.len() {
            self.targets.resize(ti + 1, f64::INFINITY);
        }
        self.targets[ti]
    }
}

impl<T: Send> Scheduler<T> for Edf<T> {
    fn name(&self) -> &'static str {
        self.name
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        self.workers = crate::config::check_workers(workers)?;
        Ok(())
    }

    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.book.observe(now)?;
        // EDF never needs costs: they only fill in `Dispatch::charged`, as in FIFO.
        let (ticket, t, was_empty) = self.book.push(request, false)?;
        let target = self.target_of(t);
        let slot = ticket.slot() as usize;
        if slot >= self.deadline.len() {
            self.deadline.resize(slot + 1, (0.0, 0));
        }
        self.seq += 1;
        self.deadline[slot] = (now + target, self.seq);
        if was_empty {
            self.sync(t);
        }
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.workers)?;
        self.book.observe(now)?;
        let Some((t, _)) = self.heads.peek() else {
            return Ok(Decision::Empty);
        };
        let h = self.book.head(t).expect("a tenant in the heap has a head");
        let slot = &self.book.slots[h.slot() as usize];
        let l = slot.cost.unwrap_or_else(|| {
            self.est
                .estimate(self.book.tenants[t as usize].id, slot.class)
        });
        let (ticket, request) = self.book.start_head(t, l);
        self.sync(t);
        Ok(Decision::Run(Dispatch {
            ticket,
            request,
            charged: l,
        }))
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.check_usage(ticket, used)?;
        self.book.refresh_charge(ticket, used); // records usage: reports must not go down
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
        let (request, t, was_head) = self.book.cancel(ticket)?;
        if was_head {
            self.sync(t);
        }
        Ok(request)
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        self.book.set_weight(tenant, weight).map(|_| ())
    }

    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        check_target(target)?;
        self.book.observe(now)?;
        // Like a weight, a target creates the tenant; queued requests keep their deadlines.
        let t = self.book.tenant_index(tenant);
        self.target_of(t);
        self.targets[t as usize] = target.unwrap_or(f64::INFINITY);
        Ok(())
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        let t = self.book.remove_tenant(tenant)?;
        self.heads.remove(t);
        self.target_of(t);
        self.targets[t as usize] = f64::INFINITY;
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
            active: ten.queued + ten.running > 0,
            tag: self
                .targets
                .get(t as usize)
                .copied()
                .unwrap_or(f64::INFINITY),
        })
    }

    fn queued(&self) -> usize {
        self.book.queued
    }

    fn running(&self) -> usize {
        self.book.running
    }
}
