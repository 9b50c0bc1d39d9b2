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
/// the smaller tie-breaker (the tenant id). The queues use [`Tag`], which packs it into
/// integers; this float form is the tests' reference.
#[cfg(test)]
pub(crate) fn before(key_a: f64, tie_a: u64, key_b: f64, tie_b: u64) -> bool {
    key_a < key_b || (key_a == key_b && tie_a < tie_b)
}

const ABSENT: u32 = u32::MAX;

/// A heap key: `before` is the strict order, smallest first.
pub(crate) trait HeapKey: Copy {
    fn before(&self, other: &Self) -> bool;
}

/// A `(key, tie)` pair packed so that one 128-bit integer comparison is [`before`]: the
/// key's bits mapped to an unsigned integer of the same order (flip every bit of a negative,
/// the sign bit of a positive), then the tie-breaker. One compare-and-borrow instead of two
/// float comparisons and a tie branch per heap level; ties are common (equal tags of
/// tenants served in the same round). `-0.0` is stored as `0.0`, which `before` treats as
/// equal to it anyway; tags are never NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    key: u64,
    tie: u64,
}

impl Tag {
    /// A placeholder (the key 0.0, tie 0).
    pub const ZERO: Tag = Tag {
        key: 1 << 63,
        tie: 0,
    };

    #[inline]
    pub fn new(key: f64, tie: u64) -> Self {
        let b = (key + 0.0).to_bits(); // -0.0 + 0.0 = 0.0
        let key = if b >> 63 == 1 { !b } else { b | 1 << 63 };
        Tag { key, tie }
    }

    /// The float key.
    #[inline]
    pub fn key(self) -> f64 {
        let k = self.key;
        f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
    }

    /// The packed order as one integer: `a.before(b)` is `a.wide() < b.wide()`.
    #[inline]
    pub fn wide(self) -> u128 {
        (u128::from(self.key) << 64) | u128::from(self.tie)
    }

    /// The tie-breaker.
    #[inline]
    pub fn tie(self) -> u64 {
        self.tie
    }

    /// The tag whose [`wide`](Tag::wide) form is `w`.
    #[inline]
    pub fn from_wide(w: u128) -> Self {
        Tag {
            key: (w >> 64) as u64,
            tie: w as u64,
        }
    }
}

impl HeapKey for Tag {
    #[inline]
    fn before(&self, o: &Self) -> bool {
        self.wide() < o.wide()
    }
}

/// `(key, second key, tie)`: FSFQ(D) orders by start tag, then adjusted start tag, then
/// tenant. Packed like [`Tag`]: integer comparisons only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag3 {
    key: u64,
    mid: u64,
    tie: u64,
}

impl Tag3 {
    #[inline]
    pub fn new(key: f64, mid: f64, tie: u64) -> Self {
        Tag3 {
            key: Tag::new(key, 0).key,
            mid: Tag::new(mid, 0).key,
            tie,
        }
    }

    /// The first key.
    #[inline]
    pub fn key(self) -> f64 {
        Tag {
            key: self.key,
            tie: 0,
        }
        .key()
    }
}

impl HeapKey for Tag3 {
    #[inline]
    fn before(&self, o: &Self) -> bool {
        self.key < o.key
            || (self.key == o.key
                && (u128::from(self.mid) << 64 | u128::from(self.tie))
                    < (u128::from(o.mid) << 64 | u128::from(o.tie)))
    }
}

/// A binary min-heap of dense item ids keyed by `K` (by default `(f64, u64)`), with
/// O(log n) update and removal of any item.
#[derive(Clone, Debug)]
pub(crate) struct IndexedHeap<K = Tag> {
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

impl IndexedHeap<Tag> {
    /// The smallest item and its key.
    #[inline]
    pub fn peek(&self) -> Option<(u32, f64)> {
        self.heap.first().map(|&(k, i)| (i, k.key()))
    }

