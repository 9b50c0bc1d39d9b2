//! The Virtual Token Counter (Sheng et al., *Fairness in Serving Large Language Models*,
//! OSDI '24, Algorithm 2; the authors' artifact `Ying1123/VTC-artifact`,
//! `slora/server/router/vtc_req_queue.py`), its weighted variant (§4.3), its
//! length-predicting variant (§4.4, `vtc_pred_len_req_queue.py`) and the paper's LCF
//! baseline (VTC without the counter lift, `lcf_req_queue.py`).
//!
//! Each tenant (the paper's client) has a counter `c` of the service it received, in the
//! executor's usage unit divided by its weight φ. Dispatch picks the backlogged tenant
//! (one with queued requests: the paper's queue `Q`) with the smallest counter, ties to the
//! lower id, and serves its oldest request. A tenant that becomes backlogged is lifted to
//! the smallest counter among the backlogged tenants, so idling banks no credit (§4.1).
//!
//! # Units through the seam
//!
//! The counter counts whatever the executor reports, so the paper's cost function `h`
//! (§4.2: the linear `w_p·n_p + w_q·n_q`, or any monotone `h`) lives in the executor, which
//! knows the token counts. [`TokenCost`] is the linear one for executors to share:
//!
//! * `Request::cost` is the part of the cost known at admission: `w_p · input tokens`
//!   (a gateway counts or estimates the prompt). It is charged at dispatch, before the
//!   next dispatch, so one admission round does not hand every slot to one tenant (the
//!   paper's footnote 5). A request without a cost is charged nothing up front.
//! * `progress(used)` and `complete(used)` report the request's **cumulative** cost so far,
//!   prompt included: `w_p · input + w_q · output tokens so far`. What exceeds the amount
//!   charged at dispatch is charged as it is reported: each generated token as it is
//!   produced (Algorithm 2, line 30). At completion the total is reconciled: a prompt
//!   estimate that was too high, or a predicted output that was not generated, is refunded.
//!
//! With the length predictor (`vtce`, the artifact's `vtc_len_predict`), dispatch charges the
//! known cost plus the tenant's predicted remainder (the estimator's value for the tenant
//! and class, learned from `used − cost` at each completion); reported usage is charged only
//! beyond that, and completion refunds an over-prediction. The artifact's predictor is an
//! EMA over the tenant's last outputs with weight 1/5 that starts at 0 and takes the first
//! observation as it is: `EstimatorKind::Ema { alpha: 0.8, initial: 0.0 }`.
//!
//! # The lift when nobody is backlogged
//!
//! The paper (Algorithm 2, lines 8–10) lifts a newly backlogged tenant to the counter of the
//! tenant that last left `Q` when `Q` is empty; the artifact does not lift at all then
//! (`vtc_req_queue.py`, `append`: only `min` over the other backlogged clients). [`Lift`]
//! chooses; the presets follow the paper.

use crate::book::Book;
use crate::estimate::{CostEstimator, Oracle};
use crate::queued::Queue;
use crate::types::{saturate, Decision, Dispatch, Error, Ticket};
use crate::util::IndexedHeap;

/// How a tenant's counter is lifted when it becomes backlogged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Lift {
    /// The paper's Algorithm 2: to the smallest counter among the backlogged tenants, or,
    /// when none is backlogged, to the current counter of the tenant that last left the
    /// backlogged set (by dispatch of its last queued request or a cancellation).
    #[default]
    Paper,
    /// The artifact (`vtc_req_queue.py`): to the smallest counter among the backlogged
    /// tenants; no lift when none is backlogged.
    Artifact,
    /// No lift: Least Counter First, the paper's LCF baseline (§5.1). A new tenant starts
    /// at 0 and is served until it catches up.
    Never,
}

/// The linear service function of the paper (§3.1): `w_p · input + w_q · output` tokens.
/// Executors (the simulator's LLM server, the proxy) turn token counts into the costs they
/// report through the seam with it; see the module documentation of the unit convention.
///
/// ```
/// use fairlane_core::TokenCost;
/// let h = TokenCost::PAPER; // w_p = 1, w_q = 2 (OpenAI's prices, §5.1)
/// assert_eq!(h.charge(256, 0), 256.0); // what VTC charges at dispatch
/// assert_eq!(h.charge(256, 10), 276.0); // cumulative usage after 10 output tokens
/// // Theorem 4.4: 2·max(w_p·L_input, w_q·M) for prompts up to 256 and a 10,000-token pool.
/// assert_eq!(h.bound(256, 10_000), 40_000.0);
/// assert!(TokenCost::new(f64::NAN, 1.0).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenCost {
    /// `w_p`: the cost of one input (prompt) token.
    pub input_weight: f64,
    /// `w_q`: the cost of one output (generated) token.
    pub output_weight: f64,
}

