"""The Wing–Gong–Lowe linearizability search over one sub-history.

The algorithm (Wing & Gong 1993, with Lowe's memoisation, as in Porcupine's
``checkSingle`` and Knossos's ``knossos.wgl``):

* the history is a doubly linked list of call and return entries in history
  order; crashed operations' returns sit at the very end (return at infinity);
* walking from the head, a *call* whose op the model accepts in the current
  state is linearized: the pair (linearized-set, new state) is looked up in
  the cache and, if new, the call and its return are unlinked ("lift"), the
  previous (entry, state) pushed on the stack, and the walk restarts at head;
* reaching a *return* entry means its call was not linearized before the op
  completed: a dead end, so pop the stack, relink ("unlift") that call, and
  continue after it; an empty stack means the history is not linearizable;
* reaching a crashed op's return (or the tail) means every completed op was
  linearized: the history is linearizable (the crashed ops left in the list
  are the ones that never took effect).

One pruning beyond WGL: identical crashed ops (same f and value) are
interchangeable, and the earlier-invoked one can stand in for a later one in
any linearization (its interval contains the later one's: both end at
infinity), so a crashed op is only tried once every identical crashed op
invoked before it is linearized. The explored set of configurations still
depends only on (linearized set, state), so the cache stays sound.

And one for read-only ops (reads, gets, polls: ``Model.read_only``): when the
walk reaches one that applies in the current state, every real-time
predecessor is already linearized (else the walk would have hit that
predecessor's return first), so in any successful continuation the read can
be moved to the front — it changes no state. Hence if linearizing it right
away fails, the configuration fails: backtracking pops straight through it
instead of trying to delay it. (Not from a wildcard state,
:meth:`~.models.Model.is_any`: there a read narrows the state.)

Hot-loop representation, chosen for CPython: entries are ints indexing flat
lists (``nxt``, ``prv``, ``match``); model states are interned to ints; each
distinct op gets a transition memo ``{state_id: next_state_id or -1}`` shared
by every entry with that op (Knossos's ``memo``), so the model's ``step`` runs
once per (state, distinct op); the cache is one set of (state id,
linearized set) keys.

The linearized set is kept *windowed* rather than as one n-bit bitset:
completed ops are numbered in call order and crashed ops separately, and the
set is ``(k, rel, cb)`` — every completed op below ``k`` is linearized, ``rel``
is the bitset of linearized completed ops from ``k`` on (shifted by ``k``), and
``cb`` the bitset of linearized crashed ops. The representation is unique, so
it serves as the cache key, and its size follows the concurrency window, not
the history length: a 50,000-op history costs no more per step than a short
one, and the cache holds small ints instead of 50,000-bit ones.

The search is a generator that yields every ``slice_steps`` lifts/backtracks
so a scheduler can interleave keys and enforce time and memory budgets.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Generator

from .models import Model
from .prepare import LinOp

__all__ = ["Problem", "SearchResult", "compile_problem", "search"]


@dataclass
class Problem:
    """A sub-history compiled into flat arrays (entry 0 = head sentinel,
    entry ``n_entries - 1`` = tail sentinel)."""

    ops: list[LinOp]
    nxt: list[int]
    prv: list[int]
    match: list[int]      # call -> its return entry (>0); ok return -> 0; crashed return/tail -> -1
    opno: list[int]       # entry -> op number (index into ops), -1 for sentinels
    num: list[int]        # call entry -> completed-op number (>= 0) or ~crashed-op number
    rows: list[Any]       # call entry -> transition memo dict (shared per distinct op)
    opkeys: list[Any]     # call entry -> (f, value)
    rank: list[int]       # ok-return entry -> completion rank (0, 1, ...)
    gate: list[int]       # crashed call entry -> previous crashed call with the same op, or 0
    read_only: bytearray  # call entry -> 1 if its op never changes any state
    init_state: Any


@dataclass
class SearchResult:
    valid: bool | None            # None: stopped by the scheduler (budget)
    steps: int = 0                # lifts + backtracks
    lifts: int = 0
    backtracks: int = 0
    cache_size: int = 0
    states: int = 0
    max_depth: int = 0
    mem_estimate: int = 0
    longest: list[int] = field(default_factory=list)   # op numbers, linearization order
    blocked: int | None = None    # op number of the op that could not be linearized
    window: tuple[int, int] | None = None  # set when a window refuted (see .windows)
    frontier: int | None = None   # progress: op number of the latest return reached in a dead end
    final_state: Any = None


def compile_problem(ops: list[LinOp], model: Model, init_state: Any,
                    reads_first: bool = True) -> Problem:
    """``reads_first=False`` turns the read-only pruning off altogether."""
    n = len(ops)
    # Events: (position, kind, op number); kind 0 call, 1 return. Positions
    # are distinct history positions; crashed returns go after everything.
    events: list[tuple[float, int, int]] = []
    for i, o in enumerate(ops):
        events.append((o.call, 0, i))
    crashed: list[int] = []
    for i, o in enumerate(ops):
        if o.ret is None:
            crashed.append(i)
        else:
            events.append((o.ret, 1, i))
    events.sort()
    size = 2 * n + 2
    nxt = list(range(1, size + 1))
    nxt[-1] = -1
    prv = list(range(-1, size - 1))
    match = [0] * size
    opno = [-1] * size
    num = [0] * size
    rows: list[Any] = [None] * size
    opkeys: list[Any] = [None] * size
    rank = [-1] * size
    call_entry = [0] * n
    memo: dict[Any, dict] = {}
    e = 1
    r = 0
    for _, kind, i in events:
        opno[e] = i
        if kind == 0:
            call_entry[i] = e
            o = ops[i]
            key = (o.f, o.value)
            opkeys[e] = key
            row = memo.get(key)
            if row is None:
                row = memo[key] = {}
            rows[e] = row
        else:
            match[call_entry[i]] = e
            match[e] = 0
            rank[e] = r
            r += 1
        e += 1
    gate = [0] * size
    read_only = bytearray(size)
    for c in call_entry:
        f, v = opkeys[c]
        read_only[c] = 1 if reads_first and model.read_only(f, v) else 0
    last_same: dict[Any, int] = {}
    for i in crashed:
        opno[e] = i
        c = call_entry[i]
        match[c] = e
        match[e] = -1
        e += 1
    # Completed ops numbered in call order (ops are sorted by call), crashed
    # ops likewise in their own numbering.
    n_ok = n_crashed = 0
    for i, o in enumerate(ops):
        if o.ret is None:
            num[call_entry[i]] = ~n_crashed
            n_crashed += 1
        else:
            num[call_entry[i]] = n_ok
            n_ok += 1
    for i in sorted(crashed, key=lambda i: call_entry[i]):
        c = call_entry[i]
        gate[c] = last_same.get(opkeys[c], 0)
        last_same[opkeys[c]] = c
    assert e == size - 1
    match[size - 1] = -1  # tail
    return Problem(ops, nxt, prv, match, opno, num, rows, opkeys, rank, gate, read_only,
                   init_state)


class _States:
    """Model states interned to ints, with each op's transition memo
    (Knossos's ``memo``): ``step`` runs once per (state, distinct op)."""

    __slots__ = ("model", "states", "ids", "wild", "memo_n")

    def __init__(self, model: Model, init: Any) -> None:
        self.model = model
        self.states: list[Any] = [init]
        self.ids: dict[Any, int] = {init: 0}
        # wildcard states (Model.is_any): a read from one narrows the state,
        # so the read-only pruning does not apply to reads lifted from them
        self.wild = bytearray([1 if model.is_any(init) else 0])
        self.memo_n = 0

    def after(self, row: dict, s: int, op: Any) -> int:
        """The state id after ``op`` from state ``s``, or -1 if the model
        refuses; ``row`` is the op's memo."""
        ok, st = self.model.step(self.states[s], op)
        ns = -1
        if ok:
            ns = self.ids.get(st, -1)
            if ns < 0:
                ns = self.ids[st] = len(self.states)
                self.states.append(st)
                self.wild.append(1 if self.model.is_any(st) else 0)
        row[s] = ns
        self.memo_n += 1
        return ns


def _with(v: int, k: int, rel: int, cb: int) -> tuple[int, int, int]:
    """The linearized set ``(k, rel, cb)`` plus op number ``v`` (crashed ops
    are ``~j``); adding op ``k`` slides the window past the linearized run."""
    if v < 0:
        return k, rel, cb | (1 << ~v)
    if v > k:
        return k, rel | (1 << (v - k)), cb
    x = rel | 1
    t = (~x & (x + 1)).bit_length() - 1
    return k + t, x >> t, cb


def _lift(nxt: list[int], prv: list[int], e: int, m: int) -> None:
    """Unlink a call entry and its return entry."""
    a, b = prv[e], nxt[e]
    nxt[a], prv[b] = b, a
    a, b = prv[m], nxt[m]
    nxt[a], prv[b] = b, a


def _unlift(nxt: list[int], prv: list[int], e: int, m: int) -> None:
    """Relink them (in reverse order of :func:`_lift`)."""
    a, b = prv[m], nxt[m]
    nxt[a] = prv[b] = m
    a, b = prv[e], nxt[e]
    nxt[a] = prv[b] = e


def search(p: Problem, model: Model, slice_steps: int = 20000
           ) -> Generator[SearchResult, None, SearchResult]:
    """Run WGL on ``p``; yields a progress :class:`SearchResult` every
    ``slice_steps`` steps and returns the final one. The loop is one walk
    over the linked entries: a call that applies and reaches a new
    configuration is lifted (:func:`_lift`) and the walk restarts; a return
    reached is a dead end (:func:`_backtrack`); the tail is success."""
    nxt, prv = p.nxt[:], p.prv[:]
    match, num, rows, opkeys, gate = p.match, p.num, p.rows, p.opkeys, p.gate
    lifted = bytearray(len(nxt))
    st = _States(model, p.init_state)
    cache: set = set()
    # The backtracking stack is a linked list of immutable frames
    # (entry, state, k, rel, cb, below): pushing and popping are O(1), and so
    # is keeping a snapshot of the whole path for the failure report.
    top: Any = None
    res = SearchResult(valid=None)
    s = k = rel = cb = 0   # state id; linearized set (see the module doc)
    e = nxt[0]
    steps = 0              # lifts + backtracks; lifts == len(cache)
    budget = slice_steps
    dead = _DeadEnds()
    while True:
        m = match[e]
        if m > 0:
            ns = rows[e].get(s)
            if ns is None:
                ns = st.after(rows[e], s, opkeys[e])
            g = gate[e]
            # Symmetry: of identical crashed ops, the earlier-invoked one
            # goes first (it can stand in for the later one).
            if ns >= 0 and not (g and not lifted[g]):
                nk, nrel, ncb = _with(num[e], k, rel, cb)
                key = (ns, nk, nrel, ncb)
                if key not in cache:
                    cache.add(key)
                    top = (e, s, k, rel, cb, top)
                    s, k, rel, cb = ns, nk, nrel, ncb
                    _lift(nxt, prv, e, m)
                    lifted[e] = 1
                    e = nxt[0]
                    steps += 1
                    if steps >= budget:
                        budget += slice_steps
                        yield _report(res, p, steps, cache, st, rel, cb, dead)
                    continue
            e = nxt[e]
        elif m == 0:
            dead.note(p.rank[e], e, top)
            if top is None:
                break
            e, s, k, rel, cb, top, n = _backtrack(top, nxt, prv, match, lifted, p.read_only, st.wild)
            steps += n
            if e < 0:
                break
            e = nxt[e]
            if steps >= budget:
                budget += slice_steps
                yield _report(res, p, steps, cache, st, rel, cb, dead)
        else:
            # A crashed op's return (or the tail): every completed op is in.
            res.valid = True
            res.longest = _path(p, top)
            res.final_state = st.states[s]
            break
    if res.valid is None:
        res.valid = False
        res.blocked = p.opno[dead.entry] if dead.entry >= 0 else None
        res.longest = _path(p, dead.top)
    res.max_depth = len(res.longest)
    return _report(res, p, steps, cache, st, rel, cb, dead)


class _DeadEnds:
    """The deepest dead end so far (the latest-completing op that could
    not be linearized in time) and the path that reached it."""

    __slots__ = ("rank", "entry", "top")

    def __init__(self) -> None:
        self.rank, self.entry, self.top = -1, -1, None

    def note(self, rank: int, e: int, top: Any) -> None:
        if rank > self.rank:
            self.rank, self.entry, self.top = rank, e, top


def _backtrack(top: Any, nxt: list[int], prv: list[int], match: list[int], lifted: bytearray,
               ro: bytearray, wild: bytearray) -> tuple[int, int, int, int, int, Any, int]:
    """Pop the stack and relink the popped call. A read-only op lifted as
    soon as it applied fails with the configuration it was lifted from (not
    from a wildcard state), so keep popping through those. Returns the
    restored ``(entry, state, k, rel, cb, top)`` and the steps taken; entry
    -1 when the initial configuration failed."""
    n = 0
    while True:
        e, s, k, rel, cb, top = top
        _unlift(nxt, prv, e, match[e])
        lifted[e] = 0
        n += 1
        if not ro[e] or wild[s]:
            return e, s, k, rel, cb, top, n
        if top is None:
            return -1, s, k, rel, cb, top, n


def _report(res: SearchResult, p: Problem, steps: int, cache: set, st: _States,
            rel: int, cb: int, dead: _DeadEnds) -> SearchResult:
    _progress(res, steps, len(cache), st.states, st.memo_n, rel, cb)
    res.frontier = p.opno[dead.entry] if dead.entry >= 0 else None
    return res


def _path(p: Problem, top: Any) -> list[int]:
    """Op numbers on a stack path, bottom (first linearized) first."""
    out = []
    while top is not None:
        out.append(p.opno[top[0]])
        top = top[5]
    out.reverse()
    return out


def _progress(res: SearchResult, steps: int, cached: int,
              states: list, memo_n: int, rel: int, cb: int) -> None:
    """Fill in the counters and a memory estimate: cache entries (a 4-tuple
    plus its set slot), interned states (sized by the newest one — states of
    growing models, like kv strings or logs, grow), transition memo entries."""
    res.steps = steps
    res.lifts, res.backtracks = cached, steps - cached
    res.cache_size, res.states = cached, len(states)
    window = (rel.bit_length() + cb.bit_length()) >> 3
    res.mem_estimate = (cached * (150 + window)
                        + len(states) * (120 + sys.getsizeof(states[-1]))
                        + memo_n * 80)
