"""Histories the report tests render: two client processes sending to
``t0-0``, a partition from the 5th send to the 12th (one bare start/stop
and one with a value), every fifth send indeterminate; and a ring of
transactions that is one G0 cycle through all of them."""

from __future__ import annotations

from typing import Any, Callable

from checkers.history.op import Op
from checkers.queue.synth import HistoryBuilder


def partitioned_sends(note: str, n_sends: int = 20, value: Callable[[int], Any] = lambda i: i,
                      error: Any = "timeout") -> list[Op]:
    """``value(i)`` is what send ``i`` writes, ``error`` what an
    indeterminate send carries and ``note`` a text in the partition's value
    (the tests make it hostile markup). Operations are 50 ms apart."""
    ops: list[Op] = []
    t = 0

    def add(**kw: Any) -> None:
        nonlocal t
        t += 50_000_000
        ops.append(Op(index=len(ops), time=t, **kw))

    for i in range(n_sends):
        v = value(i)
        add(type="invoke", f="send", value=[["send", "t0-0", v]], process=i % 2, extra={"acks": "all"})
        if i == 5:
            add(type="info", f="start-partition", value=None, process="nemesis")
            add(type="info", f="start-partition", value={"shape": "halves", "note": note}, process="nemesis")
        if i == 12:
            add(type="info", f="stop-partition", value=None, process="nemesis")
            add(type="info", f="stop-partition", value={"healed": True}, process="nemesis")
        typ = "ok" if i % 5 else "info"
        add(type=typ, f="send", value=[["send", "t0-0", [i, v]]] if typ == "ok" else [["send", "t0-0", v]],
            process=i % 2, extra={"acks": "all"}, error=None if typ == "ok" else error)
    return ops


def ring(n: int) -> HistoryBuilder:
    """Transaction i writes keys i and i+1; each key's log puts transaction
    i-1 first: a write cycle (G0) through all n operations and no shorter."""
    b = HistoryBuilder()
    keys = [f"t-{j}" for j in range(n)]
    for i in range(n):
        b.invoke(i, "txn", [["send", keys[i], 100 + i], ["send", keys[(i + 1) % n], 200 + i]])
    for i in range(n):
        b.complete(i, "ok", [["send", keys[i], [1, 100 + i]], ["send", keys[(i + 1) % n], [0, 200 + i]]])
    b.poll(n, {k: [(0, 200 + (j - 1) % n), (1, 100 + j)] for j, k in enumerate(keys)})
    return b
