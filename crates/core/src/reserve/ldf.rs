//! Largest Deficit First (§3.4, Alg. 1) with the extensions of Alg. 2.

use super::{DeficitMode, LdfOptions, Pick, Reservation, ReserveScheduler};

/// The deficit of Alg. 2 for a tenant with `terms`, its meter `reading` so far in the interval
/// and `budget` = the share of the whole interval's CPU it has used (%).
///
/// * A tenant without a reservation has `d = −CPU / w` (Eq. 5 with `ResCPU = 0`): it only
///   ever competes for surplus.
/// * Boosting (§4): while `budget < f × ResCPU` the reservation used in `d` is `b`. The paper
///   says "CPU utilization in the metering interval is less than a fraction f of ResCPU for
///   the entire interval"; we read it as the budget of the whole interval, so that a burst
///   early in a long interval keeps its boost (our choice; see docs/reservations.md).
/// * Above the reservation, surplus is shared by weight: `d = (ResCPU − CPU) / w` (Eq. 5).
///   A boosted tenant is "above" only past `b`: Alg. 2 tests `CPU > ResCPU` after boosting,
///   which with our budget reading would cancel every boost as soon as the burst's
///   utilization so far passes the small static reservation (our choice, documented).
/// * Below it, Eq. 4, Eq. 6 or Eq. 7 by `mode`, exactly as Alg. 2 (where the revenue modes
///   replace the boosted value).
pub(super) fn deficit(
    terms: &Reservation,
    cpu: f64,
    viol_cpu: &mut dyn FnMut() -> f64,
    budget: f64,
    o: LdfOptions,
    max_price: f64,
) -> f64 {
    let res = terms.res_cpu;
    let w = terms.effective_weight();
    if res <= 0.0 {
        return -cpu / w;
    }
    let mut reservation = res;
    if o.boost {
        if let Some(e) = terms.elastic {
            if budget < e.f * res {
                reservation = e.b;
            }
        }
    }
    let mut d = 1.0 - cpu / reservation;
    if cpu > reservation {
        d = (reservation - cpu) / w;
    } else {
        match o.deficit {
            DeficitMode::Fractional => {}
            DeficitMode::Revenue => d = terms.penalty.refund(viol_cpu()) * terms.price,
            DeficitMode::Blend { alpha } => {
                let revenue = if max_price > 0.0 {
                    terms.penalty.refund(viol_cpu()) * terms.price / max_price
                } else {
                    0.0
                };
                d = alpha * (1.0 - cpu / res) + (1.0 - alpha) * revenue;
            }
        }
    }
    d
}

/// Ties between equal deficits (frequent under the step penalties of Eq. 6) go to the larger
/// fractional deficit (Eq. 4), then to the lower tenant id: Alg. 2 keeps the first tenant it
/// scans, and our scan order is not meaningful, so we state one.
fn tie_key(terms: &Reservation, cpu: f64) -> f64 {
    if terms.res_cpu > 0.0 {
        1.0 - cpu / terms.res_cpu
    } else {
        -cpu / terms.effective_weight()
    }
}

impl<T> ReserveScheduler<T> {
    /// The deficit of active tenant `t` now, or `Err(retry time)` if it is at `MaxCPU`.
    pub(super) fn eval(&mut self, t: usize, o: LdfOptions, now: f64) -> Result<(f64, f64), f64> {
        self.examined += 1;
        self.meter.sync(t, now);
        let now = self.meter.now();
        let cores = self.cores as f64;
        let u = self.meter.usage(t);
        let cpu = u.cpu(now, cores);
        let terms = &self.tenants[t].terms;
        if cpu >= terms.max_cpu {
            return Err(u.below_at(terms.max_cpu, now, cores).unwrap_or(now));
        }
        let meter = &self.meter;
        let mut viol = || meter.viol_cpu(t);
        let d = deficit(
            terms,
            cpu,
            &mut viol,
            u.budget_cpu(now, cores),
            o,
            self.max_price,
        );
        let tie = tie_key(terms, cpu);
        self.tenants[t].deficit = d;
        Ok((d, tie))
    }

    /// Alg. 2's dequeue by a full scan: the active tenant below `MaxCPU` with the largest
    /// deficit; if every active tenant is at its limit, idle until the first of them falls
    /// below it. [`Self::select_ldf`] makes the same decisions faster; this scan is its
    /// reference and serves the deficit modes it does not.
    pub(super) fn select_ldf_scan(&mut self, o: LdfOptions, now: f64) -> Pick {
        let mut best: Option<(usize, f64, f64, u64)> = None;
        let mut retry = f64::INFINITY;
        for k in 0..self.active.len() {
            let t = self.active[k];
            match self.eval(t, o, now) {
                Err(at) => retry = retry.min(at),
                Ok((d, tie)) => {
                    let id = self.tenants[t].id.0;
                    if super::ldf_fast::better(best, d, tie, id) {
                        best = Some((t, d, tie, id));
                    }
                }
            }
        }
        match best {
            Some((t, _, _, _)) => Pick::Tenant(t),
            None => Pick::Retry(retry),
        }
    }
}
