//! Interposed start-time fair queueing in front of a black-box server with D issue slots
//! (Jin, Chase & Kaur, SIGMETRICS '04 §3): Min-SFQ(D), SFQ(D) and FSFQ(D). The D slots are
//! the scheduler's workers; a completion frees a slot and the executor asks again.
//!
//! All three tag each request by Eq. 2–3, `S = max(v(A), F_prev)`, `F = S + c/φ`, with
//! `v(A)` read at the request's arrival, and dispatch the smallest start tag. They differ in
//! the virtual time:
//! - Min-SFQ(D) (§3.1): the smallest start tag of any outstanding (queued or dispatched)
//!   request. Kept to show its flaw: a flow that keeps one request outstanding holds v back.
//! - SFQ(D) (§3.2): the start tag of the last dispatched request.
//! - FSFQ(D) (§3.3): SFQ(D)'s v plus an adjusted v̄, the smallest adjusted start tag S̄ of the
//!   outstanding requests (the Min-SFQ(D) analogue); four tags by Eq. 23–27, ties on S broken
//!   by S̄, so a flow that arrives "slightly late" goes ahead of flows holding its slots.
//!
//! When nothing is outstanding (end of a busy period), v and v̄ are the largest finish tag
//! dispatched so far (§2.3, §3.3).
//!
//! A request's tags are computed when it becomes its flow's head, from the `v(A)`, `v̄(A)`
//! recorded at arrival and the flow's previous finish tags. With known costs this equals
//! tagging at arrival; with estimated costs, retroactive and refresh corrections (2DFQ §5,
//! the same bookkeeping as 2DFQᴱ) shift the flow's previous finish tags and so reach the
//! head and every later request.

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::select::{Scan, Selector, TagKey, FEW};
use crate::tags::Charging;
use crate::types::{saturate, Decision, Dispatch, Ticket};
use crate::util::{IndexedHeap, Tag, Tag3};

/// Which virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Variant {
    MinSfq,
    Sfq,
    Fsfq,
}

/// A request's tags: start, finish, adjusted start, adjusted finish (the adjusted pair only
/// for FSFQ(D)).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Tags {
    s: f64,
    f: f64,
    sbar: f64,
    fbar: f64,
}

#[derive(Clone, Copy, Debug, Default)]
struct Flow {
    /// F(p_f^{j-1}) and F̄(p_f^{j-1}): the last dispatched request's finish tags, plus
    /// corrections. Both start at 0 (Eq. 2, 23).
    prev_f: f64,
    prev_fbar: f64,
    /// The queued head's tags.
    head: Option<Tags>,
}

/// The queued heads by start tag. Only FSFQ(D) breaks start-tag ties by S̄, in a heap; the
/// others order by `(S, id)` alone, one packed comparison per entry (equal start tags are
/// common: flows served in the same round): up to [`FEW`] flows in the scanned array 2DFQ
/// and WFQ use (the start tag in the finish tag's place), more in a heap, back to the scan
/// below `FEW / 2`. The order is strict (ties by tenant id): the form does not change the
/// choice.
enum Heads {
    Few(Scan),
    Plain(IndexedHeap<Tag>),
    Fair(IndexedHeap<Tag3>),
}

/// A start tag in the scan's order slot.
#[inline]
fn scan_key(s: f64, id: u64) -> TagKey {
    TagKey {
        start: s,
        cost: 0.0,
        finish: s,
        tie: id,
    }
}

impl Heads {
    /// The flow with the smallest key, and its start tag.
    #[inline]
    fn peek(&self) -> Option<(u32, f64)> {
        match self {
            Heads::Few(scan) => scan.first_order().map(|(t, k)| (t, k.key())),
            Heads::Plain(h) => h.peek(),
            Heads::Fair(h) => h.peek_key().map(|(t, k)| (t, k.key())),
        }
    }

    #[inline]
    fn set(&mut self, t: u32, tags: &Tags, id: u64) {
        match self {
            Heads::Few(scan) => {
                scan.set(t, scan_key(tags.s, id));
                if scan.len() > FEW {
                    self.switch_to_heap();
                }
            }
            Heads::Plain(h) => h.set(t, tags.s, id),
            Heads::Fair(h) => h.set_key(t, Tag3::new(tags.s, tags.sbar, id)),
        }
    }

