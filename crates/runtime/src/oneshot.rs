//! A one-value channel from a task to its handle, usable blocking (`wait`) and async (`poll`).
//! A sender dropped without sending resolves the receiver with [`TaskError::NotRun`], so a
//! task that is never run can never leave its submitter waiting forever.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crate::pool::TaskError;

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

pub(crate) struct Sender<R>(Option<Arc<Slot<R>>>);
pub(crate) struct Receiver<R>(Arc<Slot<R>>);

pub(crate) fn channel<R>() -> (Sender<R>, Receiver<R>) {
    let slot = Arc::new(Slot {
        state: Mutex::new(State::Pending {
            blocked: false,
            waker: None,
        }),
        cv: Condvar::new(),
    });
    (Sender(Some(slot.clone())), Receiver(slot))
}

impl<R> Sender<R> {
    pub fn send(mut self, value: Result<R, TaskError>) {
        if let Some(slot) = self.0.take() {
            slot.fill(value);
        }
    }
}

impl<R> Drop for Sender<R> {
    fn drop(&mut self) {
        if let Some(slot) = self.0.take() {
            slot.fill(Err(TaskError::NotRun));
        }
    }
}

impl<R> Receiver<R> {
    /// Resolve the receiver now (a cancelled task), unless it resolved already.
    pub fn resolve(&self, value: Result<R, TaskError>) {
        self.0.fill(value);
    }

    pub fn is_done(&self) -> bool {
        matches!(&*self.0.lock(), State::Done(_) | State::Taken)
    }

    pub fn wait(&self) -> Result<R, TaskError> {
        let mut st = self.0.lock();
        loop {
            match std::mem::replace(&mut *st, State::Taken) {
                State::Done(v) => return v,
                State::Taken => return Err(TaskError::NotRun), // taken by an earlier poll
                State::Pending { waker, .. } => {
                    *st = State::Pending {
                        blocked: true,
                        waker,
                    };
                    st = self.0.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    pub fn poll(&self, cx: &mut Context<'_>) -> Poll<Result<R, TaskError>> {
        let mut st = self.0.lock();
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
