//! A task and its result in one allocation: the queued job runs the task and fills the slot,
//! the handle waits on the slot (blocking `wait` or async `poll`). A job dropped without
//! running resolves the handle with [`TaskError::NotRun`], so a task that is never run can
//! never leave its submitter waiting forever.
//!
//! One allocation instead of two (a boxed closure and a shared result slot) is also one
//! cross-thread free less per task: the submitter allocates, and the slot is usually freed by
//! the handle's owner (the submitter again), where the allocator's thread cache reuses it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::error::{Panic, TaskError};

enum State<R> {
    Pending {
        /// A thread is blocked in `wait`.
        blocked: bool,
        waker: Option<Waker>,
    },
    Done(Result<R, TaskError>),
    Taken,
}

struct Slot<R> {
    state: Mutex<State<R>>,
    cv: Condvar,
}

impl<R> Slot<R> {
    fn lock(&self) -> MutexGuard<'_, State<R>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Store `value` unless something is stored already; wake whoever waits.
    fn fill(&self, value: Result<R, TaskError>) {
        let mut st = self.lock();
        if let State::Pending { blocked, waker } = &mut *st {
            let blocked = *blocked;
            let waker = waker.take();
            *st = State::Done(value);
            drop(st);
            if blocked {
                self.cv.notify_all();
            }
            if let Some(w) = waker {
                w.wake();
            }
        }
    }
}

/// The task (until it runs) and its result slot, shared by the job and the handle.
struct Cell<F, R> {
    slot: Slot<R>,
    /// Taken once, by the job (never contended: the handle's side does not touch it; a lock
    /// rather than a cell only because the crate has no unsafe code outside `cpu`).
    task: Mutex<Option<F>>,
}

impl<F, R> Cell<F, R> {
    fn take(&self) -> Option<F> {
        self.task.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// What the job can do with its cell, whatever the task's type.
trait Run: Send + Sync {
    /// Run the task if still there (see [`Job::run`]).
    fn run(&self, done: &mut dyn FnMut(bool)) -> bool;
    /// Drop the task unrun (its captures' drops are user code) and resolve `NotRun`.
    fn discard(&self);
}

/// Fills the slot with `NotRun` if dropped armed: a task whose captures panic on drop, or a
/// `done` that unwinds, still resolves the handle.
struct NotRunGuard<'a, R>(&'a Slot<R>);

impl<R> Drop for NotRunGuard<'_, R> {
    fn drop(&mut self) {
        self.0.fill(Err(TaskError::NotRun));
    }
}

impl<F: FnOnce() -> R + Send, R: Send> Run for Cell<F, R> {
    fn run(&self, done: &mut dyn FnMut(bool)) -> bool {
        let Some(task) = self.take() else {
            return false;
        };
        let guard = NotRunGuard(&self.slot);
        let result = catch_unwind(AssertUnwindSafe(task));
        let panicked = result.is_err();
        done(panicked);
        std::mem::forget(guard);
        self.slot
            .fill(result.map_err(|p| TaskError::Panicked(Panic::new(p))));
        panicked
    }

    fn discard(&self) {
        let _guard = NotRunGuard(&self.slot);
        drop(self.take());
    }
}

/// The queued side: runs the task once, or resolves the handle with `NotRun` when dropped.
pub(crate) struct Job(Option<Arc<dyn Run>>);

impl Job {
    /// Run the task on this thread; it calls `done(panicked)` once the task has returned or
    /// panicked, before the handle is filled. Returns whether it panicked.
    pub fn run(mut self, done: &mut dyn FnMut(bool)) -> bool {
        self.0.take().is_some_and(|cell| cell.run(done))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if let Some(cell) = self.0.take() {
            cell.discard();
        }
    }
}

/// Access to the slot, whatever the task's type.
trait HasSlot<R>: Send + Sync {
    fn slot(&self) -> &Slot<R>;
}

impl<F: Send, R: Send> HasSlot<R> for Cell<F, R> {
    fn slot(&self) -> &Slot<R> {
        &self.slot
    }
}

