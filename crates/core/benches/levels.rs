//! The cost of priority levels: one dispatch cycle (complete + enqueue + dequeue) with 1,000
//! backlogged tenants spread over 4 levels (`LevelsConfig`, APF's borrowing), against the flat
//! scheduler of the same preset with the same 1,000 tenants. Issue 36's bar: ≤ 1.3×.
//!
//! Workload (`support/mixed.rs`, shared with `benches/cycle.rs`): 32 workers, every tenant
//! keeps two requests queued, even tenants send small requests (cost ≈ 1), odd ones large
//! (≈ 1000); a cycle completes the oldest running request, enqueues a new one for its tenant
//! and dequeues onto the freed worker. Flat and levels run the same code, the same tenants
//! and the same preset (each level's fair scheduler is the flat one's, on the level's seats);
//! only the level each request names differs. With levels, tenant `t` is at level `t mod 4`, the four levels have equal shares
//! (8 seats each) and lend half; time advances 1 per cycle and the adjustment period is
//! 100,000 (one adjustment per 100,000 dispatches: APF's 10 s at 10,000 dispatches per second).
//!
//! The two are measured alternately in one run (flat, levels, flat, levels, … for `ROUNDS`
//! rounds), each by criterion; the bench then prints, per preset, the median ns per cycle of
//! each and the ratio, round by round and over all rounds.
//!
//! Run: `cargo bench -p fairlane-core --bench levels` (about 2 minutes).
//!
//! On a loaded machine, whose load swings over criterion's seconds-long runs:
//! `FAIRLANE_LEVELS_PAIRED=20 cargo bench -p fairlane-core --bench levels` alternates flat and
//! levels in slices of about 2 ms of the thread's time on a CPU for 20 s per preset and
//! prints the median of the slice pairs' ratios (about a minute).
//!
//! Load-independent view: with `FAIRLANE_LEVELS_CYCLES=k FAIRLANE_LEVELS_ONLY=<preset>/<flat|levels>`
//! the bench builds that one scheduler, runs exactly `k` cycles and exits, so that the
//! difference of two `perf stat -e instructions` (or callgrind) runs with different `k`
//! divided by their difference is the instructions per cycle.

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

use criterion::{criterion_group, Criterion};
use fairlane_core::levels::{LevelConfig, LevelsConfig};
use fairlane_core::Config;

#[path = "support/mixed.rs"]
mod mixed;
use mixed::{Mixed, Seam, WORKERS};

const TENANTS: u64 = 1_000;
const LEVELS: u64 = 4;
const ROUNDS: usize = 3;
const PRESETS: [&str; 3] = ["2dfq", "wfq", "2dfqe"];

