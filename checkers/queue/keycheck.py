"""The per-key (per topic-partition) half of Jepsen's Kafka checker.

Everything here looks at one key's events (see :mod:`.project`) and nothing
else, which is why the pipeline can run it on Spark executors. It returns the
anomalies found in that key, the key's edges for the cross-key dependency
graph, and its durability partial.

Definitions follow Jepsen's ``jepsen.tests.kafka`` (facts, re-implemented):

* **Version order.** Per key, a log ``offset -> {values}`` built from every
  poll (whatever its completion type: consumers must only ever return
  committed data) and from the sends of operations that must have committed
  (``ok``, or ``info`` with a sent value that some ``ok`` poll read).
  Offsets are made dense (holes are transaction markers, not data); a value's
  *index* is its position in that dense order.
* **inconsistent-offsets**: one offset holds two or more values.
* **duplicate**: one value sits at two or more offsets.
* **duplicate-nonidempotent**: the same, when every send of the value came
  from a producer that said it was not idempotent (``"idempotent": false``).
  Without idempotence a producer's internal retry of a request whose answer
  was lost (e.g. NOT_LEADER_OR_FOLLOWER after the old leader had appended it)
  appends the batch again: at-least-once delivery, Kafka's documented
  behaviour, not a replication bug. Only the value's first occurrence takes
  part in the version order (the later copies are *retry slots*: they keep
  their offset, so polls stay dense, but no ww/wr/rw edge goes through
  them), so no G0/G1c cycle is built from the retry. Idempotent producers
  (or sends of unknown provenance) promise exactly-once appends, so their
  duplicates stay ``duplicate``.
* **lost-write**: for the highest index any ``ok`` poll read, every value
  whose last appearance is at or below it should have been read by some ``ok``
  poll; a committed one that was not is lost.
* **G1a** (aborted read): an ``ok`` poll returns a value whose send ``fail``ed.
* **unseen**: a value from an ``ok`` send that no ``ok`` poll ever returned.
* ``lost-write`` and ``unseen`` of an acks=1 (acks=0) send are reported as
  ``lost-write-acks1``/``unseen-acks1`` (``-acks0``): the same finding, named
  for the weaker promise (see :data:`WEAK_ACKS`).
* **poll-skip / nonmonotonic-poll**: a process's successive polls of a key
  must continue where the previous one stopped: the first value of the next
  poll is at index ``i+1`` of the previous poll's last value (``> i+1`` skips,
  ``<= i`` goes backwards). An assign/subscribe forgets positions of keys no
  longer assigned. Final reads (``final: true``) are fresh consumers reading
  from offset 0, so they neither continue nor reset a process's position.
* **int-poll-skip / int-nonmonotonic-poll**: the same between consecutive
  values within one operation's reads of a key.
* **nonmonotonic-send**: a process's sends to a key go backwards (or repeat)
  in the version order between successive operations.
* **int-send-skip / int-nonmonotonic-send**: consecutive sends to a key within
  one operation skip over, or go back before, other values.

Positions: a polled record, or an acknowledged send, sits at the dense index
of its own offset (its value's index when the offset is unknown). Values are
unique, so this is Jepsen's order, except that a record duplicated at two
offsets is reported once, as ``duplicate``, instead of also making every poll
that returned both copies look like an internal skip and rewind.

Graph edges for the cycle search (:mod:`.graph`):
``ww`` writer of index i -> writer of index i+1; ``wr`` writer of the highest
value an op read -> that op; ``rw`` that reader -> writer of the next index.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from typing import Any

from checkers.durability import key_durability

EXAMPLES = 32

#: acks levels whose acknowledgement does not promise survival of a leader
#: failure (seed 003: acks=1 is answered by the leader alone, acks=0 by
#: nobody). Their lost/unseen records get their own anomaly types,
#: ``<type>-acks1`` / ``<type>-acks0``, so the verdict can judge each write by
#: the guarantee its acks level carries; acks=all and unknown acks (Jepsen's
#: histories, whose producer uses acks=all) keep Jepsen's names.
WEAK_ACKS = {"1": "-acks1", "0": "-acks0"}

#: the anomaly types that are about a record going missing (by acks level)
LOSS_TYPES = ("lost-write", "unseen")
WEAK_LOSS_TYPES = tuple(t + sfx for t in LOSS_TYPES for sfx in WEAK_ACKS.values())


def loss_type(base: str, acks: Any) -> str:
    """``lost-write``/``unseen`` named for the writer's acks level."""
    return base + WEAK_ACKS.get(acks, "") if acks is not None else base


