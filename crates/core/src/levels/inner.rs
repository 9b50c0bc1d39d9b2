//! A level's fair scheduler. The virtual-time presets (WFQ, WF²Q, 2DFQ, with or without
//! estimates) are held by value, so that the level calls straight into them: no second
//! dynamic call per operation, and the request and decision are not repacked across one.
//! Every other preset is boxed, as a flat scheduler is.

use crate::scheduler::{Admin, Inspect, Scheduler, TenantView};
use crate::select::{Eligible, MinFinish, Staggered};
use crate::tags::TagScheduler;
use crate::types::{Decision, Error, Request, TenantId, Ticket};

/// A level's fair scheduler, as [`Config::build_inner`](crate::Config) builds it.
pub(crate) enum Inner<T> {
    /// WFQ.
    Wfq(TagScheduler<T, MinFinish>),
    /// WF²Q.
    Wf2q(TagScheduler<T, Eligible>),
    /// 2DFQ.
    TwoDfq(TagScheduler<T, Staggered>),
    /// Any other.
    Boxed(Box<dyn Scheduler<T> + Send>),
}

/// `$body` with `$s` bound to the scheduler inside `$inner`, whatever its kind.
macro_rules! each {
    ($inner:expr, $s:ident => $body:expr) => {
        match $inner {
            Inner::Wfq($s) => $body,
            Inner::Wf2q($s) => $body,
            Inner::TwoDfq($s) => $body,
            Inner::Boxed($s) => $body,
        }
    };
}

impl<T: Send + 'static> Inner<T> {
    /// Behind the seam, as a flat scheduler is used.
    pub fn boxed(self) -> Box<dyn Scheduler<T> + Send> {
        match self {
            Inner::Wfq(s) => Box::new(s),
            Inner::Wf2q(s) => Box::new(s),
            Inner::TwoDfq(s) => Box::new(s),
            Inner::Boxed(s) => s,
        }
    }
}

impl<T: Send> Scheduler<T> for Inner<T> {
    #[inline]
    fn enqueue(&mut self, request: Request<T>, now: f64) -> Result<Ticket, Error> {
        each!(self, s => s.enqueue(request, now))
    }

    #[inline]
    fn dequeue(&mut self, worker: usize, now: f64) -> Result<Decision<T>, Error> {
        each!(self, s => s.dequeue(worker, now))
    }

    fn progress(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        each!(self, s => s.progress(ticket, used, now))
    }

    #[inline]
    fn complete(&mut self, ticket: Ticket, used: f64, now: f64) -> Result<(), Error> {
        each!(self, s => s.complete(ticket, used, now))
    }

    fn cancel(&mut self, ticket: Ticket, now: f64) -> Result<Request<T>, Error> {
        each!(self, s => s.cancel(ticket, now))
    }
}

impl<T: Send> Admin for Inner<T> {
    fn set_workers(&mut self, workers: usize) -> Result<(), Error> {
        each!(self, s => s.set_workers(workers))
    }

    fn set_weight(&mut self, tenant: TenantId, weight: f64, now: f64) -> Result<(), Error> {
        each!(self, s => s.set_weight(tenant, weight, now))
    }

    fn set_target(&mut self, tenant: TenantId, target: Option<f64>, now: f64) -> Result<(), Error> {
        each!(self, s => s.set_target(tenant, target, now))
    }

    fn remove_tenant(&mut self, tenant: TenantId) -> Result<(), Error> {
        each!(self, s => s.remove_tenant(tenant))
    }
}

impl<T: Send> Inspect for Inner<T> {
    fn name(&self) -> &'static str {
        each!(self, s => s.name())
    }

    fn workers(&self) -> usize {
        each!(self, s => s.workers())
    }

    fn requires_cost(&self) -> bool {
        each!(self, s => s.requires_cost())
    }

    fn tenant(&self, tenant: TenantId) -> Option<TenantView> {
        each!(self, s => s.tenant(tenant))
    }

    fn queued(&self) -> usize {
        each!(self, s => s.queued())
    }

    fn running(&self) -> usize {
        each!(self, s => s.running())
    }

    fn virtual_time(&self) -> Option<f64> {
        each!(self, s => s.virtual_time())
    }
}
