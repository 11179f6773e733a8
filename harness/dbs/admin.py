"""Admin requests for the membership faults on real runtimes.

AlterPartitionReassignments (KIP-455), for ``reassign`` and ``decommission``
on every real runtime (Kafka's controller and the reference controller
answer the same request), through kafka-python's KafkaAdminClient
(confluent-kafka 2.16's AdminClient has no call for it): the request goes to
the broker Metadata names as controller, which forwards it to the active
controller. UnregisterBroker (KIP-631), for ``decommission``, which no
Python client sends: :func:`unregister_broker` frames it itself."""

from __future__ import annotations

import socket
import struct

from reference_impl.server.launcher import recv_exact


class ReassignmentRefused(RuntimeError):
    """The controller refused the partition's reassignment (its error's name)."""


def alter_partition_reassignment(bootstrap: str, key: str, broker_ids: list[int], timeout_ms: int = 10_000) -> None:
    """Ask the controller to move ``key`` (``<topic>-<partition>``) to exactly
    ``broker_ids``; returns once the controller has accepted (the move itself
    goes on: new replicas catch up, join the ISR, then the others leave)."""
    import kafka  # late: kafka-python (0.25 s), which only the membership faults use

    topic, _, part = key.rpartition("-")
    tp = kafka.TopicPartition(topic, int(part))
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    try:
        err = admin.alter_partition_reassignments({tp: list(broker_ids)}, timeout_ms=timeout_ms).get(tp)
    finally:
        admin.close()
    if err is not None:
        raise ReassignmentRefused(f"{key}: {getattr(err, '__name__', err)}")


class UnregisterRefused(RuntimeError):
    """The controller refused the UnregisterBroker (its error code and message)."""


def unregister_broker(bootstrap: str, broker_id: int, timeout_s: float = 10.0) -> None:
    """UnregisterBroker (KIP-631, api key 64 v0) through the first broker of
    ``bootstrap`` that answers, which forwards it to the active controller.
    Neither kafka-python nor confluent-kafka sends it, so the frame is made
    with the reference wire layer's coding of its two small bodies."""
    from reference_impl.server.wire import (  # late: kafka-python's protocol (0.3 s), for decommission only
        UnregisterBrokerRequest, UnregisterBrokerResponse)

    client = b"kraftwerk"
    header = struct.pack(">hhih", 64, 0, 1, len(client)) + client + b"\x00"
    frame = header + UnregisterBrokerRequest.encode_body(broker_id)
    last: Exception | None = None
    for addr in bootstrap.split(","):
        host, _, port = addr.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
                s.sendall(struct.pack(">i", len(frame)) + frame)
                size = struct.unpack(">i", recv_exact(s, 4))[0]
                data = recv_exact(s, size)
        except OSError as e:
            last = e
            continue
        # response header v1: correlation id, tagged fields (none)
        resp = UnregisterBrokerResponse.decode(data[5:])
        if resp.error_code != 0:
            raise UnregisterRefused(f"broker {broker_id}: error {resp.error_code} {resp.error_message or ''}".strip())
        return
    raise UnregisterRefused(f"no broker of {bootstrap} answered: {last}")

