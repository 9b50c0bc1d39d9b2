//! The sampling loop and the probe phase (Linux).

use super::blocking::{self, Hog, Slowed};
use super::procfs::{self, Snapshot, USER_HZ};
use super::report::Discovery;
use super::{Accumulator, DiscoverError, Options, Progress, Target};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Baseline CPU rate (cores) a stage needs to be probed or to count as dropped.
const MIN_RATE: f64 = 0.01;
/// At most this many stages are probed (the busiest).
const MAX_PROBES: usize = 8;

struct Started(Option<Child>);

impl Started {
    /// Whether the root process is gone (reaping it if it is our child).
    fn gone(&mut self, root: u32) -> bool {
        if let Some(child) = &mut self.0 {
            if !matches!(child.try_wait(), Ok(None)) {
                return true;
            }
        }
        match std::fs::read_to_string(format!("/proc/{root}/stat")) {
            Ok(s) => s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z')),
            Err(_) => true,
        }
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        // A command we started is ours to stop.
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn snapshot(root: u32) -> Result<Snapshot, DiscoverError> {
    let tree = procfs::process_tree(root);
    Ok(Snapshot {
        threads: procfs::read_threads(&tree),
        connections: procfs::read_connections(&tree)?,
    })
}

pub(super) fn discover(
    options: &Options,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Discovery, DiscoverError> {
    if !procfs::procfs_available() {
        return Err(DiscoverError::Unsupported(
            "/proc has no per-thread I/O accounting (task I/O accounting is off)".into(),
        ));
    }
    let (root, mut started) = match &options.target {
        Target::Pid(pid) => {
            procfs::check_access(*pid)?;
            (*pid, Started(None))
        }
        Target::Command(argv) => {
            let Some((cmd, args)) = argv.split_first() else {
                return Err(DiscoverError::Spawn("empty command".into()));
            };
            let child = Command::new(cmd)
                .args(args)
                .stdin(Stdio::null())
                .spawn()
                .map_err(|e| DiscoverError::Spawn(format!("{cmd}: {e}")))?;
            let pid = child.id();
            // Let it start its threads before the baseline.
            std::thread::sleep(options.interval.max(Duration::from_millis(500)));
            (pid, Started(Some(child)))
        }
    };
    let root_name = std::fs::read_to_string(format!("/proc/{root}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("pid {root}"));
    let mut acc = Accumulator::new(options.annotations.clone());
    let start = Instant::now();
    let requested = options.duration.as_secs_f64();
    let mut exited = false;
    loop {
        let tick = Instant::now();
        if started.gone(root) {
            exited = true;
            break;
        }
        let snap = snapshot(root)?;
        if snap.threads.is_empty() {
            exited = true;
            break;
        }
        acc.add(&snap);
        let elapsed = start.elapsed().as_secs_f64();
        progress(&Progress {
            phase: "sampling",
            elapsed,
            requested,
            stages: acc.stages.len(),
            detail: format!("{} connections", snap.connections.len()),
        });
        if elapsed >= requested {
            break;
        }
        let spent = tick.elapsed();
        std::thread::sleep(options.interval.saturating_sub(spent));
    }
    acc.finish();
    let elapsed = start.elapsed().as_secs_f64();
    let mut discovery = Discovery::build(&acc, options, &root_name, elapsed, exited);
    if options.probe_blocking && !exited && acc.snapshots() >= 2 {
        match probe(&acc, &discovery, options, root, &mut started, progress) {
            Ok((report, gone)) => {
                discovery.set_blocking(report);
                if gone {
                    discovery.target_exited = true;
                }
            }
            Err(e) => discovery.blocking_error = Some(e.to_string()),
        }
    }
    Ok(discovery)
}

/// CPU rate (cores) of every stage over one window, from precise run times.
fn rates(acc: &Accumulator, root: u32, window: Duration) -> BTreeMap<String, f64> {
    let before: BTreeMap<(u32, u64), u64> = procfs::read_threads(&procfs::process_tree(root))
        .into_iter()
        .filter_map(|t| Some((t.key(), procfs::run_ns(t.pid, t.tid)?)))
        .collect();
    let t0 = Instant::now();
    std::thread::sleep(window);
    let secs = t0.elapsed().as_secs_f64();
    let snap = Snapshot {
        threads: procfs::read_threads(&procfs::process_tree(root)),
        connections: Vec::new(),
    };
    let mut out = BTreeMap::new();
    for t in &snap.threads {
        if let (Some(stage), Some(ns)) = (acc.stage_of(t, &snap), procfs::run_ns(t.pid, t.tid)) {
            let d = ns.saturating_sub(before.get(&t.key()).copied().unwrap_or(0));
            *out.entry(stage).or_insert(0.0) += d as f64 / 1e9 / secs;
        }
    }
    out
}

fn probe(
    acc: &Accumulator,
    discovery: &Discovery,
    options: &Options,
    root: u32,
    started: &mut Started,
    progress: &mut dyn FnMut(&Progress),
) -> Result<(blocking::BlockingReport, bool), DiscoverError> {
    let elapsed = discovery.elapsed_s.max(1e-9);
    let mut candidates: Vec<(&str, f64)> = discovery
        .stages
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.stats.cpu_ticks as f64 / USER_HZ / elapsed,
            )
        })
        .filter(|&(_, rate)| rate >= MIN_RATE)
        .collect();
    candidates.sort_by(|a, b| b.1.total_cmp(&a.1));
    candidates.truncate(MAX_PROBES);
    // Entry stages: those seen on client sockets; if none was, those using the network.
    let seen: BTreeSet<String> = discovery
        .stages
        .iter()
        .filter(|s| s.stats.seen_on_socket && s.stats.net_bytes > 0)
        .map(|s| s.name.clone())
        .collect();
    let entry: BTreeSet<String> = if seen.is_empty() {
        discovery
            .stages
            .iter()
            .filter(|s| s.resources.get("network").map(String::as_str) != Some("false"))
            .map(|s| s.name.clone())
            .collect()
    } else {
        seen
    };
    let window = options.probe_window;
    let requested = 4.0 * window.as_secs_f64() * candidates.len() as f64;
    let hog = Hog::start(options.probe_cpu)?;
    let start = Instant::now();
    let mut probes = Vec::new();
    let mut gone = false;
    for (i, (stage, _)) in candidates.iter().enumerate() {
        if started.gone(root) {
            gone = true;
            break;
        }
        progress(&Progress {
            phase: "probing",
            elapsed: start.elapsed().as_secs_f64(),
            requested,
            stages: discovery.stages.len(),
            detail: format!(
                "slowing `{stage}` ({}/{}); keep the load running",
                i + 1,
                candidates.len()
            ),
        });
        // Two rounds of baseline then slowed; a stage counts as dropped only when it
        // followed the slowed stage down in both, so one burst of outside load cannot make
        // a relation (see `blocking::judge`).
        let mut rounds = Vec::new();
        let mut count = 0;
        for _ in 0..2 {
            let baseline = rates(acc, root, window);
            let snap = Snapshot {
                threads: procfs::read_threads(&procfs::process_tree(root)),
                connections: Vec::new(),
            };
            let threads: Vec<(u32, u32)> = snap
                .threads
                .iter()
                .filter(|t| acc.stage_of(t, &snap).as_deref() == Some(*stage))
                .map(|t| (t.pid, t.tid))
                .collect();
            let slowed = Slowed::apply(&threads, options.probe_cpu)?;
            let during = rates(acc, root, window);
            count = count.max(slowed.len());
            drop(slowed);
            rounds.push((baseline, during));
        }
        let mut probe = blocking::judge(stage, &rounds, MIN_RATE, options.probe_drop);
        probe.threads = count;
        probes.push(probe);
    }
    let mut report = blocking::infer(&probes, &entry);
    report.method = format!(
        "SCHED_IDLE + pinned to CPU {} kept busy by a spinning thread{} (taskset, chrt)",
        options.probe_cpu,
        hog.nice()
            .map(|n| format!(" at nice {n}"))
            .unwrap_or_default()
    );
    report.window_s = window.as_secs_f64();
    Ok((report, gone))
}
