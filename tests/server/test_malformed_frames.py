"""Malformed client frames never crash the wire layer: every input either
decodes, or raises one of the two errors the runtime turns into Kafka's
answer (error 35 for ApiVersions) or a closed connection."""

from __future__ import annotations

import struct

from helpers import v2_batch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import ProduceRequest

from reference_impl.server import wire


def _valid_frames() -> list[bytes]:
    P = ProduceRequest[9]
    F = FetchRequest[12]
    reqs = [
        ApiVersionsRequest[3](client_software_name="a", client_software_version="1"),
        MetadataRequest[12](topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False),
        P(transactional_id=None, acks=-1, timeout_ms=100, topic_data=[P.TopicProduceData(name="t", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=v2_batch([b"v" * 20, b"w"]))])]),
        F(replica_id=-1, max_wait_ms=10, min_bytes=1, max_bytes=100, isolation_level=0, session_id=0, session_epoch=-1,
          topics=[F.FetchTopic(topic="t", partitions=[F.FetchTopic.FetchPartition(partition=0, current_leader_epoch=1,
                  fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=100)])],
          forgotten_topics_data=[], rack_id=""),
    ]
    out = []
    for r in reqs:
        r.with_header(correlation_id=5, client_id="fuzz")
        out.append(bytes(r.encode(header=True)))
    return out


VALID = _valid_frames()


def _exercise(frame: bytes) -> None:
    try:
        d = wire.decode_request(frame)
    except wire.UnsupportedVersion as e:
        wire.unsupported_version_response(e)
        return
    except wire.ProtocolError:
        return
    try:
        p = wire.translate(d, lambda i: i)
    except wire.ProtocolError:
        return
    assert p.total >= len(p.parts)


@st.composite
def mutated(draw):
    base = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "cut", "insert", "int"]))
        if not base:
            break
        i = draw(st.integers(0, len(base) - 1))
        if op == "flip":
            base[i] ^= draw(st.integers(1, 255))
        elif op == "cut":
            del base[i:]
        elif op == "insert":
            base[i:i] = draw(st.binary(min_size=1, max_size=8))
        else:  # overwrite with an extreme int32 (lengths, counts)
            base[i : i + 4] = struct.pack(">i", draw(st.sampled_from([-1, -2**31, 2**31 - 1, 0x7FFF, 1 << 20])))
    return bytes(base)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutated_valid_frames_decode_or_fail_cleanly(frame):
    _exercise(frame)


@settings(max_examples=300, deadline=None)
@given(st.integers(-5, 100), st.integers(-3, 20), st.binary(max_size=120))
def test_random_headers_and_bodies_decode_or_fail_cleanly(api_key, version, body):
    _exercise(struct.pack(">hhi", api_key, version, 1) + body)
