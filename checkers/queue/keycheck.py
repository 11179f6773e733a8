"""The per-key (per topic-partition) half of Jepsen's Kafka checker.

Everything here looks at one key's events (see :mod:`.project`) and nothing
else, which is why the pipeline can run it on Spark executors. It returns the
anomalies found in that key, the key's edges for the cross-key dependency
graph, and its durability partial.

Definitions follow Jepsen's ``jepsen.tests.kafka`` (facts, re-implemented):

* **Version order.** Per key, a log ``offset -> {values}`` built from every
  poll (whatever its completion type: consumers must only ever return
  committed data) and from the sends of operations that must have committed
  (``ok``, or ``info`` with a sent value, in any key, that some ``ok`` poll
  read: :mod:`.project` marks those sends, as Jepsen's
  ``must-have-committed?`` does).
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
  poll; one whose writer must have committed (``ok``, or a proven ``info``)
  and that was not read is lost.
* **G1a** (aborted read): an ``ok`` poll returns a value whose send ``fail``ed.
* **precommitted-read**: an operation polls a value it sent itself (Kafka's
  consumers read committed data only, so a transaction never sees its own
  sends).
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
  values within one operation's reads of a key, unless the operation's
  ``rebalance-log`` names the key (a rebalance during the operation).
* **nonmonotonic-send**: a process's sends to a key go backwards (or repeat)
  in the version order between successive operations.
* **int-send-skip / int-nonmonotonic-send**: consecutive sends to a key within
  one operation skip over, or go back before, other values.

Positions: a polled record, or an acknowledged send, sits at the dense index
of its own offset (its value's index when the offset is unknown). Values are
unique, so this is Jepsen's order, except that a record duplicated at two
offsets is reported once, as ``duplicate``, instead of also making every poll
that returned both copies look like an internal skip and rewind.

The code is one :class:`KeyIndex` (writers, readers and the version order,
built once) and one short function per anomaly family over it, each with
its definition in its docstring.

Graph edges for the cycle search (:mod:`.graph`):
``ww`` writer of index i -> writer of index i+1; ``wr`` writer of the highest
value an op read -> that op; ``rw`` that reader -> writer of the next index.
"""

from __future__ import annotations

import os
from bisect import bisect_left
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from checkers.durability import key_durability
from checkers.history.op import HistoryError

#: an event's offsets and values, taken in C (``map``) rather than by a
#: Python loop over its pairs: a poll's records are most of a history
_OFFSET = itemgetter(0)
_VALUE = itemgetter(1)

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
    "precommitted-read", "lost-read", "poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll",
    "nonmonotonic-send", "int-send-skip", "int-nonmonotonic-send",
)


class _Found:
    """Anomaly accumulator: counts everything, keeps the first ``limit``
    examples of each type (all of them when ``limit`` is None)."""

    __slots__ = ("counts", "examples", "limit")

    def __init__(self, limit: int | None = EXAMPLES) -> None:
        self.counts: dict[str, int] = {}
        self.examples: dict[str, list] = {}
        self.limit = limit

    def add(self, typ: str, ex: dict[str, Any]) -> None:
        c = self.counts.get(typ, 0)
        self.counts[typ] = c + 1
        if self.limit is None or c < self.limit:
            self.examples.setdefault(typ, []).append(ex)


