//! One latency histogram for every executor: buckets and recording, with each consumer's own
//! rule for turning buckets into quantiles.
//!
//! A [`Histogram`] counts `u64` values (nanoseconds, cost units) in the buckets of a
//! [`Layout`]:
//!
//! * [`LogLinear<SUB>`](LogLinear) — HdrHistogram's layout: every value below `2·SUB` has a
//!   bucket of its own, and above, each power of two is split into `SUB` buckets, so a bucket
//!   spans at most `1/SUB` of its lowest value. `LogLinear<1024>` is HdrHistogram's three
//!   significant digits (the simulator's latencies, reproduced to the bit); `LogLinear<16,
//!   1024>` is within 1/16, all values in one page (the runtime's per-tenant wait and cost
//!   histograms).
//! * [`Bounds`] — explicit upper bounds, as a Prometheus histogram has (`le`): a value falls
//!   in the first bucket whose bound is not below it, or in the last, open one.
//!
//! Recording is an index computation and one increment. Counts live in pages allocated when
//! first counted in, so memory follows the values seen, not the largest one: a page holds
//! each count's low byte (one cache line holds 64 neighbouring counts), and the higher bits
//! sit in a page of carries allocated at the page's first carry (a count passing a multiple
//! of 256). A bucket counts up to 2⁴⁰ − 1 values and then saturates; [`Histogram::count`],
//! the sum, the minimum and the maximum are exact.
//!
//! The histogram states no quantile rule of its own: [`Histogram::index_at_rank`] finds the
//! bucket where the running count reaches a rank, and each consumer reports from that
//! bucket's [`range`](Histogram::range) what it documents (its highest value, its midpoint,
//! an interpolation).
//!
//! ```
//! use fairlane_core::histogram::{Histogram, LogLinear};
//!
//! let mut h: Histogram<LogLinear<16>> = Histogram::new();
//! for v in 1..=1000u64 {
//!     h.record(v);
//! }
//! assert_eq!((h.count(), h.min(), h.max()), (1000, 1, 1000));
//! let i = h.index_at_rank(500).unwrap(); // the median's bucket
//! let (lowest, width) = h.range(i);
//! assert!(lowest <= 500 && 500 < lowest + width && width <= 500 / 16);
//! ```

use std::fmt;

use crate::types::Error;

/// Where a value is counted: a bucket index for every `u64`, and the values each index holds.
pub trait Layout: Clone + fmt::Debug {
    /// A page of low count bytes: `[u8; N]` for the layout's page size `N`.
    type Page: Page;

    /// The index of the bucket counting `v`.
    fn index(&self, v: u64) -> usize;

    /// The lowest value counted at `index`, and how many values the bucket spans.
    fn range(&self, index: usize) -> (u64, u64);
}

/// A page of counts' low bytes. Implemented for byte arrays.
pub trait Page: AsRef<[u8]> + AsMut<[u8]> + fmt::Debug + Clone + 'static {
    /// Counts per page.
    const LEN: usize;
    /// A page of zero counts.
    fn zeroed() -> Box<Self>;
}

impl<const N: usize> Page for [u8; N] {
    const LEN: usize = N;
    fn zeroed() -> Box<Self> {
        Box::new([0; N])
    }
}

/// HdrHistogram's bucket layout with `SUB` (a power of two, ≥ 2) buckets per power of two:
/// values below `2·SUB` exact, any other value `v` in a bucket at most `v/SUB` wide. Counts
/// are allocated in pages of `PAGE` (a power of two; by default one power of two's `SUB`
/// buckets): a coarse layout takes a larger page, so that one page holds every bucket
/// (`LogLinear<16, 1024>`: 976 buckets cover all of `u64`) and recording follows no more
/// than one pointer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogLinear<const SUB: usize, const PAGE: usize = SUB>;

impl<const SUB: usize, const PAGE: usize> LogLinear<SUB, PAGE> {
    /// log2 of `SUB`.
    const HALF_BITS: u32 = {
        assert!(
            SUB.is_power_of_two() && SUB >= 2,
            "SUB must be a power of two ≥ 2"
        );
        assert!(PAGE.is_power_of_two(), "PAGE must be a power of two");
        SUB.trailing_zeros()
    };
    /// log2 of the exact values' count, `2·SUB`.
    const FULL_BITS: u32 = Self::HALF_BITS + 1;
}