    /// Insert `item`, or move it to its new key.
    #[inline]
    pub fn set(&mut self, item: u32, key: f64, tie: u64) {
        self.set_key(item, Tag::new(key, tie));
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

    /// Every item and its key, in heap order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, K)> + '_ {
        self.heap.iter().map(|&(k, i)| (i, k))
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
    fn up(&mut self, at: usize, entry: (K, u32)) {
        climb(&mut self.heap, &mut self.pos, at, 0, entry);
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
        // Both children exist: take the smaller without a branch.
        while 2 * at + 2 < n {
            let l = 2 * at + 1;
            let c = l + usize::from(heap[l + 1].0.before(&heap[l].0));
            let ch = heap[c];
            heap[at] = ch;
            pos[ch.1 as usize] = at as u32;
            at = c;
        }
        // Only a left child.
        if 2 * at + 1 < n {
            let c = 2 * at + 1;
            let ch = heap[c];
            heap[at] = ch;
            pos[ch.1 as usize] = at as u32;
            at = c;
        }
        climb(heap, pos, at, top, entry);
    }
}

/// Let `entry` climb from hole `at` towards `top` (an ancestor) past the parents it beats,
/// and put it where it stops.
#[inline]
fn climb<K: HeapKey>(
    heap: &mut [(K, u32)],
    pos: &mut [u32],
    mut at: usize,
    top: usize,
    entry: (K, u32),
) {
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

impl IndexedHeap<Tag> {
    /// The key `item` is stored under, if it is in the heap.
    #[cfg(test)]
    pub fn key_of(&self, item: u32) -> Option<f64> {
        match self.pos.get(item as usize) {
            Some(&p) if p != ABSENT => Some(self.heap[p as usize].0.key()),
            _ => None,
        }
    }

    /// Give every item the key `key(item)` and restore the heap order in O(n) (Floyd's
    /// heap construction), cheaper than n single updates when most keys changed.
    pub fn rekey_all(&mut self, mut key: impl FnMut(u32) -> f64) {
        for e in self.heap.iter_mut() {
            e.0 = Tag::new(key(e.1), u64::from(e.1));
        }
        for i in (0..self.heap.len() / 2).rev() {
            let e = self.heap[i];
            self.down(i, e);
        }
    }
}

/// The smallest of per-item values, for a caller that only asks whether it lies above a
/// bound (WFQ's approximate clock lifts `v` to the smallest backlogged start tag, and that
/// lift is almost always a no-op). Raising a value costs O(1): the heap keeps the old key as
/// a lower bound, and a query settles stale keys only when it must. Lowering or inserting a
/// value updates the heap at once, so every key stays a lower bound of its item's value.
#[derive(Clone, Debug, Default)]
pub(crate) struct LazyMin {
    /// Items by a lower bound of their value (ties by item: only the values are read).
    heap: IndexedHeap,
    /// Each item's value (meaningful while it is in the heap).
    value: Vec<f64>,
    /// Each item's key in the heap, NaN when absent (a copy: no heap lookup per update).
    bound: Vec<f64>,
    /// Items in the heap whose key is below their value.
    stale: usize,
}

impl LazyMin {
    /// Set `item`'s value to `x` (inserting it if absent). `x` is never NaN.
    #[inline]
    pub fn set(&mut self, item: u32, x: f64) {
        let i = item as usize;
        if i >= self.value.len() {
            self.value.resize(i + 1, 0.0);
            self.bound.resize(i + 1, f64::NAN);
        }
        let old = std::mem::replace(&mut self.value[i], x);
        let k = self.bound[i];
        // Comparisons with an absent item's NaN key are false: it is inserted.
        if x >= k {
            // The key stays a lower bound.
            self.stale = self.stale + usize::from(x > k) - usize::from(old > k);
        } else {
            self.stale -= usize::from(old > k);
            self.heap.set(item, x, u64::from(item));
            self.bound[i] = x;
        }
    }

    /// `item`'s value (meaningful while it is present).
    pub fn value(&self, item: u32) -> f64 {
        self.value[item as usize]
    }

    /// Take `item` out.
    #[inline]
    pub fn remove(&mut self, item: u32) {
        let i = item as usize;
        if let Some(&k) = self.bound.get(i).filter(|k| !k.is_nan()) {
            self.stale -= usize::from(self.value[i] > k);
            self.heap.remove(item);
            self.bound[i] = f64::NAN;
        }
    }

    /// `max(v, smallest value)` (`v` when empty). `witness`: an item whose value, if it is
    /// present and at most `v`, shows the answer is `v` without looking further.
    #[inline]
    pub fn lift(&mut self, v: f64, witness: Option<u32>) -> f64 {
        if let Some(w) = witness {
            if self.heap.contains(w) && self.value[w as usize] <= v {
                return v;
            }
        }
        while let Some((i, k)) = self.heap.peek() {
            let x = self.value[i as usize];
            if x <= v {
                return v; // some value is at most v
            }
            if x == k {
                // A settled top: every other value is at least its key, at least k.
                return k;
            }
            // Stale: settle it and look again; or settle all at once when that is cheaper
            // than one update each (all tenants of a round raised since the last lift).
            if self.stale * 8 > self.heap.len() {
                let (value, bound) = (&self.value, &mut self.bound);
                self.heap.rekey_all(|j| {
                    bound[j as usize] = value[j as usize];
                    value[j as usize]
                });
                self.stale = 0;
            } else {
                self.heap.set(i, x, u64::from(i));
                self.bound[i as usize] = x;
                self.stale -= 1;
            }
        }
        v
    }
}

/// A winner (tournament) tree over dense item ids: the item with the smallest key, where a
/// key is a packed order (a [`Tag`]'s [`wide`](Tag::wide) form, or any `u128` below
/// [`WinnerTree::ABSENT`]) and the keys of present items are distinct (a strict order).
///
/// Leaf `cap + i` holds item `i`'s key, every inner node the smallest key below it and its
/// item; node 1 is the root, node `n`'s children are `2n` and `2n + 1`. Against
/// [`IndexedHeap`] at a hundred items: the smallest item is read from the root without
/// indirection, and a key that grows (a dispatched tenant's finish tag, a GPS flow's next
/// departure) rewrites only the nodes it was winning, one compare and a branch-free pick
/// each on the way up, with no position table to keep and no data-dependent branch beyond
/// the stop. A key that shrinks climbs until a smaller winner stops it. Its depth follows
/// the largest item id rather than the number present, so it suits a dense id space (a
/// book's tenant slots, a clock's flows).
#[derive(Clone, Debug, Default)]
pub(crate) struct WinnerTree {
    /// By node: its winner (an empty subtree's key is [`WinnerTree::ABSENT`]). One array,
    /// so a level's match reads one entry per side.
    node: Vec<Node>,
    /// Leaves: 0, or a power of two.
    cap: usize,
    /// Items present.
    len: usize,
}

/// A node's winner: its key, split in halves (24 bytes, not the 32 a `u128` field's
/// alignment would take), and its item (meaningful where the key is not absent).
#[derive(Clone, Copy, Debug)]
struct Node {
    hi: u64,
    lo: u64,
    item: u32,
}

impl Node {
    #[inline]
    fn key(self) -> u128 {
        (u128::from(self.hi) << 64) | u128::from(self.lo)
    }

    #[inline]
    fn new(key: u128, item: u32) -> Self {
        Node {
            hi: (key >> 64) as u64,
            lo: key as u64,
            item,
        }
    }
}

impl WinnerTree {
    /// An empty leaf's key, above every real key.
    pub const ABSENT: u128 = u128::MAX;

    /// The item with the smallest key, and that key.
    #[inline]
    pub fn peek(&self) -> Option<(u32, u128)> {
        let root = *self.node.get(1)?;
        (root.key() != Self::ABSENT).then_some((root.item, root.key()))
    }

    /// The smallest key ([`WinnerTree::ABSENT`] when empty), without its item.
    #[inline]
    pub fn min_key(&self) -> u128 {
        self.node.get(1).map_or(Self::ABSENT, |r| r.key())
    }

    /// Items present.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no item is present.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `item`'s key, if it is present.
    #[cfg(test)]
    pub fn get(&self, item: u32) -> Option<u128> {
        let i = item as usize;
        (i < self.cap)
            .then(|| self.node[self.cap + i].key())
            .filter(|&k| k != Self::ABSENT)
    }

    /// Every item present and its key, by item.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u128)> + '_ {
        let leaves = self.node.get(self.cap..).unwrap_or(&[]);
        (0u32..)
            .zip(leaves)
            .map(|(i, n)| (i, n.key()))
            .filter(|&(_, k)| k != Self::ABSENT)
    }

    /// Insert `item` with `key` (below [`WinnerTree::ABSENT`]), or move it to `key`.
    #[inline]
    pub fn set(&mut self, item: u32, key: u128) {
        let i = item as usize;
        if i >= self.cap {
            self.grow(i);
        }
        let leaf = self.cap + i;
        let old = std::mem::replace(&mut self.node[leaf], Node::new(key, item)).key();
        self.len += usize::from(old == Self::ABSENT);
        self.replace(leaf, item, old, key);
    }

    /// Take `item` out (nothing if absent).
    #[inline]
    pub fn remove(&mut self, item: u32) {
        let i = item as usize;
        if i >= self.cap || self.node[self.cap + i].key() == Self::ABSENT {
            return;
        }
        let leaf = self.cap + i;
        let old = std::mem::replace(&mut self.node[leaf], Node::new(Self::ABSENT, item)).key();
        self.len -= 1;
        self.replace(leaf, item, old, Self::ABSENT);
    }

    /// Leaf `leaf` (item `it`)'s key went from `old` to `new`: fix the winners above it.
    #[inline]
    fn replace(&mut self, leaf: usize, it: u32, old: u128, new: u128) {
        let node = &mut self.node[..];
        let mut n = leaf;
        if new < old {
            // Smaller: it wins every node up to the first whose winner is smaller still
            // (above that one nothing changes).
            while n > 1 {
                n /= 2;
                if new < node[n].key() {
                    node[n] = Node::new(new, it);
                } else {
                    break;
                }
            }
        } else {
            // Larger: only the nodes this item was winning need a new winner (a node's item
            // is its winner's, and keys are distinct). Replay the match at each: the
            // winner so far from below against the sibling's winner, one compare and a few
            // conditional moves a level, the winner carried in registers.
            // Which side wins is data (a coin flip near the root), so no branch on it; the
            // length is a power of two, so masked indices need no bounds check.
            let mask = node.len() - 1;
            let mut win = Node::new(new, it);
            while n > 1 {
                let sib = node[(n ^ 1) & mask];
                n /= 2;
                let at = &mut node[n & mask];
                if at.item != it {
                    break;
                }
                win = std::hint::select_unpredictable(sib.key() < win.key(), sib, win);
                *at = win;
            }
        }
    }

    /// Room for item `i`: double the leaves and rebuild the inner nodes.
    #[cold]
    fn grow(&mut self, i: usize) {
        let cap = (i + 1).next_power_of_two().max(8);
        let mut node: Vec<Node> = (0..2 * cap)
            .map(|n| Node::new(Self::ABSENT, n.saturating_sub(cap) as u32))
            .collect();
        if self.cap > 0 {
            node[cap..cap + self.cap].copy_from_slice(&self.node[self.cap..]);
        }
        for n in (1..cap).rev() {
            let (l, r) = (node[2 * n], node[2 * n + 1]);
            node[n] = if r.key() < l.key() { r } else { l };
        }
        self.node = node;
        self.cap = cap;
    }
}

pub(crate) use crate::splitmix::SplitMix;

/// `cases` proptest cases, or `PROPTEST_CASES` when it is set (to run many more once, as
/// before a commit: proptest's own env override does not reach an explicit `with_cases`).
#[cfg(test)]
pub(crate) fn proptest_cases(cases: u32) -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    proptest::test_runner::Config::with_cases(cases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_tags_order_like_before_and_round_trip() {
        let mut rng = SplitMix::new(19);
        let special = [
            0.0,
            -0.0,
            1.0,
            -1.0,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            1e300,
            -1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        let pick = |rng: &mut SplitMix| -> f64 {
            match rng.next_u64() % 3 {
                0 => special[(rng.next_u64() % special.len() as u64) as usize],
                1 => (rng.next_u64() % 7) as f64 - 3.0,
                _ => f64::from_bits(rng.next_u64()) % 1e6, // any finite value, NaN-free below
            }
        };
        for _ in 0..20_000 {
            let (a, b) = (pick(&mut rng), pick(&mut rng));
            if a.is_nan() || b.is_nan() {
                continue;
            }
            let (ta, tb) = (rng.next_u64() % 3, rng.next_u64() % 3);
            assert_eq!(
                Tag::new(a, ta).before(&Tag::new(b, tb)),
                before(a, ta, b, tb),
                "{a} {ta} vs {b} {tb}"
            );
            let (ma, mb) = (pick(&mut rng), pick(&mut rng));
            if !(ma.is_nan() || mb.is_nan()) {
                let three = a < b || (a == b && before(ma, ta, mb, tb));
                assert_eq!(
                    Tag3::new(a, ma, ta).before(&Tag3::new(b, mb, tb)),
                    three,
                    "{a} {ma} {ta} vs {b} {mb} {tb}"
                );
                assert!(Tag3::new(a, ma, ta).key() == a);
            }
            let back = Tag::new(a, ta).key();
            assert!(
                back == a && (back.to_bits() == a.to_bits() || a == 0.0),
                "{a} → {back}"
            );
        }
    }

    /// `LazyMin::lift` answers `max(v, min of values)` exactly, as a plain scan does,
    /// through random raises, lowerings, insertions, removals, witnesses and bounds.
    #[test]
    fn lazy_min_lifts_like_a_scan() {
        let mut rng = SplitMix::new(41);
        let mut m = LazyMin::default();
        let mut reference: Vec<Option<f64>> = vec![None; 20];
        for step in 0..50_000 {
            let item = (rng.next_u64() % 20) as u32;
            match rng.next_u64() % 6 {
                0 => {
                    m.remove(item);
                    reference[item as usize] = None;
                }
                1..=3 => {
                    // Mostly raises (the dispatch pattern), sometimes lowerings.
                    let base = reference[item as usize].unwrap_or(0.0);
                    let d = (rng.next_u64() % 8) as f64 * 0.25 - 0.5;
                    let x = base + d;
                    m.set(item, x);
                    reference[item as usize] = Some(x);
                }
                _ => {
                    let v = (rng.next_u64() % 40) as f64 * 0.25 - 2.0;
                    let witness = rng
                        .next_u64()
                        .is_multiple_of(2)
                        .then(|| (rng.next_u64() % 20) as u32);
                    let expect = reference
                        .iter()
                        .flatten()
                        .copied()
                        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))))
                        .map_or(v, |min| if min > v { min } else { v });
                    assert_eq!(m.lift(v, witness), expect, "step {step}");
                }
            }
            let stale = (0..20u32)
                .filter(|&i| m.heap.key_of(i).is_some_and(|k| m.value[i as usize] > k))
                .count();
            assert_eq!(m.stale, stale, "step {step}: stale count");
        }
    }

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

