//! What ends a request's wait and its upstream exchange early: the queue and upstream
//! timeouts (one timer, re-armed) and the proxy's hard stop.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;
use tokio::time::Sleep;

/// What ends a request's wait and its upstream exchange early: the queue and upstream
/// timeouts (one timer, re-armed) and the proxy's hard stop.
///
/// The own HTTP/1 path keeps one for each connection (issue 19): its timer stays in the
/// wheel across requests and is moved on only when it fires early ([`arm`], [`poll_due`]),
/// and its hard-stop waiter stays registered, so a request makes no timer entry and
/// registers no waiter. hyper's path makes one per request (`pipeline::dispatch` with `None`).
pub(crate) struct Bounds<'a> {
    /// The queue timeout while the request waits for a slot, then the upstream timeout.
    pub timer: Pin<&'a mut Sleep>,
    /// Resolves once the proxy hard-stops.
    pub hard_stop: Stop<'a>,
}

/// A stop signal as one task watches it: the proxy's hard stop (`Inner::hard_stop`), or a
/// connection's stop (the proxy's shutdown, or the table evicting it: [`Stop::or_flag`]).
/// Its waiter is registered by the first poll and stays registered while this lives; later
/// polls from the same task read the watch's version (one atomic load) and the flag, if
/// any, rather than lock the waiter lists, as polling a registered `Notified` does. Ready
/// for good once the stop has come.
pub(crate) struct Stop<'a> {
    /// A receiver that never marks a value seen: its version changes only with a send.
    seen: &'a watch::Receiver<bool>,
    /// The waiter: `wait_for(true)` on another receiver of the same watch (and, with a flag,
    /// the notification sent after the flag is set).
    wait: Pin<&'a mut (dyn Future<Output = ()> + Send + 'a)>,
    /// Set before `wait`'s other waker is notified (a connection's eviction), if any.
    flag: Option<&'a AtomicBool>,
    /// The waker `wait` was registered with, once it was polled.
    waker: Option<Waker>,
    stopped: bool,
}

impl<'a> Stop<'a> {
    /// Watch for a stop: `seen` a receiver of its watch (`Inner::hard_stop`, or the
    /// shutdown watch), `wait` a future over another one that resolves when its value is (or
    /// becomes) true.
    pub fn new(
        seen: &'a watch::Receiver<bool>,
        wait: Pin<&'a mut (dyn Future<Output = ()> + Send + 'a)>,
    ) -> Self {
        Stop {
            seen,
            wait,
            flag: None,
            waker: None,
            stopped: false,
        }
    }

    /// Also look at `flag` before polling `wait`: `wait` resolves on a notification sent
    /// just after `flag` is set (besides the watch's send).
    pub fn or_flag(mut self, flag: &'a AtomicBool) -> Self {
        self.flag = Some(flag);
        self
    }

    /// Ready once the stop has come (and on every poll after).
    pub fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.stopped {
            return Poll::Ready(());
        }
        // Registered with this task's waker and nothing sent or flagged since: nothing to do.
        if let Some(w) = &self.waker {
            if w.will_wake(cx.waker())
                && matches!(self.seen.has_changed(), Ok(false))
                && !self.flag.is_some_and(|f| f.load(Acquire))
            {
                return Poll::Pending;
            }
        }
        match self.wait.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stopped = true;
                self.waker = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    self.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

/// Make `timer` fire no later than `due`. A timer still armed for an earlier deadline (the
/// connection's previous request) is left as it is, and [`poll_due`] moves it on when it
/// fires: `Sleep::reset` clones the runtime handle (an atomic increment and decrement on a
/// count every worker thread shares), so a reset per request costs about what a new
/// `Sleep` does (issue 19). A connection's timer is then reset about once per timeout,
/// not once per request.
pub(crate) fn arm(timer: Pin<&mut Sleep>, due: tokio::time::Instant) {
    if timer.is_elapsed() || timer.deadline() > due {
        timer.reset(due);
    }
}

/// Ready once `due` has passed, with `timer` [`arm`]ed for it: when it fires for an earlier
/// deadline, it is reset to `due`.
pub(crate) fn poll_due(
    mut timer: Pin<&mut Sleep>,
    due: tokio::time::Instant,
    cx: &mut Context<'_>,
) -> Poll<()> {
    loop {
        std::task::ready!(timer.as_mut().poll(cx));
        if timer.deadline() >= due {
            return Poll::Ready(());
        }
        timer.as_mut().reset(due);
    }
}
