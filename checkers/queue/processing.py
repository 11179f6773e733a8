"""Consume-transform-produce: was every committed input processed, and
processed once?

A ``ctp`` operation (``workloads/ctp.py``) reads input records in a
consumer group, writes one output record per input (the same value: input
values are unique, so an output names its input) and commits the input
offsets after what it read. The output topic is read in full by the final
reads marked ``"output": true``. Two anomaly families, each a function of
the folded history below with its definition beside it:

``duplicate-processing``
    an input value that the final reads of the output topic returned at
    two or more positions (key, offset): the input was processed, and its
    output made visible, more than once. Allowed under at-least-once
    processing (offsets committed after the outputs, without a
    transaction: a crash or a rebalance between the two makes the next
    owner process the input again); an anomaly when every round was a
    transaction that committed outputs and offsets together
    (``"txn": true``: exactly-once, read ``read_committed``).

``lost-processing``
    an input record that the group has committed past, or whose output was
    acknowledged, and whose output no final read of the output topic
    returned. "Committed past": an ``ok`` round without ``commit-error``
    committed offset c on its input key, and the record's offset is below
    c; the record is known from a round's reads or from a final read of
    the input key. A record is only judged when every output key's final
    read completed ``ok`` (else absence proves nothing: "unknown"). Never
    allowed: offsets are committed only after the outputs are acknowledged
    (acks=all), so a committed input without an output is either a lost
    acknowledged write or a commit past records nobody processed.

Neither family needs the queue checker's per-key analysis; the fold keeps
one entry per input value and per output record, not the operations.
"""

from __future__ import annotations

from typing import Any, Iterable

from checkers.history.op import Op
from checkers.verdict import UNKNOWN

DUPLICATE = "duplicate-processing"
LOST = "lost-processing"
ANOMALY_TYPES = (DUPLICATE, LOST)
#: examples kept per family
EXAMPLES = 32


def _polls(value: Any) -> Iterable[tuple[str, list]]:
    if not isinstance(value, list):
        return
    for mop in value:
        if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "poll" and isinstance(mop[1], dict):
            for k, pairs in mop[1].items():
                yield str(k), [p for p in (pairs or ()) if isinstance(p, (list, tuple)) and len(p) == 2]


def _sends(value: Any) -> Iterable[tuple[str, Any, Any]]:
    if not isinstance(value, list):
        return
    for mop in value:
        if isinstance(mop, list) and len(mop) >= 3 and mop[0] == "send":
            x = mop[2]
            if isinstance(x, (list, tuple)) and len(x) == 2:
                yield str(mop[1]), x[0], x[1]


def _record(known: dict[int, Any], reads: Iterable[Any]) -> None:
    """Final reads' ``[offset, value]`` records into ``known``, where no
    round or earlier final read put one."""
    for pairs in reads:
        for p in pairs or ():
            if isinstance(p, (list, tuple)) and len(p) == 2 and isinstance(p[0], int):
                known.setdefault(p[0], p[1])


