"""`sweep`: a grid of spec variants, one task per point, run locally or on a Dask cluster."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import signal
import sys
import uuid
from typing import Any, Callable, Mapping, Sequence, Union

import pandas as pd

from . import _fairlane
from ._errors import SweepError
from ._result import SimulationResult
from ._spec import SpecLike, overrides, source

Progress = Union[bool, Callable[[int, int], None]]


def _task(text: str, file: str, dir: str, ovr: list, point: int, max_events: int) -> str:
    """One point of one spec variant, as the native JSON (runs in a worker)."""
    return _fairlane.run_spec(text, file, dir, ovr, 1, max_events, point)


def _quiet_worker() -> None:
    # Ctrl-C reaches the whole process group; the parent decides what to stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


class _Bar:
    """Runs done of all, on stderr (or a callback)."""

    def __init__(self, progress: Progress, name: str, total: int) -> None:
        self.cb = progress if callable(progress) else None
        self.show = progress is True
        self.name, self.total, self.done = name, total, 0

    def step(self) -> None:
        self.done += 1
        if self.cb:
            self.cb(self.done, self.total)
        elif self.show:
            end = "\n" if self.done == self.total else ""
            print(f"\rsweep {self.name}: {self.done}/{self.total} runs", end=end,
                  file=sys.stderr, flush=True)


def sweep(
    spec: SpecLike,
    grid: Mapping[str, Sequence[Any]] | None = None,
    client: Any = None,
    *,
    seed: int | None = None,
    duration: float | None = None,
    set: Mapping[str, Any] | None = None,
    processes: int | None = None,
    max_events: int = _fairlane.DEFAULT_MAX_EVENTS,
    progress: Progress = True,
) -> pd.DataFrame:
    """Run every combination of ``grid`` (field path → list of values, as ``[[sweep]]``
    sets them) and return one per-tenant DataFrame.

    Each combination is a spec variant; each of its points (its own ``[[sweep]]`` points or
    ``[suite]`` runs, or the spec itself) is one task. With ``client=None`` tasks run in
    local processes (``processes``, default: the cores); with a
    ``dask.distributed.Client`` each is one task on that cluster. Rows come in grid order,
    then point, scheduler and tenant order, whatever order tasks finished in, so the same
    grid and seeds give the same DataFrame either way. Wall-clock fields are left out.

    Columns: one per grid path, then ``point, scheduler, tenant`` and the metrics of
    :attr:`SimulationResult.tenants`.

    Raises:
        SpecError: a variant is wrong (checked for every variant before anything runs).
        SweepError: a run failed; names the grid point, the cause is chained. Remaining
            tasks are cancelled.
        KeyboardInterrupt: on Ctrl-C, after stopping the local worker processes (or
            cancelling the cluster's tasks).
    """
    src = source(spec)
    grid = dict(grid or {})
    for k, v in grid.items():
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise TypeError(f"grid[{k!r}] must be a list of values")
    base = overrides(seed, duration, set)
    combos = [dict(zip(grid, vals)) for vals in itertools.product(*grid.values())]
    tasks: list[tuple[int, list, int]] = []
    for ci, combo in enumerate(combos):
        ovr = base + list(combo.items())
        n = _fairlane.count_points(src.text, src.file, src.dir, ovr)
        tasks.extend((ci, ovr, p) for p in range(n))
    args = [(src.text, src.file, src.dir, ovr, p, max_events) for _, ovr, p in tasks]
    bar = _Bar(progress, os.path.basename(src.file), len(tasks))
    if client is None:
        outs = _run_local(args, processes, bar, lambda i: combos[tasks[i][0]])
    else:
        outs = _run_dask(client, args, bar, lambda i: combos[tasks[i][0]])
    frames = []
    for (ci, _, _), text in zip(tasks, outs):
        df = SimulationResult(json.loads(text)).tenants
        for j, (k, v) in enumerate(combos[ci].items()):
            df.insert(j, k, [v] * len(df))
        frames.append(df)
    if not frames:
        return pd.DataFrame()
    return pd.concat(frames, ignore_index=True)


def _fail(e: BaseException, point: dict) -> SweepError:
    where = ", ".join(f"{k}={v!r}" for k, v in point.items()) or "the spec"
    return SweepError(f"a run failed at {where}: {e}", point)


def _run_local(args: list, processes: int | None, bar: _Bar, point_of) -> list[str]:
    n = processes or os.cpu_count() or 1
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["fairlane"])
    pool = ctx.Pool(min(n, max(len(args), 1)), initializer=_quiet_worker)
    try:
        pending = {i: pool.apply_async(_task, a) for i, a in enumerate(args)}
        outs: list[str | None] = [None] * len(args)
        while pending:
            for i in list(pending):
                r = pending[i]
                # A short wait keeps the main thread responsive to Ctrl-C.
                r.wait(0.05)
                if not r.ready():
                    continue
                del pending[i]
                try:
                    outs[i] = r.get()
                except Exception as e:
                    raise _fail(e, point_of(i)) from e
                bar.step()
        pool.close()
        return outs  # type: ignore[return-value]
    except BaseException:
        # Failure or Ctrl-C: stop every worker now rather than letting queued runs go on.
        pool.terminate()
        raise
    finally:
        pool.join()


def _run_dask(client: Any, args: list, bar: _Bar, point_of) -> list[str]:
    from distributed import as_completed

    token = uuid.uuid4().hex[:12]
    futs = [
        client.submit(_task, *a, key=f"fairlane-sweep-{token}-{i}", pure=False, retries=0)
        for i, a in enumerate(args)
    ]
    index = {f.key: i for i, f in enumerate(futs)}
    outs: list[str | None] = [None] * len(args)
    try:
        for f in as_completed(futs):
            i = index[f.key]
            try:
                outs[i] = f.result()
            except Exception as e:
                raise _fail(e, point_of(i)) from e
            bar.step()
        return outs  # type: ignore[return-value]
    except BaseException:
        client.cancel(futs)
        raise
