//! The allocation: what every instance computes from the same snapshot of reports. Pure
//! code, no I/O; the bounds it keeps are in docs/proxy.md, "Running several instances".
//!
//! 1. **Global shares.** D is water-filled across tenants by weight φ, each capped by its
//!    global demand: the max-min fair share one SFQ(D) over all the demand converges to. A
//!    tenant whose demand is below its share is *light*: it is reserved its measured demand.
//! 2. **Parts.** A tenant's share is split across instances in proportion to its demand there.
//!    An instance's *fair* seats are the sum of its parts, plus an even part of any D no
//!    demand uses (a request arriving anywhere finds a seat before the next sync).
//! 3. **Seats.** Whole seats, at least one per instance, summing to D. The split of the last
//!    sync is kept while every instance is within one seat of its fair seats plus its credit
//!    (hysteresis); otherwise it is re-rounded by largest remainder. Parts of tenants served
//!    through several instances are then moved between those instances so that each
//!    instance's parts fill its whole seats exactly (a max-flow over the tenants that span
//!    instances; an instance held at the floor of one seat is filled from any instance above
//!    it). What no move can fix — an instance whose tenants are served only there —
//!    is paid back over time: each instance accumulates a *credit* (fair seats minus the seats
//!    it had) and the rounding favours the instance owed the most, so its seats average to its
//!    fair seats (fractional seats over time).
//! 4. **Local weights.** A light tenant keeps its configured φ in its instance's scheduler (its
//!    requests wait for at most one running request, as under one SFQ); a backlogged tenant's
//!    effective weight is φ × its part here / its global share, so that every instance's
//!    scheduler runs at the same water level and splits its seats as the parts say (each
//!    instance then corrects it by the usage it measures: `member`).

use std::collections::BTreeMap;

use fairlane_core::{MAX_WEIGHT, MIN_WEIGHT};
use serde::{Deserialize, Serialize};

/// One tenant in a [`Report`].
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct TenantReport {
    /// Weight φ in the instance's config.
    pub weight: f64,
    /// Requests waiting or in flight at the instance, averaged over the last interval (sampled
    /// several times per interval) and smoothed across intervals.
    pub demand: f64,
    /// Requests the upstream answered through the instance so far.
    pub completed: u64,
}

/// What one instance publishes each sync.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Report {
    /// The instance id.
    pub id: String,
    /// Counts this instance's reports (a copy older than the last one seen is stale).
    #[serde(default)]
    pub seq: u64,
    /// The seats (local depth) it runs with now.
    #[serde(default)]
    pub seats: usize,
    /// Requests in flight there now.
    #[serde(default)]
    pub holding: usize,
    /// The seats its last allocation gave it (the split kept by hysteresis).
    #[serde(default)]
    pub target: usize,
    /// Seat-syncs owed to it: fair seats minus the seats it had, summed over syncs.
    #[serde(default)]
    pub credit: f64,
    /// Per tenant name.
    pub tenants: BTreeMap<String, TenantReport>,
}

/// A tenant's part at one instance.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Part {
    /// Fractional seats of its global share served here.
    pub seats: f64,
    /// The weight its local scheduler gives it (φ for a light tenant).
    pub weight: f64,
}

/// One instance's part of an [`Allocation`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstanceShare {
    /// Whole seats (upstream slots) it may hold.
    pub seats: usize,
    /// Its fair seats after the parts moved: what its seats should average to.
    pub fair: f64,
    /// Requests it had in flight at its report.
    pub holding: usize,
    /// Per tenant with demand there.
    pub tenants: BTreeMap<String, Part>,
}

/// One tenant in an [`Allocation`]: the global view.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TenantShare {
    /// φ (from the first instance, by id, that reports it).
    pub weight: f64,
    /// Demand over all instances.
    pub demand: f64,
    /// Its fair share of D, in seats.
    pub share: f64,
    /// Light: its demand is below its fair share (it is reserved its demand).
    pub light: bool,
    /// Requests completed over all live instances.
    pub completed: u64,
}

