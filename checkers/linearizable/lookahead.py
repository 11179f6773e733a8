"""Look-ahead for the WGL search: drop a configuration whose state can no
longer explain a read that is still to come.

WGL only learns that a choice was wrong when its walk reaches the return of
an op it could not linearize in time. With concurrent appends (Porcupine's
kv logs) every order of them is a different state, so the walk tries each
order of each subset before the next get's return kills them all:
exponential in the concurrency. A model that knows how its states grow
(:attr:`~.models.Model.looks_ahead`) lets the search kill such an order as
soon as it is made.

The rule. Call an op a *reset* when the model says so
(:meth:`~.models.Model.resets`, kv: put) and an *observer* a completed
read-only op (kv: a get with its value). Say a reset ``r`` *explains* an
observer ``g`` when ``r`` may precede ``g`` in real time (``r`` is called
before ``g`` returns) and the state ``r`` leaves can grow into one where
``g`` succeeds (:meth:`~.models.Model.reset_state`,
:meth:`~.models.Model.reaches`; a reset whose resulting state depends on
the state before it explains every later observer). In a configuration
(linearized set, state ``s``), an observer not yet linearized whose every
explaining reset is already linearized is *pinned*: any continuation
reaches it from ``s`` through non-resets, so ``s`` must reach it. A
configuration with a pinned observer that ``s`` cannot reach has no
linearization. The configuration's cache entry stays (it is explored: it
failed), so the search stays exact.

Data layout: observers are bits of big ints, in the order the model's
observer index chooses (:class:`PrefixIndex` sorts kv values, so the gets a
string can grow into are one range of bits, found by two binary searches).
A configuration carries ``(unlinearized, pinned, linearized resets)`` as
three ints in the search's stack frames; a state's reachable observers are
computed once per state. The check is then ``unlinearized & pinned &
~reachable``: a few machine words per 64 observers.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable, Sequence

__all__ = ["LookAhead", "ScanIndex", "PrefixIndex"]

#: (unlinearized observers, pinned observers, linearized resets), as bitsets
Frame = tuple[int, int, int]


class ScanIndex:
    """Observers in the order given; a state's reachable ones found by
    asking the model about each (one call per observer and new state)."""

    def __init__(self, observed: Sequence[tuple[str, Any]],
                 reaches: Callable[[Any, str, Any], bool]) -> None:
        self.observed = list(observed)
        self.positions = list(range(len(self.observed)))
        self.reaches = reaches

    def reachable(self, state: Any) -> int:
        bits = 0
        for i, (f, v) in enumerate(self.observed):
            if self.reaches(state, f, v):
                bits |= 1 << i
        return bits


class PrefixIndex(ScanIndex):
    """For models whose observers read a string that only grows between
    resets (kv): the observed values that a string ``s`` can grow into are
    those starting with ``s``, one contiguous run in sorted order. States
    that are not strings (kv's wildcard) are asked one by one."""

    def __init__(self, observed: Sequence[tuple[str, Any]],
                 reaches: Callable[[Any, str, Any], bool]) -> None:
        super().__init__(observed, reaches)
        order = sorted(range(len(self.observed)), key=lambda i: self.observed[i][1])
        self.values = [self.observed[i][1] for i in order]
        self.positions = [0] * len(order)
        for rank, i in enumerate(order):
            self.positions[i] = rank
        self.observed = [self.observed[i] for i in order]

    def reachable(self, state: Any) -> int:
        if type(state) is not str:
            return super().reachable(state)
        vals = self.values
        lo = bisect_left(vals, state)
        hi, top = lo, len(vals)
        while hi < top:  # the first value from lo on without the prefix
            mid = (hi + top) // 2
            if vals[mid].startswith(state):
                hi = mid + 1
            else:
                top = mid
        return (1 << hi) - (1 << lo)


class LookAhead:
    """The rule of the module doc for one compiled problem (see
    :class:`~.wgl.Problem`: entries numbered in history order, ``match``
    from a call to its return)."""

    __slots__ = ("obit", "rlist", "rbit", "index", "reach", "start", "ret_of")

    def __init__(self, match: list[int], opkeys: list[Any], read_only: bytearray, model: Any) -> None:
        size = len(match)
        calls = [e for e in range(1, size - 1) if match[e] > 0]
        observers = [e for e in calls if read_only[e] and match[match[e]] == 0]
        resets = [e for e in calls if model.resets(*opkeys[e])]
        self.index = model.observer_index([opkeys[e] for e in observers])
        pos = self.index.positions
        self.obit = [0] * size
        self.ret_of: dict[int, int] = {}  # observer bit -> its return entry
        for i, e in enumerate(observers):
            self.obit[e] = 1 << pos[i]
            self.ret_of[1 << pos[i]] = match[e]
        self.reach: dict[int, int] = {}
        self.rbit = [0] * size
        self.rlist: list[Any] = [None] * size
        explained = self._explained(match, opkeys, model, observers, resets)
        everyone = pinned = 0
        for e in observers:
            everyone |= self.obit[e]
            if not explained.get(e):
                pinned |= self.obit[e]
        self.start: Frame = (everyone, pinned, 0)

    def _explained(self, match: list[int], opkeys: list[Any], model: Any,
                   observers: list[int], resets: list[int]) -> dict[int, int]:
        """Fills ``rbit`` and ``rlist`` (per reset, the observers it
        explains, each with all its explaining resets); returns observer ->
        bitset of its explaining resets."""
        by_bit = {self.obit[g]: g for g in observers}
        rets = sorted((match[g], self.obit[g]) for g in observers)
        later = [0] * (len(rets) + 1)  # later[i]: observers returning at rets[i] or after
        for i in range(len(rets) - 1, -1, -1):
            later[i] = later[i + 1] | rets[i][1]
        ret_at = [r for r, _ in rets]
        by: dict[int, int] = {}
        lists: dict[int, list[int]] = {}
        for j, r in enumerate(resets):
            self.rbit[r] = 1 << j
            rs = model.reset_state(*opkeys[r])
            bits = later[bisect_left(ret_at, r)]
            if rs is not None:
                bits &= self.index.reachable(rs)
            mine = lists[r] = []
            while bits:
                low = bits & -bits
                bits ^= low
                g = by_bit[low]
                by[g] = by.get(g, 0) | self.rbit[r]
                mine.append(g)
        for r, mine in lists.items():
            self.rlist[r] = [(self.obit[g], by[g]) for g in mine]
        return by

    def after(self, la: Frame, e: int) -> Frame:
        """The frame once call entry ``e`` is linearized."""
        b = self.obit[e]
        if b:
            return (la[0] & ~b, la[1], la[2])
        lst = self.rlist[e]
        if lst is None:
            return la
        unlin, pinned, done = la
        done |= self.rbit[e]
        for gb, by in lst:
            if not by & ~done:
                pinned |= gb
        return (unlin, pinned, done)

    def doomed(self, la: Frame, sid: int, state: Any) -> int:
        """The pinned observers still to come that state ``state``
        (interned as ``sid``) cannot reach, as a bitset (0: none)."""
        live = la[0] & la[1]
        if not live:
            return 0
        r = self.reach.get(sid)
        if r is None:
            r = self.reach[sid] = self.index.reachable(state)
        return live & ~r

    def first_return(self, bad: int, rank: list[int], above: int) -> int:
        """Of the observers ``bad``, the return entry of the one returning
        first, if it returns after rank ``above``; else 0. WGL, not told,
        would have walked on from the doomed configuration and died at
        the latest there: that is the dead end the failure report names."""
        best, best_rank = 0, -1
        while bad:
            low = bad & -bad
            bad ^= low
            m = self.ret_of[low]
            if rank[m] <= above:
                return 0
            if best_rank < 0 or rank[m] < best_rank:
                best, best_rank = m, rank[m]
        return best
