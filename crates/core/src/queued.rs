//! The one bookkeeping layer of the queue-based schedulers (FIFO, DRR, EDF, RW(D) and the
//! interposed start-tag family), as [`TagScheduler`](crate::tags) is for WFQ, WF²Q and 2DFQ:
//! the seam's methods (validation, monotone time, tickets, usage checks, the estimator's
//! update, tenant views) are written once here, and each policy writes only what is its own
//! through the hooks of [`Queue`].

use crate::book::Book;
use crate::drr::Drr;
use crate::edf::Edf;
use crate::estimate::CostEstimator;
use crate::fifo::Fifo;
use crate::interposed::StartTag;
use crate::rw::Rw;
use crate::scheduler::{check_target, Admin, Inspect, Scheduler, TenantView};
use crate::types::{check_weight, Decision, Error, Request, TenantId, Ticket};
use crate::vtc::Vtc;

/// The accessors every queue policy writes the same way, over its `book`, `est` and
/// `workers` fields.
macro_rules! queue_parts {
    () => {
        fn book(&self) -> &crate::book::Book<T> {
            &self.book
        }
        fn book_mut(&mut self) -> &mut crate::book::Book<T> {
            &mut self.book
        }
        fn est(&mut self) -> &mut dyn crate::estimate::CostEstimator {
            &mut *self.est
        }
        fn est_ref(&self) -> &dyn crate::estimate::CostEstimator {
            &*self.est
        }
        fn workers_mut(&mut self) -> &mut usize {
            &mut self.workers
        }
        fn workers(&self) -> usize {
            self.workers
        }
    };
}
pub(crate) use queue_parts;

/// What a queue-based policy supplies. Hooks run after the shared bookkeeping has validated
/// the call and updated the [`Book`]; their defaults do nothing.
pub(crate) trait Queue<T> {
    /// The policy's short name.
    fn name(&self) -> &'static str;
    /// The shared bookkeeping (written by [`queue_parts!`]).
    fn book(&self) -> &Book<T>;
    /// The shared bookkeeping, mutably.
    fn book_mut(&mut self) -> &mut Book<T>;
    /// The cost estimator.
    fn est(&mut self) -> &mut dyn CostEstimator;
    /// The cost estimator, to read.
    fn est_ref(&self) -> &dyn CostEstimator;
    /// The number of workers, to set.
    fn workers_mut(&mut self) -> &mut usize;
    /// Workers now.
    fn workers(&self) -> usize;
    /// Whether requests must carry their cost: the estimator says, unless the policy never
    /// charges by cost.
    fn requires_cost(&self) -> bool {
        self.est_ref().requires_known_cost()
    }
    /// The number of workers went from `old` to the current one.
    fn workers_changed(&mut self, old: usize) {
        let _ = old;
    }

    /// A tenant was created: by a weight (before it is applied) or by its first request
    /// (before the `queued` hook).
    fn joined(&mut self, t: u32) {
        let _ = t;
    }
    /// A request is about to be queued (before the book takes it).
    fn arriving(&mut self) {}
    /// `ticket` of tenant `t` was queued; `was_empty`: it is the tenant's head.
    fn queued(&mut self, ticket: Ticket, t: u32, was_empty: bool, now: f64);
    /// Choose what `worker` runs.
    fn pick(&mut self, worker: usize, now: f64) -> Decision<T>;
    /// Cumulative usage `used` of a running request of tenant `t` (refresh charging). The
    /// default records it, so later reports cannot go down.
    fn refresh(&mut self, ticket: Ticket, t: u32, used: f64) {
        let _ = t;
        self.book_mut().refresh_charge(ticket, used);
    }
    /// A running request used `used` in all; called before it leaves the book (retroactive
    /// charging).
    fn settle(&mut self, ticket: Ticket, t: u32, used: f64) {
        let _ = (ticket, t, used);
    }
    /// A request of tenant `t`, charged `charged` at dispatch, left the book; the estimator
    /// has seen its usage.
    fn finished(&mut self, t: u32, charged: f64) {
        let _ = (t, charged);
    }
    /// A queued request of tenant `t` was cancelled; `was_head`: it was the head.
    fn cancelled(&mut self, t: u32, was_head: bool) {
        let _ = (t, was_head);
    }
    /// Tenant `t`'s weight went from `old` to `new`.
    fn weight_changed(&mut self, t: u32, old: f64, new: f64) {
        let _ = (t, old, new);
    }
    /// A response-time target (only EDF uses one).
    fn target(&mut self, tenant: TenantId, target: Option<f64>) -> Result<(), Error> {
        let _ = tenant;
        check_target(target)
    }
    /// Tenant `t` was removed from the book.
    fn removed(&mut self, t: u32) {
        let _ = t;
    }
    /// `(active, tag)` of tenant `t` for its [`TenantView`].
    fn view(&self, t: u32) -> (bool, f64);
    /// The system virtual time, if the policy keeps one.
    fn virtual_time(&self) -> Option<f64> {
        None
    }
}

