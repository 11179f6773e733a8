"""Live progress on stderr (rich): elapsed time, client ops ok/fail/info and the
faults currently active. Off when stderr is not a terminal or output is --json."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from checkers.history.recorder import Recorder


class Progress:
    def __init__(self, rec: Recorder, title: str, time_limit: float, enabled: bool | None = None) -> None:
        self.rec = rec
        self.title = title
        self.time_limit = time_limit
        self.phase = "setup"
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    def restart_clock(self) -> None:
        """Elapsed time counts from the first operation, like --time-limit."""
        self._t0 = time.monotonic()

    def render(self) -> Table:
        c = self.rec.counts
        t = Table.grid(padding=(0, 2))
        el = time.monotonic() - self._t0
        faults = ", ".join(sorted(self.rec.active_faults)) or "none"
        t.add_row(
            f"[bold]{self.title}[/]",
            f"{self.phase}",
            f"{el:6.1f}s / {self.time_limit:g}s",
            f"[green]ok {c['ok']}[/]",
            f"[red]fail {c['fail']}[/]",
            f"[yellow]info {c['info']}[/]",
            f"faults: [magenta]{faults}[/]",
        )
        return t

    def _loop(self) -> None:
        console = Console(stderr=True)
        with Live(self.render(), console=console, refresh_per_second=2, transient=False) as live:
            while not self._stop.wait(0.5):
                live.update(self.render())
            live.update(self.render())

    def start(self) -> None:
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, name="progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def __enter__(self) -> "Progress":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
