//! Running a batch of independent runs on `jobs` threads, results in task order, with the
//! batch's progress: how every kind runs its points and schedulers.

use crate::error::{SimError, SimErrorKind};

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
