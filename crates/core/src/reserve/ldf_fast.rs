//! LDF's dispatch without evaluating every active tenant, making exactly the
//! decisions of the full scan ([`ReserveScheduler::select_ldf_scan`]).
//!
//! # Why a sorted key works
//!
//! Take an active tenant with a reservation that runs nothing (`r = 0`). Its consumed
//! core-time `U` is constant until it starts or finishes a task, so its utilization is
//! `cpu(now) = c / D(now)` with `c = fl(U·100)` constant and `D(now) = fl(cores·(now − s))`
//! common to every tenant metered over the same window `[s, s + len)`. Its boosted-or-not
//! reservation `R` is constant too (boosting depends on the window's *budget*, `U` over the
//! whole window). If its surplus weight `w` is `R` (the default, Eq. 5's sharing in
//! proportion to reservations), its deficit is `1 − cpu/R` below the reservation (Eq. 4) and
//! `(R − cpu)/R`, the same number up to rounding, above it (Eq. 5): in exact arithmetic
//! such tenants rank by `k = c / R`, whatever `now` is. So they — the *sorted* set `S` —
//! are kept in a B-tree by `k`, and the rest — running tenants (at most one per core),
//! tenants without a reservation or with another weight, tenants metered over another
//! window — in the *scanned* set `C`, evaluated at every dispatch as before.
//!
//! # Why the pruning is exact
//!
//! The deficits compared are the floating-point values the scan computes, not the exact ones,
//! so `S` is walked in order of `k` and every tenant walked is evaluated with the very same
//! code as the scan ([`ReserveScheduler::eval`]) and compared with the scan's rule. The walk
//! stops at the first tenant with key `k_j` once the best deficit found, `best`, satisfies
//! `1 − y + 10⁻¹⁵(1 + y) < best` with `y = k_j(1 − 10⁻¹²)/D`. Every tenant left has
//! `k ≥ k_j`; with ε = 2⁻⁵³ and every number normal (see `TINY`), the scan computes for it
//! `cpu = fl(c/D)` with `cpu/R ≥ k(1 − 2ε)/D ≥ y` (`k = fl(c/R)` is itself within one
//! rounding of `c/R`, and the 10⁻¹² covers the rounding of `y`), then
//! `d = fl(1 − fl(cpu/R))` or `fl(fl(R − cpu)/R)`, both within `3ε(1 + cpu/R)` of
//! `1 − cpu/R`, which decreases in `cpu/R`. So `d ≤ 1 − y + 4ε(1 + y) <` the bound `< best`:
//! it is strictly worse and cannot be chosen, not even by a tie-break. Tenants with `k = 0`
//! (nothing used yet in the window; frequent right after a window starts) all have `d = 1`
//! and tie key `1` exactly, and more generally tenants with equal `c`, `R` and `ResCPU`
//! (frequent with equal quanta and reservations) get identical deficits and tie keys: only
//! the lowest id among them below `MaxCPU` can win, so each such group is sorted by id and
//! evaluated up to its first member below `MaxCPU`.
//!
//! A running tenant in `C` whose utilization cannot fall until its counts change gets an
//! upper bound on its deficit when it is filed (`running_bound`): `C` is scanned after the
//! walk, and a tenant whose bound is below the best found is skipped without evaluation.
//!
//! When the assumptions do not hold — a revenue or blended deficit (Eq. 6, 7: they move with
//! the tenant's delay), or the instant a window starts (`D = 0`) — the full scan runs.
//!
//! Keeping the sets: a tenant whose state changes (enqueue, dispatch, completion, cancel,
//! new terms) is marked dirty and re-filed at the next dispatch; when the window ends
//! (every `S` key resets) or the core count changes, the sets are rebuilt from scratch, once
//! per metering interval.

use std::collections::BTreeSet;
use std::ops::Bound;

use super::{DeficitMode, LdfOptions, Pick, ReserveScheduler};

