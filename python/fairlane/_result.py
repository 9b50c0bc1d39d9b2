"""`simulate` and its result: the CLI's numbers as pandas DataFrames, and plots."""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

import numpy as np
import pandas as pd

from . import _fairlane
from ._spec import SpecLike, overrides, source

#: Per-tenant columns that come before the metrics.
KEY_COLUMNS = ["point", "scheduler", "tenant"]
#: Run-level fields that depend on the wall clock (kept out of the per-tenant table).
WALL_CLOCK = ("wall_seconds", "events_per_second")


class SimulationResult:
    """What :func:`simulate` returns.

    Attributes:
        tenants: one row per point × scheduler × tenant, the numbers of
            ``fairlane simulate --json`` (tenants in spec order).
        runs: one row per point × scheduler: events, utilization, mean Gini, wall time, ….
        series: the time series in long form: ``point, scheduler, series, tenant, t, value``
            where ``series`` is ``service`` (units/s), ``lag`` (s), ``gini`` (tenant empty)
            and, for a black box, ``response``, ``throughput`` and ``depth``.
        summary: the ``--json`` object itself (a dict).
    """

    def __init__(self, payload: Mapping[str, Any], name: str = "") -> None:
        self.name = name
        self.summary: dict = payload["summary"]
        runs = self.summary["runs"]
        rows, run_rows, series = [], [], []
        for run, order in zip(runs, payload["order"]):
            key = {"point": run["label"], "scheduler": run["scheduler"]}
            for t in order:
                rows.append({**key, "tenant": t, **run["tenants"][t]})
            r = {**key}
            for k, v in run.items():
                if k in ("tenants", "label"):
                    continue
                if isinstance(v, dict):
                    r.update({f"{k}_{kk}": vv for kk, vv in v.items()})
                else:
                    r[k] = v
            run_rows.append(r)
        for run, s in zip(runs, payload["series"]):
            series.extend((run["label"], run["scheduler"], *row) for row in s)
        self.tenants = _frame(rows, KEY_COLUMNS)
        self.runs = _frame(run_rows, ["point", "scheduler"])
        self.series = pd.DataFrame(
            series, columns=["point", "scheduler", "series", "tenant", "t", "value"]
        ).astype({"t": float, "value": float})
        self._occupancy = {
            (run["label"], run["scheduler"]): occ
            for run, occ in zip(runs, payload["occupancy"])
        }
        self.plot = Plotter(self)

    @property
    def points(self) -> list[str]:
        """Point labels in order (``[""]`` for a spec without sweep or suite)."""
        return list(dict.fromkeys(r["label"] for r in self.summary["runs"]))

    @property
    def schedulers(self) -> list[str]:
        """Scheduler names in spec order."""
        return list(dict.fromkeys(r["scheduler"] for r in self.summary["runs"]))

    def occupancy(self, scheduler: str, point: str = "") -> tuple[float, float, np.ndarray]:
        """``(t0, dt, cells)``: the cost each worker ran at each sampled instant
        (``cells[worker, column]``, NaN when idle)."""
        occ = self._occupancy[(point, scheduler)]
        cells = np.array(
            [[np.nan if c is None else c for c in row] for row in occ["cells"]], dtype=float
        )
        return occ["t0"], occ["dt"], cells

    def __repr__(self) -> str:
        return (
            f"SimulationResult({self.name!r}: {len(self.points)} point(s) × "
            f"{len(self.schedulers)} scheduler(s), {len(self.tenants)} tenant rows)"
        )


def _frame(rows: list[dict], first: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=first)
    rest = [c for c in df.columns if c not in first]
    return df[first + rest]


