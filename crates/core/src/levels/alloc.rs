//! The arithmetic of priority levels, pure functions: ServerCL split into nominal seats by
//! largest remainder, APF's limits of one level, APF's fair allocation of ServerCL by seat
//! demand (`computeConcurrencyAllocation` of KEP-1040), and rounding that keeps the sum.

use std::cmp::Ordering;

/// A level's fixed limits at one ServerCL (APF's NominalCL, LendableCL, BorrowingCL, MinCL,
/// MaxCL), in seats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Limits {
    pub nominal: usize,
    pub lendable: usize,
    pub borrowing: usize,
    /// `nominal − lendable`: never lent.
    pub min: usize,
    /// `nominal + borrowing`, at most ServerCL.
    pub max: usize,
}

impl Limits {
    /// APF's rounding (`math.Round`, half away from zero) of the percentages of `nominal`;
    /// no borrowing limit (APF's nil) is ServerCL.
    pub fn new(
        nominal: usize,
        lendable_percent: f64,
        borrowing: Option<f64>,
        server: usize,
    ) -> Self {
        let part = |percent: f64| ((nominal as f64) * percent / 100.0).round() as usize;
        let lendable = part(lendable_percent).min(nominal);
        let borrowing = borrowing.map_or(server, part);
        Limits {
            nominal,
            lendable,
            borrowing,
            min: nominal - lendable,
            max: nominal.saturating_add(borrowing).min(server.max(nominal)),
        }
    }
}

/// `total` seats split in proportion to `shares` (all > 0) by largest remainder, summing to
/// exactly `total`; when `total ≥ shares.len()` every share gets at least one seat (a share
/// whose quota is below one is given one, and the rest is split again among the others).
/// Ties between equal remainders go to the larger share, then to the earlier index.
pub(crate) fn apportion(total: usize, shares: &[f64]) -> Vec<usize> {
    let n = shares.len();
    let mut seats = vec![0; n];
    let mut fixed = vec![false; n];
    let floor_one = total >= n;
    loop {
        let rest = total - fixed.iter().filter(|&&f| f).count();
        let open: Vec<usize> = (0..n).filter(|&i| !fixed[i]).collect();
        let sum: f64 = open.iter().map(|&i| shares[i]).sum();
        let quota = |i: usize| rest as f64 * shares[i] / sum;
        let small: Vec<usize> = if floor_one {
            open.iter().copied().filter(|&i| quota(i) < 1.0).collect()
        } else {
            Vec::new()
        };
        if small.is_empty() || small.len() == open.len() {
            let quotas: Vec<f64> = open.iter().map(|&i| quota(i)).collect();
            let floors = vec![0; open.len()];
            let uppers = vec![usize::MAX; open.len()];
            let got = round_to(rest, &quotas, &floors, &uppers, |a, b| {
                shares[open[b]].total_cmp(&shares[open[a]])
            });
            for (k, &i) in open.iter().enumerate() {
                seats[i] = got[k];
            }
            return seats;
        }
        for i in small {
            fixed[i] = true;
            seats[i] = 1;
        }
    }
}

/// Integers in `[lower_i, upper_i]` near `values` summing to `total` (when the bounds allow):
/// each value's floor, then one more to the largest fractional parts (ties by `tie`, then by
/// index), or one less from the smallest when the floors already exceed `total` (rounding
/// error). When `Σ values = total` and every value lies within its bounds, each result is
/// the value's floor or ceiling.
pub(crate) fn round_to(
    total: usize,
    values: &[f64],
    lower: &[usize],
    upper: &[usize],
    tie: impl Fn(usize, usize) -> Ordering,
) -> Vec<usize> {
    let n = values.len();
    let mut out: Vec<usize> = (0..n)
        .map(|i| (values[i].max(0.0).floor() as usize).clamp(lower[i], upper[i].max(lower[i])))
        .collect();
    let frac = |i: usize| values[i] - values[i].floor();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| frac(b).total_cmp(&frac(a)).then(tie(a, b)).then(a.cmp(&b)));
    let mut sum: usize = out.iter().sum();
    while sum < total {
        let Some(&i) = order
            .iter()
            .find(|&&i| out[i] < upper[i] && out[i] as f64 <= values[i])
        else {
            // Every value has had its ceiling: spread what is left by the same order.
            let Some(&i) = order.iter().find(|&&i| out[i] < upper[i]) else {
                break;
            };
            out[i] += 1;
            sum += 1;
            continue;
        };
        out[i] += 1;
        sum += 1;
    }
    while sum > total {
        let Some(&i) = order.iter().rev().find(|&&i| out[i] > lower[i]) else {
            break;
        };
        out[i] -= 1;
        sum -= 1;
    }
    out
}

