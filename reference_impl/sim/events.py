"""The deterministic event loop: virtual time in integer milliseconds and a
heap of ``(time, seq, callback, args)``.

Why a sequence number: two events due at the same millisecond run in the order
they were scheduled, never in an order that depends on comparing callbacks, so
one seed always yields one schedule (the property every replay relies on).
"""

from __future__ import annotations

import gc
import heapq
from collections import deque
from heapq import heappush
from typing import Any, Callable


class EventLoop:
    def __init__(self) -> None:
        self.now: int = 0
        self._seq = 0
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self.steps = 0

    def at(self, when: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` at virtual time ``when`` (never in the past)."""
        if when < self.now:
            when = self.now
        seq = self._seq = self._seq + 1
        heappush(self._heap, (int(when), seq, fn, args))

    def after(self, delay: int, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + max(0, int(delay)), fn, *args)

    def run_until(self, until: int, stop: Callable[[], bool] | None = None) -> None:
        """Run every event due at or before ``until``; then time is ``until``.

        ``stop`` is consulted after each event so scripted tests can wait for
        a condition ("until broker 2 leads t-0") without guessing times.
        """
        # The loop allocates many short-lived objects (messages, effect
        # lists, trace dicts) that reference counting frees at once; few are
        # in a cycle (a 60 s run leaves tens to ~1,500 cyclic objects, more
        # with kills: a stopped node's state). The cyclic collector would still walk the young objects
        # every few hundred allocations, and the run's growing long-lived
        # state (history, logs) on every older pass: about 5% of the run.
        # So it is off while the loop runs and back on after; nothing here
        # depends on when garbage is collected.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            self._run(until, stop)
        finally:
            if was_enabled:
                gc.enable()

    def _run(self, until: int, stop: Callable[[], bool] | None) -> None:
        heap = self._heap
        pop = heapq.heappop
        if stop is None:
            # the hot loop: the step count is kept locally and stored once
            steps = self.steps
            try:
                while heap and heap[0][0] <= until:
                    when, _, fn, args = pop(heap)
                    self.now = when
                    steps += 1
                    fn(*args)
            finally:
                self.steps = steps
        else:
            while heap and heap[0][0] <= until:
                when, _, fn, args = pop(heap)
                self.now = when
                self.steps += 1
                fn(*args)
                if stop():
                    return
        if until > self.now:
            self.now = until

    def pending(self) -> int:
        return len(self._heap)

    def clear(self) -> None:
        """Drop every pending event (a finished run's: see ``Simulation.release``)."""
        self._heap.clear()


class TimeoutQueue:
    """Timeouts of one fixed delay that almost never fire, kept out of the heap.

    A simulated client arms a timeout with every request and the reply nearly
    always comes first. One heap event per timeout was ~31k events per
    benchmark seed (78 simulated s at 500 requests/s) that did nothing, and
    they kept the heap ~17x larger (~1,450 entries against ~86, sampled
    through a run, with a 5 s timeout), so every push and pop went several
    levels deeper.

    Here a timeout still takes, when it is added, the ``(time, seq)`` place
    :meth:`EventLoop.after` would give it; the delay is fixed, so the queue
    is in that order. Only its oldest entry sits in the heap, under its own
    place. When that place comes up the entry fires if ``live(key)`` still
    holds, the entries no longer live behind it are dropped, and the next
    live one goes into the heap under its own place. A timeout that fires
    therefore runs exactly where an ``after`` event would have run, so a seed
    replays to the same history; only the loop's step count no longer
    includes the timeouts that did nothing.

    Invariant: whenever the queue is not empty, its first entry is in the heap.
    """

    def __init__(self, loop: EventLoop, delay: int, fire: Callable[[int], None], live: Callable[[int], bool]) -> None:
        self.loop = loop
        self.delay = max(0, int(delay))
        self._fire = fire
        self._live = live
        self._q: deque[tuple[int, int, int]] = deque()
        self._armed = False

    def __len__(self) -> int:
        return len(self._q)

    def add(self, key: int) -> None:
        """A timeout for ``key`` ``delay`` ms from now, in the place ``loop.after`` would give it."""
        loop = self.loop
        seq = loop._seq = loop._seq + 1
        when = loop.now + self.delay
        self._q.append((when, seq, key))
        if not self._armed:
            self._armed = True
            heappush(loop._heap, (when, seq, self._due, ()))

    def _due(self) -> None:
        q = self._q
        key = q.popleft()[2]
        # still armed while it fires: a timeout added meanwhile only queues
        if self._live(key):
            self._fire(key)
        live = self._live
        while q and not live(q[0][2]):
            q.popleft()
        if q:
            when, seq, _ = q[0]
            heappush(self.loop._heap, (when, seq, self._due, ()))
        else:
            self._armed = False
