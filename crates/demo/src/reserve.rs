//! `fairlane demo pool --reservations`: CPU reservations (Das et al., VLDB 2014) on a real
//! [`FairPool`]. The pool runs an LDF
//! [`ReserveScheduler`](fairlane_core::reserve::ReserveScheduler) built by the caller and
//! handed over as a plain `Box<dyn Scheduler>`: percentages are of the pool's CPU (workers × time),
//! metered over the scheduler's interval, in the thread CPU time each task really used.
//!
//! The tenants: two *reserved* tenants (by default 20 % and 30 % of the pool, each limited to
//! its reservation) and four *bullies* without a reservation; everybody keeps many CPU-bound
//! quanta (1 ms of CPU each) outstanding, so the bullies alone would saturate the pool. Under
//! LDF each reserved tenant gets its reservation in every interval; under 2DFQᴱ with equal
//! weights (the comparison) it gets its fair share of one sixth, whatever it reserved.
//!
//! ```no_run
//! use fairlane_demo::reserve::{run, ReserveDemoOptions};
//! let report = run(&ReserveDemoOptions::default()).unwrap();
//! print!("{}", report.to_table());
//! ```

use std::fmt::{self, Write as _};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use fairlane_core::reserve::{Policy, Reservation, ReserveConfig};
use fairlane_core::{BoxedScheduler, Config, TenantId};
use fairlane_runtime::cpu::thread_cpu_time;
use fairlane_runtime::{Clock, CostClock, FairPool, SystemClock};
use serde::Serialize;

use crate::pool::DemoError;

/// The demo's knobs.
#[derive(Clone, Debug, PartialEq)]
pub struct ReserveDemoOptions {
    /// Worker threads (= the reservation scheduler's cores).
    pub workers: usize,
    /// The metering interval.
    pub interval: Duration,
    /// Intervals measured (after one of warm-up).
    pub intervals: usize,
    /// Reserved tenants' reservations (= limits), % of the pool.
    pub reservations: Vec<f64>,
    /// Tenants without a reservation.
    pub bullies: usize,
    /// CPU time of one task (one scheduling quantum).
    pub quantum: Duration,
    /// Tasks each tenant keeps outstanding.
    pub outstanding: usize,
}

impl Default for ReserveDemoOptions {
    fn default() -> Self {
        ReserveDemoOptions {
            workers: 2,
            interval: Duration::from_millis(500),
            intervals: 10,
            reservations: vec![20.0, 30.0],
            bullies: 4,
            quantum: Duration::from_millis(1),
            outstanding: 8,
        }
    }
}

/// One tenant under one scheduler: its share of the pool's CPU in each measured interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReserveTenant {
    /// `reserved-20` or `bully-1`.
    pub name: String,
    /// Its reservation (% of the pool), 0 for a bully.
    pub reservation: f64,
    /// % of the pool's CPU (workers × interval) it used, per interval.
    pub shares: Vec<f64>,
}

impl ReserveTenant {
    /// The smallest, mean and largest share over the intervals.
    pub fn range(&self) -> (f64, f64, f64) {
        let n = self.shares.len().max(1) as f64;
        let min = self.shares.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self
            .shares
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        (min, self.shares.iter().sum::<f64>() / n, max)
    }

    /// The largest distance of a share from the reservation, in percentage points.
    pub fn worst_miss(&self) -> f64 {
        self.shares
            .iter()
            .map(|s| (s - self.reservation).abs())
            .fold(0.0, f64::max)
    }
}

/// One scheduler's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReserveRun {
    /// `ldf` or the comparison preset.
    pub scheduler: String,
    /// Every tenant, reserved ones first.
    pub tenants: Vec<ReserveTenant>,
    /// % of the pool's CPU used in all, per interval (the bullies saturate it).
    pub total: Vec<f64>,
    /// Scheduler calls the pool counted as failed (0 unless something is wrong).
    pub scheduler_errors: u64,
}

/// The demo's result: LDF, then 2DFQᴱ for comparison.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReserveReport {
    /// Worker threads.
    pub workers: usize,
    /// Metering interval, ms.
    pub interval_ms: f64,
    /// The runs.
    pub runs: Vec<ReserveRun>,
}

