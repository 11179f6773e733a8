"""The cluster contract's ``after`` on real hosts: a fault's follow-up step
on a timer thread, cancelled when the cluster is torn down."""

from __future__ import annotations

import threading
from typing import Callable


class Timers:
    def __init__(self) -> None:
        self._timers: list[threading.Timer] = []

    def after(self, delay_ms: int, fn: Callable[[], None]) -> None:
        self._timers = [t for t in self._timers if t.is_alive()]
        t = threading.Timer(max(0, delay_ms) / 1000, fn)
        t.daemon = True
        self._timers.append(t)
        t.start()

    def cancel_all(self) -> None:
        for t in self._timers:
            t.cancel()
        self._timers = []
