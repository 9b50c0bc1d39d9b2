//! The one event queue and the one run loop every simulation model uses.
//!
//! Events are ordered by time, then by the order they were scheduled, so a model that draws
//! its random numbers in event order is deterministic: the same spec and seed give the same
//! run. A model ([`Model`]) owns its queue and handles one event at a time; [`drive`] pops
//! events until the simulated end, reports progress and enforces the event cap.

use crate::error::SimError;

/// The default cap on the events one run may process (`--max-events`): about ten minutes
/// of one core at the simulator's usual pace.
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000_000;

/// The most requests one run may hold queued at once: a bound on memory (about 125 bytes
/// each with the scheduler's bookkeeping, so about 500 MB). An offered load far beyond the
/// capacity reaches it and stops the run with an error instead of exhausting memory.
pub const MAX_OUTSTANDING: usize = 4_000_000;

/// One scheduled event. The key packs the time's bits above the scheduling sequence number,
/// so one unsigned comparison orders by time, then by scheduling order (times are finite and
/// ≥ 0, so their bit patterns order like the numbers).
#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    key: u128,
    ev: E,
}

#[inline]
fn key(t: f64, seq: u64) -> u128 {
    ((t.to_bits() as u128) << 64) | seq as u128
}

#[inline]
fn time(key: u128) -> f64 {
    f64::from_bits((key >> 64) as u64)
}

/// Children per node of the heap (2 measured faster than 4 here: the queues are short, a
/// few dozen events, and a 4-ary node's three extra comparisons cost more than a level).
const ARITY: usize = 2;

/// A priority queue of timed events: earliest first, ties in scheduling order.
///
/// An implicit binary min-heap on one packed key per event. A popped root is not refilled at
/// once: the next push lands in its place (one sift down instead of a sift down for the pop
/// and a sift up for the push), which is the common case — a run loop pops an event and its
/// handler schedules the next one.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: Vec<Entry<E>>,
    /// `heap[0]` was popped and is a hole: the live entries are `heap[1..]`.
    hole: bool,
    seq: u64,
    /// Events handled so far (see [`EventQueue::count`]).
    handled: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: Vec::with_capacity(1024),
            hole: false,
            seq: 0,
            handled: 0,
        }
    }
}

impl<E: Copy> EventQueue<E> {
    /// Count `n` more events handled: [`drive`] counts each one it hands to the model; a
    /// model may count more work than it pops (the event cap bounds that work).
    #[inline]
    pub fn count(&mut self, n: u64) {
        self.handled += n;
    }

    /// Events handled so far (see [`EventQueue::count`]).
    pub fn events(&self) -> u64 {
        self.handled
    }

    /// Schedule `ev` at time `t` (finite, ≥ 0).
    #[inline]
    pub fn push(&mut self, t: f64, ev: E) {
        self.seq += 1;
        let e = Entry {
            key: key(t, self.seq),
            ev,
        };
        if self.hole {
            self.hole = false;
            self.sift_down(0, e);
        } else {
            self.heap.push(e);
            self.sift_up(self.heap.len() - 1, e);
        }
    }

    /// The earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, E)> {
        if self.hole {
            self.fill_hole();
        }
        let top = *self.heap.first()?;
        self.hole = true;
        Some((time(top.key), top.ev))
    }

    /// When the earliest event fires.
    #[inline]
    pub fn peek_time(&self) -> Option<f64> {
        if self.hole {
            // The earliest live entry is one of the hole's children.
            let kids = self.heap.get(1..self.heap.len().min(1 + ARITY))?;
            kids.iter().map(|e| e.key).min().map(time)
        } else {
            self.heap.first().map(|e| time(e.key))
        }
    }

    /// Events scheduled and not yet fired.
    pub fn len(&self) -> usize {
        self.heap.len() - self.hole as usize
    }

    /// Whether no event is scheduled.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Move the last entry into the hole at the root.
    #[inline]
    fn fill_hole(&mut self) {
        self.hole = false;
        let last = self.heap.pop().expect("a hole is a popped entry");
        if !self.heap.is_empty() {
            self.sift_down(0, last);
        }
    }

    /// Place `e` at `i` or above, moving larger parents down.
    #[inline]
    fn sift_up(&mut self, mut i: usize, e: Entry<E>) {
        while i > 0 {
            let parent = (i - 1) / ARITY;
            if self.heap[parent].key <= e.key {
                break;
            }
            self.heap[i] = self.heap[parent];
            i = parent;
        }
        self.heap[i] = e;
    }

    /// Place `e` at `i` or below, moving smaller children up.
    #[inline]
    fn sift_down(&mut self, mut i: usize, e: Entry<E>) {
        let n = self.heap.len();
        loop {
            let first = i * ARITY + 1;
            if first >= n {
                break;
            }
            let last = (first + ARITY).min(n);
            let mut best = first;
            let mut best_key = self.heap[first].key;
            for c in first + 1..last {
                let k = self.heap[c].key;
                if k < best_key {
                    best = c;
                    best_key = k;
                }
            }
            if e.key <= best_key {
                break;
            }
            self.heap[i] = self.heap[best];
            i = best;
        }
        self.heap[i] = e;
    }
}

