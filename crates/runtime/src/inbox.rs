//! The pool's inbox: how `submit` hands a task over without taking the scheduler's lock.
//!
//! Every submit used to take the lock the workers dequeue under and write the scheduler's
//! lines (the tenant's entry, the book's slot, 2DFQ's lane arrays), which the next dequeue
//! then fetched from the submitting thread's cache. Now a submit of unknown cost appends the
//! task here under a lock of its own, held for one push; whoever next takes the scheduler's
//! lock (a worker about to dequeue, `cancel`, `metrics`, …) first moves every arrival into
//! the scheduler, in arrival order and at its submission time, so each dispatch decision
//! still sees every task submitted before it.
//!
//! The queue caps stay exact without the scheduler's counts: the inbox keeps, per tenant and
//! in total, an upper bound of the queued tasks (the exact count at the last locked submit
//! plus every task accepted here since; dispatches only lower the truth). A submit whose
//! bounds are below the caps is certainly within them; otherwise it takes the locked path,
//! which counts exactly and renews the bounds.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use fairlane_core::{ClassId, TenantId};

use crate::pool::Job;
use crate::stats::IdHasher;

/// A task accepted by `submit`, not yet in the scheduler.
pub(crate) struct Arrival {
    pub tenant: TenantId,
    pub class: ClassId,
    /// The task; its `submitted` is the scheduler's `now` for the enqueue.
    pub job: Job,
}

/// Why [`Inbox::push`] handed the arrival back.
pub(crate) enum Refused {
    /// The pool is shutting down.
    Closed(Arrival),
    /// A bound reached a cap: only the locked path can tell whether the task fits.
    Count(Arrival),
}

/// What the inbox's lock guards.
pub(crate) struct Items {
    /// Arrivals in submission order.
    pub list: Vec<Arrival>,
    closed: bool,
    /// Upper bound of the tasks queued over all tenants (inbox included).
    total: usize,
    /// Upper bound of each tenant's queued tasks (inbox included).
    tenants: HashMap<TenantId, usize, BuildHasherDefault<IdHasher>>,
}

impl Items {
    /// Renew the bounds from exact counts (the caller holds the scheduler's lock and has
    /// just moved every arrival into it).
    pub fn renew(&mut self, tenant: TenantId, tenant_queued: usize, total_queued: usize) {
        self.total = total_queued;
        self.tenants.insert(tenant, tenant_queued);
    }

    /// Count a task the locked path enqueued.
    pub fn accepted(&mut self, tenant: TenantId) {
        self.total += 1;
        *self.tenants.entry(tenant).or_insert(0) += 1;
    }

    /// Whether [`Inbox::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

/// Submitted tasks on their way to the scheduler.
pub(crate) struct Inbox {
    items: Mutex<Items>,
    /// Whether `list` may be non-empty: read without the lock by every dequeue, so an empty
    /// inbox costs one load. Set (sequentially consistent) after a push, cleared by
    /// [`take`](Inbox::take); see `pool.rs` for the wake-up protocol it is one half of.
    pending: AtomicBool,
}

impl Inbox {
    pub fn new() -> Self {
        Inbox {
            items: Mutex::new(Items {
                list: Vec::new(),
                closed: false,
                total: 0,
                tenants: HashMap::default(),
            }),
            pending: AtomicBool::new(false),
        }
    }

    pub fn lock(&self) -> MutexGuard<'_, Items> {
        self.items.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether an arrival may be waiting (a sequentially consistent load).
    pub fn pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// Accept `a` if the pool is open and its bounds are below the caps.
    pub fn push(&self, a: Arrival, max_queued: usize, max_per_tenant: usize) -> Result<(), Refused> {
        let mut items = self.lock();
        if items.closed {
            return Err(Refused::Closed(a));
        }
        if items.total >= max_queued {
            return Err(Refused::Count(a));
        }
        let bound = items.tenants.entry(a.tenant).or_insert(0);
        if *bound >= max_per_tenant {
            return Err(Refused::Count(a));
        }
        *bound += 1;
        items.total += 1;
        items.list.push(a);
        self.pending.store(true, Ordering::SeqCst);
        Ok(())
    }

    /// Swap the arrivals into `into` (an empty buffer, whose capacity the inbox reuses).
    pub fn take(&self, items: &mut Items, into: &mut Vec<Arrival>) {
        std::mem::swap(&mut items.list, into);
        self.pending.store(false, Ordering::SeqCst);
    }

    /// Refuse every later push.
    pub fn close(&self) {
        self.lock().closed = true;
    }
}