class Processing:
    """The fold (:meth:`feed` every operation in order; :meth:`result`)."""

    def __init__(self) -> None:
        self.rounds = 0
        self.rounds_by_type: dict[str, int] = {}
        self.txn: set[bool] = set()
        #: input key -> offset -> value, from rounds' reads and final reads of inputs
        self.inputs: dict[str, dict[int, Any]] = {}
        #: input key -> highest offset an ok round committed (exclusive), and the round
        self.committed: dict[str, tuple[int, int]] = {}
        #: input value -> (output key, offset, op) of an acknowledged output
        self.acked: dict[Any, tuple[str, Any, int]] = {}
        #: input value -> {(output key, offset)} the output final reads returned
        self.outputs: dict[Any, set[tuple[str, Any]]] = {}
        self.out_attempted: set[str] = set()
        self.out_complete: set[str] = set()
        #: input key -> the record lists of final reads of it made before any
        #: round polled it (a history without rounds never indexes them)
        self.later: dict[str, list[Any]] = {}

    def feed(self, op: Op) -> None:
        f = op.f
        if op.process == "nemesis" or op.type == "invoke":
            if f == "poll" and op.extra.get("output") and op.extra.get("key") is not None:
                self.out_attempted.add(str(op.extra["key"]))
            return
        if f == "ctp":
            self._round(op)
        elif f == "poll" and op.extra.get("final"):
            self._final(op)

    def _round(self, op: Op) -> None:
        self.rounds += 1
        self.rounds_by_type[op.type] = self.rounds_by_type.get(op.type, 0) + 1
        self.txn.add(bool(op.extra.get("txn")))
        if op.type == "fail":
            return
        for k, pairs in _polls(op.value):
            known = self.inputs.get(k)
            if known is None:
                known = self.inputs[k] = {}
                _record(known, self.later.pop(k, ()))
            for o, v in pairs:
                if isinstance(o, int):
                    known[o] = v
            if op.type == "ok" and not op.extra.get("commit-error") and pairs and isinstance(pairs[-1][0], int):
                c = pairs[-1][0] + 1
                if c > self.committed.get(k, (-1, 0))[0]:
                    self.committed[k] = (c, op.index)
        if op.type == "ok":
            for k, off, v in _sends(op.value):
                self.acked.setdefault(v, (k, off, op.index))

    def _final(self, op: Op) -> None:
        if not op.extra.get("output"):
            if op.type == "ok":
                self._final_input(op.value)
            return
        for k, pairs in _polls(op.value):
            self.out_attempted.add(k)
            if op.type == "ok":
                self.out_complete.add(k)
            for o, v in pairs:
                self.outputs.setdefault(v, set()).add((k, o))

    def _final_input(self, value: Any) -> None:
        """A final read of inputs: what it read fills the offsets no round
        read (a round's value wins, the first final read's otherwise: so the
        order of rounds and final reads does not matter, and a final read of
        a key no round has polled yet waits in ``later``)."""
        if not isinstance(value, list):
            return
        for mop in value:
            if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "poll" and isinstance(mop[1], dict):
                for k, pairs in mop[1].items():
                    k = str(k)
                    known = self.inputs.get(k)
                    if known is None:
                        self.later.setdefault(k, []).append(pairs)
                    else:
                        _record(known, [pairs])

    # ------------------------------------------------------------ families
    def exactly_once(self) -> bool:
        """Every round was a transaction of outputs and offsets."""
        return self.txn == {True}

    def duplicates(self) -> list[dict[str, Any]]:
        """``duplicate-processing``: an input value at two or more output positions."""
        return [{"value": v, "count": len(at), "outputs": sorted([list(x) for x in at], key=repr)}
                for v, at in self.outputs.items() if len(at) > 1]

    def lost(self) -> tuple[list[dict[str, Any]], int]:
        """``lost-processing``: committed-past or acknowledged inputs without
        an output. Returns (anomalies, candidates left unjudged because an
        output key's final read did not complete)."""
        judged = bool(self.out_complete) and self.out_attempted <= self.out_complete
        found: list[dict[str, Any]] = []
        seen: set[Any] = set()
        unjudged = 0
        for k, (c, idx) in sorted(self.committed.items()):
            for o, v in sorted(self.inputs.get(k, {}).items()):
                if o >= c or v in self.outputs or v in seen:
                    continue
                seen.add(v)
                if judged:
                    found.append({"key": k, "offset": o, "value": v, "why": "committed", "committed": c,
                                  "op": idx})
                else:
                    unjudged += 1
        for v, (k, off, idx) in self.acked.items():
            if v in self.outputs or v in seen:
                continue
            seen.add(v)
            if judged:
                found.append({"value": v, "why": "acknowledged", "output": [k, off], "op": idx})
            else:
                unjudged += 1
        return found, unjudged

    def result(self) -> dict[str, Any] | None:
        """The checker's answer, or None when the history has no round."""
        if not self.rounds:
            return None
        dups = self.duplicates()
        lost, unjudged = self.lost()
        eos = self.exactly_once()
        anomalies: dict[str, list] = {}
        counts: dict[str, int] = {}
        for name, found in ((DUPLICATE, dups), (LOST, lost)):
            if found:
                anomalies[name] = found[:EXAMPLES]
                counts[name] = len(found)
        allowed = [] if eos else [DUPLICATE]
        bad = sorted(t for t in anomalies if t not in allowed)
        valid: Any = False if bad else (UNKNOWN if unjudged else True)
        processed = sum(1 for v in self.outputs)
        return {
            "valid": valid,
            "mode": "exactly-once" if eos else "at-least-once",
            "rounds": self.rounds,
            "rounds_by_type": self.rounds_by_type,
            "committed": {k: c for k, (c, _) in sorted(self.committed.items())},
            "inputs_processed": processed,
            "anomaly_types": sorted(anomalies),
            "bad_anomaly_types": bad,
            "allowed": allowed,
            "counts": counts,
            "anomalies": anomalies,
            "unjudged": unjudged,
            "output_keys_unread": sorted(self.out_attempted - self.out_complete),
        }


def check_processing(ops: Iterable[Op]) -> dict[str, Any] | None:
    """:class:`Processing` over a list of operations."""
    p = Processing()
    for op in ops:
        p.feed(op)
    return p.result()
