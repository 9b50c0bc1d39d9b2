//! Reading a process tree from outside through `/proc` (Linux): threads, their names and
//! states, CPU time, disk and character I/O, and the TCP connections the tree holds.
//!
//! Everything here is a plain file read (or one `ss` call for socket byte counts), so it
//! needs no code in the target and no privileges beyond reading the target's `/proc`
//! entries (same user, or root; `io` needs ptrace-read access).

use super::DiscoverError;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::ErrorKind;
use std::path::Path;

/// Clock ticks per second of the CPU times in `/proc/*/stat` (`USER_HZ`, 100 on every
/// mainstream Linux architecture; the kernel ABI fixes it independently of `HZ`).
pub const USER_HZ: f64 = 100.0;

/// One thread at one instant: identity, name, state and cumulative counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSample {
    /// The process (thread group) ID.
    pub pid: u32,
    /// The thread ID.
    pub tid: u32,
    /// Start time in clock ticks since boot: with `tid`, identifies the thread even if the
    /// ID is reused.
    pub start: u64,
    /// The thread name (`/proc/PID/task/TID/comm`).
    pub comm: String,
    /// The process title: `argv[0]` as the process shows it now (PostgreSQL and Redis
    /// rewrite it to say what the process does).
    pub title: String,
    /// The file name of the process's executable (empty when unreadable).
    pub exe: String,
    /// Scheduler state letter (R running, S sleeping, D disk wait, …).
    pub state: char,
    /// The kernel function the thread waits in (`wchan`), empty when running.
    pub wchan: String,
    /// utime + stime, in clock ticks.
    pub cpu: u64,
    /// Bytes this thread caused to be read from storage.
    pub read_bytes: u64,
    /// Bytes this thread caused to be written to storage (dirtied page cache included).
    pub write_bytes: u64,
    /// Bytes read through read-like system calls (files, sockets, pipes).
    pub rchar: u64,
    /// Bytes written through write-like system calls.
    pub wchar: u64,
    /// The socket (inode) the thread is blocked reading or writing right now, if any:
    /// from `/proc/…/syscall`, whose first argument is the file descriptor.
    pub socket: Option<u64>,
}

impl ThreadSample {
    /// The key that identifies this thread over the run.
    pub fn key(&self) -> (u32, u64) {
        (self.tid, self.start)
    }
}

/// One established TCP connection held by a process of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connection {
    /// Socket inode (identifies the connection over the run).
    pub inode: u64,
    /// The holding process.
    pub pid: u32,
    /// bytes_acked (sent and acknowledged) + bytes_received, cumulative.
    pub bytes: u64,
}

/// The whole tree at one instant.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Every thread of every process of the tree.
    pub threads: Vec<ThreadSample>,
    /// Established TCP connections held by the tree (empty when not collected).
    pub connections: Vec<Connection>,
}

/// Maps an I/O error on a `/proc` path to the error the user should see.
pub fn proc_error(pid: u32, e: &std::io::Error) -> DiscoverError {
    match e.kind() {
        ErrorKind::NotFound => DiscoverError::NoSuchProcess(pid),
        ErrorKind::PermissionDenied => DiscoverError::PermissionDenied {
            pid,
            detail: e.to_string(),
        },
        _ => DiscoverError::Io(format!("/proc/{pid}: {e}")),
    }
}

/// Checks that `pid` exists and that its CPU and I/O counters are readable.
pub fn check_access(pid: u32) -> Result<(), DiscoverError> {
    let base = format!("/proc/{pid}");
    fs::read_to_string(format!("{base}/stat")).map_err(|e| proc_error(pid, &e))?;
    fs::read_to_string(format!("{base}/io")).map_err(|e| proc_error(pid, &e))?;
    Ok(())
}

