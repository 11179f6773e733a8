"""Which anomaly types a verdict allows: Jepsen's reading and kraftwerk's.

A queue history can be judged two ways, and every verdict names the one it
used (``reading`` in the queue checker's entry):

* ``jepsen`` — exactly ``jepsen.tests.kafka/allowed-error-types``
  (jepsen-io/jepsen, ``jepsen/src/jepsen/tests/kafka.clj``, lines 2433-2463
  at c4c7473, December 2025): ``int-send-skip``, the G0 family and
  ``PL-1-cycle-exists`` / ``strong-PL-1-cycle-exists`` always; ``poll-skip``
  and ``nonmonotonic-poll`` when ``:sub-via`` includes ``:subscribe``; the
  G1c family and ``PL-2-cycle-exists`` / ``strong-PL-2-cycle-exists`` when
  ``:ww-deps`` is set, which it is not unless the test sets it. ``:txn?``
  plays no part in the rule (it only shapes the generator). Nothing else is
  allowed: a finding kraftwerk names more finely (``lost-write-acks1``,
  ``duplicate-nonidempotent``, ``unverified-unseen``) is what Jepsen calls
  ``lost-write``, ``duplicate``, ``unseen``, and invalidates. This is the
  default for a Jepsen EDN history, and ``kraftwerk check --jepsen``.
* ``kraftwerk`` — Jepsen's set with ww dependencies on unless
  ``--no-ww-deps`` (so G1c is allowed: looser than Jepsen's default), plus
  what kraftwerk's promises per acks level allow (acks=0 losses always,
  acks=1 losses unless ``strict_acks1``), a non-idempotent producer's
  retried duplicate unless ``strict_duplicates``; a finding in a key whose
  final read never completed is ``unverified-*`` and makes the verdict
  unknown, not invalid. The default for kraftwerk's own histories.
* ``kraftwerk-strict-cycles`` — kraftwerk's reading, but a G0/G1c cycle
  (or its cycle-exists fallback) counts unless the operations were
  transactions: without them an operation sends one record, so such a cycle
  can only come from offsets that contradict process or real-time order.

docs/architecture.md ("Readings") has the per-anomaly table.
"""

from __future__ import annotations

from typing import Any, Final, Iterable

JEPSEN, KRAFTWERK, KRAFTWERK_STRICT = "jepsen", "kraftwerk", "kraftwerk-strict-cycles"
READINGS: Final = (JEPSEN, KRAFTWERK, KRAFTWERK_STRICT)

G0_FAMILY: Final = ("G0", "G0-process", "G0-realtime")
G1C_FAMILY: Final = ("G1c", "G1c-process", "G1c-realtime")
PL1_EXISTS: Final = ("PL-1-cycle-exists", "strong-PL-1-cycle-exists")
PL2_EXISTS: Final = ("PL-2-cycle-exists", "strong-PL-2-cycle-exists")
SUBSCRIBE_ALLOWED: Final = ("poll-skip", "nonmonotonic-poll")


def jepsen_allowed(sub_via: Iterable[str], ww_deps: bool) -> frozenset[str]:
    """``allowed-error-types`` of a Jepsen test with these options."""
    a = {"int-send-skip", *G0_FAMILY, *PL1_EXISTS}
    if "subscribe" in set(sub_via):
        a |= set(SUBSCRIBE_ALLOWED)
    if ww_deps:
        a |= set(G1C_FAMILY + PL2_EXISTS)
    return frozenset(a)


def declared_options(ops: Any) -> dict[str, Any]:
    """What a Jepsen history says of its own test's options: the
    subscription methods its ``:assign`` / ``:subscribe`` operations used
    (Jepsen's generator draws them from ``:sub-via``), and whether it holds
    ``:txn`` operations. Empty when ``ops`` is not a list of operations (a
    scanned JSONL history: its options come from test.json)."""
    if not isinstance(ops, list):
        return {}
    fs = {str(getattr(op, "f", "")) for op in ops}
    out: dict[str, Any] = {}
    via = tuple(v for v in ("assign", "subscribe") if v in fs)
    if via:
        out["sub_via"] = via
    if "txn" in fs:
        out["txn"] = True
    return out
