"""What both wire modules build on: the decoded request, the pending answer
that collects the core's replies, the two refusals, and the field checks
every request translator applies.

:mod:`.wire` (the core APIs, and the registry of every API) and
:mod:`.wire_groups` (the consumer-group APIs) both import this module and
neither imports the other's helpers, so the arrows run one way:
``wire -> wire_groups -> wire_base`` and ``wire -> wire_base``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from kafka.protocol.api_header import ResponseHeader

from reference_impl.core import messages as m
from reference_impl.core.groups import messages as gm

#: Kafka's REQUEST_TIMED_OUT error code
REQUEST_TIMED_OUT = 7


class ProtocolError(Exception):
    """The frame cannot be answered: Kafka closes the connection."""


class UnsupportedVersion(Exception):
    def __init__(self, api_key: int, version: int, correlation_id: int) -> None:
        super().__init__(f"api {api_key} version {version} not supported")
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id


@dataclass(slots=True)
class Decoded:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any


def encode_response(api_key: int, version: int, correlation_id: int, body: Any) -> bytes:
    """A framed response: size, header (v0, or v1 for flexible versions except
    ApiVersions, whose header is always v0), body. Whether a version is
    flexible is the body's own class's answer (kafka-python's schema, or the
    hand-coded UnregisterBroker body)."""
    flexible = type(body).flexible_version_q(version) and api_key != 18
    hdr = ResponseHeader(correlation_id=correlation_id).encode(flexible=flexible)
    payload = body.encode(version=version)
    return struct.pack(">i", len(hdr) + len(payload)) + hdr + payload


@dataclass
class Pending:
    """One Kafka request split into core requests ``parts`` (index, message).

    ``results`` fills as replies arrive (or immediately, for parts the runtime
    rejects itself, such as a corrupt batch). ``expects_response`` is False for
    acks=0 produces.
    """

    decoded: Decoded
    parts: list[tuple[int, Any]] = field(default_factory=list)
    results: dict[int, Any] = field(default_factory=dict)
    total: int = 0
    build: Callable[["Pending"], Any] | None = None
    expects_response: bool = True
    #: filled by the runtime for Metadata/Produce: the local broker's endpoints
    extra: dict[str, Any] = field(default_factory=dict)

    #: runtime clock (monotonic seconds) when the request arrived
    arrived: float = 0.0

    @property
    def done(self) -> bool:
        return len(self.results) >= self.total

    def expire(self) -> int:
        """Answer every part the core has not answered with REQUEST_TIMED_OUT
        (Kafka's purgatory always completes); returns how many parts that was."""
        n = 0
        for i, msg in self.parts:
            if i not in self.results:
                r = timed_out(msg)
                if r is None:
                    continue
                self.results[i] = r
                n += 1
        return n

    def encode(self) -> bytes:
        assert self.build is not None
        d = self.decoded
        return encode_response(d.api_key, d.api_version, d.correlation_id, self.build(self))


def timed_out(msg: Any) -> Any:
    """The core's response to ``msg`` carrying REQUEST_TIMED_OUT, or None
    when the API has no way to say so (Metadata)."""
    if isinstance(msg, m.ProduceRequest):
        return m.ProduceResponse(msg.ref, msg.tp, REQUEST_TIMED_OUT)
    if isinstance(msg, m.ClientFetchRequest):
        return m.ClientFetchResponse(msg.ref, tuple(m.FetchPartitionResponse(p.tp, REQUEST_TIMED_OUT) for p in msg.partitions))
    if isinstance(msg, m.ListOffsetsRequest):
        return m.ListOffsetsResponse(msg.ref, msg.tp, REQUEST_TIMED_OUT)
    if isinstance(msg, m.OffsetForLeaderEpochRequest):
        return m.OffsetForLeaderEpochResponse(msg.ref, msg.tp, REQUEST_TIMED_OUT)
    if isinstance(msg, m.InitProducerIdRequest):
        return m.InitProducerIdResponse(msg.ref, REQUEST_TIMED_OUT)
    if isinstance(msg, m.CreateTopicsRequest):
        return m.CreateTopicsResponse(msg.ref, tuple(m.CreateTopicResult(t.name, REQUEST_TIMED_OUT) for t in msg.topics))
    if isinstance(msg, m.IncrementalAlterConfigsRequest):
        return m.IncrementalAlterConfigsResponse(msg.ref, tuple(
            m.AlterConfigsResult(r.resource_type, r.name, REQUEST_TIMED_OUT) for r in msg.resources))
    if isinstance(msg, m.AlterPartitionReassignmentsRequest):
        return m.AlterPartitionReassignmentsResponse(msg.ref, tuple(
            m.ReassignmentResult(r.tp, REQUEST_TIMED_OUT) for r in msg.partitions))
    if isinstance(msg, m.ListPartitionReassignmentsRequest):
        return m.ListPartitionReassignmentsResponse(msg.ref, REQUEST_TIMED_OUT)
    if isinstance(msg, m.UnregisterBrokerRequest):
        return m.UnregisterBrokerResponse(msg.ref, REQUEST_TIMED_OUT)
    # a group request (None: not one either)
    return gm.error_response(msg, REQUEST_TIMED_OUT)


# Field checks every request translator applies (in :mod:`.wire` and
# :mod:`.wire_groups`): a decoded field the core cannot take is the client's
# malformed request (ProtocolError), never a crash of the translator.


def require_name(x: Any) -> str:
    """A topic name as the core may see it (Kafka: legal names are non-empty)."""
    if not isinstance(x, str) or not x:
        raise ProtocolError("missing topic name")
    return x


def require_array(xs: Any) -> list[Any]:
    """A request's array as a list; null (-1 on the wire) where the core
    needs one is malformed."""
    if xs is None:
        raise ProtocolError("null array")
    return list(xs)
