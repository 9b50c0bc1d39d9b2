"""fairlane: multi-tenant fair scheduling (2DFQ, interposed SFQ(D), LDF reservations, Thread
Architecture Models) from Python.

- :func:`simulate` runs a spec like ``fairlane simulate --json`` and gives DataFrames;
- :func:`sweep` runs a grid of spec variants locally or on a Dask cluster;
- :class:`Scheduler` is the scheduling seam (enqueue/dequeue/complete) for Python executors;
- :mod:`fairlane.tam` analyses and draws Thread Architecture Models.
"""

from . import tam
from ._errors import SimulationError, SpecError, SweepError
from ._fairlane import DEFAULT_MAX_EVENTS, Dispatch, Scheduler, presets
from ._result import SimulationResult, simulate
from ._sweep import sweep

__all__ = [
    "DEFAULT_MAX_EVENTS",
    "Dispatch",
    "Scheduler",
    "SimulationError",
    "SimulationResult",
    "SpecError",
    "SweepError",
    "presets",
    "simulate",
    "sweep",
    "tam",
]
__version__ = "0.1.0"
