"""Refuting linearizability one stretch of history at a time.

WGL must exhaust every configuration before it can say "not linearizable",
and with many concurrent writes whose order no read pins down (Porcupine's
kv logs: appends interleaved between full-value gets) that is exponential —
Porcupine itself leaves such keys undecided. But a violation is usually
local: a get that cannot follow the few operations around it.

A *window* is the stretch of time between the calls of two operations
``[t1, t2)``. In any linearization of the whole history, the operations
linearized inside the window run from whatever state the object had at
``t1``: the model's wildcard (:meth:`~.models.Model.any_state`). Inside it,
an operation called and returned within the window must be linearized
there; one that overlaps an edge may or may not be (it is searched as a
crashed op, which may take effect or not — a relaxation: the window's
search allows everything the real constraints allow, and more); one that
returned before ``t1`` or was called at or after ``t2`` is outside. So if a
window has no linearization, neither has the history: a window can refute,
never confirm.

Windows are tried around the op where the search over the whole key keeps
failing first, then small first (8 operations, then 16, ... up to half the
key), half-overlapping, each within a step budget; the search over the whole
key runs alongside (:func:`checkers.linearizable.checker.check`), and
whichever decides first answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Generator, Iterator

from .models import Model
from .prepare import LinOp
from .wgl import SearchResult, compile_problem, search

#: steps one window may take before it is given up as inconclusive
WINDOW_STEPS = 2_000
FIRST_WIDTH = 8


def window_ops(ops: list[LinOp], lo: int, hi: int, model: Model) -> list[LinOp]:
    """The operations of the window from the call of ``ops[lo]`` to the call
    of ``ops[hi]`` (``ops`` sorted by call), edge-overlapping ones as
    crashed (crashed read-only ones say nothing and are left out)."""
    t1 = ops[lo].call
    t2 = ops[hi].call if hi < len(ops) else None
    out = []
    for o in ops:
        if t2 is not None and o.call >= t2:
            break
        if o.ret is not None and o.ret < t1:
            continue
        inside = o.call >= t1 and o.ret is not None and (t2 is None or o.ret < t2)
        if inside:
            out.append(o)
        elif not model.read_only(o.f, o.value):
            out.append(replace(o, ret=None))
    return out


def windows(n: int, focus: int | None = None) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` op ranges: first, when given, ending just after and then
    around op ``focus`` (where the whole-key search keeps dying: the op that
    cannot be explained is usually there); then widths 8, 16, ... below
    ``n``, half-overlapping."""
    seen: set[tuple[int, int]] = set()
    w = FIRST_WIDTH
    while focus is not None and w <= n // 2:
        for lo in (focus + 2 - w, focus - w // 2):
            lo = max(0, min(lo, n - w))
            if (lo, lo + w) not in seen:
                seen.add((lo, lo + w))
                yield lo, lo + w
        w *= 2
    w = FIRST_WIDTH
    while w <= n // 2:
        for lo in range(0, n - w // 2, w // 2):
            hi = min(n, lo + w)
            if (lo, hi) not in seen:
                yield lo, hi
        w *= 2


def refute(ops: list[LinOp], model: Model, slice_steps: int = 20_000, focus: int | None = None
           ) -> Generator[None, None, SearchResult | None]:
    """Search windows of ``ops`` (one key, sorted by call) for one with no
    linearization; yields after about ``slice_steps`` steps of work, so a
    scheduler can share time fairly. Returns the refuting window's
    :class:`SearchResult` (``blocked``/``longest`` as indices into ``ops``,
    ``window`` its op range) or None when no window refutes."""
    start = model.any_state()
    if start is None:
        return None
    where = {id(o): i for i, o in enumerate(ops)}
    spent = 0
    for lo, hi in windows(len(ops), focus):
        wops = window_ops(ops, lo, hi, model)
        back = [where.get(id(o), _find(ops, o)) for o in wops]
        prob = compile_problem(wops, model, start)
        gen = search(prob, model, min(slice_steps, WINDOW_STEPS))
        r = None
        while True:
            try:
                progress = next(gen)
            except StopIteration as stop:
                r = stop.value
                spent += r.steps
                break
            spent += min(slice_steps, WINDOW_STEPS)
            if progress.steps >= WINDOW_STEPS:
                gen.close()  # inconclusive: too many configurations
                break
            if spent >= slice_steps:
                spent = 0
                yield None
        if r is not None and r.valid is False:
            r.blocked = back[r.blocked] if r.blocked is not None else None
            r.longest = [back[i] for i in r.longest]
            r.window = (lo, hi)
            return r
        if spent >= slice_steps:
            spent = 0
            yield None
    return None


def _find(ops: list[LinOp], o: LinOp) -> int:
    """Index of the op a crashed copy was made from."""
    return next(i for i, x in enumerate(ops) if x.invoke_index == o.invoke_index and x.call == o.call)