/// The global allocation every instance computes from the same snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Allocation {
    /// Per tenant name.
    pub tenants: BTreeMap<String, TenantShare>,
    /// Per instance id.
    pub instances: BTreeMap<String, InstanceShare>,
}

/// Credit is paid back over this many syncs: an instance owed `c` seat-syncs rounds as if
/// its fair seats were `c / PAYBACK` higher.
pub const PAYBACK: f64 = 4.0;

/// Weighted water-filling (max-min fairness with weights): share `capacity` across
/// `(weight, demand)` pairs so nobody gets more than its demand and the rest is split in
/// proportion to weight. Returns the shares in input order and the water level (seats per
/// unit of weight of the tenants not capped; infinite when every demand is met).
pub fn water_fill(capacity: f64, tenants: &[(f64, f64)]) -> (Vec<f64>, f64) {
    let mut share = vec![0.0; tenants.len()];
    let mut open: Vec<usize> = (0..tenants.len())
        .filter(|&i| tenants[i].1 > 0.0 && tenants[i].0 > 0.0)
        .collect();
    let mut left = capacity.max(0.0);
    // Each round either satisfies at least one tenant (and drops it) or ends: ≤ n rounds.
    while !open.is_empty() {
        let w: f64 = open.iter().map(|&i| tenants[i].0).sum();
        let level = left / w;
        let (done, rest): (Vec<usize>, Vec<usize>) = open
            .iter()
            .partition(|&&i| tenants[i].1 <= tenants[i].0 * level);
        if done.is_empty() {
            for &i in &rest {
                share[i] = tenants[i].0 * level;
            }
            return (share, level);
        }
        for &i in &done {
            share[i] = tenants[i].1;
            left = (left - tenants[i].1).max(0.0);
        }
        open = rest;
    }
    (share, f64::INFINITY)
}

/// Whole numbers summing to `total`, each at least `floor` (while there is room), close to
/// `parts` by largest remainder (ties to the lower index).
pub fn apportion(total: usize, parts: &[f64], floor: usize) -> Vec<usize> {
    let cap = total as f64;
    let parts: Vec<f64> = parts
        .iter()
        .map(|p| {
            if p.is_finite() {
                p.clamp(0.0, cap)
            } else {
                0.0
            }
        })
        .collect();
    let mut whole: Vec<usize> = parts
        .iter()
        .map(|p| (p.floor() as usize).max(floor))
        .collect();
    let mut given: usize = whole.iter().sum();
    let rem = |whole: &[usize], i: usize| parts[i] - whole[i] as f64;
    while given < total && !whole.is_empty() {
        let i = (0..whole.len())
            .max_by(|&a, &b| rem(&whole, a).total_cmp(&rem(&whole, b)).then(b.cmp(&a)))
            .unwrap_or(0);
        whole[i] += 1;
        given += 1;
    }
    while given > total {
        // Take from the one furthest above its part (the higher index among equals), above
        // the floor if any is.
        let pick = |min: usize| {
            (0..whole.len())
                .filter(|&i| whole[i] > min)
                .min_by(|&a, &b| rem(&whole, a).total_cmp(&rem(&whole, b)).then(b.cmp(&a)))
        };
        let Some(i) = pick(floor).or_else(|| pick(0)) else {
            break;
        };
        whole[i] -= 1;
        given -= 1;
    }
    whole
}

/// A number from another instance's report, made safe to compute with: in `min..=max`,
/// 0 if not a number.
fn sane(x: f64, min: f64, max: f64) -> f64 {
    if x.is_finite() {
        x.clamp(min, max)
    } else {
        0.0
    }
}

/// The largest demand or credit taken from a report.
const MAX_REPORTED: f64 = 1e9;

