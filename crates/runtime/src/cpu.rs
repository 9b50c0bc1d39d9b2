//! Per-thread CPU time: what a task really cost.
//!
//! On Linux every thread has its own CPU clock (`CLOCK_THREAD_CPUTIME_ID`, and
//! `pthread_getcpuclockid` for reading another thread's). [`FairPool`](crate::FairPool) charges
//! each task the CPU time of the worker thread while it ran, and its refresh thread reads the
//! running workers' clocks every 10 ms for 2DFQᴱ's refresh charging (2DFQ §5). Elsewhere the
//! pool falls back to wall-clock time ([`CostClock::Wall`]).

#![allow(unsafe_code)] // three libc calls, each with its SAFETY note

use std::time::Duration;

/// How a [`FairPool`](crate::FairPool) measures what a task cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum CostClock {
    /// CPU time of the worker thread while the task ran (nanoseconds). Blocking, sleeping and
    /// waiting for I/O cost nothing: the right unit for CPU-bound services (2DFQ's setting).
    /// Linux only.
    ThreadCpu,
    /// Wall-clock time the task held its worker (nanoseconds): the unit for tasks that block.
    Wall,
}

impl CostClock {
    /// [`CostClock::ThreadCpu`] where per-thread CPU clocks exist, else [`CostClock::Wall`].
    pub fn best() -> Self {
        if thread_cpu_supported() {
            CostClock::ThreadCpu
        } else {
            CostClock::Wall
        }
    }
}

/// Whether per-thread CPU clocks work on this platform.
pub fn thread_cpu_supported() -> bool {
    ThreadCpuClock::current().is_some()
}

/// The CPU time the calling thread has used so far, if the platform has per-thread CPU clocks.
///
/// ```
/// let before = fairlane_runtime::cpu::thread_cpu_time();
/// let mut x = 0u64;
/// for i in 0..1_000_000u64 { x = x.wrapping_mul(31).wrapping_add(i); }
/// std::hint::black_box(x);
/// if let (Some(a), Some(b)) = (before, fairlane_runtime::cpu::thread_cpu_time()) {
///     assert!(b >= a);
/// }
/// ```
pub fn thread_cpu_time() -> Option<Duration> {
    ThreadCpuClock::current()?.read().map(Duration::from_nanos)
}

/// The calling thread's CPU time in nanoseconds, read through `CLOCK_THREAD_CPUTIME_ID`: the
/// kernel's fast path for the own thread (no thread lookup, unlike a
/// [`ThreadCpuClock`]'s id: ≈ 500 against 600–1,000 ns on the project's VM).
#[cfg(target_os = "linux")]
pub(crate) fn this_thread_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
}

/// The calling thread's CPU time (unsupported here).
#[cfg(not(target_os = "linux"))]
pub(crate) fn this_thread_cpu_ns() -> Option<u64> {
    None
}

/// A handle on one thread's CPU clock that any thread can read while that thread lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCpuClock {
    #[cfg(target_os = "linux")]
    id: libc::clockid_t,
}

impl ThreadCpuClock {
    /// The calling thread's CPU clock (`None` where per-thread CPU clocks are unsupported).
    #[cfg(target_os = "linux")]
    pub fn current() -> Option<Self> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self() is always a valid thread of this process, and `id` is a
        // valid, writable clockid_t for the duration of the call.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        if rc != 0 {
            return None;
        }
        let clock = ThreadCpuClock { id };
        clock.read().map(|_| clock)
    }

    /// The calling thread's CPU clock (`None` where per-thread CPU clocks are unsupported).
    #[cfg(not(target_os = "linux"))]
    pub fn current() -> Option<Self> {
        None
    }

    /// The CPU clock of process `pid` (the sum over its threads; for a single-threaded
    /// process, such as a PostgreSQL backend, its one thread's `sum_exec_runtime`, the first
    /// field of `/proc/<pid>/schedstat`). Linux brings that up to date when the task sleeps,
    /// is preempted or at a tick, and a reader in another process gets it as last brought
    /// up to date: a running task's current slice is not in it. `None` if the process
    /// is not visible from here (another PID namespace, gone) or the platform has no such
    /// clocks, or `pid` is not a process id (1 to Linux's `PID_MAX_LIMIT`, 2²²: a clock id
    /// encodes no more). One `clock_gettime` per reading: no file to open, no text to format.
    #[cfg(target_os = "linux")]
    pub fn process(pid: i32) -> Option<Self> {
        if !(1..=1 << 22).contains(&pid) {
            return None;
        }
        let mut id: libc::clockid_t = 0;
        // SAFETY: `id` is a valid, writable clockid_t for the duration of the call; an
        // unknown pid is an error return, not undefined behaviour.
        let rc = unsafe { libc::clock_getcpuclockid(pid, &mut id) };
        if rc != 0 {
            return None;
        }
        let clock = ThreadCpuClock { id };
        clock.read().map(|_| clock)
    }

    /// The CPU clock of process `pid` (unsupported here).
    #[cfg(not(target_os = "linux"))]
    pub fn process(_pid: i32) -> Option<Self> {
        None
    }

    /// The CPU time the clock's thread has used, in nanoseconds. `None` if the thread has
    /// exited (the clock is then invalid) or the clock cannot be read.
    #[cfg(target_os = "linux")]
    pub fn read(&self) -> Option<u64> {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec. An invalid clock id (a thread that has
        // exited) makes clock_gettime return an error, which we report as None.
        let rc = unsafe { libc::clock_gettime(self.id, &mut ts) };
        if rc != 0 {
            return None;
        }
        Some((ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64)
    }

    /// The CPU time the clock's thread has used, in nanoseconds.
    #[cfg(not(target_os = "linux"))]
    pub fn read(&self) -> Option<u64> {
        None
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn another_thread_reads_a_busy_thread_clock() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(ThreadCpuClock::current().unwrap()).unwrap();
            let mut x = 1u64;
            while stop_rx.try_recv().is_err() {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        });
        let clock = rx.recv().unwrap();
        let a = clock.read().unwrap();
        let mut b = a;
        // Wait until the busy thread has demonstrably used CPU (bounded: ~5 s at most).
        for _ in 0..500 {
            std::thread::sleep(Duration::from_millis(10));
            b = clock.read().unwrap();
            if b > a + 1_000_000 {
                break;
            }
        }
        stop_tx.send(()).unwrap();
        t.join().unwrap();
        assert!(b > a + 1_000_000, "busy thread used {} ns", b - a);
    }

    #[test]
    fn a_process_clock_is_its_schedstat() {
        // A busy single-threaded child: its clock and `/proc/<pid>/schedstat` agree.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let clock = ThreadCpuClock::process(pid).unwrap();
        let schedstat = || -> u64 {
            let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
            text.split_ascii_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let mut a = clock.read().unwrap();
        for _ in 0..500 {
            if a > 20_000_000 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            a = clock.read().unwrap();
        }
        let (s, b) = (schedstat(), clock.read().unwrap());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(a > 20_000_000, "the child used {a} ns");
        // Both show the counter as the kernel last brought it up to date.
        assert!(
            s <= b && a <= s + 50_000_000,
            "clock {a}..{b}, schedstat {s}"
        );
        assert_eq!(clock.read(), None, "the process is gone");
        for pid in [0, -1, i32::MAX] {
            assert!(ThreadCpuClock::process(pid).is_none(), "pid {pid}");
        }
    }

    #[test]
    fn sleeping_costs_no_cpu() {
        let a = thread_cpu_time().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let b = thread_cpu_time().unwrap();
        assert!(b - a < Duration::from_millis(25), "sleep used {:?}", b - a);
    }
}
