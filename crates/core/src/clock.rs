//! Virtual time.
//!
//! * [`GpsClock`] is the exact virtual time of a fluid GPS server of capacity `n × r`
//!   (2DFQ §2: "virtual time increases by the rate at which backlogged tenants receive
//!   service"). It needs every request's cost at arrival. WFQ, WF²Q and 2DFQ use it when
//!   costs are known and the executor states its capacity (the simulator does), and the
//!   simulator's service-lag metric uses the same struct as its reference (2DFQ §6).
//! * [`VirtualClock::Approximate`] is a WF²Q⁺-style approximation for executors that do not
//!   know costs up front or cannot afford exact GPS: `v` advances by the measured service
//!   over the active weight and is never below the smallest start tag of a backlogged tenant.
//!   The E-variants (WFQᴱ, WF²Qᴱ, 2DFQᴱ) use it: with unknown costs GPS cannot be emulated.
//! * [`VirtualClock::LastDispatched`] borrows SFQ(D)'s rule (Jin et al. §3.2): `v` is the start
//!   tag of the last dispatched request, which needs no knowledge of capacity or costs. (The
//!   SFQ family itself keeps per-request tags in `interposed.rs`.)

use crate::types::{saturate, Error};
use crate::util::{Tag, WinnerTree};

/// Which virtual time a tag-based scheduler keeps.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VirtualClock {
    /// Exact GPS of a fluid server of this capacity (cost units per time unit, i.e. workers ×
    /// per-worker rate). Requires known costs.
    Gps {
        /// `n × r`.
        capacity: f64,
    },
    /// Measured service over active weight, lifted to the smallest backlogged start tag.
    Approximate,
    /// The start tag of the last dispatched request (SFQ(D)'s rule).
    LastDispatched,
}

impl VirtualClock {
    pub(crate) fn check(self) -> Result<Self, Error> {
        if let VirtualClock::Gps { capacity } = self {
            if !(capacity.is_finite() && capacity > 0.0) {
                return Err(Error::InvalidConfig {
                    field: "clock.capacity",
                    reason: format!("must be finite and > 0, got {capacity}"),
                });
            }
        }
        Ok(self)
    }
}

#[derive(Clone, Debug)]
struct Flow {
    weight: f64,
    /// Virtual finish tag of the flow's last arrived request in GPS.
    finish: f64,
    backlogged: bool,
    /// All work that ever arrived.
    arrived: f64,
    /// Continuously backlogged ([`GpsClock::backlog`]): never departs.
    persistent: bool,
    /// For a persistent flow: work done before `v0`, and the virtual time it was set.
    base: f64,
    v0: f64,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            weight: 1.0,
            finish: 0.0,
            backlogged: false,
            arrived: 0.0,
            persistent: false,
            base: 0.0,
            v0: 0.0,
        }
    }
}

impl Flow {
    /// Work `cost` arrives at virtual time `v`: the finish tag moves on by `cost / weight`
    /// from the old tag, or from `v` for a flow not backlogged. `None` for a persistent flow
    /// (infinite demand already), else whether the flow was newly backlogged.
    fn arrive(&mut self, cost: f64, v: f64) -> Option<bool> {
        if self.persistent {
            return None;
        }
        self.arrived = (self.arrived + cost).min(f64::MAX);
        let newly = !self.backlogged;
        let from = if newly { v } else { self.finish };
        self.finish = saturate(from + cost / self.weight);
        self.backlogged = true;
        Some(newly)
    }

    /// Take back up to `cost` of the unserved work at virtual time `v`; the new finish tag
    /// to file when the flow is backlogged (and not persistent).
    fn withdraw(&mut self, cost: f64, v: f64) -> Option<f64> {
        if self.persistent {
            return None;
        }
        let backlog = if self.backlogged {
            self.weight * (self.finish - v)
        } else {
            0.0
        };
        let taken = cost.min(backlog.max(0.0));
        self.arrived -= taken;
        if !self.backlogged {
            return None;
        }
        self.finish -= taken / self.weight;
        Some(self.finish)
    }

