//! Bookkeeping shared by every scheduler: the tenant table, per-tenant FIFO queues, and the
//! request slots behind tickets. Policies differ only in which tenant they pick and how they
//! charge it; everything here is the same for all of them.
//!
//! Laid out for the hot path: a tenant's queue is a doubly linked list threaded
//! through the request slots (no per-tenant allocation, no tombstones: a cancelled request
//! is unlinked in O(1)), and small tenant ids, the common case, find their tenant through a
//! dense table instead of a hash.

use crate::types::{check_cost, check_weight, ClassId, Error, Request, TenantId, Ticket};
use crate::util::FxHashMap;

/// One tenant's state. Fields a policy does not use stay at their defaults.
#[derive(Debug)]
pub(crate) struct Tenant {
    pub id: TenantId,
    pub weight: f64,
    /// First and last queued slot (arrival order, linked through [`Slot::next`]), or
    /// [`NIL`].
    first: u32,
    last: u32,
    /// The head request's class and known cost (meaningful while `first != NIL`): kept here
    /// so that choosing a tenant's next charge reads no slot. The head slot was queued long
    /// ago; in a large simulation reading it is a cache miss on every dispatch.
    head_class: ClassId,
    head_known: Option<f64>,
    pub queued: usize,
    pub running: usize,
    /// Member of the active set A (2DFQ Fig. 7).
    pub active: bool,
    /// Virtual start tag S_f of the tenant's next request.
    pub start: f64,
    /// Charge for the head request (known cost or estimate), set when it became head.
    pub head_cost: f64,
    /// `head_cost / weight`, where a policy keeps it (the virtual-time schedulers).
    pub head_step: f64,
    /// DRR's deficit counter.
    pub deficit: f64,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum State {
    Free,
    Queued,
    Running,
}

/// No slot: the end of a tenant's queue.
const NIL: u32 = u32::MAX;

/// Tenant ids below this always use the dense table, however few tenants there are.
const DENSE_MIN: u64 = 1024;

/// One request's slot.
#[derive(Debug)]
pub(crate) struct Slot<T> {
    pub generation: u32,
    pub tenant: u32,
    /// Neighbours in the tenant's queue while queued ([`NIL`] at the ends). `prev` is
    /// meaningful only while the slot is not its tenant's head: a slot that becomes head is
    /// not written to (see [`Tenant::head_class`]), so its `prev` may be stale.
    prev: u32,
    next: u32,
    pub class: ClassId,
    /// The class of the request at `next` (meaningful while `next != NIL`), handed to the
    /// tenant when this slot leaves the head.
    next_class: ClassId,
    pub state: State,
    pub cost: Option<f64>,
    /// The known cost of the request at `next`, NaN for none (costs are never NaN): eight
    /// bytes instead of an `Option`'s sixteen.
    next_known: f64,
    pub payload: Option<T>,
    /// What the tenant was charged at dispatch.
    pub charged: f64,
    /// Prepaid credit not yet consumed (Fig. 7's c_f^j).
    pub credit: f64,
    /// Cumulative usage already applied to charging.
    pub accounted: f64,
    /// Cumulative usage already applied to the virtual clock.
    pub clocked: f64,
}

impl<T> Slot<T> {
    /// The slot's request, for `tenant`, taking its payload (a queued slot holds one).
    fn take_request(&mut self, tenant: TenantId) -> Request<T> {
        Request {
            tenant,
            class: self.class,
            cost: self.cost,
            payload: self.payload.take().expect("queued slot holds its payload"),
            level: crate::types::LevelId::CATCH_ALL,
            distinguisher: 0,
        }
    }
}

/// Tenants, queues and slots.
#[derive(Debug)]
pub(crate) struct Book<T> {
    pub tenants: Vec<Tenant>,
    /// Tenant index by id for ids below `dense.len()` (`NIL`: none).
    dense: Vec<u32>,
    /// Tenant index by id for the ids at or above `dense.len()`.
    index: FxHashMap<TenantId, u32>,
    free_tenants: Vec<u32>,
    pub slots: Vec<Slot<T>>,
    free_slots: Vec<u32>,
    pub default_weight: f64,
    pub queued: usize,
    pub running: usize,
    /// Latest `now` seen: time never goes backwards inside a scheduler.
    pub now: f64,
    /// A queue policy's (requires cost, estimator learns), asked once by
    /// [`Queued`](crate::queued::Queued): both are fixed at construction, and asking is two
    /// dynamic calls per request.
    pub policy_flags: Option<(bool, bool)>,
}

impl<T> Book<T> {
    pub fn new(default_weight: f64) -> Self {
        Book {
            tenants: Vec::new(),
            dense: Vec::new(),
            index: FxHashMap::default(),
            free_tenants: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            default_weight,
            queued: 0,
            running: 0,
            now: f64::NEG_INFINITY,
            policy_flags: None,
        }
    }