/// Bounds of the numbers in the pruning argument: with `c`, `D` in `[TINY, HUGE]` and
/// `R ∈ [MIN_RES, 100]`, every quotient stays a normal number, where each rounding is
/// within a relative 2⁻⁵³. Tenants outside are scanned; a `D` outside runs the full scan.
const TINY: f64 = 1e-200;
const HUGE: f64 = 1e200;
/// The smallest reservation (%) kept in `S`.
const MIN_RES: f64 = 1e-6;

/// A tenant's place in `S`. Tenants with equal `c`, `R` and `ResCPU` (the tie key's
/// divisor) get bit-identical deficits and tie keys from the scan, so among those below
/// `MaxCPU` only the lowest id can win: the walk evaluates that one and skips the group.
/// Keys are ≥ +0, so their bit patterns sort as the numbers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Entry {
    k: u64,
    c: u64,
    r: u64,
    res: u64,
    id: u64,
    t: usize,
}

impl Entry {
    /// The last possible entry of `self`'s group.
    fn group_end(self) -> Entry {
        Entry {
            id: u64::MAX,
            t: usize::MAX,
            ..self
        }
    }
}

/// Where a tenant is filed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Filed {
    No,
    /// In `S` under this entry.
    Sorted(Entry),
    /// In `C` at this position.
    Scanned(usize),
}

/// The two sets of the fast LDF (see the module docs).
#[derive(Debug, Default)]
pub(super) struct LdfIndex {
    /// The window of `S`: start and length; `None` until built, or after an invalidation.
    window: Option<(f64, f64)>,
    /// `S`, ascending.
    sorted: BTreeSet<Entry>,
    /// `C`: handles.
    scanned: Vec<usize>,
    filed: Vec<Filed>,
    /// Per tenant in `C`: an upper bound on its deficit until it is re-filed (∞: none).
    bound: Vec<f64>,
    dirty: Vec<usize>,
    is_dirty: Vec<bool>,
}

impl LdfIndex {
    /// Make room for handle `t`.
    pub(super) fn grow(&mut self, t: usize) {
        if self.filed.len() <= t {
            self.filed.resize(t + 1, Filed::No);
            self.bound.resize(t + 1, f64::INFINITY);
            self.is_dirty.resize(t + 1, false);
        }
    }

    /// Tenant `t`'s state changed: re-file it before the next dispatch.
    pub(super) fn mark(&mut self, t: usize) {
        self.grow(t);
        if !self.is_dirty[t] {
            self.is_dirty[t] = true;
            self.dirty.push(t);
        }
    }

    /// Rebuild everything at the next dispatch (the core count changed).
    pub(super) fn invalidate(&mut self) {
        self.window = None;
    }

    fn unfile(&mut self, t: usize) {
        match self.filed[t] {
            Filed::No => {}
            Filed::Sorted(e) => {
                self.sorted.remove(&e);
            }
            Filed::Scanned(p) => {
                self.scanned.swap_remove(p);
                if let Some(&moved) = self.scanned.get(p) {
                    self.filed[moved] = Filed::Scanned(p);
                }
            }
        }
        self.filed[t] = Filed::No;
    }

    fn clear(&mut self) {
        self.sorted.clear();
        self.scanned.clear();
        self.filed.iter_mut().for_each(|f| *f = Filed::No);
        self.dirty.clear();
        self.is_dirty.iter_mut().for_each(|d| *d = false);
    }
}

/// Whether the fast path can serve these options (the revenue deficits move with delay).
pub(super) fn applies(o: LdfOptions) -> bool {
    o.deficit == DeficitMode::Fractional
}

/// The scan's rule: is `(d, tie, id)` better than the best so far?
pub(super) fn better(best: Option<(usize, f64, f64, u64)>, d: f64, tie: f64, id: u64) -> bool {
    match best {
        None => true,
        Some((_, bd, btie, bid)) => {
            d > bd || (d == bd && (tie > btie || (tie == btie && id < bid)))
        }
    }
}

