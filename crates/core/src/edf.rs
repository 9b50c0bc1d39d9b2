//! Earliest Deadline First with per-flow response-time targets, as in Facade (Lumb et al.,
//! FAST '03): the interposed paper's baseline (§2.4, §5.1). A request's deadline is its
//! arrival time plus its tenant's target ([`Scheduler::set_target`]); the earliest deadline
//! goes first, equal deadlines in arrival order, tenants without a target after every
//! deadline, in arrival order. EDF ignores weights: that is why it does not isolate a flow
//! that overloads the server (Fig. 3).

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::types::{Decision, Dispatch, Error, TenantId, Ticket};
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

impl<T> Queue<T> for Edf<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    queue_parts!();
    fn requires_cost(&self) -> bool {
        false // costs only fill in `Dispatch::charged`, as in FIFO
    }

    fn queued(&mut self, ticket: Ticket, t: u32, was_empty: bool, now: f64) {
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
    }

    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        let Some((t, _)) = self.heads.peek() else {
            return Decision::Empty;
        };
        let h = self.book.head(t).expect("a tenant in the heap has a head");
        let slot = &self.book.slots[h.slot() as usize];
        let l = slot.cost.unwrap_or_else(|| {
            self.est
                .estimate(self.book.tenants[t as usize].id, slot.class)
        });
        let (ticket, request) = self.book.start_head(t, l);
        self.sync(t);
        Decision::Run(Dispatch {
            ticket,
            request,
            charged: l,
        })
    }

    fn cancelled(&mut self, t: u32, was_head: bool) {
        if was_head {
            self.sync(t);
        }
    }

    fn target(&mut self, tenant: TenantId, target: Option<f64>) -> Result<(), Error> {
        // Like a weight, a target creates the tenant; queued requests keep their deadlines.
        let t = self.book.tenant_index(tenant);
        self.target_of(t);
        self.targets[t as usize] = target.unwrap_or(f64::INFINITY);
        Ok(())
    }

    fn removed(&mut self, t: u32) {
        self.heads.remove(t);
        self.target_of(t);
        self.targets[t as usize] = f64::INFINITY;
    }

    fn view(&self, t: u32) -> (bool, f64) {
        let ten = &self.book.tenants[t as usize];
        let target = self.targets.get(t as usize).copied();
        (
            ten.queued + ten.running > 0,
            target.unwrap_or(f64::INFINITY),
        )
    }
}