impl<const SUB: usize, const PAGE: usize> Layout for LogLinear<SUB, PAGE> {
    type Page = [u8; PAGE];

    #[inline]
    fn index(&self, v: u64) -> usize {
        // The power of two beyond the first 2·SUB values (0 for those).
        let b = (64 - Self::FULL_BITS) - (v | ((1 << Self::FULL_BITS) - 1)).leading_zeros();
        let sub = v >> b; // in [SUB, 2·SUB) beyond the first bucket
        (((b as u64 + 1) << Self::HALF_BITS) + sub - SUB as u64) as usize
    }

    fn range(&self, index: usize) -> (u64, u64) {
        let i = index as u64;
        let half = SUB as u64;
        match (i >> Self::HALF_BITS).checked_sub(1) {
            // The lower half of the first power of two: one value each.
            None => (i, 1),
            Some(b) => (((i & (half - 1)) + half) << b, 1 << b),
        }
    }
}

/// Explicit bucket bounds: bucket `k` counts the values in `(bounds[k−1], bounds[k]]`
/// (`[0, bounds[0]]` for the first), and a last, open bucket those above every bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bounds {
    upper: &'static [u64],
}

impl Bounds {
    /// Bounds from inclusive upper limits, strictly ascending and not empty (else an
    /// [`Error::InvalidConfig`] naming `histogram.bounds`).
    pub fn new(upper: &'static [u64]) -> Result<Bounds, Error> {
        if upper.is_empty() {
            return Err(Error::InvalidConfig {
                field: "histogram.bounds",
                reason: "needs at least one bound".into(),
            });
        }
        if let Some(w) = upper.windows(2).find(|w| w[0] >= w[1]) {
            return Err(Error::InvalidConfig {
                field: "histogram.bounds",
                reason: format!("must ascend strictly, found {} then {}", w[0], w[1]),
            });
        }
        Ok(Bounds { upper })
    }

    /// The upper limits (the open last bucket not included).
    pub fn upper(&self) -> &'static [u64] {
        self.upper
    }

    /// Buckets in all: one per bound and the open one.
    pub fn len(&self) -> usize {
        self.upper.len() + 1
    }

    /// Never: a layout has at least one bound.
    pub fn is_empty(&self) -> bool {
        false
    }
}

impl Layout for Bounds {
    type Page = [u8; 64];

    #[inline]
    fn index(&self, v: u64) -> usize {
        self.upper.partition_point(|&b| b < v)
    }

    fn range(&self, index: usize) -> (u64, u64) {
        let lowest = match index.checked_sub(1) {
            None => 0,
            Some(k) => self.upper.get(k).map_or(u64::MAX, |&b| b.saturating_add(1)),
        };
        let highest = self.upper.get(index).copied().unwrap_or(u64::MAX);
        (lowest, (highest - lowest).saturating_add(1))
    }
}

/// Counts of `u64` values in the buckets of a [`Layout`], with exact count, sum, minimum
/// and maximum. See the module docs.
#[derive(Clone, Debug)]
pub struct Histogram<L: Layout> {
    layout: L,
    pages: Vec<Option<Box<L::Page>>>,
    /// Per page, the carries out of its low bytes (`None` until the first).
    carries: Vec<Option<Box<[u32]>>>,
    count: u64,
    sum: u128,
    /// `u64::MAX` while empty.
    min: u64,
    max: u64,
}

/// Counts summed at a time when scanning (the compiler vectorises the sums).
const CHUNK: usize = 16;

impl<L: Layout + Default> Default for Histogram<L> {
    fn default() -> Self {
        Histogram::with_layout(L::default())
    }
}

impl<L: Layout + Default> Histogram<L> {
    /// An empty histogram.
    pub fn new() -> Self {
        Histogram::default()
    }
}

