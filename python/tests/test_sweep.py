"""`sweep`: local processes and a Dask LocalCluster give the same DataFrame; a failing run
or Ctrl-C gives a clear error and leaves no worker behind."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pandas as pd
import psutil
import pytest

import fairlane

GRID = {"seed": [1, 2], "tenant.large.weight": [1.0, 4.0]}


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, Client(cluster) as c:
        yield c


def test_local_sweep_is_the_simulations_stacked(small_spec):
    df = fairlane.sweep(small_spec, GRID, progress=False)
    # 4 combinations × 2 points × 3 schedulers × 4 tenants, grid columns first.
    assert len(df) == 4 * 2 * 3 * 4
    assert list(df.columns[:5]) == ["seed", "tenant.large.weight", "point", "scheduler", "tenant"]
    for (seed, w), got in df.groupby(["seed", "tenant.large.weight"], sort=False):
        want = fairlane.simulate(small_spec, seed=seed, set={"tenant.large.weight": w}).tenants
        got = got.drop(columns=list(GRID)).reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)


def test_local_cluster_sweep_identical_to_local(small_spec, client):
    seen = []
    local = fairlane.sweep(small_spec, GRID, progress=False)
    dask = fairlane.sweep(small_spec, GRID, client=client, progress=lambda d, n: seen.append((d, n)))
    pd.testing.assert_frame_equal(dask, local, check_exact=True)
    assert seen[-1] == (8, 8) and len(seen) == 8
    # The work really ran on the cluster's two workers.
    assert len(client.scheduler_info()["workers"]) == 2


def test_bad_variant_is_a_spec_error_before_anything_runs(small_spec, client):
    with pytest.raises(fairlane.SpecError) as e:
        fairlane.sweep(small_spec, {"server.workers": [2, 0]}, client=client, progress=False)
    assert e.value.field == "server.workers" and e.value.file == str(small_spec)


@pytest.mark.parametrize("where", ["local", "dask"])
def test_failing_run_names_the_point_and_workers_recover(small_spec, client, where):
    c = client if where == "dask" else None
    # A run estimated to need more than max_events is refused inside the worker.
    grid = {"duration": [1.0, 1.0e7]}
    with pytest.raises(fairlane.SweepError) as e:
        fairlane.sweep(small_spec, grid, client=c, max_events=10_000_000, progress=False)
    assert e.value.point == {"duration": 1.0e7}
    assert "duration=10000000.0" in str(e.value)
    assert isinstance(e.value.__cause__, fairlane.SimulationError)
    # Nothing is left running: the next sweep runs at once on the same workers.
    again = fairlane.sweep(small_spec, {"seed": [3]}, client=c, progress=False)
    assert len(again) == 2 * 3 * 4
    if c is None:
        assert not pool_workers(), "the failed sweep left worker processes running"


def pool_workers():
    """Live processes forked by this process's multiprocessing forkserver."""
    out = []
    for fs in psutil.Process().children():
        try:
            if "forkserver" in " ".join(fs.cmdline()):
                out += [w for w in fs.children() if w.status() != psutil.STATUS_ZOMBIE]
        except psutil.NoSuchProcess:
            pass
    return out


CTRL_C = textwrap.dedent(
    """
    import sys, fairlane
    print("ready", flush=True)
    # Long runs: 40 points of a backlogged spec, two worker processes.
    fairlane.sweep(sys.argv[1], {"seed": list(range(40))}, duration=2000.0, processes=2)
    """
)


def start_ready(script, spec):
    """Run `script` on `spec` in a child Python; return it and its psutil handle once it has
    printed "ready"."""
    p = subprocess.Popen(
        [sys.executable, "-c", script, str(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert p.stdout.readline().strip() == "ready"
    return p, psutil.Process(p.pid)


def test_ctrl_c_stops_the_local_workers(small_spec):
    p, proc = start_ready(CTRL_C, small_spec)
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and len(workers) < 2:
        # The pool's workers are forked from the forkserver: grandchildren.
        workers = [c for c in proc.children(recursive=True) if c.ppid() != p.pid]
        time.sleep(0.2)
    assert len(workers) >= 2, "the sweep did not start its workers"
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode != 0 and "KeyboardInterrupt" in err
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers left running: {alive}"


CTRL_C_DASK = textwrap.dedent(
    """
    import sys, fairlane
    from distributed import Client, LocalCluster
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, \\
            Client(cluster) as client:
        print("ready", flush=True)
        fairlane.sweep(sys.argv[1], {"seed": list(range(40))}, client=client, duration=2000.0)
    """
)


def test_ctrl_c_on_a_dask_sweep_leaves_no_worker(small_spec):
    p, proc = start_ready(CTRL_C_DASK, small_spec)
    time.sleep(3.0)  # tasks are running on both workers
    workers = proc.children(recursive=True)
    assert len(workers) >= 2, "the cluster did not start its workers"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "KeyboardInterrupt" in err
    _, alive = psutil.wait_procs(workers, timeout=30)
    assert not alive, f"cluster processes left running: {alive}"