#[cfg(test)]
mod winner_tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(crate::util::proptest_cases(1000))]

        /// The winner tree's minimum is the indexed heap's (the reference) through inserts,
        /// raises, lowerings, removals, growths past any leaf count and equal float keys
        /// broken by the tie; its items and keys are the heap's too.
        #[test]
        fn winner_tree_picks_what_the_heap_picks(
            ops in prop::collection::vec((0u32..70, -6i8..12, 0u8..5), 1..400),
        ) {
            let mut tree = WinnerTree::default();
            let mut heap: IndexedHeap<Tag> = IndexedHeap::default();
            for (item, k, op) in ops {
                if op == 0 {
                    tree.remove(item);
                    heap.remove(item);
                } else {
                    // Few distinct keys: ties (broken by a tie-breaker unique per item, not
                    // the item's order) are frequent; -0.0 is 0.0.
                    let key = if k == -6 { -0.0 } else { f64::from(k) * 0.5 };
                    let tag = Tag::new(key, u64::from(item.wrapping_mul(7919) % 101));
                    tree.set(item, tag.wide());
                    heap.set_key(item, tag);
                }
                let want = heap.peek_key().map(|(i, t)| (i, t.wide()));
                prop_assert_eq!(tree.peek(), want);
                prop_assert_eq!(tree.len(), heap.len());
                prop_assert_eq!(tree.is_empty(), heap.is_empty());
                prop_assert_eq!(tree.get(item), heap.contains(item).then(|| {
                    heap.iter().find(|&(i, _)| i == item).map(|(_, t)| t.wide()).unwrap()
                }));
            }
            let mut from_heap: Vec<(u32, u128)> = heap.iter().map(|(i, t)| (i, t.wide())).collect();
            from_heap.sort();
            prop_assert_eq!(tree.iter().collect::<Vec<_>>(), from_heap);
        }
    }
}
