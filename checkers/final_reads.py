"""Which keys did a final read cover?

After the nemesis heals, every key is read from offset 0 by a fresh consumer
(a poll with ``final: true``). Only a final read that completed ``ok`` and
returned the key (even with no records) is a full view of that key's log:
then an acknowledged record it does not contain is gone. A key whose final
read failed (``info``/``fail``: the partition had no leader until the
deadline) or that no final read reached while other keys were read is
*unverified*: a record missing there may simply have been unreadable, so
absence is no evidence of loss (seed 003: only a committed record below the
high watermark is promised to every later reader).

The rule is shared by every run's checking — ``checkers.check.check_history``
uses it for real-cluster and simulated runs alike — so the answer never
depends on which harness produced the history. Both final-read formats are
understood: the real harness's one-key reads (``extra.key``, the key's dict
entry, ``info`` when incomplete) and the simulator's multi-partition reads
(``ok`` with the partitions it returned).
"""

from __future__ import annotations

from typing import Any, Iterable

from checkers.history.op import Op

RULE = ("a key's absent acknowledged records count as lost only after a final read "
        "completed ok on that key; keys without one are unverified")


def _poll_keys(value: Any) -> list[str]:
    """The keys a poll's completion value returned (``[["poll", {k: [...]}]]``)."""
    out: list[str] = []
    if not isinstance(value, list):
        return out
    for mop in value:
        if isinstance(mop, list) and len(mop) >= 2 and mop[0] == "poll" and isinstance(mop[1], dict):
            out.extend(str(k) for k in mop[1])
    return out


class FinalReads:
    """The final reads seen so far, fed every operation in history order;
    :meth:`result` is :func:`final_read_coverage`'s answer."""

    def __init__(self) -> None:
        self.attempted: set[str] = set()
        self.complete: set[str] = set()
        self.any_final = False
        #: read_committed final reads that ended below the HW (``lso_stuck``)
        self.stuck: list[dict[str, Any]] = []

    def feed(self, op: Op) -> None:
        if op.f != "poll":
            return
        extra = op.extra
        if not extra.get("final") or extra.get("output"):
            return  # an output read of consume-transform-produce: checkers.queue.processing
        self.any_final = True
        k = extra.get("key")
        if k is not None:
            self.attempted.add(str(k))
        if op.type == "invoke":
            return
        returned = _poll_keys(op.value)
        self.attempted.update(returned)
        if op.type == "ok":
            self.complete.update(returned)
            if isinstance(extra.get("lso_stuck"), dict):
                self.stuck.append({"key": k if k is not None else (returned or [None])[0], "op": op.index,
                                   **extra["lso_stuck"]})

    def result(self, keys: Iterable[str] | None = None, partial: bool = False) -> dict[str, Any] | None:
        attempted, complete = self.attempted, self.complete
        if not self.any_final and not partial:
            return None
        wanted = set(attempted)
        if keys is not None:
            wanted.update(str(k) for k in keys)
        failed = sorted((attempted - complete) & wanted)
        unread = sorted(wanted - attempted - complete)
        incomplete = sorted(set(failed) | set(unread))
        return {
            "keys": len(wanted),
            "complete": len(wanted & complete),
            "incomplete_keys": incomplete,
            "failed_keys": failed,
            "unread_keys": unread,
            "lso_stuck": list(self.stuck),
            "rule": RULE,
        }


def final_read_coverage(ops: Iterable[Op], keys: Iterable[str] | None = None,
                        partial: bool = False) -> dict[str, Any] | None:
    """Coverage of the final reads, or None when the history has none (a
    Jepsen history): then no key is judged unverified. A history known to be
    partial (its recorder was killed, ``partial``) was meant to end in final
    reads, so every key none covered is unverified, even with none at all.

    ``keys``: every key the run used (test.json's keys and/or the keys the
    history touched); a key among them that no final read covered is
    unverified. Returns ``keys`` (how many), ``complete`` (how many were
    covered), ``incomplete_keys`` (sorted; failed or never attempted),
    ``failed_keys`` (a final read was attempted but did not complete) and
    ``unread_keys`` (no final read at all)."""
    fr = FinalReads()
    for op in ops:
        fr.feed(op)
    return fr.result(keys, partial)