/// The global allocation of `depth` seats from the live instances' `reports`. Pure and
/// deterministic: the same snapshot gives every instance the same answer, whatever the order.
pub fn allocate(depth: usize, reports: &[Report]) -> Allocation {
    let mut reports: Vec<&Report> = reports.iter().collect();
    reports.sort_by(|a, b| a.id.cmp(&b.id));
    reports.dedup_by(|a, b| a.id == b.id);
    let tenants = global(depth as f64, &reports);
    let mut parts = split(&tenants, &reports);
    let spare = if reports.is_empty() {
        0.0
    } else {
        (depth as f64 - tenants.values().map(|t| t.share).sum::<f64>()).max(0.0)
            / reports.len() as f64
    };
    let fair: Vec<f64> = parts
        .iter()
        .map(|p| p.values().sum::<f64>() + spare)
        .collect();
    let seats = whole_seats(depth, &reports, &fair);
    let light = |name: &str| tenants.get(name).is_none_or(|t| t.light);
    let demand: Vec<BTreeMap<String, f64>> = reports
        .iter()
        .map(|r| {
            r.tenants
                .iter()
                .map(|(n, t)| (n.clone(), sane(t.demand, 0.0, MAX_REPORTED)))
                .collect()
        })
        .collect();
    let want: Vec<f64> = seats.iter().map(|&s| s as f64 - spare).collect();
    let floor: Vec<bool> = seats.iter().map(|&s| s <= 1).collect();
    fill(&mut parts, &want, &floor, &demand, &light);
    let instances = reports
        .iter()
        .zip(parts)
        .zip(seats)
        .map(|((r, parts), seats)| {
            let share = InstanceShare {
                seats,
                fair: parts.values().sum::<f64>() + spare,
                holding: r.holding,
                tenants: parts
                    .into_iter()
                    .map(|(name, seats)| {
                        let t = &tenants[&name];
                        let weight = if t.light || t.share <= 0.0 {
                            t.weight
                        } else {
                            t.weight * seats / t.share
                        };
                        let weight = weight.clamp(MIN_WEIGHT, MAX_WEIGHT);
                        (name, Part { seats, weight })
                    })
                    .collect(),
            };
            (r.id.clone(), share)
        })
        .collect();
    Allocation { tenants, instances }
}

/// Step 1: every tenant's weight, demand and water-filled share of `depth`.
fn global(depth: f64, reports: &[&Report]) -> BTreeMap<String, TenantShare> {
    let mut tenants: BTreeMap<String, TenantShare> = BTreeMap::new();
    for r in reports {
        for (name, t) in &r.tenants {
            let e = tenants.entry(name.clone()).or_insert_with(|| TenantShare {
                weight: if (MIN_WEIGHT..=MAX_WEIGHT).contains(&t.weight) {
                    t.weight
                } else {
                    1.0
                },
                ..TenantShare::default()
            });
            e.demand += sane(t.demand, 0.0, MAX_REPORTED);
            e.completed = e.completed.saturating_add(t.completed);
        }
    }
    let pairs: Vec<(f64, f64)> = tenants.values().map(|t| (t.weight, t.demand)).collect();
    let (shares, level) = water_fill(depth, &pairs);
    for (t, s) in tenants.values_mut().zip(shares) {
        t.share = s;
        t.light = level.is_infinite() || t.demand < t.weight * level * (1.0 - 1e-9);
    }
    tenants
}

/// Step 2: each tenant's share split across instances in proportion to its demand there.
fn split(
    tenants: &BTreeMap<String, TenantShare>,
    reports: &[&Report],
) -> Vec<BTreeMap<String, f64>> {
    reports
        .iter()
        .map(|r| {
            r.tenants
                .iter()
                .filter_map(|(name, t)| {
                    let g = &tenants[name];
                    let d = sane(t.demand, 0.0, MAX_REPORTED);
                    (d > 0.0 && g.demand > 0.0).then(|| (name.clone(), g.share * d / g.demand))
                })
                .collect()
        })
        .collect()
}

/// An instance held at the floor of one seat with no more than one fair seat carries no
/// credit (it cannot give a seat back): it reports 0 and does not count in the mean.
pub fn pinned(r: &Report) -> bool {
    r.target <= 1 && r.credit == 0.0
}

/// The mean credit of the instances not [`pinned`]: what credits are measured against.
pub fn mean_credit<'a>(reports: impl IntoIterator<Item = &'a Report>) -> f64 {
    let (sum, n) = reports
        .into_iter()
        .filter(|r| !pinned(r))
        .fold((0.0, 0usize), |(s, n), r| {
            (s + sane(r.credit, -MAX_REPORTED, MAX_REPORTED), n + 1)
        });
    sum / n.max(1) as f64
}

