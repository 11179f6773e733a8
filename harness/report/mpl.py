"""matplotlib and networkx, imported when a figure is first drawn.

Importing pyplot costs more than half a second, and most commands never
draw: a flag refused in one line, ``kraftwerk node`` on every restart,
``--help``. So the report modules hold these deferred handles instead of
the modules; the first attribute read imports the module (pyplot on the
Agg backend, which draws to files with no display) and every later read
goes straight to it.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class Deferred:
    """A module imported on its first attribute read."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def _load(self) -> ModuleType:
        if self._module is None:
            if self._name.startswith("matplotlib"):
                import matplotlib  # late: matplotlib (0.5 s), for a report's plots only

                matplotlib.use("Agg")  # before pyplot chooses a backend
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._load(), attr)


plt: Any = Deferred("matplotlib.pyplot")
patches: Any = Deferred("matplotlib.patches")
colors: Any = Deferred("matplotlib.colors")
nx: Any = Deferred("networkx")
transforms: Any = Deferred("matplotlib.transforms")