    /// Validate `now` and make it monotone.
    #[inline]
    pub fn observe(&mut self, now: f64) -> Result<f64, Error> {
        if !now.is_finite() {
            return Err(Error::InvalidTime(now));
        }
        if now > self.now {
            self.now = now;
        }
        Ok(self.now)
    }

    #[inline]
    pub fn lookup(&self, id: TenantId) -> Option<u32> {
        match self.dense.get(id.0 as usize) {
            Some(&t) if id.0 < self.dense.len() as u64 => (t != NIL).then_some(t),
            _ => self.index.get(&id).copied(),
        }
    }

    /// The tenant's index, creating it with the default weight if new.
    pub fn tenant_index(&mut self, id: TenantId) -> u32 {
        self.tenant_entry(id).0
    }

    /// The tenant's index, and whether this call created it.
    #[inline]
    pub fn tenant_entry(&mut self, id: TenantId) -> (u32, bool) {
        match self.lookup(id) {
            Some(t) => (t, false),
            None => (self.create_tenant(id), true),
        }
    }

    /// Record `id → t`: in the dense table if `id` is small for the number of tenants
    /// (growing it, and moving the hash's ids it now covers), else in the hash. The table
    /// stays within `4 · max(DENSE_MIN, 8 · tenants)` bytes.
    fn map_id(&mut self, id: TenantId, t: u32) {
        let len = self.dense.len() as u64;
        if id.0 >= len {
            let bound = DENSE_MIN.max(8 * self.tenants.len() as u64);
            if id.0 >= bound {
                self.index.insert(id, t);
                return;
            }
            let new_len = (id.0 + 1).next_power_of_two().max(64).min(bound);
            self.dense.resize(new_len as usize, NIL);
            let moved: Vec<TenantId> = self
                .index
                .keys()
                .copied()
                .filter(|k| k.0 < new_len)
                .collect();
            for k in moved {
                let v = self.index.remove(&k).expect("key just listed");
                self.dense[k.0 as usize] = v;
            }
        }
        self.dense[id.0 as usize] = t;
    }

    fn unmap_id(&mut self, id: TenantId) {
        if id.0 < self.dense.len() as u64 {
            self.dense[id.0 as usize] = NIL;
        } else {
            self.index.remove(&id);
        }
    }

    /// A new tenant with the default weight (kept out of line: the hot path looks up).
    #[cold]
    fn create_tenant(&mut self, id: TenantId) -> u32 {
        let fresh = Tenant {
            id,
            weight: self.default_weight,
            first: NIL,
            last: NIL,
            head_class: ClassId(0),
            head_known: None,
            queued: 0,
            running: 0,
            active: false,
            start: 0.0,
            head_cost: 0.0,
            head_step: 0.0,
            deficit: 0.0,
        };
        let t = match self.free_tenants.pop() {
            Some(t) => {
                self.tenants[t as usize] = fresh;
                t
            }
            None => {
                self.tenants.push(fresh);
                (self.tenants.len() - 1) as u32
            }
        };
        self.map_id(id, t);
        t
    }