/// Step 3a: whole seats from the fair seats, the credits and the last split.
fn whole_seats(depth: usize, reports: &[&Report], fair: &[f64]) -> Vec<usize> {
    // Credit counts against the others': only the difference is paid back.
    let credit: Vec<f64> = reports
        .iter()
        .map(|r| sane(r.credit, -MAX_REPORTED, MAX_REPORTED))
        .collect();
    let mean = mean_credit(reports.iter().copied());
    let owed: Vec<f64> = fair
        .iter()
        .zip(&credit)
        .map(|(f, c)| f + (c - mean) / PAYBACK)
        .collect();
    // Keep the last split while it still fits (hysteresis): every instance within one seat.
    let last: Vec<usize> = reports.iter().map(|r| r.target).collect();
    let keeps = last.iter().sum::<usize>() == depth
        && last.iter().all(|&s| s >= 1)
        && last
            .iter()
            .zip(&owed)
            .all(|(&s, &o)| (o - s as f64).abs() < 1.0);
    if keeps {
        last
    } else {
        apportion(depth, &owed, 1)
    }
}

/// Step 3b: move parts of tenants served through several instances so that each instance's
/// parts sum to `want` where the demand there allows. Light tenants' parts stay (they are
/// their demand). Augmenting paths over instances: an edge j → i where some backlogged tenant
/// has a part at j and room (demand above its part) at i. First from instances with parts
/// to spare. Then an instance held at the floor of one seat that its parts do not fill (its
/// tenants would take the whole seat anyway) is filled from any instance above the floor:
/// what is missing then shows there, as fair seats below its seats, which its credit pays
/// back over time.
fn fill(
    parts: &mut [BTreeMap<String, f64>],
    want: &[f64],
    floor: &[bool],
    demand: &[BTreeMap<String, f64>],
    light: &dyn Fn(&str) -> bool,
) {
    const EPS: f64 = 1e-9;
    let n = parts.len();
    let mut gap: Vec<f64> = (0..n)
        .map(|i| want[i] - parts[i].values().sum::<f64>())
        .collect();
    // Each augmentation empties a gap, a part or a room: bounded by the number of them.
    let rounds = 2 * n + 2 * parts.iter().map(BTreeMap::len).sum::<usize>();
    for to_floor in [false, true] {
        for _ in 0..rounds {
            let from = |j: usize| if to_floor { !floor[j] } else { gap[j] < -EPS };
            let to = |i: usize| gap[i] > EPS && (!to_floor || floor[i]);
            let Some((path, src)) = augmenting_path(parts, demand, light, &from, &to) else {
                break;
            };
            let dst = path[0].1;
            let mut amount = if to_floor {
                gap[dst]
            } else {
                gap[dst].min(-gap[src])
            };
            for (j, i, name) in &path {
                let room = demand[*i].get(name).copied().unwrap_or(0.0) - parts[*i][name];
                amount = amount.min(parts[*j][name]).min(room);
            }
            if amount <= EPS {
                break;
            }
            for (j, i, name) in &path {
                *parts[*j].get_mut(name).expect("on the path") -= amount;
                *parts[*i].get_mut(name).expect("on the path") += amount;
            }
            gap[dst] -= amount;
            gap[src] += amount;
        }
    }
}

/// A part moved along an augmenting path: (from instance, to instance, tenant).
type Move = (usize, usize, String);

