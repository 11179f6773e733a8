"""A pinned replica placement: each partition's replica list, by broker
name, as the run's topics are created with it.

Kafka places a new topic's replicas itself, starting its round-robin at a
random broker (``StripedReplicaPlacer``), and the model places them from
n1; so a replay of a schedule whose faults name partitions' replicas (a
reassignment's swap, a decommission's moves, a leader target) meets
another placement on every Kafka run and re-plans them. A run records the
placement its topics got (``placement`` in test.json); a replay creates
its topics with that explicit assignment (CreateTopics' replica
assignment), on Kafka, the reference broker and the simulator alike, so
the recorded moves fit again.

A placement is ``{"t0-0": ["n1", "n2", "n3"], "t0-1": [...]}``: every
partition of every input topic, each list the replication factor's length,
of distinct brokers of the cluster, the first the preferred leader.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

Placement = dict[str, list[str]]


def placement_error(placement: Mapping[str, Sequence[str]], keys: Sequence[str], brokers: Sequence[str],
                    rf: int) -> str | None:
    """Why ``placement`` cannot be the test's (None if it can): a partition
    missing or unknown, a list of another length than ``rf``, a broker
    named twice or not of the cluster. One line."""
    extra = sorted(set(placement) - set(keys))
    if extra:
        return f"placement names {', '.join(extra)}, not a partition of this test (its partitions: {', '.join(keys)})"
    missing = [k for k in keys if k not in placement]
    if missing:
        return f"placement gives no replicas for {', '.join(missing)}: pin every partition or none"
    for k in keys:
        reps = list(placement[k])
        if len(reps) != rf:
            return f"placement of {k} lists {len(reps)} replica(s), not --rf {rf}"
        if len(set(reps)) != len(reps):
            return f"placement of {k} names a broker twice: {', '.join(reps)}"
        unknown = [r for r in reps if r not in brokers]
        if unknown:
            return (f"placement of {k} names {', '.join(unknown)}, not a broker of this cluster "
                    f"(it has {', '.join(brokers)}): give the recorded run's --brokers")
    return None


def assignment(placement: Mapping[str, Sequence[str]], topic: str, partitions: int,
               node_ids: Mapping[str, int]) -> list[list[int]]:
    """The topic's replica assignment by broker id, partition 0 first: what
    CreateTopics takes (``NewTopic(replica_assignment=...)``)."""
    return [[node_ids[n] for n in placement[f"{topic}-{p}"]] for p in range(partitions)]


def as_created(replicas: Iterable[tuple[str, Sequence[str]]]) -> Placement:
    """A placement from each partition's replicas as Metadata lists them
    (partitions with none known left out)."""
    return {k: list(r) for k, r in replicas if r}


def differs(pinned: Mapping[str, Sequence[str]] | None, created: Mapping[str, Sequence[str]]) -> list[str]:
    """The partitions whose created replicas are not the pinned ones, each
    as ``key: pinned -> created`` (none without a pin)."""
    if not pinned:
        return []
    return [f"{k}: {','.join(pinned[k])} -> {','.join(created.get(k, [])) or '-'}"
            for k in sorted(pinned) if list(created.get(k, [])) != list(pinned[k])]
