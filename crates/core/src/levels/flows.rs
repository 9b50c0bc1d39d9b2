//! A level's tables: its flows (what its fair scheduler shares among, named to it by flow
//! ids: a small tenant's own id for its default flow, so that neither enqueue nor dispatch
//! reads a table for it) and its seats (the worker numbers its fair scheduler sees).

use crate::types::TenantId;
use crate::util::FxHashMap;

/// Tenant ids below this whose default flow (distinguisher 0) the level knows use their own
/// id as the flow id: the level's fair scheduler sees the tenant itself, and finding the
/// flow is one bit. Every other flow gets an id at or above this.
pub(crate) const IDENTITY: u64 = 4096;

/// One flow: a tenant, plus a distinguisher.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flow {
    pub tenant: TenantId,
    pub distinguisher: u64,
}

/// Flows of one level, by id (the `TenantId` the level's fair scheduler sees). A small
/// tenant's default flow has the tenant's id; the other flows have ids from [`IDENTITY`]
/// up, given in order of first appearance and reused after a flow is removed.
#[derive(Debug, Default)]
pub(crate) struct Flows {
    /// Bit `t`: tenant `t`'s default flow is known (flow id `t`).
    identity: Vec<u64>,
    identities: usize,
    /// The other flows: id − [`IDENTITY`] by flow, and the flow by id − [`IDENTITY`]
    /// (`None` once removed: the id is then free).
    index: FxHashMap<(u64, u64), u32>,
    info: Vec<Option<Flow>>,
    free: Vec<u32>,
}

impl Flows {
    #[inline]
    pub fn get(&self, tenant: TenantId, distinguisher: u64) -> Option<u32> {
        if distinguisher == 0 && tenant.0 < IDENTITY {
            let t = tenant.0 as usize;
            let word = self.identity.get(t / 64).copied().unwrap_or(0);
            return (word & (1 << (t % 64)) != 0).then_some(t as u32);
        }
        let k = self.index.get(&(tenant.0, distinguisher)).copied()?;
        Some(IDENTITY as u32 + k)
    }

    /// Add a flow that [`get`](Flows::get) does not know.
    pub fn insert(&mut self, flow: Flow) -> u32 {
        if flow.distinguisher == 0 && flow.tenant.0 < IDENTITY {
            let t = flow.tenant.0 as usize;
            if self.identity.len() <= t / 64 {
                self.identity.resize(t / 64 + 1, 0);
            }
            self.identity[t / 64] |= 1 << (t % 64);
            self.identities += 1;
            return t as u32;
        }
        let k = match self.free.pop() {
            Some(k) => {
                self.info[k as usize] = Some(flow);
                k
            }
            None => {
                self.info.push(Some(flow));
                (self.info.len() - 1) as u32
            }
        };
        self.index.insert((flow.tenant.0, flow.distinguisher), k);
        IDENTITY as u32 + k
    }

    /// Forget flow `id`.
    pub fn remove(&mut self, id: u32) {
        if u64::from(id) < IDENTITY {
            let (w, bit) = (id as usize / 64, 1 << (id % 64));
            if let Some(word) = self.identity.get_mut(w).filter(|w| **w & bit != 0) {
                *word &= !bit;
                self.identities -= 1;
            }
            return;
        }
        let k = id - IDENTITY as u32;
        if let Some(flow) = self.info.get_mut(k as usize).and_then(Option::take) {
            self.index.remove(&(flow.tenant.0, flow.distinguisher));
            self.free.push(k);
        }
    }

    /// The flow behind an id, if known.
    #[inline]
    pub fn flow(&self, id: u32) -> Option<Flow> {
        if u64::from(id) < IDENTITY {
            let tenant = TenantId(u64::from(id));
            return self.get(tenant, 0).map(|_| Flow {
                tenant,
                distinguisher: 0,
            });
        }
        self.info
            .get((id - IDENTITY as u32) as usize)
            .copied()
            .flatten()
    }

    /// The flow behind the id of one of its requests (so a known one): a small tenant's
    /// default flow without a read.
    #[inline]
    pub fn of_request(&self, id: TenantId) -> Flow {
        let identity = Flow {
            tenant: id,
            distinguisher: 0,
        };
        if id.0 < IDENTITY {
            return identity;
        }
        let k = (id.0 - IDENTITY) as usize;
        self.info.get(k).copied().flatten().unwrap_or(identity)
    }

    /// How many flows are known.
    pub fn len(&self) -> usize {
        self.identities + self.info.len() - self.free.len()
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
        let flow = |t: u64, d: u64| Flow {
            tenant: TenantId(t),
            distinguisher: d,
        };
        let mut f = Flows::default();
        let a = f.insert(flow(3, 0));
        let b = f.insert(flow(3, 9));
        let c = f.insert(flow(1 << 40, 0));
        let e = f.insert(flow(IDENTITY, 0));
        let i = IDENTITY as u32;
        assert_eq!((a, b, c, e), (3, i, i + 1, i + 2));
        assert_eq!(f.get(TenantId(3), 0), Some(3));
        assert_eq!(f.get(TenantId(3), 9), Some(i));
        assert_eq!(f.get(TenantId(1 << 40), 0), Some(i + 1));
        assert_eq!(f.get(TenantId(IDENTITY), 0), Some(i + 2));
        assert_eq!(f.get(TenantId(4), 0), None);
        assert_eq!(f.get(TenantId(2), 0), None);
        assert_eq!(f.flow(3), Some(flow(3, 0)));
        assert_eq!(f.flow(4), None);
        assert_eq!(f.of_request(TenantId(3)), flow(3, 0));
        assert_eq!(f.of_request(TenantId(u64::from(i))), flow(3, 9));
        assert_eq!(f.len(), 4);
        f.remove(i);
        assert_eq!(f.get(TenantId(3), 9), None);
        assert_eq!(f.len(), 3);
        f.remove(3);
        f.remove(3);
        assert_eq!((f.get(TenantId(3), 0), f.len()), (None, 2));
        let d = f.insert(flow(7, 1));
        assert_eq!(d, i);
        assert_eq!(f.flow(i), Some(flow(7, 1)));
        assert_eq!(f.of_request(TenantId(u64::from(i))), flow(7, 1));
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
