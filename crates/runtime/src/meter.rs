//! What a task cost: the worker's meter.
//!
//! A worker measures each task from one task boundary to the next (the reading that ends task
//! *i* starts task *i + 1*, so the dispatch between them is charged to the task it started).
//! With [`CostClock::Wall`](crate::CostClock::Wall) that is a monotonic-clock difference. With
//! [`CostClock::ThreadCpu`](crate::CostClock::ThreadCpu) the exact answer is a thread-CPU-clock
//! difference, but reading that clock is a system call (≈ 0.5 µs on the project's VM: 5 % of
//! a 10 µs task), while the monotonic clock is read in user space (vDSO, ≈ 30 ns).
//!
//! [`HybridCpu`] reads the monotonic clock at every boundary and the thread CPU clock only
//! when it must, keeping every charge honest:
//!
//! * A *short* task (less than [`SHORT`] of wall time since the previous boundary, and less
//!   than [`PERIOD`] since the last CPU reading) is charged its wall time. A thread's CPU time
//!   never exceeds its wall time, so the charge is never below the truth and is above it
//!   only by the time the thread spent off the CPU (preempted) during that task: **less than
//!   [`SHORT`]**, and 0 when nothing preempted it.
//! * Any other task reads the thread CPU clock and is charged the CPU time since the last
//!   reading minus what the short tasks since then were charged. That is its own CPU time
//!   minus the short tasks' overcharge, so it is never above the truth and below it by at most
//!   the time those short tasks were off the CPU (0 without preemption; under [`PERIOD`],
//!   since they all fit in one period, or under 2 × [`PERIOD`] if an earlier remainder was
//!   carried). If the difference would be negative the task is charged 0 and the remainder
//!   is carried to the next reading.
//! * So a worker's charges add up to its thread CPU time exactly at every CPU reading, which
//!   comes at least every [`PERIOD`] of busy time, and a preempted task of any length is
//!   measured on the CPU clock, because preemption makes its wall time long.
//!
//! On the bench (10 µs tasks) this reads the CPU clock once per [`PERIOD`] (≈ 25 tasks)
//! instead of once per task.

use std::time::{Duration, Instant};

use crate::cpu::ThreadCpuClock;

/// Tasks shorter than this (boundary to boundary, wall time) are charged their wall time.
pub(crate) const SHORT: Duration = Duration::from_micros(20);

/// The thread CPU clock is read at least this often (wall time) while a worker is busy.
pub(crate) const PERIOD: Duration = Duration::from_micros(250);

/// Where a running task's cost measurement started, as the refresh thread reads it.
#[derive(Clone, Copy)]
pub(crate) enum Meter {
    /// CPU time of `clock`'s thread, from `at` (nanoseconds).
    Cpu {
        /// The worker's CPU clock (readable from the refresh thread).
        clock: ThreadCpuClock,
        /// The thread's CPU time when the task started: exact, or after short tasks the
        /// last reading plus their charges, never below the truth (so the usage read from
        /// it is never above the truth; see [`HybridCpu`]).
        at: u64,
    },
    /// Wall time from `at`.
    Wall {
        /// When the task started.
        at: Instant,
    },
}

impl Meter {
    /// Cost so far, in nanoseconds. Readable from any thread while the worker lives.
    pub(crate) fn used(&self) -> Option<f64> {
        match self {
            Meter::Cpu { clock, at } => Some(clock.read()?.saturating_sub(*at) as f64),
            Meter::Wall { at } => Some(at.elapsed().as_nanos() as f64),
        }
    }
}

/// The hybrid thread-CPU meter's arithmetic, on injected readings (nanoseconds), so tests can
/// drive it with any timeline. See the module documentation for the bounds it keeps.
#[derive(Clone, Debug)]
pub(crate) struct HybridCpu {
    short: u64,
    period: u64,
    /// Wall time of the previous boundary.
    last_wall: u64,
    /// Wall and CPU time of the last CPU reading.
    anchor_wall: u64,
    anchor_cpu: u64,
    /// What was charged since the last CPU reading (plus any carried remainder).
    charged: u64,
}

impl HybridCpu {
    /// A meter whose first task starts at `wall`, with the thread's CPU time `cpu` then.
    pub(crate) fn new(short: Duration, period: Duration, wall: u64, cpu: u64) -> Self {
        HybridCpu {
            short: short.as_nanos() as u64,
            period: period.as_nanos() as u64,
            last_wall: wall,
            anchor_wall: wall,
            anchor_cpu: cpu,
            charged: 0,
        }
    }

