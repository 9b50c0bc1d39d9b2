//! Finding blocking relations by delay injection from outside the process (seeds/004
//! §2.5 injects delays into stages and watches who stalls).
//!
//! **Method.** One CPU (`probe_cpu`, 0 by default) is kept busy by a spinning thread of
//! ours, at our own nice value, for the whole probe phase. To slow a stage, each of its
//! threads is pinned to that CPU (`taskset`) and lowered to `SCHED_IDLE` (`chrt -i`): an
//! idle-class thread only runs when nothing else wants the CPU, so the stage nearly stops.
//! Each probe measures every stage's progress (precise CPU rate) in a baseline window and
//! then in a window with the stage slowed, twice; the busy CPU is there in all windows, so
//! only the slowdown differs.
//!
//! **Judging a probe** ([`judge`]). How hard the slowdown bit is measured, not assumed: in
//! each round the slowed stage's own fall `s = 1 - during/baseline`. A round is *effective*
//! when `s` is at least [`MIN_SLOWDOWN`]. It need not be: an idle-class thread weighs 3
//! against a nice-0 thread's 1024 but against a nice-19 thread's 15, so with the hog (and
//! the target) niced the slowed stage keeps a good part of the CPU. A stage *followed* the
//! slowed one in a round when its own fall is at least `drop` × `s` (75% of the slowed
//! stage's fall by default): a stage that waits for `S` (or is fed by it) can only fall as
//! far as `S` did, so a fixed threshold on the raw fall misses it whenever the slowdown is
//! partial. A stage *dropped* (`D(S)`, the evidence for a relation) when it followed in both
//! rounds and both were effective; a probe with an ineffective round claims nothing. The
//! stages that fell by at least [`FEEDS_AT`] (half) of `s` in any effective round (`F(S)`,
//! weaker evidence) are kept to explain drops as starvation below.
//!
//! **Inference** ([`infer`]). A drop means the stage waits for `S` (blocking) or is fed by
//! `S` (it starves). Entry stages — those whose threads were seen blocked on client sockets
//! (or, if none was, those using the network) — are driven by the outside load, so they
//! never starve: a drop of an entry stage is blocking. A non-entry stage `T` that dropped
//! is starving, not blocked, when `S` is an entry stage that feeds it (`T ∈ F(S)`), or when
//! an entry stage `E ∈ D(S)` feeds it (`T ∈ F(E)`): `S` slowed `E`, which then sent `T`
//! less work. The explanation takes the weaker evidence on purpose: a relation is claimed
//! only on strong evidence, and one noisy round of `E`'s probe must not turn starvation
//! into a claimed relation. When such an `E`'s own probe was not effective, starvation
//! cannot be told from blocking: the drop is left *undecided* (reported, not claimed).
//! Every other drop is recorded as `T blocks_on S`.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A round counts only when the slowed stage's own CPU rate fell by at least this fraction
/// (see the module docs): below it the delay was too weak for a fall of the others to mean
/// anything against the noise of a loaded host.
pub const MIN_SLOWDOWN: f64 = 0.75;

/// Fraction of the slowed stage's own fall that a stage must follow, in one effective
/// round, to count as fed by it (`F(S)`, used only to explain drops as starvation). Lower
/// than the drop fraction on purpose: a consumer keeps draining the queue its feeder filled
/// for part of a window, so it falls less than the feeder; and since this evidence only
/// withdraws claims, a lower bar errs toward claiming less.
pub const FEEDS_AT: f64 = 0.5;

/// CPU rates (cores) of every stage in one baseline window and in the slowed window after.
pub type Round = (BTreeMap<String, f64>, BTreeMap<String, f64>);