    fn remove(&mut self, t: u32) {
        match self {
            Heads::Few(scan) => scan.remove(t),
            Heads::Plain(h) => {
                h.remove(t);
                if h.len() < FEW / 2 {
                    self.switch_to_scan();
                }
            }
            Heads::Fair(h) => h.remove(t),
        }
    }

    #[cold]
    fn switch_to_heap(&mut self) {
        if let Heads::Few(scan) = self {
            let mut h = IndexedHeap::default();
            for (t, key) in scan.tags() {
                h.set(t, key.finish, key.tie);
            }
            *self = Heads::Plain(h);
        }
    }

    #[cold]
    fn switch_to_scan(&mut self) {
        if let Heads::Plain(h) = self {
            let mut scan = Scan::untracked();
            for (t, order) in h.iter() {
                scan.set(t, scan_key(order.key(), order.tie()));
            }
            *self = Heads::Few(scan);
        }
    }
}

pub(crate) struct StartTag<T> {
    name: &'static str,
    variant: Variant,
    workers: usize,
    book: Book<T>,
    flows: Vec<Flow>,
    /// `(v(A), v̄(A))` of each queued request, by ticket slot.
    arrived: Vec<(f64, f64)>,
    /// `(v(A), v̄(A))` of the request arriving now (set just before the book takes it).
    arrival: (f64, f64),
    /// Flows with a queued head, by (S, S̄ for FSFQ, tenant id).
    select: Heads,
    /// FSFQ(D): queued heads by S̄.
    heads_bar: IndexedHeap,
    /// Dispatched requests by ticket slot, keyed by S (Min-SFQ) or S̄ (FSFQ): with the
    /// queued heads, the minimum over outstanding requests.
    dispatched: IndexedHeap,
    /// Start tag of the last dispatched request (SFQ(D), FSFQ(D)).
    v: f64,
    /// The largest finish tag dispatched: v and v̄ after a busy period.
    max_finish: f64,
    est: Box<dyn CostEstimator>,
    charging: Charging,
    /// A completion's correction moved a flow's finish tags: its head is re-synced once in
    /// `finished`, after the estimator has seen the completion, not twice.
    resync: bool,
}

impl<T> StartTag<T> {
    pub fn new(
        name: &'static str,
        variant: Variant,
        workers: usize,
        est: Box<dyn CostEstimator>,
        charging: Charging,
        default_weight: f64,
    ) -> Self {
        StartTag {
            name,
            variant,
            workers,
            book: Book::new(default_weight),
            flows: Vec::new(),
            arrived: Vec::new(),
            arrival: (0.0, 0.0),
            select: if variant == Variant::Fsfq {
                Heads::Fair(IndexedHeap::default())
            } else {
                Heads::Few(Scan::untracked())
            },
            heads_bar: IndexedHeap::default(),
            dispatched: IndexedHeap::default(),
            v: 0.0,
            max_finish: 0.0,
            est,
            charging,
            resync: false,
        }
    }

    fn outstanding(&self) -> usize {
        self.book.queued + self.book.running
    }

