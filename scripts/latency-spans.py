#!/usr/bin/env python3
"""Where a server's time per request goes at a moderate open-loop rate (issue 19, target 2).

Reads `perf script` output of a recording made with
    perf record -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -e sched:sched_switch -p PIDS
while a load generator sent RATE requests per second, and prints per request:
  * user µs: time in user space between one system call's return and the next one's entry,
    leaving out any stretch in which the thread was switched out (that is waiting, not work);
  * syscall µs: time inside the system calls that do not sleep (every call but epoll_wait,
    whose time is mostly the thread asleep);
  * system calls per request, by name.
Both servers are recorded the same way, so tracing's own cost (a few µs per call) is in both.

Usage: perf script -i DATA | latency-spans.py NAME RATE
"""
import collections
import re
import sys

NAMES = {0: "read", 1: "write", 20: "writev", 44: "sendto", 45: "recvfrom", 55: "getsockopt",
         232: "epoll_wait", 281: "epoll_pwait", 202: "futex"}
SLEEPING = {232, 281, 7, 202}  # epoll_wait, epoll_pwait, poll, futex: mostly asleep
LINE = re.compile(r"\s(\d+)\s+\[\d+\]\s+(\d+\.\d+):\s+(\S+):\s+(.*)")
NR = re.compile(r"NR (\d+)")


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: perf script -i DATA | latency-spans.py NAME RATE")
    name, rate = sys.argv[1], float(sys.argv[2])
    last = {}  # tid -> (event kind, time µs, syscall nr, switched out since)
    user = 0.0
    in_calls = collections.Counter()
    calls = collections.Counter()
    first_t = last_t = None
    for line in sys.stdin:
        m = LINE.search(line)
        if not m:
            continue
        tid, t, event, rest = m.group(1), float(m.group(2)) * 1e6, m.group(3), m.group(4)
        first_t = t if first_t is None else first_t
        last_t = t
        prev = last.get(tid)
        if event == "sched:sched_switch":
            if prev and rest.startswith("prev_comm=") and f"prev_pid={tid} " in rest:
                last[tid] = (prev[0], prev[1], prev[2], True)
            continue
        nr_m = NR.search(rest)
        if not nr_m:
            continue
        nr = int(nr_m.group(1))
        if event == "raw_syscalls:sys_enter":
            calls[nr] += 1
            if prev and prev[0] == "exit" and not prev[3]:
                user += t - prev[1]
            last[tid] = ("enter", t, nr, False)
        elif event == "raw_syscalls:sys_exit":
            if prev and prev[0] == "enter" and not prev[3] and nr not in SLEEPING:
                in_calls[nr] += t - prev[1]
            last[tid] = ("exit", t, nr, False)
    if first_t is None or last_t <= first_t:
        sys.exit(f"{name}: no system call events in the recording")
    n = rate * (last_t - first_t) / 1e6
    total = sum(in_calls.values())
    by_call = ", ".join(f"{NAMES.get(k, k)} {v / n:.2f}" for k, v in calls.most_common(6))
    print(f"{name}: ≈{n:.0f} requests; user {user / n:.1f} µs/req, in non-sleeping system calls "
          f"{total / n:.1f} µs/req, together {(user + total) / n:.1f}; calls per request: {by_call}")


if __name__ == "__main__":
    main()
