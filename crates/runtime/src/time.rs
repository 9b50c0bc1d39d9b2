//! Injected time: the executors ([`FairPool`](crate::FairPool), [`FairGate`](crate::FairGate)
//! and the proxy on top of the gate) read the scheduler's `now` from a [`Clock`], never from
//! `Instant::now()` directly. Production uses [`SystemClock`]; tests drive a [`ManualClock`]
//! by hand, as Kubernetes' queueset runs under a fake event clock and CockroachDB's admission
//! queue under a manual time source, so timing behaviour (queue waits, `RetryAt` timers,
//! time held) is tested without sleeping.
//!
//! What a clock does *not* drive: task costs measured in thread CPU time
//! ([`CostClock`](crate::CostClock)) stay measured, since they are the work itself.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A callback a clock calls when its time jumps (see [`Clock::on_advance`]).
pub type AdvanceHook = Arc<dyn Fn() + Send + Sync>;

/// A source of time for an executor: elapsed time since the clock's own epoch.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Time since the clock's epoch. Never goes backwards.
    fn now(&self) -> Duration;

    /// Call `hook` whenever time moves by other means than passing (a manual clock's
    /// [`advance`](ManualClock::advance)), so an executor waiting on a timer re-checks at
    /// once instead of at its real-time deadline. A real clock never calls it.
    fn on_advance(&self, hook: AdvanceHook) {
        let _ = hook;
    }

    /// Whether the clock follows real time. Executors wait for a clock time with a real
    /// timeout only on a real clock; on another they wait for [`on_advance`](Clock::on_advance).
    fn is_real(&self) -> bool {
        true
    }

    /// The clock's time at the real instant `at`, if the clock is a fixed offset of the
    /// monotonic clock (as [`SystemClock`] is): an executor that has just read
    /// `Instant::now()` for another purpose (a worker metering the task that just ended)
    /// then takes its time from that reading instead of reading the clock again. `None`
    /// (the default) means "ask [`now`](Clock::now)".
    fn at_instant(&self, at: Instant) -> Option<Duration> {
        let _ = at;
        None
    }
}

/// The real monotonic clock, from the moment it was created.
#[derive(Clone, Copy, Debug)]
pub struct SystemClock {
    epoch: Instant,
}

impl SystemClock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        SystemClock {
            epoch: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn at_instant(&self, at: Instant) -> Option<Duration> {
        Some(at.saturating_duration_since(self.epoch))
    }
}

/// A clock that moves only when told to. Cloning shares it: keep one clone in the test and
/// hand another to the executor.
///
/// ```
/// use std::time::Duration;
/// use fairlane_runtime::{Clock, ManualClock};
///
/// let clock = ManualClock::new();
/// clock.advance(Duration::from_millis(5));
/// assert_eq!(clock.now(), Duration::from_millis(5));
/// ```
#[derive(Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Default)]
struct ManualInner {
    nanos: AtomicU64,
    hooks: Mutex<Vec<AdvanceHook>>,
}

impl ManualClock {
    /// A clock at time zero.
    pub fn new() -> Self {
        ManualClock::default()
    }

    /// Move time forward by `by` and let every executor on this clock re-check its timers.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.inner.nanos.fetch_add(by, Ordering::SeqCst);
        // Run the hooks outside the list's lock: they take executors' locks.
        let hooks: Vec<AdvanceHook> = self
            .inner
            .hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for h in hooks {
            h();
        }
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManualClock")
            .field("now", &self.now())
            .finish_non_exhaustive()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.inner.nanos.load(Ordering::SeqCst))
    }

    fn is_real(&self) -> bool {
        false
    }

    fn on_advance(&self, hook: AdvanceHook) {
        self.inner
            .hooks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(hook);
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now(&self) -> Duration {
        (**self).now()
    }
    fn on_advance(&self, hook: AdvanceHook) {
        (**self).on_advance(hook)
    }
    fn is_real(&self) -> bool {
        (**self).is_real()
    }
    fn at_instant(&self, at: Instant) -> Option<Duration> {
        (**self).at_instant(at)
    }
}

/// A shared clock as executors hold it.
pub(crate) type SharedClock = Arc<dyn Clock>;

/// Call `hook` with `shared` whenever `clock`'s time jumps, for as long as `shared` lives
/// (the clock holds it weakly).
pub(crate) fn on_advance<S: Send + Sync + 'static>(
    clock: &SharedClock,
    shared: &Arc<S>,
    hook: impl Fn(Arc<S>) + Send + Sync + 'static,
) {
    let weak = Arc::downgrade(shared);
    clock.on_advance(Arc::new(move || {
        if let Some(s) = weak.upgrade() {
            hook(s);
        }
    }));
}

/// Wait on `cv` until notified, or at most `timeout` (a poisoned lock is taken as it is).
pub(crate) fn wait<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    timeout: Option<Duration>,
) -> MutexGuard<'a, T> {
    match timeout {
        Some(t) => {
            cv.wait_timeout(guard, t)
                .unwrap_or_else(|e| e.into_inner())
                .0
        }
        None => cv.wait(guard).unwrap_or_else(|e| e.into_inner()),
    }
}

/// Nanoseconds since the clock's epoch, as the scheduler's `now`.
pub(crate) fn nanos(clock: &dyn Clock) -> f64 {
    nanos_f64(clock.now())
}

/// [`nanos`] at the real instant `at` if the clock can tell it
/// ([`Clock::at_instant`]), else now.
pub(crate) fn nanos_at(clock: &dyn Clock, at: Instant) -> f64 {
    nanos_f64(clock.at_instant(at).unwrap_or_else(|| clock.now()))
}

/// `d` in nanoseconds, as `d.as_nanos() as f64` but without the 128-bit integer conversion
/// (a software routine on x86-64, on every hot-path clock reading). The same value for any
/// duration under 2⁵³ ns (104 days): both parts and their sum are exact in an `f64`.
pub(crate) fn nanos_f64(d: Duration) -> f64 {
    d.as_secs() as f64 * 1e9 + f64::from(d.subsec_nanos())
}