/// A shortest path (breadth first) from an instance `from` accepts to one `to` accepts: the
/// moves `(from, to, tenant)` from the far end back, and the instance it starts from.
fn augmenting_path(
    parts: &[BTreeMap<String, f64>],
    demand: &[BTreeMap<String, f64>],
    light: &dyn Fn(&str) -> bool,
    from: &dyn Fn(usize) -> bool,
    to: &dyn Fn(usize) -> bool,
) -> Option<(Vec<Move>, usize)> {
    const EPS: f64 = 1e-9;
    let n = parts.len();
    let mut prev: Vec<Option<Option<(usize, String)>>> = vec![None; n];
    let mut queue = std::collections::VecDeque::new();
    for j in (0..n).filter(|&j| from(j)) {
        prev[j] = Some(None);
        queue.push_back(j);
    }
    while let Some(j) = queue.pop_front() {
        for (name, &x) in &parts[j] {
            if x <= EPS || light(name) {
                continue;
            }
            for i in 0..n {
                let room = match (parts[i].get(name), demand[i].get(name)) {
                    (Some(p), Some(d)) => d - p,
                    _ => 0.0,
                };
                if prev[i].is_some() || room <= EPS {
                    continue;
                }
                prev[i] = Some(Some((j, name.clone())));
                if to(i) {
                    let mut path = Vec::new();
                    let mut at = i;
                    while let Some(Some((from, name))) = prev[at].clone() {
                        path.push((from, at, name));
                        at = from;
                    }
                    return Some((path, at));
                }
                queue.push_back(i);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(id: &str, t: &[(&str, f64, f64)]) -> Report {
        Report {
            id: id.into(),
            tenants: t
                .iter()
                .map(|&(n, w, d)| {
                    (
                        n.to_string(),
                        TenantReport {
                            weight: w,
                            demand: d,
                            completed: 0,
                        },
                    )
                })
                .collect(),
            ..Report::default()
        }
    }

    fn seats(a: &Allocation) -> Vec<usize> {
        a.instances.values().map(|i| i.seats).collect()
    }

    #[test]
    fn water_fill_caps_by_demand_and_splits_by_weight() {
        let (s, level) = water_fill(24.0, &[(1.0, 100.0), (1.0, 2.0), (2.0, 100.0)]);
        assert_eq!(s[1], 2.0);
        assert!((s[0] - 22.0 / 3.0).abs() < 1e-9 && (s[2] - 44.0 / 3.0).abs() < 1e-9);
        assert!((level - 22.0 / 3.0).abs() < 1e-9);
        let (s, level) = water_fill(10.0, &[(1.0, 3.0), (1.0, 0.0)]);
        assert_eq!(s, vec![3.0, 0.0]);
        assert!(level.is_infinite());
    }

    #[test]
    fn skewed_tenants_get_their_weight_share_globally() {
        // A via 1; B via 1, 2, 3; C (weight 2) via 2, 3.
        let r = [
            rep("i1", &[("A", 1.0, 16.0), ("B", 1.0, 16.0), ("C", 2.0, 0.0)]),
            rep("i2", &[("A", 1.0, 0.0), ("B", 1.0, 16.0), ("C", 2.0, 16.0)]),
            rep("i3", &[("B", 1.0, 16.0), ("C", 2.0, 16.0)]),
        ];
        let a = allocate(24, &r);
        assert_eq!(a.tenants["A"].share, 6.0);
        assert_eq!(a.tenants["B"].share, 6.0);
        assert_eq!(a.tenants["C"].share, 12.0);
        assert_eq!(seats(&a), vec![8, 8, 8]);
        assert_eq!(a.instances["i1"].tenants["A"].seats, 6.0);
        assert_eq!(a.instances["i1"].tenants["B"].seats, 2.0);
        assert_eq!(a.instances["i2"].tenants["C"].seats, 6.0);
        // Effective weights: φ × part / share, so every scheduler runs at one level.
        assert_eq!(a.instances["i1"].tenants["A"].weight, 1.0);
        assert!((a.instances["i1"].tenants["B"].weight - 1.0 / 3.0).abs() < 1e-12);
        let mut rev = r.to_vec();
        rev.reverse();
        assert_eq!(
            allocate(24, &rev),
            a,
            "the order of the reports does not matter"
        );
    }

    #[test]
    fn a_light_tenant_keeps_its_weight_and_is_reserved_its_demand() {
        // L (weight 4) uses 0.45 seats on average, at i1; A and B are backlogged.
        let r = [
            rep("i1", &[("L", 4.0, 0.45), ("A", 1.0, 16.0), ("B", 1.0, 8.0)]),
            rep("i2", &[("B", 1.0, 8.0)]),
        ];
        let a = allocate(8, &r);
        let l = &a.instances["i1"].tenants["L"];
        assert!(a.tenants["L"].light);
        assert_eq!((l.seats, l.weight), (0.45, 4.0));
        // A and B split the other 7.55 seats equally, whatever the placement.
        assert!((a.tenants["A"].share - 3.775).abs() < 1e-9);
        assert!((a.tenants["B"].share - 3.775).abs() < 1e-9);
        // B's parts moved so that both instances' parts fill whole seats: no seat idle,
        // no flip from sync to sync.
        for i in a.instances.values() {
            let sum: f64 = i.tenants.values().map(|p| p.seats).sum();
            assert!((sum - i.seats as f64).abs() < 1e-9, "{i:?}");
        }
        assert_eq!(seats(&a).iter().sum::<usize>(), 8);
    }

    #[test]
    fn the_split_is_kept_while_it_fits() {
        let mut r = [
            rep("i1", &[("A", 1.0, 10.0)]),
            rep("i2", &[("B", 1.0, 10.0)]),
            rep("i3", &[("C", 1.0, 10.0)]),
        ];
        // 10 / 3 each: largest remainder gives 4, 3, 3.
        let a = allocate(10, &r);
        assert_eq!(seats(&a), vec![4, 3, 3]);
        // Another instance's split, still within a seat of the fair 3.33: kept.
        for (rep, t) in r.iter_mut().zip([3, 3, 4]) {
            rep.target = t;
        }
        assert_eq!(seats(&allocate(10, &r)), vec![3, 3, 4]);
        // i3 has been ahead: its negative credit moves the seat to the one owed most.
        r[0].credit = 2.0;
        r[2].credit = -3.0;
        assert_eq!(seats(&allocate(10, &r)), vec![4, 3, 3]);
    }

    #[test]
    fn seats_sum_to_depth_and_idle_instances_keep_one() {
        let r = [
            rep("a", &[("x", 1.0, 5.0)]),
            rep("b", &[("x", 1.0, 0.0)]),
            rep("c", &[("y", 3.0, 7.0)]),
        ];
        for d in [3, 4, 7, 10, 13] {
            let s = seats(&allocate(d, &r));
            assert_eq!(s.iter().sum::<usize>(), d, "D = {d}: {s:?}");
            assert!(s.iter().all(|&s| s >= 1), "D = {d}: {s:?}");
        }
        // Spare depth (demand 12 < D 20) is spread so every instance can take new work.
        assert!(allocate(20, &r).instances["b"].seats >= 2);
        // More instances than seats: the sum still never exceeds D.
        assert_eq!(seats(&allocate(2, &r)).iter().sum::<usize>(), 2);
    }

    #[test]
    fn garbage_in_reports_does_not_panic() {
        let mut r = rep("a", &[("x", f64::NAN, f64::INFINITY), ("y", -1.0, -5.0)]);
        r.credit = f64::NAN;
        let b = rep("b", &[("x", 1e300, 1e300)]);
        let a = allocate(16, &[r, b]);
        assert_eq!(seats(&a).iter().sum::<usize>(), 16);
        for p in a.instances.values().flat_map(|i| i.tenants.values()) {
            assert!(p.seats.is_finite() && (MIN_WEIGHT..=MAX_WEIGHT).contains(&p.weight));
        }
        assert_eq!(allocate(8, &[]), Allocation::default());
    }

    #[test]
    fn apportion_keeps_floors_and_the_total() {
        assert_eq!(apportion(8, &[4.5, 3.5], 1), vec![5, 3]);
        assert_eq!(apportion(8, &[0.2, 7.8], 1), vec![1, 7]);
        assert_eq!(apportion(3, &[0.0, 0.0, 0.0, 0.0], 1), vec![1, 1, 1, 0]);
        assert_eq!(apportion(10, &[f64::NAN, 20.0], 1), vec![1, 9]);
        assert_eq!(apportion(0, &[], 1), Vec::<usize>::new());
    }
}