    /// A task starts at `wall` after the worker idled (the idle time is nobody's).
    pub(crate) fn resume(&mut self, wall: u64) {
        self.last_wall = wall;
    }

    /// The thread's CPU time at the current task's start, as far as the meter knows: the
    /// last reading plus the charges since (exact without preemption, never below the truth).
    pub(crate) fn start_estimate(&self) -> u64 {
        self.anchor_cpu.saturating_add(self.charged)
    }

    /// A task ended at `wall`: its charge in nanoseconds. `cpu` reads the thread CPU clock and
    /// is called only when the rules need it; if it fails the task is charged its wall time.
    pub(crate) fn boundary(&mut self, wall: u64, cpu: impl FnOnce() -> Option<u64>) -> u64 {
        let d = wall.saturating_sub(self.last_wall);
        self.last_wall = wall;
        if d < self.short && wall.saturating_sub(self.anchor_wall) < self.period {
            self.charged += d;
            return d;
        }
        let Some(now) = cpu() else {
            self.charged += d;
            return d;
        };
        let used = now.saturating_sub(self.anchor_cpu);
        let charge = used.saturating_sub(self.charged);
        // What the short tasks were charged beyond the CPU time since the reading (only if
        // they were preempted more than this task ran): carried, so the sum stays exact.
        self.charged = self.charged.saturating_sub(used);
        self.anchor_cpu = now;
        self.anchor_wall = wall;
        charge
    }
}

/// A worker's meter: hybrid thread CPU, or wall time.
pub(crate) enum WorkerMeter {
    /// [`HybridCpu`] on this thread's CPU clock.
    Cpu {
        /// For the refresh thread, which reads it from outside.
        clock: ThreadCpuClock,
        epoch: Instant,
        hybrid: HybridCpu,
    },
    /// Wall time (no per-thread CPU clock, or [`CostClock::Wall`](crate::CostClock::Wall)).
    Wall {
        /// The previous boundary.
        at: Instant,
    },
}

impl WorkerMeter {
    /// The calling (worker) thread's meter: on its CPU clock if `cpu` and readable.
    pub(crate) fn for_this_thread(cpu: bool) -> Self {
        let epoch = Instant::now();
        match cpu.then(ThreadCpuClock::current).flatten() {
            Some(clock) => match clock.read() {
                Some(at) => WorkerMeter::Cpu {
                    clock,
                    epoch,
                    hybrid: HybridCpu::new(SHORT, PERIOD, 0, at),
                },
                None => WorkerMeter::Wall { at: epoch },
            },
            None => WorkerMeter::Wall { at: epoch },
        }
    }

    /// A task starts after the worker idled: the meter for it.
    pub(crate) fn resume(&mut self) -> Meter {
        match self {
            WorkerMeter::Cpu { epoch, hybrid, .. } => hybrid.resume(wall_ns(*epoch)),
            WorkerMeter::Wall { at } => *at = Instant::now(),
        }
        self.current()
    }

    /// The task that ran since the last boundary ended at `now` (the caller's reading of the
    /// monotonic clock, which it may reuse as its own time: one reading per boundary): its
    /// cost (nanoseconds); the next task, if any, is metered from here
    /// ([`current`](WorkerMeter::current)).
    pub(crate) fn boundary(&mut self, now: Instant) -> f64 {
        match self {
            WorkerMeter::Cpu { epoch, hybrid, .. } => {
                let wall = now.saturating_duration_since(*epoch).as_nanos();
                let wall = u64::try_from(wall).unwrap_or(u64::MAX);
                hybrid.boundary(wall, crate::cpu::this_thread_cpu_ns) as f64
            }
            WorkerMeter::Wall { at } => {
                let d = now.saturating_duration_since(*at);
                *at = now;
                d.as_nanos() as f64
            }
        }
    }

    /// The meter of a task starting at the last boundary.
    pub(crate) fn current(&self) -> Meter {
        match self {
            WorkerMeter::Cpu { clock, hybrid, .. } => Meter::Cpu {
                clock: *clock,
                at: hybrid.start_estimate(),
            },
            WorkerMeter::Wall { at } => Meter::Wall { at: *at },
        }
    }
}