    /// Set the weight at virtual time `v`, keeping the remaining backlog.
    fn reweigh(&mut self, weight: f64, v: f64) -> Reweighed {
        let old = self.weight;
        self.weight = weight;
        if self.persistent {
            self.base += old * (v - self.v0);
            self.v0 = v;
            Reweighed::Persistent(weight - old)
        } else if self.backlogged {
            let remaining = old * (self.finish - v);
            self.finish = saturate(v + remaining / weight);
            Reweighed::Backlogged(weight - old, self.finish)
        } else {
            Reweighed::Idle
        }
    }

    /// Work GPS has done for the flow up to virtual time `v`.
    fn work(&self, v: f64) -> f64 {
        if self.persistent {
            self.base + self.weight * (v - self.v0)
        } else if self.backlogged {
            self.arrived - self.weight * (self.finish - v).max(0.0)
        } else {
            self.arrived
        }
    }
}

/// What a weight change did to a flow: the change of weight of a persistent flow, or of a
/// backlogged one with its new finish tag to file.
enum Reweighed {
    Persistent(f64),
    Backlogged(f64, f64),
    Idle,
}

/// The backlogged flows' GPS finish tags, smallest first (ties by flow id), as a winner
/// (tournament) tree over the flow ids ([`WinnerTree`], the crate's one such tree; WFQ's
/// selection uses it too).
///
/// [`GpsClock`] files a backlogged flow's growing tag lazily: an arrival to a backlogged
/// flow leaves the old, smaller key in the tree as a lower bound, and
/// [`GpsClock::depart_until`] files the real tag only when GPS reaches the old one. Under a
/// steady backlog most arrivals then touch no tree at all (the Fig. 8 benchmark: 1,000
/// filings for 520,000 arrivals). A tree rather than a binary heap makes the rest cheap too:
/// a key that grows only rewrites the inner nodes it was winning, and the root is read
/// without indirection. The order is the strict total order the clock always used (tag,
/// then flow id), so the flow found to depart is the same one.
#[derive(Clone, Debug, Default)]
struct Departures(WinnerTree);

impl Departures {
    /// `(finish, f)` as one integer ordered like the pair: the float's bits made monotone
    /// (negative floats flipped, the sign bit set on the others; -0.0 counts as 0.0) above
    /// the flow id. That is [`Tag`]'s packing with the flow as the tie.
    #[inline]
    fn key(finish: f64, f: usize) -> u128 {
        Tag::new(finish, f as u64).wide()
    }

    /// The flow with the smallest key, the key's float and the whole key.
    #[inline]
    fn peek_raw(&self) -> Option<(usize, f64, u128)> {
        self.0
            .peek()
            .map(|(f, k)| (f as usize, Tag::from_wide(k).key(), k))
    }

    /// The smallest key's float (no flow: the inline path of [`GpsClock::advance`]).
    #[inline]
    fn min_finish(&self) -> Option<f64> {
        let k = self.0.min_key();
        (k != WinnerTree::ABSENT).then(|| Tag::from_wide(k).key())
    }

