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

And, for models that know how their states grow (``Model.looks_ahead``,
kv), a look-ahead (:mod:`.lookahead`): a new configuration whose state can
no longer reach a read still to come, with no reset able to come first, is
cached as explored and not lifted. Its dead end is noted at that read's
return, where the walk would have died at the latest. Not on a sequential
sub-history (every op returns before the next is called): there the walk
has one op to try at each step, so there is nothing to rule out.

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

from .lookahead import LookAhead
from .models import Model
from .prepare import LinOp

__all__ = ["Problem", "SearchResult", "compile_problem", "search", "sequential"]


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
    pruned: int = 0               # configurations the look-ahead ruled out (cached, never lifted)
    final_state: Any = None


def compile_problem(ops: list[LinOp], model: Model, init_state: Any,
                    reads_first: bool = True) -> Problem:
    """``ops`` sorted by call, as :func:`~.prepare.prepare` leaves them;
    ``reads_first=False`` turns the read-only pruning off altogether."""
    n = len(ops)
    size = 2 * n + 2
    match = [0] * size
    opno = [-1] * size
    num = [0] * size
    rows: list[Any] = [None] * size
    opkeys: list[Any] = [None] * size
    rank = [-1] * size
    read_only = bytearray(size)
    call_entry = _entries(ops, match, opno, rank)
    memo: dict[Any, dict] = {}
    reads: dict[Any, int] = {}
    n_ok = n_crashed = 0
    for i, o in enumerate(ops):
        c = call_entry[i]
        key = (o.f, o.value)
        opkeys[c] = key
        row = memo.get(key)
        if row is None:
            row = memo[key] = {}
            reads[key] = 1 if reads_first and model.read_only(o.f, o.value) else 0
        rows[c] = row
        read_only[c] = reads[key]
        # completed ops numbered in call order, crashed ops in their own numbering
        if o.ret is None:
            num[c] = ~n_crashed
            n_crashed += 1
        else:
            num[c] = n_ok
            n_ok += 1
    nxt = list(range(1, size + 1))
    nxt[-1] = -1
    prv = list(range(-1, size - 1))
    return Problem(ops, nxt, prv, match, opno, num, rows, opkeys, rank,
                   _gates(ops, call_entry, opkeys, size), read_only, init_state)


def _entries(ops: list[LinOp], match: list[int], opno: list[int], rank: list[int]) -> list[int]:
    """Number the entries in history order (calls and ok returns by their
    positions, which are distinct; crashed returns after them, then the
    tail), filling ``match``, ``opno`` and ``rank``; returns op -> its call
    entry."""
    width = 2 * len(ops)
    codes = []
    for i, o in enumerate(ops):
        codes.append(o.call * width + 2 * i)
        if o.ret is not None:
            codes.append(o.ret * width + 2 * i + 1)
    codes.sort()
    call_entry = [0] * len(ops)
    e = r = 0
    for x in codes:
        e += 1
        code = x % width
        i = code >> 1
        opno[e] = i
        if code & 1:
            match[call_entry[i]] = e
            rank[e] = r
            r += 1
        else:
            call_entry[i] = e
    for i, o in enumerate(ops):
        if o.ret is None:
            e += 1
            opno[e] = i
            match[call_entry[i]] = e
            match[e] = -1
    match[e + 1] = -1  # tail
    return call_entry


def sequential(p: Problem) -> bool:
    """Every op returns before the next one is called (no op crashed, or
    only the last one called): each call entry is followed by its return."""
    match = p.match
    for e in range(1, len(match) - 1):
        m = match[e]
        if m > 0 and m != e + 1:
            return False
    return True