fn wall_ns(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: u64 = 20_000;
    const P: u64 = 250_000;

    /// A simulated worker thread: each task runs `cpu` ns on the CPU and is preempted for
    /// `off` ns; the dispatch between tasks costs `gap` ns of CPU. Returns (charge, true CPU)
    /// per task and the meter's readings of the CPU clock.
    fn simulate(tasks: &[(u64, u64)], gap: u64) -> (Vec<(u64, u64)>, usize) {
        let mut m = HybridCpu::new(
            Duration::from_nanos(T),
            Duration::from_nanos(P),
            1_000,
            5_000,
        );
        let (mut wall, mut cpu, mut reads) = (1_000u64, 5_000u64, 0usize);
        let mut out = Vec::new();
        for &(c, off) in tasks {
            wall += gap + c + off;
            cpu += gap + c;
            let charge = m.boundary(wall, || {
                reads += 1;
                Some(cpu)
            });
            out.push((charge, gap + c));
        }
        (out, reads)
    }

    #[test]
    fn without_preemption_every_charge_is_exact_and_the_cpu_clock_is_rarely_read() {
        let tasks: Vec<(u64, u64)> = (0..1_000).map(|i| (9_000 + (i % 7) * 500, 0)).collect();
        let (out, reads) = simulate(&tasks, 300);
        for (i, (charge, truth)) in out.iter().enumerate() {
            assert_eq!(charge, truth, "task {i}");
        }
        // ~10 µs tasks: one reading per 250 µs of work, not one per task.
        assert!(reads < 60, "{reads} readings for 1,000 tasks");
        assert!(reads > 30, "{reads} readings: the period is not honoured");
    }

    #[test]
    fn long_tasks_are_measured_on_the_cpu_clock() {
        let tasks: Vec<(u64, u64)> = (0..50).map(|i| (200_000 + i * 1_000, 0)).collect();
        let (out, reads) = simulate(&tasks, 1_000);
        assert_eq!(reads, 50);
        assert!(out.iter().all(|(c, t)| c == t));
    }

    #[test]
    fn preemption_errors_stay_within_the_stated_bounds_and_the_sum_is_exact_at_each_reading() {
        // A deterministic mix: short tasks, some preempted briefly (< SHORT: charged wall),
        // some preempted long (their wall time makes them read the CPU clock), long tasks.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let tasks: Vec<(u64, u64)> = (0..5_000)
            .map(|_| {
                let c = if rnd(10) == 0 {
                    50_000 + rnd(500_000)
                } else {
                    2_000 + rnd(12_000)
                };
                let off = match rnd(6) {
                    0 => rnd(4_000),                 // a brief interruption
                    1 => 1_000_000 + rnd(3_000_000), // descheduled for a time slice
                    _ => 0,
                };
                (c, off)
            })
            .collect();
        let gap = 400;
        let (out, reads) = simulate(&tasks, gap);
        assert!(reads < tasks.len(), "the CPU clock was read for every task");
        let (mut sum_charge, mut sum_true, mut since_read) = (0u64, 0u64, 0u64);
        for (i, (&(charge, truth), &(c, off))) in out.iter().zip(&tasks).enumerate() {
            let wall = gap + c + off;
            sum_charge += charge;
            sum_true += truth;
            if wall < T && charge == wall {
                // Charged its wall time: over the truth by its off-CPU time only (< SHORT).
                assert!(
                    charge >= truth && charge - truth == off && off < T,
                    "task {i}"
                );
                since_read += off;
            } else {
                // Read the CPU clock: under the truth by the short tasks' overcharge since
                // the last reading, never over it, and then the sums agree (no carry left).
                assert!(charge <= truth, "task {i}: {charge} > {truth}");
                assert!(truth - charge <= since_read, "task {i}");
                assert!(since_read < 2 * P, "task {i}");
                if truth >= since_read {
                    assert_eq!(sum_charge, sum_true, "task {i}");
                }
                since_read = since_read.saturating_sub(truth);
            }
        }
        assert!(sum_charge <= sum_true && sum_true - sum_charge < P);
    }

    #[test]
    fn a_failed_cpu_reading_charges_wall_time() {
        let mut m = HybridCpu::new(Duration::from_nanos(T), Duration::from_nanos(P), 0, 0);
        assert_eq!(m.boundary(500_000, || None), 500_000);
    }
}