    /// The flow with the smallest key, and the key's float.
    #[cfg(test)]
    fn peek(&self) -> Option<(usize, f64)> {
        self.peek_raw().map(|(f, x, _)| (f, x))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Insert flow `f` with this finish tag, or move it to it.
    #[inline]
    fn set(&mut self, f: usize, finish: f64) {
        // A flow id is an index into `GpsClock::flows`, allocated before this call: far
        // below 2^32 entries of it could ever exist, so the id fits the tree's `u32`.
        self.0.set(f as u32, Self::key(finish, f));
    }

    /// Take flow `f` out (nothing if absent).
    fn remove(&mut self, f: usize) {
        self.0.remove(f as u32);
    }
}

/// The exact virtual time of a fluid Generalized Processor Sharing server (Parekh & Gallager),
/// tracking flows by dense index.
///
/// Each backlogged flow `f` receives `capacity · φ_f / Σφ` of service; virtual time advances at
/// `capacity / Σφ` over the backlogged flows, so a flow's backlog at virtual time `v` is
/// `φ_f · (F_f − v)` where `F_f` is the GPS finish tag of its last request. That gives the
/// work GPS has done for a flow exactly: [`GpsClock::work`].
///
/// ```
/// use fairlane_core::GpsClock;
/// // Two workers of rate 1: capacity 2. Two flows with 4 units each.
/// let mut g = GpsClock::new(2.0).unwrap();
/// g.arrive(0, 4.0, 0.0);
/// g.arrive(1, 4.0, 0.0);
/// g.advance(1.0);
/// assert_eq!(g.virtual_time(), 1.0); // two flows share rate 2: v advances at 1
/// assert_eq!(g.work(0), 1.0);
/// g.advance(10.0);
/// assert_eq!(g.work(0), 4.0); // both done at t = 4; v stays at 4 while GPS is idle
/// assert_eq!(g.virtual_time(), 4.0);
/// ```
#[derive(Clone, Debug)]
pub struct GpsClock {
    capacity: f64,
    v: f64,
    t: f64,
    active_weight: f64,
    /// Σφ of the persistent flows, part of `active_weight`.
    persistent_weight: f64,
    flows: Vec<Flow>,
    departures: Departures,
    /// `capacity / w` for `w = rate_for`: the active weight changes only on arrivals to an
    /// idle flow and departures, so most advances reuse the quotient instead of dividing
    /// (the same division on the same operands: bit-identical results).
    rate_for: f64,
    rate: f64,
}

impl GpsClock {
    /// A GPS server of this capacity (cost units per time unit).
    pub fn new(capacity: f64) -> Result<Self, Error> {
        VirtualClock::Gps { capacity }.check()?;
        Ok(GpsClock {
            capacity,
            v: 0.0,
            t: 0.0,
            active_weight: 0.0,
            persistent_weight: 0.0,
            flows: Vec::new(),
            departures: Departures::default(),
            rate_for: f64::NAN,
            rate: 0.0,
        })
    }

    /// The virtual time at the last [`advance`](Self::advance).
    pub fn virtual_time(&self) -> f64 {
        self.v
    }

    /// The time of the last [`advance`](Self::advance).
    pub fn time(&self) -> f64 {
        self.t
    }

    /// The server's capacity.
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    fn flow(&mut self, f: usize) -> &mut Flow {
        if f >= self.flows.len() {
            self.flows.resize_with(f + 1, Flow::default);
        }
        &mut self.flows[f]
    }

    /// dv/dt = `capacity / max(Σφ, MIN_WEIGHT)`, divided only when Σφ changed.
    #[inline]
    fn rate(&mut self) -> f64 {
        let w = self.active_weight.max(crate::types::MIN_WEIGHT);
        if w != self.rate_for {
            self.rate_for = w;
            self.rate = self.capacity / w;
        }
        self.rate
    }

    /// Run the fluid server until `now` (earlier times are ignored).
    ///
    /// Inline: most calls find no flow emptying before `now` and only move `v`; the
    /// departures are handled out of line ([`Self::depart_until`]).
    #[inline]
    pub fn advance(&mut self, now: f64) {
        if now <= self.t {
            return;
        }
        if let Some(key) = self.departures.min_finish() {
            // A stale key is below the flow's finish tag, so this `at` is no later than the
            // flow's own: if the key is not reached, neither is the tag.
            let at = self.t + (key - self.v) / self.rate();
            if at <= now {
                self.depart_until(now);
            }
        }
        if self.active_weight > 0.0 {
            // Saturating: a huge time step over a tiny weight must not make v infinite;
            // the active weight is at least MIN_WEIGHT while anything is
            // backlogged, whatever rounding did to the running sum.
            let rate = self.rate();
            self.v = saturate(self.v + (now - self.t) * rate);
        }
        self.t = now;
    }