@dataclass
class KeyIndex:
    """Everything the anomaly families of one key read: who wrote each value
    (and how it completed), what ``ok`` polls returned, and the version order.
    Built once by :func:`index_key`."""

    key: str
    events: list
    sends: list = field(default_factory=list)
    reads: list = field(default_factory=list)
    writer: dict[Any, int] = field(default_factory=dict)        # value -> op index of its writer
    writer_type: dict[Any, str] = field(default_factory=dict)
    writer_acks: dict[Any, Any] = field(default_factory=dict)
    #: values whose writer must have committed (ok, or an info op proven
    #: by a read of one of its sends)
    committed: set[Any] = field(default_factory=set)
    #: values every send of which came from a non-idempotent producer
    nonidem: dict[Any, bool] = field(default_factory=dict)
    failed_vals: set[Any] = field(default_factory=set)
    read_ok: set[Any] = field(default_factory=set)
    #: acks=1/0 acknowledged values no poll returned: not placed in the order
    unplaced: set[Any] = field(default_factory=set)
    committed_info: list[int] = field(default_factory=list)
    log: dict[Any, list] = field(default_factory=dict)          # offset -> values, first seen first
    offsets: list = field(default_factory=list)                  # sorted offsets of the log
    by_index: list = field(default_factory=list)                 # dense index -> value
    by_value: dict[Any, int] = field(default_factory=dict)
    first_index: dict[Any, int] = field(default_factory=dict)
    last_index: dict[Any, int] = field(default_factory=dict)
    occurrences: dict[Any, list] = field(default_factory=dict)   # value -> offsets
    retry_slots: set[int] = field(default_factory=set)          # later copies of a retry

    def positions(self, pairs: list) -> list:
        """Dense index of each record: its own offset's, else its value's.
        Kept per event (by the identity of its pairs, which :attr:`events`
        holds): the poll-order and read-edge checks both ask it of every
        ``ok`` poll, whose records are most of a history. The caller must
        not change the list."""
        memo = self._positions
        got = memo.get(id(pairs))
        if got is not None:
            return got
        oi = self._offset_index
        ix = list(map(oi.get, map(_OFFSET, pairs)))
        if None in ix:
            bv = self.by_value.get
            ix = [x if x is not None else bv(v) for x, (_o, v) in zip(ix, pairs)]
        memo[id(pairs)] = ix
        return ix

    @property
    def _positions(self) -> dict[int, list]:
        memo = self.__dict__.get("_pos")
        if memo is None:
            memo = self.__dict__["_pos"] = {}
        return memo

    @property
    def _offset_index(self) -> dict[Any, int]:
        oi = self.__dict__.get("_oi")
        if oi is None:
            oi = self.__dict__["_oi"] = {off: i for i, off in enumerate(self.offsets)}
        return oi


def check_key(key: str, events: list, want_rw: bool = True,
              all_errors: bool = False) -> dict[str, Any]:
    """All per-key checks for one key; ``events`` in history order.
    ``all_errors`` keeps every example (Jepsen's ``--all-errors``), else the
    first :data:`EXAMPLES` of each type."""
    try:
        return _check_key(key, events, want_rw, None if all_errors else EXAMPLES)
    except TypeError as e:  # e.g. a list where a message value should be
        raise HistoryError(f"key {key}: values must be numbers or strings ({e})") from None


def _check_key(key: str, events: list, want_rw: bool, limit: int | None) -> dict[str, Any]:
    found = _Found(limit)
    ix = index_key(key, events)
    inconsistent_offset_cases(ix, found)
    duplicate_cases(ix, found)
    lost_write_cases(ix, found)
    aborted_read_cases(ix, found)
    lost_read_cases(ix, found)
    precommitted_read_cases(ix, found)
    poll_order_cases(ix, found)
    send_order_cases(ix, found)
    unseen_cases(ix, found)
    wr, rw = read_edges(ix, want_rw)
    return {
        "key": key,
        "acked": acked_by_level(ix),
        "pid": os.getpid(),  # which process ran it (the pipeline test checks executors did)
        "counts": found.counts,
        "examples": found.examples,
        "edges": {"ww": ww_edges(ix), "wr": wr, "rw": rw},
        "committed_info": ix.committed_info,
        "durability": key_durability(key, events),
        "stats": {"sends": len(ix.sends), "polls": len(ix.reads), "log_length": len(ix.by_index),
                  "max_offset": ix.offsets[-1] if ix.offsets else None},
    }


# --- the index ---------------------------------------------------------------

