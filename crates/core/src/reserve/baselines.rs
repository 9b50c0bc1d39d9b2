//! The paper's baselines (§3.3, §6.1): deficit round robin with the schedule-once heuristic,
//! EDF with Atropos deadlines, and best effort.

use super::{LdfOptions, Pick, ReserveScheduler, SlotState};

/// DRR's active list: a circular doubly linked list of tenants with ready tasks and a cursor.
/// A newly active tenant goes just behind the cursor, so it waits for the rest of the round.
/// §3.3 says "next to the current element"; we take the reading under which "a highly
/// CPU-deficient tenant [that] appears late in the round robin order" waits, as the paper
/// describes. (Right after the cursor, the other reading, makes DRR indistinguishable from
/// LDF in Table 1.)
#[derive(Clone, Debug, Default)]
pub(super) struct Ring {
    next: Vec<usize>,
    prev: Vec<usize>,
    cursor: Option<usize>,
    len: usize,
}

impl Ring {
    pub fn grow(&mut self) {
        let i = self.next.len();
        self.next.push(i);
        self.prev.push(i);
    }

    pub fn insert(&mut self, t: usize) {
        match self.cursor {
            None => {
                self.next[t] = t;
                self.prev[t] = t;
                self.cursor = Some(t);
            }
            Some(c) => {
                // Just behind the cursor: the new tenant waits for the rest of the round.
                let p = self.prev[c];
                self.next[p] = t;
                self.prev[t] = p;
                self.next[t] = c;
                self.prev[c] = t;
            }
        }
        self.len += 1;
    }

    pub fn remove(&mut self, t: usize) {
        if self.next[t] == t {
            self.cursor = None;
        } else {
            let (p, n) = (self.prev[t], self.next[t]);
            self.next[p] = n;
            self.prev[n] = p;
            if self.cursor == Some(t) {
                self.cursor = Some(n);
            }
        }
        self.next[t] = t;
        self.prev[t] = t;
        self.len -= 1;
    }

    fn advance(&mut self) {
        if let Some(c) = self.cursor {
            self.cursor = Some(self.next[c]);
        }
    }
}

impl<T> ReserveScheduler<T> {
    /// §3.3: look at the tenant under the cursor. At `MaxCPU`: move on. Deficit > 0: run it and
    /// stay (it keeps the CPU while deficient). Deficit ≤ 0 and `ResCPU < MaxCPU`: run it once
    /// and move on (the schedule-once heuristic). Otherwise move on. After a whole round
    /// without a choice (every tenant at its limit), idle until the first falls below it.
    pub(super) fn select_drr(&mut self, o: LdfOptions, now: f64) -> Pick {
        let mut retry = f64::INFINITY;
        for _ in 0..self.ring.len {
            let Some(t) = self.ring.cursor else { break };
            match self.eval(t, o, now) {
                Err(at) => {
                    retry = retry.min(at);
                    self.ring.advance();
                }
                Ok((d, _)) => {
                    if d > 0.0 {
                        return Pick::Tenant(t);
                    }
                    let terms = &self.tenants[t].terms;
                    self.ring.advance();
                    if terms.res_cpu < terms.max_cpu {
                        return Pick::Tenant(t);
                    }
                }
            }
        }
        // A round without a choice while some tenant is below its limit only happens with the
        // revenue deficit (d = 0 below the reservation): stay work-conserving.
        for _ in 0..self.ring.len {
            let Some(t) = self.ring.cursor else { break };
            if self.eval(t, o, now).is_ok() {
                self.ring.advance();
                return Pick::Tenant(t);
            }
            self.ring.advance();
        }
        Pick::Retry(retry)
    }

    /// EDF (Atropos, §6.1): deadline = end of the tenant's interval − its deficit
    /// `(ResCPU − CPU)` in time, smallest first, among tenants below `MaxCPU`. Not aware of
    /// elastic reservations, prices or weights.
    pub(super) fn select_edf(&mut self, now: f64) -> Pick {
        let mut best: Option<(usize, f64)> = None;
        let mut retry = f64::INFINITY;
        let cores = self.cores as f64;
        for k in 0..self.active.len() {
            let t = self.active[k];
            self.examined += 1;
            self.meter.sync(t, now);
            let u = self.meter.usage(t);
            let cpu = u.cpu(now, cores);
            let terms = &self.tenants[t].terms;
            if cpu >= terms.max_cpu {
                retry = retry.min(u.below_at(terms.max_cpu, now, cores).unwrap_or(now));
                continue;
            }
            let deadline = u.end() - (terms.res_cpu - cpu) / 100.0 * u.len;
            self.tenants[t].deficit = terms.res_cpu - cpu;
            let better = match best {
                None => true,
                Some((b, bd)) => {
                    deadline < bd || (deadline == bd && self.tenants[t].id < self.tenants[b].id)
                }
            };
            if better {
                best = Some((t, deadline));
            }
        }
        match best {
            Some((t, _)) => Pick::Tenant(t),
            None => Pick::Retry(retry),
        }
    }

    /// No reservations: the oldest ready task of any tenant; limits do not apply.
    pub(super) fn select_fifo(&mut self) -> Pick {
        while let Some(ticket) = self.fifo.pop_front() {
            let i = ticket.slot() as usize;
            let s = &self.slots[i];
            if s.generation == ticket.generation() && s.state == SlotState::Queued {
                self.examined += 1;
                // Per-tenant order is arrival order, so this task heads its tenant's queue.
                return Pick::Tenant(s.tenant);
            }
        }
        Pick::Retry(self.now)
    }
}
