//! # fairlane-sim
//!
//! A deterministic discrete-event simulator for fair schedulers. A server is a stage of `n`
//! workers of a given rate pulling from any `fairlane-core` scheduler through the seam;
//! tenants arrive backlogged, open (Poisson, ON/OFF), closed-loop or from a trace, with costs
//! from constant, normal, log-normal, exponential, uniform, empirical, histogram or pooled
//! distributions. Each run measures per-tenant service, service lag against the exact GPS
//! reference, latency percentiles, the Gini index over time and thread occupancy.
//!
//! Experiments are TOML specs ([`SpecFile`]); the same spec and seed give the same results.
//!
//! ```
//! use fairlane_sim::SpecFile;
//! let spec = SpecFile::parse(r#"
//!     name = "two tenants"
//!     duration = 5.0
//!     schedulers = ["wfq", "2dfq"]
//!     [server]
//!     workers = 2
//!     rate = 1000.0
//!     [[tenant]]
//!     name = "small"
//!     arrival = { kind = "backlogged" }
//!     cost = { kind = "constant", value = 1.0 }
//!     [[tenant]]
//!     name = "large"
//!     arrival = { kind = "backlogged" }
//!     cost = { kind = "constant", value = 100.0 }
//! "#, "example.toml", ".".into()).unwrap();
//! let results = fairlane_sim::run_all(&spec.scenarios().unwrap(), 1, &mut |_| {}).unwrap();
//! let wfq = &results[0];
//! assert_eq!(wfq.scheduler, "wfq");
//! // Equal weights: both tenants get about half of the 2 × 1000 units/s.
//! let small = &wfq.tenants[0];
//! assert!((small.work / 5.0 - 1000.0).abs() < 50.0);
//! ```

pub mod anyspec;
pub mod blackbox;
pub mod dbreport;
pub mod dbserver;
pub mod engine;
pub mod events;
pub mod llm;
pub mod metrics;
pub mod production;
pub mod report;
pub mod rng;
pub mod service;
pub mod spec;
pub mod tam;
pub mod trace;
pub mod workload;
mod ziggurat;

pub use anyspec::{AnyError, AnyRuns, AnySpec};
pub use engine::{run, run_with_scheduler, RunResult, SimError, SimErrorKind};
pub use spec::{Scenario, SchedulerChoice, Spec, SpecError, SpecFile};

/// Where a batch of runs is: the fraction of simulated time done over all runs, and how
/// many runs of how many have finished.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchProgress {
    /// Done fraction in [0, 1].
    pub fraction: f64,
    /// Runs finished.
    pub runs_done: usize,
    /// Runs in the batch.
    pub runs: usize,
}

/// Run every scheduler on every scenario, `jobs` runs at a time, results in scenario-major
/// then scheduler order. `progress(done_fraction)` reports the whole batch.
pub fn run_all(
    scenarios: &[Scenario],
    jobs: usize,
    progress: &mut (dyn FnMut(f64) + Send),
) -> Result<Vec<RunResult>, SimError> {
    run_all_batch(scenarios, jobs, &mut |p: BatchProgress| {
        progress(p.fraction)
    })
}

/// [`run_all`] reporting runs done as well.
pub fn run_all_batch(
    scenarios: &[Scenario],
    jobs: usize,
    progress: &mut (dyn FnMut(BatchProgress) + Send),
) -> Result<Vec<RunResult>, SimError> {
    let tasks: Vec<(&Scenario, &SchedulerChoice)> = scenarios
        .iter()
        .flat_map(|sc| sc.schedulers.iter().map(move |c| (sc, c)))
        .collect();
    parallel(tasks.len(), jobs, progress, |i, report| {
        let (sc, choice) = tasks[i];
        engine::run(sc, choice, report).map(|mut r| {
            r.scheduler = choice.name.clone();
            r
        })
    })
}

/// Run tasks `0..n`, `jobs` at a time, results in task order; `progress` gets the batch's
/// progress (each task reports its own fraction through the callback it is given).
pub(crate) fn parallel<T: Send>(
    n: usize,
    jobs: usize,
    progress: &mut (dyn FnMut(BatchProgress) + Send),
    task: impl Fn(usize, &mut dyn FnMut(f64)) -> Result<T, SimError> + Sync,
) -> Result<Vec<T>, SimError> {
    let total = n.max(1) as f64;
    let jobs = jobs.clamp(1, n.max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let shared = std::sync::Mutex::new((vec![0.0f64; n], 0usize, progress));
    let slots: std::sync::Mutex<Vec<Option<Result<T, SimError>>>> =
        std::sync::Mutex::new((0..n).map(|_| None).collect());
    let tell = |i: usize, x: Option<f64>| {
        let mut g = shared.lock().unwrap_or_else(|e| e.into_inner());
        match x {
            Some(x) => g.0[i] = x,
            None => {
                g.0[i] = 1.0;
                g.1 += 1;
            }
        }
        let p = BatchProgress {
            fraction: g.0.iter().sum::<f64>() / total,
            runs_done: g.1,
            runs: n,
        };
        (g.2)(p);
    };
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let r = task(i, &mut |x| tell(i, Some(x)));
                slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                tell(i, None);
            });
        }
    });
    slots
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(SimError::new(
                    SimErrorKind::Internal,
                    "a run did not finish",
                ))
            })
        })
        .collect()
}