impl<T> ReserveScheduler<T> {
    /// File active tenant `t` in `S` or `C` (its meter is synced to `now`).
    fn file(&mut self, t: usize, o: LdfOptions, now: f64) {
        self.meter.sync(t, now);
        let now = self.meter.now();
        let u = self.meter.usage(t);
        let terms = &self.tenants[t].terms;
        let window = self.ldf_index.window;
        let cores = self.cores as f64;
        // As `deficit` chooses it; constant while nothing runs (the budget is).
        let mut r = terms.res_cpu;
        if o.boost {
            if let Some(e) = terms.elastic {
                if u.budget_cpu(now, cores) < e.f * r {
                    r = e.b;
                }
            }
        }
        let c = u.consumed(now) * 100.0;
        // The bounds are relative roundings: keep every number they involve normal (see
        // `TINY`); anything else is scanned.
        let sortable = terms.res_cpu > 0.0
            && u.running == 0
            && u.start_sum == 0.0
            && window == Some((u.start, u.len))
            && r >= MIN_RES
            && terms.effective_weight() == r
            && (c == 0.0 || (TINY..=HUGE).contains(&c));
        if !sortable {
            let ub = self.running_bound(t, o, now);
            let ix = &mut self.ldf_index;
            ix.filed[t] = Filed::Scanned(ix.scanned.len());
            ix.scanned.push(t);
            ix.bound[t] = ub;
            return;
        }
        // + 0.0 turns a −0 into +0, so that the bit patterns sort as the numbers.
        let k = (c / r).max(0.0) + 0.0;
        let id = self.tenants[t].id.0;
        // With c = 0 the deficit and tie key are 1 whatever R and ResCPU are: one group.
        let (rb, resb) = if c == 0.0 {
            (0, 0)
        } else {
            (r.to_bits(), terms.res_cpu.to_bits())
        };
        let e = Entry {
            k: k.to_bits(),
            c: (c + 0.0).to_bits(),
            r: rb,
            res: resb,
            id,
            t,
        };
        let ix = &mut self.ldf_index;
        ix.sorted.insert(e);
        ix.filed[t] = Filed::Sorted(e);
    }

    /// An upper bound on the deficit the scan would compute for tenant `t` at any time from
    /// `now` until it is re-filed, or ∞. Only for a running tenant with a reservation, the
    /// default weight, no boosting, metered over the window of `S`, whose utilization
    /// cannot fall: `cpu(n) ∝ (U₀ + r(n − now)) / (n − s)` never decreases when
    /// `r(now − s) ≥ U₀`, as long as its counts stay put (any change re-files it). Then
    /// `cpu(n) ≥ cpu(now)`, and the floating-point `cpu` the scan computes is within `E` of
    /// the exact one, where `E` bounds the rounding of `consumed = used + r·n − Σstart`
    /// (`10⁻¹⁴ × (|used| + r·max|n| + |Σstart|)`, ≥ 20 roundings of its largest term) over
    /// `cores·(now − s)`. With `y ≤ cpu/R` the deficit is at most `1 − y + 4ε(1 + y)` in
    /// both branches, as for `S` (module docs).
    fn running_bound(&self, t: usize, o: LdfOptions, now: f64) -> f64 {
        let u = self.meter.usage(t);
        let terms = &self.tenants[t].terms;
        let res = terms.res_cpu;
        let simple = res >= MIN_RES
            && terms.effective_weight() == res
            && !(o.boost && terms.elastic.is_some())
            && u.running > 0
            && self.ldf_index.window == Some((u.start, u.len));
        let elapsed = now - u.start;
        if !simple || elapsed.is_nan() || elapsed <= 0.0 {
            return f64::INFINITY;
        }
        let cores = self.cores as f64;
        let r = u.running as f64;
        let consumed = u.consumed(now);
        let far = u.start.abs().max((u.start + u.len).abs());
        let err = 1e-14 * (u.used.abs() + r * far + u.start_sum.abs());
        // Utilization might fall (or a NaN): no bound.
        let rising = r * elapsed * (1.0 - 1e-12) >= consumed + err;
        if !rising {
            return f64::INFINITY;
        }
        let e_cpu = err * 100.0 / (cores * elapsed);
        let cpu_lb = u.cpu(now, cores) * (1.0 - 1e-14) - 3.0 * e_cpu;
        let y = cpu_lb / res * (1.0 - 1e-12);
        let ub = (1.0 - y) + 1e-15 * (1.0 + y.abs());
        if ub.is_finite() {
            ub
        } else {
            f64::INFINITY
        }
    }

