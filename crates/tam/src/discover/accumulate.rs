//! Turning snapshots into per-stage totals: counters are differenced per thread between
//! consecutive snapshots and charged to the thread's stage at the later snapshot.

use super::group::Annotations;
use super::procfs::{Snapshot, ThreadSample};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What one stage did over the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StageStats {
    /// Stage name.
    pub name: String,
    /// Live threads of the stage at each snapshot (the evidence for the stage type).
    pub counts: Vec<usize>,
    /// Distinct threads seen over the run (thread ID + start time).
    pub distinct_threads: usize,
    /// Distinct processes the threads belonged to.
    pub processes: usize,
    /// CPU (utime + stime), clock ticks.
    pub cpu_ticks: u64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// TCP bytes (sent + received) attributed to the stage.
    pub net_bytes: u64,
    /// Thread-intervals in which a thread of the stage used any CPU, disk or network.
    pub active_intervals: u64,
    /// Of those, the ones with disk I/O.
    pub io_intervals: u64,
    /// Of those, the ones with network traffic.
    pub net_intervals: u64,
    /// Whether a thread of the stage was ever seen blocked reading or writing a socket.
    pub seen_on_socket: bool,
    #[serde(skip)]
    pub(crate) seen: BTreeSet<(u32, u64)>,
    #[serde(skip)]
    pub(crate) pids: BTreeSet<u32>,
}

/// A thread that matched no annotation (the NULL stage), with what it did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NullThread {
    /// Process ID.
    pub pid: u32,
    /// Thread ID.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// Process title.
    pub title: String,
    /// Last seen scheduler state.
    pub state: String,
    /// Last seen kernel wait channel.
    pub wchan: String,
    /// CPU ticks used.
    pub cpu_ticks: u64,
    /// Disk bytes (read + written).
    pub disk_bytes: u64,
    /// TCP bytes.
    pub net_bytes: u64,
}

/// Accumulates snapshots into [`StageStats`].
#[derive(Debug, Default)]
pub struct Accumulator {
    annotations: Annotations,
    last: HashMap<(u32, u64), ThreadSample>,
    last_conn: HashMap<u64, u64>,
    owner: HashMap<u64, (u32, u64)>,
    socket_stages: BTreeSet<String>,
    presence: Vec<Vec<(u32, u64)>>,
    pending: HashMap<u64, (u32, u64)>,
    cpu_by: HashMap<(u32, String), u64>,
    latest: HashMap<(u32, u64), (Option<String>, u32)>,
    snapshots: usize,
    /// Per-stage totals, by stage name.
    pub stages: BTreeMap<String, StageStats>,
    /// Threads of the NULL stage, by (tid, start).
    pub null: BTreeMap<(u32, u64), NullThread>,
    /// Established connections of the tree at each snapshot.
    pub connections: Vec<usize>,
}

impl Accumulator {
    /// An accumulator grouping threads by `annotations` (empty: by folded names).
    pub fn new(annotations: Annotations) -> Accumulator {
        Accumulator {
            annotations,
            ..Accumulator::default()
        }
    }

    /// The stage of a thread in a snapshot (`None`: the NULL stage).
    pub fn stage_of(&self, t: &ThreadSample, snapshot: &Snapshot) -> Option<String> {
        let process_comm = snapshot
            .threads
            .iter()
            .find(|m| m.tid == t.pid)
            .map_or(t.comm.as_str(), |m| m.comm.as_str());
        self.annotations.stage_of(t, process_comm)
    }

    /// Number of snapshots added.
    pub fn snapshots(&self) -> usize {
        self.snapshots
    }

