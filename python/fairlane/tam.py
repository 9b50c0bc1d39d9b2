"""Thread Architecture Models (Yang et al., OSDI '18): the five-problem analysis and
diagrams. A ``path`` is a model file, or the name of a catalog model (``"hbase"``, …)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import List, Union

from . import _fairlane

PathLike = Union[str, "os.PathLike[str]"]

#: Table 2's column letters, in order.
LETTERS = {
    "no_scheduling": "N",
    "unknown_resource_usage": "U",
    "hidden_contention": "C",
    "blocking": "B",
    "ordering_constraint": "O",
}


@dataclass(frozen=True)
class Problem:
    """One witness of one of the five predicates (§3)."""

    #: ``no_scheduling``, ``unknown_resource_usage``, ``hidden_contention``, ``blocking``
    #: or ``ordering_constraint``.
    kind: str
    #: The stages involved (for blocking: the blocked stage first).
    stages: List[str]
    #: The resources involved (``cpu``, ``memory``, ``io``, ``network``).
    resources: List[str]
    #: Why this hinders scheduling.
    explanation: str
    #: The remedy the paper proposes.
    remedy: str

    @property
    def letter(self) -> str:
        """The Table 2 column letter (N, U, C, B, O)."""
        return LETTERS[self.kind]


@dataclass(frozen=True)
class Report:
    """The analysis of one model."""

    #: The model's name.
    model: str
    #: Its Table 2 row, e.g. ``"N U C B O"`` or ``". U C B ."``.
    table2_row: str
    #: Every finding, in Table 2 order, then stage order.
    problems: List[Problem] = field(default_factory=list)

    @property
    def kinds(self) -> set:
        """The problem kinds found."""
        return {p.kind for p in self.problems}

    @property
    def clean(self) -> bool:
        """Whether none of the five problems was found."""
        return not self.problems


def check(path: PathLike) -> Report:
    """Run the five-problem analysis on a model (``fairlane tam check``).

    Raises:
        SpecError: the file cannot be read or the model is invalid (file and field named).
    """
    name, row, text = _fairlane.tam_check(os.fspath(path))
    problems = [
        Problem(p["kind"], list(p["stages"]), list(p["resources"]), p["explanation"], p["remedy"])
        for p in json.loads(text)["problems"]
    ]
    return Report(name, row, problems)


class SVG(str):
    """SVG text that Jupyter displays inline."""

    def _repr_svg_(self) -> str:
        return str(self)


def draw(path: PathLike, highlight: bool = True) -> SVG:
    """The model's Thread Architecture Diagram as SVG text (the findings marked unless
    ``highlight=False``); a notebook shows it inline."""
    return SVG(_fairlane.tam_draw(os.fspath(path), highlight))


def catalog() -> List[str]:
    """The names of the shipped models (HBase, MongoDB, Cassandra, Riak, …), Table 2 order."""
    return list(_fairlane.tam_catalog())