def simulate(
    spec: SpecLike,
    *,
    seed: int | None = None,
    duration: float | None = None,
    set: Mapping[str, Any] | None = None,
    jobs: int | None = None,
    max_events: int = _fairlane.DEFAULT_MAX_EVENTS,
) -> SimulationResult:
    """Run a spec under each of its schedulers, like ``fairlane simulate SPEC --json``.

    Args:
        spec: a path to a TOML spec, TOML text, or a dict of the same structure.
        seed: override the spec's seed (``--seed``).
        duration: override the simulated seconds (``--duration``).
        set: more overrides, field path → value (``{"tenant.small.count": 50}``), applied
            after ``seed`` and ``duration``.
        jobs: runs in parallel (default: the number of cores).
        max_events: cap on one run's events (``--max-events``).

    Raises:
        SpecError: the spec is wrong (names the file and field).
        SimulationError: a run failed or was refused.
    """
    src = source(spec)
    jobs = jobs or os.cpu_count() or 1
    text = _fairlane.run_spec(
        src.text, src.file, src.dir, overrides(seed, duration, set), jobs, max_events
    )
    payload = json.loads(text)
    return SimulationResult(payload, name=payload["name"])


class Plotter:
    """Matplotlib figures of a result, after the HTML report's charts.

    ``result.plot()`` draws the service lag of the tracked tenants; ``result.plot.lag()``,
    ``.latency_cdf()`` and ``.occupancy()`` draw one figure each. Each returns the Axes.
    """

    def __init__(self, result: SimulationResult) -> None:
        self._r = result

    def __call__(self, kind: str = "lag", **kw: Any):
        """Draw ``kind``: ``"lag"``, ``"latency_cdf"`` or ``"occupancy"``."""
        if kind not in ("lag", "latency_cdf", "occupancy"):
            raise ValueError(f"kind must be lag, latency_cdf or occupancy, not {kind!r}")
        return getattr(self, kind)(**kw)

    def _point(self, point: str | None) -> str:
        return self._r.points[0] if point is None else point

    def lag(self, tenant: str | None = None, point: str | None = None, ax=None):
        """Service lag against GPS over time, one line per scheduler and tracked tenant."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(8, 4))[1]
        p = self._point(point)
        s = self._r.series
        s = s[(s["series"] == "lag") & (s["point"] == p)]
        if tenant is not None:
            s = s[s["tenant"] == tenant]
        for (sched, t), g in s.groupby(["scheduler", "tenant"], sort=False):
            ax.plot(g["t"], g["value"], label=f"{t} ({sched})")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("lag (s of one worker)")
        ax.set_title("Service lag against GPS (positive: behind)")
        if len(s):
            ax.legend(fontsize="small")
        return ax

    def latency_cdf(self, column: str = "latency_p99", point: str | None = None, ax=None):
        """The CDF across tenants of a per-tenant metric (p99 latency by default; also
        ``lag_std`` for the report's lag-σ CDF), one line per scheduler, log x."""
        import matplotlib.pyplot as plt

        ax = ax or plt.subplots(figsize=(6, 4))[1]
        p = self._point(point)
        df = self._r.tenants
        df = df[df["point"] == p]
        for sched, g in df.groupby("scheduler", sort=False):
            x = np.sort(g[column].dropna().to_numpy(dtype=float))
            x = x[x > 0]
            if len(x):
                ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=sched)
        ax.set_xscale("log")
        ax.set_xlabel(f"{column} (s)")
        ax.set_ylabel("fraction of tenants")
        ax.set_ylim(0, 1)
        ax.legend()
        return ax

    def occupancy(self, scheduler: str | None = None, point: str | None = None, ax=None):
        """Thread occupancy: one row per worker, coloured by the running request's cost."""
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm

        ax = ax or plt.subplots(figsize=(8, 3))[1]
        scheduler = scheduler or self._r.schedulers[0]
        t0, dt, cells = self._r.occupancy(scheduler, self._point(point))
        finite = cells[np.isfinite(cells) & (cells > 0)]
        norm = LogNorm(finite.min(), finite.max()) if finite.size else None
        if cells.size:
            im = ax.imshow(
                np.ma.masked_invalid(cells),
                aspect="auto",
                interpolation="nearest",
                extent=(t0, t0 + dt * cells.shape[1], cells.shape[0] - 0.5, -0.5),
                norm=norm,
            )
            ax.figure.colorbar(im, ax=ax, label="request cost (units)")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("worker")
        ax.set_title(f"Thread occupancy under {scheduler}")
        return ax