    /// The smallest of the queued heads' and dispatched requests' keys.
    fn min_outstanding(&self, heads: Option<f64>) -> f64 {
        let d = self.dispatched.peek().map(|(_, k)| k);
        match (heads, d) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => self.max_finish,
        }
    }

    /// `(v(now), v̄(now))`; the second is only meaningful for FSFQ(D).
    #[inline]
    fn virtual_times(&self) -> (f64, f64) {
        if self.outstanding() == 0 {
            let idle = self.v.max(self.max_finish);
            return (idle, idle);
        }
        match self.variant {
            Variant::Sfq => (self.v, self.v),
            Variant::MinSfq => {
                let v = self.min_outstanding(self.select.peek().map(|(_, s)| s));
                (v, v)
            }
            Variant::Fsfq => (
                self.v,
                self.min_outstanding(self.heads_bar.peek().map(|(_, k)| k)),
            ),
        }
    }

    /// A busy period ended: v restarts at the largest finish tag (§2.3, §3.3).
    fn maybe_idle(&mut self) {
        if self.outstanding() == 0 {
            self.v = self.v.max(self.max_finish);
        }
    }

    /// Recompute tenant `t`'s head tags (Eq. 2–3 or 23–27) and its place in the heaps.
    fn sync(&mut self, t: u32) {
        let ti = t as usize;
        // The head's class and cost come from the tenant entry (the book keeps them there),
        // so only this policy's own arrival tags are read per slot.
        let Some((head, class, known)) = self.book.head_slot_info(t) else {
            self.flows[ti].head = None;
            self.select.remove(t);
            self.heads_bar.remove(t);
            return;
        };
        let ten = &mut self.book.tenants[ti];
        let l = known.unwrap_or_else(|| self.est.estimate(ten.id, class));
        ten.head_cost = l;
        let (va, vbar) = self.arrived[head as usize];
        let flow = &self.flows[ti];
        let tags = match self.variant {
            Variant::MinSfq | Variant::Sfq => {
                let s = va.max(flow.prev_f);
                Tags {
                    s,
                    f: saturate(s + l / ten.weight),
                    sbar: 0.0,
                    fbar: 0.0,
                }
            }
            Variant::Fsfq => {
                // Eq. 23 for a flow that arrives after v passed its last finish tag (it gets
                // the credit v − S̄ for tie-breaking), Eq. 24 otherwise.
                let base = if flow.prev_f < va {
                    flow.prev_f
                } else {
                    flow.prev_fbar
                };
                let sbar = vbar.max(base);
                let s = va.max(sbar); // Eq. 26
                Tags {
                    s,
                    f: saturate(s + l / ten.weight),
                    sbar,
                    fbar: saturate(sbar + l / ten.weight),
                }
            }
        };
        let id = ten.id.0;
        if self.flows[ti].head == Some(tags) {
            return; // most syncs (a completion with a known cost) change nothing
        }
        self.flows[ti].head = Some(tags);
        self.select.set(t, &tags, id);
        if self.variant == Variant::Fsfq {
            self.heads_bar.set(t, tags.sbar, id);
        }
    }

    /// Shift the flow's previous finish tags by a correction (retroactive or refresh);
    /// whether they moved (its head's tags are then stale until the next `sync`).
    fn shift(&mut self, t: u32, amount: f64) -> bool {
        if amount == 0.0 {
            return false;
        }
        let d = amount / self.book.tenants[t as usize].weight;
        let flow = &mut self.flows[t as usize];
        flow.prev_f = saturate(flow.prev_f + d);
        flow.prev_fbar = saturate(flow.prev_fbar + d);
        true
    }

    /// Room for flow `t` and ticket slot `slot` (growing is rare: out of line).
    #[inline]
    fn ensure(&mut self, t: u32, slot: u32) {
        if t as usize >= self.flows.len() || slot as usize >= self.arrived.len() {
            self.grow(t, slot);
        }
    }

    #[cold]
    fn grow(&mut self, t: u32, slot: u32) {
        if t as usize >= self.flows.len() {
            self.flows.resize(t as usize + 1, Flow::default());
        }
        if slot as usize >= self.arrived.len() {
            self.arrived.resize(slot as usize + 1, (0.0, 0.0));
        }
    }
}

