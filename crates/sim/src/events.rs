//! The one event queue and the one run loop every simulation model uses.
//!
//! Events are ordered by time, then by the order they were scheduled, so a model that draws
//! its random numbers in event order is deterministic: the same spec and seed give the same
//! run. A model ([`Model`]) owns its queue and handles one event at a time; [`drive`] pops
//! events until the simulated end, reports progress and enforces the event cap.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use crate::engine::SimError;

/// The default cap on the events one run may process (`--max-events`): about ten minutes
/// of one core at the simulator's usual pace.
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000_000;

/// The most requests one run may hold queued at once: a bound on memory (about 125 bytes
/// each with the scheduler's bookkeeping, so about 500 MB). An offered load far beyond the
/// capacity reaches it and stops the run with an error instead of exhausting memory.
pub const MAX_OUTSTANDING: usize = 4_000_000;

#[derive(Clone, Copy, Debug)]
struct Entry<E> {
    t: f64,
    seq: u64,
    ev: E,
}

impl<E> PartialEq for Entry<E> {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl<E> Eq for Entry<E> {}
impl<E> PartialOrd for Entry<E> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<E> Ord for Entry<E> {
    fn cmp(&self, o: &Self) -> Ordering {
        // Times are finite and ≥ 0, so their bit patterns order like the numbers.
        (self.t.to_bits(), self.seq).cmp(&(o.t.to_bits(), o.seq))
    }
}

/// A priority queue of timed events: earliest first, ties in scheduling order.
#[derive(Debug)]
pub struct EventQueue<E> {
    heap: BinaryHeap<Reverse<Entry<E>>>,
    seq: u64,
}

impl<E: Copy> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(1024),
            seq: 0,
        }
    }
}

impl<E: Copy> EventQueue<E> {
    /// Schedule `ev` at time `t` (finite, ≥ 0).
    #[inline]
    pub fn push(&mut self, t: f64, ev: E) {
        self.seq += 1;
        self.heap.push(Reverse(Entry {
            t,
            seq: self.seq,
            ev,
        }));
    }

    /// The earliest event.
    #[inline]
    pub fn pop(&mut self) -> Option<(f64, E)> {
        self.heap.pop().map(|Reverse(e)| (e.t, e.ev))
    }

    /// When the earliest event fires.
    #[inline]
    pub fn peek_time(&self) -> Option<f64> {
        self.heap.peek().map(|Reverse(e)| e.t)
    }

    /// Events scheduled and not yet fired.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is scheduled.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// A simulation model driven by [`drive`]: the worker-pool engine, the database server, and
/// next the multi-stage TAM model.
pub trait Model {
    /// The model's event.
    type Event: Copy;
    /// Whether [`Model::settle`] runs (after the last event of each instant).
    const SETTLES: bool = false;
    /// The model's event queue.
    fn queue(&mut self) -> &mut EventQueue<Self::Event>;
    /// Handle one event at time `now`.
    fn handle(&mut self, now: f64, ev: Self::Event) -> Result<(), SimError>;
    /// Called once every event at `now` has been handled (only when `SETTLES`): the place to
    /// let idle servers pick work after all same-instant arrivals are queued.
    fn settle(&mut self, _now: f64) -> Result<(), SimError> {
        Ok(())
    }
    /// Events processed so far (a model may count more than it pops).
    fn events(&self) -> u64;
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
        if M::SETTLES && m.queue().peek_time() != Some(now) {
            m.settle(now)?;
        }
        popped += 1;
        if popped >= next_report {
            next_report = popped + (1 << 16);
            progress(now / end);
            if m.events() > max_events {
                return Err(SimError::event_cap(format!(
                    "stopped at t = {now:.6} s after {} events: more than the cap of \
                     {max_events} (raise it with --max-events, or shorten the run)",
                    m.events()
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
}