/// Burn `d` of this thread's CPU time.
fn spin(d: Duration) {
    let Some(start) = thread_cpu_time() else {
        return;
    };
    let mut x = 1u64;
    while thread_cpu_time().is_some_and(|t| t - start < d) {
        for _ in 0..500 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn validate(o: &ReserveDemoOptions) -> Result<(), DemoError> {
    let bad = |s: &str| Err(DemoError::InvalidOption(s.to_string()));
    if o.workers == 0 || o.intervals == 0 || o.outstanding == 0 {
        return bad("workers, intervals and outstanding must be at least 1");
    }
    if o.interval < Duration::from_millis(10) || o.quantum.is_zero() || o.quantum >= o.interval {
        return bad("the interval must be ≥ 10 ms and the quantum in (0, interval)");
    }
    let sum: f64 = o.reservations.iter().sum();
    if o.reservations.iter().any(|r| !(*r > 0.0 && *r <= 100.0)) || sum > 100.0 {
        return bad("reservations must be in (0, 100] % and sum to at most 100 %");
    }
    if !fairlane_runtime::cpu::thread_cpu_supported() {
        return bad("this platform has no per-thread CPU clock");
    }
    Ok(())
}

/// Run LDF and the 2DFQᴱ comparison.
pub fn run(o: &ReserveDemoOptions) -> Result<ReserveReport, DemoError> {
    validate(o)?;
    let ldf = {
        let mut s = ReserveConfig::new(Policy::ldf())
            .cores(o.workers)
            .interval(o.interval.as_nanos() as f64)
            .build::<u64>()
            .map_err(|e| DemoError::InvalidOption(e.to_string()))?;
        for (i, &r) in o.reservations.iter().enumerate() {
            // Reserved and limited to the reservation: a guaranteed slice of the pool.
            s.set_reservation(TenantId(i as u64), Reservation::new(r, r), 0.0)
                .map_err(|e| DemoError::InvalidOption(e.to_string()))?;
        }
        Box::new(s) as BoxedScheduler
    };
    let tdfqe = Config::for_executor("2dfqe", o.workers, o.quantum.as_nanos() as f64, true)
        .and_then(|c| c.build::<u64>())
        .map_err(|e| DemoError::InvalidOption(e.to_string()))?;
    Ok(ReserveReport {
        workers: o.workers,
        interval_ms: o.interval.as_secs_f64() * 1e3,
        runs: vec![run_one(o, "ldf", ldf)?, run_one(o, "2dfqe", tdfqe)?],
    })
}

fn run_one(
    o: &ReserveDemoOptions,
    name: &str,
    sched: BoxedScheduler,
) -> Result<ReserveRun, DemoError> {
    let clock = SystemClock::new();
    let pool = Arc::new(
        FairPool::builder()
            .with_scheduler(sched)
            .workers(o.workers)
            .cost_clock(CostClock::ThreadCpu)
            .clock(clock)
            .max_queued_per_tenant(o.outstanding * 2)
            .build()
            .map_err(DemoError::Pool)?,
    );
    let tenants = o.reservations.len() + o.bullies;
    let interval = o.interval.as_nanos() as u64;
    let measured = o.intervals;
    // CPU ns per tenant per interval (interval 0 is the warm-up).
    let mut cpu = vec![vec![0u64; measured + 1]; tenants];
    let (tx, rx) = mpsc::channel::<(usize, u64, u64)>();
    let submit = |t: usize| {
        let (tx, quantum) = (tx.clone(), o.quantum);
        pool.submit(t as u64, 0u32, move || {
            let start = thread_cpu_time().unwrap_or_default();
            spin(quantum);
            let used = thread_cpu_time().unwrap_or_default().saturating_sub(start);
            let _ = tx.send((t, used.as_nanos() as u64, clock.now().as_nanos() as u64));
        })
        .map(|_| ())
    };
    for t in 0..tenants {
        for _ in 0..o.outstanding {
            submit(t).map_err(|e| DemoError::InvalidOption(e.to_string()))?;
        }
    }
    let end = interval * (measured as u64 + 1);
    while let Ok((t, used, at)) = rx.recv() {
        if at >= end {
            break;
        }
        cpu[t][(at / interval) as usize] += used;
        // Closed loop: the tenant always has `outstanding` tasks.
        if submit(t).is_err() {
            break;
        }
    }
    let errors = pool.scheduler_errors();
    drop(pool.shutdown_now()); // the tasks still queued are dropped, not run
    let pct = |ns: u64| 100.0 * ns as f64 / (o.workers as f64 * interval as f64);
    let tenants: Vec<ReserveTenant> = (0..tenants)
        .map(|t| {
            let reserved = o.reservations.get(t).copied();
            ReserveTenant {
                name: match reserved {
                    Some(r) => format!("reserved-{r}"),
                    None => format!("bully-{}", t - o.reservations.len() + 1),
                },
                reservation: reserved.unwrap_or(0.0),
                shares: cpu[t][1..].iter().map(|&ns| pct(ns)).collect(),
            }
        })
        .collect();
    let total = (1..=measured)
        .map(|k| pct(cpu.iter().map(|c| c[k]).sum()))
        .collect();
    Ok(ReserveRun {
        scheduler: name.to_string(),
        tenants,
        total,
        scheduler_errors: errors,
    })
}

impl ReserveReport {
    /// A plain-text table: per tenant, its share of the pool per interval (min / mean / max)
    /// and its worst distance from the reservation.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let n = self.runs.first().map_or(0, |r| r.total.len());
        let _ = writeln!(
            out,
            "CPU reservations on a {}-worker FairPool: % of the pool's CPU (thread CPU time) \
             per {:.0} ms interval, {n} intervals",
            self.workers, self.interval_ms
        );
        for run in &self.runs {
            let _ = writeln!(out, "\n{}", run.scheduler);
            let _ = writeln!(
                out,
                "  {:<14} {:>8}   {:>6} {:>6} {:>6}   {:>10}",
                "tenant", "reserved", "min", "mean", "max", "worst miss"
            );
            for t in &run.tenants {
                let (min, mean, max) = t.range();
                let miss = if t.reservation > 0.0 {
                    format!("{:.1} pt", t.worst_miss())
                } else {
                    "-".into()
                };
                let _ = writeln!(
                    out,
                    "  {:<14} {:>7.0} %   {min:>6.1} {mean:>6.1} {max:>6.1}   {miss:>10}",
                    t.name, t.reservation
                );
            }
            let total = ReserveTenant {
                name: String::new(),
                reservation: 0.0,
                shares: run.total.clone(),
            };
            let (min, mean, max) = total.range();
            let _ = writeln!(
                out,
                "  {:<14} {:>8}   {min:>6.1} {mean:>6.1} {max:>6.1}",
                "all", ""
            );
        }
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }
}

impl fmt::Display for ReserveReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_table())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_options_are_errors() {
        let o = ReserveDemoOptions::default();
        for bad in [
            ReserveDemoOptions {
                workers: 0,
                ..o.clone()
            },
            ReserveDemoOptions {
                reservations: vec![60.0, 50.0],
                ..o.clone()
            },
            ReserveDemoOptions {
                quantum: Duration::from_secs(1),
                ..o.clone()
            },
        ] {
            assert!(matches!(run(&bad), Err(DemoError::InvalidOption(_))));
        }
    }
}
