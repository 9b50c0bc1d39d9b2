//! Small internal tools: a fast hasher for integer keys, an indexed heap, a deterministic RNG.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash (rustc's hasher): one multiply per word; plenty for integer keys we choose.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64)
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(crate) type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// `(key, tie)` ordering used by every queue of the crate: the smaller key first, equal keys by
/// the smaller tie-breaker (the tenant id).
#[inline]
pub(crate) fn before(key_a: f64, tie_a: u64, key_b: f64, tie_b: u64) -> bool {
    key_a < key_b || (key_a == key_b && tie_a < tie_b)
}

const ABSENT: u32 = u32::MAX;

/// A heap key: `before` is the strict order, smallest first.
pub(crate) trait HeapKey: Copy {
    fn before(&self, other: &Self) -> bool;
}

/// `(key, tie)`: the key, then the tie-breaker.
impl HeapKey for (f64, u64) {
    #[inline]
    fn before(&self, o: &Self) -> bool {
        before(self.0, self.1, o.0, o.1)
    }
}

/// `(key, second key, tie)`: FSFQ(D) orders by start tag, then adjusted start tag, then tenant.
impl HeapKey for (f64, f64, u64) {
    #[inline]
    fn before(&self, o: &Self) -> bool {
        self.0 < o.0 || (self.0 == o.0 && before(self.1, self.2, o.1, o.2))
    }
}

/// A binary min-heap of dense item ids keyed by `K` (by default `(f64, u64)`), with
/// O(log n) update and removal of any item.
#[derive(Clone, Debug)]
pub(crate) struct IndexedHeap<K = (f64, u64)> {
    heap: Vec<(K, u32)>,
    pos: Vec<u32>,
}

impl<K> Default for IndexedHeap<K> {
    fn default() -> Self {
        IndexedHeap {
            heap: Vec::new(),
            pos: Vec::new(),
        }
    }
}

impl IndexedHeap<(f64, u64)> {
    /// The smallest item and its key.
    pub fn peek(&self) -> Option<(u32, f64)> {
        self.heap.first().map(|&((k, _), i)| (i, k))
    }

    /// Insert `item`, or move it to its new key.
    pub fn set(&mut self, item: u32, key: f64, tie: u64) {
        self.set_key(item, (key, tie));
    }
}

impl<K: HeapKey> IndexedHeap<K> {
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    pub fn contains(&self, item: u32) -> bool {
        self.pos.get(item as usize).is_some_and(|&p| p != ABSENT)
    }

    /// The smallest item and its full key.
    pub fn peek_key(&self) -> Option<(u32, K)> {
        self.heap.first().map(|&(k, i)| (i, k))
    }

    /// Insert `item`, or move it to its new key.
    #[inline]
    pub fn set_key(&mut self, item: u32, key: K) {
        let idx = item as usize;
        if idx >= self.pos.len() {
            self.pos.resize(idx + 1, ABSENT);
        }
        let p = self.pos[idx];
        if p == ABSENT {
            self.heap.push((key, item));
            let at = self.heap.len() - 1;
            self.up(at, (key, item));
        } else {
            let p = p as usize;
            if key.before(&self.heap[p].0) {
                self.up(p, (key, item));
            } else {
                self.down(p, (key, item));
            }
        }
    }

    pub fn remove(&mut self, item: u32) {
        if !self.contains(item) {
            return;
        }
        let p = self.pos[item as usize] as usize;
        self.pos[item as usize] = ABSENT;
        let last = self.heap.pop().expect("contains implies non-empty");
        if p < self.heap.len() {
            // Re-place the former last entry at the hole: up if it beats the hole's parent,
            // else down.
            if p > 0 && last.0.before(&self.heap[(p - 1) / 2].0) {
                self.up(p, last);
            } else {
                self.down(p, last);
            }
        }
    }

    /// Put `entry` at hole `at` or above it (its key is smaller than the hole's old one).
    fn up(&mut self, mut at: usize, entry: (K, u32)) {
        let (heap, pos) = (&mut self.heap[..], &mut self.pos[..]);
        while at > 0 {
            let parent = (at - 1) / 2;
            let p = heap[parent];
            if !entry.0.before(&p.0) {
                break;
            }
            heap[at] = p;
            pos[p.1 as usize] = at as u32;
            at = parent;
        }
        heap[at] = entry;
        pos[entry.1 as usize] = at as u32;
    }

    /// Put `entry` at hole `at` or below it (its key is not smaller than the hole's old one).
    ///
    /// Floyd's bottom-up variant: walk the hole down to a leaf along the smaller children
    /// (one comparison per level, not two), then let the entry climb back up. A tag that
    /// grows after a dispatch usually belongs near the bottom, so the climb is short. Keys
    /// are compared by a strict total order (ties by tenant id), so the smallest entry, the
    /// only one anybody reads, is the same whatever the layout.
    fn down(&mut self, mut at: usize, entry: (K, u32)) {
        let top = at;
        let (heap, pos) = (&mut self.heap[..], &mut self.pos[..]);
        let n = heap.len();
        loop {
            let l = 2 * at + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let c = if r < n && heap[r].0.before(&heap[l].0) {
                r
            } else {
                l
            };
            let ch = heap[c];
            heap[at] = ch;
            pos[ch.1 as usize] = at as u32;
            at = c;
        }
        while at > top {
            let parent = (at - 1) / 2;
            let p = heap[parent];
            if !entry.0.before(&p.0) {
                break;
            }
            heap[at] = p;
            pos[p.1 as usize] = at as u32;
            at = parent;
        }
        heap[at] = entry;
        pos[entry.1 as usize] = at as u32;
    }
}

/// SplitMix64: a deterministic generator, so that the same calls give the same decisions.
#[derive(Clone, Debug)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub fn new(seed: u64) -> Self {
        SplitMix(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_orders_by_key_then_tie_and_supports_updates() {
        let mut h = IndexedHeap::default();
        let mut rng = SplitMix::new(7);
        let mut reference: Vec<Option<(f64, u64)>> = vec![None; 50];
        for step in 0..5000 {
            let item = (rng.next_u64() % 50) as u32;
            match rng.next_u64() % 4 {
                0 => {
                    h.remove(item);
                    reference[item as usize] = None;
                }
                _ => {
                    let key = (rng.next_u64() % 20) as f64;
                    let tie = rng.next_u64() % 5;
                    h.set(item, key, tie);
                    reference[item as usize] = Some((key, tie));
                }
            }
            let expect = reference
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.map(|(k, t)| (k, t, i as u32)))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
            let got = h.peek();
            match (expect, got) {
                (None, None) => {}
                (Some((k, t, _)), Some((gi, gk))) => {
                    assert_eq!(k, gk, "step {step}");
                    assert_eq!(reference[gi as usize].unwrap().1, t, "step {step}");
                }
                other => panic!("step {step}: {other:?}"),
            }
            assert_eq!(h.len(), reference.iter().filter(|r| r.is_some()).count());
        }
    }
}