def index_key(key: str, events: list) -> KeyIndex:
    ix = KeyIndex(key, events)
    _writers_and_readers(ix)
    _version_order(ix)
    _dense_order(ix)
    return ix


def _send_committed(ev: tuple, read_ok: set[Any]) -> bool:
    """Jepsen's ``must-have-committed?``: ``ok``, or ``info`` with a send that
    some ``ok`` poll read (:mod:`.project` decides that across keys and puts
    it in the event's 9th field; events without it are judged in this key)."""
    if ev[2] == "ok":
        return True
    if ev[2] != "info":
        return False
    if len(ev) > 8:
        return bool(ev[8])
    return any(v in read_ok for _o, v in ev[4])


def _writers_and_readers(ix: KeyIndex) -> None:
    for ev in ix.events:
        kind = ev[3]
        if kind == "w":
            ix.sends.append(ev)
            typ, acks = ev[2], ev[6]
            ni = len(ev) > 7 and ev[7] is False
            for _off, v in ev[4]:
                ix.nonidem[v] = ni and ix.nonidem.get(v, True)
                ix.writer[v] = ev[0]
                ix.writer_type[v] = typ
                ix.writer_acks[v] = acks
                if typ == "fail":
                    ix.failed_vals.add(v)
        elif kind == "r":
            ix.reads.append(ev)
            if ev[2] == "ok":
                ix.read_ok.update(map(_VALUE, ev[4]))
    for ev in ix.sends:
        if _send_committed(ev, ix.read_ok):
            ix.committed.update(v for _o, v in ev[4])
            if ev[2] == "info":
                ix.committed_info.append(ev[0])
    # An acks=1/0 acknowledgement (offset included) is not durable: after a
    # leader change the unreplicated tail is truncated and its offsets reused
    # (seed 003). So such a send places its value in the version order only
    # once some poll returned it; an unread one is judged as a loss of its
    # level (unseen-acks1, lost-acks1-write), not as inconsistent-offsets or
    # as a hole that makes every later poll skip.
    if any(a in WEAK_ACKS for a in ix.writer_acks.values()):
        read_any = {v for ev in ix.reads for _o, v in ev[4]}
        ix.unplaced = {v for v, a in ix.writer_acks.items() if a in WEAK_ACKS and v not in read_any}


def _version_order(ix: KeyIndex) -> None:
    """Every poll's records, then the sends of committed operations."""
    log = ix.log
    get = log.get

    def place(off: Any, v: Any) -> None:
        vs = get(off)
        if vs is None:
            log[off] = [v]
        elif v not in vs:
            vs.append(v)

    for ev in ix.reads:
        # place() inlined: this loop visits every record every poll read
        for off, v in ev[4]:
            if off is not None:
                vs = get(off)
                if vs is None:
                    log[off] = [v]
                elif v not in vs:
                    vs.append(v)
    for ev in ix.sends:
        # a weak (acks=1/0) acknowledgement's offset is not durable either
        # when its value was read: a retry's earlier copy can survive at
        # another offset while the acknowledged copy is truncated and the
        # offset reused (seed 003); only what some poll saw places it
        if ev[6] in WEAK_ACKS:
            continue
        if _send_committed(ev, ix.read_ok):
            for off, v in ev[4]:
                if off is not None:
                    place(off, v)


def _dense_order(ix: KeyIndex) -> None:
    """Offsets made dense (holes are transaction markers); a non-idempotent
    retry's later copies become *retry slots* that no edge goes through."""
    ix.offsets = sorted(ix.log)
    for i, off in enumerate(ix.offsets):
        vs = ix.log[off]
        ix.by_index.append(vs[0])
        ix.by_value[vs[0]] = i
        for v in vs:
            if v not in ix.first_index:
                ix.first_index[v] = i
            ix.last_index[v] = i
            ix.occurrences.setdefault(v, []).append(off)
    for v, offs in ix.occurrences.items():
        if len(offs) > 1 and ix.nonidem.get(v):
            fi = ix.first_index[v]
            ix.by_value[v] = fi
            ix.last_index[v] = fi
            for o in offs:
                j = bisect_left(ix.offsets, o)
                if j != fi and ix.by_index[j] == v:
                    ix.retry_slots.add(j)


