"""Pair invocations with completions, per process, as Jepsen does.

A client process runs one operation at a time, so the completion of process
``p`` belongs to ``p``'s most recent open invocation. An invocation that never
completes (the client crashed, the test ended) is indeterminate: Jepsen treats
it as ``info``, and so do we — :func:`pair` synthesizes an ``info`` completion
for it, carrying the invocation's value and no completion time.

Nemesis operations (``process == "nemesis"``) are not paired: they are all
``info`` and come as start/stop pairs, not invoke/complete pairs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from .op import Op


@dataclass(slots=True)
class Pair:
    """An invocation and its completion. ``invoke`` is ``None`` for a
    completion that had no invocation (some hand-written histories omit them);
    ``complete_time`` is ``None`` when the completion was synthesized."""

    invoke: Op | None
    complete: Op
    synthesized: bool = False

    @property
    def invoke_time(self) -> int:
        return self.invoke.time if self.invoke is not None else self.complete.time

    @property
    def complete_time(self) -> int | None:
        return None if self.synthesized else self.complete.time

    @property
    def index(self) -> int:
        """The op index that reports name: the completion's, or the
        invocation's for a synthesized completion."""
        return self.complete.index


def iter_pairs(ops: list[Op], warnings: list[str] | None = None) -> Iterator[Pair]:
    """Yield client (invoke, completion) pairs in completion order, then the
    synthesized ``info`` completions of invocations that never completed (in
    invocation order)."""
    pending: dict[object, Op] = {}
    for op in ops:
        p = op.process
        if p == "nemesis":
            continue
        if op.type == "invoke":
            prev = pending.get(p)
            if prev is not None and warnings is not None:
                warnings.append(
                    f"op {op.index}: process {p} invoked again while op {prev.index} was open; "
                    f"treating op {prev.index} as info"
                )
            if prev is not None:
                yield Pair(prev, _synth_info(prev), synthesized=True)
            pending[p] = op
        else:
            inv = pending.pop(p, None)
            yield Pair(inv, op)
    for inv in sorted(pending.values(), key=lambda o: o.index):
        yield Pair(inv, _synth_info(inv), synthesized=True)


def _synth_info(inv: Op) -> Op:
    return Op(
        type="info",
        f=inv.f,
        value=inv.value,
        process=inv.process,
        time=inv.time,
        index=inv.index,
        error="no completion (indeterminate)",
        extra=dict(inv.extra),
    )


def pair(ops: list[Op], warnings: list[str] | None = None) -> list[Pair]:
    """All client pairs; see :func:`iter_pairs`."""
    return list(iter_pairs(ops, warnings))


def complete_history(ops: list[Op]) -> list[Op]:
    """The history with an ``info`` completion appended for every invocation
    that never completed (Jepsen's ``complete`` step before checking)."""
    out = list(ops)
    nxt = max((o.index for o in ops), default=-1) + 1
    tmax = max((o.time for o in ops), default=0)
    for pr in iter_pairs(ops):
        if pr.synthesized:
            c = pr.complete
            out.append(Op(type="info", f=c.f, value=c.value, process=c.process, time=tmax,
                          index=nxt, error=c.error, extra=dict(c.extra)))
            nxt += 1
    return out
