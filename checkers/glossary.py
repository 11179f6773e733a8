"""What each anomaly and invariant violation in a verdict means, in one line.

The checkers name their findings the way Jepsen and Elle do (``lost-write``,
``unseen``, ``G1c-realtime``...) or after the broken rule
(``committed-truncated``); the names are terse and several describe related
things differently. A loss of acks=1 records, for instance, may show up as
``lost-acks1-write`` (durability: absent from the complete final reads),
``lost-write-acks1`` (below the highest index some poll read, never read)
and ``unseen-acks1`` (no ok poll ever returned it): three views of one
event, each with its own definition. The report prints these lines next to
the names so a reader need not look the definitions up.

:func:`describe` covers every name the checkers can produce: the base names
below plus their systematic variants (``-acks1``/``-acks0`` for the weaker
acks levels, ``unverified-`` for absences on keys without a complete final
read, ``-process``/``-realtime`` for cycles that need those orders).
"""

from __future__ import annotations

#: base name -> meaning (the queue checker's per-key definitions are in
#: :mod:`checkers.queue.keycheck`, the cycles in :mod:`checkers.queue.graph`,
#: the invariants in :mod:`checkers.invariants`)
MEANINGS: dict[str, str] = {
    # durability (checkers/durability.py)
    "lost-acked-write": "an acknowledged acks=all record is absent from the complete final reads",
    "lost-acks1-write": "an acknowledged acks=1 record is absent from the complete final reads "
                        "(acks=1 is answered by the leader alone, so a leader change may truncate it)",
    "lost-acks0-write": "an acks=0 record is absent from the complete final reads (acks=0 promises nothing)",
    # per-key queue anomalies (checkers/queue/keycheck.py, after Jepsen's Kafka checker)
    "lost-write": "a committed record below the highest position some poll read was never read by any poll",
    "unseen": "a record whose send succeeded was never returned by any successful poll",
    "duplicate": "one value sits at two or more offsets",
    "duplicate-nonidempotent": "one value at two or more offsets, every send of it by a non-idempotent "
                               "producer (its retry may append twice: at-least-once, as Kafka documents)",
    # consume-transform-produce (checkers/queue/processing.py)
    "duplicate-processing": "an input record's output appears at two or more places in the output topic: "
                            "processed twice (allowed at-least-once, an anomaly under exactly-once)",
    "lost-processing": "an input record the group committed past, or whose output was acknowledged, has no "
                       "output in the complete final reads of the output topic",
    "inconsistent-offsets": "one offset holds two or more different values",
    "G1a": "a successful poll returned a value whose send failed (aborted read)",
    "lost-read": "a record a successful poll returned (so committed: consumers read below the high watermark) "
                 "is absent from its key's complete final read",
    "read-committed-stuck": "a read_committed final read stopped below the high watermark until its deadline: "
                            "the last stable offset never moved past an open or hanging transaction",
    "precommitted-read": "an operation polled a record it sent itself (read-committed consumers never "
                         "see a transaction's own sends)",
    "poll-skip": "a consumer's next poll of a key skipped over records after its previous poll",
    "nonmonotonic-poll": "a consumer's next poll of a key went back to or before its previous poll's records",
    "int-poll-skip": "within one poll, consecutive records of a key skip over others",
    "int-nonmonotonic-poll": "within one poll, a key's records go backwards",
    "nonmonotonic-send": "a producer's successive sends to a key went backwards in the log order",
    "int-send-skip": "within one operation, consecutive sends to a key skip over other records in the log",
    "int-nonmonotonic-send": "within one operation, sends to a key land out of order in the log",
    # dependency cycles (checkers/queue/graph.py, Adya / Elle)
    "G0": "a cycle of write-write dependencies (write cycle)",
    "G1c": "a cycle of write-write and write-read dependencies (circular information flow)",
    "G-single": "a dependency cycle with exactly one read-write anti-dependency (read skew)",
    "G2-item": "a dependency cycle with two or more read-write anti-dependencies (write skew)",
    "PL-1-cycle-exists": "a write-write dependency cycle exists (proven by a strongly connected "
                         "component) but the search for it was cut short",
    "PL-2-cycle-exists": "a write-write/write-read dependency cycle exists (proven by a strongly connected "
                         "component) but the search for it was cut short",
    "strong-PL-1-cycle-exists": "a cycle of write-write, process and real-time order exists (proven by a "
                                "strongly connected component) but the search for it was cut short",
    "strong-PL-2-cycle-exists": "a cycle of write-write, write-read, process and real-time order exists "
                                "(proven by a strongly connected component) but the search for it was cut short",
    # availability after the final heal (checkers/availability)
    "unavailable": "after the final heal a partition took no acks=all write within the run's bound while a "
                   "replica the election rules may elect was running (stuck), or why could not be told",
    "unavailable-by-design": "after the final heal a partition took no acks=all write because no replica "
                             "may lead by the election rules (no ISR, no ELR, unclean election off): "
                             "reported, not a failure unless --liveness strict",
    # linearizability (checkers/linearizable)
    "nonlinearizable": "no order of the operations consistent with real time explains the results",
    # invariant monitor (checkers/invariants.py): rules of the seeds, checked on the nodes' traces
    "append-not-at-leo": "a replica appended a batch somewhere other than its log end offset",
    "committed-truncated": "a replica truncated offsets below the committed high watermark that it held",
    "elr-in-isr": "a replica is in both the ISR and the eligible leader replicas (ELR, KIP-966)",
    "elr-not-replica": "the eligible leader replicas are not all replicas of the partition (KIP-966)",
    "elr-with-isr-at-min": "the ELR is non-empty while the ISR is at or above min.insync.replicas (KIP-966)",
    "epoch-regressed-in-log": "a batch of an older leader epoch was appended after a newer one",
    "hw-above-leo": "a replica's high watermark is above its log end offset",
    "hw-regressed": "a leader's high watermark went backwards",
    "isr-expanded-early": "a follower joined the ISR with its log end offset below the leader's HW or below "
                          "the current leader epoch's start offset",
    "isr-not-subset": "the ISR is not within the maximal ISR, or either is not within the replicas",
    "leader-completeness": "a new partition leader lacks records committed before its election",
    "leader-epoch-regressed": "a replica saw the partition's leader epoch go backwards",
    "leader-not-in-isr": "the partition's leader is not in its ISR (nor, on the leader, its maximal ISR)",
    "log-matching": "below its high watermark a replica holds another epoch at some offset than the committed log",
    "metadata-divergence": "two nodes replayed different (leader, leader epoch, ISR, ELR, replicas) for the "
                           "same partition epoch",
    "node-crash": "the reference implementation raised an exception on a node",
    "partition-epoch-regressed": "a replica saw the partition epoch go backwards",
    "raft-hw-regressed": "a KRaft voter's metadata-log high watermark went backwards",
    "two-raft-leaders": "two KRaft controllers led the metadata quorum in the same epoch",
    # the observer of real Kafka (checkers/observed.py)
    "stale-raft-leader": "a KRaft controller kept naming itself leader of an epoch below another voter's leader "
                         "longer than a leader cut from the quorum takes to resign",
    "hw-advanced-under-min-isr": "a partition's high watermark rose while its ISR stayed below "
                                 "min.insync.replicas",
}

_ACKS = {"-acks1": "acks=1", "-acks0": "acks=0"}
_ORDERS = {"-process": "process order", "-realtime": "real-time order"}
UNVERIFIED = "unverified-"


def describe(name: str) -> str | None:
    """One line on what ``name`` means, or None for a name not known here."""
    if name in MEANINGS:
        return MEANINGS[name]
    if name.startswith(UNVERIFIED):
        base = describe(name[len(UNVERIFIED):])
        if base is None:
            return None
        return base + "; its key had no complete final read, so the record may still be there (unknown, not lost)"
    for sfx, level in _ACKS.items():
        if name.endswith(sfx) and name[: -len(sfx)] in MEANINGS:
            return f"{MEANINGS[name[: -len(sfx)]]} (an {level} send: its acknowledgement promises less than acks=all's)"
    for sfx, order in _ORDERS.items():
        if name.endswith(sfx) and name[: -len(sfx)] in MEANINGS:
            return f"{MEANINGS[name[: -len(sfx)]]}, which needs an edge of {order} to close"
    return None