/// A simulation model driven by [`drive`]: the worker-pool engine, the database server, and
/// next the multi-stage TAM model.
pub trait Model {
    /// The model's event.
    type Event: Copy;
    /// Whether [`Model::settle`] runs (after the last event of each instant).
    const SETTLES: bool = false;
    /// The model's event queue (which also counts the events handled).
    fn queue(&mut self) -> &mut EventQueue<Self::Event>;
    /// Handle one event at time `now`.
    fn handle(&mut self, now: f64, ev: Self::Event) -> Result<(), SimError>;
    /// Called once every event at `now` has been handled (only when `SETTLES`): the place to
    /// let idle servers pick work after all same-instant arrivals are queued.
    fn settle(&mut self, _now: f64) -> Result<(), SimError> {
        Ok(())
    }
}

/// Run `m` until its queue is empty or the next event is after `end`. `progress` gets the
/// fraction of simulated time done now and then; more than `max_events` events stop the run
/// with an error.
pub fn drive<M: Model>(
    m: &mut M,
    end: f64,
    max_events: u64,
    progress: &mut dyn FnMut(f64),
) -> Result<(), SimError> {
    let mut popped = 0u64;
    let mut next_report = 0u64;
    while let Some((now, ev)) = m.queue().pop() {
        if now > end {
            break;
        }
        m.handle(now, ev)?;
        m.queue().count(1);
        if M::SETTLES && m.queue().peek_time() != Some(now) {
            m.settle(now)?;
        }
        popped += 1;
        if popped >= next_report {
            next_report = popped + (1 << 16);
            progress(now / end);
            let events = m.queue().events();
            if events > max_events {
                return Err(SimError::event_cap(format!(
                    "stopped at t = {now:.6} s after {events} events: more than the cap of \
                     {max_events} (raise it with --max-events, or shorten the run)"
                )));
            }
        }
    }
    progress(1.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_scheduling_order() {
        let mut q = EventQueue::default();
        q.push(2.0, 'c');
        q.push(1.0, 'a');
        q.push(1.0, 'b');
        q.push(0.0, 'z');
        let order: Vec<char> = std::iter::from_fn(|| q.pop().map(|x| x.1)).collect();
        assert_eq!(order, vec!['z', 'a', 'b', 'c']);
    }

    #[test]
    fn matches_a_sorted_list_under_random_pushes_pops_and_peeks() {
        // The reference: a list kept sorted by (time, scheduling order).
        let mut rng = crate::rng::Rng::new(14, 0);
        for round in 0..50 {
            let mut q = EventQueue::default();
            let mut reference: Vec<(f64, u64)> = Vec::new();
            let mut seq = 0u64;
            let mut now = 0.0;
            for _ in 0..2_000 {
                // Few distinct times, so ties in scheduling order are common.
                let r = rng.below(10);
                if r < 5 || reference.is_empty() {
                    let t = now + rng.below(if round % 2 == 0 { 4 } else { 1_000 }) as f64 / 4.0;
                    seq += 1;
                    q.push(t, seq);
                    let at = reference.partition_point(|&(u, s)| (u, s) < (t, seq));
                    reference.insert(at, (t, seq));
                } else if r < 8 {
                    let (t, s) = reference.remove(0);
                    assert_eq!(q.pop(), Some((t, s)));
                    now = t;
                } else {
                    assert_eq!(q.peek_time(), reference.first().map(|x| x.0));
                }
                assert_eq!(q.len(), reference.len());
            }
            while let Some(x) = q.pop() {
                assert_eq!(x, reference.remove(0));
            }
            assert!(reference.is_empty() && q.is_empty() && q.peek_time().is_none());
        }
    }
}