    /// Empty, in order, every flow whose finish tag GPS reaches by `now`, moving `t` and `v`
    /// to the last one's departure.
    #[inline(never)]
    fn depart_until(&mut self, now: f64) {
        while let Some((f, key, raw)) = self.departures.peek_raw() {
            let rate = self.rate();
            let at = self.t + (key - self.v) / rate;
            if at > now {
                break;
            }
            let finish = self.flows[f].finish;
            if Departures::key(finish, f) != raw {
                // Reached a lower bound only (the flow grew since it was filed): file its
                // tag and look again.
                self.departures.set(f, finish);
                continue;
            }
            // A flow empties: jump exactly to its finish tag so no rounding accumulates.
            self.departures.remove(f);
            self.v = self.v.max(key);
            self.t = self.t.max(at);
            let flow = &mut self.flows[f];
            flow.backlogged = false;
            self.active_weight -= flow.weight;
            if self.departures.is_empty() {
                self.active_weight = self.persistent_weight;
            }
        }
    }

    /// A request of `cost` arrives for flow `f` at `now`.
    pub fn arrive(&mut self, f: usize, cost: f64, now: f64) {
        self.advance(now);
        let v = self.v;
        let flow = self.flow(f);
        let old = flow.finish;
        let Some(newly) = flow.arrive(cost, v) else {
            return; // infinite demand already
        };
        let (w, finish) = (flow.weight, flow.finish);
        if newly {
            self.active_weight += w;
        } else if finish >= old {
            // A backlogged flow's tag only grows here, and the tree may keep the old one as
            // a lower bound: `advance` files the new one if it ever reaches the old. Under a
            // steady backlog most arrivals thus cost no tree work at all.
            return;
        }
        self.departures.set(f, finish);
    }

    /// Take back `cost` of flow `f`'s not-yet-served work (a cancelled request).
    pub fn withdraw(&mut self, f: usize, cost: f64, now: f64) {
        self.advance(now);
        let v = self.v;
        if let Some(finish) = self.flow(f).withdraw(cost, v) {
            self.departures.set(f, finish);
        }
    }

    /// Change flow `f`'s weight at `now`; its remaining backlog is kept.
    pub fn set_weight(&mut self, f: usize, weight: f64, now: f64) {
        self.advance(now);
        let v = self.v;
        match self.flow(f).reweigh(weight, v) {
            Reweighed::Persistent(dw) => {
                self.active_weight += dw;
                self.persistent_weight += dw;
            }
            Reweighed::Backlogged(dw, finish) => {
                self.active_weight += dw;
                self.departures.set(f, finish);
            }
            Reweighed::Idle => {}
        }
    }

    /// Forget flow `f` (its backlog leaves the fluid server).
    pub fn forget(&mut self, f: usize) {
        if f < self.flows.len() {
            if self.flows[f].persistent {
                self.active_weight -= self.flows[f].weight;
                self.persistent_weight -= self.flows[f].weight;
                if self.departures.is_empty() {
                    self.active_weight = self.persistent_weight;
                }
            } else if self.flows[f].backlogged {
                self.active_weight -= self.flows[f].weight;
                self.departures.remove(f);
                if self.departures.is_empty() {
                    self.active_weight = self.persistent_weight;
                }
            }
            self.flows[f] = Flow::default();
        }
    }

    /// Flow `f` is continuously backlogged from `now` on: infinite demand, so it never
    /// departs and later arrivals for it are ignored. A simulator uses this for tenants that
    /// always have work queued, whose finite arrivals would otherwise cap the reference.
    /// Work already arrived and not yet served is folded into the infinite demand.
    pub fn backlog(&mut self, f: usize, now: f64) {
        self.advance(now);
        let v = self.v;
        let done = self.work(f);
        let flow = self.flow(f);
        if flow.persistent {
            return;
        }
        let was_backlogged = flow.backlogged;
        let w = flow.weight;
        flow.persistent = true;
        flow.backlogged = true;
        flow.base = done;
        flow.v0 = v;
        flow.arrived = done;
        // Move the flow's weight from the departing flows to the persistent ones.
        if was_backlogged {
            self.departures.remove(f);
            self.active_weight -= w;
        }
        self.persistent_weight += w;
        self.active_weight = if self.departures.is_empty() {
            self.persistent_weight
        } else {
            self.active_weight + w
        };
    }