/// A queue-based policy behind the seam.
pub(crate) struct Queued<P>(pub P);

impl<P> Queued<P> {
    /// (whether requests must carry their cost, whether the estimator learns from
    /// completions): asked of the policy once. An estimator that requires known costs (the
    /// oracle) is never asked for an estimate, so feeding it completions is skipped.
    #[inline]
    fn flags<T>(&mut self) -> (bool, bool)
    where
        P: Queue<T>,
    {
        if let Some(f) = self.0.book().policy_flags {
            return f;
        }
        let f = (
            self.0.requires_cost(),
            !self.0.est_ref().requires_known_cost(),
        );
        self.0.book_mut().policy_flags = Some(f);
        f
    }

    /// The tenant's index, creating it (and telling the policy) if it is new.
    fn tenant_index<T>(&mut self, id: TenantId) -> u32
    where
        P: Queue<T>,
    {
        if let Some(t) = self.0.book().lookup(id) {
            return t;
        }
        let t = self.0.book_mut().tenant_index(id);
        self.0.joined(t);
        t
    }
}

impl<T: Send, P: Queue<T>> Scheduler<T> for Queued<P>
where
    Queued<P>: Admin + Inspect,
{
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        let now = self.0.book_mut().observe(now)?;
        let (require, _) = self.flags();
        self.0.arriving();
        // The book refuses a bad request before it creates the tenant: no trace left.
        let (ticket, t, was_empty, fresh) = self.0.book_mut().push(request, require)?;
        if fresh {
            self.0.joined(t);
        }
        self.0.queued(ticket, t, was_empty, now);
        Ok(ticket)
    }

    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        crate::config::check_worker(worker, self.0.workers())?;
        let now = self.0.book_mut().observe(now)?;
        Ok(self.0.pick(worker, now))
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.0.book_mut().observe(now)?;
        let t = self.0.book_mut().check_usage(ticket, used)?;
        self.0.refresh(ticket, t, used);
        Ok(())
    }

    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        self.0.book_mut().observe(now)?;
        let t = self.0.book_mut().check_usage(ticket, used)?;
        self.0.settle(ticket, t, used);
        let charged = self.0.book().slots[ticket.slot() as usize].charged;
        let (t, class) = self.0.book_mut().finish(ticket);
        if self.flags().1 {
            let id = self.0.book().tenants[t as usize].id;
            self.0.est().observe(id, class, used);
        }
        self.0.finished(t, charged);
        Ok(())
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        self.0.book_mut().observe(now)?;
        let (request, t, was_head) = self.0.book_mut().cancel(ticket)?;
        self.0.cancelled(t, was_head);
        Ok(request)
    }
}

/// [`Admin`] and [`Inspect`] do not mention the payload type, so a blanket impl over every
/// `P: Queue<T>` would leave `T` unconstrained: they are implemented for each policy type
/// (which names `T`), with one text of the bodies.
macro_rules! admin_inspect {
    ($($policy:ident),*) => {$(
        impl<T> Admin for Queued<$policy<T>> {
            fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
                let workers = crate::config::check_workers(workers)?;
                let old = std::mem::replace(self.0.workers_mut(), workers);
                self.0.workers_changed(old);
                Ok(())
            }

            fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
                self.0.book_mut().observe(now)?;
                check_weight(tenant, weight)?;
                self.tenant_index(tenant);
                let (t, old) = self.0.book_mut().set_weight(tenant, weight)?;
                self.0.weight_changed(t, old, weight);
                Ok(())
            }

            fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
                check_target(target)?;
                self.0.book_mut().observe(now)?;
                self.0.target(tenant, target)
            }

            fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
                let t = self.0.book_mut().remove_tenant(tenant)?;
                self.0.removed(t);
                self.0.est().forget(tenant);
                Ok(())
            }
        }

        impl<T> Inspect for Queued<$policy<T>> {
            fn name(&self) -> &'static str {
                self.0.name()
            }

            fn workers(&self) -> usize {
                self.0.workers()
            }

            fn requires_cost(&self) -> bool {
                self.0.requires_cost()
            }

            fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
                let t = self.0.book().lookup(tenant)?;
                let ten = &self.0.book().tenants[t as usize];
                let (active, tag) = self.0.view(t);
                Some(TenantView {
                    id: ten.id,
                    weight: ten.weight,
                    queued: ten.queued,
                    running: ten.running,
                    active,
                    tag,
                })
            }

            fn queued(&self) -> usize {
                self.0.book().queued
            }

            fn running(&self) -> usize {
                self.0.book().running
            }

            fn virtual_time(&self) -> Option<f64> {
                self.0.virtual_time()
            }
        }
    )*};
}

admin_inspect!(Fifo, Drr, Edf, Rw, StartTag, Vtc);
