"""From a Jepsen-shaped history to per-key lists of operations.

Rules (Knossos ``history/complete`` semantics):

* an invocation is matched with the next completion of the same process;
* ``fail`` means the operation did not happen: the pair is dropped (unless
  the model maps it to an observation, see ``Model.failed``);
* ``info`` (or no completion at all) means it may have happened at any time
  after its invocation, or never: its return is at infinity;
* an ``ok`` op's value is taken from the completion (reads learn their value
  there), a crashed op's from its invocation;
* nemesis operations are not client operations and are skipped.

Each op is then split by the model into per-key pieces (P-compositionality).
Sound reductions, applied per piece: an op the model says always succeeds
without changing the state (``is_noop``: e.g. a read of nil) is dropped, and
so is a crashed op that cannot change the state (``read_only``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from checkers.history.op import HistoryError, Op

from .models import Model, ModelError, _name, freeze

__all__ = ["LinOp", "SubHistory", "prepare"]

INF = float("inf")


@dataclass(slots=True)
class LinOp:
    """One operation to linearize: ``call``/``ret`` are positions in the
    history (``ret`` is None when crashed), ``f``/``value`` its model op."""

    call: int
    ret: int | None
    f: str
    value: Any
    invoke_index: int
    complete_index: int | None


@dataclass
class SubHistory:
    key: Any
    ops: list[LinOp] = field(default_factory=list)
    dropped: int = 0  # pieces removed by the sound reductions


def _index(op: Any, pos: int) -> int:
    i = getattr(op, "index", -1)
    return i if isinstance(i, int) and i >= 0 else pos


def _as_op(o: Any, pos: int) -> Op:
    if isinstance(o, Op):
        return o
    if isinstance(o, dict):
        return Op.from_dict(o, where=f"op {pos}")
    raise HistoryError(f"op {pos}: not an operation: {o!r}")


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        p = self.parent.setdefault(x, x)
        while p != x:
            gp = self.parent[p]
            self.parent[x] = gp
            x, p = p, gp
        return x

    def union(self, keys: Iterable[Any]) -> None:
        it = iter(keys)
        try:
            root = self.find(next(it))
        except StopIteration:
            return
        for k in it:
            r = self.find(k)
            if r != root:
                self.parent[r] = root


def _with_key(iop: Op, rop: Op | None, value: Any) -> Any:
    """``[key, value]`` for an op that names its key in a field of its own
    (``{"f": "get", "key": "0", "value": "x"}``); others are left as they are."""
    for o in (rop, iop):
        if o is not None and "key" in o.extra:
            return [o.extra["key"], value]
    return value


#: (invocation position, invocation, completion position or None, completion or None)
Pair = tuple[int, Op, "int | None", "Op | None"]


def prepare(history: Iterable[Any], model: Model) -> tuple[dict[Any, SubHistory], dict[str, int]]:
    """Pair, filter and partition ``history``. Returns ``(subs, counts)``
    where ``subs`` maps key -> :class:`SubHistory` (key ``None`` for an
    unpartitioned model) and ``counts`` says what was seen and dropped."""
    counts = {"ops": 0, "ok": 0, "fail": 0, "info": 0, "crashed": 0, "skipped": 0}
    pairs = _pairs(history, model, counts)
    uf = _UnionFind() if model.joint_keys else None
    pieces, dropped = _pieces(pairs, model, counts, uf)
    subs = _group(pieces, uf, dropped)
    for key, sub in subs.items():
        n = len(sub.ops)
        sub.ops = model.refine(key, sub.ops)
        sub.dropped += n - len(sub.ops)
        sub.ops.sort(key=_by_call)
    return subs, counts


def _by_call(o: LinOp) -> int:
    return o.call


def _pairs(history: Iterable[Any], model: Model, counts: dict[str, int]) -> list[Pair]:
    """Invocations matched with their process's next completion, in
    completion order (crashed ones last); ``fail`` completions the model
    does not read as observations are dropped."""
    pending: dict[Any, tuple[int, Op]] = {}
    pairs: list[Pair] = []
    n = skipped = 0
    for pos, raw in enumerate(history):
        op = raw if type(raw) is Op else _as_op(raw, pos)
        n += 1
        p = op.process
        if type(p) is not int:
            if p == "nemesis" or _name(p) == "nemesis":
                skipped += 1
                continue
            p = freeze(p)  # any JSON value may name a process; keys must hash
        t = op.type
        if type(t) is not str:
            t = _name(t)
        if t == "invoke":
            prev = pending.pop(p, None)
            if prev is not None:
                # The process moved on without completing: indeterminate.
                pairs.append((prev[0], prev[1], None, None))
            pending[p] = (pos, op)
        elif t == "ok" or t == "fail" or t == "info":
            inv = pending.pop(p, None)
            if inv is None:
                if t == "info":
                    skipped += 1  # a bare info (no invocation) says nothing
                    continue
                raise HistoryError(
                    f"op {_index(op, pos)}: {t} completion for process {p!r} without an invocation")
            counts[t] += 1
            if t == "fail":
                seen = model.failed(str(_name(inv[1].f)), inv[1].value)
                if seen is None:
                    continue
                op = Op(type="ok", f=seen[0], value=seen[1], process=p, index=_index(op, pos))
                t = "ok"
            pairs.append((inv[0], inv[1], pos if t == "ok" else None, op if t == "ok" else None))
        else:
            raise HistoryError(f"op {_index(op, pos)}: type {t!r} is not one of invoke/ok/fail/info")
    for ipos, iop in pending.values():
        pairs.append((ipos, iop, None, None))
    counts["ops"] += n
    counts["skipped"] += skipped
    return pairs


def _pieces(pairs: list[Pair], model: Model, counts: dict[str, int], uf: _UnionFind | None
            ) -> tuple[list[tuple[Any, LinOp]], dict[Any, int]]:
    """Each pair split by the model into per-key ops; the sound reductions
    (no-ops, crashed read-only ops) counted per key instead of kept."""
    keyed = model.keyed()
    split, is_noop, read_only = model.split, model.is_noop, model.read_only
    pieces: list[tuple[Any, LinOp]] = []
    dropped: dict[Any, int] = {}
    crashed = 0
    for ipos, iop, rpos, rop in pairs:
        if rop is None:
            crashed += 1
            f = iop.f
            value = iop.value
        else:
            f = rop.f
            value = rop.value if rop.value is not None else iop.value
        if type(f) is not str:
            f = str(_name(f))
        if keyed and ("key" in iop.extra or (rop is not None and "key" in rop.extra)):
            value = _with_key(iop, rop, value)
        try:
            parts = split(f, value)
        except ModelError as e:
            raise HistoryError(f"op {_index(iop, ipos)}: {e}") from None
        ii = iop.index
        if not isinstance(ii, int) or ii < 0:
            ii = ipos
        ri = None if rop is None or rpos is None else _index(rop, rpos)
        for key, pf, pv in parts:
            if is_noop(pf, pv) or (rpos is None and read_only(pf, pv)):
                k0 = key[0] if uf is not None and key else key
                dropped[k0] = dropped.get(k0, 0) + 1
                continue
            if uf is not None:
                uf.union(key)
            pieces.append((key, LinOp(ipos, rpos, pf, pv, ii, ri)))
    counts["crashed"] += crashed
    return pieces, dropped


def _group(pieces: list[tuple[Any, LinOp]], uf: _UnionFind | None,
           dropped: dict[Any, int]) -> dict[Any, SubHistory]:
    """Pieces gathered per key; with joint keys (union-find), per group of
    keys, each named by its set of keys."""
    subs: dict[Any, SubHistory] = {}
    for key, lop in pieces:
        if uf is not None:
            key = uf.find(key[0]) if key else None
        sub = subs.get(key)
        if sub is None:
            sub = subs[key] = SubHistory(key)
        sub.ops.append(lop)
    if uf is None:
        for k, n in dropped.items():
            if k in subs:
                subs[k].dropped = n
        return subs
    groups: dict[Any, set] = {}
    for k in uf.parent:
        groups.setdefault(uf.find(k), set()).add(k)
    renamed: dict[Any, SubHistory] = {}
    for root, sub in subs.items():
        ks = frozenset(groups.get(root, {root})) if root is not None else frozenset()
        sub.key = ks
        renamed[ks] = sub
    return renamed