    /// Work GPS has done for flow `f` up to the last advance: `W_GPS^f(0, t)`.
    pub fn work(&self, f: usize) -> f64 {
        self.flows.get(f).map_or(0.0, |flow| flow.work(self.v))
    }

    /// Flow `f`'s weight (1 until set).
    pub fn weight(&self, f: usize) -> f64 {
        self.flows.get(f).map_or(1.0, |fl| fl.weight)
    }

    /// Whether flow `f` is backlogged in GPS.
    pub fn is_backlogged(&self, f: usize) -> bool {
        self.flows.get(f).is_some_and(|fl| fl.backlogged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The winner tree's minimum is always the smallest `(finish, flow)` pair present,
        /// through inserts, growths, shrinks, ties, signed zeros and removals.
        #[test]
        fn departures_give_the_smallest_pair(
            ops in proptest::collection::vec((0usize..40, -3i32..12, 0u8..4), 1..300)
        ) {
            let mut tree = Departures::default();
            let mut reference = std::collections::BTreeMap::<usize, f64>::new();
            for (f, k, op) in ops {
                if op == 0 {
                    tree.remove(f);
                    reference.remove(&f);
                } else {
                    // Few distinct values, so ties by flow id are common; -0.0 is 0.0.
                    let finish = if k == -3 { -0.0 } else { f64::from(k) * 0.5 };
                    tree.set(f, finish);
                    reference.insert(f, finish + 0.0);
                }
                let want = reference
                    .iter()
                    .map(|(&f, &x)| (Departures::key(x, f), f, x))
                    .min_by_key(|e| e.0)
                    .map(|(_, f, x)| (f, x));
                prop_assert_eq!(tree.peek(), want);
                prop_assert_eq!(tree.is_empty(), reference.is_empty());
                if let Some((_, x)) = want {
                    // Keys order like the floats.
                    prop_assert!(reference.values().all(|&y| x <= y));
                }
            }
        }
    }

    /// The clock as it was before the lazy winner tree: every arrival files the flow's new
    /// tag at once, and the smallest `(tag, flow)` is found by a scan. The same float
    /// operations in the same order, so the two must agree bit for bit.
    #[derive(Default)]
    struct Eager {
        capacity: f64,
        v: f64,
        t: f64,
        active: f64,
        persistent: f64,
        flows: Vec<Flow>,
        filed: Vec<Option<f64>>,
    }

    impl Eager {
        fn flow(&mut self, f: usize) -> &mut Flow {
            if f >= self.flows.len() {
                self.flows.resize_with(f + 1, Flow::default);
                self.filed.resize(f + 1, None);
            }
            &mut self.flows[f]
        }
        fn rate(&self) -> f64 {
            self.capacity / self.active.max(crate::types::MIN_WEIGHT)
        }
        fn min(&self) -> Option<(usize, f64)> {
            let mut best: Option<(u128, usize, f64)> = None;
            for (f, x) in self.filed.iter().enumerate() {
                if let Some(x) = *x {
                    let k = Departures::key(x, f);
                    if best.is_none_or(|b| k < b.0) {
                        best = Some((k, f, x + 0.0));
                    }
                }
            }
            best.map(|(_, f, x)| (f, x))
        }
        fn any_filed(&self) -> bool {
            self.filed.iter().any(Option::is_some)
        }
        fn advance(&mut self, now: f64) {
            if now <= self.t {
                return;
            }
            while let Some((f, finish)) = self.min() {
                let at = self.t + (finish - self.v) / self.rate();
                if at > now {
                    break;
                }
                self.filed[f] = None;
                self.v = self.v.max(finish);
                self.t = self.t.max(at);
                self.flows[f].backlogged = false;
                self.active -= self.flows[f].weight;
                if !self.any_filed() {
                    self.active = self.persistent;
                }
            }
            if self.active > 0.0 {
                self.v = saturate(self.v + (now - self.t) * self.rate());
            }
            self.t = now;
        }
        fn arrive(&mut self, f: usize, cost: f64, now: f64) {
            self.advance(now);
            let v = self.v;
            let flow = self.flow(f);
            if let Some(newly) = flow.arrive(cost, v) {
                let (w, finish) = (flow.weight, flow.finish);
                self.filed[f] = Some(finish);
                if newly {
                    self.active += w;
                }
            }
        }
        fn withdraw(&mut self, f: usize, cost: f64, now: f64) {
            self.advance(now);
            let v = self.v;
            if let Some(finish) = self.flow(f).withdraw(cost, v) {
                self.filed[f] = Some(finish);
            }
        }
        fn set_weight(&mut self, f: usize, weight: f64, now: f64) {
            self.advance(now);
            let v = self.v;
            match self.flow(f).reweigh(weight, v) {
                Reweighed::Persistent(dw) => {
                    self.active += dw;
                    self.persistent += dw;
                }
                Reweighed::Backlogged(dw, finish) => {
                    self.active += dw;
                    self.filed[f] = Some(finish);
                }
                Reweighed::Idle => {}
            }
        }
        fn work(&self, f: usize) -> f64 {
            self.flows.get(f).map_or(0.0, |flow| flow.work(self.v))
        }
    }

    proptest! {
        #[test]
        fn lazy_filing_matches_eager_filing(
            ops in proptest::collection::vec(
                (0usize..12, 0u8..10, 0.01f64..50.0, 0.0f64..2.0), 1..400),
            capacity in 0.5f64..20.0,
        ) {
            let mut lazy = GpsClock::new(capacity).unwrap();
            let mut eager = Eager { capacity, ..Eager::default() };
            let mut now = 0.0;
            for (f, op, x, dt) in ops {
                now += dt * dt * dt; // many small steps, some long idle gaps
                match op {
                    0 => {
                        lazy.withdraw(f, x, now);
                        eager.withdraw(f, x, now);
                    }
                    1 => {
                        let w = 0.25 + x / 10.0;
                        lazy.set_weight(f, w, now);
                        eager.set_weight(f, w, now);
                    }
                    2 => {
                        lazy.advance(now);
                        eager.advance(now);
                    }
                    _ => {
                        lazy.arrive(f, x, now);
                        eager.arrive(f, x, now);
                    }
                }
                prop_assert_eq!(lazy.virtual_time().to_bits(), eager.v.to_bits());
                prop_assert_eq!(lazy.time().to_bits(), eager.t.to_bits());
                for g in 0..12 {
                    prop_assert_eq!(lazy.work(g).to_bits(), eager.work(g).to_bits(), "flow {}", g);
                    prop_assert_eq!(
                        lazy.is_backlogged(g),
                        eager.flows.get(g).is_some_and(|fl| fl.backlogged)
                    );
                }
            }
        }
    }

    #[test]
    fn fig5_virtual_time_is_t_over_two() {
        // 2DFQ §4: four backlogged tenants, two workers of rate 1 → v(t) = t/2.
        let mut g = GpsClock::new(2.0).unwrap();
        for f in 0..4 {
            g.arrive(f, 100.0, 0.0);
        }
        for t in [0.5, 1.0, 3.0, 7.25] {
            g.advance(t);
            assert_eq!(g.virtual_time(), t / 2.0);
        }
    }

    #[test]
    fn hand_computed_departures_and_weights() {
        // capacity 3; flow 0 weight 2 with 6 units, flow 1 weight 1 with 1 unit, both at t=0.
        // Σφ = 3 → dv/dt = 1. Flow 1 finishes at v = 1 (t = 1); then only flow 0: dv/dt = 1.5.
        // Flow 0's finish tag is 3, reached at t = 1 + 2/1.5 = 7/3.
        let mut g = GpsClock::new(3.0).unwrap();
        g.set_weight(0, 2.0, 0.0);
        g.arrive(0, 6.0, 0.0);
        g.arrive(1, 1.0, 0.0);
        g.advance(1.0);
        assert_eq!(g.virtual_time(), 1.0);
        assert_eq!(g.work(0), 2.0);
        assert_eq!(g.work(1), 1.0);
        assert!(!g.is_backlogged(1));
        g.advance(2.0);
        assert!((g.virtual_time() - 2.5).abs() < 1e-12);
        assert!((g.work(0) - 5.0).abs() < 1e-12);
        g.advance(5.0);
        assert_eq!(g.virtual_time(), 3.0);
        assert_eq!(g.work(0), 6.0);
        // A new arrival while idle starts at the frozen virtual time.
        g.arrive(1, 3.0, 6.0);
        g.advance(7.0);
        assert_eq!(g.virtual_time(), 6.0); // alone at weight 1: dv/dt = 3
        assert_eq!(g.work(1), 4.0);
    }

    #[test]
    fn persistent_backlog_never_departs() {
        // capacity 2, flow 0 continuously backlogged (weight 1), flow 1 gets 1 unit at t=0
        // with weight 1: both get rate 1 until flow 1 finishes at t=1, then flow 0 gets 2.
        let mut g = GpsClock::new(2.0).unwrap();
        g.backlog(0, 0.0);
        g.arrive(1, 1.0, 0.0);
        g.arrive(0, 5.0, 0.0); // ignored: demand is already infinite
        g.advance(1.0);
        assert_eq!(g.work(0), 1.0);
        assert_eq!(g.work(1), 1.0);
        g.advance(3.0);
        assert_eq!(g.work(0), 5.0);
        assert!(g.is_backlogged(0));
        // Weight 3 from t = 3 with flow 1 back (2 units): flow 0 gets 3/4·2 = 1.5 per unit time.
        g.set_weight(0, 3.0, 3.0);
        g.arrive(1, 2.0, 3.0);
        g.advance(5.0);
        assert!((g.work(0) - 8.0).abs() < 1e-12);
        assert!((g.work(1) - 2.0).abs() < 1e-12);
        // A flow that already had work becomes persistent and keeps what it was given.
        let mut g = GpsClock::new(1.0).unwrap();
        g.arrive(0, 4.0, 0.0);
        g.arrive(1, 4.0, 0.0);
        g.backlog(1, 2.0); // each had 1 unit by now
        g.advance(10.0); // flow 0 empties at t = 8 (3 more units at 1/2), then flow 1 alone
        assert!((g.work(0) - 4.0).abs() < 1e-12);
        assert!((g.work(1) - 6.0).abs() < 1e-12);
    }

    #[test]
    fn weight_change_keeps_remaining_backlog() {
        let mut g = GpsClock::new(1.0).unwrap();
        g.arrive(0, 4.0, 0.0);
        g.arrive(1, 4.0, 0.0);
        g.advance(2.0); // each got 1
        g.set_weight(0, 3.0, 2.0); // now flow 0 gets 3/4 of the server
        g.advance(4.0);
        assert!((g.work(0) - 2.5).abs() < 1e-12);
        assert!((g.work(1) - 1.5).abs() < 1e-12);
    }

    #[test]
    fn withdraw_removes_unserved_work() {
        let mut g = GpsClock::new(1.0).unwrap();
        g.arrive(0, 2.0, 0.0);
        g.arrive(0, 5.0, 0.0);
        g.withdraw(0, 5.0, 1.0);
        g.advance(10.0);
        assert_eq!(g.work(0), 2.0);
        assert!(GpsClock::new(0.0).is_err());
        assert!(GpsClock::new(f64::NAN).is_err());
    }
}