def _gates(ops: list[LinOp], call_entry: list[int], opkeys: list[Any], size: int) -> list[int]:
    """Crashed call entry -> the previous crashed call (in call order) with
    the same op, or 0 (see the symmetry pruning in the module doc)."""
    gate = [0] * size
    last_same: dict[Any, int] = {}
    for i, o in enumerate(ops):
        if o.ret is None:
            c = call_entry[i]
            gate[c] = last_same.get(opkeys[c], 0)
            last_same[opkeys[c]] = c
    return gate


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
    configuration that the look-ahead (:mod:`.lookahead`, when the model
    has one) does not rule out is lifted (:func:`_lift`) and the walk
    restarts; a return reached is a dead end (:func:`_backtrack`); the
    tail is success."""
    nxt, prv = p.nxt[:], p.prv[:]
    match, num, rows, opkeys, gate = p.match, p.num, p.rows, p.opkeys, p.gate
    lifted = bytearray(len(nxt))
    st = _States(model, p.init_state)
    # a sequential history leaves the walk one op to try at each step: nothing
    # for the look-ahead to rule out (Porcupine's one-client kv logs)
    ahead = LookAhead(match, opkeys, p.read_only, model) if model.looks_ahead and not sequential(p) else None
    la: Any = ahead.start if ahead is not None else None
    cache: set = set()
    # The backtracking stack is a linked list of immutable frames
    # (entry, state, k, rel, cb, look-ahead frame, below): pushing and popping
    # are O(1), and so is keeping a snapshot of the path for the report.
    top: Any = None
    res = SearchResult(valid=None)
    s = k = rel = cb = 0   # state id; linearized set (see the module doc)
    e = nxt[0]
    steps = 0              # lifts + backtracks
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
                    nla = la if ahead is None else ahead.after(la, e)
                    bad = 0 if ahead is None or (nla is la and ns == s) else ahead.doomed(nla, ns, st.states[ns])
                    if not bad:
                        top = (e, s, k, rel, cb, la, top)
                        s, k, rel, cb, la = ns, nk, nrel, ncb, nla
                        _lift(nxt, prv, e, m)
                        lifted[e] = 1
                        e = nxt[0]
                        steps += 1
                        if steps >= budget:
                            budget += slice_steps
                            yield _report(res, p, steps, cache, st, rel, cb, dead)
                        continue
                    res.pruned += 1
                    _doomed(dead, ahead, bad, p.rank, (e, s, k, rel, cb, la, top))
            e = nxt[e]
        elif m == 0:
            dead.note(p.rank[e], e, top)
            if top is None:
                break
            e, s, k, rel, cb, la, top, n = _backtrack(top, nxt, prv, match, lifted, p.read_only, st.wild)
            steps += n
            if e < 0:
                break
            e = nxt[e]
            if steps >= budget:
                budget += slice_steps
                yield _report(res, p, steps, cache, st, rel, cb, dead)
        else:
            # A crashed op's return (or the tail): every completed op is in.
            return _success(res, p, top, st.states[s], steps, cache, st, rel, cb, dead)
    return _failure(res, p, steps, cache, st, rel, cb, dead)


def _success(res: SearchResult, p: Problem, top: Any, state: Any, steps: int, cache: set,
             st: _States, rel: int, cb: int, dead: _DeadEnds) -> SearchResult:
    res.valid = True
    res.longest = _path(p, top)
    res.final_state = state
    res.max_depth = len(res.longest)
    return _report(res, p, steps, cache, st, rel, cb, dead)


def _failure(res: SearchResult, p: Problem, steps: int, cache: set,
             st: _States, rel: int, cb: int, dead: _DeadEnds) -> SearchResult:
    res.valid = False
    res.blocked = p.opno[dead.entry] if dead.entry >= 0 else None
    res.longest = _path(p, dead.top)
    res.max_depth = len(res.longest)
    return _report(res, p, steps, cache, st, rel, cb, dead)


def _doomed(dead: "_DeadEnds", ahead: Any, bad: int, rank: list[int], path: Any) -> None:
    """A configuration the look-ahead ruled out is a dead end at the return
    of the first observer it cannot reach (see :meth:`.LookAhead.first_return`)."""
    m = ahead.first_return(bad, rank, dead.rank)
    if m:
        dead.note(rank[m], m, path)


class _DeadEnds:
    """The deepest dead end so far (the latest-completing op that could
    not be linearized in time) and the path that reached it."""

    __slots__ = ("rank", "entry", "top")

    def __init__(self) -> None:
        self.rank: int = -1
        self.entry: int = -1
        self.top: Any = None

    def note(self, rank: int, e: int, top: Any) -> None:
        if rank > self.rank:
            self.rank, self.entry, self.top = rank, e, top


def _backtrack(top: Any, nxt: list[int], prv: list[int], match: list[int], lifted: bytearray,
               ro: bytearray, wild: bytearray) -> tuple[int, int, int, int, int, Any, Any, int]:
    """Pop the stack and relink the popped call. A read-only op lifted as
    soon as it applied fails with the configuration it was lifted from (not
    from a wildcard state), so keep popping through those. Returns the
    restored ``(entry, state, k, rel, cb, look-ahead frame, top)`` and the
    steps taken; entry -1 when the initial configuration failed."""
    n = 0
    while True:
        e, s, k, rel, cb, la, top = top
        _unlift(nxt, prv, e, match[e])
        lifted[e] = 0
        n += 1
        if not ro[e] or wild[s]:
            return e, s, k, rel, cb, la, top, n
        if top is None:
            return -1, s, k, rel, cb, la, top, n


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
        top = top[6]
    out.reverse()
    return out


def _progress(res: SearchResult, steps: int, cached: int,
              states: list, memo_n: int, rel: int, cb: int) -> None:
    """Fill in the counters and a memory estimate: cache entries (a 4-tuple
    plus its set slot), interned states (sized by the newest one — states of
    growing models, like kv strings or logs, grow), transition memo entries."""
    res.steps = steps
    res.lifts = cached - res.pruned
    res.backtracks = steps - res.lifts
    res.cache_size, res.states = cached, len(states)
    window = (rel.bit_length() + cb.bit_length()) >> 3
    res.mem_estimate = (cached * (150 + window)
                        + len(states) * (120 + sys.getsizeof(states[-1]))
                        + memo_n * 80)