    /// Adds the next snapshot. The first one is the baseline; threads first seen later are
    /// counted from zero (they were born during the run).
    pub fn add(&mut self, snap: &Snapshot) {
        let first = self.snapshots == 0;
        self.snapshots += 1;
        let net = self.connection_deltas(snap, first);
        let mut deltas = self.thread_deltas(snap, first);
        self.assign_socket_bytes(snap, net, &mut deltas);
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for (t, d) in deltas {
            match self.stage_of(t, snap) {
                Some(name) => {
                    *counts.entry(name.clone()).or_default() += 1;
                    self.add_to_stage(name, t, d);
                }
                None => {
                    let n = self.null.entry(t.key()).or_default();
                    n.pid = t.pid;
                    n.tid = t.tid;
                    n.name = t.comm.clone();
                    n.title = t.title.clone();
                    n.state = t.state.to_string();
                    n.wchan = t.wchan.clone();
                    n.cpu_ticks += d[0];
                    n.disk_bytes += d[1] + d[2];
                    n.net_bytes += d[3];
                }
            }
        }
        for s in self.stages.values_mut() {
            s.counts.push(counts.get(&s.name).copied().unwrap_or(0));
        }
        self.last = snap.threads.iter().map(|t| (t.key(), t.clone())).collect();
        self.presence
            .push(snap.threads.iter().map(ThreadSample::key).collect());
        for t in &snap.threads {
            let stage = self.stage_of(t, snap);
            self.latest.insert(t.key(), (stage, t.pid));
        }
    }

    /// Network bytes per connection in this interval, as (inode, pid, bytes); none at the
    /// baseline.
    fn connection_deltas(&mut self, snap: &Snapshot, first: bool) -> Vec<(u64, u32, u64)> {
        let mut net = Vec::new();
        let mut conns = HashMap::new();
        for c in &snap.connections {
            let before = self.last_conn.get(&c.inode).copied().unwrap_or(0);
            if !first {
                net.push((c.inode, c.pid, c.bytes.saturating_sub(before)));
            }
            conns.insert(c.inode, c.bytes);
        }
        self.last_conn = conns;
        self.connections.push(snap.connections.len());
        net
    }