# --- anomaly families --------------------------------------------------------

def inconsistent_offset_cases(ix: KeyIndex, found: _Found) -> None:
    """inconsistent-offsets: one offset holds two or more values."""
    for i, off in enumerate(ix.offsets):
        vs = ix.log[off]
        if len(vs) > 1:
            found.add("inconsistent-offsets", {
                "key": ix.key, "offset": off, "index": i, "values": list(vs),
                "ops": sorted({ix.writer[v] for v in vs if v in ix.writer})})


def duplicate_cases(ix: KeyIndex, found: _Found) -> None:
    """duplicate: one value at two or more offsets; duplicate-nonidempotent
    when every send of it came from a non-idempotent producer (a retry)."""
    for v, offs in ix.occurrences.items():
        if len(offs) < 2:
            continue
        ex = {"key": ix.key, "value": v, "count": len(offs), "offsets": offs, "op": ix.writer.get(v)}
        if ix.nonidem.get(v):
            found.add("duplicate-nonidempotent", {**ex, "idempotent": False})
        else:
            found.add("duplicate", ex)


def lost_write_cases(ix: KeyIndex, found: _Found) -> None:
    """lost-write: a committed value at or below the highest index an ``ok``
    poll read (by its last appearance) that no ``ok`` poll returned."""
    bound = max((ix.first_index[v] for v in ix.read_ok if v in ix.first_index), default=-1)
    if bound >= 0:
        for v, li in ix.last_index.items():
            if li <= bound and v not in ix.read_ok and v in ix.committed and v in ix.writer:
                acks = ix.writer_acks.get(v)
                found.add(loss_type("lost-write", acks),
                          {"key": ix.key, "value": v, "index": ix.first_index.get(v),
                           "max-read-index": bound, "op": ix.writer[v],
                           "max-read": ix.by_index[bound], "acks": acks})
    if ix.unplaced and ix.read_ok:
        # an unread weak-acks record still counts as a lost write when an ok
        # poll read past its acknowledged offset
        max_read_off = max((o for ev in ix.reads if ev[2] == "ok" for o, _v in ev[4] if o is not None),
                           default=-1)
        for ev in ix.sends:
            if ev[2] != "ok":
                continue
            for off, v in ev[4]:
                if v in ix.unplaced and off is not None and off < max_read_off:
                    found.add(loss_type("lost-write", ix.writer_acks.get(v)),
                              {"key": ix.key, "value": v, "offset": off, "max-read-offset": max_read_off,
                               "op": ev[0], "acks": ix.writer_acks.get(v)})


def aborted_read_cases(ix: KeyIndex, found: _Found) -> None:
    """G1a: an ``ok`` poll returned a value whose send failed."""
    if not ix.failed_vals:
        return
    for ev in ix.reads:
        if ev[2] == "ok":
            for _o, v in ev[4]:
                if v in ix.failed_vals:
                    found.add("G1a", {"key": ix.key, "value": v, "writer": ix.writer.get(v), "op": ev[0]})


def lost_read_cases(ix: KeyIndex, found: _Found) -> None:
    """lost-read: a value an ``ok`` poll returned that the key's complete
    final read (an ``ok`` poll with ``final``) does not hold. A consumer
    reads only below the high watermark, so what it read was committed,
    whatever its send's acks level or outcome, and a committed record must
    never go (KAFKA-15583: before 3.7 a leader alone could commit, and lose,
    records). A value whose send failed is G1a's, not counted here."""
    final_vals: set[Any] = set()
    final_seen = False
    read_before: dict[Any, int] = {}
    for ev in ix.reads:
        if ev[2] != "ok":
            continue
        if ev[6]:
            final_seen = True
            final_vals.update(v for _o, v in ev[4])
        else:
            for _o, v in ev[4]:
                read_before.setdefault(v, ev[0])
    if not final_seen:
        return
    for v, op in read_before.items():
        if v not in final_vals and v not in ix.failed_vals:
            found.add("lost-read", {"key": ix.key, "value": v, "op": op, "writer": ix.writer.get(v),
                                    "acks": ix.writer_acks.get(v)})


