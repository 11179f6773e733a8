"""Project a queue history onto topic-partitions.

Every queue check but the cross-key cycle search looks at one key
(topic-partition) at a time, so the history is cut once into per-key event
lists; those are what the pipeline ships to executors. The cut is one pass
over the history with plain tuples (no per-op objects) because it is the
part of a 1M-op check that cannot be parallelised.

An event is a tuple ``(op, process, type, kind, pairs, time, meta)``:

``op``       the completion's op index (the invocation's for an invocation
             that never completed, which counts as ``info``)
``type``     ``ok | info | fail``
``kind``     ``"w"`` (sends to this key), ``"r"`` (polls of it), or ``"a"``
             (an ok/info assign/subscribe; ``pairs`` is then True if the key
             is still assigned afterwards)
``pairs``    list of ``(offset or None, value)`` in micro-op order
``time``     completion time in ns (None if the op never completed)
``meta``     for sends the ``acks`` setting ("all", "1", "0" or None); for
             polls True when the op is a final read
``idem``     (sends only, an 8th element) the send op's ``idempotent`` flag:
             True, False, or None when the history does not say. A
             non-idempotent producer's internal retry may append a record
             twice (Kafka's at-least-once without idempotence), so the
             duplicate check needs the writer's provenance.
``rebalanced`` (polls only, an 8th element, present when the op carried a
             ``rebalance-log``) True when the log names this key.
``committed`` (``info`` sends only, a 9th element) True when some ``ok`` poll
             read one of the operation's sends, in any key: Jepsen's
             ``must-have-committed?`` (:func:`_mark_committed_info`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from checkers.history.op import HistoryError, Op

QUEUE_FS = frozenset(("send", "poll", "txn"))
SUB_FS = frozenset(("assign", "subscribe"))

Event = tuple  # (op, process, type, kind, pairs, time, meta[, idem])


@dataclass
class OpTable:
    """The compact per-op projection used by the cross-key (process and
    realtime) analysis: one entry per completed queue op."""

    index: list[int] = field(default_factory=list)
    process: list[Any] = field(default_factory=list)
    type: list[str] = field(default_factory=list)
    invoke_time: list[int] = field(default_factory=list)
    complete_time: list[int | None] = field(default_factory=list)


@dataclass
class Projection:
    keys: dict[str, list[Event]]
    ops: OpTable
    n_ops: int
    warnings: list[str]
    counts: dict[str, int]


def _pairs_of(x: Any) -> tuple[Any, Any]:
    """A send's argument: ``[offset, value]`` once acknowledged, else the
    bare value (invocations, and completions whose offset is unknown)."""
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return x[0], x[1]
    return None, x


def project(ops: list[Op]) -> Projection:
    keys: dict[str, list[Event]] = {}
    table = OpTable()
    t_index, t_proc, t_type, t_inv, t_cmp = (
        table.index, table.process, table.type, table.invoke_time, table.complete_time)
    warnings: list[str] = []
    pending: dict[Any, Op] = {}
    assigns: list[tuple[int, Any, str, frozenset[str]]] = []
    counts = {"ops": len(ops), "invoke": 0, "ok": 0, "fail": 0, "info": 0, "nemesis": 0}

    def emit(c: Op, inv: Op | None, ctype: str, ctime: int | None) -> None:
        f = c.f
        if f in SUB_FS:
            if ctype != "fail":
                val = c.value if c.value is not None else (inv.value if inv is not None else [])
                assigns.append((c.index, c.process, ctype, frozenset(str(k) for k in (val or ()))))
            return
        if f not in QUEUE_FS:
            return
        value = c.value
        if value is None and inv is not None:
            value = inv.value
        if not isinstance(value, list):
            if value is not None:
                warnings.append(f"op {c.index}: {f} value is not a list of micro-ops; ignored")
            return
        itime = inv.time if inv is not None else c.time
        idx = c.index
        proc = c.process
        t_index.append(idx)
        t_proc.append(proc)
        t_type.append(ctype)
        t_inv.append(itime)
        t_cmp.append(ctime)
        extra = c.extra
        acks = extra.get("acks")
        if acks is None and inv is not None:
            acks = inv.extra.get("acks")
        if acks is not None:
            acks = str(acks)
            if acks == "-1":  # the producer's own spelling of acks=all
                acks = "all"
        idem = extra.get("idempotent")
        if idem is None and inv is not None:
            idem = inv.extra.get("idempotent")
        if idem is not None:
            idem = bool(idem)
        final = bool(extra.get("final") or (inv is not None and inv.extra.get("final")))
        moved = _rebalanced(extra)
        if len(value) == 1:
            # the common case: one micro-op, one key (sends) — no dict churn
            mop = value[0]
            if not isinstance(mop, list) or not mop:
                warnings.append(f"op {idx}: malformed micro-op {mop!r}; ignored")
                return
            m0 = mop[0]
            if m0 == "send" and len(mop) >= 3:
                k = str(mop[1])
                x = mop[2]
                if isinstance(x, list) and len(x) == 2:
                    pr = (x[0], x[1])
                else:
                    pr = (None, x)
                ev = (idx, proc, ctype, "w", [pr], ctime, acks, idem)
                lst = keys.get(k)
                if lst is None:
                    keys[k] = [ev]
                else:
                    lst.append(ev)
                return
            if m0 == "poll":
                if len(mop) >= 2 and isinstance(mop[1], dict):
                    for k, prs in mop[1].items():
                        k = str(k)
                        ev = (idx, proc, ctype, "r",
                              [(p[0], p[1]) for p in prs] if prs else [], ctime, final)
                        if moved:
                            ev = ev + (k in moved,)
                        lst = keys.get(k)
                        if lst is None:
                            keys[k] = [ev]
                        else:
                            lst.append(ev)
                return
            if m0 != "send":
                warnings.append(f"op {idx}: unknown micro-op {m0!r}; ignored")
                return
        # general case: a transaction mixing sends and polls over several keys
        writes: dict[str, list] = {}
        reads: dict[str, list] = {}
        for mop in value:
            if not isinstance(mop, list) or not mop:
                warnings.append(f"op {idx}: malformed micro-op {mop!r}; ignored")
                continue
            m0 = mop[0]
            if m0 == "send" and len(mop) >= 3:
                writes.setdefault(str(mop[1]), []).append(_pairs_of(mop[2]))
            elif m0 == "poll":
                if len(mop) >= 2 and isinstance(mop[1], dict):
                    for k, prs in mop[1].items():
                        reads.setdefault(str(k), []).extend((p[0], p[1]) for p in (prs or ()))
            else:
                warnings.append(f"op {idx}: unknown micro-op {m0!r}; ignored")
        for k, prs in writes.items():
            keys.setdefault(k, []).append((idx, proc, ctype, "w", prs, ctime, acks, idem))
        for k, prs in reads.items():
            ev = (idx, proc, ctype, "r", prs, ctime, final)
            keys.setdefault(k, []).append(ev + (k in moved,) if moved else ev)

    for op in ops:
        t = op.type
        counts[t] = counts.get(t, 0) + 1
        p = op.process
        if p == "nemesis":
            counts["nemesis"] += 1
            continue
        if t == "invoke":
            prev = pending.get(p)
            if prev is not None:
                warnings.append(f"op {op.index}: process {p} invoked while op {prev.index} was open; "
                                f"op {prev.index} counts as info")
                emit(prev, prev, "info", None)
            pending[p] = op
            continue
        inv = pending.pop(p, None)
        try:
            emit(op, inv, t, op.time)
        except (TypeError, IndexError, KeyError, AttributeError) as e:
            raise HistoryError(f"op {op.index}: malformed {op.f} value {_short(op.value)} ({e})") from None
    for inv in sorted(pending.values(), key=lambda o: o.index):
        try:
            emit(inv, inv, "info", None)
        except (TypeError, IndexError, KeyError, AttributeError) as e:
            raise HistoryError(f"op {inv.index}: malformed {inv.f} value {_short(inv.value)} ({e})") from None
    counts["unfinished"] = len(pending)

    _mark_committed_info(keys)
    if assigns:
        _merge_assigns(keys, assigns)
    return Projection(keys=keys, ops=table, n_ops=len(ops), warnings=warnings, counts=counts)


def _rebalanced(extra: dict[str, Any]) -> frozenset[str]:
    """Keys named by the op's ``rebalance-log`` (Jepsen: the group
    coordinator moved partitions during the operation, a list of maps with
    ``keys``): their reads within the op need not be contiguous."""
    log = extra.get("rebalance-log", extra.get("rebalance_log"))
    if not log or not isinstance(log, list):
        return frozenset()
    return frozenset(str(k) for ev in log if isinstance(ev, dict)
                     for k in (ev.get("keys") or ()) if not isinstance(k, (list, dict)))


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _mark_committed_info(keys: dict[str, list[Event]]) -> set[int]:
    """An ``info`` operation (it may or may not have happened) must have
    committed once an ``ok`` poll returned one of its sends, whichever key
    that send went to; so all its sends, in every key, take part in the
    version order and can be lost. Marks each ``info`` send event with that
    verdict (a 9th element) and returns the committed ops."""
    committed: set[int] = set()
    info_sends = False
    for evs in keys.values():
        read_ok = None
        for ev in evs:
            if ev[3] == "w" and ev[2] == "info":
                info_sends = True
                if read_ok is None:
                    read_ok = {v for e in evs if e[3] == "r" and e[2] == "ok" for _o, v in e[4]}
                if any(v in read_ok for _o, v in ev[4]):
                    committed.add(ev[0])
    if info_sends:
        for k, evs in keys.items():
            keys[k] = [ev + (ev[0] in committed,) if ev[3] == "w" and ev[2] == "info" else ev
                       for ev in evs]
    return committed


def _merge_assigns(keys: dict[str, list[Event]], assigns: list) -> None:
    """Broadcast each assign/subscribe to every key, as an ``"a"`` event
    saying whether the key is still assigned (Jepsen keeps a process's
    last-read position only for keys it is still assigned)."""
    for k, evs in keys.items():
        extra = [(idx, proc, ctype, "a", k in ks, None, None) for idx, proc, ctype, ks in assigns]
        merged = evs + extra
        merged.sort(key=lambda e: e[0])
        keys[k] = merged