    /// Bring `S` and `C` up to date at meter time `now`.
    fn refresh_index(&mut self, o: LdfOptions, now: f64) {
        let current = match self.ldf_index.window {
            Some((s, len)) => now >= s && now < s + len,
            None => false,
        };
        if !current {
            self.ldf_index.clear();
            self.ldf_index.grow(self.tenants.len().saturating_sub(1));
            // The window of S: the default interval's, as the tenants' meters have it.
            self.ldf_index.window = self.active.iter().find_map(|&t| {
                self.meter.sync(t, now);
                let u = self.meter.usage(t);
                (u.len == self.interval).then_some((u.start, u.len))
            });
            for k in 0..self.active.len() {
                let t = self.active[k];
                self.file(t, o, now);
            }
            return;
        }
        while let Some(t) = self.ldf_index.dirty.pop() {
            self.ldf_index.is_dirty[t] = false;
            self.ldf_index.unfile(t);
            if self.pos[t] != super::NOT_ACTIVE {
                self.file(t, o, now);
            }
        }
    }

    /// Alg. 2's dequeue through `S` and `C`: the decision of [`Self::select_ldf_scan`].
    pub(super) fn select_ldf(&mut self, o: LdfOptions, now: f64) -> Pick {
        if !applies(o) || self.active.is_empty() {
            return self.select_ldf_scan(o, now);
        }
        let first = self.active[0];
        self.meter.sync(first, now);
        let now = self.meter.now();
        self.refresh_index(o, now);
        let Some((start, _)) = self.ldf_index.window else {
            return self.select_ldf_scan(o, now);
        };
        let elapsed = now - start;
        let big_d = self.cores as f64 * elapsed;
        if !(TINY..=HUGE).contains(&big_d) {
            return self.select_ldf_scan(o, now);
        }
        let mut best: Option<(usize, f64, f64, u64)> = None;
        let mut retry = f64::INFINITY;
        // Walk S by key (see the module docs for the stopping rule).
        let mut after: Bound<Entry> = Bound::Unbounded;
        while let Some(&e) = self
            .ldf_index
            .sorted
            .range((after, Bound::Unbounded))
            .next()
        {
            if let Some((_, bd, _, _)) = best {
                let y_lb = f64::from_bits(e.k) / big_d * (1.0 - 1e-12);
                if (1.0 - y_lb) + 1e-15 * (1.0 + y_lb) < bd {
                    break;
                }
            }
            after = if self.consider(e.t, o, now, &mut best, &mut retry) {
                // The rest of its group ties with it and has higher ids.
                Bound::Excluded(e.group_end())
            } else {
                Bound::Excluded(e)
            };
        }
        // Then C, skipping running tenants whose bound is below the best (see `running_bound`).
        for k in 0..self.ldf_index.scanned.len() {
            let t = self.ldf_index.scanned[k];
            if let Some((_, bd, _, _)) = best {
                if self.ldf_index.bound[t] < bd {
                    continue;
                }
            }
            self.consider(t, o, now, &mut best, &mut retry);
        }
        match best {
            Some((t, _, _, _)) => Pick::Tenant(t),
            None => Pick::Retry(retry),
        }
    }

    /// Evaluate `t` as the scan does and keep it if it is better; whether it is below
    /// `MaxCPU`.
    fn consider(
        &mut self,
        t: usize,
        o: LdfOptions,
        now: f64,
        best: &mut Option<(usize, f64, f64, u64)>,
        retry: &mut f64,
    ) -> bool {
        match self.eval(t, o, now) {
            Err(at) => {
                *retry = retry.min(at);
                false
            }
            Ok((d, tie)) => {
                let id = self.tenants[t].id.0;
                if better(*best, d, tie, id) {
                    *best = Some((t, d, tie, id));
                }
                true
            }
        }
    }
}