/// `pid` and all its descendants: through `/proc/PID/task/TID/children` when the kernel
/// has it (cheap: only the tree is read), else through the parent IDs in `/proc/*/stat`.
pub fn process_tree(root: u32) -> BTreeSet<u32> {
    if Path::new(&format!("/proc/{root}/task/{root}/children")).exists() {
        let mut tree = BTreeSet::new();
        let mut todo = vec![root];
        while let Some(p) = todo.pop() {
            if !tree.insert(p) {
                continue;
            }
            let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
                continue;
            };
            for task in tasks.flatten() {
                if let Ok(kids) = fs::read_to_string(task.path().join("children")) {
                    todo.extend(
                        kids.split_whitespace()
                            .filter_map(|k| k.parse::<u32>().ok()),
                    );
                }
            }
        }
        return tree;
    }
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Some(stat) = read_stat(&format!("/proc/{pid}/stat")) {
                children.entry(stat.ppid).or_default().push(pid);
            }
        }
    }
    let mut tree = BTreeSet::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        if tree.insert(p) {
            if let Some(kids) = children.get(&p) {
                todo.extend(kids);
            }
        }
    }
    tree
}

/// The fields of `stat` we use.
struct Stat {
    state: char,
    ppid: u32,
    cpu: u64,
    start: u64,
    policy: u32,
}

fn read_stat(path: &str) -> Option<Stat> {
    let text = fs::read_to_string(path).ok()?;
    parse_stat(&text)
}

/// Parses `/proc/*/stat`; the name field may contain spaces and parentheses, so the
/// fields are counted from the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // f[0] is field 3 (state); field n is f[n - 3].
    let num = |n: usize| f.get(n - 3).and_then(|s| s.parse::<u64>().ok());
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: num(4)? as u32,
        cpu: num(14)? + num(15)?,
        start: num(22)?,
        policy: num(41).unwrap_or(0) as u32,
    })
}

/// The scheduling policy of a thread (0 = SCHED_OTHER, 5 = SCHED_IDLE, …), if readable.
pub fn policy(pid: u32, tid: u32) -> Option<u32> {
    read_stat(&format!("/proc/{pid}/task/{tid}/stat")).map(|s| s.policy)
}

/// The nice value of a thread (`stat` field 19), if readable. `task` is a path under
/// `/proc`: `PID/task/TID`, or `thread-self` for the calling thread.
pub fn thread_nice(task: &str) -> Option<i64> {
    let text = fs::read_to_string(format!("/proc/{task}/stat")).ok()?;
    parse_nice(&text)
}

/// Field 19 (nice) of a `stat` line, counted from the last `)` like [`parse_stat`].
fn parse_nice(text: &str) -> Option<i64> {
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(19 - 3)?.parse().ok()
}

