"""Branch coverage of the reference implementation's core in one run, a
signal for ``kraftwerk explore --signal branches``: which ways through the
protocol's code a schedule drove, beside the protocol states its traces
name (``harness.search.explore.states``).

A branch is an arc as coverage.py counts them in branch mode: a pair of
consecutive lines executed in one frame of a function of
``reference_impl/core`` (entry and exit written as the negated first line
of the function). The tracer is ``sys.settrace`` restricted to the core's
files: a frame elsewhere gets no local tracer, so the rest of the run pays
one call per function entry only. Python 3.11 has no ``sys.monitoring``,
and coverage.py is not a dependency of the project.

The compiled accelerator (``reference_impl.accel``, mypyc) runs the core as
C extensions, whose lines no Python tracer sees: a run measured this way
must be pure Python (``KRAFTWERK_PURE=1`` in the worker processes before
they import the core; ``kraftwerk explore`` sets it for this signal and
says so).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Callable

import reference_impl

#: the directory whose functions are traced (found without importing the
#: core, so this module does not load it compiled)
CORE = str(Path(reference_impl.__file__).resolve().parent / "core")

Tracer = Callable[[FrameType, str, Any], Any]


class Arcs:
    """A context in which every frame of a function under ``root`` (the
    core, by default) records its line-to-line arcs; :meth:`names` lists
    them as ``branch <file>:<from>><to>``, the file relative to ``root``'s
    parent's parent (``reference_impl/core/...`` for the core)."""

    def __init__(self, root: str = CORE) -> None:
        self.root = str(Path(root).resolve()) + os.sep
        self.base = str(Path(root).resolve().parent.parent) + os.sep
        self.arcs: set[tuple[CodeType, int, int]] = set()
        self._mine: dict[CodeType, bool] = {}
        self._previous: Tracer | None = None

    def _global(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        code = frame.f_code
        mine = self._mine.get(code)
        if mine is None:
            mine = self._mine[code] = code.co_filename.startswith(self.root)
        if not mine:
            return None
        arcs = self.arcs
        last = -code.co_firstlineno

        def local(frame: FrameType, event: str, arg: Any) -> Tracer:
            nonlocal last
            if event == "line":
                arcs.add((code, last, frame.f_lineno))
                last = frame.f_lineno
            elif event == "return":
                arcs.add((code, last, -code.co_firstlineno))
            return local

        return local

    def __enter__(self) -> "Arcs":
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.settrace(self._previous)

    def names(self) -> set[str]:
        out = set()
        for code, a, b in self.arcs:
            f = code.co_filename
            rel = f[len(self.base):] if f.startswith(self.base) else f
            out.add(f"branch {rel}:{a}>{b}")
        return out
