//! The eager meter, kept as the lazy meter's test reference (`meter_tests.rs`): the same
//! accounts (`account.rs`), but at every event each tenant with ready tasks accrues
//! `min(q, R − r)` core-seconds of delay per second since the last event — the definition
//! of `Delay_i` in [`super::meter`]'s module docs, summed event by event.

use super::account::{Book, MeterReading, MeterRecord, Terms};
use crate::types::{Error, TenantId};

/// The eager meter: the same interface as [`super::Meter`], O(tenants with ready tasks) per
/// event. Intervals are recorded in closing order.
#[derive(Clone, Debug)]
pub struct Meter {
    book: Book,
    /// Tenants with ready tasks, and each tenant's position in it.
    waiting: Vec<usize>,
    pos: Vec<usize>,
}

const NOT_WAITING: usize = usize::MAX;

impl Meter {
    /// A meter for a server of `cores` cores (≥ 1).
    pub fn new(cores: usize) -> Self {
        Meter {
            book: Book::new(cores),
            waiting: Vec::new(),
            pos: Vec::new(),
        }
    }

    /// Start metering a tenant.
    pub fn add_tenant(&mut self, id: TenantId, terms: Terms, now: f64) -> Result<usize, Error> {
        let t = self.book.add(id, terms, now)?;
        self.pos.push(NOT_WAITING);
        Ok(t)
    }

    /// Change a tenant's terms.
    pub fn set_terms(&mut self, t: usize, terms: Terms) -> Result<bool, Error> {
        self.book.set_terms(t, terms)
    }

    /// The tenant got a ready task.
    pub fn enqueued(&mut self, t: usize, now: f64) {
        if self.enter(t, now) {
            self.book.enqueue(t);
            if self.book.tenants[t].queued == 1 {
                self.pos[t] = self.waiting.len();
                self.waiting.push(t);
            }
        }
    }

    /// A ready task left without running.
    pub fn cancelled(&mut self, t: usize, now: f64) {
        if self.enter(t, now) {
            self.unqueue(t);
        }
    }

    /// One of the tenant's ready tasks started on a core.
    pub fn started(&mut self, t: usize, now: f64) {
        if self.enter(t, now) {
            self.unqueue(t);
            self.book.start(t);
        }
    }

    /// A task of the tenant left its core.
    pub fn finished(&mut self, t: usize, start: f64, used: f64, now: f64) {
        if self.enter(t, now) {
            self.book.finish(t, start, used);
        }
    }

    /// Bring every tenant up to `now`, closing the intervals that ended.
    pub fn close_through(&mut self, now: f64) {
        self.advance(now);
        self.book.touch_all();
    }

    /// Closed intervals collected so far (in closing order), emptied.
    pub fn take_records(&mut self) -> Vec<MeterRecord> {
        std::mem::take(&mut self.book.records)
    }

    /// The tenant's meter so far (`None` for an unknown handle).
    pub fn reading(&mut self, t: usize, now: f64) -> Option<MeterReading> {
        self.enter(t, now).then(|| self.book.reading(t))
    }

    /// Bring the meter to `now` and the tenant's intervals up to date; `false` for a handle
    /// never issued.
    fn enter(&mut self, t: usize, now: f64) -> bool {
        if t >= self.book.tenants.len() {
            return false;
        }
        self.advance(now);
        self.book.touch(t);
        true
    }

    fn unqueue(&mut self, t: usize) {
        if self.book.unqueue(t) {
            let p = self.pos[t];
            self.waiting.swap_remove(p);
            if let Some(&moved) = self.waiting.get(p) {
                self.pos[moved] = p;
            }
            self.pos[t] = NOT_WAITING;
        }
    }

    /// Accrue the delay of every waiting tenant from the last event to `now` (rates are
    /// constant in between), closing intervals on the way.
    fn advance(&mut self, now: f64) {
        let from = self.book.last;
        let now = if now > from { now } else { from };
        if now > from {
            for k in 0..self.waiting.len() {
                let t = self.waiting[k];
                let m = &self.book.tenants[t];
                let others = self.book.running_total.saturating_sub(m.usage.running);
                let rate = m.queued.min(others) as f64;
                let mut at = from;
                let mut rolls = 0;
                while now >= self.book.tenants[t].usage.end() {
                    let usage = &mut self.book.tenants[t].usage;
                    if !usage.may_roll(rolls) {
                        usage.jump(now);
                        at = usage.start.min(now);
                        self.book.tenants[t].delay = 0.0;
                        break;
                    }
                    let end = usage.end();
                    self.book.tenants[t].delay += rate * (end - at);
                    self.book.roll(t);
                    at = end;
                    rolls += 1;
                }
                self.book.tenants[t].delay += rate * (now - at);
            }
        }
        self.book.last = now;
    }
}
