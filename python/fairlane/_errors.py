"""The errors fairlane raises."""

from __future__ import annotations


class SpecError(ValueError):
    """A spec (or model) is wrong: which file, which field, and what is allowed.

    ``str(e)`` reads ``FILE: FIELD: MESSAGE`` like the CLI's errors. Picklable, so it comes
    back intact from a Dask worker.
    """

    def __init__(self, file: str, field: str, message: str) -> None:
        super().__init__(file, field, message)
        self.file = file
        self.field = field
        self.message = message

    def __str__(self) -> str:
        if self.field:
            return f"{self.file}: {self.field}: {self.message}"
        return f"{self.file}: {self.message}"


class SimulationError(RuntimeError):
    """A run failed or was refused (e.g. it would exceed ``max_events``)."""


class SweepError(RuntimeError):
    """A run of a sweep failed; ``point`` names the grid point, ``__cause__`` is the error."""

    def __init__(self, message: str, point: dict | None = None) -> None:
        super().__init__(message)
        self.point = point or {}