    pub fn set_weight(&mut self, id: TenantId, weight: f64) -> Result<(u32, f64), Error> {
        check_weight(id, weight)?;
        let t = self.tenant_index(id);
        let old = std::mem::replace(&mut self.tenants[t as usize].weight, weight);
        Ok((t, old))
    }

    /// Remove an idle tenant; returns its index for the policy to clean up.
    pub fn remove_tenant(&mut self, id: TenantId) -> Result<u32, Error> {
        let t = self.lookup(id).ok_or(Error::UnknownTenant(id))?;
        let ten = &self.tenants[t as usize];
        if ten.queued > 0 || ten.running > 0 {
            return Err(Error::TenantBusy(id));
        }
        self.unmap_id(id);
        self.free_tenants.push(t);
        Ok(t)
    }

    /// Check a request's cost, then queue it (a refused request leaves no trace). Returns
    /// (ticket, tenant index, whether the tenant's queue was empty before, whether the
    /// tenant is new).
    #[inline(always)] // one caller per policy: its frame and the returned tuple in memory cost more than the code
    pub fn push(
        &mut self,
        req: Request<T>,
        require_cost: bool,
    ) -> Result<(Ticket, u32, bool, bool), Error> {
        Self::check_request(&req, require_cost)?;
        let (t, fresh) = self.tenant_entry(req.tenant);
        // A recycled slot gets only the fields a queued slot reads (`prev` below, if it is
        // not the head; the running-only ones at `start`), not a whole new struct.
        let s = match self.free_slots.pop() {
            Some(s) => {
                let slot = &mut self.slots[s as usize];
                slot.state = State::Queued;
                slot.tenant = t;
                slot.next = NIL;
                slot.class = req.class;
                slot.cost = req.cost;
                slot.payload = Some(req.payload);
                s
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    tenant: t,
                    prev: NIL,
                    next: NIL,
                    class: req.class,
                    next_class: ClassId(0),
                    state: State::Queued,
                    cost: req.cost,
                    next_known: f64::NAN,
                    payload: Some(req.payload),
                    charged: 0.0,
                    credit: 0.0,
                    accounted: 0.0,
                    clocked: 0.0,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let ticket = Ticket::new(s, self.slots[s as usize].generation);
        let ten = &mut self.tenants[t as usize];
        let was_empty = ten.queued == 0;
        let last = std::mem::replace(&mut ten.last, s);
        if last == NIL {
            ten.first = s;
            ten.head_class = req.class;
            ten.head_known = req.cost;
        } else {
            let before = &mut self.slots[last as usize];
            before.next = s;
            before.next_class = req.class;
            before.next_known = req.cost.unwrap_or(f64::NAN);
            self.slots[s as usize].prev = last;
        }
        let ten = &mut self.tenants[t as usize];
        ten.queued += 1;
        self.queued += 1;
        Ok((ticket, t, was_empty, fresh))
    }

    /// A request's cost is valid, and present if the policy needs it.
    #[inline]
    fn check_request(req: &Request<T>, require_cost: bool) -> Result<(), Error> {
        if let Some(c) = req.cost {
            check_cost("request cost", c)?;
        } else if require_cost {
            return Err(Error::CostRequired {
                tenant: req.tenant,
                class: req.class,
            });
        }
        Ok(())
    }

    /// The tenant's head request.
    #[inline]
    pub fn head(&self, t: u32) -> Option<Ticket> {
        let first = self.tenants[t as usize].first;
        (first != NIL).then(|| Ticket::new(first, self.slots[first as usize].generation))
    }

    /// The head's class and known cost (from the tenant entry: no slot is read).
    #[inline]
    pub fn head_info(&self, t: u32) -> Option<(ClassId, Option<f64>)> {
        let ten = &self.tenants[t as usize];
        (ten.first != NIL).then_some((ten.head_class, ten.head_known))
    }

    /// The head's slot index, class and known cost, from the tenant entry alone (no slot
    /// and no generation is read: for policies that keep per-slot data of their own).
    #[inline]
    pub fn head_slot_info(&self, t: u32) -> Option<(u32, ClassId, Option<f64>)> {
        let ten = &self.tenants[t as usize];
        (ten.first != NIL).then_some((ten.first, ten.head_class, ten.head_known))
    }

    /// Start the tenant's head request, charging `charged` up front.
    #[inline(always)] // one caller per policy: its frame and the returned tuple in memory cost more than the code
    pub fn start_head(&mut self, t: u32, charged: f64) -> (Ticket, Request<T>) {
        let ticket = self.head(t).expect("start_head on a tenant with a head");
        self.start(ticket, charged)
    }

    /// Take queued slot `s` out of its tenant's queue. Leaving the head touches only `s`
    /// and the tenant: the new head's class and cost come from `s`, and its stale `prev`
    /// is never read while it is head.
    #[inline(always)] // inside `start`, which is inlined: no frame of its own
    fn unlink(&mut self, s: u32) {
        let slot = &self.slots[s as usize];
        let (t, prev, next) = (slot.tenant, slot.prev, slot.next);
        let (next_class, next_known) = (slot.next_class, slot.next_known);
        let ten = &mut self.tenants[t as usize];
        if ten.first == s {
            ten.first = next;
            if next == NIL {
                ten.last = NIL;
            } else {
                ten.head_class = next_class;
                ten.head_known = (!next_known.is_nan()).then_some(next_known);
            }
        } else {
            let before = &mut self.slots[prev as usize];
            before.next = next;
            before.next_class = next_class;
            before.next_known = next_known;
            if next == NIL {
                self.tenants[t as usize].last = prev;
            } else {
                self.slots[next as usize].prev = prev;
            }
        }
    }

    /// Start a specific queued request (the head, or for FIFO the oldest of all).
    #[inline(always)] // one caller per policy: its frame and the returned tuple in memory cost more than the code
    pub fn start(&mut self, ticket: Ticket, charged: f64) -> (Ticket, Request<T>) {
        self.unlink(ticket.slot());
        let slot = &mut self.slots[ticket.slot() as usize];
        slot.state = State::Running;
        slot.charged = charged;
        slot.credit = charged;
        // The running-only fields start here, not at `push`: a queued slot never reads them.
        slot.accounted = 0.0;
        slot.clocked = 0.0;
        let t = slot.tenant;
        let req = slot.take_request(self.tenants[t as usize].id);
        let ten = &mut self.tenants[t as usize];
        ten.queued -= 1;
        ten.running += 1;
        self.queued -= 1;
        self.running += 1;
        (ticket, req)
    }

    /// The running slot behind a ticket.
    #[inline]
    pub fn running_slot(&mut self, ticket: Ticket) -> Result<&mut Slot<T>, Error> {
        let slot = self
            .slots
            .get_mut(ticket.slot() as usize)
            .filter(|s| s.generation == ticket.generation() && s.state != State::Free)
            .ok_or(Error::UnknownTicket(ticket))?;
        if slot.state != State::Running {
            return Err(Error::NotRunning(ticket));
        }
        Ok(slot)
    }

    /// Validate a cumulative usage report against a running slot.
    #[inline]
    pub fn check_usage(&mut self, ticket: Ticket, used: f64) -> Result<u32, Error> {
        check_cost("used", used)?;
        let slot = self.running_slot(ticket)?;
        if used < slot.accounted.max(slot.clocked) {
            return Err(Error::UsageDecreased {
                ticket,
                before: slot.accounted.max(slot.clocked),
                now: used,
            });
        }
        Ok(slot.tenant)
    }

    /// Release a finished request's slot. Returns the tenant index and class.
    #[inline]
    pub fn finish(&mut self, ticket: Ticket) -> (u32, ClassId) {
        let slot = &mut self.slots[ticket.slot() as usize];
        slot.state = State::Free;
        slot.generation = slot.generation.wrapping_add(1);
        let t = slot.tenant;
        let class = slot.class;
        self.free_slots.push(ticket.slot());
        self.tenants[t as usize].running -= 1;
        self.running -= 1;
        (t, class)
    }

    /// Remove a queued request. Returns it with its tenant index and whether it was the head.
    pub fn cancel(&mut self, ticket: Ticket) -> Result<(Request<T>, u32, bool), Error> {
        let slot = self
            .slots
            .get(ticket.slot() as usize)
            .filter(|s| s.generation == ticket.generation() && s.state != State::Free)
            .ok_or(Error::UnknownTicket(ticket))?;
        if slot.state == State::Running {
            return Err(Error::AlreadyRunning(ticket));
        }
        let t = slot.tenant;
        let was_head = self.tenants[t as usize].first == ticket.slot();
        self.unlink(ticket.slot());
        let slot = &mut self.slots[ticket.slot() as usize];
        slot.state = State::Free;
        slot.generation = slot.generation.wrapping_add(1);
        let req = slot.take_request(self.tenants[t as usize].id);
        self.free_slots.push(ticket.slot());
        let ten = &mut self.tenants[t as usize];
        ten.queued -= 1;
        self.queued -= 1;
        Ok((req, t, was_head))
    }
}

/// Retroactive and refresh charging (2DFQ §5), usable by every policy that charges up front.
impl<T> Book<T> {
    /// Refresh charging (Fig. 7 lines 9–16): consume prepaid credit with the usage since the
    /// last report; returns the excess the tenant must be charged now.
    #[inline]
    pub fn refresh_charge(&mut self, ticket: Ticket, used: f64) -> f64 {
        let slot = &mut self.slots[ticket.slot() as usize];
        let c = used - slot.accounted;
        slot.accounted = used;
        if c < slot.credit {
            slot.credit -= c;
            0.0
        } else {
            let excess = c - slot.credit;
            slot.credit = 0.0;
            excess
        }
    }

    /// Retroactive charging (Fig. 7 line 31): what the tenant owes (positive) or is refunded
    /// (negative) once the request's total usage is known.
    #[inline]
    pub fn settle(&self, ticket: Ticket, used: f64) -> f64 {
        let slot = &self.slots[ticket.slot() as usize];
        (used - slot.accounted) - slot.credit
    }

    /// Usage not yet applied to the virtual clock.
    #[inline]
    pub fn clock_delta(&mut self, ticket: Ticket, used: f64) -> f64 {
        let slot = &mut self.slots[ticket.slot() as usize];
        let d = used - slot.clocked;
        slot.clocked = used;
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::SplitMix;

    /// The dense table and the hash together map every live id to its tenant, whatever
    /// order ids arrive in (large ids first, then small ones that grow the table and move
    /// hashed ids into it) and after removals; queues keep arrival order through cancels.
    #[test]
    fn tenant_ids_map_through_dense_table_and_hash() {
        let mut b: Book<u64> = Book::new(1.0);
        let mut rng = SplitMix::new(5);
        let mut live: Vec<(u64, u32)> = Vec::new();
        for step in 0..4000u64 {
            let id = match rng.next_u64() % 4 {
                0 => rng.next_u64() % 50,
                1 => rng.next_u64() % 5000,
                2 => rng.next_u64() % 200_000,
                _ => rng.next_u64(),
            };
            if rng.next_u64().is_multiple_of(3) {
                if let Some(i) = live.iter().position(|&(x, _)| x == id) {
                    let (_, t) = live.swap_remove(i);
                    assert_eq!(b.remove_tenant(TenantId(id)), Ok(t), "step {step}");
                    continue;
                }
            }
            let (t, fresh) = b.tenant_entry(TenantId(id));
            match live.iter().find(|&&(x, _)| x == id) {
                Some(&(_, known)) => assert!(!fresh && t == known, "step {step}: id {id}"),
                None => {
                    assert!(fresh, "step {step}: id {id}");
                    live.push((id, t));
                }
            }
            for &(x, t) in &live {
                assert_eq!(b.lookup(TenantId(x)), Some(t), "step {step}: id {x}");
                assert_eq!(b.tenants[t as usize].id, TenantId(x));
            }
        }
        assert!(b.dense.len() as u64 <= DENSE_MIN.max(8 * b.tenants.len() as u64));
    }

    /// The head's class and cost kept in the tenant entry (and the successor's in each slot)
    /// always equal the head slot's own, through random pushes, head starts, FIFO-style
    /// starts and cancels anywhere in the queue; queues keep arrival order.
    #[test]
    fn cached_head_info_matches_the_head_slot() {
        use std::collections::VecDeque;
        let mut b: Book<u64> = Book::new(1.0);
        let mut rng = SplitMix::new(23);
        let mut model: Vec<VecDeque<(Ticket, u64)>> = vec![VecDeque::new(); 4];
        for step in 0..20_000u64 {
            let k = (rng.next_u64() % 4) as usize;
            match rng.next_u64() % 5 {
                0 | 1 => {
                    let cost = match rng.next_u64() % 3 {
                        0 => None,
                        c => Some(c as f64),
                    };
                    let class = (rng.next_u64() % 3) as u32;
                    let req = Request::new(k as u64, class, step);
                    let req = match cost {
                        Some(c) => req.with_cost(c),
                        None => req,
                    };
                    let (ticket, _, was_empty, _) = b.push(req, false).unwrap();
                    assert_eq!(was_empty, model[k].is_empty(), "step {step}");
                    model[k].push_back((ticket, step));
                }
                2 => {
                    if let Some(t) = b.lookup(TenantId(k as u64)) {
                        if let Some((ticket, p)) = model[k].pop_front() {
                            let (got, req) = b.start_head(t, 1.0);
                            assert_eq!((got, req.payload), (ticket, p), "step {step}");
                        }
                    }
                }
                3 => {
                    if let Some((ticket, p)) = model[k].pop_front() {
                        assert_eq!(b.start(ticket, 1.0).1.payload, p, "step {step}");
                    }
                }
                _ => {
                    if !model[k].is_empty() {
                        let i = (rng.next_u64() % model[k].len() as u64) as usize;
                        let (ticket, p) = model[k].remove(i).unwrap();
                        let (req, _, was_head) = b.cancel(ticket).unwrap();
                        assert_eq!((req.payload, was_head), (p, i == 0), "step {step}");
                    }
                }
            }
            for (k, q) in model.iter().enumerate() {
                let Some(t) = b.lookup(TenantId(k as u64)) else {
                    continue;
                };
                let expect = q.front().map(|&(ticket, _)| {
                    let s = &b.slots[ticket.slot() as usize];
                    (s.class, s.cost)
                });
                assert_eq!(b.head_info(t), expect, "step {step}: tenant {k}");
                assert_eq!(
                    b.head(t),
                    q.front().map(|&(ticket, _)| ticket),
                    "step {step}"
                );
                assert_eq!(b.tenants[t as usize].queued, q.len(), "step {step}");
            }
        }
    }

    #[test]
    fn queues_keep_arrival_order_through_cancels() {
        let mut b: Book<u64> = Book::new(1.0);
        let tickets: Vec<Ticket> = (0..6)
            .map(|i| b.push(Request::new(7u64, 0u32, i), false).unwrap().0)
            .collect();
        let (t, _) = b.tenant_entry(TenantId(7));
        // Cancel the head, a middle one and the tail.
        for i in [0, 3, 5] {
            let (req, _, was_head) = b.cancel(tickets[i]).unwrap();
            assert_eq!(req.payload, i as u64);
            assert_eq!(was_head, i == 0);
        }
        let mut order = Vec::new();
        while b.head(t).is_some() {
            order.push(b.start_head(t, 1.0).1.payload);
        }
        assert_eq!(order, vec![1, 2, 4]);
        assert_eq!(b.tenants[t as usize].queued, 0);
        assert_eq!(b.running, 3);
        assert!(matches!(b.cancel(tickets[0]), Err(Error::UnknownTicket(_))));
    }
}
