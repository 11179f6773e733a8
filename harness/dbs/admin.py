"""Admin requests for the membership faults on real runtimes.

AlterPartitionReassignments (KIP-455), for ``reassign`` and ``decommission``
on every real runtime (Kafka's controller and the reference controller
answer the same request), framed with kafka-python's protocol classes
(confluent-kafka 2.16's AdminClient has no call for it) and sent to each
broker in turn, which forwards it to the active controller (KafkaAdminClient
would send it to the one broker Metadata names as controller, a random one
under KRaft, and fail with it when that broker is down or cut off). UnregisterBroker (KIP-631), for ``decommission``, which no
Python client sends: :func:`unregister_broker` frames it itself."""

from __future__ import annotations

import socket
import struct

from reference_impl.server.launcher import recv_exact


class ReassignmentRefused(RuntimeError):
    """The controller refused the partition's reassignment (its error's name)."""


#: the controller's answers after which the next broker is asked (the broker
#: forwarded to a controller that lost its leadership, or could not reach one)
RETRIED = {41: "NOT_CONTROLLER", 7: "REQUEST_TIMED_OUT"}


def alter_partition_reassignment(bootstrap: str, key: str, broker_ids: list[int], timeout_ms: int = 3_000) -> None:
    """Ask the controller to move ``key`` (``<topic>-<partition>``) to exactly
    ``broker_ids``; returns once the controller has accepted (the move itself
    goes on: new replicas catch up, join the ISR, then the others leave).

    Through each broker of ``bootstrap`` in turn, as the simulator's admin
    endpoint tries the next broker on each attempt: a broker that is down
    refuses the connection, one cut from every controller times out (its
    forward, or the connection), and the next one is asked; so one dead or
    isolated broker neither drops the fault nor holds the nemesis for a
    whole request timeout per fault."""
    from kafka.protocol import admin as kadmin, parser  # late: kafka-python (0.25 s), for the membership faults only

    topic, _, part = key.rpartition("-")
    R = kadmin.AlterPartitionReassignmentsRequest[0]
    T = R.ReassignableTopic
    req = R(timeout_ms=timeout_ms, topics=[T(name=topic, partitions=[
        T.ReassignablePartition(partition_index=int(part), replicas=list(broker_ids))])])
    tried: list[str] = []
    for addr in bootstrap.split(","):
        host, _, port = addr.rpartition(":")
        proto = parser.KafkaProtocol(client_id="kraftwerk")
        proto.send_request(req)
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_ms / 1000 + 1) as s:
                s.sendall(bytes(proto.send_bytes()))
                got: list = []
                while not got:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("connection closed")
                    got = proto.receive_bytes(data)
        except OSError as e:
            tried.append(f"{addr}: {type(e).__name__}")
            continue
        resp = got[0][1]
        if not isinstance(resp, kadmin.AlterPartitionReassignmentsResponse):
            raise ReassignmentRefused(f"{key}: {addr} answered {type(resp).__name__}")
        codes = [resp.error_code] + [pr.error_code for t in resp.responses for pr in t.partitions]
        bad = next((c for c in codes if c), 0)
        if bad in RETRIED:
            tried.append(f"{addr}: {RETRIED[bad]}")
            continue
        if bad:
            raise ReassignmentRefused(f"{key}: error {bad}")
        return
    raise ReassignmentRefused(f"{key}: no broker got it to the controller ({'; '.join(tried)})")


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