/// One delay injection and what it did.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// The stage that was slowed.
    pub slowed: String,
    /// Its threads that were slowed (SCHED_OTHER threads only; others are left alone).
    pub threads: usize,
    /// CPU rate of every stage (cores) in the baseline windows (mean of the two rounds).
    pub baseline: BTreeMap<String, f64>,
    /// CPU rate of every stage while `slowed` was slowed (mean of the two rounds).
    pub during: BTreeMap<String, f64>,
    /// The slowed stage's own fall in each round (`1 - during/baseline`; `None` when its
    /// baseline was below the rate floor).
    pub slowdown: Vec<Option<f64>>,
    /// Whether every round slowed the stage by at least [`MIN_SLOWDOWN`]; an ineffective
    /// probe drops nothing.
    pub effective: bool,
    /// Stages that followed the slowed one down in both rounds (`D(S)`; see the module docs).
    pub dropped: Vec<String>,
    /// Stages that followed it down to [`FEEDS_AT`] of its fall in at least one effective
    /// round (`F(S)`): the weaker evidence used only to explain drops as starvation.
    pub followed: Vec<String>,
}

/// The outcome of all probes.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BlockingReport {
    /// How delay was injected.
    pub method: String,
    /// Window length of each measurement, seconds.
    pub window_s: f64,
    /// Stages holding client connections (never starved; see the module docs).
    pub entry: Vec<String>,
    /// Every probe, in order.
    pub probes: Vec<Probe>,
    /// `T → {S}`: T blocks on S.
    pub blocks_on: BTreeMap<String, BTreeSet<String>>,
    /// `(T, S)` drops explained as starvation: T is fed (directly or through an entry
    /// stage) by S.
    pub starved: Vec<(String, String)>,
    /// `(T, S, E)`: T dropped while S was slowed, together with the entry stage E, whose
    /// own probe was not effective: starvation through E cannot be ruled out, so no
    /// relation is claimed.
    pub undecided: Vec<(String, String, String)>,
}

/// The slowed stage's own fall in one round, `1 - during/baseline`; `None` when its
/// baseline is below `min_rate` (too little progress to measure a fall).
pub fn slowdown(slowed: &str, round: &Round, min_rate: f64) -> Option<f64> {
    let (baseline, during) = round;
    let b = baseline.get(slowed).copied().filter(|&b| b >= min_rate)?;
    Some(1.0 - during.get(slowed).copied().unwrap_or(0.0) / b)
}