ANOMALY_TYPES = (
    "duplicate", "duplicate-nonidempotent", "inconsistent-offsets", "lost-write", "unseen", *WEAK_LOSS_TYPES, "G1a",
    "poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll",
    "nonmonotonic-send", "int-send-skip", "int-nonmonotonic-send",
)


class _Found:
    """Anomaly accumulator: counts everything, keeps the first examples."""

    __slots__ = ("counts", "examples")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list] = {}

    def add(self, typ: str, ex: dict[str, Any]) -> None:
        c = self.counts.get(typ, 0)
        self.counts[typ] = c + 1
        if c < EXAMPLES:
            self.examples.setdefault(typ, []).append(ex)


def check_key(key: str, events: list, want_rw: bool = True) -> dict[str, Any]:
    """All per-key checks for one key; ``events`` in history order."""
    try:
        return _check_key(key, events, want_rw)
    except TypeError as e:  # e.g. a list where a message value should be
        from checkers.history.op import HistoryError

        raise HistoryError(f"key {key}: values must be numbers or strings ({e})") from None


def _check_key(key: str, events: list, want_rw: bool) -> dict[str, Any]:
    found = _Found()

    # --- writers, readers -------------------------------------------------
    writer: dict[Any, int] = {}        # value -> op index of its writer
    writer_type: dict[Any, str] = {}
    writer_acks: dict[Any, Any] = {}
    # values every send of which was by a producer that said it was not
    # idempotent (a retry may have appended them twice)
    nonidem: dict[Any, bool] = {}
    failed_vals: set[Any] = set()
    read_ok: set[Any] = set()
    sends: list = []
    reads: list = []
    for ev in events:
        kind = ev[3]
        if kind == "w":
            sends.append(ev)
            typ = ev[2]
            acks = ev[6]
            ni = len(ev) > 7 and ev[7] is False
            for _off, v in ev[4]:
                nonidem[v] = ni and nonidem.get(v, True)
                writer[v] = ev[0]
                writer_type[v] = typ
                writer_acks[v] = acks
                if typ == "fail":
                    failed_vals.add(v)
        elif kind == "r":
            reads.append(ev)
            if ev[2] == "ok":
                for _off, v in ev[4]:
                    read_ok.add(v)

    # --- version order ----------------------------------------------------
    log: dict[Any, list] = {}   # offset -> values in first-seen order
    # An acks=1/0 acknowledgement (offset included) is not durable: after a
    # leader change the unreplicated tail is truncated and its offsets reused
    # (seed 003). So such a send places its value in the version order only
    # once some poll returned it; an unread one is judged as a loss of its
    # level (unseen-acks1, lost-acks1-write), not as inconsistent-offsets or
    # as a hole that makes every later poll skip.
    unplaced: set[Any] = set()
    if any(a in WEAK_ACKS for a in writer_acks.values()):
        read_any = {v for ev in reads for _o, v in ev[4]}
        unplaced = {v for v, a in writer_acks.items() if a in WEAK_ACKS and v not in read_any}
    committed_info: list[int] = []

    log_get = log.get
    for ev in reads:
        for off, v in ev[4]:
            if off is not None:
                vs = log_get(off)
                if vs is None:
                    log[off] = [v]
                elif v not in vs:
                    vs.append(v)
    for ev in sends:
        typ = ev[2]
        if typ == "ok":
            use = True
        elif typ == "info":
            use = any(v in read_ok for _o, v in ev[4])
            if use:
                committed_info.append(ev[0])
        else:
            use = False
        if use:
            for off, v in ev[4]:
                if off is not None and v not in unplaced:
                    vs = log_get(off)
                    if vs is None:
                        log[off] = [v]
                    elif v not in vs:
                        vs.append(v)

    offsets = sorted(log)
    by_index: list[Any] = []
    by_value: dict[Any, int] = {}
    first_index: dict[Any, int] = {}
    last_index: dict[Any, int] = {}
    occurrences: dict[Any, list] = {}
    for i, off in enumerate(offsets):
        vs = log[off]
        by_index.append(vs[0])
        by_value[vs[0]] = i
        if len(vs) > 1:
            found.add("inconsistent-offsets", {
                "key": key, "offset": off, "index": i, "values": list(vs),
                "ops": sorted({writer[v] for v in vs if v in writer})})
        for v in vs:
            if v not in first_index:
                first_index[v] = i
            last_index[v] = i
            occurrences.setdefault(v, []).append(off)
    retry_slots: set[int] = set()   # later copies of a non-idempotent duplicate
    for v, offs in occurrences.items():
        if len(offs) > 1:
            if nonidem.get(v):
                found.add("duplicate-nonidempotent",
                          {"key": key, "value": v, "count": len(offs), "offsets": offs,
                           "op": writer.get(v), "idempotent": False})
                fi = first_index[v]
                by_value[v] = fi
                last_index[v] = fi
                for o in offs:
                    j = bisect_left(offsets, o)
                    if j != fi and by_index[j] == v:
                        retry_slots.add(j)
            else:
                found.add("duplicate", {"key": key, "value": v, "count": len(offs), "offsets": offs,
                                        "op": writer.get(v)})

    # --- lost-write -------------------------------------------------------
    bound = -1
    for v in read_ok:
        i = first_index.get(v)
        if i is not None and i > bound:
            bound = i
    if bound >= 0:
        for v, li in last_index.items():
            if li <= bound and v not in read_ok:
                w = writer.get(v)
                if w is None or writer_type.get(v) != "ok":
                    continue  # only committed writes can be lost (info ones unread are not)
                acks = writer_acks.get(v)
                found.add(loss_type("lost-write", acks),
                          {"key": key, "value": v, "index": first_index.get(v),
                           "max-read-index": bound, "op": w, "max-read": by_index[bound],
                           "acks": acks})
    if unplaced and read_ok:
        # an unread weak-acks record still counts as a lost write when an ok
        # poll read past its acknowledged offset
        max_read_off = max((o for ev in reads if ev[2] == "ok" for o, _v in ev[4] if o is not None),
                           default=-1)
        for ev in sends:
            if ev[2] != "ok":
                continue
            for off, v in ev[4]:
                if v in unplaced and off is not None and off < max_read_off:
                    found.add(loss_type("lost-write", writer_acks.get(v)),
                              {"key": key, "value": v, "offset": off, "max-read-offset": max_read_off,
                               "op": ev[0], "acks": writer_acks.get(v)})

    # --- G1a, int-poll, poll-skip -----------------------------------------
    bv = by_value.get
    oi = {off: i for i, off in enumerate(offsets)}.get

    def positions(pairs: list) -> list:
        """Dense index of each record: its own offset's, else its value's."""
        ix = [oi(o) for o, _v in pairs]
        if None in ix:
            ix = [x if x is not None else bv(v) for x, (_o, v) in zip(ix, pairs)]
        return ix

    last_read: dict[Any, tuple[int, Any, Any]] = {}   # process -> (op, last value, its index)
    last_send: dict[Any, tuple[int, Any, Any]] = {}
    edges_wr: list[int] = []
    edges_rw: list[int] = []
    for ev in events:
        idx, proc, typ, kind, pairs, _t, _meta = ev[:7]
        if kind == "a":
            if not pairs:
                last_read.pop(proc, None)
                last_send.pop(proc, None)
            continue
        if kind == "r":
            vals = [v for _o, v in pairs]
            ix = positions(pairs)
            n = len(ix)
            # the common case: a run of consecutive indices, nothing to report
            straight = n > 0 and None not in ix and ix == list(range(ix[0], ix[0] + n))
            if failed_vals and typ == "ok":
                for v in vals:
                    if v in failed_vals:
                        found.add("G1a", {"key": key, "value": v, "writer": writer.get(v), "op": idx})
            if n > 1 and not straight:
                for j in range(1, n):
                    i1, i2 = ix[j - 1], ix[j]
                    delta = (i2 - i1) if (i2 is not None and i1 is not None) else 1
                    if delta > 1:
                        found.add("int-poll-skip", {"key": key, "values": [vals[j - 1], vals[j]],
                                                    "delta": delta, "skipped": by_index[i1 + 1:i2][:8],
                                                    "op": idx})
                    elif delta < 1:
                        found.add("int-nonmonotonic-poll", {"key": key, "values": [vals[j - 1], vals[j]],
                                                            "delta": delta, "op": idx})
            # across the process's ops; a final read is a fresh consumer
            # reading from offset 0, not a continuation of the process's polls
            is_final = bool(_meta)
            lr = None if is_final else last_read.get(proc)
            if lr is not None and vals:
                v0, v1 = lr[1], vals[0]
                i, i2 = lr[2], ix[0]
                delta = (i2 - i) if (i is not None and i2 is not None) else 1
                if delta > 1:
                    found.add("poll-skip", {"key": key, "values": [v0, v1], "delta": delta,
                                            "skipped": by_index[i + 1:i2][:8], "ops": [lr[0], idx]})
                elif delta < 1:
                    found.add("nonmonotonic-poll", {"key": key, "values": [v0, v1], "delta": delta,
                                                    "ops": [lr[0], idx]})
            if typ == "ok":
                if not is_final:
                    last_read[proc] = (idx, vals[-1], ix[-1]) if vals else (idx, None, None)
                # wr / rw edges from this read's highest value
                if straight:
                    hi = ix[-1]
                else:
                    hi = max((i for i in ix if i is not None), default=-1)
                if retry_slots and hi in retry_slots:
                    # a retry copy is not a version: the read's place in
                    # the order is its highest first-occurrence record
                    hi = max((i for i in ix if i is not None and i not in retry_slots), default=-1)
                if hi >= 0:
                    w = writer.get(by_index[hi])
                    if w is not None and w != idx and writer_type.get(by_index[hi]) != "fail":
                        edges_wr.append(w)
                        edges_wr.append(idx)
                    nxt = hi + 1
                    while nxt in retry_slots:
                        nxt += 1
                    if want_rw and nxt < len(by_index):
                        w2 = writer.get(by_index[nxt])
                        if w2 is not None and w2 != idx:
                            edges_rw.append(idx)
                            edges_rw.append(w2)
        elif kind == "w":
            if typ == "invoke":
                continue
            vals = [v for _o, v in pairs]
            ix = positions(pairs)
            if unplaced:
                ix = [None if v in unplaced else i for i, v in zip(ix, vals)]
            prev_i = None
            prev_v = None
            for j, v in enumerate(vals if len(vals) > 1 else ()):
                i2 = ix[j]
                if j > 0:
                    delta = (i2 - prev_i) if (i2 is not None and prev_i is not None) else 1
                    if delta > 1:
                        found.add("int-send-skip", {"key": key, "values": [prev_v, v], "delta": delta,
                                                    "skipped": by_index[prev_i + 1:i2][:8], "op": idx})
                    elif delta < 1:
                        found.add("int-nonmonotonic-send", {"key": key, "values": [prev_v, v],
                                                            "delta": delta, "op": idx})
                prev_i, prev_v = i2, v
            if typ in ("ok", "info") and vals:
                ls = last_send.get(proc)
                if ls is not None:
                    i, i2 = ls[2], ix[0]
                    if i is not None and i2 is not None and i2 - i < 1:
                        found.add("nonmonotonic-send", {"key": key, "values": [ls[1], vals[0]],
                                                        "delta": i2 - i, "ops": [ls[0], idx]})
                if not (unplaced and all(v in unplaced for v in vals)):
                    last_send[proc] = (idx, vals[-1], ix[-1])

    # --- unseen -----------------------------------------------------------
    unseen_vals = [(writer[v], v) for v, t in writer_type.items() if t == "ok" and v not in read_ok]
    if unseen_vals:
        unseen_vals.sort()
        for op, v in unseen_vals:
            acks = writer_acks.get(v)
            found.add(loss_type("unseen", acks), {"key": key, "value": v, "op": op, "acks": acks})

    # --- acknowledged sends by acks level (the verdict's coverage rule) ---
    acked_by_level: dict[str, int] = {}
    for v, t in writer_type.items():
        if t == "ok":
            lv = str(writer_acks.get(v))
            acked_by_level[lv] = acked_by_level.get(lv, 0) + 1

    # --- ww edges ---------------------------------------------------------
    edges_ww: list[int] = []
    prev_w = None
    for i, v in enumerate(by_index):
        if retry_slots and i in retry_slots:
            continue  # the order passes over a retry copy
        w = writer.get(v)
        if w is None or writer_type.get(v) == "fail":
            continue  # no committed writer: the order still passes through it
        if prev_w is not None and prev_w != w:
            edges_ww.append(prev_w)
            edges_ww.append(w)
        prev_w = w

    return {
        "key": key,
        "acked": acked_by_level,
        "pid": os.getpid(),  # which process ran it (the pipeline test checks executors did)
        "counts": found.counts,
        "examples": found.examples,
        "edges": {"ww": edges_ww, "wr": edges_wr, "rw": edges_rw},
        "committed_info": committed_info,
        "durability": key_durability(key, events),
        "stats": {"sends": len(sends), "polls": len(reads), "log_length": len(by_index),
                  "max_offset": offsets[-1] if offsets else None},
    }
