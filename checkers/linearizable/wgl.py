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

Hot-loop representation, chosen for CPython: entries are ints indexing flat
lists (``nxt``, ``prv``, ``match``); model states are interned to ints; each
distinct op gets a transition memo ``{state_id: next_state_id or -1}`` shared
by every entry with that op (Knossos's ``memo``), so the model's ``step`` runs
once per (state, distinct op); the linearized set is a Python int bitset; the
cache is one set of bitsets per state id.

The search is a generator that yields every ``slice_steps`` lifts/backtracks
so a scheduler can interleave keys and enforce time and memory budgets.
"""

from __future__ import annotations

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
    bits: list[int]       # call entry -> 1 << op number
    rows: list[Any]       # call entry -> transition memo dict (shared per distinct op)
    opkeys: list[Any]     # call entry -> (f, value)
    rank: list[int]       # ok-return entry -> completion rank (0, 1, ...)
    gate: list[int]       # crashed call entry -> previous crashed call with the same op, or 0
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
    final_state: Any = None


def compile_problem(ops: list[LinOp], model: Model, init_state: Any) -> Problem:
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
    bits = [0] * size
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
            bits[e] = 1 << i
        else:
            match[call_entry[i]] = e
            match[e] = 0
            rank[e] = r
            r += 1
        e += 1
    gate = [0] * size
    last_same: dict[Any, int] = {}
    for i in crashed:
        opno[e] = i
        c = call_entry[i]
        match[c] = e
        match[e] = -1
        e += 1
    for i in sorted(crashed, key=lambda i: call_entry[i]):
        c = call_entry[i]
        gate[c] = last_same.get(opkeys[c], 0)
        last_same[opkeys[c]] = c
    assert e == size - 1
    match[size - 1] = -1  # tail
    return Problem(ops, nxt, prv, match, opno, bits, rows, opkeys, rank, gate, init_state)


def search(p: Problem, model: Model, slice_steps: int = 20000
           ) -> Generator[SearchResult, None, SearchResult]:
    """Run WGL on ``p``; yields a progress :class:`SearchResult` every
    ``slice_steps`` steps and returns the final one."""
    nxt = p.nxt[:]
    prv = p.prv[:]
    match = p.match
    bits = p.bits
    rows = p.rows
    opkeys = p.opkeys
    rank = p.rank
    gate = p.gate
    lifted = bytearray(len(nxt))
    step = model.step

    states: list[Any] = [p.init_state]
    state_ids: dict[Any, int] = {p.init_state: 0}
    caches: list[set] = [set()]
    stack: list[tuple[int, int, int]] = []
    push = stack.append
    pop = stack.pop

    res = SearchResult(valid=None)
    s = 0
    lin = 0
    e = nxt[0]
    steps = 0
    lifts = 0
    backtracks = 0
    cached = 0
    budget = slice_steps
    best_depth = -1
    best_rank = -1
    best_stack: list = []
    blocked_e = -1
    mem = 0
    last_cached = 0

    while True:
        m = match[e]
        if m > 0:
            g = gate[e]
            if g and not lifted[g]:
                # Symmetry: of identical crashed ops, the earlier-invoked one
                # goes first (it can stand in for the later one anywhere).
                e = nxt[e]
                continue
            row = rows[e]
            ns = row.get(s)
            if ns is None:
                ok, st = step(states[s], opkeys[e])
                if ok:
                    ns = state_ids.get(st)
                    if ns is None:
                        ns = state_ids[st] = len(states)
                        states.append(st)
                        caches.append(set())
                else:
                    ns = -1
                row[s] = ns
            if ns >= 0:
                nl = lin | bits[e]
                cs = caches[ns]
                if nl not in cs:
                    cs.add(nl)
                    cached += 1
                    push((e, s, lin))
                    s = ns
                    lin = nl
                    a = prv[e]
                    b = nxt[e]
                    nxt[a] = b
                    prv[b] = a
                    a = prv[m]
                    b = nxt[m]
                    nxt[a] = b
                    prv[b] = a
                    lifted[e] = 1
                    e = nxt[0]
                    lifts += 1
                    if lifts + backtracks >= budget:
                        budget += slice_steps
                        mem += (cached - last_cached) * (64 + (lin.bit_length() >> 3) + (lin.bit_length() >> 5))
                        last_cached = cached
                        res.steps = lifts + backtracks
                        res.lifts, res.backtracks = lifts, backtracks
                        res.cache_size, res.states, res.mem_estimate = cached, len(states), mem
                        yield res
                    continue
            e = nxt[e]
        elif m == 0:
            # Dead end: the op returning here was not linearized in time.
            rk = rank[e]
            if rk > best_rank:
                best_rank = rk
                blocked_e = e
                best_stack = stack[:]
            if not stack:
                break
            e, s, lin = pop()
            m = match[e]
            a = prv[m]
            b = nxt[m]
            nxt[a] = m
            prv[b] = m
            a = prv[e]
            b = nxt[e]
            nxt[a] = e
            prv[b] = e
            lifted[e] = 0
            e = nxt[e]
            backtracks += 1
            if lifts + backtracks >= budget:
                budget += slice_steps
                mem += (cached - last_cached) * (64 + (lin.bit_length() >> 3) + (lin.bit_length() >> 5))
                last_cached = cached
                res.steps = lifts + backtracks
                res.lifts, res.backtracks = lifts, backtracks
                res.cache_size, res.states, res.mem_estimate = cached, len(states), mem
                yield res
        else:
            # A crashed op's return (or the tail): every completed op is in.
            res.valid = True
            res.longest = [p.opno[x[0]] for x in stack]
            res.max_depth = len(stack)
            res.final_state = states[s]
            break
    if res.valid is None:
        res.valid = False
        res.blocked = p.opno[blocked_e] if blocked_e >= 0 else None
        res.longest = [p.opno[x[0]] for x in best_stack]
        res.max_depth = len(best_stack)
    res.steps = lifts + backtracks
    res.lifts, res.backtracks = lifts, backtracks
    res.cache_size, res.states = cached, len(states)
    res.mem_estimate = mem + (cached - last_cached) * 64
    return res
