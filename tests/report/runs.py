"""The history both report test modules render: two client processes
sending to ``t0-0``, a partition from the 5th send to the 12th (one bare
start/stop and one with a value), every fifth send indeterminate."""

from __future__ import annotations

from typing import Any, Callable

from checkers.history.op import Op


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
