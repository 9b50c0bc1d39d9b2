"""Type stubs of the native module (PyO3). Use the names re-exported by ``fairlane``."""

from typing import Any, Optional, Sequence, Tuple, Union

Name = Union[int, str]

#: The default cap on one run's events (``--max-events``).
DEFAULT_MAX_EVENTS: int

class Dispatch:
    """A request handed to a worker by :meth:`Scheduler.dequeue`."""

    #: Report :meth:`Scheduler.progress` and :meth:`Scheduler.complete` with this.
    ticket: int
    #: The tenant, as it was given to ``enqueue`` (int or str).
    tenant: Name
    #: The class (API), as it was given (int or str; 0 when not given).
    cls: Name
    #: The payload given to ``enqueue``.
    payload: Any
    #: The known cost, or ``None`` when the scheduler estimated it.
    cost: Optional[float]
    #: What the tenant was charged up front (known cost or estimate); retroactive
    #: charging reconciles it with the cost reported to ``complete``.
    charged: float

class Scheduler:
    """A fair scheduler behind fairlane's seam: ``enqueue → dequeue(worker) → progress* →
    complete``. The scheduler never reads a clock: every call takes ``now`` in your time
    unit, and costs are in your cost unit.

    Args:
        preset: ``fifo``, ``drr``, ``sfq``, ``wfq``, ``wf2q``, ``2dfq`` (known costs),
            ``wfqe``, ``wf2qe``, ``2dfqe``, ``drre`` (estimated costs), ``minsfq``, ``fsfq``,
            ``rw``, ``edf`` (interposed, ``workers`` = depth D); see :func:`presets`.
        workers: number of workers (threads, issue slots); 2DFQ staggers by it.
        gps_capacity: use the exact GPS virtual time of a fluid server of this capacity
            (workers × rate; known costs only) instead of the preset's clock.
        default_weight: weight of tenants never given one (default 1).

    Tenants and classes are ints or strings. Strings get ids in order of first use (ties
    between equal tags go to the earlier name). Errors from the core raise ``ValueError``.
    """

    def __init__(
        self,
        preset: str,
        workers: int = 1,
        *,
        gps_capacity: Optional[float] = None,
        default_weight: Optional[float] = None,
    ) -> None: ...
    @property
    def name(self) -> str:
        """The algorithm's short name (``"2dfq"``, …)."""
    @property
    def workers(self) -> int:
        """Number of workers."""
    def set_workers(self, workers: int) -> None:
        """Change the number of workers (2DFQ re-staggers; running requests unaffected)."""
    def enqueue(
        self,
        tenant: Name,
        cls: Optional[Name] = None,
        payload: Any = None,
        *,
        cost: Optional[float] = None,
        now: float = 0.0,
    ) -> int:
        """Queue a request; ``cost`` when known up front, else the estimator's. Returns
        its ticket."""
    def dequeue(self, worker: int, now: float = 0.0) -> Union[Dispatch, None, float]:
        """What ``worker`` runs next: a :class:`Dispatch`, ``None`` when nothing is queued,
        or a float: ask again at that time (schedulers that idle on purpose)."""
    def progress(self, ticket: int, used: float, now: float = 0.0) -> None:
        """Report a running request's cumulative usage so far (refresh charging)."""
    def complete(self, ticket: int, used: float, now: float = 0.0) -> None:
        """Report that a request finished having used ``used`` (retroactive charging)."""
    def cancel(self, ticket: int, now: float = 0.0) -> Any:
        """Remove a queued request; returns its payload."""
    def set_weight(self, tenant: Name, weight: float, now: float = 0.0) -> None:
        """Set a tenant's weight φ."""
    def set_target(self, tenant: Name, target: Optional[float], now: float = 0.0) -> None:
        """Set a tenant's response-time target (EDF); ``None`` for none."""
    def remove_tenant(self, tenant: Name) -> None:
        """Forget a tenant with nothing queued or running."""
    def tenant(self, tenant: Name) -> Optional[dict]:
        """``{"weight", "queued", "running", "active", "tag"}``, or ``None`` if unknown."""
    @property
    def queued(self) -> int:
        """Requests queued over all tenants."""
    @property
    def running(self) -> int:
        """Requests running over all tenants."""
    @property
    def virtual_time(self) -> Optional[float]:
        """The system virtual time, for schedulers that keep one."""

def presets() -> list[str]:
    """The preset names :class:`Scheduler` accepts."""

def run_spec(
    text: str,
    file: str,
    dir: str,
    overrides: Sequence[Tuple[str, Any]],
    jobs: int,
    max_events: int,
    point: Optional[int] = None,
) -> str:
    """Run a spec (all points, or one); JSON text with the CLI's summary and the series."""

def count_points(text: str, file: str, dir: str, overrides: Sequence[Tuple[str, Any]]) -> int:
    """How many points (sweep points, suite runs; 1 otherwise) a spec has."""

def dict_to_toml(spec: dict) -> str:
    """A spec dict as TOML text."""

def tam_check(path: str) -> Tuple[str, str, str]:
    """``(model name, Table 2 row, report JSON)``."""

def tam_draw(path: str, highlight: bool = True) -> str:
    """The model's diagram as SVG."""

def tam_catalog() -> list[str]:
    """Names of the catalog's models."""