/// The smallest target APF's allocation works with (`MinTarget`): a level with no demand still
/// has a direction to grow in.
pub(crate) const MIN_TARGET: f64 = 0.001;

/// One level in APF's allocation problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Item {
    pub lower: f64,
    pub upper: f64,
    pub target: f64,
}

/// APF's fair allocation: `allocs[i] = clamp(p · target_i, lower_i, upper_i)` with the one
/// proportion `p` that makes them sum to `total` (KEP-1040, "Dispatching":
/// `computeConcurrencyAllocation`). When `total ≤ Σ lower` every level gets its lower bound,
/// when `total ≥ Σ upper` its upper bound. The sum is piecewise linear and non-decreasing in
/// `p`; it is evaluated at every breakpoint `lower_i/target_i`, `upper_i/target_i` and solved
/// exactly on the segment that crosses `total` (levels are few: quadratic is fine).
pub(crate) fn allocate(total: f64, items: &[Item]) -> Vec<f64> {
    let target = |it: &Item| it.target.max(MIN_TARGET);
    let at = |p: f64| -> Vec<f64> {
        items
            .iter()
            .map(|it| (p * target(it)).clamp(it.lower, it.upper.max(it.lower)))
            .collect()
    };
    let sum_at = |p: f64| at(p).iter().sum::<f64>();
    let mut points: Vec<f64> = items
        .iter()
        .flat_map(|it| [it.lower / target(it), it.upper / target(it)])
        .filter(|p| p.is_finite())
        .collect();
    points.push(0.0);
    points.sort_by(f64::total_cmp);
    points.dedup();
    let (mut lo, mut f_lo) = (0.0, sum_at(0.0));
    if total <= f_lo {
        return at(0.0);
    }
    for &p in &points[1..] {
        let f = sum_at(p);
        if f >= total {
            let p = if f > f_lo {
                lo + (total - f_lo) * (p - lo) / (f - f_lo)
            } else {
                p
            };
            return at(p);
        }
        (lo, f_lo) = (p, f);
    }
    at(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn apportion_by_largest_remainder() {
        assert_eq!(apportion(10, &[1.0, 1.0, 1.0]), vec![4, 3, 3]);
        assert_eq!(apportion(10, &[1.0, 2.0, 2.0]), vec![2, 4, 4]);
        // 100:1 on 3 seats: the small share is lifted to one seat.
        assert_eq!(apportion(3, &[100.0, 1.0]), vec![2, 1]);
        // Fewer seats than shares: no floor of one.
        assert_eq!(apportion(1, &[1.0, 3.0]), vec![0, 1]);
        assert_eq!(apportion(0, &[1.0, 3.0]), vec![0, 0]);
        // Equal remainders of equal shares go to the earlier level.
        assert_eq!(apportion(1, &[1.0, 1.0]), vec![1, 0]);
    }

    #[test]
    fn limits_follow_apf_rounding() {
        let l = Limits::new(5, 50.0, Some(100.0), 20);
        assert_eq!((l.lendable, l.borrowing, l.min, l.max), (3, 5, 2, 10)); // round(2.5) = 3
        let l = Limits::new(5, 0.0, None, 20);
        assert_eq!((l.lendable, l.borrowing, l.min, l.max), (0, 20, 5, 20));
    }

    /// `allocate(total, items)` of `(lower, upper, target)` items is `expect`.
    fn allocates(total: f64, items: &[(f64, f64, f64)], expect: &[f64]) {
        let items: Vec<Item> = (items.iter())
            .map(|&(lower, upper, target)| Item {
                lower,
                upper,
                target,
            })
            .collect();
        let a = allocate(total, &items);
        let close = a.iter().zip(expect).all(|(x, y)| (x - y).abs() < 1e-9);
        assert!(close && a.len() == expect.len(), "{a:?} ≠ {expect:?}");
    }

    #[test]
    fn allocation_examples() {
        // Two levels of nominal 5 on 10 seats; one idle and lending 3, the other hungry.
        allocates(10.0, &[(2.0, 10.0, 2.0), (5.0, 10.0, 30.0)], &[2.0, 8.0]);
        // Proportional when nothing binds.
        allocates(8.0, &[(0.0, 10.0, 1.0), (0.0, 10.0, 3.0)], &[2.0, 6.0]);
    }

    fn shares() -> impl Strategy<Value = Vec<f64>> {
        prop::collection::vec(1u32..1000, 1..8)
            .prop_map(|v| v.into_iter().map(|s| f64::from(s) / 10.0).collect())
    }

    proptest! {
        #![proptest_config(crate::reserve::proptest_cases(512))]

        /// Exact sum, a seat each when there are enough, within one seat of the quota
        /// (before the floor of one moves seats), and monotone in the shares.
        #[test]
        fn apportion_sums_exactly(total in 0usize..200, s in shares()) {
            let seats = apportion(total, &s);
            prop_assert_eq!(seats.iter().sum::<usize>(), total);
            let sum: f64 = s.iter().sum();
            let lifted = total >= s.len() && s.iter().any(|x| total as f64 * x / sum < 1.0);
            for i in 0..s.len() {
                if total >= s.len() {
                    prop_assert!(seats[i] >= 1);
                }
                if !lifted {
                    let q = total as f64 * s[i] / sum;
                    prop_assert!((seats[i] as f64 - q).abs() < 1.0 + 1e-9, "{seats:?} {q}");
                }
                for j in 0..s.len() {
                    if s[i] > s[j] {
                        prop_assert!(seats[i] >= seats[j], "{s:?} → {seats:?}");
                    }
                }
            }
        }

        /// The allocation sums to the total (when the bounds allow it), stays within the
        /// bounds, and is `p · target` clamped with one `p` for all: a bisection on `p`
        /// (the obviously correct way) finds the same values.
        #[test]
        fn allocation_matches_bisection(
            raw in prop::collection::vec((0u32..20, 0u32..20, 0u32..400), 1..7),
            total in 0u32..60,
        ) {
            let items: Vec<Item> = raw
                .iter()
                .map(|&(lo, extra, t)| Item {
                    lower: f64::from(lo),
                    upper: f64::from(lo + extra),
                    target: f64::from(lo) + f64::from(t) / 10.0,
                })
                .collect();
            let total = f64::from(total);
            let a = allocate(total, &items);
            let (lows, highs): (f64, f64) =
                (items.iter().map(|i| i.lower).sum(), items.iter().map(|i| i.upper).sum());
            let expect = total.clamp(lows, highs);
            prop_assert!((a.iter().sum::<f64>() - expect).abs() < 1e-6, "{a:?} vs {expect}");
            let f = |p: f64| -> f64 {
                items.iter().map(|i| (p * i.target.max(MIN_TARGET)).clamp(i.lower, i.upper)).sum()
            };
            let (mut lo, mut hi) = (0.0f64, 1e9f64);
            for _ in 0..200 {
                let mid = (lo + hi) / 2.0;
                if f(mid) < expect { lo = mid } else { hi = mid }
            }
            for (k, i) in items.iter().enumerate() {
                prop_assert!(a[k] >= i.lower - 1e-9 && a[k] <= i.upper + 1e-9);
                let b = (hi * i.target.max(MIN_TARGET)).clamp(i.lower, i.upper);
                prop_assert!((a[k] - b).abs() < 1e-5, "item {k}: {} vs bisection {b}", a[k]);
            }
        }

        /// Rounding keeps the sum and the bounds, and moves no value by a whole seat.
        #[test]
        fn rounding_keeps_the_sum(
            raw in prop::collection::vec((0u32..10, 0u32..10, 0u32..1000), 1..7),
            pick in 0u32..1000,
        ) {
            let lower: Vec<usize> = raw.iter().map(|r| r.0 as usize).collect();
            let upper: Vec<usize> = raw.iter().map(|r| (r.0 + r.1) as usize).collect();
            let lows: usize = lower.iter().sum();
            let highs: usize = upper.iter().sum();
            let total = lows + (pick as usize) % (highs - lows + 1);
            let items: Vec<Item> = raw
                .iter()
                .map(|r| Item {
                    lower: f64::from(r.0),
                    upper: f64::from(r.0 + r.1),
                    target: f64::from(r.2) / 100.0,
                })
                .collect();
            let a = allocate(total as f64, &items);
            let r = round_to(total, &a, &lower, &upper, |_, _| Ordering::Equal);
            prop_assert_eq!(r.iter().sum::<usize>(), total);
            for k in 0..r.len() {
                prop_assert!(r[k] >= lower[k] && r[k] <= upper[k]);
                prop_assert!((r[k] as f64 - a[k]).abs() < 1.0 + 1e-6, "{r:?} {a:?}");
            }
        }
    }
}