impl<L: Layout> Histogram<L> {
    /// An empty histogram over `layout`.
    pub fn with_layout(layout: L) -> Self {
        Histogram {
            layout,
            pages: Vec::new(),
            carries: Vec::new(),
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &L {
        &self.layout
    }

    /// Record one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        let i = self.layout.index(v);
        let page: &mut L::Page = match self.pages.get_mut(i / L::Page::LEN) {
            Some(Some(page)) => page,
            _ => self.add_page(i / L::Page::LEN),
        };
        let c = &mut page.as_mut()[i % L::Page::LEN];
        *c = c.wrapping_add(1);
        if *c == 0 {
            self.carry(i, 1);
        }
        self.count += 1;
        self.sum += u128::from(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
    }

    /// Allocate page `p` (out of line: a few times per histogram).
    #[cold]
    #[inline(never)]
    fn add_page(&mut self, p: usize) -> &mut L::Page {
        if p >= self.pages.len() {
            self.pages.resize_with(p + 1, || None);
        }
        self.pages[p].get_or_insert_with(L::Page::zeroed)
    }

    /// Add `n` × 256 to count `i`'s high part, saturating (out of line: once per 256 counts
    /// of one value).
    #[cold]
    #[inline(never)]
    fn carry(&mut self, i: usize, n: u32) {
        let p = i / L::Page::LEN;
        if p >= self.carries.len() {
            self.carries.resize_with(p + 1, || None);
        }
        let high = self.carries[p].get_or_insert_with(|| vec![0; L::Page::LEN].into());
        let c = &mut high[i % L::Page::LEN];
        *c = c.saturating_add(n);
    }

    /// Add every value of `other` (same layout).
    pub fn merge(&mut self, other: &Histogram<L>) {
        if other.count == 0 {
            return;
        }
        other.for_each(|i, n| self.add_count(i, n));
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// Add `n` to the count at index `i` (saturating at 2⁴⁰ − 1).
    fn add_count(&mut self, i: usize, n: u64) {
        let p = i / L::Page::LEN;
        if self.pages.get(p).is_none_or(Option::is_none) {
            self.add_page(p);
        }
        let total = self.count_at(i).saturating_add(n);
        if let Some(Some(page)) = self.pages.get_mut(p) {
            let low: &mut [u8] = (**page).as_mut();
            low[i % L::Page::LEN] = total as u8;
        }
        let high = (total >> 8).min(u64::from(u32::MAX)) as u32;
        let old = self
            .carries
            .get(p)
            .and_then(|c| c.as_deref())
            .map_or(0, |c| c[i % L::Page::LEN]);
        if high != old {
            self.carry(i, high - old);
        }
    }

    /// The count at index `i`.
    pub fn count_at(&self, i: usize) -> u64 {
        let (p, j) = (i / L::Page::LEN, i % L::Page::LEN);
        let Some(Some(page)) = self.pages.get(p) else {
            return 0;
        };
        let low: &[u8] = (**page).as_ref();
        let high = self
            .carries
            .get(p)
            .and_then(|c| c.as_deref())
            .map_or(0, |c| c[j]);
        u64::from(high) << 8 | u64::from(low[j])
    }

    /// The lowest value counted at index `i`, and how many values the bucket spans.
    pub fn range(&self, i: usize) -> (u64, u64) {
        self.layout.range(i)
    }

    /// Visit the non-empty pages in index order with the index of their first count and
    /// their counts (the low bytes alone, or widened with their carries), until `f` returns
    /// a value.
    fn scan<R>(&self, mut f: impl FnMut(usize, Counts<'_>) -> Option<R>) -> Option<R> {
        let mut wide: Vec<u64> = Vec::new();
        for (p, page) in self.pages.iter().enumerate() {
            let Some(low) = page.as_deref() else {
                continue;
            };
            let low = low.as_ref();
            let counts = match self.carries.get(p).and_then(|c| c.as_deref()) {
                None => Counts::Low(low),
                Some(high) => {
                    wide.clear();
                    wide.extend(
                        low.iter()
                            .zip(high)
                            .map(|(&l, &h)| u64::from(h) << 8 | u64::from(l)),
                    );
                    Counts::Wide(&wide)
                }
            };
            if let Some(r) = f(p * L::Page::LEN, counts) {
                return Some(r);
            }
        }
        None
    }

    /// The index of the bucket where the running count, in index order, first reaches
    /// `rank` (≥ 1); `None` beyond the last count.
    pub fn index_at_rank(&self, rank: u64) -> Option<usize> {
        let mut sum = 0u64;
        self.scan(|first, counts| match counts {
            Counts::Low(c) => rank_in(c, first, &mut sum, rank),
            Counts::Wide(c) => rank_in(c, first, &mut sum, rank),
        })
    }

    /// Visit every non-empty bucket in index order with its count.
    pub fn for_each(&self, mut f: impl FnMut(usize, u64)) {
        self.scan::<()>(|first, counts| {
            match counts {
                Counts::Low(c) => visit(c, first, &mut f),
                Counts::Wide(c) => visit(c, first, &mut f),
            }
            None
        });
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// No values recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// The smallest value recorded (0 when empty).
    pub fn min(&self) -> u64 {
        if self.count == 0 {
            0
        } else {
            self.min
        }
    }

    /// The largest value recorded (0 when empty).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Forget every value (the pages are freed).
    pub fn reset(&mut self) {
        *self = Histogram::with_layout(self.layout.clone());
    }
}

/// Equal when the same values were counted in the same buckets (however the pages were
/// allocated).
impl<L: Layout + PartialEq> PartialEq for Histogram<L> {
    fn eq(&self, other: &Self) -> bool {
        if self.layout != other.layout
            || (self.count, self.sum, self.min(), self.max)
                != (other.count, other.sum, other.min(), other.max)
        {
            return false;
        }
        let mut mine = Vec::new();
        self.for_each(|i, n| mine.push((i, n)));
        let mut theirs = Vec::new();
        other.for_each(|i, n| theirs.push((i, n)));
        mine == theirs
    }
}

/// One page's counts as [`Histogram::scan`] gives them.
enum Counts<'a> {
    /// No count of the page passed 255.
    Low(&'a [u8]),
    /// Low bytes and carries together.
    Wide(&'a [u64]),
}

/// Add a page's counts (the first at index `first`) to `sum` until it reaches `rank`: the
/// index where it does. Whole chunks first, then the one that crosses.
fn rank_in<C: Copy + Into<u64>>(
    counts: &[C],
    first: usize,
    sum: &mut u64,
    rank: u64,
) -> Option<usize> {
    for (k, chunk) in counts.chunks(CHUNK).enumerate() {
        let part: u64 = chunk.iter().map(|&c| c.into()).sum();
        if *sum + part < rank {
            *sum += part;
            continue;
        }
        for (j, &c) in chunk.iter().enumerate() {
            *sum += c.into();
            if *sum >= rank {
                return Some(first + k * CHUNK + j);
            }
        }
    }
    None
}

/// Call `f` with each non-zero count of a page (the first at index `first`), in index order;
/// empty chunks are skipped with one vectorised test.
fn visit<C: Copy + Into<u64>>(counts: &[C], first: usize, f: &mut impl FnMut(usize, u64)) {
    for (k, chunk) in counts.chunks(CHUNK).enumerate() {
        if chunk.iter().fold(0u64, |a, &c| a | c.into()) == 0 {
            continue;
        }
        for (j, &c) in chunk.iter().enumerate() {
            let c: u64 = c.into();
            if c != 0 {
                f(first + k * CHUNK + j, c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic spread over many orders of magnitude.
    fn values(n: usize, seed: u64) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let exp = (x % 40) as u32;
                (1u64 << exp) + (x >> 24) % (1u64 << exp)
            })
            .collect()
    }

    fn tiles<L: Layout>(layout: &L, buckets: usize) {
        let mut next = 0u64;
        for i in 0..buckets {
            let (lo, w) = layout.range(i);
            assert_eq!(lo, next, "bucket {i}");
            assert_eq!(layout.index(lo), i, "bucket {i}'s lowest value");
            assert_eq!(layout.index(lo + (w - 1)), i, "bucket {i}'s highest value");
            next = lo + w;
        }
    }

    #[test]
    fn log_linear_buckets_tile_the_line_and_stay_within_one_part_in_sub() {
        tiles(&LogLinear::<16>, 900);
        tiles(&LogLinear::<1024>, 40_000);
        for v in values(10_000, 7) {
            let (lo, w) = LogLinear::<16>.range(LogLinear::<16>.index(v));
            assert!(lo <= v && v - lo < w && (w == 1 || w <= lo / 16), "{v}");
        }
        let last = LogLinear::<16>.index(u64::MAX);
        assert_eq!(LogLinear::<16>.index(u64::MAX - 1), last);
        let (lo, w) = LogLinear::<16>.range(last);
        assert_eq!(lo.checked_add(w - 1), Some(u64::MAX));
    }

    #[test]
    fn bounds_count_a_value_in_the_first_bucket_not_below_it() {
        static UPPER: [u64; 3] = [10, 100, 1000];
        let b = Bounds::new(&UPPER).unwrap();
        let idx: Vec<usize> = [0, 10, 11, 100, 101, 1000, 1001, u64::MAX]
            .iter()
            .map(|&v| b.index(v))
            .collect();
        assert_eq!(idx, [0, 0, 1, 1, 2, 2, 3, 3]);
        assert_eq!(b.range(0), (0, 11));
        assert_eq!(b.range(1), (11, 90));
        assert_eq!(b.range(3), (1001, u64::MAX - 1000));
        tiles(&b, 4);
        static BAD: [u64; 2] = [5, 5];
        assert!(Bounds::new(&BAD).is_err());
        assert!(Bounds::new(&[]).is_err());
    }

    /// The proxy's Prometheus buckets (upper bounds in seconds) as nanosecond bounds: a
    /// duration lands in the bucket the proxy's `secs <= bound` rule picks.
    #[test]
    fn prometheus_seconds_buckets_as_nanosecond_bounds() {
        const SECONDS: [f64; 18] = [
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            2.5, 5.0, 10.0, 30.0, 60.0,
        ];
        static NANOS: [u64; 18] = [
            100_000,
            250_000,
            500_000,
            1_000_000,
            2_500_000,
            5_000_000,
            10_000_000,
            25_000_000,
            50_000_000,
            100_000_000,
            250_000_000,
            500_000_000,
            1_000_000_000,
            2_500_000_000,
            5_000_000_000,
            10_000_000_000,
            30_000_000_000,
            60_000_000_000,
        ];
        let bounds = Bounds::new(&NANOS).unwrap();
        let mut ns: Vec<u64> = values(20_000, 17)
            .into_iter()
            .map(|v| v % 100_000_000_000)
            .collect();
        ns.extend(NANOS.iter().flat_map(|&b| [b - 1, b, b + 1]));
        for v in ns {
            let secs = std::time::Duration::from_nanos(v).as_secs_f64();
            let proxy = SECONDS
                .iter()
                .position(|&b| secs <= b)
                .unwrap_or(SECONDS.len());
            assert_eq!(bounds.index(v), proxy, "{v} ns");
        }
    }

    /// The counts, kept by the pages and carries, equal a plain count per bucket.
    #[test]
    fn counts_match_a_plain_table_past_byte_carries() {
        let mut h: Histogram<LogLinear<16>> = Histogram::new();
        let mut plain = std::collections::BTreeMap::new();
        let mut vs = values(3_000, 3);
        // Values repeated past 255 and 65,535 times, in a scrambled order.
        vs.extend(std::iter::repeat_n(1_500u64, 70_000));
        vs.extend(std::iter::repeat_n(1_501u64, 256));
        vs.extend(std::iter::repeat_n(77u64, 255));
        let mut x = 5u64;
        for k in 0..vs.len() {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = k + (x >> 33) as usize % (vs.len() - k);
            vs.swap(k, j);
        }
        for &v in &vs {
            h.record(v);
            *plain.entry(LogLinear::<16>.index(v)).or_insert(0u64) += 1;
        }
        let mut seen = Vec::new();
        h.for_each(|i, n| seen.push((i, n)));
        assert_eq!(seen, plain.into_iter().collect::<Vec<_>>());
        assert_eq!(h.count(), vs.len() as u64);
        assert_eq!(h.sum(), vs.iter().map(|&v| u128::from(v)).sum::<u128>());
        assert_eq!(h.min(), *vs.iter().min().unwrap());
        assert_eq!(h.max(), *vs.iter().max().unwrap());
        // Ranks: the 70,000 copies of 1,500 hold the middle.
        let mut sorted = vs.clone();
        sorted.sort_unstable();
        for rank in [1, 100, 3_000, 40_000, 73_000, vs.len() as u64] {
            let i = h.index_at_rank(rank).unwrap();
            assert_eq!(
                i,
                LogLinear::<16>.index(sorted[rank as usize - 1]),
                "rank {rank}"
            );
        }
        assert_eq!(h.index_at_rank(vs.len() as u64 + 1), None);
    }

    #[test]
    fn merge_equals_recording_both_and_reset_empties() {
        let (mut a, mut b, mut both) = (
            Histogram::<LogLinear<16>>::new(),
            Histogram::new(),
            Histogram::new(),
        );
        for v in values(2_000, 11) {
            a.record(v);
            both.record(v);
        }
        for v in std::iter::repeat_n(9_999u64, 600).chain(values(500, 13)) {
            b.record(v);
            both.record(v);
        }
        a.merge(&b);
        assert_eq!(a, both);
        a.reset();
        assert!(a.is_empty() && a.min() == 0 && a.max() == 0 && a.index_at_rank(1).is_none());
        assert_eq!(a, Histogram::new());
    }
}