/// Which measurement: (preset, "flat" | "levels", round).
type Run = (String, &'static str, usize);

/// ns per cycle of every sample, by run.
static SAMPLES: Mutex<BTreeMap<Run, Vec<f64>>> = Mutex::new(BTreeMap::new());

/// The workload over `preset`, flat or with levels.
fn cycle(preset: &str, levels: bool) -> Mixed<Seam> {
    let flat = Config::preset(preset).unwrap().workers(WORKERS);
    let s = if levels {
        let mut c = LevelsConfig::new(flat).adjust_period(100_000.0);
        for l in 0..LEVELS {
            let name = if l + 1 == LEVELS {
                "catch-all".into()
            } else {
                format!("l{l}")
            };
            c = c.level(LevelConfig::new(name, 1.0).lendable_percent(50.0));
        }
        c.build::<()>().unwrap()
    } else {
        flat.build::<()>().unwrap()
    };
    let levels = if levels { LEVELS } else { 0 };
    let cy = Mixed::new(Seam { s, levels }, TENANTS, !preset.ends_with('e'));
    assert_eq!(cy.running.len(), WORKERS, "every worker busy");
    cy
}

fn bench(c: &mut Criterion) {
    let mut group = mixed::group(c, "levels", 3);
    for preset in PRESETS {
        for round in 0..ROUNDS {
            for (kind, levels) in [("flat", false), ("levels", true)] {
                let mut cy = cycle(preset, levels);
                let id = format!("{preset}/{kind}/round{round}");
                group.bench_function(id, |b| {
                    b.iter_custom(|iters| {
                        let start = Instant::now();
                        for _ in 0..iters {
                            cy.cycle();
                        }
                        let took = start.elapsed();
                        let ns = took.as_nanos() as f64 / iters as f64;
                        let mut s = SAMPLES.lock().unwrap();
                        s.entry((preset.to_string(), kind, round))
                            .or_default()
                            .push(ns);
                        took
                    })
                });
                assert_eq!(
                    cy.running.len(),
                    WORKERS,
                    "{preset} {kind}: a worker went idle"
                );
            }
        }
    }
    group.finish();
    report();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Per preset: each round's median ns per cycle, flat and levels, and their ratio.
fn report() {
    let mut samples = SAMPLES.lock().unwrap();
    println!("\npreset  round  flat ns  levels ns  levels/flat");
    for preset in PRESETS {
        let mut ratios = Vec::new();
        for round in 0..ROUNDS {
            let mut get = |kind| {
                samples
                    .get_mut(&(preset.to_string(), kind, round))
                    .map(|v| median(v))
            };
            let (Some(f), Some(l)) = (get("flat"), get("levels")) else {
                continue;
            };
            ratios.push(l / f);
            println!(
                "{preset:<7} {round:>5}  {f:>7.0}  {l:>9.0}  {:>11.2}",
                l / f
            );
        }
        if !ratios.is_empty() {
            println!("{preset:<7} median of rounds: {:.2}×", median(&mut ratios));
        }
    }
}

/// `FAIRLANE_LEVELS_CYCLES` cycles of `FAIRLANE_LEVELS_ONLY`, if set.
fn exact_cycles() -> bool {
    let (Ok(k), Ok(only)) = (
        std::env::var("FAIRLANE_LEVELS_CYCLES"),
        std::env::var("FAIRLANE_LEVELS_ONLY"),
    ) else {
        return false;
    };
    let k: u64 = k.parse().expect("FAIRLANE_LEVELS_CYCLES: a number");
    let (preset, kind) = only
        .split_once('/')
        .expect("FAIRLANE_LEVELS_ONLY: <preset>/<flat|levels>");
    let mut cy = cycle(preset, kind == "levels");
    for _ in 0..k {
        cy.cycle();
    }
    println!("{only}: {k} cycles");
    true
}

/// The calling thread's CPU time (ns) through `CLOCK_THREAD_CPUTIME_ID`: time the thread
/// waits descheduled on a loaded machine is left out.
fn on_cpu_ns() -> f64 {
    let mut ts = std::mem::MaybeUninit::<libc::timespec>::uninit();
    // SAFETY: the call writes the timespec, which is read only when it succeeded.
    let ts = unsafe {
        let rc = libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, ts.as_mut_ptr());
        assert_eq!(rc, 0, "no thread CPU clock");
        ts.assume_init()
    };
    ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
}

/// `cycles` cycles of `cy`: ns per cycle, on the CPU.
fn slice(cy: &mut Mixed<Seam>, cycles: u64) -> f64 {
    let start = on_cpu_ns();
    for _ in 0..cycles {
        cy.cycle();
    }
    (on_cpu_ns() - start) / cycles as f64
}

/// With `FAIRLANE_LEVELS_PAIRED=s`: per preset, flat and levels side by side for `s` seconds
/// in alternating slices of about 2 ms (flat first in even pairs, levels first in odd ones),
/// each timed by the thread's time on a CPU, so that a loaded machine's swings fall on both
/// alike and its waits on neither. Prints the median ns per cycle of each and the median of
/// the pairs' ratios. `FAIRLANE_LEVELS_ONLY=<preset>` runs one preset.
fn paired() -> bool {
    let Ok(seconds) = std::env::var("FAIRLANE_LEVELS_PAIRED") else {
        return false;
    };
    let seconds: f64 = seconds.parse().expect("FAIRLANE_LEVELS_PAIRED: seconds");
    let only = std::env::var("FAIRLANE_LEVELS_ONLY").ok();
    println!("preset  pairs  flat ns  levels ns  levels/flat (median of the pairs' ratios)");
    for preset in PRESETS {
        if only.as_ref().is_some_and(|o| o != preset) {
            continue;
        }
        let (mut flat, mut levels) = (cycle(preset, false), cycle(preset, true));
        slice(&mut levels, 10_000);
        let k = ((2e6 / slice(&mut flat, 10_000)) as u64).clamp(100, 10_000_000);
        let (mut f, mut l, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let start = Instant::now();
        while start.elapsed().as_secs_f64() < seconds {
            let (a, b) = if ratios.len() % 2 == 0 {
                let a = slice(&mut flat, k);
                (a, slice(&mut levels, k))
            } else {
                let b = slice(&mut levels, k);
                (slice(&mut flat, k), b)
            };
            f.push(a);
            l.push(b);
            ratios.push(b / a);
        }
        let n = ratios.len();
        let (f, l, r) = (median(&mut f), median(&mut l), median(&mut ratios));
        println!("{preset:<7} {n:>5}  {f:>7.0}  {l:>9.0}  {r:>11.2}");
    }
    true
}

criterion_group!(benches, bench);

fn main() {
    if !exact_cycles() && !paired() {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