/// A thread's precise CPU time in nanoseconds (`schedstat`, first field); falls back to
/// utime + stime when schedstat is not there. Used to measure progress in short windows,
/// where clock ticks are too coarse.
pub fn run_ns(pid: u32, tid: u32) -> Option<u64> {
    let base = format!("/proc/{pid}/task/{tid}");
    if let Some(ns) = fs::read_to_string(format!("{base}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
    {
        return Some(ns);
    }
    read_stat(&format!("{base}/stat")).map(|s| (s.cpu as f64 * 1e9 / USER_HZ) as u64)
}

/// The CPUs a thread may run on, as `Cpus_allowed_list` (e.g. `0-1`), if readable.
pub fn cpus_allowed(pid: u32, tid: u32) -> Option<String> {
    let status = fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|s| s.trim().to_string())
}

fn parse_io(text: &str) -> [u64; 4] {
    let mut v = [0u64; 4];
    for line in text.lines() {
        let Some((k, n)) = line.split_once(':') else {
            continue;
        };
        let n = n.trim().parse().unwrap_or(0);
        match k {
            "rchar" => v[0] = n,
            "wchar" => v[1] = n,
            "read_bytes" => v[2] = n,
            "write_bytes" => v[3] = n,
            _ => {}
        }
    }
    v
}

/// The process title: `argv[0]`, or the whole command line when a process rewrote it
/// into one space-separated string. Empty for kernel threads and zombies.
fn read_title(pid: u32) -> String {
    let raw = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let first = raw.split(|&b| b == 0).next().unwrap_or(&[]);
    String::from_utf8_lossy(first).trim().to_string()
}

/// Reads every thread of the given processes. Processes or threads that exit while being
/// read are skipped (they are gone; the next snapshot will not have them either).
pub fn read_threads(pids: &BTreeSet<u32>) -> Vec<ThreadSample> {
    let mut out = Vec::new();
    for &pid in pids {
        let title = read_title(pid);
        let exe = fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .unwrap_or_default();
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        let mut tids: Vec<u32> = tasks
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
            .collect();
        tids.sort_unstable();
        for tid in tids {
            let base = format!("/proc/{pid}/task/{tid}");
            let Some(stat) = read_stat(&format!("{base}/stat")) else {
                continue;
            };
            // An exited thread not yet reaped has lost its title: counting it would move
            // it out of its stage at the last moment.
            if matches!(stat.state, 'Z' | 'X' | 'x') {
                continue;
            }
            let comm = fs::read_to_string(format!("{base}/comm"))
                .map(|s| s.trim_end_matches('\n').to_string())
                .unwrap_or_default();
            let wchan = fs::read_to_string(format!("{base}/wchan"))
                .map(|s| if s == "0" { String::new() } else { s })
                .unwrap_or_default();
            let io = fs::read_to_string(format!("{base}/io"))
                .map(|t| parse_io(&t))
                .unwrap_or_default();
            let socket = fs::read_to_string(format!("{base}/syscall"))
                .ok()
                .and_then(|t| socket_fd(&t))
                .and_then(|fd| fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok())
                .and_then(|l| socket_inode(&l.to_string_lossy()));
            out.push(ThreadSample {
                pid,
                tid,
                start: stat.start,
                comm,
                title: title.clone(),
                exe: exe.clone(),
                state: stat.state,
                wchan,
                cpu: stat.cpu,
                rchar: io[0],
                wchar: io[1],
                read_bytes: io[2],
                write_bytes: io[3],
                socket,
            });
        }
    }
    out
}

/// System calls whose first argument is a file descriptor being read or written:
/// read, write, readv, writev, sendto, recvfrom, sendmsg, recvmsg.
#[cfg(target_arch = "x86_64")]
const FD_IO_SYSCALLS: &[u64] = &[0, 1, 19, 20, 44, 45, 46, 47];
#[cfg(target_arch = "aarch64")]
const FD_IO_SYSCALLS: &[u64] = &[63, 64, 65, 66, 206, 207, 211, 212];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const FD_IO_SYSCALLS: &[u64] = &[];

/// The file descriptor of a blocked read/write-like system call in `/proc/…/syscall`
/// (`NR ARG0 …`, arguments in hex).
pub fn socket_fd(syscall: &str) -> Option<u64> {
    let mut it = syscall.split_whitespace();
    let nr: u64 = it.next()?.parse().ok()?;
    if !FD_IO_SYSCALLS.contains(&nr) {
        return None;
    }
    u64::from_str_radix(it.next()?.trim_start_matches("0x"), 16).ok()
}

/// The inode of a `socket:[N]` link target.
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// Established TCP connections of the given processes with their byte counts, from
/// `ss -tinHe state established` (iproute2; socket diagnostics, no tracing). Returns an
/// error when `ss` cannot be run: network accounting needs it.
///
/// Sockets are matched to processes by inode through the tree's own `/proc/PID/fd`, not
/// with `ss -p`: `-p` walks the descriptors of every process on the machine at every
/// snapshot, which made `ss` about 85 % of the sampler's CPU time (perf, PostgreSQL under
/// pgbench) and made that cost grow with everything else running on the host.
pub fn read_connections(pids: &BTreeSet<u32>) -> Result<Vec<Connection>, DiscoverError> {
    let owners = socket_owners(pids);
    if owners.is_empty() {
        return Ok(Vec::new());
    }
    let output = std::process::Command::new("ss")
        .args(["-tinHe", "state", "established"])
        .output()
        .map_err(|e| {
            DiscoverError::Io(format!(
                "cannot run `ss` (iproute2) for socket byte counts: {e}"
            ))
        })?;
    Ok(parse_ss(&String::from_utf8_lossy(&output.stdout), &owners))
}

/// Socket inode → owning process, for the sockets open in `pids` (first owner wins when a
/// socket is shared, as after `fork`).
fn socket_owners(pids: &BTreeSet<u32>) -> BTreeMap<u64, u32> {
    let mut owners = BTreeMap::new();
    for &pid in pids {
        let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Some(inode) = fs::read_link(fd.path())
                .ok()
                .and_then(|l| socket_inode(&l.to_string_lossy()))
            {
                owners.entry(inode).or_insert(pid);
            }
        }
    }
    owners
}

