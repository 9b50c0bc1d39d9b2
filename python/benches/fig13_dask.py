"""The Fig. 13 suite as a sweep on a LocalCluster of 1 worker, then 2, back to back,
alternating; prints each wall time and the speed-up.

    python python/benches/fig13_dask.py [runs] [duration] [rounds]

Each suite run (a random production-like workload, three schedulers) is one Dask task.
The same DataFrame comes back from every cluster (checked).
"""

import pathlib
import sys
import time

import pandas as pd
from distributed import Client, LocalCluster

import fairlane

ROOT = pathlib.Path(__file__).resolve().parents[2]
SPEC = ROOT / "experiments" / "2dfq-fig13-suite.toml"


def timed(workers: int, runs: int, duration: float):
    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        client.run(lambda: __import__("fairlane"))  # warm the workers' imports
        t0 = time.perf_counter()
        df = fairlane.sweep(
            SPEC, client=client, duration=duration, set={"suite.runs": runs, "warmup": min(5.0, duration / 2)}, progress=False
        )
        return time.perf_counter() - t0, df


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    duration = float(sys.argv[2]) if len(sys.argv) > 2 else 6.0
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    one, two, ref = [], [], None
    for r in range(rounds):
        for w, acc in ((1, one), (2, two)) if r % 2 == 0 else ((2, two), (1, one)):
            secs, df = timed(w, runs, duration)
            if ref is None:
                ref = df
            pd.testing.assert_frame_equal(df, ref)
            acc.append(secs)
            print(f"round {r}: {w} worker(s): {secs:.2f} s", flush=True)
    print(f"suite runs={runs} duration={duration}s: 1 worker {min(one):.2f} s, "
          f"2 workers {min(two):.2f} s (best of {rounds}), speed-up {min(one) / min(two):.2f}x")


if __name__ == "__main__":
    main()
