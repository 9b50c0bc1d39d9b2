//! Helpers shared by the runtime's test files.

use std::time::Duration;

use fairlane_runtime::cpu::thread_cpu_time;

/// Burn `d` of this thread's CPU time (so a task's cost is what we say, whatever the VM does).
pub fn spin_cpu(d: Duration) {
    let start = thread_cpu_time().expect("per-thread CPU clock");
    let mut x = 1u64;
    while thread_cpu_time().unwrap() - start < d {
        for _ in 0..200 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}
