//! The virtual-time schedulers: WFQ (MSFQ), WF²Q and 2DFQ over n workers, with known or
//! estimated costs and retroactive and refresh charging (2DFQ §2, §4, §5, Fig. 7).
//!
//! All three share Fig. 7's bookkeeping: a per-tenant start tag `S_f`; a tenant joining the
//! active set A fast-forwards to `max(S_f, v(now))`; a dispatch charges the head request's
//! cost `l` (known, or the estimator's) by `S_f += l/φ_f` and remembers it as credit; refresh
//! and completion reconcile credit with measured usage. They differ only in the selection
//! (`select`) and the virtual clock (`clock`).

use crate::book::Book;
use crate::clock::{GpsClock, VirtualClock};
use crate::estimate::CostEstimator;
use crate::scheduler::{Admin, Inspect, Scheduler, TenantView};
use crate::select::{Selector, TagKey};
use crate::types::{saturate, Decision, Dispatch, Error, Request, TenantId, Ticket, MIN_WEIGHT};

/// Which bookkeeping corrections are on (2DFQ §5). Both are on by default, as in the paper's
/// evaluation, for every scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Charging {
    /// Reconcile the up-front charge with the measured cost at completion.
    pub retroactive: bool,
    /// Charge usage beyond the up-front charge while the request still runs.
    pub refresh: bool,
}

impl Default for Charging {
    fn default() -> Self {
        Charging {
            retroactive: true,
            refresh: true,
        }
    }
}

pub(crate) enum Clock {
    Gps(GpsClock),
    Approximate { v: f64 },
    LastDispatched { v: f64 },
}

impl Clock {
    pub fn new(kind: VirtualClock) -> Result<Self, Error> {
        Ok(match kind.check()? {
            VirtualClock::Gps { capacity } => Clock::Gps(GpsClock::new(capacity)?),
            VirtualClock::Approximate => Clock::Approximate { v: 0.0 },
            VirtualClock::LastDispatched => Clock::LastDispatched { v: 0.0 },
        })
    }
}

/// A virtual-time scheduler with selection structure `S`.
pub(crate) struct TagScheduler<T, S> {
    name: &'static str,
    workers: usize,
    book: Book<T>,
    sel: S,
    /// The tags each tenant currently has in `sel`, to skip no-op updates.
    placed: Vec<Option<TagKey>>,
    clock: Clock,
    active_weight: f64,
    active_count: usize,
    est: Box<dyn CostEstimator>,
    /// Requests must carry their cost (the GPS clock or an oracle estimator); fixed at
    /// construction, asked on every enqueue.
    require_cost: bool,
    /// The estimator learns from completions. An estimator that requires known costs (the
    /// oracle) is never asked for an estimate, so its `observe` is skipped: one dynamic call
    /// less per completion.
    learn: bool,
    charging: Charging,
}

impl<T, S: Selector> TagScheduler<T, S> {
    pub fn new(
        name: &'static str,
        workers: usize,
        sel: S,
        clock: Clock,
        est: Box<dyn CostEstimator>,
        charging: Charging,
        default_weight: f64,
    ) -> Self {
        let require_cost = matches!(clock, Clock::Gps(_)) || est.requires_known_cost();
        let learn = !est.requires_known_cost();
        TagScheduler {
            name,
            workers,
            book: Book::new(default_weight),
            sel,
            placed: Vec::new(),
            clock,
            active_weight: 0.0,
            active_count: 0,
            est,
            require_cost,
            learn,
            charging,
        }
    }

    /// v(now). `witness`: a backlogged tenant; if its start tag is at most `v`, so is the
    /// smallest one, and the approximate clock's lift `v = max(v, min S)` is a no-op (it is
    /// on almost every dispatch: the chosen tenant's own start tag is at most `v`). The
    /// selector's tags are the tenant entries' (`sync` follows every change).
    #[inline(always)] // one match on the clock; kept inside dequeue as before the lazy lift
    fn v_now(&mut self, now: f64, witness: Option<u32>) -> f64 {
        match &mut self.clock {
            Clock::Gps(g) => {
                g.advance(now);
                g.virtual_time()
            }
            Clock::Approximate { v } => {
                let no_op = matches!(witness, Some(w) if self.book.tenants[w as usize].start <= *v);
                if !no_op {
                    *v = self.sel.lift_mut(*v);
                }
                *v
            }
            Clock::LastDispatched { v } => *v,
        }
    }

