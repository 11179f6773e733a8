"""Probe writes after the final heal: the availability checker's evidence.

From the final heal on, each acks=all worker thread sends one acks=all write
(``probe: true``) to each of its keys in turn, one at a time, again
:data:`PROBE_PAUSE_S` after one that failed, until every key took one or the
liveness bound (``checkers.availability.bound``) ran out. The first
acknowledged probe of a key is when its partition took acks=all writes again;
none within the bound is an unavailable partition, whose cause the checker
reads from the traces and the cluster's final state.

A generator, so both runtimes play it alike (the one driver): the real
interpreter on the queue client, the virtual one on the simulated clients.
"""

from __future__ import annotations

from typing import Any, Callable

import generator as g

#: probe values start far above any value the workload's counter reaches, one
#: range per thread, so every value of a history stays unique
PROBE_BASE = 1 << 50
PROBE_RANGE = 1 << 20
#: pause between a failed probe and the next
PROBE_PAUSE_S = 0.25


class Probes(g.Gen):
    """One thread's probe writes (module docstring). Immutable, as every
    generator: each step returns a new one."""

    __slots__ = ("keys", "first_value", "deadline_s", "idempotent", "done", "sent", "start", "due", "inflight")

    def __init__(self, keys: tuple[str, ...], first_value: int, deadline_s: float, idempotent: bool = False,
                 done: frozenset[str] = frozenset(), sent: int = 0, start: int | None = None, due: int = 0,
                 inflight: str | None = None) -> None:
        self.keys, self.first_value, self.deadline_s, self.idempotent = keys, first_value, deadline_s, idempotent
        self.done, self.sent, self.start, self.due, self.inflight = done, sent, start, due, inflight

    def __repr__(self) -> str:
        return f"Probes({self.keys!r}, done={sorted(self.done)!r}, sent={self.sent})"

    def _with(self, **changes: Any) -> "Probes":
        fields = {k: getattr(self, k) for k in self.__slots__}
        fields.update(changes)
        return Probes(**fields)

    def op(self, ctx: g.Context) -> Any:
        free = ctx.free_threads()
        me = self
        if self.inflight is not None:
            if not free:
                return g.PENDING, self
            # it completed and no word came: an ``info`` completion moves the
            # thread to a new process, whose events reach no generator of the
            # old one (a failed probe, to be sent again)
            me = self._with(inflight=None)
        todo = [k for k in me.keys if k not in me.done]
        if not todo:
            return None
        start = ctx.time if me.start is None else me.start
        at = max(ctx.time, me.due)
        if at >= start + int(me.deadline_s * g.NS):
            return None
        if not free:
            return g.PENDING, me
        key = todo[me.sent % len(todo)]
        op = {"f": "send", "process": ctx.process_of[free[0]], "time": at, "probe": True, "acks": "all",
              "idempotent": me.idempotent, "value": [["send", key, me.first_value + me.sent]]}
        return op, me._with(sent=me.sent + 1, start=start, inflight=key)

    def is_inert(self) -> bool:
        return False

    def update(self, ctx: g.Context, event: dict[str, Any]) -> g.Gen:
        if self.inflight is None or event.get("type") == "invoke" or not event.get("probe"):
            return self
        done = self.done | {self.inflight} if event.get("type") == "ok" else self.done
        return self._with(done=done, inflight=None, due=ctx.time + int(PROBE_PAUSE_S * g.NS))


def probe_generator(keys: list[str], threads: list[int], deadline_s: float,
                    idempotent_for_thread: Callable[[int], bool] | None = None) -> g.Gen | None:
    """Probe writes after the final heal on the acks=all worker ``threads``
    (keys spread over them, ``keys[i::len(threads)]`` for the i-th), until
    each key took one or ``deadline_s`` passed (:class:`Probes`); None
    without such threads."""
    if not threads or not keys:
        return None
    mine = {t: tuple(keys[i::len(threads)]) for i, t in enumerate(threads)}

    def for_thread(t: Any) -> g.Gen | None:
        if not mine.get(t):
            return None
        idem = bool(idempotent_for_thread(t)) if idempotent_for_thread else False
        return Probes(mine[t], PROBE_BASE + threads.index(t) * PROBE_RANGE, deadline_s, idem)

    return g.clients(g.each_thread(for_thread))