impl<T> Queue<T> for StartTag<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    queue_parts!();

    fn arriving(&mut self) {
        self.arrival = self.virtual_times(); // v(A), v̄(A) at the request's arrival
    }

    fn queued(&mut self, ticket: Ticket, t: u32, was_empty: bool, _: f64) {
        self.ensure(t, ticket.slot());
        self.arrived[ticket.slot() as usize] = self.arrival;
        if was_empty {
            self.sync(t);
        }
    }

    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        let Some((t, _)) = self.select.peek() else {
            return Decision::Empty;
        };
        let tags = self.flows[t as usize]
            .head
            .expect("a selectable flow has head tags");
        let ten = &self.book.tenants[t as usize];
        let (l, id) = (ten.head_cost, ten.id.0);
        if self.variant != Variant::MinSfq {
            self.v = self.v.max(tags.s);
        }
        self.max_finish = self.max_finish.max(tags.f);
        let flow = &mut self.flows[t as usize];
        flow.prev_f = tags.f;
        flow.prev_fbar = tags.fbar;
        let (ticket, request) = self.book.start_head(t, l);
        match self.variant {
            Variant::MinSfq => self.dispatched.set(ticket.slot(), tags.s, id),
            Variant::Fsfq => self.dispatched.set(ticket.slot(), tags.sbar, id),
            Variant::Sfq => {}
        }
        self.sync(t);
        Decision::Run(Dispatch {
            ticket,
            request,
            charged: l,
        })
    }

    fn refresh(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.refresh {
            let excess = self.book.refresh_charge(ticket, used);
            if self.shift(t, excess) {
                self.sync(t);
            }
        }
    }

    fn settle(&mut self, ticket: Ticket, t: u32, used: f64) {
        if self.charging.retroactive {
            // Nothing reads the head's tags before `finished`, which syncs them.
            let owed = self.book.settle(ticket, used);
            self.resync |= self.shift(t, owed);
        }
        if self.variant != Variant::Sfq {
            // Only Min-SFQ(D) and FSFQ(D) keep dispatched requests.
            self.dispatched.remove(ticket.slot());
        }
    }

    fn finished(&mut self, t: u32, _: f64) {
        // A correction in `settle` moved the tags, or the head's estimate may have changed
        // (a head with a known cost keeps its estimate).
        if std::mem::take(&mut self.resync) || matches!(self.book.head_info(t), Some((_, None))) {
            self.sync(t);
        }
        self.maybe_idle();
    }

    fn cancelled(&mut self, t: u32, was_head: bool) {
        if was_head {
            self.sync(t);
        }
        self.maybe_idle();
    }

    fn weight_changed(&mut self, t: u32, _: f64, _: f64) {
        self.ensure(t, 0);
        self.sync(t);
    }

    fn removed(&mut self, t: u32) {
        self.select.remove(t);
        self.heads_bar.remove(t);
        if let Some(f) = self.flows.get_mut(t as usize) {
            *f = Flow::default();
        }
    }

    fn view(&self, t: u32) -> (bool, f64) {
        let ten = &self.book.tenants[t as usize];
        let flow = self.flows.get(t as usize).copied().unwrap_or_default();
        (
            ten.queued + ten.running > 0,
            flow.head.map_or(flow.prev_f, |h| h.s),
        )
    }

    fn virtual_time(&self) -> Option<f64> {
        Some(self.virtual_times().0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::util::proptest_cases(1000))]

        /// SFQ(D)'s heads, a scan while few flows have a head and a heap above, choose as
        /// one heap by `(S, id)` does (the reference, today's form before the scan), with
        /// the same start tag, through switches both ways.
        #[test]
        fn heads_choose_like_one_heap(
            flows in prop_oneof![Just(12u8), Just(48u8)],
            ops in prop::collection::vec((0u8..48, -20i8..40, 0u8..3), 1..600),
        ) {
            let mut heads = Heads::Few(Scan::untracked());
            let mut reference: IndexedHeap<Tag> = IndexedHeap::default();
            for (t, s, what) in ops {
                let t = u32::from(t % flows);
                // Ids collide in their order with slots: ties are broken by id, not slot.
                let id = u64::from(t % 7) * 1000 + u64::from(t);
                if what == 0 {
                    heads.remove(t);
                    reference.remove(t);
                } else {
                    let s = f64::from(s) / 2.0; // small halves: equal start tags are frequent
                    let tags = Tags { s, f: s + 1.0, sbar: 0.0, fbar: 0.0 };
                    heads.set(t, &tags, id);
                    reference.set(t, s, id);
                }
                prop_assert_eq!(heads.peek(), reference.peek());
                match &heads {
                    Heads::Few(scan) => {
                        prop_assert_eq!(scan.len(), reference.len());
                        prop_assert!(scan.len() <= FEW);
                    }
                    Heads::Plain(h) => {
                        prop_assert_eq!(h.len(), reference.len());
                        prop_assert!(h.len() >= FEW / 2);
                    }
                    Heads::Fair(_) => prop_assert!(false, "SFQ(D) never uses the S̄ heap"),
                }
            }
        }
    }
}