/// Parses `ss -tinHe` output: a socket line (with `ino:N`) followed by an indented line
/// with `bytes_acked:` and `bytes_received:`. Keeps the sockets whose inode is in `owners`.
pub fn parse_ss(text: &str, owners: &BTreeMap<u64, u32>) -> Vec<Connection> {
    let mut out = Vec::new();
    let mut current: Option<(u64, u32)> = None;
    for line in text.lines() {
        if !line.starts_with([' ', '\t']) {
            current = field(line, "ino:").and_then(|inode| Some((inode, *owners.get(&inode)?)));
        } else if let Some((inode, pid)) = current.take() {
            let bytes = field(line, "bytes_acked:").unwrap_or(0)
                + field(line, "bytes_received:").unwrap_or(0);
            out.push(Connection { inode, pid, bytes });
        }
    }
    out
}

fn field(line: &str, name: &str) -> Option<u64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name))
        .and_then(|v| v.parse().ok())
}

/// Whether `/proc` looks like Linux procfs with per-thread I/O accounting.
pub fn procfs_available() -> bool {
    Path::new("/proc/self/task").is_dir() && Path::new("/proc/self/io").exists()
}

/// Writes a thread's name (`/proc/PID/task/TID/comm`; 15 bytes at most). Used by test
/// programs to name their threads without unsafe code.
pub fn set_thread_name(name: &str) -> std::io::Result<()> {
    fs::write("/proc/thread-self/comm", name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_from_the_last_parenthesis() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 10 0 0 0 7 5 0 0 20 0 3 0 99 0 0 \
                    0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let s = parse_stat(line).unwrap();
        assert_eq!(
            (s.state, s.ppid, s.cpu, s.start, s.policy),
            ('S', 1, 12, 99, 0)
        );
        let niced = line.replace(" 20 0 3 0 99", " 39 19 3 0 99");
        assert_eq!((parse_nice(line), parse_nice(&niced)), (Some(0), Some(19)));
        let nice = line.replace(" 20 0 3 0 99", " 0 -20 3 0 99");
        assert_eq!(parse_nice(&nice), Some(-20));
    }

    #[test]
    fn ss_lines_pair_sockets_with_their_counters() {
        let text = "0 0 127.0.0.1:1 127.0.0.1:2 ino:22070 sk:1 <->\n\
                    \t ts bytes_sent:50 bytes_acked:50 bytes_received:1000 segs_out:2\n\
                    0 0 127.0.0.1:2 127.0.0.1:1 ino:22069 sk:2 <->\n\
                    \t ts bytes_acked:9 bytes_received:1\n";
        let conns = parse_ss(text, &BTreeMap::from([(22070, 7)]));
        assert_eq!(
            conns,
            [Connection {
                inode: 22070,
                pid: 7,
                bytes: 1050
            }]
        );
    }
}
