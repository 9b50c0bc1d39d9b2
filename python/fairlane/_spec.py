"""Turning what the user passed (a path, TOML text or a dict) into spec text and a name."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping, Union

from . import _fairlane
from ._errors import SpecError

SpecLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]


@dataclass(frozen=True)
class SpecSource:
    """Spec text with the name errors use (``file``) and the directory traces start from."""

    text: str
    file: str
    dir: str


def _looks_like_path(s: str) -> bool:
    # TOML text has a newline or an `=`; a path has neither, or exists.
    return os.path.exists(s) or ("\n" not in s and "=" not in s)


def source(spec: SpecLike) -> SpecSource:
    """Read a spec given as a path, TOML text or a dict."""
    if isinstance(spec, Mapping):
        return SpecSource(_fairlane.dict_to_toml(dict(spec)), "<dict>", os.getcwd())
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and _looks_like_path(spec)):
        path = os.fspath(spec)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise SpecError(path, "", f"cannot read: {e.strerror or e}") from None
        return SpecSource(text, path, os.path.dirname(path))
    if isinstance(spec, str):
        return SpecSource(spec, "<string>", os.getcwd())
    raise TypeError(f"a spec is a path, TOML text or a dict, not {type(spec).__name__}")


def overrides(seed: int | None, duration: float | None, extra: Mapping[str, Any] | None):
    """The ``(field path, value)`` list the native side applies, in this order."""
    out: list[tuple[str, Any]] = []
    if seed is not None:
        out.append(("seed", int(seed)))
    if duration is not None:
        out.append(("duration", float(duration)))
    for k, v in (extra or {}).items():
        out.append((str(k), v))
    return out