/// The stages that followed the slowed stage down in one round in which it fell by `fall`:
/// among those with a baseline of at least `min_rate` cores, those whose own fall is at
/// least `drop × fall`.
pub fn followed(slowed: &str, round: &Round, min_rate: f64, drop: f64, fall: f64) -> Vec<String> {
    let (baseline, during) = round;
    baseline
        .iter()
        .filter(|(name, &b)| {
            name.as_str() != slowed
                && b >= min_rate
                && 1.0 - during.get(*name).copied().unwrap_or(0.0) / b >= drop * fall
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Judges the rounds of one probe of `slowed` (see the module docs): its fall per round,
/// whether every round was effective, `D(S)` (followed at `drop` in every round) and
/// `F(S)` (followed at [`FEEDS_AT`], or `drop` if lower, in any effective round). The rate maps of the returned
/// [`Probe`] are the means over the rounds; `threads` is left at 0 for the caller.
pub fn judge(slowed: &str, rounds: &[Round], min_rate: f64, drop: f64) -> Probe {
    let falls: Vec<Option<f64>> = rounds
        .iter()
        .map(|r| slowdown(slowed, r, min_rate))
        .collect();
    let strong = |f: &Option<f64>| f.is_some_and(|f| f >= MIN_SLOWDOWN);
    // Per effective round: who followed at `drop` (for D) and at FEEDS_AT (for F).
    let per_round = |at: f64| -> Vec<Vec<String>> {
        rounds
            .iter()
            .zip(&falls)
            .map(|(r, f)| match f {
                Some(f) if strong(&Some(*f)) => followed(slowed, r, min_rate, at, *f),
                _ => Vec::new(),
            })
            .collect()
    };
    let effective = !rounds.is_empty() && falls.iter().all(strong);
    let dropped: Vec<String> = match per_round(drop).split_first() {
        Some((first, rest)) if effective => first
            .iter()
            .filter(|s| rest.iter().all(|r| r.contains(s)))
            .cloned()
            .collect(),
        _ => Vec::new(),
    };
    let followed: Vec<String> = per_round(FEEDS_AT.min(drop))
        .into_iter()
        .flatten()
        .collect::<BTreeSet<String>>()
        .into_iter()
        .collect();
    let mean = |during: bool| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for (b, d) in rounds {
            for (k, v) in if during { d } else { b } {
                *m.entry(k.clone()).or_default() += v / rounds.len() as f64;
            }
        }
        m
    };
    Probe {
        slowed: slowed.to_string(),
        threads: 0,
        baseline: mean(false),
        during: mean(true),
        slowdown: falls,
        effective,
        dropped,
        followed,
    }
}

/// Applies the inference rule of the module docs to the probes.
pub fn infer(probes: &[Probe], entry: &BTreeSet<String>) -> BlockingReport {
    let by_slowed: BTreeMap<&str, &Probe> = probes.iter().map(|p| (p.slowed.as_str(), p)).collect();
    // E feeds T: E is an entry stage and T followed it down when E was slowed.
    let feeds = |e: &str, t: &str| {
        entry.contains(e)
            && by_slowed
                .get(e)
                .is_some_and(|p| p.followed.iter().any(|f| f == t))
    };
    // An entry stage whose probe could not show whom it feeds.
    let untested = |e: &str| entry.contains(e) && by_slowed.get(e).is_some_and(|p| !p.effective);
    let mut report = BlockingReport {
        entry: entry.iter().cloned().collect(),
        probes: probes.to_vec(),
        ..BlockingReport::default()
    };
    for p in probes {
        for t in &p.dropped {
            let others = || p.dropped.iter().filter(|e| *e != t);
            if entry.contains(t) {
                report
                    .blocks_on
                    .entry(t.clone())
                    .or_default()
                    .insert(p.slowed.clone());
            } else if feeds(&p.slowed, t) || others().any(|e| feeds(e, t)) {
                report.starved.push((t.clone(), p.slowed.clone()));
            } else if let Some(e) = others().find(|e| untested(e)) {
                report
                    .undecided
                    .push((t.clone(), p.slowed.clone(), e.clone()));
            } else {
                report
                    .blocks_on
                    .entry(t.clone())
                    .or_default()
                    .insert(p.slowed.clone());
            }
        }
    }
    report
}

#[cfg(target_os = "linux")]
pub use linux::*;

#[cfg(target_os = "linux")]
mod linux {
    use crate::discover::procfs;
    use crate::discover::DiscoverError;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn run(args: &[&str]) -> Result<(), String> {
        let out = Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", args[0]))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "`{}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// A thread of ours spinning on one CPU at normal priority, so that idle-class threads
    /// pinned there barely run. Stops when dropped.
    pub struct Hog {
        stop: Arc<AtomicBool>,
        handle: Option<std::thread::JoinHandle<()>>,
        nice: Option<i64>,
    }

    impl Hog {
        /// Starts spinning on `cpu`, at the nice value of the calling thread: the same as
        /// the target's when both run alike. (A hog niced below the target would shut the
        /// target's other threads out of that CPU in every window, baseline included.)
        pub fn start(cpu: u32) -> Result<Hog, DiscoverError> {
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            let flag = stop.clone();
            let handle = std::thread::Builder::new()
                .name("tam-probe-hog".into())
                .spawn(move || {
                    let pinned = std::fs::read_link("/proc/thread-self")
                        .map_err(|e| e.to_string())
                        .and_then(|p| {
                            let tid = p
                                .file_name()
                                .unwrap_or_default()
                                .to_string_lossy()
                                .into_owned();
                            run(&["taskset", "-p", "-c", &cpu.to_string(), &tid])?;
                            Ok(procfs::thread_nice("thread-self"))
                        });
                    let ok = pinned.is_ok();
                    let _ = tx.send(pinned);
                    let mut x = 0u64;
                    while ok && !flag.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
                .map_err(|e| DiscoverError::Io(format!("cannot start the probe thread: {e}")))?;
            let mut hog = Hog {
                stop,
                handle: Some(handle),
                nice: None,
            };
            match rx.recv() {
                Ok(Ok(nice)) => {
                    hog.nice = nice;
                    Ok(hog)
                }
                Ok(Err(e)) => Err(DiscoverError::Probe(format!(
                    "cannot pin to CPU {cpu}: {e}"
                ))),
                Err(_) => Err(DiscoverError::Probe("the probe thread died".into())),
            }
        }

        /// The nice value the spinning thread runs at (`None` when unreadable).
        pub fn nice(&self) -> Option<i64> {
            self.nice
        }
    }

    impl Drop for Hog {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::Relaxed);
            if let Some(h) = self.handle.take() {
                let _ = h.join();
            }
        }
    }

    /// Threads lowered to SCHED_IDLE on the busy CPU; restored when dropped.
    pub struct Slowed {
        restore: Vec<(u32, String)>,
    }

    impl Slowed {
        /// Slows the given `(pid, tid)` threads; SCHED_OTHER threads only (returns how
        /// many were slowed). Fails when the first thread cannot be changed (permission).
        pub fn apply(threads: &[(u32, u32)], cpu: u32) -> Result<Slowed, DiscoverError> {
            let mut slowed = Slowed {
                restore: Vec::new(),
            };
            for &(pid, tid) in threads {
                if procfs::policy(pid, tid) != Some(0) {
                    continue;
                }
                let Some(cpus) = procfs::cpus_allowed(pid, tid) else {
                    continue;
                };
                let t = tid.to_string();
                let done = run(&["taskset", "-p", "-c", &cpu.to_string(), &t])
                    .and_then(|()| run(&["chrt", "-i", "-p", "0", &t]));
                match done {
                    Ok(()) => slowed.restore.push((tid, cpus)),
                    // A thread that exited meanwhile is fine; anything else on the first
                    // thread (permission) stops the probe.
                    Err(e) if slowed.restore.is_empty() && procfs::policy(pid, tid).is_some() => {
                        let _ = run(&["taskset", "-p", "-c", &cpus, &t]);
                        return Err(DiscoverError::Probe(e));
                    }
                    Err(_) => {}
                }
            }
            Ok(slowed)
        }

        /// How many threads were slowed.
        pub fn len(&self) -> usize {
            self.restore.len()
        }

        /// Whether no thread was slowed.
        pub fn is_empty(&self) -> bool {
            self.restore.is_empty()
        }
    }

    impl Drop for Slowed {
        fn drop(&mut self) {
            for (tid, cpus) in &self.restore {
                let t = tid.to_string();
                let _ = run(&["chrt", "-o", "-p", "0", &t]);
                let _ = run(&["taskset", "-p", "-c", cpus, &t]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(slowed: &str, dropped: &[&str]) -> Probe {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Probe {
            slowed: slowed.into(),
            threads: 1,
            baseline: BTreeMap::new(),
            during: BTreeMap::new(),
            slowdown: vec![Some(0.95); 2],
            effective: true,
            dropped: names(dropped),
            followed: names(dropped),
        }
    }

    fn rates(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn drops_are_blocking_unless_explained_by_an_entry_stage_feeding_the_stage() {
        // conn (entry) hands work to workers and waits for the flusher.
        let probes = [
            probe("conn", &["worker", "flusher"]),
            probe("worker", &[]),
            probe("flusher", &["conn", "worker"]),
        ];
        let entry = BTreeSet::from(["conn".to_string()]);
        let r = infer(&probes, &entry);
        assert_eq!(r.blocks_on.len(), 1);
        assert_eq!(r.blocks_on["conn"], BTreeSet::from(["flusher".to_string()]));
        assert!(r.starved.contains(&("worker".into(), "conn".into())));
        assert!(r.starved.contains(&("worker".into(), "flusher".into())));
        assert!(r.undecided.is_empty());
    }

    #[test]
    fn starvation_is_explained_by_one_round_and_undecided_when_the_feeder_was_not_slowed() {
        let entry = BTreeSet::from(["conn".to_string()]);
        // The workers followed conn down in one round only: not a relation of their own,
        // but enough to explain their drop when the flusher stalled conn.
        let mut conn = probe("conn", &[]);
        conn.followed = vec!["worker".into()];
        let flusher = probe("flusher", &["conn", "worker"]);
        let r = infer(&[conn.clone(), flusher.clone()], &entry);
        assert_eq!(r.blocks_on.keys().collect::<Vec<_>>(), ["conn"]);
        assert_eq!(r.starved, [("worker".to_string(), "flusher".to_string())]);
        // conn's own probe could not slow it: whether it feeds the workers is unknown, so
        // their drop with the flusher is neither starvation nor a claimed relation.
        conn.effective = false;
        conn.followed.clear();
        let r = infer(&[conn, flusher.clone()], &entry);
        assert_eq!(r.blocks_on.keys().collect::<Vec<_>>(), ["conn"]);
        assert!(r.starved.is_empty());
        assert_eq!(
            r.undecided,
            [("worker".into(), "flusher".into(), "conn".into())]
        );
        // conn never probed at all (below the rate floor): as before, the drop is claimed.
        let r = infer(&[flusher], &entry);
        assert_eq!(
            r.blocks_on["worker"],
            BTreeSet::from(["flusher".to_string()])
        );
    }

    #[test]
    fn a_drop_needs_a_baseline_above_the_floor() {
        let round = (
            rates(&[("a", 0.5), ("b", 0.01), ("s", 0.3)]),
            rates(&[("a", 0.1), ("b", 0.0), ("s", 0.0)]),
        );
        assert_eq!(slowdown("s", &round, 0.03), Some(1.0));
        assert_eq!(followed("s", &round, 0.03, 0.5, 1.0), ["a"]);
        assert_eq!(slowdown("b", &round, 0.03), None);
    }

    #[test]
    fn a_partial_slowdown_is_followed_in_proportion() {
        // The slowed stage kept 40% of its rate (a loaded host): the stage waiting for it
        // fell as far, 62%, which a fixed 75% threshold would miss; the bystander fell 10%.
        let round = (
            rates(&[("s", 0.10), ("waits", 0.20), ("other", 0.30)]),
            rates(&[("s", 0.04), ("waits", 0.076), ("other", 0.27)]),
        );
        let fall = slowdown("s", &round, 0.01).unwrap();
        assert!((fall - 0.6).abs() < 1e-9);
        assert_eq!(followed("s", &round, 0.01, 0.75, fall), ["waits"]);
        // Judged: a 60% fall is below MIN_SLOWDOWN, so the probe claims nothing.
        let weak = judge("s", &[round.clone(), round.clone()], 0.01, 0.75);
        assert!(!weak.effective && weak.dropped.is_empty() && weak.followed.is_empty());
        assert_eq!(weak.slowdown.len(), 2);
    }

    #[test]
    fn a_stage_dropped_only_when_it_followed_in_every_effective_round() {
        let strong = |waits: f64| {
            (
                rates(&[("s", 0.10), ("waits", 0.20), ("other", 0.30)]),
                rates(&[("s", 0.01), ("waits", waits), ("other", 0.29)]),
            )
        };
        // Fell 90%: followers need a 67.5% fall. Round two's 50% is not enough for D, but
        // above FEEDS_AT × 90% = 45% it is in F; a fall of 40% in both rounds is in neither.
        let p = judge("s", &[strong(0.02), strong(0.10)], 0.01, 0.75);
        assert!(p.effective);
        assert!(p.dropped.is_empty());
        assert_eq!(p.followed, ["waits"]);
        let p = judge("s", &[strong(0.12), strong(0.12)], 0.01, 0.75);
        assert!(p.dropped.is_empty() && p.followed.is_empty());
        let p = judge("s", &[strong(0.02), strong(0.05)], 0.01, 0.75);
        assert_eq!(p.dropped, ["waits"]);
        assert!((p.baseline["waits"] - 0.20).abs() < 1e-9);
        assert!((p.during["waits"] - 0.035).abs() < 1e-9);
        // One weak round makes the whole probe ineffective, whatever the other showed.
        let weak = (
            rates(&[("s", 0.10), ("waits", 0.20)]),
            rates(&[("s", 0.05), ("waits", 0.02)]),
        );
        let p = judge("s", &[strong(0.02), weak], 0.01, 0.75);
        assert!(!p.effective && p.dropped.is_empty());
        assert_eq!(p.followed, ["waits"]);
    }
}
