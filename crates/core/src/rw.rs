//! Request Windows RW(D) (Jin, Chase & Kaur, SIGMETRICS '04 §4): each flow f may have at
//! most `n_f = D·u·φ_f/Σφ` of estimated cost outstanding, where `u` is the window per issue
//! slot in cost units (1 when requests cost one unit, as in the paper) and Σφ runs over every
//! tenant the scheduler knows, busy or not: RW throttles each flow without knowing whether
//! the others are active. That gives Theorem 3's bound (2D on a FIFO server) but is not
//! work-conserving, so with requests queued and no window open the answer is
//! `RetryAt(f64::INFINITY)`: ask again after the next completion (or enqueue, or weight
//! change).
//!
//! A flow with nothing outstanding may always send its head, even one costlier than its
//! window, so no flow starves. Among flows with an open window, dispatch is round robin in
//! the order their windows opened: O(1) per dispatch. Windows are recomputed (O(tenants))
//! only when Σφ or D changes.

use std::collections::VecDeque;

use crate::book::Book;
use crate::estimate::CostEstimator;
use crate::queued::{queue_parts, Queue};
use crate::types::{saturate, Decision, Dispatch, Ticket};

pub(crate) struct Rw<T> {
    name: &'static str,
    workers: usize,
    /// Window per issue slot, in cost units.
    unit: f64,
    book: Book<T>,
    est: Box<dyn CostEstimator>,
    /// Charged cost outstanding per tenant index.
    outstanding: Vec<f64>,
    /// Whether the tenant is in `ready`.
    listed: Vec<bool>,
    /// Tenants whose window may be open, oldest first; entries are re-checked when popped.
    ready: VecDeque<u32>,
    /// Σφ over known tenants, and their number.
    total_weight: f64,
    tenants: usize,
}

impl<T> Rw<T> {
    pub fn new(
        name: &'static str,
        workers: usize,
        unit: f64,
        est: Box<dyn CostEstimator>,
        default_weight: f64,
    ) -> Self {
        Rw {
            name,
            workers,
            unit,
            book: Book::new(default_weight),
            est,
            outstanding: Vec::new(),
            listed: Vec::new(),
            ready: VecDeque::new(),
            total_weight: 0.0,
            tenants: 0,
        }
    }

    /// n_f.
    #[inline]
    fn window(&self, t: u32) -> f64 {
        self.workers as f64 * self.unit * self.book.tenants[t as usize].weight / self.total_weight
    }

    /// Whether tenant `t` may send its head now (computing the head's charge).
    #[inline]
    fn open(&mut self, t: u32) -> bool {
        let Some(h) = self.book.head(t) else {
            return false;
        };
        let slot = &self.book.slots[h.slot() as usize];
        let (class, known) = (slot.class, slot.cost);
        let ten = &mut self.book.tenants[t as usize];
        let l = known.unwrap_or_else(|| self.est.estimate(ten.id, class));
        ten.head_cost = l;
        let out = self.outstanding[t as usize];
        // A relative tolerance so that n_f = 3 admits three unit requests despite rounding.
        out == 0.0 || out + l <= self.window(t) * (1.0 + 1e-9)
    }

    #[inline]
    fn list(&mut self, t: u32) {
        if !self.listed[t as usize] && self.open(t) {
            self.listed[t as usize] = true;
            self.ready.push_back(t);
        }
    }

    /// Σφ shrank or D grew: windows opened.
    fn relist_all(&mut self) {
        for t in 0..self.book.tenants.len() as u32 {
            if self.book.lookup(self.book.tenants[t as usize].id) == Some(t) {
                self.list(t);
            }
        }
    }
}

impl<T> Queue<T> for Rw<T> {
    fn name(&self) -> &'static str {
        self.name
    }
    queue_parts!();
    fn workers_changed(&mut self, old: usize) {
        if self.workers > old {
            self.relist_all(); // windows grew
        }
    }

    fn joined(&mut self, t: u32) {
        if t as usize >= self.outstanding.len() {
            self.outstanding.resize(t as usize + 1, 0.0);
            self.listed.resize(t as usize + 1, false);
        }
        self.outstanding[t as usize] = 0.0;
        self.listed[t as usize] = false;
        // Σφ grows: other windows only shrink, nobody new may send.
        self.total_weight += self.book.tenants[t as usize].weight;
        self.tenants += 1;
    }

    #[inline]
    fn queued(&mut self, _: Ticket, t: u32, was_empty: bool, _: f64) {
        if was_empty {
            self.list(t);
        }
    }

    #[inline]
    fn pick(&mut self, _: usize, _: f64) -> Decision<T> {
        while let Some(t) = self.ready.pop_front() {
            self.listed[t as usize] = false;
            if !self.open(t) {
                continue; // re-listed by its next completion
            }
            let l = self.book.tenants[t as usize].head_cost;
            // Saturating: two f64::MAX charges outstanding must not make the window check ∞.
            self.outstanding[t as usize] = saturate(self.outstanding[t as usize] + l);
            let (ticket, request) = self.book.start_head(t, l);
            self.list(t); // round robin: back of the line if still open
            return Decision::Run(Dispatch {
                ticket,
                request,
                charged: l,
            });
        }
        if self.book.queued > 0 {
            Decision::RetryAt(f64::INFINITY) // a window opens only at a completion
        } else {
            Decision::Empty
        }
    }

    // Windows count the cost charged at dispatch; usage only feeds the estimator, so
    // `refresh` keeps its default (record the usage: reports must not go down).

    #[inline]
    fn finished(&mut self, t: u32, charged: f64) {
        let ti = t as usize;
        self.outstanding[ti] = if self.book.tenants[ti].running == 0 {
            0.0 // no rounding residue
        } else {
            (self.outstanding[ti] - charged).max(0.0)
        };
        self.list(t);
    }

    fn cancelled(&mut self, t: u32, was_head: bool) {
        if was_head {
            self.list(t);
        }
    }

    fn weight_changed(&mut self, t: u32, old: f64, new: f64) {
        self.total_weight += new - old;
        if new < old {
            self.relist_all();
        } else {
            self.list(t);
        }
    }

    fn removed(&mut self, t: u32) {
        self.tenants -= 1;
        self.total_weight = if self.tenants == 0 {
            0.0 // no rounding residue
        } else {
            self.total_weight - self.book.tenants[t as usize].weight
        };
        self.relist_all();
    }

    fn view(&self, t: u32) -> (bool, f64) {
        let ten = &self.book.tenants[t as usize];
        (ten.queued + ten.running > 0, self.outstanding[t as usize])
    }
}
