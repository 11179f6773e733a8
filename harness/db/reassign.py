"""AlterPartitionReassignments (KIP-455) from a real admin client, for the
``reassign`` fault on every real runtime: Kafka's controller and the
reference controller answer the same request. kafka-python's
KafkaAdminClient speaks it (confluent-kafka 2.16's AdminClient has no call
for it); the request goes to the broker Metadata names as controller, which
forwards it to the active controller."""

from __future__ import annotations


class ReassignmentRefused(RuntimeError):
    """The controller refused the partition's reassignment (its error's name)."""


def alter_partition_reassignment(bootstrap: str, key: str, broker_ids: list[int], timeout_ms: int = 10_000) -> None:
    """Ask the controller to move ``key`` (``<topic>-<partition>``) to exactly
    ``broker_ids``; returns once the controller has accepted (the move itself
    goes on: new replicas catch up, join the ISR, then the others leave)."""
    from kafka import KafkaAdminClient
    from kafka.structs import TopicPartition

    topic, _, part = key.rpartition("-")
    tp = TopicPartition(topic, int(part))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        err = admin.alter_partition_reassignments({tp: list(broker_ids)}, timeout_ms=timeout_ms).get(tp)
    finally:
        admin.close()
    if err is not None:
        raise ReassignmentRefused(f"{key}: {getattr(err, '__name__', err)}")