    /// Put tenant `t`'s current tags into the selector (or take it out if nothing is queued).
    /// The head's charge is taken when it becomes head and when the tenant's own completions
    /// may have changed its estimate; tags change only on the tenant's own events.
    fn sync(&mut self, t: u32) {
        let ti = t as usize;
        if ti >= self.placed.len() {
            self.placed.resize(ti + 1, None);
        }
        let want = match self.book.head_info(t) {
            None => None,
            Some((class, known)) => {
                let ten = &mut self.book.tenants[ti];
                let l = known.unwrap_or_else(|| self.est.estimate(ten.id, class));
                ten.head_cost = l;
                // l/φ is kept for the dispatch's charge: one division per dispatch, not two
                // (any weight change re-syncs the tenant).
                ten.head_step = l / ten.weight;
                Some(TagKey {
                    start: ten.start,
                    cost: l,
                    finish: saturate(ten.start + ten.head_step),
                    tie: ten.id.0,
                })
            }
        };
        if self.placed[ti] != want {
            match want {
                Some(key) => self.sel.set(t, key),
                None => self.sel.remove(t),
            }
            self.placed[ti] = want;
        }
    }

    #[inline(always)] // small, on the hot path of every caller
    fn join_active(&mut self, t: u32, now: f64) {
        if !self.book.tenants[t as usize].active {
            let v = self.v_now(now, None);
            let ten = &mut self.book.tenants[t as usize];
            ten.start = ten.start.max(v); // Fig. 7 line 4
            ten.active = true;
            self.active_weight += ten.weight;
            self.active_count += 1;
        }
    }

    fn leave_active(&mut self, t: u32) {
        let ten = &mut self.book.tenants[t as usize];
        if ten.active {
            ten.active = false;
            self.active_count -= 1;
            self.active_weight -= ten.weight;
            if self.active_count == 0 {
                self.active_weight = 0.0; // no rounding residue when A empties
            }
        }
    }

    /// The approximate clock advances by measured service over the active weight.
    #[inline(always)] // small, on the hot path of every caller
    fn clock_service(&mut self, ticket: Ticket, used: f64) {
        let d = self.book.clock_delta(ticket, used);
        if let Clock::Approximate { v } = &mut self.clock {
            if self.active_count > 0 {
                // A non-empty active set weighs at least MIN_WEIGHT; the running sum may
                // have drifted below it by rounding (weights 1e6 and 1e-6 side by side).
                *v = saturate(*v + d / self.active_weight.max(MIN_WEIGHT));
            }
        }
    }

    /// Charge (or refund) tenant `t`; returns whether its start tag moved.
    #[inline(always)] // small, on the hot path of every caller
    fn charge(&mut self, t: u32, amount: f64) -> bool {
        if amount != 0.0 {
            let ten = &mut self.book.tenants[t as usize];
            ten.start = saturate(ten.start + amount / ten.weight);
            return true;
        }
        false
    }
}