impl TokenCost {
    /// The paper's weights, `w_p = 1`, `w_q = 2` (§5.1, after OpenAI's prices).
    pub const PAPER: TokenCost = TokenCost {
        input_weight: 1.0,
        output_weight: 2.0,
    };

    /// The largest token weight: `u64::MAX` tokens times it stays far from overflow.
    pub const MAX_WEIGHT: f64 = 1e6;

    /// Weights `w_p`, `w_q`, each finite and in [0, [`TokenCost::MAX_WEIGHT`]].
    pub fn new(input_weight: f64, output_weight: f64) -> Result<Self, Error> {
        let check = |field, w: f64| {
            if (0.0..=Self::MAX_WEIGHT).contains(&w) {
                Ok(w)
            } else {
                Err(Error::InvalidConfig {
                    field,
                    reason: format!("must be in [0, {:e}], got {w}", Self::MAX_WEIGHT),
                })
            }
        };
        Ok(TokenCost {
            input_weight: check("input_token_weight", input_weight)?,
            output_weight: check("output_token_weight", output_weight)?,
        })
    }

    /// `w_p · input + w_q · output`: finite for any token counts.
    #[inline]
    pub fn charge(&self, input: u64, output: u64) -> f64 {
        self.input_weight * input as f64 + self.output_weight * output as f64
    }

    /// Theorem 4.4's bound on the service difference between two backlogged tenants of
    /// equal weight over any interval: `2·max(w_p·L_input, w_q·M)`, where `max_input` is
    /// the longest prompt and `kv_tokens` (M) the tokens the running batch holds.
    pub fn bound(&self, max_input: u64, kv_tokens: u64) -> f64 {
        2.0 * (self.input_weight * max_input as f64).max(self.output_weight * kv_tokens as f64)
    }
}

/// Who last left the backlogged set, for [`Lift::Paper`].
#[derive(Clone, Copy, Debug, PartialEq)]
enum LastLeft {
    Nobody,
    /// A live tenant (by index): its counter now.
    Tenant(u32),
    /// A tenant since removed: its counter when it was removed.
    Value(f64),
}

pub(crate) struct Vtc<T> {
    name: &'static str,
    workers: usize,
    book: Book<T>,
    /// What the shared bookkeeping calls the estimator: it must never learn (the predictor
    /// learns output remainders, not the totals the bookkeeping would feed it).
    oracle: Box<dyn CostEstimator>,
    /// The length predictor (§4.4), if any: the expected `used − cost` of a request.
    predictor: Option<Box<dyn CostEstimator>>,
    lift: Lift,
    /// Per tenant index: the counter `c`.
    counter: Vec<f64>,
    /// Backlogged tenants by `(key, id)`, where a tenant's key is at most its counter: a
    /// charge, the hot path (every generated token), only raises a counter and leaves the
    /// key as it was; a refund lowers both. The smallest key whose counter equals it is the
    /// smallest counter (every other counter is at least its own key, which is at least
    /// this one, ties by id), so a query re-keys stale keys from the top until one holds.
    backlogged: IndexedHeap,
    last_left: LastLeft,
}

impl<T> Vtc<T> {
    /// VTC over `workers` slots; `est` is the length predictor unless it is the oracle.
    pub fn new(
        workers: usize,
        est: Box<dyn CostEstimator>,
        default_weight: f64,
        lift: Lift,
    ) -> Self {
        let predictor = (!est.requires_known_cost()).then_some(est);
        let name = match (lift, predictor.is_some()) {
            (Lift::Never, false) => "lcf",
            (Lift::Never, true) => "lcfe",
            (_, false) => "vtc",
            (_, true) => "vtce",
        };
        Vtc {
            name,
            workers,
            book: Book::new(default_weight),
            oracle: Box::new(Oracle),
            predictor,
            lift,
            counter: Vec::new(),
            backlogged: IndexedHeap::default(),
            last_left: LastLeft::Nobody,
        }
    }

    /// Add `amount` (may be negative: a refund) to tenant `t`'s counter, divided by its
    /// weight. A backlogged tenant whose counter went down is re-keyed at once.
    #[inline]
    fn charge(&mut self, t: u32, amount: f64) {
        let ten = &self.book.tenants[t as usize];
        let c = &mut self.counter[t as usize];
        let old = *c;
        *c = saturate(old + amount / ten.weight);
        if *c < old && ten.queued > 0 {
            self.backlogged.set(t, *c, ten.id.0);
        }
    }

    /// The backlogged tenant with the smallest counter, and that counter.
    #[inline]
    fn smallest(&mut self) -> Option<(u32, f64)> {
        loop {
            let (t, key) = self.backlogged.peek()?;
            let c = self.counter[t as usize];
            if c == key {
                return Some((t, c));
            }
            self.backlogged
                .set(t, c, self.book.tenants[t as usize].id.0);
        }
    }

