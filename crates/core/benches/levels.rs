//! The cost of priority levels: one dispatch cycle (complete + enqueue + dequeue) with 1,000
//! backlogged tenants spread over 4 levels (`LevelsConfig`, APF's borrowing), against the flat
//! scheduler of the same preset with the same 1,000 tenants. Issue 36's bar: ≤ 1.3×.
//!
//! Workload (that of `benches/cycle.rs`): 32 workers, every tenant keeps two requests queued,
//! even tenants send small requests (cost ≈ 1), odd ones large (≈ 1000); a cycle completes the
//! oldest running request, enqueues a new one for its tenant and dequeues onto the freed
//! worker. With levels, tenant `t` is at level `t mod 4`, the four levels have equal shares
//! (8 seats each) and lend half; time advances 1 per cycle and the adjustment period is
//! 100,000 (one adjustment per 100,000 dispatches: APF's 10 s at 10,000 dispatches per second).
//!
//! The two are measured alternately in one run (flat, levels, flat, levels, … for `ROUNDS`
//! rounds), each by criterion; the bench then prints, per preset, the median ns per cycle of
//! each and the ratio, round by round and over all rounds.
//!
//! Run: `cargo bench -p fairlane-core --bench levels` (about 2 minutes).
//!
//! Load-independent view: with `FAIRLANE_LEVELS_CYCLES=k FAIRLANE_LEVELS_ONLY=<preset>/<flat|levels>`
//! the bench builds that one scheduler, runs exactly `k` cycles and exits, so that the
//! difference of two `perf stat -e instructions` (or callgrind) runs with different `k`
//! divided by their difference is the instructions per cycle.

#![allow(missing_docs)] // criterion_group! writes an undocumented pub fn

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, Criterion};
use fairlane_core::levels::{LevelConfig, LevelsConfig};
use fairlane_core::{Config, Decision, LevelId, Request, Scheduler, Ticket};

#[path = "support/mixed.rs"]
mod mixed;
use mixed::WORKERS;

const TENANTS: u64 = 1_000;
const LEVELS: u64 = 4;
const ROUNDS: usize = 3;
const PRESETS: [&str; 3] = ["2dfq", "wfq", "2dfqe"];

/// Which measurement: (preset, "flat" | "levels", round).
type Run = (String, &'static str, usize);

/// ns per cycle of every sample, by run.
static SAMPLES: Mutex<BTreeMap<Run, Vec<f64>>> = Mutex::new(BTreeMap::new());

fn cost(tenant: u64, i: u64) -> f64 {
    mixed::cost(tenant as usize, i)
}

struct Cycle {
    s: Box<dyn Scheduler<()> + Send>,
    running: VecDeque<(Ticket, usize, u64, f64)>,
    known: bool,
    levels: bool,
    now: f64,
    i: u64,
}

impl Cycle {
    fn new(preset: &str, levels: bool) -> Self {
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
        let known = !preset.ends_with('e');
        let mut me = Cycle {
            s,
            running: VecDeque::new(),
            known,
            levels,
            now: 0.0,
            i: 0,
        };
        for _ in 0..2 {
            for t in 0..TENANTS {
                me.enqueue(t);
            }
        }
        for w in 0..WORKERS {
            me.dequeue(w);
        }
        assert_eq!(me.running.len(), WORKERS, "every worker busy");
        me
    }

    fn enqueue(&mut self, tenant: u64) {
        self.i += 1;
        let mut r = Request::new(tenant, 0u32, ());
        if self.known {
            r = r.with_cost(cost(tenant, self.i));
        }
        if self.levels {
            r = r.at_level(LevelId((tenant % LEVELS) as u32));
        }
        self.s.enqueue(r, self.now).unwrap();
    }

    fn dequeue(&mut self, w: usize) {
        if let Decision::Run(d) = self.s.dequeue(w, self.now).unwrap() {
            let t = d.request.tenant.0;
            let c = d.request.cost.unwrap_or_else(|| cost(t, self.i));
            self.running.push_back((d.ticket, w, t, c));
        }
    }

    fn cycle(&mut self) {
        self.now += 1.0;
        let (ticket, w, tenant, c) = self.running.pop_front().unwrap();
        self.s.complete(ticket, c, self.now).unwrap();
        self.enqueue(tenant);
        self.dequeue(w);
        black_box(&self.running);
    }
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("levels");
    group
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    for preset in PRESETS {
        for round in 0..ROUNDS {
            for (kind, levels) in [("flat", false), ("levels", true)] {
                let mut cy = Cycle::new(preset, levels);
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
    let mut cy = Cycle::new(preset, kind == "levels");
    for _ in 0..k {
        cy.cycle();
    }
    println!("{only}: {k} cycles");
    true
}

criterion_group!(benches, bench);

fn main() {
    if !exact_cycles() {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
