//! The pool's wake-up accounting. Self-contained, so the pool bench's ladder
//! (`benches/pool.rs`) compiles this very file rather than a copy.

/// Workers asleep on the work condition variable, and those of them a submit has already
/// woken that are not yet running: a submit wakes another only while `idle > waking`, so a
/// burst of submissions costs one wake-up (a futex system call) per idle worker, not one
/// per task until the woken worker gets the lock.
#[derive(Default)]
pub(crate) struct Wakeups {
    idle: usize,
    waking: usize,
}

impl Wakeups {
    /// Work was queued: whether to notify one worker (counted as woken when so).
    #[inline]
    pub(crate) fn submit(&mut self) -> bool {
        let wake = self.idle > self.waking;
        if wake {
            self.waking += 1;
        }
        wake
    }

    /// A worker goes to sleep.
    #[inline]
    pub(crate) fn sleep(&mut self) {
        self.idle += 1;
    }

    /// A worker woke, by a submit, another notification or spuriously: either way one
    /// pending wake-up is used up (an undercount only costs a spare wake-up later; an
    /// overcount cannot arise).
    #[inline]
    pub(crate) fn woke(&mut self) {
        self.idle -= 1;
        self.waking = self.waking.saturating_sub(1);
    }
}
