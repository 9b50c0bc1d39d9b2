//! Finding blocking relations by delay injection from outside the process (seeds/004
//! §2.5 injects delays into stages and watches who stalls).
//!
//! **Method.** One CPU (`probe_cpu`, 0 by default) is kept busy by a spinning thread of
//! ours at normal priority for the whole probe phase. To slow a stage, each of its threads
//! is pinned to that CPU (`taskset`) and lowered to `SCHED_IDLE` (`chrt -i`): an idle-class
//! thread only runs when nothing else wants the CPU, so the stage nearly stops. Each probe
//! measures every stage's progress (precise CPU rate) in a baseline window and then in a
//! window with the stage slowed, twice; the busy CPU is there in all windows, so only the
//! slowdown differs, and a stage counts as dropped only when it dropped in both rounds.
//! Afterwards each thread gets its policy and CPU set back.
//!
//! **Inference.** `D(S)`: the stages whose progress dropped by at least `drop` while `S`
//! was slowed. A drop means the stage waits for `S` (blocking) or is fed by `S` (it
//! starves). Entry stages — those whose threads were seen blocked on client sockets (or,
//! if none was, those using the network) — are driven by the outside load, so they never
//! starve: a drop of an entry stage is blocking. A non-entry
//! stage `T` that dropped is starving, not blocked, when `S` is an entry stage that feeds
//! it (`T ∈ D(S)`), or when an entry stage `E ∈ D(S)` feeds it (`T ∈ D(E)`): `S` slowed
//! `E`, which then sent `T` less work. Every other drop is recorded as `T blocks_on S`.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

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
    /// Stages whose progress dropped by at least the drop fraction in both rounds (`D(S)`).
    pub dropped: Vec<String>,
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
}

/// Stages whose rate fell below `(1 - drop) ×` baseline, among those with a baseline of
/// at least `min_rate` cores.
pub fn dropped(
    slowed: &str,
    baseline: &BTreeMap<String, f64>,
    during: &BTreeMap<String, f64>,
    min_rate: f64,
    drop: f64,
) -> Vec<String> {
    baseline
        .iter()
        .filter(|(name, &b)| {
            name.as_str() != slowed
                && b >= min_rate
                && during.get(*name).copied().unwrap_or(0.0) < (1.0 - drop) * b
        })
        .map(|(name, _)| name.clone())
        .collect()
}

/// Applies the inference rule of the module docs to the probes.
pub fn infer(probes: &[Probe], entry: &BTreeSet<String>) -> BlockingReport {
    let d: BTreeMap<&str, BTreeSet<&str>> = probes
        .iter()
        .map(|p| {
            (
                p.slowed.as_str(),
                p.dropped.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    let feeds = |e: &str, t: &str| entry.contains(e) && d.get(e).is_some_and(|set| set.contains(t));
    let mut report = BlockingReport {
        entry: entry.iter().cloned().collect(),
        probes: probes.to_vec(),
        ..BlockingReport::default()
    };
    for p in probes {
        for t in &p.dropped {
            let starving = !entry.contains(t)
                && (feeds(&p.slowed, t)
                    || d[p.slowed.as_str()].iter().any(|e| *e != t && feeds(e, t)));
            if starving {
                report.starved.push((t.clone(), p.slowed.clone()));
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
    }

    impl Hog {
        /// Starts spinning on `cpu`.
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
                            run(&["taskset", "-p", "-c", &cpu.to_string(), &tid])
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
            let hog = Hog {
                stop,
                handle: Some(handle),
            };
            match rx.recv() {
                Ok(Ok(())) => Ok(hog),
                Ok(Err(e)) => Err(DiscoverError::Probe(format!(
                    "cannot pin to CPU {cpu}: {e}"
                ))),
                Err(_) => Err(DiscoverError::Probe("the probe thread died".into())),
            }
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
        Probe {
            slowed: slowed.into(),
            threads: 1,
            baseline: BTreeMap::new(),
            during: BTreeMap::new(),
            dropped: dropped.iter().map(|s| s.to_string()).collect(),
        }
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
    }

    #[test]
    fn a_drop_needs_a_baseline_above_the_floor() {
        let b = BTreeMap::from([
            ("a".to_string(), 0.5),
            ("b".to_string(), 0.01),
            ("s".to_string(), 0.3),
        ]);
        let d = BTreeMap::from([
            ("a".to_string(), 0.1),
            ("b".to_string(), 0.0),
            ("s".to_string(), 0.0),
        ]);
        assert_eq!(dropped("s", &b, &d, 0.03, 0.5), ["a"]);
    }
}