impl<T: Send, S: Selector> Scheduler<T> for TagScheduler<T, S> {
    #[inline(always)] // a priority level calls it directly: one frame, not two
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.book.observe(now)?;
        let cost = request.cost;
        let (ticket, t, was_empty, _) = self.book.push(request, self.require_cost)?;
        if let Clock::Gps(g) = &mut self.clock {
            let w = self.book.tenants[t as usize].weight;
            if g.weight(t as usize) != w {
                g.set_weight(t as usize, w, now);
            }
            g.arrive(t as usize, cost.unwrap_or(0.0), now);
        }
        self.join_active(t, now);
        if was_empty {
            self.sync(t);
        }
        Ok(ticket)
    }

    #[inline(always)] // a priority level calls it directly: one frame, not two
    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.workers)?;
        let now = self.book.observe(now)?;
        if self.sel.len() == 0 {
            return Ok(Decision::Empty);
        }
        let t = if S::CHOOSES_WITHOUT_V {
            // WFQ's choice does not depend on v: choose first, and let the chosen tenant's
            // start tag witness the lift (the clock still moves exactly as before).
            let t = self.sel.select(worker, f64::NAN);
            let t = t.expect("a backlogged tenant exists");
            self.v_now(now, Some(t));
            t
        } else {
            let v = self.v_now(now, None);
            let t = self.sel.select(worker, v);
            t.expect("a backlogged tenant exists")
        };
        let ten = &mut self.book.tenants[t as usize];
        let l = ten.head_cost;
        let s = ten.start;
        ten.start = saturate(s + ten.head_step); // Fig. 7 line 24: S_f += l/φ_f
        if let Clock::LastDispatched { v } = &mut self.clock {
            *v = v.max(s);
        }
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
        let t = self.book.check_usage(ticket, used)?;
        self.clock_service(ticket, used);
        if self.charging.refresh {
            let excess = self.book.refresh_charge(ticket, used);
            if self.charge(t, excess) {
                self.sync(t);
            }
        }
        Ok(())
    }

    #[inline(always)] // a priority level calls it directly: one frame, not two
    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.book.observe(now)?;
        let t = self.book.check_usage(ticket, used)?;
        self.clock_service(ticket, used);
        let mut moved = false;
        if self.charging.retroactive {
            let owed = self.book.settle(ticket, used);
            moved = self.charge(t, owed);
        }
        let (t, class) = self.book.finish(ticket);
        if self.learn {
            let id = self.book.tenants[t as usize].id;
            self.est.observe(id, class, used); // Fig. 7 line 30
        }
        if self.book.tenants[t as usize].queued == 0 {
            self.leave_active(t); // Fig. 7 lines 32–33
        }
        // The head's tags change only if the start tag moved or the head's charge is an
        // estimate the completion may have updated; otherwise `sync` would find them equal.
        if moved || matches!(self.book.head_info(t), Some((_, None))) {
            self.sync(t);
        }
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        let now = self.book.observe(now)?;
        let (request, t, was_head) = self.book.cancel(ticket)?;
        if let Clock::Gps(g) = &mut self.clock {
            g.withdraw(t as usize, request.cost.unwrap_or(0.0), now);
        }
        let ten = &self.book.tenants[t as usize];
        if ten.queued == 0 && ten.running == 0 {
            self.leave_active(t);
        }
        if was_head {
            self.sync(t);
        }
        Ok(request)
    }
}

impl<T, S: Selector> Admin for TagScheduler<T, S> {
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        crate::config::check_workers(workers)?;
        self.workers = workers;
        self.sel.set_workers(workers);
        Ok(())
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        let now = self.book.observe(now)?;
        let (t, old) = self.book.set_weight(tenant, weight)?;
        if self.book.tenants[t as usize].active {
            self.active_weight += weight - old;
        }
        if let Clock::Gps(g) = &mut self.clock {
            g.set_weight(t as usize, weight, now);
        }
        self.sync(t);
        Ok(())
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        let t = self.book.remove_tenant(tenant)?;
        self.sel.remove(t);
        if let Some(p) = self.placed.get_mut(t as usize) {
            *p = None;
        }
        self.est.forget(tenant);
        if let Clock::Gps(g) = &mut self.clock {
            g.forget(t as usize);
        }
        Ok(())
    }
}

impl<T, S: Selector> Inspect for TagScheduler<T, S> {
    fn requires_cost(&self) -> bool {
        matches!(self.clock, Clock::Gps(_)) || self.est.requires_known_cost()
    }

    fn name(&self) -> &'static str {
        self.name
    }

    fn workers(&self) -> usize {
        self.workers
    }

    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        let t = self.book.lookup(tenant)?;
        let ten = &self.book.tenants[t as usize];
        Some(TenantView {
            id: ten.id,
            weight: ten.weight,
            queued: ten.queued,
            running: ten.running,
            active: ten.active,
            tag: ten.start,
        })
    }

    fn queued(&self) -> usize {
        self.book.queued
    }

    fn running(&self) -> usize {
        self.book.running
    }

    fn virtual_time(&self) -> Option<f64> {
        Some(match &self.clock {
            Clock::Gps(g) => g.virtual_time(),
            Clock::Approximate { v } | Clock::LastDispatched { v } => *v,
        })
    }
}