    /// Per thread, what it used since the last snapshot: CPU, bytes read, bytes written, and
    /// (filled in later) socket bytes.
    fn thread_deltas<'s>(
        &self,
        snap: &'s Snapshot,
        first: bool,
    ) -> Vec<(&'s ThreadSample, [u64; 4])> {
        let zero = |t: &ThreadSample| ThreadSample {
            cpu: 0,
            read_bytes: 0,
            write_bytes: 0,
            ..t.clone()
        };
        snap.threads
            .iter()
            .map(|t| {
                let prev = match self.last.get(&t.key()) {
                    Some(p) => p.clone(),
                    None if first => t.clone(),
                    None => zero(t),
                };
                let d = [
                    t.cpu.saturating_sub(prev.cpu),
                    t.read_bytes.saturating_sub(prev.read_bytes),
                    t.write_bytes.saturating_sub(prev.write_bytes),
                    0,
                ];
                (t, d)
            })
            .collect()
    }

    /// Socket bytes go to the thread last seen blocked on that socket. Bytes of a socket
    /// whose owner is not known yet are held back until it is (see `finish` for sockets no
    /// thread was ever seen on).
    fn assign_socket_bytes(
        &mut self,
        snap: &Snapshot,
        net: Vec<(u64, u32, u64)>,
        deltas: &mut [(&ThreadSample, [u64; 4])],
    ) {
        for t in &snap.threads {
            if let Some(inode) = t.socket {
                self.owner.insert(inode, t.key());
                if let Some(stage) = self.stage_of(t, snap) {
                    self.socket_stages.insert(stage);
                }
            }
        }
        let index: HashMap<(u32, u64), usize> = deltas
            .iter()
            .enumerate()
            .map(|(i, (t, _))| (t.key(), i))
            .collect();
        for (inode, pid, bytes) in net {
            match self.owner.get(&inode).and_then(|k| index.get(k)) {
                Some(&i) => {
                    // Bytes held back before the owner was known are its bytes too.
                    let held = self.pending.remove(&inode).map_or(0, |(_, b)| b);
                    deltas[i].1[3] += bytes + held;
                }
                None => self.pending.entry(inode).or_insert((pid, 0)).1 += bytes,
            }
        }
    }

    /// Counts thread `t`'s use `d` in the interval to stage `name`.
    fn add_to_stage(&mut self, name: String, t: &ThreadSample, d: [u64; 4]) {
        let s = self
            .stages
            .entry(name.clone())
            .or_insert_with(|| StageStats {
                name,
                counts: vec![0; self.snapshots - 1],
                ..StageStats::default()
            });
        s.seen.insert(t.key());
        s.pids.insert(t.pid);
        s.distinct_threads = s.seen.len();
        s.processes = s.pids.len();
        s.cpu_ticks += d[0];
        *self.cpu_by.entry((t.pid, s.name.clone())).or_default() += d[0];
        s.read_bytes += d[1];
        s.write_bytes += d[2];
        s.net_bytes += d[3];
        if d.iter().any(|&x| x > 0) {
            s.active_intervals += 1;
            s.io_intervals += u64::from(d[1] + d[2] > 0);
            s.net_intervals += u64::from(d[3] > 0);
        }
    }

    /// Recounts every stage's threads over time by the stage each thread was in when last
    /// seen. A forked process keeps its parent's title until it sets its own (a new
    /// PostgreSQL backend looks like the postmaster for a moment); counting it where it
    /// ended up keeps such moments from making a fixed stage look on-demand.
    ///
    /// Bytes of sockets no thread was ever seen blocked on (event-loop servers that wait in
    /// `epoll_wait`) are split over the holding process's stages seen doing socket I/O (all
    /// its stages if none) by their CPU in that process; such a stage counts as using the
    /// network in all its active intervals, since the bytes cannot be placed in time.
    pub fn finish(&mut self) {
        let mut by_pid: HashMap<u32, u64> = HashMap::new();
        for (_, (pid, bytes)) in self.pending.drain() {
            *by_pid.entry(pid).or_default() += bytes;
        }
        for (pid, bytes) in by_pid {
            let mine: Vec<(&String, u64)> = self
                .cpu_by
                .iter()
                .filter(|((p, _), _)| *p == pid)
                .map(|((_, s), &c)| (s, c))
                .collect();
            let known: Vec<(&String, u64)> = mine
                .iter()
                .copied()
                .filter(|(s, _)| self.socket_stages.contains(*s))
                .collect();
            let pool = if known.is_empty() { mine } else { known };
            let cpu: u64 = pool.iter().map(|(_, c)| c).sum();
            for (stage, c) in &pool {
                let share = if cpu > 0 {
                    (bytes as u128 * *c as u128 / cpu as u128) as u64
                } else {
                    bytes / pool.len() as u64
                };
                if let Some(s) = self.stages.get_mut(*stage) {
                    if share > 0 {
                        s.net_bytes += share;
                        s.net_intervals = s.active_intervals;
                    }
                }
            }
        }
        for s in self.stages.values_mut() {
            s.counts = vec![0; self.presence.len()];
            s.seen.clear();
            s.pids.clear();
        }
        for (i, keys) in self.presence.iter().enumerate() {
            for key in keys {
                if let Some((Some(stage), pid)) = self.latest.get(key) {
                    if let Some(s) = self.stages.get_mut(stage) {
                        s.counts[i] += 1;
                        s.seen.insert(*key);
                        s.pids.insert(*pid);
                    }
                }
            }
        }
        for s in self.stages.values_mut() {
            s.seen_on_socket = self.socket_stages.contains(&s.name);
            s.distinct_threads = s.seen.len();
            s.processes = s.pids.len();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::procfs::Connection;

    fn t(pid: u32, tid: u32, comm: &str, cpu: u64, write: u64, chars: u64) -> ThreadSample {
        ThreadSample {
            pid,
            tid,
            start: tid as u64,
            comm: comm.into(),
            title: String::new(),
            exe: String::new(),
            state: 'S',
            wchan: String::new(),
            cpu,
            read_bytes: 0,
            write_bytes: write,
            rchar: chars,
            wchar: write,
            socket: None,
        }
    }

    #[test]
    fn deltas_are_charged_per_stage_and_new_threads_count_from_zero() {
        let mut acc = Accumulator::new(Annotations::default());
        acc.add(&Snapshot {
            threads: vec![t(1, 1, "main", 100, 0, 0), t(1, 2, "w_1", 50, 10, 0)],
            connections: vec![Connection {
                inode: 9,
                pid: 1,
                bytes: 1000,
            }],
        });
        acc.add(&Snapshot {
            threads: vec![
                t(1, 1, "main", 110, 0, 500),
                t(1, 2, "w_1", 70, 4096, 0),
                t(1, 3, "w_2", 5, 0, 0),
            ],
            connections: vec![Connection {
                inode: 9,
                pid: 1,
                bytes: 1600,
            }],
        });
        let w = &acc.stages["w_*"];
        assert_eq!(
            (w.cpu_ticks, w.write_bytes, w.counts.clone()),
            (25, 4086, vec![1, 2])
        );
        assert_eq!(w.distinct_threads, 2);
        acc.finish();
        let (m, w) = (&acc.stages["main"], &acc.stages["w_*"]);
        // The 600 socket bytes have no known owner: split by CPU at the end (10 : 25).
        assert_eq!((m.cpu_ticks, m.net_bytes), (10, 171));
        assert_eq!(w.net_bytes, 428);
    }

    #[test]
    fn threads_are_counted_in_the_stage_they_ended_up_in() {
        let mut acc = Accumulator::new(Annotations::default());
        let mut child = t(2, 2, "main", 0, 0, 0);
        acc.add(&Snapshot {
            threads: vec![t(1, 1, "main", 0, 0, 0)],
            connections: vec![],
        });
        // A fresh fork still carries its parent's name, then renames itself.
        acc.add(&Snapshot {
            threads: vec![t(1, 1, "main", 0, 0, 0), child.clone()],
            connections: vec![],
        });
        child.comm = "backend".into();
        acc.add(&Snapshot {
            threads: vec![t(1, 1, "main", 0, 0, 0), child],
            connections: vec![],
        });
        acc.finish();
        assert_eq!(acc.stages["main"].counts, [1, 1, 1]);
        assert_eq!(acc.stages["backend"].counts, [0, 1, 1]);
    }

    #[test]
    fn socket_bytes_go_to_the_thread_seen_on_the_socket_and_then_to_its_stage() {
        let mut acc = Accumulator::new(Annotations::default());
        let conn = |bytes| {
            vec![
                Connection {
                    inode: 9,
                    pid: 1,
                    bytes,
                },
                Connection {
                    inode: 10,
                    pid: 1,
                    bytes,
                },
            ]
        };
        acc.add(&Snapshot {
            threads: vec![
                t(1, 1, "main", 0, 0, 0),
                t(1, 2, "worker", 0, 0, 0),
                t(1, 3, "conn", 0, 0, 0),
            ],
            connections: conn(0),
        });
        let mut c = t(1, 3, "conn", 1, 0, 0);
        c.socket = Some(9);
        acc.add(&Snapshot {
            threads: vec![
                t(1, 1, "main", 0, 0, 0),
                t(1, 2, "worker", 50, 0, 0),
                c.clone(),
            ],
            connections: conn(100),
        });
        // Socket 9 is owned by `conn`; socket 10 has no owner but `conn` is the only
        // stage seen on sockets, so the busy worker gets none of it.
        acc.finish();
        assert_eq!(acc.stages["conn"].net_bytes, 200);
        assert_eq!(acc.stages["worker"].net_bytes, 0);
        assert_eq!(acc.connections, [2, 2]);
    }
}