    /// Tenant `t` is becoming backlogged (it is not in the heap yet): Algorithm 2, lines 5–13.
    fn lift(&mut self, t: u32) {
        let floor = match (self.lift, self.smallest()) {
            (Lift::Never, _) => None,
            (_, Some((_, min))) => Some(min),
            (Lift::Artifact, None) => None,
            (Lift::Paper, None) => match self.last_left {
                LastLeft::Nobody => None,
                LastLeft::Tenant(l) => Some(self.counter[l as usize]),
                LastLeft::Value(v) => Some(v),
            },
        };
        if let Some(f) = floor {
            let c = &mut self.counter[t as usize];
            *c = c.max(f);
        }
    }

    /// Tenant `t`'s queue emptied: it leaves the backlogged set.
    fn left(&mut self, t: u32) {
        self.backlogged.remove(t);
        self.last_left = LastLeft::Tenant(t);
    }
}

impl<T> Queue<T> for Vtc<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    fn book(&self) -> &Book<T> {
        &self.book
    }
    fn book_mut(&mut self) -> &mut Book<T> {
        &mut self.book
    }
    fn est(&mut self) -> &mut dyn CostEstimator {
        &mut *self.oracle
    }
    fn est_ref(&self) -> &dyn CostEstimator {
        &*self.oracle
    }
    fn workers_mut(&mut self) -> &mut usize {
        &mut self.workers
    }
    fn workers(&self) -> usize {
        self.workers
    }
    fn requires_cost(&self) -> bool {
        false // an unknown cost is charged as it is reported
    }

    fn joined(&mut self, t: u32) {
        let i = t as usize;
        if i >= self.counter.len() {
            self.counter.resize(i + 1, 0.0);
        }
        self.counter[i] = 0.0;
    }

    fn queued(&mut self, _: Ticket, t: u32, was_empty: bool, _: f64) {
        if was_empty {
            self.lift(t);
            let id = self.book.tenants[t as usize].id.0;
            self.backlogged.set(t, self.counter[t as usize], id);
        }
    }

    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        let Some((t, _)) = self.smallest() else {
            return Decision::Empty;
        };
        let (class, known) = self
            .book
            .head_info(t)
            .expect("a backlogged tenant has a head");
        let predicted = match &self.predictor {
            Some(p) => p.estimate(self.book.tenants[t as usize].id, class),
            None => 0.0,
        };
        let charged = (known.unwrap_or(0.0) + predicted).min(f64::MAX);
        let (ticket, request) = self.book.start_head(t, charged);
        if self.book.tenants[t as usize].queued == 0 {
            self.left(t);
        }
        self.charge(t, charged);
        Decision::Run(Dispatch {
            ticket,
            request,
            charged,
        })
    }

    fn refresh(&mut self, ticket: Ticket, t: u32, used: f64) {
        let excess = self.book.refresh_charge(ticket, used);
        if excess != 0.0 {
            self.charge(t, excess);
        }
    }

    fn settle(&mut self, ticket: Ticket, t: u32, used: f64) {
        let owed = self.book.settle(ticket, used);
        self.charge(t, owed);
        if let Some(p) = self.predictor.as_mut() {
            let slot = &self.book.slots[ticket.slot() as usize];
            let rest = (used - slot.cost.unwrap_or(0.0)).max(0.0);
            p.observe(self.book.tenants[t as usize].id, slot.class, rest);
        }
    }

    fn cancelled(&mut self, t: u32, _: bool) {
        if self.book.tenants[t as usize].queued == 0 {
            self.left(t);
        }
    }

    fn removed(&mut self, t: u32) {
        if self.last_left == LastLeft::Tenant(t) {
            self.last_left = LastLeft::Value(self.counter[t as usize]);
        }
        if let Some(p) = self.predictor.as_mut() {
            p.forget(self.book.tenants[t as usize].id);
        }
    }

    fn view(&self, t: u32) -> (bool, f64) {
        (
            self.book.tenants[t as usize].queued > 0,
            self.counter[t as usize],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::EstimatorKind;
    use crate::queued::Queued;
    use crate::scheduler::{Admin, Inspect, Scheduler};
    use crate::types::{Request, TenantId};

    fn vtc(lift: Lift) -> Queued<Vtc<u32>> {
        Queued(Vtc::new(4, Box::new(Oracle), 1.0, lift))
    }

    fn counter(s: &Queued<Vtc<u32>>, t: u64) -> f64 {
        s.tenant(TenantId(t)).unwrap().tag
    }

    /// Serve one request of tenant `t` (cost `c`) to completion with total usage `used`.
    fn serve(s: &mut Queued<Vtc<u32>>, t: u64, c: f64, used: f64, now: f64) {
        s.enqueue(Request::new(t, 0u32, 0).with_cost(c), now)
            .unwrap();
        let d = s.dequeue(0, now).unwrap().run().unwrap();
        s.complete(d.ticket, used, now).unwrap();
    }

    #[test]
    fn the_three_lifts_differ_only_when_nobody_is_backlogged() {
        for (lift, want) in [
            (Lift::Paper, 30.0),
            (Lift::Artifact, 0.0),
            (Lift::Never, 0.0),
        ] {
            let mut s = vtc(lift);
            serve(&mut s, 1, 10.0, 30.0, 0.0); // tenant 1 got 30 and left Q last
            assert_eq!(counter(&s, 1), 30.0);
            // Q is empty when tenant 2 arrives.
            s.enqueue(Request::new(2u64, 0u32, 0).with_cost(1.0), 1.0)
                .unwrap();
            assert_eq!(counter(&s, 2), want, "{lift:?}");
        }
        for (lift, want) in [
            (Lift::Paper, 30.0),
            (Lift::Artifact, 30.0),
            (Lift::Never, 0.0),
        ] {
            let mut s = vtc(lift);
            serve(&mut s, 1, 10.0, 30.0, 0.0);
            // Tenant 1 is backlogged (counter 30) when tenant 2 arrives.
            s.enqueue(Request::new(1u64, 0u32, 0).with_cost(1.0), 1.0)
                .unwrap();
            s.enqueue(Request::new(2u64, 0u32, 0).with_cost(1.0), 1.0)
                .unwrap();
            assert_eq!(counter(&s, 2), want, "{lift:?}");
        }
    }

    #[test]
    fn a_removed_tenant_still_lifts_the_next_one_by_its_last_counter() {
        let mut s = vtc(Lift::Paper);
        serve(&mut s, 1, 10.0, 30.0, 0.0);
        s.remove_tenant(TenantId(1)).unwrap();
        s.enqueue(Request::new(2u64, 0u32, 0), 1.0).unwrap();
        assert_eq!(counter(&s, 2), 30.0);
        // The removed tenant's index is reused by tenant 3, who starts afresh at the lift.
        s.enqueue(Request::new(3u64, 0u32, 0), 1.0).unwrap();
        assert_eq!(counter(&s, 3), 30.0);
    }

    #[test]
    fn the_predictor_charges_ahead_and_refunds_what_was_not_generated() {
        let est = EstimatorKind::Ema {
            alpha: 0.8,
            initial: 0.0,
        }
        .build()
        .unwrap();
        let mut s = Queued(Vtc::<u32>::new(2, est, 1.0, Lift::Paper));
        assert_eq!(s.name(), "vtce");
        // First request: nothing predicted yet; 100 of output arrives by progress.
        s.enqueue(Request::new(1u64, 0u32, 0).with_cost(10.0), 0.0)
            .unwrap();
        let d = s.dequeue(0, 0.0).unwrap().run().unwrap();
        assert_eq!(d.charged, 10.0);
        s.progress(d.ticket, 60.0, 1.0).unwrap();
        assert_eq!(counter(&s, 1), 60.0);
        s.complete(d.ticket, 110.0, 2.0).unwrap();
        assert_eq!(counter(&s, 1), 110.0);
        // Second: 100 predicted (the first observation), charged at dispatch.
        s.enqueue(Request::new(1u64, 0u32, 0).with_cost(10.0), 3.0)
            .unwrap();
        let d = s.dequeue(0, 3.0).unwrap().run().unwrap();
        assert_eq!(d.charged, 110.0);
        assert_eq!(counter(&s, 1), 220.0);
        s.progress(d.ticket, 50.0, 4.0).unwrap(); // within the prediction: no charge
        assert_eq!(counter(&s, 1), 220.0);
        s.complete(d.ticket, 50.0, 5.0).unwrap(); // 60 predicted but not generated: refunded
        assert_eq!(counter(&s, 1), 160.0);
        // The EMA moved by 1/5 towards 40: 0.8·100 + 0.2·40 = 88.
        s.enqueue(Request::new(1u64, 0u32, 0).with_cost(10.0), 6.0)
            .unwrap();
        assert_eq!(s.dequeue(0, 6.0).unwrap().run().unwrap().charged, 98.0);
    }

    #[test]
    fn weights_divide_the_charges() {
        let mut s = vtc(Lift::Paper);
        s.set_weight(TenantId(1), 4.0, 0.0).unwrap();
        serve(&mut s, 1, 8.0, 20.0, 0.0);
        assert_eq!(counter(&s, 1), 5.0);
    }
}