def precommitted_read_cases(ix: KeyIndex, found: _Found) -> None:
    """precommitted-read: an operation (of any completion type) polled a
    value it sent itself; read-committed consumers never see a transaction's
    own sends before it commits."""
    sent_by: dict[int, set] = {}
    for ev in ix.sends:
        sent_by.setdefault(ev[0], set()).update(v for _o, v in ev[4])
    if not sent_by:
        return
    for ev in ix.reads:
        own = sent_by.get(ev[0])
        if own:
            bad = [v for _o, v in ev[4] if v in own]
            if bad:
                found.add("precommitted-read", {"key": ix.key, "value": bad[0], "op": ev[0]})


def _order_case(found: _Found, ix: KeyIndex, skip: str, back: str, i1: Any, i2: Any,
                values: list, where: dict[str, Any]) -> None:
    """One step between two records: ``skip`` when it jumps over records,
    ``back`` when it goes backwards or repeats."""
    delta = (i2 - i1) if (i1 is not None and i2 is not None) else 1
    if delta > 1:
        found.add(skip, {"key": ix.key, "values": values, "delta": delta,
                         "skipped": ix.by_index[i1 + 1:i2][:8], **where})
    elif delta < 1:
        found.add(back, {"key": ix.key, "values": values, "delta": delta, **where})


def poll_order_cases(ix: KeyIndex, found: _Found) -> None:
    """int-poll-skip / int-nonmonotonic-poll between consecutive records of
    one poll (not for a key the op's ``rebalance-log`` names); poll-skip / nonmonotonic-poll between a process's successive
    polls (an assign that drops the key forgets the position; a final read
    is a fresh consumer, so it neither continues nor resets it)."""
    last_read: dict[Any, tuple[int, Any, Any]] = {}   # process -> (op, last value, its index)
    for ev in ix.events:
        idx, proc, typ, kind, pairs = ev[:5]
        if kind == "a":
            if not pairs:
                last_read.pop(proc, None)
            continue
        if kind != "r":
            continue
        vals = list(map(_VALUE, pairs))
        pos = ix.positions(pairs)
        n = len(pos)
        straight = n > 0 and None not in pos and pos == list(range(pos[0], pos[0] + n))
        moved = len(ev) > 7 and ev[7]  # a rebalance moved this key during the op
        if n > 1 and not straight and not moved:
            for j in range(1, n):
                _order_case(found, ix, "int-poll-skip", "int-nonmonotonic-poll", pos[j - 1], pos[j],
                            [vals[j - 1], vals[j]], {"op": idx})
        is_final = bool(ev[6])
        lr = None if is_final else last_read.get(proc)
        if lr is not None and vals:
            _order_case(found, ix, "poll-skip", "nonmonotonic-poll", lr[2], pos[0],
                        [lr[1], vals[0]], {"ops": [lr[0], idx]})
        if typ == "ok" and not is_final:
            last_read[proc] = (idx, vals[-1], pos[-1]) if vals else (idx, None, None)


