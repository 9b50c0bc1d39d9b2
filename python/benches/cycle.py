"""Cost of one enqueue + dequeue + complete cycle through `fairlane.Scheduler` from Python.

    python python/benches/cycle.py [cycles]

Eight backlogged tenants (ints, then strings), one worker, known costs; prints ns per cycle
for each preset, best of 5 repetitions, in CPU time (process_time: a loaded machine's waits
for a core are not counted) and in wall time.
"""

import sys
import time

import fairlane


def bench(preset: str, tenants, cycles: int, clock=time.process_time) -> float:
    s = fairlane.Scheduler(preset, workers=1)
    enq, deq, comp = s.enqueue, s.dequeue, s.complete
    for t in tenants:  # a backlog so dequeue chooses among tenants
        enq(t, 0, None, cost=1.0)
    n = len(tenants)
    now = 0.0
    t0 = clock()
    for i in range(cycles):
        enq(tenants[i % n], 0, None, cost=1.0, now=now)
        d = deq(0, now)
        now += 1.0
        comp(d.ticket, 1.0, now)
    return (clock() - t0) / cycles * 1e9


def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    ints = list(range(8))
    strs = [f"tenant-{i}" for i in range(8)]
    for preset in ["fifo", "drr", "wfq", "2dfq", "2dfqe"]:
        a = min(bench(preset, ints, cycles) for _ in range(5))
        b = min(bench(preset, strs, cycles) for _ in range(5))
        w = min(bench(preset, ints, cycles, time.perf_counter) for _ in range(5))
        print(f"{preset:6} CPU: int tenants {a:6.0f} ns/cycle, str tenants {b:6.0f} ns/cycle;"
              f"  wall (int): {w:6.0f} ns/cycle")


if __name__ == "__main__":
    main()
