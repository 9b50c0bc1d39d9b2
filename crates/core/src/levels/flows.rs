//! A level's tables: its flows (what its fair scheduler shares among, named to it by small
//! dense ids) and its seats (the worker numbers its fair scheduler sees).

use crate::types::TenantId;
use crate::util::FxHashMap;

/// No flow.
const NIL: u32 = u32::MAX;

/// Tenant ids below this find their default flow (distinguisher 0) in a dense table.
const DENSE: u64 = 4096;

/// One flow: a tenant, plus a distinguisher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    pub tenant: TenantId,
    pub distinguisher: u64,
}

/// Flows of one level, by dense id (the `TenantId` the level's fair scheduler sees). Ids
/// are given in order of first appearance and reused after a flow is removed.
#[derive(Debug, Default)]
pub(crate) struct Flows {
    dense: Vec<u32>,
    index: FxHashMap<(u64, u64), u32>,
    /// By id; `None` once removed (the id is then free).
    pub info: Vec<Option<Flow>>,
    free: Vec<u32>,
}

impl Flows {
    #[inline]
    pub fn get(&self, tenant: TenantId, distinguisher: u64) -> Option<u32> {
        if distinguisher == 0 && tenant.0 < DENSE {
            return self
                .dense
                .get(tenant.0 as usize)
                .copied()
                .filter(|&f| f != NIL);
        }
        self.index.get(&(tenant.0, distinguisher)).copied()
    }

    /// Add a flow that [`get`](Flows::get) does not know.
    pub fn insert(&mut self, flow: Flow) -> u32 {
        let id = match self.free.pop() {
            Some(id) => {
                self.info[id as usize] = Some(flow);
                id
            }
            None => {
                self.info.push(Some(flow));
                (self.info.len() - 1) as u32
            }
        };
        self.place(flow, id);
        id
    }

    fn place(&mut self, flow: Flow, id: u32) {
        if flow.distinguisher == 0 && flow.tenant.0 < DENSE {
            let t = flow.tenant.0 as usize;
            if self.dense.len() <= t {
                self.dense.resize(t + 1, NIL);
            }
            self.dense[t] = id;
        } else if id == NIL {
            self.index.remove(&(flow.tenant.0, flow.distinguisher));
        } else {
            self.index.insert((flow.tenant.0, flow.distinguisher), id);
        }
    }

    /// Forget flow `id`.
    pub fn remove(&mut self, id: u32) {
        if let Some(flow) = self.info.get_mut(id as usize).and_then(Option::take) {
            self.place(flow, NIL);
            self.free.push(id);
        }
    }

    /// The flow behind an id.
    #[inline]
    pub fn flow(&self, id: u32) -> Option<Flow> {
        self.info.get(id as usize).copied().flatten()
    }

    /// How many flows are known.
    pub fn len(&self) -> usize {
        self.info.len() - self.free.len()
    }
}

/// Which of a level's seats are taken: its fair scheduler's worker numbers.
#[derive(Debug, Default)]
pub(crate) struct Seats {
    busy: Vec<u64>,
}

impl Seats {
    /// Make room for seats below `below`.
    pub fn reserve(&mut self, below: usize) {
        let words = below.div_ceil(64);
        if self.busy.len() < words {
            self.busy.resize(words, 0);
        }
    }

    /// Take the lowest free seat below `below` (at most what was [`reserve`](Seats::reserve)d).
    #[inline]
    pub fn take(&mut self, below: usize) -> Option<usize> {
        if below <= 64 {
            // One word holds every seat: the usual case.
            let word = self.busy.first_mut()?;
            let seat = word.trailing_ones() as usize;
            if seat >= below {
                return None;
            }
            *word |= 1 << seat;
            return Some(seat);
        }
        let words = below.div_ceil(64).min(self.busy.len());
        for (w, word) in self.busy[..words].iter_mut().enumerate() {
            let seat = w * 64 + word.trailing_ones() as usize;
            if seat < below && word.trailing_ones() < 64 {
                *word |= 1 << (seat % 64);
                return Some(seat);
            }
        }
        None
    }

    /// Give seat `seat` back.
    #[inline]
    pub fn release(&mut self, seat: usize) {
        if let Some(word) = self.busy.get_mut(seat / 64) {
            *word &= !(1 << (seat % 64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flows_reuse_ids_and_find_both_ways() {
        let mut f = Flows::default();
        let a = f.insert(Flow {
            tenant: TenantId(3),
            distinguisher: 0,
        });
        let b = f.insert(Flow {
            tenant: TenantId(3),
            distinguisher: 9,
        });
        let c = f.insert(Flow {
            tenant: TenantId(1 << 40),
            distinguisher: 0,
        });
        assert_eq!((a, b, c), (0, 1, 2));
        assert_eq!(f.get(TenantId(3), 0), Some(0));
        assert_eq!(f.get(TenantId(3), 9), Some(1));
        assert_eq!(f.get(TenantId(1 << 40), 0), Some(2));
        assert_eq!(f.get(TenantId(4), 0), None);
        f.remove(1);
        assert_eq!(f.get(TenantId(3), 9), None);
        assert_eq!(f.len(), 2);
        let d = f.insert(Flow {
            tenant: TenantId(7),
            distinguisher: 1,
        });
        assert_eq!(d, 1);
        assert_eq!(
            f.flow(1),
            Some(Flow {
                tenant: TenantId(7),
                distinguisher: 1
            })
        );
    }

    #[test]
    fn seats_are_the_lowest_free_below_the_bound() {
        let mut s = Seats::default();
        assert_eq!(s.take(2), None); // nothing reserved
        s.reserve(130);
        assert_eq!(s.take(0), None);
        assert_eq!((s.take(2), s.take(2), s.take(2)), (Some(0), Some(1), None));
        s.release(0);
        assert_eq!(s.take(2), Some(0));
        for i in 2..130 {
            assert_eq!(s.take(130), Some(i));
        }
        assert_eq!(s.take(130), None);
        s.release(100);
        assert_eq!(s.take(100), None);
        assert_eq!(s.take(101), Some(100));
    }
}