def send_order_cases(ix: KeyIndex, found: _Found) -> None:
    """int-send-skip / int-nonmonotonic-send between consecutive sends of one
    operation; nonmonotonic-send when a process's next operation sends before
    (or at) its previous one in the version order."""
    last_send: dict[Any, tuple[int, Any, Any]] = {}
    for ev in ix.events:
        idx, proc, typ, kind, pairs = ev[:5]
        if kind == "a":
            if not pairs:
                last_send.pop(proc, None)
            continue
        if kind != "w" or typ == "invoke":
            continue
        vals = [v for _o, v in pairs]
        if ev[6] in WEAK_ACKS:
            # an acks=1/0 acknowledgement's offset is not durable (seed 003):
            # the record sits where a poll read it, or nowhere yet (unplaced)
            pos = [ix.by_value.get(v, ix.first_index.get(v)) for v in vals]
        else:
            pos = ix.positions(pairs)
        for j in range(1, len(vals)):
            _order_case(found, ix, "int-send-skip", "int-nonmonotonic-send", pos[j - 1], pos[j],
                        [vals[j - 1], vals[j]], {"op": idx})
        if typ in ("ok", "info") and vals:
            ls = last_send.get(proc)
            if ls is not None and ls[2] is not None and pos[0] is not None and pos[0] - ls[2] < 1:
                found.add("nonmonotonic-send", {"key": ix.key, "values": [ls[1], vals[0]],
                                                "delta": pos[0] - ls[2], "ops": [ls[0], idx]})
            if not (ix.unplaced and all(v in ix.unplaced for v in vals)):
                last_send[proc] = (idx, vals[-1], pos[-1])


def unseen_cases(ix: KeyIndex, found: _Found) -> None:
    """unseen: a value an ``ok`` send acknowledged that no ``ok`` poll ever
    returned (named for its acks level)."""
    vals = sorted((ix.writer[v], v) for v, t in ix.writer_type.items() if t == "ok" and v not in ix.read_ok)
    for op, v in vals:
        acks = ix.writer_acks.get(v)
        found.add(loss_type("unseen", acks), {"key": ix.key, "value": v, "op": op, "acks": acks})


def acked_by_level(ix: KeyIndex) -> dict[str, int]:
    """Acknowledged sends by acks level (the verdict's coverage rule)."""
    out: dict[str, int] = {}
    for v, t in ix.writer_type.items():
        if t == "ok":
            lv = str(ix.writer_acks.get(v))
            out[lv] = out.get(lv, 0) + 1
    return out


# --- graph edges -------------------------------------------------------------

def ww_edges(ix: KeyIndex) -> list[int]:
    """Writer of index i -> writer of the next committed index (flat pairs)."""
    edges: list[int] = []
    prev_w = None
    for i, v in enumerate(ix.by_index):
        if i in ix.retry_slots:
            continue  # the order passes over a retry copy
        w = ix.writer.get(v)
        if w is None or ix.writer_type.get(v) == "fail":
            continue  # no committed writer: the order still passes through it
        if prev_w is not None and prev_w != w:
            edges.append(prev_w)
            edges.append(w)
        prev_w = w
    return edges


def read_edges(ix: KeyIndex, want_rw: bool) -> tuple[list[int], list[int]]:
    """``wr`` writer of an ``ok`` poll's highest record -> the poll; ``rw``
    the poll -> writer of the next record (flat pairs)."""
    wr: list[int] = []
    rw: list[int] = []
    slots = ix.retry_slots
    for ev in ix.reads:
        if ev[2] != "ok":
            continue
        idx = ev[0]
        pos = ix.positions(ev[4])
        if slots or None in pos:  # else every record counts: no pass over them
            pos = [i for i in pos if i is not None and i not in slots]
        hi = max(pos, default=-1)
        if hi < 0:
            continue
        w = ix.writer.get(ix.by_index[hi])
        if w is not None and w != idx and ix.writer_type.get(ix.by_index[hi]) != "fail":
            wr.append(w)
            wr.append(idx)
        nxt = hi + 1
        while nxt in slots:
            nxt += 1
        if want_rw and nxt < len(ix.by_index):
            w2 = ix.writer.get(ix.by_index[nxt])
            if w2 is not None and w2 != idx:
                rw.append(idx)
                rw.append(w2)
    return wr, rw