/// The handle's side: waits for the result.
pub(crate) struct Receiver<R>(Arc<dyn HasSlot<R>>);

/// A job that runs `task`, and the receiver of its result: one allocation.
pub(crate) fn task<F, R>(task: F) -> (Job, Receiver<R>)
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let cell = Arc::new(Cell {
        slot: Slot {
            state: Mutex::new(State::Pending {
                blocked: false,
                waker: None,
            }),
            cv: Condvar::new(),
        },
        task: Mutex::new(Some(task)),
    });
    (Job(Some(cell.clone())), Receiver(cell))
}

impl<R> Receiver<R> {
    /// Resolve the receiver now (a cancelled task), unless it resolved already.
    pub fn resolve(&self, value: Result<R, TaskError>) {
        self.0.slot().fill(value);
    }

    pub fn is_done(&self) -> bool {
        matches!(&*self.0.slot().lock(), State::Done(_) | State::Taken)
    }

    pub fn wait(&self) -> Result<R, TaskError> {
        let slot = self.0.slot();
        let mut st = slot.lock();
        loop {
            match std::mem::replace(&mut *st, State::Taken) {
                State::Done(v) => return v,
                State::Taken => return Err(TaskError::NotRun), // taken by an earlier poll
                State::Pending { waker, .. } => {
                    *st = State::Pending {
                        blocked: true,
                        waker,
                    };
                    st = slot.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<R, TaskError>> {
        let slot = self.0.slot();
        let mut st = slot.lock();
        match &mut *st {
            State::Pending { waker, .. } => {
                match waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => *waker = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
            State::Done(_) | State::Taken => match std::mem::replace(&mut *st, State::Taken) {
                State::Done(v) => Poll::Ready(v),
                _ => Poll::Ready(Err(TaskError::NotRun)), // polled again after completion
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell_size<F, R>(_: &F) -> usize {
        std::mem::size_of::<Cell<F, R>>()
    }

    /// The bench's task (a closure over one `u64`, returning `u64`) fits an allocation of at
    /// most 120 bytes with the `Arc`'s two counts: glibc keeps chunks of up to 128 bytes in
    /// its fast bins, so a task allocated on one thread and freed on another is not
    /// consolidated on every free. A `Panic` is boxed for this.
    #[test]
    fn a_small_task_is_one_small_allocation() {
        let x = 7u64;
        let f = move || x * 6;
        let size = cell_size::<_, u64>(&f) + 2 * std::mem::size_of::<usize>();
        assert!(size <= 120, "{size} bytes");
        let (job, rx) = task(f);
        assert!(!job.run(&mut |_| {}));
        assert_eq!(rx.wait().unwrap(), 42);
    }

    #[test]
    fn a_job_dropped_unrun_resolves_not_run() {
        let (job, rx) = task(|| 1u8);
        drop(job);
        assert!(matches!(rx.wait(), Err(TaskError::NotRun)));
    }

    #[test]
    fn a_capture_that_panics_on_drop_still_resolves_the_handle() {
        struct Bomb;
        impl Drop for Bomb {
            fn drop(&mut self) {
                panic!("bomb");
            }
        }
        let bomb = Bomb;
        let (job, rx) = task(move || {
            let _b = &bomb;
            1u8
        });
        assert!(catch_unwind(AssertUnwindSafe(|| drop(job))).is_err());
        assert!(matches!(rx.wait(), Err(TaskError::NotRun)));
    }

    #[test]
    fn a_panicking_task_reports_it_and_fills_the_handle() {
        let (job, rx) = task(|| -> u8 { panic!("no") });
        let mut seen = None;
        assert!(job.run(&mut |p| seen = Some(p)));
        assert_eq!(seen, Some(true));
        match rx.wait() {
            Err(TaskError::Panicked(p)) => assert_eq!(p.message(), "no"),
            other => panic!("{other:?}"),
        }
    }
}
